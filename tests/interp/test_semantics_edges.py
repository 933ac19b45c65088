"""Edges of the interpreter's element functions that the reference tests did not reach (the
semantics mutation run's survivors, docs/testing.md): f64 fma lanes on a tie beside a power of
two, past a tie by exactly one and past the fast path's range, saturating float -> 64-bit int at exactly 2^63 / 2^64,
conversion defaults, bf16 truncation of a NaN whose payload is in the low half, f64 -> f16
through f32 (as the emitted C does), e8m0 -> f16 toward zero, rsqrt of 16-bit floats rounded
once, and the internal refusals of an unknown unary op and of fp8 rounding other than 'rn'. Expected values are worked out by hand
in the comments (IEEE 754 rounding, exact integer arithmetic)."""
import numpy as np
import pytest

from opus import dtypes as dt
from opus.interp.semantics import cast_fn, fma_fn, math_fn, unary_fn


def _fma64(a, b, c):
    return float(fma_fn(dt.f64)(np.array([a]), np.array([b]), np.array([c]))[0])


# a * b = 2^-54 + 2^-132 exactly: (1 + x)(1 - x + x^2) = 1 + x^3 with x = 2^-26, scaled by 2^-54
A_TIE = 1 + 2.0**-26
B_TIE = 2.0**-54 * (1 - 2.0**-26 + 2.0**-52)


def test_fma_f64_just_past_a_tie_below_minus_one():
    """a*b + c = -1 + 2^-54 + 2^-132: just past the midpoint between -1 and its neighbour
    toward zero (-1 + 2^-53, the gap there is 2^-53), so it rounds to -1 + 2^-53. The fast
    path's terms are r = -1 and w = +2^-54 (exactly half that gap): the half gap must be taken
    on w's side (toward zero), not toward -inf where the gap is 2^-52."""
    assert _fma64(A_TIE, B_TIE, -1.0) == -1 + 2.0**-53


def test_fma_f64_just_past_a_tie_below_one():
    """The mirror: a*b + c = 1 - 2^-54 - 2^-132 rounds to 1 - 2^-53 (the gap below 1 is
    2^-53, above it 2^-52): w = -2^-54 takes the half gap toward -inf."""
    assert _fma64(-A_TIE, B_TIE, 1.0) == 1 - 2.0**-53


def test_fma_f64_outside_the_fast_range_whose_sum_is_one():
    """|a| >= 2^995 takes the exact path. a*b = (2^30 + 1)^2 = 2^60 + 2^31 + 1 and
    c = -(2^60 + 2^31), so a*b + c = 1 exactly; rounding a*b first (to 2^60 + 2^31) gives 0."""
    a = (2**30 + 1) * 2.0**965
    b = (2**30 + 1) * 2.0**-965
    assert _fma64(a, b, -(2.0**60 + 2.0**31)) == 1.0


def test_fma_f64_past_a_tie_by_exactly_one():
    """274177 * 67280421310721 = 2^64 + 1 (Landry's factors of the Fermat number F6), so
    a*b + 2^117 = 2^117 + 2^64 + 1: just past the midpoint between 2^117 and 2^117 + 2^65
    (the gap there), so it rounds up. Rounding a*b to 2^64 leaves an error of exactly 1 (the
    fast path's q): the lane must still take the exact path."""
    assert 274177 * 67280421310721 == 2**64 + 1
    assert _fma64(274177.0, 67280421310721.0, 2.0**117) == 2.0**117 + 2.0**65


def test_float_to_64_bit_ints_saturate_at_exactly_two_to_the_width():
    """Toward zero and saturating (PTX cvt.rzi.sat): 2^63 is the first f64 beyond i64's range
    (its largest value 2^63 - 1 is not a double), 2^64 beyond u64's; NaN gives 0."""
    i64 = cast_fn(dt.f64, dt.i64)(np.array([2.0**63, 2.0**63 - 1024, -(2.0**63), 1e30, -1e30,
                                            np.nan]))
    assert i64.tolist() == [2**63 - 1, 2**63 - 1024, -(2**63), 2**63 - 1, -(2**63), 0]
    u64 = cast_fn(dt.f64, dt.u64)(np.array([2.0**64, 2.0**64 - 2048, -1.0, np.nan, 1e30]))
    assert u64.tolist() == [2**64 - 1, 2**64 - 2048, 0, 0, 2**64 - 1]


def test_conversion_defaults_round_to_nearest_without_saturation():
    """cast_fn's defaults are rounding='rn', sat=False: 1.0625 and 1.1875 are ties between
    e4m3 neighbours (3 mantissa bits) and go to the even one (1.0 = 0x38, 1.25 = 0x3A); 1000 is
    past e4m3's 448 and gives NaN with the sign kept (0x7F, 0xFF), not +-448."""
    x = np.array([1.0625, 1.1875, 1000.0, -1000.0], np.float32)
    assert cast_fn(dt.f32, dt.fp8_e4m3)(x).view(np.uint8).tolist() == [0x38, 0x3A, 0x7F, 0xFF]


def test_bf16_truncation_of_an_f32_nan_with_a_low_payload():
    """The high half of 0x7F800001 is an infinity's: 'truncate' keeps it (0x7F80), while
    'truncate_with_nan' sets bit 0 so the NaN stays a NaN (0x7F81); ordinary values are cut
    the same by both."""
    x = np.array([0x7F800001, 0xFF80FFFF, 0x3F800001, 0x7FC00000], np.uint32).view(np.float32)
    plain = cast_fn(dt.f32, dt.bf16, "truncate")(x).view(np.uint16).tolist()
    kept = cast_fn(dt.f32, dt.bf16, "truncate_with_nan")(x).view(np.uint16).tolist()
    assert plain == [0x7F80, 0xFF80, 0x3F80, 0x7FC0]
    assert kept == [0x7F81, 0xFF81, 0x3F80, 0x7FC0]


def test_f64_to_f16_rounds_through_f32_as_the_emitted_c():
    """1 + 2^-11 + 2^-40 rounds to the f32 1 + 2^-11 (the 2^-40 is below f32's precision),
    an exact tie between the f16 values 1 and 1 + 2^-10 that goes to the even one, 1.0
    (codegen's f64 -> half conversion goes through float; rounding the f64 directly would give
    1 + 2^-10). Below and above the tie both paths agree."""
    x = np.array([1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11 - 2.0**-20, 1 + 2.0**-11 + 2.0**-20])
    got = cast_fn(dt.f64, dt.f16)(x)
    assert got.tolist() == [1.0, 1.0, 1 + 2.0**-10]


def test_e8m0_to_f16_toward_zero_saturates_at_the_largest_finite():
    """Toward zero, a power of two beyond f16's range gives f16's largest finite value 65504;
    to nearest it gives inf. 2^-3 is exact either way."""
    x = (np.array([20, 127, -3, 16]) + 127).astype(np.uint8).view(dt.e8m0.np_dtype)
    assert cast_fn(dt.e8m0, dt.f16, "rz")(x).tolist() == [65504.0, 65504.0, 0.125, 65504.0]
    assert cast_fn(dt.e8m0, dt.f16, "rn")(x).tolist() == [np.inf, np.inf, 0.125, np.inf]


@pytest.mark.parametrize("e", [dt.f16, dt.bf16], ids=lambda e: e.name)
def test_rsqrt_of_every_positive_16_bit_float_rounds_once(e):
    """rsqrt on a 16-bit float is computed in f32 and rounded once: for every positive finite
    value it equals 1/sqrt(x) computed in f64 and rounded to the type (a sqrt and a divide
    each rounded to the 16-bit type miss thousands of them)."""
    top = 0x7C00 if e.name == "f16" else 0x7F80  # the +inf code
    x = np.arange(1, top, dtype=np.uint16).view(e.np_dtype)
    want = (1 / np.sqrt(x.astype(np.float64))).astype(e.np_dtype)
    got = math_fn("rsqrt", e)(x)
    assert got.dtype == e.np_dtype
    bad = np.flatnonzero(got.view(np.uint16) != want.view(np.uint16))
    assert bad.size == 0, (x[bad[:4]], got[bad[:4]], want[bad[:4]])


def test_unknown_unary_op_on_an_integer_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"^unary sqrt on i32$"):
        unary_fn("sqrt", dt.i32)


def test_fp8_conversions_other_than_to_nearest_are_refused_by_name():
    """Target.conversion refuses them first; the element function says why as well."""
    with pytest.raises(NotImplementedError, match=(
            r"^rounding 'rz' for conversions to fp8_e4m3: 8- and 4-bit float conversions round "
            r"to nearest even$")):
        cast_fn(dt.f32, dt.fp8_e4m3, "rz")
