"""Independent references for conversions to and from 16-bit floats and the storage types
(fp8 OCP and FNUZ, e8m0): ml_dtypes with the documented rules, and the dense f32 inputs that
cross every rounding boundary. Shared by the CUDA cast tests and the HIP helper tests."""
import functools

import ml_dtypes
import numpy as np

NAN_CODE = {"fp8_e4m3": 0x7F, "fp8_e5m2": 0x7F, "fp8_e4m3fnuz": 0x80, "fp8_e5m2fnuz": 0x80,
            "e8m0": 0xFF}

ALL_CODES = np.arange(256, dtype=np.uint8)


@functools.lru_cache(None)
def dense_f32():
    """Every bf16 value (so every fp8/e8m0 code, midpoint and overflow threshold, both signs),
    their f32 neighbours, the midpoints' neighbours, and random bit patterns."""
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    rnd = np.random.default_rng(7).integers(0, 1 << 32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    u = np.concatenate([hi, hi + 1, hi - 1, hi + 0x8000, rnd, np.uint32([0x600000, 0x5FFFFF, 0x400000])])
    return np.unique(u).view(np.float32)


def ml_encode(x, t, sat):
    """ml_dtypes with the documented rules: sat clamps to +-max first; NaN gives one code."""
    if sat:
        fin = float(ml_dtypes.finfo(t.np_dtype).max)
        x = np.clip(x, -fin, fin)
    with np.errstate(over="ignore", invalid="ignore"):
        r = x.astype(t.np_dtype).view(np.uint8)
    return np.where(np.isnan(x), np.uint8(NAN_CODE[t.name]), r)


def e8m0_encode(x, rounding, sat):
    """The documented e8m0 rule, from the value (not the bits): exponent of the nearest (ties up)
    or next-lower power of two in [2^-127, 2^127]."""
    with np.errstate(invalid="ignore"):  # signalling NaNs
        x64 = x.astype(np.float64)
        m, e = np.frexp(x64)  # x = m * 2^e, m in [0.5, 1)
        k = e - 1 + (np.where(m >= 0.75, 1, 0) if rounding == "rn" else 0)  # 2^k nearest / below
    k = np.clip(k, -127, None) + 127
    over = (k > 254) | np.isposinf(x64)
    code = np.where(over, 254 if sat else 255, k)
    return np.where((x64 > 0) & ~np.isnan(x64), code, 255).astype(np.uint8)


def same_floats(a, b):
    """Bitwise equal, except that NaNs need only both be NaN (payload and sign unspecified)."""
    a, b = np.asarray(a), np.asarray(b)
    na, nb = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    u = f"u{a.dtype.itemsize}"
    return bool(np.array_equal(na, nb) and np.array_equal(a.view(u)[~na], b.view(u)[~nb]))
