"""Every cast pair among the register types (bool, the integers, f16/bf16/f32/f64, the fp8
types, e8m0), as vectors and as scalars, in the interpreter as sm_90a, gfx942 and gfx950 (each
specialization is also rendered and compiled for its target: OPUS_INTERPRET_COMPILE=1), against
a reference written from ir/ops.py's cast rules on numpy/ml_dtypes (never the interpreter's
code). The sub-byte types join when they have a register form (helper L's work)."""
import numpy as np
import pytest

import opus
from conv_kernels import TARGETS, cast_on
from hostexec.float_refs import ml_encode, e8m0_encode, same_floats

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INTS = [opus.i8, opus.i16, opus.i32, opus.i64, opus.u8, opus.u16, opus.u32, opus.u64]
FLOATS = [opus.f16, opus.bf16, opus.f32, opus.f64]
STORAGE = [opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz, opus.e8m0]
TYPES = [opus.bool_] + INTS + FLOATS + STORAGE


def inputs(src):
    """Values of src that reach every rule: zeros, signs, ties, ranges' edges, NaN/inf."""
    rng = np.random.default_rng(hash(src.name) & 0xFFFF)
    if src.is_bool:
        return np.array([0, 1, 1, 0] * 4, np.bool_)
    if src.is_int:
        lo, hi = src.int_range()
        edge = [0, 1, lo, hi, lo + 1, hi - 1, 2 ** 24 + 1 if hi > 2 ** 25 else hi // 3, 255, 256, 127, -1 if lo else 7]
        vals = np.array([v for v in edge if lo <= v <= hi], dtype=object)
        rnd = rng.integers(lo, hi, 40, dtype=np.int64 if src.kind == "int" else np.uint64, endpoint=True)
        return np.concatenate([vals.astype(src.np_dtype), rnd.astype(src.np_dtype)])
    if src.storage_only:
        return np.arange(256, dtype=np.uint8).view(src.np_dtype)
    special = [0.0, -0.0, 1.0, -1.5, 2.5, -2.5, 0.5, 1e-8, -3e-39, 65504.0, 65520.0, 70000.0,
               448.0, 464.0, 500.0, 240.0, 57344.0, 61440.0, 1e30, -1e38, 127.9, 128.0, -129.0,
               255.5, 256.0, 32767.5, 2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 63, 2.0 ** 64,
               -2.0 ** 63, 1.0 + 2.0 ** -10, 1.0 + 2.0 ** -11, 1.0 + 2.0 ** -8 + 2.0 ** -20,
               np.inf, -np.inf, np.nan]
    rnd = rng.standard_normal(64) * np.float64(10.0) ** rng.integers(-12, 12, 64)
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(special), rnd]).astype(src.np_dtype)


def reference(x, src, dst):
    """ir/ops.py cast, written out on numpy/ml_dtypes."""
    if src is dst:  # no conversion at all: the bits stay (NaN payloads too)
        return x.copy()
    if dst.is_bool:
        return x.astype(np.float64) != 0 if src.is_float else x != 0
    if src.is_bool:
        x, src = x.astype(np.int32), opus.i32
    if src.is_int and dst.is_int:  # wraps: the low bits
        return x.astype(dst.np_dtype)
    if dst.is_int:  # toward zero, saturating, NaN -> 0 (exact in Python ints)
        lo, hi = dst.int_range()
        out = [0 if np.isnan(v) else hi if v >= hi else lo if v <= lo else int(np.trunc(v))
               for v in x.astype(np.float64)]
        return np.array(out, dtype=object).astype(dst.np_dtype)
    if dst.storage_only:  # through f32 (ints and f64 round to f32 first)
        f = x.astype(np.float32)
        if dst is opus.e8m0:
            return e8m0_encode(f, "rn", False).view(dst.np_dtype)
        return ml_encode(f, dst, False).view(dst.np_dtype)
    if dst.name in ("f16", "bf16") and src.name not in ("f32", "f16", "bf16"):
        x = x.astype(np.float32)  # ints and f64 go through f32 (one rounding each)
    if src.storage_only:
        x = x.astype(np.float32)
    return x.astype(dst.np_dtype)


def _compare(got, ref, src, dst):
    if dst.is_float and not dst.storage_only:
        assert same_floats(got, ref), _diff(got, ref, dst)
    else:
        u = f"u{dst.np_dtype.itemsize}" if not dst.is_bool else np.bool_
        g, r = got.view(u), ref.view(u)
        assert np.array_equal(g, r), _diff(got, ref, dst)


def _diff(got, ref, dst):
    bad = np.flatnonzero(got.view(np.uint8 if dst.itemsize == 1 else f"u{dst.itemsize}") !=
                         ref.view(np.uint8 if dst.itemsize == 1 else f"u{dst.itemsize}"))
    return f"{len(bad)} lanes differ, first: {[(int(i), got[i], ref[i]) for i in bad[:5]]}"


# vectors of 2 (packed pairs; 16 bytes of the 64-bit types) on every target, scalars on one
CASES = [(t, 2) for t in TARGETS] + [("sm_90a", 1)]


@pytest.mark.parametrize("target,vec", CASES, ids=[f"{t}-vec{v}" for t, v in CASES])
@pytest.mark.parametrize("src", TYPES, ids=lambda t: t.name)
def test_every_pair(target, vec, src):
    x = inputs(src)
    failures = []
    for dst in TYPES:
        got = cast_on(target, x, src, dst, vec=vec)
        ref = reference(x, src, dst)
        try:
            _compare(got, ref, src, dst)
        except AssertionError as e:
            failures.append(f"{src.name} -> {dst.name}: {e}")
    assert not failures, "\n".join(failures)
