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

    def __init__(self, instruction, swap_ab=False):
        self.instruction = instruction  # the target's row (targets.matrix.MatrixAtom)
        self.swap_ab = swap_ab
        m, n, k = instruction.shape
        ea, eb, ec = instruction.elem_a, instruction.elem_b, instruction.elem_c
        ta, tb = instruction.a, instruction.b
        if swap_ab:  # the instruction computes C^T = B^T A^T: our A is its B and vice versa
            m, n, ea, eb, ta, tb = n, m, eb, ea, tb, ta
        self.m, self.n, self.k = m, n, k
        self.elem_a, self.elem_b, self.elem_c = ea, eb, ec
        self.dtype_a, self.dtype_b, self.dtype_c = ta, tb, instruction.c

    def coords_a(self, lane, i):
        """The (row, col) of A that a lane's register element i holds."""
        if self.swap_ab:
            k, m = self.instruction.coords_b(lane, i)
            return m, k
        return self.instruction.coords_a(lane, i)

    def coords_b(self, lane, i):
        """The (k, n) of B that a lane's register element i holds."""
        if self.swap_ab:
            n, k = self.instruction.coords_a(lane, i)
            return k, n
        return self.instruction.coords_b(lane, i)

    def coords_c(self, lane, i):
        """The (m, n) of C/D that a lane's register element i holds."""
        if self.swap_ab:
            n, m = self.instruction.coords_c(lane, i)
            return m, n
        return self.instruction.coords_c(lane, i)

    # -- operands as partition layouts (the original's adaptors: layout_a/b/c, p/y shapes) ------
    def _operand(self, which):
        ops = self.instruction.layout.operands
        if ops is None:
            raise TraceError(f"{self.instruction.name} has no x/p/y description of its operands")
        a, b, c = ops
        if self.swap_ab:  # our A (m, k) is the instruction's B (n', k); C is its C transposed
            a, b, c = b, a, c.transposed()
        return {"a": a, "b": b, "c": c}[which]

    def _layout(self, which, x_stride, p_coord):
        from .partition import P, Y, unfold_x_stride, unfold_p_coord
        from .layout import Layout, packed_strides
        op = self._operand(which)
        dim = tuple(tuple(P if t == "p" else Y for t in d) for d in op.dim)
        if x_stride is None:  # the operand packed row-major over its x-dims
            x_shape, k = [], 0
            for d in op.dim:
                n = 1
                for e in op.shape[k:k + len(d)]:
                    n *= e
                x_shape.append(n)
                k += len(d)
            x_stride = packed_strides(tuple(x_shape))
        if p_coord is None:
            from .threads import lane_id
            p_coord = op.p_of_lane(lane_id())
        return Layout(op.shape, unfold_x_stride(dim, op.shape, x_stride), unfold_p_coord(dim, p_coord),
                      y_order=op.y_order)

    def layout_a(self, x_stride=None, p_coord=None):
        """A's partition layout for this lane: x-dims (m, k) with strides ``x_stride`` (default:
        packed m x k); called with no arguments per register issue, ``g.load(mma.layout_a(
        (lda, 1)), vec=...)`` loads this lane's A registers in the instruction's order.
        ``p_coord`` defaults to the instruction's own lane decomposition."""
        return self._layout("a", x_stride, p_coord)

    def layout_b(self, x_stride=None, p_coord=None):
        """B's partition layout: x-dims (n, k), i.e. B transposed as the original's adaptors
        (B stored k x n row-major with leading dimension ldb: ``x_stride=(1, ldb)``)."""
        return self._layout("b", x_stride, p_coord)

    def layout_c(self, x_stride=None, p_coord=None):
        """C/D's partition layout: x-dims (m, n)."""
        return self._layout("c", x_stride, p_coord)

    def _pick(self, which, tag):
        op = self._operand(which)
        tags = [t for d in op.dim for t in d]
        return tuple(n for n, t in zip(op.shape, tags) if t == tag)

    def p_shape_a(self):
        return self._pick("a", "p")

    def p_shape_b(self):
        return self._pick("b", "p")

    def p_shape_c(self):
        return self._pick("c", "p")

    def y_shape_a(self):
        return self._layout_y("a")

    def y_shape_b(self):
        return self._layout_y("b")

    def y_shape_c(self):
        return self._layout_y("c")

    def _layout_y(self, which):
        op = self._operand(which)
        return tuple(op.shape[i] for i in op._slots)

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
        if self.swap_ab:
            ops[0], ops[1] = ops[1], ops[0]
        return emit1("target_op", ops, self.vtype_c, {"name": self.instruction.name})


def make_mma(a, b, c, shape, swap_ab=False):
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
    :param swap_ab: issue the instruction with A and B exchanged, so it computes C^T: each
        lane then holds C elements along a row (``layout_c`` vectorizes row-major stores). The
        atom (n, m, k) of the swapped types must exist (square MFMA shapes; not mma.sync's m16n8)
    :type swap_ab: bool
    :returns: the atom: call it with (a, b[, c]) register vectors; it knows each operand's
        lane layout
    :rtype: MmaAtom
    :targets: all targets, each with its own atoms (its instruction table, ``mma_atoms``)
    """
    t = ctx().target
    a, b, c = (t.resolve_dtype(x) for x in (a, b, c))
    if not isinstance(swap_ab, bool):
        raise TraceError(f"swap_ab must be a bool, got {swap_ab!r}")
    shape = tuple(shape)
    if swap_ab:
        if len(shape) != 3:
            raise TraceError(f"shape must be (m, n, k), got {shape!r}")
        m, n, k = shape
        try:
            ins = t.mma_instruction(b, a, c, (n, m, k))
        except Exception as e:
            raise TraceError(f"swap_ab=True needs the {n}x{m}x{k} atom for {b.name} x {a.name}; "
                             f"{e}") from None
        return MmaAtom(ins, swap_ab=True)
    return MmaAtom(t.mma_instruction(a, b, c, shape))
