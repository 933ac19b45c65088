"""The interpreter's model of asynchronous copies (ir/ops.py: cp_async, lds_load, async_commit,
async_wait).

A copy reads its source when it is issued and keeps the bytes; its destination is written only
when a wait of the issuing thread covers it (per thread, groups are committed in order and
``wait(n)`` completes all but the newest n; ``vmcnt(n)`` all but the newest n copies). A barrier
completes nothing, as on the hardware. In checking mode the Shadow marks a pending copy's bytes,
so a read of them (or a store to them) before the wait is reported with both lines; completing a
copy is a write by its thread (races with other threads' reads are reported as for stores).
"""
from __future__ import annotations

import numpy as np

from .engine import Buf, _full, _fault, _arange, I64, POISON
from .errors import InterpError, MemoryFault, where, AsyncCopyPendingError

__all__ = ["compile_cp_async", "compile_lds_load", "compile_commit", "compile_wait",
           "check_pending"]


class _Copy:
    """One copy instruction in flight: what it writes where, for which threads."""

    __slots__ = ("buf", "eidx", "vals", "defined", "lanes", "group", "seq", "op")


class InFlight:
    """The copies in flight of the block being run, and per thread the groups it committed
    and the copies it issued."""

    def __init__(self, T):
        self.committed = np.zeros(T, I64)
        self.issued = np.zeros(T, I64)
        self.copies = []

    def issue(self, state, op, buf, eidx, vals, lanes, defined=None):
        """Record a copy by ``lanes`` of ``vals`` [T, k] into ``buf`` at ``eidx`` [T, k];
        ``defined`` [k] marks the elements with specified values (None: all)."""
        rec = _Copy()
        rec.buf, rec.eidx, rec.vals, rec.defined, rec.op = buf, eidx, vals, defined, op
        rec.lanes = lanes.copy()
        rec.group, rec.seq = self.committed.copy(), self.issued.copy()
        if state.shadow is not None:
            t = np.flatnonzero(lanes)
            _shadow_issue(state.shadow, state, buf, eidx[t], t, op)
        self.copies.append(rec)
        self.issued[lanes] += 1

    def commit(self, lanes):
        self.committed[lanes] += 1

    def wait(self, state, lanes, groups=None, vmcnt=None):
        """Complete, for the threads in ``lanes``, their copies outside the newest ``groups``
        committed groups (or outside their newest ``vmcnt`` copies)."""
        keep = []
        for rec in self.copies:
            if groups is not None:
                due = rec.group < self.committed - groups
            else:
                due = rec.seq < self.issued - vmcnt
            sel = rec.lanes & due & lanes
            if sel.any():
                _complete(state, rec, sel)
                rec.lanes &= ~sel
            if rec.lanes.any():
                keep.append(rec)
        self.copies = keep


def _in_flight(state) -> InFlight:
    q = state.asyncq
    if q is None:
        q = state.asyncq = InFlight(state.T)
    return q


def _poison(dtype, shape):
    return np.full(shape + (dtype.itemsize,), POISON, np.uint8).view(dtype).reshape(shape)


def _complete(state, rec, sel):
    """Write the destination of ``rec`` for threads ``sel``."""
    t = np.flatnonzero(sel)
    e, v = rec.eidx[t], rec.vals[t]
    arr = rec.buf.arr
    if rec.defined is None:
        arr[e] = v
    else:
        arr[e[:, rec.defined]] = v[:, rec.defined]
        unknown = e[:, ~rec.defined]
        arr[unknown] = _poison(arr.dtype, unknown.shape)
    if state.shadow is not None:
        _shadow_complete(state.shadow, state, rec, e, t)


# -- checking mode: the Shadow's pending bytes --------------------------------------------------

def _pending_arrays(shadow):
    if getattr(shadow, "pend", None) is None:
        n = shadow.written.shape[0]
        shadow.pend = np.full(n, -1, np.int32)   # op index of the pending copy, -1 none
        shadow.ptid = np.full(n, -1, I64)        # its thread
    return shadow.pend, shadow.ptid


def _shadow_issue(shadow, state, buf, eidx, t, op):
    b, tb = shadow._bytes(buf, eidx.reshape(-1), np.repeat(t, eidx.shape[1]))
    pend, ptid = _pending_arrays(shadow)
    busy = pend[b] >= 0
    if busy.any():
        k = int(np.argmax(busy))
        other = shadow.prog.ops[pend[b[k]]]
        raise AsyncCopyPendingError(
            f"{where(op.loc)}: {state.who(tb[k])} starts an async copy into "
            f"{shadow._elem(buf, b[k])} while the copy at {where(other.loc)} by "
            f"{state.who(ptid[b[k]])} is still writing it (no wait in between): which lands "
            f"last is not defined")
    pend[b] = shadow.prog.op_index[op]
    ptid[b] = tb


def _shadow_complete(shadow, state, rec, e, t):
    """The copy's bytes are written now, by its thread: no longer pending; unspecified
    elements count as never written (reading them is reported)."""
    tids = np.repeat(t, e.shape[1])
    b, _ = shadow._bytes(rec.buf, e.reshape(-1), tids)
    shadow.pend[b] = -1
    shadow.write(state, rec.buf, e.reshape(-1), tids, rec.op)
    if rec.defined is not None:
        ub, _ = shadow._bytes(rec.buf, e[:, ~rec.defined].reshape(-1), tids[:0])
        shadow.written[ub] = False


def check_pending(shadow, state, buf, b, t, op, verb):
    """Shadow.read/write hook: bytes ``b`` (accessed by threads ``t``) must not be the
    destination of a copy nobody has waited for."""
    pend = getattr(shadow, "pend", None)
    if pend is None:
        return
    busy = pend[b] >= 0
    if busy.any():
        k = int(np.argmax(busy))
        copy = shadow.prog.ops[pend[b[k]]]
        who = state.who(shadow.ptid[b[k]])
        raise AsyncCopyPendingError(
            f"{where(op.loc)}: {state.who(t[k])} {verb} shared memory {shadow._elem(buf, b[k])} "
            f"while the async copy at {where(copy.loc)} by {who} may still be writing it: its "
            f"wait has not run (opus.wait_async; other threads also need opus.sync_threads() "
            f"after that wait)")


def reset_pending(shadow):
    if getattr(shadow, "pend", None) is not None:
        shadow.pend[:] = -1


# -- executing the ops ----------------------------------------------------------------------------

def _lanes(state):
    return np.ones(state.T, bool) if state.mask is None else state.mask


def _buffers(state, buf, lanes):
    """[(Buf, lanes)] of a pointer's buffer(s): one, or one per buffer after a divergent merge."""
    if type(buf) is Buf:
        return [(buf, lanes)]
    ids = _full(buf, state.T)
    return [(state.bufs[int(u)], lanes & (ids == u)) for u in np.unique(ids[lanes])]


def _check_aligned(state, op, what, buf, first, lanes, align):
    mis = ((buf.addr + first * buf.isz) % align != 0) & lanes
    if mis.any():
        k = int(np.argmax(mis))
        raise MemoryFault(f"{where(op.loc)}: misaligned {what} at {buf.name}[{int(first[k])}] by "
                          f"{state.who(k)}: it needs a {align}-byte aligned address")


def _check_range(state, op, what, buf, eidx, take, bounded):
    n = buf.arr.shape[0]
    bad = take & ((eidx < 0) | (eidx >= n))
    if bad.any():
        _fault(state, op, what, buf, eidx, bad, eidx.shape[1], bounded)


def _read_source(state, op, sbuf, sidx, take, lanes, align, bounded, dtype):
    """[T, n] source elements where ``take`` (zeros elsewhere), checked for range and
    alignment by the issuing lanes."""
    T, n = take.shape
    eidx = sidx[:, None] + _arange(n)
    out = np.zeros((T, n), dtype)
    for buf, sel in _buffers(state, sbuf, lanes):
        _check_aligned(state, op, "async copy source", buf, sidx, sel, align)
        tk = take & sel[:, None]
        _check_range(state, op, "async copy read", buf, eidx, tk, bounded)
        out[tk] = buf.arr[eidx[tk]]
    return out


def _issue_each(state, op, dbuf, eidx, vals, lanes, defined, align_first):
    """Check the destination (range, alignment of ``align_first`` = (indices, bytes)) and
    record the copy once per destination buffer."""
    q = _in_flight(state)
    for buf, sel in _buffers(state, dbuf, lanes):
        first, align = align_first
        _check_aligned(state, op, "async copy destination", buf, first, sel, align)
        _check_range(state, op, "async copy write", buf, eidx, np.broadcast_to(
            sel[:, None], eidx.shape), False)
        q.issue(state, op, buf, eidx, vals, sel, defined)


def compile_cp_async(prog, op):
    dst, doff, src, soff = op.operands[:4]
    bound = op.operands[4] if len(op.operands) > 4 else None
    nbytes = op.attrs["nbytes"]
    dtype = src.type.elem.np_dtype
    n = nbytes // dtype.itemsize
    daddr, saddr = prog._address(dst, doff), prog._address(src, soff)
    window = prog._window(src, bound)
    cols = _arange(n)

    def run(state, _op=op):
        values = state.values
        T, lanes = state.T, _lanes(state)
        if not lanes.any():
            return
        dbuf, didx = daddr(values)
        sbuf, sidx = saddr(values)
        didx, sidx = _full(didx, T), _full(sidx, T)
        w = window(values)
        if w is None:
            take = np.broadcast_to(lanes[:, None], (T, n))
        else:  # PTX src-size: the leading in-range elements; a start before the view: none
            lo, hi = (_full(x, T) for x in w)
            k = np.where(sidx < lo, 0, np.clip(hi - sidx, 0, n))
            take = (cols < k[:, None]) & lanes[:, None]
        vals = _read_source(state, _op, sbuf, sidx, take, lanes, nbytes, w is not None, dtype)
        eidx = didx[:, None] + cols
        _issue_each(state, _op, dbuf, eidx, vals, lanes, None, (didx, nbytes))
    return run


def _wave_uniform(state, op, off, lanes, ws):
    """The LDS base of buffer_load ... lds comes from one register of the wave (M0): every
    active lane of a wave must give the same wave_off."""
    if off.shape[0] == 1:
        return
    act = np.flatnonzero(lanes)
    wave = act // ws
    _, first = np.unique(wave, return_index=True)
    ref = np.empty(wave.max() + 1, off.dtype)
    ref[wave[first]] = off[act[first]]
    bad = off[act] != ref[wave]
    if bad.any():
        k = int(act[np.argmax(bad)])
        j = int(act[first][np.searchsorted(wave[first], k // ws)])
        raise InterpError(
            f"{where(op.loc)}: copy_async_lds with a wave_off that differs within wave "
            f"{k // ws}: {state.who(j)} gives {int(off[j])}, {state.who(k)} {int(off[k])}; the "
            f"LDS destination is one base per wave (M0) and lane l writes slot l after it, so "
            f"wave_off must be the same in every lane of a wave")


def _lds_take(sidx, lo, hi, lanes, n, nbytes, isz):
    """[T, n] the source elements the buffer unit reads (the others read zeros): none for a
    negative offset; with a bound, those whose dwords (the whole copy, under 4 bytes) lie
    wholly inside it: a dword holding elements on both sides of the bound reads zeros whole."""
    T = sidx.shape[0]
    rel = (sidx - lo) * isz                          # byte offset from the view's pointer
    ok = (rel >= 0) & lanes
    if hi is None:
        return np.broadcast_to(ok[:, None], (T, n))
    limit = (hi - lo) * isz
    unit = 4 if nbytes >= 4 else nbytes
    last = (_arange(n) + 1) * isz - 1                # each element's last byte in the copy
    inside = rel[:, None] + last // unit * unit + unit <= limit[:, None]
    return inside & ok[:, None]


def compile_lds_load(prog, op):
    from ..lang.async_copy import lds_slot_bytes
    dst, woff, src, soff = op.operands[:4]
    bound = op.operands[4] if len(op.operands) > 4 else None
    nbytes = op.attrs["nbytes"]
    dtype = src.type.elem.np_dtype
    isz = dtype.itemsize
    n, slot = nbytes // isz, lds_slot_bytes(nbytes)
    per_slot = slot // isz
    defined = None if per_slot == n else _arange(per_slot) < n
    daddr, saddr = prog._address(dst, woff), prog._address(src, soff)
    window, sp = prog._window(src, bound), prog.slot(src)
    ws, wslot = prog.ws, prog.slot(woff)

    def run(state, _op=op):
        values = state.values
        T, lanes = state.T, _lanes(state)
        if not lanes.any():
            return
        _wave_uniform(state, _op, values[wslot], lanes, ws)
        dbuf, base = daddr(values)
        sbuf, sidx = saddr(values)
        base, sidx = _full(base, T), _full(sidx, T)
        w = window(values)
        if w is None:
            lo, hi = _full(values[sp][1], T), None
        else:
            lo, hi = (_full(x, T) for x in w)
        take = _lds_take(sidx, lo, hi, lanes, n, nbytes, isz)
        got = _read_source(state, _op, sbuf, sidx, take, lanes, 4 if nbytes == 12 else nbytes,
                           w is not None, dtype)
        vals = np.zeros((T, per_slot), dtype)
        vals[:, :n] = got
        first = base + (_arange(T) % ws) * per_slot  # lane l: slot l after the wave's base
        eidx = first[:, None] + _arange(per_slot)
        _issue_each(state, _op, dbuf, eidx, vals, lanes, defined, (base, slot))
    return run


def compile_commit(prog, op):
    def run(state, _op=op):
        lanes = _lanes(state)
        if lanes.any():
            _in_flight(state).commit(lanes)
    return run


def compile_wait(prog, op):
    groups, vmcnt = op.attrs["groups"], op.attrs["vmcnt"]
    if groups is None and vmcnt is None:
        return None  # lgkmcnt alone: LDS and scalar loads are complete at once here

    def run(state, _op=op):
        lanes = _lanes(state)
        if lanes.any() and state.asyncq is not None:
            state.asyncq.wait(state, lanes, groups, None if groups is not None else vmcnt)
    return run
