"""The kernel language: run-time values, math, memory, threads and matrix atoms."""
from .. import dtypes as _dt
from .values import Val, cast, bitcast
from . import values as _values

_dt._cast_hook = lambda value, to, **kw: cast(value, to, **kw)
