"""The interpreter's f64 fma rounds once (a*b+c exactly, then to nearest even), like the GPU's.

Reference: exact rational arithmetic (fractions.Fraction) with IEEE 754's rules for zeros,
infinities and NaN written out; on Python 3.13+ also math.fma.
"""
from fractions import Fraction
import math

import numpy as np
import pytest

import opus
from opus.interp.semantics import fma_f64

RNG = np.random.default_rng(2024)


def ref_fma(a, b, c):
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan  # inf * 0
        p = math.copysign(math.inf, a) * math.copysign(1.0, b)
        return math.nan if math.isinf(c) and c != p else p
    if math.isinf(c):
        return c
    x = Fraction(a) * Fraction(b) + Fraction(c)
    if x == 0:
        prod_neg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
        both_zero_neg = (a == 0 or b == 0) and c == 0 and prod_neg and math.copysign(1, c) < 0
        return -0.0 if both_zero_neg else 0.0
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def check(a, b, c):
    a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
    got = fma_f64(a, b, c)
    assert got.dtype == np.float64 and got.shape == np.broadcast(a, b, c).shape
    for i, (x, y, z) in enumerate(zip(*(np.broadcast_to(v, got.shape).ravel() for v in (a, b, c)))):
        want = ref_fma(float(x), float(y), float(z))
        r = float(got.ravel()[i])
        ok = (math.isnan(want) and math.isnan(r)) or (
            r == want and math.copysign(1, r) == math.copysign(1, want))
        assert ok, f"fma({x!r}, {y!r}, {z!r}) = {r!r}, want {want!r}"
        if hasattr(math, "fma"):  # Python 3.13+
            m = math.fma(float(x), float(y), float(z))
            assert (math.isnan(m) and math.isnan(r)) or m == r


def test_random_operands_over_the_whole_range():
    n = 20000
    a = RNG.standard_normal(n) * np.exp2(RNG.integers(-520, 520, n))
    b = RNG.standard_normal(n) * np.exp2(RNG.integers(-520, 520, n))
    c = RNG.standard_normal(n) * np.exp2(RNG.integers(-1074, 1023, n))
    check(a, b, c)


def test_cancellation_and_near_cancellation():
    n = 20000
    a = RNG.standard_normal(n) * np.exp2(RNG.integers(-40, 40, n))
    b = RNG.standard_normal(n) * np.exp2(RNG.integers(-40, 40, n))
    rel = RNG.standard_normal(n) * np.exp2(RNG.integers(-110, -1, n))
    check(a, b, -(a * b) * (1 + rel))
    check(a, b, -(a * b))  # result is exactly the product's rounding error


def _ties(n, scale):
    """a*b + c exactly halfway between two doubles (and the neighbours of those c)."""
    i = RNG.integers(1, 1 << 25, n)
    j = RNG.integers(1, 1 << 25, n)
    a = 1 + i * 2.0**-27
    b = 1 + j * 2.0**-27
    cs = []
    for x, y in zip(a, b):
        p = Fraction(x) * Fraction(y)  # 1 + k 2^-54: not a double
        q = math.floor(p * 2**52) / Fraction(2**52)
        cs.append(float(q + Fraction(1, 2**53) - p))  # a multiple of 2^-54 below 2^-50: exact
    c = np.array(cs)
    k = RNG.integers(-scale, scale, n)
    a, b, c = a * np.exp2(k), b * np.exp2(k), c * np.exp2(2 * k)
    return a, b, c


@pytest.mark.parametrize("scale", [1, 400])
def test_exact_ties_round_to_even_and_their_neighbours(scale):
    a, b, c = _ties(2000, scale)
    check(a, b, c)
    check(a, b, np.nextafter(c, np.inf))
    check(a, b, np.nextafter(c, -np.inf))
    check(-a, b, -c)


def test_subnormal_results_and_tiny_products():
    n = 5000
    a = RNG.standard_normal(n) * 2.0**-530
    b = RNG.standard_normal(n) * 2.0**-530
    c = RNG.standard_normal(n) * 2.0**-1060
    check(a, b, c)
    check(a, b, -a * b)
    check(a * 2.0**-30, b, np.float64(5e-324) * RNG.integers(-4, 4, n))
    check(a * 2.0**-530, b * 2.0**530 * 2.0**900, RNG.standard_normal(n) * 2.0**-160)  # a subnormal operand


def test_overflow_boundary():
    big = np.float64(2.0**512)
    mx = np.finfo(np.float64).max
    half_ulp = 2.0**970
    check(big, big, -mx)                                  # 2^1024 - max: exact
    check(big, big, -half_ulp)                            # halfway to inf: ties to even -> inf
    check(big, big, np.nextafter(-half_ulp, -np.inf))     # just below: max
    check(big, -big, half_ulp)
    check(np.float64(1e308), np.float64(2.0), np.float64(-1e308))  # a*b overflows; the fma does not
    check(np.float64(2.0**600), np.float64(2.0**600), np.float64(1.0))
    check(np.float64(2.0**1000), np.float64(2.0**1000), np.float64(-mx))


def test_zeros_infinities_and_nan():
    vals = [0.0, -0.0, 1.0, -1.5, 3e-310, np.inf, -np.inf, np.nan, 1e308, -1e308]
    a, b, c = np.meshgrid(vals, vals, vals, indexing="ij")
    check(a.ravel(), b.ravel(), c.ravel())
    check(1e308, -10.0, np.inf)  # the product overflows, but exactly it is finite: inf
    check(2.0, 3.0, -6.0)        # exact cancellation: +0
    check(-2.0, 3.0, 6.0)


def test_broadcast_operands():
    a = RNG.standard_normal((64, 1))
    check(a, RNG.standard_normal((1, 8)), np.float64(0.3))


def test_f64_fma_in_a_kernel():
    @opus.kernel
    def k(a: opus.Ptr[opus.f64], b: opus.Ptr[opus.f64], c: opus.Ptr[opus.f64], out: opus.Ptr[opus.f64]):
        i = opus.thread_id_x()
        out[i] = opus.fma(a[i], b[i], c[i])

    a, b, c = _ties(128, 10)
    out = np.zeros(128)
    with opus.set_target("sm_90a", interpret=True):
        k[1, 128](a, b, c, out)
    assert [float(x) for x in out] == [ref_fma(*v) for v in zip(a.tolist(), b.tolist(), c.tolist())]
    assert (out != a * b + c).any()  # the two-rounding result differs on ties
