"""Quantization helpers: scaled casts, per-tensor/per-token scales and OCP MX block scaling.

Everything here is built from the language's own ops (casts, bit casts, integer and float
arithmetic), so the interpreter, CUDA and HIP agree bit for bit wherever the casts do. The MX
rules are those of the OCP Microscaling Formats (MX) v1.0 specification, section 6.3: a block of
32 elements shares the scale X = 2^(floor(log2(amax)) - emax_elem), an e8m0 value computed from
amax's exponent bits (no logarithm, no rounding), and each element is V / X converted to the
element type with saturation.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import Value, VectorType, scalar_of
from .context import TraceError, ctx
from .values import bitcast, cast
from . import math as m

__all__ = ["scaled_cast", "amax", "tensor_scale", "mx_scale", "mx_quantize", "mx_dequantize",
           "MX_BLOCK", "MX_EMAX"]

MX_BLOCK = 32  # elements per MX scale (OCP MX v1.0)
# emax_elem: the exponent of the element type's largest normal power of two (OCP MX v1.0,
# table 1 and section 6.3: e4m3 8, e5m2 15, e3m2 4, e2m3 2, e2m1 2)
MX_EMAX = {"fp8_e4m3": 8, "fp8_e5m2": 15, "fp6_e3m2": 4, "fp6_e2m3": 2, "fp4_e2m1": 2}


def _err(msg):
    raise TraceError(msg)


def _float_value(x, what):
    if not isinstance(x, Value) or not scalar_of(x.type).is_float or scalar_of(x.type).storage_only:
        _err(f"{what} must be a run-time f32/f16/bf16 value (scalar or vector), got "
             f"{x.type if isinstance(x, Value) else type(x).__name__}")
    if scalar_of(x.type) is dt.f32:
        return x
    return _widened_bf16(x) if _even_bf16_vector(x) else cast(x, dt.f32)


def _widened_bf16(x):
    """The f32 lanes of bf16 vector ``x`` (even length): each pair's 32-bit word holds the low
    lane's bits in its low half, so its f32 is the word shifted up 16 and the high lane's is
    the word with its low half cleared (exact, as opus.cast; one integer instruction per lane,
    where the lane-by-lane widening takes NVVM two or three)."""
    from .vectors import make_vector
    half = x.type.n // 2
    w = bitcast(x, VectorType(dt.u32, half))
    lo = bitcast(w << 16, VectorType(dt.f32, half))
    hi = bitcast(w & 0xFFFF0000, VectorType(dt.f32, half))
    return make_vector(*[f for i in range(half) for f in (lo[i], hi[i])])


def _even_bf16_vector(x):
    return (isinstance(x, Value) and isinstance(x.type, VectorType) and x.type.elem is dt.bf16
            and x.type.n % 2 == 0)


def _finite_max(d: DType) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(d.np_dtype).max)


def _low_precision(dtype, what):
    if not isinstance(dtype, DType):
        _err(f"{what}: the element type must be an opus dtype, got {dtype!r}")
    d = ctx().target.resolve_dtype(dtype)
    if not d.is_float or d.name in ("f32", "f64", "e8m0", "tf32"):
        _err(f"{what} converts to a float type narrower than f32 (f16, bf16, fp8, fp6, fp4), "
             f"not {d.name}")
    return d


def scaled_cast(x, dtype, inv_scale, rounding="rn", rbits=None):
    """``x * inv_scale`` clamped to ``dtype``'s finite range, then converted: the per-tensor
    (or per-token) quantization step. The product is one f32 multiplication (rounded to
    nearest even), the clamp keeps NaN a NaN, the conversion is opus.cast's.

    Example: ``q = opus.scaled_cast(v, opus.fp8_e4m3, inv_scale)``.

    :param x: the values
    :type x: run-time f32/f16/bf16 value (scalar or vector)
    :param dtype: the type to convert to (fp8, fp6, fp4, f16, bf16)
    :type dtype: DType
    :param inv_scale: the multiplier, 1 / scale
    :type inv_scale: run-time f32 scalar (or vector of x's lanes) or Python float
    :param rounding: 'rn' or 'sr' (then ``rbits`` as for opus.cast)
    :type rounding: str
    :param rbits: the random bits of rounding='sr'
    :type rbits: run-time u32 value
    :returns: the quantized values, ``dtype`` lane by lane
    :targets: all targets
    """
    d = _low_precision(dtype, "opus.scaled_cast")
    if rounding not in ("rn", "sr"):
        _err(f"opus.scaled_cast rounds with 'rn' or 'sr', not {rounding!r}")
    v = _float_value(x, "opus.scaled_cast's x")
    if isinstance(inv_scale, bool) or not isinstance(inv_scale, (int, float, Value)):
        _err(f"opus.scaled_cast's inv_scale must be an f32 value or a Python float, got "
             f"{type(inv_scale).__name__}")
    if isinstance(inv_scale, Value):
        inv_scale = _float_value(inv_scale, "opus.scaled_cast's inv_scale")
    y = v * inv_scale
    if not d.storage_only:  # f16/bf16: clamp here (opus.min/max ignore NaN: keep it by select)
        lim = _finite_max(d)
        y = m.select(y != y, y, m.min(m.max(y, -lim), lim))
    return cast(y, d, rounding=rounding, sat=d.storage_only, rbits=rbits)


def amax(x):
    """The largest magnitude among the lanes of ``x`` (NaN lanes are ignored, as opus.max
    does): the statistic per-tensor, per-token and per-block scales are computed from.

    :param x: the values
    :type x: run-time float vector or scalar
    :returns: max |x_i| as f32
    :targets: all targets
    """
    v = _float_value(x, "opus.amax's x")
    a = m.abs(v)
    if not isinstance(a.type, VectorType):
        return a
    best = a[0]
    for i in range(1, a.type.n):
        best = m.max(best, a[i])
    return best


def tensor_scale(amax_value, dtype):
    """(scale, inv_scale) for quantizing values of largest magnitude ``amax_value`` to
    ``dtype``: scale = amax / max_finite(dtype) (what dequantization multiplies by) and
    inv_scale = max_finite / amax (what opus.scaled_cast multiplies by). An amax of 0 gives
    (1, 1), so all-zero rows stay zero.

    :param amax_value: the largest magnitude (opus.amax), per tensor, token or block
    :type amax_value: run-time f32 scalar
    :param dtype: the quantized type
    :type dtype: DType
    :returns: (scale, inv_scale), both f32
    :targets: all targets
    """
    d = _low_precision(dtype, "opus.tensor_scale")
    a = _float_value(amax_value, "opus.tensor_scale's amax")
    lim = _finite_max(d)
    zero = a == 0.0
    scale = m.select(zero, 1.0, a / lim)
    inv = m.select(zero, 1.0, lim / a)
    return scale, inv


def _exponent_field(a):
    """The biased exponent bits of f32 ``a`` (0 for zero and subnormals, 255 for inf/NaN)."""
    return (bitcast(a, dt.u32) >> 23) & 0xFF


def mx_scale(amax_value, elem):
    """The OCP MX v1.0 shared scale of a block whose largest magnitude is ``amax_value``:
    X = 2^(floor(log2(amax)) - emax_elem) as e8m0, from amax's exponent bits (exact). The code
    is clamped at 0 (2^-127) below; an amax of zero or below 2^(emax_elem-127) gives 2^-127;
    an infinite or NaN amax gives the e8m0 NaN (0xFF).

    :param amax_value: the block's largest magnitude (opus.amax of its 32 elements)
    :type amax_value: run-time f32 scalar
    :param elem: the element type: fp8_e4m3, fp8_e5m2, fp6_e2m3, fp6_e3m2 or fp4_e2m1
    :type elem: DType
    :returns: the scale, an e8m0 value
    :targets: all targets
    """
    e = _mx_elem(elem, "opus.mx_scale")
    a = _float_value(amax_value, "opus.mx_scale's amax")
    field = _exponent_field(a)
    emax = MX_EMAX[e.name]
    code = m.select(field == 255, 255, m.select(field > emax, field - emax, 0))
    return bitcast(cast(code, dt.u8), dt.e8m0)


def _mx_elem(elem, what):
    if not isinstance(elem, DType):
        _err(f"{what}: the element type must be an opus dtype, got {elem!r}")
    e = ctx().target.resolve_dtype(elem)
    if e.name not in MX_EMAX:
        _err(f"{what}: MX elements are {', '.join(sorted(MX_EMAX))} (OCP MX v1.0), not {e.name}")
    ctx().target.require_dtype(e)
    return e


def _power_of_two(code_u32, negate):
    """2^(code-127) (or 2^(127-code) with ``negate``) as f32, from the e8m0 code's bits; code
    255 (NaN) gives NaN."""
    biased = (254 - code_u32) if negate else code_u32
    p = bitcast(m.select(biased == 0, 0x400000, biased << 23), dt.f32)  # 2^-127 is subnormal
    return m.select(code_u32 == 255, float("nan"), p)


def mx_quantize(x, elem, rounding="rn", rbits=None):
    """One OCP MX block per 32 lanes of ``x``: each block's e8m0 scale (opus.mx_scale of its
    amax) and its elements x / 2^(scale-127) converted to ``elem`` with saturation. The
    division is a multiplication by a power of two (exact wherever the result matters).

    Example: ``q, s = opus.mx_quantize(v32, opus.fp8_e4m3)``.

    :param x: the values, 32 * k lanes
    :type x: run-time f32/f16/bf16 vector
    :param elem: the element type: fp8_e4m3, fp8_e5m2, fp6_e2m3, fp6_e3m2 or fp4_e2m1
    :type elem: DType
    :param rounding: 'rn' or 'sr' (then ``rbits``: one random word per lane)
    :type rounding: str
    :param rbits: the random bits of rounding='sr'
    :type rbits: run-time u32 vector
    :returns: (elements, a vector of ``elem`` like x; scales, e8m0: a scalar for one block,
        else a vector of one per block)
    :targets: all targets
    """
    e = _mx_elem(elem, "opus.mx_quantize")
    v = _float_value(x, "opus.mx_quantize's x")
    n = v.type.n if isinstance(v.type, VectorType) else 1
    if n % MX_BLOCK:
        _err(f"opus.mx_quantize takes whole MX blocks of {MX_BLOCK} lanes; x has {n}")
    from .vectors import concat, make_vector
    quants, scales = [], []
    for b in range(n // MX_BLOCK):
        block = v[b * MX_BLOCK:(b + 1) * MX_BLOCK]
        s = mx_scale(amax(block), e)
        inv = _power_of_two(cast(bitcast(s, dt.u8), dt.u32), negate=True)
        bits = None if rbits is None else rbits[b * MX_BLOCK:(b + 1) * MX_BLOCK]
        quants.append(cast(block * inv, e, rounding=rounding, sat=True, rbits=bits))
        scales.append(s)
    q = quants[0] if len(quants) == 1 else concat(*quants)
    return q, (scales[0] if len(scales) == 1 else make_vector(*scales))


def mx_dequantize(q, scale):
    """The inverse of opus.mx_quantize: each element as f32 times its block's scale
    2^(scale-127) (exact unless the product leaves f32's range).

    :param q: the elements, 32 * k lanes of an MX element type
    :type q: run-time vector
    :param scale: the e8m0 scales, one per 32 lanes (a scalar for one block)
    :type scale: run-time e8m0 value
    :returns: the values, an f32 vector like q
    :targets: all targets
    """
    if not isinstance(q, Value) or scalar_of(q.type).name not in MX_EMAX:
        _err(f"opus.mx_dequantize's q must be a vector of an MX element type "
             f"({', '.join(sorted(MX_EMAX))})")
    if not isinstance(scale, Value) or scalar_of(scale.type) is not dt.e8m0:
        _err("opus.mx_dequantize's scale must be an e8m0 value (opus.mx_scale)")
    n = q.type.n if isinstance(q.type, VectorType) else 1
    blocks = (n + MX_BLOCK - 1) // MX_BLOCK
    have = scale.type.n if isinstance(scale.type, VectorType) else 1
    if n % MX_BLOCK or have != blocks:
        _err(f"opus.mx_dequantize: q has {n} lanes ({n / MX_BLOCK:g} blocks of {MX_BLOCK}) "
             f"but {have} scale(s) were given")
    from .vectors import concat
    out = []
    for b in range(blocks):
        s = scale if have == 1 else scale[b]
        p = _power_of_two(cast(bitcast(s, dt.u8), dt.u32), negate=False)
        out.append(cast(q[b * MX_BLOCK:(b + 1) * MX_BLOCK], dt.f32) * p)
    return out[0] if len(out) == 1 else concat(*out)
