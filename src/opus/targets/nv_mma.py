"""NVIDIA warp-level matrix instructions (mma.sync): the table of rows, the family's lane
layout and its PTX lowering. The rest of each atom (types, availability, emulation) is the
vendor-neutral ``matrix.MatrixAtom``.

Lane layout, from the PTX ISA's "Matrix Fragments for mma.m16n8k*" tables: with g = lane // 4,
t = lane % 4, p = 4 / sizeof(A's element) elements per 32-bit register, and register element
i = r * p + j (register r, position j in it):
  A (16 x k):  row g + 8*(r % 2),        col p*t + j + 4p*(r // 2)
  B (k x 8):   row (k) p*t + j + 4p*r,   col (n) g
  C/D (16x8):  row g + 8*(i // 2),       col 2t + i % 2          (32-bit accumulators)
For m16n8k16 with 16-bit inputs (p = 2): A is a0..a7 at (g + 8*((i//2)%2), 2t + i%2 + 8*(i//4)),
B is b0..b3 at (2t + i%2 + 8*(i//2), g). The same rule covers m16n8k8 (f16), m16n8k32 (8-bit)
and m16n8k16 (8-bit), so those are rows of this table.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from .base import Since
from .matrix import MatrixAtom, LaneLayout, OperandLayout, instruction_table, atom_index, require_accumulator

__all__ = ["ROWS", "INSTRUCTIONS", "ATOMS", "mma_sync"]

# PTX type names of the element types mma.sync takes
_PTX_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2",
             "i8": "s8", "u8": "u8", "i32": "s32"}
# inline-asm constraint of a 32-bit accumulator register
_ACC_CONSTRAINT = {"f32": "f", "i32": "r"}


def m16n8_layout(a, k) -> LaneLayout:
    """The lane layout of mma.sync m16n8k* for A/B elements of type ``a`` (see the docstring),
    in x/p/y form (PTX ISA, "Matrix Fragments for mma.m16n8k*": groupID g = lane // 4 and
    threadID_in_group t = lane % 4 are the p-coordinates of every operand)."""
    p = 4 // a.itemsize  # elements per 32-bit register
    kb = k // (4 * p)     # k blocks of 4 registers' width: 1 (k8 f16, k16 i8) or 2

    def gt(lane):  # PTX's groupID and threadID_in_group
        return lane // 4, lane % 4
    # A (16 x k): row = 8 * h + g, k = 4p * kk + p * t + e; registers (kk, h, e): i = (kk*2 + h)*p + e
    if kb == 2:
        lay_a = OperandLayout((2, 8, 2, 4, p), (("y", "p"), ("y", "p", "y")), gt, y_order=(1, 0, 2))
    else:
        lay_a = OperandLayout((2, 8, 4, p), (("y", "p"), ("p", "y")), gt)
    # B (n = 8, k): n = g, k = 4p * kk + p * t + e; registers (kk, e)
    lay_b = OperandLayout((8, kb, 4, p), (("p",), ("y", "p", "y")), gt)
    # C (16 x 8): row = 8 * h + g, col = 2 * t + e; registers (h, e)
    lay_c = OperandLayout((2, 8, 4, 2), (("y", "p"), ("p", "y")), gt)
    return LaneLayout.from_operands(lay_a, lay_b, lay_c)


@dataclass(frozen=True)
class MmaSyncAsm:
    """CUDA C++ for one mma.sync: pack A's and B's elements into 32-bit registers (4 / size
    per register, the first in the low bits), then one inline-asm ``mma.sync``."""

    def check(self, atom):
        if atom.a.itemsize != atom.b.itemsize or atom.a.itemsize not in (1, 2):
            raise ValueError(f"matrix atom {atom.name!r}: mma.sync packing takes 8- or 16-bit A "
                             f"and B elements of one size, got {atom.a.name} and {atom.b.name}")
        require_accumulator(atom, _ACC_CONSTRAINT, "mma.sync")

    def __call__(self, atom, ops, res, attrs):
        a, b, c = ops
        (d,) = res
        p = 4 // atom.a.itemsize
        na, nb, nc = atom.elem_a // p, atom.elem_b // p, atom.elem_c
        lines = ["{"]
        for name, src, n, dtype in (("a", a, na, atom.a), ("b", b, nb, atom.b)):
            for r in range(n):
                lines.append(f"  unsigned {name}{r} = {_packed(src, dtype, r, p)};")
        acc = _ACC_CONSTRAINT[atom.c.name]
        outs = ", ".join(f'"={acc}"({d}.v[{i}])' for i in range(nc))
        ins = ", ".join([f'"r"(a{r})' for r in range(na)] + [f'"r"(b{r})' for r in range(nb)]
                        + [f'"{acc}"({c}.v[{i}])' for i in range(nc)])
        k = 0

        def regs(n):
            nonlocal k
            s = "{" + ", ".join(f"%{k + j}" for j in range(n)) + "}"
            k += n
            return s
        dr, ar, br, cr = regs(nc), regs(na), regs(nb), regs(nc)
        lines.append(f'  asm volatile("{atom.isa} {dr}, {ar}, {br}, {cr};" : {outs} : {ins});')
        lines.append("}")
        return lines


def _packed(src, dtype, r, p):
    """C expression of 32-bit register ``r`` holding elements p*r .. p*r+p-1 of ``src``."""
    bits = 8 * dtype.itemsize
    # a signed element would sign-extend into its neighbours' bits: widen it as unsigned
    widen = "(unsigned)" if dtype.kind != "int" else f"(unsigned)(unsigned {'char' if bits == 8 else 'short'})"
    terms = [f"{widen}{src}.v[{p * r}]"]
    terms += [f"({widen}{src}.v[{p * r + j}] << {bits * j})" for j in range(1, p)]
    return " | ".join(terms)


def mma_sync(m, n, k, ab, c, available) -> MatrixAtom:
    """One mma.sync row: ``m``x``n``x``k``, A and B of type ``ab``, C/D of type ``c``."""
    if (m, n) != (16, 8):
        raise ValueError(f"mma.sync m{m}n{n}k{k}: the lane layout here is the m16n8k* family's; "
                         "another family needs its own layout rule in nv_mma.py")
    types = ".".join(_PTX_TYPE[x.name] for x in (c, ab, ab, c))
    return MatrixAtom(
        name=f"nv.mma.m{m}n{n}k{k}.{ab.name}.{c.name}", shape=(m, n, k), a=ab, b=ab, c=c, warp=32,
        layout=m16n8_layout(ab, k), available=available, lowering={"cuda": MmaSyncAsm()},
        isa=f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{types}")


# One row per instruction: (m, n, k), A/B type, C/D type, the chips that have it.
ROWS = (
    mma_sync(16, 8, 16, dt.bf16, dt.f32, Since("sm_80")),
    mma_sync(16, 8, 16, dt.f16, dt.f32, Since("sm_80")),
)
INSTRUCTIONS = instruction_table(ROWS)
ATOMS = atom_index(ROWS)
