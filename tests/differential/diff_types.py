"""The scalar types and promotion rules of docs/language.md, written out independently of opus,
the float formats' parameters, and the special values tests draw from."""
from __future__ import annotations

import math
import struct

INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOATS = ("f16", "bf16", "f32", "f64")
HALF = ("f16", "bf16")
SCALARS = INTS + FLOATS + ("bool",)
BITS = {"bool": 8, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32,
        "u64": 64, "f16": 16, "bf16": 16, "f32": 32, "f64": 64}
# precision (significand bits with the hidden one), minimum normal exponent, maximum exponent
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
           "f64": (53, -1022, 1023)}
INF, NAN = math.inf, math.nan


def is_int(t):
    return t in INTS


def is_float(t):
    return t in FLOATS


def is_signed(t):
    return t[0] == "i"


def int_range(t):
    b = BITS[t]
    if t == "bool":
        return 0, 1
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if is_signed(t) else (0, (1 << b) - 1)


def wrap(x, t):
    """x reduced to integer type t (two's complement wrap-around)."""
    b = BITS[t]
    x &= (1 << b) - 1
    return x - (1 << b) if is_signed(t) and x >> (b - 1) else x


def promote(a, b):
    """Result type of a binary operation on types a and b, or None where opus refuses the mix."""
    if a == b:
        return a
    if a == "bool" or b == "bool":
        return b if a == "bool" else a
    if is_float(a) and is_float(b):
        if BITS[a] == BITS[b]:
            return "f32"  # f16 with bf16
        return a if BITS[a] > BITS[b] else b
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if is_signed(a) == is_signed(b):
        return a if BITS[a] > BITS[b] else b
    s, u = (a, b) if is_signed(a) else (b, a)
    return s if BITS[u] < BITS[s] else None


# types whose values promote into t next to a t (t itself first: hypothesis shrinks to it)
INTO = {t: [t] + [x for x in SCALARS if x != t and promote(x, t) == t] for t in SCALARS}


def literal_type(lit, other):
    """Type a Python literal takes next to a run-time value of type ``other``."""
    if isinstance(lit, float) and not is_float(other):
        return "f32"
    if isinstance(lit, int) and not isinstance(lit, bool) and other == "bool":
        return "i32"
    return other


def max_finite(t):
    p, _, emax = FORMATS[t]
    return float(((1 << p) - 1) << (emax - p + 1)) if t != "f64" else 1.7976931348623157e308


def fits(x, t):
    """Whether the Python float x is exactly a value of float type t."""
    if not math.isfinite(x) or x == 0:
        return True
    p, emin, emax = FORMATS[t]
    e = math.frexp(abs(x))[1] - 1
    if e > emax:
        return False
    quantum_exp = max(e, emin) - p + 1
    return math.ldexp(abs(x), -quantum_exp).is_integer()


def _float_specials(t):
    p, emin, emax = FORMATS[t]
    sub = math.ldexp(1.0, emin - p + 1)
    mx = max_finite(t)
    base = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, INF, -INF, NAN, mx, -mx,
            math.ldexp(1.0, emin), -math.ldexp(1.0, emin), sub, -sub, sub * 3, 0.75, -0.25,
            1 + math.ldexp(1.0, 1 - p), 127.5, 128.0, -129.0, 255.5, 256.0, 32767.5, 65504.0,
            65520.0, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 31 - 128, 2.0 ** 32, 2.0 ** 63, -(2.0 ** 63),
            2.0 ** 64, 2.0 ** 24 + 2, 1e-3, 3.140625, 88.5, -103.0, 1e30]
    return [x for x in base if fits(x, t)]


def _int_specials(t):
    lo, hi = int_range(t)
    base = [0, 1, -1, 2, 3, -2, 7, -8, 5, 31, 32, 33, 63, 64, 100, -100, lo, hi, lo + 1, hi - 1,
            hi // 2, lo // 2, 255, 256, 2049, 65535, 65520, (1 << 24) + 1, (1 << 24) + 3,
            (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 53) + 1, (1 << 62) + (1 << 38) + 1]
    return [x for x in dict.fromkeys(base) if lo <= x <= hi]


SPECIALS = {t: (_float_specials(t) if is_float(t) else _int_specials(t)) for t in INTS + FLOATS}


def from_bits(b, t):
    """The float of type t with bit pattern b (an unsigned int)."""
    if t == "f64":
        return struct.unpack("<d", struct.pack("<Q", b))[0]
    if t == "f32":
        return struct.unpack("<f", struct.pack("<I", b))[0]
    if t == "f16":
        return struct.unpack("<e", struct.pack("<H", b))[0]
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]
