"""Warp-level matrix instructions, vendor-neutral: the atom row, its self-check, the one
emulation (gather by the lane maps, A @ B + C, scatter) and the one operand-type check.

An atom is one row (``MatrixAtom``); a vendor file (``nv_mma.py``, ``amd_mfma.py``) is a table of
rows plus what is truly the vendor's: its lane-layout rule (a function of shape and element size,
written once per instruction family) and its lowering (an object per backend, parametrized by the
row's fields). Everything else (types, availability, emulation, the lane maps the language and
the tests read) comes from the row, so mma.sync and MFMA differ only in their layout and their
spelling.

    field       meaning                                            checked at construction
    ----------  -------------------------------------------------  ------------------------------
    name        IR key, e.g. 'nv.mma.m16n8k16.f16.f32'             a non-empty string
    shape       (m, n, k): D[m x n] = A[m x k] @ B[k x n] + C       three positive ints
    a, b, c     element types of A, B and C/D                      concrete DTypes (no 'fp8')
    warp        lanes that execute it together (32, 64)            divides m*k, k*n and m*n
    layout      LaneLayout: coords_a (m, k), coords_b (k, n),      every element of A, B and C
                coords_c (m, n) of (lane, register element i)      held by exactly one (lane, i)
    available   predicate target -> bool (base.Since / OnlyOn)     callable
    lowering    {backend: object(atom, operands, results, attrs)   backends 'cuda' / 'hip'
                 -> C lines}
    isa         the instruction as the compiler prints it (PTX     a non-empty string
                for NVIDIA, the AMDGPU mnemonic for AMD)

    numerics    Numerics: where the hardware differs from one      k_steps divides every lane's
                exact dot product (input rounding, chained steps)  A and B registers

Numerics of the emulation: A, B and C are widened to float64 (integers to int64), the row's
``numerics.inputs`` rounds A and B as the hardware does before multiplying (tf32/xf32 keep 10
mantissa bits; fp8, f16, bf16 and int8 are exact in the wider type, so they need none), then
D = A @ B + C exactly and is rounded once to C's type: the hardware's fused-accumulate result
within float rounding. An integer C (i32) keeps the low 32 bits of the exact sum (two's
complement wrap-around, as the instructions without saturation do). A row that is a chain of
``numerics.k_steps`` instructions (gfx942's STEP_K emulation of a larger K) accumulates step by
step, rounding to C's type after each, exactly as the chained instructions do; step s takes the
s-th slice of each lane's A and B registers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import dtypes as dt
from ..ir import VectorType
from .base import Instruction

__all__ = ["MatrixAtom", "LaneLayout", "OperandLayout", "Numerics", "EXACT", "instruction_table",
           "atom_index", "require_accumulator", "round_mantissa", "register_type", "operand_type"]

_BACKENDS = ("cuda", "hip")
# input formats of the matrix units that travel in the registers of another type
_CARRIED_IN = {"tf32": dt.f32}


def register_type(d: dt.DType) -> dt.DType:
    """The element type of the registers that hold a matrix operand of type ``d``: f32 for tf32
    (an input format of the matrix units, opus.tf32), ``d`` itself otherwise."""
    return _CARRIED_IN.get(d.name, d)


def operand_type(d: dt.DType, n: int):
    """The IR type of an operand of ``n`` registers of type ``d``: a vector, or the scalar itself
    for one register (B of mma.sync m16n8k4 tf32), as the language makes one-lane vectors."""
    return d if n == 1 else VectorType(d, n)


class OperandLayout:
    """One operand's lane layout in the x/p/y form of the opus guide (section 11): its two
    x-dims, each split into sub-dims spread over lanes ('p') or held in registers ('y').

    shape:     flat sub-dim extents, x-dim by x-dim: MFMA 32x32x8 f16's A is (32, 1, 2, 4)
    dim:       tags per x-dim: (('p',), ('y', 'p', 'y')) - row = lane % 32, k = 4 * (lane // 32) + j
    p_of_lane: lane -> the p coordinates in flattened order (ints or traced values)
    y_order:   register order of the y sub-dims: register i unravels row-major over the y
               extents taken in this order (None: left to right)
    The x-dims are (m, k) for A, (n, k) for B (B transposed, as the original's adaptors) and
    (m, n) for C. ``coords(lane, i)`` is the (x0, x1) a lane's register i holds; the language
    builds partition layouts from the same fields (lang/mma.py), so the lane map exists once."""
    __slots__ = ("shape", "dim", "p_of_lane", "y_order", "_slots")

    def __init__(self, shape, dim, p_of_lane, y_order=None):
        shape, dim = tuple(shape), tuple(tuple(d) for d in dim)
        tags = [t for d in dim for t in d]
        if len(dim) != 2 or len(tags) != len(shape) or any(t not in ("p", "y") for t in tags):
            raise ValueError(f"operand layout: dim {dim!r} needs two x-dims of 'p'/'y' tags, one "
                             f"per entry of the shape {shape!r}")
        ys = [i for i, t in enumerate(tags) if t == "y"]
        order = tuple(range(len(ys))) if y_order is None else tuple(y_order)
        if sorted(order) != list(range(len(ys))):
            raise ValueError(f"operand layout: y_order {order!r} is no permutation of the "
                             f"{len(ys)} y sub-dims")
        self.shape, self.dim, self.p_of_lane = shape, dim, p_of_lane
        self.y_order = None if order == tuple(range(len(ys))) else order
        self._slots = tuple(ys[k] for k in order)  # shape index of each register digit

    def transposed(self) -> "OperandLayout":
        """The same lane map with the two x-dims exchanged (C seen as C^T: swap_ab)."""
        n0 = len(self.dim[0])
        shape = self.shape[n0:] + self.shape[:n0]
        dim = (self.dim[1], self.dim[0])
        moved = lambda i: i - n0 if i >= n0 else i + len(self.shape) - n0  # old index -> new
        p0 = sum(t == "p" for t in self.dim[0])
        p_of_lane = self.p_of_lane

        def swapped_p(lane):
            p = tuple(p_of_lane(lane))
            return p[p0:] + p[:p0]
        tags = [t for d in dim for t in d]
        ys = [i for i, t in enumerate(tags) if t == "y"]
        order = tuple(ys.index(moved(i)) for i in self._slots)
        return OperandLayout(shape, dim, swapped_p, order)

    @property
    def registers(self) -> int:
        n = 1
        for i in self._slots:
            n *= self.shape[i]
        return n

    def coords(self, lane, i):
        sub = [None] * len(self.shape)
        for slot, extent in reversed([(s, self.shape[s]) for s in self._slots]):
            sub[slot], i = i % extent, i // extent
        p = iter(self.p_of_lane(lane))
        tags = [t for d in self.dim for t in d]
        for k, t in enumerate(tags):
            if t == "p":
                sub[k] = next(p)
        out, k = [], 0
        for d in self.dim:  # each x coordinate: its sub-dims row-major
            x = sub[k]
            for j in range(1, len(d)):
                x = x * self.shape[k + j] + sub[k + j]
            out.append(x)
            k += len(d)
        return tuple(out)


@dataclass(frozen=True)
class LaneLayout:
    """Where each register element of each lane sits in A (m, k), B (k, n) and C/D (m, n).

    Each function maps (lane, i) to (row, col) and works on Python ints and on traced values
    alike (only ``//``, ``%``, ``*`` and ``+``), so kernels index memory with it directly.
    ``operands``: the (A, B, C) OperandLayouts they come from (``from_operands``)."""
    coords_a: Callable
    coords_b: Callable
    coords_c: Callable
    operands: tuple = None

    @classmethod
    def from_operands(cls, a: OperandLayout, b: OperandLayout, c: OperandLayout):
        def coords_b(lane, i):  # B's x-dims are (n, k); the lane map gives (k, n)
            n, k = b.coords(lane, i)
            return k, n
        return cls(a.coords, coords_b, c.coords, (a, b, c))


@dataclass(frozen=True)
class Numerics:
    """Where one instruction's result differs from the exact A @ B + C rounded once.

    inputs:  None, or float64 array -> float64 array: the rounding the hardware applies to A
             and B before multiplying (``round_mantissa(10)`` for tf32/xf32)
    k_steps: the row is a chain of this many instructions, step s taking the s-th equal slice
             of every lane's A and B registers and rounding its D to C's type
    note:    one line for the row's docstring/docs: what the hardware does"""
    inputs: Callable = None
    k_steps: int = 1
    note: str = "exact products, one rounding to C's type"


EXACT = Numerics()


def round_mantissa(bits):
    """float64 -> float64 rounding f32 values to ``bits`` mantissa bits, to nearest, ties to
    even (what tf32/xf32 inputs keep of an f32); NaN and infinities pass through."""
    def rnd(x):
        import numpy as np
        u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
        drop = 23 - bits
        half, low = np.uint64(1 << (drop - 1)), np.uint64((1 << drop) - 1)
        odd = (u >> np.uint64(drop)) & np.uint64(1)
        r = (u + half - np.uint64(1) + odd) & ~low
        finite = (u & np.uint64(0x7f800000)) != np.uint64(0x7f800000)
        out = np.where(finite, r, u).astype(np.uint32).view(np.float32)
        return out.astype(np.float64)
    rnd.__name__ = f"round_mantissa_{bits}"
    return rnd


class ShapeMNK:
    """m, n, k of a matrix row's ``shape`` (mma.sync/MFMA atoms and wgmma rows)."""
    __slots__ = ()

    @property
    def m(self):
        return self.shape[0]

    @property
    def n(self):
        return self.shape[1]

    @property
    def k(self):
        return self.shape[2]


@dataclass(frozen=True, eq=False)
class MatrixAtom(ShapeMNK, Instruction):
    """One warp-level matrix instruction as a row (the field table is the module docstring)."""
    name: str
    shape: tuple
    a: dt.DType
    b: dt.DType
    c: dt.DType
    warp: int
    layout: LaneLayout
    available: Callable
    lowering: dict
    isa: str
    numerics: Numerics = EXACT

    def __post_init__(self):
        self._check_fields()
        m, n, k = self.shape
        for what, rows, cols, fn in (("A", m, k, self.layout.coords_a),
                                     ("B", k, n, self.layout.coords_b),
                                     ("C", m, n, self.layout.coords_c)):
            _check_covers_once(self.name, what, rows, cols, fn, self.warp)
        for fn in self.lowering.values():  # a lowering refuses the rows it cannot spell
            getattr(fn, "check", lambda atom: None)(self)
        # the Instruction interface: lower[backend](operands, results, attrs)
        object.__setattr__(self, "lower", {b: _bound(fn, self) for b, fn in self.lowering.items()})
        object.__setattr__(self, "_maps", None)

    def _check_fields(self):
        def bad(msg):
            raise ValueError(f"matrix atom {self.name!r}: {msg}")
        if not isinstance(self.name, str) or not self.name:
            bad("name must be a non-empty string")
        if (not isinstance(self.shape, tuple) or len(self.shape) != 3
                or not all(isinstance(x, int) and x > 0 for x in self.shape)):
            bad(f"shape must be (m, n, k) of positive ints, got {self.shape!r}")
        for field in ("a", "b", "c"):
            d = getattr(self, field)
            if not isinstance(d, dt.DType) or d.flavour is not None:
                bad(f"{field} must be a concrete DType (not a target-flavoured name), got {d!r}")
        m, n, k = self.shape
        if not isinstance(self.warp, int) or self.warp <= 0 or any(
                x % self.warp for x in (m * k, k * n, m * n)):
            bad(f"warp {self.warp!r} must divide m*k, k*n and m*n of {self.shape}")
        if not callable(self.available):
            bad("available must be a predicate target -> bool")
        if not self.lowering or any(b not in _BACKENDS for b in self.lowering):
            bad(f"lowering must map backends among {_BACKENDS}, got {sorted(self.lowering)}")
        if not isinstance(self.isa, str) or not self.isa:
            bad("isa must name the instruction as the compiler prints it")
        steps = self.numerics.k_steps if isinstance(self.numerics, Numerics) else None
        if not isinstance(steps, int) or steps < 1 or self.elem_a % steps or self.elem_b % steps:
            bad(f"numerics must be a Numerics whose k_steps divides A's {self.elem_a} and B's "
                f"{self.elem_b} registers per lane, got {self.numerics!r}")

    # -- register counts (m, n, k: ShapeMNK) -------------------------------------------------
    @property
    def elem_a(self):
        return self.m * self.k // self.warp

    @property
    def elem_b(self):
        return self.k * self.n // self.warp

    @property
    def elem_c(self):
        return self.m * self.n // self.warp

    @property
    def reg_a(self):
        """The element type of A's register vector: ``register_type(a)`` (f32 for tf32)."""
        return register_type(self.a)

    @property
    def reg_b(self):
        """The element type of B's register vector: ``register_type(b)``."""
        return register_type(self.b)

    @property
    def key(self):
        """What ``make_mma`` asks for: (a, b, c, (m, n, k)) by type name."""
        return self.a.name, self.b.name, self.c.name, self.shape

    def coords_a(self, lane, i):
        return self.layout.coords_a(lane, i)

    def coords_b(self, lane, i):
        return self.layout.coords_b(lane, i)

    def coords_c(self, lane, i):
        return self.layout.coords_c(lane, i)

    # -- the Instruction interface (lower, emulate; the language checks the operand types:
    # lang/mma.py) ------------------------------------------------------------------------------
    def index_maps(self):
        """numpy (rows, cols) arrays of shape [warp, elems] for A, B and C, built on first use:
        kernels that are only compiled never need them (nor numpy)."""
        if self._maps is None:
            object.__setattr__(self, "_maps", tuple(
                _index_map(fn, self.warp, elems) for fn, elems in
                ((self.coords_a, self.elem_a), (self.coords_b, self.elem_b),
                 (self.coords_c, self.elem_c))))
        return self._maps

    def k_slices(self):
        """The K indices each of the ``numerics.k_steps`` chained instructions covers (from
        the lane maps: step s takes the s-th slice of every lane's A and B registers)."""
        import numpy as np
        (_, ac), (br, _), _ = self.index_maps()
        s = self.numerics.k_steps
        out = []
        for h in range(s):
            ka = np.unique(ac[:, h * self.elem_a // s:(h + 1) * self.elem_a // s])
            kb = np.unique(br[:, h * self.elem_b // s:(h + 1) * self.elem_b // s])
            if not np.array_equal(ka, kb):
                raise ValueError(f"{self.name}: step {h} takes K {ka.tolist()} of A but "
                                 f"{kb.tolist()} of B")
            out.append(ka)
        return out

    def emulate(self, operands, attrs, warp_size):
        """The interpreter's semantics, per whole warp: gather A, B, C into matrices by the lane
        maps, D = A @ B + C exactly (after the row's input rounding; step by step for chained
        rows), round to C's type, scatter D back to the lanes (module docstring: Numerics)."""
        import numpy as np
        (ar, ac), (br, bc), (cr, cc) = self.index_maps()
        a, b, c, *extra = operands  # [threads, elems]; extra: a row's own operands (scales)
        T = a.shape[0]
        if T % self.warp:
            raise ValueError(f"{self.name} needs whole warps: {T} threads is not a multiple of "
                             f"{self.warp}")
        W = T // self.warp
        w = np.arange(W)[:, None, None]
        exact = np.int64 if self.c.is_int else np.float64
        A = np.zeros((W, self.m, self.k), exact)
        B = np.zeros((W, self.k, self.n), exact)
        C = np.zeros((W, self.m, self.n), exact)
        A[w, ar[None], ac[None]] = np.asarray(a).astype(exact).reshape(W, self.warp, -1)
        B[w, br[None], bc[None]] = np.asarray(b).astype(exact).reshape(W, self.warp, -1)
        C[w, cr[None], cc[None]] = np.asarray(c).astype(exact).reshape(W, self.warp, -1)
        if self.numerics.inputs is not None:
            A, B = self.numerics.inputs(A), self.numerics.inputs(B)
        D = C
        for ks in (self.k_slices() if self.numerics.k_steps > 1 else [slice(None)]):
            D = self._round_to_c(self._products(A, B, ks, extra, attrs) + D)
        return [D[w, cr[None], cc[None]].reshape(T, -1)]

    def _products(self, A, B, ks, extra, attrs):
        """A @ B over the K indices ``ks``, exactly; a row kind with operands of its own
        (``extra``: the block scales of amd_mfma_scale) overrides it."""
        return A[:, :, ks] @ B[:, ks, :]

    def _round_to_c(self, x):
        """An exact sum as C's type: an integer keeps its low bits (two's complement wrap)."""
        import numpy as np
        if self.c.is_int:
            lo, hi = self.c.int_range()
            return ((x - lo) % (hi - lo + 1) + lo).astype(self.c.np_dtype)
        return x.astype(self.c.np_dtype)

    def __repr__(self):
        return f"<MatrixAtom {self.name}: {self.isa}>"


def require_accumulator(atom, known, family):
    """For a lowering's ``check``: C's type is one the ``family``'s lowering spells."""
    if atom.c.name not in known:
        raise ValueError(f"matrix atom {atom.name!r}: {family} accumulators here are "
                         f"{'/'.join(known)}, got {atom.c.name}")


def _bound(fn, atom):
    def lower(operands, results, attrs):
        return fn(atom, operands, results, attrs)
    return lower


def _check_covers_once(name, what, rows, cols, fn, warp):
    """Every (row, col) of the rows x cols operand is held by exactly one (lane, i) of a warp."""
    elems = rows * cols // warp
    seen = {}
    for lane in range(warp):
        for i in range(elems):
            rc = fn(lane, i)
            if not (0 <= rc[0] < rows and 0 <= rc[1] < cols):
                raise ValueError(f"matrix atom {name!r}: {what} element {i} of lane {lane} is at "
                                 f"{rc}, outside the {rows}x{cols} operand")
            if rc in seen:
                raise ValueError(f"matrix atom {name!r}: {what}{list(rc)} is held by lane "
                                 f"{seen[rc][0]} element {seen[rc][1]} and lane {lane} element {i}")
            seen[rc] = (lane, i)


def _index_map(fn, warp, elems):
    import numpy as np
    r = np.empty((warp, elems), np.int64)
    c = np.empty((warp, elems), np.int64)
    for lane in range(warp):
        for i in range(elems):
            r[lane, i], c[lane, i] = fn(lane, i)
    return r, c


def instruction_table(rows) -> dict:
    """{name: atom} for a Target's ``instructions``."""
    table = {}
    for row in rows:
        if row.name in table:
            raise ValueError(f"two matrix atoms are named {row.name!r}")
        table[row.name] = row
    return table


def atom_index(rows) -> dict:
    """{(a, b, c, shape): (names, in table order)} for a Target's ``mma_atoms``: rows of the same
    types and shape on different chips share a key; the first one the chip has is chosen."""
    index = {}
    for row in rows:
        index.setdefault(row.key, ())
        index[row.key] += (row.name,)
    return index
