"""GPU twin of test_tiled_wgmma.py: the tiled-wgmma GEMM (1, 2 and 4 warpgroups, A from shared
memory and registers, B K- and N-major) on an sm_90a device against numpy, on several block
tiles and K tiles."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled_wgmma_kernels as T  # noqa: E402
from test_tiled_wgmma import CASES, IDS  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_sm90a():
    if opus.current_target().target.arch.capability != (9, 0):
        pytest.skip("wgmma needs an sm_90a device (H100/H200)")
    with opus.set_target("sm_90a", interpret=False):
        yield


@pytest.mark.parametrize("dtype,wn,expand,tile,kw", CASES, ids=IDS)
def test_tiled_wgmma_gemm_on_gpu(dtype, wn, expand, tile, kw):
    D, want = T.run(dtype, wn, expand, tile, blocks=(3, 2), k_tiles=5, seed=7, on_gpu=True, **kw)
    np.testing.assert_allclose(D, want, rtol=1e-5, atol=1e-4)
