"""Fast unsigned division by a run-time divisor (the original's ``mdiv``): a magic multiplier and
a shift, computed once, turn every later ``n // d`` into a multiply-high, an add and a shift.

The rule (Granlund and Montgomery, "Division by invariant integers using multiplication",
1994, section 4; the original's ``mdiv``), for a divisor 1 <= d < 2**32:

    shift = ceil(log2(d))                          (0 .. 32)
    magic = floor(2**32 * (2**shift - d) / d) + 1  (< 2**32)
    n // d = (mulhi(n, magic) + n) >> shift        for every 0 <= n < 2**32

where the sum is formed in 64 bits (the original adds in 32 bits, which is exact only for
n < 2**31). ``n % d`` is then ``n - (n // d) * d``.

* ``opus.mdiv(d)`` on the host computes it once; pass the object as a kernel argument of a
  parameter annotated ``opus.mdiv`` (16 bytes by value: magic, shift, divisor, 0).
* ``opus.mdiv.make(d)`` in a kernel computes it from a run-time divisor (one 64-bit division:
  do it once, outside loops).
* ``m.div(n)``, ``m.mod(n)``, ``m.divmod(n)`` on either.
"""
from __future__ import annotations

import numbers
import struct

from .. import dtypes as dt
from ..ir import Value, VectorType
from .context import TraceError
from .values import as_value, bitcast, cast, emit1, is_static
from .math import mulhi, select

__all__ = ["mdiv", "magic_of"]

_U32_MAX = 2 ** 32 - 1
_PACK = struct.Struct("<4I")
PARAM_TYPE = VectorType(dt.u32, 4)  # a parameter annotated opus.mdiv: magic, shift, divisor, 0


def magic_of(d: int) -> tuple[int, int]:
    """(magic, shift) of divisor d (1 <= d < 2**32), as the module docstring says."""
    shift = (d - 1).bit_length()
    return ((2 ** 32 * (2 ** shift - d)) // d + 1, shift)


def _host_divisor(d):
    if isinstance(d, bool) or not isinstance(d, numbers.Integral):
        raise TypeError(f"opus.mdiv: the divisor must be an integer, got {type(d).__name__} {d!r}")
    d = int(d)
    if d == 0:
        raise ValueError("opus.mdiv: division by zero (the divisor must be >= 1)")
    if not 1 <= d <= _U32_MAX:
        raise ValueError(f"opus.mdiv: the divisor must be in 1 .. 2**32-1 (u32), got {d}")
    return d


def _static_dividend(n, what):
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _U32_MAX:
        raise TraceError(f"{what}: the dividend must be a u32 (0 .. 2**32-1), got {n!r}")
    return n


def _dividend(n, what):
    """n as a u32 run-time value (integers of up to 32 bits are read modulo 2**32)."""
    if is_static(n):
        return as_value(_static_dividend(n, what), dt.u32)
    if not isinstance(n, Value) or isinstance(n.type, VectorType) or not getattr(
            n.type, "is_int", False) or n.type.bits > 32:
        raise TraceError(f"{what}: the dividend must be a scalar integer of at most 32 bits "
                         f"(read as u32), got {getattr(n, 'type', type(n).__name__)}")
    return n if n.type is dt.u32 else cast(n, dt.u32)


class mdiv:
    """A divisor prepared for fast unsigned division (the original's ``mdiv``): ``opus.mdiv(d)``
    on the host, passed to a kernel parameter annotated ``opus.mdiv``; or ``opus.mdiv.make(d)``
    inside a kernel. ``m.div(n)`` is ``n // d``, ``m.mod(n)`` is ``n % d`` and ``m.divmod(n)``
    both, exact for every u32 n (one multiply-high, a 64-bit add and a shift: ``IMAD.HI`` on
    NVIDIA, ``v_mul_hi_u32`` on AMD).

    :param d: the divisor, 1 <= d < 2**32 (0 is a ValueError on the host; made in a kernel, a
        divisor of 0 gives quotient 0 and remainder n)
    :type d: int
    :returns: the prepared divisor (host: a 16-byte by-value kernel argument)
    :rtype: mdiv
    :targets: all targets
    """

    __slots__ = ("divisor", "magic", "shift")

    def __init__(self, d):
        if isinstance(d, Value):
            raise TraceError("opus.mdiv(d) prepares a divisor on the host; in a kernel use "
                             "opus.mdiv.make(d)")
        self.divisor = _host_divisor(d)
        self.magic, self.shift = magic_of(self.divisor)

    def __repr__(self):
        return f"opus.mdiv({self.divisor})"

    def opus_param_bytes(self) -> bytes:
        """The 16 bytes a kernel parameter annotated ``opus.mdiv`` receives."""
        return _PACK.pack(self.magic, self.shift, self.divisor, 0)

    @staticmethod
    def make(d):
        """Prepare run-time divisor ``d`` inside a kernel (one 64-bit division; hoist it out of
        loops). A Python int gives the host's ``opus.mdiv(d)``.

        :param d: the divisor (a divisor of 0 gives quotient 0 and remainder n)
        :type d: run-time u32 value (integers of up to 32 bits are read as u32) or Python int
        :returns: the prepared divisor
        :rtype: mdiv
        :targets: all targets
        """
        if is_static(d):
            return mdiv(d)
        d = _dividend(d, "opus.mdiv.make")
        return _Traced(*_make(d))

    # -- division (host-made divisors fold their constants into the kernel) -----------------
    def _parts(self):
        return as_value(self.magic, dt.u32), as_value(self.shift, dt.u32), \
            as_value(self.divisor, dt.u32)

    def div(self, n):
        """``n // d`` for a u32 n.

        :param n: the dividend
        :type n: run-time integer value of up to 32 bits (read as u32) or Python int
        :returns: the quotient (u32; a Python int for a Python n and a host-made divisor)
        :targets: all targets
        """
        if is_static(n) and type(self) is mdiv:
            return _static_dividend(n, "mdiv.div") // self.divisor
        magic, shift, _ = self._parts()
        return _quotient(_dividend(n, "mdiv.div"), magic, shift)

    def mod(self, n):
        """``n % d`` for a u32 n.

        :param n: the dividend
        :type n: run-time integer value of up to 32 bits (read as u32) or Python int
        :returns: the remainder (u32)
        :targets: all targets
        """
        return self.divmod(n)[1]

    def divmod(self, n):
        """``(n // d, n % d)`` for a u32 n (one multiply more than ``div``).

        :param n: the dividend
        :type n: run-time integer value of up to 32 bits (read as u32) or Python int
        :returns: quotient and remainder (u32)
        :targets: all targets
        """
        if is_static(n) and type(self) is mdiv:
            return divmod(_static_dividend(n, "mdiv.divmod"), self.divisor)
        magic, shift, divisor = self._parts()
        n = _dividend(n, "mdiv.divmod")
        q = _quotient(n, magic, shift)
        return q, n - q * divisor


class _Traced(mdiv):
    """A divisor prepared in a kernel or received as a parameter: run-time u32 parts."""

    __slots__ = ()

    def __init__(self, magic, shift, divisor):  # run-time parts; the host's checks a Python int
        self.magic, self.shift, self.divisor = magic, shift, divisor

    def __repr__(self):
        return "<opus.mdiv (run-time)>"

    def _parts(self):
        if isinstance(self.divisor, _Param):  # read where used (an extract is free in C)
            v = self.divisor.value
            return tuple(emit1("extract", [v], dt.u32, {"index": i}) for i in range(3))
        return self.magic, self.shift, self.divisor

    def opus_param_bytes(self):
        raise TraceError("a run-time opus.mdiv cannot be a kernel argument")

    @classmethod
    def of_param(cls, v):
        """A parameter annotated opus.mdiv (PARAM_TYPE: magic, shift, divisor, 0)."""
        return cls(None, None, _Param(v))


class _Param:
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _quotient(n, magic, shift):
    """(mulhi(n, magic) + n) >> shift with the sum in 64 bits (exact for every u32 n)."""
    t = mulhi(n, magic)
    wide = cast(t, dt.u64) + cast(n, dt.u64)
    # shift <= 32: the mask tells the compiler so (no guard for amounts >= 64, ir/ops.py shr)
    return cast(wide >> (cast(shift, dt.u64) & 63), dt.u32)


def _make(d):
    """(magic, shift, d) of a run-time u32 divisor, as magic_of. shift = bit length of d - 1,
    read from the exponent of (d - 1) as an f64 (exact for every u32); d = 0 gives shift 32
    and magic 0 (the 64-bit division by zero of ir/ops.py gives all ones, + 1 wraps to 0)."""
    x = d - 1
    exponent = cast(bitcast(cast(x, dt.f64), dt.u64) >> 52, dt.u32)  # 1023 + floor(log2 x)
    shift = select(x == 0, as_value(0, dt.u32), exponent - 1022)
    num = ((as_value(1, dt.u64) << cast(shift, dt.u64)) - cast(d, dt.u64)) << 32
    magic = cast(num // cast(d, dt.u64) + 1, dt.u32)
    return magic, shift, d
