"""GPU twins of the TMA interpreter tests (test_tma_interp.py), against the same numpy references
(tma_kernels.py): boxes that overhang the tensor on every side, swizzled tiles (the 128-byte
mode with full and half rows: the hardware's swizzle of shared addresses), a strided 3-D
tensor, stores, and the N-stage pipeline. Needs an sm_90 GPU."""
import os
import sys

import numpy as np
import pytest

import opus
from opus.runtime.device_array import DeviceArray

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tma_kernels as K  # noqa: E402
from test_tma_interp import CORNERS, _grid  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_sm90(launch_path):
    target = opus.current_target().target
    if target.vendor != "nvidia" or target.arch.capability < (9, 0):
        pytest.skip(f"TMA needs an sm_90 GPU, this one is {target.name}")
    with opus.set_target(target.name, interpret=False):
        yield


class _View:
    """A strided view of device memory (CUDA array interface), as torch's slices give."""

    def __init__(self, dev, shape, strides, dtype):
        self.dev = dev
        self.__cuda_array_interface__ = {"data": (dev.ptr, False), "shape": shape,
                                         "strides": strides, "typestr": np.dtype(dtype).str,
                                         "version": 3}


@pytest.mark.parametrize("r0,c0", CORNERS)
def test_2d_box_with_overhang_on_gpu(r0, c0):
    x = _grid(20, 24)
    dx, dout = DeviceArray.from_numpy(x), DeviceArray.from_numpy(np.full(128, np.nan, np.float32))
    K.load_box[1, 16](opus.TensorMap(dx, (8, 16)), dout, r0, c0)
    np.testing.assert_array_equal(dout.to_numpy().reshape(8, 16),
                                  K.box_reference(x, r0, c0, (8, 16)))


@pytest.mark.parametrize("swz,box", [(32, (8, 8)), (64, (16, 16)), (128, (8, 32))])
def test_swizzled_boxes_on_gpu(swz, box):
    """Rows spanning the swizzle exactly (narrower rows are refused: they faulted here)."""
    x = _grid(40, 72)
    dx = DeviceArray.from_numpy(x)
    dout = DeviceArray.from_numpy(np.full(box[0] * box[1], np.nan, np.float32))
    K.load_box[1, box[1]](opus.TensorMap(dx, box, swizzle=swz), dout, 3, 4, BOX=box, SWZ=swz)
    np.testing.assert_array_equal(dout.to_numpy().reshape(box), K.box_reference(x, 3, 4, box))


def test_3d_f16_box_over_a_strided_tensor_on_gpu():
    base = _grid(3 * 6, 16, np.float16).reshape(3, 6, 16)
    dev = DeviceArray.from_numpy(base)
    view = _View(dev, (3, 6, 8), (6 * 32, 32, 2), np.float16)
    dout = DeviceArray.from_numpy(np.zeros(64, np.float16))
    K.load_box_3d[1, 8](opus.TensorMap(view, (2, 4, 8)), dout, 2, 3, 0)
    want = np.zeros((2, 4, 8), np.float16)
    want[0, :3] = base[2, 3:6, :8]
    np.testing.assert_array_equal(dout.to_numpy().reshape(2, 4, 8), want)


@pytest.mark.parametrize("r0,c0,swz,box", [(0, 0, 0, (8, 16)), (18, 36, 0, (8, 16)),
                                           (15, 20, 0, (8, 16)), (3, 0, 128, (8, 32))])
def test_store_on_gpu(r0, c0, swz, box):
    x = _grid(20, 40)
    want = K.store_reference(x, r0, c0, box)
    dx = DeviceArray.from_numpy(x)
    K.store_box[1, box[1]](opus.TensorMap(dx, box, swizzle=swz), r0, c0, BOX=box, SWZ=swz)
    np.testing.assert_array_equal(dx.to_numpy(), want)


@pytest.mark.parametrize("k_cols,stages", [(32 * 7, 3), (32 * 5 + 8, 2), (32 * 40, 4),
                                           (32 * 9, 1)])
def test_n_stage_pipeline_on_gpu(k_cols, stages):
    x = _grid(20, k_cols) / 7
    blocks = 3
    dout = DeviceArray.from_numpy(np.full((blocks * 8, 32), np.nan, np.float32))
    K.column_sums[blocks, 32](opus.TensorMap(DeviceArray.from_numpy(x), (8, 32)), dout,
                              -(-k_cols // 32), S=stages)
    np.testing.assert_allclose(dout.to_numpy(), K.column_sums_reference(x, 8, 32, blocks),
                               rtol=1e-6)


def test_pipeline_with_two_maps_on_gpu():
    a, b = _grid(4, 80), _grid(2, 80) * 3
    dout = DeviceArray.from_numpy(np.zeros(16, np.float32))
    K.two_map_sums[1, 16](opus.TensorMap(DeviceArray.from_numpy(a), (4, 16)),
                          opus.TensorMap(DeviceArray.from_numpy(b), (2, 16)), dout, 5, S=3)
    want = a[0].reshape(5, 16).sum(0) + b[1].reshape(5, 16).sum(0)
    np.testing.assert_allclose(dout.to_numpy(), want, rtol=1e-6)


def test_mbarrier_phases_on_gpu():
    dout = DeviceArray.from_numpy(np.full(48, -1, np.int32))
    K.barrier_phases[1, 4](dout)
    np.testing.assert_array_equal(dout.to_numpy().reshape(4, 12), [K.BARRIER_PHASES] * 4)


def test_a_host_map_is_refused_on_the_gpu():
    x = _grid(20, 24)
    with pytest.raises(opus.ArgumentError, match="numpy array.*interpreter"):
        K.load_box[1, 16](opus.TensorMap(x, (8, 16)), DeviceArray.from_numpy(np.zeros(128,
                          np.float32)), 0, 0)
