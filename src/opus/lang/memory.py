"""Memory: pointers, global-memory views (gmem) with out-of-bounds protection, shared memory.

As in the original, a data provider (gmem/smem) is separate from any layout; offsets count
elements of the view's dtype. ``make_gmem(ptr, size)`` with a size makes every access
bounds-checked element by element (loads read 0, stores are dropped), which on AMD is the
buffer unit's free behaviour and on NVIDIA a predicated access.
"""
from __future__ import annotations

from ..dtypes import DType
from ..ir import Value, VectorType, PointerType, scalar_of, lanes_of, type_str
from ..targets.limits import static_smem_error
from .context import ctx, TraceError
from .layout import CachedLayout, is_layout, issue_starts, issue_offsets, _add
from .values import (to_bool, Undefined, emit1, emit, as_value, convert_implicitly, is_static,
                     py_default_type)

__all__ = ["Cache", "ptr_add", "load", "store", "Gmem", "Smem", "make_gmem", "make_smem", "alloc_smem",
           "dynamic_smem"]

_VECS = (1, 2, 4, 8, 16, 32)


def _err(msg):
    raise TraceError(msg)


def _describe(x) -> str:
    """What ``x`` is, in the kernel writer's terms (for error messages)."""
    if isinstance(x, Gmem):
        return f"a gmem view of {x.dtype.name} (from opus.make_gmem)"
    if isinstance(x, Smem):
        return f"an smem view of {x.dtype.name} (from opus.alloc_smem, dynamic_smem or make_smem)"
    if isinstance(x, Value):
        t = x.type
        if isinstance(t, PointerType):
            if t.space == "global":
                return f"a global pointer to {t.elem.name} (an opus.Ptr parameter)"
            return f"a shared-memory pointer to {t.elem.name}"
        return f"a run-time {type_str(t)} value"
    if isinstance(x, (bool, int, float)):
        return f"the Python {type(x).__name__} {x!r}"
    text = repr(x)
    return f"a {type(x).__name__} ({text if len(text) <= 40 else text[:37] + '...'})"


def _offset(off, what="offset"):
    """``off`` as a run-time scalar integer (an element count)."""
    if isinstance(off, Undefined):
        off._fail()
    if isinstance(off, int) and not isinstance(off, bool):
        return as_value(off, py_default_type(off))
    if (isinstance(off, Value) and not isinstance(off.type, PointerType)
            and scalar_of(off.type).is_int and lanes_of(off.type) == 1):
        return off
    hint = (": views and pointers are one-dimensional, so compute the flat offset "
            "(e.g. i * stride + j)" if isinstance(off, tuple) else "")
    _err(f"{what} must be a scalar integer, got {_describe(off)}{hint}")


def _size(size, what="size"):
    """An element bound: a non-negative integer (checked here when it is compile-time)."""
    if isinstance(size, int) and not isinstance(size, bool) and size < 0:
        _err(f"{what} must be >= 0 elements, got {size}")
    return _offset(size, what)


def ptr_add(p, off):
    if is_static(off) and not isinstance(off, (bool, float)) and off == 0:
        return p
    _check_packed_offset(off, p.type.elem, "pointer arithmetic")
    return emit1("ptr_add", [p, _offset(off)], p.type)


def _check_packed_offset(off, elem: DType, what):
    """A compile-time element offset into sub-byte memory must start a byte (ir/ops.py,
    sub-byte types); run-time ones are the interpreter's to check."""
    if elem.packed and isinstance(off, int) and not isinstance(off, bool) and off % elem.pack_elems:
        _err(f"{what}: element offset {off} into {elem.name} memory does not start a byte: "
             f"{elem.name} is packed {elem.pack_elems} elements to {elem.nbytes(elem.pack_elems)} "
             f"byte{'s' if elem.pack_elems > 2 else ''}, so offsets and pointer steps are "
             f"multiples of {elem.pack_elems}")


def access_alignment(vec, elem: DType) -> int:
    """Bytes the address of a ``vec``-element access must be aligned to: its size, or for
    sub-byte types whose accesses are not a power of two bytes (fp6: 3, 6, 12) the largest
    power of two dividing it (ir/ops.py)."""
    nbytes = elem.nbytes(vec) if elem.packed else vec * elem.itemsize
    return nbytes & -nbytes


def _check_vec(vec, elem: DType):
    if isinstance(vec, bool) or not isinstance(vec, int) or vec not in _VECS:
        _err(f"vec must be one of {_VECS} (a compile-time int), got {_describe(vec)}")
    if vec * elem.bits > 128 and vec > 1:
        _err(f"vec={vec} of {elem.name} is {vec * elem.bits // 8} bytes; one access moves at most "
             f"16 bytes (split it into several loads)")
    if vec % elem.pack_elems:
        _err(f"vec={vec} of {elem.name}: an access of the {elem.bits}-bit type {elem.name} moves "
             f"whole bytes, so vec must be a multiple of {elem.pack_elems}")


def _note_alignment(p, nbytes):
    """Remember that pointer parameter ``p`` must be nbytes-aligned (checked at launch)."""
    c = ctx()
    if p.owner is None and nbytes > 1:
        c.align_req[p] = max(c.align_req.get(p, 1), nbytes)


class _Hint:
    """One cache hint: ``name`` (as in opus.Cache) and ``value`` (the target tables' key)."""
    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name, self.value = name, value

    def __repr__(self):
        return f"opus.Cache.{self.name}"


class Cache:
    """Cache hints for loads and stores (``cache=`` of ``load``/``store`` and of the views'
    methods): how an access uses the caches, never what it reads or writes. Each target's
    table spells them (docs/api.md lists the spellings); a hint a chip cannot express is an
    error while tracing, never dropped silently.

    - ``NORMAL``: the default policy.
    - ``STREAMING``: data used once (non-temporal): PTX ``.cs``; AMD ``nt``.
    - ``LAST_USE``: the last read of this data (loads): PTX ``.lu``.
    - ``READ_ONLY``: data no thread writes while the kernel runs (loads): PTX
      ``ld.global.nc``.
    - ``EVICT_FIRST`` / ``EVICT_LAST``: L1 eviction priority: PTX ``.L1::evict_first`` /
      ``.L1::evict_last``.
    - ``NO_ALLOCATE``: do not allocate in L1: PTX ``.L1::no_allocate``.

    Example: ``y.store(x.load(i, vec=4, cache=opus.Cache.STREAMING), i)``.

    :targets: all targets, with different hints: sm_80 .. sm_90a all of them for loads and
        NORMAL, STREAMING, EVICT_FIRST, EVICT_LAST, NO_ALLOCATE for stores; gfx942, gfx950
        NORMAL and STREAMING (the cache-policy bits of their buffer and global instructions
        are coherence scopes and nt)
    """
    NORMAL = _Hint("NORMAL", "normal")
    STREAMING = _Hint("STREAMING", "streaming")
    LAST_USE = _Hint("LAST_USE", "last_use")
    READ_ONLY = _Hint("READ_ONLY", "read_only")
    EVICT_FIRST = _Hint("EVICT_FIRST", "evict_first")
    EVICT_LAST = _Hint("EVICT_LAST", "evict_last")
    NO_ALLOCATE = _Hint("NO_ALLOCATE", "no_allocate")


def _cache_attrs(cache, p, kind) -> dict:
    """The access's IR attrs for cache hint ``cache`` (None or an opus.Cache) through pointer
    ``p``: {} for the normal policy, else {'cache': name} once the target's table has the
    hint for ``kind`` ('load' or 'store')."""
    if cache is None:
        return {}
    if not isinstance(cache, _Hint):
        names = ", ".join(repr(c) for c in vars(Cache).values() if isinstance(c, _Hint))
        _err(f"{kind}: cache must be an opus.Cache member ({names}), got {_describe(cache)}")
    if p.type.space == "shared" and cache is not Cache.NORMAL:
        _err(f"{kind}: cache={cache!r} is a hint for global memory; shared memory has no caches")
    ctx().target.cache_policy(cache.value, kind)  # a hint the chip lacks: an error here
    return {} if cache is Cache.NORMAL else {"cache": cache.value}


def _soffset_operand(soffset, what) -> list:
    """[the scalar offset operand] of an access with ``soffset`` (none without one)."""
    if soffset is None:
        return []
    if isinstance(soffset, int) and not isinstance(soffset, bool) and soffset < 0:
        _err(f"{what}: soffset must be >= 0, got {soffset}")
    return [_offset(soffset, f"{what} soffset")]


_OFFSETS = ("i32", "u32")


def _check_offsets(offsets, what):
    if not (isinstance(offsets, str) and offsets in _OFFSETS):
        _err(f"{what}: offsets must be one of {_OFFSETS} (\"u32\": every offset is promised to be "
             f"in [0, 2^32 / itemsize)), got {_describe(offsets)}")


def _offsets_attrs(offsets, bound, what) -> dict:
    """The access's IR attrs for ``offsets`` (ir/ops.py load/store attrs u32)."""
    _check_offsets(offsets, what)
    if offsets == "i32":
        return {}
    if bound is not None:
        _err(f"{what}: offsets=\"u32\" is for unbounded accesses; a bounded one already uses 32-bit "
             f"offsets (AMD's buffer unit) and its range check catches any offset")
    return {"u32": True}


def _is_pointer(x, space=None) -> bool:
    return (isinstance(x, Value) and isinstance(x.type, PointerType)
            and space in (None, x.type.space))


def _shared_pointer(x, what, needs="needs shared memory", role="smem", unbounded_because=None,
                    global_hint="global memory is viewed with opus.make_gmem"):
    """The shared pointer of ``x`` (an smem view or a shared pointer), or a TraceError:
    "``what`` ``needs`` (a view ...), got <x>" (with ``global_hint`` when ``x`` is global
    memory). With ``unbounded_because`` a bounded view is refused too, saying why its
    ``role`` view must have no bound; without it a view's bound is ignored."""
    if isinstance(x, Smem):
        if x.size is not None and unbounded_because is not None:
            _err(f"{what}: the {role} view has a bound ({unbounded_because}); pass an unbounded "
                 f"view (opus.alloc_smem / opus.dynamic_smem) or its .ptr")
        return x.ptr
    if _is_pointer(x, "shared"):
        return x
    hint = f"; {global_hint}" if isinstance(x, Gmem) or _is_pointer(x) else ""
    _err(f"{what} {needs} (a view from opus.alloc_smem or opus.dynamic_smem, or its .ptr), "
         f"got {_describe(x)}{hint}")


def _need_pointer(p, what):
    if _is_pointer(p):
        return
    hint = (f"; a view is accessed with its own methods: view.{what}(...) or view[i]"
            if isinstance(p, _View) else "")
    _err(f"{what} needs a pointer (an opus.Ptr parameter or a view's .ptr), got "
         f"{_describe(p)}{hint}")


def _memory_of(p) -> str:
    return f"{'shared' if p.type.space == 'shared' else 'global'} {p.type.elem.name} memory"


def load(p, off=0, vec=1, bound=None, cache=None, soffset=None, *, offsets="i32"):
    """Load ``vec`` consecutive elements at ``p[off]`` in one access (at most 16 bytes).

    A pointer parameter used with ``vec`` > 1 must be aligned to the access (checked at launch).
    Views have the same as a method: ``g.load(off, vec=4)``.

    :param p: the pointer: an ``opus.Ptr`` parameter or a view's ``.ptr``
    :type p: run-time pointer (global or shared)
    :param off: offset in elements
    :type off: run-time integer value or Python int
    :param vec: elements per access: 1, 2, 4, 8, 16 or 32
    :type vec: int (compile-time)
    :param bound: when given, elements at ``off + i >= bound`` (or ``off + i < 0``) read as 0
    :type bound: run-time integer value or Python int or None
    :param cache: cache hint (None: the normal policy)
    :type cache: opus.Cache or None
    :param soffset: a scalar offset in elements added to ``off``, the same for every lane of
        a warp (AMD: the buffer instruction's SGPR offset, so a loop's uniform step costs no
        vector instructions); with a bound, off and soffset must each be >= 0 (the buffer
        unit's unsigned offsets), else the access reads 0
    :type soffset: run-time integer value or Python int or None
    :param offsets: ``"u32"``: the caller's promise that ``off`` (+ ``soffset``) is in
        [0, 2^32 / itemsize) (its byte offset fits 32 unsigned bits), so the address is the
        base plus a 32-bit byte offset (make_gmem has the details); unbounded accesses only.
        ``"i32"`` (default): any offset
    :type offsets: str
    :returns: one element, or a vector of ``vec`` elements, of the pointer's element type
    :targets: all targets; cache hints per target (opus.Cache)
    """
    _need_pointer(p, "load")
    attrs = {"vec": vec, **_cache_attrs(cache, p, "load")}
    elem = p.type.elem
    _check_vec(vec, elem)
    _check_packed_offset(off, elem, "load")
    _check_packed_offset(soffset, elem, "load soffset")
    operands = [p, _offset(off)]
    attrs.update(_offsets_attrs(offsets, bound, "load"))
    if bound is not None:
        operands.append(_size(bound))
    if soffset is not None:
        operands += _soffset_operand(soffset, "load")
        attrs["soffset"] = True
    _note_alignment(p, access_alignment(vec, elem))
    rt = VectorType(elem, vec) if vec > 1 else elem
    return emit1("load", operands, rt, attrs)


def store(p, value, off=0, vec=None, bound=None, cache=None, soffset=None, *, offsets="i32"):
    """Store a scalar or vector at ``p[off]`` in one access (at most 16 bytes); a scalar with
    ``vec`` > 1 is broadcast. The value converts to the element type only where that cannot
    change it (widening, int to float): narrowing needs an explicit opus.cast.

    :param p: the pointer: an ``opus.Ptr`` parameter or a view's ``.ptr``
    :type p: run-time pointer (global or shared)
    :param value: what to store
    :type value: run-time value (scalar or vector) or Python number
    :param off: offset in elements
    :type off: run-time integer value or Python int
    :param vec: elements per access (1, 2, 4, 8, 16 or 32); default: the value's lane count
    :type vec: int (compile-time) or None
    :param bound: when given, elements at ``off + i >= bound`` (or ``off + i < 0``) are not written
    :type bound: run-time integer value or Python int or None
    :param cache: cache hint (None: the normal policy)
    :type cache: opus.Cache or None
    :param soffset: a warp-uniform scalar offset in elements added to ``off`` (as in load)
    :type soffset: run-time integer value or Python int or None
    :param offsets: ``"u32"`` or ``"i32"`` (as in load)
    :type offsets: str
    :targets: all targets; cache hints per target (opus.Cache)
    """
    _need_pointer(p, "store")
    attrs = {"vec": None, **_cache_attrs(cache, p, "store")}
    elem = p.type.elem
    n = lanes_of(value.type) if isinstance(value, Value) else 1
    if vec is None:
        vec = n
    _check_vec(vec, elem)
    if n not in (1, vec):
        _err(f"store of a {type_str(value.type)} ({n} lanes) with vec={vec}: vec must be the "
             f"value's lane count (a scalar is broadcast to vec lanes)")
    value = convert_implicitly(value, elem, f"store into {_memory_of(p)}")
    if vec > 1 and n == 1:
        value = emit1("broadcast", [value], VectorType(elem, vec), {"n": vec})
    _check_packed_offset(off, elem, "store")
    _check_packed_offset(soffset, elem, "store soffset")
    operands = [p, _offset(off), value]
    attrs.update(_offsets_attrs(offsets, bound, "store"))
    if bound is not None:
        operands.append(_size(bound))
    if soffset is not None:
        operands += _soffset_operand(soffset, "store")
        attrs["soffset"] = True
    _note_alignment(p, access_alignment(vec, elem))
    emit("store", operands, [], {**attrs, "vec": vec})


# -- layout-driven bulk access (docs/layouts.md, section 3) --------------------------------------

def _issues(layout, vec, elem: DType):
    """[(y-coordinates of the issue's first element)] of a layout-driven access (layout.py
    ``issue_starts``)."""
    return issue_starts(layout.layout if isinstance(layout, CachedLayout) else layout, vec)


def _chunks(vec, elem: DType):
    """Element counts of the accesses one issue of ``vec`` elements splits into (<= 16 bytes)."""
    most = max(1, 128 // elem.bits) if elem.bits <= 128 else 1
    most = min(most, _VECS[-1])
    out = []
    while vec:
        n = min(most, vec)
        n = 1 << (n.bit_length() - 1)  # a power of two the access widths have
        out.append(n)
        vec -= n
    return out


def _layout_offsets(layout, vec, elem):
    """[(offset, elements)] of every access of a layout-driven load or store, in register order:
    each issue's offset (``issue_offsets``, or a cached layout's precomputed ones) split into
    accesses of at most 16 bytes."""
    if isinstance(layout, CachedLayout):
        if vec != layout.vec:
            _err(f"vec={vec}: this cached layout holds the offsets of vec={layout.vec} accesses "
                 f"(cache it with the access's vec)")
        offsets = layout.offsets()
    else:
        offsets = issue_offsets(layout, vec)
    return [(_add(off, done), n) for off in offsets for done, n in _chunk_starts(vec, elem)]


def _chunk_starts(vec, elem):
    """[(first element, elements)] of the accesses one issue splits into."""
    out, done = [], 0
    for n in _chunks(vec, elem):
        out.append((done, n))
        done += n
    return out


def _issue_preds(pred, layout, vec, elem):
    """One predicate per access of a layout-driven access: ``pred`` itself (a bool, static or
    run-time), or ``pred(*issue_index)`` for a function of the issue's static indices."""
    issues = _issues(layout, vec, elem)
    per_issue = len(_chunks(vec, elem))
    if callable(pred) and not isinstance(pred, Value):
        vecs = [ys[:-1] + (ys[-1] // vec,) if ys else () for ys in issues]
        return [pred(*ix) for ix in vecs for _ in range(per_issue)]
    return [pred] * (len(issues) * per_issue)


def _repeated_issues(layout, vec):
    """For each issue of a layout-driven access, the first issue with the same address: issues
    that differ only in y-coordinates of stride 0 (a broadcast, e.g. a per-row factor gathered
    through an accumulator's layout). None when every issue has its own address."""
    if isinstance(layout, CachedLayout):
        return None
    zero = [type(st) is int and st == 0 for st in layout.y_strides()]
    if not any(zero):
        return None
    firsts, seen = [], {}
    for i, ys in enumerate(issue_starts(layout, vec)):
        firsts.append(seen.setdefault(tuple(c for c, z in zip(ys, zero) if not z), i))
    return firsts if len(seen) < len(firsts) else None


def load_layout(view, layout, vec=1, cache=None, pred=None, soffset=None):
    """All of a layout's elements for this thread, ``vec`` at a time: one register vector.
    With ``pred``, an access whose predicate is false reads zeros. Issues at the same address
    (y-dims of stride 0) are loaded once."""
    accesses = _layout_offsets(layout, vec, view.dtype)
    preds = [None] * len(accesses) if pred is None else _issue_preds(pred, layout, vec, view.dtype)
    repeats = _repeated_issues(layout, vec) if pred is None else None
    if repeats is not None:
        per = len(accesses) // len(repeats)
        loaded = {}
        parts = []
        for i, first in enumerate(repeats):
            for c in range(per):
                if (first, c) not in loaded:
                    off, n = accesses[first * per + c]
                    loaded[first, c] = view.load(off, n, cache, soffset)
                parts.append(loaded[first, c])
    else:
        parts = [view.load(off, n, cache, soffset) if pr is None
                 else view.load_if(pr, off, n, cache, soffset)
                 for (off, n), pr in zip(accesses, preds)]
    if len(parts) == 1:
        return parts[0]
    from .vectors import concat
    return concat(*parts)


def store_layout(view, value, layout, vec=1, cache=None, pred=None, soffset=None):
    """Store a register vector (or broadcast a scalar) over a layout's elements, ``vec`` at a
    time, in the order ``load_layout`` gives them. With ``pred``, false accesses write nothing."""
    accesses = _layout_offsets(layout, vec, view.dtype)
    preds = [None] * len(accesses) if pred is None else _issue_preds(pred, layout, vec, view.dtype)
    total = sum(n for _, n in accesses)
    lanes = lanes_of(value.type) if isinstance(value, Value) else 1
    if lanes not in (1, total):
        _err(f"store of {lanes} lanes over a layout of {total} elements: the value must have "
             f"one lane per element (or be a scalar, broadcast)")
    done = 0
    for (off, n), pr in zip(accesses, preds):
        part = value if lanes == 1 else value[done:done + n] if n > 1 else value[done]
        if pr is None:
            view.store(part, off, n, cache, soffset)
        else:
            view.store_if(pr, part, off, n, cache, soffset)
        done += n


def _layout_vec(layout, vec, elem: DType):
    """``vec`` as given, or the widest access a layout's last register dimension allows:
    contiguous (stride 1), a power of two dividing its extent, at most 16 bytes, within a
    swizzle's runs."""
    if vec is not None:
        return vec
    if isinstance(layout, CachedLayout):
        return layout.vec
    ys, strides = layout.y_shape(), layout.y_strides()
    if not ys or not (type(strides[-1]) is int and strides[-1] == 1) or type(ys[-1]) is not int:
        return 1
    most = max(1, 128 // elem.bits)
    if layout.swizzle is not None:
        most = min(most, 1 << layout.swizzle.base)
    v = 1
    while v * 2 <= most and ys[-1] % (v * 2) == 0:
        v *= 2
    return v


def _predicated(view, pred, offset, vec, soffset=None):
    """(pointer, offset, bound) of an access done only where ``pred`` holds, as a bounded
    access (loads read 0, stores drop where it is false), which is the buffer unit's range
    check on AMD and no extra branch. A bounded view keeps its bound and moves a false access's
    offset past it (to the bound rounded up to 32 elements: aligned for any vector): the bound
    stays wave-uniform, so AMD's buffer resource stays in scalar registers (a per-lane bound
    makes clang loop over the distinct resources). Unbounded views first move the pointer to
    the access, so its exact elements are the bound (negative offsets stay allowed)."""
    from .math import select
    cond = to_bool(pred, "load_if/store_if predicate")
    if view.size is None:
        if soffset is not None:  # the scalar offset moves the pointer too, wave-uniformly
            offset = _add(offset, soffset)
        return ptr_add(view.ptr, offset), 0, select(cond, vec, 0)
    return view.ptr, select(cond, offset, (view.size + 31) // 32 * 32), view.size


class _View:
    """Shared behaviour of gmem and smem views: a pointer plus an optional element bound, and
    ``offsets`` ("u32": the promise that make_gmem documents)."""

    def __init__(self, ptr, size=None, offsets="i32"):
        self.ptr = ptr
        self.size = size
        self.offsets = offsets

    @property
    def dtype(self) -> DType:
        return self.ptr.type.elem

    def load(self, offset, vec=None, cache=None, soffset=None):
        """``vec`` elements at ``offset`` (default 1), or, given a Layout, all of its elements
        for this thread ``vec`` at a time (one register vector, in the layout's y order; default:
        the widest access its contiguous last register dimension allows, up to 16 bytes).
        ``cache``: an opus.Cache hint; ``soffset``: a warp-uniform scalar offset added to every
        access (opus.load has the details)."""
        if is_layout(offset):
            return load_layout(self, offset, _layout_vec(offset, vec, self.dtype), cache,
                               soffset=soffset)
        return load(self.ptr, offset, 1 if vec is None else vec, self.size, cache, soffset,
                    offsets=self.offsets)

    def store(self, value, offset, vec=None, cache=None, soffset=None):
        """Store at ``offset``, or, given a Layout, over all of its elements ``vec`` at a time."""
        if is_layout(offset):
            return store_layout(self, value, offset, _layout_vec(offset, vec, self.dtype), cache,
                                soffset=soffset)
        store(self.ptr, value, offset, vec, self.size, cache, soffset, offsets=self.offsets)

    def load_if(self, pred, offset, vec=None, cache=None, soffset=None):
        """``load`` where ``pred`` holds, zeros where it does not (no branch). ``pred`` is a bool
        (compile-time or run-time); with a Layout it may also be a function of an issue's static
        indices returning one."""
        if is_layout(offset):
            return load_layout(self, offset, _layout_vec(offset, vec, self.dtype), cache,
                               pred=pred, soffset=soffset)
        vec = 1 if vec is None else vec
        if is_static(pred):
            return self.load(offset, vec, cache, soffset) if pred else _zeros_like_load(self, vec)
        ptr, off, bound = _predicated(self, pred, offset, vec, soffset)
        return load(ptr, off, vec, bound, cache, soffset if self.size is not None else None)

    def store_if(self, pred, value, offset, vec=None, cache=None, soffset=None):
        """``store`` where ``pred`` holds; nothing is written where it does not."""
        if is_layout(offset):
            return store_layout(self, value, offset, _layout_vec(offset, vec, self.dtype), cache,
                                pred=pred, soffset=soffset)
        if is_static(pred):
            if pred:
                self.store(value, offset, vec, cache, soffset)
            return
        n = vec or (lanes_of(value.type) if isinstance(value, Value) else 1)
        ptr, off, bound = _predicated(self, pred, offset, n, soffset)
        store(ptr, value, off, vec, bound, cache, soffset if self.size is not None else None)

    def __getitem__(self, i):
        return self.load(i)

    def __setitem__(self, i, v):
        self.store(v, i)

    def __add__(self, off):
        """A view shifted by ``off`` elements (its bound shrinks accordingly; a "u32" view's
        promise then counts from the shifted pointer)."""
        ptr = ptr_add(self.ptr, off)
        return type(self)(ptr, None if self.size is None else self.size - off, self.offsets)

    # carried through run-time loops/branches as (ptr, size); offsets is static
    def __opus_flatten__(self):
        return [self.ptr, self.size], lambda leaves: type(self)(*leaves, offsets=self.offsets)


def _zeros_like_load(view, vec):
    from .vectors import zeros
    _check_vec(vec, view.dtype)
    return zeros(vec, view.dtype)


class Gmem(_View):
    """Global memory seen as elements of one dtype, optionally bounded (``size`` elements)."""


class Smem(_View):
    """Shared (LDS) memory seen as elements of one dtype, optionally bounded."""


def _bytes_to_elements(nbytes, elem: DType):
    """The element bound that ``nbytes`` bytes give (whole elements only)."""
    if elem.packed:  # whole groups of pack_elems elements (fp6: 4 in 3 bytes)
        group = elem.nbytes(elem.pack_elems)
        if isinstance(nbytes, int) and not isinstance(nbytes, bool):
            if nbytes < 0 or nbytes % group:
                _err(f"nbytes must be a non-negative multiple of {group} (the bytes of "
                     f"{elem.pack_elems} packed {elem.name}), got {nbytes}; or give size= in "
                     f"elements")
            return nbytes // group * elem.pack_elems
        return _offset(nbytes, "nbytes") // group * elem.pack_elems
    if isinstance(nbytes, int) and not isinstance(nbytes, bool):
        if nbytes < 0 or nbytes % elem.itemsize:
            _err(f"nbytes must be a non-negative multiple of {elem.itemsize} (the size of one "
                 f"{elem.name}), got {nbytes}; or give size= in elements")
    else:
        nbytes = _offset(nbytes, "nbytes")  # run time: the elements wholly inside
    return nbytes // elem.itemsize


def make_gmem(ptr, size=None, *, nbytes=None, offsets="i32"):
    """A global-memory view of ``ptr``: ``g[i]``, ``g[i] = x``, ``g.load(off, vec=N)``,
    ``g.store(v, off)``, and ``g + k`` (the view shifted by k elements, its bound too).

    ``size`` or ``nbytes`` turns on per-element out-of-bounds protection: reads past it give 0,
    writes past it are dropped. Example: ``g = opus.make_gmem(x, n); g[i] = g[i] * 2``.

    ``offsets="u32"`` (unbounded views) is a promise: every offset used through the view
    (``off`` + ``soffset`` of load/store, element-wise and layout-driven) is in
    [0, 2^32 / itemsize) elements (its byte offset fits 32 unsigned bits), as the original's
    buffer and global accesses assume. The address is then the base plus one 32-bit byte
    offset: on AMD the global instructions' uniform-base form (an SGPR base, a 32-bit VGPR
    offset: no 64-bit address arithmetic per access), on NVIDIA a 32-bit index widened in one
    multiply-add. The interpreter checks the promise on every access (a MemoryFault naming the
    line). load_if/store_if move the pointer to the access and are exact for any offset.
    Without it (``"i32"``) offsets may be negative or large and the address is 64-bit.

    :param ptr: an ``opus.Ptr[...]`` kernel parameter
    :type ptr: run-time global pointer
    :param size: the bound in elements (None: unchecked)
    :type size: run-time integer value or Python int or None
    :param nbytes: the bound in bytes instead (a compile-time one must be a multiple of the
        element size; a run-time one counts the elements wholly inside)
    :type nbytes: run-time integer value or Python int or None
    :param offsets: ``"u32"``: the promise above (unbounded views only); ``"i32"``: none
    :type offsets: str
    :returns: the view
    :rtype: Gmem
    :targets: all targets
    """
    if not _is_pointer(ptr, "global"):
        hint = ""
        if isinstance(ptr, Smem) or _is_pointer(ptr):
            hint = "; shared memory is viewed with opus.make_smem"
        elif isinstance(ptr, Gmem):
            hint = "; it is a view already: shift it with g + offset, or re-view g.ptr"
        _err(f"make_gmem needs a global pointer (an opus.Ptr[...] parameter), got "
             f"{_describe(ptr)}{hint}")
    if size is not None and nbytes is not None:
        _err("give make_gmem either size (elements) or nbytes, not both")
    if nbytes is not None:
        size = _bytes_to_elements(nbytes, ptr.type.elem)
    _check_offsets(offsets, "make_gmem")
    if offsets == "u32" and size is not None:
        _err("make_gmem: offsets=\"u32\" is for unbounded views; a bounded view already uses 32-bit "
             "offsets (AMD's buffer unit) and its range check catches any offset: drop size/nbytes "
             "or offsets")
    return Gmem(ptr, None if size is None else _size(size), offsets)


def make_smem(mem, size=None):
    """A shared-memory view of ``mem`` with a bound: used as make_gmem's views are.

    :param mem: an smem view (from opus.alloc_smem or opus.dynamic_smem) or its ``.ptr``
    :type mem: Smem or run-time shared pointer
    :param size: the bound in elements, checked on every access as in make_gmem (None: an smem
        view keeps its own bound, a pointer has none)
    :type size: run-time integer value or Python int or None
    :returns: the view
    :rtype: Smem
    :targets: all targets
    """
    ptr = _shared_pointer(mem, "make_smem")
    old = mem.size if isinstance(mem, Smem) else None
    return Smem(ptr, old if size is None else _size(size))


def _smem_dtype(c, dtype, what):
    if not isinstance(dtype, DType):
        _err(f"{what} needs an opus dtype, got {dtype!r}")
    return c.target.require_dtype(dtype, "shared arrays")


def alloc_smem(dtype: DType, count: int, align: int = 16):
    """A block-wide shared-memory array of ``count`` elements (static size), as a view. Each
    call makes a new array; all threads of the block see the same one.

    Example: ``tile = opus.alloc_smem(opus.f32, 256); tile[t] = x; opus.sync_threads()``.

    :param dtype: the element type
    :type dtype: DType
    :param count: number of elements, > 0
    :type count: int (compile-time)
    :param align: byte alignment of the array: a power of two up to 1024 (swizzled TMA tiles
        need their swizzle's repeat: 1024 bytes for 128-byte swizzles)
    :type align: int (compile-time)
    :returns: a view of the array, unbounded
    :rtype: Smem
    :targets: all targets; the static shared memory per block differs: 48 KiB on NVIDIA,
        64 KiB on gfx942, 160 KiB on gfx950 (beyond it: opus.dynamic_smem)
    """
    c = ctx()
    dtype = _smem_dtype(c, dtype, "alloc_smem")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        _err(f"alloc_smem count must be a positive compile-time int, got {count!r}")
    if align not in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        _err(f"alloc_smem align must be a power of two up to 1024, got {align}")
    # C cannot place an array below its element's natural alignment (`__align__(1) float`
    # is still 4-byte aligned): the interpreter lays the arrays out in order, each at the
    # larger of the two, so that its addresses keep every guarantee the compiled code has
    align = max(align, dtype.itemsize)      # sub-byte types: 1
    if count % dtype.pack_elems:
        _err(f"alloc_smem({dtype.name}, {count}): {dtype.name} is packed {dtype.pack_elems} "
             f"elements to whole bytes, so count must be a multiple of {dtype.pack_elems}")
    total = (c.smem_bytes + align - 1) // align * align + dtype.nbytes(count)
    why = static_smem_error(c.target.limits, c.target.name, total)
    if why is not None:
        _err(f"alloc_smem({dtype.name}, {count}): {why}")
    name = f"smem{c.smem_count}"
    c.smem_count += 1
    c.smem_bytes = total
    p = emit1("smem_alloc", [], PointerType(dtype, "shared"),
              {"dtype": dtype, "count": count, "align": align, "name": name})
    return Smem(p)


def dynamic_smem(dtype: DType, offset: int = 0, align: int = 16):
    """A view of the dynamic shared memory given at launch (``kernel[grid, block](...,
    smem=nbytes)``), from ``offset`` bytes on. Views made with different dtypes alias the same
    bytes. The region starts at a multiple of the largest ``align`` any view of the kernel asks
    for (swizzled TMA/wgmma tiles need 1024: ``dynamic_smem(bf16, 0, align=1024)``).

    :param dtype: the element type
    :type dtype: DType
    :param offset: where the view starts, in bytes: a multiple of the element size
    :type offset: int (compile-time)
    :param align: the region's alignment in bytes (a power of two, 16 to 1024); the view is
        aligned to it where ``offset`` is a multiple of it
    :type align: int (compile-time)
    :returns: a view of the dynamic shared memory, unbounded
    :rtype: Smem
    :targets: all targets
    """
    c = ctx()
    dtype = _smem_dtype(c, dtype, "dynamic_smem")
    if (not isinstance(offset, int) or isinstance(offset, bool) or offset < 0
            or offset % max(1, dtype.itemsize)):
        _err(f"dynamic_smem offset must be a non-negative multiple of {dtype.itemsize}, got "
             f"{offset!r}")
    most = c.target.limits.smem_per_block
    if offset >= most:
        _err(f"dynamic_smem offset {offset} is beyond the {most} bytes of shared memory a "
             f"block may have on {c.target.name}")
    if type(align) is not int or align < 16 or align > 1024 or align & (align - 1):
        _err(f"dynamic_smem align must be a power of two from 16 to 1024 (bytes), got {align!r}")
    c.uses_dyn_smem = True
    c.dyn_smem_align = max(c.dyn_smem_align, align)
    p = emit1("dyn_smem", [], PointerType(dtype, "shared"),
              {"dtype": dtype, "offset": offset, "align": align})
    return Smem(p)
