"""The interpreter proper: compiles an IR Function into Python closures over numpy arrays and
runs them block by block (or many blocks at once when the kernel has no shared memory and no
barriers), all threads of a block in lockstep.

Value representation (``state.values`` holds one entry per SSA value, indexed by a slot number
fixed at compile time):
  scalar   numpy array [T] of the element's host dtype, or [1] when the value is the same in
           every thread (constants, parameters, block indices, and whatever is computed only
           from those: numpy broadcasting keeps it [1] for free)
  vector   [T, n] or [1, n]
  pointer  (Buf, int64 element offsets [T] or [1]); after a divergent merge of pointers into
           different buffers, (int64 buffer ids [T], offsets)
Control flow: ``state.mask`` is None (every thread of the batch active) or a bool array [T];
``state.alive`` is None or the bool array of threads that have not executed ``return``.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ..ir import (VectorType, PointerType, TENSOR_MAP, scalar_of, lanes_of, op_handlers,
                  access_operands)
from .errors import (InterpError, MemoryFault, BarrierError, SharedRaceError,
                     UninitializedReadError, where)
from .semantics import (binary_fn, med3_fn, cmp_fn, unary_fn, math_fn, fma_fn, cast_fn)
from .tma import TmaOps
from .packed import (read_codes, write_codes, check_packed_offsets, element_bytes,
                     check_pointer_step, pack_lanes, unpack_lanes)
from .cross_lane import CrossLaneOps
from .sync_atomics import SyncAtomicOps, LoopProgress, holds_atomics

__all__ = ["Program", "Buf"]

BATCH_THREADS = 1 << 15    # threads per batch when blocks are stacked
POISON = 0xFF              # fill byte of fresh shared memory (NaN for floats, -1 for ints)
I64 = np.dtype(np.int64)
_AR = {}


def _arange(n):
    a = _AR.get(n)
    if a is None:
        a = _AR[n] = np.arange(n, dtype=I64)
    return a


class Buf:
    """A memory buffer: a flat typed numpy array plus what errors and checks need."""

    __slots__ = ("arr", "name", "space", "addr", "byte0", "isz", "id", "ebits", "nel")

    def __init__(self, arr, name, space, addr, byte0=0, ebits=None):
        self.arr, self.name, self.space, self.addr, self.byte0 = arr, name, space, addr, byte0
        self.isz = arr.dtype.itemsize
        self.id = -1
        # sub-byte elements (interp/packed.py): arr holds the packed bytes, nel the elements
        self.ebits = ebits or 8 * self.isz
        self.nel = arr.shape[0] * 8 // self.ebits if ebits else arr.shape[0]


class State:
    __slots__ = ("values", "mask", "alive", "T", "nthreads", "block", "grid", "block_base", "bufs",
                 "shadow", "prog", "asyncq", "tma", "wgmma", "checking",
                 "writes", "named_bars", "clock",  # interp/sync_atomics.py
                 "paths", "path")  # interp/paths.py

    def who(self, t):
        """'block (x, y, z) thread (x, y, z)' of batch lane t."""
        nt = self.nthreads
        t = int(t)
        b, l = self.block_base + t // nt, t % nt
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        return (f"block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}) thread "
                f"({l % bx}, {l // bx % by}, {l // (bx * by)})")


def _full(x, T):
    return x if x.shape[0] == T else np.broadcast_to(x, (T,) + x.shape[1:])


# -- shared-memory checking ---------------------------------------------------------------------


def _shared_by_threads(b, t):
    """Bytes ``b`` (accessed by threads ``t``) sorted, with their threads, and a mask of sorted
    positions whose byte the previous position's (different) thread also accessed; the mask is
    None when no byte is shared."""
    if len(b) < 2:
        return b, t, None
    o = np.argsort(b, kind="stable")
    bs, ts = b[o], t[o]
    dup = (bs[1:] == bs[:-1]) & (ts[1:] != ts[:-1])
    return bs, ts, (dup if dup.any() else None)

class Shadow:
    """Per-byte bookkeeping of shared memory for checking mode: written-ever, and the thread and
    op of the last write/read in the current barrier interval (-1 none, -2 several readers)."""

    def __init__(self, nbytes, prog):
        self.prog = prog
        self.written = np.zeros(nbytes, bool)
        self.wtid = np.full(nbytes, -1, I64)
        self.rtid = np.full(nbytes, -1, I64)
        self.wop = np.zeros(nbytes, np.int32)
        self.rop = np.zeros(nbytes, np.int32)
        self.pend = None  # bytes an async copy will write (interp/async_copies.py), made at need

    def new_block(self):
        self.written[:] = False
        self.barrier()
        if self.pend is not None:
            self.pend[:] = -1

    def barrier(self):
        self.wtid[:] = -1
        self.rtid[:] = -1

    def _bytes(self, buf, eidx, tids):
        if buf.ebits < 8:
            b, k = element_bytes(buf, eidx)
            return buf.byte0 + b, tids[k]
        isz = buf.isz
        b = ((buf.byte0 + eidx * isz)[:, None] + _arange(isz)).reshape(-1)
        return b, np.repeat(tids, isz)

    def _elem(self, buf, byte):
        if buf.ebits < 8:
            return f"{buf.name} byte {int(byte) - buf.byte0}"
        return f"{buf.name}[{(int(byte) - buf.byte0) // buf.isz}]"

    def _check_prior_write(self, state, buf, b, t, op, verb):
        """Another thread wrote one of bytes ``b`` since the last barrier: a race."""
        w = self.wtid[b]
        bad = (w >= 0) & (w != t)
        if bad.any():
            k = int(np.argmax(bad))
            other = self.prog.ops[self.wop[b[k]]]
            raise SharedRaceError(
                f"{where(op.loc)}: shared-memory race on {self._elem(buf, b[k])}: {state.who(t[k])} "
                f"{verb} it after {state.who(w[k])} wrote it at {where(other.loc)} with no barrier "
                f"in between")

    def read(self, state, buf, eidx, tids, op):
        b, t = self._bytes(buf, eidx, tids)
        if self.pend is not None:
            check_pending(self, state, buf, b, t, op, "reads")
        un = ~self.written[b]
        if un.any():
            k = int(np.argmax(un))
            raise UninitializedReadError(
                f"{where(op.loc)}: {state.who(t[k])} reads shared memory {self._elem(buf, b[k])}, "
                f"which nothing wrote (it holds garbage on the GPU)")
        self._check_prior_write(state, buf, b, t, op, "reads")
        r = self.rtid[b]
        new = np.where((r == -1) | (r == t), t, -2)
        self.rtid[b] = new
        self.rop[b] = self.prog.op_index[op]
        bs, ts, dup = _shared_by_threads(b, t)
        if dup is not None:
            self.rtid[bs[1:][dup]] = -2

    def write(self, state, buf, eidx, tids, op):
        b, t = self._bytes(buf, eidx, tids)
        if self.pend is not None:
            check_pending(self, state, buf, b, t, op, "writes")
        bs, ts, dup = _shared_by_threads(b, t)
        if dup is not None:
            k = int(np.argmax(dup))
            raise SharedRaceError(
                f"{where(op.loc)}: shared-memory race on {self._elem(buf, bs[k])}: "
                f"{state.who(ts[k])} and {state.who(ts[k + 1])} write it at once")
        self._check_prior_write(state, buf, b, t, op, "writes")
        r = self.rtid[b]
        bad = (r == -2) | ((r >= 0) & (r != t))
        if bad.any():
            k = int(np.argmax(bad))
            other = self.prog.ops[self.rop[b[k]]]
            rd = "several threads" if r[k] == -2 else state.who(r[k])
            raise SharedRaceError(
                f"{where(op.loc)}: shared-memory race on {self._elem(buf, b[k])}: {state.who(t[k])} "
                f"writes it after {rd} read it at {where(other.loc)} with no barrier in between")
        self.wtid[b] = t
        self.wop[b] = self.prog.op_index[op]
        self.written[b] = True


# -- memory access ---------------------------------------------------------------------------------

def _fault(state, op, kind, buf, eidx_b, bad, vec, bounded):
    k = np.flatnonzero(bad)[0]
    lane = k // vec if eidx_b.ndim > 1 else k
    lane = lane if eidx_b.shape[0] > 1 else 0
    i = int(eidx_b.reshape(-1)[k])
    raise MemoryFault(f"{where(op.loc)}: out-of-bounds {kind} of {buf.name}[{i}] ({buf.name} has "
                      f"{buf.nel} elements) by {state.who(lane)}"
                      + ("" if bounded else
                         " — an access without a bound is unchecked on the GPU and faults or "
                         "corrupts memory there"))


def _check_align(state, op, kind, buf, idx, lanes, vec):
    """Vector accesses must be aligned to vec*itemsize bytes; idx [T] first elements."""
    if buf.ebits < 8:
        return check_packed_offsets(state, op, kind, buf, _full(idx, state.T), lanes, vec)
    a = vec * buf.isz
    mis = ((buf.addr + idx * buf.isz) % a) != 0
    if lanes is not None:
        mis = mis & lanes
    if mis.any():
        k = int(np.argmax(mis))
        raise MemoryFault(f"{where(op.loc)}: misaligned {vec}-element {kind} of "
                          f"{buf.name}[{int(_full(idx, state.T)[k])}] by {state.who(k)}: a vector "
                          f"access needs a {a}-byte aligned address")


def _eidx_valid(idx, vec, bound, m):
    """Element indices [T|1(, vec)] and the valid mask (None = all), plus the lanes whose
    access is one vector instruction (None = all). ``bound`` is the window ``(lo, hi)`` of
    element indices a bounded access may touch (Program._window), or None."""
    if vec > 1:
        eidx = idx[:, None] + _arange(vec)
        mm = None if m is None else m[:, None]
    else:
        eidx = idx
        mm = m
    if bound is None:
        return eidx, mm, m
    lo, hi = bound
    if vec > 1:
        lo, hi = lo[:, None], hi[:, None]
    inb = (eidx >= lo) & (eidx < hi)
    valid = inb if mm is None else inb & mm
    vl = valid.all(axis=1) if vec > 1 else None
    return eidx, valid, vl


def _first_active(state, x, ws):
    """(each lane's warp's first active lane's x [T], the active lanes [T]) for x [T]; warps
    count per block (a block's last warp may be partial)."""
    T, nt = state.T, state.nthreads
    t = np.arange(T)
    warp = (t // nt) * -(-nt // ws) + (t % nt) // ws
    act = np.ones(T, bool) if state.mask is None else state.mask
    first = np.zeros(warp.max() + 1 if T else 0, x.dtype)
    ta = t[act][::-1]  # the last write wins: the first active lane of each warp
    first[warp[ta]] = x[ta]
    return first[warp], act


def _check_uniform(state, op, soff, ws, what="soffset"):
    """A value that must be one value across the active lanes of each warp (a load/store's
    soffset: AMD reads it from the first active lane into an SGPR; opus.uniform's promise): an
    error naming a lane that differs."""
    first, act = _first_active(state, soff, ws)
    bad = act & (soff != first) & ~(_isnan(soff) & _isnan(first))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise InterpError(f"{where(op.loc)}: {what} must be the same on every active lane of a "
                          f"warp (AMD reads it from the first one); {state.who(k)} has "
                          f"{soff[k].item()}, its warp's first active lane {first[k].item()}")


def _promised_u32(address, so, sso, elem, op):
    """``address`` of an access whose offset (slot ``so``, plus the soffset's ``sso`` where it
    has one) is promised to lie in [0, 2^35 // bits) (ir/ops.py load/store attrs u32), checking
    the promise on the active lanes: a broken one is a MemoryFault naming the line (the GPU
    would wrap the 32-bit byte offset)."""
    limit = (1 << 35) // elem.bits

    def wide(x):  # u64 above 2^63 turns negative: outside either way
        return x.astype(I64) if x.dtype != np.uint64 else np.where(x >= limit, limit, x).astype(I64)

    def checked(values, state):
        off = wide(values[so])
        bad = np.zeros(off.shape, bool)
        if sso is not None:  # off + soffset, a wrapped int64 sum counted as outside
            so_ = wide(values[sso])
            total = off + so_
            bad = ((off < 0) == (so_ < 0)) & ((total < 0) != (off < 0))
            off = total
        bad = bad | (off < 0) | (off >= limit)
        if state.mask is not None:
            bad = bad & (state.mask if bad.shape[0] > 1 else state.mask.any())
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            by = "" if off.shape[0] == 1 else f" by {state.who(k)}"
            raise MemoryFault(f"{where(op.loc)}: offset {off[k].item()} through a view with "
                              f"offsets=\"u32\"{by} is outside the promised [0, {limit}) elements of "
                              f"{elem.name} (byte offsets below 2^32; on the GPU the address wraps)")
        return address(values, state)
    return checked


def _isnan(x):
    return np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)


def _check_all(state, op, kind, buf, idx, eidx, vec, bound):
    """Checks of an access by every lane: range (an error), alignment, shared-memory shadow."""
    n = buf.nel
    if eidx.size and (eidx.min() < 0 or eidx.max() >= n):
        _fault(state, op, kind, buf, eidx, (eidx < 0) | (eidx >= n), vec, bound is not None)
    if vec > 1:
        _check_align(state, op, kind, buf, idx, None, vec)
    _shadow(state, op, kind, buf, eidx, None)


def _check_masked(state, op, kind, buf, idx, eidx, valid, vl, vec, bound):
    """The same for an access by the ``valid`` lanes only (a size bound drops the others);
    ``vl``: the lanes whose vector is one instruction, never None for a vector here (without a
    bound it is the lane mask, and an access with neither is checked by _check_all)."""
    n = buf.nel
    bad = valid & ((eidx < 0) | (eidx >= n))
    if bad.any():
        _fault(state, op, kind, buf, eidx, bad, vec, bound is not None)
    if vec > 1:
        _check_align(state, op, kind, buf, idx, vl, vec)
    _shadow(state, op, kind, buf, eidx, valid)


def _shadow(state, op, kind, buf, eidx, valid):
    if state.shadow is not None and buf.space == "shared":
        e, t = _flat_with_tids(state, eidx, valid)
        (state.shadow.read if kind == "load" else state.shadow.write)(state, buf, e, t, op)


def mem_load(state, op, buf, idx, vec, bound, m, zero, dtype):
    if type(buf) is not Buf:  # a pointer merged from several buffers: each its own access
        return _multi(state, buf, m,
                      lambda b, v: mem_load(state, op, b, idx, vec, bound, v, zero, dtype))
    eidx, valid, vl = _eidx_valid(idx, vec, bound, m)
    arr = buf.arr
    if valid is None or valid.all():
        _check_all(state, op, "load", buf, idx, eidx, vec, bound)
        return arr[eidx] if buf.ebits >= 8 else read_codes(buf, eidx).view(dtype)
    if eidx.shape == valid.shape:
        eidx_b, valid_b = eidx, valid
    else:
        eidx_b, valid_b = np.broadcast_arrays(eidx, valid)
    _check_masked(state, op, "load", buf, idx, eidx_b, valid_b, vl, vec, bound)
    if arr.shape[0] == 0:
        return np.zeros(valid_b.shape, dtype)
    inside = np.where(valid_b, eidx_b, 0)  # the lanes left out read element 0, then zero
    if buf.ebits < 8:
        return np.where(valid_b, read_codes(buf, inside), np.uint8(0)).view(dtype)
    return np.where(valid_b, arr[inside], zero)


def mem_store(state, op, buf, idx, val, vec, bound, m):
    if type(buf) is not Buf:
        return _multi(state, buf, m, lambda b, v: mem_store(state, op, b, idx, val, vec, bound, v))
    eidx, valid, vl = _eidx_valid(idx, vec, bound, m)
    arr = buf.arr
    if not arr.flags.writeable:
        raise InterpError(f"{where(op.loc)}: store to {buf.name}, whose numpy array is read-only")
    if valid is None or valid.all():
        if eidx.shape != val.shape:
            eidx, val = np.broadcast_arrays(eidx, val)
        _check_all(state, op, "store", buf, idx, eidx, vec, bound)  # per written element
        if buf.ebits < 8:
            write_codes(buf, eidx, np.ascontiguousarray(val))
        else:
            arr[eidx] = val
        return
    if eidx.shape == val.shape == valid.shape:
        eidx_b, val_b, valid_b = eidx, val, valid
    else:
        eidx_b, val_b, valid_b = np.broadcast_arrays(eidx, val, valid)
    _check_masked(state, op, "store", buf, idx, eidx_b, valid_b, vl, vec, bound)
    if buf.ebits < 8:
        write_codes(buf, eidx_b[valid_b], np.ascontiguousarray(val_b[valid_b]))
    else:
        arr[eidx_b[valid_b]] = val_b[valid_b]


def _flat_with_tids(state, eidx, valid):
    """Flattened element indices and the batch lane of each (valid ones only)."""
    T = state.T
    shape = (T,) + eidx.shape[1:]
    e = np.broadcast_to(eidx, shape)
    t = np.broadcast_to(np.arange(T, dtype=I64).reshape((T,) + (1,) * (len(shape) - 1)), shape)
    if valid is None:
        return e.reshape(-1), t.reshape(-1)
    v = np.broadcast_to(valid, shape)
    return e[v], t[v]


def _multi(state, ids, m, access):
    """An access through pointers into several buffers (``ids`` [T|1], lanes ``m``, None =
    all): one ``access(buffer, its lanes)`` per buffer, each with its own checks."""
    ids = _full(ids, state.T)
    act = np.ones(state.T, bool) if m is None else m
    out = None
    for u in np.unique(ids[act]):
        sub = act & (ids == u)
        r = access(state.bufs[int(u)], sub)
        if r is not None:
            out = r if out is None else np.where(sub[:, None] if r.ndim > 1 else sub, r, out)
    return out


def _require_whole_warps(state, op, ws):
    """A warp-level instruction executed by part of a warp is an error naming the warp."""
    m = state.mask
    if m is None:
        return
    w = m.reshape(-1, ws)
    part = w.any(axis=1) & ~w.all(axis=1)
    if part.any():
        k = int(np.argmax(part))
        raise InterpError(f"{where(op.loc)}: {op.attrs['name']} executed by only part of warp {k} "
                          f"({int(w[k].sum())} of {ws} lanes, first {state.who(k * ws)}): "
                          f"warp-level instructions need the whole warp")


# -- merging values at divergent control flow -------------------------------------------------------

def _where_scalar(c, a, b):
    return np.where(c, a, b)


def _where_vector(c, a, b):
    return np.where(c[:, None], a, b)


def _where_ptr(c, a, b):
    if a is b:
        return a
    ba, oa = a
    bb, ob = b
    off = np.where(c, oa, ob)
    if ba is bb:
        return (ba, off)
    ia = ba.id if type(ba) is Buf else ba
    ib = bb.id if type(bb) is Buf else bb
    return (np.where(c, ia, ib), off)


def _merge_fn(t):
    if isinstance(t, PointerType):
        return _where_ptr
    if isinstance(t, VectorType):
        return _where_vector
    return _where_scalar


_NULL = None


def _placeholder(t):
    """A value for results of a construct no thread executed."""
    global _NULL
    if isinstance(t, PointerType):
        if _NULL is None:
            _NULL = Buf(np.zeros(0, np.uint8), "<null>", "global", 0)
        return (_NULL, np.zeros(1, I64))
    e = scalar_of(t)
    return np.zeros((1, t.n) if isinstance(t, VectorType) else (1,), e.np_dtype)


def _smem_buf(raw, d, name, off):
    """The Buf of shared bytes ``raw`` (at byte ``off``) seen as elements of ``d``; sub-byte
    types keep the bytes (interp/packed.py)."""
    if d.packed:
        return Buf(raw, name, "shared", off, off, ebits=d.bits)
    return Buf(raw.view(d.np_dtype), name, "shared", off, off)


def _run(state, fns, ys):
    for f in fns:
        f(state)
    values = state.values
    return [values[s] for s in ys]


def _fork(state, op, sides):
    """Run the sides ((mask, closures, yields) each) of a divergent ``if`` as paths that may
    wait for each other (interp/paths.py); returns each side's yields. Each path has its own
    mask and record of returned threads; the rest of the state is shared."""
    from .paths import Paths
    if state.paths is None:
        state.paths = Paths()
        state.path = state.paths.root
    kids = []
    for mask, _, _ in sides:
        kid = object.__new__(State)
        for name in State.__slots__:
            setattr(kid, name, getattr(state, name))
        kid.mask = mask
        kids.append(kid)

    def job(kid, fns, ys):
        def run(path):
            kid.path = path
            return _run(kid, fns, ys)
        return run
    names = (f"the then-path of {where(op.loc)}", f"the else-path of {where(op.loc)}")
    out = state.paths.fork(state.path, [(n, job(k, f, y)) for n, k, (_, f, y)
                                        in zip(names, kids, sides)])
    alive = [k.alive for k in kids if k.alive is not None]
    if alive:
        a = alive[0]
        for x in alive[1:]:
            a = a & x
        state.alive = a
    return out


def _restore_mask(state, m):
    a = state.alive
    if a is None:
        state.mask = m
    else:
        state.mask = a if m is None else (m & a)


# -- printf -----------------------------------------------------------------------------------------

_CONV = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|L|z|j|t)?([diouxXeEfFgGcsp%])")


def _printf_formatter(fmt, types):
    convs = []

    def sub(mo):
        flags, _, c = mo.groups()
        if c == "%":
            return "%%"
        convs.append(c)
        if c == "p":
            c = "x"
        return "%" + flags + c
    pyfmt = _CONV.sub(sub, fmt)
    fixes = []
    for c, t in zip(convs, types):
        e = scalar_of(t)
        w = 64 if e.bits == 64 else 32
        if c in "uxXo" and e.is_int:
            fixes.append(lambda v, w=w: v % (1 << w))
        elif c in "diuxXoc":
            fixes.append(int)
        elif c in "eEfFgG":
            fixes.append(float)
        else:
            fixes.append(lambda v: v)
    return pyfmt, fixes


# -- the program -------------------------------------------------------------------------------------

def check_pending(shadow, state, buf, b, t, op, verb):
    from .async_copies import check_pending as check  # it imports this module: at need
    check(shadow, state, buf, b, t, op, verb)
    if state.tma is not None:  # TMA copies in flight (interp/tma.py)
        state.tma.check_access(shadow, state, buf, b, t, op, verb)


class Program(TmaOps, CrossLaneOps, SyncAtomicOps):  # the exec_ methods of mbarriers and TMA
    # (interp/tma.py), of the cross-lane ops (interp/cross_lane.py) and of atomics and
    # synchronization (interp/sync_atomics.py)
    """An IR Function compiled to closures for one target."""

    def __init__(self, fn, target):
        self.fn = fn
        self.target = target
        self.ws = target.warp_size
        self.slots = {}
        self.ops = []            # every op, by its index (for messages)
        self.op_index = {}       # op -> index
        self.consts = []         # (slot, array)
        self.specials = []       # (slot, which)
        self.smem = []           # (slot, dtype, count, align, name)
        self.dyn = []            # (slot, dtype, offset)
        self.has_barrier = False
        self.serial_blocks = False  # a block waits for earlier ones (spin_wait): no batches
        self.has_target_op = False
        self.has_waits = False  # mbarrier waits: divergent ifs run as paths (_fork)
        self.executors = op_handlers(self, "exec_")  # op kind -> exec_<kind>
        self.param_slots = [self.slot(p.value) for p in fn.params]
        self.body = self.block(fn.body)
        # static shared-memory layout
        off = 0
        self.smem_layout = []
        for s, d, count, align, name in self.smem:
            off = (off + align - 1) // align * align
            self.smem_layout.append((s, d, count, name, off))
            off += d.nbytes(count)
        self.static_smem = off
        dal = fn.attrs.get("dyn_smem_align", 16)  # the region's base alignment (ir/ops.py)
        self.dyn_base = (off + dal - 1) // dal * dal
        self.batchable = not (self.has_barrier or self.serial_blocks or self.smem or self.dyn)

    def slot(self, v):
        s = self.slots.get(v.id)  # keyed by id: language Values overload ==
        if s is None:
            s = self.slots[v.id] = len(self.slots)
        return s

    def block(self, blk):
        """(closures, terminator operand slots) of a Block."""
        fns, term = [], []
        for op in blk.ops:
            self.op_index[op] = len(self.ops)
            self.ops.append(op)
            if op.kind in ("yield", "condition"):
                term = [self.slot(v) for v in op.operands]
                continue
            run = self.compile_op(op)
            if run is not None:
                fns.append(run)
        return fns, term

    def compile_op(self, op):
        """The closure that executes ``op`` (None: nothing to do per run), from the dispatch
        table. Errors raised while compiling an op name its kernel line; errors raised while
        running one are located in ``launch`` (every closure keeps its op as ``_op``)."""
        compile_kind = self.executors.get(op.kind)
        if compile_kind is None:
            raise InterpError(f"{where(op.loc)}: the interpreter does not support op {op.kind!r}")
        try:
            return compile_kind(op)
        except InterpError:
            raise  # located already (an op nested in this one, or a fault message)
        except Exception as e:
            raise _internal_error(e, op, self.fn.name, "compiling") from e

    # -- values that are set once per launch / per block -------------------------------------------
    def exec_const(self, op):
        r = op.results[0]
        e = scalar_of(r.type)
        v = op.attrs["value"]
        if isinstance(r.type, VectorType):
            arr = np.array([list(v)], dtype=e.np_dtype)
        else:
            arr = np.array([v], dtype=e.np_dtype)
        arr.flags.writeable = False
        self.consts.append((self.slot(r), arr))
        return None

    def exec_special(self, op):
        self.specials.append((self.slot(op.results[0]), op.attrs["which"]))
        return None

    def exec_smem_alloc(self, op):
        a = op.attrs
        self.smem.append((self.slot(op.results[0]), a["dtype"], a["count"], a["align"], a["name"]))
        return None

    def exec_dyn_smem(self, op):
        self.dyn.append((self.slot(op.results[0]), op.attrs["dtype"], op.attrs["offset"]))
        return None

    # -- arithmetic ------------------------------------------------------------------------------
    def _expand(self, v, like):
        """Slot and whether the (scalar) operand needs a trailing axis against vector ``like``."""
        return self.slot(v), lanes_of(v.type) == 1 and lanes_of(like.type) > 1

    def exec_binary(self, op):
        a, b = op.operands
        r = op.results[0]
        e = scalar_of(a.type)
        f = binary_fn(op.attrs["op"], e, op.attrs.get("nan"))
        (sa, xa), (sb, xb), sr = self._expand(a, r), self._expand(b, r), self.slot(r)
        if not xa and not xb:
            def run(state, _op=op):
                values = state.values
                values[sr] = f(values[sa], values[sb])
        else:
            def run(state, _op=op):
                values = state.values
                x, y = values[sa], values[sb]
                values[sr] = f(x[:, None] if xa else x, y[:, None] if xb else y)
        return run

    def exec_cmp(self, op):
        a, b = op.operands
        r = op.results[0]
        f = cmp_fn(op.attrs["pred"], scalar_of(a.type))
        (sa, xa), (sb, xb), sr = self._expand(a, r), self._expand(b, r), self.slot(r)

        def run(state, _op=op):
            values = state.values
            x, y = values[sa], values[sb]
            values[sr] = f(x[:, None] if xa else x, y[:, None] if xb else y)
        return run

    def _unop(self, op, f):
        sa, sr = self.slot(op.operands[0]), self.slot(op.results[0])

        def run(state, _op=op):
            values = state.values
            values[sr] = f(values[sa])
        return run

    def exec_unary(self, op):
        return self._unop(op, unary_fn(op.attrs["op"], scalar_of(op.operands[0].type)))

    def exec_math(self, op):
        return self._unop(op, math_fn(op.attrs["fn"], scalar_of(op.operands[0].type)))

    def exec_cast(self, op):
        a = op.attrs
        f = cast_fn(scalar_of(op.operands[0].type), a["to"], a.get("rounding") or "rn",
                    bool(a.get("sat")))
        if len(op.operands) == 1:
            return self._unop(op, f)
        sa, sb, sr = self.slot(op.operands[0]), self.slot(op.operands[1]), self.slot(op.results[0])

        def run(state, _op=op):  # stochastic rounding: the values and their random bits
            values = state.values
            values[sr] = f(values[sa], values[sb])
        return run

    def exec_bitcast(self, op):
        to = op.results[0].type
        nd = scalar_of(to).np_dtype
        vec = isinstance(to, VectorType)

        src = op.operands[0].type
        packed_src = isinstance(src, VectorType) and src.elem.packed
        packed_dst = vec and to.elem.packed

        def f(x):
            if packed_src:  # the packed bytes of the lanes (ir/ops.py)
                x = pack_lanes(np.ascontiguousarray(x), src.elem.bits)
            x = np.ascontiguousarray(x).reshape(x.shape[0], -1)
            if packed_dst:
                return unpack_lanes(x.view(np.uint8), to.elem.bits, nd)
            x = x.view(nd)
            return x if vec else x[:, 0]
        return self._unop(op, f)

    def _lanewise(self, op, f):
        """Run f on the operands, scalar operands broadcast against a vector result."""
        r = op.results[0]
        ex = [self._expand(v, r) for v in op.operands]
        sr = self.slot(r)

        def run(state, _op=op):
            values = state.values
            values[sr] = f(*[values[s][:, None] if x else values[s] for s, x in ex])
        return run

    def exec_fma(self, op):
        return self._lanewise(op, fma_fn(scalar_of(op.results[0].type)))

    def exec_med3(self, op):
        return self._lanewise(op, med3_fn(scalar_of(op.results[0].type)))

    def exec_readfirstlane(self, op):
        sa, sr, ws = self.slot(op.operands[0]), self.slot(op.results[0]), self.ws

        def run(state, _op=op):
            x = state.values[sa]
            state.values[sr] = x if x.shape[0] == 1 else _first_active(state, x, ws)[0]
        return run

    def exec_uniform(self, op):
        sa, sr, ws = self.slot(op.operands[0]), self.slot(op.results[0]), self.ws

        def run(state, _op=op):
            x = state.values[sa]
            if state.checking and x.shape[0] > 1:
                _check_uniform(state, _op, x, ws, "a value declared opus.uniform")
            state.values[sr] = x
        return run

    def exec_select(self, op):
        r = op.results[0]
        (sc, xc), (sa, xa), (sb, xb) = (self._expand(v, r) for v in op.operands)
        sr = self.slot(r)
        if isinstance(r.type, PointerType):
            def run(state, _op=op):
                values = state.values
                values[sr] = _where_ptr(values[sc], values[sa], values[sb])
            return run

        def run(state, _op=op):
            values = state.values
            c, x, y = values[sc], values[sa], values[sb]
            values[sr] = np.where(c[:, None] if xc else c, x[:, None] if xa else x,
                             y[:, None] if xb else y)
        return run

    # -- vectors -----------------------------------------------------------------------------------
    def exec_vector(self, op):
        ss = [self.slot(v) for v in op.operands]
        sr = self.slot(op.results[0])

        def run(state, _op=op):
            values = state.values
            values[sr] = np.stack(np.broadcast_arrays(*[values[s] for s in ss]), axis=1)
        return run

    def exec_extract(self, op):
        i = op.attrs["index"]
        return self._unop(op, lambda v: v[:, i])

    def exec_insert(self, op):
        i = op.attrs["index"]
        sv, ss, sr = self.slot(op.operands[0]), self.slot(op.operands[1]), self.slot(op.results[0])

        def run(state, _op=op):
            values = state.values
            v, s = values[sv], values[ss]
            out = np.empty((max(v.shape[0], s.shape[0]), v.shape[1]), v.dtype)
            out[:] = v
            out[:, i] = s
            values[sr] = out
        return run

    def exec_broadcast(self, op):
        n = op.attrs["n"]
        return self._unop(op, lambda s: np.broadcast_to(s[:, None], (s.shape[0], n)))

    def exec_vector_permute(self, op):
        idx = list(op.attrs["indices"])
        return self._unop(op, lambda v: v[:, idx])

    # -- memory ------------------------------------------------------------------------------------
    def _address(self, p, o):
        """``values -> (buffer, element indices)`` for pointer ``p`` plus offset ``o`` (u64 offsets
        are widened to the index type first)."""
        sp, so = self.slot(p), self.slot(o)
        if scalar_of(o.type).name == "u64":
            def address(values):
                buf, base = values[sp]
                return buf, base + values[so].astype(I64)
        else:
            def address(values):
                buf, base = values[sp]
                return buf, base + values[so]
        return address

    def exec_ptr_add(self, op):
        address, sr = self._address(*op.operands[:2]), self.slot(op.results[0])
        elem = op.operands[0].type.elem
        if elem.packed:  # a pointer into packed memory moves by whole bytes (ir/ops.py)
            so, pack = self.slot(op.operands[1]), elem.pack_elems

            def run(state, _op=op):
                values = state.values
                check_pointer_step(state, _op, values[so], pack, elem.name)
                values[sr] = address(values)
            return run

        def run(state, _op=op):
            values = state.values
            values[sr] = address(values)
        return run

    def _window(self, p, bound):
        """``values -> (lo, hi)``: the element indices ``[lo, hi)`` of the buffer that a bounded
        access through pointer ``p`` may touch. The bound counts from ``p`` itself (ir/ops.py:
        0 <= off + i < bound), so a view shifted by k has its window shifted by k too."""
        if bound is None:
            return lambda values: None
        sp, sb = self.slot(p), self.slot(bound)
        wide_unsigned = scalar_of(bound.type).name == "u64"

        def window(values):
            lo = values[sp][1]
            b = values[sb]
            if wide_unsigned:  # beyond any buffer anyway; keeps the sum in int64
                b = np.minimum(b, np.uint64(1 << 62))
            return lo, lo + b.astype(I64)
        return window

    def _access_address(self, op):
        """``values, state -> (buffer, element indices)`` of a load or store, its scalar offset
        (ir/ops.py: the same on every active lane of a warp; with a bound, a negative off or
        soffset puts the whole access out of range) added where it has one; a "u32" access's
        promise checked."""
        access = self._access_address_of(op)
        if op.attrs.get("u32"):
            so = access_operands(op)[4]
            return _promised_u32(access, self.slot(op.operands[1]),
                                 None if so is None else self.slot(so), op.operands[0].type.elem, op)
        return access

    def _access_address_of(self, op):
        p, o, _, bound, so = access_operands(op)
        address = self._address(p, o)
        if so is None:
            return lambda values, state: address(values)
        ss, sso, vec, ws = self.slot(o), self.slot(so), op.attrs["vec"], self.ws

        def with_soffset(values, state, _op=op):
            buf, idx = address(values)
            soff = _full(values[sso], state.T).astype(I64)
            _check_uniform(state, _op, soff, ws)
            idx = idx + soff
            if bound is not None:  # off and soffset are unsigned in the buffer unit
                out = (values[ss] < 0) | (soff < 0)
                idx = np.where(out, values[sp][1] - vec, idx)
            return buf, idx
        sp = self.slot(p)
        return with_soffset

    def exec_load(self, op):
        p, _, _, bound, _ = access_operands(op)
        window = self._window(p, bound)
        vec = op.attrs["vec"]
        elem = p.type.elem
        nd = elem.np_dtype
        zero = nd.type(0)
        address, sr = self._access_address(op), self.slot(op.results[0])

        def run(state, _op=op):
            values = state.values
            buf, idx = address(values, state)
            values[sr] = mem_load(state, _op, buf, idx, vec, window(values), state.mask, zero, nd)
        return run

    def exec_store(self, op):
        p, _, v, bound, _ = access_operands(op)
        window = self._window(p, bound)
        vec = op.attrs["vec"]
        address, sv = self._access_address(op), self.slot(v)

        def run(state, _op=op):
            values = state.values
            buf, idx = address(values, state)
            mem_store(state, _op, buf, idx, values[sv], vec, window(values), state.mask)
            state.writes += 1  # a loop that stores is making progress (LoopProgress)
        return run

    # -- asynchronous copies (interp/async_copies.py, which imports this module: at need) ------
    def exec_cp_async(self, op):
        from .async_copies import compile_cp_async
        return compile_cp_async(self, op)

    def exec_lds_load(self, op):
        from .async_copies import compile_lds_load
        return compile_lds_load(self, op)

    def exec_async_commit(self, op):
        from .async_copies import compile_commit
        return compile_commit(self, op)

    def exec_async_wait(self, op):
        from .async_copies import compile_wait
        return compile_wait(self, op)

    # -- threads -----------------------------------------------------------------------------------
    def exec_barrier(self, op):
        self.has_barrier = True

        def run(state, _op=op):
            m = state.mask
            if m is not None:
                if not m.any():
                    return
                a = state.alive
                missing = ~m if a is None else (a & ~m)
                if missing.any():
                    ks = np.flatnonzero(missing)
                    raise BarrierError(
                        f"{where(_op.loc)}: barrier reached by only part of the block: "
                        f"{int(m.sum())} thread(s) arrive while {len(ks)} other(s) that have not "
                        f"exited are in another branch or loop iteration (first: {state.who(ks[0])}); "
                        f"this deadlocks or misbehaves on the GPU")
            if state.shadow is not None:
                state.shadow.barrier()
        return run

    def exec_printf(self, op):
        pyfmt, fixes = _printf_formatter(op.attrs["fmt"], [v.type for v in op.operands])
        ss = [self.slot(v) for v in op.operands]

        def run(state, _op=op):
            values = state.values
            T = state.T
            cols = [_full(values[s], T).tolist() for s in ss]
            m = state.mask
            lanes = range(T) if m is None else np.flatnonzero(m).tolist()
            out = []
            for t in lanes:
                out.append(pyfmt % tuple(fx(c[t]) for fx, c in zip(fixes, cols)))
            if out:
                sys.stdout.write("".join(out))
        return run

    def exec_target_op(self, op):
        self.has_target_op = True
        ins = self.target.instruction(op.attrs["name"])
        if getattr(ins, "kind", None) in ("load", "store"):
            return self._warp_access(op, ins)
        if getattr(ins, "kind", None) == "wgmma":  # warpgroup MMA and its protocol
            from .wgmma import compile_wgmma
            return compile_wgmma(self, op, ins)
        ss = [(self.slot(v), lanes_of(v.type)) for v in op.operands]
        rs = [(self.slot(r), isinstance(r.type, VectorType)) for r in op.results]
        attrs = op.attrs
        ws = self.ws

        def run(state, _op=op):
            values = state.values
            T = state.T
            _require_whole_warps(state, _op, ws)
            args = []
            for s, n in ss:
                x = values[s]
                args.append(np.broadcast_to(x if x.ndim == 2 else x[:, None], (T, x.shape[1] if x.ndim == 2 else 1)))
            res = ins.emulate(args, attrs, ws)
            for (s, isvec), x in zip(rs, res):
                values[s] = x if isvec else x.reshape(T)
        return run

    def _warp_access(self, op, ins):
        """A target instruction that moves shared memory with a lane layout (ldmatrix,
        stmatrix, ds_read_tr: targets/warp_access.py): the row's address lanes each access
        ``vec`` elements at p + off as one aligned vector access (the checks of load/store:
        bounds, alignment, races), and the row's ``emulate`` permutes them across the warp."""
        p, o = op.operands[:2]
        address, vec, ws = self._address(p, o), ins.vec, self.ws
        nd = p.type.elem.np_dtype
        lanes = ins.address_lanes(ws)
        sv = self.slot(op.operands[2]) if ins.kind == "store" else None
        sr = self.slot(op.results[0]) if ins.kind == "load" else None

        def run(state, _op=op):
            values = state.values
            T = state.T
            _require_whole_warps(state, _op, ws)
            m = np.tile(lanes, T // ws)
            if state.mask is not None:
                m = m & state.mask
            buf, idx = address(values)
            if sr is not None:
                rows = mem_load(state, _op, buf, idx, vec, None, m, nd.type(0), nd)
                values[sr] = ins.emulate([np.broadcast_to(rows, (T, vec))], _op.attrs, ws)[0]
            else:
                (rows,) = ins.emulate([_full(values[sv], T)], _op.attrs, ws)
                mem_store(state, _op, buf, idx, rows, vec, None, m)
        return run

    # -- control flow ------------------------------------------------------------------------------
    def exec_return(self, op):
        def run(state, _op=op):
            m = state.mask
            T = state.T
            if m is None:
                state.alive = np.zeros(T, bool)
            else:
                state.alive = ~m if state.alive is None else (state.alive & ~m)
            state.mask = np.zeros(T, bool)
        return run

    def exec_if(self, op):
        cond_slot = self.slot(op.operands[0])
        then_fns, then_yields = self.block(op.regions[0])
        else_fns, else_yields = self.block(op.regions[1])
        result_slots = [self.slot(r) for r in op.results]
        merges = [_merge_fn(r.type) for r in op.results]
        holders = [_placeholder(r.type) for r in op.results]

        def run(state, _op=op):
            values = state.values
            c = values[cond_slot]
            m = state.mask
            if c.shape[0] == 1:
                vals = _run(state, then_fns, then_yields) if c[0] else _run(state, else_fns, else_yields)
            else:
                ct = c if m is None else (c & m)
                ce = ~c if m is None else (m & ~c)
                at, ae = ct.any(), ce.any()
                if at and ae and self.has_waits and then_fns and else_fns:
                    vt, ve = _fork(state, _op, ((ct, then_fns, then_yields),
                                                (ce, else_fns, else_yields)))
                    vals = [mg(c, x, y) for mg, x, y in zip(merges, vt, ve)]
                elif at and ae:
                    state.mask = ct
                    vt = _run(state, then_fns, then_yields)
                    state.mask = ce if state.alive is None else (ce & state.alive)
                    ve = _run(state, else_fns, else_yields)
                    vals = [mg(c, x, y) for mg, x, y in zip(merges, vt, ve)]
                elif at:
                    vals = _run(state, then_fns, then_yields)
                elif ae:
                    vals = _run(state, else_fns, else_yields)
                else:
                    vals = holders
            _restore_mask(state, m)
            for s, v in zip(result_slots, vals):
                values[s] = v
        return run

    def exec_for(self, op):
        lower_slot, upper_slot, step_slot = (self.slot(v) for v in op.operands[:3])
        init_slots = [self.slot(v) for v in op.operands[3:]]
        body = op.regions[0]
        iv_slot = self.slot(body.args[0])
        carried_slots = [self.slot(a) for a in body.args[1:]]
        body_fns, body_yields = self.block(body)
        result_slots = [self.slot(r) for r in op.results]
        merges = [_merge_fn(r.type) for r in op.results]

        def trap(state):
            raise InterpError(f"{where(op.loc)}: for loop with step 0 (a trap on the GPU)")

        def run(state, _op=op):
            values = state.values
            lb, ub, step = values[lower_slot], values[upper_slot], values[step_slot]
            cur = [values[s] for s in init_slots]
            m = state.mask
            if lb.shape[0] == 1 and ub.shape[0] == 1 and step.shape[0] == 1:
                s = int(step[0])
                if s == 0:
                    if (int(lb[0]) < int(ub[0])) or (int(lb[0]) > int(ub[0])):
                        trap(state)
                ivdt = lb.dtype
                for i in range(int(lb[0]), int(ub[0]), s) if s else ():
                    values[iv_slot] = np.array([i], ivdt)
                    for sl, v in zip(carried_slots, cur):
                        values[sl] = v
                    cur = _run(state, body_fns, body_yields)
                    if state.alive is not None:
                        mm = state.alive if m is None else (m & state.alive)
                        if not mm.any():
                            break
                        state.mask = mm
            else:
                iv = lb
                base = m
                step_positive = None
                if step.shape[0] == 1:
                    step_positive = int(step[0]) > 0
                    if int(step[0]) == 0:
                        act = (iv != ub) if base is None else ((iv != ub) & base)
                        if act.any():
                            trap(state)
                while True:
                    if step_positive is None:
                        cond = np.where(step > 0, iv < ub, iv > ub)
                    else:
                        cond = (iv < ub) if step_positive else (iv > ub)
                    act = cond if base is None else (cond & base)
                    if not act.any():
                        break
                    if step_positive is None and (act & (step == 0)).any():
                        trap(state)
                    full = base is None and act.all()
                    state.mask = None if full else act
                    values[iv_slot] = iv
                    for sl, v in zip(carried_slots, cur):
                        values[sl] = v
                    ys = _run(state, body_fns, body_yields)
                    cur = ys if full else [mg(act, y, c) for mg, y, c in zip(merges, ys, cur)]
                    iv = iv + step
                    if state.alive is not None:
                        base = state.alive if base is None else (base & state.alive)
            _restore_mask(state, m)
            for s, v in zip(result_slots, cur):
                values[s] = v
        return run

    def exec_while(self, op):
        init_slots = [self.slot(v) for v in op.operands]
        cond_block, body_block = op.regions
        cond_arg_slots = [self.slot(a) for a in cond_block.args]
        body_arg_slots = [self.slot(a) for a in body_block.args]
        cond_fns, cond_yields = self.block(cond_block)
        body_fns, body_yields = self.block(body_block)
        (cond_slot,) = cond_yields
        result_slots = [self.slot(r) for r in op.results]
        merges = [_merge_fn(r.type) for r in op.results]
        spins = holds_atomics(op)  # a spin loop could repeat forever: LoopProgress reports it
        self.serial_blocks |= spins  # it may wait for an earlier block: blocks one at a time

        def run(state, _op=op):
            values = state.values
            cur = [values[s] for s in init_slots]
            m = state.mask
            base = m
            progress = LoopProgress(_op) if spins else None
            while True:
                state.mask = base
                for sl, v in zip(cond_arg_slots, cur):
                    values[sl] = v
                for f in cond_fns:
                    f(state)
                c = values[cond_slot]
                if base is None and c.shape[0] == 1:
                    if not c[0]:
                        break
                    full, act = True, None
                else:
                    act = c if base is None else (c & base)
                    if not act.any():
                        break
                    full = base is None and act.all()
                state.mask = None if full else act
                for sl, v in zip(body_arg_slots, cur):
                    values[sl] = v
                ys = _run(state, body_fns, body_yields)
                cur = ys if full else [mg(act, y, x) for mg, y, x in zip(merges, ys, cur)]
                if progress is not None:
                    progress.check(state, cur, act)
                if state.alive is not None:
                    base = state.alive if base is None else (base & state.alive)
                    if not base.any():
                        break
            _restore_mask(state, m)
            for s, v in zip(result_slots, cur):
                values[s] = v
        return run

    # -- launching ---------------------------------------------------------------------------------
    def launch(self, grid, block, params, smem_bytes, checking=False):
        """Run the kernel. ``params``: per fn.params, a Buf (pointers) or a Python number."""
        gx, gy, gz = grid
        bx, by, bz = block
        nthreads = bx * by * bz
        nblocks = gx * gy * gz
        fn = self.fn
        bs = fn.attrs.get("block_size")
        if bs and (bx, by, bz) != (bs, 1, 1):
            raise InterpError(f"kernel {fn.name!r} was declared with block={bs}; launched with "
                              f"block={block}")
        if self.has_target_op and nthreads % self.ws:
            raise InterpError(f"kernel {fn.name!r} uses warp-level instructions but its block of "
                              f"{nthreads} threads is not a whole number of {self.ws}-thread warps")
        state = State()
        state.prog = self
        state.paths = state.path = None  # divergent paths that wait for each other (paths.py)
        state.block, state.grid, state.nthreads = (bx, by, bz), (gx, gy, gz), nthreads
        state.bufs = []
        values = state.values = [None] * len(self.slots)
        for s, arr in self.consts:
            values[s] = arr
        for p, s, v in zip(fn.params, self.param_slots, params):
            if isinstance(p.type, PointerType):
                v.id = len(state.bufs)
                state.bufs.append(v)
                values[s] = (v, np.zeros(1, I64))
            elif p.type == TENSOR_MAP:
                values[s] = v  # the opus.TensorMap itself (interp/tma.py reads it)
            elif isinstance(p.type, VectorType):  # a by-value struct's words (opus.mdiv)
                values[s] = v[None, :]
            else:
                values[s] = np.array([v], dtype=p.type.np_dtype)
        # shared memory: one byte array; static arrays first, then the dynamic part
        smem_arr = None
        if self.smem or self.dyn:
            total = self.dyn_base + (smem_bytes if self.dyn else 0)
            smem_arr = np.empty(total, np.uint8)
            for s, d, count, name, off in self.smem_layout:
                b = _smem_buf(smem_arr[off:off + d.nbytes(count)], d, name, off)
                b.id = len(state.bufs)
                state.bufs.append(b)
                values[s] = (b, np.zeros(1, I64))
            for s, d, offset in self.dyn:
                lo = self.dyn_base + offset
                group = d.nbytes(d.pack_elems)  # whole elements (packed: whole groups)
                nbytes = max(0, (total - lo) // group * group)
                b = _smem_buf(smem_arr[lo:lo + nbytes], d,
                              f"dynamic_smem({d.name}, offset={offset})", lo)
                b.id = len(state.bufs)
                state.bufs.append(b)
                values[s] = (b, np.zeros(1, I64))
        state.shadow = Shadow(smem_arr.shape[0], self) if (checking and smem_arr is not None) else None
        state.checking = checking
        nb = max(1, min(nblocks, BATCH_THREADS // nthreads)) if self.batchable else 1
        state.clock = 0  # clock reads count up over the launch (ir/ops.py, clock)
        whiches = {w for _, w in self.specials}
        tcache = {}
        body_f, _ = self.body
        with np.errstate(all="ignore"):
            for base in range(0, nblocks, nb):
                k = min(nb, nblocks - base)
                T = k * nthreads
                state.T, state.block_base = T, base
                sp = tcache.get(k)
                if sp is None:
                    sp = tcache[k] = self._thread_specials(whiches, block, k)
                vals = dict(sp)
                vals.update(self._block_specials(whiches, grid, block, base, k, nthreads))
                for s, w in self.specials:
                    values[s] = vals[w]
                state.mask = None
                state.alive = None
                state.asyncq = None  # copies in flight die with their block
                state.tma = None  # mbarriers and TMA copies: made by new_tma_state below
                state.wgmma = None  # wgmma counters (interp/wgmma.py), made at need
                state.writes, state.named_bars = 0, {}
                if smem_arr is not None:
                    smem_arr.fill(POISON)
                    if state.shadow is not None:
                        state.shadow.new_block()
                state.tma = self.new_tma_state(state)
                try:
                    for f in body_f:
                        f(state)
                    if state.tma is not None:
                        state.tma.finish(state)
                    if state.named_bars:
                        self.check_named_barriers(state)
                except InterpError:
                    raise
                except Exception as e:  # the choke point for errors while running an op
                    raise _internal_error(e, _failing_op(e), fn.name, "running") from e

    def _thread_specials(self, whiches, block, k):
        bx, by, bz = block
        nt = bx * by * bz
        lin = np.tile(np.arange(nt, dtype=np.int32), k)
        out = {}
        for w in whiches:
            if w == "thread_id.x":
                out[w] = lin % bx
            elif w == "thread_id.y":
                out[w] = lin // bx % by
            elif w == "thread_id.z":
                out[w] = lin // (bx * by)
            elif w == "lane_id":
                out[w] = lin % self.ws
            elif w == "warp_id":
                out[w] = lin // self.ws
            elif w.startswith("block_dim."):
                out[w] = np.array([block["xyz".index(w[-1])]], np.int32)
        return out

    def _block_specials(self, whiches, grid, block, base, k, nt):
        gx, gy, gz = grid
        out = {}
        if k == 1:
            b = np.array([base], np.int64)
        else:
            b = np.repeat(np.arange(base, base + k, dtype=np.int64), nt)
        for w in whiches:
            if w == "block_id.x":
                out[w] = (b % gx).astype(np.int32)
            elif w == "block_id.y":
                out[w] = (b // gx % gy).astype(np.int32)
            elif w == "block_id.z":
                out[w] = (b // (gx * gy)).astype(np.int32)
            elif w.startswith("num_blocks."):
                out[w] = np.array([grid["xyz".index(w[-1])]], np.int32)
            elif w.startswith("grid_size."):  # threads: an i32 that wraps as on the GPU
                a = "xyz".index(w[-1])
                out[w] = np.array([grid[a] * block[a]], np.int64).astype(np.int32)
        return out


def _internal_error(error, op, kernel, doing) -> InterpError:
    """``error``, raised while compiling or running ``op`` (None: unknown), as an InterpError
    naming the op's kernel file:line and the kernel."""
    at = f"{where(op.loc)} (kernel {kernel!r})" if op is not None else f"kernel {kernel!r}"
    what = f"op {op.kind!r}" if op is not None else "an op"
    return InterpError(f"{at}: internal interpreter error {doing} {what}: {type(error).__name__}: {error}")


def _failing_op(e):
    op = None
    tb = e.__traceback__
    while tb is not None:
        o = tb.tb_frame.f_locals.get("_op")
        if o is not None:
            op = o
        tb = tb.tb_next
    return op
