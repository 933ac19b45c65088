"""f32 fma rounds once, at the ties where rounding twice differs: the interpreter against values
worked out by hand and against exact rational arithmetic rounded to f32 here (ties to even);
a * b + c rounds twice (numpy's float32 ops); the CUDA render is one FFMA (and the twice-rounded
form an FMUL and an FADD, not fused), the HIP one one v_fma. The GPU twin is
tests/test_gpu_gaps.py."""
import os
import re
import sys
from fractions import Fraction

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import gap_kernels as GK  # noqa: E402

E = Fraction(2) ** -12
# (a, b, c, fma, a*b+c rounded twice), by hand. (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie
# between 1 + 2^-11 (even) and 1 + 2^-11 + 2^-23: rounded alone it goes to the even one, and
# 2^-60 more is lost; rounded once, the 2^-60 puts it above the tie.
TIES = [
    (1 + E, 1 + E, 2.0**-60, 1 + 2 * E + 2.0**-23, 1 + 2 * E),
    (-(1 + E), 1 + E, -2.0**-60, -(1 + 2 * E + 2.0**-23), -(1 + 2 * E)),
    # 1.5 + 2^-23 + 2^-24 is a tie whose even neighbour is above (1.5 + 2^-22): -2^-60 puts the
    # exact value under the tie, so the fma rounds down where rounding twice goes up
    (1 + 2.0**-23, 1.5, -2.0**-60, 1.5 + 2.0**-23, 1.5 + 2.0**-22),
]


def f32_round(x: Fraction) -> float:
    """The f32 nearest to the rational x (ties to even), by exact arithmetic; |x| < 2^128."""
    if x == 0:
        return 0.0
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2^e <= |x| < 2^(e+2)
    if Fraction(2) ** e > abs(x):
        e -= 1
    if abs(x) >= Fraction(2) ** (e + 1):
        e += 1
    ulp = Fraction(2) ** (max(e, -126) - 23)  # subnormals share the smallest normal's ulp
    return float(round(x / ulp) * ulp)  # Fraction.__round__: half to even


@pytest.fixture(params=["sm_90a", "gfx942"])
def interpret(request):
    with opus.set_target(request.param, interpret=True):
        yield


def test_ties_round_once_by_hand(interpret):
    a, b, c = ([float(t[k]) for t in TIES] for k in range(3))
    for x in a + b + c:
        assert float(np.float32(x)) == x  # the inputs are exact in f32
    fused, twice = _launch(a, b, c)
    assert fused.tolist() == [float(t[3]) for t in TIES]
    assert twice.tolist() == [float(t[4]) for t in TIES]
    assert (fused != twice).all()  # each case tells one rounding from two


def _launch(a, b, c):
    a, b, c = (np.array(v, np.float32) for v in (a, b, c))
    fused, twice = np.full_like(a, np.nan), np.full_like(a, np.nan)
    block = min(len(a), 256)
    assert len(a) % block == 0
    GK.fma_and_mul_add[len(a) // block, block](a, b, c, fused, twice)
    return fused, twice


def near_ties(n, seed):
    """Products of f32s with 12-13 bit odd mantissas (up to 26 bits exactly: rounded to 24, at or
    near a tie) plus addends from tiny to large, of both signs; subnormal to large products."""
    rng = np.random.default_rng(seed)

    def short(size):
        m = rng.integers(1 << 11, 1 << 13, size) | 1
        return (m * 2.0 ** rng.integers(-80, 40, size) * rng.choice([-1, 1], size)).astype(np.float32)
    a, b = short(n), short(n)
    p = a.astype(np.float64) * b.astype(np.float64)
    scale = np.abs(p) * 2.0 ** rng.integers(-60, 2, n).astype(np.float64)
    c = (scale * rng.choice([-1, 1], n)).astype(np.float32)
    c[rng.random(n) < 0.1] = 0
    return a, b, c


def test_fma_is_the_exact_value_rounded_once_to_f32(interpret):
    a, b, c = near_ties(2048, 17)
    fused, twice = _launch(a, b, c)
    want = [f32_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
            for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(fused, np.array(want, np.float32))
    np.testing.assert_array_equal(twice, a * b + c)  # numpy: float32 multiply, then add
    assert (fused != twice).sum() > 50  # many cases where the two differ


def test_reference_rounding_by_hand():
    assert f32_round(1 + 2 * E + Fraction(2) ** -24) == 1 + 2.0**-11  # tie: to even (down)
    assert f32_round(1 + 2 * E + 3 * Fraction(2) ** -24) == 1 + 2.0**-11 + 2.0**-22  # tie: up
    assert f32_round(Fraction(3, 2) ** -1) == float(np.float32(2 / 3))
    assert f32_round(Fraction(2) ** -150) == 0.0  # half the smallest subnormal: to even (0)
    assert f32_round(Fraction(3) * Fraction(2) ** -151) == 2.0**-149


def test_cuda_render_is_one_ffma_and_the_plain_form_is_not_fused():
    sass = GK.fma_and_mul_add.sass(target="sm_90a")
    ops = re.findall(r"\b(FFMA|FMUL|FADD)\b", sass)
    assert sorted(ops) == ["FADD", "FFMA", "FMUL"], sass


def test_hip_render_is_one_fma_and_the_plain_form_is_not_fused(requires_amd_compiler):
    asm = GK.fma_and_mul_add.asm(target="gfx942")
    ops = re.findall(r"\bv_(fmac?|mul|add)_f32", asm)
    assert sorted(o.rstrip("c") for o in ops) == ["add", "fma", "mul"], asm
