"""AMD CDNA matrix instructions (MFMA, wave64): the table of rows, the family's lane layout and
its HIP lowering. The rest of each atom (types, availability, emulation) is the vendor-neutral
``matrix.MatrixAtom``.

Lane layout (the original opus ``mfma_adaptor``, inventory section 1.18), W = 64 lanes,
elem_x = (rows * cols) / W elements per lane, pack_x = min(16 / sizeof(x), elem_x),
register index i = r * pack + j:
  A (M x K):              row m = l mod M,  col k = r*(grpk*pack_a) + (l div M)*pack_a + j,
                          grpk = W / M
  B (stored N x K):       n = l mod N,      k as for A (grpk = W / N)
  C (M x N):              col n = l mod N,  row m = r*(grpm_c*pack_c) + (l div N)*pack_c + j,
                          grpm_c = W / N
``coords_a`` returns (m, k), ``coords_b`` returns (k, n) (B is indexed as the K x N operand, as
for every atom), ``coords_c`` returns (m, n).

Concretely for v_mfma_f32_32x32x8_f16: A[l%32][4*(l//32)+j], B[4*(l//32)+j][l%32],
C[8r + 4*(l//32) + j][l%32] (c register 4r + j).

The table (``ROWS``) holds every dense single-block MFMA of CDNA3 (gfx942) and CDNA4 (gfx950):
  f32      32x32x2, 16x16x4                        both chips
  f16/bf16 32x32x8, 16x16x16 (bf16: the _1k forms)  both chips
  f16/bf16 32x32x16, 16x16x32                       gfx950 native; gfx942 two chained halves
  fp8/bf8  32x32x16, 16x16x32, all four pairings    gfx942 FNUZ encodings, gfx950 OCP
  i8 -> i32 32x32x16, 16x16x32                      both; gfx950 also 32x32x32, 16x16x64
  xf32     32x32x4, 16x16x8 (f32 inputs kept to 10  gfx942 only (CDNA4 removed them)
           mantissa bits)
Left out: the multi-block forms (32x32x1/x4 2-block, 16x16x1/x4 4-block, 4x4 16-block f32,
f16, bf16 and i8): each block is an independent small product over a subset of the lanes
selected by cbsz/abid/blgp broadcasts, which the (m, n, k) adaptor model (one operand tile per
wave, inventory 1.18) does not describe; f64 (not in this issue's list); the sparse SMFMAC
forms. gfx950's block-scaled f8f6f4 family (v_mfma_scale_f32_32x32x64_f8f6f4 and
_16x16x128_f8f6f4: fp8/bf8/fp6/bf6/fp4 operands in any pairing, e8m0 scales) is
``amd_mfma_scale.ROWS``, appended to the table: ``make_mma(..., scaled=True)`` asks for it.

gfx942's STEP_K rows (f16/bf16 32x32x16 and 16x16x32, as the original's ``mfma``): the lane
layout is the adaptor's for the large K (8 elements per lane, k = 8*(l//m) + j), and the
lowering issues the smaller instruction twice, the first half of each lane's A and B registers
to the first, the second half to the second, accumulating into the same C: step 0 covers
k = 8g + 0..3 and step 1 k = 8g + 4..7 of lane group g. D is rounded to f32 after each step
(``Numerics(k_steps=2)``).

Operand encodings of the builtins (clang's BuiltinsAMDGPU.def; opus.hpp DISPATCH_MFMA_8BIT):
f16 as _Float16 vectors, bf16_1k as short vectors, gfx950's bf16 as __bf16, fp8/bf8 and i8 as one
``long`` (8 x 8 bits) per lane, gfx950's 16-element i8 forms as 4 x int, f32 as scalar floats,
xf32 as 2 x float.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from .base import OnlyOn
from .matrix import (MatrixAtom, LaneLayout, OperandLayout, Numerics, EXACT, instruction_table,
                     atom_index, require_accumulator, round_mantissa)
from . import amd_mfma_scale

__all__ = ["ROWS", "INSTRUCTIONS", "ATOMS", "WAVE", "mfma", "mfma_layout", "MfmaBuiltin",
           "missing_reason"]

WAVE = 64

# the element type as the MFMA mnemonic spells it (v_mfma_f32_32x32x8_f16, ..._fp8_bf8)
_ISA_TYPE = {"f16": "f16", "bf16": "bf16", "f32": "f32", "i32": "i32", "i8": "i8",
             "fp8_e4m3fnuz": "fp8", "fp8_e5m2fnuz": "bf8", "fp8_e4m3": "fp8", "fp8_e5m2": "bf8"}
# the C type of one element of the builtin's operand vectors, by size in bytes
_CTYPE_SIZE = {"_Float16": 2, "__bf16": 2, "short": 2, "float": 4, "int": 4, "long": 8}
_ACC_CTYPE = {"f32": "float", "i32": "int"}


def _pack(dtype, elems):
    return min(16 // dtype.itemsize, elems)


def mfma_layout(m, n, k, a, b, c, warp=WAVE) -> LaneLayout:
    """The lane layout of one MFMA, per the adaptor rule above, in x/p/y form:
    A (m, k) = [(grpm p), (rept y, grpk p, pack y)], B (n, k) likewise with n,
    C (m, n) = [(rept y, grpm_c p, pack y), (grpn p)]; p-coordinates (lane % m, lane // m) for A,
    (lane % n, lane // n) for B, (lane // n, lane % n) for C (as every user of the original
    passes them)."""
    ea, eb, ec = m * k // warp, n * k // warp, m * n // warp
    pa, pb, pc = _pack(a, ea), _pack(b, eb), _pack(c, ec)
    gka, gkb, gmc = warp // m, warp // n, warp // n
    lay_a = OperandLayout((m, ea // pa, gka, pa), (("p",), ("y", "p", "y")),
                          lambda lane: (lane % m, lane // m))
    lay_b = OperandLayout((n, eb // pb, gkb, pb), (("p",), ("y", "p", "y")),
                          lambda lane: (lane % n, lane // n))
    lay_c = OperandLayout((ec // pc, gmc, pc, n), (("y", "p", "y"), ("p",)),
                          lambda lane: (lane // n, lane % n))
    return LaneLayout.from_operands(lay_a, lay_b, lay_c)


@dataclass(frozen=True)
class MfmaBuiltin:
    """One ``__builtin_amdgcn_mfma_*`` call (``steps`` > 1: that many chained calls, step s
    taking the s-th slice of each lane's A and B registers, the C of one the D of the last);
    operands are bit-cast from opus' register structs to the builtin's types (no data
    movement). ``operand``: the C element type of the builtin's A/B operand ('_Float16',
    'short' for bf16_1k, '__bf16', 'float', 'int', 'long' for 8 x 8 bits in one 64-bit
    operand); the vector length follows from the row's register size."""
    builtin: str
    operand: str
    steps: int = 1

    def check(self, atom):
        for what, d, elems in (("A", atom.a, atom.elem_a), ("B", atom.b, atom.elem_b)):
            if (elems * d.itemsize) % (_CTYPE_SIZE[self.operand] * self.steps):
                raise ValueError(f"matrix atom {atom.name!r}: {what}'s {elems} x {d.name} do not "
                                 f"fill whole {self.operand} elements of {self.steps} "
                                 f"{self.builtin}")
        if self.steps != atom.numerics.k_steps:
            raise ValueError(f"matrix atom {atom.name!r}: the lowering chains {self.steps} "
                             f"instructions, the numerics {atom.numerics.k_steps}")
        require_accumulator(atom, _ACC_CTYPE, "MFMA")

    def __call__(self, atom, ops, res, attrs):
        a, b, c = ops
        (d,) = res
        size, s = _CTYPE_SIZE[self.operand], self.steps
        lines = ["{",
                 _typedef(self.operand, "opus_mfma_a", atom.elem_a * atom.a.itemsize // size // s),
                 _typedef(self.operand, "opus_mfma_b", atom.elem_b * atom.b.itemsize // size // s),
                 _typedef(_ACC_CTYPE[atom.c.name], "opus_mfma_c", atom.elem_c)]
        if s == 1:
            lines.append(f"  {d} = __builtin_bit_cast(decltype({d}), {self.builtin}("
                         f"__builtin_bit_cast(opus_mfma_a, {a}), __builtin_bit_cast(opus_mfma_b, "
                         f"{b}), __builtin_bit_cast(opus_mfma_c, {c}), 0, 0, 0));")
        else:  # the registers as `s` consecutive operands of the smaller instruction
            lines += [f"  struct opus_mfma_as {{ opus_mfma_a h[{s}]; }};",
                      f"  struct opus_mfma_bs {{ opus_mfma_b h[{s}]; }};",
                      f"  opus_mfma_as a_ = __builtin_bit_cast(opus_mfma_as, {a});",
                      f"  opus_mfma_bs b_ = __builtin_bit_cast(opus_mfma_bs, {b});",
                      f"  opus_mfma_c acc_ = __builtin_bit_cast(opus_mfma_c, {c});"]
            lines += [f"  acc_ = {self.builtin}(a_.h[{h}], b_.h[{h}], acc_, 0, 0, 0);" for h in range(s)]
            lines.append(f"  {d} = __builtin_bit_cast(decltype({d}), acc_);")
        lines.append("}")
        return lines


def _typedef(ctype, name, n):
    if n == 1:  # a builtin taking one 64-bit operand (8-bit MFMA) takes a scalar, not a vector
        return f"  typedef {ctype} {name};"
    return f"  typedef {ctype} {name} __attribute__((ext_vector_type({n})));"


def mfma(ab, shape, builtin, operand, available, c=dt.f32, b=None, kind=None, steps=1,
         numerics=None) -> MatrixAtom:
    """One MFMA row: A of type ``ab`` (B of type ``b``, default ``ab``), shape (m, n, k), the
    builtin and its operand C type. ``kind`` overrides the mnemonic's input spelling ('xf32');
    ``steps`` > 1 chains that many of the builtin (STEP_K); ``numerics`` as matrix.Numerics."""
    m, n, k = shape
    b = ab if b is None else b
    if kind is not None:
        ins = kind
    elif ab.bits == 8 and ab.is_float:  # v_mfma_f32_32x32x16_fp8_bf8: both types spelled
        ins = f"{_ISA_TYPE[ab.name]}_{_ISA_TYPE[b.name]}"
    else:
        ins = _ISA_TYPE[ab.name]
    types = ab.name if b is ab else f"{ab.name}_{b.name}"
    if kind is not None:
        types = kind
    numerics = numerics or (Numerics(k_steps=steps, note=f"{steps} chained instructions, D rounded "
                                     "to f32 after each") if steps > 1 else EXACT)
    if steps > 1:  # the instruction issued: the smaller K, `steps` times
        isa_shape = f"{m}x{n}x{k // steps}"
    else:
        isa_shape = f"{m}x{n}x{k}"
    return MatrixAtom(
        name=f"amd.mfma.{c.name}.{m}x{n}x{k}.{types}" + (".step_k" if steps > 1 else ""),
        shape=(m, n, k), a=ab, b=b, c=c, warp=WAVE, layout=mfma_layout(m, n, k, ab, b, c),
        available=available, lowering={"hip": MfmaBuiltin(builtin, operand, steps)},
        isa=f"v_mfma_{_ISA_TYPE[c.name]}_{isa_shape}_{ins}", numerics=numerics)


def _fp8_rows(shapes, fp8, bf8, available):
    """The 8-bit float MFMAs in all four pairings (A fp8/bf8 x B fp8/bf8) of each shape; the
    builtin takes each lane's 8 values as one long (opus.hpp DISPATCH_MFMA_8BIT)."""
    names = {fp8: "fp8", bf8: "bf8"}
    return tuple(
        mfma(a, (m, n, k), f"__builtin_amdgcn_mfma_f32_{m}x{n}x{k}_{names[a]}_{names[b]}", "long",
             available, b=b)
        for m, n, k in shapes for a in (fp8, bf8) for b in (fp8, bf8))


_BOTH = OnlyOn("gfx942", "gfx950")
_GFX942 = OnlyOn("gfx942")
_GFX950 = OnlyOn("gfx950")
# xf32: f32 inputs rounded to 10 mantissa bits (the XF32 format of the CDNA3 ISA: 1 sign, 8
# exponent, 10 mantissa bits), products and sums as wide as the other MFMAs
_XF32 = Numerics(inputs=round_mantissa(10), note="A and B rounded to 10 mantissa bits (XF32), "
                 "to nearest even")

# One row per instruction, as opus.hpp's: A/B type, (m, n, k), builtin, its operand C type, chips.
ROWS = (
    mfma(dt.f32, (32, 32, 2), "__builtin_amdgcn_mfma_f32_32x32x2f32", "float", _BOTH),
    mfma(dt.f32, (16, 16, 4), "__builtin_amdgcn_mfma_f32_16x16x4f32", "float", _BOTH),
    mfma(dt.f16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8f16", "_Float16", _BOTH),
    mfma(dt.f16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16f16", "_Float16", _BOTH),
    mfma(dt.bf16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "short", _BOTH),
    mfma(dt.bf16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "short", _BOTH),
    mfma(dt.f16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_f16", "_Float16", _GFX950),
    mfma(dt.f16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_f16", "_Float16", _GFX950),
    mfma(dt.bf16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_bf16", "__bf16", _GFX950),
    mfma(dt.bf16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_bf16", "__bf16", _GFX950),
    # gfx942's STEP_K: the larger K as two chained instructions (opus.hpp's mfma)
    mfma(dt.f16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x8f16", "_Float16", _GFX942, steps=2),
    mfma(dt.f16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x16f16", "_Float16", _GFX942, steps=2),
    mfma(dt.bf16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "short", _GFX942, steps=2),
    mfma(dt.bf16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "short", _GFX942, steps=2),
    *_fp8_rows(((32, 32, 16), (16, 16, 32)), dt.fp8_e4m3fnuz, dt.fp8_e5m2fnuz, _GFX942),
    *_fp8_rows(((32, 32, 16), (16, 16, 32)), dt.fp8_e4m3, dt.fp8_e5m2, _GFX950),
    mfma(dt.i8, (32, 32, 16), "__builtin_amdgcn_mfma_i32_32x32x16_i8", "long", _BOTH, c=dt.i32),
    mfma(dt.i8, (16, 16, 32), "__builtin_amdgcn_mfma_i32_16x16x32_i8", "long", _BOTH, c=dt.i32),
    mfma(dt.i8, (32, 32, 32), "__builtin_amdgcn_mfma_i32_32x32x32_i8", "int", _GFX950, c=dt.i32),
    mfma(dt.i8, (16, 16, 64), "__builtin_amdgcn_mfma_i32_16x16x64_i8", "int", _GFX950, c=dt.i32),
    mfma(dt.tf32, (32, 32, 4), "__builtin_amdgcn_mfma_f32_32x32x4_xf32", "float", _GFX942,
         kind="xf32", numerics=_XF32),
    mfma(dt.tf32, (16, 16, 8), "__builtin_amdgcn_mfma_f32_16x16x8_xf32", "float", _GFX942,
         kind="xf32", numerics=_XF32),
) + amd_mfma_scale.ROWS  # gfx950's block-scaled f8f6f4 MFMAs (make_mma(..., scaled=True))
INSTRUCTIONS = instruction_table(ROWS)
ATOMS = atom_index(ROWS)

# Element types only the block-scaled f8f6f4 MFMAs read (fp8 e4m3/e5m2 also have dense rows)
_LOW_PRECISION = ("fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "e8m0")


def missing_reason(chip, a, b, c, shape, scaled=False):
    """Why (a, b, c, shape) has no row on ``chip`` beyond "the chip lacks it": the scaled
    f8f6f4 family (its formats, shapes, chip, and ``scaled=True``), a row another CDNA chip has
    (xf32 is gfx942's only, the double-K int8 gfx950's), or None."""
    f8f6f4 = {a.name, b.name} <= set(amd_mfma_scale.FORMAT_CODE)
    if scaled or {a.name, b.name} & set(_LOW_PRECISION) or (
            f8f6f4 and tuple(shape) in amd_mfma_scale.SHAPES):
        return _scaled_reason(chip, a, b, c, shape, scaled)
    key = (a.name, b.name, c.name, tuple(shape))
    elsewhere = [(sorted(r.available.names), r.isa) for r in ROWS if r.key == key]
    if not elsewhere:
        return None
    chips, isa = elsewhere[0]
    why = f"{isa} is an instruction of {' and '.join(chips)} only"
    if "xf32" in isa:
        why += " (CDNA4 removed the xf32 MFMAs: use f32 32x32x2 / 16x16x4 or bf16 inputs)"
    if a.bits == 8 and a.is_float:
        why += (f"; {chip}'s 8-bit float MFMAs read {_FP8_ENCODING[chip]} encodings "
                "(opus.fp8 / opus.bf8 name them on each chip)")
    return why


_FP8_ENCODING = {"gfx942": "FNUZ (fp8_e4m3fnuz, fp8_e5m2fnuz)", "gfx950": "OCP (fp8_e4m3, fp8_e5m2)"}


def _scaled_reason(chip, a, b, c, shape, scaled):
    """What is wrong with a request for (or of the element types of) a block-scaled MFMA."""
    formats = "/".join(amd_mfma_scale.FORMAT_CODE)
    shapes = " and ".join("x".join(map(str, s)) for s in amd_mfma_scale.SHAPES)
    family = (f"the block-scaled f8f6f4 MFMAs (v_mfma_scale_f32_16x16x128_f8f6f4, "
              f"v_mfma_scale_f32_32x32x64_f8f6f4) are gfx950 instructions")
    if chip != "gfx950":
        return f"{family}: {chip} has no such instruction"
    why = []
    bad = [x.name for x in (a, b) if x.name not in amd_mfma_scale.FORMAT_CODE]
    if bad:
        why.append(f"their A and B formats are {formats}, not {', '.join(bad)}"
                   + (" (e8m0 is the scales' type: scale_a=, scale_b= of the call)"
                      if "e8m0" in bad else ""))
    if c.name != "f32":
        why.append(f"they accumulate in f32, not {c.name}")
    if tuple(shape) not in amd_mfma_scale.SHAPES:
        why.append(f"their shapes are {shapes} (K = 32 elements per e8m0 scale times 4 or 2), "
                   f"not {'x'.join(map(str, shape))}")
    if not why and not scaled:
        why.append("ask for one with make_mma(..., scaled=True) and pass scale_a=, scale_b= "
                   "(e8m0, 127 = x1) to the call")
    return f"{family}; " + "; ".join(why) if why else None
