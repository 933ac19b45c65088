"""Bits an integer value may have set, proved from the ops that made it (the layouts' swizzle
hoisting, docs/layouts.md).

``may_bits(x)`` is a mask in two's complement of infinite width: a bit that is 0 in it is 0 in
every value ``x`` can take. A negative mask (ones from some bit upward) means nothing is known
above its lowest set bit. Only facts that hold for every run are used: the ops' definitions
(ir/ops.py), constants, and the lane index's range (0 .. warp_size - 1). Nothing is assumed
about a value the ops do not bound (a kernel argument, a loop variable, a coordinate a layout
was given): its mask is all ones (-1), or all ones above the zeros a multiplication by a
constant guarantees.
"""
from __future__ import annotations

from ..ir import Value, scalar_of
from .context import ctx

__all__ = ["may_bits", "lowest_bit"]

_DEPTH = 10          # ops followed back from a value; beyond that nothing is known
_NONE_SET = 64       # lowest_bit(0): no bit can be set, so every bit is "below" it


def lowest_bit(mask: int) -> int:
    """The index of the lowest bit that may be set (``_NONE_SET`` for 0)."""
    return (mask & -mask).bit_length() - 1 if mask else _NONE_SET


def _from(low: int) -> int:
    """Every bit from ``low`` upward may be set."""
    return -1 << min(low, _NONE_SET)


def _up_to(top: int, low: int = 0) -> int:
    """Bits ``low`` .. the highest bit of ``top`` (a non-negative bound) may be set."""
    return ((1 << top.bit_length()) - 1) & _from(low)


def _fits(mask: int, bits: int) -> int:
    """``mask`` for a ``bits``-wide integer: a mask reaching the sign bit may wrap, so nothing
    above its lowest bit is known."""
    if mask >= 0 and mask.bit_length() >= bits:
        return _from(lowest_bit(mask))
    return mask


def may_bits(x, depth: int = _DEPTH) -> int:
    """The mask of bits the integer ``x`` (a Python int or a scalar run-time integer) may have
    set; -1 where nothing is known."""
    if type(x) is int:
        return x
    if not isinstance(x, Value):
        return -1
    e = scalar_of(x.type)
    if x.type is not e or not e.is_int or depth <= 0 or x.owner is None:  # vectors: unknown
        return -1
    return _fits(_op_bits(x.owner, e, depth - 1), e.bits)


def _constant(v):
    """The Python int a value is (a const op), or None."""
    if type(v) is int:
        return v
    op = getattr(v, "owner", None)
    if op is not None and op.kind == "const" and type(op.attrs.get("value")) is int:
        return op.attrs["value"]
    return None


def _op_bits(op, e, depth):
    if op.kind == "const":
        v = op.attrs.get("value")
        return v if type(v) is int else -1
    if op.kind == "special":
        return ctx().target.warp_size - 1 if op.attrs.get("which") == "lane_id" else -1
    if op.kind != "binary":
        return -1
    a, b = op.operands
    return _BINARY.get(op.attrs["op"], _unknown)(a, b, e, depth)


def _unknown(a, b, e, depth):
    return -1


def _add(a, b, e, depth):
    ma, mb = may_bits(a, depth), may_bits(b, depth)
    if ma & mb == 0:              # no bit in both: no carry, the sum is the union
        return ma | mb
    low = min(lowest_bit(ma), lowest_bit(mb))
    if ma >= 0 and mb >= 0:       # both non-negative: at most ma + mb
        return _up_to(ma + mb, low)
    return _from(low)


def _sub(a, b, e, depth):
    return _from(min(lowest_bit(may_bits(a, depth)), lowest_bit(may_bits(b, depth))))


def _mul(a, b, e, depth):
    ma, mb = may_bits(a, depth), may_bits(b, depth)
    ka, kb = _constant(a), _constant(b)
    for m, k in ((ma, kb), (mb, ka)):
        if k is not None and k > 0 and k & (k - 1) == 0:      # times a power of two: a shift
            return m << (k.bit_length() - 1)
    low = lowest_bit(ma) + lowest_bit(mb)
    if ma >= 0 and mb >= 0:
        return _up_to(ma * mb, low)
    return _from(low)


def _and(a, b, e, depth):
    return may_bits(a, depth) & may_bits(b, depth)


def _or(a, b, e, depth):
    return may_bits(a, depth) | may_bits(b, depth)


def _shl(a, b, e, depth):
    k = _constant(b)
    if k is None or not 0 <= k < e.bits:
        return -1
    return may_bits(a, depth) << k


def _shr(a, b, e, depth):
    k, ma = _constant(b), may_bits(a, depth)
    if k is None or not 0 <= k < e.bits or (ma < 0 and not e.is_signed):
        return -1                 # a logical shift of a value with unknown high bits
    return ma >> k                # arithmetic: a negative mask keeps its ones on top


def _div(a, b, e, depth, floor):
    k, ma = _constant(b), may_bits(a, depth)
    if k is None or k <= 0:
        return -1
    if k & (k - 1) == 0 and (floor or ma >= 0):    # by 2**n: the arithmetic shift
        return ma >> (k.bit_length() - 1)
    return _up_to(ma // k) if ma >= 0 else -1


def _mod(a, b, e, depth, floor):
    k, ma = _constant(b), may_bits(a, depth)
    if k is None or k <= 0 or (ma < 0 and not floor):
        return -1                 # C's remainder of a negative value is negative
    if k & (k - 1) == 0:          # modulo 2**n keeps the low n bits
        return ma & (k - 1)
    return _up_to(k - 1) if ma < 0 else _up_to(min(k - 1, ma))


_BINARY = {
    "add": _add, "sub": _sub, "mul": _mul, "and": _and, "or": _or, "xor": _or, "shl": _shl,
    "shr": _shr,
    "floordiv": lambda a, b, e, d: _div(a, b, e, d, True),
    "tdiv": lambda a, b, e, d: _div(a, b, e, d, False),
    "mod": lambda a, b, e, d: _mod(a, b, e, d, True),
    "tmod": lambda a, b, e, d: _mod(a, b, e, d, False),
}
