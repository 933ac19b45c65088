"""Kernels for the shifted-view and grid-index tests (interpreter: test_views.py,
test_thread_indices.py; GPU: tests/test_gpu_views_threads.py)."""
import opus
from opus import f32, i32


@opus.kernel
def shifted_load(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, base: i32, d: i32):
    g = opus.make_gmem(x, n) + base
    i = opus.thread_id_x()
    out[i] = g[i + d]


@opus.kernel
def shifted_store(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32, base: i32):
    h = opus.make_gmem(y, n) + base
    i = opus.thread_id_x()
    h[i] = x[i]


@opus.kernel
def shifted_load_vec4(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, base: i32):
    g = opus.make_gmem(x, n) + base
    t = opus.thread_id_x() * 4
    opus.store(out, g.load(t, vec=4), t)


@opus.kernel
def shifted_store_vec4(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32, base: i32):
    h = opus.make_gmem(y, n) + base
    t = opus.thread_id_x() * 4
    h.store(opus.load(x, t, vec=4), t)


@opus.kernel
def shifted_twice(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, a: i32, b: i32):
    g = (opus.make_gmem(x, n) + a) + b
    i = opus.thread_id_x()
    out[i] = g[i]


@opus.kernel
def shifted_smem(x: opus.Ptr[f32], out: opus.Ptr[f32], base: i32):
    s = opus.alloc_smem(f32, 16)
    i = opus.thread_id_x()
    s[i] = x[i]
    opus.sync_threads()
    v = opus.make_smem(s, 16) + base
    out[i] = v[i]


@opus.kernel
def grid_indices(out: opus.Ptr[i32]):
    """Each thread writes 15 numbers at its own place (its linear index in the grid, x
    fastest): thread index, block index, block size, block count and grid size (threads), each
    in x, y, z."""
    vals = (opus.thread_id_x(), opus.thread_id_y(), opus.thread_id_z(),
            opus.block_id_x(), opus.block_id_y(), opus.block_id_z(),
            opus.block_size_x(), opus.block_size_y(), opus.block_size_z(),
            opus.num_blocks_x(), opus.num_blocks_y(), opus.num_blocks_z(),
            opus.grid_size_x(), opus.grid_size_y(), opus.grid_size_z())
    tx, ty, tz, bix, biy, biz, bx, by, bz, nx, ny, nz = vals[:12]
    t = tx + bx * (ty + by * tz)
    b = bix + nx * (biy + ny * biz)
    o = (b * (bx * by * bz) + t) * 15
    for k in range(15):
        out[o + k] = vals[k]


@opus.kernel
def grid_stride_fill(y: opus.Ptr[i32], n: i32):
    """A 2-D grid-stride loop over y[0..n): the thread whose first element is k0 writes k0
    into every element it visits, so each element says which thread wrote it."""
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    j = opus.block_id_y() * opus.block_size_y() + opus.thread_id_y()
    k0 = j * opus.grid_size_x() + i
    k = k0
    while k < n:
        y[k] = k0
        k = k + opus.grid_size_x() * opus.grid_size_y()
