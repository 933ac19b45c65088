"""Run-time values inside a kernel, and the conversion rules between types.

Python numbers are compile-time and fold in Python; a ``Val`` is a run-time value (an IR value
with operators). Rules (docs/types.md has the table):

* Two run-time operands of different types are promoted: bool < integers < floats; the wider
  type of one kind wins; f16 with bf16 gives f32; a signed/unsigned mix is allowed only when the
  unsigned type is narrower (u8 + i32 -> i32), otherwise it is an error asking for a cast.
  Nothing is ever narrowed implicitly (no silent i64 -> i32).
* A Python int next to a run-time value takes the value's type, and must fit it exactly.
  A Python float next to an integer value makes the result f32 (as int + float is float).
* ``//`` and ``%`` follow Python (floor) on run-time integers too, so a value's result never
  depends on whether it was known at compile time; ``opus.tdiv``/``opus.tmod`` give C's
  truncation. ``/`` is true division (integers are converted to f32 first).
* Storage types (fp8, fp4, e8m0, int4) take part in no arithmetic: cast them first.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import Value, VectorType, PointerType, scalar_of, lanes_of, type_str
from .context import ctx, TraceError

__all__ = ["Undefined", "Val", "is_value", "is_static", "const", "as_value", "promote_types", "binary", "compare",
           "unary", "cast", "bitcast", "emit", "emit1", "check_arith", "to_bool", "py_default_type",
           "converts_implicitly", "convert_implicitly"]

_STATIC = (bool, int, float)


def is_value(x) -> bool:
    return isinstance(x, Value)


def is_static(x) -> bool:
    return isinstance(x, _STATIC)


def emit(kind, operands=(), result_types=(), attrs=None, regions=()):
    c = ctx()
    for t in result_types:  # every run-time value is made here: one availability check
        e = t.elem if isinstance(t, (VectorType, PointerType)) else t
        if e.name in c.target.unavailable_dtypes:
            c.target.require_dtype(e, "pointers" if isinstance(t, PointerType) else "values")
        if isinstance(t, VectorType) and t.n % e.pack_elems:
            _err(packed_length_error(e, t.n))
    if c.body == "ptx":
        _check_ptx_body(kind, operands, result_types, attrs or {})
    return c.builder.emit(kind, operands, result_types, attrs, regions)


def _check_ptx_body(kind, operands, result_types, attrs):
    """A TraceError (at the user's line) for an op a PTX body does not render yet."""
    from ..targets.ptx_body import ptx_body_refusal
    from .context import PtxBodyRefusal
    why = ptx_body_refusal(kind, [o.type for o in operands], result_types, attrs)
    if why is not None:
        raise PtxBodyRefusal(f"{why} is not available in a PTX body yet (@opus.kernel(body='ptx'): "
             f"docs/ptx_body.md lists what it renders); use body='cuda' for this kernel")


def packed_length_error(e: DType, n: int) -> str:
    """Why a vector of ``n`` sub-byte ``e`` elements cannot exist (ir/ops.py, sub-byte types)."""
    group = e.nbytes(e.pack_elems)
    return (f"a vector of {n} {e.name}: vectors of the {e.bits}-bit type {e.name} hold whole "
            f"bytes, a multiple of {e.pack_elems} elements ({e.pack_elems} {e.name} = {group} "
            f"byte{'s' if group > 1 else ''})")


def emit1(kind, operands, result_type, attrs=None):
    return emit(kind, operands, [result_type], attrs).results[0]


def _err(msg):
    raise TraceError(msg)


class Undefined:
    """A variable with no value here; any use raises an error that says why."""

    __slots__ = ("name", "why")

    def __init__(self, name, why):
        self.name, self.why = name, why

    def _fail(self, *a, **k):
        raise TraceError(f"variable {self.name!r} {self.why}")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __floordiv__ = __mod__ = __and__ = __or__ = __xor__ = __lshift__ = __rshift__ = _fail
    __neg__ = __invert__ = __bool__ = __index__ = __getitem__ = __call__ = __iter__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __len__ = _fail

    def __getattr__(self, item):
        self._fail()

    def __repr__(self):
        return f"<undefined {self.name}>"


# -- constants and conversions of Python values -------------------------------------------------

def py_default_type(x) -> DType:
    """Type a lone Python scalar becomes when it must be run-time (loop-carried, say)."""
    if isinstance(x, bool):
        return dt.bool_
    if isinstance(x, int):
        if -(1 << 31) <= x < (1 << 31):
            return dt.i32
        if -(1 << 63) <= x < (1 << 63):
            return dt.i64
        _err(f"integer {x} does not fit in 64 bits")
    if isinstance(x, float):
        return dt.f32
    _err(f"{type(x).__name__} value {x!r} cannot become a run-time value")


def _check_literal(x, t: DType):
    """Validate the Python scalar ``x`` as a constant of scalar type ``t``; return it normalised."""
    if t.is_bool:
        return bool(x)
    if t.is_int:
        if isinstance(x, float):
            if not x.is_integer():
                _err(f"float {x!r} is not an integer; it cannot be a {t.name} constant")
            x = int(x)
        lo, hi = t.int_range()
        if not lo <= int(x) <= hi:
            _err(f"integer constant {x} does not fit {t.name} (range {lo}..{hi}); "
                 f"convert explicitly, e.g. opus.i64({x}) or opus.u32(...)")
        return int(x)
    return float(x)


def const(x, t) -> "Val":
    """A run-time constant of type ``t`` (scalar or vector)."""
    if isinstance(t, VectorType):
        if isinstance(x, (tuple, list)):
            if len(x) != t.n:
                _err(f"{len(x)} values given for a {type_str(t)} constant")
            vals = tuple(_check_literal(v, t.elem) for v in x)
        else:
            vals = (_check_literal(x, t.elem),) * t.n
        return emit1("const", [], t, {"value": vals})
    return emit1("const", [], t, {"value": _check_literal(x, t)})


def as_value(x, like=None) -> "Val":
    """Make ``x`` a run-time value; a Python scalar takes type ``like`` (or its default type)."""
    if isinstance(x, Undefined):
        x._fail()
    if isinstance(x, Value):
        return x
    if isinstance(x, _STATIC):
        if like is None:
            return const(x, py_default_type(x))
        return const(x, like)
    _err(f"expected a number or run-time value, got {type(x).__name__} {x!r}")


def _promotion(a: DType, b: DType) -> DType | None:
    """The type of a binary operation on ``a`` and ``b`` (the table in docs/language.md); None
    for a signed/unsigned mix whose unsigned type is not the narrower."""
    if a is b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        if a.bits == b.bits:
            return dt.f32 if a.bits <= 32 else dt.f64
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.kind == b.kind:
        return a if a.bits > b.bits else b
    s, u = (a, b) if a.kind == "int" else (b, a)
    return s if u.bits < s.bits else None


def promote_types(a: DType, b: DType, what="operation") -> DType:
    t = _promotion(a, b)
    if t is not None:
        return t
    s, u = (a, b) if a.kind == "int" else (b, a)
    _err(f"{what} mixes {a.name} and {b.name} (signed and unsigned of which the unsigned is not "
         f"narrower): convert one explicitly, e.g. opus.{s.name}(x) or opus.{u.name}(x)")


def converts_implicitly(src: DType, dst: DType) -> bool:
    """Whether a run-time ``src`` value becomes a ``dst`` without an explicit cast: where the
    binary-operation promotion of the two gives ``dst`` (widening, int -> float, bool -> any).
    Conversions into storage types round, so they are always explicit."""
    if src is dst:
        return True
    if dst.storage_only:
        return False
    if src is dt.e8m0 and dst is dt.f16:  # 2^-127..2^127 is far outside f16's range
        return False
    return _promotion(src, dst) is dst


def _float_max(t: DType) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(t.np_dtype).max)


def _literal_into(x, to: DType, what: str):
    """The Python number ``x`` as a run-time ``to``: ints exactly (in range), floats rounded
    (a finite one beyond the type's largest finite value is an error)."""
    if not isinstance(x, bool) and to.is_float:
        if math.isfinite(x) and abs(x) > _float_max(to):
            _err(f"{what}: the literal {x!r} is out of the range of {to.name} (largest finite "
                 f"value {_float_max(to):g}); convert explicitly with opus.cast({x!r}, "
                 f"opus.{to.name}, sat=...) if that is meant")
    elif to.is_bool:
        if x not in (0, 1):
            _err(f"{what}: the literal {x!r} is not a bool (True/False, 1/0); write "
                 f"opus.bool_({x!r}) or a comparison for 'non-zero'")
    elif to.is_int:
        if isinstance(x, float) and not x.is_integer():
            _err(f"{what}: the float literal {x!r} is not an integer, so it cannot become a "
                 f"{to.name} without rounding; write opus.{to.name}({x!r}) to truncate")
        lo, hi = to.int_range()
        if not lo <= int(x) <= hi:
            _err(f"{what}: the literal {x!r} does not fit {to.name} (range {lo}..{hi}); "
                 f"convert explicitly, e.g. opus.cast(v, opus.{to.name}), if wrapping is meant")
    return cast(x, to)


def convert_implicitly(x, to: DType, what: str):
    """``x`` (a Python number or a run-time scalar/vector) as element type ``to``, where the
    language converts without being asked: a run-time value only by widening
    (converts_implicitly), a Python literal when it is in range. Anything else is an error that
    names both types and asks for ``opus.cast``. Used wherever a value is written into a slot
    of a given type: memory stores, vector lanes."""
    if isinstance(x, Undefined):
        x._fail()
    if isinstance(x, _STATIC):
        return _literal_into(x, to, what)
    if not isinstance(x, Value):
        _err(f"{what}: expected a number or run-time value, got {type(x).__name__} {x!r}")
    if isinstance(x.type, PointerType):
        _err(f"{what}: a pointer ({type_str(x.type)}) is not a value that can be written "
             f"there")
    src = scalar_of(x.type)
    if converts_implicitly(src, to):
        return cast(x, to)
    _err(f"{what}: {type_str(x.type)} does not convert implicitly to "
         f"{type_str(_result_like(x.type, to))} (it could change the value: nothing narrows "
         f"implicitly); convert explicitly with opus.cast(v, opus.{to.name}) or "
         f"v.to(opus.{to.name})")


def check_arith(t, what):
    e = scalar_of(t)
    if e.storage_only:
        _err(f"{e.name} is a storage type and takes part in no arithmetic ({what}); "
             f"convert it first, e.g. opus.f32(x)")
    return e


def _literal_type_for(x, other: DType) -> DType:
    """Type that a Python scalar operand takes next to a run-time value of type ``other``."""
    if isinstance(x, float) and not other.is_float:
        return dt.f32
    if isinstance(x, bool) and not other.is_bool:
        return other
    if isinstance(x, int) and not isinstance(x, bool) and other.is_bool:
        return dt.i32
    return other


def _coerce(a, b, what):
    """Bring two operands (at least one run-time) to one type; returns (a, b, type)."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        _err(f"internal: {what} on two static operands")
    if not isinstance(a, Value):
        a = _lift(a, b, what)
    if not isinstance(b, Value):
        b = _lift(b, a, what)
    ta, tb = a.type, b.type
    if isinstance(ta, PointerType) or isinstance(tb, PointerType):
        _err(f"{what} is not defined on pointers (use p + offset, or a gmem/smem view)")
    na, nb = lanes_of(ta), lanes_of(tb)
    if na != nb and na != 1 and nb != 1:
        _err(f"{what} on vectors of different lengths: {type_str(ta)} and {type_str(tb)}")
    e = promote_types(scalar_of(ta), scalar_of(tb), what)
    n = max(na, nb)
    a, b = _to_shape(a, e, n), _to_shape(b, e, n)
    return a, b, a.type


def _lift(x, other, what):
    if isinstance(x, Undefined):
        x._fail()
    if not isinstance(x, _STATIC):
        _err(f"{what}: operand {x!r} of type {type(x).__name__} is not a number or run-time value")
    return const(x, _literal_type_for(x, scalar_of(other.type)))


def _to_shape(v, elem: DType, n: int):
    if scalar_of(v.type) is not elem:
        v = cast(v, elem)
    if n > 1 and not isinstance(v.type, VectorType):
        v = emit1("broadcast", [v], VectorType(elem, n), {"n": n})
    return v


def _result_like(t, elem):
    return VectorType(elem, t.n) if isinstance(t, VectorType) else elem


# -- operators ------------------------------------------------------------------------------------

_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "and": "&",
        "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "min": "min", "max": "max",
        "tdiv": "tdiv", "tmod": "tmod"}


_RIGHT_IDENTITY = {"add": 0, "sub": 0, "or": 0, "xor": 0, "shl": 0, "shr": 0, "mul": 1,
                   "floordiv": 1, "tdiv": 1}
_LEFT_IDENTITY = {"add": 0, "or": 0, "xor": 0, "mul": 1}


def _is_int_value(x):
    return isinstance(x, Value) and isinstance(x.type, (DType, VectorType)) and scalar_of(x.type).is_int


def binary(op, a, b):
    # x + 0, x * 1, ... on integers: no op (keeps index math in the generated code readable)
    if type(b) is int and _is_int_value(a) and _RIGHT_IDENTITY.get(op) == b:
        return a
    if type(a) is int and _is_int_value(b) and _LEFT_IDENTITY.get(op) == a:
        return b
    what = f"'{_SYM.get(op, op)}'"
    if op in ("shl", "shr"):
        return _shift(op, a, b, what)
    a, b, t = _coerce(a, b, what)
    e = check_arith(t, what)
    if op == "div" and not e.is_float:
        ft = dt.f64 if e.bits == 64 else dt.f32
        return binary("div", cast(a, ft), cast(b, ft))
    if op in ("floordiv", "mod") and e.is_float:
        from .math import floor
        q = floor(binary("div", a, b))
        return q if op == "floordiv" else binary("sub", a, binary("mul", q, b))
    if op in ("tdiv", "tmod") and not e.is_int:
        _err(f"{what} needs integer operands, got {e.name}")
    if op in ("and", "or", "xor") and e.is_float:
        _err(f"{what} needs integer or bool operands, got {e.name}")
    if e.is_bool and op in ("add", "sub", "mul", "floordiv", "mod", "tdiv", "tmod"):
        a, b = cast(a, dt.i32), cast(b, dt.i32)
        t = a.type
    return emit1("binary", [a, b], t, {"op": op})


def _shift(op, a, b, what):
    if not isinstance(a, Value):
        a = as_value(a, _literal_type_for(a, scalar_of(b.type)) if isinstance(b, Value) else None)
    ea = scalar_of(a.type)
    if not ea.is_int:
        _err(f"{what} needs an integer left operand, got {ea.name}")
    if isinstance(b, _STATIC):
        if not isinstance(b, int) or b < 0:
            _err(f"{what}: shift amount must be a non-negative integer, got {b!r}")
        b = const(min(b, ea.bits), ea)  # amounts >= width behave alike (see ir/ops.py)
    eb = scalar_of(b.type)
    if not eb.is_int:
        _err(f"{what} needs an integer shift amount, got {eb.name}")
    if eb.bits > ea.bits:  # clamp before narrowing, or 2**32 would shift a 32-bit value by 0
        wide = {16: dt.u16, 32: dt.u32, 64: dt.u64}[eb.bits]
        b = binary("min", cast(b, wide), ea.bits)  # the amount is read as unsigned
    if scalar_of(b.type) is not ea:
        b = cast(b, ea)
    n = max(lanes_of(a.type), lanes_of(b.type))
    a, b = _to_shape(a, ea, n), _to_shape(b, ea, n)
    return emit1("binary", [a, b], a.type, {"op": op})


def compare(pred, a, b):
    a, b, t = _coerce(a, b, f"comparison '{pred}'")
    check_arith(t, "comparison")
    return emit1("cmp", [a, b], _result_like(t, dt.bool_), {"pred": pred})


def unary(op, a):
    e = check_arith(a.type, f"unary {op}")
    if op == "neg" and e.is_bool:
        _err("cannot negate a bool; use ~ or opus.logical_not")
    if op == "invert" and e.is_bool:
        op = "not"
    if op == "invert" and e.is_float:
        _err(f"~ needs an integer or bool operand, got {e.name}")
    if op == "abs" and e.kind == "uint":
        return a
    return emit1("unary", [a], a.type, {"op": op})


def to_bool(x, what="condition"):
    """A run-time bool from ``x`` (ints and floats compare != 0)."""
    if isinstance(x, Value):
        if isinstance(x.type, PointerType):
            _err(f"a pointer cannot be a {what}")
        if scalar_of(x.type).is_bool:
            return x
        return compare("ne", x, 0)
    return const(bool(x), dt.bool_)


# -- casts ------------------------------------------------------------------------------------

# rounding modes (ir/ops.py cast); the original's bf16 mode names are accepted for them
_ROUNDINGS = ("rn", "rz", "truncate", "truncate_with_nan", "sr")
_ROUNDING_ALIASES = {"standard": "rn"}


def cast(x, to: DType, rounding="rn", sat=False, rbits=None):
    """Convert ``x`` to element type ``to``, lane by lane for a vector; also ``x.to(to)`` and
    ``to(x)``. Ints wrap; floats to ints truncate toward zero and saturate (NaN gives 0); to
    and from the fp8/e8m0 storage types it is exact through f32 (docs/language.md, "Types and
    conversions"). Vector casts convert two lanes per instruction where the chip has a packed
    conversion (``Target.packed_conversion``).

    Example: ``h = opus.cast(acc, opus.bf16, rounding="truncate")``;
    ``q = opus.cast(v, opus.fp8_e4m3, rounding="sr", rbits=bits, sat=True)``.

    :param x: the value to convert
    :type x: run-time value (scalar or vector) or Python number
    :param to: the element type
    :type to: DType
    :param rounding: 'rn' (nearest even; also 'standard'), 'rz' (toward zero: into f16, bf16
        and e8m0), 'truncate' / 'truncate_with_nan' (into bf16: the high half of the f32 bits,
        the second keeping every NaN a NaN), 'sr' (stochastic, into f16, bf16 and fp8, from
        f32/f16/bf16: the top bits of ``rbits`` are added below the kept mantissa, then
        truncated; ir/ops.py gives the rule)
    :type rounding: str
    :param sat: for conversions to fp8 and e8m0: clamp values beyond the largest finite one
        (infinities too) to it instead of giving inf/NaN
    :type sat: bool
    :param rbits: with rounding='sr' only: the random bits, a u32 (or i32) run-time value with
        one lane per lane of ``x`` (results are reproducible from them)
    :type rbits: run-time value
    :returns: ``x`` as ``to`` (a vector of ``to`` for a vector)
    :targets: all targets (fp8 conversions use the chip's instructions where it has them, else
        exact bit arithmetic with the same results; stochastic rounding is v_cvt_sr_* on
        gfx942 (FNUZ fp8) and gfx950 (OCP fp8, bf16, f16), the same rule in bit arithmetic
        elsewhere)
    """
    if not isinstance(to, DType):
        _err(f"cast target must be an opus dtype, got {to!r}")
    rounding = _ROUNDING_ALIASES.get(rounding, rounding) if isinstance(rounding, str) else rounding
    if rounding not in _ROUNDINGS:
        _err(f"unknown rounding {rounding!r}; use one of {_ROUNDINGS} ('standard' is 'rn')")
    if (rbits is None) != (rounding != "sr"):
        _err("rounding='sr' needs its random bits: pass rbits= (a u32 value, one per lane)"
             if rbits is None else
             f"rbits= is the random bits of rounding='sr'; this cast rounds with {rounding!r}")
    target = ctx().target
    to = target.resolve_dtype(to)
    target.conversion(to, to, rounding, sat)  # the rules that depend on the destination alone
    if isinstance(x, Undefined):
        x._fail()
    if isinstance(x, _STATIC) and rounding != "rn":  # the run-time conversion defines the mode
        x = as_value(x, dt.f32 if isinstance(x, float) else py_default_type(x))
    if isinstance(x, _STATIC):
        if to.storage_only:
            return cast(as_value(x, dt.f32 if isinstance(x, float) else py_default_type(x)),
                        to, rounding, sat)
        if to.is_float:
            return const(float(x), to)
        if to.is_bool:
            return const(bool(x), to)
        if isinstance(x, float):
            if math.isnan(x):
                return const(0, to)
            lo, hi = to.int_range()
            return const(max(lo, min(hi, int(x))), to)
        return const(x, to)
    if not isinstance(x, Value):
        _err(f"cannot convert {type(x).__name__} {x!r} to {to.name}")
    if isinstance(x.type, PointerType):
        _err(f"cannot convert a pointer to {to.name}")
    src = scalar_of(x.type)
    if src is to and rounding != "sr":
        return x
    target.conversion(src, to, rounding, sat)
    attrs = {"to": to, "rounding": rounding, "sat": sat}
    if rounding == "sr":
        if src is to:
            return x
        return emit1("cast", [x, _random_bits(rbits, x)], _result_like(x.type, to), attrs)
    return emit1("cast", [x], _result_like(x.type, to), attrs)


def _random_bits(rbits, x):
    """``rbits`` as the u32 operand of a stochastic cast of ``x``: one lane per lane of x."""
    if isinstance(rbits, _STATIC) and not isinstance(rbits, bool) and isinstance(rbits, int):
        if not 0 <= rbits < 2 ** 32:
            _err(f"rbits={rbits!r} does not fit u32 (0 .. 2**32-1)")
        rbits = const(rbits, dt.u32)
        if isinstance(x.type, VectorType):
            rbits = emit1("broadcast", [rbits], VectorType(dt.u32, x.type.n), {"n": x.type.n})
        return rbits
    if not isinstance(rbits, Value) or isinstance(rbits.type, PointerType) \
            or scalar_of(rbits.type).name not in ("u32", "i32"):
        _err(f"rbits must be a u32 or i32 run-time value (the random bits of rounding='sr'), "
             f"got {_describe(rbits)}")
    if lanes_of(rbits.type) != lanes_of(x.type) or \
            isinstance(rbits.type, VectorType) != isinstance(x.type, VectorType):
        _err(f"rbits has {lanes_of(rbits.type)} lane(s) but the value converted has "
             f"{lanes_of(x.type)}: stochastic rounding takes one random word per lane")
    if scalar_of(rbits.type).name == "i32":
        rbits = bitcast(rbits, _result_like(rbits.type, dt.u32))
    return rbits


def _describe(v):
    if isinstance(v, Value):
        return f"a {type_str(v.type)} value"
    return f"{type(v).__name__} {v!r}"


def bitcast(x, to):
    """Reinterpret the bits of ``x`` as type ``to`` of the same width (no conversion).

    Example: ``bits = opus.bitcast(x_f32, opus.u32)``.

    :param x: the value
    :type x: run-time value (scalar or vector)
    :param to: the type to read the bits as: a dtype, or a vector type of the same total width
    :type to: DType or VectorType
    :returns: the same bits as a ``to``
    :targets: all targets
    """
    if not isinstance(x, Value):
        _err("bitcast needs a run-time value")
    if isinstance(to, DType):
        to = ctx().target.resolve_dtype(to)
    elif isinstance(to, VectorType):  # opus.fp8x4: the flavoured element resolved too
        to = VectorType(ctx().target.resolve_dtype(to.elem), to.n)
    else:
        _err(f"bitcast target must be an opus dtype or vector type (opus.u32, opus.fp4x8), got "
             f"{to!r}")
    src_bits = x.type.bits if isinstance(x.type, VectorType) else x.type.bits
    if src_bits != to.bits:
        _err(f"bitcast from {type_str(x.type)} ({src_bits} bits) to {type_str(to)} "
             f"({to.bits} bits): widths differ")
    if x.type == to:
        return x
    return emit1("bitcast", [x], to, {"to": to})


class Val(Value):
    """A run-time value inside a kernel. Immutable (SSA): rebinding a name makes a new one."""

    __slots__ = ()
    __hash__ = Value.__hash__

    def __repr__(self):
        # how error messages show it ("got a run-time i32"); the IR printer numbers values
        return f"a run-time {type_str(self.type)}"

    @property
    def dtype(self) -> DType:
        return scalar_of(self.type)

    def __len__(self):
        if not isinstance(self.type, VectorType):
            _err(f"len() of a scalar {type_str(self.type)}")
        return self.type.n

    def __iter__(self):
        return iter([self[i] for i in range(len(self))])

    def __getitem__(self, i):
        if isinstance(self.type, PointerType):
            from .memory import load
            return load(self, i)
        from .vectors import vector_getitem
        return vector_getitem(self, i)

    def __setitem__(self, i, v):
        if isinstance(self.type, PointerType):
            from .memory import store
            return store(self, v, i)
        _err("run-time values are immutable; write v = opus.insert(v, i, x) to replace lane i")

    def __bool__(self):
        _err("a run-time value has no compile-time truth value: Python `and`/`or`/`not`, `if` "
             "and `x if c else y` work in kernels and the functions they call, but not in "
             "lambdas, generators or library code (use opus.select, & | ~ there)")

    def __index__(self):
        _err("a run-time value is used where a compile-time integer is needed (a shape, a list "
             "index, range() in a loop with break/continue, vec=...)")

    __int__ = __float__ = __index__

    def astype(self, to, rounding="rn", sat=False, rbits=None):
        return cast(self, to, rounding, sat, rbits)

    to = astype

    def __add__(self, o):
        if isinstance(self.type, PointerType):
            from .memory import ptr_add
            return ptr_add(self, o)
        return binary("add", self, o)

    def __radd__(self, o):
        return self.__add__(o) if isinstance(self.type, PointerType) else binary("add", o, self)

    def __sub__(self, o):
        if isinstance(self.type, PointerType):
            from .memory import ptr_add
            return ptr_add(self, -o)
        return binary("sub", self, o)

    def __rsub__(self, o): return binary("sub", o, self)
    def __mul__(self, o): return binary("mul", self, o)
    def __rmul__(self, o): return binary("mul", o, self)
    def __truediv__(self, o): return binary("div", self, o)
    def __rtruediv__(self, o): return binary("div", o, self)
    def __floordiv__(self, o): return binary("floordiv", self, o)
    def __rfloordiv__(self, o): return binary("floordiv", o, self)
    def __mod__(self, o): return binary("mod", self, o)
    def __rmod__(self, o): return binary("mod", o, self)
    def __and__(self, o): return binary("and", self, o)
    def __rand__(self, o): return binary("and", o, self)
    def __or__(self, o): return binary("or", self, o)
    def __ror__(self, o): return binary("or", o, self)
    def __xor__(self, o): return binary("xor", self, o)
    def __rxor__(self, o): return binary("xor", o, self)
    def __lshift__(self, o): return binary("shl", self, o)
    def __rlshift__(self, o): return binary("shl", o, self)
    def __rshift__(self, o): return binary("shr", self, o)
    def __rrshift__(self, o): return binary("shr", o, self)
    def __neg__(self): return unary("neg", self)
    def __pos__(self): return self
    def __invert__(self): return unary("invert", self)
    def __abs__(self): return unary("abs", self)
    def __lt__(self, o): return compare("lt", self, o)
    def __le__(self, o): return compare("le", self, o)
    def __gt__(self, o): return compare("gt", self, o)
    def __ge__(self, o): return compare("ge", self, o)
    def __eq__(self, o): return compare("eq", self, o)
    def __ne__(self, o): return compare("ne", self, o)

    def __pow__(self, o):
        if isinstance(o, int) and not isinstance(o, bool) and 1 <= o <= 64:
            r = self
            for _ in range(o - 1):
                r = r * self
            return r
        _err("** on a run-time value needs a compile-time integer exponent in 1..64; "
             "use opus.exp2/opus.log2 for general powers")
