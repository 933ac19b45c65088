"""TMA kernels and their numpy references, shared by the interpreter tests (test_tma_interp.py) and
their GPU twins (test_gpu_tma.py). The references are written from the PTX rules (boxes
outside the tensor read zeros and are not written), not from opus' code."""
import numpy as np

import opus
from opus import f16, f32, i32


def box_reference(x, r0, c0, box):
    """The box of x at (r0, c0): x's elements where they exist, zeros elsewhere."""
    out = np.zeros(box, x.dtype)
    for i in range(box[0]):
        for j in range(box[1]):
            r, c = r0 + i, c0 + j
            if 0 <= r < x.shape[0] and 0 <= c < x.shape[1]:
                out[i, j] = x[r, c]
    return out


def land_box(a, tile, coords):
    """A helper called from kernels: one box of ``a`` at ``coords`` into ``tile`` by TMA (one
    thread issues it on a fresh mbarrier), waited for by every thread."""
    bar = opus.alloc_mbarriers(1)[0]
    if opus.thread_id_x() == 0:
        bar.init(1)
        opus.fence_mbarrier_init()
    opus.sync_threads()
    if opus.thread_id_x() == 0:
        bar.arrive_expect_tx(a.copy_bytes)
        opus.tma_load(a, tile, coords, bar)
    bar.wait(0)


@opus.kernel
def load_box(a: opus.TensorMap, out: opus.Ptr[f32], r0: opus.i32, c0: opus.i32,
             BOX: opus.constexpr = (8, 16), SWZ: opus.constexpr = 0):
    """One 2-D box of f32 at (r0, c0) into shared memory by TMA, then out[i, t] = box[i, t] by
    thread t (read back through the map's layout, swizzle included)."""
    a.declare(f32, BOX, swizzle=SWZ)
    tile = opus.alloc_smem(f32, BOX[0] * BOX[1], align=1024)
    t = opus.thread_id_x()
    land_box(a, tile, (r0, c0))
    u = a.layout()
    for i in range(BOX[0]):
        out[i * BOX[1] + t] = tile[u(i, t)]


@opus.kernel
def load_box_3d(a: opus.TensorMap, out: opus.Ptr[f16], z0: opus.i32, r0: opus.i32,
                c0: opus.i32):
    """A 3-D f16 box (2, 4, 8) at (z0, r0, c0); thread t (of 8) copies column t out."""
    a.declare(f16, (2, 4, 8))
    tile = opus.alloc_smem(f16, 64, align=128)
    t = opus.thread_id_x()
    land_box(a, tile, (z0, r0, c0))
    for i in range(8):
        out[i * 8 + t] = tile[i * 8 + t]


@opus.kernel
def store_box(a: opus.TensorMap, r0: opus.i32, c0: opus.i32, BOX: opus.constexpr = (8, 16),
              SWZ: opus.constexpr = 0):
    """Thread t writes box[i, t] = 100 i + t into a shared tile, which one TMA store writes to
    the tensor at (r0, c0)."""
    a.declare(f32, BOX, swizzle=SWZ)
    tile = opus.alloc_smem(f32, BOX[0] * BOX[1], align=1024)
    t = opus.thread_id_x()
    u = a.layout()
    for i in range(BOX[0]):
        tile[u(i, t)] = opus.cast(i * 100 + t, f32)
    opus.fence_proxy_async()
    opus.sync_threads()
    if t == 0:
        opus.tma_store(a, tile, (r0, c0))
        opus.tma_commit()
        opus.tma_wait(0)


def store_reference(x, r0, c0, box):
    """x after store_box: the box's elements inside the tensor written, the rest unchanged."""
    out = x.copy()
    for i in range(box[0]):
        for j in range(box[1]):
            r, c = r0 + i, c0 + j
            if 0 <= r < x.shape[0] and 0 <= c < x.shape[1]:
                out[r, c] = 100 * i + j
    return out


@opus.kernel
def column_sums(a: opus.TensorMap, out: opus.Ptr[f32], k_tiles: opus.i32,
                BM: opus.constexpr = 8, BK: opus.constexpr = 32, S: opus.constexpr = 3):
    """The N-stage producer/consumer pipeline: block b sums the k_tiles tiles (BM x BK) of its
    rows of A, out[b*BM + r, c] = sum_k A[b*BM + r, k*BK + c], with S tiles in flight; thread c
    (of BK) reads column c of each tile."""
    a.declare(f32, (BM, BK))
    pipe = opus.TmaPipeline(a, stages=S)
    m0 = opus.block_id_x() * BM
    c = opus.thread_id_x()
    for j in range(S - 1):                          # prologue: S - 1 tiles in flight
        pipe.load(j, (m0, j * BK), pred=j < k_tiles)
    acc = [0.0] * BM
    for k in opus.range(k_tiles):
        nxt = k + S - 1
        pipe.load(nxt, (m0, nxt * BK), pred=nxt < k_tiles)   # refill the oldest stage
        tile = pipe.wait(k)
        for r in range(BM):
            acc[r] = acc[r] + tile[r * BK + c]
        pipe.release(k)
    for r in range(BM):
        out[(m0 + r) * BK + c] = acc[r]


def column_sums_reference(x, bm, bk, blocks):
    k_tiles = -(-x.shape[1] // bk)
    padded = np.zeros((blocks * bm, k_tiles * bk), np.float32)
    padded[:x.shape[0], :x.shape[1]] = x
    return padded.reshape(blocks * bm, k_tiles, bk).sum(axis=1, dtype=np.float32)


@opus.kernel
def two_map_sums(a: opus.TensorMap, b: opus.TensorMap, out: opus.Ptr[f32], k_tiles: opus.i32,
                 S: opus.constexpr = 2):
    """Two maps per stage (as a GEMM's A and B): out[c] = sum_k (A tile k)[0, c] + (B tile
    k)[1, c] over tiles of 4 x 16 (A) and 2 x 16 (B) along the columns."""
    a.declare(f32, (4, 16))
    b.declare(f32, (2, 16))
    pipe = opus.TmaPipeline((a, b), stages=S)
    c = opus.thread_id_x()
    for j in range(S - 1):
        pipe.load(j, ((0, j * 16), (0, j * 16)), pred=j < k_tiles)
    acc = 0.0
    for k in opus.range(k_tiles):
        nxt = k + S - 1
        pipe.load(nxt, ((0, nxt * 16), (0, nxt * 16)), pred=nxt < k_tiles)
        ta, tb = pipe.wait(k)
        acc = acc + ta[c] + tb[16 + c]
        pipe.release(k)
    out[c] = acc


@opus.kernel
def barrier_phases(out: opus.Ptr[i32]):
    """mbarrier phases and parity as PTX defines them, seen through try_wait by 4 threads
    (a block barrier after each step orders them on the GPU too): BARRIER_PHASES[j] is the j-th
    result of every thread, written to out[t * 12 + j]."""
    bar = opus.alloc_mbarriers(1)[0]
    t = opus.thread_id_x()
    if t == 0:
        bar.init(2)                                  # phase 0, 2 arrivals pending
        opus.fence_mbarrier_init()
    opus.sync_threads()
    res = [bar.try_wait(0), bar.try_wait(1)]         # phase 0 runs; the one before counts done
    opus.sync_threads()
    if t == 0:
        bar.arrive()                                 # 1 of 2
    opus.sync_threads()
    res += [bar.try_wait(0)]
    opus.sync_threads()
    if t == 1:
        bar.arrive()                                 # 2 of 2: phase 0 completes, phase 1 runs
    opus.sync_threads()
    res += [bar.try_wait(0), bar.try_wait(1)]
    opus.sync_threads()
    if t == 0:
        bar.arrive_expect_tx(0)                      # 1 of 2 (and no bytes)
    opus.sync_threads()
    res += [bar.try_wait(1)]
    opus.sync_threads()
    if t == 1:
        bar.arrive()                                 # phase 1 completes, phase 2 runs
    opus.sync_threads()
    res += [bar.try_wait(1), bar.try_wait(0), bar.try_wait(2), bar.try_wait(3)]
    opus.sync_threads()
    if t < 2:
        bar.arrive()                                 # two arrivals: phase 2 completes
    opus.sync_threads()
    res += [bar.try_wait(0), bar.try_wait(1)]
    for j in range(12):
        out[t * 12 + j] = opus.cast(res[j], i32)


# by hand from the PTX rules: try_wait(p) is true iff the current phase's parity != p & 1
BARRIER_PHASES = [0, 1, 0, 1, 0, 0, 1, 0, 0, 1, 1, 0]
