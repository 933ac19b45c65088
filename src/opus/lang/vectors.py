"""Register vectors: build, index, slice, insert, concatenate (one thread's lanes)."""
from __future__ import annotations

from ..dtypes import DType
from ..ir import Value, VectorType, PointerType, scalar_of, type_str
from .context import TraceError, ctx
from .values import emit1, as_value, convert_implicitly, promote_types, lanes_of

__all__ = ["make_vector", "vector_getitem", "insert", "concat", "splat", "zeros", "VectorDType",
           "vector_type", "vector_type_named", "declare", "sizeof_bits", "is_packed", "num_packs"]


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


# -- vector types by name: opus.f16x8, opus.fp4x32, ... ------------------------------------------

# the lane counts that have names (the original's <type>x<N>_t; one lane is the scalar type)
NAMED_LANES = (2, 4, 8, 16, 32, 64)


class VectorDType(VectorType):
    """A register vector type: ``opus.f16x8``, ``opus.bf16x4``, ``opus.fp8x16``, ``opus.fp4x32``,
    ``opus.i8x4``, ... (``opus.<dtype>x<n>`` for n in 2, 4, 8, 16, 32, 64; any n through
    opus.vector_type). Equal to the IR's VectorType of the same element and length, so it is
    what ``v.type`` of such a value compares equal to.

    In a kernel it is a declared type (``acc: opus.f32x4 = opus.zeros(4, opus.f32)``), a
    conversion and a constructor: ``opus.f16x8(v)`` converts a vector of 8 lanes lane by lane
    (as opus.cast), ``opus.f16x8(x)`` converts a scalar and repeats it, ``opus.f16x8(a, b, ...)``
    builds one from 8 lanes, each converted. ``opus.bitcast(words, opus.fp4x32)`` reads the bits
    of four u32 as 32 packed fp4. Sub-byte elements come in whole bytes (fp4x2 and up, fp6x4 and
    up; ir/ops.py states the packing).

    :param xs: one vector of n lanes, one scalar, or n lanes
    :type xs: run-time values or Python numbers
    :param kw: ``rounding`` and ``sat``, as for opus.cast
    :type kw: str, bool
    :returns: a vector of this type
    :targets: all targets that hold the element type
    """

    __slots__ = ()

    def __call__(self, *xs, **kw):
        from .values import cast
        elem = ctx().target.resolve_dtype(self.elem)
        if len(xs) == 1 and isinstance(xs[0], (tuple, list)):
            xs = tuple(xs[0])
        if len(xs) == 1:
            x = xs[0]
            if isinstance(x, Value) and isinstance(x.type, VectorType):
                if x.type.n != self.n:
                    _err(f"{self!r}({type_str(x.type)}): {x.type.n} lanes given for a vector "
                         f"of {self.n}; use opus.bitcast to reinterpret bits")
                return cast(x, elem, **kw)
            return splat(cast(x, elem, **kw), self.n)
        if len(xs) != self.n:
            _err(f"{self!r} takes one value or {self.n} lanes, got {len(xs)}")
        return make_vector(*[cast(x, elem, **kw) for x in xs])

    def __repr__(self):
        return f"opus.{self.elem.name}x{self.n}"

    def __reduce__(self):
        return (vector_type, (self.elem, self.n))


_VECTOR_TYPES: dict = {}


def vector_type(dtype: DType, n: int) -> VectorDType:
    """The vector type of ``n`` lanes of ``dtype`` (``opus.vector_type(opus.f16, 8)`` is
    ``opus.f16x8``): an annotation, a conversion and a constructor (see opus.f16x8).

    :param dtype: the element type
    :type dtype: DType
    :param n: the lane count, >= 2 (sub-byte types: a multiple of whole bytes' elements)
    :type n: int
    :returns: the vector type
    :rtype: VectorDType
    :targets: all targets that hold the element type
    """
    if not isinstance(dtype, DType):
        raise TypeError(f"opus.vector_type needs an opus dtype, got {dtype!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"opus.vector_type: a vector has n >= 2 lanes (one lane is the scalar "
                         f"type {dtype!r}), got {n!r}")
    if n % dtype.pack_elems:
        from .values import packed_length_error
        raise ValueError(packed_length_error(dtype, n))
    key = (dtype.name, n)
    t = _VECTOR_TYPES.get(key)
    if t is None:
        t = _VECTOR_TYPES[key] = VectorDType(dtype, n)
    return t


def vector_type_named(name: str):
    """``opus.<dtype>x<n>`` by its name (``'f16x8'``), or None when ``name`` is not one."""
    from ..dtypes import dtype_from_name
    base, sep, lanes = name.rpartition("x")
    if not sep or not lanes.isdigit() or int(lanes) not in NAMED_LANES:
        return None
    try:
        d = dtype_from_name(base)
    except ValueError:
        return None
    if d.name == "tf32" or int(lanes) % d.pack_elems:
        return None
    return vector_type(d, int(lanes))


def declare(value, t):
    """``name: t = value`` in a kernel: ``value`` as declared type ``t`` (a dtype or vector type),
    converted only where that cannot change it (as a store converts); a scalar declared as a
    vector is repeated. Other annotations are Python's and leave ``value`` alone."""
    if isinstance(t, DType):
        t = ctx().target.resolve_dtype(t)
        if isinstance(value, Value) and isinstance(value.type, VectorType):
            _err(f"a {type_str(value.type)} declared as the scalar type {t!r}")
        return convert_implicitly(value, t, f"the value declared {t!r}")
    if not isinstance(t, VectorType):
        return value
    elem = ctx().target.resolve_dtype(t.elem)
    what = f"the value declared {t!r}"
    if isinstance(value, Value) and isinstance(value.type, VectorType) and value.type.n != t.n:
        _err(f"{what} is a {type_str(value.type)}: {value.type.n} lanes, not {t.n}")
    v = convert_implicitly(value, elem, what)
    return v if lanes_of(v.type) == t.n else splat(v, t.n)


# -- traits (the original's sizeof_bits_v, is_packs_v, num_packs_v) --------------------------------

def _elem_of(t, what):
    if isinstance(t, VectorType):
        return t.elem
    if isinstance(t, DType):
        return t
    raise TypeError(f"opus.{what} takes an opus dtype or vector type (opus.f16, opus.fp4x32), "
                    f"got {t!r}")


def sizeof_bits(t) -> int:
    """Bits that a value of type ``t`` occupies packed: 4 for opus.fp4, 6 for fp6, 8 for bool
    (a byte), 128 for opus.fp4x32 (the original's sizeof_bits_v).

    :param t: a type
    :type t: DType or vector type
    :returns: the bits
    :rtype: int
    :targets: all targets (a compile-time query)
    """
    e = _elem_of(t, "sizeof_bits")
    bits = 8 if e.is_bool else e.bits
    return bits * t.n if isinstance(t, VectorType) else bits


def is_packed(t) -> bool:
    """Whether ``t``'s elements are sub-byte types packed several to a byte (fp4, fp6, int4,
    uint4; the original's is_packs_v): for a vector type, its element's answer.

    :param t: a type
    :type t: DType or vector type
    :returns: True for packed element types
    :rtype: bool
    :targets: all targets (a compile-time query)
    """
    return _elem_of(t, "is_packed").packed


def num_packs(t) -> int:
    """Elements of ``t``'s element type in its smallest whole number of bytes: 2 for the 4-bit
    types (two per byte, the original's num_packs_v), 4 for fp6 (four in three bytes), 1 for
    every other type. Vector lengths, access widths and offsets of packed types are multiples
    of it.

    :param t: a type
    :type t: DType or vector type
    :returns: the count
    :rtype: int
    :targets: all targets (a compile-time query)
    """
    return _elem_of(t, "num_packs").pack_elems
