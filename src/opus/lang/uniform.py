"""Wave-uniform values: ``opus.readfirstlane`` and the ``opus.uniform`` promise (ir/ops.py
readfirstlane, uniform). On AMD both put the value in a scalar register (SGPR), so a loop bound,
a base address or a stride derived from it stays in s registers; NVIDIA finds uniform values by
itself (uniform registers), so there a promise costs nothing and readfirstlane is a shuffle."""
from __future__ import annotations

from ..ir import Value, VectorType
from .context import TraceError
from .values import emit1, is_static

__all__ = ["readfirstlane", "uniform"]


def _scalar_operand(x, what):
    if is_static(x):
        return None
    if not isinstance(x, Value):
        raise TraceError(f"{what} needs a run-time scalar value, got {type(x).__name__} {x!r}")
    if isinstance(x.type, VectorType):
        raise TraceError(f"{what} takes a scalar, got a vector of {x.type.n} (apply it to each "
                         f"element)")
    if not hasattr(x.type, "bits"):
        raise TraceError(f"{what} takes a scalar number, not {x.type}")
    return x


def readfirstlane(x):
    """The value ``x`` holds in the first (lowest) active lane of the warp, in every lane (the
    original's ``readfirstlane``): AMD ``v_readfirstlane_b32`` per 32 bits, into an SGPR;
    NVIDIA ``__shfl_sync`` from the lowest lane of ``__activemask()``. A Python number is
    returned as it is.

    :param x: the value
    :type x: run-time scalar (any dtype) or Python number
    :returns: the first active lane's x, of x's type
    :targets: all targets
    """
    v = _scalar_operand(x, "opus.readfirstlane")
    return x if v is None else emit1("readfirstlane", [v], v.type)


def uniform(x):
    """A promise that ``x`` is the same on every active lane of the warp, so AMD keeps it in a
    scalar register (it is read with ``v_readfirstlane_b32``; values computed from it, such as
    a loop bound or a base offset, stay scalar). NVIDIA needs no hint: ``x`` itself. A lane
    whose x differs breaks the promise (AMD then uses the first active lane's value everywhere);
    the interpreter's checking mode reports it at this line. A Python number is returned as it is.

    :param x: the value
    :type x: run-time scalar (any dtype) or Python number
    :returns: x, of its type
    :targets: all targets
    """
    v = _scalar_operand(x, "opus.uniform")
    return x if v is None else emit1("uniform", [v], v.type)
