"""Register vectors: build, index, slice, insert, concatenate (one thread's lanes)."""
from __future__ import annotations

from ..dtypes import DType
from ..ir import Value, VectorType, PointerType, scalar_of, type_str
from .context import TraceError, ctx
from .values import emit1, as_value, convert_implicitly, promote_types

__all__ = ["make_vector", "vector_getitem", "insert", "concat", "splat", "zeros"]


def _err(msg):
    raise TraceError(msg)


def make_vector(*xs, dtype: DType | None = None):
    """A vector from scalars (run-time or Python numbers); ``dtype`` fixes the element type,
    into which each element must convert implicitly (widening; use opus.cast to narrow)."""
    if len(xs) == 1 and isinstance(xs[0], (tuple, list)):
        xs = tuple(xs[0])
    if not xs:
        _err("make_vector needs at least one element")
    vals = [x for x in xs if isinstance(x, Value)]
    for v in vals:
        if isinstance(v.type, PointerType):
            _err(f"make_vector: a pointer ({type_str(v.type)}) cannot be a vector element")
    if dtype is None:
        if not vals:
            _err("make_vector of only Python numbers needs dtype=...")
        dtype = scalar_of(vals[0].type)
        for v in vals[1:]:
            dtype = promote_types(dtype, scalar_of(v.type), "make_vector")
    elif not isinstance(dtype, DType):
        _err(f"make_vector dtype must be an opus dtype, got {dtype!r}")
    else:
        dtype = ctx().target.resolve_dtype(dtype)
    lanes = []
    for x in xs:
        if isinstance(x, Value) and isinstance(x.type, VectorType):
            lanes.extend(vector_getitem(x, i) for i in range(x.type.n))
        else:
            lanes.append(x)
    elems = [convert_implicitly(x, dtype, f"make_vector of {dtype.name}") for x in lanes]
    if len(elems) == 1:
        return elems[0]
    return emit1("vector", elems, VectorType(dtype, len(elems)))


def splat(x, n: int, dtype: DType | None = None):
    """n copies of a scalar (converted implicitly to ``dtype`` when given)."""
    v = convert_implicitly(x, dtype, f"splat to {dtype.name}") if dtype is not None else as_value(x)
    if n == 1:
        return v
    return emit1("broadcast", [v], VectorType(scalar_of(v.type), n), {"n": n})


def zeros(n: int, dtype: DType):
    from .values import const
    return const(0, VectorType(dtype, n) if n > 1 else dtype)


def vector_getitem(v, i):
    t = v.type
    if not isinstance(t, VectorType):
        if isinstance(i, int) and i in (0, -1):
            return v  # a scalar is its own lane 0
        _err(f"indexing a scalar {type_str(t)}")
    if isinstance(i, slice):
        idx = tuple(range(*i.indices(t.n)))
        if not idx:
            _err("empty vector slice")
        if len(idx) == 1:
            return emit1("extract", [v], t.elem, {"index": idx[0]})
        return emit1("vector_permute", [v], VectorType(t.elem, len(idx)), {"indices": idx})
    if isinstance(i, Value):
        _err("vector lanes must be indexed with compile-time integers (registers cannot be "
             "indexed at run time without spilling); use an unrolled `for` over range(n)")
    if not isinstance(i, int):
        _err(f"vector index must be an int, got {type(i).__name__}")
    if not -t.n <= i < t.n:
        _err(f"lane {i} out of range for {type_str(t)}")
    return emit1("extract", [v], t.elem, {"index": i % t.n})


def insert(v, i: int, x):
    """``v`` with lane ``i`` replaced by ``x``."""
    t = v.type
    if not isinstance(t, VectorType):
        _err("insert needs a vector")
    if not isinstance(i, int) or not -t.n <= i < t.n:
        _err(f"insert: lane {i!r} must be a compile-time int in range for {type_str(t)}")
    if isinstance(x, Value) and isinstance(x.type, VectorType):
        _err(f"insert: lane {i} takes a scalar, got a {type_str(x.type)}")
    x = convert_implicitly(x, t.elem, f"insert into a {type_str(t)}")
    return emit1("insert", [v, x], t, {"index": i % t.n})


def concat(*vs):
    """Concatenate vectors/scalars of one element type into one vector."""
    return make_vector(*vs)
