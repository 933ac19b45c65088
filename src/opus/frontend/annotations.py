"""Kernel parameter annotations: ``opus.Ptr[dtype]``, scalar dtypes, ``opus.constexpr``."""
from __future__ import annotations

from ..dtypes import DType

__all__ = ["Ptr", "PtrSpec", "constexpr", "ParamSpec"]


class PtrSpec:
    """Annotation of a global-memory pointer parameter with its element type."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        if not isinstance(dtype, DType):
            raise TypeError(f"opus.Ptr[...] needs an opus dtype, got {dtype!r}")
        self.dtype = dtype

    def __repr__(self):
        return f"opus.Ptr[{self.dtype.name}]"


class _PtrFactory:
    """The annotation of a global-memory pointer parameter: ``x: opus.Ptr[opus.f16]``. The
    argument is an array of that element type (on the GPU: a torch tensor or anything with
    ``__cuda_array_interface__``; in the interpreter: a numpy array). In the kernel the
    parameter indexes directly (``x[i]``, unchecked) or is viewed with opus.make_gmem.

    :param dtype: the element type
    :type dtype: DType
    :returns: the annotation
    :rtype: PtrSpec
    :targets: all targets
    """

    def __getitem__(self, dtype):
        return PtrSpec(dtype)

    def __repr__(self):
        return "opus.Ptr"


Ptr = _PtrFactory()


class _Constexpr:
    """``opus.constexpr``: the annotation of a compile-time parameter. Its value is a Python
    value, part of the specialization key (one compiled kernel per distinct value); a default
    makes it optional: ``VEC: opus.constexpr = 8``.

    :targets: all targets
    """

    def __repr__(self):
        return "opus.constexpr"


constexpr = _Constexpr()


class ParamSpec:
    """One kernel parameter: kind is 'ptr', 'scalar' or 'constexpr'."""

    __slots__ = ("name", "kind", "dtype", "default", "index")

    def __init__(self, name, kind, dtype, default, index):
        self.name, self.kind, self.dtype, self.default, self.index = name, kind, dtype, default, index

    def __repr__(self):
        return f"{self.name}: {self.kind} {getattr(self.dtype, 'name', '')}"
