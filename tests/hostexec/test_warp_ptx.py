"""CUDA's cross-lane PTX on the host (shim/warp_cuda.h: shfl.sync, redux.sync and activemask
from the PTX ISA's definitions): the kernels and numpy references of
tests/lang/test_cross_lane_interp.py, rendered for sm_90a and host-executed, so the shuffles'
c operand ((32 - width) << 8 | clamp) and the reductions' types are checked without a GPU."""
import os
import sys

import numpy as np
import pytest

import opus
from opus import i32, u32
from hostexec import HostProgram, Launch, run_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lang"))
import test_cross_lane_interp as X  # noqa: E402


@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
@pytest.mark.parametrize("static", [None, 1, 3])
def test_shuffles_every_width(mode, static, tmp_path):
    n = 128
    rng = np.random.default_rng(5)
    x = rng.integers(-1000, 1000, n).astype(np.float32)
    s = rng.integers(-96, 96, n).astype(np.int32)
    src = s if static is None else np.full(n, static)
    widths = (1, 2, 4, 8, 16, 32)
    prog = HostProgram("sm_90a")
    ks = [prog.add(X.shuffle_kernel.specialize(target="sm_90a", MODE=mode, W=w, STATIC=static))
          for w in widths]
    prog.build(tmp_path)
    outs = [np.full(n, np.nan, np.float32) for _ in widths]
    prog.run([Launch(k, 2, 64, [x.copy(), s.copy(), o]) for k, o in zip(ks, outs)])
    for w, o in zip(widths, outs):
        np.testing.assert_array_equal(o, X.ref_shuffle(x, src, mode, w, 32), err_msg=f"w {w}")


@pytest.mark.parametrize("op", ["sum", "min", "max", "and", "or", "xor"])
@pytest.mark.parametrize("T", [i32, u32], ids=lambda t: t.name)
def test_whole_warp_integer_reductions_are_redux(op, T, tmp_path):
    """warp_reduce of a whole warp of i32/u32 is one redux.sync on sm_80+ (lang/warp.py)."""
    rng = np.random.default_rng(6)
    n = 64
    if T is i32:
        x = rng.integers(-(2 ** 31), 2 ** 31, n, dtype=np.int64).astype(np.int32)
    else:
        x = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    o = np.zeros(n, np.int32)      # the kernel's arrays are i32: T's bits through casts
    run_kernel(X.reduce_kernel, 1, n, x.view(np.int32), o, target="sm_90a", workdir=tmp_path,
               OP=op, W=32, T=T)
    assert "redux.sync" in X.reduce_kernel.source(target="sm_90a", OP=op, W=32, T=T)
    want = X.ref_reduce(x, op, 32).astype(x.dtype)  # sums wrap to 32 bits
    np.testing.assert_array_equal(o.view(x.dtype), want)


@opus.kernel
def signed_and_unsigned(x: opus.Ptr[i32], o: opus.Ptr[i32], p: opus.Ptr[u32]):
    t = opus.thread_id_x()
    o[t] = opus.warp_reduce(x[t], "min")
    p[t] = opus.warp_reduce(opus.cast(x[t], u32), "min")


def test_signed_and_unsigned_reductions_in_one_kernel(tmp_path):
    """redux.sync.min.s32 and .u32 are two helpers: -5 is the signed minimum and 3 the unsigned
    one (-5 is 2^32 - 5 unsigned)."""
    x = np.array([7, -5, 3, 9] * 8, np.int32)
    o, p = np.zeros(32, np.int32), np.zeros(32, np.uint32)
    run_kernel(signed_and_unsigned, 1, 32, x, o, p, target="sm_90a", workdir=tmp_path)
    np.testing.assert_array_equal(o, np.full(32, -5, np.int32))
    np.testing.assert_array_equal(p, np.full(32, 3, np.uint32))
