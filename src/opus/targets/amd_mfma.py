"""AMD CDNA matrix instructions (MFMA, wave64): availability, HIP lowering, lane layout and
emulation, each instruction in one place.

Lane layout (the original opus ``mfma_adaptor``, inventory section 1.18), W = 64 lanes,
elem_x = (rows * cols) / W elements per lane, pack_x = min(16 / sizeof(x), elem_x),
register index i = r * pack + j:
  A (M x K):              row m = l mod M,  col k = r*(grpk*pack_a) + (l div M)*pack_a + j,
                          grpk = W / M
  B (stored N x K):       n = l mod N,      k as for A (grpk = W / N)
  C (M x N):              col n = l mod N,  row m = r*(grpm_c*pack_c) + (l div N)*pack_c + j,
                          grpm_c = W / N
``coords_a`` returns (m, k), ``coords_b`` returns (k, n) (the same convention as nv_mma: B is
indexed as the K x N operand), ``coords_c`` returns (m, n). They work on Python ints and on traced
values alike (only ``//``, ``%``, ``*`` and ``+`` are used).

Concretely for v_mfma_f32_32x32x8_f16: A[l%32][4*(l//32)+j], B[4*(l//32)+j][l%32],
C[8r + 4*(l//32) + j][l%32] (c register 4r + j).
"""
from __future__ import annotations

from .. import dtypes as dt
from .base import Instruction
from .nv_mma import MmaSpec, _mma_types

__all__ = ["INSTRUCTIONS", "ATOMS", "SPECS", "WAVE", "mfma_spec"]

WAVE = 64


def _pack(dtype, elems):
    return min(16 // dtype.itemsize, elems)


def mfma_spec(m, n, k, a, b, c, warp=WAVE) -> MmaSpec:
    """The MmaSpec (shape, types, lane layout) of one MFMA, per the adaptor rule above."""
    ea, eb, ec = m * k // warp, n * k // warp, m * n // warp
    pa, pb, pc = _pack(a, ea), _pack(b, eb), _pack(c, ec)
    gka, gkb, gmc = warp // m, warp // n, warp // n

    def coords_a(lane, i):
        r, j = i // pa, i % pa
        return lane % m, (lane // m) * pa + (r * gka * pa + j)

    def coords_b(lane, i):
        r, j = i // pb, i % pb
        return (lane // n) * pb + (r * gkb * pb + j), lane % n

    def coords_c(lane, i):
        r, j = i // pc, i % pc
        return (lane // n) * pc + (r * gmc * pc + j), lane % n

    s = MmaSpec(m, n, k, a, b, c, coords_a, coords_b, coords_c, warp=warp)
    s.pack_a, s.pack_b, s.pack_c = pa, pb, pc
    return s


# -- HIP lowering ------------------------------------------------------------------------------
def _lower_hip(spec, builtin, in_elem_ctype):
    """One ``__builtin_amdgcn_mfma_*`` call; operands are bit-cast from opus' register structs
    to the builtin's ext-vector types (no data movement)."""
    def lower(ops, res, attrs):
        a, b, c = ops
        (d,) = res
        return [
            "{",
            f"  typedef {in_elem_ctype} opus_mfma_a __attribute__((ext_vector_type({spec.elem_a})));",
            f"  typedef {in_elem_ctype} opus_mfma_b __attribute__((ext_vector_type({spec.elem_b})));",
            f"  typedef float opus_mfma_c __attribute__((ext_vector_type({spec.elem_c})));",
            f"  {d} = __builtin_bit_cast(decltype({d}), {builtin}(__builtin_bit_cast(opus_mfma_a, {a}), "
            f"__builtin_bit_cast(opus_mfma_b, {b}), __builtin_bit_cast(opus_mfma_c, {c}), 0, 0, 0));",
            "}",
        ]
    return lower


# -- emulation (numpy, whole waves) --------------------------------------------------------------
def _emulate(spec, name):
    def emulate(operands, attrs, warp_size):
        import numpy as np
        (ar, ac), (br, bc), (cr, cc) = spec.index_maps()
        a, b, c = operands  # [threads, elems]
        T = a.shape[0]
        if T % spec.warp:
            raise ValueError(f"{name} needs whole waves: {T} threads is not a multiple of {spec.warp}")
        W = T // spec.warp
        w = np.arange(W)[:, None, None]
        A = np.zeros((W, spec.m, spec.k), np.float64)
        B = np.zeros((W, spec.k, spec.n), np.float64)
        C = np.zeros((W, spec.m, spec.n), np.float64)
        A[w, ar[None], ac[None]] = np.asarray(a).astype(np.float64).reshape(W, spec.warp, -1)
        B[w, br[None], bc[None]] = np.asarray(b).astype(np.float64).reshape(W, spec.warp, -1)
        C[w, cr[None], cc[None]] = np.asarray(c).astype(np.float64).reshape(W, spec.warp, -1)
        D = (A @ B + C).astype(np.float32)
        return [D[w, cr[None], cc[None]].reshape(T, -1)]
    return emulate


def _archs(*names):
    names = frozenset(names)

    def avail(target):
        return target.vendor == "amd" and target.name in names
    avail.archs = names
    return avail


INSTRUCTIONS = {}
ATOMS = {}
SPECS = {}

_BOTH = ("gfx942", "gfx950")
_TABLE = [
    # (in dtype, (m, n, k), builtin, builtin's element C type, archs)
    (dt.f16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8f16", "_Float16", _BOTH),
    (dt.f16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16f16", "_Float16", _BOTH),
    (dt.bf16, (32, 32, 8), "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k", "short", _BOTH),
    (dt.bf16, (16, 16, 16), "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", "short", _BOTH),
    (dt.f16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_f16", "_Float16", ("gfx950",)),
    (dt.f16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_f16", "_Float16", ("gfx950",)),
    (dt.bf16, (32, 32, 16), "__builtin_amdgcn_mfma_f32_32x32x16_bf16", "__bf16", ("gfx950",)),
    (dt.bf16, (16, 16, 32), "__builtin_amdgcn_mfma_f32_16x16x32_bf16", "__bf16", ("gfx950",)),
]

for _in, (_m, _n, _k), _builtin, _ct, _where in _TABLE:
    _spec = mfma_spec(_m, _n, _k, _in, _in, dt.f32)
    _name = f"amd.mfma.f32.{_m}x{_n}x{_k}.{_in.name}"
    INSTRUCTIONS[_name] = Instruction(
        _name, _archs(*_where), _mma_types(_spec), {"hip": _lower_hip(_spec, _builtin, _ct)},
        _emulate(_spec, _name), doc=f"{_builtin} ({', '.join(_where)})")
    INSTRUCTIONS[_name].spec = _spec
    INSTRUCTIONS[_name].builtin = _builtin
    ATOMS[(_in.name, _in.name, "f32", (_m, _n, _k))] = _name
    SPECS[_name] = _spec
