"""Memory: pointers, global-memory views (gmem) with out-of-bounds protection, shared memory.

As in the original, a data provider (gmem/smem) is separate from any layout; offsets count
elements of the view's dtype. ``make_gmem(ptr, size)`` with a size makes every access
bounds-checked element by element (loads read 0, stores are dropped), which on AMD is the
buffer unit's free behaviour and on NVIDIA a predicated access.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import Value, VectorType, PointerType, scalar_of, lanes_of, type_str
from .context import ctx, TraceError
from .values import emit1, emit, as_value, cast, is_static, py_default_type

__all__ = ["ptr_add", "load", "store", "Gmem", "Smem", "make_gmem", "make_smem", "alloc_smem",
           "dynamic_smem"]

_VECS = (1, 2, 4, 8, 16, 32)


def _err(msg):
    raise TraceError(msg)


def _offset(off, what="offset"):
    if is_static(off):
        if isinstance(off, float) or isinstance(off, bool):
            _err(f"{what} must be an integer, got {off!r}")
        return as_value(off, py_default_type(off))
    if not isinstance(off, Value) or not scalar_of(off.type).is_int or lanes_of(off.type) != 1:
        _err(f"{what} must be a scalar integer, got {getattr(off, 'type', type(off).__name__)}")
    return off


def ptr_add(p, off):
    if is_static(off) and off == 0:
        return p
    return emit1("ptr_add", [p, _offset(off)], p.type)


def _check_vec(vec, elem: DType):
    if not isinstance(vec, int) or vec not in _VECS:
        _err(f"vec must be one of {_VECS}, got {vec!r}")
    if vec * elem.bits > 128 and vec > 1:
        _err(f"vec={vec} of {elem.name} is {vec * elem.bits // 8} bytes; one access moves at most "
             f"16 bytes (split it into several loads)")


def _note_alignment(p, nbytes):
    """Remember that pointer parameter ``p`` must be nbytes-aligned (checked at launch)."""
    c = ctx()
    if p.owner is None and nbytes > 1:
        c.align_req[p] = max(c.align_req.get(p, 1), nbytes)


def load(p, off=0, vec=1, bound=None, cache=None):
    """Load ``vec`` consecutive elements at ``p[off]`` (bounds-checked if ``bound`` is given)."""
    if not isinstance(p, Value) or not isinstance(p.type, PointerType):
        _err(f"load needs a pointer, got {getattr(p, 'type', type(p).__name__)}")
    elem = p.type.elem
    _check_vec(vec, elem)
    operands = [p, _offset(off)]
    if bound is not None:
        operands.append(_offset(bound, "size"))
    _note_alignment(p, vec * elem.itemsize)
    rt = VectorType(elem, vec) if vec > 1 else elem
    return emit1("load", operands, rt, {"vec": vec, "cache": cache})


def store(p, value, off=0, vec=None, bound=None, cache=None):
    """Store a scalar or vector at ``p[off]``; a scalar with vec > 1 is broadcast."""
    if not isinstance(p, Value) or not isinstance(p.type, PointerType):
        _err(f"store needs a pointer, got {getattr(p, 'type', type(p).__name__)}")
    elem = p.type.elem
    n = lanes_of(value.type) if isinstance(value, Value) else 1
    if vec is None:
        vec = n
    _check_vec(vec, elem)
    if n not in (1, vec):
        _err(f"storing a {type_str(value.type)} with vec={vec}")
    value = cast(as_value(value, elem), elem)
    if vec > 1 and n == 1:
        value = emit1("broadcast", [value], VectorType(elem, vec), {"n": vec})
    operands = [p, _offset(off), value]
    if bound is not None:
        operands.append(_offset(bound, "size"))
    _note_alignment(p, vec * elem.itemsize)
    emit("store", operands, [], {"vec": vec, "cache": cache})


class _View:
    """Shared behaviour of gmem and smem views: a pointer plus an optional element bound."""

    def __init__(self, ptr, size=None):
        self.ptr = ptr
        self.size = size

    @property
    def dtype(self) -> DType:
        return self.ptr.type.elem

    def load(self, offset, vec=1, cache=None):
        return load(self.ptr, offset, vec, self.size, cache)

    def store(self, value, offset, vec=None, cache=None):
        store(self.ptr, value, offset, vec, self.size, cache)

    def __getitem__(self, i):
        return self.load(i)

    def __setitem__(self, i, v):
        self.store(v, i)

    def __add__(self, off):
        """A view shifted by ``off`` elements (its bound shrinks accordingly)."""
        size = None if self.size is None else self.size - off
        return type(self)(ptr_add(self.ptr, off), size)

    # carried through run-time loops/branches as (ptr, size)
    def __opus_flatten__(self):
        return [self.ptr, self.size], lambda leaves: type(self)(*leaves)


class Gmem(_View):
    """Global memory seen as elements of one dtype, optionally bounded (``size`` elements)."""


class Smem(_View):
    """Shared (LDS) memory seen as elements of one dtype."""


def make_gmem(ptr, size=None, *, nbytes=None):
    """A global-memory view of ``ptr``. ``size`` (elements) or ``nbytes`` turns on per-element
    out-of-bounds protection: reads past it give 0, writes past it are dropped."""
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType) or ptr.type.space != "global":
        _err(f"make_gmem needs a global pointer (an opus.Ptr[...] parameter), got "
             f"{getattr(ptr, 'type', type(ptr).__name__)}")
    if size is not None and nbytes is not None:
        _err("give make_gmem either size (elements) or nbytes, not both")
    if nbytes is not None:
        size = nbytes // ptr.type.elem.itemsize
    if size is not None:
        size = _offset(size, "size")
    return Gmem(ptr, size)


def make_smem(ptr, size=None):
    if not isinstance(ptr, Value) or not isinstance(ptr.type, PointerType) or ptr.type.space != "shared":
        _err("make_smem needs a shared-memory pointer (from opus.alloc_smem or opus.dynamic_smem)")
    return Smem(ptr, None if size is None else _offset(size, "size"))


def _smem_dtype(c, dtype, what):
    if not isinstance(dtype, DType):
        _err(f"{what} needs an opus dtype, got {dtype!r}")
    return c.target.require_dtype(dtype, "shared arrays")


def alloc_smem(dtype: DType, count: int, align: int = 16):
    """A block-wide shared-memory array of ``count`` elements (static size), as a view."""
    c = ctx()
    dtype = _smem_dtype(c, dtype, "alloc_smem")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        _err(f"alloc_smem count must be a positive compile-time int, got {count!r}")
    if align not in (1, 2, 4, 8, 16, 32, 64, 128):
        _err(f"alloc_smem align must be a power of two up to 128, got {align}")
    # arrays are laid out in order, each at its alignment (as the interpreter places them)
    total = (c.smem_bytes + align - 1) // align * align + count * dtype.itemsize
    from ..targets.limits import static_smem_error
    why = static_smem_error(c.target.limits, c.target.name, total)
    if why is not None:
        _err(f"alloc_smem({dtype.name}, {count}): {why}")
    name = f"smem{c.smem_count}"
    c.smem_count += 1
    c.smem_bytes = total
    p = emit1("smem_alloc", [], PointerType(dtype, "shared"),
              {"dtype": dtype, "count": count, "align": align, "name": name})
    return Smem(p)


def dynamic_smem(dtype: DType, offset: int = 0):
    """A view of the dynamic shared memory given at launch (``smem=`` bytes), from ``offset``."""
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
    c.uses_dyn_smem = True
    p = emit1("dyn_smem", [], PointerType(dtype, "shared"), {"dtype": dtype, "offset": offset})
    return Smem(p)
