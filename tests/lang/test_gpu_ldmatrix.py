"""GPU runs of the ldmatrix / stmatrix kernels (test_ldmatrix_interp.py) against the same numpy
references as their interpreter runs: x1/x2/x4, plain and .trans, the unused lanes' addresses
far outside the tile, and ldmatrix feeding mma.sync. stmatrix needs sm_90 (skipped below it)."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ldmatrix_interp as T  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_gpu():
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


def _run(kernel, grid, block, arrays, **constexprs):
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(a) for a in arrays]
    kernel[grid, block](*dev, **constexprs)
    return [d.to_numpy() for d in dev]


def _needs_sm90():
    if opus.current_target().target.arch.capability < (9, 0):
        pytest.skip("stmatrix needs sm_90 or later")


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_ldmatrix_on_gpu(num, trans):
    warps = 2
    rng = np.random.default_rng(num)
    src = rng.standard_normal(warps * T.TILE).astype(np.float16)
    offs = T.row_offsets(warps, num, num)
    out = np.full(warps * 32 * 2 * num, np.nan, np.float16)
    _, _, out = _run(T.ld_kernel, 1, 32 * warps, [src, offs.reshape(-1), out], NUM=num, TRANS=trans)
    want = T.ldmatrix_reference(src.reshape(warps, T.TILE), offs, num, trans)
    np.testing.assert_array_equal(out.reshape(-1, 2 * num), want)


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_stmatrix_on_gpu(num, trans):
    _needs_sm90()
    warps = 2
    regs = np.random.default_rng(num).standard_normal((warps * 32, 2 * num)).astype(np.float16)
    offs = T.row_offsets(warps, num, num)
    out = np.full(warps * T.TILE, np.nan, np.float16)
    _, _, out = _run(T.st_kernel, 1, 32 * warps, [regs.reshape(-1), offs.reshape(-1), out],
                     NUM=num, TRANS=trans)
    np.testing.assert_array_equal(out, T.stmatrix_reference(regs, offs, num, trans))


def test_ldmatrix_feeds_mma_sync_on_gpu():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    _, _, c = _run(T.ldsm_mma, 1, 32, [a.reshape(-1), b.reshape(-1),
                                        np.full(16 * 8, np.nan, np.float32)])
    np.testing.assert_allclose(c.reshape(16, 8), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
