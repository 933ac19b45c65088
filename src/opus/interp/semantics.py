"""Numeric semantics of the IR ops on numpy arrays (ir/ops.py is normative; codegen/cemit.py
renders the same thing in C). Every factory takes static types and returns a function of
arrays: lanes are the leading axis, vector lanes the trailing one. Integer arithmetic wraps
(numpy array arithmetic wraps silently); floats compute in the operand precision, 16-bit floats
in f32 rounded once to the type."""
from __future__ import annotations

from fractions import Fraction
import math

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..dtypes import DType
from ..targets.base import SR_FORMATS

__all__ = ["binary_fn", "med3_fn", "cmp_fn", "unary_fn", "math_fn", "fma_fn", "cast_fn", "UNSIGNED",
           "truncate_to_bf16", "stochastic_grid"]

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
UNSIGNED = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
            64: np.dtype(np.uint64)}
HALF = ("f16", "bf16")


def _is_half(e: DType):
    return e.name in HALF


def _via_f32(f, e: DType):
    """f computed on f32 copies of the operands, rounded once to the 16-bit type e."""
    nd = e.np_dtype

    def g(*xs):
        return f(*[x.astype(F32) for x in xs]).astype(nd)
    return g


# -- binary ------------------------------------------------------------------------------------

def _int_div(o, e: DType):
    nd = e.np_dtype
    one, zero = nd.type(1), nd.type(0)
    m1 = nd.type(-1) if e.kind == "int" else ~zero
    if e.kind == "uint":
        def f(a, b):
            bz = b == 0
            bs = np.where(bz, one, b)
            if o in ("floordiv", "tdiv"):
                return np.where(bz, m1, a // bs)
            return np.where(bz, a, a % bs)
        return f

    def f(a, b):
        bz = b == 0
        bm1 = b == m1
        bs = np.where(bz | bm1, one, b)
        if o == "floordiv":
            q = a // bs
            return np.where(bz, m1, np.where(bm1, zero - a, q))
        if o == "mod":
            return np.where(bz, a, np.where(bm1, zero, a % bs))
        if o == "tdiv":
            q = a // bs
            adj = ((a % bs) != 0) & ((a < 0) != (bs < 0))
            q = q + adj.astype(nd)
            return np.where(bz, m1, np.where(bm1, zero - a, q))
        # tmod
        return np.where(bz, a, np.where(bm1, zero, np.fmod(a, bs)))
    return f


def _shift(o, e: DType):
    nd, ut, w = e.np_dtype, UNSIGNED[e.bits], e.bits
    uz, z = ut.type(0), nd.type(0)
    m1 = nd.type(-1) if e.kind == "int" else ~z

    def f(a, b):
        bu = b.view(ut) if b.dtype != ut else b
        ge = bu >= w
        sh = np.where(ge, uz, bu)
        if o == "shl":
            r = (a.view(ut) << sh).view(nd) if a.dtype != ut else a << sh
            return np.where(ge, z, r)
        if e.kind == "int":
            r = a >> sh.astype(nd)
            return np.where(ge, np.where(a < 0, m1, z), r)
        return np.where(ge, z, a >> sh)
    return f


def _signed_zero_aware(f, pick_negative):
    """np.fmin/np.fmax (a NaN operand yields the other) with -0 < +0, as PTX min/max.f32 and
    IEEE 754-2019 minimum/maximumNumber order zeros; numpy returns either zero. A signaling NaN
    operand yields the other too: numpy's fmin/fmax (the CPU's min instruction) give NaN for it."""
    def g(a, b):
        r = f(a, b)
        a_nan, b_nan = np.isnan(a), np.isnan(b)
        if np.any(a_nan != b_nan):
            r = np.where(a_nan & ~b_nan, b, np.where(b_nan & ~a_nan, a, r))
        both_zero = (a == 0) & (b == 0)
        if not np.any(both_zero):
            return r
        neg = pick_negative(np.signbit(a), np.signbit(b))
        zero = np.where(neg, -np.zeros_like(r), np.zeros_like(r))
        return np.where(both_zero, zero, r)
    return g


_FLOAT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "min": _signed_zero_aware(np.fmin, np.logical_or),
              "max": _signed_zero_aware(np.fmax, np.logical_and)}
_INT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
            "or": np.bitwise_or, "xor": np.bitwise_xor, "min": np.minimum, "max": np.maximum}


def _is_snan(x):
    """Signaling NaNs of an f32/f64 array: exponent all ones, quiet bit clear, mantissa not 0."""
    bits = x.view(UNSIGNED[x.dtype.itemsize * 8])
    quiet = bits.dtype.type(1 << (22 if x.dtype == F32 else 51))  # the mantissa's top bit
    return np.isnan(x) & ((bits & quiet) == 0)


def _ieee2008(f):
    """min/max with nan='ieee2008': as the default, but a signaling NaN operand gives a quiet
    NaN (IEEE 754-2008 minNum/maxNum; AMD v_min/v_max_f32/f64 in IEEE mode)."""
    def g(a, b):
        r = f(a, b)
        s = _is_snan(np.asarray(a)) | _is_snan(np.asarray(b))
        return np.where(s, r.dtype.type(np.nan), r) if np.any(s) else r
    return g


def _mulhi(e: DType):
    """The high 32 bits of the exact 64-bit product of two 32-bit integers."""
    if e.bits != 32:
        raise NotImplementedError(f"binary mulhi on {e.name}")
    wide = np.dtype(np.int64 if e.kind == "int" else np.uint64)
    nd = e.np_dtype
    return lambda a, b: ((a.astype(wide) * b.astype(wide)) >> wide.type(32)).astype(nd)


def med3_fn(e: DType):
    """The median of three (ir/ops.py med3): for floats with a NaN operand, the minimum of the
    operands that are not NaN (AMD v_med3_f32's min3)."""
    if e.is_float:
        mn, mx = _FLOAT_BIN["min"], _FLOAT_BIN["max"]

        def f(a, b, c):
            med = mx(mn(a, b), mn(mx(a, b), c))
            nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
            return np.where(nan, mn(mn(a, b), c), med) if np.any(nan) else med
        return _via_f32(f, e) if _is_half(e) else f
    if e.is_bool:
        return lambda a, b, c: (a & b) | (c & (a | b))
    return lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def binary_fn(o, e: DType, nan=None):
    if o == "mulhi":
        if not e.is_int:
            raise NotImplementedError(f"binary mulhi on {e.name}")
        return _mulhi(e)
    if nan == "ieee2008" and e.is_float and not _is_half(e):
        return _ieee2008(_FLOAT_BIN[o])
    if e.is_float:
        f = _FLOAT_BIN.get(o)
        if f is None:
            raise NotImplementedError(f"binary {o} on {e.name}")
        return _via_f32(f, e) if _is_half(e) else f
    if e.is_bool:
        f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
             "min": np.logical_and, "max": np.logical_or}.get(o)
        if f is None:
            raise NotImplementedError(f"binary {o} on bool")
        return f
    if o in _INT_BIN:
        return _INT_BIN[o]
    if o in ("floordiv", "mod", "tdiv", "tmod"):
        return _int_div(o, e)
    if o in ("shl", "shr"):
        return _shift(o, e)
    raise NotImplementedError(f"binary {o} on {e.name}")


_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
        "eq": np.equal, "ne": np.not_equal}


def cmp_fn(pred, e: DType):
    f = _CMP[pred]
    if _is_half(e) or e.storage_only:
        return lambda a, b: f(a.astype(F32), b.astype(F32))
    return f


def _popc(e: DType):
    """Set bits of each element (of its two's-complement bits for signed types), in e's type."""
    u = np.dtype(f"u{e.bits // 8}")

    def f(a):
        b = np.ascontiguousarray(a).astype(e.np_dtype, copy=False).view(u)
        bits = np.unpackbits(b.view(np.uint8).reshape(b.shape + (e.bits // 8,)), axis=-1)
        return bits.sum(axis=-1).astype(e.np_dtype)
    return f


def unary_fn(o, e: DType):
    if o == "not":
        return np.logical_not
    if e.is_float:
        f = np.negative if o == "neg" else np.abs
        return _via_f32(f, e) if _is_half(e) else f
    if o == "neg":
        z = e.np_dtype.type(0)
        return lambda a: z - a
    if o == "invert":
        return np.invert
    if o == "popc":
        return _popc(e)
    if o == "abs":
        z = e.np_dtype.type(0)
        return lambda a: np.where(a < z, z - a, a)
    raise NotImplementedError(f"unary {o} on {e.name}")


def _rsqrt(x):
    return x.dtype.type(1) / np.sqrt(x)


_MATH = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
         "rsqrt": _rsqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "floor": np.floor,
         "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint}


def math_fn(fn, e: DType):
    f = _MATH[fn]
    return _via_f32(f, e) if _is_half(e) else f


# -- fma -------------------------------------------------------------------------------------------

def fma_f32(a, b, c):
    """Correctly rounded float32 a*b+c: the product is exact in f64; the f64 sum and its error
    (TwoSum) decide the one case where rounding f64 -> f32 twice would differ (a tie)."""
    a, b, c = a.astype(F64), b.astype(F64), c.astype(F64)
    p = a * b
    s = p + c
    r = s.astype(F32)
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    rd = r.astype(F64)
    fix = np.isfinite(s) & (err != 0) & (rd != s)
    if fix.any():
        # the other f32 neighbour of s
        other = np.nextafter(r, np.where(s > rd, np.float32(np.inf), np.float32(-np.inf)))
        tie = fix & ((rd + other.astype(F64)) * 0.5 == s)
        if tie.any():
            up = np.maximum(r, other)
            dn = np.minimum(r, other)
            r = np.where(tie, np.where(err > 0, up, dn), r)
    return r


def _two_sum(a, b):
    """(s, t) with s = RN(a + b) and s + t == a + b exactly (Knuth; no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    """(hi, lo) with a == hi + lo, each of at most 26 significant bits (Veltkamp; |a| < 2**996)."""
    t = a * 134217729.0  # 2**27 + 1
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a, b):
    """(p, e) with p = RN(a * b) and p + e == a * b exactly (Dekker; needs e not to underflow)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma_exact(a, b, c):
    """Correctly rounded a*b+c of Python floats, in exact rational arithmetic."""
    x = Fraction(a) * Fraction(b) + Fraction(c)
    if x == 0:
        return a * b + c  # a*b is exact here, so IEEE addition gives the zero's sign
    try:
        return float(x)  # int / int is correctly rounded (ties to even, subnormals)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def fma_f64(a, b, c):
    """Correctly rounded float64 a*b+c. Error-free transformations give doubles with
    a*b + c == r + w + q exactly, |w| at most half the gap from r to a neighbour and q tiny; r is
    the answer unless w + q may reach that half gap (a near-tie). Those rare lanes, and lanes
    outside the range where the transformations are exact, are computed with Fractions."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, F64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        p, e = _two_prod(a, b)
        s, t = _two_sum(p, c)
        z, q = _two_sum(t, e)
        r, w = _two_sum(s, z)
        exact = ((np.abs(a) < 2.0**995) & (np.abs(b) < 2.0**995) & (np.abs(c) < 2.0**1000)
                 & (np.abs(p) < 2.0**1000) & (np.abs(p) >= 2.0**-900))
        # half the gap to the neighbour on w's side (normal r: the halving is exact)
        half = np.abs(np.nextafter(r, np.where(w > 0, np.inf, -np.inf)) - r) * 0.5
        far_from_tie = (np.abs(w) + 2 * np.abs(q) < half) & (np.abs(r) >= 2.0**-1000)
        ok = exact & ((q == 0) | far_from_tie)  # q == 0: r = RN(s + z) = RN(a*b + c)
        naive = a * b + c
    # a zero or non-finite product is exact: IEEE a*b + c is the fma (unless c alone is inf/NaN)
    trivial = ~(np.isfinite(a) & np.isfinite(b)) | (a == 0) | (b == 0)
    out = np.where(trivial, naive, np.where(np.isfinite(c), r, c))
    for i in np.flatnonzero(~(ok | trivial | ~np.isfinite(c))):
        out.flat[i] = _fma_exact(float(a.flat[i]), float(b.flat[i]), float(c.flat[i]))
    return out


def fma_fn(e: DType):
    if e.name == "f64":
        return fma_f64
    if e.name == "f32":
        return fma_f32
    nd = e.np_dtype
    return lambda a, b, c: fma_f32(a.astype(F32), b.astype(F32), c.astype(F32)).astype(nd)


# -- casts -----------------------------------------------------------------------------------------

def _round_rz(x, nd):
    """x (a wider float array) rounded toward zero to float dtype nd."""
    r = x.astype(nd)
    over = np.abs(r.astype(F64)) > np.abs(x.astype(F64))
    if over.any():
        ut = UNSIGNED[nd.itemsize * 8]
        rb = r.view(ut)
        r = np.where(over, (rb - ut.type(1)), rb).view(nd)
    return r


def _round_to(nd, rounding):
    if rounding == "rz":
        return lambda x: _round_rz(x, nd)
    return lambda x: x.astype(nd)


def _float_to_int(src: DType, to: DType):
    nd = to.np_dtype
    lo, hi = to.int_range()

    def f(a):
        x = np.trunc(a.astype(F64))
        nan = np.isnan(x)
        if to.bits == 64:
            big = x >= float(hi) + 1.0  # 2**63 or 2**64
            x = np.where(nan | big, 0.0, np.maximum(x, float(lo)))
            return np.where(big, nd.type(hi), x.astype(nd))
        x = np.where(nan, 0.0, np.clip(x, float(lo), float(hi)))
        return x.astype(nd)
    return f


def cast_fn(src: DType, to: DType, rounding="rn", sat=False):
    """The conversion src -> to with ``rounding`` and ``sat`` (ir/ops.py cast) as a function of
    one array; with rounding 'sr', of two (the values and their u32 random bits)."""
    if rounding == "sr":
        return _stochastic(src, to, sat)
    if rounding in ("truncate", "truncate_with_nan"):
        to_f32 = cast_fn(src, dt.f32) if src.name != "f32" else (lambda a: a)
        return lambda a: truncate_to_bf16(to_f32(a), rounding == "truncate_with_nan")
    tnd = to.np_dtype
    if to.is_bool:
        if _is_half(src) or src.storage_only:
            return lambda a: a.astype(F32) != 0
        return lambda a: a != 0
    if src.is_bool:
        inner = cast_fn(dt.i32, to, rounding, sat)
        return lambda a: inner(a.astype(np.int32))
    if to.storage_only and to.is_float:
        enc = _to_small_float(to, rounding, sat)
        # through f32 (exact from 16-bit floats and storage types; rounds f64 and big ints first)
        return lambda a: enc(a.astype(F32))
    if src.storage_only and src.is_float:
        inner = cast_fn(dt.f32, to, rounding, sat)
        return lambda a: inner(a.astype(F32))  # exact
    # int4/uint4 follow the integer rules below (ints wrap, floats truncate and saturate)
    if src.is_int and to.is_int:
        return lambda a: a.astype(tnd)
    if to.is_int:
        return _float_to_int(src, to)
    # -> float
    rnd = _round_to(tnd, rounding)
    if _is_half(to):
        if src.name == "f32":
            return rnd
        # ints, f64 and the other 16-bit float go through f32 first (as cemit does)
        return lambda a: rnd(a.astype(F32))
    if src.is_int or src.bits <= to.bits:
        return lambda a: a.astype(tnd)
    return rnd  # f64 -> f32


def _to_small_float(to: DType, rounding, sat):
    """f32 -> fp8/fp4: round to nearest even; ``sat`` clamps to +-max finite (infinities too),
    else out-of-range values follow the format (ml_dtypes): inf for e5m2, NaN for e4m3 and FNUZ,
    +-max for e2m1. NaN gives the one canonical NaN code (see _nan_code)."""
    if to.name == "e8m0":
        return _to_e8m0(rounding, sat)
    if rounding != "rn":
        raise NotImplementedError(f"rounding {rounding!r} for conversions to {to.name}: "
                                  f"8- and 4-bit float conversions round to nearest even")
    tnd = to.np_dtype
    fin = float(ml_dtypes.finfo(tnd).max)
    nan = _nan_code(to)

    def f(x):
        if sat:
            x = np.clip(x, -fin, fin)  # NaN stays NaN
        with np.errstate(over="ignore", invalid="ignore"):
            r = x.astype(tnd)
        if nan is None:
            return r
        return np.where(np.isnan(x), np.uint8(nan), r.view(np.uint8)).view(tnd)
    return f


def _nan_code(d: DType):
    """The NaN byte that conversions to fp8 type ``d`` produce (sign clear): 0x7F for the OCP
    formats (what NVIDIA's cvt gives), 0x80 (the only NaN) for FNUZ; None without NaN (e2m1)."""
    if d.bits != 8:
        return None
    return 0x80 if np.isnan(np.uint8(0x80).view(d.np_dtype).astype(F32)) else 0x7F


def _to_e8m0(rounding, sat):
    """f32 -> e8m0 (2**(k-127), k = 0..254; 0xFF is NaN): 'rn' gives the nearest power of two
    (ties, 1.5 * 2**k, upward), 'rz' the one at or below (both give 2**-127 for smaller values).
    Zero, negatives and NaN give NaN; overflow and +inf give NaN, or 2**127 with ``sat``."""
    top = 254 if sat else 255

    def f(x):
        u = x.view(np.uint32)
        if rounding == "rz":
            k = u >> 23
        else:  # f32 subnormals are below 2**-126 = k 1: the midpoint with 2**-127 is 0x600000
            k = np.where(u < 0x800000, (u >= 0x600000).astype(np.uint32), (u + 0x400000) >> 23)
        k = np.where(k == 255, top, k)  # overflow and +inf
        pos = (u - np.uint32(1)) < np.uint32(0x7F800000)  # positive: finite non-zero or +inf
        return np.where(pos, k, 255).astype(np.uint8).view(dt.e8m0.np_dtype)
    return f


# -- the original's bf16 truncations and stochastic rounding (ir/ops.py cast) -------------------

def truncate_to_bf16(x, keep_nan):
    """f32 array -> bf16 by its high 16 bits; ``keep_nan`` sets bit 0 where the exponent is all
    ones and the low half is not zero, so a NaN whose payload lies there stays a NaN."""
    u = np.ascontiguousarray(x, F32).view(np.uint32)
    h = (u >> np.uint32(16)).astype(np.uint16)
    if keep_nan:
        nan_low = ((u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & ((u & np.uint32(0xFFFF)) != 0)
        h = h | nan_low.astype(np.uint16)
    return h.view(dt.bf16.np_dtype)


def stochastic_grid(x, rbits, m, emin):
    """The stochastic rounding of f32 array ``x`` with u32 ``rbits`` to m mantissa bits and
    smallest normal exponent emin, as an f32 array holding the (exact) result value: the top
    23-m random bits are added just below the kept mantissa of the value's 24-bit significand at
    exponent max(e, emin), and the rest is dropped (ir/ops.py cast, 'sr'). Zero, infinities and
    NaN come back unchanged (they then convert as with 'rn')."""
    u = np.ascontiguousarray(x, F32).view(np.uint32)
    r = np.asarray(rbits).astype(np.uint32) >> np.uint32(9 + m)
    a = u & np.uint32(0x7FFFFFFF)
    keep = np.uint32((0xFFFFFFFF << (23 - m)) & 0xFFFFFFFF)
    normal = (a + r) & keep  # a carry into the exponent is the rounding up to the next binade
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.floor(np.abs(x.astype(F64)) * 2.0 ** (23 - emin)).astype(np.uint64)
        q = (s + r.astype(np.uint64)) >> np.uint64(23 - m)
        small = (q.astype(F64) * 2.0 ** (emin - m)).astype(F32).view(np.uint32)
    mag = np.where(a >= np.uint32((emin + 127) << 23), normal, small)
    out = (mag | (u & np.uint32(0x80000000))).view(F32)
    special = (a == 0) | (a >= np.uint32(0x7F800000))
    return np.where(special, x, out).astype(F32)


def _stochastic(src: DType, to: DType, sat):
    m, emin = SR_FORMATS[to.name]
    encode = cast_fn(dt.f32, to, "rn", sat)
    exact = cast_fn(src, dt.f32) if src.name != "f32" else (lambda a: a)

    def f(a, rbits):
        return encode(stochastic_grid(exact(a), rbits, m, emin))
    return f
