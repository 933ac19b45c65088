"""The interpreter's wgmma (targets/nv_wgmma.py): warpgroup-wide issue, shared-memory operands
read through their 64-bit descriptors (swizzle included), and the asynchronous protocol.

Model (per thread; the 128 threads of a warpgroup execute each op together, which is checked):

* ``wgmma``: needs a ``wgmma_fence`` by the thread since its last ``wgmma_wait`` (stricter than
  PTX, which asks for one only where registers were written by other instructions: the
  interpreter cannot see register writes, and a fence per batch is what CUTLASS issues).
  The descriptor of each shared operand is built exactly as the generated code builds it (the
  row's static fields OR the start address) and decoded to the byte address of every element
  (``nv_wgmma.operand_addresses``); the operand must lie inside the buffer its pointer points
  into, a swizzled one in a pattern that starts at its boundary (the view's base aligned to
  256/512/1024 bytes). A and B are read at issue (checking mode: as reads by the warpgroup's
  first thread, so a read of never-written or racing bytes is reported), D is computed then
  and returned with a token, the thread's issue count.
* ``commit``: the thread's wgmmas since its last commit form a group.
* ``wait n``: all but the newest n committed groups complete; each accumulator it returns must
  come from a completed wgmma (its token below the thread's completed count), else an error.
"""
from __future__ import annotations

import numpy as np

from ..targets import nv_wgmma as nv
from .engine import InterpError, MemoryFault, where, _full, I64

__all__ = ["compile_wgmma", "WgmmaState"]

_PATTERN_BYTES = {32: 256, 64: 512, 128: 1024}


class WgmmaState:
    """Per block: each thread's wgmma counters."""

    def __init__(self, T):
        self.issued = np.zeros(T, I64)     # wgmmas issued
        self.fenced = np.zeros(T, bool)    # a fence since the last wait
        self.done = np.zeros(T, I64)       # wgmmas with a smaller index are complete
        self.ncommit = np.zeros(T, I64)    # committed groups
        self.bounds = np.zeros((T, 4), I64)  # issued count at each commit


def _state(state) -> WgmmaState:
    if state.wgmma is None:
        state.wgmma = WgmmaState(state.T)
    return state.wgmma


def _warpgroups(state, op):
    """Indices of the warpgroups whose threads execute the op (all 128 of each, else error)."""
    T = state.T
    if state.nthreads % nv.WARPGROUP:
        raise InterpError(f"{where(op.loc)}: {op.attrs['name']} needs whole warpgroups of "
                          f"{nv.WARPGROUP} threads: the block has {state.nthreads}")
    m = np.ones(T, bool) if state.mask is None else state.mask
    g = m.reshape(-1, nv.WARPGROUP)
    part = g.any(axis=1) & ~g.all(axis=1)
    if part.any():
        k = int(np.argmax(part))
        raise InterpError(f"{where(op.loc)}: {op.attrs['name']} executed by only part of "
                          f"warpgroup {k} ({int(g[k].sum())} of {nv.WARPGROUP} threads, first "
                          f"{state.who(k * nv.WARPGROUP)}): wgmma instructions need the whole "
                          f"warpgroup")
    return np.flatnonzero(g.all(axis=1))


def compile_wgmma(prog, op, ins):
    """The closure that runs ``op`` (a wgmma-family target_op)."""
    if isinstance(ins, nv.WgmmaAtom):
        return _compile_mma(prog, op, ins)
    return {"fence": _compile_fence, "commit": _compile_commit, "wait": _compile_wait}.get(
        ins.op, _compile_setmaxnreg)(prog, op, ins)


def _compile_setmaxnreg(prog, op, ins):
    def run(state, _op=op):
        _warpgroups(state, _op)  # the register budget itself is not modeled
    return run


def _compile_fence(prog, op, ins):
    pairs = [(prog.slot(v), prog.slot(r)) for v, r in zip(op.operands, op.results)]

    def run(state, _op=op):
        for g in _warpgroups(state, _op):
            _state(state).fenced[g * nv.WARPGROUP:(g + 1) * nv.WARPGROUP] = True
        values = state.values
        for s, r in pairs:
            values[r] = values[s]
    return run


def _compile_commit(prog, op, ins):
    def run(state, _op=op):
        st = _state(state)
        for g in _warpgroups(state, _op):
            t = slice(g * nv.WARPGROUP, (g + 1) * nv.WARPGROUP)
            k = int(st.ncommit[t].max())
            if k >= st.bounds.shape[1]:
                st.bounds = np.concatenate([st.bounds, np.zeros_like(st.bounds)], axis=1)
            st.bounds[t, k] = st.issued[t]
            st.ncommit[t] += 1
    return run


def _compile_wait(prog, op, ins):
    n = op.attrs["n"]
    half = len(op.operands) // 2
    vals = [prog.slot(v) for v in op.operands[:half]]
    toks = [(prog.slot(v), v) for v in op.operands[half:]]
    res = [prog.slot(r) for r in op.results]

    def run(state, _op=op):
        st = _state(state)
        values = state.values
        for g in _warpgroups(state, _op):
            t = slice(g * nv.WARPGROUP, (g + 1) * nv.WARPGROUP)
            k = st.ncommit[t] - n
            rows = np.arange(t.start, t.stop)
            reach = np.where(k > 0, st.bounds[rows, np.maximum(k - 1, 0)], 0)
            st.done[t] = np.maximum(st.done[t], reach)
            st.fenced[t] = False
            for s, v in toks:
                tok = _full(values[s], state.T)[t]
                late = tok >= st.done[t]
                if late.any():
                    i = int(np.argmax(late))
                    raise InterpError(
                        f"{where(_op.loc)}: opus.wgmma_wait({n}) returns an accumulator whose "
                        f"wgmma is still in flight in {state.who(t.start + i)} (it is in one of "
                        f"the {n} newest committed groups, or not committed yet): wait with a "
                        f"smaller n, or commit first")
        for s, r in zip(vals, res):
            values[r] = values[s]
    return run


# -- the instruction -----------------------------------------------------------------------------

_MAPS = {}


def _register_map(layout, elems):
    """numpy (rows, cols) [128, elems] of an OperandLayout over the warpgroup (cached)."""
    key = (layout.shape, elems)
    m = _MAPS.get(key)
    if m is None:
        r = np.empty((nv.WARPGROUP, elems), I64)
        c = np.empty((nv.WARPGROUP, elems), I64)
        for t in range(nv.WARPGROUP):
            for i in range(elems):
                r[t, i], c[t, i] = layout.coords(t, i)
        m = _MAPS[key] = (r, c)
    return m


def _uniform(state, op, arr, t, what):
    """The value of ``arr`` over the warpgroup's threads ``t``, which must all agree."""
    x = arr[t]
    bad = x != x[0]
    if bad.any():
        i = int(np.argmax(bad))
        raise InterpError(f"{where(op.loc)}: the {what} must be the same in every thread of the "
                          f"warpgroup: {state.who(t.start)} has {x[0]}, {state.who(t.start + i)} "
                          f"{x[i]}")
    return int(x[0])


def _read_operand(state, op, ptr, off, desc_bits, rows, k, dtype, major, t, what):
    """The (rows x k) operand matrix read through its descriptor, warpgroup threads ``t``."""
    buf, idx = ptr
    T = state.T
    if not hasattr(buf, "arr"):
        ids = _full(buf, T)
        buf = state.bufs[_uniform(state, op, ids, t, f"{what} pointer's buffer")]
    base = _uniform(state, op, _full(idx, T).astype(I64), t, f"{what} pointer")
    e = base + _uniform(state, op, _full(off, T).astype(I64), t, f"{what} offset")
    if buf.space != "shared":
        raise InterpError(f"{where(op.loc)}: the wgmma {what} points into {buf.name}, which is "
                          f"not shared memory")
    isz = dtype.itemsize
    start = buf.addr + e * isz
    if start % 16:
        raise MemoryFault(f"{where(op.loc)}: the wgmma {what} starts at {buf.name}[{e}] (shared "
                          f"byte {start}), not 16-byte aligned (the descriptor drops the low 4 "
                          f"bits)")
    swz = nv.decode_descriptor(desc_bits)["swizzle"]
    pattern = buf.addr + base * isz
    if swz and pattern % _PATTERN_BYTES[swz]:
        raise MemoryFault(
            f"{where(op.loc)}: the wgmma {what}'s {swz}-byte swizzled tile starts at shared byte "
            f"{pattern} ({buf.name}[{base}]): the swizzle pattern starts at a "
            f"{_PATTERN_BYTES[swz]}-byte boundary (alloc_smem(..., align={_PATTERN_BYTES[swz]}))")
    desc = desc_bits | nv.encode_descriptor(start, 0, 0)
    addr = nv.operand_addresses(desc, rows, k, isz, major)
    rel = addr - buf.byte0
    nbytes = buf.arr.shape[0] * isz
    if rel.min() < 0 or rel.max() + isz > nbytes:
        bad = int(rel.max() if rel.max() + isz > nbytes else rel.min())
        raise MemoryFault(f"{where(op.loc)}: the wgmma {what} reads shared byte "
                          f"{bad + buf.byte0}, outside {buf.name} ({buf.arr.shape[0]} elements "
                          f"from byte {buf.byte0})")
    eidx = (rel // isz).reshape(-1)
    if state.shadow is not None:
        state.shadow.read(state, buf, eidx, np.full(eidx.shape, t.start, I64), op)
    return buf.arr[eidx].reshape(rows, k)


def _compile_mma(prog, op, ins):
    m, n, k = ins.shape
    attrs = op.attrs
    slots = [prog.slot(v) for v in op.operands]
    sd, stok = (prog.slot(r) for r in op.results)
    cmap = None

    def run(state, _op=op):
        nonlocal cmap
        if cmap is None:
            cmap = _register_map(ins.layout_c(), ins.elem_c)
        st = _state(state)
        values = state.values
        T = state.T
        groups = _warpgroups(state, _op)
        if ins.a_from == "smem":
            pa, oa, pb, ob, c, scale = (values[s] for s in slots)
        else:
            ra, pb, ob, c, scale = (values[s] for s in slots)
        c, scale = _full(c, T), _full(scale, T)
        d = np.array(c, copy=True)
        tok = np.zeros(T, np.int32)
        for g in groups:
            t = slice(g * nv.WARPGROUP, (g + 1) * nv.WARPGROUP)
            if not st.fenced[t].all():
                raise InterpError(
                    f"{where(_op.loc)}: wgmma without opus.wgmma_fence() since the last "
                    f"opus.wgmma_wait (or the kernel's start) in {state.who(t.start)}: the fence "
                    f"orders the registers' and shared memory's earlier writes before the wgmma")
            if ins.a_from == "smem":
                A = _read_operand(state, _op, pa, oa, attrs["desc_a"], m, k, ins.reg_a,
                                  "MN" if attrs["trans_a"] else "K", t, "A operand")
            else:
                ar, ac = _register_map(ins.layout_a(), ins.elem_a)
                A = np.zeros((m, k), ins.reg_a.np_dtype)
                A[ar, ac] = _full(ra, T)[t]
            B = _read_operand(state, _op, pb, ob, attrs["desc_b"], n, k, ins.reg_b,
                              "MN" if attrs["trans_b"] else "K", t, "B operand").T
            C = np.zeros((m, n), ins.c.np_dtype)
            C[cmap] = c[t]
            s = _uniform(state, _op, scale.astype(I64), t, "scale_d")
            D = ins.compute(A[None], B[None], C[None], [bool(s)], attrs.get("neg_a"),
                            attrs.get("neg_b"))[0]
            d[t] = D[cmap]
            tok[t] = st.issued[t]
            st.issued[t] += 1
        values[sd] = d
        values[stok] = tok
    return run
