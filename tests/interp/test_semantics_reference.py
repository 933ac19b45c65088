"""The interpreter's element functions (interp/semantics.py) against independent references:
Python integers for division, shifts, mulhi and popc; IEEE 754-2019 minimumNumber /
maximumNumber and 754-2008 minNum / maxNum written out by hand for min, max and med3; bit
patterns for bf16 truncation; exact fractions for stochastic rounding; ml_dtypes for the
encodings. Called directly (as the engine calls them), so every branch is reached with the
values that tell it apart (the mutation run's survivors and unreached functions, docs/testing.md).
"""
from fractions import Fraction
import math
import struct

import ml_dtypes
import numpy as np
import pytest

from opus import dtypes as dt
from opus.interp.semantics import (binary_fn, cast_fn, med3_fn, stochastic_grid,
                                   truncate_to_bf16, unary_fn)

RNG = np.random.default_rng(1717)
INTS = [dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.u16, dt.u32, dt.u64]
FLOATS = [dt.f16, dt.bf16, dt.f32, dt.f64]


def _edges(e):
    """Each integer type's extremes, small values and random ones."""
    lo, hi = e.int_range()
    vals = {lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, 7} | ({-1, -2, -3, -7} if lo < 0 else set())
    vals |= {int(v) for v in RNG.integers(lo, hi, 24, dtype=e.np_dtype, endpoint=True)}
    return sorted(vals)


def _wrap(v, e):
    lo, hi = e.int_range()
    return (v - lo) % (hi - lo + 1) + lo


def _pairs(e):
    xs = _edges(e)
    a = np.array([x for x in xs for _ in xs], e.np_dtype)
    b = np.array([y for _ in xs for y in xs], e.np_dtype)
    return a, b


# -- integer division: Python's // and %, C's truncation; by zero -1 and the dividend ----------

def _ref_div(o, x, y, e):
    if y == 0:
        return _wrap(-1, e) if o in ("floordiv", "tdiv") else x
    if o == "floordiv":
        return _wrap(x // y, e)
    if o == "mod":
        return _wrap(x % y, e)
    q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)  # truncated toward zero
    return _wrap(q, e) if o == "tdiv" else _wrap(x - q * y, e)


@pytest.mark.parametrize("o", ["floordiv", "mod", "tdiv", "tmod"])
@pytest.mark.parametrize("e", INTS, ids=lambda e: e.name)
def test_integer_division_against_python(o, e):
    a, b = _pairs(e)
    with np.errstate(all="ignore"):
        got = binary_fn(o, e)(a, b)
    assert got.dtype == e.np_dtype
    want = [_ref_div(o, int(x), int(y), e) for x, y in zip(a, b)]
    bad = [(int(x), int(y), int(g), w) for x, y, g, w in zip(a, b, got, want) if int(g) != w]
    assert not bad, f"{o} on {e.name}: (a, b, got, want) {bad[:6]}"


# -- shifts: amounts >= the width (or negative, i.e. huge unsigned) give 0 or the sign ----------

def _ref_shift(o, x, n, e):
    w = e.bits
    n &= (1 << w) - 1  # the amount as an unsigned number of e's width
    if o == "shl":
        return _wrap(x << n, e) if n < w else 0
    if n >= w:
        return -1 if x < 0 else 0
    return x >> n  # Python's >> is arithmetic on negative ints, logical on non-negative ones


@pytest.mark.parametrize("o", ["shl", "shr"])
@pytest.mark.parametrize("e", INTS, ids=lambda e: e.name)
def test_shifts_against_python(o, e):
    xs = np.array(_edges(e), e.np_dtype)
    amounts = [0, 1, 3, e.bits - 1, e.bits, e.bits + 1, 2 * e.bits, -1, -e.bits]
    a = np.repeat(xs, len(amounts))
    b = np.tile(np.array([_wrap(n, e) for n in amounts], e.np_dtype), len(xs))
    got = binary_fn(o, e)(a, b)
    assert got.dtype == e.np_dtype
    want = [_ref_shift(o, int(x), int(n), e) for x, n in zip(a, b)]
    bad = [(int(x), int(n), int(g), w) for x, n, g, w in zip(a, b, got, want) if int(g) != w]
    assert not bad, f"{o} on {e.name}: (a, n, got, want) {bad[:6]}"


def test_shift_amount_of_another_integer_type():
    """An i32 amount for a u32 value (the IR shifts by any integer): -1 is 2^32 - 1, >= 32."""
    got = binary_fn("shl", dt.u32)(np.array([1, 1, 1], np.uint32), np.array([-1, 31, 32], np.int32))
    assert got.tolist() == [0, 1 << 31, 0]


# -- mulhi and popc: Python integers ------------------------------------------------------------

@pytest.mark.parametrize("e", [dt.i32, dt.u32], ids=lambda e: e.name)
def test_mulhi_against_python(e):
    a, b = _pairs(e)
    got = binary_fn("mulhi", e)(a, b)
    assert got.dtype == e.np_dtype
    want = [_wrap((int(x) * int(y)) >> 32, e) for x, y in zip(a, b)]
    assert [int(g) for g in got] == want


@pytest.mark.parametrize("e", [dt.i16, dt.u64, dt.f32], ids=lambda e: e.name)
def test_mulhi_other_types_are_refused(e):
    with pytest.raises(NotImplementedError, match=f"binary mulhi on {e.name}"):
        binary_fn("mulhi", e)


@pytest.mark.parametrize("o,e", [("floordiv", dt.f32), ("and", dt.f64), ("shl", dt.bool_),
                                 ("pow", dt.i32)], ids=str)
def test_unknown_binary_ops_name_the_op_and_type(o, e):
    with pytest.raises(NotImplementedError, match=f"binary {o} on {e.name if e.name != 'bool_' else 'bool'}"):
        binary_fn(o, e)


@pytest.mark.parametrize("e", INTS, ids=lambda e: e.name)
def test_popc_against_python(e):
    xs = np.array(_edges(e), e.np_dtype)
    got = unary_fn("popc", e)(xs)
    assert got.dtype == e.np_dtype
    assert [int(g) for g in got] == [bin(int(x) & ((1 << e.bits) - 1)).count("1") for x in xs]


def test_popc_of_a_two_dimensional_lane_array():
    x = np.array([[0, -1], [5, 1 << 30]], np.int32)
    assert unary_fn("popc", dt.i32)(x).tolist() == [[0, 32], [2, 1]]


# -- min / max / med3 on floats: hand-written IEEE rules ----------------------------------------

def _key(v):
    return (v, math.copysign(1.0, v))  # -0 < +0


def _ref_minmax(o, x, y):
    """IEEE 754-2019 minimumNumber / maximumNumber: a NaN operand yields the other; -0 < +0."""
    if math.isnan(x):
        return y
    if math.isnan(y):
        return x
    return (min if o == "min" else max)(x, y, key=_key)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, -3.75, math.inf, -math.inf, math.nan, 1e-30, -1e30]


def _same(g, w):
    return (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w))


@pytest.mark.parametrize("o", ["min", "max"])
@pytest.mark.parametrize("e", FLOATS, ids=lambda e: e.name)
def test_float_min_max_order_zeros_and_skip_nan(o, e):
    nd = e.np_dtype
    a = np.array([x for x in SPECIAL for _ in SPECIAL], nd)
    b = np.array([y for _ in SPECIAL for y in SPECIAL], nd)
    with np.errstate(all="ignore"):
        got = binary_fn(o, e)(a, b)
    assert got.dtype == nd
    want = [_ref_minmax(o, float(x), float(y)) for x, y in zip(a, b)]
    bad = [(float(x), float(y), float(g), w) for x, y, g, w in zip(a, b, got, want)
           if not _same(float(g), w)]
    assert not bad, f"{o} on {e.name}: (a, b, got, want) {bad[:6]}"


def test_min_max_of_zeros_alone_and_in_arrays_without_zero_pairs():
    """Both orders of a zero pair, in an array with no pair of zeros (the fast return) too."""
    mn, mx = binary_fn("min", dt.f32), binary_fn("max", dt.f32)
    z = np.array([0.0, -0.0], np.float32)
    assert np.signbit(mn(z, z[::-1])).tolist() == [True, True]
    assert np.signbit(mx(z, z[::-1])).tolist() == [False, False]
    assert np.signbit(mn(-z, -z)).tolist() == [True, False]
    assert mn(np.array([1, 4], np.float32), np.array([3, 2], np.float32)).tolist() == [1, 2]


SNAN32, QNAN32 = np.uint32(0x7F800001), np.uint32(0x7FC00000)
SNAN64, QNAN64 = np.uint64(0x7FF0000000000001), np.uint64(0x7FF8000000000000)


@pytest.mark.parametrize("o", ["min", "max"])
@pytest.mark.parametrize("e,snan,qnan,quiet_bit", [(dt.f32, SNAN32, QNAN32, 1 << 22),
                                                   (dt.f64, SNAN64, QNAN64, 1 << 51)],
                         ids=["f32", "f64"])
def test_ieee2008_signaling_nan_gives_nan(o, e, snan, qnan, quiet_bit):
    """nan='ieee2008' (AMD v_min/v_max in IEEE mode): a signaling NaN operand (either side, either
    sign, payload in the low bits) gives a quiet NaN; a quiet NaN still yields the other operand;
    infinities (exponent all ones, mantissa 0) are numbers."""
    ut = snan.dtype
    top = ut.type(1 << (e.bits - 1))
    s5 = np.array([snan, snan | top, ut.type(int(snan) + 6), qnan, qnan | ut.type(1)], ut)
    f = binary_fn(o, e, "ieee2008")
    for reps in (1, 8):   # numpy's fmin/fmax take another path from 16 elements on
        s = np.tile(s5, reps).view(e.np_dtype).reshape(reps, 5)
        one = np.ones(s.shape, e.np_dtype)
        for got in (f(s, one), f(one, s)):
            assert np.isnan(got[:, :3]).all() and (got[:, 3:] == 1).all(), got
            assert ((got[:, :3].view(ut) & ut.type(quiet_bit)) != 0).all()  # quiet
    inf = np.array([np.inf, -np.inf], e.np_dtype)
    assert f(inf, np.ones(2, e.np_dtype)).tolist() == ([1.0, -np.inf] if o == "min" else [np.inf, 1.0])
    assert np.signbit(f(np.array([0.0], e.np_dtype), np.array([-0.0], e.np_dtype))) == (o == "min")


SNAN_BITS = {"f16": (np.uint16, 0x7C01), "bf16": (np.uint16, 0x7F81), "f32": (np.uint32, 0x7F800001),
             "f64": (np.uint64, 0x7FF0000000000001)}


@pytest.mark.parametrize("o", ["min", "max"])
@pytest.mark.parametrize("e", FLOATS, ids=lambda e: e.name)
def test_signaling_nan_yields_the_other_operand_by_default(o, e):
    """docs/language.md: "a NaN operand (quiet or signaling) yields the other one" (numpy's
    fmin/fmax, i.e. the CPU's min instruction, gives NaN for a signaling one: the bug this
    found). Either side, either sign; two NaNs give NaN."""
    ut, bits = SNAN_BITS[e.name]
    sign = 1 << (8 * np.dtype(ut).itemsize - 1)
    s = np.array([bits, bits | sign, bits, bits], ut).view(e.np_dtype)
    other = np.array([2.0, -0.0, -math.inf, math.nan], e.np_dtype)
    f = binary_fn(o, e)
    for got in (f(s, other), f(other, s)):
        assert got.dtype == e.np_dtype
        assert _same(float(got[0]), 2.0) and _same(float(got[1]), -0.0), got
        assert float(got[2]) == -math.inf and math.isnan(float(got[3])), got


@pytest.mark.parametrize("e", [dt.f16, dt.bf16], ids=lambda e: e.name)
def test_ieee2008_on_16_bit_floats_is_the_default_rule(e):
    """16-bit floats have no ieee2008 variant: a NaN (a signaling one too) yields the other."""
    nan = np.array([0x7C01 if e.name == "f16" else 0x7F81], np.uint16).view(e.np_dtype)
    got = binary_fn("min", e, "ieee2008")(nan, np.array([2.0], e.np_dtype))
    assert got.dtype == e.np_dtype and got.tolist() == [2.0]


def test_ieee2008_on_integers_is_plain_min():
    got = binary_fn("max", dt.i32, "ieee2008")(np.array([-5, 7], np.int32), np.array([3, -9], np.int32))
    assert got.dtype == np.int32 and got.tolist() == [3, 7]


def _ref_med3(x, y, z):
    """AMD v_med3: the median; with a NaN operand, the minimum (minimumNumber) of the others."""
    if any(math.isnan(v) for v in (x, y, z)):
        rest = [v for v in (x, y, z) if not math.isnan(v)]
        return min(rest, key=_key) if rest else math.nan
    return sorted((x, y, z), key=_key)[1]


@pytest.mark.parametrize("e", FLOATS, ids=lambda e: e.name)
def test_med3_floats_against_the_sorted_median(e):
    vals = [0.0, -0.0, 1.0, -2.0, 1.0 + 2.0**-40, math.nan, math.inf, -math.inf]  # 1 + 2^-40: f64 only
    trip = [(x, y, z) for x in vals for y in vals for z in vals]
    a, b, c = (np.array([t[i] for t in trip], e.np_dtype) for i in range(3))
    got = med3_fn(e)(a, b, c)
    assert got.dtype == e.np_dtype
    trip = list(zip(*(v.astype(np.float64).tolist() for v in (a, b, c))))  # as held in e
    bad = [(t, float(g)) for t, g in zip(trip, got) if not _same(float(g), _ref_med3(*t))]
    assert not bad, f"med3 on {e.name}: {bad[:6]}"


def test_med3_without_nan_takes_the_fast_path():
    got = med3_fn(dt.f32)(*(np.array(v, np.float32) for v in ([3, 1, 2], [1, 3, 3], [2, 2, 1])))
    assert got.tolist() == [2, 2, 2]


@pytest.mark.parametrize("e", INTS + [dt.bool_], ids=lambda e: e.name)
def test_med3_integers_and_bools_against_the_sorted_median(e):
    xs = [False, True] if e.is_bool else _edges(e)[::3]
    trip = [(x, y, z) for x in xs for y in xs for z in xs]
    a, b, c = (np.array([t[i] for t in trip], e.np_dtype) for i in range(3))
    got = med3_fn(e)(a, b, c)
    assert got.dtype == e.np_dtype
    assert [int(g) for g in got] == [int(sorted(t)[1]) for t in trip]


# -- bf16 truncation: the f32 bit pattern's high half ------------------------------------------

def _f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


TRUNC = [(0x3F80C000, 0x3F80, 0x3F80),   # 1 + 2^-8 + 2^-9: truncates (nearest would give 0x3F81)
         (0xBFFFFFFF, 0xBFFF, 0xBFFF),   # -1.9999999
         (0x7F800001, 0x7F80, 0x7F81),   # NaN with its payload in the low half: inf, or kept NaN
         (0xFF80FFFF, 0xFF80, 0xFF81),   # the same, negative
         (0x7FC00000, 0x7FC0, 0x7FC0),   # quiet NaN: the payload is in the high half
         (0x7F800000, 0x7F80, 0x7F80),   # inf stays inf
         (0x00000001, 0x0000, 0x0000),   # the smallest subnormal: +0
         (0x7F7FFFFF, 0x7F7F, 0x7F7F)]   # max finite f32: below the bf16 inf


def test_truncate_to_bf16_by_bit_patterns():
    x = np.array([t[0] for t in TRUNC], np.uint32).view(np.float32)
    for keep_nan, col in ((False, 1), (True, 2)):
        got = truncate_to_bf16(x, keep_nan)
        assert got.dtype == dt.bf16.np_dtype
        assert got.view(np.uint16).tolist() == [t[col] for t in TRUNC], keep_nan


@pytest.mark.parametrize("src", [dt.f32, dt.f64, dt.f16, dt.i32, dt.fp8_e4m3], ids=lambda e: e.name)
@pytest.mark.parametrize("rounding", ["truncate", "truncate_with_nan"])
def test_truncating_casts_from_each_source(src, rounding):
    """Any source goes to f32 first (rounding to nearest), then its high half is kept."""
    vals = [1.0 + 2.0**-8 + 2.0**-9, -1.9921875, 300.0, 0.0, -0.0, 1.0 + 2**-7 - 2**-40, math.inf,
            math.nan]
    if src.is_int:
        vals = [1, -3, 2**24 + 1, 2**31 - 1, 0]
    x = np.array(vals, np.float64).astype(src.np_dtype) if not src.is_int else np.array(vals, src.np_dtype)
    f32 = np.array([float(v) for v in x.astype(np.float64)], np.float32)  # round to nearest once
    want = [(_f32_bits(float(v)) >> 16) | (rounding == "truncate_with_nan" and math.isnan(v)
                                           and (_f32_bits(float(v)) & 0xFFFF) != 0) for v in f32]
    got = cast_fn(src, dt.bf16, rounding)(x)
    assert got.dtype == dt.bf16.np_dtype
    assert got.view(np.uint16).tolist() == want


# -- stochastic rounding: exact fractions ------------------------------------------------------

# (mantissa bits, smallest normal exponent) of each format, from its definition
SR = {"bf16": (7, -126), "f16": (10, -14), "fp8_e4m3": (3, -6), "fp8_e5m2": (2, -14),
      "fp8_e4m3fnuz": (3, -7), "fp8_e5m2fnuz": (2, -15)}


def _ref_grid(x, rbits, m, emin):
    """x's magnitude at exponent E = max(its own, emin) as a count of 2^(E-23), plus the random
    bits' top 23 - m as the same unit, then cut to m mantissa bits (multiples of 2^(E-m))."""
    if x == 0 or not math.isfinite(x):
        return x
    E = max(math.frexp(abs(x))[1] - 1, emin)
    unit = Fraction(2) ** (E - 23)
    t = math.floor(Fraction(abs(x)) / unit) + (rbits >> (9 + m))
    v = (t >> (23 - m)) * Fraction(2) ** (E - m)
    return math.copysign(float(v), x)


def _sr_inputs(m, emin):
    r = RNG.standard_normal(64) * 2.0 ** RNG.integers(emin - m - 4, emin + 12, 64)
    edges = [2.0**emin, -(2.0**emin), 2.0**(emin - 1), 2.0**(emin - m - 1), 1.0 + 2**-m,
             1.0 - 2**-24, 3.0, 0.0, -0.0, math.inf, -math.inf, math.nan]
    # the smallest f32 subnormal (rounds up to the format's smallest value with enough random
    # bits), and NaNs whose payload lies only below the kept mantissa bits (cut there, they
    # would be infinities)
    codes = np.array([0x00000001, 0x7F800001, 0xFFFFFFFF, 0x7F8001FF], np.uint32).view(np.float32)
    return np.concatenate([np.array(np.concatenate([r, edges]), np.float32), codes])


@pytest.mark.parametrize("fmt", sorted(SR))
def test_stochastic_grid_against_fractions(fmt):
    m, emin = SR[fmt]
    x = _sr_inputs(m, emin)
    for rb in (0, 0xFFFFFFFF, 1 << 31, (1 << (9 + m)) - 1, 1 << (9 + m)):
        r = np.full(x.shape, rb, np.uint32)
        got = stochastic_grid(x, r, m, emin)
        assert got.dtype == np.float32
        want = [_ref_grid(float(v), rb, m, emin) for v in x]
        bad = [(float(v), float(g), w) for v, g, w in zip(x, got, want) if not _same(float(g), w)]
        assert not bad, f"{fmt}, rbits {rb:#x}: (x, got, want) {bad[:5]}"
    r = RNG.integers(0, 2**32, x.shape, dtype=np.uint64).astype(np.uint32)
    got = stochastic_grid(x, r, m, emin)
    want = [_ref_grid(float(v), int(rb), m, emin) for v, rb in zip(x, r)]
    assert all(_same(float(g), w) for g, w in zip(got, want))


@pytest.mark.parametrize("sat", [False, True])
@pytest.mark.parametrize("src", [dt.f32, dt.f16], ids=lambda e: e.name)
@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3", "fp8_e5m2fnuz"])
def test_stochastic_cast_encodes_the_grid_value(fmt, src, sat):
    """cast(sr): the source made f32 exactly, the grid value, then encoded (ml_dtypes; an
    overflow past an fp8 format's max saturates with sat, else follows the format)."""
    to = getattr(dt, fmt)
    m, emin = SR[fmt]
    x = _sr_inputs(m, emin).astype(src.np_dtype)
    x = np.concatenate([x, np.array([1e30, -1e30, 60000.0], src.np_dtype)])
    r = RNG.integers(0, 2**32, x.shape, dtype=np.uint64).astype(np.uint32)
    got = cast_fn(src, to, "sr", sat)(x, r)
    assert got.dtype == to.np_dtype
    fin = float(ml_dtypes.finfo(to.np_dtype).max)
    for v, rb, g in zip(x, r, got):
        w = _ref_grid(float(v), int(rb), m, emin)
        if sat and to.storage_only and not math.isnan(w):  # sat: fp8/fp4 only (ir/ops.py)
            w = min(max(w, -fin), fin)
        with np.errstate(over="ignore"):
            want = np.array([w], np.float32).astype(to.np_dtype)[0]
        assert _same(float(g), float(want)) or (math.isnan(float(g)) and math.isnan(float(want))), (
            float(v), int(rb), float(g), float(want))
