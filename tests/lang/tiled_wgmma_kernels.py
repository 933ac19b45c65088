"""A tiled-wgmma GEMM (opus.make_tiled_mma with a wgmma atom, sm_90a) and its numpy reference,
shared by the interpreter tests (test_tiled_wgmma.py), the SASS test and the GPU twin
(test_gpu_wgmma.py).

``tiled_wg_gemm``: D (M x N, f32) = A (M x K) @ B (K x N), f16 or bf16, all row-major in global
memory; block (i, j) computes D's tmma.m x tmma.n tile at (i * tmma.m, j * tmma.n) with
tmma.num_warpgroups warpgroups. Per K tile of tmma.k: every thread copies elements of A's
tile into shared memory through ``la`` (K-major, swizzled) and of B's, seen as (n, k), through
``lb`` (K-major, or N-major: B's rows are contiguous in n); fence_proxy_async + barrier; one
call issues every wgmma; commit; wait. A from registers (A_FROM="regs") loads A's tile through
``tmma.layout_a``."""
import numpy as np

import opus
from opus import f32, i32

from wgmma_kernels import tile_layout, tile_elements

_KERNELS = {}


def tiled_wg_gemm_for(dtype):
    if dtype.name not in _KERNELS:
        _KERNELS[dtype.name] = _tiled_wg_gemm(dtype)
    return _KERNELS[dtype.name]


def _tiled_wg_gemm(dtype):
    @opus.kernel
    def tiled_wg_gemm(a: opus.Ptr[dtype], b: opus.Ptr[dtype], d: opus.Ptr[f32], M: i32, N: i32,
                      K: i32, WN: opus.constexpr, EXPAND: opus.constexpr, TILE: opus.constexpr,
                      A_FROM: opus.constexpr = "smem", B_MAJOR: opus.constexpr = "K"):
        tmma = opus.make_tiled_mma(opus.make_wgmma(dtype, dtype, f32, (64, WN, 16), a_from=A_FROM),
                                   EXPAND, TILE)
        KT, threads = tmma.k, tmma.threads
        sw = min(128, 2 * KT)
        m0, n0 = opus.block_id_y() * tmma.m, opus.block_id_x() * tmma.n
        t = opus.thread_id_x()
        ga, gb = opus.make_gmem(a), opus.make_gmem(b)
        la = tile_layout(tmma.m, KT, dtype, "K", sw)
        lb = tile_layout(tmma.n, KT, dtype, B_MAJOR, sw)
        sa = opus.alloc_smem(dtype, tile_elements(tmma.m, KT, dtype, "K", sw), align=1024)
        sb = opus.alloc_smem(dtype, tile_elements(tmma.n, KT, dtype, B_MAJOR, sw), align=1024)
        acc = tmma.zeros_c()
        for k0 in range(0, K, KT):
            for i in range((tmma.n * KT + threads - 1) // threads):
                e = t + threads * i
                if e < tmma.n * KT:
                    sb[lb(e // KT, e % KT)] = gb[(k0 + e % KT) * N + n0 + e // KT]
            if A_FROM == "smem":
                for i in range((tmma.m * KT + threads - 1) // threads):
                    e = t + threads * i
                    if e < tmma.m * KT:
                        sa[la(e // KT, e % KT)] = ga[(m0 + e // KT) * K + k0 + e % KT]
            opus.fence_proxy_async()  # generic-proxy writes, read by wgmma (the async proxy)
            opus.sync_threads()
            if A_FROM == "smem":
                acc = tmma(tmma.smem_a(sa, la), tmma.smem_b(sb, lb), opus.wgmma_fence(acc))
            else:
                ra = ga.load(tmma.layout_a((K, 1)) + (m0 * K + k0), vec=2)
                acc, ra = opus.wgmma_fence(acc, ra)
                acc = tmma(ra, (sb, lb), acc)
            opus.wgmma_commit()
            acc = tmma.acc(opus.wgmma_wait(0, acc))
            opus.sync_threads()  # every warpgroup done reading before the next tile overwrites
        opus.make_gmem(d).store(opus.wgmma_wait(0, acc), tmma.layout_c((N, 1)) + (m0 * N + n0),
                                vec=2)
    return tiled_wg_gemm


def block_tile(wn, expand, tile):
    """(block m, block n, block k, threads) of the tiled wgmma."""
    return (expand[0] * tile[0] * 64, expand[1] * tile[1] * wn, expand[2] * 16,
            128 * tile[0] * tile[1])


def run(dtype, wn, expand, tile, blocks=(2, 1), k_tiles=2, seed=0, on_gpu=False, **kw):
    """Launch the kernel on (blocks[0] x blocks[1]) block tiles and k_tiles K tiles (in the
    current target mode; arrays on the device with ``on_gpu``); returns (D, numpy's A @ B)."""
    bm, bn, bk, threads = block_tile(wn, expand, tile)
    M, N, K = blocks[0] * bm, blocks[1] * bn, k_tiles * bk
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(dtype.np_dtype)
    B = rng.standard_normal((K, N)).astype(dtype.np_dtype)
    D = np.full((M, N), np.nan, np.float32)
    args = [A, B, D]
    if on_gpu:
        from opus.runtime.device_array import DeviceArray
        args = [DeviceArray.from_numpy(x) for x in args]
    tiled_wg_gemm_for(dtype)[(blocks[1], blocks[0]), threads](*args, M, N, K, WN=wn,
                                                              EXPAND=expand, TILE=tile, **kw)
    if on_gpu:
        D = args[2].to_numpy()
    return D, A.astype(np.float64) @ B.astype(np.float64)
