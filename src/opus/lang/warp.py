"""Cross-lane operations: shuffles, AMD DPP moves, votes and lane masks, lane permutes, and the
warp reductions and scans built on them (semantics: ir/ops.py, "Cross-lane operations").

The IR ops move 32-bit values; every other type goes through them here: 8/16-bit values and
bools widened to 32 bits, 64-bit ones as two halves, vectors element by element. Where a
compile-time lane pattern has a cheaper AMD instruction than ds_bpermute (a DPP move, a
readlane) the op records that lowering; the result is the shuffle's in every case. Reductions
and scans pick the fastest primitive the target table offers: redux.sync for whole-warp 32-bit
integers (NVIDIA sm_80+), DPP row operations on AMD, butterfly shuffles elsewhere.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import Value, VectorType, scalar_of, type_str
from .context import ctx, TraceError
from .values import emit1, as_value, cast, bitcast, binary, compare, to_bool, const
from .vectors import make_vector

__all__ = ["shfl", "shfl_up", "shfl_down", "shfl_xor", "mov_dpp", "upd_dpp", "dpp", "ballot",
           "any_lanes", "all_lanes", "warp_any", "warp_all", "active_mask", "lanemask_lt",
           "lanemask_le", "lanemask_gt", "lanemask_ge", "permute", "bpermute", "warp_reduce",
           "warp_scan"]

_WORD = ("i32", "u32", "f32")  # the types the IR's cross-lane ops move as they are


def _err(msg):
    raise TraceError(msg)


def _describe(x):
    return type_str(x.type) if isinstance(x, Value) else f"{type(x).__name__} {x!r}"


def _warp_size():
    return ctx().target.warp_size


def _mask_type():
    """A lane mask: one bit per lane of the warp."""
    return dt.u32 if _warp_size() == 32 else dt.u64


def _width(what, width):
    ws = _warp_size()
    if width is None:
        return ws
    if type(width) is not int or width < 1 or width > ws or width & (width - 1):
        _err(f"{what}: width must be a compile-time power of two from 1 to the warp size "
             f"({ws} on {ctx().target.name}), got {_describe(width)}")
    return width


def _value(what, x):
    if isinstance(x, Value):
        if isinstance(x.type, (VectorType, DType)):
            return x
        _err(f"{what} moves numbers, not {_describe(x)}")
    if isinstance(x, (bool, int, float)):
        return as_value(x)
    _err(f"{what}: expected a run-time value or a Python number, got {_describe(x)}")


def _lane_arg(what, name, v):
    """An i32 lane index, delta or mask: a Python int or a run-time integer."""
    if type(v) is int:
        if not -2 ** 31 <= v < 2 ** 31:
            _err(f"{what}: {name} {v} does not fit in an i32")
        return const(v, dt.i32)
    if isinstance(v, Value) and not isinstance(v.type, VectorType) and scalar_of(v.type).is_int:
        return v if v.type == dt.i32 else cast(v, dt.i32)
    _err(f"{what}: {name} must be an integer (a Python int or a run-time integer scalar), got "
         f"{_describe(v)}")


def _member_mask(what, mask):
    if mask is None:
        return None
    mt = _mask_type()
    if type(mask) is int:
        if not 0 <= mask < 2 ** mt.bits:
            _err(f"{what}: mask {mask:#x} is not a {mt.bits}-bit lane mask")
        return const(mask, mt)
    if isinstance(mask, Value) and not isinstance(mask.type, VectorType) and \
            scalar_of(mask.type).is_int:
        return cast(mask, mt)
    _err(f"{what}: mask must be a lane mask ({mt.name}: a Python int or a run-time integer), "
         f"got {_describe(mask)}")


# -- moving any type through 32-bit words -------------------------------------------------------

def _words(x):
    """The 32-bit words of scalar ``x`` and the function rebuilding its type from moved words."""
    e = scalar_of(x.type)
    if e.name in _WORD:
        return [x], lambda ws: ws[0]
    if e.is_bool:
        return [cast(x, dt.u32)], lambda ws: compare("ne", ws[0], 0)
    if e.bits == 64:
        u = bitcast(x, dt.u64)
        lo, hi = cast(u, dt.u32), cast(binary("shr", u, 32), dt.u32)

        def join(ws):
            w = binary("or", binary("shl", cast(ws[1], dt.u64), 32), cast(ws[0], dt.u64))
            return bitcast(w, e)
        return [lo, hi], join
    if e.bits in (8, 16) and not e.packed:
        ut = dt.u8 if e.bits == 8 else dt.u16
        return [cast(bitcast(x, ut), dt.u32)], lambda ws: bitcast(cast(ws[0], ut), e)
    _err(f"cross-lane operations move 8, 16, 32 and 64-bit values and bools, not {e.name}")


def _move(fn, *xs):
    """``fn`` applied to the 32-bit words of ``xs`` (values of one type; vectors element by
    element), the result rebuilt in that type."""
    t = xs[0].type
    if isinstance(t, VectorType):
        return make_vector(*[_move(fn, *[x[i] for x in xs]) for i in range(t.n)])
    parts = [_words(x) for x in xs]
    moved = [fn(*ws) for ws in zip(*[p[0] for p in parts])]
    return parts[-1][1](moved)


# -- shuffles -----------------------------------------------------------------------------------

def _quad_perm_ctrl(sel):
    return sel[0] | sel[1] << 2 | sel[2] << 4 | sel[3] << 6


def _amd_lowering(mode, src, width, ws):
    """A DPP move or readlane giving the shuffle's lanes for compile-time ``src`` (AMD), or
    None for ds_bpermute: ('dpp', ctrl, old_is_x) or 'readlane'."""
    if type(src) is not int:
        return None
    d = src & (ws - 1)
    if mode == "xor" and 1 <= d <= 3 and d < width:
        return ("dpp", _quad_perm_ctrl([i ^ d for i in range(4)]), False)
    if mode == "xor" and d == 8 and width >= 16:
        return ("dpp", 0x128, False)  # row_ror:8: lane p of a row reads p ^ 8
    if mode in ("up", "down") and width == 16 and 1 <= d <= 15:
        return ("dpp", (0x110 if mode == "up" else 0x100) + d, True)  # row_shr / row_shl
    if mode in ("up", "down") and width == ws and d == 1:
        return ("dpp", 0x138 if mode == "up" else 0x130, True)  # wave_shr1 / wave_shl1
    if mode == "idx" and width == 4:
        return ("dpp", _quad_perm_ctrl([src & 3] * 4), False)
    if mode == "idx" and width == ws:
        return "readlane"
    return None


def _shuffle(what, x, src, mode, width, mask):
    x = _value(what, x)
    width = _width(what, width)
    s = _lane_arg(what, "the lane" if mode in ("idx", "xor") else "delta", src)
    m = _member_mask(what, mask)
    t = ctx().target
    lowering = _amd_lowering(mode, src, width, t.warp_size) if t.dpp_missing is None else None
    attrs = {"mode": mode, "width": width, "mask": m is not None, "lowering": lowering}
    ops = [s] + ([m] if m is not None else [])
    return _move(lambda w: emit1("shuffle", [w] + ops, w.type, attrs), x)


_SHFL_DOC = """{summary}

Lanes form groups of ``width`` consecutive lanes (CUDA's ``__shfl_{cuda}sync`` width). {rule}
Every lane reading must take part: a lane that does not execute the shuffle (inactive or
exited) gives an undefined value on the GPU (0 in the interpreter, whose checking mode reports
the read). Any type: 8/16-bit values and bools move as 32 bits, 64-bit ones as two 32-bit
halves, vectors element by element. NVIDIA: ``shfl.sync.{ptx}`` (member mask: the lanes active
at the call, or ``mask``). AMD: ``ds_bpermute_b32``, or one DPP move / ``v_readlane_b32`` where a
compile-time {arg} allows ({amd}).

:param x: the value this lane offers
:type x: run-time value (any scalar or vector type) or Python number
:param {arg}: {arg_doc}
:type {arg}: run-time integer or Python int
:param width: the group size: a power of two from 1 to the warp size (default: the warp size)
:type width: int (compile-time) or None
:param mask: the member lanes (NVIDIA's membermask; every lane executing must be in it and
    every lane in it that has not exited must execute the shuffle); None: the active lanes
:type mask: run-time integer or Python int (a u32/u64 lane mask), or None
:returns: the value offered by the lane read, of ``x``'s type
:targets: all targets
"""


def shfl(x, src_lane, width=None, mask=None):
    return _shuffle("opus.shfl", x, src_lane, "idx", width, mask)


def shfl_up(x, delta, width=None, mask=None):
    return _shuffle("opus.shfl_up", x, delta, "up", width, mask)


def shfl_down(x, delta, width=None, mask=None):
    return _shuffle("opus.shfl_down", x, delta, "down", width, mask)


def shfl_xor(x, lane_mask, width=None, mask=None):
    return _shuffle("opus.shfl_xor", x, lane_mask, "xor", width, mask)


shfl.__doc__ = _SHFL_DOC.format(
    summary="The value of lane ``src_lane`` of this lane's group (the original's ``shfl``).",
    cuda="", rule="Lane l reads lane ``(l & ~(width-1)) + src_lane % width``.", ptx="idx",
    arg="src_lane", arg_doc="the lane read, counted within the group (taken modulo width)",
    amd="width 4: quad_perm; width = warp size: readlane, whose result is wave-uniform")
shfl_up.__doc__ = _SHFL_DOC.format(
    summary="The value of the lane ``delta`` below this one in its group.", cuda="up_",
    rule="Lane l reads lane ``l - delta``, or keeps its own value where that falls below its "
         "group; delta is taken modulo the warp size.", ptx="up", arg="delta",
    arg_doc="how many lanes down to read from", amd="width 16: row_shr, width 64: wave_shr")
shfl_down.__doc__ = _SHFL_DOC.format(
    summary="The value of the lane ``delta`` above this one in its group.", cuda="down_",
    rule="Lane l reads lane ``l + delta``, or keeps its own value where that falls past its "
         "group; delta is taken modulo the warp size.", ptx="down", arg="delta",
    arg_doc="how many lanes up to read from", amd="width 16: row_shl, width 64: wave_shl")
shfl_xor.__doc__ = _SHFL_DOC.format(
    summary="The value of lane ``l ^ lane_mask`` (a butterfly exchange).", cuda="xor_",
    rule="Lane l reads lane ``l ^ lane_mask`` (lane_mask modulo the warp size), or keeps its "
         "own value where that lies past its group (so a lane_mask >= width reads an earlier "
         "group, never a later one, as CUDA documents).", ptx="bfly", arg="lane_mask",
    arg_doc="the lane-index bits to flip", amd="lane_mask 1, 2, 3: quad_perm; 8: row_ror:8")


# -- DPP ----------------------------------------------------------------------------------------

class DppCtrl(int):
    """A DPP control value (the dpp_ctrl field of GFX9 DPP16); ``int`` for the builtins."""

    def __new__(cls, value, text):
        obj = super().__new__(cls, value)
        obj.text = text
        return obj

    def __repr__(self):
        return f"opus.dpp.{self.text}"


def _shift(name, base, n):
    if type(n) is not int or not 1 <= n <= 15:
        _err(f"opus.dpp.{name}: the shift must be a compile-time int from 1 to 15, got "
             f"{_describe(n)}")
    return DppCtrl(base + n, f"{name}({n})")


def _fixed(value, name):
    """A control without arguments, as a static method of ``dpp``."""
    def make():
        return DppCtrl(value, f"{name}()")
    make.__name__ = name
    return staticmethod(make)


class dpp:
    """The DPP controls of AMD GFX9 (CDNA3 ISA, "DPP"; ``opus.mov_dpp`` / ``opus.upd_dpp``
    take them, or the raw numbers the original passes). Rows are 16 lanes; lane r of a row
    reads, for:

    - ``dpp.quad_perm(a, b, c, d)``: lane a, b, c or d of its quad (by r % 4); 0x00-0xff
    - ``dpp.row_shl(n)`` / ``dpp.row_shr(n)``: r + n / r - n in the row (n = 1..15; lanes past
      the row's edge read no lane); ``dpp.row_ror(n)``: (r - n) mod 16
    - ``dpp.wave_shl()``, ``dpp.wave_shr()`` (the wave shifted by one lane, the end lane reads
      no lane), ``dpp.wave_rol()``, ``dpp.wave_ror()`` (rotated)
    - ``dpp.row_mirror()``: 15 - r; ``dpp.row_half_mirror()``: 7 - r within each half-row
    - ``dpp.row_bcast15()``: lane 15 of the row before (row 0 reads no lane);
      ``dpp.row_bcast31()``: lane 31, in rows 2 and 3 (rows 0 and 1 read no lane)

    A lane reading no lane (or an inactive one) gets 0 with ``bound_ctrl=True``, else keeps
    ``old``. Each returns a ``DppCtrl`` (an int).

    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA has no DPP)
    """

    @staticmethod
    def quad_perm(a, b, c, d):
        sel = (a, b, c, d)
        if any(type(s) is not int or not 0 <= s <= 3 for s in sel):
            _err(f"opus.dpp.quad_perm: each selector must be a compile-time int 0..3, got {sel}")
        return DppCtrl(_quad_perm_ctrl(sel), f"quad_perm{sel}")

    @staticmethod
    def row_shl(n):
        return _shift("row_shl", 0x100, n)

    @staticmethod
    def row_shr(n):
        return _shift("row_shr", 0x110, n)

    @staticmethod
    def row_ror(n):
        return _shift("row_ror", 0x120, n)

    wave_shl = _fixed(0x130, "wave_shl")
    wave_rol = _fixed(0x134, "wave_rol")
    wave_shr = _fixed(0x138, "wave_shr")
    wave_ror = _fixed(0x13C, "wave_ror")
    row_mirror = _fixed(0x140, "row_mirror")
    row_half_mirror = _fixed(0x141, "row_half_mirror")
    row_bcast15 = _fixed(0x142, "row_bcast15")
    row_bcast31 = _fixed(0x143, "row_bcast31")


def _valid_ctrl(c):
    return (0 <= c <= 0xFF or 0x101 <= c <= 0x10F or 0x111 <= c <= 0x11F or 0x121 <= c <= 0x12F
            or c in (0x130, 0x134, 0x138, 0x13C, 0x140, 0x141, 0x142, 0x143))


def _dpp_attrs(what, ctrl, row_mask, bank_mask, bound_ctrl, strict=False):
    t = ctx().target
    try:
        t.require_dpp(what)
    except Exception as e:  # UnsupportedOnTarget: at the kernel's line
        _err(str(e))
    if type(ctrl) not in (int, DppCtrl) or not _valid_ctrl(ctrl):
        _err(f"{what}: ctrl must be a compile-time DPP control (opus.dpp.quad_perm(...), "
             f"row_shl/shr/ror(1..15), wave_shl/shr/rol/ror(), row_mirror(), "
             f"row_half_mirror(), row_bcast15/31(), or its number), got {_describe(ctrl)}"
             + (f" = {ctrl:#x}, which is no GFX9 control" if type(ctrl) is int else ""))
    for name, m in (("row_mask", row_mask), ("bank_mask", bank_mask)):
        if type(m) is not int or not 0 <= m <= 0xF:
            _err(f"{what}: {name} must be a compile-time int from 0 to 0xf (one bit per "
                 f"{'row' if name == 'row_mask' else 'bank'}), got {_describe(m)}")
    if type(bound_ctrl) is not bool:
        _err(f"{what}: bound_ctrl must be a compile-time bool, got {_describe(bound_ctrl)}")
    return {"ctrl": int(ctrl), "row_mask": row_mask, "bank_mask": bank_mask,
            "bound_ctrl": bound_ctrl, "strict": strict}


def _dpp(attrs, old, x):
    return _move(lambda o, w: emit1("dpp", [o, w], w.type, attrs), old, x)


def upd_dpp(old, x, ctrl, row_mask=0xF, bank_mask=0xF, bound_ctrl=True):
    """AMD DPP move with an old value (``__builtin_amdgcn_update_dpp``; the original's
    ``upd_dpp``): each lane gets ``x`` of the lane ``ctrl`` names (``opus.dpp``). A lane of a
    row or bank whose ``row_mask`` / ``bank_mask`` bit is 0 is not written and gives ``old``;
    a lane whose source is past the row or wave edge, or inactive, gives 0 with
    ``bound_ctrl``, else ``old``. Any type (moved as 32-bit words, as ``opus.shfl``).

    :param old: the value of lanes not written
    :type old: run-time value or Python number (converted to ``x``'s type)
    :param x: the value each lane offers
    :type x: run-time value (any scalar or vector type)
    :param ctrl: the lane pattern: ``opus.dpp.row_shr(1)`` ... or its dpp_ctrl number
    :type ctrl: DppCtrl or int (compile-time)
    :param row_mask: rows (16 lanes each) written, one bit per row
    :type row_mask: int (compile-time, 0..0xf)
    :param bank_mask: banks written (lanes 4b..4b+3 of each row), one bit per bank
    :type bank_mask: int (compile-time, 0..0xf)
    :param bound_ctrl: a lane reading no lane gets 0 (True, the original's default) or
        ``old`` (False)
    :type bound_ctrl: bool (compile-time)
    :returns: the moved value, of ``x``'s type
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA has no DPP)
    """
    attrs = _dpp_attrs("opus.upd_dpp", ctrl, row_mask, bank_mask, bound_ctrl)
    x = _value("opus.upd_dpp", x)
    old = as_value(old, scalar_of(x.type)) if not isinstance(old, Value) else old
    if old.type != x.type:
        if isinstance(x.type, VectorType) and not isinstance(old.type, VectorType):
            old = make_vector(*[cast(old, x.type.elem)] * x.type.n)
        else:
            _err(f"opus.upd_dpp: old ({_describe(old)}) and x ({_describe(x)}) must have one "
                 f"type")
    return _dpp(attrs, old, x)


def mov_dpp(x, ctrl, row_mask=0xF, bank_mask=0xF, bound_ctrl=True):
    """AMD DPP move (``__builtin_amdgcn_mov_dpp``; the original's ``mov_dpp``): ``upd_dpp``
    with ``old`` = 0, so lanes not written give 0 (on the hardware they keep whatever the
    register held; opus defines them).

    Example: ``y = opus.mov_dpp(x, opus.dpp.quad_perm(1, 0, 3, 2))`` swaps neighbours.

    :param x: the value each lane offers
    :type x: run-time value (any scalar or vector type)
    :param ctrl: the lane pattern: ``opus.dpp.row_shr(1)`` ... or its dpp_ctrl number
    :type ctrl: DppCtrl or int (compile-time)
    :param row_mask: rows written, one bit per row
    :type row_mask: int (compile-time, 0..0xf)
    :param bank_mask: banks written, one bit per bank
    :type bank_mask: int (compile-time, 0..0xf)
    :param bound_ctrl: a lane reading no lane gets 0 (True, the original's default) or 0 as
        ``old`` (False: the same value here)
    :type bound_ctrl: bool (compile-time)
    :returns: the moved value, of ``x``'s type
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA has no DPP)
    """
    attrs = _dpp_attrs("opus.mov_dpp", ctrl, row_mask, bank_mask, bound_ctrl)
    x = _value("opus.mov_dpp", x)
    zero = as_value(0, scalar_of(x.type)) if not isinstance(x.type, VectorType) else \
        make_vector(*[as_value(0, x.type.elem)] * x.type.n)
    return _dpp(attrs, zero, x)


# -- votes and lane masks -----------------------------------------------------------------------

def _vote(what, pred, mode, mask):
    if isinstance(pred, Value) and isinstance(pred.type, VectorType):
        _err(f"{what}: the predicate must be a scalar, got {_describe(pred)}")
    if not isinstance(pred, (Value, bool, int)):
        _err(f"{what}: the predicate must be a bool (or an int, nonzero = true), got "
             f"{_describe(pred)}")
    p = to_bool(pred, f"{what} predicate")
    m = _member_mask(what, mask)
    rt = _mask_type() if mode == "ballot" else dt.bool_
    return emit1("vote", [p] + ([m] if m is not None else []), rt,
                 {"mode": mode, "mask": m is not None})


def ballot(pred, mask=None):
    """The lanes of the warp whose ``pred`` is true, as a lane mask (bit l: lane l).
    NVIDIA ``vote.sync.ballot``, AMD ``v_cmp`` into an SGPR pair. Lanes that do not execute it
    give 0 bits.

    :param pred: this lane's predicate (an int counts as nonzero = true)
    :type pred: run-time bool or integer, or Python bool
    :param mask: the member lanes (as opus.shfl's); None: the active lanes
    :type mask: run-time integer or Python int, or None
    :returns: the lane mask, wave-uniform
    :rtype: run-time u32 (32-lane warps) or u64 (AMD's 64-lane waves)
    :targets: all targets
    """
    return _vote("opus.ballot", pred, "ballot", mask)


def any_lanes(pred, mask=None):
    """Whether ``pred`` is true on any lane taking part (CUDA ``__any_sync``; also
    ``opus.warp_any``).

    :param pred: this lane's predicate (an int counts as nonzero = true)
    :type pred: run-time bool or integer, or Python bool
    :param mask: the member lanes (as opus.shfl's); None: the active lanes
    :type mask: run-time integer or Python int, or None
    :returns: the same bool in every lane
    :rtype: run-time bool
    :targets: all targets
    """
    return _vote("opus.any_lanes", pred, "any", mask)


def all_lanes(pred, mask=None):
    """Whether ``pred`` is true on every lane taking part (CUDA ``__all_sync``; also
    ``opus.warp_all``, the original's name).

    :param pred: this lane's predicate (an int counts as nonzero = true)
    :type pred: run-time bool or integer, or Python bool
    :param mask: the member lanes (as opus.shfl's); None: the active lanes
    :type mask: run-time integer or Python int, or None
    :returns: the same bool in every lane
    :rtype: run-time bool
    :targets: all targets
    """
    return _vote("opus.all_lanes", pred, "all", mask)


warp_any = any_lanes
warp_all = all_lanes


def active_mask():
    """The lanes of the warp executing this call, as a lane mask (CUDA ``__activemask()``,
    AMD's EXEC: ``ballot(True)``).

    :returns: the lane mask
    :rtype: run-time u32 (32-lane warps) or u64 (64-lane waves)
    :targets: all targets
    """
    return _vote("opus.active_mask", True, "ballot", None)


def _lane_bits():
    from .threads import lane_id
    return cast(lane_id(), _mask_type())


def lanemask_lt():
    """The lanes below this one: ``(1 << lane) - 1`` (PTX ``%lanemask_lt``).

    :returns: the lane mask
    :rtype: run-time u32 (32-lane warps) or u64 (64-lane waves)
    :targets: all targets
    """
    return binary("sub", binary("shl", 1, _lane_bits()), 1)


def lanemask_le():
    """This lane and the ones below: ``(2 << lane) - 1`` (PTX ``%lanemask_le``).

    :returns: the lane mask
    :rtype: run-time u32 (32-lane warps) or u64 (64-lane waves)
    :targets: all targets
    """
    return binary("sub", binary("shl", 2, _lane_bits()), 1)


def lanemask_gt():
    """The lanes above this one: ``~lanemask_le()`` (PTX ``%lanemask_gt``).

    :returns: the lane mask
    :rtype: run-time u32 (32-lane warps) or u64 (64-lane waves)
    :targets: all targets
    """
    return ~lanemask_le()


def lanemask_ge():
    """This lane and the ones above: ``~lanemask_lt()`` (PTX ``%lanemask_ge``).

    :returns: the lane mask
    :rtype: run-time u32 (32-lane warps) or u64 (64-lane waves)
    :targets: all targets
    """
    return ~lanemask_lt()


# -- permutes -----------------------------------------------------------------------------------

def permute(x, addr):
    """Forward lane permute (AMD ``ds_permute_b32``): this lane's ``x`` goes to lane
    ``(addr >> 2) % warp_size`` (``addr`` a byte address, 4 per lane); a lane receiving from
    several gets the highest sender's value, one receiving nothing gets 0. Any type (as
    opus.shfl).

    :param x: the value this lane sends
    :type x: run-time value (any scalar or vector type) or Python number
    :param addr: the byte address of the destination lane (4 * lane)
    :type addr: run-time integer or Python int
    :returns: the value received, of ``x``'s type
    :targets: gfx942, gfx950; not on sm_80, sm_86, sm_89, sm_90, sm_90a (NVIDIA shuffles pull:
        invert the mapping and use opus.bpermute)
    """
    what = "opus.permute"
    try:
        ctx().target.require_ds_permute(what)
    except Exception as e:  # UnsupportedOnTarget: at the kernel's line
        _err(str(e))
    x = _value(what, x)
    a = _lane_arg(what, "addr", addr)
    return _move(lambda w: emit1("permute", [w, a], w.type), x)


def bpermute(x, addr):
    """Backward lane permute (AMD ``ds_bpermute_b32``): the value of lane
    ``(addr >> 2) % warp_size`` (``addr`` a byte address, 4 per lane). The same as
    ``opus.shfl(x, addr >> 2)``, which it is on NVIDIA; reading a lane that does not take part
    is undefined (0 on AMD; the interpreter's checking mode reports it).

    :param x: the value this lane offers
    :type x: run-time value (any scalar or vector type) or Python number
    :param addr: the byte address of the lane read (4 * lane)
    :type addr: run-time integer or Python int
    :returns: the value read, of ``x``'s type
    :targets: all targets
    """
    a = _lane_arg("opus.bpermute", "addr", addr)
    return _shuffle("opus.bpermute", x, binary("shr", a, 2), "idx", None, None)


# -- reductions and scans -------------------------------------------------------------------------

_OPS = ("sum", "max", "min", "and", "or", "xor")
_REDUX = {"sum": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor"}


def _combine(op):
    from . import math as m
    return {"sum": lambda a, b: binary("add", a, b), "max": m.max, "min": m.min,
            "and": lambda a, b: binary("and", a, b), "or": lambda a, b: binary("or", a, b),
            "xor": lambda a, b: binary("xor", a, b)}[op]


def _check_op(what, x, op):
    if op not in _OPS:
        _err(f"{what}: op must be one of {', '.join(map(repr, _OPS))}, got {_describe(op)}")
    e = scalar_of(x.type)
    if op in ("and", "or", "xor") and not (e.is_int or e.is_bool):
        _err(f"{what}: op {op!r} needs integers or bools; {e.name} has no bitwise {op}")
    if op in ("sum", "max", "min") and (e.is_bool or e.storage_only or not (e.is_int or e.is_float)):
        _err(f"{what}: op {op!r} needs a type the chip can add and compare (integers, f16, "
             f"bf16, f32, f64), not {e.name}")


def _identity(op, x):
    """The op's identity in x's type (exclusive scans start with it)."""
    e = scalar_of(x.type)
    if e.is_bool:
        v = op == "and"
    elif e.is_float:
        v = {"sum": 0.0, "max": float("-inf"), "min": float("inf")}[op]
    else:
        lo, hi = e.int_range()
        v = {"sum": 0, "max": lo, "min": hi, "and": -1 if lo < 0 else hi, "or": 0, "xor": 0}[op]
    return _like(v, x)


def _like(v, x):
    if isinstance(x.type, VectorType):
        return make_vector(*[const(v, x.type.elem)] * x.type.n)
    return const(v, x.type)


def _neutral(op, x):
    """What a DPP step's unwritten lanes give so that combining leaves x as it is: the exact
    identity for sum (-0.0 for floats, so -0.0 survives) and xor, x itself for the idempotent
    max, min, and, or (an identity like -inf would turn a NaN lane's max into -inf)."""
    if op == "sum":
        return _like(-0.0 if scalar_of(x.type).is_float else 0, x)
    if op == "xor":
        return _like(0, x)
    return x


def _reduce_args(what, x, op, width):
    x = _value(what, x)
    _check_op(what, x, op)
    return x, _width(what, width)


def warp_reduce(x, op="sum", width=None):
    """The ``op`` of ``x`` over each group of ``width`` lanes, in every lane of the group.

    Built on the target's fastest primitive: NVIDIA a butterfly of ``shfl.sync.bfly`` (log2
    width steps), or one ``redux.sync`` for a whole-warp 32-bit integer reduction (sm_80+);
    AMD DPP row operations fused into the arithmetic (quad_perm, row_half_mirror,
    row_mirror, then row_bcast15/31 and a readlane across rows). Every lane of a group must
    take part (else undefined; the interpreter's checking mode reports it). Floating-point
    sums are associated as the primitive pairs them (the same value in every lane).

    :param x: this lane's value
    :type x: run-time value (integer, float or bool scalar or vector) or Python number
    :param op: ``"sum"``, ``"max"``, ``"min"`` (opus.max/min's NaN rule), or for integers
        and bools ``"and"``, ``"or"``, ``"xor"``
    :type op: str
    :param width: the group size, a power of two up to the warp size (default: the warp)
    :type width: int (compile-time) or None
    :returns: the group's reduction, of ``x``'s type
    :targets: all targets
    """
    what = "opus.warp_reduce"
    x, width = _reduce_args(what, x, op, width)
    if width == 1:
        return x
    t = ctx().target
    if (t.has_redux_sync and width == t.warp_size == 32 and x.type in (dt.i32, dt.u32)):
        return emit1("warp_redux", [x], x.type, {"op": _REDUX[op], "mask": False})
    if t.dpp_missing is None:
        return _reduce_dpp(x, op, width, t.warp_size)
    f = _combine(op)
    k = 1
    while k < width:
        x = f(x, shfl_xor(x, k, width=width))
        k *= 2
    return x


def _internal_dpp(x, ctrl, old=None, row_mask=0xF, bound_ctrl=True):
    """A DPP step of the language's own (strict: checking mode reports inactive lanes)."""
    attrs = {"ctrl": ctrl, "row_mask": row_mask, "bank_mask": 0xF, "bound_ctrl": bound_ctrl,
             "strict": True}
    return _dpp(attrs, _like(0, x) if old is None else old, x)


def _reduce_dpp(x, op, width, ws):
    """AMD: after quad_perm [1,0,3,2] and [2,3,0,1] each quad holds its reduction in every
    lane; row_half_mirror pairs quads, row_mirror half-rows; then row_bcast15 (rows 1, 3) and
    row_bcast31 (row 3) carry it across rows and one lane is read back."""
    f = _combine(op)
    steps = [(2, _quad_perm_ctrl((1, 0, 3, 2))), (4, _quad_perm_ctrl((2, 3, 0, 1))),
             (8, 0x141), (16, 0x140)]
    for need, ctrl in steps:
        if width >= need:
            x = f(x, _internal_dpp(x, ctrl))
    if width >= 32:
        x = f(x, _internal_dpp(x, 0x142, _neutral(op, x), row_mask=0xA, bound_ctrl=False))
    if width == 64:
        x = f(x, _internal_dpp(x, 0x143, _neutral(op, x), row_mask=0xC, bound_ctrl=False))
    if width >= 32:
        x = shfl(x, width - 1, width=width)  # width 64: readlane 63 (wave-uniform)
    return x


def warp_scan(x, op="sum", width=None, exclusive=False):
    """Prefix ``op`` of ``x`` over each group of ``width`` lanes: lane i of a group gets the
    op of lanes 0..i (inclusive) or 0..i-1 (``exclusive``: lane 0 gets the op's identity: 0,
    -inf / the type's minimum for max, +inf / maximum for min, all ones for and).

    NVIDIA: log2(width) ``shfl.sync.up`` steps; AMD: DPP ``row_shr`` 1, 2, 4, 8 fused into
    the arithmetic, ``row_bcast15`` / ``row_bcast31`` across rows. Every lane of a group must
    take part.

    :param x: this lane's value
    :type x: run-time value (integer, float or bool scalar or vector) or Python number
    :param op: ``"sum"``, ``"max"``, ``"min"``, or for integers and bools ``"and"``, ``"or"``,
        ``"xor"``
    :type op: str
    :param width: the group size, a power of two up to the warp size (default: the warp)
    :type width: int (compile-time) or None
    :param exclusive: exclusive scan (default inclusive)
    :type exclusive: bool (compile-time)
    :returns: this lane's prefix, of ``x``'s type
    :targets: all targets
    """
    what = "opus.warp_scan"
    x, width = _reduce_args(what, x, op, width)
    if type(exclusive) is not bool:
        _err(f"{what}: exclusive must be a compile-time bool, got {_describe(exclusive)}")
    from .threads import lane_id
    from .math import select
    group_lane = binary("and", lane_id(), width - 1)
    t = ctx().target
    if t.dpp_missing is not None or width < 16:
        x = _scan_steps(x, op, width, group_lane, t.dpp_missing is None)
    else:
        x = _scan_dpp(x, op, width)
    if not exclusive:
        return x
    return select(compare("eq", group_lane, 0), _identity(op, x), shfl_up(x, 1, width=width))


def _scan_steps(x, op, width, group_lane, amd):
    """Hillis-Steele steps: lane i combines lane i - k where i - k is in its group; the move is
    shfl_up (NVIDIA) or a row_shr DPP move (AMD groups of up to 16 lanes lie within rows)."""
    from .math import select
    f = _combine(op)
    k = 1
    while k < width:
        y = _internal_dpp(x, 0x110 + k, x, bound_ctrl=False) if amd else shfl_up(x, k, width=width)
        x = select(compare("ge", group_lane, k), f(x, y), x)
        k *= 2
    return x


def _scan_dpp(x, op, width):
    """AMD, groups of 16 lanes or more: row_shr 1, 2, 4, 8 with the neutral value in lanes
    reading past the row's start give row prefixes; row_bcast15 adds the previous row's last
    lane in rows 1 and 3, row_bcast31 lane 31's in rows 2 and 3 (64-lane groups)."""
    f = _combine(op)
    for k in (1, 2, 4, 8):
        x = f(x, _internal_dpp(x, 0x110 + k, _neutral(op, x), bound_ctrl=False))
    if width >= 32:
        x = f(x, _internal_dpp(x, 0x142, _neutral(op, x), row_mask=0xA, bound_ctrl=False))
    if width == 64:
        x = f(x, _internal_dpp(x, 0x143, _neutral(op, x), row_mask=0xC, bound_ctrl=False))
    return x
