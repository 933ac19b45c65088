"""Stochastic rounding (opus.cast(..., rounding='sr', rbits=r)) in the interpreter as sm_90a,
gfx942 and gfx950: a hand-derived table (each row worked out in its comment from ir/ops.py's
rule), >= 2^20 random values and random words per destination against an independent
reference in float64/Python-int arithmetic, and the rule's point: the mean of many roundings is
the value."""
import ml_dtypes
import numpy as np
import pytest

import opus
from conv_kernels import TARGETS, sr_on
from hostexec.float_refs import ml_encode, same_floats
from test_rounding import random_f32

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FP8 = [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz]
# destination -> (mantissa bits, smallest normal exponent): the formats' own parameters
FORMAT = {"fp8_e4m3": (3, -6), "fp8_e5m2": (2, -14), "fp8_e4m3fnuz": (3, -7),
          "fp8_e5m2fnuz": (2, -15), "f16": (10, -14), "bf16": (7, -126)}


def reference(x, r, t, sat):
    """ir/ops.py's rule in float64 and integers: S = floor(|x| * 2^(23-e)) at
    e = max(floor(log2|x|), emin), plus the top 23-m random bits, floored to 2^(23-m) steps;
    the exact result then converted with nearest even (ml_dtypes, sat clamping)."""
    m, emin = FORMAT[t.name]
    x64 = x.astype(np.float64)
    ax = np.abs(x64)
    finite = np.isfinite(ax) & (ax > 0)
    _, ex = np.frexp(np.where(finite, ax, 1.0))
    e = np.maximum(ex - 1, emin)
    s = np.floor(ax * np.exp2(23.0 - e))
    q = np.floor((np.where(finite, s, 0) + (r >> np.uint32(9 + m)).astype(np.float64)) / 2.0 ** (23 - m))
    val = np.where(finite, np.copysign(q * np.exp2(e - m), x64), x64).astype(np.float32)
    if t.storage_only:
        return ml_encode(val, t, sat)
    return val.astype(t.np_dtype)


# (type, sat, input, random word, expected code) worked out by hand
TABLE = [
    # e4m3 keeps 3 of f32's 23 mantissa bits; R = r >> 12 lands on the 20 dropped ones.
    # 1.0625 drops exactly half (0x80000): up iff R >= 0x80000, i.e. r >= 0x80000000
    (opus.fp8_e4m3, False, 1.0625, 0x7FFFFFFF, 0x38), (opus.fp8_e4m3, False, 1.0625, 0x80000000, 0x39),
    # 1.0 drops nothing: never up
    (opus.fp8_e4m3, False, 1.0, 0xFFFFFFFF, 0x38),
    # 0x3F8FFFFF drops 0xFFFFF: R = 1 (r = 0x1000) carries, r = 0xFFF (R = 0) does not
    (opus.fp8_e4m3, False, np.uint32(0x3F8FFFFF).view(np.float32), 0x00001000, 0x39),
    (opus.fp8_e4m3, False, np.uint32(0x3F8FFFFF).view(np.float32), 0x00000FFF, 0x38),
    # 2^-10, half the smallest subnormal 2^-9: S = 2^19 at e = emin = -6, up iff R >= 2^19
    (opus.fp8_e4m3, False, 2.0 ** -10, 0x80000000, 0x01), (opus.fp8_e4m3, False, 2.0 ** -10, 0x7FFFFFFF, 0x00),
    # 449 = 448 + 2^15 dropped: up (to 480, past max) iff R >= 0xF8000, r >= 0xF8000000:
    # without sat e4m3 overflows to NaN 0x7F, with sat to 448 (0x7E)
    (opus.fp8_e4m3, False, 449.0, 0xF8000000, 0x7F), (opus.fp8_e4m3, True, 449.0, 0xF8000000, 0x7E),
    (opus.fp8_e4m3, False, 449.0, 0xF7FFFFFF, 0x7E), (opus.fp8_e4m3, False, -449.0, 0xF8000000, 0xFF),
    # FNUZ e4m3 (emin -7): -2^-11 is half of 2^-10; rounding down gives zero, which FNUZ spells
    # 0x00 (its 0x80 is NaN)
    (opus.fp8_e4m3fnuz, False, -2.0 ** -11, 0x80000000, 0x81), (opus.fp8_e4m3fnuz, False, -2.0 ** -11, 0, 0x00),
    # e5m2: infinities and NaN convert as with 'rn'
    (opus.fp8_e5m2, False, np.inf, 0, 0x7C), (opus.fp8_e5m2, True, np.inf, 0, 0x7B),
    (opus.fp8_e5m2, False, np.nan, 0x12345678, 0x7F), (opus.fp8_e5m2fnuz, False, np.nan, 0, 0x80),
    # bf16 keeps 7 bits, R = r >> 16: 1 + 2^-9 drops 0x4000, up iff R >= 0xC000
    (opus.bf16, False, 1 + 2.0 ** -9, 0xC0000000, 0x3F81), (opus.bf16, False, 1 + 2.0 ** -9, 0xBFFFFFFF, 0x3F80),
    # f16 keeps 10 bits, R = r >> 19: 65519 drops 0xF00 of 0x2000, up (to 65536: inf) iff
    # R >= 0x1100, r >= 0x88000000
    (opus.f16, False, 65519.0, 0x88000000, 0x7C00), (opus.f16, False, 65519.0, 0x87FFFFFF, 0x7BFF),
    # -0 stays -0 (OCP, f16)
    (opus.fp8_e4m3, False, -0.0, 0xFFFFFFFF, 0x80), (opus.f16, False, -0.0, 0xFFFFFFFF, 0x8000),
]


@pytest.mark.parametrize("target", TARGETS)
def test_hand_derived_table(target):
    for t, sat, x, r, want in TABLE:
        xs = np.full(4, x, np.float32)
        rs = np.full(4, r, np.uint32)
        got = sr_on(target, xs, rs, opus.f32, t, sat=sat).view(f"u{t.itemsize}")
        assert got.tolist() == [want] * 4, (t.name, sat, x, hex(r), [hex(g) for g in got])


CASES = [(t, sat) for t in FP8 for sat in (False, True)] + [(opus.f16, False), (opus.bf16, False)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t,sat", CASES, ids=[f"{t.name}-{'sat' if s else 'nosat'}" for t, s in CASES])
def test_random_against_reference(target, t, sat):
    x = random_f32(seed=5)
    r = np.random.default_rng(6).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = sr_on(target, x, r, opus.f32, t, sat=sat)
    ref = reference(x, r, t, sat)
    if t.storage_only:
        bad = np.flatnonzero(got.view(np.uint8) != ref)
        assert bad.size == 0, [(hex(int(x.view(np.uint32)[i])), hex(int(r[i])), hex(got.view(np.uint8)[i]),
                                hex(ref[i])) for i in bad[:6]]
    else:
        assert same_floats(got, ref)


@pytest.mark.parametrize("src", [opus.f16, opus.bf16], ids=lambda t: t.name)
def test_16_bit_sources_convert_exactly_first(src):
    x = random_f32(1 << 16, seed=9).astype(src.np_dtype)
    r = np.random.default_rng(10).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = sr_on("gfx950", x, r, src, opus.fp8_e4m3, sat=True).view(np.uint8)
    np.testing.assert_array_equal(got, reference(x.astype(np.float32), r, opus.fp8_e4m3, True))


def test_mean_of_many_roundings_is_the_value():
    """Unbiased: 1 + 0.3 * 2^-3 rounds to 1.125 with probability 0.3 (up to 2^-20), so the mean
    of 2^16 roundings with uniform words is the value within a few standard errors."""
    x = np.full(1 << 16, 1 + 0.3 / 8, np.float32)
    r = np.random.default_rng(3).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = sr_on("sm_90a", x, r, opus.f32, opus.fp8_e4m3).astype(np.float64)
    assert set(np.unique(got)) == {1.0, 1.125}
    se = 0.125 * np.sqrt(0.3 * 0.7 / len(x))
    assert abs(got.mean() - float(x[0])) < 4 * se


# -- fp4 / fp6 (sub-byte: packed in memory, opus.pack/unpack on the host) --------------------------

SUB_BYTE = {"fp4_e2m1": (1, 0), "fp6_e2m3": (3, 0), "fp6_e3m2": (2, -2)}


def _sub_byte_sr(t, sat):
    @opus.kernel
    def conv(x: opus.Ptr[opus.f32], r: opus.Ptr[opus.u32], y: opus.Ptr[t]):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 4
        v = opus.make_gmem(x).load(i, vec=4)
        q = opus.cast(v, t, rounding="sr", sat=sat, rbits=opus.make_gmem(r).load(i, vec=4))
        opus.make_gmem(y).store(q, i)
    return conv


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", [opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2], ids=lambda t: t.name)
def test_sub_byte_random_against_reference(target, t):
    FORMAT.update(SUB_BYTE)
    x = random_f32(1 << 16, seed=15)
    x = x[: len(x) // 1024 * 1024]
    r = np.random.default_rng(16).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    y = np.zeros(opus.host_types.packed_nbytes(t, len(x)), np.uint8)
    with opus.set_target(target, interpret=True):
        _sub_byte_sr(t, True)[len(x) // 1024, 256](x, r, y)
    got = opus.unpack(y, t).astype(np.float32)
    m, emin = SUB_BYTE[t.name]
    ax = np.abs(x.astype(np.float64))
    finite = np.isfinite(ax) & (ax > 0)
    _, ex = np.frexp(np.where(finite, ax, 1.0))
    e = np.maximum(ex - 1, emin)
    q = np.floor((np.floor(ax * np.exp2(23.0 - e)) + (r >> np.uint32(9 + m))) / 2.0 ** (23 - m))
    fin = float(ml_dtypes.finfo(t.np_dtype).max)
    val = np.where(finite, np.copysign(np.minimum(q * np.exp2(e - m), fin), x), np.clip(x, -fin, fin))
    ok = ~np.isnan(x)  # the code a NaN gives is unspecified (no NaN in these formats)
    np.testing.assert_array_equal(got[ok], val[ok].astype(np.float32))
