"""GPU runs of tests/lang/test_swizzle_hoisting.py's kernel: the offsets a swizzled layout
computes with the run-time part swizzled once (lang/layout.py SwizzledSum), compiled for the
GPU, against the plain formula in numpy, for bases whose bits the ops prove and bases they do
not, through layout calls and through the per-issue offsets of layout-driven accesses."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_swizzle_hoisting as H  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("kind", sorted(H.BASES))
@pytest.mark.parametrize("sw", [opus.Swizzle(3, 3, 3), opus.Swizzle(2, 1, 4)], ids=repr)
@pytest.mark.parametrize("a,linear,cached", [(7, 3 * 4096 + 5, False), (-12345, -37, True)])
def test_offsets_on_gpu_equal_the_plain_formula(kind, sw, a, linear, cached):
    from opus.runtime.device_array import DeviceArray
    n = sw.period
    out = DeviceArray.from_numpy(np.full(H.THREADS * n, -1, np.int32))
    target = opus.current_target().target
    with opus.set_target(target.name, interpret=False):
        H.swizzled_offsets[1, H.THREADS](out, a, SW=sw, BASE=H.BASES[kind], LINEAR=linear, N=n,
                                         CACHED=cached)
    plain = (H._base_by_hand(kind, a, target.warp_size)[:, None] + linear
             + np.arange(n)[None, :])
    want = H._swizzle_by_hand(plain, sw.bits, sw.base, sw.shift)
    np.testing.assert_array_equal(out.to_numpy().reshape(H.THREADS, n), want)
