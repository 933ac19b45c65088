"""Atomics and synchronization (issue 13.3/13.4) in the interpreter against numpy references
written from the semantics (CUDA atomicAdd/CAS/Inc, PTX atom, bar.sync/bar.arrive,
bar.warp.sync), on 32-lane (sm_90a) and 64-lane (gfx942, gfx950) warps; the interpreter's
order of conflicting lanes (ascending block, then thread) makes the returned old values
checkable; spin loops, cross-block waits and misordered named barriers are errors, never hangs."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32, u32, u64
import opus.interp as interp
from opus.interp import InterpError

TARGETS = ["sm_90a", "gfx942", "gfx950"]
RNG = np.random.default_rng(1313)


def run(kernel, arch, grid, block, *args, **cx):
    with opus.set_target(arch, interpret=True):
        kernel[grid, block](*args, **cx)


# -- counters, histograms, returned old values -----------------------------------------------------
@opus.kernel
def histogram(x: opus.Ptr[i32], h: opus.Ptr[u32], n: i32, SHARED: opus.constexpr = False):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if SHARED:
        s = opus.alloc_smem(u32, 16)
        if opus.thread_id_x() < 16:
            s[opus.thread_id_x()] = 0
        opus.sync_threads()
        if i < n:
            opus.atomic_add(s, 1, x[i], scope="block")
        opus.sync_threads()
        if opus.thread_id_x() < 16:
            opus.atomic_add(h, s[opus.thread_id_x()], opus.thread_id_x())
    elif i < n:
        opus.atomic_add(h, 1, x[i])


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("shared", [False, True])
def test_histogram(arch, shared):
    x = RNG.integers(0, 16, 1000).astype(np.int32)
    h = np.zeros(16, np.uint32)
    run(histogram, arch, (4,), (256,), x, h, 1000, SHARED=shared)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))


@opus.kernel
def tickets(c: opus.Ptr[u32], t: opus.Ptr[u32]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    t[i] = opus.atomic_add(c, 1, 0)


@pytest.mark.parametrize("arch", TARGETS)
def test_counter_old_values_follow_lane_order(arch):
    """Every lane gets a distinct ticket; in the interpreter's order they count up by lane."""
    c, t = np.zeros(1, np.uint32), np.zeros(512, np.uint32)
    run(tickets, arch, (4,), (128,), c, t)
    assert c[0] == 512
    np.testing.assert_array_equal(t, np.arange(512))


@opus.kernel
def float_sum(x: opus.Ptr[f32], acc: opus.Ptr[f32], old: opus.Ptr[f32], SHARED: opus.constexpr):
    i = opus.thread_id_x()
    if SHARED:
        s = opus.alloc_smem(f32, 1)
        if i == 0:
            s[0] = acc[0]
        opus.sync_threads()
        old[i] = opus.atomic_add(s, x[i], 0, scope="block")
        opus.sync_threads()
        if i == 0:
            acc[0] = s[0]
    else:
        old[i] = opus.atomic_add(acc, x[i], 0)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("shared", [False, True])
def test_float_add_rounds_each_step_in_lane_order(arch, shared):
    x = (RNG.standard_normal(256) * 10.0 ** RNG.integers(-3, 4, 256)).astype(np.float32)
    acc, old = np.full(1, 0.1, np.float32), np.zeros(256, np.float32)
    run(float_sum, arch, (1,), (256,), x, acc, old, SHARED=shared)
    s, want = np.float32(0.1), []
    for v in x:  # one f32 rounding per add, lanes in ascending order
        want.append(s)
        s = np.float32(s + v)
    np.testing.assert_array_equal(old, np.array(want, np.float32))
    assert acc[0] == s
    assert abs(float(acc[0]) - (0.1 + float(x.astype(np.float64).sum()))) < 1e-3 * np.abs(x).sum()


@pytest.mark.parametrize("arch,space,flushed", [("sm_90a", False, True), ("sm_90a", True, False),
                                                ("gfx942", False, False)])
def test_f32_add_subnormals(arch, space, flushed):
    """NVIDIA's global f32 atom/red.add flush subnormals (PTX atom; SASS .FTZ), shared memory and
    AMD keep them."""
    tiny = np.float32(1e-40)
    x, acc, old = np.full(1, tiny, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    run(float_sum, arch, (1,), (1,), x, acc, old, SHARED=space)
    assert acc[0] == (0.0 if flushed else tiny)


@opus.kernel
def int_ops(x: opus.Ptr[i32], r: opus.Ptr[i32], u: opus.Ptr[u64]):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    v = x[i]
    opus.atomic_min(r, v, 0)
    opus.atomic_max(r, v, 1)
    opus.atomic_and(r, v, 2)
    opus.atomic_or(r, v, 3)
    opus.atomic_xor(r, v, 4)
    opus.atomic_add(r, v, 5)
    opus.atomic_max(u, opus.u64(opus.cast(v, u32)) << 20, 0)
    opus.atomic_add(u, opus.u64(0xFFFFFFFF), 1)


@pytest.mark.parametrize("arch", TARGETS)
def test_integer_reductions(arch):
    x = RNG.integers(-2 ** 31, 2 ** 31, 384, dtype=np.int64).astype(np.int32)
    r = np.array([2 ** 31 - 1, -2 ** 31, -1, 0, 0, 0], np.int32)
    u = np.zeros(2, np.uint64)
    run(int_ops, arch, (3,), (128,), x, r, u)
    assert r[0] == x.min() and r[1] == x.max()
    assert r[2] == np.bitwise_and.reduce(x) and r[3] == np.bitwise_or.reduce(x)
    assert r[4] == np.bitwise_xor.reduce(x)
    assert r[5] == np.int32(x.astype(np.int64).sum() % 2 ** 32 - (2 ** 32 if x.astype(np.int64).sum() % 2 ** 32 >= 2 ** 31 else 0))
    assert u[0] == (x.view(np.uint32).astype(np.uint64) << np.uint64(20)).max()
    assert u[1] == 384 * 0xFFFFFFFF


@opus.kernel
def cas_once(a: opus.Ptr[u32], old: opus.Ptr[u32]):
    i = opus.thread_id_x()
    old[i] = opus.atomic_cas(a, 0, opus.cast(i + 1, u32), i % 4)


@pytest.mark.parametrize("arch", TARGETS)
def test_cas_first_lane_wins(arch):
    a, old = np.zeros(4, np.uint32), np.zeros(64, np.uint32)
    run(cas_once, arch, (1,), (64,), a, old)
    np.testing.assert_array_equal(a, [1, 2, 3, 4])  # the lowest lane of each address
    want = np.where(np.arange(64) < 4, 0, np.arange(64) % 4 + 1)
    np.testing.assert_array_equal(old, want)


@opus.kernel
def inc_dec(a: opus.Ptr[u32], o: opus.Ptr[u32]):
    i = opus.thread_id_x()
    o[i] = opus.atomic_inc(a, 5, 0)
    o[i + 32] = opus.atomic_dec(a, 3, 1)


@pytest.mark.parametrize("arch", TARGETS)
def test_inc_dec_wrap(arch):
    a, o = np.array([0, 1], np.uint32), np.zeros(64, np.uint32)
    run(inc_dec, arch, (1,), (32,), a, o)
    inc, dec, want_i, want_d = 0, 1, [], []
    for _ in range(32):  # CUDA atomicInc/atomicDec, one lane after another
        want_i.append(inc)
        inc = 0 if inc >= 5 else inc + 1
        want_d.append(dec)
        dec = 3 if dec == 0 or dec > 3 else dec - 1
    np.testing.assert_array_equal(o, want_i + want_d)
    assert a.tolist() == [inc, dec]


@opus.kernel
def packed_add(h: opus.Ptr[f16], x: opus.Ptr[f16]):
    i = opus.thread_id_x()
    opus.atomic_add(h, opus.make_vector(x[2 * i], x[2 * i + 1]), 2 * (i % 2))


@pytest.mark.parametrize("arch", TARGETS)
def test_packed_f16x2_add(arch):
    x = (RNG.standard_normal(128) * 4).astype(np.float16)
    h = np.zeros(4, np.float16)
    run(packed_add, arch, (1,), (64,), h, x)
    want = np.zeros(4, np.float16)
    for i in range(64):  # each half rounded to f16 after every add, lanes in order
        for j in range(2):
            k = 2 * (i % 2) + j
            want[k] = np.float16(np.float32(want[k]) + np.float32(x[2 * i + j]))
    np.testing.assert_array_equal(h, want)


@opus.kernel
def bounded(h: opus.Ptr[u32], o: opus.Ptr[u32], n: i32):
    i = opus.thread_id_x()
    g = opus.make_gmem(h, n)
    o[i] = g.atomic_add(1, i - 4)


@pytest.mark.parametrize("arch", TARGETS)
def test_bounded_view_drops_out_of_range_lanes(arch):
    h, o = np.full(40, 7, np.uint32), np.full(64, 99, np.uint32)
    run(bounded, arch, (1,), (64,), h, o, 10)
    want_h = np.full(40, 7, np.uint32)
    want_h[:10] = 8  # lanes 4 .. 13 hit elements 0 .. 9; the others are out of [0, 10)
    np.testing.assert_array_equal(h, want_h)
    np.testing.assert_array_equal(o, np.where((np.arange(64) >= 4) & (np.arange(64) < 14), 7, 0))


@opus.kernel
def exch_load_store(a: opus.Ptr[f32], o: opus.Ptr[f32]):
    i = opus.thread_id_x()
    o[i] = opus.atomic_exch(a, opus.f32(i), 0)
    opus.atomic_store(a, 2.5, 1, order="release")
    o[i + 32] = opus.atomic_load(a, 1, order="acquire")


@pytest.mark.parametrize("arch", TARGETS)
def test_exchange_load_store(arch):
    a, o = np.array([-1, 0], np.float32), np.zeros(64, np.float32)
    run(exch_load_store, arch, (1,), (32,), a, o)
    np.testing.assert_array_equal(o[:32], np.r_[-1, np.arange(31)])
    assert a[0] == 31 and (o[32:] == 2.5).all()


# -- spin locks: one lane per warp works, all lanes of a warp is reported ------------------------------
@opus.kernel
def locked_count(lock: opus.Ptr[u32], c: opus.Ptr[u32], PER_BLOCK: opus.constexpr):
    if not PER_BLOCK or opus.thread_id_x() == 0:
        while opus.atomic_cas(lock, 0, 1, 0, order="acquire") != 0:
            pass
        c[0] = c[0] + 1
        opus.atomic_exch(lock, 0, 0, order="release")


@pytest.mark.parametrize("arch", TARGETS)
def test_spin_lock_one_thread_per_block(arch):
    lock, c = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    run(locked_count, arch, (5,), (128,), lock, c, PER_BLOCK=True)
    assert c[0] == 5 and lock[0] == 0


@pytest.mark.parametrize("arch", TARGETS)
def test_spin_lock_contended_inside_a_block_is_reported(arch):
    """Every lane of a warp spinning on a lock one of them holds: a deadlock in lockstep."""
    lock, c = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    with pytest.raises(InterpError, match="no progress"):
        run(locked_count, arch, (1,), (64,), lock, c, PER_BLOCK=False)


# -- the cross-block barrier ---------------------------------------------------------------------------
@opus.kernel
def chain(sem: opus.Ptr[u32], o: opus.Ptr[i32], GRID_WIDE: opus.constexpr):
    b = opus.block_id_x()
    bar = opus.workgroup_barrier(sem)
    if GRID_WIDE:
        bar.inc()
        bar.wait_lt(opus.num_blocks_x())
    else:
        bar.wait_eq(b)
    if opus.thread_id_x() == 0:
        o[b + 1] = opus.i32(bar.ld()) * 100 + o[b]
    if not GRID_WIDE:
        bar.inc()


@pytest.mark.parametrize("arch", TARGETS)
def test_workgroup_barrier_chain(arch):
    sem, o = np.zeros(1, np.uint32), np.zeros(6, np.int32)
    run(chain, arch, (5,), (64,), sem, o, GRID_WIDE=False)
    assert sem[0] == 5
    np.testing.assert_array_equal(o[1:], np.cumsum(np.arange(5) * 100))


@pytest.mark.parametrize("arch", TARGETS)
def test_grid_wide_barrier_is_refused_not_hung(arch):
    sem, o = np.zeros(1, np.uint32), np.zeros(6, np.int32)
    with pytest.raises(InterpError, match="one after another"):
        run(chain, arch, (5,), (64,), sem, o, GRID_WIDE=True)


# -- named barriers (NVIDIA) and sync_warp ----------------------------------------------------------------
@opus.kernel
def producer_consumer(o: opus.Ptr[f32], CONSUMER_FIRST: opus.constexpr):
    t = opus.thread_id_x()
    s = opus.alloc_smem(f32, 64)
    producer = t < 64
    if producer if not CONSUMER_FIRST else not producer:
        if CONSUMER_FIRST:
            opus.barrier_sync(1, 128)
            o[t - 64] = s[t - 64] * 2.0
        else:
            s[t] = opus.f32(t)
            opus.barrier_arrive(1, 128)
    else:
        if CONSUMER_FIRST:
            s[t] = opus.f32(t)
            opus.barrier_arrive(1, 128)
        else:
            opus.barrier_sync(1, 128)
            o[t - 64] = s[t - 64] * 2.0


def test_named_barrier_producer_consumer():
    o = np.zeros(64, np.float32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        producer_consumer[(1,), (128,)](o, CONSUMER_FIRST=False)
    np.testing.assert_array_equal(o, np.arange(64) * 2.0)


def test_named_barrier_waiting_for_later_arrivals_is_reported():
    o = np.zeros(64, np.float32)
    with pytest.raises(InterpError, match="would wait"):
        run(producer_consumer, "sm_90a", (1,), (128,), o, CONSUMER_FIRST=True)


@opus.kernel
def warp_exchange(o: opus.Ptr[i32], MASK: opus.constexpr):
    t = opus.thread_id_x()
    s = opus.alloc_smem(i32, 64)
    s[t] = t * 3
    opus.sync_warp(MASK)
    o[t] = s[t ^ 1]


@pytest.mark.parametrize("arch", TARGETS)
def test_sync_warp_orders_a_warps_shared_accesses(arch):
    o = np.zeros(64, np.int32)
    with opus.set_target(arch, interpret=True), interp.checking():
        warp_exchange[(1,), (64,)](o, MASK=None)
    np.testing.assert_array_equal(o, (np.arange(64) ^ 1) * 3)


@opus.kernel
def half_sync(o: opus.Ptr[i32], MASK: opus.constexpr):
    t = opus.thread_id_x()
    if opus.lane_id() < 16:
        opus.sync_warp(MASK)
    o[t] = t


@pytest.mark.parametrize("arch", TARGETS)
def test_sync_warp_mask_rules(arch):
    o = np.zeros(64, np.int32)
    run(half_sync, arch, (1,), (64,), o, MASK=0xFFFF)  # exactly the lanes that call it
    with pytest.raises(InterpError, match="another branch"):
        run(half_sync, arch, (1,), (64,), o, MASK=0xFFFFF)
    with pytest.raises(InterpError, match="does not name the calling lane"):
        run(half_sync, arch, (1,), (64,), o, MASK=0xFF)


@opus.kernel
def two_groups(o: opus.Ptr[i32]):
    t = opus.thread_id_x()
    s = opus.alloc_smem(i32, 32)
    s[t] = t + 100
    opus.sync_warp(opus.select(t < 16, opus.u32(0xFFFF), opus.u32(0xFFFF0000)))
    o[t] = s[t ^ 1]


def test_sync_warp_disjoint_groups_each_with_its_mask():
    """Two half-warps syncing on their own masks at once is legal (CUDA __syncwarp)."""
    o = np.zeros(32, np.int32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        two_groups[(1,), (32,)](o)
    np.testing.assert_array_equal(o, (np.arange(32) ^ 1) + 100)


@opus.kernel
def clocks(o: opus.Ptr[u64]):
    a = opus.clock64()
    b = opus.clock64()
    o[opus.thread_id_x()] = b - a


@pytest.mark.parametrize("arch", TARGETS)
def test_clock_reads_do_not_go_backwards(arch):
    o = np.zeros(64, np.uint64)
    run(clocks, arch, (1,), (64,), o)
    assert (o.astype(np.int64) > 0).all()


@opus.kernel
def hints_and_fences(o: opus.Ptr[f32]):
    opus.fence("block")
    opus.fence("device", order="seq_cst")
    opus.fence("system")
    opus.s_setprio(3)
    opus.sched_barrier(0)
    opus.sched_group_barrier(0x8, 1, 0)
    opus.s_nop(2)
    opus.s_sleep(1)
    opus.s_waitcnt_vmcnt(0)
    opus.s_waitcnt_lgkmcnt(0)
    opus.s_waitcnt(0, 0, 0)
    a = opus.s_memrealtime()
    o[opus.thread_id_x()] = opus.f32(opus.s_memrealtime() - a)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amd_hints_change_no_value(arch):
    o = np.zeros(64, np.float32)
    run(hints_and_fences, arch, (1,), (64,), o)
    assert (o > 0).all()
