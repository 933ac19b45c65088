"""NVIDIA warp-level matrix instructions (mma.sync): the table of rows, the family's lane
layout and its PTX lowering. The rest of each atom (types, availability, emulation) is the
vendor-neutral ``matrix.MatrixAtom``.

The table (PTX ISA 9.7.14.5.14 "mma", its syntax, type restrictions and Target ISA Notes):
  m16n8k8, m16n8k16   f16 x f16 -> f32 or f16, bf16 x bf16 -> f32             sm_80+
  m16n8k4, m16n8k8    tf32 x tf32 -> f32 (f32 registers, see Numerics)         sm_80+
  m16n8k16, m16n8k32  s8/u8 x s8/u8 -> s32, all four pairings                  sm_80+
  m16n8k32            e4m3/e5m2 x e4m3/e5m2 -> f32 or f16, all four pairings   sm_89+
(PTX has m16n8k8 f16 from sm_75; opus' NVIDIA targets start at sm_80.) ``make_mma`` keys a row
by (A, B, C, shape): ``make_mma(opus.i8, opus.u8, opus.i32, (16, 8, 32))``,
``make_mma(opus.tf32, opus.tf32, opus.f32, (16, 8, 8))``.

Lane layout, from the PTX ISA's "Matrix Fragments for mma.m16n8k*" tables: with g = lane // 4,
t = lane % 4, p = 4 / sizeof(A's element) elements per 32-bit register (1 for tf32, 2 for
16-bit, 4 for 8-bit types), and register element i = r * p + j (register r, position j in it):
  A (16 x k):  row g + 8*(r % 2),        col p*t + j + 4p*(r // 2)
  B (k x 8):   row (k) p*t + j + 4p*r,   col (n) g
  C/D (16x8):  row g + 8*(i // 2),       col 2t + i % 2          (f16 C/D: two per register)
For m16n8k16 with 16-bit inputs (p = 2): A is a0..a7 at (g + 8*((i//2)%2), 2t + i%2 + 8*(i//4)),
B is b0..b3 at (2t + i%2 + 8*(i//2), g). The same rule is every fragment table of the family
(tf32 m16n8k4/k8, 16-bit k8/k16, 8-bit k16/k32), so they are rows of one table.

Numerics (PTX "Precision and rounding"; the emulation is matrix.MatrixAtom's):
  - integers: exact products and sums; the s32 accumulator wraps modulo 2^32 (the rows have no
    ``.satfinite``, which would clamp instead): the emulation is bit-exact.
  - tf32: the operands are f32 registers passed unchanged; PTX leaves the tf32 layout of a .b32
    register implementation-defined and offers cvt.rna.tf32.f32 to round into it. NVIDIA's tensor
    cores (sm_80..sm_90) read the sign, exponent and top 10 mantissa bits and ignore the low 13,
    i.e. truncate toward zero; the emulation does the same (NaN stays NaN). To round to nearest
    instead, round the f32 values before the atom.
  - f16/bf16/fp8: every product is exact in f32; PTX accumulates "with at least single
    precision" (f16 C/D: "at least half precision") in an unspecified order. The emulation sums
    exactly and rounds once to C's type, so the hardware agrees within the accumulation's
    roundings, not bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from .base import Since
from .matrix import (MatrixAtom, LaneLayout, OperandLayout, Numerics, EXACT, instruction_table,
                     atom_index, require_accumulator)

__all__ = ["ROWS", "INSTRUCTIONS", "ATOMS", "mma_sync", "tf32_operand_values"]

# PTX type names of the element types mma.sync takes
_PTX_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "tf32": "tf32", "fp8_e4m3": "e4m3",
             "fp8_e5m2": "e5m2", "i8": "s8", "u8": "u8", "i32": "s32"}
# inline-asm constraint of an accumulator register: f32 and s32 one element each, f16 two per
# 32-bit register (packed like A and B)
_ACC_CONSTRAINT = {"f32": "f", "i32": "r", "f16": "r"}


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
    per register, the first in the low bits; tf32's f32 registers by their bits), likewise an
    f16 C, then one inline-asm ``mma.sync`` (an f16 D is unpacked from its registers)."""

    def check(self, atom):
        if atom.a.itemsize != atom.b.itemsize or atom.a.itemsize not in (1, 2, 4):
            raise ValueError(f"matrix atom {atom.name!r}: mma.sync packing takes 8-, 16- or "
                             f"32-bit A and B elements of one size, got {atom.a.name} and "
                             f"{atom.b.name}")
        require_accumulator(atom, _ACC_CONSTRAINT, "mma.sync")

    def __call__(self, atom, ops, res, attrs):
        a, b, c = ops
        (d,) = res
        p = 4 // atom.a.itemsize       # A/B elements per 32-bit register
        q = 4 // atom.c.itemsize       # C/D elements per 32-bit register
        na, nb, nc = atom.elem_a // p, atom.elem_b // p, atom.elem_c // q
        lines = ["{"]
        packed = [("a", a, atom.elem_a, atom.reg_a, p), ("b", b, atom.elem_b, atom.reg_b, p)]
        if q > 1:
            packed.append(("c", c, atom.elem_c, atom.c, q))
        for name, src, elems, dtype, per in packed:
            for r in range(elems // per):
                lines.append(f"  unsigned {name}{r} = {_packed(src, elems, dtype, r, per)};")
        acc = _ACC_CONSTRAINT[atom.c.name]
        if q > 1:  # D through packed registers, unpacked after the instruction
            lines.append(f"  unsigned {', '.join(f'd{r}' for r in range(nc))};")
            d_regs, c_regs = [f"d{r}" for r in range(nc)], [f"c{r}" for r in range(nc)]
        else:
            d_regs = c_regs = None
        outs = ", ".join(f'"={acc}"({x})' for x in (d_regs or [f"{d}.v[{i}]" for i in range(nc)]))
        ins = ", ".join([f'"r"(a{r})' for r in range(na)] + [f'"r"(b{r})' for r in range(nb)]
                        + [f'"{acc}"({x})' for x in (c_regs or [f"{c}.v[{i}]" for i in range(nc)])])
        k = 0

        def regs(n):
            nonlocal k
            s = "{" + ", ".join(f"%{k + j}" for j in range(n)) + "}"
            k += n
            return s
        dr, ar, br, cr = regs(nc), regs(na), regs(nb), regs(nc)
        lines.append(f'  asm volatile("{atom.isa} {dr}, {ar}, {br}, {cr};" : {outs} : {ins});')
        if q > 1:
            bits = 32 // q
            for i in range(atom.elem_c):
                lines.append(f"  {d}.v[{i}] = (unsigned short)(d{i // q} >> {bits * (i % q)});")
        lines.append("}")
        return lines


def _packed(src, elems, dtype, r, p):
    """C expression of 32-bit register ``r`` holding elements p*r .. p*r+p-1 of ``src`` (a
    vector of ``elems``, or a scalar for one)."""
    elem = (lambda i: src) if elems == 1 else (lambda i: f"{src}.v[{i}]")
    if dtype.bits == 32:  # tf32 operands: the f32 register's bits as they are
        return f"__float_as_uint({elem(r)})"
    bits = 8 * dtype.itemsize
    # a signed element would sign-extend into its neighbours' bits: widen it as unsigned
    widen = "(unsigned)" if dtype.kind != "int" else f"(unsigned)(unsigned {'char' if bits == 8 else 'short'})"
    terms = [f"{widen}{elem(p * r)}"]
    terms += [f"({widen}{elem(p * r + j)} << {bits * j})" for j in range(1, p)]
    return " | ".join(terms)


def tf32_operand_values(x):
    """f32 values (float64 array) as the tensor cores read them in a .tf32 operand: the low 13
    mantissa bits dropped (truncation toward zero; infinities unchanged, NaN stays NaN)."""
    import numpy as np
    x = np.asarray(x, np.float64)
    bits = x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return np.where(np.isnan(x), x, bits.view(np.float32).astype(np.float64))


_TF32 = Numerics(inputs=tf32_operand_values,
                 note="f32 registers read as tf32: the low 13 mantissa bits are ignored (truncated)")


def mma_sync(m, n, k, ab, c, available, b=None) -> MatrixAtom:
    """One mma.sync row: ``m``x``n``x``k``, A of type ``ab``, B of type ``b`` (default ``ab``),
    C/D of type ``c``."""
    if (m, n) != (16, 8):
        raise ValueError(f"mma.sync m{m}n{n}k{k}: the lane layout here is the m16n8k* family's; "
                         "another family needs its own layout rule in nv_mma.py")
    a, b = ab, (ab if b is None else b)
    for x in (a, b, c):
        if x.name not in _PTX_TYPE:
            raise ValueError(f"mma.sync m{m}n{n}k{k}: no PTX type for {x.name} (mma.sync types "
                             f"here: {', '.join(sorted(_PTX_TYPE.values()))})")
    types = ".".join(_PTX_TYPE[x.name] for x in (c, a, b, c))
    name = f"nv.mma.m{m}n{n}k{k}.{a.name}." + (f"{b.name}." if b is not a else "") + c.name
    return MatrixAtom(
        name=name, shape=(m, n, k), a=a, b=b, c=c, warp=32,
        layout=m16n8_layout(a, k), available=available, lowering={"cuda": MmaSyncAsm()},
        isa=f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{types}",
        numerics=_TF32 if a is dt.tf32 else EXACT)


_SM80, _SM89 = Since("sm_80"), Since("sm_89")
_INT8 = (dt.i8, dt.u8)
_FP8 = (dt.fp8_e4m3, dt.fp8_e5m2)

# One row per instruction: (m, n, k), A type, C/D type, the chips that have it (, B type).
ROWS = (
    # f16 with f32 or f16 accumulators, bf16 with f32 (PTX: .bf16 takes .f32 C/D only)
    *(mma_sync(16, 8, k, ab, c, _SM80) for k in (16, 8)
      for ab, c in ((dt.bf16, dt.f32), (dt.f16, dt.f32), (dt.f16, dt.f16))),
    # tf32: f32 registers, read as tf32 (module docstring: Numerics)
    *(mma_sync(16, 8, k, dt.tf32, dt.f32, _SM80) for k in (4, 8)),
    # 8-bit integers, every signedness pairing, s32 accumulators that wrap
    *(mma_sync(16, 8, k, a, dt.i32, _SM80, b=b) for k in (16, 32) for a in _INT8 for b in _INT8),
    # fp8 (PTX ISA 8.4, f16 C/D 8.7), every pairing, sm_89 and later
    *(mma_sync(16, 8, 32, a, c, _SM89, b=b) for c in (dt.f32, dt.f16) for a in _FP8 for b in _FP8),
)
INSTRUCTIONS = instruction_table(ROWS)
ATOMS = atom_index(ROWS)
