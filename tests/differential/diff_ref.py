"""An independent reference evaluator for diff_gen programs, one thread at a time.

Integers are Python ints wrapped explicitly; floats are Python floats holding a value of their
type exactly. Rounding to a format is done here with integer arithmetic (round_float), so that
neither numpy's nor opus's conversions are trusted. + - * / and sqrt of f32 values computed in
f64 and rounded once to f32 are correctly rounded (f64 has more than 2*24+2 bits); f16/bf16
arithmetic is f32 arithmetic rounded once to the type, as the language specifies. fma is exact.
min/max follow PTX (NaN yields the other operand; -0 < +0).

TOLERATED names known interpreter divergences from the hardware (reported as bugs, see
README.md): a thread whose result depends on one raises Tolerated and is not compared.
"""
from __future__ import annotations

import math
from fractions import Fraction

from diff_types import (BITS, FORMATS, HALF, INF, NAN, from_bits, int_range, is_float, is_int,
                        max_finite, promote, wrap)


# Known interpreter divergences, by name (see README.md); none open.
TOLERATED: set = set()


class Tolerated(Exception):
    """The result depends on a known interpreter divergence (see TOLERATED)."""


# -- rounding and conversions -----------------------------------------------------------------

def round_float(x, t, mode="rn"):
    """The int, float or dyadic Fraction x rounded to float format t (mode 'rn' or 'rz')."""
    if isinstance(x, float) and (not math.isfinite(x) or x == 0 or t == "f64" and mode == "rn"):
        return x
    if x == 0:
        return 0.0
    n, d = x.as_integer_ratio()
    assert d & (d - 1) == 0, "only dyadic values are rounded here"
    neg, n, k = n < 0, abs(n), 1 - d.bit_length()
    p, emin, emax = FORMATS[t]
    q = max(n.bit_length() - 1 + k, emin) - p + 1   # exponent of the last kept bit
    sh = q - k
    if sh <= 0:
        m = n << -sh
    else:
        m, r = n >> sh, n & ((1 << sh) - 1)
        if mode == "rn" and (r > 1 << (sh - 1) or r == 1 << (sh - 1) and m & 1):
            m += 1
    if m and m.bit_length() - 1 + q > emax:
        y = INF if mode == "rn" else max_finite(t)
    else:
        y = math.ldexp(m, q)
    return -y if neg else y


def float_to_int(x, t):
    """Toward zero, saturating, NaN -> 0."""
    if math.isnan(x):
        return 0
    lo, hi = int_range(t)
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


def convert(v, src, dst, rounding="rn"):
    if dst == "bool":
        return v != 0
    if src == "bool":
        v, src = int(v), "i32"
    if is_int(dst):
        return wrap(v, dst) if is_int(src) else float_to_int(v, dst)
    if dst in HALF:
        if src not in HALF and src != "f32":  # ints and f64 go through f32 first
            v = round_float(v, "f32")
        return round_float(v, dst, rounding)
    return round_float(v, dst)


# -- float arithmetic --------------------------------------------------------------------------

def _signbit(x):
    return math.copysign(1.0, x) < 0


def _div(a, b):
    if b == 0:
        if a == 0 or math.isnan(a):
            return NAN
        return -INF if _signbit(a) != _signbit(b) else INF
    return a / b


def _minmax(op, a, b):
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    if a == b == 0:
        if _signbit(a) != _signbit(b) and "minmax_signed_zero" in TOLERATED:
            raise Tolerated("minmax_signed_zero")
        return (a if _signbit(a) else b) if op == "min" else (b if _signbit(a) else a)
    return min(a, b) if op == "min" else max(a, b)


def _exact(fn, x):
    if fn == "sqrt" and x < 0:
        return NAN
    if not math.isfinite(x) or x == 0:
        return x
    if fn == "sqrt":
        return math.sqrt(x)
    y = float({"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc,
               "rint": round}[fn](x))
    return math.copysign(0.0, x) if y == 0 else y


def _approx(fn, x):
    """Transcendentals in f64 (within an f64 ulp or so: far below the f32 tolerance)."""
    if math.isnan(x):
        return x
    if fn in ("exp", "exp2"):
        try:
            return math.exp(x) if fn == "exp" else 2.0 ** x
        except OverflowError:
            return INF
    if fn in ("log", "log2"):
        if x < 0:
            return NAN
        if x == 0:
            return -INF
        return x if x == INF else (math.log(x) if fn == "log" else math.log2(x))
    if fn == "rsqrt":
        if x == 0:
            return math.copysign(INF, x)
        return NAN if x < 0 else 1.0 / math.sqrt(x)
    if fn in ("sin", "cos"):
        return NAN if math.isinf(x) else (math.sin(x) if fn == "sin" else math.cos(x))
    return math.tanh(x)


def _fma(a, b, c):
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # an infinite or NaN product: IEEE arithmetic gives the fma
    if not math.isfinite(c):
        return c  # a finite (exact) product cannot change an infinite or NaN addend
    s = Fraction(a) * Fraction(b) + Fraction(c)
    if s == 0:
        both_neg = (a == 0 or b == 0) and c == 0 and _signbit(a) != _signbit(b) and _signbit(c)
        return -0.0 if both_neg else 0.0
    return s


_RAW = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "div": _div, "min": lambda a, b: _minmax("min", a, b),
        "max": lambda a, b: _minmax("max", a, b)}


def _wide(t):
    """The precision a float type computes in."""
    return "f32" if t in HALF else t


def fround(x, t):
    """x (exact, or a correctly rounded f64) rounded to t's computing precision, then to t."""
    return round_float(round_float(x, _wide(t)), t)


def float_binary(op, a, b, t):
    if op in ("floordiv", "mod"):  # floor(a / b); a - floor(a / b) * b, each rounded to t
        q = fround(_exact("floor", fround(_div(a, b), t)), t)
        return q if op == "floordiv" else fround(a - fround(q * b, t), t)
    return fround(_RAW[op](a, b), t)


# -- integer arithmetic ------------------------------------------------------------------------

def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def int_binary(op, a, b, t):
    if op in ("floordiv", "mod", "tdiv", "tmod"):
        if b == 0:
            return wrap(-1, t) if op in ("floordiv", "tdiv") else a
        q = a // b if op in ("floordiv", "mod") else _tdiv(a, b)
        return wrap(q if op in ("floordiv", "tdiv") else a - q * b, t)
    f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "and": lambda: a & b,
         "or": lambda: a | b, "xor": lambda: a ^ b, "min": lambda: min(a, b),
         "max": lambda: max(a, b)}[op]
    return wrap(f(), t)


def shift(op, a, amount, t, amount_t):
    """The amount is read as unsigned at its own width (never narrowed to a's type first);
    amounts >= a's width give 0 (or the sign fill for >> on signed values)."""
    s = amount % (1 << BITS[amount_t])
    if s >= BITS[t]:
        return -1 if op == "shr" and a < 0 else 0
    return wrap(a << s, t) if op == "shl" else a >> s


def bool_binary(op, a, b):
    return {"and": a and b, "or": a or b, "xor": a != b, "min": a and b, "max": a or b}[op]


# -- the evaluator -------------------------------------------------------------------------------

class Thread:
    """One thread's inputs: values[type][slot], and bits[type][slot] for float bitcasts."""

    def __init__(self, values, bits):
        self.values, self.bits = values, bits


def evaluate(n, th):
    """Value of node n in thread th, as a Python value of n.type."""
    op, t = n.op, n.type
    if op == "in":
        return th.values[n.type][n.attr]
    if op == "lit":
        return float(n.attr) if is_float(t) else n.attr
    if op == "const":
        return convert(n.attr, "f64" if isinstance(n.attr, float) else t, t)
    if op == "bitcast":
        return _bitcast(n, th)
    if op == "shift":
        a, b = (evaluate(x, th) for x in n.args)
        return shift(n.attr, convert(a, n.args[0].type, t), b, t, n.args[1].type)
    if op in ("cmp", "logic", "not"):
        return _boolean(n, th)
    if op == "cast":
        (a,) = n.args
        return convert(evaluate(a, th), a.type, t, n.attr[1])
    if op == "sel":
        c, a, b = n.args
        return _to(a, t, th) if _to(c, "bool", th) else _to(b, t, th)
    args = [_to(a, t, th) for a in n.args]
    if op == "math":
        f = _exact if n.attr in ("sqrt", "floor", "ceil", "trunc", "rint") else _approx
        return fround(f(n.attr, args[0]), t)
    return _arith(op, n.attr, args, t)


def _to(n, t, th):
    return convert(evaluate(n, th), n.type, t)


def _bitcast(n, th):
    (a,) = n.args
    if is_float(a.type):
        u = th.bits[a.type][a.attr]
    else:
        u = evaluate(a, th) % (1 << BITS[a.type])
    return from_bits(u, n.type) if is_float(n.type) else wrap(u, n.type)


def _boolean(n, th):
    if n.op == "not":
        return not _to(n.args[0], "bool", th)
    if n.op == "logic":
        a, b = (_to(x, "bool", th) for x in n.args)
        return a and b if n.attr == "and" else a or b
    a, b = n.args
    u = promote(a.type, b.type)
    x, y = _to(a, u, th), _to(b, u, th)
    return {"lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}[n.attr]


def binary(op, a, b, t):
    if t == "bool":
        return bool_binary(op, a, b)
    return int_binary(op, a, b, t) if is_int(t) else float_binary(op, a, b, t)


def _arith(op, attr, args, t):
    if op == "bin":
        return binary(attr, *args, t)
    if op == "neg":
        return wrap(-args[0], t) if is_int(t) else -args[0]
    if op == "inv":
        return (not args[0]) if t == "bool" else wrap(~args[0], t)
    if op == "abs":
        return wrap(abs(args[0]), t) if is_int(t) else abs(args[0])
    if op == "minmax3":
        return binary(attr, binary(attr, args[0], args[1], t), args[2], t)
    if op == "fma":
        a, b, c = args
        return wrap(a * b + c, t) if is_int(t) else fround(_fma(a, b, c), t)
    raise ValueError(f"unknown node {op}")
