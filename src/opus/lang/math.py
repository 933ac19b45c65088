"""Math on run-time values (Python numbers fall back to Python's math, folding at trace time)."""
from __future__ import annotations

import builtins
import math as _pm

from .. import dtypes as dt
from ..ir import Value, scalar_of
from .context import TraceError, ctx
from .values import emit1, check_arith, binary, as_value, _coerce, cast, is_static, to_bool

__all__ = ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil",
           "trunc", "rint", "fma", "abs", "max", "min", "select", "tdiv", "tmod"]


def _math(fn, py):
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
    f.__doc__ = (f"Elementwise {fn} (floats; integers are converted to f32). f64 is available "
                 f"where the target's table says (Target.has_math).")
    return f


exp = _math("exp", _pm.exp)
exp2 = _math("exp2", lambda x: 2.0 ** x)
log = _math("log", _pm.log)
log2 = _math("log2", _pm.log2)
sqrt = _math("sqrt", _pm.sqrt)
rsqrt = _math("rsqrt", lambda x: 1.0 / _pm.sqrt(x))
sin = _math("sin", _pm.sin)
cos = _math("cos", _pm.cos)
tanh = _math("tanh", _pm.tanh)
floor = _math("floor", lambda x: float(_pm.floor(x)))
ceil = _math("ceil", lambda x: float(_pm.ceil(x)))
trunc = _math("trunc", lambda x: float(_pm.trunc(x)))
rint = _math("rint", lambda x: float(round(x)))


def fma(a, b, c):
    """a * b + c with a single rounding."""
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


def _minmax(op, pyf):
    def f(a, b, *more):
        if more:
            return f(f(a, b), *more)
        if is_static(a) and is_static(b):
            return pyf(a, b)
        return binary(op, a, b)
    f.__name__ = op
    f.__doc__ = f"Elementwise {op} (floats: a NaN operand yields the other operand)."
    return f


max = _minmax("max", builtins.max)
min = _minmax("min", builtins.min)


def select(cond, a, b):
    """Elementwise ``a if cond else b`` without branching (both sides are evaluated)."""
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
    """Integer division truncating toward zero (C semantics)."""
    if is_static(a) and is_static(b):
        q = builtins.abs(a) // builtins.abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return binary("tdiv", a, b)


def tmod(a, b):
    """Remainder with the dividend's sign (C semantics)."""
    if is_static(a) and is_static(b):
        return a - tdiv(a, b) * b
    return binary("tmod", a, b)
