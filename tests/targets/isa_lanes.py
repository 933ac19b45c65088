"""Lane layouts of the matrix instructions, transcribed by hand from the vendors' documents.

Nothing here is computed from opus' coordinate functions (``src/opus/targets/nv_mma.py``,
``amd_mfma.py``): each table is the document's own formula, written in the document's own
direction and terms, so a slip in opus' code disagrees with it.

* NVIDIA (PTX ISA, "Matrix Fragments for mma.m16n8k*"): the document gives, for fragment element
  ``a_i``/``b_i``/``c_i`` of lane ``%laneid``, its ``row`` and ``col`` in terms of
  ``groupID = %laneid >> 2`` and ``threadID_in_group = %laneid % 4``, piecewise in ``i``. The
  element index ``i`` is opus' register-vector index (the document lists the elements "low to
  high" in the packed .b32 registers; opus packs element p*r + j into register r at bits
  8*size*j).
* AMD (AMD Matrix Instruction Calculator, ``--detail-instruction``, "Matrix element to register
  mapping with no modifiers"; the same layouts are drawn in the CDNA3/CDNA4 ISA guides, chapter 7
  "Matrix Arithmetic Instructions"): the document gives, for matrix entry ``A[i][k]``,
  ``B[k][j]`` or ``D[i][j]``, the VGPR (offset from the operand's first register), the bits in it,
  and the lane. The register element index of opus' operand vector is
  ``(32 * GPR + lo_bit) / bits`` (the builtin's ext-vector operand is the VGPRs in order, low
  bits first; fp6 fields run on across register boundaries).

Each instruction (keyed by ``MatrixAtom.isa``, the spelling the compiler prints) has one table per
operand (A, B, C/D) in ``ISA_TABLES``; a new row of a target's atom table needs its entry here
(tests/targets/test_isa_lanes.py fails naming the missing one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["LaneTable", "ISA_TABLES", "tables_for", "MissingIsaTable"]

PTX = "PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution), section 9.7.14.5"
CALC = ("AMD Matrix Instruction Calculator (github.com/ROCm/amd_matrix_instruction_calculator), "
        "--detail-instruction, 'Matrix element to register mapping with no modifiers'")
CDNA3 = "AMD Instinct MI300 CDNA3 ISA Reference Guide, chapter 7 'Matrix Arithmetic Instructions'"
CDNA4 = "AMD Instinct CDNA4 ISA Reference Guide, chapter 7 'Matrix Arithmetic Instructions'"
BLOG = ("AMD ROCm blog 'Matrix Core Programming on AMD CDNA3 and CDNA4 architecture' (2025), "
        "section 5")


@dataclass(frozen=True)
class LaneTable:
    """One operand of one instruction as the document lays it out.

    ``fragment(lane, i) -> (row, col)`` (PTX's direction) or ``register(row, col) ->
    (gpr, lo_bit, lane)`` (the AMD calculator's direction): exactly one is given. ``spots`` are
    literal entries read off the document's figure or worked example, ((row, col), (lane, i)),
    a check on the transcription of the formula."""
    instruction: str
    operand: str      # 'A' (rows x k), 'B' (k x cols) or 'C' (the accumulator C/D)
    rows: int
    cols: int
    lanes: int
    bits: int         # size of one element in bits
    source: str
    fragment: Callable = None
    register: Callable = None
    spots: tuple = ()

    @property
    def per_lane(self):
        return self.rows * self.cols // self.lanes

    def placement(self) -> dict:
        """{(row, col): (lane, register element)} over the whole operand; a transcription that
        does not give each (row, col) exactly one (lane, element) is refused here."""
        out = {}
        if self.fragment is not None:
            for lane in range(self.lanes):
                for i in range(self.per_lane):
                    out.setdefault(self.fragment(lane, i), []).append((lane, i))
        else:
            for r in range(self.rows):
                for c in range(self.cols):
                    gpr, lo_bit, lane = self.register(r, c)
                    out.setdefault((r, c), []).append(  # fp6: fields cross registers
                        (lane, (gpr * 32 + lo_bit) // self.bits))
        cells = {(r, c) for r in range(self.rows) for c in range(self.cols)}
        holders = [h for hs in out.values() for h in hs]
        assert set(out) == cells and all(len(h) == 1 for h in out.values()), \
            f"{self}: not one holder per {self.rows}x{self.cols} cell"
        assert len(set(holders)) == len(holders) and all(
            0 <= lane < self.lanes and 0 <= i < self.per_lane for lane, i in holders), \
            f"{self}: a (lane, element) holds two cells or is out of range"
        return {rc: h[0] for rc, h in out.items()}

    def __str__(self):
        return f"{self.instruction} {self.operand}"


class MissingIsaTable(LookupError):
    """An atom of a target's table has no lane table transcribed from its ISA document."""


# == NVIDIA mma.sync ==============================================================================
# groupID = %laneid >> 2, threadID_in_group = %laneid % 4 (every PTX fragment section)

def _gid(lane):
    return lane >> 2


def _tig(lane):
    return lane % 4


def _ptx(instruction, operand, rows, cols, bits, section, fragment, spots):
    return LaneTable(instruction, operand, rows, cols, 32, bits, f"{PTX}.{section}",
                     fragment=fragment, spots=spots)


# -- 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type", .f16/.bf16 -----------
def _m16n8k16_f16_a(lane, i):
    # row = groupID for ai where 0 <= i < 2 || 4 <= i < 6; groupID + 8 Otherwise
    row = _gid(lane) if (0 <= i < 2 or 4 <= i < 6) else _gid(lane) + 8
    # col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4; ... + 8 for ai where i >= 4
    col = (_tig(lane) * 2) + (i & 0x1) if i < 4 else (_tig(lane) * 2) + (i & 0x1) + 8
    return row, col


def _m16n8k16_f16_b(lane, i):
    # row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2; ... + 8 for bi where i >= 2
    row = (_tig(lane) * 2) + (i & 0x1) if i < 2 else (_tig(lane) * 2) + (i & 0x1) + 8
    # col = groupID
    return row, _gid(lane)


def _m16n8_c(lane, i):
    # row = groupID for ci where i < 2; groupID + 8 for ci where i >= 2
    # col = (threadID_in_group * 2) + (i & 0x1) for ci where i = {0,..,3}
    return (_gid(lane) if i < 2 else _gid(lane) + 8), (_tig(lane) * 2) + (i & 0x1)


# Figure "MMA .m16n8k16 fragment layout for matrix A with .f16/.bf16 type": T0 holds a0,a1 at
# row 0 cols 0,1; a2,a3 at row 8; a4,a5 at row 0 cols 8,9; a6,a7 at row 8 cols 8,9; T5 (group 1,
# thread 1) holds a0 at (1, 2). B figure: T0 holds b0,b1 at rows 0,1 and b2,b3 at rows 8,9 of
# col 0; T31 b3 at (15, 7). C/D figure: T0 holds c0,c1 at (0,0),(0,1), c2,c3 at (8,0),(8,1);
# T31 holds c3 at (15, 7).
M16N8K16_F16 = tuple(
    _ptx("mma.m16n8k16 .f16/.bf16", op, r, c, bits, "8", fn, spots) for op, r, c, bits, fn, spots in (
        ("A", 16, 16, 16, _m16n8k16_f16_a,
         (((0, 0), (0, 0)), ((0, 1), (0, 1)), ((8, 0), (0, 2)), ((8, 1), (0, 3)), ((0, 8), (0, 4)),
          ((0, 9), (0, 5)), ((8, 8), (0, 6)), ((8, 9), (0, 7)), ((1, 2), (5, 0)))),
        ("B", 16, 8, 16, _m16n8k16_f16_b,
         (((0, 0), (0, 0)), ((1, 0), (0, 1)), ((8, 0), (0, 2)), ((9, 0), (0, 3)), ((15, 7), (31, 3)))),
        ("C", 16, 8, 32, _m16n8_c,
         (((0, 0), (0, 0)), ((0, 1), (0, 1)), ((8, 0), (0, 2)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
    ))


# -- 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8", .f16/.bf16 -------------------------------------
def _m16n8k8_f16_a(lane, i):
    # row = groupID for a0 and a1; groupID + 8 for a2 and a3
    # col = threadID_in_group * 2 + (i & 0x1) for ai where i = {0,..,3}
    return (_gid(lane) if i < 2 else _gid(lane) + 8), _tig(lane) * 2 + (i & 0x1)


def _m16n8k8_f16_b(lane, i):
    # row = (threadID_in_group * 2) + i for bi where i = {0,1}; col = groupID
    return (_tig(lane) * 2) + i, _gid(lane)


M16N8K8_F16 = tuple(
    _ptx("mma.m16n8k8 .f16/.bf16", op, r, c, bits, "7", fn, spots) for op, r, c, bits, fn, spots in (
        ("A", 16, 8, 16, _m16n8k8_f16_a, (((0, 0), (0, 0)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
        ("B", 8, 8, 16, _m16n8k8_f16_b, (((0, 0), (0, 0)), ((1, 0), (0, 1)), ((7, 7), (31, 1)))),
        ("C", 16, 8, 32, _m16n8_c, (((0, 0), (0, 0)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
    ))


# -- 9.7.14.5.10 "Matrix Fragments for mma.m16n8k32", .u8/.s8/.e4m3/.e5m2 ---------------------------
def _m16n8k32_b8_a(lane, i):
    # row = groupID for ai where 0 <= i < 4 || 8 <= i < 12; groupID + 8 otherwise
    row = _gid(lane) if (0 <= i < 4 or 8 <= i < 12) else _gid(lane) + 8
    # col = (threadID_in_group * 4) + (i & 0x3) for ai where i < 8; ... + 16 for ai where i >= 8
    col = (_tig(lane) * 4) + (i & 0x3) if i < 8 else (_tig(lane) * 4) + (i & 0x3) + 16
    return row, col


def _m16n8k32_b8_b(lane, i):
    # row = (threadID_in_group * 4) + (i & 0x3) for bi where i < 4; ... + 16 for bi where i >= 4
    row = (_tig(lane) * 4) + (i & 0x3) if i < 4 else (_tig(lane) * 4) + (i & 0x3) + 16
    # col = groupID
    return row, _gid(lane)


M16N8K32_B8 = tuple(
    _ptx("mma.m16n8k32 .u8/.s8/.e4m3/.e5m2", op, r, c, bits, "10", fn, spots)
    for op, r, c, bits, fn, spots in (
        ("A", 16, 32, 8, _m16n8k32_b8_a,
         (((0, 3), (0, 3)), ((8, 0), (0, 4)), ((0, 16), (0, 8)), ((8, 19), (0, 15)))),
        ("B", 32, 8, 8, _m16n8k32_b8_b, (((3, 0), (0, 3)), ((16, 0), (0, 4)), ((31, 7), (31, 7)))),
        ("C", 16, 8, 32, _m16n8_c, (((0, 0), (0, 0)), ((15, 7), (31, 3)))),
    ))


# -- 16-bit accumulators: the same C/D formula, two .f16 per .f16x2 register ("Elements (low to
# high) c0, c1, c2, c3" of the .f16 row of each section's accumulator table) ----------------------
def _c16(instruction, section):
    return _ptx(instruction, "C", 16, 8, 16, section, _m16n8_c,
                (((0, 0), (0, 0)), ((0, 1), (0, 1)), ((8, 1), (0, 3)), ((15, 7), (31, 3))))


M16N8K16_F16_F16 = M16N8K16_F16[:2] + (_c16("mma.m16n8k16 .f16 -> .f16", "8"),)
M16N8K8_F16_F16 = M16N8K8_F16[:2] + (_c16("mma.m16n8k8 .f16 -> .f16", "7"),)
M16N8K32_B8_F16 = M16N8K32_B8[:2] + (_c16("mma.m16n8k32 .e4m3/.e5m2 -> .f16", "10"),)


# -- 9.7.14.5.6 "Matrix Fragments for mma.m16n8k4", .tf32 (one .tf32 per .b32 register) ----------
def _m16n8k4_tf32_a(lane, i):
    # row = groupID for a0; groupID + 8 for a1. col = threadID_in_group
    return (_gid(lane) if i == 0 else _gid(lane) + 8), _tig(lane)


def _m16n8k4_tf32_b(lane, i):
    # row = threadID_in_group; col = groupID
    return _tig(lane), _gid(lane)


# Spots hand-evaluated from the section's formulas (g = lane >> 2, t = lane % 4): lane 5 (g 1,
# t 1) holds a0 at (1, 1), a1 at (9, 1); lane 31 a1 at (15, 3); B: lane 31's b0 at (3, 7).
M16N8K4_TF32 = tuple(
    _ptx("mma.m16n8k4 .tf32", op, r, c, bits, "6", fn, spots) for op, r, c, bits, fn, spots in (
        ("A", 16, 4, 32, _m16n8k4_tf32_a,
         (((0, 0), (0, 0)), ((8, 0), (0, 1)), ((1, 1), (5, 0)), ((9, 1), (5, 1)), ((15, 3), (31, 1)))),
        ("B", 4, 8, 32, _m16n8k4_tf32_b, (((0, 0), (0, 0)), ((1, 1), (5, 0)), ((3, 7), (31, 0)))),
        ("C", 16, 8, 32, _m16n8_c, (((0, 0), (0, 0)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
    ))


# -- 9.7.14.5.7 "Matrix Fragments for mma.m16n8k8", .tf32 -----------------------------------------
def _m16n8k8_tf32_a(lane, i):
    # row = groupID for a0 and a2; groupID + 8 for a1 and a3
    # col = threadID_in_group for a0 and a1; threadID_in_group + 4 for a2 and a3
    row = _gid(lane) if i in (0, 2) else _gid(lane) + 8
    col = _tig(lane) if i in (0, 1) else _tig(lane) + 4
    return row, col


def _m16n8k8_tf32_b(lane, i):
    # row = threadID_in_group for b0; threadID_in_group + 4 for b1. col = groupID
    return (_tig(lane) if i == 0 else _tig(lane) + 4), _gid(lane)


# Spots hand-evaluated: lane 0 holds a0..a3 at (0,0), (8,0), (0,4), (8,4); lane 6 (g 1, t 2)
# a2 at (1, 6); lane 31 a3 at (15, 7). B: lane 0 b1 at (4, 0); lane 9 (g 2, t 1) b0 at (1, 2).
M16N8K8_TF32 = tuple(
    _ptx("mma.m16n8k8 .tf32", op, r, c, bits, "7", fn, spots) for op, r, c, bits, fn, spots in (
        ("A", 16, 8, 32, _m16n8k8_tf32_a,
         (((0, 0), (0, 0)), ((8, 0), (0, 1)), ((0, 4), (0, 2)), ((8, 4), (0, 3)), ((1, 6), (6, 2)),
          ((15, 7), (31, 3)))),
        ("B", 8, 8, 32, _m16n8k8_tf32_b,
         (((0, 0), (0, 0)), ((4, 0), (0, 1)), ((1, 2), (9, 0)), ((7, 7), (31, 1)))),
        ("C", 16, 8, 32, _m16n8_c, (((0, 0), (0, 0)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
    ))


# -- 9.7.14.5.9 "Matrix Fragments for mma.m16n8k16 with integer type", .u8/.s8 (4 per .b32) -------
def _m16n8k16_b8_a(lane, i):
    # row = groupID for ai where i < 4; groupID + 8 for ai where i >= 4
    # col = (threadID_in_group * 4) + (i & 0x3) for ai where i = {0,..,7}
    return (_gid(lane) if i < 4 else _gid(lane) + 8), (_tig(lane) * 4) + (i & 0x3)


def _m16n8k16_b8_b(lane, i):
    # row = (threadID_in_group * 4) + i for bi where i = {0,..,3}; col = groupID
    return (_tig(lane) * 4) + i, _gid(lane)


# Spots hand-evaluated: lane 0 holds a0..a3 at (0, 0..3), a4 at (8, 0); lane 5 (g 1, t 1) a2 at
# (1, 6); lane 31 a7 at (15, 15). B: lane 0 b3 at (3, 0); lane 6 (g 1, t 2) b1 at (9, 1).
M16N8K16_B8 = tuple(
    _ptx("mma.m16n8k16 .u8/.s8", op, r, c, bits, "9", fn, spots) for op, r, c, bits, fn, spots in (
        ("A", 16, 16, 8, _m16n8k16_b8_a,
         (((0, 0), (0, 0)), ((0, 3), (0, 3)), ((8, 0), (0, 4)), ((1, 6), (5, 2)), ((15, 15), (31, 7)))),
        ("B", 16, 8, 8, _m16n8k16_b8_b,
         (((0, 0), (0, 0)), ((3, 0), (0, 3)), ((9, 1), (6, 1)), ((15, 7), (31, 3)))),
        ("C", 16, 8, 32, _m16n8_c, (((0, 0), (0, 0)), ((8, 1), (0, 3)), ((15, 7), (31, 3)))),
    ))


# == AMD MFMA (wave64) ===========================================================================
# The calculator's formulas for one block (blocks = 1), as it prints them for each instruction:
#   A[i][k] GPR: <reg>.[hi:lo]     A[i][k] Lane: <lane>      (likewise B[k][j], C or D[i][j])

def _floor(x, y):
    return x // y


def _mfma(instruction, operand, rows, cols, bits, source, register, spots):
    return LaneTable(instruction, operand, rows, cols, 64, bits, source, register=register,
                     spots=spots)


# v_mfma_f32_32x32x8_f16 / _bf16 (CDNA3: v_mfma_f32_32x32x8f16, v_mfma_f32_32x32x8bf16_1k):
#   A[i][k] GPR: (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]   Lane: 32 * floor(k / 4) + i
#   B[k][j] GPR: (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]   Lane: 32 * floor(k / 4) + j
#   C or D[i][j] GPR: 4 * floor(i / 8) + (i % 4)                   Lane: (32 * floor(i / 4)) % 64 + j
def _mfma_32x32x8_a(i, k):
    return _floor(k, 2) % 2, 16 * (k % 2), 32 * _floor(k, 4) + i


def _mfma_32x32x8_b(k, j):
    return _floor(k, 2) % 2, 16 * (k % 2), 32 * _floor(k, 4) + j


def _mfma_32x32_c(i, j):
    return 4 * _floor(i, 8) + (i % 4), 0, (32 * _floor(i, 4)) % 64 + j


# v_mfma_f32_16x16x16_f16 / _bf16 (CDNA3: v_mfma_f32_16x16x16f16, v_mfma_f32_16x16x16bf16_1k):
#   A[i][k] GPR: (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]   Lane: 16 * floor(k / 4) + i
#   B[k][j] GPR: (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]   Lane: 16 * floor(k / 4) + j
#   C or D[i][j] GPR: (i % 4)                                      Lane: 16 * floor(i / 4) + j
def _mfma_16x16x16_a(i, k):
    return _floor(k, 2) % 2, 16 * (k % 2), 16 * _floor(k, 4) + i


def _mfma_16x16x16_b(k, j):
    return _floor(k, 2) % 2, 16 * (k % 2), 16 * _floor(k, 4) + j


def _mfma_16x16_c(i, j):
    return i % 4, 0, 16 * _floor(i, 4) + j


# gfx950's double-K 16-bit MFMAs (CDNA4: v_mfma_f32_32x32x16_f16/_bf16, v_mfma_f32_16x16x32_f16/
# _bf16): eight K-consecutive elements per lane in four VGPRs, the K block chosen by the lane
# group, as the 8-bit 32x32x16 / 16x16x32 MFMAs of CDNA3 lay out their 8 elements per lane:
#   A[i][k] GPR: (floor(k / 2) % 4).[16*(k % 2)+15 : 16*(k % 2)]   Lane: 32 * floor(k / 8) + i
#   (16x16x32: Lane 16 * floor(k / 8) + i); B likewise with j; C/D as for 32x32x8 / 16x16x16.
def _mfma_32x32x16_a(i, k):
    return _floor(k, 2) % 4, 16 * (k % 2), 32 * _floor(k, 8) + i


def _mfma_32x32x16_b(k, j):
    return _floor(k, 2) % 4, 16 * (k % 2), 32 * _floor(k, 8) + j


def _mfma_16x16x32_a(i, k):
    return _floor(k, 2) % 4, 16 * (k % 2), 16 * _floor(k, 8) + i


def _mfma_16x16x32_b(k, j):
    return _floor(k, 2) % 4, 16 * (k % 2), 16 * _floor(k, 8) + j


# Spots from the worked examples of the ROCm blog (section 5.2, 16x16x16 f16: lane t loads
# A[t % 16][4 * (t / 16) + i] into a_reg[i], B[i + 4 * (t / 16)][t % 16] into b_reg[i], and
# stores c_reg[i] to C[i + 4 * (t / 16)][t % 16]; section 5.1/5.3, 32x32: c_reg[4 * i + j] is
# C[8 * i + 4 * (t / 32) + j][t % 32]; section 5.3 32x32x16: a_reg[i] = A[t % 32][8 * (t / 32) + i]).
_C32_SPOTS = (((0, 0), (0, 0)), ((3, 0), (0, 3)), ((8, 0), (0, 4)), ((4, 5), (37, 0)),
              ((31, 31), (63, 15)))
_C16_SPOTS = (((0, 0), (0, 0)), ((3, 0), (0, 3)), ((4, 1), (17, 0)), ((15, 15), (63, 3)))

MFMA_32X32X8 = (
    _mfma("v_mfma_f32_32x32x8 (16-bit)", "A", 32, 8, 16, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_32x32x8_a, (((0, 0), (0, 0)), ((0, 3), (0, 3)), ((5, 4), (37, 0)), ((31, 7), (63, 3)))),
    _mfma("v_mfma_f32_32x32x8 (16-bit)", "B", 8, 32, 16, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_32x32x8_b, (((0, 0), (0, 0)), ((4, 2), (34, 0)), ((7, 31), (63, 3)))),
    _mfma("v_mfma_f32_32x32x8 (16-bit)", "C", 32, 32, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG}",
          _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X16 = (
    _mfma("v_mfma_f32_16x16x16 (16-bit)", "A", 16, 16, 16, f"{CALC} (CDNA3); {CDNA3}; {BLOG}",
          _mfma_16x16x16_a, (((0, 0), (0, 0)), ((1, 4), (17, 0)), ((15, 15), (63, 3)))),
    _mfma("v_mfma_f32_16x16x16 (16-bit)", "B", 16, 16, 16, f"{CALC} (CDNA3); {CDNA3}; {BLOG}",
          _mfma_16x16x16_b, (((0, 0), (0, 0)), ((5, 2), (18, 1)), ((15, 15), (63, 3)))),
    _mfma("v_mfma_f32_16x16x16 (16-bit)", "C", 16, 16, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG}",
          _mfma_16x16_c, _C16_SPOTS),
)
MFMA_32X32X16 = (
    _mfma("v_mfma_f32_32x32x16 (16-bit)", "A", 32, 16, 16, f"{CDNA4}; {BLOG} 5.3",
          _mfma_32x32x16_a, (((0, 0), (0, 0)), ((0, 7), (0, 7)), ((2, 8), (34, 0)), ((31, 15), (63, 7)))),
    _mfma("v_mfma_f32_32x32x16 (16-bit)", "B", 16, 32, 16, f"{CDNA4}; {BLOG} 5.3",
          _mfma_32x32x16_b, (((7, 0), (0, 7)), ((8, 3), (35, 0)), ((15, 31), (63, 7)))),
    _mfma("v_mfma_f32_32x32x16 (16-bit)", "C", 32, 32, 32, f"{CDNA4}; {BLOG} 5.3",
          _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X32 = (
    _mfma("v_mfma_f32_16x16x32 (16-bit)", "A", 16, 32, 16, f"{CDNA4}",
          _mfma_16x16x32_a, (((0, 7), (0, 7)), ((1, 8), (17, 0)), ((15, 31), (63, 7)))),
    _mfma("v_mfma_f32_16x16x32 (16-bit)", "B", 32, 16, 16, f"{CDNA4}",
          _mfma_16x16x32_b, (((8, 2), (18, 0)), ((31, 15), (63, 7)))),
    _mfma("v_mfma_f32_16x16x32 (16-bit)", "C", 16, 16, 32, f"{CDNA4}", _mfma_16x16_c, _C16_SPOTS),
)

# -- f32 (CDNA3 v_mfma_f32_32x32x2f32, v_mfma_f32_16x16x4f32; CDNA4 the same): one element per lane
#   A[i][k] GPR: 0                       Lane: 32 * k + i        (16x16x4: 16 * k + i)
#   B[k][j] GPR: 0                       Lane: 32 * k + j        (16x16x4: 16 * k + j)
#   C or D[i][j]: as for the 16-bit MFMAs of the same M x N
def _mfma_32x32x2_a(i, k):
    return 0, 0, 32 * k + i


def _mfma_32x32x2_b(k, j):
    return 0, 0, 32 * k + j


def _mfma_16x16x4_a(i, k):
    return 0, 0, 16 * k + i


def _mfma_16x16x4_b(k, j):
    return 0, 0, 16 * k + j


# -- xf32 (CDNA3 only: v_mfma_f32_32x32x4_xf32, v_mfma_f32_16x16x8_xf32): two K-consecutive f32
# elements per lane in two VGPRs, the K pair chosen by the lane group:
#   A[i][k] GPR: k % 2                   Lane: 32 * floor(k / 2) + i   (16x16x8: 16 * floor(k / 2) + i)
#   B[k][j] GPR: k % 2                   Lane: 32 * floor(k / 2) + j   (16x16x8: 16 * floor(k / 2) + j)
def _mfma_32x32x4_a(i, k):
    return k % 2, 0, 32 * _floor(k, 2) + i


def _mfma_32x32x4_b(k, j):
    return k % 2, 0, 32 * _floor(k, 2) + j


def _mfma_16x16x8_a(i, k):
    return k % 2, 0, 16 * _floor(k, 2) + i


def _mfma_16x16x8_b(k, j):
    return k % 2, 0, 16 * _floor(k, 2) + j


# -- 8-bit inputs (CDNA3 v_mfma_f32_32x32x16_{fp8,bf8}_{fp8,bf8}, v_mfma_i32_32x32x16_i8 and the
# 16x16x32 forms; CDNA4 the same): eight K-consecutive bytes per lane in two VGPRs:
#   A[i][k] GPR: (floor(k / 4) % 2).[8*(k % 4)+7 : 8*(k % 4)]   Lane: 32 * floor(k / 8) + i
#   (16x16x32: Lane 16 * floor(k / 8) + i); B likewise with j.
def _mfma_32x32x16_b8_a(i, k):
    return _floor(k, 4) % 2, 8 * (k % 4), 32 * _floor(k, 8) + i


def _mfma_32x32x16_b8_b(k, j):
    return _floor(k, 4) % 2, 8 * (k % 4), 32 * _floor(k, 8) + j


def _mfma_16x16x32_b8_a(i, k):
    return _floor(k, 4) % 2, 8 * (k % 4), 16 * _floor(k, 8) + i


def _mfma_16x16x32_b8_b(k, j):
    return _floor(k, 4) % 2, 8 * (k % 4), 16 * _floor(k, 8) + j


# -- CDNA4's double-K int8 (v_mfma_i32_32x32x32_i8, v_mfma_i32_16x16x64_i8): sixteen
# K-consecutive bytes per lane in four VGPRs:
#   A[i][k] GPR: (floor(k / 4) % 4).[8*(k % 4)+7 : 8*(k % 4)]   Lane: 32 * floor(k / 16) + i
#   (16x16x64: Lane 16 * floor(k / 16) + i); B likewise with j.
def _mfma_32x32x32_b8_a(i, k):
    return _floor(k, 4) % 4, 8 * (k % 4), 32 * _floor(k, 16) + i


def _mfma_32x32x32_b8_b(k, j):
    return _floor(k, 4) % 4, 8 * (k % 4), 32 * _floor(k, 16) + j


def _mfma_16x16x64_b8_a(i, k):
    return _floor(k, 4) % 4, 8 * (k % 4), 16 * _floor(k, 16) + i


def _mfma_16x16x64_b8_b(k, j):
    return _floor(k, 4) % 4, 8 * (k % 4), 16 * _floor(k, 16) + j


MFMA_32X32X2_F32 = (
    _mfma("v_mfma_f32_32x32x2_f32", "A", 32, 2, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.1",
          _mfma_32x32x2_a, (((0, 0), (0, 0)), ((5, 1), (37, 0)), ((31, 1), (63, 0)))),
    _mfma("v_mfma_f32_32x32x2_f32", "B", 2, 32, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.1",
          _mfma_32x32x2_b, (((0, 7), (7, 0)), ((1, 2), (34, 0)))),
    _mfma("v_mfma_f32_32x32x2_f32", "C", 32, 32, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.1",
          _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X4_F32 = (
    _mfma("v_mfma_f32_16x16x4_f32", "A", 16, 4, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x4_a, (((0, 0), (0, 0)), ((3, 2), (35, 0)), ((15, 3), (63, 0)))),
    _mfma("v_mfma_f32_16x16x4_f32", "B", 4, 16, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x4_b, (((1, 4), (20, 0)), ((3, 15), (63, 0)))),
    _mfma("v_mfma_f32_16x16x4_f32", "C", 16, 16, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16_c, _C16_SPOTS),
)
MFMA_32X32X4_XF32 = (
    _mfma("v_mfma_f32_32x32x4_xf32", "A", 32, 4, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_32x32x4_a, (((0, 1), (0, 1)), ((4, 2), (36, 0)), ((31, 3), (63, 1)))),
    _mfma("v_mfma_f32_32x32x4_xf32", "B", 4, 32, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_32x32x4_b, (((1, 0), (0, 1)), ((2, 5), (37, 0)))),
    _mfma("v_mfma_f32_32x32x4_xf32", "C", 32, 32, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X8_XF32 = (
    _mfma("v_mfma_f32_16x16x8_xf32", "A", 16, 8, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x8_a, (((0, 1), (0, 1)), ((2, 4), (34, 0)), ((15, 7), (63, 1)))),
    _mfma("v_mfma_f32_16x16x8_xf32", "B", 8, 16, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x8_b, (((3, 1), (17, 1)), ((7, 15), (63, 1)))),
    _mfma("v_mfma_f32_16x16x8_xf32", "C", 16, 16, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16_c, _C16_SPOTS),
)
# Spots from the ROCm blog's section 5.3 (32x32x16 fp8: a_reg[j] = A[t % 32][8 * (t / 32) + j],
# b_reg[i] = B[i + 8 * (t / 32)][t % 32], C as for every 32x32 MFMA).
MFMA_32X32X16_B8 = (
    _mfma("v_mfma_*_32x32x16 (8-bit)", "A", 32, 16, 8, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.3",
          _mfma_32x32x16_b8_a, (((0, 0), (0, 0)), ((3, 13), (35, 5)), ((31, 15), (63, 7)))),
    _mfma("v_mfma_*_32x32x16 (8-bit)", "B", 16, 32, 8, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.3",
          _mfma_32x32x16_b8_b, (((9, 2), (34, 1)), ((7, 31), (31, 7)))),
    _mfma("v_mfma_*_32x32x16 (8-bit)", "C", 32, 32, 32, f"{CALC} (CDNA3); {CDNA3}; {BLOG} 5.3",
          _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X32_B8 = (
    _mfma("v_mfma_*_16x16x32 (8-bit)", "A", 16, 32, 8, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x32_b8_a, (((0, 7), (0, 7)), ((1, 8), (17, 0)), ((15, 31), (63, 7)))),
    _mfma("v_mfma_*_16x16x32 (8-bit)", "B", 32, 16, 8, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16x32_b8_b, (((8, 2), (18, 0)), ((31, 15), (63, 7)))),
    _mfma("v_mfma_*_16x16x32 (8-bit)", "C", 16, 16, 32, f"{CALC} (CDNA3); {CDNA3}",
          _mfma_16x16_c, _C16_SPOTS),
)
MFMA_32X32X32_I8 = (
    _mfma("v_mfma_i32_32x32x32_i8", "A", 32, 32, 8, f"{CDNA4}",
          _mfma_32x32x32_b8_a, (((0, 15), (0, 15)), ((1, 16), (33, 0)), ((31, 31), (63, 15)))),
    _mfma("v_mfma_i32_32x32x32_i8", "B", 32, 32, 8, f"{CDNA4}",
          _mfma_32x32x32_b8_b, (((17, 3), (35, 1)), ((31, 31), (63, 15)))),
    _mfma("v_mfma_i32_32x32x32_i8", "C", 32, 32, 32, f"{CDNA4}", _mfma_32x32_c, _C32_SPOTS),
)
MFMA_16X16X64_I8 = (
    _mfma("v_mfma_i32_16x16x64_i8", "A", 16, 64, 8, f"{CDNA4}",
          _mfma_16x16x64_b8_a, (((0, 15), (0, 15)), ((1, 16), (17, 0)), ((15, 63), (63, 15)))),
    _mfma("v_mfma_i32_16x16x64_i8", "B", 64, 16, 8, f"{CDNA4}",
          _mfma_16x16x64_b8_b, (((33, 2), (34, 1)), ((63, 15), (63, 15)))),
    _mfma("v_mfma_i32_16x16x64_i8", "C", 16, 16, 32, f"{CDNA4}", _mfma_16x16_c, _C16_SPOTS),
)


# -- gfx942's STEP_K (opus.hpp's mfma for f16/bf16 32x32x16 and 16x16x32 on gfx942, inventory
# 1.16/1.18): two of the K/2 instruction, the first half of each lane's A and B registers to the
# first, the second half to the second, both accumulating into C. Lane group g's registers hold
# K 8g .. 8g+7 of the large operand (the adaptor's load), so instruction h sees its own k' = 4g + e
# at large-operand k = 8g + 4h + e. The table: the instruction's own table at k', its registers
# shifted by the h-th half.
def _chained(table, half_elems):
    """The (gpr, lo_bit, lane) of a STEP_K operand cell from the half instruction's table."""
    def register(row, col, a_side):
        k = col if a_side else row
        h, kk = (k // 4) % 2, 4 * (k // 8) + k % 4
        gpr, lo, lane = table(row, kk) if a_side else table(kk, col)
        return gpr + h * half_elems * 16 // 32, lo, lane
    return register


def _step_k(name, m, n, k, half_a, half_b, c_fn, c_spots, a_spots, b_spots, source):
    ra, rb = _chained(half_a, 4), _chained(half_b, 4)
    return (
        _mfma(name, "A", m, k, 16, source, lambda i, kk: ra(i, kk, True), a_spots),
        _mfma(name, "B", k, n, 16, source, lambda kk, j: rb(kk, j, False), b_spots),
        _mfma(name, "C", m, n, 32, source, c_fn, c_spots),
    )


_STEP_K_SOURCE = (f"{CALC} (CDNA3) for each half; the chaining of the original opus.hpp mfma "
                  f"(inventory 1.16, 1.18: first half of each lane's registers to the first)")
# spots: lane 0 element 4 is the second instruction's element 0 of lane 0, i.e. k = 4; lane 32
# element 0 is the first instruction's lane 32, i.e. k' = 4 -> k = 8
MFMA_32X32X16_STEP_K = _step_k(
    "v_mfma_f32_32x32x8 x2 (16-bit, STEP_K)", 32, 32, 16, _mfma_32x32x8_a, _mfma_32x32x8_b,
    _mfma_32x32_c, _C32_SPOTS, (((0, 4), (0, 4)), ((0, 8), (32, 0)), ((31, 15), (63, 7))),
    (((4, 0), (0, 4)), ((11, 1), (33, 3)), ((15, 31), (63, 7))), _STEP_K_SOURCE)
MFMA_16X16X32_STEP_K = _step_k(
    "v_mfma_f32_16x16x16 x2 (16-bit, STEP_K)", 16, 16, 32, _mfma_16x16x16_a, _mfma_16x16x16_b,
    _mfma_16x16_c, _C16_SPOTS, (((0, 4), (0, 4)), ((0, 8), (16, 0)), ((15, 31), (63, 7))),
    (((4, 0), (0, 4)), ((12, 2), (18, 4)), ((31, 15), (63, 7))), _STEP_K_SOURCE)

# == every instruction, by the spelling the compiler prints (MatrixAtom.isa) =====================
# -- gfx950's block-scaled f8f6f4 MFMAs (CDNA4 v_mfma_scale_f32_32x32x64_f8f6f4 and
# v_mfma_scale_f32_16x16x128_f8f6f4): A's layout follows its format (cbsz), B's its format
# (blgp): 0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3, 3 bf6 E3M2, 4 fp4 E2M1 (the blog's section 5.4
# list of Atype/Btype values). 32 elements per lane in 8 (fp8), 6 (fp6) or 4 (fp4) VGPRs.
#   fp8 (the blog's 5.4 kernel, 32x32x64: a_reg[i*16 + j] = A[t % 32][(t / 32) * 16 + i * 32 + j],
#   b_reg[i*16 + j] = B[16 * (t / 32) + 32 * i + j][t % 32]): two runs of 16 K-consecutive
#   bytes, run r = floor(k / 32) at K 32r + 16 * (lane group) .. +15:
#     A[i][k] GPR: 4 * floor(k / 32) + floor((k % 16) / 4).[8*(k % 4)+7 : 8*(k % 4)]
#             Lane: 32 * floor((k % 32) / 16) + i
#   16x16x128 (four lane groups; Triton's chooseScaledMfmaScaleLayout note: for mxfp8/mxfp6 a
#   lane's 32 elements are "2 16-consecutive elements blocks"): run r = floor(k / 64),
#     A[i][k] GPR: 4 * floor(k / 64) + floor((k % 16) / 4)    Lane: 16 * floor((k % 64) / 16) + i
#   fp6: the same element order, 16 elements = 96 bits = 3 VGPRs per run, element e of the lane
#   at bits 6e .. 6e+5 of its VGPRs taken as one little-endian bit string.
#   fp4 (the blog's 5.5 kernel, 32x32x64: lane t holds bytes (t / 32) * 16 .. +15 of row t % 32,
#   two E2M1 per byte, low nibble first): 32 K-consecutive elements per lane,
#     A[i][k] GPR: floor((k % 32) / 8).[4*(k % 8)+3 : 4*(k % 8)]   Lane: 32 * floor(k / 32) + i
#   16x16x128 (Triton: "the first 16 lanes collectively handle A[0:16][0:32], and another 16
#   lanes collectively handle A[0:16][32:64] and so on"): Lane 16 * floor(k / 32) + i.
#   B[k][j] as A[i][k] with j for i. C/D as every 32x32 / 16x16 MFMA (the blog: "the data layout
#   for the output matrix remains the same").
SCALED_FORMATS = {"fp8_e4m3": 0, "fp8_e5m2": 1, "fp6_e2m3": 2, "fp6_e3m2": 3, "fp4_e2m1": 4}
_SCALED_BITS = {0: 8, 1: 8, 2: 6, 3: 6, 4: 4}
_SCALED_SOURCE = (f"{CDNA4}; {BLOG} 5.4-5.5; Triton lib/Dialect/TritonGPU/IR/"
                  f"LinearLayoutConversions.cpp chooseScaledMfmaScaleLayout")


def _scaled_key(isa, cbsz, blgp):
    return f"{isa} cbsz:{cbsz} blgp:{blgp}"


def _scaled_cell(bits, m, x, k):
    """(gpr, lo_bit, lane) of element (x, k) of a scaled MFMA's A (x = row) or B (x = column)
    with m rows (columns) per lane group, by the formulas above."""
    groups = 64 // m
    if bits == 4:
        lane, e = m * (k // 32) + x, k % 32
    else:  # fp8 / fp6: run r of 16 K-consecutive elements, 16 * groups K per run
        run = 16 * groups
        lane, e = m * ((k % run) // 16) + x, 16 * (k // run) + k % 16
    return (bits * e) // 32, (bits * e) % 32, lane


def _scaled_operand(shape, operand, fmt):
    m, n, k = shape
    bits = _SCALED_BITS[fmt]
    ins = f"v_mfma_scale_f32_{m}x{n}x{k}_f8f6f4 (format {fmt})"
    if operand == "A":
        return _mfma(ins, "A", m, k, bits, _SCALED_SOURCE,
                     lambda i, kk: _scaled_cell(bits, m, i, kk), _SCALED_SPOTS[shape, "A", bits])
    return _mfma(ins, "B", k, n, bits, _SCALED_SOURCE,
                 lambda kk, j: _scaled_cell(bits, n, j, kk), _SCALED_SPOTS[shape, "B", bits])


# spots read off the documents' kernels: ((row, col), (lane, element)).
# 32x32x64 fp8 (blog 5.4): lane 0 holds A[0][0..15] as a_reg[0..15] and A[0][32..47] as
# a_reg[16..31]; lane 32 holds A[0][16..31]; lane 33's b_reg[17] = B[16 + 32 + 1][1].
# 32x32x64 fp4 (blog 5.5): lane 32 byte 0 low nibble = A[0][32]; lane 1 byte 15 high nibble =
# A[1][31]. 16x16x128 (the same rules with four lane groups): fp8 lane 16 holds A[0][16],
# lane 48 element 16 A[0][64 + 48]; fp4 lane 17 element 0 A[1][32].
_SCALED_SPOTS = {
    ((32, 32, 64), "A", 8): (((0, 0), (0, 0)), ((0, 15), (0, 15)), ((0, 32), (0, 16)),
                             ((0, 16), (32, 0)), ((0, 63), (32, 31))),
    ((32, 32, 64), "B", 8): (((49, 1), (33, 17)), ((0, 0), (0, 0))),
    ((32, 32, 64), "A", 6): (((0, 32), (0, 16)), ((0, 16), (32, 0))),
    ((32, 32, 64), "B", 6): (((49, 1), (33, 17)),),
    ((32, 32, 64), "A", 4): (((0, 32), (32, 0)), ((1, 31), (1, 31))),
    ((32, 32, 64), "B", 4): (((33, 2), (34, 1)),),
    ((16, 16, 128), "A", 8): (((0, 16), (16, 0)), ((0, 112), (48, 16)), ((15, 127), (63, 31))),
    ((16, 16, 128), "B", 8): (((64, 0), (0, 16)),),
    ((16, 16, 128), "A", 6): (((0, 16), (16, 0)), ((0, 112), (48, 16))),
    ((16, 16, 128), "B", 6): (((64, 0), (0, 16)),),
    ((16, 16, 128), "A", 4): (((1, 32), (17, 0)), ((15, 127), (63, 31))),
    ((16, 16, 128), "B", 4): (((127, 15), (63, 31)),),
}


def _scaled_tables():
    out = {}
    for shape, c_fn, c_spots in (((32, 32, 64), _mfma_32x32_c, _C32_SPOTS),
                                 ((16, 16, 128), _mfma_16x16_c, _C16_SPOTS)):
        m, n, k = shape
        isa = f"v_mfma_scale_f32_{m}x{n}x{k}_f8f6f4"
        c = _mfma(isa, "C", m, n, 32, _SCALED_SOURCE, c_fn, c_spots)
        for fa in _SCALED_BITS:
            for fb in _SCALED_BITS:
                out[_scaled_key(isa, fa, fb)] = (_scaled_operand(shape, "A", fa),
                                                 _scaled_operand(shape, "B", fb), c)
    return out


ISA_TABLES = {
    **_scaled_tables(),
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32": M16N8K16_F16,
    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32": M16N8K16_F16,
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32": M16N8K8_F16,
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16": M16N8K16_F16_F16,
    "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32": M16N8K8_F16,
    "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16": M16N8K8_F16_F16,
    "mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32": M16N8K4_TF32,
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": M16N8K8_TF32,
    # integer: .atype and .btype each .u8 or .s8 (one fragment table for both)
    **{f"mma.sync.aligned.m16n8k16.row.col.s32.{a}.{b}.s32": M16N8K16_B8
       for a in ("s8", "u8") for b in ("s8", "u8")},
    **{f"mma.sync.aligned.m16n8k32.row.col.s32.{a}.{b}.s32": M16N8K32_B8
       for a in ("s8", "u8") for b in ("s8", "u8")},
    # fp8: .e4m3/.e5m2 each, .f32 or .f16 accumulators
    **{f"mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32": M16N8K32_B8
       for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")},
    **{f"mma.sync.aligned.m16n8k32.row.col.f16.{a}.{b}.f16": M16N8K32_B8_F16
       for a in ("e4m3", "e5m2") for b in ("e4m3", "e5m2")},
    "v_mfma_f32_32x32x8_f16": MFMA_32X32X8,
    "v_mfma_f32_32x32x8_bf16": MFMA_32X32X8,
    "v_mfma_f32_16x16x16_f16": MFMA_16X16X16,
    "v_mfma_f32_16x16x16_bf16": MFMA_16X16X16,
    "v_mfma_f32_32x32x16_f16": MFMA_32X32X16,
    "v_mfma_f32_32x32x16_bf16": MFMA_32X32X16,
    "v_mfma_f32_16x16x32_f16": MFMA_16X16X32,
    "v_mfma_f32_16x16x32_bf16": MFMA_16X16X32,
    "v_mfma_f32_32x32x2_f32": MFMA_32X32X2_F32,
    "v_mfma_f32_16x16x4_f32": MFMA_16X16X4_F32,
    "v_mfma_f32_32x32x4_xf32": MFMA_32X32X4_XF32,
    "v_mfma_f32_16x16x8_xf32": MFMA_16X16X8_XF32,
    **{f"v_mfma_f32_32x32x16_{a}_{b}": MFMA_32X32X16_B8 for a in ("fp8", "bf8") for b in ("fp8", "bf8")},
    **{f"v_mfma_f32_16x16x32_{a}_{b}": MFMA_16X16X32_B8 for a in ("fp8", "bf8") for b in ("fp8", "bf8")},
    "v_mfma_i32_32x32x16_i8": MFMA_32X32X16_B8,
    "v_mfma_i32_16x16x32_i8": MFMA_16X16X32_B8,
    "v_mfma_i32_32x32x32_i8": MFMA_32X32X32_I8,
    "v_mfma_i32_16x16x64_i8": MFMA_16X16X64_I8,
    # chained instructions (a row whose numerics.k_steps is 2): keyed "<instruction> x2"
    "v_mfma_f32_32x32x8_f16 x2": MFMA_32X32X16_STEP_K,
    "v_mfma_f32_32x32x8_bf16 x2": MFMA_32X32X16_STEP_K,
    "v_mfma_f32_16x16x16_f16 x2": MFMA_16X16X32_STEP_K,
    "v_mfma_f32_16x16x16_bf16 x2": MFMA_16X16X32_STEP_K,
}


def isa_key(atom):
    """The ISA_TABLES key of an atom: its instruction, with " x<n>" for a chain of n of it, or
    " cbsz:<a> blgp:<b>" for a block-scaled MFMA's operand formats."""
    steps = atom.numerics.k_steps
    if getattr(atom, "scaled", False):
        return _scaled_key(atom.isa, *(SCALED_FORMATS[d.name] for d in (atom.a, atom.b)))
    return atom.isa if steps == 1 else f"{atom.isa} x{steps}"


def tables_for(atom):
    """(A, B, C) LaneTables of a MatrixAtom, checked against its shape, warp and element sizes;
    MissingIsaTable naming the instruction if none was transcribed."""
    tables = ISA_TABLES.get(isa_key(atom))
    if tables is None:
        raise MissingIsaTable(
            f"no ISA lane table for {isa_key(atom)!r} (matrix atom {atom.name!r}): transcribe its A, B "
            f"and C/D layouts from the ISA document into ISA_TABLES in tests/targets/isa_lanes.py")
    m, n, k = atom.shape
    for t, operand, rows, cols, dtype in zip(tables, "ABC", (m, k, m), (k, n, n),
                                             (atom.a, atom.b, atom.c)):
        got = (t.operand, t.rows, t.cols, t.lanes, t.bits)
        want = (operand, rows, cols, atom.warp, dtype.bits if dtype.packed else 8 * dtype.itemsize)
        if got != want:
            raise MissingIsaTable(f"ISA table {t} for {atom.isa!r} is (operand, rows, cols, lanes, "
                                  f"bits) {got}, the atom {atom.name!r} needs {want}")
    return tables


# == using the tables ============================================================================

def assert_coordinates_match(atom):
    """The atom's coords_a/b/c put every (lane, element) where the ISA document does."""
    for fn, table in zip((atom.coords_a, atom.coords_b, atom.coords_c), tables_for(atom)):
        for cell, (lane, i) in table.placement().items():
            got = tuple(fn(lane, i))
            assert got == cell, (f"{atom.name}: {table.operand} of lane {lane} element {i} is "
                                 f"{got} in opus, {cell} in {table.source}")


def operand_values(dtype, rng, shape):
    """Random values an atom reads exactly, as ``dtype``'s numpy type: i8 over its whole range,
    i32 small (no wrap-around), f32 with 10 mantissa bits (so the xf32/tf32 instructions, which
    keep 10, read them unchanged), other floats standard normal rounded to the type."""
    import numpy as np
    if dtype.name in ("i8", "u8"):
        lo, hi = dtype.int_range()
        return rng.integers(lo, hi + 1, shape).astype(dtype.np_dtype)
    if dtype.is_int:
        return rng.integers(-1000, 1000, shape).astype(dtype.np_dtype)
    x = rng.standard_normal(shape)
    if dtype.name in ("f32", "tf32"):
        m, e = np.frexp(x)
        x = np.ldexp(np.round(m * 2.0 ** 11) / 2.0 ** 11, e)  # 11 significant bits
    return x.astype(dtype.np_dtype)


def tolerance(dtype):
    """assert_allclose's rtol/atol for a result rounded once to ``dtype`` (C's type): none for
    integers, a little over half an ulp for f16, 1e-5 for f32."""
    if dtype.is_int:
        return dict(rtol=0, atol=0)
    return dict(rtol=1e-3, atol=1e-5) if dtype.bits == 16 else dict(rtol=1e-5, atol=1e-5)


def to_lanes(mats, table):
    """[warps, rows, cols] matrices -> [warps * lanes, elements] registers, by the table."""
    import numpy as np
    out = np.zeros((len(mats), table.lanes, table.per_lane), mats.dtype)
    for (r, c), (lane, i) in table.placement().items():
        out[:, lane, i] = mats[:, r, c]
    return out.reshape(-1, table.per_lane)


def from_lanes(regs, table):
    """[warps * lanes, elements] registers -> [warps, rows, cols] matrices, by the table."""
    import numpy as np
    lanes = np.asarray(regs).reshape(-1, table.lanes, table.per_lane)
    out = np.zeros((len(lanes), table.rows, table.cols), lanes.dtype)
    for (r, c), (lane, i) in table.placement().items():
        out[:, r, c] = lanes[:, lane, i]
    return out


# == the MFMA builtins, for the host shim (tests/hostexec/shim/mfma.h) ===========================
# clang's __builtin_amdgcn_mfma_* (clang/include/clang/Basic/BuiltinsAMDGPU.def) issue the
# instruction of their name with their operands in order: (src0, src1, src2, cbsz, abid, blgp).
# The ISA defines the instruction as D = A * B + C with A in SRC0, B in SRC1 and C in SRC2
# (CDNA3 ISA Reference Guide, chapter 7 "Matrix Arithmetic Instructions"; the calculator's
# --detail-instruction prints it: "A matrix source field: Src0, B matrix source field: Src1,
# C matrix source field: Src2, D matrix source field: Vdst"). The host shim implements each
# builtin from that definition and the A/B/C tables above: it knows nothing of opus' code.
def _fp8_builtins():
    out = {}
    for m, n, k in ((32, 32, 16), (16, 16, 32)):
        for a in ("fp8", "bf8"):
            for b in ("fp8", "bf8"):
                ins = f"v_mfma_f32_{m}x{n}x{k}_{a}_{b}"
                out[f"__builtin_amdgcn_mfma_f32_{m}x{n}x{k}_{a}_{b}"] = (ins, a, b, "f32")
    return out


# builtin: (ISA_TABLES key of the instruction it issues, A, B and C element kinds). fp8/bf8 are
# the chip's flavour (gfx942: FNUZ, gfx950: OCP; OPUS_HOST_FP8/BF8 of shim/hip.h); xf32: f32
# inputs rounded to 10 mantissa bits (the CDNA3 ISA's XF32 format), to nearest even.
MFMA_BUILTINS = {
    "__builtin_amdgcn_mfma_f32_32x32x8f16": ("v_mfma_f32_32x32x8_f16", "f16", "f16", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x16f16": ("v_mfma_f32_16x16x16_f16", "f16", "f16", "f32"),
    "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k": ("v_mfma_f32_32x32x8_bf16", "bf16", "bf16", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k": ("v_mfma_f32_16x16x16_bf16", "bf16", "bf16", "f32"),
    "__builtin_amdgcn_mfma_f32_32x32x16_f16": ("v_mfma_f32_32x32x16_f16", "f16", "f16", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x32_f16": ("v_mfma_f32_16x16x32_f16", "f16", "f16", "f32"),
    "__builtin_amdgcn_mfma_f32_32x32x16_bf16": ("v_mfma_f32_32x32x16_bf16", "bf16", "bf16", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x32_bf16": ("v_mfma_f32_16x16x32_bf16", "bf16", "bf16", "f32"),
    "__builtin_amdgcn_mfma_f32_32x32x2f32": ("v_mfma_f32_32x32x2_f32", "f32", "f32", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x4f32": ("v_mfma_f32_16x16x4_f32", "f32", "f32", "f32"),
    "__builtin_amdgcn_mfma_f32_32x32x4_xf32": ("v_mfma_f32_32x32x4_xf32", "xf32", "xf32", "f32"),
    "__builtin_amdgcn_mfma_f32_16x16x8_xf32": ("v_mfma_f32_16x16x8_xf32", "xf32", "xf32", "f32"),
    **_fp8_builtins(),
    "__builtin_amdgcn_mfma_i32_32x32x16_i8": ("v_mfma_i32_32x32x16_i8", "i8", "i8", "i32"),
    "__builtin_amdgcn_mfma_i32_16x16x32_i8": ("v_mfma_i32_16x16x32_i8", "i8", "i8", "i32"),
    "__builtin_amdgcn_mfma_i32_32x32x32_i8": ("v_mfma_i32_32x32x32_i8", "i8", "i8", "i32"),
    "__builtin_amdgcn_mfma_i32_16x16x64_i8": ("v_mfma_i32_16x16x64_i8", "i8", "i8", "i32"),
}
MFMA_SHIM = "tests/hostexec/shim/mfma.h"
_KIND = {"f16": "F16", "bf16": "BF16", "f32": "F32", "xf32": "XF32", "fp8": "FP8", "bf8": "BF8",
         "i8": "I8"}

_SHIM_HEAD = """\
// GENERATED from tests/targets/isa_lanes.py (`python tests/targets/isa_lanes.py` rewrites it;
// tests/targets/test_isa_lanes.py fails when it is stale): do not edit by hand.
//
// The MFMA builtins of opus' HIP lowering on the host, from the ISA's definition of the
// instruction, D = A * B + C with A in src0 (the first operand), B in src1 and C in src2, and
// from the lane tables transcribed from the AMD documents (isa_lanes.py; not from opus' code).
// A wave-wide instruction: every lane of the wave must call it (the runtime's warp rendezvous,
// host.h). Each lane puts its operand registers in its exchange slot; after the rendezvous each
// lane computes its own D elements from every lane's slots (A, B and C widened to double, the
// K products summed exactly enough, rounded once to f32; an i32 D keeps the low 32 bits of the
// exact sum); a second rendezvous keeps the slots alive until every lane has read them. Element
// kinds: f16, bf16, f32 exact; xf32 = f32 rounded to 10 mantissa bits (to nearest even); fp8/bf8
// in the chip's flavour (shim/hip.h's OPUS_HOST_FP8/BF8: gfx942 FNUZ, gfx950 OCP); i8 signed.
// The cbsz/abid/blgp modifiers are not modelled (opus passes 0): a non-zero one fails the launch.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace opus_host_mfma {

// IEEE binary16 and bfloat16 from their bits (exact in double)
static inline double from_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp((double)m, -24)
           : e == 31 ? (m ? NAN : INFINITY) : std::ldexp((double)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}
static inline double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

enum Kind { F16, BF16, F32, XF32, FP8, BF8, I8 };
static inline unsigned size_of(Kind k) { return k == F32 || k == XF32 ? 4 : k == F16 || k == BF16 ? 2 : 1; }

// one element of kind k at p, exactly as the instruction reads it
static inline double value(Kind k, const unsigned char* p) {
  uint16_t h;
  uint32_t u;
  float f;
  switch (k) {
    case F16: memcpy(&h, p, 2); return from_f16(h);
    case BF16: memcpy(&h, p, 2); return from_bf16(h);
    case F32: memcpy(&f, p, 4); return f;
    case XF32:  // 1 sign, 8 exponent, 10 mantissa bits: round the low 13 bits away, ties to even
      memcpy(&u, p, 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
      memcpy(&f, &u, 4);
      return f;
    case FP8: return opus_host_float::decode(*p, OPUS_HOST_FP8);
    case BF8: return opus_host_float::decode(*p, OPUS_HOST_BF8);
    case I8: return (double)(int8_t)*p;
  }
  return NAN;
}

// cell tables: [row][col] -> (lane, register element); d_cells: [lane][element] -> (row, col)
struct Layout {
  int m, n, k, ea, eb, ec;
  const unsigned char *a, *b, *c, *d_cells;
};

const unsigned SLOT_B = 64, SLOT_C = 128;  // byte offsets in a lane's exchange slot

static inline void run(const Layout& L, Kind ka, Kind kb, bool int_acc, const void* a, const void* b,
                       const void* c, void* d, int cbsz, int abid, int blgp) {
  if (cbsz || abid || blgp) opus_host_fail("MFMA cbsz/abid/blgp modifiers are not modelled");
  if (opus_host_warp_live_mask() != ~0ull)
    opus_host_fail("an MFMA needs every lane of the wave (some returned before it)");
  unsigned me = opus_host_lane(), sa = size_of(ka), sb = size_of(kb);
  unsigned char* slot = (unsigned char*)opus_host_xchg(me);
  memcpy(slot, a, sa * L.ea);
  memcpy(slot + SLOT_B, b, sb * L.eb);
  memcpy(slot + SLOT_C, c, 4 * L.ec);
  opus_host_warp_rendezvous();
  auto in = [&](Kind kind, unsigned size, unsigned lane, unsigned off, unsigned elem) {
    return value(kind, (unsigned char*)opus_host_xchg(lane) + off + size * elem);
  };
  unsigned char out[4 * 64];
  for (int e = 0; e < L.ec; e++) {
    int row = L.d_cells[2 * (me * L.ec + e)], col = L.d_cells[2 * (me * L.ec + e) + 1];
    const unsigned char* ch = L.c + 2 * (row * L.n + col);
    const unsigned char* cp = (unsigned char*)opus_host_xchg(ch[0]) + SLOT_C + 4 * ch[1];
    int32_t ci;
    float cf;
    memcpy(&ci, cp, 4);
    memcpy(&cf, cp, 4);
    double acc = int_acc ? (double)ci : (double)cf;
    for (int kk = 0; kk < L.k; kk++) {
      const unsigned char* ah = L.a + 2 * (row * L.k + kk);   // A[row][kk], from src0
      const unsigned char* bh = L.b + 2 * (kk * L.n + col);   // B[kk][col], from src1
      acc += in(ka, sa, ah[0], 0, ah[1]) * in(kb, sb, bh[0], SLOT_B, bh[1]);
    }
    if (int_acc) {  // exact in double (|sum| < 2^53); keep the low 32 bits
      int32_t r = (int32_t)(uint32_t)(uint64_t)(int64_t)acc;
      memcpy(out + 4 * e, &r, 4);
    } else {
      float r = (float)acc;
      memcpy(out + 4 * e, &r, 4);
    }
  }
  opus_host_warp_rendezvous();
  memcpy(d, out, 4 * L.ec);
}

"""

_SHIM_BUILTIN = """\
template <class VA, class VB, class VC>
static inline VC {fn}(VA a, VB b, VC c, int cbsz, int abid, int blgp) {{
  static_assert(sizeof(VA) == {abytes} && sizeof(VB) == {bbytes} && sizeof(VC) == {cbytes},
                "{builtin}: operands of {abytes}, {bbytes} and {cbytes} bytes");
  VC d;
  run({layout}, {ka}, {kb}, {int_acc}, &a, &b, &c, &d, cbsz, abid, blgp);
  return d;
}}
"""


# gfx950's block-scaled builtins: __builtin_amdgcn_mfma_scale_f32_<shape>_f8f6f4(a, b, c, cbsz,
# blgp, opsel_a, scale_a, opsel_b, scale_b) (clang BuiltinsAMDGPU.def; the ROCm blog's section
# 5.4 list of its arguments), A and B as 8 ints each (fp6 / fp4 in the first 6 / 4).
SCALED_BUILTINS = {f"__builtin_amdgcn_mfma_scale_f32_{m}x{n}x{k}_f8f6f4":
                   f"v_mfma_scale_f32_{m}x{n}x{k}_f8f6f4" for m, n, k in ((32, 32, 64), (16, 16, 128))}

_SCALED_SHIM = """\
// -- gfx950's block-scaled f8f6f4 MFMAs (CDNA4 v_mfma_scale_f32_32x32x64_f8f6f4 and
// _16x16x128_f8f6f4), from the ISA's definition: with K blocks b of 32 elements,
//   D[row][col] = C[row][col] + sum_b Xa * Xb * sum_{k in block b} A[row][k] * B[k][col],
// Xa = 2^(e - 127) of byte opsel_a of the scale_a of lane b * M + row, Xb likewise of lane
// b * N + col (E8M0; 255 is NaN): the scales apply to each block's dot product before the
// accumulation. A's format is cbsz, B's blgp: 0 E4M3, 1 E5M2 (OCP fp8), 2 E2M3, 3 E3M2 (fp6),
// 4 E2M1 (fp4) (OCP MX spec v1.0: E2M3 bias 1, E3M2 bias 3, E2M1 bias 1, no inf or NaN).
// A lane's elements lie packed in its registers, element e at bits e*w .. e*w+w-1 of the bit
// string of its VGPRs (w = 8, 6 or 4); which (row, k) each is: the lane tables per format.
static inline double small_float(uint32_t code, int ebits, int mbits, int bias) {
  uint32_t e = (code >> mbits) & ((1u << ebits) - 1), m = code & ((1u << mbits) - 1);
  double v = e == 0 ? std::ldexp((double)m, 1 - bias - mbits)
                    : std::ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
  return (code >> (ebits + mbits)) & 1 ? -v : v;
}
static inline int f8f6f4_bits(int fmt) { return fmt < 2 ? 8 : fmt < 4 ? 6 : 4; }
static inline double f8f6f4_value(int fmt, const unsigned char* regs, int e) {
  int w = f8f6f4_bits(fmt), bit = e * w;
  uint32_t code = (((uint32_t)regs[bit / 8] | ((uint32_t)regs[bit / 8 + 1] << 8)) >> (bit % 8)) &
                  ((1u << w) - 1);  // regs has 32 bytes + padding: bit / 8 + 1 stays inside
  switch (fmt) {
    case 0: return opus_host_float::decode(code, opus_host_float::E4M3);
    case 1: return opus_host_float::decode(code, opus_host_float::E5M2);
    case 2: return small_float(code, 2, 3, 1);
    case 3: return small_float(code, 3, 2, 3);
    default: return small_float(code, 2, 1, 1);
  }
}
static inline double e8m0(uint32_t scale, int opsel) {
  uint32_t e = (scale >> (8 * opsel)) & 0xff;
  return e == 255 ? NAN : std::ldexp(1.0, (int)e - 127);
}

// cells of A and B per format (cbsz / blgp 0..4), C and D as for every MFMA
struct ScaledLayout {
  int m, n, k, ec;
  const unsigned char *a[5], *b[5], *c, *d_cells;
};

const unsigned SLOT_SCALE = 256;  // scale_a, scale_b after C in a lane's exchange slot

static inline void run_scaled(const ScaledLayout& L, const void* a, const void* b, const void* c,
                              void* d, int cbsz, int blgp, int opsel_a, int scale_a, int opsel_b,
                              int scale_b) {
  if (cbsz < 0 || cbsz > 4 || blgp < 0 || blgp > 4 || opsel_a < 0 || opsel_a > 3 || opsel_b < 0 ||
      opsel_b > 3)
    opus_host_fail("mfma_scale: cbsz/blgp must be 0..4 and opsel 0..3");
  if (opus_host_warp_live_mask() != ~0ull)
    opus_host_fail("an MFMA needs every lane of the wave (some returned before it)");
  unsigned me = opus_host_lane();
  unsigned char* slot = (unsigned char*)opus_host_xchg(me);
  memset(slot, 0, SLOT_SCALE + 8);
  memcpy(slot, a, 32);
  memcpy(slot + SLOT_B, b, 32);
  memcpy(slot + SLOT_C, c, 4 * L.ec);
  memcpy(slot + SLOT_SCALE, &scale_a, 4);
  memcpy(slot + SLOT_SCALE + 4, &scale_b, 4);
  opus_host_warp_rendezvous();
  auto lane = [](unsigned l) { return (const unsigned char*)opus_host_xchg(l); };
  auto scale = [&](unsigned l, unsigned off) { uint32_t u; memcpy(&u, lane(l) + SLOT_SCALE + off, 4); return u; };
  unsigned char out[4 * 64];
  for (int e = 0; e < L.ec; e++) {
    int row = L.d_cells[2 * (me * L.ec + e)], col = L.d_cells[2 * (me * L.ec + e) + 1];
    const unsigned char* ch = L.c + 2 * (row * L.n + col);
    float cf;
    memcpy(&cf, lane(ch[0]) + SLOT_C + 4 * ch[1], 4);
    double acc = cf;
    for (int blk = 0; blk < L.k / 32; blk++) {
      double dot = 0;
      for (int kk = 32 * blk; kk < 32 * blk + 32; kk++) {
        const unsigned char* ah = L.a[cbsz] + 2 * (row * L.k + kk);  // A[row][kk], from src0
        const unsigned char* bh = L.b[blgp] + 2 * (kk * L.n + col);  // B[kk][col], from src1
        dot += f8f6f4_value(cbsz, lane(ah[0]), ah[1]) * f8f6f4_value(blgp, lane(bh[0]) + SLOT_B, bh[1]);
      }
      acc += e8m0(scale(blk * L.m + row, 0), opsel_a) * e8m0(scale(blk * L.n + col, 4), opsel_b) * dot;
    }
    float r = (float)acc;
    memcpy(out + 4 * e, &r, 4);
  }
  opus_host_warp_rendezvous();
  memcpy(d, out, 4 * L.ec);
}

"""

_SCALED_SHIM_BUILTIN = """\
template <class VA, class VB, class VC>
static inline VC {fn}(VA a, VB b, VC c, int cbsz, int blgp, int opsel_a, int scale_a, int opsel_b,
                      int scale_b) {{
  static_assert(sizeof(VA) == 32 && sizeof(VB) == 32 && sizeof(VC) == {cbytes},
                "{builtin}: operands of 32, 32 and {cbytes} bytes");
  VC d;
  run_scaled({layout}, &a, &b, &c, &d, cbsz, blgp, opsel_a, scale_a, opsel_b, scale_b);
  return d;
}}
"""


def _scaled_shim_source():
    """The block-scaled builtins of the shim: their layouts (A and B per format) and calls."""
    out = [_SCALED_SHIM]
    for builtin, isa in SCALED_BUILTINS.items():
        name = "L_" + isa
        arrays, by_format = {}, {"a": [], "b": []}  # (operand, cells) -> C array name
        for fmt in range(5):
            a, b, c = ISA_TABLES[_scaled_key(isa, fmt, fmt)]
            for op, t in (("a", a), ("b", b)):
                cells = _cells(t)
                if (op, cells) not in arrays:
                    arrays[op, cells] = f"{name}_{op}{len(arrays)}"
                    out.append(f"static const unsigned char {arrays[op, cells]}[] = {{{cells}}};\n")
                by_format[op].append(arrays[op, cells])
        pc = c.placement()
        d_cells = {holder: cell for cell, holder in pc.items()}
        out.append(f"static const unsigned char {name}_c[] = {{{_cells(c)}}};\n")
        out.append(f"static const unsigned char {name}_d[] = "
                   f"{{{_c_bytes([d_cells[l, e] for l in range(c.lanes) for e in range(c.per_lane)])}}};\n")
        out.append(f"static const ScaledLayout {name} = {{{c.rows}, {c.cols}, {a.cols}, "
                   f"{c.per_lane}, {{{', '.join(by_format['a'])}}}, {{{', '.join(by_format['b'])}}}, "
                   f"{name}_c, {name}_d}};\n")
        out.append(_SCALED_SHIM_BUILTIN.format(fn=builtin.replace("__builtin_amdgcn_", "opus_host_"),
                                               builtin=builtin, layout=name,
                                               cbytes=c.per_lane * 4))
    return "".join(out)


def _cells(table):
    """A table's (lane, element) per cell, row-major, as C bytes."""
    placed = table.placement()
    return _c_bytes([placed[r, col] for r in range(table.rows) for col in range(table.cols)])


def _c_bytes(pairs):
    return ", ".join(f"{x}" for p in pairs for x in p)


def _layout_name(table):
    """A C name for an instruction's layout (several instructions share one)."""
    import re
    return "L_" + re.sub(r"\W+", "_", table.instruction).strip("_")


def mfma_shim_source() -> str:
    """The text of tests/hostexec/shim/mfma.h, from MFMA_BUILTINS and the lane tables."""
    out = [_SHIM_HEAD]
    done = set()
    for builtin, (instruction, *_) in MFMA_BUILTINS.items():
        a, b, c = ISA_TABLES[instruction]
        name = _layout_name(a)
        if name in done:
            continue
        done.add(name)
        pa, pb, pc = a.placement(), b.placement(), c.placement()
        d_cells = {holder: cell for cell, holder in pc.items()}
        out.append(f"// {a.instruction}: A {a.rows}x{a.cols}, B {b.rows}x{b.cols}, C/D {c.rows}x{c.cols}"
                   f" ({a.source})\n")
        for op, placed, rows, cols in (("a", pa, a.rows, a.cols), ("b", pb, b.rows, b.cols),
                                       ("c", pc, c.rows, c.cols)):
            cells = [placed[r, col] for r in range(rows) for col in range(cols)]
            out.append(f"static const unsigned char {name}_{op}[] = {{{_c_bytes(cells)}}};\n")
        cells = [d_cells[lane, e] for lane in range(c.lanes) for e in range(c.per_lane)]
        out.append(f"static const unsigned char {name}_d[] = {{{_c_bytes(cells)}}};\n")
        out.append(f"static const Layout {name} = {{{a.rows}, {c.cols}, {a.cols}, {a.per_lane}, "
                   f"{b.per_lane}, {c.per_lane}, {name}_a, {name}_b, {name}_c, {name}_d}};\n\n")
    for builtin, (instruction, ka, kb, kc) in MFMA_BUILTINS.items():
        a, b, c = ISA_TABLES[instruction]
        fn = builtin.replace("__builtin_amdgcn_", "opus_host_")
        out.append(_SHIM_BUILTIN.format(fn=fn, builtin=builtin, layout=_layout_name(a),
                                        ka=_KIND[ka], kb=_KIND[kb],
                                        int_acc="true" if kc == "i32" else "false",
                                        abytes=a.per_lane * a.bits // 8,
                                        bbytes=b.per_lane * b.bits // 8,
                                        cbytes=c.per_lane * c.bits // 8))
    out.append(_scaled_shim_source())
    out.append("\n}  // namespace opus_host_mfma\n\n")
    for builtin in (*MFMA_BUILTINS, *SCALED_BUILTINS):
        out.append(f"#define {builtin} opus_host_mfma::{builtin.replace('__builtin_amdgcn_', 'opus_host_')}\n")
    return "".join(out)


if __name__ == "__main__":
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / MFMA_SHIM
    path.write_text(mfma_shim_source())
    print(f"wrote {path}")
