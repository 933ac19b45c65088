"""NVIDIA ldmatrix / stmatrix (m8n8, b16): the table of rows, the family's lane layout and its
PTX lowering. The rest of each row (emulation, self-check) is ``warp_access.WarpAccess``.

Lane layout, from the PTX ISA ("Warp-level matrix load instruction: ldmatrix", "... store
instruction: stmatrix"): ``.x1/.x2/.x4`` move 1/2/4 matrices of 8 x 8 16-bit elements; the rows
of matrix ``m`` are addressed by lanes 8m .. 8m+7 (lane 8m + r: row r, 16 contiguous bytes,
16-byte aligned; the other lanes' addresses are ignored). Each lane holds one 32-bit register
per matrix, elements i = 2m + j (j = 0 in the low half). With g = lane // 4, t = lane % 4:
  plain:   element 2m + j of lane l is row g,          column 2t + j of matrix m
  .trans:  element 2m + j of lane l is row 2t + j,     column g      of matrix m
stmatrix has the same layout in the other direction. So ldmatrix.x4 of a row-major 16 x 16 tile
(lane l addressing row l % 16, column 8 * (l // 16)) gives exactly mma.sync m16n8k16's A
fragment, and ldmatrix.x2.trans of a row-major 16 x 8 (k x n) tile its B fragment.

Availability: ldmatrix from sm_75, stmatrix from sm_90 (PTX ISA, "Target ISA notes").
"""
from __future__ import annotations

from dataclasses import dataclass

from .base import Since
from .warp_access import WarpAccess, access_table

__all__ = ["ROWS", "INSTRUCTIONS", "ldmatrix_source", "ldmatrix", "stmatrix", "NUMS"]

NUMS = (1, 2, 4)


def ldmatrix_source(trans):
    """source(lane, i) -> (address lane, element of its row) of ldmatrix/stmatrix (docstring)."""
    def source(lane, i):
        m, j = i // 2, i % 2
        g, t = lane // 4, lane % 4
        if trans:
            return 8 * m + 2 * t + j, g
        return 8 * m + g, 2 * t + j
    return source


@dataclass(frozen=True)
class MatrixAsm:
    """CUDA C++ for one ldmatrix / stmatrix: the lane's row address converted to a 32-bit
    shared-window address, one inline-asm instruction on 32-bit registers each holding two
    16-bit elements (the first in the low half)."""

    def __call__(self, row, ops, res, attrs):
        p, off = ops[:2]
        regs = row.elems // 2
        lines = ["{", f"  unsigned opus_sa = (unsigned)__cvta_generic_to_shared({p} + {off});"]
        names = [f"opus_r{k}" for k in range(regs)]
        first = 1 if row.kind == "store" else 0  # a store's %0 is the address
        regs_list = "{" + ", ".join(f"%{first + k}" for k in range(regs)) + "}"
        if row.kind == "load":
            (d,) = res
            lines.append(f"  unsigned {', '.join(names)};")
            outs = ", ".join(f'"=r"({n})' for n in names)
            lines.append(f'  asm volatile("{row.isa} {regs_list}, [%{regs}];" : {outs} : '
                         f'"r"(opus_sa) : "memory");')
            for k, n in enumerate(names):
                lines.append(f"  {d}.v[{2 * k}] = (unsigned short){n}; "
                             f"{d}.v[{2 * k + 1}] = (unsigned short)({n} >> 16);")
        else:
            value = ops[2]
            for k, n in enumerate(names):
                lines.append(f"  unsigned {n} = (unsigned)(unsigned short){value}.v[{2 * k}] | "
                             f"((unsigned)(unsigned short){value}.v[{2 * k + 1}] << 16);")
            ins = ", ".join(['"r"(opus_sa)'] + [f'"r"({n})' for n in names])
            lines.append(f'  asm volatile("{row.isa} [%0], {regs_list};" :: {ins} : "memory");')
        lines.append("}")
        return lines


def _row(family, kind, num, trans, available, requires):
    tr = ".trans" if trans else ""
    return WarpAccess(
        name=f"nv.{family}.x{num}{tr}.b16", family=family, kind=kind, bits=16, warp=32,
        rows=8 * num, vec=8, elems=2 * num, source=ldmatrix_source(trans), available=available,
        requires=requires, lowering={"cuda": MatrixAsm()},
        isa=f"{family}.sync.aligned.m8n8.x{num}{tr}.shared.b16")


def ldmatrix(num, trans) -> WarpAccess:
    return _row("ldmatrix", "load", num, trans, Since("sm_75"), "sm_75 or later")


def stmatrix(num, trans) -> WarpAccess:
    return _row("stmatrix", "store", num, trans, Since("sm_90"), "sm_90 or later")


ROWS = tuple(f(num, trans) for f in (ldmatrix, stmatrix) for num in NUMS for trans in (False, True))
INSTRUCTIONS = access_table(ROWS)
