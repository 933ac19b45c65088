"""Example kernels, each with a numpy reference: used by ``opus demo``, tests and benchmarks."""

import numpy as np
import ml_dtypes

import opus
from opus import bf16, f16, f32

__all__ = ["vector_add", "saxpy", "block_reduce", "mma_gemm_16x8", "mfma_gemm_32x32", "MMA_ATOMS",
           "MMA_GEMM", "EXAMPLES", "run_example"]


@opus.kernel
def vector_add(x: opus.Ptr[f32], y: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32,
               VEC: opus.constexpr = 4):
    """out = x + y with VEC-wide (16-byte for f32x4) accesses; the tail past n is masked."""
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
    gx, gy, go = opus.make_gmem(x, n), opus.make_gmem(y, n), opus.make_gmem(out, n)
    go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)


def _vector_add_for(dtype):
    @opus.kernel
    def vadd(x: opus.Ptr[dtype], y: opus.Ptr[dtype], out: opus.Ptr[dtype], n: opus.i32,
             VEC: opus.constexpr = 16 // dtype.itemsize):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        gx, gy, go = opus.make_gmem(x, n), opus.make_gmem(y, n), opus.make_gmem(out, n)
        go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)
    return vadd


vector_add_f16 = _vector_add_for(f16)
vector_add_bf16 = _vector_add_for(bf16)


@opus.kernel
def saxpy(a: f32, x: opus.Ptr[f32], y: opus.Ptr[f32], n: opus.i32):
    """y = a * x + y with a grid-stride loop, so any grid covers any n: grid_size_x() counts
    the grid's threads (as in the original opus; num_blocks_x() counts its blocks)."""
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    while i < n:                          # run-time loop: i is carried
        y[i] = a * x[i] + y[i]            # two roundings, as numpy's float32 a * x + y
        i = i + opus.grid_size_x()


@opus.kernel(block=256)
def block_reduce(x: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32):
    """out[block] = sum of x[block*256*ITEMS ...] — strided loads, then a tree in shared memory."""
    s = opus.alloc_smem(f32, 256)
    tid = opus.thread_id_x()
    base = opus.block_id_x() * 1024
    g = opus.make_gmem(x, n)
    acc = 0.0
    for j in range(4):                    # static: unrolled
        acc = acc + g[base + j * 256 + tid]
    s[tid] = acc
    opus.sync_threads()
    k = 128
    while k > 0:                          # compile-time loop: k is a Python int
        if tid < k:                       # run-time branch
            s[tid] = s[tid] + s[tid + k]
        opus.sync_threads()
        k //= 2
    if tid == 0:
        out[opus.block_id_x()] = s[0]


def _mma_gemm_for(dtype, shape, b_dtype=None, c_dtype=f32):
    """D (M x N, ``c_dtype``) = A (M x K) @ B (K x N), both row-major, A of ``dtype`` and B of
    ``b_dtype`` (default: the same), with the target's ``shape`` = (m, n, k) matrix instruction:
    one warp per m x n tile of D, a run-time K loop carrying the accumulator. The atom's operand
    layouts say which elements each lane loads (bulk loads, as wide as the layouts allow) and
    stores. M, N, K are multiples of m, n, k; the launch has (M/m)*(N/n) warps. (tf32 operands
    live in f32 arrays: the pointer types are the registers' types.)"""
    from .targets.matrix import register_type
    ta, tb = dtype, dtype if b_dtype is None else b_dtype
    ra, rb = register_type(ta), register_type(tb)

    @opus.kernel
    def mma_gemm(a: opus.Ptr[ra], b: opus.Ptr[rb], d: opus.Ptr[c_dtype],
                 M: opus.i32, N: opus.i32, K: opus.i32):
        mma = opus.make_mma(ta, tb, c_dtype, shape)
        w = opus.block_id_x() * (opus.block_size_x() // opus.warp_size()) + opus.warp_id()
        m0, n0 = (w // (N // mma.n)) * mma.m, (w % (N // mma.n)) * mma.n
        ua = mma.layout_a((K, 1)) + m0 * K     # A (m, k), row-major
        ub = mma.layout_b((1, N)) + n0         # B seen as (n, k): stored k x n, row-major
        ga, gb = opus.make_gmem(a), opus.make_gmem(b)
        acc = mma.zeros_c()
        for k0 in range(0, K, mma.k):
            acc = mma(ga.load(ua + k0), gb.load(ub + k0 * N), acc)
        opus.make_gmem(d).store(acc, mma.layout_c((N, 1)) + (m0 * N + n0))
    return mma_gemm


def _tiled_gemm_for(dtype, shape, expand, tile):
    """The same product, any M, N, K, over block tiles (opus.make_tiled_mma) of 16-bit types."""
    @opus.kernel
    def tiled_gemm(a: opus.Ptr[dtype], b: opus.Ptr[dtype], d: opus.Ptr[f32],
                   M: opus.i32, N: opus.i32, K: opus.i32):
        tmma = opus.make_tiled_mma(opus.make_mma(dtype, dtype, f32, shape), expand, tile)
        m0, n0 = opus.block_id_y() * tmma.m, opus.block_id_x() * tmma.n
        ga, gb, gd = opus.make_gmem(a) + m0 * K, opus.make_gmem(b) + n0, opus.make_gmem(d)
        ua, ub, uc = tmma.layout_a((K, 1)), tmma.layout_b((1, N)), tmma.layout_c((N, 1))
        full = (m0 + tmma.m <= M) & (n0 + tmma.n <= N) & (K % 8 == 0) & (N % 8 == 0)
        acc = tmma.zeros_c()
        for k0 in range(0, K, tmma.k):
            if full & (k0 + tmma.k <= K):   # an inner tile, rows 16-byte aligned: whole vectors
                acc = tmma(ga.load(ua + k0), gb.load(ub + k0 * N), acc)
            else:                           # an edge: element by element, zeros outside
                acc = tmma(ga.load_if(tmma.inside_a(M - m0, K - k0), ua + k0, vec=1),
                           gb.load_if(tmma.inside_b(N - n0, K - k0), ub + k0 * N, vec=1), acc)
        if full:
            gd.store(acc, uc + (m0 * N + n0))
        else:
            gd.store_if(tmma.inside_c(M - m0, N - n0), acc, uc + (m0 * N + n0), vec=1)
    return tiled_gemm


# The matrix instruction of each vendor's GEMM example: A/B element type and (m, n, k).
MMA_ATOMS = {"nvidia": (bf16, (16, 8, 16)),  # mma.sync.m16n8k16 (sm_80+)
             "amd": (f16, (32, 32, 8))}      # v_mfma_f32_32x32x8_f16 (gfx942, gfx950)
MMA_GEMM = {vendor: _mma_gemm_for(*atom) for vendor, atom in MMA_ATOMS.items()}
mma_gemm_16x8, mfma_gemm_32x32 = MMA_GEMM["nvidia"], MMA_GEMM["amd"]
# The demo's block-tiled GEMM: 2 x 2 warps, each repeating the atom to a 32 x 32 warp tile
TILED = {"nvidia": ((2, 4, 1), (2, 2, 1)),   # 16x8 atom -> 64 x 64 x 16 per block
         "amd": ((1, 1, 2), (2, 2, 1))}      # 32x32 atom -> 64 x 64 x 16 per block
TILED_GEMM = {vendor: _tiled_gemm_for(*MMA_ATOMS[vendor], *TILED[vendor]) for vendor in TILED}


# -- runners: build inputs, launch, compare with numpy ------------------------------------------

def _rng(seed):
    return np.random.default_rng(seed)


def _device(arrays, on_gpu):
    """Move numpy arrays to the device (torch if present, else opus DeviceArray)."""
    if not on_gpu:
        return arrays, lambda a: a
    try:
        import torch
        def to_dev(a):
            if a.dtype == ml_dtypes.bfloat16:
                return torch.from_numpy(a.view(np.uint16).astype(np.int32)).to(torch.int32).cuda() \
                    .to(torch.int16).view(torch.bfloat16)
            return torch.from_numpy(a).cuda()
        def to_host(t):
            torch.cuda.synchronize()
            if t.dtype == torch.bfloat16:
                return t.view(torch.int16).cpu().numpy().view(ml_dtypes.bfloat16)
            return t.cpu().numpy()
        return [to_dev(a) for a in arrays], to_host
    except ImportError:
        from .runtime.device_array import DeviceArray
        from .runtime import cuda_driver
        def to_host(d):
            cuda_driver.synchronize()
            return d.to_numpy()
        return [DeviceArray.from_numpy(a) for a in arrays], to_host


def run_vector_add(on_gpu, dtype=f32, n=1_000_003, seed=0):
    k = {f32: vector_add, f16: vector_add_f16, bf16: vector_add_bf16}[dtype]
    vec = 16 // dtype.itemsize
    r = _rng(seed)
    x = r.standard_normal(n).astype(dtype.np_dtype)
    y = r.standard_normal(n).astype(dtype.np_dtype)
    out = np.full(n, np.nan, dtype.np_dtype)  # poisoned: every element must be written
    (dx, dy, do), host = _device([x, y, out], on_gpu)
    k[(n + 256 * vec - 1) // (256 * vec), 256](dx, dy, do, n)
    got = host(do)
    want = (x.astype(np.float32) + y.astype(np.float32)).astype(dtype.np_dtype)
    ok = np.array_equal(got.view(np.uint8), want.view(np.uint8))
    return ok, f"vector add {dtype.name} n={n}: {'bit-exact' if ok else 'MISMATCH'}"


def run_block_reduce(on_gpu, blocks=300, seed=1):
    r = _rng(seed)
    n = blocks * 1024 - 37  # a ragged tail: the last block reads zeros past n
    x = r.standard_normal(n).astype(np.float32)
    out = np.full(blocks, np.nan, np.float32)
    (dx, do), host = _device([x, out], on_gpu)
    block_reduce[blocks, 256](dx, do, n)
    got = host(do)
    want = np.add.reduceat(np.concatenate([x, np.zeros(37, np.float32)]).astype(np.float64),
                           np.arange(0, blocks * 1024, 1024))
    err = np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))
    ok = bool(np.all(np.isfinite(got)) and err < 1e-5)
    return ok, f"block reduce {blocks} blocks: max rel err {err:.2e}"


def run_saxpy(on_gpu, n=200_003, blocks=24, seed=3):
    """The grid-stride example with fewer threads than elements (each thread does ~n/6144)."""
    r = _rng(seed)
    a = np.float32(r.standard_normal())
    x = r.standard_normal(n).astype(np.float32)
    y = r.standard_normal(n).astype(np.float32)
    want = a * x + y  # float32 throughout (before y is updated in place)
    (dx, dy), host = _device([x, y], on_gpu)
    saxpy[blocks, 256](float(a), dx, dy, n)
    got = host(dy)
    ok = np.array_equal(got, want)
    return ok, (f"saxpy grid-stride n={n} on {blocks}x256 threads: "
                f"{'bit-exact' if ok else 'MISMATCH'}")


def run_mma(on_gpu, M=160, N=200, K=72, seed=2):
    """The block-tiled GEMM example with the current target's matrix instruction (MMA_ATOMS,
    TILED): 64 x 64 block tiles of 4 warps; any M, N, K (the default's edges are ragged in all
    three)."""
    target = opus.current_target().target
    dtype, (m, n, k) = MMA_ATOMS[target.vendor]
    (em, en, ek), (tm, tn, tk) = TILED[target.vendor]
    bm, bn = em * tm * m, en * tn * n
    r = _rng(seed)
    a = r.standard_normal((M, K)).astype(dtype.np_dtype)
    b = r.standard_normal((K, N)).astype(dtype.np_dtype)
    d = np.full((M, N), np.nan, np.float32)
    (da, db, dd), host = _device([a, b, d], on_gpu)
    TILED_GEMM[target.vendor][(-(-N // bn), -(-M // bm)), tm * tn * tk * target.warp_size](
        da, db, dd, M, N, K)
    got = host(dd)
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    ok = bool(np.all(np.isfinite(got)) and err < 1e-5 and np.allclose(got, want, 1e-4, 1e-3))
    ins = target.mma_instruction(dtype, dtype, f32, (m, n, k)).name
    return ok, (f"tiled GEMM {M}x{N}x{K} {dtype.name}->f32, {bm}x{bn} blocks of {tm * tn * tk} "
                f"warps, with {ins}: rel err {err:.2e}")


EXAMPLES = {
    "vector_add_f32": lambda g: run_vector_add(g, f32),
    "vector_add_f16": lambda g: run_vector_add(g, f16),
    "vector_add_bf16": lambda g: run_vector_add(g, bf16),
    "block_reduce": run_block_reduce,
    "saxpy_grid_stride": run_saxpy,
    "mma_gemm": run_mma,
}


def run_example(name, on_gpu):
    return EXAMPLES[name](on_gpu)
