"""Kernels for the interpreter tests (kernels must live in a file)."""
import opus
from opus import f32, f16, bf16, i32, i8, Ptr
from opus.examples import mma_gemm_16x8

MMA = (opus.bf16, opus.bf16, opus.f32, (16, 8, 16))


@opus.kernel
def vadd(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    gx, gy, go = (opus.make_gmem(p, n) for p in (x, y, out))
    go[i] = gx[i] + gy[i]


def _vadd_vec(T):
    @opus.kernel
    def k(x: Ptr[T], y: Ptr[T], out: Ptr[T], n: i32, VEC: opus.constexpr = 8):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        gx, gy, go = (opus.make_gmem(p, n) for p in (x, y, out))
        go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)
    return k


vadd_vec = {"f32": _vadd_vec(f32), "f16": _vadd_vec(f16), "bf16": _vadd_vec(bf16)}


@opus.kernel(block=256)
def reduce(x: Ptr[f32], out: Ptr[f32], n: i32):
    s = opus.alloc_smem(f32, 256)
    tid = opus.thread_id_x()
    acc = 0.0
    for i in range(tid, n, 256):
        acc = acc + x[i]
    s[tid] = acc
    opus.sync_threads()
    for k in (128, 64, 32, 16, 8, 4, 2, 1):
        if tid < k:
            s[tid] = s[tid] + s[tid + k]
        opus.sync_threads()
    if tid == 0:
        out[opus.block_id_x()] = s[0]


@opus.kernel
def int_ops(a: Ptr[i32], b: Ptr[i32], out: Ptr[i32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        x = a[i]
        y = b[i]
        k = i * 10
        out[k + 0] = x // y
        out[k + 1] = x % y
        out[k + 2] = opus.tdiv(x, y)
        out[k + 3] = opus.tmod(x, y)
        out[k + 4] = x << y
        out[k + 5] = x >> y
        out[k + 6] = x * y
        out[k + 7] = x + y
        out[k + 8] = opus.i32(opus.u32(x) >> opus.u32(y))
        out[k + 9] = x - y


@opus.kernel
def casts(x: Ptr[f32], ob: Ptr[bf16], oh: Ptr[f16], o8: Ptr[i8], oi: Ptr[i32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        v = x[i]
        ob[i] = opus.bf16(v)
        oh[i] = opus.f16(v)
        o8[i] = opus.i8(v)
        oi[i] = opus.i32(v)


@opus.kernel
def dyn_for(counts: Ptr[i32], out: Ptr[i32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        acc = 0
        for j in range(0, counts[i]):
            acc = acc + j * 3 + 1
        out[i] = acc


@opus.kernel
def collatz(x: Ptr[i32], out: Ptr[i32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        v = x[i]
        steps = 0
        while v != 1:
            if v % 2 == 0:
                v = v // 2
            else:
                v = 3 * v + 1
            steps = steps + 1
        out[i] = steps


@opus.kernel
def early_return(x: Ptr[i32], out: Ptr[i32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i >= n:
        return
    if x[i] < 0:
        out[i] = -1
        return
    out[i] = x[i] * 2


@opus.kernel(block=64)
def race(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 64)
    tid = opus.thread_id_x()
    s[tid] = 1.0
    out[tid] = s[(tid + 1) % 64]   # no barrier between the write and the neighbour's read


@opus.kernel(block=64)
def uninit(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 128)
    tid = opus.thread_id_x()
    s[tid] = 1.0
    opus.sync_threads()
    out[tid] = s[tid + 64]


@opus.kernel
def oob_write(out: Ptr[f32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    out[i] = 1.0   # unbounded: no `if i < n`


@opus.kernel(block=64)
def divergent_barrier(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 64)
    tid = opus.thread_id_x()
    if tid < 32:
        s[tid] = 1.0
        opus.sync_threads()
    out[tid] = 0.0


@opus.kernel(block=64)
def barrier_after_exit(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 64)
    tid = opus.thread_id_x()
    if tid >= 32:
        return
    s[tid] = 2.0
    opus.sync_threads()
    out[tid] = s[31 - tid]


@opus.kernel(block=32)
def mma_tile(A: Ptr[bf16], B: Ptr[bf16], C: Ptr[f32], D: Ptr[f32]):
    mma = opus.make_mma(*MMA)
    lane = opus.lane_id()
    a = opus.make_vector([A[r * 16 + c] for r, c in (mma.coords_a(lane, i) for i in range(mma.elem_a))])
    b = opus.make_vector([B[k * 8 + c] for k, c in (mma.coords_b(lane, i) for i in range(mma.elem_b))])
    c = opus.make_vector([C[r * 8 + cc] for r, cc in (mma.coords_c(lane, i) for i in range(mma.elem_c))])
    d = mma(a, b, c)
    for i in range(mma.elem_c):
        r, cc = mma.coords_c(lane, i)
        D[r * 8 + cc] = d[i]


gemm = mma_gemm_16x8  # one warp per 16x8 tile of D = A @ B (A row-major MxK, B row-major KxN)


@opus.kernel
def show(x: Ptr[i32], n: i32):
    i = opus.thread_id_x()
    if i < n:
        opus.printf("t%d=%u %x\n", i, x[i], x[i])


@opus.kernel
def float_ops(a: Ptr[f32], b: Ptr[f32], c: Ptr[f32], out: Ptr[f32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        x = a[i]
        y = b[i]
        k = i * 4
        out[k + 0] = opus.fma(x, y, c[i])
        out[k + 1] = opus.min(x, y)
        out[k + 2] = opus.max(x, y)
        out[k + 3] = x / y
