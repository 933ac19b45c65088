"""Atomics on global and shared memory: ``opus.atomic_add(p, value, off)`` and friends, and the
same as methods of gmem/smem views (``g.atomic_add(value, off)``, the argument order of
``store``).

Each returns the element's old value (``atomic_store`` nothing). NVIDIA renders PTX ``atom``
(``red`` where the old value is not used), AMD ``global_atomic_*`` / ``ds_*`` and, through a
bounded gmem view, ``buffer_atomic_*`` whose range check drops out-of-range lanes. What a chip
has is a row of targets/sync_atomics.py; anything else is an error while tracing naming the chip
and the types it has. Semantics (conflicting lanes, rounding, bounds): ir/ops.py, ``atomic``.
"""
from __future__ import annotations

from ..ir import Value, VectorType, PointerType, scalar_of, lanes_of, type_str
from ..targets import sync_atomics as rows
from .context import ctx, TraceError
from .memory import _View, _offset, _size, _describe, _note_alignment, _memory_of
from .values import emit1, emit, convert_implicitly

__all__ = ["atomic_add", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas", "atomic_and",
           "atomic_or", "atomic_xor", "atomic_inc", "atomic_dec", "atomic_load", "atomic_store"]

_TARGETS_DOC = ("all targets, with the types of targets/sync_atomics.py (docs/language.md, "
                "Atomics, has the table)")


def _err(msg):
    raise TraceError(msg)


def _pointer_and_bound(p, what):
    """(pointer, bound or None) of ``p``: a pointer, or a gmem/smem view (its bound, if any)."""
    if isinstance(p, _View):
        return p.ptr, p.size
    if isinstance(p, Value) and isinstance(p.type, PointerType):
        return p, None
    _err(f"{what} needs a pointer (an opus.Ptr parameter or a view's .ptr) or a gmem/smem view, "
         f"got {_describe(p)}")


def _check_choice(x, allowed, what, name):
    if not isinstance(x, str) or x not in allowed:
        _err(f"{what}: {name} must be one of {', '.join(map(repr, allowed))}, got {_describe(x)}")
    return x


def _value_operand(value, elem, what, memory):
    """``value`` as the element type (a 2-lane f16/bf16 vector: a packed pair) and its vec."""
    n = lanes_of(value.type) if isinstance(value, Value) else 1
    if n == 1:
        return convert_implicitly(value, elem, f"{what} into {memory}"), 1
    if n == 2 and elem.name in ("f16", "bf16"):
        if scalar_of(value.type) != elem:
            _err(f"{what}: the packed value is a {type_str(value.type)}, the memory holds "
                 f"{elem.name}: convert it with opus.cast")
        return value, 2
    _err(f"{what} of a {type_str(value.type)} ({n} lanes): atomics take one element, or a "
         f"pair of f16/bf16 (a packed f16x2/bf16x2 add)")


def _atomic(op, p, off, value=None, compare=None, order="relaxed", scope="device", what=None):
    what = what or f"atomic_{op}"
    ptr, bound = _pointer_and_bound(p, what)
    _check_choice(order, _ORDERS_OF.get(op, rows.ORDERS), what, "order")
    _check_choice(scope, rows.SCOPES, what, "scope")
    elem = ptr.type.elem
    memory = _memory_of(ptr)
    operands = [ptr, _offset(off, f"{what} offset")]
    vec = 1
    if value is not None:
        v, vec = _value_operand(value, elem, what, memory)
        operands.append(v)
    if compare is not None:
        operands.append(convert_implicitly(compare, elem, f"{what} compare value"))
    key = f"{elem.name}x2" if vec == 2 else elem.name
    target = ctx().target
    space = "shared" if ptr.type.space == "shared" else "global"
    buffer = False
    if bound is not None:
        operands.append(_size(bound, f"{what} bound"))
        if target.vendor == "amd" and space == "global" and (op, key, "buffer") in \
                rows.atomic_rows(target):
            buffer = True  # buffer_atomic_*: the range check is the buffer unit's
    rows.atomic_row(target, op, key, space)  # a type or op the chip lacks: an error here
    _note_alignment(ptr, vec * elem.itemsize)
    attrs = {"op": op, "order": order, "scope": scope, "vec": vec, "bounded": bound is not None,
             "buffer": buffer}
    if op == "store":
        emit("atomic", operands, [], attrs)
        return None
    rt = VectorType(elem, 2) if vec == 2 else elem
    return emit1("atomic", operands, rt, attrs)


_ORDERS_OF = {"load": ("relaxed", "acquire"), "store": ("relaxed", "release")}

_PARAMS = """
    :param p: the memory: a pointer (an ``opus.Ptr`` parameter or a view's ``.ptr``) or a
        gmem/smem view; through a view with a bound, a lane whose element is out of range does
        nothing and returns 0 (AMD: a buffer atomic)
    :type p: run-time pointer (global or shared), Gmem or Smem{value}
    :param off: offset in elements
    :type off: run-time integer value or Python int
    :param order: memory order: 'relaxed', 'acquire', 'release' or 'acq_rel'{order}
    :type order: str
    :param scope: which threads the order is about: 'block', 'device' or 'system'
    :type scope: str
    :returns: {returns}
    :targets: {targets}
"""


def _doc(f, summary, value=True, returns="the element's old value (a packed pair: both halves)",
         order="", extra=""):
    v = ("\n    :param value: the operand (converted to the element type as a store's value; "
         "for f16/bf16 memory, a 2-lane vector is a packed pair)\n    :type value: run-time "
         "value or Python number") if value else ""
    f.__doc__ = summary + extra + "\n" + _PARAMS.format(value=v, order=order, returns=returns,
                                                         targets=_TARGETS_DOC)
    return f


def _read_modify_write(op):
    """opus.atomic_<op>(p, value, off=0, *, order, scope): one signature for every such op."""
    def f(p, value, off=0, *, order="relaxed", scope="device"):
        return _atomic(op, p, off, value, order=order, scope=scope)
    f.__name__ = f.__qualname__ = f"atomic_{op}"
    return f


atomic_add, atomic_min, atomic_max, atomic_exch, atomic_and, atomic_or, atomic_xor, atomic_inc, \
    atomic_dec = map(_read_modify_write, ("add", "min", "max", "exch", "and", "or", "xor", "inc",
                                          "dec"))


def atomic_cas(p, compare, value, off=0, *, order="relaxed", scope="device"):
    if compare is None or value is None:
        _err("atomic_cas needs compare and value")
    return _atomic("cas", p, off, value, compare, order=order, scope=scope)


def atomic_load(p, off=0, *, order="relaxed", scope="device"):
    return _atomic("load", p, off, order=order, scope=scope)


def atomic_store(p, value, off=0, *, order="relaxed", scope="device"):
    if value is None:
        _err("atomic_store needs a value")
    return _atomic("store", p, off, value, order=order, scope=scope)


_doc(atomic_add, "Atomically add ``value`` to ``p[off]`` (integers wrap; floats round to "
     "nearest even; NVIDIA's f32 add on global memory flushes subnormals to zero). Conflicting "
     "lanes apply in an unspecified order on the GPU: float sums may differ in rounding.",
     extra="\n\n    Example (a histogram): ``opus.atomic_add(hist, 1, bin)``.")
_doc(atomic_min, "Atomically replace ``p[off]`` by min(``p[off]``, ``value``) (integers by "
     "their signedness; floats where the chip has them: AMD f64, f32 in shared memory).")
_doc(atomic_max, "Atomically replace ``p[off]`` by max(``p[off]``, ``value``) (as atomic_min).")
_doc(atomic_exch, "Atomically write ``value`` to ``p[off]``.")
_doc(atomic_and, "Atomically replace ``p[off]`` by ``p[off] & value`` (integers).")
_doc(atomic_or, "Atomically replace ``p[off]`` by ``p[off] | value`` (integers).")
_doc(atomic_xor, "Atomically replace ``p[off]`` by ``p[off] ^ value`` (integers).")
_doc(atomic_inc, "Atomically replace ``p[off]`` (u32) by ``0 if old >= value else old + 1`` "
     "(CUDA atomicInc: a wrapping counter).")
_doc(atomic_dec, "Atomically replace ``p[off]`` (u32) by ``value if old == 0 or old > value "
     "else old - 1`` (CUDA atomicDec).")
_doc(atomic_load, "Atomically read ``p[off]`` (for flags other blocks write: a plain load may "
     "be cached or hoisted out of a loop).", value=False, order=" ('relaxed' or 'acquire')",
     returns="the element")
_doc(atomic_store, "Atomically write ``value`` to ``p[off]`` (for flags other blocks read).",
     order=" ('relaxed' or 'release')", returns="nothing")
atomic_cas.__doc__ = (
    "Compare and swap: where ``p[off]`` equals ``compare`` (bitwise for floats), write "
    "``value``; return the old element either way (the swap happened iff it equals compare).\n\n"
    "    Example (a lock, one lane per warp taking it): ``while opus.atomic_cas(lock, 0, 1) != 0: "
    "pass``.\n\n    :param compare: the expected old value\n    :type compare: run-time value or "
    "Python number\n" + _PARAMS.format(
        value="\n    :param value: the new value\n    :type value: run-time value or Python number",
        order="", returns="the element's old value", targets=_TARGETS_DOC))


# -- the same as view methods (argument order of view.store: value first, then the offset) ----
def _view_method(fn, has_compare=False):
    if has_compare:
        def method(self, compare, value, offset, *, order="relaxed", scope="device"):
            return fn(self, compare, value, offset, order=order, scope=scope)
    elif fn is atomic_load:
        def method(self, offset, *, order="relaxed", scope="device"):
            return fn(self, offset, order=order, scope=scope)
    else:
        def method(self, value, offset, *, order="relaxed", scope="device"):
            return fn(self, value, offset, order=order, scope=scope)
    method.__name__ = method.__qualname__ = fn.__name__
    method.__doc__ = f"``opus.{fn.__name__}`` on this view (its bound checks every lane)."
    return method


for _fn in (atomic_add, atomic_min, atomic_max, atomic_exch, atomic_and, atomic_or, atomic_xor,
            atomic_inc, atomic_dec, atomic_load, atomic_store):
    setattr(_View, _fn.__name__, _view_method(_fn))
_View.atomic_cas = _view_method(atomic_cas, has_compare=True)
del _fn
