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
    """A register vector from its lanes: ``opus.make_vector(a, b, c, d)``. Vector arguments
    contribute all their lanes; one tuple or list argument is taken as the lanes.

    :param xs: the lanes, in order
    :type xs: run-time values (scalar or vector) or Python numbers
    :param dtype: the element type, into which each lane must convert implicitly (widening; use
        opus.cast to narrow); None: the run-time lanes' common type (Python numbers alone need
        ``dtype``)
    :type dtype: DType or None
    :returns: a vector of len(lanes) elements (a scalar for one lane)
    :targets: all targets
    """
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
    """A vector of ``n`` copies of ``x``: ``opus.splat(0.5, 8, opus.f16)``.

    :param x: the value
    :type x: run-time scalar value or Python number
    :param n: the lane count
    :type n: int (compile-time)
    :param dtype: the element type, into which ``x`` must convert implicitly (None: x's type,
        or a Python number's default: i32 (i64 beyond it), f32 or bool)
    :type dtype: DType or None
    :returns: a vector of ``n`` lanes (``x`` itself for n == 1)
    :targets: all targets
    """
    v = convert_implicitly(x, dtype, f"splat to {dtype.name}") if dtype is not None else as_value(x)
    if n == 1:
        return v
    return emit1("broadcast", [v], VectorType(scalar_of(v.type), n), {"n": n})


def zeros(n: int, dtype: DType):
    """A vector of ``n`` zeros: ``acc = opus.zeros(4, opus.f32)``.

    :param n: the lane count
    :type n: int (compile-time)
    :param dtype: the element type
    :type dtype: DType
    :returns: a vector of ``n`` zeros of ``dtype`` (a scalar zero for n == 1)
    :targets: all targets
    """
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
    """``v`` with lane ``i`` replaced by ``x`` (vectors are values: ``v`` itself is unchanged).

    :param v: the vector
    :type v: run-time vector
    :param i: the lane (negative counts from the end)
    :type i: int (compile-time)
    :param x: the new lane, converted implicitly to the element type
    :type x: run-time scalar value or Python number
    :returns: the new vector, of v's type
    :targets: all targets
    """
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
    """Concatenate vectors and scalars into one vector: ``opus.concat(lo, hi)``.

    :param vs: the parts, in order; their element types combine as for ``+`` (i32 with f32
        gives f32), so use one type to keep it
    :type vs: run-time values (scalar or vector)
    :returns: a vector of all their lanes
    :targets: all targets
    """
    return make_vector(*vs)
