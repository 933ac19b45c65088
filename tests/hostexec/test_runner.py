"""The host runner itself: whole grids with real per-thread semantics (indices in x/y/z,
barriers that order shared-memory round trips across threads, static and dynamic shared
memory), argument packing, and the clear failures (out-of-bounds writes, divergence at a
barrier, constructs without a shim). Every expectation is computed with numpy from the
launch geometry, never from the generated code."""
import numpy as np
import pytest

import opus
from opus import f32, i32
from hostexec import HostExecError, HostProgram, Launch, NotHostExecutable, run_kernel
from hostexec.runner import prepare_source

TARGETS = ["sm_80", "sm_90a", "gfx942", "gfx950"]


def _program(target, tmp_path_factory):
    """One host program per target holding every kernel of this file (one compile)."""
    prog = HostProgram(target)
    ks = [reverse_through_smem, indices, dyn_rotate, writes_past_the_end]
    if target.startswith("sm"):
        ks.append(printer)  # device printf: CUDA only
    handles = {k.name: prog.add(k.specialize(target=target)) for k in ks}
    prog.build(tmp_path_factory.mktemp(target))
    return prog, handles


@pytest.fixture(scope="module", params=TARGETS)
def built(request, tmp_path_factory):
    return request.param, *_program(request.param, tmp_path_factory)


def launch(built, name, grid, block, *args, smem=0):
    target, prog, handles = built
    return prog.run([Launch(handles[name], grid, block, list(args), smem)])


@opus.kernel
def reverse_through_smem(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    base = opus.block_id_x() * 64
    s = opus.alloc_smem(f32, 64)
    s.store(opus.make_gmem(x, n).load(base + t) * 2.0, t)
    opus.sync_threads()  # thread t reads what thread 63 - t wrote
    opus.make_gmem(y, n).store(s.load(63 - t), base + t)


def reversed_in_blocks(x, n, y):
    """What reverse_through_smem stores: element t is 2 * x[its block's mirror of t], 0 where
    that lies at or past n; y kept at and past n."""
    t = np.arange(len(y))
    src = t // 64 * 64 + 63 - t % 64
    got = np.where(src < n, 2 * x[np.minimum(src, len(x) - 1)], 0).astype(y.dtype)
    return np.where(t < n, got, y)


def test_smem_round_trip_across_threads(built):
    n = 200
    x = np.arange(n, dtype=np.float32) + 0.5
    y = np.full(n, -1, np.float32)
    launch(built, "reverse_through_smem", 4, 64, x, y, n)
    np.testing.assert_array_equal(y, reversed_in_blocks(x, n, np.full(n, -1, np.float32)))


@opus.kernel
def indices(out: opus.Ptr[i32]):
    lin = opus.thread_id_x() + opus.block_size_x() * (opus.thread_id_y() + opus.block_size_y() * opus.thread_id_z())
    blk = opus.block_id_x() + opus.num_blocks_x() * (opus.block_id_y() + opus.num_blocks_y() * opus.block_id_z())
    per = opus.block_size_x() * opus.block_size_y() * opus.block_size_z()
    at = (blk * per + lin) * 16
    vals = (opus.thread_id_x(), opus.thread_id_y(), opus.thread_id_z(), opus.block_id_x(),
            opus.block_id_y(), opus.block_id_z(), opus.block_size_x(), opus.block_size_y(),
            opus.block_size_z(), opus.num_blocks_x(), opus.num_blocks_y(), opus.num_blocks_z(),
            opus.grid_size_x(), opus.grid_size_z(), opus.lane_id(), opus.warp_id())
    for j, v in enumerate(vals):
        out[at + j] = v


def test_indices_in_three_dimensions(built):
    grid, block = (3, 2, 2), (5, 4, 7)  # 140 threads: warps cut across y and z
    per, nblk = 5 * 4 * 7, 3 * 2 * 2
    out = np.zeros(nblk * per * 16, np.int32)
    launch(built, "indices", grid, block, out)
    ws = 32 if built[0].startswith("sm") else 64
    rows = []
    for bz, by, bx in np.ndindex(2, 2, 3):
        for tz, ty, tx in np.ndindex(7, 4, 5):
            lin = tx + 5 * (ty + 4 * tz)
            rows.append([tx, ty, tz, bx, by, bz, 5, 4, 7, 3, 2, 2, 15, 14, lin % ws, lin // ws])
    np.testing.assert_array_equal(out.reshape(-1, 16), np.array(rows, np.int32))


@opus.kernel
def dyn_rotate(x: opus.Ptr[i32], y: opus.Ptr[i32]):
    t = opus.thread_id_x()
    d = opus.dynamic_smem(i32, 16)
    d.store(x[t], t)
    opus.sync_threads()
    y[t] = d.load((t + 1) % opus.block_size_x())


def test_dynamic_smem(built):
    x = np.arange(96, dtype=np.int32) * 7 - 100
    y = np.zeros(96, np.int32)
    launch(built, "dyn_rotate", 1, 96, x, y, smem=16 + 96 * 4)
    np.testing.assert_array_equal(y, np.roll(x, -1))


@opus.kernel
def scale(x: opus.Ptr[f32], a: f32, k: opus.i64):
    t = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    x[t] = x[t] * a + opus.f32(k)


def test_launches_in_one_program(tmp_path):
    prog = HostProgram("gfx942")
    ka = prog.add(scale.specialize(target="gfx942"))
    kb = prog.add(reverse_through_smem.specialize(target="gfx942"))
    prog.build(tmp_path)
    x = np.arange(128, dtype=np.float32)
    y, z = np.zeros(128, np.float32), np.zeros(128, np.float32)
    prog.run([Launch(ka, 2, 64, [x, np.float32(0.5), 3])])
    with pytest.raises(ValueError, match="launches 0 and 1 share an array"):
        prog.run([Launch(kb, 2, 64, [x, y, 128]), Launch(kb, 2, 64, [y, z, 100])])
    prog.run([Launch(kb, 2, 64, [x, y, 128])])
    prog.run([Launch(kb, 2, 64, [y, z, 100])])
    want_x = np.arange(128, dtype=np.float32) * 0.5 + 3
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, reversed_in_blocks(want_x, 128, np.zeros(128, np.float32)))
    np.testing.assert_array_equal(z, reversed_in_blocks(y, 100, np.zeros(128, np.float32)))


@opus.kernel
def printer(x: opus.Ptr[i32]):
    opus.printf("t%d=%d\n", opus.thread_id_x(), x[opus.thread_id_x()])


def test_cuda_printf_reaches_the_output(tmp_path):
    out = run_kernel(printer, 1, 3, np.int32([5, -6, 7]), target="sm_90a", workdir=tmp_path)
    assert out == "t0=5\nt1=-6\nt2=7\n"


@opus.kernel
def writes_past_the_end(x: opus.Ptr[i32], n: i32):
    x[n] = 1  # unbounded: one element past the array


def test_an_out_of_bounds_write_is_an_error_naming_the_argument(built):
    with pytest.raises(HostExecError, match="argument x was written out of bounds, at byte 32 "
                                            "of a 32-byte array"):
        launch(built, "writes_past_the_end", 1, 1, np.zeros(8, np.int32), 8)


def test_unknown_inline_ptx_is_not_host_executable():
    src = 'float f(float x) { float r; asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }'
    with pytest.raises(NotHostExecutable, match="inline PTX 'ex2.approx.f32' has no host shim"):
        prepare_source(src, "nvidia")


def test_unknown_amdgcn_builtin_is_not_host_executable():
    src = "void f(int* x) { x[0] = __builtin_amdgcn_ds_swizzle(x[1], 0x1f); }"
    with pytest.raises(NotHostExecutable, match="__builtin_amdgcn_ds_swizzle has no host shim"):
        prepare_source(src, "amd")


def test_mma_sync_is_not_host_executable():
    """mma.sync is inline PTX the shim does not model (README.md, exclusions)."""
    from opus.examples import mma_gemm_16x8
    with pytest.raises(NotHostExecutable, match="inline PTX 'mma.sync.aligned.m16n8k16"):
        HostProgram("sm_80").add(mma_gemm_16x8.specialize(target="sm_80"))


def test_bad_arguments_are_named():
    prog = HostProgram("sm_80")
    k = prog.add(scale.specialize(target="sm_80"))
    with pytest.raises(ValueError, match=r"takes 3 run-time arguments \(x, a, k\), got 1"):
        prog.run([Launch(k, 1, 1, [np.zeros(1, np.float32)])])
    with pytest.raises(ValueError, match=r"argument x: int16 elements for a Ptr\[f32\]"):
        prog.run([Launch(k, 1, 1, [np.zeros(1, np.int16), 1.0, 1])])
    fixed = prog.add(fixed_block.specialize(target="sm_80"))
    with pytest.raises(ValueError, match=r"fixed to block 64, launched with \(32, 1, 1\)"):
        prog.run([Launch(fixed, 1, 32, [np.zeros(64, np.int32)])])


@opus.kernel(block=64)
def fixed_block(x: opus.Ptr[i32]):
    x[opus.thread_id_x()] = 1
