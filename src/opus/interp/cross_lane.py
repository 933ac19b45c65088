"""Cross-lane operations in the interpreter: shuffle, dpp, vote, permute, warp_redux (their
semantics are ir/ops.py's, "Cross-lane operations").

The batch holds whole blocks of ``nthreads`` threads; a block's warps are ``warp_size``
consecutive threads by linear index, the last one partial where the block is not a multiple.
Every op here works on a padded copy, one row of ``warp_size`` lanes per warp, so a lane's
neighbours are found by index arithmetic; padding lanes are never members (they count as
exited threads).
"""
from __future__ import annotations

import numpy as np

from ..ir import scalar_of
from .errors import InterpError, InactiveLaneReadError, where

__all__ = ["CrossLaneOps", "dpp_source"]

I64 = np.dtype(np.int64)
_GEOMETRY = {}


def _geometry(T, nt, ws):
    """(pos, lane, P): each batch thread's index in the padded array, its lane in its warp,
    and the padded size."""
    key = (T, nt, ws)
    g = _GEOMETRY.get(key)
    if g is None:
        per_block = -(-nt // ws) * ws
        t = np.arange(T, dtype=I64)
        pos = (t // nt) * per_block + t % nt
        g = _GEOMETRY[key] = (pos, pos % ws, (T // nt) * per_block)
    return g


def _full(x, T):
    return x if x.shape[0] == T else np.broadcast_to(x, (T,) + x.shape[1:])


def _padded(values, pos, P, fill=0):
    out = np.full(P, fill, dtype=values.dtype)
    out[pos] = values
    return out


def dpp_source(ctrl, ws):
    """(source lane, valid) of each lane of a wave for DPP control ``ctrl`` (ir/ops.py, dpp):
    numpy int64 and bool arrays of ``ws`` entries; an invalid lane's source is itself."""
    r = np.arange(ws, dtype=I64)
    p = r % 16
    base = r - p
    valid = np.ones(ws, bool)
    if ctrl <= 0xff:
        s = r - r % 4 + ((ctrl >> (2 * (r % 4))) & 3)
    elif 0x101 <= ctrl <= 0x10f:
        n = ctrl - 0x100
        s, valid = r + n, p + n <= 15
    elif 0x111 <= ctrl <= 0x11f:
        n = ctrl - 0x110
        s, valid = r - n, p >= n
    elif 0x121 <= ctrl <= 0x12f:
        s = base + (p - (ctrl - 0x120)) % 16
    elif ctrl == 0x130:
        s, valid = r + 1, r < ws - 1
    elif ctrl == 0x138:
        s, valid = r - 1, r > 0
    elif ctrl == 0x134:
        s = (r + 1) % ws
    elif ctrl == 0x13c:
        s = (r - 1) % ws
    elif ctrl == 0x140:
        s = base + 15 - p
    elif ctrl == 0x141:
        s = r - p % 8 + 7 - p % 8
    elif ctrl == 0x142:
        s, valid = base - 1, r >= 16
    elif ctrl == 0x143:
        s, valid = np.full(ws, 31, I64), r >= 32
    else:
        raise ValueError(f"dpp control {ctrl:#x} is not one opus knows")
    return np.where(valid, s, r), valid


class _Warps:
    """The warp geometry and member lanes of one execution of a cross-lane op."""

    def __init__(self, state, op, ws, mask_values=None):
        T, nt = state.T, state.nthreads
        self.pos, self.lane, self.P = _geometry(T, nt, ws)
        self.ws, self.T = ws, T
        act = np.ones(T, bool) if state.mask is None else state.mask
        if mask_values is not None:
            _check_member_mask(state, op, _full(mask_values, T), self.pos, self.lane, act, ws)
        self.members = act
        self.memp = _padded(act, self.pos, self.P, False)


def _check_member_mask(state, op, mask, pos, lane, act, ws):
    """An explicit member mask: every executing lane is in it, and every lane in it that has
    not exited executes the op (else NVIDIA's *.sync waits for it forever)."""
    inm = ((mask.astype(np.uint64) >> lane.astype(np.uint64)) & np.uint64(1)).astype(bool)
    out = act & ~inm
    if out.any():
        k = int(np.flatnonzero(out)[0])
        raise InterpError(f"{where(op.loc)}: {state.who(k)} (lane {int(lane[k])}) executes a "
                          f"cross-lane operation whose member mask {int(mask[k]):#x} leaves it "
                          f"out: every executing lane must be in the mask")
    alive = np.ones(state.T, bool) if state.alive is None else state.alive
    missing = alive & ~act  # threads elsewhere (another branch), not exited
    if missing.any():
        P = int(pos.max()) // ws * ws + ws
        maskp = np.zeros(P, np.uint64)
        maskp[pos[act]] = mask[act].astype(np.uint64)
        warp_mask = np.bitwise_or.reduce(maskp.reshape(-1, ws), axis=1)
        wanted = ((warp_mask[pos // ws] >> lane.astype(np.uint64)) & np.uint64(1)).astype(bool)
        bad = missing & wanted
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InterpError(f"{where(op.loc)}: the member mask names lane {int(lane[k])} "
                              f"({state.who(k)}), which has not exited but does not execute "
                              f"this cross-lane operation (on NVIDIA the warp waits for it "
                              f"forever)")


def _inactive_read(state, op, warps, readers, src_lanes, what):
    """Checking mode: a member lane read a lane that is not a member (ir/ops.py)."""
    k = int(np.flatnonzero(readers)[0])
    src_lane = int(src_lanes[k])
    raise InactiveLaneReadError(
        f"{where(op.loc)}: {what}: {state.who(k)} (lane {int(warps.lane[k])}) reads lane "
        f"{src_lane} of its warp, which does not execute this operation (inactive or exited): "
        f"the value is undefined on the GPU (the interpreter gives 0 outside checking mode)")


def _shuffle_source(mode, width, lane, src, ws):
    """The lane each lane reads (ir/ops.py, shuffle)."""
    base = lane & ~(width - 1)
    d = src & (ws - 1)
    if mode == "idx":
        return base + (src & (width - 1))
    if mode == "up":
        j = lane - d
        return np.where(j < base, lane, j)
    j = lane + d if mode == "down" else lane ^ d
    return np.where(j > base + width - 1, lane, j)


_REDUX = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}


def _identity(op, nd):
    info = np.iinfo(nd)
    return {"add": 0, "min": info.max, "max": info.min, "and": -1 if info.min < 0 else info.max,
            "or": 0, "xor": 0}[op]


class CrossLaneOps:
    """The exec_ methods of the cross-lane ops (mixed into interp.engine.Program)."""

    def _mask_slot(self, op):
        return self.slot(op.operands[-1]) if op.attrs.get("mask") else None

    def exec_shuffle(self, op):
        sx, ssrc, sr = self.slot(op.operands[0]), self.slot(op.operands[1]), self.slot(op.results[0])
        smask = self._mask_slot(op)
        mode, width, ws = op.attrs["mode"], op.attrs["width"], self.ws
        what = f"shfl ({mode}, width {width})"

        def run(state, _op=op):
            values = state.values
            T = state.T
            w = _Warps(state, _op, ws, None if smask is None else values[smask])
            src = _full(values[ssrc], T).astype(I64)
            j = _shuffle_source(mode, width, w.lane, src, ws)
            srcpos = w.pos - w.lane + j
            x = _padded(_full(values[sx], T), w.pos, w.P)
            ok = w.memp[srcpos]
            bad = w.members & ~ok
            if bad.any() and state.checking:
                _inactive_read(state, _op, w, bad, j, what)
            values[sr] = np.where(ok, x[srcpos], x.dtype.type(0))
        return run

    def exec_dpp(self, op):
        so, sx, sr = self.slot(op.operands[0]), self.slot(op.operands[1]), self.slot(op.results[0])
        a, ws = op.attrs, self.ws
        src_lane, valid = dpp_source(a["ctrl"], ws)
        r = np.arange(ws)
        written = (((a["row_mask"] >> (r // 16)) & 1) & ((a["bank_mask"] >> (r % 16 // 4)) & 1)
                   ).astype(bool)
        bound_ctrl, strict = a["bound_ctrl"], a.get("strict", False)

        def run(state, _op=op):
            values = state.values
            T = state.T
            w = _Warps(state, _op, ws)
            old = _full(values[so], T)
            srcpos = w.pos - w.lane + src_lane[w.lane]
            x = _padded(_full(values[sx], T), w.pos, w.P)
            src_ok = valid[w.lane] & w.memp[srcpos]
            if strict and state.checking:
                bad = w.members & written[w.lane] & valid[w.lane] & ~w.memp[srcpos]
                if bad.any():
                    _inactive_read(state, _op, w, bad, src_lane[w.lane], "a DPP move")
            moved = np.where(src_ok, x[srcpos], x.dtype.type(0) if bound_ctrl else old)
            values[sr] = np.where(written[w.lane], moved, old)
        return run

    def exec_vote(self, op):
        sp, sr = self.slot(op.operands[0]), self.slot(op.results[0])
        smask = self._mask_slot(op)
        mode, ws = op.attrs["mode"], self.ws
        rd = scalar_of(op.results[0].type).np_dtype
        weights = (np.uint64(1) << np.arange(ws, dtype=np.uint64))

        def run(state, _op=op):
            values = state.values
            T = state.T
            w = _Warps(state, _op, ws, None if smask is None else values[smask])
            pred = _full(values[sp], T).astype(bool)
            yes = _padded(w.members & pred, w.pos, w.P, False).reshape(-1, ws)
            warp = w.pos // ws
            if mode == "ballot":
                bits = (yes * weights).sum(axis=1, dtype=np.uint64)
                values[sr] = bits[warp].astype(rd)
            elif mode == "any":
                values[sr] = yes.any(axis=1)[warp]
            else:
                no = _padded(w.members & ~pred, w.pos, w.P, False).reshape(-1, ws)
                values[sr] = ~no.any(axis=1)[warp]
        return run

    def exec_permute(self, op):
        sx, sa, sr = self.slot(op.operands[0]), self.slot(op.operands[1]), self.slot(op.results[0])
        ws = self.ws

        def run(state, _op=op):
            values = state.values
            T = state.T
            w = _Warps(state, _op, ws)
            x = _full(values[sx], T)
            dst = (_full(values[sa], T).astype(I64) >> 2) & (ws - 1)
            dstpos = w.pos - w.lane + dst
            best = np.full(w.P, -1, I64)
            senders = np.flatnonzero(w.members)
            np.maximum.at(best, dstpos[senders], senders)  # the highest sending lane wins
            got = best[w.pos]
            values[sr] = np.where(got >= 0, x[np.maximum(got, 0)], x.dtype.type(0))
        return run

    def exec_warp_redux(self, op):
        sx, sr = self.slot(op.operands[0]), self.slot(op.results[0])
        smask = self._mask_slot(op)
        kind, ws = op.attrs["op"], self.ws
        nd = scalar_of(op.results[0].type).np_dtype
        ufunc, ident = _REDUX[kind], _identity(kind, nd)

        def run(state, _op=op):
            values = state.values
            T = state.T
            w = _Warps(state, _op, ws, None if smask is None else values[smask])
            if state.checking:
                _require_whole_warp(state, _op, w)
            x = np.where(w.members, _full(values[sx], T), nd.type(ident))
            rows = _padded(x, w.pos, w.P, nd.type(ident)).reshape(-1, ws)
            if kind == "add":
                tot = rows.astype(np.uint64).sum(axis=1, dtype=np.uint64).astype(nd)
            else:
                tot = ufunc.reduce(rows, axis=1)
            values[sr] = tot[w.pos // ws]
        return run


def _require_whole_warp(state, op, w):
    """warp_reduce asks for whole groups: a lane of an executing warp that has not exited but
    does not take part (checking mode)."""
    alive = np.ones(state.T, bool) if state.alive is None else state.alive
    warp = w.pos // w.ws
    busy = np.zeros(w.P // w.ws, bool)
    busy[warp[w.members]] = True
    bad = alive & ~w.members & busy[warp]
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise InactiveLaneReadError(
            f"{where(op.loc)}: warp reduction: {state.who(k)} (lane {int(w.lane[k])}) has not "
            f"exited but does not take part: a warp reduction needs every lane of its groups")
