"""Warp-level matrix multiply-accumulate atoms, chosen from the target's instruction table."""
from __future__ import annotations

from ..ir import Value, VectorType, type_str
from .context import ctx, TraceError
from .values import emit1, cast, as_value
from .vectors import zeros

__all__ = ["make_mma", "MmaAtom"]


class MmaAtom:
    """One matrix instruction seen from a warp: D = A @ B + C on an m x n x k tile.

    Each lane holds ``elem_a`` elements of A, ``elem_b`` of B and ``elem_c`` of C/D;
    ``coords_a(lane, i)`` gives the (row, col) of A that lane's element i holds (likewise B as
    (k, n) and C as (m, n)). Works with compile-time and run-time lane numbers.
    """

    def __init__(self, instruction):
        self.instruction = instruction  # the target's row (targets.matrix.MatrixAtom)
        self.m, self.n, self.k = instruction.shape
        self.elem_a, self.elem_b, self.elem_c = (instruction.elem_a, instruction.elem_b,
                                                 instruction.elem_c)
        self.dtype_a, self.dtype_b, self.dtype_c = instruction.a, instruction.b, instruction.c

    def coords_a(self, lane, i):
        return self.instruction.coords_a(lane, i)

    def coords_b(self, lane, i):
        return self.instruction.coords_b(lane, i)

    def coords_c(self, lane, i):
        return self.instruction.coords_c(lane, i)

    @property
    def vtype_a(self):
        return VectorType(self.dtype_a, self.elem_a)

    @property
    def vtype_b(self):
        return VectorType(self.dtype_b, self.elem_b)

    @property
    def vtype_c(self):
        return VectorType(self.dtype_c, self.elem_c)

    def zeros_c(self):
        return zeros(self.elem_c, self.dtype_c)

    def __call__(self, a, b, c=None):
        if c is None:
            c = self.zeros_c()
        ops = []
        for name, v, t in (("A", a, self.vtype_a), ("B", b, self.vtype_b), ("C", c, self.vtype_c)):
            if not isinstance(v, Value) or v.type != t:
                raise TraceError(f"mma operand {name} must be a {type_str(t)} register vector, got "
                                 f"{type_str(v.type) if isinstance(v, Value) else type(v).__name__}")
            ops.append(v)
        return emit1("target_op", ops, self.vtype_c, {"name": self.instruction.name})


def make_mma(a, b, c, shape):
    """The target's warp-level matrix multiply-accumulate atom for A/B/C element types and shape
    (m, n, k): mma.sync on NVIDIA, MFMA on AMD. An unsupported combination is an error naming
    the types, the shape, the chip and the atoms it has (docs/api.md tables them per target).

    Example: ``mma = opus.make_mma(opus.f16, opus.f16, opus.f32, (32, 32, 8))`` (an AMD shape;
    NVIDIA's is (16, 8, 16)); then
    ``mma.coords_a(lane, i)`` is the (row, col) of A that a lane's element i holds, and
    ``d = mma(a, b, c)`` issues it on register vectors of ``mma.elem_a/b/c`` lanes.

    :param a: element type of A (m x k)
    :type a: DType
    :param b: element type of B (k x n)
    :type b: DType
    :param c: element type of C and D (m x n), the accumulator
    :type c: DType
    :param shape: (m, n, k)
    :type shape: tuple of 3 ints
    :returns: the atom: call it with (a, b[, c]) register vectors; it knows each operand's
        lane layout
    :rtype: MmaAtom
    :targets: all targets, each with its own atoms (its instruction table, ``mma_atoms``)
    """
    t = ctx().target
    a, b, c = (t.resolve_dtype(x) for x in (a, b, c))
    return MmaAtom(t.mma_instruction(a, b, c, tuple(shape)))
