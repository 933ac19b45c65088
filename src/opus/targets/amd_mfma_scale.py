"""gfx950's block-scaled f8f6f4 MFMAs (CDNA4): ``v_mfma_scale_f32_16x16x128_f8f6f4`` and
``v_mfma_scale_f32_32x32x64_f8f6f4`` as rows of the AMD atom table, one row per (A format,
B format, shape): 5 x 5 x 2 = 50 rows, gfx950 only.

Semantics (CDNA4 ISA Reference Guide, chapter 7 "Matrix Arithmetic Instructions"; clang
BuiltinsAMDGPU.def ``__builtin_amdgcn_mfma_scale_f32_{16x16x128,32x32x64}_f8f6f4(a, b, c,
cbsz, blgp, opsel_a, scale_a, opsel_b, scale_b)``; the AMD ROCm blog "Matrix Core Programming
on AMD CDNA3 and CDNA4 architecture" (2025) section 5.4/5.5)::

    D[m][n] = C[m][n] + sum_b  Xa[m][b] * Xb[b][n] * sum_{k in block b} A[m][k] * B[k][n]

with K blocks b of 32 elements (4 blocks for K = 128, 2 for K = 64) and X = 2^(e - 127) of an
E8M0 scale byte e (255: NaN). "The scales are applied after the normal dot product and prior
to output/accumulation" (the blog).

Operand formats (cbsz for A, blgp for B; the same codes for both): 0 fp8 E4M3, 1 bf8 E5M2,
2 fp6 E2M3, 3 bf6 E3M2, 4 fp4 E2M1 (OCP encodings; LLVM's verifier refuses codes above 4).
Each lane holds 32 elements of A (and of B): 32 bytes (8 VGPRs) for fp8/bf8, 24 bytes (6) for
fp6, 16 bytes (4) for fp4 (LLVM's assembler: "wrong register tuple size for cbsz value 2" for
anything but 6 VGPRs of fp6). The builtin takes each as ``int __attribute__((ext_vector_type
(8)))``; the compiler reads the first 6 or 4 registers for fp6 / fp4, so opus' 24- and
16-byte packed vectors travel zero-padded.

Lane layout (X = M for A, N for B; lane group g = lane // X, 64 / X groups):
  fp8/bf8, fp6: two runs of 16 K-consecutive elements per lane, element i = 16 r + j at
                k = r * (16 * 64 / X) + 16 g + j: 32x32x64 k = 32 r + 16 g + j (the blog's
                figure 9 and kernel), 16x16x128 k = 64 r + 16 g + j.
  fp4:          32 K-consecutive elements per lane, element i at k = 32 g + i (the blog's
                figure 10 and kernel).
  C/D:          as every 16x16 / 32x32 MFMA.
Scales: each lane's 32-bit scale register holds 4 E8M0 bytes; opsel (0..3) picks the byte
(opsel_a: OPSEL[0] and OPSEL_HI[0] of the encoding). Lane l's byte is the scale of row
m = l % M of A and K block b = l // M (B: column n = l % N, block b = l // N): lanes 0..15 the
first 32 K of rows 0..15 on 16x16x128, lanes 32..63 the second 32 K on 32x32x64 (the blog's
"Ax of size 32x2, each thread stores 1 entry"; Triton's chooseScaledMfmaScaleLayout, whose
fp8/fp6 note says a lane's two 16-element runs belong to two scale blocks held by other lanes).

Emulation: A, B decoded exactly (ml_dtypes) to float64, each block's dot product in float64,
scaled by the two powers of two (exact in float64: 2^-254 .. 2^254), the blocks and C summed
in float64 and rounded once to f32. The hardware's internal accumulation width is not
documented; fp4/fp6 products and their 32-term sums are exact in float64, fp8 ones in all but
pathological exponent spreads, so the emulation is the exact result within f32 rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from ..ir import VectorType
from .base import OnlyOn
from .matrix import MatrixAtom, LaneLayout, OperandLayout, Numerics, operand_type

__all__ = ["ROWS", "FORMAT_CODE", "SHAPES", "SCALE_BLOCK", "ScaledMfmaAtom", "scaled_layout",
           "scale_types"]

# cbsz / blgp codes of the operand formats (the ISA's and clang's)
FORMAT_CODE = {"fp8_e4m3": 0, "fp8_e5m2": 1, "fp6_e2m3": 2, "fp6_e3m2": 3, "fp4_e2m1": 4}
_FORMATS = (dt.fp8_e4m3, dt.fp8_e5m2, dt.fp6_e2m3, dt.fp6_e3m2, dt.fp4_e2m1)
SHAPES = ((16, 16, 128), (32, 32, 64))
SCALE_BLOCK = 32          # K elements per E8M0 scale
_WAVE = 64
_BUILTIN = "__builtin_amdgcn_mfma_scale_f32_{m}x{n}x{k}_f8f6f4"
_OPERAND_BYTES = 32       # the builtin's v8i32 A/B operands


def scale_types():
    """The register types a scale operand may have: one E8M0 (opsel 0) or four packed in the
    32-bit register (opsel picks one)."""
    return (dt.e8m0, VectorType(dt.e8m0, 4))


def _run(d):
    """K-consecutive elements per run of a lane's registers: 32 for fp4, 16 for fp8 and fp6."""
    return 32 if d.bits == 4 else 16


def _operand(x, k, d):
    """A (x = m) or B (x = n) as (x, k) = [(x p), (runs y, groups p, run y)]."""
    run = _run(d)
    return OperandLayout((x, 32 // run, _WAVE // x, run), (("p",), ("y", "p", "y")),
                         lambda lane: (lane % x, lane // x))


def scaled_layout(m, n, k, a, b) -> LaneLayout:
    """The lane layout of one scaled MFMA: A and B by their formats (module docstring), C as
    every MFMA's (4 consecutive rows per lane group, l % n the column)."""
    ec = m * n // _WAVE
    pc = min(4, ec)
    c = OperandLayout((ec // pc, _WAVE // n, pc, n), (("y", "p", "y"), ("p",)),
                      lambda lane: (lane // n, lane % n))
    return LaneLayout.from_operands(_operand(m, k, a), _operand(n, k, b), c)


@dataclass(frozen=True)
class ScaledMfmaBuiltin:
    """The HIP lowering: operands (A, B, C, scale_a, scale_b), attrs ``opsel_a``/``opsel_b``
    (0..3) and ``scale_a_x4``/``scale_b_x4`` (the scale is an e8m0x4 register, else one e8m0).
    A and B are bit-cast to the builtin's v8i32, fp6/fp4 zero-padded to 32 bytes; the formats
    are the row's cbsz/blgp."""
    builtin: str

    def __call__(self, atom, ops, res, attrs):
        a, b, c, sa, sb = ops
        (d,) = res
        lines = ["{",
                 "  typedef int opus_mfma_ab __attribute__((ext_vector_type(8)));",
                 f"  typedef float opus_mfma_c __attribute__((ext_vector_type({atom.elem_c})));"]
        args = []
        for what, x, dtype in (("a", a, atom.a), ("b", b, atom.b)):
            pad = (_OPERAND_BYTES - dtype.nbytes(32)) // 4
            if pad:
                lines.append(f"  struct opus_mfma_{what}pad {{ decltype({x}) v; unsigned z[{pad}]; }};")
                args.append(f"__builtin_bit_cast(opus_mfma_ab, opus_mfma_{what}pad{{{x}, {{}}}})")
            else:
                args.append(f"__builtin_bit_cast(opus_mfma_ab, {x})")
        scale = [f"__builtin_bit_cast(int, {s})" if attrs.get(f"scale_{w}_x4") else f"(int){s}"
                 for w, s in (("a", sa), ("b", sb))]
        fa, fb = atom.formats
        lines.append(f"  {d} = __builtin_bit_cast(decltype({d}), {self.builtin}({args[0]}, "
                     f"{args[1]}, __builtin_bit_cast(opus_mfma_c, {c}), {fa}, {fb}, "
                     f"{attrs.get('opsel_a', 0)}, {scale[0]}, {attrs.get('opsel_b', 0)}, "
                     f"{scale[1]}));")
        lines.append("}")
        return lines


_NUMERICS = Numerics(note="A and B exact, each 32-wide K block's dot product scaled by "
                     "2^(scale_a - 127) * 2^(scale_b - 127), blocks and C summed exactly, one "
                     "rounding to f32")


@dataclass(frozen=True, eq=False, repr=False)
class ScaledMfmaAtom(MatrixAtom):
    """A block-scaled MFMA row: a MatrixAtom whose IR op takes two more operands, the E8M0
    scales of A and B (one e8m0 or four packed in an e8m0x4 register, ``opsel_a``/``opsel_b``
    picking one); make_mma(..., scaled=True) asks for it (its ``key`` ends in 'scaled')."""
    scaled = True

    @property
    def key(self):
        return super().key + ("scaled",)

    @property
    def summary(self):
        """The family in one entry of a "no matrix instruction" error's list."""
        return (f"{'/'.join(FORMAT_CODE)} (any pairing)->f32 {self.m}x{self.n}x{self.k} "
                f"scaled")

    @property
    def formats(self):
        """(cbsz, blgp): the A and B format codes."""
        return FORMAT_CODE[self.a.name], FORMAT_CODE[self.b.name]

    def result_types(self, operand_types, attrs):
        want = [operand_type(self.reg_a, self.elem_a), operand_type(self.reg_b, self.elem_b),
                operand_type(self.c, self.elem_c)]
        got = list(operand_types)
        scales = scale_types()
        opsel = [attrs.get(f"opsel_{w}", 0) for w in "ab"]
        if (len(got) != 5 or got[:3] != want or any(t not in scales for t in got[3:])
                or any(o not in range(4 if t != dt.e8m0 else 1) for o, t in zip(opsel, got[3:]))):
            raise TypeError(f"scaled mma {self.m}x{self.n}x{self.k} takes ({', '.join(map(repr, want))}, "
                            f"scale_a, scale_b of e8m0 (opsel 0) or e8m0x4 (opsel 0..3)), got "
                            f"({', '.join(map(repr, got))}) with {dict(attrs)}")
        return [want[2]]

    def _products(self, A, B, ks, extra, attrs):
        """Per 32-wide K block: the block's dot product times its two scales (X[m][b], X[b][n]),
        summed over the blocks (module docstring)."""
        sa, sb = (self._scales(x, attrs.get(f"opsel_{w}", 0)) for x, w in zip(extra, "ab"))
        W = A.shape[0]
        nb = self.k // SCALE_BLOCK
        Xa = sa.reshape(W, nb, self.m).transpose(0, 2, 1)   # lane b*M + m -> [w, m, b]
        Xb = sb.reshape(W, nb, self.n)                       # lane b*N + n -> [w, b, n]
        out = 0.0
        for blk in range(nb):
            kb = slice(blk * SCALE_BLOCK, (blk + 1) * SCALE_BLOCK)
            out = out + (A[:, :, kb] @ B[:, kb, :]) * Xa[:, :, blk, None] * Xb[:, None, blk, :]
        return out

    def _scales(self, x, opsel):
        """[threads] float64 scales 2^(e-127) (NaN for 255) of each lane's selected byte."""
        import numpy as np
        x = np.asarray(x)
        col = x[:, opsel] if x.shape[1] > 1 else x[:, 0]
        return col.astype(np.float64).reshape(-1, self.warp)


def _row(a, b, shape):
    m, n, k = shape
    builtin = _BUILTIN.format(m=m, n=n, k=k)
    return ScaledMfmaAtom(
        name=f"amd.mfma_scale.f32.{m}x{n}x{k}.{a.name}_{b.name}", shape=shape, a=a, b=b,
        c=dt.f32, warp=_WAVE, layout=scaled_layout(m, n, k, a, b), available=OnlyOn("gfx950"),
        lowering={"hip": ScaledMfmaBuiltin(builtin)},
        isa=f"v_mfma_scale_f32_{m}x{n}x{k}_f8f6f4", numerics=_NUMERICS)


ROWS = tuple(_row(a, b, shape) for shape in SHAPES for a in _FORMATS for b in _FORMATS)
