"""Kernels and references for the issue-17 gap tests, shared by the interpreter tests
(test_multidim.py, test_fma32.py, test_printf_stdout.py) and their GPU twins
(tests/test_gpu_gaps.py), so both run the same kernels against the same references."""
import numpy as np

import opus
from opus import f32, i32, Ptr


# -- multi-dimensional launches ----------------------------------------------------------------

@opus.kernel
def linear_ids(out: Ptr[i32], packed: Ptr[i32]):
    """Each thread writes, at its place in the grid of threads (z, y, x; x fastest), its linear
    id (block-major: its block's linear index times the block's threads, plus its linear index
    in the block) and its six indices packed 4 bits each."""
    tx, ty, tz = opus.thread_id_x(), opus.thread_id_y(), opus.thread_id_z()
    bx, by, bz = opus.block_id_x(), opus.block_id_y(), opus.block_id_z()
    sx, sy, sz = opus.block_size_x(), opus.block_size_y(), opus.block_size_z()
    nx, ny = opus.num_blocks_x(), opus.num_blocks_y()
    gx, gy, gz = bx * sx + tx, by * sy + ty, bz * sz + tz
    slot = (gz * opus.grid_size_y() + gy) * opus.grid_size_x() + gx
    out[slot] = ((bz * ny + by) * nx + bx) * (sx * sy * sz) + (tz * sy + ty) * sx + tx
    packed[slot] = tx + 16 * (ty + 16 * (tz + 16 * (bx + 16 * (by + 16 * bz))))


def linear_ids_reference(grid, block):
    """(linear ids, packed indices), each shaped (z, y, x) over the grid's threads, from numpy's
    meshgrid of global coordinates: a thread's indices are its coordinate // and % the block."""
    gz, gy, gx = np.meshgrid(*(np.arange(g * b) for g, b in zip(grid[::-1], block[::-1])),
                             indexing="ij")
    (tx, bx), (ty, by), (tz, bz) = ((c % b, c // b) for c, b in zip((gx, gy, gz), block))
    nx, ny = grid[0], grid[1]
    sx, sy, sz = block
    lin = ((bz * ny + by) * nx + bx) * (sx * sy * sz) + (tz * sy + ty) * sx + tx
    packed = tx + 16 * (ty + 16 * (tz + 16 * (bx + 16 * (by + 16 * bz))))
    return lin.astype(np.int32), packed.astype(np.int32)


# Asymmetric shapes: every axis has its own extent, so an axis read for another shows.
LAUNCHES = [((3, 2, 4), (4, 3, 2)), ((2, 3, 1), (1, 2, 5)), ((1, 1, 3), (2, 1, 1)),
            ((2, 1, 2), (16, 1, 4))]


# -- fma rounding ----------------------------------------------------------------------------------

@opus.kernel
def fma_and_mul_add(a: Ptr[f32], b: Ptr[f32], c: Ptr[f32], fused: Ptr[f32], twice: Ptr[f32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    fused[i] = opus.fma(a[i], b[i], c[i])
    twice[i] = a[i] * b[i] + c[i]


# -- printf ----------------------------------------------------------------------------------------

@opus.kernel
def print_values(x: Ptr[i32], y: Ptr[f32], n: i32):
    i = opus.thread_id_x()
    if i < n:
        opus.printf("t%d: %d %u %x %.3f %lld|%c\n", i, x[i], x[i], x[i], y[i],
                    opus.i64(x[i]) * 1000000000, 65 + i)


PRINT_X = np.array([7, -1, 255, -2147483648], np.int32)
PRINT_Y = np.array([0.5, -2.25, 1e3, 3.14159], np.float32)
# printed by hand from PRINT_X, PRINT_Y: %u and %x read the i32's bits as unsigned
PRINT_LINES = ["t0: 7 7 7 0.500 7000000000|A",
               "t1: -1 4294967295 ffffffff -2.250 -1000000000|B",
               "t2: 255 255 ff 1000.000 255000000000|C",
               "t3: -2147483648 2147483648 80000000 3.142 -2147483648000000000|D"]


# -- opus.range(unroll=), static_ford -------------------------------------------------------------

@opus.kernel
def digits_in_order(x: Ptr[i32], out: Ptr[i32], start: i32, stop: i32, step: i32,
                    UNROLL: opus.constexpr = 4):
    """acc = acc * 10 + x[i] over opus.range(start, stop, step): the digits of out say which
    elements the loop visited and in what order."""
    acc = opus.i32(0)
    for i in opus.range(start, stop, step, unroll=UNROLL):
        acc = acc * 10 + x[i]
    out[opus.thread_id_x()] = acc


@opus.kernel
def static_bounds_loop(x: Ptr[i32], out: Ptr[i32]):
    """opus.range over compile-time bounds is still a run-time loop (range(8) would unroll)."""
    acc = opus.i32(0)
    for i in opus.range(1, 8, 2, unroll=2):
        acc = acc * 10 + x[i]
    out[0] = acc


@opus.kernel
def ford_order(out: Ptr[i32]):
    """Each step of static_ford(2, 3) and of static_ford((2, 1, 2)) writes its indices into the
    next slot, so out lists the visiting order."""
    k = 0
    for i, j in opus.static_ford(2, 3):
        out[k] = opus.i32(10 * i + j) + opus.thread_id_x()
        k += 1
    for i, j, m in opus.static_ford((2, 1, 2)):
        out[k] = opus.i32(100 * i + 10 * j + m) + opus.thread_id_x()
        k += 1


# -- make_smem, and opus.load / opus.store with a bound ------------------------------------------

@opus.kernel
def smem_windows(x: Ptr[f32], out: Ptr[f32], m: i32):
    """32 floats in shared memory, read back through make_smem views: of the view (bound m),
    of its .ptr with bound m, of the .ptr without a bound; then a store through the bounded view
    of 100 + t (dropped at t >= m), read back unbounded, and in quads through the bounded view."""
    s = opus.alloc_smem(f32, 32)
    t = opus.thread_id_x()
    s[t] = x[t]
    opus.sync_threads()
    a, b, c = opus.make_smem(s, m), opus.make_smem(s.ptr, m), opus.make_smem(s.ptr)
    out[t] = a[t]
    out[32 + t] = b[t]
    out[64 + t] = c[t]
    opus.sync_threads()
    a[t] = 100.0 + opus.f32(t)
    opus.sync_threads()
    out[96 + t] = s[t]
    if t < 8:  # vector reads through the bounded view: a quad across m reads 0 past it
        opus.store(out, a.load(4 * t, vec=4), 128 + 4 * t)


@opus.kernel
def bounded_quads(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], n: i32, base: i32):
    """Thread t loads x[base + 4t .. +4) with bound n and stores it into out[4t ..) unbounded,
    and stores the same four values into y[base + 4t ..) with bound n."""
    o = base + 4 * opus.thread_id_x()
    v = opus.load(x, o, vec=4, bound=n)
    opus.store(out, v, 4 * opus.thread_id_x())
    opus.store(y, v, o, bound=n)


@opus.kernel
def bounded_scalars(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], n: i32, shift: i32):
    """Scalar forms: out[t] = x[t + shift] with bound n; y[t + shift] = -t with bound n; and a
    broadcast store of 7 into y[16 + 4 * (t % 2) ..) with a compile-time bound of 22."""
    t = opus.thread_id_x()
    out[t] = opus.load(x, t + shift, bound=n)
    opus.store(y, -opus.f32(t), t + shift, bound=n)
    if t < 2:
        opus.store(y, 7.0, 16 + 4 * t, vec=4, bound=22)


def bounded_reference(x, n, offsets):
    """x[k] where 0 <= k < n, else 0, at each offset k (the documented bound rule)."""
    return np.array([x[k] if 0 <= k < n else 0 for k in offsets], x.dtype)


def bounded_quads_reference(x, n, base):
    """bounded_quads' out and y (24 elements, -1 where nothing is written) for 5 threads."""
    offsets = [base + j for j in range(20)]
    out = bounded_reference(x, n, offsets)
    y = np.full(24, -1, np.float32)
    for k, v in zip(offsets, out):
        if 0 <= k < n:
            y[k] = v
    return out, y


def bounded_scalars_reference(x):
    """bounded_scalars' out and y for 16 threads, n = 10, shift = -3."""
    out = bounded_reference(x, 10, np.arange(16) - 3)
    y = np.full(24, -1, np.float32)
    y[:10] = -(np.arange(10) + 3)  # y[t - 3] = -t for 0 <= t - 3 < 10
    y[16:22] = 7  # the broadcast quads: 16..19, and 20, 21 of 20..23 (bound 22)
    return out, y
