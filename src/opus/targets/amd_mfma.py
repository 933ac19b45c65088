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
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from .base import OnlyOn
from .matrix import MatrixAtom, LaneLayout, OperandLayout, instruction_table, atom_index, require_accumulator

__all__ = ["ROWS", "INSTRUCTIONS", "ATOMS", "WAVE", "mfma", "mfma_layout"]

WAVE = 64

# the element type as the MFMA mnemonic spells it (v_mfma_f32_32x32x8_f16)
_ISA_TYPE = {"f16": "f16", "bf16": "bf16", "f32": "f32", "i32": "i32"}
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
    """One ``__builtin_amdgcn_mfma_*`` call; operands are bit-cast from opus' register structs
    to the builtin's ext-vector types (no data movement). ``operand``: the C element type of the
    builtin's A/B vectors ('_Float16', 'short' for bf16_1k, '__bf16', 'long' for 8 fp8 values
    in one 64-bit operand); the vector length follows from the row's register size."""
    builtin: str
    operand: str

    def check(self, atom):
        for what, d, elems in (("A", atom.a, atom.elem_a), ("B", atom.b, atom.elem_b)):
            if (elems * d.itemsize) % _CTYPE_SIZE[self.operand]:
                raise ValueError(f"matrix atom {atom.name!r}: {what}'s {elems} x {d.name} do not "
                                 f"fill whole {self.operand} elements of {self.builtin}")
        require_accumulator(atom, _ACC_CTYPE, "MFMA")

    def __call__(self, atom, ops, res, attrs):
        a, b, c = ops
        (d,) = res
        size = _CTYPE_SIZE[self.operand]
        return [
            "{",
            _typedef(self.operand, "opus_mfma_a", atom.elem_a * atom.a.itemsize // size),
            _typedef(self.operand, "opus_mfma_b", atom.elem_b * atom.b.itemsize // size),
            _typedef(_ACC_CTYPE[atom.c.name], "opus_mfma_c", atom.elem_c),
            f"  {d} = __builtin_bit_cast(decltype({d}), {self.builtin}(__builtin_bit_cast(opus_mfma_a, {a}), "
            f"__builtin_bit_cast(opus_mfma_b, {b}), __builtin_bit_cast(opus_mfma_c, {c}), 0, 0, 0));",
            "}",
        ]


def _typedef(ctype, name, n):
    if n == 1:  # a builtin taking one 64-bit operand (8-bit MFMA) takes a scalar, not a vector
        return f"  typedef {ctype} {name};"
    return f"  typedef {ctype} {name} __attribute__((ext_vector_type({n})));"


def mfma(ab, shape, builtin, operand, available, c=dt.f32) -> MatrixAtom:
    """One MFMA row: A and B of type ``ab``, shape (m, n, k), the builtin and its operand type."""
    m, n, k = shape
    return MatrixAtom(
        name=f"amd.mfma.{c.name}.{m}x{n}x{k}.{ab.name}", shape=(m, n, k), a=ab, b=ab, c=c,
        warp=WAVE, layout=mfma_layout(m, n, k, ab, ab, c), available=available,
        lowering={"hip": MfmaBuiltin(builtin, operand)},
        isa=f"v_mfma_{_ISA_TYPE[c.name]}_{m}x{n}x{k}_{_ISA_TYPE[ab.name]}")


_BOTH = OnlyOn("gfx942", "gfx950")
_GFX950 = OnlyOn("gfx950")

# One row per instruction, as opus.hpp's: A/B type, (m, n, k), builtin, its operand C type, chips.
ROWS = (
    mfma(dt.f16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8f16", "_Float16", _BOTH),
    mfma(dt.f16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16f16", "_Float16", _BOTH),
    mfma(dt.bf16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "short", _BOTH),
    mfma(dt.bf16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "short", _BOTH),
    mfma(dt.f16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_f16", "_Float16", _GFX950),
    mfma(dt.f16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_f16", "_Float16", _GFX950),
    mfma(dt.bf16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_bf16", "__bf16", _GFX950),
    mfma(dt.bf16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_bf16", "__bf16", _GFX950),
)
INSTRUCTIONS = instruction_table(ROWS)
ATOMS = atom_index(ROWS)
