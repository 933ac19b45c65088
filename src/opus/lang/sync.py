"""Synchronization below and above the block barrier (``opus.sync_threads`` stays in
lang/threads.py): warp barriers, NVIDIA's named barriers, memory fences, the original's
cross-block ``workgroup_barrier``, AMD's wait counters and scheduling hints, clock reads.

What a chip has comes from targets/sync_atomics.py; semantics (and what the interpreter reports
instead of hanging) are in ir/ops.py under Synchronization and ``spin_wait``.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Value, PointerType, scalar_of, lanes_of
from ..targets import sync_atomics as rows
from .async_copy import s_waitcnt, _LGKMCNT_MAX, _VMCNT_MAX
from .atomics import atomic_add, atomic_load, _pointer_and_bound, _check_choice
from .context import ctx, TraceError
from .memory import _describe, _offset
from .threads import sync_threads
from .tma import _when, _first_thread
from .values import emit, emit1, as_value

__all__ = ["sync_warp", "barrier_sync", "barrier_arrive", "fence", "s_waitcnt_vmcnt",
           "s_waitcnt_lgkmcnt", "s_setprio", "s_nop", "s_sleep", "sched_barrier",
           "sched_group_barrier", "clock", "clock64", "globaltimer", "s_memtime",
           "s_memrealtime", "workgroup_barrier"]


def _err(msg):
    raise TraceError(msg)


def _static_int(x, what, lo, hi):
    """``x``, a compile-time int in [lo, hi], or an error naming ``what`` and the range."""
    if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
        _err(f"{what} must be a compile-time int from {lo} to {hi}, got {_describe(x)}")
    return x


# -- warp and named barriers -------------------------------------------------------------------
def sync_warp(mask=None):
    """Warp barrier (CUDA ``__syncwarp(mask)``, PTX ``bar.warp.sync``): the lanes in ``mask``
    wait for each other, and their memory writes before it are visible to each other after
    it. The calling lane must be in ``mask``, and every lane in it must call it too (the
    interpreter reports either mistake). AMD: a wave runs in lockstep, so this is a wave
    barrier that only keeps the compiler from moving memory accesses across it.

    :param mask: one bit per lane (None: the whole warp)
    :type mask: int (compile-time) or run-time u32 (NVIDIA) / u64 (AMD) or None
    :targets: all targets
    """
    ws = ctx().target.warp_size
    mtype = dt.u32 if ws == 32 else dt.u64
    if mask is None:
        mask = (1 << ws) - 1
    if isinstance(mask, int) and not isinstance(mask, bool):
        if not 0 < mask < 1 << ws:
            _err(f"sync_warp mask must name lanes of a {ws}-lane warp: an int from 1 to "
                 f"{hex((1 << ws) - 1)}, got {hex(mask) if mask >= 0 else mask}")
        mask = as_value(mask, mtype)
    elif not (isinstance(mask, Value) and not isinstance(mask.type, PointerType)
              and lanes_of(mask.type) == 1 and scalar_of(mask.type).is_int
              and scalar_of(mask.type).bits <= mtype.bits):
        _err(f"sync_warp mask must be an int or a run-time integer of at most {mtype.bits} "
             f"bits (one per lane of the {ws}-lane warp), got {_describe(mask)}")
    elif scalar_of(mask.type) != mtype:
        mask = _cast(mask, mtype)
    emit("sync_warp", [mask])


def _cast(v, to):
    from .values import cast
    return cast(v, to)


def _barrier_operand(x, what, check):
    """A named barrier's id or count: a checked compile-time int, or a run-time i32."""
    if isinstance(x, int) and not isinstance(x, bool):
        check(x)
        return as_value(x, dt.i32)
    if isinstance(x, Value) and not isinstance(x.type, PointerType) and lanes_of(x.type) == 1 \
            and scalar_of(x.type).is_int:
        return x if scalar_of(x.type) == dt.i32 else _cast(x, dt.i32)
    _err(f"{what} must be an int or a run-time integer, got {_describe(x)}")


def _named_barrier(id, count, arrive, what):
    c = ctx()
    rows.require_named_barrier(c.target, what)
    ws = c.target.warp_size

    def check_id(i):
        if not 0 <= i <= 15:
            _err(f"{what}: barrier id must be 0 to 15 (16 hardware barriers per block), got {i}")

    def check_count(n):
        if n <= 0 or n % ws or n > c.target.limits.threads_per_block:
            _err(f"{what}: count must be a positive multiple of the warp size ({ws}) up to "
                 f"{c.target.limits.threads_per_block} threads, got {n}")
    operands = [_barrier_operand(id, f"{what} id", check_id)]
    if count is not None:
        operands.append(_barrier_operand(count, f"{what} count", check_count))
    emit("named_barrier", operands, [], {"arrive": arrive, "counted": count is not None})


def barrier_sync(id, count=None):
    """Wait at named barrier ``id`` until ``count`` threads have arrived (PTX ``bar.sync id,
    count``; id 0 without a count is ``sync_threads``). Threads arrive a whole warp at a time.
    With ``barrier_arrive`` it builds producer/consumer hand-offs between warps.

    Example: producers ``opus.barrier_arrive(1, 256)`` after filling a buffer, consumers
    ``opus.barrier_sync(1, 256)`` before reading it.

    :param id: the barrier, 0 to 15
    :type id: int (compile-time) or run-time integer
    :param count: threads taking part, a multiple of the warp size (None: the whole block)
    :type count: int (compile-time) or run-time integer or None
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a; not on gfx942, gfx950 (CDNA has one
        workgroup barrier: opus.sync_threads)
    """
    _named_barrier(id, count, False, "barrier_sync")


def barrier_arrive(id, count):
    """Arrive at named barrier ``id`` without waiting (PTX ``bar.arrive id, count``): the
    producer side of a hand-off whose consumers call ``barrier_sync(id, count)``; ``count``
    counts both sides.

    :param id: the barrier, 0 to 15
    :type id: int (compile-time) or run-time integer
    :param count: threads taking part, a multiple of the warp size
    :type count: int (compile-time) or run-time integer
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a; not on gfx942, gfx950
    """
    if count is None:
        _err("barrier_arrive needs a count (the threads arriving and waiting together)")
    _named_barrier(id, count, True, "barrier_arrive")


def fence(scope="device", order="acq_rel"):
    """Memory fence: this thread's memory accesses before it are ordered before those after
    it for every thread in ``scope`` (NVIDIA ``fence.acq_rel.cta/gpu/sys``, CUDA
    ``__threadfence_block/__threadfence/__threadfence_system``; AMD ``__builtin_amdgcn_fence``
    at workgroup, agent or system scope).

    :param scope: 'block', 'device' or 'system'
    :type scope: str
    :param order: 'acq_rel' or 'seq_cst'
    :type order: str
    :targets: all targets
    """
    _check_choice(scope, rows.SCOPES, "fence", "scope")
    _check_choice(order, ("acq_rel", "seq_cst"), "fence", "order")
    emit("memory_fence", [], [], {"scope": scope, "order": order})


# -- AMD wait counters and scheduling ----------------------------------------------------------
def s_waitcnt_vmcnt(n):
    """AMD ``s_waitcnt vmcnt(n)`` (the original's ``s_waitcnt_vmcnt``): at most ``n`` vector
    memory instructions of this wave stay outstanding.

    :param n: 0 to 63
    :type n: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    s_waitcnt(vmcnt=_static_int(n, "s_waitcnt_vmcnt n", 0, _VMCNT_MAX))


def s_waitcnt_lgkmcnt(n):
    """AMD ``s_waitcnt lgkmcnt(n)`` (the original's ``s_waitcnt_lgkmcnt``): at most ``n`` LDS,
    scalar-memory and message instructions stay outstanding.

    :param n: 0 to 15
    :type n: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    s_waitcnt(lgkmcnt=_static_int(n, "s_waitcnt_lgkmcnt n", 0, _LGKMCNT_MAX))


def _hint(name, *args):
    rows.require_amd_hint(ctx().target, name)
    emit("sched_hint", [], [], {"name": name, "args": tuple(args)})


def s_setprio(priority):
    """AMD ``s_setprio``: this wave's issue priority (0 lowest .. 3), e.g. raised around a
    kernel's MFMA section so its waves win arbitration.

    :param priority: 0 to 3
    :type priority: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    _hint("s_setprio", _static_int(priority, "s_setprio priority", 0, 3))


def s_nop(n):
    """AMD ``s_nop n``: n + 1 wait states (hazard padding in hand-scheduled code).

    :param n: 0 to 15
    :type n: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    _hint("s_nop", _static_int(n, "s_nop n", 0, 15))


def s_sleep(n):
    """AMD ``s_sleep n``: sleep about 64 * n clocks (backing off in spin loops).

    :param n: 0 to 127
    :type n: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    _hint("s_sleep", _static_int(n, "s_sleep n", 0, 127))


def sched_barrier(mask=0):
    """AMD ``__builtin_amdgcn_sched_barrier(mask)``: the compiler's scheduler may move only the
    instruction classes in ``mask`` across this point (0: none; LLVM's bits: 0x1 non-memory
    ALU, 0x2 VALU, 0x4 SALU, 0x8 MFMA, 0x10 all VMEM, 0x20 VMEM reads, 0x40 VMEM writes, 0x80
    all DS, 0x100 DS reads, 0x200 DS writes, 0x400 transcendentals). Emits no instruction.

    :param mask: instruction classes allowed to cross
    :type mask: int (compile-time), 0 to 0x7FF
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    _hint("sched_barrier", _static_int(mask, "sched_barrier mask", 0, 0x7FF))


def sched_group_barrier(mask, size, syncid):
    """AMD ``__builtin_amdgcn_sched_group_barrier(mask, size, syncid)``: asks the scheduler
    for a group of ``size`` instructions of the classes in ``mask`` (sched_barrier's bits)
    here; groups with the same ``syncid`` are ordered as written (interleaving MFMA with
    loads). Emits no instruction.

    :param mask: instruction classes of the group
    :type mask: int (compile-time), 0 to 0x7FF
    :param size: instructions in the group, >= 1
    :type size: int (compile-time)
    :param syncid: the sequence the group belongs to, >= 0
    :type syncid: int (compile-time)
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a
    """
    _hint("sched_group_barrier", _static_int(mask, "sched_group_barrier mask", 0, 0x7FF),
          _static_int(size, "sched_group_barrier size", 1, 2 ** 31 - 1),
          _static_int(syncid, "sched_group_barrier syncid", 0, 2 ** 31 - 1))


# -- clocks ------------------------------------------------------------------------------------
def _clock(which):
    t = rows.require_clock(ctx().target, which)
    return emit1("clock", [], dt.dtype_from_name(t), {"which": which})


def clock():
    """The low 32 bits of a per-multiprocessor cycle counter (NVIDIA ``%clock``; AMD the low
    half of ``s_memtime``). Differences within one thread time a stretch of code (wrapping).
    The interpreter counts clock reads instead (non-decreasing, not a time).

    :returns: the counter
    :rtype: run-time u32
    :targets: all targets
    """
    return _clock("clock")


def clock64():
    """A 64-bit cycle counter (NVIDIA ``%clock64``, AMD ``s_memtime``).

    :returns: the counter
    :rtype: run-time u64
    :targets: all targets
    """
    return _clock("clock64")


def globaltimer():
    """NVIDIA's global nanosecond timer (``%globaltimer``), the same on every multiprocessor.

    :returns: nanoseconds
    :rtype: run-time u64
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a; not on gfx942, gfx950 (opus.s_memrealtime)
    """
    return _clock("globaltimer")


def s_memtime():
    """AMD ``s_memtime``: the 64-bit shader clock (as opus.clock64 there).

    :returns: the counter
    :rtype: run-time u64
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (opus.clock64)
    """
    return _clock("s_memtime")


def s_memrealtime():
    """AMD ``s_memrealtime``: a constant 100 MHz "real time" counter, the same on every CU.

    :returns: the counter
    :rtype: run-time u64
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (opus.globaltimer)
    """
    return _clock("s_memrealtime")


# -- the original's cross-block barrier ----------------------------------------------------------
class workgroup_barrier:
    """The original's cross-workgroup semaphore over u32 counters in global memory
    (``opus::workgroup_barrier``): ``ld(off)``, ``wait_eq(v, off)``, ``wait_lt(v, off)``,
    ``inc(off)``. Thread (0, 0, 0) of the block waits or increments; the others meet it at a block
    barrier.

    Use constraints: the counters must be zero before the launch that uses them (or reset by
    the kernel once every block is past its last wait; a launch does not reset them); a block
    may wait only for blocks that are running or finished: with more blocks than fit on the
    GPU at once, a block waiting for one not yet scheduled deadlocks, so wait only for lower
    block indices (blocks start in index order) or launch no more blocks than are co-resident.
    Unlike the original's relaxed operations, ``inc`` releases and the waits acquire at device
    scope, so what a block wrote before ``inc`` is visible to the blocks its count lets go.
    Interpreter: blocks run one after another in index order, so a wait for lower blocks
    passes and a wait that is not already satisfied is an error (it would hang), never a hang.

    Example (blocks in a chain): ``bar = opus.workgroup_barrier(sem); bar.wait_eq(b); ...;
    bar.inc()`` with ``b = opus.block_id_x()``.

    :param ptr: the counters
    :type ptr: run-time global pointer to u32 (an opus.Ptr[opus.u32] parameter) or a gmem view
    :targets: all targets
    """

    def __init__(self, ptr):
        p, _ = _pointer_and_bound(ptr, "workgroup_barrier")
        if p.type.space != "global" or p.type.elem != dt.u32:
            _err(f"workgroup_barrier needs a global pointer to u32 counters, got {_describe(ptr)}")
        self.ptr = p

    def ld(self, off=0):
        """The counter at ``off`` (a relaxed atomic load, device scope)."""
        return atomic_load(self.ptr, off, order="relaxed", scope="device")

    def _wait(self, cmp, value, off):
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2 ** 32:
            v = as_value(value, dt.u32)
        elif (isinstance(value, Value) and not isinstance(value.type, PointerType)
              and lanes_of(value.type) == 1 and scalar_of(value.type).is_int):
            v = _cast(value, dt.u32)  # the counters are u32 (block indices are i32)
        else:
            _err(f"workgroup_barrier wait value must be an integer (the u32 count to wait "
                 f"for), got {_describe(value)}")
        operands = [self.ptr, _offset(off, "workgroup_barrier offset"), v]
        _when(_first_thread(), lambda: emit("spin_wait", operands, [], {"cmp": cmp,
                                                                         "scope": "device"}))
        sync_threads()

    def wait_eq(self, value, off=0):
        """Thread 0 waits until the counter at ``off`` equals ``value``; then a block barrier."""
        self._wait("eq", value, off)

    def wait_lt(self, value, off=0):
        """Thread 0 waits while the counter at ``off`` is less than ``value`` (the original's
        name: it returns once the counter reaches ``value``); then a block barrier."""
        self._wait("lt", value, off)

    def inc(self, off=0):
        """A block barrier, then thread 0 adds 1 to the counter at ``off`` (release, device
        scope: the block's writes before it are visible to whoever sees the new count)."""
        sync_threads()
        _when(_first_thread(), lambda: atomic_add(self.ptr, 1, off, order="release",
                                                  scope="device"))
