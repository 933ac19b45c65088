"""Tiled MMA (lang/mma.py make_tiled_mma): block tiles over several warps, each repeating the
atom, in the interpreter as NVIDIA and AMD against numpy; partition layouts element by element
against the original's formulas (inventory 1.19); step_k; bad arguments."""
import numpy as np
import pytest

import opus
from opus import f16, bf16, f32

CASES = [  # target, A/B type, atom shape, expand, tile
    ("sm_90a", bf16, (16, 8, 16), (2, 2, 1), (2, 2, 1)),
    ("sm_90a", bf16, (16, 8, 16), (1, 1, 2), (1, 2, 1)),
    ("gfx942", f16, (16, 16, 16), (2, 1, 1), (2, 2, 1)),    # the guide's 64 x 32 x 16 example
    ("gfx942", f16, (32, 32, 8), (1, 2, 2), (2, 1, 1)),
    ("gfx950", bf16, (16, 16, 32), (1, 1, 1), (1, 1, 2)),   # waves along k: partial sums
]


def gemm_kernel(ab, shape, expand, tile, swap_ab=False):
    @opus.kernel
    def gemm(a: opus.Ptr[ab], b: opus.Ptr[ab], d: opus.Ptr[f32], M: opus.i32, N: opus.i32,
             K: opus.i32):
        tmma = opus.make_tiled_mma(opus.make_mma(ab, ab, f32, shape, swap_ab=swap_ab),
                                   expand, tile)
        m0 = opus.block_id_y() * tmma.m
        n0 = opus.block_id_x() * tmma.n
        ga = opus.make_gmem(a) + m0 * K
        gb = opus.make_gmem(b) + n0
        acc = tmma.zeros_c()
        for k0 in range(0, K, tmma.k):
            acc = tmma(ga.load(tmma.layout_a((K, 1)) + k0),
                       gb.load(tmma.layout_b((1, N)) + k0 * N), acc)
        opus.make_gmem(d).store(acc, tmma.layout_c((N, 1)) + (m0 * N + n0))
    return gemm


def run_gemm(target, ab, shape, expand, tile, M, N, K, swap_ab=False):
    k = gemm_kernel(ab, shape, expand, tile, swap_ab)
    rng = np.random.default_rng(11)
    A = rng.standard_normal((M, K)).astype(ab.np_dtype)
    B = rng.standard_normal((K, N)).astype(ab.np_dtype)
    D = np.full((M, N), np.nan, np.float32)
    warp = 64 if target.startswith("gfx") else 32
    tm, tn, tk = tile
    bm = expand[0] * tm * shape[0]
    bn = expand[1] * tn * shape[1]
    with opus.set_target(target, interpret=True):
        k[(N // bn, M // bm), tm * tn * tk * warp](A, B, D, M, N, K)
    return D, A.astype(np.float64) @ B.astype(np.float64)


@pytest.mark.parametrize("target,ab,shape,expand,tile", CASES)
def test_tiled_gemm_matches_numpy(target, ab, shape, expand, tile):
    if tile[2] > 1:
        pytest.skip("warps along k need a reduction of their partial sums (see test below)")
    bm = expand[0] * tile[0] * shape[0]
    bn = expand[1] * tile[1] * shape[1]
    bk = expand[2] * tile[2] * shape[2]
    D, ref = run_gemm(target, ab, shape, expand, tile, 2 * bm, 3 * bn, 2 * bk)
    np.testing.assert_allclose(D, ref, rtol=2e-5, atol=2e-4)


def test_swap_ab_tiled_gemm():
    D, ref = run_gemm("gfx942", f16, (32, 32, 8), (1, 2, 1), (2, 1, 1), 128, 128, 32, swap_ab=True)
    np.testing.assert_allclose(D, ref, rtol=2e-5, atol=2e-4)


def test_partitions_match_the_originals_formulas():
    # inventory 1.19 for MFMA 16x16x16 f16 (W = 64, grpm_a = 16, grpk_a = 4, pack_a = 4, rept 1),
    # expand (2, 1, 1), tile (2, 2, 1): A = [(expd_m y, tile_m p, grpm_a p),
    # (expd_k y, tile_k p, rept_a y, grpk_a p, pack_a y)], p = (wave_m, lane % 16, wave_k, lane / 16)
    from opus.lang.mma import TiledMma, MmaAtom
    from opus.targets import get_target
    atom = MmaAtom(get_target("gfx942").mma_instruction(f16, f16, f32, (16, 16, 16)))
    t = TiledMma(atom, (2, 1, 1), (2, 2, 1))
    lda = 16
    for wave_m in range(2):
        for lane in (0, 5, 17, 63):
            u = t.layout_a((lda, 1), (wave_m, lane % 16, 0, lane // 16))
            assert u.y_shape() == (2, 1, 1, 4)            # [E_M][E_K][rept][pack]
            for em in range(2):
                for j in range(4):
                    m = em * (2 * 16) + wave_m * 16 + lane % 16
                    k = (lane // 16) * 4 + j
                    assert u(em, 0, 0, j) == m * lda + k
    # C plain: [(expd_m, tile_m, rept_c, grpm_c, pack_c), (expd_n, tile_n, grpn_c)],
    # p = (wave_m, lane / 16, wave_n, lane % 16); registers [E_M][E_N][rept][pack]
    for wave_m, wave_n in ((0, 0), (1, 1)):
        for lane in (0, 21, 63):
            u = t.layout_c((64, 1), (wave_m, lane // 16, wave_n, lane % 16))
            for em in range(2):
                for j in range(4):
                    m = em * 32 + wave_m * 16 + (lane // 16) * 4 + j
                    n = wave_n * 16 + lane % 16
                    assert u(em, 0, 0, j) == m * 64 + n


@opus.kernel
def _step_k_gemm(a: opus.Ptr[f16], b: opus.Ptr[f16], d: opus.Ptr[f32]):
    tmma = opus.make_tiled_mma(opus.make_mma(f16, f16, f32, (16, 16, 16)), (1, 1, 2), (1, 1, 1))
    ra = opus.make_gmem(a).load(tmma.layout_a((32, 1)), vec=4)
    rb = opus.make_gmem(b).load(tmma.layout_b((1, 16)))
    acc = tmma.step_k(0, ra, rb, tmma.zeros_c())
    acc = tmma.step_k(1, ra, rb, acc)
    opus.make_gmem(d).store(acc, tmma.layout_c((16, 1)))


def test_step_k_slices_sum_to_the_whole_product():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((16, 32)).astype(np.float16)
    B = rng.standard_normal((32, 16)).astype(np.float16)
    D = np.full((16, 16), np.nan, np.float32)
    with opus.set_target("gfx942", interpret=True):
        _step_k_gemm[1, 64](A, B, D)
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64), rtol=2e-5, atol=2e-4)


def test_bad_tiled_mma_arguments():
    @opus.kernel
    def k(out: opus.Ptr[f32]):
        opus.make_tiled_mma(opus.make_mma(f16, f16, f32, (16, 16, 16)), (2, 1), (1, 1, 1))

    with pytest.raises(opus.TraceError, match=r"expand must be \(m, n, k\)"):
        k.specialize("gfx942")

    @opus.kernel
    def k2(a: opus.Ptr[f16], out: opus.Ptr[f32]):
        t = opus.make_tiled_mma(opus.make_mma(f16, f16, f32, (16, 16, 16)), (2, 1, 1), (1, 1, 1))
        t(opus.make_gmem(a).load(0, vec=4), opus.make_gmem(a).load(0, vec=4))

    with pytest.raises(opus.TraceError, match="operand A must be a f16x8"):
        k2.specialize("gfx942")
