"""Quantization helpers in the interpreter as sm_90a, gfx942 and gfx950 (each specialization
also compiled for its target): opus.scaled_cast against numpy + ml_dtypes with explicit
clamping, the OCP MX v1.0 scale rule (X = 2^(floor(log2 amax) - emax_elem)) against a
hand-derived table and a float64 log2 reference, MX quantize -> dequantize, per-tensor scales."""
import functools

import ml_dtypes
import numpy as np
import pytest

import opus
from conv_kernels import TARGETS
from hostexec.float_refs import ml_encode

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@functools.lru_cache(None)
def scaled(t):
    @opus.kernel
    def k(x: opus.Ptr[opus.f32], inv: opus.Ptr[opus.f32], y: opus.Ptr[t], n: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 4
        gx, gy = opus.make_gmem(x, n), opus.make_gmem(y, n)
        gy.store(opus.scaled_cast(gx.load(i, vec=4), t, inv[0]), i)
    return k


def run_scaled(target, t, x, inv):
    y = np.zeros(len(x), t.np_dtype)
    with opus.set_target(target, interpret=True):
        scaled(t)[(len(x) // 4 + 255) // 256, 256](x, np.float32([inv]), y, len(x))
    return y


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("t", [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.bf16, opus.f16],
                         ids=lambda t: t.name)
def test_scaled_cast_clamps_to_the_finite_range(target, t):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(1 << 16) * 300, [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30]])
    x = x.astype(np.float32)[: (len(x) // 4) * 4]
    inv = np.float32(3.7)
    got = run_scaled(target, t, x, inv)
    p = x * inv  # one f32 multiplication
    fin = float(ml_dtypes.finfo(t.np_dtype).max)
    if t.storage_only:
        np.testing.assert_array_equal(got.view(np.uint8), ml_encode(p, t, True))
    else:
        ref = np.where(np.isnan(p), p, np.clip(p, -fin, fin)).astype(t.np_dtype)
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), np.isnan(ref.astype(np.float32)))
        ok = ~np.isnan(ref.astype(np.float32))
        np.testing.assert_array_equal(got[ok].view(np.uint16), ref[ok].view(np.uint16))
        assert np.isfinite(got.astype(np.float32)[ok]).all()


@functools.lru_cache(None)
def mx_kernel(elem):
    @opus.kernel
    def k(x: opus.Ptr[opus.f32], q: opus.Ptr[elem], s: opus.Ptr[opus.e8m0], y: opus.Ptr[opus.f32]):
        b = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()  # one block of 32 each
        gx, gq, gy = opus.make_gmem(x), opus.make_gmem(q), opus.make_gmem(y)
        base = b * 64
        v = opus.concat(*[gx.load(base + 4 * j, vec=4) for j in range(16)])
        qq, sc = opus.mx_quantize(v, elem)
        for j in range(4):
            gq.store(qq[16 * j:16 * j + 16], base + 16 * j)
        s[b * 2] = sc[0]
        s[b * 2 + 1] = sc[1]
        d = opus.mx_dequantize(qq, sc)
        for j in range(16):
            gy.store(d[4 * j:4 * j + 4], base + 4 * j)
    return k


EMAX = {"fp8_e4m3": 8, "fp8_e5m2": 15, "fp4_e2m1": 2}


def mx_reference(x, elem):
    """OCP MX v1.0 6.3 from the value: X = 2^(floor(log2(amax)) - emax), codes clamped to
    [0, 254]; elements x / X rounded to nearest even with saturation (ml_dtypes + clip)."""
    blocks = x.reshape(-1, 32).astype(np.float64)
    amax = np.abs(blocks).max(axis=1)
    with np.errstate(divide="ignore"):
        k = np.floor(np.log2(amax)) - EMAX[elem.name]
    code = np.clip(np.where(amax > 0, k + 127, 0), 0, 254).astype(np.uint8)
    scaled_x = (blocks / np.exp2(code.astype(np.float64) - 127)[:, None]).astype(np.float32)
    if elem.bits == 4:  # e2m1 has no NaN; ml_dtypes rounds to nearest even, clip saturates
        fin = float(ml_dtypes.finfo(elem.np_dtype).max)
        return np.clip(scaled_x.ravel(), -fin, fin).astype(elem.np_dtype).view(np.uint8), code
    return ml_encode(scaled_x.ravel(), elem, True), code


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("elem", [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp4_e2m1], ids=lambda t: t.name)
def test_mx_quantize_and_dequantize(target, elem):
    rng = np.random.default_rng(2)
    nblk = 2 * 64  # 64 threads x 2 blocks
    mags = np.float64(2.0) ** rng.integers(-30, 30, nblk)
    x = (rng.standard_normal((nblk, 32)) * mags[:, None]).astype(np.float32)
    x[0] = 0.0                    # all-zero block: scale 2^-127, elements 0
    x[1, 5] = 448.0 * 2.0 ** 10   # amax exactly a power-of-two multiple of max
    x = x.ravel()
    packed = elem.bits < 8  # sub-byte elements travel as packed bytes
    q = np.zeros(len(x) * elem.bits // 8, np.uint8) if packed else np.zeros(len(x), elem.np_dtype)
    s = np.zeros(nblk, ml_dtypes.float8_e8m0fnu)
    y = np.zeros(len(x), np.float32)
    with opus.set_target(target, interpret=True):
        mx_kernel(elem)[1, 64](x, q, s, y)
    if packed:
        q = opus.unpack(q, elem)
    ref_q, ref_s = mx_reference(x, elem)
    np.testing.assert_array_equal(s.view(np.uint8), ref_s)
    np.testing.assert_array_equal(q.view(np.uint8), ref_q)
    deq = q.astype(np.float64).reshape(-1, 32) * np.exp2(ref_s.astype(np.float64) - 127)[:, None]
    np.testing.assert_array_equal(y, deq.ravel().astype(np.float32))


@functools.lru_cache(None)
def _scale_of():
    @opus.kernel
    def k(a: opus.Ptr[opus.f32], s4: opus.Ptr[opus.e8m0], s8: opus.Ptr[opus.e8m0]):
        i = opus.thread_id_x()
        s4[i] = opus.mx_scale(a[i], opus.fp8_e5m2)
        s8[i] = opus.mx_scale(a[i], opus.fp8_e4m3)
    return k


def test_mx_scale_hand_table():
    """amax -> code, worked out by hand: e4m3 (emax 8): 448 = 1.75 * 2^8 -> 2^0 (127); 1.0 ->
    2^-8 (119); 2^-120 -> 2^-128, clamped to 2^-127 (0); 0 -> 0; 3e38 (2^127 * 1.76) -> 2^119
    (246); inf and NaN -> 0xFF. e5m2 (emax 15): 57344 = 1.75 * 2^15 -> 127; 1.0 -> 112; a
    subnormal amax (1e-40) -> 0."""
    a = np.float32([448, 1.0, 2.0 ** -120, 0.0, 3e38, np.inf, np.nan, 57344, 1e-40])
    s4 = np.zeros(len(a), ml_dtypes.float8_e8m0fnu)
    s8 = np.zeros(len(a), ml_dtypes.float8_e8m0fnu)
    with opus.set_target("gfx950", interpret=True):
        _scale_of()[1, len(a)](a, s4, s8)
    assert s8.view(np.uint8).tolist() == [127, 119, 0, 0, 246, 255, 255, 134, 0]
    assert s4.view(np.uint8).tolist() == [120, 112, 0, 0, 239, 255, 255, 127, 0]


@functools.lru_cache(None)
def _row_scale():
    @opus.kernel
    def k(x: opus.Ptr[opus.f32], sc: opus.Ptr[opus.f32], inv: opus.Ptr[opus.f32], q: opus.Ptr[opus.fp8_e4m3]):
        r = opus.thread_id_x()  # one row of 8 per thread: a per-token scale
        gx = opus.make_gmem(x)
        v = opus.concat(gx.load(r * 8, vec=4), gx.load(r * 8 + 4, vec=4))
        s, i = opus.tensor_scale(opus.amax(v), opus.fp8_e4m3)
        sc[r] = s
        inv[r] = i
        opus.make_gmem(q).store(opus.scaled_cast(v, opus.fp8_e4m3, i), r * 8)
    return k


@pytest.mark.parametrize("target", TARGETS)
def test_per_token_scales(target):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((32, 8)) * 10.0 ** rng.integers(-3, 4, (32, 1))).astype(np.float32)
    x[3] = 0.0
    x[4, 2] = np.nan  # opus.amax ignores NaN lanes (opus.max)
    s, inv = np.zeros(32, np.float32), np.zeros(32, np.float32)
    q = np.zeros(256, ml_dtypes.float8_e4m3fn)
    with opus.set_target(target, interpret=True):
        _row_scale()[1, 32](x.ravel(), s, inv, q)
    amax = np.nanmax(np.abs(x), axis=1)
    np.testing.assert_array_equal(s, np.where(amax == 0, 1, amax / np.float32(448)).astype(np.float32))
    np.testing.assert_array_equal(inv, np.where(amax == 0, 1, np.float32(448) / amax).astype(np.float32))
    ref = ml_encode((x * inv[:, None]).ravel(), opus.fp8_e4m3, True)
    np.testing.assert_array_equal(q.view(np.uint8), ref)
