"""Lane layouts of the warp-level shared-memory accesses (ldmatrix, stmatrix, ds_read_b64_tr_*),
transcribed by hand from the vendors' documents, in the documents' own terms.

Nothing here is computed from opus' source rules (``src/opus/targets/nv_ldmatrix.py``,
``amd_ds_tr.py``): a slip there disagrees with these.

* NVIDIA (PTX ISA, "Warp-level matrix load instruction: ldmatrix" and "... store instruction:
  stmatrix"): threads 0-7 / 0-15 / 0-31 (.x1 / .x2 / .x4) hold addr0 .. addrN, and "addresses
  addr0-addr7 correspond to the rows of the first matrix, addresses addr8-addr15 to the rows of
  the second matrix, and so on"; destination register r<i> holds the fragment of matrix i; the
  figure "ldmatrix fragment for one 8x8 matrix of 16-bit elements" puts a0, a1 of a thread at
  row = %laneid >> 2 (groupID), col = threadID_in_group * 2 + {0, 1} (a0 in the low half);
  ".trans indicates that the matrix is loaded in column-major format": fragment (row, col) is
  the stored matrix's (col, row). stmatrix: "the layout of the fragments is the same as for
  ldmatrix", data going the other way.
* AMD (CDNA4 ISA guide, section 11.4 "MFMA Transpose Load from LDS": "Read N bits of data per
  lane from data share. Interpret the data as a matrix ... and transpose the matrix"; the tile
  picture of Triton's AMD backend, MemoryOpToLLVM.cpp, "ds_read_tr*_b64 performs a cooperative
  transposed load across 16 threads ... lane i will receive the i-th column", its worked example
  "Lane 0 receives ... [t0,t4,t8,t12]; Lane 1 ... the second 16 bits loaded by the same lanes;
  Lane 4 ... [t1,t5,t9,t13]"; Mojo's ds_read_tr8_b64 documentation: "Each 16-lane row reads
  16x8 bytes and performs two interleaved 8x8 byte transposes"): in a block of 16 lanes each
  loading N elements (N = 64 / bits), tile column c holds, in register order, element c % N
  of the loads of lanes c // N, c // N + 16/N, c // N + 2 * 16/N, ...

Each table answers: register element ``i`` of lane ``lane`` is element ``e`` of the row that lane
``s`` addresses, ``(s, e)``; keyed by the instruction as the compiler prints it
(``WarpAccess.isa``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["AccessTable", "ACCESS_TABLES", "access_table_for", "MissingAccessTable"]

PTX_LDMATRIX = ("PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution), 'Warp-level matrix "
                "load instruction: ldmatrix'")
PTX_STMATRIX = ("PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution), 'Warp-level matrix "
                "store instruction: stmatrix' (fragments as for ldmatrix)")
CDNA4_TR = ("AMD Instinct CDNA4 ISA Reference Guide, section 11.4 'MFMA Transpose Load from LDS'; "
            "Triton AMD backend MemoryOpToLLVM.cpp (ds_read_tr tile picture and example); Mojo "
            "gpu.intrinsics.ds_read_tr8_b64 ('two interleaved 8x8 byte transposes')")


class MissingAccessTable(LookupError):
    """A warp-access row with no transcribed table."""


@dataclass(frozen=True)
class AccessTable:
    """One instruction as the document lays it out: ``received(lane, i) -> (s, e)``, plus
    literal entries read off the document's figure or example, ((lane, i), (s, e))."""
    instruction: str
    lanes: int
    elems: int       # register elements per lane
    rows: int        # address lanes
    vec: int         # elements per addressed row
    source: str
    received: Callable
    spots: tuple = ()

    def __str__(self):
        return self.instruction


# -- NVIDIA: PTX ISA ldmatrix / stmatrix, m8n8, b16 ----------------------------------------------

def _ptx_address_holder(matrix, row):
    """The thread holding addr<k> of 'row' of 'matrix': addr0-7 are the first matrix's rows."""
    return 8 * matrix + row


def _ptx_fragment(lane, j):
    """(row, col) of a<j> in a thread's register: row = groupID, col = threadID_in_group*2 + j."""
    return lane >> 2, (lane % 4) * 2 + j


def _ptx(num, trans):
    def received(lane, i):
        matrix, j = i // 2, i % 2     # register r<matrix>, a0 in the low half
        row, col = _ptx_fragment(lane, j)
        if trans:                     # column-major: fragment (row, col) is stored (col, row)
            row, col = col, row
        return _ptx_address_holder(matrix, row), col
    return received


# Figure 'ldmatrix fragment' (matrix 0): thread 0 holds (0,0),(0,1); thread 1 (0,2),(0,3); thread
# 4 (1,0),(1,1); thread 31 (7,6),(7,7); matrix 1 of thread 0 is row 0 of the rows at addr8..15.
_PTX_SPOTS = {
    False: (((0, 0), (0, 0)), ((0, 1), (0, 1)), ((1, 0), (0, 2)), ((4, 1), (1, 1)),
            ((31, 1), (7, 7))),
    True: (((0, 0), (0, 0)), ((0, 1), (1, 0)), ((1, 0), (2, 0)), ((4, 1), (1, 1)),
           ((31, 1), (7, 7))),
}
_PTX_SPOTS_X2 = (((0, 2), (8, 0)), ((5, 3), (9, 3)))
_PTX_SPOTS_X2_TRANS = (((0, 2), (8, 0)), ((5, 3), (11, 1)))


def _ptx_tables(family, source):
    tables = []
    for num in (1, 2, 4):
        for trans in (False, True):
            tr = ".trans" if trans else ""
            spots = _PTX_SPOTS[trans]
            if num >= 2:
                spots = spots + (_PTX_SPOTS_X2_TRANS if trans else _PTX_SPOTS_X2)
            tables.append(AccessTable(
                f"{family}.sync.aligned.m8n8.x{num}{tr}.shared.b16", lanes=32, elems=2 * num,
                rows=8 * num, vec=8, source=source, received=_ptx(num, trans), spots=spots))
    return tables


# -- AMD: CDNA4 ds_read_b64_tr_b16 / _b8 ---------------------------------------------------------

def _cdna4_tile(bits):
    n = 64 // bits          # elements each lane loads
    lanes_per_row = 16 // n  # "16/N": lanes whose loads share one register of a column

    def received(lane, i):
        block, column = lane // 16, lane % 16
        return 16 * block + column // n + lanes_per_row * i, column % n
    return received


_CDNA4_SPOTS = {
    # Triton's example: lane 0 <- element 0 of t0, t4, t8, t12; lane 1 <- element 1 of the same;
    # lane 4 <- element 0 of t1, t5, t9, t13; the second block of 16 lanes reads lanes 16..31.
    16: (((0, 0), (0, 0)), ((0, 1), (4, 0)), ((0, 3), (12, 0)), ((1, 2), (8, 1)),
         ((4, 0), (1, 0)), ((4, 3), (13, 0)), ((17, 1), (20, 1))),
    # two interleaved 8x8 byte transposes: lanes 0-7 take the bytes of t0, t2, ..., t14 and
    # lanes 8-15 those of t1, t3, ..., t15
    8: (((0, 0), (0, 0)), ((0, 7), (14, 0)), ((3, 1), (2, 3)), ((8, 0), (1, 0)),
        ((15, 7), (15, 7)), ((63, 0), (49, 7))),
}


def _cdna4_tables():
    return [AccessTable(f"ds_read_b64_tr_b{bits}", lanes=64, elems=64 // bits, rows=64,
                        vec=64 // bits, source=CDNA4_TR, received=_cdna4_tile(bits),
                        spots=_CDNA4_SPOTS[bits])
            for bits in (16, 8)]


ACCESS_TABLES = {t.instruction: t for t in
                 _ptx_tables("ldmatrix", PTX_LDMATRIX) + _ptx_tables("stmatrix", PTX_STMATRIX)
                 + _cdna4_tables()}


def access_table_for(row) -> AccessTable:
    """The transcribed table of a WarpAccess row (MissingAccessTable naming it otherwise)."""
    table = ACCESS_TABLES.get(row.isa)
    if table is None:
        raise MissingAccessTable(
            f"no ISA lane table for {row.isa!r} (warp access {row.name!r}): transcribe it from the "
            f"vendor's document into tests/targets/isa_lanes_ldst.py")
    return table
