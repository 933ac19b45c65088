"""wgmma (NVIDIA sm_90a) in the interpreter against numpy: every type family, several N, A from
shared memory and from registers, every swizzle mode and major-ness of the shared operands,
scale-d and negation; the asynchronous protocol's errors. Kernels and references:
wgmma_kernels.py (shared with the GPU twins in test_gpu_wgmma.py)."""
import numpy as np
import pytest

import opus
from opus import f16, bf16, f32, i8, u8, i32, fp8_e4m3 as e4m3, fp8_e5m2 as e5m2

from wgmma_kernels import TF32, run_gemm, assert_close

pytestmark = pytest.mark.usefixtures("sm90a")


@pytest.fixture
def sm90a():
    with opus.set_target("sm_90a"):
        yield


FAMILIES = [  # (A, B, C, K), one per type family of the instruction
    (f16, f16, f32, 16), (f16, f16, f16, 16), (bf16, bf16, f32, 16),
    (e4m3, e4m3, f32, 32), (e4m3, e5m2, f16, 32), (e5m2, e4m3, f32, 32), (e5m2, e5m2, f16, 32),
    (i8, i8, i32, 32), (i8, u8, i32, 32), (u8, i8, i32, 32), (u8, u8, i32, 32),
] + ([(TF32, TF32, f32, 8)] if TF32 is not None else [])
FAMILY_IDS = [f"{a.name}x{b.name}-{c.name}" for a, b, c, _ in FAMILIES]


@pytest.mark.parametrize("a,b,c,k", FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("a_from", ["smem", "regs"])
def test_every_type_family(a, b, c, k, a_from):
    """Two k-steps (KT = 2K) of a 64 x 64 tile, 32-byte... rows of 2K elements: the 64-byte
    swizzle for 16-bit types, 128-byte for 8-bit ones."""
    sw = 2 * k * (4 if a is TF32 else a.itemsize)
    got, want = run_gemm(a, b, c, 64, 2 * k, seed=3, SW_A=sw, SW_B=sw, A_FROM=a_from)
    assert_close(got, want, c)


@pytest.mark.parametrize("n", [8, 24, 136, 256])
def test_several_n_f16(n):
    got, want = run_gemm(f16, f16, f32, n, 64, seed=n)
    assert_close(got, want, f32)


@pytest.mark.parametrize("n", [16, 48, 208])
def test_several_n_int8(n):
    got, want = run_gemm(i8, u8, i32, n, 64, seed=n)
    assert_close(got, want, i32)


@pytest.mark.parametrize("sw", [0, 32, 64, 128])
@pytest.mark.parametrize("major", ["K", "MN"])
def test_swizzle_modes_and_majors_f16(sw, major):
    """K = 64 (four k-steps) with the tiles in each of the 8 canonical forms."""
    kt = 16 if major == "MN" else 64
    got, want = run_gemm(bf16, bf16, f32, 64, kt, seed=sw + len(major), A_MAJOR=major,
                         B_MAJOR=major, SW_A=sw, SW_B=sw)
    assert_close(got, want, f32)


@pytest.mark.parametrize("sw", [0, 32, 64, 128])
def test_swizzle_modes_int8_and_tf32(sw):
    got, want = run_gemm(u8, u8, i32, 32, 128, seed=sw, SW_A=sw, SW_B=sw)
    assert_close(got, want, i32)
    if TF32 is not None:
        got, want = run_gemm(TF32, TF32, f32, 32, 32, seed=sw, SW_A=sw, SW_B=sw)
        assert_close(got, want, f32)


def test_scale_d_false_ignores_c():
    got, want = run_gemm(f16, f16, f32, 32, 32, seed=5, scale_d=False, SW_A=64, SW_B=64)
    assert_close(got, want, f32)


@pytest.mark.parametrize("neg_a,neg_b", [(True, False), (False, True), (True, True)])
def test_negated_operands(neg_a, neg_b):
    got, want = run_gemm(e4m3, e5m2, f32, 16, 64, seed=7, NEG_A=neg_a, NEG_B=neg_b)
    assert_close(got, want, f32)


def test_tf32_drops_the_low_mantissa_bits():
    """An A of 1 + 2^-20 (below tf32's 10 bits) times B = 1 reads as 1 in the product."""
    if TF32 is None:
        pytest.skip("no opus.tf32")
    from wgmma_kernels import wg_gemm_for
    A = np.full((64, 8), 1 + 2.0 ** -20, np.float32)
    B = np.ones((8, 8), np.float32)
    C = np.zeros((64, 8), np.float32)
    out = np.zeros((64, 8), np.float32)
    wg_gemm_for(f32, f32, f32)[1, 128](A.reshape(-1), B.reshape(-1), C.reshape(-1),
                                       out.reshape(-1), 1, AT=TF32, BT=TF32, CT=f32, N=8, KT=8,
                                       SW_A=32, SW_B=32)
    np.testing.assert_array_equal(out, 8.0)


def test_checking_mode_accepts_the_kernels():
    """The kernels fence and barrier their shared writes before the wgmma: checking mode
    (uninitialized reads, races) finds nothing, for both majors and A from registers."""
    import opus.interp as interp
    with interp.checking():
        for kw in ({"A_MAJOR": "MN", "B_MAJOR": "MN", "SW_A": 0, "SW_B": 32}, {"A_FROM": "regs"}):
            got, want = run_gemm(f16, f16, f32, 64, 16, seed=11, **kw)
            assert_close(got, want, f32)
