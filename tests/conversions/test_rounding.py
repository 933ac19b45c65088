"""Rounding modes of opus.cast in the interpreter as sm_90a, gfx942 and gfx950, bit-exact against
independent references: ml_dtypes (plus explicit clamping for sat), and rules written out here
from ir/ops.py for the modes ml_dtypes lacks (rz, the bf16 truncations). Every fp8, bf16 and f16
code decodes to f32 and back unchanged; f32 -> low precision is checked on every special case
(ties, subnormals, overflow edges, NaN/inf, -0) and on 2^20 random bit patterns per pair and
mode."""
import ml_dtypes
import numpy as np
import pytest

import opus
from conv_kernels import TARGETS, cast_on
from hostexec.float_refs import ml_encode, same_floats

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FP8 = [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz]
N_RANDOM = 1 << 20


def random_f32(n=N_RANDOM, seed=1):
    """n random f32 bit patterns (every exponent, NaNs and infinities included) plus the special
    cases of the 16- and 8-bit formats: every bf16 value and its neighbours (so every fp8/f16
    tie, subnormal step and overflow edge), signed zeros, infinities and NaNs with payloads in
    either half."""
    u = np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    special = np.uint32([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                         0xFF800001, 0x7F80FFFF, 0x7FFF0000, 0x00000001, 0x807FFFFF])
    mids = np.concatenate([hi + 0x8000, f16 + 0x1000, f16 + 0xFFF, f16 + 0x1001])
    return np.concatenate([u, hi, hi + 1, hi - 1, mids, special]).view(np.float32)


# -- every code to f32 and back -------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", FP8 + [opus.bf16, opus.f16], ids=lambda t: t.name)
def test_every_code_to_f32_and_back(target, t):
    codes = np.arange(1 << t.bits, dtype=f"u{t.itemsize}")
    x = codes.view(t.np_dtype)
    f = cast_on(target, x, t, opus.f32)
    assert same_floats(f, x.astype(np.float32))  # ml_dtypes' decode
    back = cast_on(target, f, opus.f32, t).view(codes.dtype)
    nan = np.isnan(f)
    np.testing.assert_array_equal(back[~nan], codes[~nan])  # exact: every value comes back
    if t.storage_only:  # NaNs come back as the format's one NaN code
        assert set(back[nan].tolist()) == {0x7F if "fnuz" not in t.name else 0x80}


# -- f32 -> fp8, nearest even, with and without sat -----------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", FP8, ids=lambda t: t.name)
@pytest.mark.parametrize("sat", [False, True], ids=["nosat", "sat"])
def test_f32_to_fp8_random_and_special(target, t, sat):
    x = random_f32()
    got = cast_on(target, x, opus.f32, t, sat=sat).view(np.uint8)
    ref = ml_encode(x, t, sat)  # ml_dtypes; sat clamps to +-max first; one NaN code
    bad = np.flatnonzero(got != ref)
    assert bad.size == 0, [(hex(int(x.view(np.uint32)[i])), hex(got[i]), hex(ref[i])) for i in bad[:6]]


# -- f32 -> f16 / bf16, nearest even and toward zero ----------------------------------------------

def toward_zero(x, t):
    """x rounded toward zero to float type t: nearest even (ml_dtypes/numpy), stepped one code
    toward zero where that moved away from zero (inf -> largest finite)."""
    r = x.astype(t.np_dtype)
    away = np.abs(r.astype(np.float64)) > np.abs(x.astype(np.float64))
    u = r.view(f"u{t.itemsize}")
    return np.where(away, u - 1, u).astype(f"u{t.itemsize}").view(t.np_dtype)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", [opus.f16, opus.bf16], ids=lambda t: t.name)
@pytest.mark.parametrize("rounding", ["rn", "standard", "rz"])
def test_f32_to_half_random_and_special(target, t, rounding):
    x = random_f32()
    got = cast_on(target, x, opus.f32, t, rounding=rounding)
    ref = toward_zero(x, t) if rounding == "rz" else x.astype(t.np_dtype)
    assert same_floats(got, ref)


# -- the original's bf16 truncations ------------------------------------------------------------

def bf16_truncations(x):
    """(truncate, truncate_with_nan) of f32 array x, written from ir/ops.py: the high half of
    the bits; the second sets bit 0 where the exponent is all ones and the low half is not 0."""
    u = x.view(np.uint32)
    hi = (u >> 16).astype(np.uint16)
    nan_low = ((u >> 23) & 0xFF == 0xFF) & ((u & 0xFFFF) != 0)
    return hi, hi | nan_low.astype(np.uint16)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", ["truncate", "truncate_with_nan"])
def test_bf16_truncations(target, mode):
    x = random_f32()
    got = cast_on(target, x, opus.f32, opus.bf16, rounding=mode).view(np.uint16)
    plain, keep_nan = bf16_truncations(x)
    np.testing.assert_array_equal(got, plain if mode == "truncate" else keep_nan)


def test_bf16_truncation_hand_table():
    """Hand-derived: 1 + 2^-8 + 2^-9 is 0x3FC0_C000 (truncates to 0x3F80, nearest gives 0x3F81);
    -1.9999999 (0xBFFF_FFFF) truncates to 0xBFFF; the NaN 0x7F80_0001 truncates to +inf
    (0x7F80) but keeps NaN as 0x7F81; -inf stays 0xFF80 both ways."""
    bits = np.uint32([0x3FC0C000, 0xBFFFFFFF, 0x7F800001, 0xFF800000])
    x = np.repeat(bits, 2).view(np.float32)
    t = cast_on("gfx942", x, opus.f32, opus.bf16, rounding="truncate").view(np.uint16)[::2]
    k = cast_on("gfx950", x, opus.f32, opus.bf16, rounding="truncate_with_nan").view(np.uint16)[::2]
    n = cast_on("sm_90a", x, opus.f32, opus.bf16).view(np.uint16)[::2]
    assert t.tolist() == [0x3FC0, 0xBFFF, 0x7F80, 0xFF80]
    assert k.tolist() == [0x3FC0, 0xBFFF, 0x7F81, 0xFF80]
    assert n[:2].tolist() == [0x3FC1, 0xC000]


def test_f64_to_bf16_truncation_goes_through_f32():
    """f64 rounds to f32 (nearest) first, then truncates: 1 + 2^-7 - 2^-40 is 1.0078125 in f32
    after rounding (0x3F810000), so it truncates to 0x3F81 (truncating the f64 would give 0x3F80)."""
    x = np.full(2, 1 + 2.0 ** -7 - 2.0 ** -40)
    got = cast_on("sm_90a", x, opus.f64, opus.bf16, rounding="truncate", vec=2).view(np.uint16)
    assert got.tolist() == [0x3F81, 0x3F81]
