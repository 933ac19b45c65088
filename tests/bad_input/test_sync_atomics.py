"""Bad input to atomics and synchronization: types and operations a chip lacks (naming the chip
and what it has), bad orders and scopes, values that do not convert, named barriers and AMD
hints on the wrong vendor, out-of-range immediates and counts, and at run time the interpreter's
reports instead of hangs or silent results: out-of-bounds and misaligned atomics, sync_warp
masks, named barriers that would wait, spin loops without progress, cross-block waits that
cannot be satisfied. Each case checks the error type, the message and the kernel line."""
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, i32, u32, u64
from opus.interp import InterpError, MemoryFault
from expect import raises, unchanged


def trace(k, target="sm_90a", **cx):
    return k.source(target=target, **cx)


def run(k, arch, grid, block, *args, **cx):
    with opus.set_target(arch, interpret=True):
        k[grid, block](*args, **cx)


# -- types and operations a chip lacks -------------------------------------------------------------
@opus.kernel
def _op_on(p: opus.Ptr[f32], OP: opus.constexpr):
    getattr(opus, OP)(p, 1.0, opus.thread_id_x())  # ERR: float-op


@pytest.mark.parametrize("arch,op", [("sm_90a", "atomic_min"), ("sm_80", "atomic_max"),
                                     ("gfx942", "atomic_min"), ("gfx950", "atomic_max"),
                                     ("sm_90a", "atomic_and"), ("gfx942", "atomic_xor"),
                                     ("sm_90a", "atomic_inc"), ("gfx950", "atomic_dec")])
def test_float_op_the_chip_lacks(arch, op):
    with raises(opus.TraceError, f"not available on {arch}", "f32", "it has", at="float-op"):
        trace(_op_on, arch, OP=op)


@opus.kernel
def _packed(h: opus.Ptr[bf16]):
    opus.atomic_add(h, opus.make_vector(bf16(1.0), bf16(1.0)), 2 * opus.thread_id_x())  # ERR: bf16x2


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
def test_bf16x2_add_needs_sm_90(arch):
    with raises(opus.TraceError, "bf16x2", f"not available on {arch}", "f16x2", at="bf16x2"):
        trace(_packed, arch)


@opus.kernel
def _scalar_half(h: opus.Ptr[f16]):
    opus.atomic_add(h, f16(1.0), opus.thread_id_x())  # ERR: f16


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942"])
def test_scalar_f16_add_is_refused_naming_the_packed_form(arch):
    with raises(opus.TraceError, "f16 in global memory", "f16x2", at="f16"):
        trace(_scalar_half, arch)


@opus.kernel
def _inc64(q: opus.Ptr[u64]):
    opus.atomic_inc(q, opus.u64(3), 0)  # ERR: inc64


def test_inc_is_u32_only():
    with raises(opus.TraceError, "atomic_inc on u64", "u32", at="inc64"):
        trace(_inc64)


# -- arguments ---------------------------------------------------------------------------------------
@opus.kernel
def _args(p: opus.Ptr[u32], CASE: opus.constexpr):
    i = opus.thread_id_x()
    if CASE == "order":
        opus.atomic_add(p, 1, i, order="seq_cst")  # ERR: order
    elif CASE == "load-release":
        opus.atomic_load(p, i, order="release")  # ERR: load-release
    elif CASE == "store-acquire":
        opus.atomic_store(p, 1, i, order="acquire")  # ERR: store-acquire
    elif CASE == "scope":
        opus.atomic_add(p, 1, i, scope="gpu")  # ERR: scope
    elif CASE == "narrow":
        opus.atomic_add(p, i, i)  # ERR: narrow
    elif CASE == "float-into-int":
        opus.atomic_max(p, 1.5, i)  # ERR: float-into-int
    elif CASE == "vector":
        opus.atomic_add(p, opus.make_vector(opus.u32(1), opus.u32(2)), i)  # ERR: vector
    elif CASE == "not-pointer":
        opus.atomic_add(i, 1, 0)  # ERR: not-pointer
    elif CASE == "tuple-offset":
        opus.atomic_add(p, 1, (i, 0))  # ERR: tuple-offset


@pytest.mark.parametrize("case,needles", [
    ("order", ["order must be one of", "seq_cst"]),
    ("load-release", ["atomic_load", "'relaxed', 'acquire'"]),
    ("store-acquire", ["atomic_store", "'relaxed', 'release'"]),
    ("scope", ["scope must be one of", "'block', 'device', 'system'"]),
    ("narrow", ["i32 does not convert implicitly to u32", "opus.cast"]),
    ("float-into-int", ["atomic_max", "1.5"]),
    ("vector", ["2 lanes", "packed f16x2/bf16x2"]),
    ("not-pointer", ["needs a pointer", "run-time i32"]),
    ("tuple-offset", ["offset must be a scalar integer"]),
])
def test_bad_arguments(case, needles):
    with raises(opus.TraceError, *needles, at=case):
        trace(_args, CASE=case)


# -- synchronization: vendor and immediates -----------------------------------------------------------
@opus.kernel
def _sync(p: opus.Ptr[u32], CASE: opus.constexpr):
    if CASE == "bar-amd":
        opus.barrier_sync(1, 128)  # ERR: bar-amd
    elif CASE == "bar-id":
        opus.barrier_sync(16, 64)  # ERR: bar-id
    elif CASE == "bar-count":
        opus.barrier_sync(1, 48)  # ERR: bar-count
    elif CASE == "arrive-no-count":
        opus.barrier_arrive(1, None)  # ERR: arrive-no-count
    elif CASE == "setprio-nv":
        opus.s_setprio(1)  # ERR: setprio-nv
    elif CASE == "setprio-range":
        opus.s_setprio(4)  # ERR: setprio-range
    elif CASE == "nop-range":
        opus.s_nop(16)  # ERR: nop-range
    elif CASE == "sched-nv":
        opus.sched_barrier(0)  # ERR: sched-nv
    elif CASE == "group-size":
        opus.sched_group_barrier(8, 0, 0)  # ERR: group-size
    elif CASE == "vmcnt-range":
        opus.s_waitcnt_vmcnt(64)  # ERR: vmcnt-range
    elif CASE == "waitcnt-nv":
        opus.s_waitcnt_lgkmcnt(0)  # ERR: waitcnt-nv
    elif CASE == "expcnt-range":
        opus.s_waitcnt(expcnt=8)  # ERR: expcnt-range
    elif CASE == "fence-scope":
        opus.fence("cluster")  # ERR: fence-scope
    elif CASE == "fence-order":
        opus.fence("device", order="relaxed")  # ERR: fence-order
    elif CASE == "mask-zero":
        opus.sync_warp(0)  # ERR: mask-zero
    elif CASE == "mask-wide":
        opus.sync_warp(1 << 40)  # ERR: mask-wide
    elif CASE == "mask-float":
        opus.sync_warp(1.0)  # ERR: mask-float
    elif CASE == "globaltimer-amd":
        p[0] = opus.u32(opus.globaltimer())  # ERR: globaltimer-amd
    elif CASE == "memtime-nv":
        p[0] = opus.u32(opus.s_memtime())  # ERR: memtime-nv
    elif CASE == "wgb-type":
        opus.workgroup_barrier(opus.make_gmem(p).ptr + 0).wait_eq(1.5)  # ERR: wgb-type


@pytest.mark.parametrize("case,arch,needles", [
    ("bar-amd", "gfx942", ["barrier_sync is not available on gfx942", "s_barrier"]),
    ("bar-amd", "gfx950", ["not available on gfx950", "no named or partial barriers"]),
    ("bar-id", "sm_90a", ["barrier id must be 0 to 15", "16"]),
    ("bar-count", "sm_90a", ["multiple of the warp size (32)", "48"]),
    ("arrive-no-count", "sm_90a", ["barrier_arrive needs a count"]),
    ("setprio-nv", "sm_90a", ["opus.s_setprio is not available on sm_90a", "AMD instruction"]),
    ("setprio-range", "gfx942", ["s_setprio priority", "0 to 3", "4"]),
    ("nop-range", "gfx950", ["s_nop n", "0 to 15", "16"]),
    ("sched-nv", "sm_80", ["opus.sched_barrier is not available on sm_80"]),
    ("group-size", "gfx942", ["sched_group_barrier size", "got the python int 0"]),
    ("vmcnt-range", "gfx942", ["s_waitcnt_vmcnt n", "0 to 63"]),
    ("waitcnt-nv", "sm_90a", ["s_waitcnt is not available on sm_90a", "wait_async"]),
    ("expcnt-range", "gfx950", ["expcnt", "up to 7"]),
    ("fence-scope", "sm_90a", ["fence: scope must be one of", "cluster"]),
    ("fence-order", "gfx942", ["fence: order must be one of", "relaxed"]),
    ("mask-zero", "sm_90a", ["sync_warp mask", "32-lane warp"]),
    ("mask-wide", "sm_90a", ["sync_warp mask", "0xffffffff"]),
    ("mask-float", "gfx942", ["sync_warp mask must be an int", "64-lane warp"]),
    ("globaltimer-amd", "gfx942", ["opus.globaltimer is not available on gfx942", "s_memrealtime"]),
    ("memtime-nv", "sm_90a", ["opus.s_memtime is not available on sm_90a", "clock64"]),
    ("wgb-type", "sm_90a", ["workgroup_barrier wait value must be an integer", "1.5"]),
])
def test_bad_synchronization(case, arch, needles):
    with raises(opus.TraceError, *needles, at=case):
        trace(_sync, arch, CASE=case)


@opus.kernel
def _wgb_float(p: opus.Ptr[f32]):
    opus.workgroup_barrier(p).inc()  # ERR: wgb-float


def test_workgroup_barrier_needs_u32_counters():
    with raises(opus.TraceError, "global pointer to u32", "f32", at="wgb-float"):
        trace(_wgb_float)


# -- run time: the interpreter's reports ------------------------------------------------------------
@opus.kernel
def _oob(p: opus.Ptr[u32], h: opus.Ptr[f16], CASE: opus.constexpr):
    i = opus.thread_id_x()
    if CASE == "oob":
        opus.atomic_add(p, 1, i + 60)  # ERR: oob
    else:
        opus.atomic_add(h, opus.make_vector(f16(1.0), f16(1.0)), i * 2 + 1)  # ERR: misaligned


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("case,exc,needles", [
    ("oob", MemoryFault, ["out-of-bounds atomic of", "[64]", "unchecked on the GPU"]),
    ("misaligned", MemoryFault, ["misaligned 2-element atomic", "4-byte aligned"]),
])
def test_runtime_faults(arch, case, exc, needles):
    p, h = np.zeros(64, np.uint32), np.zeros(256, np.float16)
    with raises(exc, *needles, at=case):
        run(_oob, arch, (1,), (32,), p, h, CASE=case)


@opus.kernel
def _warp(o: opus.Ptr[i32], CASE: opus.constexpr):
    t = opus.thread_id_x()
    if CASE == "not-mine":
        opus.sync_warp(opus.cast(2, u32) if opus.warp_size() == 32 else opus.u64(2))  # ERR: not-mine
    elif CASE == "different-masks":
        opus.sync_warp(opus.select(t < 16, opus.u32(0xFFFF), opus.u32(0xFFFFFFFF)))  # ERR: different-masks
    o[t] = t


def test_sync_warp_mask_without_the_calling_lane():
    with raises(InterpError, "does not name the calling lane", at="not-mine"):
        run(_warp, "sm_90a", (1,), (32,), np.zeros(32, np.int32), CASE="not-mine")


def test_sync_warp_lanes_with_different_masks():
    with raises(InterpError, "names lane", "different mask", at="different-masks"):
        run(_warp, "sm_90a", (1,), (32,), np.zeros(32, np.int32), CASE="different-masks")


@opus.kernel
def _bar(o: opus.Ptr[i32], CASE: opus.constexpr):
    t = opus.thread_id_x()
    if CASE == "partial-warp":
        if t < 16:
            opus.barrier_sync(1, 32)  # ERR: partial-warp
    elif CASE == "never-completes":
        if t < 32:
            opus.barrier_arrive(2, 64)  # producers only: nobody syncs
    elif CASE == "runtime-count":
        opus.barrier_sync(1, o[0])  # ERR: runtime-count
    o[t + 1] = t


def test_named_barrier_by_part_of_a_warp():
    with raises(InterpError, "only part of warp 0", "whole warps", at="partial-warp"):
        run(_bar, "sm_90a", (1,), (64,), np.zeros(65, np.int32), CASE="partial-warp")


def test_named_barrier_left_incomplete_at_block_end():
    with raises(InterpError, "named barrier 2 ends the block", "32 of 64"):
        run(_bar, "sm_90a", (1,), (64,), np.zeros(65, np.int32), CASE="never-completes")


def test_named_barrier_runtime_count_not_whole_warps():
    o = np.zeros(65, np.int32)
    o[0] = 40
    with raises(InterpError, "barrier count 40", "multiple of the warp size", at="runtime-count"):
        run(_bar, "sm_90a", (1,), (64,), o, CASE="runtime-count")


@opus.kernel
def _spin(flag: opus.Ptr[u32], o: opus.Ptr[u32]):
    while opus.atomic_load(flag, 0, order="acquire") == 0:  # ERR: spin
        pass
    o[opus.thread_id_x()] = 1


def test_spin_on_a_flag_nobody_sets_is_reported_not_hung():
    flag, o = np.zeros(1, np.uint32), np.zeros(32, np.uint32)
    with raises(InterpError, "no progress", "spin forever", at="spin"):
        run(_spin, "gfx942", (1,), (64,), flag, np.zeros(64, np.uint32))
    unchanged(o)


@opus.kernel
def _wait_later(sem: opus.Ptr[u32]):
    opus.workgroup_barrier(sem).wait_eq(opus.num_blocks_x() - opus.block_id_x())  # ERR: wait-later


def test_wait_for_a_later_block_is_reported():
    sem = np.zeros(1, np.uint32)
    with raises(InterpError, "one after another", "equals 3", at="wait-later"):
        run(_wait_later, "sm_90a", (3,), (32,), sem)

