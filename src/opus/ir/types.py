"""IR types: a scalar is an opus DType; vectors and pointers wrap one."""
from __future__ import annotations

from ..dtypes import DType

__all__ = ["VectorType", "PointerType", "TensorMapType", "TENSOR_MAP", "Type", "scalar_of",
           "lanes_of", "is_scalar", "is_vector", "is_pointer", "type_str", "with_lanes"]

GLOBAL = "global"
SHARED = "shared"


class VectorType:
    """n lanes of one scalar type, held by one thread (a register vector, like ext_vector_type)."""

    __slots__ = ("elem", "n")

    def __init__(self, elem: DType, n: int):
        if not isinstance(elem, DType):
            raise TypeError(f"vector element must be a DType, got {elem!r}")
        if n < 1:
            raise ValueError(f"vector length must be >= 1, got {n}")
        self.elem, self.n = elem, n

    def __eq__(self, other):
        return isinstance(other, VectorType) and other.elem is self.elem and other.n == self.n

    def __hash__(self):
        return hash(("vec", self.elem.name, self.n))

    @property
    def bits(self):
        return self.elem.bits * self.n

    def __repr__(self):
        return f"{self.elem.name}x{self.n}"


class PointerType:
    """Address of elements of ``elem`` in a memory space ('global' or 'shared')."""

    __slots__ = ("elem", "space")

    def __init__(self, elem: DType, space: str = GLOBAL):
        if space not in (GLOBAL, SHARED):
            raise ValueError(f"unknown memory space {space!r}")
        self.elem, self.space = elem, space

    def __eq__(self, other):
        return isinstance(other, PointerType) and other.elem is self.elem and other.space == self.space

    def __hash__(self):
        return hash(("ptr", self.elem.name, self.space))

    def __repr__(self):
        return f"ptr<{self.elem.name}, {self.space}>"


class TensorMapType:
    """A TMA tensor map (CUDA's 128-byte CUtensorMap) passed by value as a kernel parameter:
    opaque to the kernel, read only by the tma_load / tma_store ops. One instance,
    ``TENSOR_MAP``."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, TensorMapType)

    def __hash__(self):
        return hash("tensor_map")

    def __repr__(self):
        return "tensor_map"


TENSOR_MAP = TensorMapType()

Type = DType | VectorType | PointerType | TensorMapType


def is_scalar(t) -> bool:
    return isinstance(t, DType)


def is_vector(t) -> bool:
    return isinstance(t, VectorType)


def is_pointer(t) -> bool:
    return isinstance(t, PointerType)


def scalar_of(t) -> DType:
    """The element type of a scalar or vector type."""
    if isinstance(t, VectorType):
        return t.elem
    if isinstance(t, DType):
        return t
    raise TypeError(f"{t!r} has no scalar element type")


def lanes_of(t) -> int:
    return t.n if isinstance(t, VectorType) else 1


def with_lanes(elem: DType, n: int):
    """``elem`` for n == 1, else a vector of n lanes (scalars and 1-vectors are distinct types;
    this helper picks the scalar, which is what every op produces for one lane)."""
    return elem if n == 1 else VectorType(elem, n)


def type_str(t) -> str:
    return t.name if isinstance(t, DType) else repr(t)
