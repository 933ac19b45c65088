"""CPU interpreter: semantics against independent numpy/Python references, and checking mode."""
import math
import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import opus.interp as interp  # noqa: E402
from opus.errors import OpusError  # noqa: E402
import kernels as K  # noqa: E402

RNG = np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


def test_vadd_f32_scalar():
    n = 1000
    x, y = RNG.random(n, np.float32), RNG.random(n, np.float32)
    out = np.full(n, -7, np.float32)
    K.vadd[(n + 127) // 128, 128](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("name,npt", [("f32", np.float32), ("f16", np.float16),
                                      ("bf16", ml_dtypes.bfloat16)])
def test_vadd_vec_oob_tail(name, npt):
    n = 1003  # not a multiple of VEC: the last vector is partly out of bounds
    vec = 16 // np.dtype(npt).itemsize
    x = RNG.standard_normal(n).astype(npt)
    y = RNG.standard_normal(n).astype(npt)
    out = np.zeros(n + 5, npt)[:n]  # elements past n are not ours; base stays 16-byte aligned
    K.vadd_vec[name][(n + vec * 32 - 1) // (vec * 32), 32](x, y, out, n, vec)
    ref = (x.astype(np.float32) + y.astype(np.float32)).astype(npt)
    assert out.view(np.uint8).tobytes() == ref.view(np.uint8).tobytes()


def test_reduce_shared_memory():
    n = 5000
    x = RNG.random(n, np.float32)
    out = np.zeros(1, np.float32)
    with interp.checking():
        K.reduce[1, 256](x, out, n)
    # reference: same association as the kernel (per-thread strided sums, then a tree)
    acc = np.zeros(256, np.float32)
    for i in range(0, n, 256):
        seg = x[i:i + 256]
        acc[:len(seg)] += seg
    k = 128
    while k:
        acc[:k] = acc[:k] + acc[k:2 * k]
        k //= 2
    assert out[0] == acc[0]
    assert abs(out[0] - x.sum(dtype=np.float64)) < 1e-3


def _wrap32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _ref_int(x, y):
    if y == 0:
        fd, md, td, tm = -1, x, -1, x
    else:
        fd, md = x // y, x % y
        td = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
        tm = x - td * y
    yu = y & 0xFFFFFFFF
    shl = 0 if yu >= 32 else x << yu
    shr = (-1 if x < 0 else 0) if yu >= 32 else x >> yu
    lshr = 0 if yu >= 32 else (x & 0xFFFFFFFF) >> yu
    return [_wrap32(v) for v in (fd, md, td, tm, shl, shr, x * y, x + y, lshr, x - y)]


def test_integer_semantics():
    edge = [0, 1, -1, 2, -2, 7, -7, 31, 32, 33, 100, -100, 2**31 - 1, -2**31, 12345, -98765]
    pairs = [(a, b) for a in edge for b in edge]
    pairs += [(int(a), int(b)) for a, b in RNG.integers(-2**31, 2**31, (200, 2))]
    a = np.array([p[0] for p in pairs], np.int32)
    b = np.array([p[1] for p in pairs], np.int32)
    n = len(pairs)
    out = np.zeros(n * 10, np.int32)
    K.int_ops[(n + 63) // 64, 64](a, b, out, n)
    got = out.reshape(n, 10)
    for j, (x, y) in enumerate(pairs):
        assert list(got[j]) == _ref_int(x, y), (x, y)


def test_casts():
    vals = [0.0, -0.0, 1.5, -1.5, 2.5, 127.4, 127.6, 128.0, -128.9, -129.0, 300.0, -1e9, 1e10,
            3e9, -3e9, 1.00390625, 1.01171875, 65519.0, 65520.0, 1e-8, float("nan"),
            float("inf"), float("-inf"), 2147483520.0, -2147483648.0]
    x = np.concatenate([np.array(vals, np.float32), RNG.standard_normal(500).astype(np.float32) * 1e3,
                        RNG.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    n = len(x)
    ob = np.zeros(n, ml_dtypes.bfloat16)
    oh = np.zeros(n, np.float16)
    o8 = np.zeros(n, np.int8)
    oi = np.zeros(n, np.int32)
    K.casts[(n + 127) // 128, 128](x, ob, oh, o8, oi, n)
    fin = ~np.isnan(x)
    with np.errstate(over="ignore"):
        href = x.astype(np.float16)
    assert np.array_equal(ob.view(np.uint16)[fin], x.astype(ml_dtypes.bfloat16).view(np.uint16)[fin])
    assert np.isnan(ob.astype(np.float32)[~fin]).all()
    assert np.array_equal(oh.view(np.uint16)[fin], href.view(np.uint16)[fin])

    def sat(v, lo, hi):
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return hi if v > 0 else lo
        return max(lo, min(hi, math.trunc(v)))
    assert list(o8) == [sat(float(v), -128, 127) for v in x]
    assert list(oi) == [sat(float(v), -2**31, 2**31 - 1) for v in x]


def test_float_ops():
    n = 2000
    a = (RNG.standard_normal(n) * 10).astype(np.float32)
    b = (RNG.standard_normal(n) * 10).astype(np.float32)
    c = (RNG.standard_normal(n) * 10).astype(np.float32)
    a[:3] = [np.nan, 1.0, np.nan]
    b[:3] = [2.0, np.nan, np.nan]
    out = np.zeros(4 * n, np.float32)
    K.float_ops[(n + 127) // 128, 128](a, b, c, out, n)
    got = out.reshape(n, 4)
    from fractions import Fraction
    for j in range(3, 200):  # exact fma reference with rationals
        exact = Fraction(float(a[j])) * Fraction(float(b[j])) + Fraction(float(c[j]))
        lo = np.float32(float(exact))
        # correctly rounded float32 of `exact`: check neighbours
        cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact),
                                         int(np.array(v).view(np.uint32)) & 1))
        assert got[j, 0] == best
    np.testing.assert_array_equal(got[:, 1], np.fmin(a, b))
    np.testing.assert_array_equal(got[:, 2], np.fmax(a, b))
    np.testing.assert_array_equal(got[3:, 3], a[3:] / b[3:])


def test_dynamic_for_per_thread_trip_counts():
    n = 300
    counts = RNG.integers(-3, 40, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    K.dyn_for[(n + 127) // 128, 128](counts, out, n)
    assert list(out) == [sum(j * 3 + 1 for j in range(c)) for c in counts]


def test_while_collatz():
    n = 200
    x = RNG.integers(1, 5000, n).astype(np.int32)
    out = np.zeros(n, np.int32)
    K.collatz[(n + 63) // 64, 64](x, out, n)

    def steps(v):
        s = 0
        while v != 1:
            v = v // 2 if v % 2 == 0 else 3 * v + 1
            s += 1
        return s
    assert list(out) == [steps(int(v)) for v in x]


def test_early_return():
    n = 100
    x = RNG.integers(-50, 50, n).astype(np.int32)
    out = np.full(n + 28, 99, np.int32)
    K.early_return[1, 128](x, out, n)
    assert list(out[:n]) == [-1 if v < 0 else 2 * v for v in x]
    assert (out[n:] == 99).all()


def test_barrier_after_exit_is_fine():
    out = np.zeros(64, np.float32)
    with interp.checking():
        K.barrier_after_exit[1, 64](out)
    assert (out[:32] == 2.0).all() and (out[32:] == 0).all()


def test_check_race():
    out = np.zeros(64, np.float32)
    with interp.checking(), pytest.raises(interp.SharedRaceError, match=r"kernels\.py:\d+"):
        K.race[1, 64](out)
    K.race[1, 64](out)  # not checking: runs (lockstep) without complaint


def test_check_uninitialized():
    out = np.zeros(64, np.float32)
    with interp.checking(), pytest.raises(interp.UninitializedReadError, match=r"smem\d\[64\]"):
        K.uninit[1, 64](out)
    K.uninit[1, 64](out)
    assert np.isnan(out).all()  # poison


def test_oob_write():
    out = np.zeros(100, np.float32)
    with pytest.raises(interp.MemoryFault, match=r"kernels\.py:\d+.*out\[100\].*block \(0, 0, 0\) thread \(100"):
        K.oob_write[1, 128](out, 100)


def test_divergent_barrier():
    out = np.zeros(64, np.float32)
    with pytest.raises(interp.BarrierError, match=r"kernels\.py:\d+"):
        K.divergent_barrier[1, 64](out)


def test_errors_are_opus_errors():
    assert issubclass(interp.InterpError, OpusError)
    for c in (interp.MemoryFault, interp.BarrierError, interp.SharedRaceError,
              interp.UninitializedReadError):
        assert issubclass(c, interp.InterpError)


def test_argument_errors():
    x = np.zeros(10, np.float64)
    with pytest.raises(opus.ArgumentError, match="'x'"):
        K.vadd[1, 32](x, np.zeros(10, np.float32), np.zeros(10, np.float32), 10)
    with pytest.raises(opus.ArgumentError, match="contiguous"):
        K.vadd[1, 32](np.zeros(20, np.float32)[::2], np.zeros(10, np.float32), np.zeros(10, np.float32), 10)
    with pytest.raises(opus.ArgumentError, match="'n'"):
        K.vadd[1, 32](*[np.zeros(10, np.float32)] * 3, 2**40)


def test_printf(capsys):
    x = np.array([5, -1, 255], np.int32)
    K.show[1, 32](x, 3)
    assert capsys.readouterr().out == "t0=5 5\nt1=4294967295 ffffffff\nt2=255 ff\n"


def _bf16_rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32).astype(ml_dtypes.bfloat16)


def test_mma_smoke():
    A, B = _bf16_rand(16, 16), _bf16_rand(16, 8)
    C = RNG.standard_normal((16, 8)).astype(np.float32)
    D = np.zeros((16, 8), np.float32)
    K.mma_tile[1, 32](A, B, C, D)
    ref = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(D, ref, rtol=1e-5, atol=1e-5)


def test_gemm_128():
    M = N = Kd = 128
    A, B = _bf16_rand(M, Kd), _bf16_rand(Kd, N)
    D = np.zeros((M, N), np.float32)
    warps = (M // 16) * (N // 8)
    K.gemm[warps // 4, 128](A, B, D, M, N, Kd)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(D, ref, rtol=1e-5, atol=1e-4)


def test_run_function_direct():
    fn = K.vadd.specialize(target="sm_90a").function
    x, y = RNG.random(50, np.float32), RNG.random(50, np.float32)
    out = np.zeros(50, np.float32)
    interp.run_function(fn, "sm_90a", 2, 32, (x, y, out, 50))
    np.testing.assert_array_equal(out, x + y)


def test_vadd_1m():
    # (its speed is measured by benchmarks/interp_speed.py, not here)
    N = 1 << 20
    a, b = RNG.random(N, np.float32), RNG.random(N, np.float32)
    c = np.zeros(N, np.float32)
    K.vadd[4096, 256](a, b, c, N)
    np.testing.assert_array_equal(c, a + b)


@opus.kernel
def reorder_lanes(x: opus.Ptr[opus.i32], out: opus.Ptr[opus.i32]):
    i = opus.thread_id_x()
    v = opus.make_vector(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3])
    mid, rev = v[1:3], v[::-1]
    out[6 * i] = mid[0]
    out[6 * i + 1] = mid[1]
    for j in range(4):
        out[6 * i + 2 + j] = rev[j]


def test_vector_slices_pick_register_lanes():
    """Slices of a register vector are one IR op, vector_permute (not a warp shuffle: the lanes
    are one thread's), rendered and interpreted as the indices say."""
    fn = reorder_lanes.specialize(target="sm_90a").function
    assert [op.attrs["indices"] for op in fn.walk() if op.kind == "vector_permute"] == [(1, 2), (3, 2, 1, 0)]
    x = np.arange(4 * 32, dtype=np.int32) * 7
    out = np.zeros(6 * 32, np.int32)
    reorder_lanes[1, 32](x, out)
    quads = x.reshape(32, 4)
    np.testing.assert_array_equal(out.reshape(32, 6), np.concatenate([quads[:, 1:3], quads[:, ::-1]], axis=1))
