"""Warpgroup matrix multiply-accumulate (NVIDIA wgmma, sm_90a): the atom, shared-memory operands
described by layouts, accumulators in flight, and the fence / commit / wait protocol.

A warpgroup is 4 consecutive warps (threads 128g .. 128g + 127 of the block); the 128 threads
issue each instruction together. The protocol (PTX ISA 9.7.15.4 "Asynchronous wgmma proxy"):

    wg = opus.make_wgmma(opus.f16, opus.f16, opus.f32, (64, 128, 16))
    la = opus.make_layout((64, 64), swizzle=opus.swizzle_bytes(128, opus.f16))  # M x K tile
    lb = opus.make_layout((128, 64), swizzle=opus.swizzle_bytes(128, opus.f16))  # N x K tile
    acc = opus.wgmma_fence(wg.zeros_c())          # registers written before the fence
    for kk in range(4):                           # K = 64: four k16 steps
        acc = wg(wg.smem_a(sa, la + 16 * kk), wg.smem_b(sb, lb + 16 * kk), acc)
    opus.wgmma_commit()
    d = opus.wgmma_wait(0, acc)                   # the registers, readable now
    opus.make_gmem(out).store(d, wg.layout_c((N, 1)), vec=2)

The result of a wgmma is a ``WgmmaAcc``: its registers are being written asynchronously, so it
can only be handed to another wgmma (as C), to ``wgmma_fence`` or to ``wgmma_wait``; anything
else is a trace-time error. ``wgmma_wait(n, acc)`` returns the registers; the interpreter checks
that the wgmma which last wrote them is in a group the wait completed.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Value, VectorType, PointerType, type_str, scalar_of, lanes_of
from .context import ctx, TraceError, target_row
from .layout import Layout, Swizzle, swizzle_bytes
from .values import emit, as_value, to_bool, is_static

__all__ = ["make_wgmma", "Wgmma", "WgmmaAcc", "TiledWgmmaAcc", "SmemOperand", "wgmma_fence",
           "wgmma_commit", "wgmma_wait", "setmaxnreg_inc", "setmaxnreg_dec"]

_SWIZZLE_BYTES = (32, 64, 128)


def _err(msg):
    raise TraceError(msg)


def _targets():
    from ..targets import nv_wgmma
    return nv_wgmma


def _row(name, what):
    """The target's wgmma-family row ``name``; a TraceError naming the chip otherwise."""
    return target_row(name, what, f"wgmma is an NVIDIA sm_90a instruction (on "
                                  f"{ctx().target.vendor.upper()}, opus.make_mma gives the chip's "
                                  f"matrix atoms)")


# -- accumulators --------------------------------------------------------------------------------

class WgmmaAcc:
    """A wgmma accumulator: register vector ``value`` (64 x N over the warpgroup) and the i32
    ``token`` of the wgmma that last wrote it (-1: none). Its registers may be in flight, so it
    can only go to another wgmma (as C), ``opus.wgmma_fence`` or ``opus.wgmma_wait``, which
    returns the readable registers."""
    __slots__ = ("value", "token")

    def __init__(self, value, token):
        self.value, self.token = value, token

    def __opus_flatten__(self):  # carried through run-time loops and branches
        return [self.value, self.token], lambda leaves: WgmmaAcc(leaves[0], leaves[1])

    def _refuse(self, *args, **kwargs):
        _err("a wgmma accumulator cannot be read before its wgmma completes: "
             "d = opus.wgmma_wait(n, acc) gives its registers (PTX: reading them before "
             "wgmma.wait_group is undefined)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __neg__ = __getitem__ = __iter__ = __len__ = __bool__ = __int__ = __float__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def to(self, *args, **kwargs):
        self._refuse()

    def __repr__(self):
        return ("<wgmma accumulator (possibly in flight): opus.wgmma_wait(n, acc) gives its "
                "registers>")


class TiledWgmmaAcc:
    """The accumulators of a tiled wgmma (opus.make_tiled_mma with a wgmma atom): one
    ``WgmmaAcc`` per (m, n) repeat of the atom, in ``parts`` [E_M][E_N]. Like them it can only go
    to another wgmma, ``opus.wgmma_fence`` (which pins every part) or ``opus.wgmma_wait``, which
    returns all their registers as one vector in the tiled ``layout_c`` order."""
    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = tuple(parts)

    def __opus_flatten__(self):  # carried through run-time loops and branches
        leaves = [x for p in self.parts for x in (p.value, p.token)]
        return leaves, lambda xs: TiledWgmmaAcc(WgmmaAcc(xs[i], xs[i + 1])
                                                for i in range(0, len(xs), 2))

    _refuse = WgmmaAcc._refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __neg__ = __getitem__ = __iter__ = __len__ = __bool__ = __int__ = __float__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = to = _refuse

    def __repr__(self):
        return (f"<tiled wgmma accumulator of {len(self.parts)} parts (possibly in flight): "
                f"opus.wgmma_wait(n, acc) gives its registers>")


def _parts(values):
    """``values`` with every tiled accumulator spread into its parts."""
    return [p for v in values for p in (v.parts if isinstance(v, TiledWgmmaAcc) else (v,))]


def _regroup(values, results, tiled):
    """``results`` (one per part of ``values``) grouped back as ``values`` were: a tiled
    accumulator's parts become ``tiled(parts)``."""
    out, i = [], 0
    for v in values:
        n = len(v.parts) if isinstance(v, TiledWgmmaAcc) else 1
        out.append(tiled(results[i:i + n]) if isinstance(v, TiledWgmmaAcc) else results[i])
        i += n
    return None if not out else out[0] if len(out) == 1 else tuple(out)


# -- shared-memory operands ----------------------------------------------------------------------

class SmemOperand:
    """A wgmma operand in shared memory: the pointer, the element offset of the operand's first
    element (the layout's linear part) and the descriptor's static fields, derived from a
    layout by ``Wgmma.smem_a`` / ``smem_b``."""
    __slots__ = ("ptr", "offset", "desc", "major", "which")

    def __init__(self, ptr, offset, desc, major, which):
        self.ptr, self.offset, self.desc, self.major, self.which = ptr, offset, desc, major, which

    def __repr__(self):
        return f"<wgmma {self.which} operand in shared memory, {self.major}-major>"


def _layout_swizzle(layout, dtype, what):
    """The swizzle mode (0, 32, 64, 128 bytes) of ``layout``'s Swizzle, which must be one of
    the patterns wgmma reads (swizzle_bytes on 16-byte chunks)."""
    sw = layout.swizzle
    if sw is None:
        return 0
    for mode in _SWIZZLE_BYTES:
        if sw == swizzle_bytes(mode, dtype):
            return mode
    _err(f"{what}: the layout's {sw!r} is not a wgmma swizzle: wgmma reads 16-byte chunks "
         f"swizzled within 32-, 64- or 128-byte rows, opus.swizzle_bytes(32 | 64 | 128, "
         f"{dtype.name}) (= Swizzle(1|2|3, {swizzle_bytes(32, dtype).base}, 3))")


def _mode_offsets(np, extents, strides, count):
    """numpy offsets of coordinates 0 .. count-1 of one layout mode (row-major over its
    leaves)."""
    x = np.arange(count, dtype=np.int64)
    out = np.zeros(count, np.int64)
    for e, s in zip(reversed(extents), reversed(strides)):
        out += (x % e) * s
        x //= e
    return out


def _static_offsets(layout, rows, k, origin, what):
    """numpy int64 [rows, k]: ``layout``'s unswizzled offsets of (origin + (row, col)) without
    its linear part (a static, rank-2 layout whose modes cover them)."""
    import numpy as np
    if layout.coord is not None or layout._open != tuple(range(len(layout._leaves))):
        _err(f"{what}: the layout has fixed coordinates (coord=) or a y_order; give the tile's "
             f"plain layout")
    if layout.rank != 2:
        _err(f"{what}: the layout must have 2 modes (rows, K), got rank {layout.rank}")
    leaves, strides = layout._leaves, layout._strides
    if not all(type(x) is int for x in leaves + strides):
        _err(f"{what}: wgmma descriptors are built while tracing: the layout's shape and strides "
             f"must be Python ints (its offset, the linear part, may be a run-time value)")
    if not (isinstance(origin, tuple) and len(origin) == 2
            and all(type(x) is int and x >= 0 for x in origin)):
        _err(f"{what}: origin must be (row, k) of non-negative compile-time ints, got {origin!r}")
    grids, pos = [], 0
    for m, need, o in zip(layout._modes, (rows, k), origin):
        size = _product(m)
        if size < o + need:
            _err(f"{what}: the layout's mode {tuple(m)} covers {size} coordinates; the operand "
                 f"needs {o} + {need}")
        grids.append(_mode_offsets(np, m, strides[pos:pos + len(m)], o + need)[o:])
        pos += len(m)
    return grids[0][:, None] + grids[1][None, :]


def _smem_pointer(smem, dtype, what):
    from .ldmatrix import _unbounded_shared
    p = _unbounded_shared(what, smem)
    if p.type.elem != dtype:
        _err(f"{what}: the shared memory holds {p.type.elem.name}; this operand is "
             f"{dtype.name}: view it with that dtype")
    return p


# -- the atom ------------------------------------------------------------------------------------

class Wgmma:
    """One wgmma instruction seen from a warpgroup: D (64 x N) = A (64 x K) @ B (K x N) + C.

    ``elem_c`` accumulator elements per thread (N / 2), in the register layout ``layout_c`` /
    ``coords_c(thread, i)`` (thread: 0..127 in the warpgroup); with ``a_from="regs"``, A is
    ``elem_a`` elements per thread in ``layout_a``. B (and A from shared memory) is given as an
    smem view plus a layout of the (N, K) / (64, K) operand: ``smem_a`` / ``smem_b``."""

    def __init__(self, row):
        self.instruction = row
        self.m, self.n, self.k = row.shape
        self.dtype_a, self.dtype_b, self.dtype_c = row.a, row.b, row.c
        self.a_from = row.a_from
        self.elem_c = row.elem_c
        self.elem_a = row.elem_a if row.a_from == "regs" else None

    # -- register layouts (x/p/y over the warpgroup's threads) ----------------------------------
    def coords_c(self, thread, i):
        """The (row, col) of D that warpgroup thread ``thread``'s element i holds."""
        return self.instruction.layout_c().coords(thread, i)

    def coords_a(self, thread, i):
        """The (row, k) of A that thread's register element i holds (a_from="regs")."""
        self._need_regs("coords_a")
        return self.instruction.layout_a().coords(thread, i)

    def _need_regs(self, what):
        if self.a_from != "regs":
            _err(f"{what}: this wgmma reads A from shared memory (make_wgmma(..., a_from='regs') "
                 f"takes A in registers)")

    def _layout(self, op, x_stride, p_coord):
        from .partition import P, Y, unfold_x_stride, unfold_p_coord
        from .layout import packed_strides
        dim = tuple(tuple(P if t == "p" else Y for t in d) for d in op.dim)
        if x_stride is None:  # packed row-major over the x-dims
            n0 = len(op.dim[0])
            x_stride = packed_strides((_product(op.shape[:n0]), _product(op.shape[n0:])))
        if p_coord is None:
            from .threads import warp_id, lane_id
            lane = lane_id()
            p_coord = (warp_id() % 4, lane // 4, lane % 4)
        return Layout(op.shape, unfold_x_stride(dim, op.shape, x_stride),
                      unfold_p_coord(dim, p_coord), y_order=op.y_order)

    def layout_c(self, x_stride=None, p_coord=None):
        """D's partition layout for this thread: x-dims (m, n) with strides ``x_stride``
        (default packed 64 x N); ``g.store(d, wg.layout_c((ldc, 1)), vec=2)`` stores the
        registers ``wgmma_wait`` returned. ``p_coord``: (warp in the warpgroup, groupID,
        threadID_in_group), by default the calling thread's."""
        return self._layout(self.instruction.layout_c(), x_stride, p_coord)

    def layout_a(self, x_stride=None, p_coord=None):
        """A's partition layout (a_from="regs"): x-dims (m, k); ``g.load(wg.layout_a((lda,
        1)))`` gives the register vector the call takes."""
        self._need_regs("layout_a")
        return self._layout(self.instruction.layout_a(), x_stride, p_coord)

    @property
    def vtype_c(self):
        return VectorType(self.dtype_c, self.elem_c)

    @property
    def vtype_a(self):
        self._need_regs("vtype_a")
        return VectorType(self.instruction.reg_a, self.elem_a)

    def zeros_c(self):
        """A zero accumulator (pass it through ``opus.wgmma_fence`` before the first wgmma)."""
        from .vectors import zeros
        return self.acc(zeros(self.elem_c, self.dtype_c))

    def acc(self, value):
        """Register vector ``value`` (``elem_c`` elements of C's type) as an accumulator."""
        if not isinstance(value, Value) or value.type != self.vtype_c:
            got = type_str(value.type) if isinstance(value, Value) else type(value).__name__
            _err(f"a wgmma accumulator is a {type_str(self.vtype_c)} register vector, got {got}")
        return WgmmaAcc(value, as_value(-1, dt.i32))

    # -- shared-memory operands -----------------------------------------------------------------
    def smem_a(self, smem, layout, origin=(0, 0)):
        """A (64 x K) in shared memory: ``smem`` (an unbounded smem view or shared pointer of
        A's type; f32 for tf32) and ``layout`` of a tile, coordinates (m, k) -> element offset;
        the operand is the 64 x K block at ``origin`` (static (m0, k0): ``(0, 16 * kk)`` is
        k-step kk of an f16 tile). The descriptor is derived from the layout; one it cannot
        express is an error saying why."""
        if self.a_from != "smem":
            _err("smem_a: this wgmma takes A in registers (a_from='regs')")
        return self._operand("A", smem, layout, origin, self.m, self.instruction.reg_a)

    def smem_b(self, smem, layout, origin=(0, 0)):
        """B in shared memory as an (N, K) layout (B transposed, as every wgmma operand is
        (rows, K)): K-major when K is contiguous, N-major (f16/bf16 only) when N is; the
        operand is the N x K block at ``origin`` (n0, k0)."""
        return self._operand("B", smem, layout, origin, self.n, self.instruction.reg_b)

    def _operand(self, which, smem, layout, origin, rows, dtype):
        nv = _targets()
        what = f"wgmma {which} operand"
        p = _smem_pointer(smem, dtype, what)
        if not isinstance(layout, Layout):
            _err(f"{what}: needs an opus layout of the ({rows}, {self.k}) operand (opus."
                 f"make_layout), got {type(layout).__name__}")
        swizzle = _layout_swizzle(layout, dtype, what)
        offsets = _static_offsets(layout, rows, self.k, origin, what)
        try:
            major, lbo, sbo = nv.fit_descriptor(offsets, dtype.itemsize, swizzle,
                                                self.instruction.transposable)
        except nv.DescriptorError as e:
            _err(f"{what}: the layout cannot be a wgmma descriptor: {e}")
        start = layout.linear
        first = int(offsets[0, 0])
        if first:
            start = start + first
        if type(start) is int and (start * dtype.itemsize) % 16:
            _err(f"{what}: the operand starts {start * dtype.itemsize} bytes into the view: a "
                 f"descriptor's start address must be 16-byte aligned")
        from .memory import _offset
        return SmemOperand(p, _offset(start), nv.encode_descriptor(0, lbo, sbo, swizzle), major,
                           which)

    def _smem(self, x, which):
        if isinstance(x, SmemOperand):
            if x.which != which:
                _err(f"wgmma {which}: this operand was made by smem_{x.which.lower()}")
            return x
        if isinstance(x, tuple) and len(x) == 2:
            return (self.smem_a if which == "A" else self.smem_b)(*x)
        _err(f"wgmma {which} must be in shared memory: wg.smem_{which.lower()}(view, layout) (or "
             f"a (view, layout) pair), got {type(x).__name__}")

    # -- issuing --------------------------------------------------------------------------------
    def __call__(self, a, b, c=None, scale_d=True, neg_a=False, neg_b=False):
        """Issue D = A @ B + C (asynchronously): ``a`` an smem operand (or (view, layout)), or
        with a_from="regs" the register vector; ``b`` an smem operand; ``c`` an accumulator
        (``zeros_c()``, a previous wgmma's result, or a register vector) or None (D = A @ B).
        ``scale_d`` false (compile-time or run-time bool) ignores C; ``neg_a`` / ``neg_b`` negate
        A / B (floating-point types). Returns the accumulator, in flight until a
        ``wgmma_wait``."""
        row = self.instruction
        ops = []
        attrs = {"name": row.name, "trans_a": False, "trans_b": False}
        if self.a_from == "smem":
            sa = self._smem(a, "A")
            ops += [sa.ptr, sa.offset]
            attrs["desc_a"], attrs["trans_a"] = sa.desc, sa.major == "MN"
        else:
            if not isinstance(a, Value) or a.type != self.vtype_a:
                got = type_str(a.type) if isinstance(a, Value) else type(a).__name__
                _err(f"wgmma A (from registers) must be a {type_str(self.vtype_a)} register "
                     f"vector (wg.layout_a), got {got}")
            ops.append(a)
        sb = self._smem(b, "B")
        ops += [sb.ptr, sb.offset]
        attrs["desc_b"], attrs["trans_b"] = sb.desc, sb.major == "MN"
        if c is None:
            c, scale_d = self.zeros_c(), False
        if isinstance(c, Value):
            c = self.acc(c)
        if not isinstance(c, WgmmaAcc) or c.value.type != self.vtype_c:
            got = type_str(c.value.type) if isinstance(c, WgmmaAcc) else type(c).__name__
            _err(f"wgmma C must be an accumulator of {type_str(self.vtype_c)} (wg.zeros_c(), a "
                 f"wgmma's result), got {got}")
        ops.append(c.value)
        ops.append(to_bool(scale_d, "scale_d") if not is_static(scale_d) else
                   as_value(bool(_static_bool(scale_d, "scale_d")), dt.bool_))
        for name, v in (("neg_a", neg_a), ("neg_b", neg_b)):
            attrs[name] = _static_bool(v, name)
            if v and self.dtype_c.name == "i32":
                _err(f"wgmma {name}: integer wgmma has no negation (PTX imm-scale-a/b exist "
                     f"for floating-point types)")
        d, tok = emit("target_op", ops, [self.vtype_c, dt.i32], attrs).results
        return WgmmaAcc(d, tok)

    def __repr__(self):
        return f"<Wgmma {self.instruction.isa} (A from {self.a_from})>"


def _product(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _static_bool(v, what):
    if not isinstance(v, bool):
        _err(f"{what} must be a compile-time bool, got {v!r}")
    return v


def make_wgmma(a, b, c, shape, a_from="smem"):
    """The NVIDIA warpgroup matrix instruction ``wgmma.mma_async`` (sm_90a) for A/B/C element
    types and shape (64, N, K): D (64 x N) = A (64 x K) @ B (K x N) + C, issued by the 128
    threads of a warpgroup. Types: f16 x f16 -> f32 or f16, bf16 x bf16 -> f32 (K = 16);
    tf32 x tf32 -> f32 (K = 8, f32 in memory); fp8 e4m3/e5m2 (any pairing) -> f32 or f16
    (K = 32); i8/u8 (any pairing) -> i32 (K = 32). N: a multiple of 8 up to 256 (integers: 8,
    16, 24, 32, then multiples of 16).

    Example: ``wg = opus.make_wgmma(opus.bf16, opus.bf16, opus.f32, (64, 256, 16))``; then
    ``acc = wg(wg.smem_a(sa, la), wg.smem_b(sb, lb), acc)``, ``opus.wgmma_commit()``,
    ``d = opus.wgmma_wait(0, acc)`` (docs/language.md, "Warpgroup MMA").

    :param a: element type of A
    :type a: DType
    :param b: element type of B
    :type b: DType
    :param c: element type of C and D, the accumulator
    :type c: DType
    :param shape: (64, N, K)
    :type shape: tuple of 3 ints
    :param a_from: where A is: "smem" (a descriptor, like B) or "regs" (registers, ``layout_a``)
    :type a_from: str
    :returns: the atom: ``smem_a``/``smem_b``, ``zeros_c``, ``layout_c``/``coords_c``, call
    :rtype: Wgmma
    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    nv = _targets()
    t = ctx().target
    if a_from not in ("smem", "regs"):
        _err(f"make_wgmma a_from must be 'smem' or 'regs', got {a_from!r}")
    for x in (a, b, c):
        if not isinstance(x, dt.DType):
            _err(f"make_wgmma takes element types (opus.f16, ...), got {x!r}")
    a, b, c = (t.resolve_dtype(x) for x in (a, b, c))
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else shape
    if not (isinstance(shape, tuple) and len(shape) == 3 and all(type(x) is int for x in shape)):
        _err(f"make_wgmma shape must be (64, N, K) of ints, got {shape!r}")
    m, n, k = shape
    kinds = {(r.a.name, r.b.name, r.c.name) for r in nv.ROWS}
    if (a.name, b.name, c.name) not in kinds:
        have = ", ".join(sorted(f"{x}x{y}->{z}" for x, y, z in kinds))
        _err(f"no wgmma for {a.name} x {b.name} -> {c.name}; wgmma has {have}")
    if m != 64 or k != nv.k_of(a) or n not in nv.legal_n(a):
        ns = nv.legal_n(a)
        _err(f"no wgmma of shape {m}x{n}x{k} for {a.name}: M is 64, K is {nv.k_of(a)} and N "
             f"one of {ns[0]}, {ns[1]}, ..., {ns[-1]} ("
             + ("8, 16, 24, 32, then multiples of 16" if a.name in ("i8", "u8") else
                "multiples of 8") + ")")
    row = _row(nv.wgmma_name(n, k, a, b, c, a_from), f"wgmma ({a.name} x {b.name} -> {c.name}, "
               f"{m}x{n}x{k})")
    return Wgmma(row)


# -- fence, commit, wait, setmaxnreg -------------------------------------------------------------

def _registers(x, what):
    if isinstance(x, WgmmaAcc):
        return x.value
    if isinstance(x, Value) and not isinstance(x.type, PointerType):
        return x
    _err(f"{what} takes register values or wgmma accumulators, got {type(x).__name__}")


def _shapes(values):
    return tuple((lanes_of(v.type), scalar_of(v.type).name) for v in values)


def wgmma_fence(*values):
    """``wgmma.fence``: orders this warpgroup's register and shared-memory accesses before it
    against the wgmmas after it. Needed before the first wgmma and whenever the accumulator or
    A registers were written by other instructions (the interpreter requires one after every
    ``wgmma_wait`` before the next wgmma). The values passed (accumulators, A registers) are
    returned pinned: the compiler cannot move their writes past the fence.

    :param values: register vectors or wgmma accumulators (a tiled wgmma's too) to pin
    :type values: run-time vectors, WgmmaAcc or TiledWgmmaAcc
    :returns: the same values (one value, a tuple of several, or None)
    :rtype: same as given
    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    row = _row("nv.wgmma.fence", "opus.wgmma_fence")
    parts = _parts(values)
    regs = [_registers(v, "opus.wgmma_fence") for v in parts]
    res = emit("target_op", regs, [r.type for r in regs],
               {"name": row.name, "shapes": _shapes(regs)}).results
    out = [WgmmaAcc(r, v.token) if isinstance(v, WgmmaAcc) else r for v, r in zip(parts, res)]
    return _regroup(values, out, TiledWgmmaAcc)


def wgmma_commit():
    """``wgmma.commit_group``: closes the warpgroup's wgmmas issued since the last commit into
    a group, which ``wgmma_wait`` counts.

    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    row = _row("nv.wgmma.commit_group", "opus.wgmma_commit")
    emit("target_op", [], [], {"name": row.name})


def wgmma_wait(n, *accs):
    """``wgmma.wait_group n``: waits until at most the ``n`` newest committed groups are in
    flight, then returns the registers of ``accs`` (readable; an accumulator still written by
    a pending wgmma is an error in the interpreter, undefined on the GPU).

    :param n: groups that may stay in flight
    :type n: int (compile-time, >= 0)
    :param accs: accumulators to read after the wait
    :type accs: WgmmaAcc or TiledWgmmaAcc (all its parts as one vector, the tiled layout_c's)
    :returns: their register vectors (one, a tuple of several, or None)
    :rtype: run-time vector
    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    if type(n) is not int or n < 0:
        _err(f"opus.wgmma_wait(n): n must be a non-negative compile-time int, got {n!r}")
    row = _row("nv.wgmma.wait_group", "opus.wgmma_wait")
    parts = _parts(accs)
    for x in parts:
        if not isinstance(x, WgmmaAcc):
            _err(f"opus.wgmma_wait takes wgmma accumulators after n, got {type(x).__name__}")
    regs = [x.value for x in parts]
    res = emit("target_op", regs + [x.token for x in parts], [r.type for r in regs],
               {"name": row.name, "n": n, "shapes": _shapes(regs)}).results
    from .vectors import concat
    return _regroup(accs, list(res), lambda rs: rs[0] if len(rs) == 1 else concat(*rs))


def _setmaxnreg(count, how):
    what = f"opus.setmaxnreg_{how}"
    if type(count) is not int or not (24 <= count <= 256 and count % 8 == 0):
        _err(f"{what}(count): count must be a compile-time multiple of 8 from 24 to 256, got "
             f"{count!r}")
    row = _row(f"nv.setmaxnreg.{how}", what)
    emit("target_op", [], [], {"name": row.name, "count": count})


def setmaxnreg_inc(count):
    """``setmaxnreg.inc``: raise this warpgroup's register budget to ``count`` per thread (a
    warp-specialized kernel gives its consumer warpgroups the registers the producers release).

    :param count: registers per thread, a multiple of 8 from 24 to 256
    :type count: int (compile-time)
    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    _setmaxnreg(count, "inc")


def setmaxnreg_dec(count):
    """``setmaxnreg.dec``: lower this warpgroup's register budget to ``count`` per thread,
    releasing the rest to the block's pool (producer warpgroups of a warp-specialized kernel).

    :param count: registers per thread, a multiple of 8 from 24 to 256
    :type count: int (compile-time)
    :targets: sm_90a; not on sm_80, sm_86, sm_89, sm_90, gfx942, gfx950
    """
    _setmaxnreg(count, "dec")
