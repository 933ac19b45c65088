"""Math on run-time values (Python numbers fall back to Python's math, folding at trace time)."""
from __future__ import annotations

import builtins
import math as _pm

from .. import dtypes as dt
from ..ir import Value, scalar_of
from .context import TraceError, ctx
from .values import emit1, check_arith, binary, as_value, _coerce, cast, is_static, to_bool

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil",
           "trunc", "rint", "fma", "abs", "max", "min", "med3", "mulhi", "popc", "select", "tdiv", "tmod"]


# The math family's docstring. Targets: f64 versions of the functions the AMD backends cannot
# lower without a device library are missing there (Target.has_math; the test checks this text
# against the table).
_MATH_DOC = """Elementwise {what}: ``opus.{fn}(x)``; a Python number folds at trace time.

f16 and bf16 compute in f32 and round back; integers are converted to f32 first.

:param x: the operand
:type x: run-time value (scalar or vector, float or int) or Python number
:returns: {fn} of each lane, in x's float type (f32 for an integer x)
:targets: all targets{f64}
"""
_F64_NOT_ON_AMD = "; f64 not on gfx942, gfx950 (no device math library: compute in f32 there)"


def _math(fn, py, what, f64=""):
    def f(x):
        if is_static(x):
            return py(x)
        if not isinstance(x, Value):
            raise TraceError(f"opus.{fn} needs a number or run-time value")
        e = check_arith(x.type, f"opus.{fn}")
        if not e.is_float:
            x = cast(x, dt.f32)
        ctx().target.require_math(fn, scalar_of(x.type))  # f64 math is not everywhere
        return emit1("math", [x], x.type, {"fn": fn})
    f.__name__ = fn
    f.__doc__ = _MATH_DOC.format(fn=fn, what=what, f64=f64)
    return f


exp = _math("exp", _pm.exp, "e raised to x", _F64_NOT_ON_AMD)
exp2 = _math("exp2", lambda x: 2.0 ** x, "2 raised to x", _F64_NOT_ON_AMD)
log = _math("log", _pm.log, "natural logarithm", _F64_NOT_ON_AMD)
log2 = _math("log2", _pm.log2, "base-2 logarithm", _F64_NOT_ON_AMD)
sqrt = _math("sqrt", _pm.sqrt, "square root")
rsqrt = _math("rsqrt", lambda x: 1.0 / _pm.sqrt(x), "reciprocal square root, 1 / sqrt(x)")
sin = _math("sin", _pm.sin, "sine (radians)", _F64_NOT_ON_AMD)
cos = _math("cos", _pm.cos, "cosine (radians)", _F64_NOT_ON_AMD)
tanh = _math("tanh", _pm.tanh, "hyperbolic tangent", _F64_NOT_ON_AMD)
floor = _math("floor", lambda x: float(_pm.floor(x)), "round down to an integral value")
ceil = _math("ceil", lambda x: float(_pm.ceil(x)), "round up to an integral value")
trunc = _math("trunc", lambda x: float(_pm.trunc(x)), "round toward zero to an integral value")
rint = _math("rint", lambda x: float(round(x)), "round to the nearest integral value, ties to "
             "even")


def fma(a, b, c):
    """``a * b + c`` with a single rounding (``a * b + c`` written out rounds twice).

    Operands take their common type as for ``+``; for integers it is ``a * b + c``.

    :param a: first factor
    :type a: run-time value or Python number
    :param b: second factor
    :type b: run-time value or Python number
    :param c: addend
    :type c: run-time value or Python number
    :returns: the fused result, in the operands' common type (vectors lane by lane)
    :targets: all targets
    """
    if is_static(a) and is_static(b) and is_static(c):
        return a * b + c
    vals = [x for x in (a, b, c) if isinstance(x, Value)]
    t = vals[0]
    for v in vals[1:]:
        t = _coerce(t, v, "opus.fma")[0]
    a, b, c = (_coerce(x, t, "opus.fma")[0] for x in (a, b, c))
    e = check_arith(a.type, "opus.fma")
    if not e.is_float:
        return a * b + c
    return emit1("fma", [a, b, c], a.type)


def abs(x):
    return builtins.abs(x)


_NAN_MODES = ("number", "fast")


def _minmax(op, pyf):
    def f(a, b, *more, nan="number"):
        if nan not in _NAN_MODES:
            raise TraceError(f"opus.{op}: nan must be 'number' or 'fast', got {nan!r}")
        if more:
            return f(f(a, b, nan=nan), *more, nan=nan)
        if is_static(a) and is_static(b):
            return pyf(a, b)
        mode = ctx().target.fast_minmax_nan if nan == "fast" else None
        if mode is not None:  # the chip's one instruction differs on f32/f64 (targets)
            x, y, t = _coerce(a, b, f"opus.{op}")
            if scalar_of(t).name in ("f32", "f64"):
                return emit1("binary", [x, y], t, {"op": op, "nan": mode})
        return binary(op, a, b)
    f.__name__ = op
    f.__doc__ = _MINMAX_DOC.format(op=op, order=_ORDER[op])
    return f


_ORDER = {"max": "+0 > -0", "min": "-0 < +0"}
_MINMAX_DOC = """Elementwise {op} of two or more operands: ``opus.{op}(a, b, c)`` is
``opus.{op}(opus.{op}(a, b), c)``. For floats a NaN operand (quiet or signaling) yields the
other one (two NaNs give NaN), and {order} (IEEE 754-2019 {op}imumNumber). Python numbers
alone fold at trace time.

One instruction on NVIDIA (FMNMX, VIMNMX) and, for integers and computed floats, on AMD. An
AMD float operand straight from memory is quieted first (one more ``v_{op}_f32 x, x``, as a
signaling NaN would otherwise not be skipped); ``nan="fast"`` skips that: ``v_{op}_f32``
alone, where a signaling NaN operand gives a quiet NaN instead of the other operand (IEEE
754-2008 {op}Num). Signaling NaNs never come out of arithmetic, only from bits in memory, so
the two differ only on such inputs. Elsewhere (NVIDIA, integers, 16-bit floats) ``"fast"`` is
the exact rule already.

:param a: first operand
:type a: run-time value or Python number
:param b: second operand
:type b: run-time value or Python number
:param more: further operands
:type more: run-time values or Python numbers
:param nan: ``"number"`` (the exact rule above) or ``"fast"``
:type nan: str
:returns: the {op}, in the operands' common type (vectors lane by lane)
:targets: all targets
"""


max = _minmax("max", builtins.max)
min = _minmax("min", builtins.min)


def _median(a, b, c):
    return sorted((a, b, c))[1]


def med3(a, b, c):
    """The median of three, elementwise (the original's ``med3``): one ``v_med3_f32`` /
    ``v_med3_i32`` / ``v_med3_u32`` on AMD, min/max composed on NVIDIA. ``opus.med3(x, lo, hi)``
    with ``lo <= hi`` clamps x to [lo, hi].

    Floats: -0 < +0; with a NaN operand the result is the minimum of the other operands
    (AMD's rule; NaN only when all three are), so ``med3(nan, lo, hi)`` is ``lo``. f16 and bf16
    compute in f32 (exact). Python numbers alone fold at trace time.

    :param a: first operand
    :type a: run-time value or Python number
    :param b: second operand
    :type b: run-time value or Python number
    :param c: third operand
    :type c: run-time value or Python number
    :returns: the median, in the operands' common type (vectors lane by lane)
    :targets: all targets
    """
    if is_static(a) and is_static(b) and is_static(c):
        nums = [x for x in (a, b, c) if x == x]
        return _median(a, b, c) if len(nums) == 3 else builtins.min(nums, default=a)
    vals = [x for x in (a, b, c) if isinstance(x, Value)]
    t = vals[0]
    for v in vals[1:]:
        t = _coerce(t, v, "opus.med3")[0]
    a, b, c = (_coerce(x, t, "opus.med3")[0] for x in (a, b, c))
    check_arith(a.type, "opus.med3")
    return emit1("med3", [a, b, c], a.type)


def mulhi(a, b):
    """The high 32 bits of the full 64-bit product of two 32-bit integers (CUDA's ``__umulhi``
    / ``__mulhi``: one IMAD.HI; AMD ``v_mul_hi_u32`` / ``v_mul_hi_i32``).

    :param a: first factor
    :type a: run-time i32 or u32 value, or Python int
    :param b: second factor
    :type b: run-time i32 or u32 value, or Python int
    :returns: ``(a * b) >> 32`` computed exactly, in the operands' common type (signed for i32)
    :targets: all targets
    """
    if is_static(a) and is_static(b):
        return (a * b) >> 32
    a, b, t = _coerce(a, b, "opus.mulhi")
    e = scalar_of(t)
    if not e.is_int or e.bits != 32:
        raise TraceError(f"opus.mulhi needs 32-bit integer operands (i32 or u32), got {e.name}")
    return emit1("binary", [a, b], t, {"op": "mulhi"})


def popc(x):
    """The number of set bits of an integer (CUDA ``__popc`` / ``__popcll``: one POPC;
    AMD ``v_bcnt_u32_b32``, ``s_bcnt1`` for wave-uniform values). Counts a ballot's lanes, and
    with ``opus.lanemask_lt()`` a lane's rank among them.

    :param x: the integer (signed values count their two's-complement bits)
    :type x: run-time integer value of 8 to 64 bits, or Python int >= 0
    :returns: the count, in x's type
    :targets: all targets
    """
    if is_static(x):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise TraceError(f"opus.popc needs an integer >= 0 or a run-time integer, got {x!r}")
        return bin(x).count("1")
    if not isinstance(x, Value):
        raise TraceError(f"opus.popc needs an integer or run-time integer value, got {x!r}")
    e = scalar_of(x.type)
    if not e.is_int or e.is_bool:
        raise TraceError(f"opus.popc needs an integer operand, got {e.name}")
    return emit1("unary", [x], x.type, {"op": "popc"})


def select(cond, a, b):
    """Elementwise ``a if cond else b`` without branching (both sides are evaluated).

    :param cond: the condition; a scalar one picks whole vectors
    :type cond: run-time bool (scalar or vector) or Python bool
    :param a: value where ``cond`` is true
    :type a: run-time value or Python number
    :param b: value where ``cond`` is false
    :type b: run-time value or Python number
    :returns: ``a`` or ``b`` per lane, in their common type (a compile-time ``cond`` returns
        ``a`` or ``b`` itself)
    :targets: all targets
    """
    if is_static(cond):
        return a if cond else b
    c = to_bool(cond, "select condition")
    if is_static(a) and is_static(b):
        a = as_value(a, None) if not isinstance(b, float) else as_value(float(a))
    a, b, t = _coerce(a, b, "opus.select")
    from ..ir import VectorType
    if isinstance(t, VectorType) and not isinstance(c.type, VectorType):
        c = emit1("broadcast", [c], VectorType(dt.bool_, t.n), {"n": t.n})
    return emit1("select", [c, a, b], t)


def tdiv(a, b):
    """Integer division truncating toward zero (C's ``/``; Python's ``//`` floors). Division by
    zero gives all ones (-1 when signed).

    :param a: dividend
    :type a: run-time integer value or Python int
    :param b: divisor
    :type b: run-time integer value or Python int
    :returns: the quotient, in the operands' common type: ``opus.tdiv(-7, 2) == -3``
    :targets: all targets
    """
    if is_static(a) and is_static(b):
        q = builtins.abs(a) // builtins.abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return binary("tdiv", a, b)


def tmod(a, b):
    """Remainder with the dividend's sign (C's ``%``; Python's ``%`` takes the divisor's).
    Division by zero gives the dividend.

    :param a: dividend
    :type a: run-time integer value or Python int
    :param b: divisor
    :type b: run-time integer value or Python int
    :returns: ``a - opus.tdiv(a, b) * b``, in the operands' common type:
        ``opus.tmod(-7, 2) == -1``
    :targets: all targets
    """
    if is_static(a) and is_static(b):
        return a - tdiv(a, b) * b
    return binary("tmod", a, b)
