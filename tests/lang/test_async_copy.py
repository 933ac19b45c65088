"""Asynchronous global -> shared copies in the interpreter, against numpy: NVIDIA cp.async
(tiles, zero-filled tails at every size, double buffering with wait_async(1)), AMD
buffer_load ... lds (one slot per lane from the wave's base, the buffer range check), and the
completion model: a destination is written at the wait covering its copy, not at a barrier, and
checking mode reports an access before that wait with the lines of the access and the copy."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32, u8
from opus.interp import AsyncCopyPendingError, InterpError

NV = ["sm_80", "sm_90a"]


def run(kernel, target, grid, block, *args, check=False):
    with opus.set_target(target, interpret=True), opus.interp.checking(check):
        kernel[grid, block](*args)


# -- NVIDIA: cp.async ----------------------------------------------------------------------------

def _tile_kernel(dtype, vec):
    @opus.kernel
    def tile_copy(x: opus.Ptr[dtype], out: opus.Ptr[dtype], n: i32):
        t = opus.thread_id_x()
        tile = opus.alloc_smem(dtype, 64 * vec)
        opus.copy_async(tile, vec * t, opus.make_gmem(x, n), vec * t, vec=vec)
        opus.commit_async()
        opus.wait_async(0)
        opus.sync_threads()
        o = opus.make_gmem(out)
        o.store(tile.load(vec * (63 - t), vec=vec), vec * t)   # another thread's copy
    return tile_copy


# every cp.async size: 4, 8 and 16 bytes of 1-, 2- and 4-byte elements
SIZES = [(f32, 1), (f32, 2), (f32, 4), (f16, 2), (f16, 4), (f16, 8), (u8, 4), (u8, 8), (u8, 16)]


@pytest.mark.parametrize("target", NV)
@pytest.mark.parametrize("dtype,vec", SIZES, ids=lambda v: getattr(v, "name", str(v)))
def test_tile_copy_and_zero_filled_tail(target, dtype, vec):
    total = 64 * vec
    x = (np.arange(total) % 120 + 1).astype(dtype.np_dtype)
    for n in (total, total - 1, total - vec // 2 - 1, 3):   # whole, and tails cut mid-copy
        out = np.full(total, 7, dtype.np_dtype)
        run(_tile_kernel(dtype, vec), target, 1, 64, x, out, n)
        src = np.where(np.arange(total) < n, x, 0).reshape(64, vec)
        np.testing.assert_array_equal(out.reshape(64, vec), src[::-1], err_msg=f"n={n}")


@opus.kernel
def before_the_view(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    # a view shifted by 2: copies at -4 start before it and copy nothing (all zeros); at -2
    # and 0 they start inside and copy their leading in-range elements
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 12)
    g = opus.make_gmem(x, 6) + 2                  # elements x[2..5], bound 4
    opus.copy_async(tile, 4 * t, g, 4 * t - 6, vec=4)  # -6, -2, 2: src addresses 16-aligned
    opus.commit_async()
    opus.wait_async(0)
    opus.sync_threads()
    out[t] = tile[t]
    out[t + 3] = tile[t + 3]
    out[t + 6] = tile[t + 6]
    out[t + 9] = tile[t + 9]


@pytest.mark.parametrize("target", NV)
def test_copy_starting_before_the_view_is_zeros_and_leading_elements_are_kept(target):
    x = np.arange(1, 17, dtype=np.float32)
    out = np.full(12, -1, np.float32)
    run(before_the_view, target, 1, 3, x, out)
    # copy 0: view offset -6 (before it): zeros; copy 1: -2: starts before it too: zeros;
    # copy 2: 2..5 of the view = x[4..7], bound 4 keeps view elements 2, 3 = x[4], x[5]
    want = np.zeros(12, np.float32)
    want[8:10] = x[4:6]
    np.testing.assert_array_equal(out, want)


@opus.kernel
def double_buffered_sum(x: opus.Ptr[f32], out: opus.Ptr[f32], tiles: i32):
    # out[t] = sum over tiles k of x[k * 128 + t] (block of 128 threads, 4 bytes each), the
    # next tile copied while the current one is summed
    t = opus.thread_id_x()
    buf = opus.alloc_smem(f32, 256)
    g = opus.make_gmem(x, tiles * 128)
    opus.copy_async(buf, t, g, t)
    opus.commit_async()
    acc = opus.f32(0)
    for k in opus.range(tiles):
        opus.copy_async(buf, ((k + 1) % 2) * 128 + t, g, (k + 1) * 128 + t)  # past the end: 0
        opus.commit_async()
        opus.wait_async(1)              # tile k has landed; tile k + 1 may be in flight
        opus.sync_threads()
        acc = acc + buf[(k % 2) * 128 + (127 - t)]
        opus.sync_threads()             # everyone read tile k before it is overwritten
    out[127 - t] = acc


@pytest.mark.parametrize("target", NV)
def test_double_buffered_loop_with_wait_async_1(target):
    x = np.random.default_rng(1).standard_normal(5 * 128).astype(np.float32)
    out = np.zeros(128, np.float32)
    run(double_buffered_sum, target, 1, 128, x, out, 5, check=True)
    want = np.zeros(128, np.float32)
    for k in range(5):
        want = want + x[k * 128: (k + 1) * 128]
    np.testing.assert_array_equal(out, want)


@opus.kernel(block=64)
def layout_copy(x: opus.Ptr[f16], out: opus.Ptr[f16]):
    # the guide's 48x32 tile, rows of 8 f16 per issue: 16-byte copies through two layouts (the
    # shared tile transposed by rows of 8: a different layout than the source's)
    lane = opus.thread_id_x()
    tile = opus.Tile((3, 16, 4, 8), ((opus.Y, opus.P), (opus.P, opus.Y)))
    src = opus.partition(tile, (32, 1), (lane // 4, lane % 4))
    dst = opus.partition(tile, (32, 1), (lane // 4, lane % 4)) + 0
    smem = opus.alloc_smem(f16, 48 * 32)
    opus.copy_async(smem, dst, opus.make_gmem(x), src, vec=8, cache="cg")
    opus.commit_async()
    opus.wait_async(0)
    opus.make_gmem(out).store(smem.load(src, vec=8), src, vec=8)


@pytest.mark.parametrize("target", NV)
def test_layout_driven_copy(target):
    x = np.arange(48 * 32).astype(np.float16)
    out = np.zeros(48 * 32, np.float16)
    run(layout_copy, target, 1, 64, x, out, check=True)
    np.testing.assert_array_equal(out, x)


@opus.kernel
def predicated(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 64)
    opus.copy_async(tile, 4 * t, x, 4 * t, vec=4, pred=t % 3 != 0)
    opus.commit_async()
    opus.wait_async(0)
    opus.make_gmem(out).store(tile.load(4 * t, vec=4), 4 * t)


@pytest.mark.parametrize("target", NV)
def test_false_predicate_fills_zeros(target):
    x = np.arange(1, 65, dtype=np.float32)
    out = np.full(64, -1, np.float32)
    run(predicated, target, 1, 16, x, out)
    keep = np.repeat(np.arange(16) % 3 != 0, 4)
    np.testing.assert_array_equal(out, np.where(keep, x, 0))


# -- the completion model -------------------------------------------------------------------------

@opus.kernel
def no_wait(x: opus.Ptr[f32], out: opus.Ptr[f32], WAIT: opus.constexpr = "none"):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 32)
    tile[t] = opus.f32(-5)
    opus.sync_threads()
    opus.copy_async(tile, t, x, t)                 # COPY
    opus.commit_async()
    if WAIT == "wait":
        opus.wait_async(0)
    opus.sync_threads()                            # a barrier completes no copy
    out[t] = tile[t]                               # READ


def _tagged_line(text):
    with open(__file__) as f:
        return next(i for i, l in enumerate(f, 1) if l.rstrip().endswith("# " + text))


@pytest.mark.parametrize("target", NV)
def test_read_before_the_wait_gives_the_old_bytes(target):
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    run(no_wait, target, 1, 32, x, out)
    np.testing.assert_array_equal(out, -5)        # the hardware may give these
    with opus.set_target(target, interpret=True):
        no_wait[1, 32](x, out, WAIT="wait")
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("target", NV)
def test_checking_mode_reports_the_read_and_the_copy(target):
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    with pytest.raises(AsyncCopyPendingError) as e:
        run(no_wait, target, 1, 32, x, out, check=True)
    msg = str(e.value)
    assert f"test_async_copy.py:{_tagged_line('READ')}" in msg
    assert f"test_async_copy.py:{_tagged_line('COPY')}" in msg
    assert "reads shared memory" in msg and "wait" in msg
    with opus.set_target(target, interpret=True), opus.interp.checking():
        no_wait[1, 32](x, out, WAIT="wait")   # with the wait: no report
    np.testing.assert_array_equal(out, x)


@opus.kernel
def waited_but_no_barrier(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 32)
    opus.copy_async(tile, t, x, t)
    opus.commit_async()
    opus.wait_async(0)
    out[t] = tile[31 - t]          # another thread's copy: it needs a barrier after the wait


@pytest.mark.parametrize("target", NV)
def test_other_threads_copy_needs_a_barrier_after_the_wait(target):
    x = np.arange(32, dtype=np.float32)
    with pytest.raises(opus.interp.SharedRaceError, match="no barrier"):
        run(waited_but_no_barrier, target, 1, 32, x, np.zeros(32, np.float32), check=True)


@opus.kernel
def store_into_pending(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 32)
    opus.copy_async(tile, t, x, t)
    opus.commit_async()
    tile[t] = opus.f32(1)          # the copy may land after this store
    opus.wait_async(0)
    out[t] = tile[t]


@pytest.mark.parametrize("target", NV)
def test_store_into_a_pending_destination_is_reported(target):
    with pytest.raises(AsyncCopyPendingError, match="writes shared memory"):
        run(store_into_pending, target, 1, 32, np.arange(32, dtype=np.float32),
            np.zeros(32, np.float32), check=True)


@opus.kernel
def groups_in_order(x: opus.Ptr[f32], out: opus.Ptr[f32], READ: opus.constexpr = 0):
    # three groups; wait_async(1) completes the first two only
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 96)
    for g in range(3):
        opus.copy_async(tile, 32 * g + t, x, 32 * g + t)
        opus.commit_async()
    opus.wait_async(1)
    out[t] = tile[32 * READ + t]


@pytest.mark.parametrize("target", NV)
def test_wait_completes_all_but_the_newest_groups(target):
    x = np.arange(96, dtype=np.float32)
    for g in (0, 1):
        out = np.zeros(32, np.float32)
        with opus.set_target(target, interpret=True), opus.interp.checking():
            groups_in_order[1, 32](x, out, READ=g)
        np.testing.assert_array_equal(out, x[32 * g: 32 * g + 32])
    with pytest.raises(AsyncCopyPendingError):
        with opus.set_target(target, interpret=True), opus.interp.checking():
            groups_in_order[1, 32](x, np.zeros(32, np.float32), READ=2)


# -- AMD: buffer_load ... lds ---------------------------------------------------------------------

@opus.kernel
def lds_tile(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, VEC: opus.constexpr = 1):
    # each wave fills 64 slots of VEC f32 (VEC 3 uses 16-byte slots) from its own base
    t = opus.thread_id_x()
    slot = 4 if VEC == 3 else VEC
    tile = opus.alloc_smem(f32, 128 * slot)
    opus.copy_async_lds(tile, opus.warp_id() * 64 * slot, opus.make_gmem(x, n), VEC * t, vec=VEC)
    opus.commit_async()
    opus.wait_async(0)
    opus.sync_threads()
    for i in range(VEC):
        out[VEC * t + i] = tile[slot * (127 - t) + i]


@pytest.mark.parametrize("target,vec", [("gfx942", 1), ("gfx950", 1), ("gfx950", 3),
                                        ("gfx950", 4)])
def test_lds_copy_places_lane_l_in_slot_l(target, vec):
    total = 128 * vec
    x = np.arange(1, total + 1, dtype=np.float32)
    for n in (total, total - 5):
        out = np.full(total, -1, np.float32)
        with opus.set_target(target, interpret=True), opus.interp.checking():
            lds_tile[1, 128](x, out, n, VEC=vec)
        src = np.where(np.arange(total) < n, x, 0).reshape(128, vec)
        np.testing.assert_array_equal(out.reshape(128, vec), src[::-1], err_msg=f"n={n}")


@opus.kernel
def lds_bytes(x: opus.Ptr[u8], out: opus.Ptr[u8], PAD: opus.constexpr = False):
    # one byte per lane: each lane's byte heads a 4-byte slot; the other 3 are unspecified
    t = opus.thread_id_x()
    tile = opus.alloc_smem(u8, 256)
    opus.copy_async_lds(tile, 0, x, t)
    opus.s_waitcnt(vmcnt=0)
    opus.sync_threads()
    out[t] = tile[4 * t + (1 if PAD else 0)]


def test_lds_sub_dword_copies_fill_4_byte_slots():
    x = np.arange(1, 65, dtype=np.uint8)
    out = np.zeros(64, np.uint8)
    with opus.set_target("gfx942", interpret=True), opus.interp.checking():
        lds_bytes[1, 64](x, out)
    np.testing.assert_array_equal(out, x)
    with pytest.raises(opus.interp.UninitializedReadError):  # a slot's padding is no data
        with opus.set_target("gfx942", interpret=True), opus.interp.checking():
            lds_bytes[1, 64](x, out, PAD=True)


@opus.kernel
def lds_f16_pairs(x: opus.Ptr[f16], out: opus.Ptr[f16], n: i32):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f16, 128)
    opus.copy_async_lds(tile, 0, opus.make_gmem(x, n), 2 * t - 2, vec=2)  # lane 0: negative
    opus.s_waitcnt(vmcnt=0)
    opus.sync_threads()
    opus.make_gmem(out).store(tile.load(2 * t, vec=2), 2 * t)


def test_lds_range_check_is_per_dword():
    x = np.arange(1, 129, dtype=np.float16)
    out = np.full(128, -1, np.float16)
    run(lds_f16_pairs, "gfx942", 1, 64, x, out, 100)   # a bound of whole dwords
    want = np.zeros(128, np.float16)
    want[2:102] = x[:100]                               # lane l holds x[2l-2 .. 2l-1]
    np.testing.assert_array_equal(out, want)
    run(lds_f16_pairs, "gfx942", 1, 64, x, out, 101)   # a dword across the bound reads 0
    np.testing.assert_array_equal(out, want)           # x[100] (in range) included


@opus.kernel
def lds_divergent_base(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 128)
    opus.copy_async_lds(tile, t // 32 * 64, x, t)      # BASE: differs inside a wave of 64
    opus.s_waitcnt(vmcnt=0)
    out[t] = tile[t]


def test_lds_base_must_be_wave_uniform():
    with pytest.raises(InterpError, match="wave_off must be the same in every lane") as e:
        run(lds_divergent_base, "gfx942", 1, 64, np.zeros(64, np.float32),
            np.zeros(64, np.float32))
    assert f"test_async_copy.py:{_tagged_line('BASE: differs inside a wave of 64')}" in str(e.value)


@opus.kernel
def lds_double_buffered(x: opus.Ptr[f32], out: opus.Ptr[f32], tiles: i32):
    # two copies per group (two halves of a 128-float tile per wave of 64): wait_async(1) is
    # s_waitcnt vmcnt(2) on AMD
    t = opus.thread_id_x()
    buf = opus.alloc_smem(f32, 256)
    g = opus.make_gmem(x, tiles * 128)
    opus.copy_async_lds(buf, 0, g, t)
    opus.copy_async_lds(buf, 64, g, 64 + t)
    opus.commit_async()
    acc = opus.f32(0)
    for k in opus.range(tiles):
        nxt = ((k + 1) % 2) * 128
        opus.copy_async_lds(buf, nxt, g, (k + 1) * 128 + t)
        opus.copy_async_lds(buf, nxt + 64, g, (k + 1) * 128 + 64 + t)
        opus.commit_async()
        opus.wait_async(1)
        opus.sync_threads()
        acc = acc + buf[(k % 2) * 128 + t] + buf[(k % 2) * 128 + 64 + t]
        opus.sync_threads()
    out[t] = acc


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_lds_double_buffered_loop(target):
    x = np.random.default_rng(2).standard_normal(4 * 128).astype(np.float32)
    out = np.zeros(64, np.float32)
    with opus.set_target(target, interpret=True), opus.interp.checking():
        lds_double_buffered[1, 64](x, out, 4)
    tiles = x.reshape(4, 2, 64)
    want = np.zeros(64, np.float32)
    for k in range(4):
        want = want + tiles[k, 0] + tiles[k, 1]
    np.testing.assert_array_equal(out, want)
    assert "__builtin_amdgcn_s_waitcnt(0xf72)" in lds_double_buffered.source(target=target)


@opus.kernel
def vmcnt_counts_copies(x: opus.Ptr[f32], out: opus.Ptr[f32], READ: opus.constexpr = 0):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(f32, 128)
    opus.copy_async_lds(tile, 0, x, t)
    opus.copy_async_lds(tile, 64, x, 64 + t)
    opus.s_waitcnt(vmcnt=1, lgkmcnt=0)     # the first copy is complete, the second may not be
    out[t] = tile[64 * READ + t]


def test_s_waitcnt_vmcnt_completes_all_but_the_newest_copies():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with opus.set_target("gfx942", interpret=True), opus.interp.checking():
        vmcnt_counts_copies[1, 64](x, out)
    np.testing.assert_array_equal(out, x[:64])
    with pytest.raises(AsyncCopyPendingError):
        with opus.set_target("gfx942", interpret=True), opus.interp.checking():
            vmcnt_counts_copies[1, 64](x, out, READ=1)
    assert "__builtin_amdgcn_s_waitcnt(0x71)" in vmcnt_counts_copies.source(target="gfx942")
