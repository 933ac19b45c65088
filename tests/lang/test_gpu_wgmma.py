"""GPU twins of the wgmma interpreter tests (test_wgmma_interp.py): the same kernels and numpy
references on an sm_90a device (H100/H200), for every type family, a few N, A from shared
memory and from registers, every swizzle mode and major-ness. fp8 and f16-accumulator results
are compared with the tolerance of the hardware's accumulation (nv_wgmma's Numerics note).
The tiled MMA over warpgroups (test_tiled_wgmma.py's cases) on several block and K tiles."""
import os
import sys

import numpy as np
import pytest

import opus
from opus import f16, bf16, f32, i8, u8, i32, fp8_e4m3 as e4m3, fp8_e5m2 as e5m2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wgmma_kernels import TF32, run_gemm, assert_close, k_of  # noqa: E402
import tiled_wgmma_kernels  # noqa: E402
from test_tiled_wgmma import CASES as TILED_CASES, IDS as TILED_IDS  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_sm90a():
    if opus.current_target().target.arch.capability != (9, 0):
        pytest.skip("wgmma needs an sm_90a device (H100/H200)")
    with opus.set_target("sm_90a", interpret=False):
        yield


def _launch(kernel, arrays, sd, constexprs):
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(a) for a in arrays]
    kernel[1, 128](*dev, sd, **constexprs)
    return dev[3].to_numpy()


def _check(got, want, c, a):
    if c.kind == "int":
        np.testing.assert_array_equal(got, want)
    elif a.itemsize == 1 or c is f16:  # fp8 / f16 accumulation: not exact in the hardware
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=2e-3, atol=2e-2)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


FAMILIES = [(f16, f16, f32), (f16, f16, f16), (bf16, bf16, f32), (e4m3, e5m2, f32),
            (e5m2, e4m3, f16), (i8, u8, i32), (u8, u8, i32)] + \
           ([(TF32, TF32, f32)] if TF32 is not None else [])


@pytest.mark.parametrize("a,b,c", FAMILIES, ids=[f"{a.name}x{b.name}-{c.name}" for a, b, c in FAMILIES])
@pytest.mark.parametrize("a_from", ["smem", "regs"])
@pytest.mark.parametrize("n", [8, 64, 256])
def test_wgmma_on_gpu(a, b, c, a_from, n):
    if a.name in ("i8", "u8") and n == 8:
        n = 16
    k = k_of(a)
    sw = 2 * k * (4 if a is TF32 else a.itemsize)
    got, want = run_gemm(a, b, c, n, 2 * k, seed=n, SW_A=sw, SW_B=sw, A_FROM=a_from,
                         launch=_launch)
    _check(got, want, c, a)


@pytest.mark.parametrize("sw", [0, 32, 64, 128])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_swizzle_modes_on_gpu(sw, major):
    kt = 16 if major == "MN" else 64
    got, want = run_gemm(bf16, bf16, f32, 64, kt, seed=sw, A_MAJOR=major, B_MAJOR=major,
                         SW_A=sw, SW_B=sw, launch=_launch)
    _check(got, want, f32, bf16)


def test_scale_d_and_negation_on_gpu():
    got, want = run_gemm(f16, f16, f32, 32, 32, seed=5, scale_d=False, SW_A=64, SW_B=64,
                         NEG_A=True, launch=_launch)
    _check(got, want, f32, f16)


@pytest.mark.parametrize("dtype,wn,expand,tile,kw", TILED_CASES, ids=TILED_IDS)
def test_tiled_wgmma_gemm_on_gpu(dtype, wn, expand, tile, kw):
    D, want = tiled_wgmma_kernels.run(dtype, wn, expand, tile, blocks=(3, 2), k_tiles=5, seed=7,
                                      on_gpu=True, **kw)
    np.testing.assert_allclose(D, want, rtol=1e-5, atol=1e-4)
