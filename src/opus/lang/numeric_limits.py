"""Numeric limits of every opus dtype: ``opus.finfo`` / ``opus.iinfo`` (numpy's names) and
``opus.numeric_limits`` (the original's, after C++ ``std::numeric_limits``).

The values are Python numbers, so in a kernel they are compile-time constants that fold into
constants of the operands' type (``x * opus.finfo(opus.f16).eps`` on an f16 x); every one is
exact in its dtype (``opus.f16(v)`` makes a typed run-time constant). They are derived here
from each format's exponent and mantissa widths and its rules for infinities and NaNs, not read
from numpy (the tests check them against numpy / ml_dtypes).
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType

__all__ = ["finfo", "iinfo", "numeric_limits"]


class _Format:
    """A binary float format: exponent bits, mantissa bits, bias; ``top``: how the largest
    exponent field is used ('ieee': infinities and NaNs; 'nan_ones': finite except the all-ones
    code, which is NaN (OCP e4m3); 'finite': all finite, NaN 0x80 or none (FNUZ, fp6, fp4));
    ``signed``: has a sign bit (e8m0 has none)."""

    __slots__ = ("exp", "man", "bias", "top", "nan", "signed")

    def __init__(self, exp, man, bias, top, nan=True, signed=True):
        self.exp, self.man, self.bias, self.top = exp, man, bias, top
        self.nan, self.signed = nan, signed

    def max(self) -> float:
        emax_field, man_max = 2 ** self.exp - 1, 2 ** self.man - 1  # 'finite': every code
        if self.top == "ieee" or (self.top == "nan_ones" and not self.man):
            emax_field -= 1  # the all-ones exponent holds infinities / NaN (e8m0: NaN)
        elif self.top == "nan_ones":
            man_max -= 1  # all ones in both fields is NaN (OCP e4m3)
        return (1 + man_max / 2 ** self.man) * 2.0 ** (emax_field - self.bias)

    def tiny(self) -> float:
        return 2.0 ** (1 - self.bias) if self.man else 2.0 ** -self.bias  # e8m0: no subnormals

    def denorm_min(self) -> float:
        return 2.0 ** (1 - self.bias - self.man) if self.man else self.tiny()


# name -> format (OCP MX spec for fp8/fp6/fp4/e8m0; AMD/Graphcore FNUZ: bias + 1, 0x80 is NaN,
# no infinities, no -0)
_FORMATS = {
    "f64": _Format(11, 52, 1023, "ieee"),
    "f32": _Format(8, 23, 127, "ieee"),
    "tf32": _Format(8, 10, 127, "ieee"),
    "f16": _Format(5, 10, 15, "ieee"),
    "bf16": _Format(8, 7, 127, "ieee"),
    "fp8_e5m2": _Format(5, 2, 15, "ieee"),
    "fp8_e4m3": _Format(4, 3, 7, "nan_ones"),
    "fp8_e4m3fnuz": _Format(4, 3, 8, "finite"),
    "fp8_e5m2fnuz": _Format(5, 2, 16, "finite"),
    "fp6_e2m3": _Format(2, 3, 1, "finite", nan=False),
    "fp6_e3m2": _Format(3, 2, 3, "finite", nan=False),
    "fp4_e2m1": _Format(2, 1, 1, "finite", nan=False),
    "e8m0": _Format(8, 0, 127, "nan_ones", signed=False),
}


def _concrete(dtype, what) -> DType:
    if not isinstance(dtype, DType):
        raise TypeError(f"opus.{what} needs an opus dtype, got {type(dtype).__name__} {dtype!r}")
    if dtype.flavour is not None:
        raise TypeError(f"opus.{what}({dtype.name}): {dtype.name} means a different format on "
                        f"each target (fp8_e4m3 / fp8_e4m3fnuz, fp8_e5m2 / fp8_e5m2fnuz): name "
                        f"the format itself")
    return dtype


def _float_format(dtype, what) -> _Format:
    f = _FORMATS.get(_concrete(dtype, what).name)
    if f is None:
        hint = " (use opus.iinfo for integers)" if dtype.is_int or dtype.is_bool else ""
        raise TypeError(f"opus.{what}: {dtype.name} is not a floating-point type{hint}")
    return f


class finfo:
    """Limits of a float dtype with numpy's names (``numpy.finfo``): ``bits``, ``eps`` (the gap
    above 1.0), ``max`` (largest finite), ``min`` (most negative finite: ``-max``; for the
    unsigned e8m0 its smallest value), ``tiny`` = ``smallest_normal``, ``smallest_subnormal``
    (= ``tiny`` where the format has no subnormals), ``resolution``-free. Python floats, exact
    in the dtype: compile-time constants in kernels.

    :param dtype: a float dtype (f64, f32, tf32, f16, bf16, the fp8 OCP and FNUZ types, fp6,
        fp4, e8m0; the target-dependent fp8 / bf8 names are refused: name the format)
    :type dtype: DType
    :returns: the limits
    :rtype: finfo
    :targets: all targets (host values)
    """

    __slots__ = ("dtype", "bits", "eps", "max", "min", "tiny", "smallest_normal",
                 "smallest_subnormal")

    def __init__(self, dtype):
        f = _float_format(dtype, "finfo")
        self.dtype, self.bits = dtype, dtype.bits
        self.eps = 2.0 ** -f.man if f.man else 1.0
        self.max = f.max()
        self.tiny = self.smallest_normal = f.tiny()
        self.min = -self.max if f.signed else self.tiny
        self.smallest_subnormal = f.denorm_min()

    def __repr__(self):
        return (f"opus.finfo({self.dtype.name}: max={self.max!r}, min={self.min!r}, "
                f"eps={self.eps!r}, tiny={self.tiny!r})")


class iinfo:
    """Limits of an integer dtype with numpy's names: ``bits``, ``min``, ``max`` (Python ints;
    int4 / uint4 included).

    :param dtype: an integer dtype
    :type dtype: DType
    :returns: the limits
    :rtype: iinfo
    :targets: all targets (host values)
    """

    __slots__ = ("dtype", "bits", "min", "max")

    def __init__(self, dtype):
        _concrete(dtype, "iinfo")
        if not dtype.is_int:
            raise TypeError(f"opus.iinfo: {dtype.name} is not an integer type"
                            + (" (use opus.finfo for floats)" if dtype.is_float else ""))
        self.dtype, self.bits = dtype, dtype.bits
        signed = dtype.kind == "int"
        self.min = -2 ** (dtype.bits - 1) if signed else 0
        self.max = 2 ** (dtype.bits - (1 if signed else 0)) - 1

    def __repr__(self):
        return f"opus.iinfo({self.dtype.name}: min={self.min}, max={self.max})"


class numeric_limits:
    """Limits with the original's (C++ ``std::numeric_limits``) names, as methods:
    ``opus.numeric_limits(opus.f16).max()``. For floats ``min()`` is the smallest positive
    normal (C++'s meaning; numpy's ``finfo.min`` is ``lowest()``), ``lowest()`` the most
    negative finite, ``epsilon()``, ``denorm_min()``, ``infinity()`` and ``quiet_NaN()`` (None
    where the format has none: the FNUZ, fp6, fp4 and e4m3 types have no infinity; fp6 and fp4
    no NaN). For integers ``min()`` = ``lowest()`` is the most negative value and the float-only
    ones are 0, as in C++. Python numbers: compile-time constants in kernels.

    :param dtype: any opus dtype but the target-dependent fp8 / bf8 names
    :type dtype: DType
    :returns: the limits
    :rtype: numeric_limits
    :targets: all targets (host values)
    """

    __slots__ = ("dtype", "_f", "_i")

    def __init__(self, dtype):
        _concrete(dtype, "numeric_limits")
        self.dtype = dtype
        self._f = _FORMATS.get(dtype.name)
        self._i = iinfo(dtype) if dtype.is_int else None
        if self._f is None and self._i is None:
            if dtype.is_bool:
                self._i = None
            else:
                raise TypeError(f"opus.numeric_limits: no limits for {dtype.name}")

    def _float(self):
        return finfo(self.dtype) if self._f is not None else None

    def max(self):
        if self.dtype.is_bool:
            return True
        return self._i.max if self._i else self._f.max()

    def min(self):
        if self.dtype.is_bool:
            return False
        return self._i.min if self._i else self._f.tiny()

    def lowest(self):
        if self.dtype.is_bool:
            return False
        return self._i.min if self._i else self._float().min

    def epsilon(self):
        return self._float().eps if self._f else 0

    def denorm_min(self):
        return self._f.denorm_min() if self._f else 0

    def infinity(self):
        if not self._f:
            return 0
        return float("inf") if self._f.top == "ieee" else None

    def quiet_NaN(self):
        if not self._f:
            return 0
        return float("nan") if self._f.nan else None

    def __repr__(self):
        return f"opus.numeric_limits({self.dtype.name})"
