"""AMD gfx950 (CDNA4) transposing LDS loads ds_read_b64_tr_b16 / _b8: the table of rows, the
family's lane layout and its HIP lowering (the rest is ``warp_access.WarpAccess``).

Lane layout (CDNA4 ISA guide, section 11.4 "MFMA Transpose Load from LDS"; the same rule is what
Triton's AMD backend lowers to, third_party/amd/.../MemoryOpToLLVM.cpp): every lane reads 64
contiguous, 8-byte aligned bits, N = 64 / element bits elements (4 for b16, 8 for b8). The wave
works in blocks of 16 lanes; in a block, the 16 lanes' loads form a tile of which lane c receives
"column" c: element e = c % N of the loads of lanes c // N, c // N + 16/N, c // N + 2*16/N, ...
So, with lane l = 16 * b + N * q + e (q < 16 / N), register element r of lane l is element e of
the row that lane 16 * b + (16 / N) * r + q read. For b16: lane 0 gets element 0 of lanes
0, 4, 8, 12; lane 1 element 1 of the same; lane 4 element 0 of lanes 1, 5, 9, 13.

Used as the ISA intends (a column-major A, or a row-major B, of an MFMA): lanes that read 4
consecutive M values give each receiving lane 4 consecutive K values of one M: two b16 reads
give v_mfma_f32_16x16x32's 8-element A operand.

Only gfx950 has them (clang: "needs target feature gfx950-insts"); b4 and b6 are not rows here:
opus has no register form of 4/6-bit elements.
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import OnlyOn
from .warp_access import WarpAccess, access_table

__all__ = ["ROWS", "INSTRUCTIONS", "ds_read_tr_source", "ds_read_tr", "WAVE", "BLOCK"]

WAVE = 64
BLOCK = 16  # lanes that exchange data in one transposing read


def ds_read_tr_source(bits):
    """source(lane, i) -> (address lane, element of its row) of ds_read_b64_tr_b<bits>."""
    n = 64 // bits
    step = BLOCK // n

    def source(lane, i):
        b, c = lane // BLOCK, lane % BLOCK
        return BLOCK * b + step * i + c // n, c % n
    return source


@dataclass(frozen=True)
class DsReadTrBuiltin:
    """HIP for one transposing read: the clang builtin on the lane's address cast to an LDS
    (address space 3) pointer, its 64-bit result bit-cast to opus' register vector."""
    builtin: str
    ctype: str
    n: int

    def __call__(self, row, ops, res, attrs):
        p, off = ops[:2]
        (d,) = res
        return [
            "{",
            f"  typedef {self.ctype} opus_tr_t __attribute__((ext_vector_type({self.n})));",
            f"  {d} = __builtin_bit_cast(decltype({d}), {self.builtin}("
            f"(__attribute__((address_space(3))) opus_tr_t*)({p} + {off})));",
            "}",
        ]


def ds_read_tr(bits, builtin, ctype, n) -> WarpAccess:
    return WarpAccess(
        name=f"amd.ds_read_b64_tr_b{bits}", family="ds_read_tr", kind="load", bits=bits,
        warp=WAVE, rows=WAVE, vec=64 // bits, elems=64 // bits, source=ds_read_tr_source(bits),
        available=OnlyOn("gfx950"), requires="gfx950", isa=f"ds_read_b64_tr_b{bits}",
        lowering={"hip": DsReadTrBuiltin(builtin, ctype, n)})


ROWS = (
    ds_read_tr(16, "__builtin_amdgcn_ds_read_tr16_b64_v4i16", "short", 4),
    ds_read_tr(8, "__builtin_amdgcn_ds_read_tr8_b64_v2i32", "int", 2),
)
INSTRUCTIONS = access_table(ROWS)
