"""GPU runs of the layout kernels (test_partition.py, test_swizzle.py) against the same numpy
references as their interpreter runs: layout-driven bulk accesses, default p-coordinates,
split wide issues with bounds, and swizzled shared tiles."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_partition as TP  # noqa: E402
import test_swizzle as TS  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_gpu():
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


def _run(kernel, grid, block, arrays, *scalars, **constexprs):
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(a) for a in arrays]
    kernel[grid, block](*dev, *scalars, **constexprs)
    return [d.to_numpy() for d in dev]


def test_guide_example_on_gpu():
    ld = 40
    x = (np.arange(48 * ld) % 2039).astype(np.float16)
    _, out = _run(TP.guide_tile, 1, 64, [x, np.full(64 * 24, np.nan, np.float16)], ld)
    np.testing.assert_array_equal(out, TP.reference_guide(x, ld))


def test_default_p_coordinates_on_gpu():
    x = np.random.default_rng(1).standard_normal(48 * 32).astype(np.float16)
    _, out = _run(TP.guide_default_p, 1, 64, [x, np.full(48 * 32, np.nan, np.float16)])
    np.testing.assert_array_equal(out, x)


def test_wide_issues_with_bounds_on_gpu():
    n = 1000
    x = np.arange(1024, dtype=np.float32) + 1
    _, out = _run(TP.wide_issue, 1, 32, [x, np.full(1024, -1, np.float32)], n)
    want = np.full(1024, -1, np.float32)
    want[:n] = x[:n]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("swz", [True, False])
def test_transpose_through_a_swizzled_tile_on_gpu(swz):
    n = 256
    x = np.random.default_rng(2).standard_normal((n, n)).astype(np.float32)
    _, out = _run(TS.transpose_tile, (n // 32, n // 32), (32, 8),
                  [x, np.full((n, n), np.nan, np.float32)], n, SWZ=swz)
    np.testing.assert_array_equal(out, x.T)


def test_swizzled_chunks_on_gpu():
    x = np.arange(512, dtype=np.float16)
    _, out = _run(TS.swizzled_roundtrip, 1, 64, [x, np.full(1024, np.nan, np.float16)])
    np.testing.assert_array_equal(out[:512], x)
    raw = out[512:].reshape(8, 8, 8)
    for r in range(8):
        for c in range(8):
            np.testing.assert_array_equal(raw[r, c ^ r], x[64 * r + 8 * c: 64 * r + 8 * c + 8])


import test_predicated as TPR  # noqa: E402


def test_predicates_on_gpu():
    x = np.arange(1, 129, dtype=np.float32)
    _, out = _run(TPR.scalar_and_vector, 1, 16, [x, np.full(128, -1, np.float32)], 3)
    t = np.arange(16)
    on = t % 3 == 0
    want = np.full(128, -1, np.float32)
    want[:16] = np.where(on, x[t], 0)
    for k in range(8):
        want[64 + 4 * k: 68 + 4 * k] = x[4 * k: 4 * k + 4] if on[k] else 0
    np.testing.assert_array_equal(out, want)


def test_layout_predicates_on_gpu():
    x = np.arange(48 * 32, dtype=np.float16)
    _, out = _run(TPR.layout_pred, 1, 64, [x, np.full(48 * 32, -1, np.float16)], 40)
    want = x.reshape(48, 32).copy()
    want[40:] = 0
    want[16:32] = -1
    np.testing.assert_array_equal(out.reshape(48, 32), want)
