"""Warp-level matrix multiply-accumulate atoms, chosen from the target's instruction table."""
from __future__ import annotations

from ..dtypes import DType
from ..ir import Value, VectorType, type_str
from .context import ctx, TraceError
from .values import emit1, cast, as_value
from .vectors import zeros

__all__ = ["make_mma", "MmaAtom", "ScaledMmaAtom", "make_tiled_mma", "TiledMma"]


def operand_type(d, n):
    """targets.matrix.operand_type, imported when an atom is in use (the matrix module comes
    with the instruction table, which a kernel without matrix atoms never loads)."""
    from ..targets.matrix import operand_type as of_registers
    return of_registers(d, n)


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
        ta, tb = instruction.reg_a, instruction.reg_b  # register types (tf32 -> f32)
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
        return operand_type(self.dtype_a, self.elem_a)

    @property
    def vtype_b(self):
        return operand_type(self.dtype_b, self.elem_b)

    @property
    def vtype_c(self):
        return operand_type(self.dtype_c, self.elem_c)

    def zeros_c(self):
        return zeros(self.elem_c, self.dtype_c)

    def __call__(self, a, b, c=None):
        ops = self._operands(a, b, c)
        return emit1("target_op", ops, self.vtype_c, {"name": self.instruction.name})

    def _operands(self, a, b, c):
        """[A, B, C] in the instruction's order (swap_ab: B first), each checked against its
        register vector type; C defaults to zeros."""
        if c is None:
            c = self.zeros_c()
        ops = []
        for name, v, t in (("A", a, self.vtype_a), ("B", b, self.vtype_b), ("C", c, self.vtype_c)):
            if not isinstance(v, Value) or v.type != t:
                raise TraceError(f"mma operand {name} must be a {type_str(t)} register vector, got "
                                 f"{_type_name(v)}")
            ops.append(v)
        if self.swap_ab:
            ops[0], ops[1] = ops[1], ops[0]
        return ops


class ScaledMmaAtom(MmaAtom):
    """A block-scaled matrix atom (gfx950's v_mfma_scale_f32_*_f8f6f4): D = (A * Xa) @ (B * Xb)
    + C with one E8M0 scale per row (column of B) and 32 K elements, each lane passing one
    (targets/amd_mfma_scale.py: lane l holds the scale of row l % m and K block l // m)."""

    def __call__(self, a, b, c=None, *, scale_a=None, scale_b=None, opsel_a=0, opsel_b=0):
        """D = A @ B + C with each 32-wide K block scaled by 2^(scale_a - 127) * 2^(scale_b -
        127): ``scale_a``/``scale_b`` are this lane's e8m0 scale (its row of A / column of B,
        K block lane // m), or four of them in an e8m0x4 register of which ``opsel_a`` /
        ``opsel_b`` (compile-time 0..3) picks one."""
        ops = self._operands(a, b, c)
        scales = [self._scale("a", scale_a, opsel_a), self._scale("b", scale_b, opsel_b)]
        if self.swap_ab:  # the instruction's A is our B: scales and opsels exchanged too
            scales.reverse()
        attrs = {"name": self.instruction.name}
        for w, (x, sel) in zip("ab", scales):  # by the instruction's operand
            ops.append(x)
            attrs[f"opsel_{w}"], attrs[f"scale_{w}_x4"] = sel, isinstance(x.type, VectorType)
        return emit1("target_op", ops, self.vtype_c, attrs)

    @staticmethod
    def _scale(w, x, sel):
        """One scale operand (an e8m0 or e8m0x4 register) and its opsel, checked."""
        from ..dtypes import e8m0
        if x is None:
            raise TraceError(f"a scaled mma needs scale_{w}=: this lane's e8m0 scale (127 = x1) "
                             f"or an e8m0x4 register with opsel_{w}=")
        if not isinstance(x, Value) or x.type not in (e8m0, VectorType(e8m0, 4)):
            raise TraceError(f"scale_{w} must be an e8m0 value or an e8m0x4 register (E8M0 "
                             f"exponents, 2^(e-127): opus.cast(x, opus.e8m0) or "
                             f"opus.e8m0x4), got {_type_name(x)}")
        x4 = x.type != e8m0
        if type(sel) is not int or not 0 <= sel < (4 if x4 else 1):
            raise TraceError(f"opsel_{w} must be a compile-time int selecting a byte of scale_{w}: "
                             + ("0..3 of its e8m0x4" if x4 else "0 for one e8m0 (pass an e8m0x4 "
                                                                "to select among four)")
                             + f", got {sel!r}")
        return x, sel


def _type_name(v):
    return type_str(v.type) if isinstance(v, Value) else type(v).__name__


def make_mma(a, b, c, shape, swap_ab=False, scaled=False):
    """The target's warp-level matrix multiply-accumulate atom for A/B/C element types and shape
    (m, n, k): mma.sync on NVIDIA, MFMA on AMD. An unsupported combination is an error naming
    the types, the shape, the chip and the atoms it has (docs/api.md tables them per target).

    Example: ``mma = opus.make_mma(opus.f16, opus.f16, opus.f32, (32, 32, 8))`` (an AMD shape;
    NVIDIA's is (16, 8, 16)); then
    ``mma.coords_a(lane, i)`` is the (row, col) of A that a lane's element i holds, and
    ``d = mma(a, b, c)`` issues it on register vectors of ``mma.elem_a/b/c`` lanes (a scalar
    where a lane holds one element). A and B may differ where the instruction allows
    (``make_mma(opus.i8, opus.u8, opus.i32, (16, 8, 32))``, fp8 e4m3 x e5m2); ``opus.tf32``
    asks for the tensor cores' tf32 inputs, whose registers are f32 (``mma.dtype_a``) of which
    the instruction reads the top 10 mantissa bits. Integer accumulators wrap modulo 2^32.

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
    :param scaled: the block-scaled atom (gfx950's v_mfma_scale_f32_16x16x128_f8f6f4 and
        _32x32x64_f8f6f4: A and B each fp8_e4m3, fp8_e5m2, fp6_e2m3, fp6_e3m2 or fp4_e2m1, C
        f32); its call takes ``scale_a=``, ``scale_b=`` (e8m0, one per lane: row l % m of A,
        column l % n of B, K block l // m of 32 elements; or an e8m0x4 with ``opsel_a=``)
    :type scaled: bool
    :returns: the atom: call it with (a, b[, c]) register vectors; it knows each operand's
        lane layout
    :rtype: MmaAtom (ScaledMmaAtom when scaled)
    :targets: all targets, each with its own atoms (its instruction table, ``mma_atoms``)
    """
    t = ctx().target
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not isinstance(x, DType):
            raise TraceError(f"make_mma {name} must be an element type such as opus.f16, got {x!r}")
    a, b, c = (t.resolve_dtype(x) for x in (a, b, c))
    for name, flag in (("swap_ab", swap_ab), ("scaled", scaled)):
        if not isinstance(flag, bool):
            raise TraceError(f"{name} must be a bool, got {flag!r}")
    if (not isinstance(shape, (tuple, list)) or len(shape) != 3
            or not all(type(x) is int and x > 0 for x in shape)):
        raise TraceError(f"make_mma shape must be (m, n, k) of positive ints, got {shape!r}")
    shape = tuple(shape)
    if swap_ab:
        if len(shape) != 3:
            raise TraceError(f"shape must be (m, n, k), got {shape!r}")
        m, n, k = shape
        try:
            ins = t.mma_instruction(b, a, c, (n, m, k), scaled=scaled)
        except Exception as e:
            raise TraceError(f"swap_ab=True needs the {n}x{m}x{k} atom for {b.name} x {a.name}; "
                             f"{e}") from None
        return (ScaledMmaAtom if scaled else MmaAtom)(ins, swap_ab=True)
    return (ScaledMmaAtom if scaled else MmaAtom)(t.mma_instruction(a, b, c, shape, scaled=scaled))


# -- tiled MMA: several warps, each repeating the atom (the original's make_tiled_mma) ---------

def check_tiling(expand, tile):
    """make_tiled_mma's expand and tile: (m, n, k) of positive ints each."""
    for name, v in (("expand", expand), ("tile", tile)):
        if (not isinstance(v, tuple) or len(v) != 3
                or not all(type(x) is int and x > 0 for x in v)):
            raise TraceError(f"make_tiled_mma {name} must be (m, n, k) of positive ints, "
                             f"got {v!r}")


class TiledMma:
    """A block-level MMA: ``tile`` = (T_M, T_N, T_K) warps, each issuing the atom ``expand`` =
    (E_M, E_N, E_K) times per call (opus guide section 10; inventory 1.19). The block tile is
    E * T * atom per dimension; the block has T_M * T_N * T_K warps, warp w at (wm, wn, wk) =
    row-major over tile.

    Operand layouts concatenate, per x-dim, the expansion (y), the warp grid (p) and the atom's
    own sub-dims: A = [(E_M y, T_M p, atom m...), (E_K y, T_K p, atom k...)], B likewise over
    (n, k), C over (m, n); registers run [E_M][E_K][atom's] for A, [E_N][E_K][...] for B and
    [E_M][E_N][...] for C, so ``g.load(tmma.layout_a(...), vec=)`` gives the A registers the
    call takes and ``tmma(a, b, c)`` issues every atom (K outermost, then m, then n).
    """

    def __init__(self, atom: MmaAtom, expand, tile):
        check_tiling(expand, tile)
        if not isinstance(atom, MmaAtom):
            raise TraceError(f"make_tiled_mma needs an atom from opus.make_mma, got {atom!r}")
        if isinstance(atom, ScaledMmaAtom):
            raise TraceError("make_tiled_mma takes no scaled atoms yet (each issue needs its "
                             "own scale registers): call the scaled atom per tile")
        self.atom, self.expand, self.tile = atom, expand, tile
        em, en, ek = expand
        tm, tn, tk = tile
        self.m, self.n, self.k = em * tm * atom.m, en * tn * atom.n, ek * tk * atom.k
        self.num_warps = tm * tn * tk
        self.elem_a = em * ek * atom.elem_a
        self.elem_b = en * ek * atom.elem_b
        self.elem_c = em * en * atom.elem_c

    @property
    def threads(self) -> int:
        """Threads the block needs: num_warps * the target's warp size."""
        return self.num_warps * ctx().target.warp_size

    def warp_coords(self):
        """(wm, wn, wk) of the calling thread's warp."""
        from .threads import warp_id
        tm, tn, tk = self.tile
        w = warp_id()
        return (w // (tn * tk)) % tm if tm > 1 else 0, (w // tk) % tn if tn > 1 else 0, \
            w % tk if tk > 1 else 0

    # the atom's view, overridden by the warpgroup form (lang/tiled_wgmma.py)
    def _atom_operand(self, which):
        """The atom's OperandLayout of operand ``which``."""
        return self.atom._operand(which)

    def _atom_p(self, op):
        """The calling thread's p-coordinates within its atom."""
        from .threads import lane_id
        return tuple(op.p_of_lane(lane_id()))

    def _unit_coords(self):
        """The calling thread's unit (warp) in the tile grid: (m, n, k)."""
        return self.warp_coords()

    def _layout(self, which, x_stride, p_coord):
        from .partition import P, Y, unfold_x_stride, unfold_p_coord
        from .layout import Layout, packed_strides
        op = self._atom_operand(which)
        em, en, ek = self.expand
        tm, tn, tk = self.tile
        (e0, t0), (e1, t1) = {"a": ((em, tm), (ek, tk)), "b": ((en, tn), (ek, tk)),
                              "c": ((em, tm), (en, tn))}[which]
        n0 = len(op.dim[0])
        shape = (e0, t0) + op.shape[:n0] + (e1, t1) + op.shape[n0:]
        tags = ("y", "p") + op.dim[0] + ("y", "p") + op.dim[1]
        dim = (tuple(P if t == "p" else Y for t in tags[:n0 + 2]),
               tuple(P if t == "p" else Y for t in tags[n0 + 2:]))
        moved = lambda i: i + 2 if i < n0 else i + 4  # atom sub-dim index -> tiled index
        regs = [0, n0 + 2] + [moved(i) for i in op._slots]  # [E0][E1][atom's registers]
        ys = [i for i, t in enumerate(tags) if t == "y"]
        y_order = tuple(ys.index(i) for i in regs)
        if x_stride is None:
            x_shape = [1, 1]
            for j, d in enumerate(dim):
                for e in shape[(0 if j == 0 else n0 + 2):(n0 + 2 if j == 0 else len(shape))]:
                    x_shape[j] *= e
            x_stride = packed_strides(tuple(x_shape))
        if p_coord is None:
            wm, wn, wk = self._unit_coords()
            w0, w1 = {"a": (wm, wk), "b": (wn, wk), "c": (wm, wn)}[which]
            p = self._atom_p(op)
            pa0 = sum(t == "p" for t in op.dim[0])
            p_coord = (w0,) + p[:pa0] + (w1,) + p[pa0:]
        return Layout(shape, unfold_x_stride(dim, shape, x_stride), unfold_p_coord(dim, p_coord),
                      y_order=y_order)

    def layout_a(self, x_stride=None, p_coord=None):
        """The block tile's A (m x k) partition layout for this thread (x_stride: (lda, 1)
        for row-major A)."""
        return self._layout("a", x_stride, p_coord)

    def layout_b(self, x_stride=None, p_coord=None):
        """B's layout over x-dims (n, k) (B stored k x n row-major with ldb: ``(1, ldb)``)."""
        return self._layout("b", x_stride, p_coord)

    def layout_c(self, x_stride=None, p_coord=None):
        """C/D's layout over (m, n)."""
        return self._layout("c", x_stride, p_coord)

    def inside_a(self, rows, cols, vec=1):
        """A predicate for ``load_if`` / ``store_if`` over ``layout_a`` with this ``vec``: an
        access is done where all its elements (m, k) lie in the ``rows`` x ``cols`` corner of
        the tile (run-time or compile-time extents; ragged edges of A)."""
        return self._inside("a", rows, cols, vec)

    def inside_b(self, rows, cols, vec=1):
        """``inside_a`` for B over its (n, k) x-dims: ``rows`` columns of B, ``cols`` of K."""
        return self._inside("b", rows, cols, vec)

    def inside_c(self, rows, cols, vec=1):
        """``inside_a`` for C/D over (m, n)."""
        return self._inside("c", rows, cols, vec)

    def _inside(self, which, rows, cols, vec):
        if type(vec) is not int or vec < 1:
            raise TraceError(f"inside_{which} vec must be a positive compile-time int, got {vec!r}")
        # the x-coordinates of a register as layouts: x-strides (1, 0) give its row, (0, 1) its
        # column; a vector's elements run along one y sub-dim, so its last element is its
        # largest row and column
        row, col = self._layout(which, (1, 0), None), self._layout(which, (0, 1), None)

        def inside(*issue):
            y = issue[:-1] + (issue[-1] * vec + vec - 1,) if issue else ()
            return (row(*y) < rows) & (col(*y) < cols)
        return inside

    def zeros_c(self):
        return zeros(self.elem_c, self.atom.dtype_c)

    def _check(self, name, v, n, dtype):
        if not isinstance(v, Value) or v.type != operand_type(dtype, n):
            got = type_str(v.type) if isinstance(v, Value) else type(v).__name__
            raise TraceError(f"tiled mma operand {name} must be a {type_str(operand_type(dtype, n))} "
                             f"register vector (all of this thread's {name} registers), got {got}")

    def _issue(self, a, b, c, ks):
        at = self.atom
        em, en, ek = self.expand
        self._check("A", a, self.elem_a, at.dtype_a)
        self._check("B", b, self.elem_b, at.dtype_b)
        if c is None:
            c = self.zeros_c()
        self._check("C", c, self.elem_c, at.dtype_c)
        piece = lambda v, i, n: v[i * n:(i + 1) * n] if n > 1 else v[i]
        cs = [piece(c, i, at.elem_c) for i in range(em * en)]
        for kk in ks:
            for i in range(em):
                for j in range(en):
                    cs[i * en + j] = at(piece(a, i * ek + kk, at.elem_a),
                                        piece(b, j * ek + kk, at.elem_b), cs[i * en + j])
        from .vectors import concat
        return cs[0] if len(cs) == 1 else concat(*cs)

    def __call__(self, a, b, c=None):
        """D = A @ B + C over the block tile: every atom, K outermost, then m, then n."""
        return self._issue(a, b, c, range(self.expand[2]))

    def step_k(self, s, a, b, c):
        """Only K-slice ``s`` (0 <= s < E_K) of the call, for every (m, n): software pipelines
        interleave loads between slices."""
        if type(s) is not int or not 0 <= s < self.expand[2]:
            raise TraceError(f"step_k slice must be a compile-time int in 0..{self.expand[2] - 1}, "
                             f"got {s!r}")
        return self._issue(a, b, c, [s])


def make_tiled_mma(atom, expand=(1, 1, 1), tile=(1, 1, 1)):
    """A block-level MMA from a warp-level atom: ``tile`` warps along (m, n, k), each repeating
    the atom ``expand`` times (opus guide section 10). The block tile is
    (E_M * T_M * m) x (E_N * T_N * n) x (E_K * T_K * k).

    Example: ``tmma = opus.make_tiled_mma(opus.make_mma(f16, f16, f32, (16, 16, 16)),
    expand=(2, 1, 1), tile=(2, 2, 1))`` is a 64 x 32 x 16 tile over 4 warps;
    ``a = ga.load(tmma.layout_a((K, 1)), vec=4)``, ``acc = tmma(a, b, acc)``.

    With a wgmma atom (opus.make_wgmma, sm_90a) the units are warpgroups: ``tile`` = (T_M,
    T_N, 1) warpgroups of 4 warps, e.g. ``make_tiled_mma(make_wgmma(f16, f16, f32, (64, 128,
    16)), (1, 1, 4), (2, 1, 1))`` is 128 x 128 x 64 over 2 warpgroups; A and B come from
    shared memory (``tmma.smem_a(view, layout)``, ``smem_b``; A from registers with
    ``a_from="regs"``), the call returns the accumulators in flight (``opus.wgmma_fence``,
    ``wgmma_commit``, ``wgmma_wait`` as for one wgmma; docs/language.md).

    :param atom: the warp-level atom, or a warpgroup one
    :type atom: MmaAtom (from opus.make_mma) or Wgmma (from opus.make_wgmma)
    :param expand: atom repeats per warp (warpgroup) along (m, n, k)
    :type expand: tuple of 3 ints
    :param tile: warps (warpgroups) along (m, n, k)
    :type tile: tuple of 3 ints
    :returns: the tiled MMA: ``layout_a/b/c``, ``inside_a/b/c``, ``zeros_c``, call, ``step_k``,
        ``num_warps`` (a wgmma atom's also ``smem_a/b``, ``acc``, ``num_warpgroups``)
    :rtype: TiledMma or TiledWgmma
    :targets: all targets (with the atoms each has)
    """
    expand, tile = (tuple(v) if isinstance(v, (list, tuple)) else v for v in (expand, tile))
    from .wgmma import Wgmma
    if isinstance(atom, Wgmma):
        from .tiled_wgmma import TiledWgmma
        return TiledWgmma(atom, expand, tile)
    return TiledMma(atom, expand, tile)
