"""The tiled MMA over warpgroups: ``opus.make_tiled_mma`` with a wgmma atom (NVIDIA sm_90a).

The block tile is (E_M * T_M * 64) x (E_N * T_N * N) x (E_K * K): ``tile`` = (T_M, T_N, 1)
warpgroups (4 consecutive warps each; warpgroup g at (g // T_N, g % T_N)), each issuing the
atom ``expand`` = (E_M, E_N, E_K) times per call. Row (m) of the tile = em * T_M * 64 +
gm * 64 + the atom's row; column (n) = en * T_N * N + gn * N + the atom's column, as for warps
(lang/mma.py TiledMma, whose layouts this reuses: C's x/p/y from the wgmma accumulator layout,
A's from its register fragment). A and B come from shared memory as layouts of the block's
tiles (rows, K): ``tmma.smem_a(view, la)`` is this warpgroup's E_M x E_K descriptors,
``smem_b`` its E_N x E_K ones; a tile's 64-row (N-row) blocks must repeat at one offset, so a
warpgroup's descriptors differ from warpgroup 0's by a run-time start address only.

    tmma = opus.make_tiled_mma(opus.make_wgmma(f16, f16, f32, (64, 128, 16)), (1, 1, 4), (2, 1, 1))
    acc = opus.wgmma_fence(tmma.zeros_c())       # 128 x 128 x 64 over 2 warpgroups
    acc = tmma(tmma.smem_a(sa, la), tmma.smem_b(sb, lb), acc)   # 4 k-steps x 1 x 1 wgmmas
    opus.wgmma_commit()
    d = opus.wgmma_wait(0, acc)                  # all parts' registers, tmma.layout_c order
    opus.make_gmem(out).store(d, tmma.layout_c((N, 1)), vec=2)
"""
from __future__ import annotations

from ..ir import Value, type_str
from .context import TraceError
from .mma import TiledMma, check_tiling
from .wgmma import Wgmma, TiledWgmmaAcc, _static_offsets

__all__ = ["TiledWgmma", "TiledSmemOperand"]

_WARPS = 4  # warps per warpgroup


def _err(msg):
    raise TraceError(msg)


def _check_registers(v, n, dtype, what, hint):
    """``v`` must be a register vector of ``n`` elements of ``dtype``."""
    from ..ir import VectorType
    want = VectorType(dtype, n)
    if not isinstance(v, Value) or v.type != want:
        got = type_str(v.type) if isinstance(v, Value) else type(v).__name__
        _err(f"{what} must be a {type_str(want)} register vector{hint}, got {got}")


class TiledSmemOperand:
    """A tiled wgmma's A or B in shared memory for the calling warpgroup: one descriptor
    operand (SmemOperand) per (m or n repeat, k repeat), in ``parts[i][kk]``."""
    __slots__ = ("which", "parts")

    def __init__(self, which, parts):
        self.which, self.parts = which, parts

    def __repr__(self):
        return f"<tiled wgmma {self.which} operand: {len(self.parts)} x {len(self.parts[0])} " \
               f"descriptors>"


class TiledWgmma(TiledMma):
    """A block-level wgmma: ``tile`` = (T_M, T_N, 1) warpgroups, each issuing the wgmma atom
    ``expand`` = (E_M, E_N, E_K) times per call (module docstring). ``layout_c`` (and, with
    A from registers, ``layout_a``) are x/p/y layouts over the block as for warps;
    ``smem_a`` / ``smem_b`` build the warpgroup's shared-memory descriptors from the tiles'
    layouts; ``tmma(a, b, c)`` issues every wgmma (K outermost, then m, then n) and returns
    a ``TiledWgmmaAcc`` for ``opus.wgmma_fence`` / ``opus.wgmma_wait``."""

    def __init__(self, atom: Wgmma, expand, tile):
        check_tiling(expand, tile)
        if tile[2] != 1:
            _err(f"make_tiled_mma with a wgmma atom: tile is warpgroups along (m, n, k) and k "
                 f"must be 1 (warpgroups along k would need a reduction of their partial sums "
                 f"through shared memory), got {tile!r}")
        self.atom, self.expand, self.tile = atom, expand, tile
        em, en, ek = expand
        tm, tn, _ = tile
        self.m, self.n, self.k = em * tm * atom.m, en * tn * atom.n, ek * atom.k
        self.num_warpgroups = tm * tn
        self.num_warps = _WARPS * self.num_warpgroups
        self.elem_c = em * en * atom.elem_c
        self.elem_a = em * ek * atom.elem_a if atom.a_from == "regs" else None
        self.elem_b = None

    # -- the layouts (TiledMma's, over warpgroups) ------------------------------------------
    def _atom_operand(self, which):
        if which == "b":
            _err("a wgmma's B is in shared memory: tmma.smem_b(view, layout) (it has no "
                 "register layout)")
        if which == "a":
            self.atom._need_regs("layout_a")
            return self.atom.instruction.layout_a()
        return self.atom.instruction.layout_c()

    def _atom_p(self, op):
        from .threads import warp_id, lane_id
        lane = lane_id()
        return warp_id() % _WARPS, lane // 4, lane % 4  # (warp, groupID, threadID_in_group)

    def _unit_coords(self):
        return self.warpgroup_coords() + (0,)

    def warpgroup_coords(self):
        """(gm, gn) of the calling thread's warpgroup in the tile grid."""
        from .threads import warp_id
        tm, tn, _ = self.tile
        g = warp_id() // _WARPS
        return (g // tn) % tm if tm > 1 else 0, g % tn if tn > 1 else 0

    def warp_coords(self):
        _err("a tiled wgmma is spread over warpgroups: tmma.warpgroup_coords() gives the "
             "calling thread's (m, n)")

    # -- shared-memory operands ------------------------------------------------------------
    def smem_a(self, smem, layout, k0=0):
        """This warpgroup's A operands in shared memory: ``layout`` maps the block's A tile
        (m, k) (tmma.m rows; K from ``k0``, a compile-time element offset, on for tmma.k) to
        element offsets of ``smem``, as ``Wgmma.smem_a`` takes it."""
        if self.atom.a_from != "smem":
            _err("tmma.smem_a: this wgmma takes A in registers (a_from='regs'): pass the "
                 "register vector tmma.layout_a() loads")
        gm, _ = self.warpgroup_coords()
        return self._operand("A", smem, layout, k0, self.expand[0], self.tile[0], gm,
                             self.atom.m, self.atom.smem_a)

    def smem_b(self, smem, layout, k0=0):
        """This warpgroup's B operands: ``layout`` maps the block's B tile as (n, k) (B
        transposed, as wgmma takes it: tmma.n rows) to element offsets of ``smem``."""
        _, gn = self.warpgroup_coords()
        return self._operand("B", smem, layout, k0, self.expand[1], self.tile[1], gn,
                             self.atom.n, self.atom.smem_b)

    def _operand(self, which, smem, layout, k0, reps, units, unit, rows, build):
        from .layout import Layout
        what = f"tiled wgmma {which} operand"
        if type(k0) is not int or k0 < 0:
            _err(f"{what}: k0 must be a non-negative compile-time int, got {k0!r}")
        if not isinstance(layout, Layout):
            _err(f"{what}: needs an opus layout of the block's ({reps * units * rows}, "
                 f"{self.k}) tile, got {type(layout).__name__}")
        step = self._unit_step(layout, what, reps, units, rows, k0)
        if units > 1:
            layout = layout + unit * step  # this warpgroup's rows: a run-time start address
        k = self.atom.k
        return TiledSmemOperand(which, [[build(smem, layout, origin=(i * units * rows, k0 + kk * k))
                                         for kk in range(self.expand[2])] for i in range(reps)])

    def _unit_step(self, layout, what, reps, units, rows, k0):
        """The element offset between warpgroup u's operand rows and warpgroup 0's, the same
        for every element of every operand (else the warpgroups' descriptors would differ)."""
        if units == 1:
            return 0
        span = reps * units * rows
        full = _static_offsets(layout, span, self.k, (0, k0), what)
        step = int(full[rows, 0] - full[0, 0])
        for i in range(reps):
            for u in range(1, units):
                r0 = i * units * rows
                mine, first = full[r0 + u * rows:r0 + (u + 1) * rows], full[r0:r0 + rows]
                if not (mine - first == u * step).all():
                    _err(f"{what}: the layout's {rows}-row blocks do not repeat at one offset "
                         f"(block {u} of repeat {i} is not block 0 shifted by {u} x {step} "
                         f"elements), so the warpgroups' descriptors would differ: give the "
                         f"tile a layout whose row blocks are evenly spaced")
        return step

    # -- issuing ---------------------------------------------------------------------------
    def zeros_c(self):
        """Zero accumulators (pass them through ``opus.wgmma_fence`` before the first call)."""
        return TiledWgmmaAcc(self.atom.zeros_c() for _ in range(self.expand[0] * self.expand[1]))

    def acc(self, value):
        """Register vector ``value`` (``elem_c`` elements in ``layout_c`` order, e.g. what
        ``wgmma_wait`` returned) as the tiled accumulator."""
        _check_registers(value, self.elem_c, self.atom.dtype_c, "a tiled wgmma accumulator",
                         "")
        n = self.atom.elem_c
        return TiledWgmmaAcc(self.atom.acc(value[i * n:(i + 1) * n])
                             for i in range(self.expand[0] * self.expand[1]))

    def _a_parts(self, a):
        em, _, ek = self.expand
        if self.atom.a_from == "regs":
            _check_registers(a, self.elem_a, self.atom.instruction.reg_a,
                             "tiled wgmma A (from registers)", " (tmma.layout_a)")
            n = self.atom.elem_a
            return [[a[(i * ek + kk) * n:(i * ek + kk + 1) * n] for kk in range(ek)]
                    for i in range(em)]
        return self._smem_parts(a, "A")

    def _smem_parts(self, x, which):
        if isinstance(x, tuple) and len(x) == 2:
            x = (self.smem_a if which == "A" else self.smem_b)(*x)
        if not isinstance(x, TiledSmemOperand) or x.which != which:
            got = f"tmma.smem_{x.which.lower()}" if isinstance(x, TiledSmemOperand) else \
                type(x).__name__
            _err(f"tiled wgmma {which} must be tmma.smem_{which.lower()}(view, layout) (or a "
                 f"(view, layout) pair), got {got}")
        return x.parts

    def _c_parts(self, c):
        if isinstance(c, Value):
            c = self.acc(c)
        if not isinstance(c, TiledWgmmaAcc) or len(c.parts) != self.expand[0] * self.expand[1]:
            _err(f"tiled wgmma C must be its accumulator (tmma.zeros_c(), a call's result, or a "
                 f"register vector of {self.elem_c} elements), got {c!r}")
        return list(c.parts)

    def _issue(self, a, b, c, ks, scale_d=True):
        em, en, _ = self.expand
        pa, pb = self._a_parts(a), self._smem_parts(b, "B")
        cs = [None] * (em * en) if c is None else self._c_parts(c)
        for kk in ks:
            for i in range(em):
                for j in range(en):
                    first = kk == ks[0]
                    cs[i * en + j] = self.atom(pa[i][kk], pb[j][kk], cs[i * en + j],
                                               scale_d=scale_d if first else True)
        return TiledWgmmaAcc(cs)

    def __call__(self, a, b, c=None, scale_d=True):
        """D = A @ B + C over the block tile: every wgmma, K outermost, then m, then n; ``a``
        from ``smem_a`` (or a (view, layout) pair; with A in registers the vector
        ``layout_a`` loads), ``b`` from ``smem_b``, ``c`` the accumulator (None: D = A @ B).
        ``scale_d`` false ignores C. The result is in flight until ``opus.wgmma_wait``."""
        return self._issue(a, b, c, range(self.expand[2]), scale_d)

    def step_k(self, s, a, b, c, scale_d=True):
        """Only K-slice ``s`` (0 <= s < E_K) of the call, for every (m, n)."""
        if type(s) is not int or not 0 <= s < self.expand[2]:
            _err(f"step_k slice must be a compile-time int in 0..{self.expand[2] - 1}, got {s!r}")
        return self._issue(a, b, c, [s], scale_d)

    def __repr__(self):
        return (f"<TiledWgmma {self.m}x{self.n}x{self.k} of {self.atom.instruction.isa}: expand "
                f"{self.expand}, {self.num_warpgroups} warpgroups>")

