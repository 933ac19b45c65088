"""GPU runs of the shifted-view and grid-index kernels (tests/interp/view_kernels.py), against
the same hand-worked values as the interpreter tests (test_views.py, test_thread_indices.py):
the interpreter and the GPU must agree on bounded views and on grid sizes."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "interp"))
import view_kernels as VK  # noqa: E402
from test_thread_indices import expected_indices  # noqa: E402

pytestmark = pytest.mark.gpu

X = np.arange(1, 17, dtype=np.float32)


@pytest.fixture(autouse=True)
def _on_gpu():
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


def _run(kernel, grid, block, arrays, *scalars):
    """Launch with the numpy ``arrays`` copied to the device; return them copied back."""
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(a) for a in arrays]
    kernel[grid, block](*dev, *scalars)
    return [d.to_numpy() for d in dev]


@pytest.mark.parametrize("d,want", [
    (0, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]),
    (-2, [0, 0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0]),
])
def test_shifted_view_loads(d, want):
    _, out = _run(VK.shifted_load, 1, 16, [X, np.full(16, -1, np.float32)], 16, 4, d)
    assert out.tolist() == want


def test_shifted_view_stores():
    _, y = _run(VK.shifted_store, 1, 16, [X, np.full(16, -1, np.float32)], 16, 4)
    assert y.tolist() == [-1, -1, -1, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_shifted_view_vectors():
    _, out = _run(VK.shifted_load_vec4, 1, 4, [X, np.full(16, -1, np.float32)], 14, 4)
    assert out.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0, 0, 0, 0, 0, 0]
    _, y = _run(VK.shifted_store_vec4, 1, 4, [X, np.full(16, -1, np.float32)], 14, 4)
    assert y.tolist() == [-1, -1, -1, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1, -1]


def test_shifted_views_twice_and_in_shared_memory():
    _, out = _run(VK.shifted_twice, 1, 16, [X, np.full(16, -1, np.float32)], 16, 4, 6)
    assert out.tolist() == [11, 12, 13, 14, 15, 16] + [0] * 10
    _, out = _run(VK.shifted_smem, 1, 16, [X, np.full(16, -1, np.float32)], 4)
    assert out.tolist() == [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0, 0, 0, 0]


@pytest.mark.parametrize("grid,block", [((2, 3, 4), (5, 3, 2)), ((3, 1, 1), (64, 1, 1)),
                                        ((1, 2, 1), (1, 1, 7))])
def test_indices_in_3d_launches(grid, block):
    n = 15 * int(np.prod(grid)) * int(np.prod(block))
    (out,) = _run(VK.grid_indices, grid, block, [np.full(n, -1, np.int32)])
    assert out.reshape(-1, 15).tolist() == expected_indices(grid, block)


def test_grid_stride_loop():
    (y,) = _run(VK.grid_stride_fill, (3, 2), (4, 2), [np.full(100, -1, np.int32)], 100)
    assert y.tolist() == [k % 48 for k in range(100)]


@pytest.mark.parametrize("blocks", [1, 24, 1000])
def test_saxpy_grid_stride_example(blocks):
    from opus import examples as ex
    ok, msg = ex.run_saxpy(True, blocks=blocks)
    assert ok, msg
