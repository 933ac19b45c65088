"""The interpreter's model of mbarriers and the tensor memory accelerator (ir/ops.py, "Async
barriers and the tensor memory accelerator").

Per block (``state.tma``, made at the first such op): each mbarrier's phase, expected and
pending arrivals and transaction count, keyed by its shared-memory byte address; the TMA loads
in flight; each thread's bulk groups of TMA stores. Phases and parity follow PTX exactly.

* A TMA load reads its box from the tensor when it is issued and lands (writes shared memory,
  then counts its bytes against its mbarrier's tx) at the first wait or try_wait on that
  mbarrier: the latest moment the hardware allows, so a read before the wait sees what the
  tile held before. In checking mode such a read (or a write) is an error naming both lines.
* A wait that cannot complete (wrong parity, missing arrivals or bytes) is an error at its line
  once no other path of the block can go on (the sides of a divergent if run as paths that
  wait for each other: interp/paths.py). A try_wait polled many times with nothing changing is
  the same error (a spin that never ends).
* A TMA store reads its shared source and writes the tensor when a bulk_wait_group of its
  thread covers it (or at the block's end; checking mode reports that as a missing wait).
  Checking mode also reports writes to a source before that wait, and sources written by a
  thread that has not executed fence_proxy_async since.
"""
from __future__ import annotations

import numpy as np

from .errors import InterpError, MemoryFault, AsyncCopyPendingError, where

__all__ = ["TmaOps"]

_POLL_LIMIT = 1 << 16  # false try_waits of one barrier with nothing changing: a spin forever
_SMEM_ALIGN = 128
_SWIZZLE_BITS = {0: 0, 32: 1, 64: 2, 128: 3}


class _MBar:
    __slots__ = ("phase", "expected", "pending", "tx", "polls", "name")

    def __init__(self, count, name):
        self.phase, self.expected, self.pending, self.tx = 0, count, count, 0
        self.polls, self.name = 0, name

    def complete_if_done(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected
        self.polls = 0

    def describe(self):
        return (f"mbarrier {self.name} is in phase {self.phase} (parity {self.phase & 1}) with "
                f"{self.pending} of {self.expected} arrivals and {self.tx} transaction bytes "
                f"outstanding")


class _Load:
    __slots__ = ("bar", "buf", "rel", "data", "abs", "op", "t")


class _Store:
    __slots__ = ("tmap", "coords", "buf", "rel", "abs", "op", "t")


class TmaState:
    """The mbarriers, loads in flight and bulk groups of the block being run."""

    def __init__(self, state):
        self.bars = {}
        self.loads = []
        self.passed = set()  # op indices of loads a completed phase did not wait for
        self.open = {}       # thread -> its uncommitted stores
        self.groups = {}     # thread -> its committed groups (lists of stores), oldest first
        sh = state.shadow
        self.check = sh is not None
        if self.check:
            n = sh.written.shape[0]
            self.busy = np.full(n, -1, np.int32)     # op index of a load or store using the byte
            self.busy_tid = np.full(n, -1, np.int64)
            self.store_src = np.zeros(n, bool)        # busy as a store's source (reads allowed)
            self.unfenced = np.full(n, -1, np.int64)  # thread of a generic write not fenced yet
            if sh.pend is None:  # the Shadow calls its pending-bytes hook only once it has them
                from .async_copies import _pending_arrays
                _pending_arrays(sh)

    # -- checking mode ----------------------------------------------------------------------
    def check_access(self, shadow, state, buf, b, t, op, verb):
        """Shadow.read/write hook: bytes ``b`` accessed by threads ``t``."""
        busy = self.busy[b] >= 0
        if verb == "reads":
            busy &= ~self.store_src[b]
        if busy.any():
            k = int(np.argmax(busy))
            other = shadow.prog.ops[self.busy[b[k]]]
            who = state.who(self.busy_tid[b[k]])
            if other.kind == "tma_load":
                why = (f"the TMA load at {where(other.loc)} by {who} has not landed: wait on its "
                       f"mbarrier (bar.wait(parity)) first")
                if self.busy[b[k]] in self.passed:
                    why += (" (a wait on its mbarrier returned without it, for a phase that "
                            "had completed already: check that wait's parity, the k-th phase "
                            "of a barrier has parity k & 1, and that arrive_expect_tx announced "
                            "the load's bytes before the phase's last arrival)")
            else:
                why = (f"the TMA store at {where(other.loc)} by {who} may not have read it yet: "
                       f"opus.tma_commit() and opus.tma_wait(read=True) come first")
            raise AsyncCopyPendingError(f"{where(op.loc)}: {state.who(t[k])} {verb} shared memory "
                                        f"{shadow._elem(buf, b[k])} while {why}")
        if verb == "writes":
            self.unfenced[b] = t

    def _mark(self, state, op, absb, t, store):
        if not self.check:
            return
        busy = self.busy[absb] >= 0
        if busy.any():
            k = int(np.argmax(busy))
            other = state.prog.ops[self.busy[absb[k]]]
            raise AsyncCopyPendingError(
                f"{where(op.loc)}: {state.who(t)} starts a TMA copy over shared byte "
                f"{int(absb[k])} while the TMA {other.kind[4:]} at {where(other.loc)} by "
                f"{state.who(self.busy_tid[absb[k]])} still uses it (no wait in between)")
        if store:
            mine = self.unfenced[absb]
            bad = mine >= 0
            if bad.any():
                k = int(np.argmax(bad))
                raise AsyncCopyPendingError(
                    f"{where(op.loc)}: {state.who(t)} issues a TMA store of shared memory that "
                    f"{state.who(mine[k])} wrote (byte {int(absb[k])}) without an "
                    f"opus.fence_proxy_async() since: TMA reads through the async proxy, which "
                    f"may not see that write (each writing thread fences, then sync_threads)")
        self.busy[absb] = state.prog.op_index[op]
        self.busy_tid[absb] = t
        self.store_src[absb] = store

    def _unmark(self, state, absb, landed):
        if not self.check:
            return
        self.busy[absb] = -1
        self.store_src[absb] = False
        if landed:  # written by the async proxy, ordered by the mbarrier wait
            sh = state.shadow
            sh.written[absb] = True
            sh.wtid[absb] = -1
            sh.rtid[absb] = -1

    def fence(self, lanes):
        if self.check:
            self.unfenced[np.isin(self.unfenced, np.flatnonzero(lanes))] = -1

    # -- barriers ------------------------------------------------------------------------------
    def barrier(self, state, op, t, buf, e, init=False):
        addr = _shared_byte(state, op, t, buf, e, "mbarrier", 8)
        if init:
            return addr
        bar = self.bars.get(addr)
        if bar is None:
            raise InterpError(f"{where(op.loc)}: {state.who(t)} uses mbarrier {buf.name}[{e}] "
                              f"before any thread initialised it (bar.init(count))")
        return bar

    def observe(self, state, bar, parity):
        """Whether the phase of ``parity`` has completed, landing the loads in flight on
        ``bar`` (issue order: complete_tx) one by one until it does. Loads still in flight when
        it has completed count towards a later phase: a phase that completed without them
        (bytes not announced by expect_tx) leaves them unlanded, as the GPU may."""
        if (bar.phase & 1) != (parity & 1):
            for ld in self.loads:
                if ld.bar is bar:
                    self.passed.add(state.prog.op_index[ld.op])
            return True
        keep = []
        for ld in self.loads:
            if ld.bar is not bar or (bar.phase & 1) != (parity & 1):
                keep.append(ld)
                continue
            ld.buf.arr.view(np.uint8)[ld.rel] = ld.data
            self._unmark(state, ld.abs, True)
            bar.tx -= ld.data.shape[0]
            bar.complete_if_done()
        self.loads = keep
        return (bar.phase & 1) != (parity & 1)

    # -- stores ----------------------------------------------------------------------------------
    def complete_groups(self, state, t, keep):
        groups = self.groups.get(t, [])
        cut = max(0, len(groups) - keep)
        done, self.groups[t] = groups[:cut], groups[cut:]
        for group in done:
            for st in group:
                _write_box(st.tmap, st.coords, st.buf.arr.view(np.uint8)[st.rel], state, st.op)
                self._unmark(state, st.abs, False)

    def finish(self, state):
        """The block ends: stores nobody waited for are done now (checking mode: an error)."""
        for t in sorted(set(self.open) | set(self.groups)):
            pending = self.open.get(t, []) + [s for g in self.groups.get(t, []) for s in g]
            if pending and self.check:
                raise InterpError(
                    f"{where(pending[0].op.loc)}: the TMA store issued here by {state.who(t)} was "
                    f"not waited for before its block ended: opus.tma_commit() and "
                    f"opus.tma_wait() (its shared source may be gone before TMA reads it)")
            self.groups[t] = self.groups.get(t, []) + [self.open.pop(t, [])]
            self.complete_groups(state, t, 0)


def _tma(state) -> TmaState:
    return state.tma


def _lanes_of(state):
    return np.arange(state.T) if state.mask is None else np.flatnonzero(state.mask)


def _full(x, T):
    return x if x.shape[0] == T else np.broadcast_to(x, (T,) + x.shape[1:])


def _pointer(state, pv, t):
    """(Buf, element index) of pointer value ``pv`` in lane t."""
    buf, off = pv
    e = int(_full(off, state.T)[t])
    if not hasattr(buf, "arr"):  # pointers into several buffers after a divergent merge
        buf = state.bufs[int(_full(buf, state.T)[t])]
    return buf, e


def _shared_byte(state, op, t, buf, e, what, align):
    if buf.space != "shared":
        raise InterpError(f"{where(op.loc)}: {state.who(t)} gives {what} a pointer into "
                          f"{buf.name}, which is not shared memory")
    addr = buf.addr + e * buf.isz
    if addr % align:
        raise MemoryFault(f"{where(op.loc)}: {state.who(t)}: the {what} at {buf.name}[{e}] "
                          f"(shared byte {addr}) is not {align}-byte aligned")
    if not 0 <= e < buf.arr.shape[0]:
        raise MemoryFault(f"{where(op.loc)}: {state.who(t)}: the {what} at {buf.name}[{e}] is "
                          f"outside {buf.name} ({buf.arr.shape[0]} elements)")
    return addr


def _tile_bytes(state, op, t, buf, e, tmap, what):
    """(relative byte positions in buf, absolute shared bytes) of a box tile at buf[e]: packed
    row-major, each byte at its swizzled shared address."""
    addr = _shared_byte(state, op, t, buf, e, what, _SMEM_ALIGN)
    pos = addr + np.arange(tmap.copy_bytes, dtype=np.int64)
    bits = _SWIZZLE_BITS[tmap.swizzle]
    if bits:
        pos = pos ^ (((pos >> 7) & ((1 << bits) - 1)) << 4)
    rel = pos - buf.byte0
    size = buf.arr.shape[0] * buf.isz
    if rel.min() < 0 or rel.max() >= size:
        raise MemoryFault(f"{where(op.loc)}: {state.who(t)}: the {tmap.copy_bytes}-byte box of "
                          f"the {what} at {buf.name}[{e}] does not fit in {buf.name} ({size} "
                          f"bytes)")
    return rel, pos


def _box_index(tmap, coords):
    """Per dimension: the tensor indices of the box (clipped) and which are inside the tensor."""
    idx, ok = [], []
    for c, n, s, d in zip(coords, tmap.copy_shape, tmap.element_strides, tmap.shape):
        i = c + np.arange(n, dtype=np.int64) * s
        idx.append(np.clip(i, 0, d - 1))
        ok.append((i >= 0) & (i < d))
    inside = np.ones(tmap.copy_shape, bool)
    for k, o in enumerate(ok):
        inside &= o.reshape([-1 if j == k else 1 for j in range(len(ok))])
    return idx, inside


def _read_box(tmap, coords):
    """The box at coords as bytes (row-major), zeros outside the tensor."""
    idx, inside = _box_index(tmap, coords)
    vals = np.ascontiguousarray(tmap.tensor[np.ix_(*idx)])
    raw = vals.view(np.uint8).reshape(vals.shape + (tmap.dtype.itemsize,))
    raw[~inside] = 0
    return raw.reshape(-1)


def _write_box(tmap, coords, data, state, op):
    idx, inside = _box_index(tmap, coords)
    arr = tmap.tensor
    if not arr.flags.writeable:
        raise InterpError(f"{where(op.loc)}: TMA store into a read-only numpy array")
    vals = np.ascontiguousarray(data).view(arr.dtype).reshape(tmap.copy_shape)
    grids = np.meshgrid(*idx, indexing="ij")
    arr[tuple(g[inside] for g in grids)] = vals[inside]


class TmaOps:
    """The Program's exec_ methods of the mbarrier and TMA ops (mixed into interp.Program)."""

    has_tma = False  # set when compiling such an op: each block then gets a TmaState

    def new_tma_state(self, state):
        """The block's TmaState (made before its first op, so checking mode sees every shared
        write a TMA store may read), or None for kernels without these ops."""
        return TmaState(state) if self.has_tma else None

    def _bar_ops(self, op, each):
        """A closure running ``each(state, tma, t, buf, e, *scalars)`` per active lane, with
        the barrier pointer (first operand) and the scalar operands after it read per lane."""
        self.has_tma = True
        sp = self.slot(op.operands[0])
        ss = [self.slot(v) for v in op.operands[1:]]

        def run(state, _op=op):
            values = state.values
            tma = _tma(state)
            cols = [_full(values[s], state.T) for s in ss]
            for t in _lanes_of(state):
                buf, e = _pointer(state, values[sp], t)
                each(state, _op, tma, int(t), buf, e, *[int(c[t]) for c in cols])
        return run

    def exec_mbarrier_init(self, op):
        def each(state, op, tma, t, buf, e, count):
            if not 1 <= count < 1 << 20:
                raise InterpError(f"{where(op.loc)}: {state.who(t)}: mbarrier count {count} is "
                                  f"outside 1..2**20-1")
            addr = tma.barrier(state, op, t, buf, e, init=True)
            tma.loads = [ld for ld in tma.loads if ld.bar is not tma.bars.get(addr)]
            tma.bars[addr] = _MBar(count, f"{buf.name}[{e}]")
        return self._bar_ops(op, each)

    def exec_mbarrier_arrive(self, op):
        def each(state, op, tma, t, buf, e, nbytes=None):
            bar = tma.barrier(state, op, t, buf, e)
            if nbytes is not None:
                _add_tx(state, op, t, bar, nbytes)
            if bar.pending == 0:
                raise InterpError(f"{where(op.loc)}: {state.who(t)} arrives on {bar.describe()}: "
                                  f"an arrival with none pending is undefined (more arrivals than "
                                  f"its count before the bytes came in)")
            bar.pending -= 1
            bar.complete_if_done()
        return self._bar_ops(op, each)

    def exec_mbarrier_expect_tx(self, op):
        def each(state, op, tma, t, buf, e, nbytes):
            bar = tma.barrier(state, op, t, buf, e)
            _add_tx(state, op, t, bar, nbytes)
            bar.complete_if_done()
        return self._bar_ops(op, each)

    def exec_mbarrier_try_wait(self, op):
        self.has_tma = self.has_waits = True
        sr = self.slot(op.results[0])
        sp, spar = self.slot(op.operands[0]), self.slot(op.operands[1])

        def run(state, _op=op):
            values = state.values
            tma, T = _tma(state), state.T
            par = _full(values[spar], T)
            out = np.zeros(T, bool)
            for t in _lanes_of(state):
                bar = tma.barrier(state, _op, int(t), *_pointer(state, values[sp], t))
                out[t] = tma.observe(state, bar, int(par[t]))
                if not out[t] and state.paths is not None and state.paths.let_others_run(
                        state.path):  # another path ran: look again, not a spin's poll
                    out[t] = tma.observe(state, bar, int(par[t]))
                    continue
                if not out[t]:
                    bar.polls += 1
                    if bar.polls > _POLL_LIMIT:
                        raise InterpError(_never(state, _op, int(t), bar, int(par[t]), "polls"))
            values[sr] = out
        return run

    def exec_mbarrier_wait(self, op):
        self.has_waits = True

        def each(state, op, tma, t, buf, e, parity):
            bar = tma.barrier(state, op, t, buf, e)
            if tma.observe(state, bar, parity):
                return
            never = lambda: InterpError(_never(state, op, t, bar, parity, "waits"))  # noqa: E731
            if state.paths is None:
                raise never()
            state.paths.wait(state.path, lambda: tma.observe(state, bar, parity),
                             f"the phase of parity {parity & 1} of mbarrier {bar.name} at "
                             f"{where(op.loc)}", never)
        return self._bar_ops(op, each)

    def exec_fence(self, op):
        self.has_tma = True
        if op.attrs["kind"] != "proxy_async":
            return None  # mbarrier inits are visible at once here

        def run(state, _op=op):
            mask = np.zeros(state.T, bool)
            mask[_lanes_of(state)] = True
            state.tma.fence(mask)
        return run

    def _tma_ops(self, op, first_coord, each):
        self.has_tma = True
        st = self.slot(op.operands[0])
        sp = self.slot(op.operands[1])
        sb = self.slot(op.operands[2]) if first_coord == 3 else None
        sc = [self.slot(v) for v in op.operands[first_coord:]]

        def run(state, _op=op):
            values = state.values
            tma, T = _tma(state), state.T
            tmap = values[st]
            cols = [_full(values[s], T) for s in sc]
            kind = "tma_load" if sb is not None else "tma_store"
            for t in _lanes_of(state):
                inner = int(cols[-1][t])
                if (inner * tmap.dtype.itemsize) % 16:
                    from ..targets.nvidia import tma_box_start_problem
                    raise MemoryFault(f"{where(_op.loc)}: {state.who(int(t))}: "
                                      + tma_box_start_problem(kind, inner, tmap.dtype))
                if sb is None:
                    from ..targets.nvidia import tma_store_start_problem
                    why = tma_store_start_problem([int(c[t]) for c in cols])
                    if why is not None:
                        raise MemoryFault(f"{where(_op.loc)}: {state.who(int(t))}: {why}")
                buf, e = _pointer(state, values[sp], t)
                bar = None
                if sb is not None:
                    bar = tma.barrier(state, _op, int(t), *_pointer(state, values[sb], t))
                each(state, _op, tma, int(t), tmap, buf, e, bar, [int(c[t]) for c in cols])
        return run

    def exec_tma_load(self, op):
        def each(state, op, tma, t, tmap, buf, e, bar, coords):
            ld = _Load()
            ld.rel, ld.abs = _tile_bytes(state, op, t, buf, e, tmap, "TMA load destination")
            tma._mark(state, op, ld.abs, t, False)
            ld.bar, ld.buf, ld.op, ld.t = bar, buf, op, t
            ld.data = _read_box(tmap, coords)
            tma.loads.append(ld)
        return self._tma_ops(op, 3, each)

    def exec_tma_store(self, op):
        def each(state, op, tma, t, tmap, buf, e, bar, coords):
            st = _Store()
            st.rel, st.abs = _tile_bytes(state, op, t, buf, e, tmap, "TMA store source")
            tma._mark(state, op, st.abs, t, True)
            st.tmap, st.coords, st.buf, st.op, st.t = tmap, coords, buf, op, t
            tma.open.setdefault(t, []).append(st)
        return self._tma_ops(op, 2, each)

    def exec_bulk_commit_group(self, op):
        self.has_tma = True

        def run(state, _op=op):
            tma = _tma(state)
            for t in map(int, _lanes_of(state)):
                tma.groups.setdefault(t, []).append(tma.open.pop(t, []))
        return run

    def exec_bulk_wait_group(self, op):
        self.has_tma = True
        n = op.attrs["n"]

        def run(state, _op=op):
            for t in map(int, _lanes_of(state)):
                state.tma.complete_groups(state, t, n)
        return run


def _add_tx(state, op, t, bar, nbytes):
    if not 0 <= nbytes < 1 << 20:
        raise InterpError(f"{where(op.loc)}: {state.who(t)}: expect_tx of {nbytes} bytes is "
                          f"outside 0..2**20-1")
    bar.tx += nbytes


def _never(state, op, t, bar, parity, verb):
    """The message of a wait that cannot complete."""
    extra = ""
    if bar.tx < 0:
        extra = " (more bytes landed than expect_tx announced)"
    return (f"{where(op.loc)}: {state.who(t)} {verb} for the phase of parity {parity & 1}, which "
            f"never completes: {bar.describe()}{extra}. Waiting on the parity of the current "
            f"phase waits for it to complete: check the parity (the k-th phase of a barrier, "
            f"counting from 0, has parity k & 1) and that its arrivals and expect_tx bytes match "
            f"what is issued")
