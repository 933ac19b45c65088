"""GPU runs of the cp.async kernels (test_async_copy.py) against the same numpy references as
their interpreter runs: tiles at every copy size with zero-filled tails, copies starting before
a view, double buffering with wait_async(1), layout-driven .cg copies, predicates."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_async_copy as A  # noqa: E402
from test_gpu_layouts import _on_gpu, _run  # noqa: E402,F401  (the GPU fixture and runner)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype,vec", A.SIZES, ids=lambda v: getattr(v, "name", str(v)))
def test_tile_copy_and_zero_filled_tail_on_gpu(dtype, vec):
    total = 64 * vec
    x = (np.arange(total) % 120 + 1).astype(dtype.np_dtype)
    for n in (total, total - 1, total - vec // 2 - 1, 3):
        _, out = _run(A._tile_kernel(dtype, vec), 1, 64, [x, np.full(total, 7, dtype.np_dtype)], n)
        src = np.where(np.arange(total) < n, x, 0).reshape(64, vec)
        np.testing.assert_array_equal(out.reshape(64, vec), src[::-1], err_msg=f"n={n}")


def test_copy_starting_before_the_view_on_gpu():
    x = np.arange(1, 17, dtype=np.float32)
    _, out = _run(A.before_the_view, 1, 3, [x, np.full(12, -1, np.float32)])
    want = np.zeros(12, np.float32)
    want[8:10] = x[4:6]
    np.testing.assert_array_equal(out, want)


def test_double_buffered_loop_on_gpu():
    x = np.random.default_rng(1).standard_normal(5 * 128).astype(np.float32)
    _, out = _run(A.double_buffered_sum, 1, 128, [x, np.zeros(128, np.float32)], 5)
    want = np.zeros(128, np.float32)
    for k in range(5):
        want = want + x[k * 128: (k + 1) * 128]
    np.testing.assert_array_equal(out, want)


def test_layout_driven_cg_copy_on_gpu():
    x = np.arange(48 * 32).astype(np.float16)
    _, out = _run(A.layout_copy, 1, 64, [x, np.zeros(48 * 32, np.float16)])
    np.testing.assert_array_equal(out, x)


def test_false_predicate_fills_zeros_on_gpu():
    x = np.arange(1, 65, dtype=np.float32)
    _, out = _run(A.predicated, 1, 16, [x, np.full(64, -1, np.float32)])
    keep = np.repeat(np.arange(16) % 3 != 0, 4)
    np.testing.assert_array_equal(out, np.where(keep, x, 0))


def test_waited_groups_on_gpu():
    x = np.arange(96, dtype=np.float32)
    for g in (0, 1):
        _, out = _run(A.groups_in_order, 1, 32, [x, np.zeros(32, np.float32)], READ=g)
        np.testing.assert_array_equal(out, x[32 * g: 32 * g + 32])
