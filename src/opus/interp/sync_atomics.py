"""The interpreter's atomics and synchronization (ir/ops.py: atomic, spin_wait, sync_warp,
named_barrier, memory_fence, sched_hint, clock), mixed into engine.Program.

The interpreter runs the threads of a block in lockstep and blocks one after another (or a
batch of blocks in lockstep when the kernel has no barrier or shared memory), so its memory is
sequentially consistent and conflicting atomics of one op apply in ascending batch-lane order
(linear block, then linear thread). Anything that would have to wait for work the interpreter
runs later (a named barrier whose arrivals come later in program order, a spin on a value no
earlier block wrote, a spin loop inside one warp) is reported as an error at its line, never
a hang.
"""
from __future__ import annotations

import numpy as np

from ..ir import atomic_operands
from ..targets.sync_atomics import f32_add_flushes
from .errors import InterpError, BarrierError
from .semantics import binary_fn

__all__ = ["SyncAtomicOps", "LoopProgress"]

I64 = np.dtype(np.int64)


def _where(loc):
    from .errors import where
    return where(loc)


# -- one atomic op: the new element from the old one ---------------------------------------------
def _bits(x):
    """Values as unsigned integers of their width (bitwise comparisons of floats)."""
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind in "fV" or x.dtype.itemsize == 2 \
        and x.dtype.kind not in "iu" else x


def _flush_f32(x):
    tiny = np.float32(np.finfo(np.float32).tiny)
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


def _step_fn(kind, elem, flush):
    """fn(old, value, compare) -> new element values (numpy arrays of elem's host dtype)."""
    if kind == "add":
        add = binary_fn("add", elem)
        if flush:
            return lambda o, v, c: _flush_f32(add(_flush_f32(o), _flush_f32(v)))
        return lambda o, v, c: add(o, v)
    if kind in ("min", "max", "and", "or", "xor"):
        f = binary_fn(kind, elem)
        return lambda o, v, c: f(o, v)
    if kind in ("exch", "store"):
        return lambda o, v, c: v
    if kind == "cas":
        return lambda o, v, c: np.where(_bits(o) == _bits(c), v, o)
    if kind == "inc":
        return lambda o, v, c: np.where(o >= v, o.dtype.type(0), o + o.dtype.type(1))
    if kind == "dec":
        return lambda o, v, c: np.where((o == 0) | (o > v), v, o - o.dtype.type(1))
    raise InterpError(f"internal: atomic op {kind!r}")


def _accumulate_fn(kind, elem, flush):
    """The ufunc whose accumulate gives the running values of a run of ``kind`` on one
    address in order (None: apply one at a time)."""
    if elem.is_int and kind in ("add", "and", "or", "xor", "min", "max"):
        return {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
                "xor": np.bitwise_xor, "min": np.minimum, "max": np.maximum}[kind]
    if kind == "add" and elem.name in ("f32", "f64") and not flush:
        return np.add  # accumulate folds left to right, rounding each step in the dtype
    return None


def apply_in_order(arr, e, v, c, step, accumulate):
    """Apply atomics at element indices ``e`` (operands ``v``, ``c``) to ``arr`` one after
    another in the order given; returns (old value of each, how many elements changed)."""
    n = len(e)
    old = np.empty(n, arr.dtype)
    if n == 0:
        return old, 0
    order = np.argsort(e, kind="stable")
    es = e[order]
    starts = np.flatnonzero(np.r_[True, es[1:] != es[:-1]])
    lengths = np.diff(np.r_[starts, n])
    rounds, groups = int(lengths.max()), len(starts)
    changed = 0
    if rounds <= groups or (accumulate is None and rounds <= 64):
        rank = np.arange(n) - np.repeat(starts, lengths)
        for r in range(rounds):  # the r-th atomic on each address, all addresses at once
            pos = order[rank == r]
            o = arr[e[pos]]
            new = step(o, v[pos], None if c is None else c[pos]).astype(arr.dtype)
            old[pos] = o
            changed += int(np.count_nonzero(_bits(new) != _bits(o)))
            arr[e[pos]] = new
        return old, changed
    for s, k in zip(starts.tolist(), lengths.tolist()):  # few addresses, long runs
        pos = order[s:s + k]
        a = int(e[pos[0]])
        if accumulate is not None:
            run = accumulate.accumulate(np.r_[arr[a:a + 1], v[pos]].astype(arr.dtype), dtype=arr.dtype)
            old[pos] = run[:-1]
            changed += int(np.count_nonzero(_bits(run[1:]) != _bits(run[:-1])))
            arr[a] = run[-1]
            continue
        for p in pos.tolist():
            o = arr[a:a + 1]
            new = step(o.copy(), v[p:p + 1], None if c is None else c[p:p + 1]).astype(arr.dtype)
            old[p] = o[0]
            changed += int(_bits(new)[0] != _bits(o)[0])
            arr[a] = new[0]
    return old, changed


class LoopProgress:
    """For a run-time ``while`` holding atomics or spin waits: an iteration that leaves every
    carried value, the active lanes and memory as they were would repeat forever (nothing else
    runs while a block loops), which on the GPU is a spin on work of the same warp (a lock
    taken by one lane of a warp while its other lanes spin: a deadlock in lockstep) or of a
    block that runs later. Reported as an error instead of a hang."""

    __slots__ = ("op", "prev")

    def __init__(self, op):
        self.op, self.prev = op, None

    def check(self, state, cur, act):
        snap = (state.writes, None if act is None else act.copy(), [_snapshot(x) for x in cur])
        prev, self.prev = self.prev, snap
        if prev is None or prev[0] != snap[0] or not _same_mask(prev[1], snap[1]) \
                or not all(_same(a, b) for a, b in zip(prev[2], snap[2])):
            return
        lanes = np.flatnonzero(act) if act is not None else np.arange(state.T)
        raise InterpError(
            f"{_where(self.op.loc)}: this loop makes no progress: an iteration changed no "
            f"carried value and no memory ({len(lanes)} thread(s) still looping, first "
            f"{state.who(lanes[0])}), so it would spin forever. The interpreter runs a block's "
            f"threads in lockstep and blocks one after another, so a spin on a lock or flag "
            f"that a thread of the same block (or a later block) would release never ends "
            f"here; on the GPU such a loop deadlocks within a warp on AMD (a wave runs in "
            f"lockstep). Take block-level locks with one thread per block, release a lock "
            f"inside the loop body that took it, or wait only for blocks that run earlier")


def _snapshot(x):
    if isinstance(x, tuple):
        return (x[0], x[1].copy())
    return x.copy()


def _same(a, b):
    if isinstance(a, tuple):
        return a[0] is b[0] and np.array_equal(a[1], b[1])
    return a.shape == b.shape and np.array_equal(_bits(np.ascontiguousarray(a)),
                                                 _bits(np.ascontiguousarray(b)))


def _same_mask(a, b):
    if a is None or b is None:
        return a is b
    return np.array_equal(a, b)


def holds_atomics(op) -> bool:
    """Does a region of ``op`` (recursively) hold an atomic or a spin wait."""
    for r in op.regions:
        for o in r.ops:
            if o.kind in ("atomic", "spin_wait") or holds_atomics(o):
                return True
    return False


class SyncAtomicOps:
    """exec_ methods of engine.Program for atomics and synchronization."""

    # -- atomics ---------------------------------------------------------------------------------
    def exec_atomic(self, op):
        from .engine import Buf, _full, _fault, _check_align, _shadow
        p, off, value, compare, bound = atomic_operands(op)
        kind, vec = op.attrs["op"], op.attrs["vec"]
        elem = p.type.elem
        address, window = self._address(p, off), self._window(p, bound)
        sv = None if value is None else self.slot(value)
        sc = None if compare is None else self.slot(compare)
        sr = self.slot(op.results[0]) if op.results else None
        flush = kind == "add" and elem.name == "f32" and f32_add_flushes(self.target, p.type.space)
        step = None if kind == "load" else _step_fn(kind, elem, flush)
        accumulate = _accumulate_fn(kind, elem, flush)
        nd = elem.np_dtype
        pshape = (vec,) if vec > 1 else ()

        def operand(values, s, T):
            x = _full(values[s], T)
            return x.reshape(T, vec) if vec > 1 else x

        def run(state, _op=op):
            values = state.values
            T = state.T
            buf, idx = address(values)
            idx = _full(idx, T)
            lanes = np.ones(T, bool) if state.mask is None else state.mask.copy()
            if bound is not None:
                lo, hi = window(values)
                lanes &= (idx >= _full(lo, T)) & (idx + vec <= _full(hi, T))
            if type(buf) is not Buf:
                raise InterpError(f"{_where(_op.loc)}: an atomic through a pointer that points "
                                  f"into different buffers in different threads")
            arr, n = buf.arr, buf.arr.shape[0]
            eidx = idx[:, None] + np.arange(vec) if vec > 1 else idx
            lane_of = np.broadcast_to(lanes[:, None], eidx.shape) if vec > 1 else lanes
            bad = lane_of & ((eidx < 0) | (eidx >= n))
            if bad.any():
                _fault(state, _op, "atomic", buf, eidx, bad, vec, bound is not None)
            if vec > 1:
                _check_align(state, _op, "atomic", buf, idx, lanes, vec)
            _shadow(state, _op, "load", buf, eidx, lane_of)
            result = np.zeros((T,) + pshape, nd)
            sel = np.flatnonzero(lanes)
            if sel.size:
                e = eidx[sel].reshape(-1)
                if kind == "load":
                    result[sel] = arr[eidx[sel]]
                else:
                    if not arr.flags.writeable:
                        raise InterpError(f"{_where(_op.loc)}: atomic on {buf.name}, whose numpy "
                                          f"array is read-only")
                    v = operand(values, sv, T)[sel].reshape(-1).astype(nd)
                    c = None if sc is None else operand(values, sc, T)[sel].reshape(-1).astype(nd)
                    old, changed = apply_in_order(arr, e, v, c, step, accumulate)
                    state.writes += changed
                    result[sel] = old.reshape((len(sel),) + pshape)
            if sr is not None:
                values[sr] = result
        return run

    def exec_spin_wait(self, op):
        from .engine import mem_load
        self.serial_blocks = True  # a block may wait only for blocks that ran before it
        p, off, v = op.operands
        address, sv = self._address(p, off), self.slot(v)
        cmp = op.attrs["cmp"]
        nd = p.type.elem.np_dtype

        def run(state, _op=op):
            values = state.values
            buf, idx = address(values)
            got = mem_load(state, _op, buf, idx, 1, None, state.mask, nd.type(0), nd)
            want = values[sv]
            waiting = (got != want) if cmp == "eq" else (got < want)
            if state.mask is not None:
                waiting = waiting & state.mask
            if waiting.any():
                k = int(np.argmax(np.broadcast_to(waiting, (state.T,))))
                g = int(np.broadcast_to(got, (state.T,))[k])
                w = int(np.broadcast_to(want, (state.T,))[k])
                cond = f"equals {w}" if cmp == "eq" else f"reaches {w}"
                raise BarrierError(
                    f"{_where(_op.loc)}: {state.who(k)} waits until {buf.name}"
                    f"[{int(np.broadcast_to(idx, (state.T,))[k])}] {cond}, but it is {g}. The "
                    f"interpreter runs blocks one after another in index order, so only earlier "
                    f"blocks can have changed it and none will now: on the GPU this wait would "
                    f"depend on a block running at the same time or later (it hangs if that "
                    f"block is not resident). Wait only for lower block indices to run it here")
        return run

    # -- barriers and fences ------------------------------------------------------------------------
    def _warps(self, state):
        """(warp index, lane) of each batch lane, and the warps per block."""
        nt, ws = state.nthreads, self.ws
        t = np.arange(state.T)
        per = -(-nt // ws)
        return (t // nt) * per + (t % nt) // ws, (t % nt) % ws, per

    def exec_sync_warp(self, op):
        sm = self.slot(op.operands[0])
        ws = self.ws

        def run(state, _op=op):
            T = state.T
            act, alive = _active_and_alive(state)
            if not act.any():
                return
            warp, lane, _ = self._warps(state)
            mask = np.broadcast_to(state.values[sm], (T,)).astype(np.uint64)
            mine = ((mask >> lane.astype(np.uint64)) & np.uint64(1)).astype(bool)
            bad = act & ~mine
            if bad.any():
                k = int(np.argmax(bad))
                raise BarrierError(f"{_where(_op.loc)}: sync_warp by {state.who(k)} (lane "
                                   f"{lane[k]}) with mask {hex(int(mask[k]))}, which does not "
                                   f"name the calling lane (undefined on the GPU)")
            nw = int(warp.max()) + 1
            bit = np.uint64(1) << lane.astype(np.uint64)
            here = np.zeros(nw, np.uint64)
            np.bitwise_or.at(here, warp[act], bit[act])
            living = np.zeros(nw, np.uint64)
            np.bitwise_or.at(living, warp[alive], bit[alive])
            missing = act & ((mask & living[warp] & ~here[warp]) != 0)
            if missing.any():
                k = int(np.argmax(missing))
                absent = int(mask[k] & living[warp[k]] & ~here[warp[k]])
                j = (absent & -absent).bit_length() - 1
                raise BarrierError(
                    f"{_where(_op.loc)}: sync_warp with mask {hex(int(mask[k]))} by "
                    f"{state.who(k)}, but lane {j} of its warp, named in the mask and not exited, "
                    f"is in another branch or loop iteration: it deadlocks on the GPU")
            for w in np.unique(warp[act]).tolist():  # the lanes a mask names use that mask
                sel = np.flatnonzero(act & (warp == w))
                if len(np.unique(mask[sel])) == 1:
                    continue
                by_lane = dict(zip(lane[sel].tolist(), mask[sel].tolist()))
                for ln, m in by_lane.items():
                    other = next((j for j, mj in by_lane.items() if (m >> j) & 1 and mj != m), None)
                    if other is not None:
                        raise BarrierError(
                            f"{_where(_op.loc)}: sync_warp in warp {w}: lane {ln}'s mask "
                            f"{hex(m)} names lane {other}, which calls it with a different mask "
                            f"{hex(by_lane[other])} (the lanes a mask names must use that mask)")
            if state.shadow is not None:
                _forget_accesses(state.shadow, act)
        return run

    def exec_named_barrier(self, op):
        self.has_barrier = True
        sid = self.slot(op.operands[0])
        sc = self.slot(op.operands[1]) if op.attrs["counted"] else None
        arrive, ws = op.attrs["arrive"], self.ws

        def run(state, _op=op):
            T = state.T
            act, alive = _active_and_alive(state)
            if not act.any():
                return
            warp, _, per = self._warps(state)
            part = np.unique(warp[alive & ~act & np.isin(warp, warp[act])])
            if part.size:
                w = int(part[0])
                raise BarrierError(f"{_where(_op.loc)}: named barrier reached by only part of "
                                   f"warp {w}: bar.sync/bar.arrive count whole warps, so all "
                                   f"of a warp's threads must reach it together")
            ids = np.broadcast_to(state.values[sid], (T,))
            counts = (np.broadcast_to(state.values[sc], (T,)) if sc is not None else
                      np.full(T, per * ws, I64))
            bars = state.named_bars
            for w in np.unique(warp[act]).tolist():
                sel = act & (warp == w)
                i, n = np.unique(ids[sel]), np.unique(counts[sel])
                if len(i) > 1 or len(n) > 1:
                    raise BarrierError(f"{_where(_op.loc)}: the threads of warp {w} name "
                                       f"different barrier ids or counts")
                i, n = int(i[0]), int(n[0])
                if not 0 <= i <= 15:
                    raise BarrierError(f"{_where(_op.loc)}: barrier id {i} is not 0 to 15")
                if n <= 0 or n % ws or n > per * ws:
                    raise BarrierError(
                        f"{_where(_op.loc)}: barrier count {n} must be a positive multiple of "
                        f"the warp size ({ws}) and at most the block's {per * ws} threads "
                        f"(whole warps)")
                pend, want, lanes = bars.get(i, (0, n, np.zeros(T, bool)))
                if pend and want != n:
                    raise BarrierError(f"{_where(_op.loc)}: barrier {i} is used with count {n} "
                                       f"while {pend} arrivals with count {want} are pending")
                bars[i] = (pend + ws, n, lanes | sel)
            for i, (pend, n, lanes) in list(bars.items()):
                if not (lanes & act).any():
                    continue
                if arrive:
                    done, left = divmod(pend, n)
                    if done and state.shadow is not None:
                        _forget_accesses(state.shadow, lanes)
                    bars[i] = (left, n, lanes if left else np.zeros(T, bool))
                    continue
                if pend % n:
                    raise BarrierError(
                        f"{_where(_op.loc)}: barrier_sync({i}, {n}) would wait: {pend % n} of "
                        f"{n} threads have arrived when {state.who(int(np.argmax(act)))} gets "
                        f"here. The interpreter runs divergent branches one after another "
                        f"(then before else) and blocks' warps in lockstep, so the other "
                        f"arrivals (barrier_arrive or barrier_sync of other warps) must come "
                        f"earlier in program order; on the GPU a count that never completes "
                        f"deadlocks")
                if state.shadow is not None:
                    _forget_accesses(state.shadow, lanes)
                bars[i] = (0, n, np.zeros(T, bool))
        return run

    def check_named_barriers(self, state):
        """At the end of a block: no named barrier may be left with arrivals pending."""
        for i, (pend, n, _) in state.named_bars.items():
            if pend:
                raise BarrierError(f"kernel {self.fn.name!r}: named barrier {i} ends the block "
                                   f"with {pend} of {n} threads arrived (barrier_arrive with no "
                                   f"matching barrier_sync completing it)")

    def exec_memory_fence(self, op):
        return None  # the interpreter's memory is sequentially consistent

    def exec_sched_hint(self, op):
        return None  # scheduling, priority and timing hints change no value

    def exec_clock(self, op):
        sr = self.slot(op.results[0])
        nd = op.results[0].type.np_dtype

        def run(state, _op=op):
            state.clock += 1
            state.values[sr] = np.array([state.clock], np.uint64).astype(nd)
        return run


def _active_and_alive(state):
    """(lanes executing the op, lanes that have not returned), as bool arrays [T]."""
    T = state.T
    return (np.ones(T, bool) if state.mask is None else state.mask,
            np.ones(T, bool) if state.alive is None else state.alive)


def _forget_accesses(shadow, lanes):
    """Shared-memory checking: accesses by ``lanes`` before a barrier they all passed no longer
    race with their accesses after it."""
    for table in (shadow.wtid, shadow.rtid):
        hit = table >= 0
        if hit.any():
            sub = table[hit]
            ok = sub < len(lanes)
            mine = np.zeros(sub.shape, bool)
            mine[ok] = lanes[sub[ok]]
            sub[mine] = -1
            table[hit] = sub

