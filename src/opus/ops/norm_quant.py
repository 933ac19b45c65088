"""RMSNorm and dynamic fp8 quantization (issue 14): ``opus.ops.rmsnorm``, ``rmsnorm_quant``,
``per_token_quant`` and ``per_group_quant``, written with the public language.

Row kernel (``ROW_KERNELS``; rmsnorm, rmsnorm_quant and per_token_quant are its variants):

* ``TR`` threads own one row (``RPB = max(1, 256 // TR)`` rows per block, so short rows share a
  block and a warp); thread ``l`` of a row holds vectors ``c * TR + l`` (c < NV) of ``V``
  elements: consecutive lanes read consecutive 16-byte vectors. ``row_shape`` is the rule.
* Rows are bounded views (``make_gmem(x + row * stride, H)``): the ragged tail of a row (H
  not a multiple of V) and rows past the batch read zeros and write nothing, with no
  per-element branch; the vector width is the widest the rows' alignment allows.
* Pass 1 (one read of the row, kept in registers): h = x (+ residual, rounded to the input
  type and written back to residual), the f32 sum of h^2 and, for the quantized variants, the
  largest |h * w| taken as the u32 maximum of the f32 bits with the sign cleared (so a NaN,
  whose bits are above every number's, wins: torch.amax's rule, where opus.max ignores NaN).
  Both row reductions are ``opus.warp_reduce`` (DPP row operations on AMD, butterflies or
  ``redux.sync`` on NVIDIA) and, when a row spans several warps, one exchange through shared
  memory with one barrier.
* Pass 2: y = (h * w) * rsqrt(sum / H + eps), rounded once to the output type, or quantized:
  amax = max|h * w| * rsqrt(...) (rounding is monotonic, so this is exactly the largest |y|),
  scale = amax / fp8_max, values = saturating fp8 cast of y * (fp8_max / amax).
* Rows longer than ``MAX_CACHED_BYTES`` per thread of a 1024-thread row (32768 bf16
  elements) are not kept in registers: both passes loop over the row (the second re-reads it).

Group kernel (``GROUP_KERNELS``, per_group_quant): 16 lanes own one group of 128 elements
(8 each), their amax is a 16-lane ``opus.warp_reduce`` (a DPP row on AMD), lane 0 stores the
group's scale. The group's amax compares the 16-bit inputs in place (``_abs_bits_max_16``).
"""

import sys

import opus
from opus import dtypes as dt
from opus.errors import ArgumentError
from opus.frontend.targeting import current_target
from ._rows import (is_torch as _is_torch, strides as _strides, empty as _empty,
                    compiling as _compiling)

__all__ = ["rmsnorm", "rmsnorm_quant", "per_token_quant", "per_group_quant", "row_shape",
           "ROW_KERNELS", "ROW_KERNELS_1024", "GROUP_KERNELS"]

VEC_BYTES = 16          # the widest access
QUANT_VEC_BYTES = 32    # input bytes per vector of the quantizing variants (row_config)
# Vectors in flight per thread (row_shape's target), measured on the H100 (bf16 32768 x 8192,
# 2026-11-24, 16-element vectors for the quantizing variants, rows covered exactly: FULL):
# per_token_quant 1.00x copy bandwidth at 1 or 2 per thread (4: 0.80x, rows sharing blocks);
# rmsnorm_quant 0.99x at 2 (1: 0.97x; 4: 0.44x); rmsnorm alone 1 (8-element vectors:
# 2771-2983 GB/s against 2348-2465 at 4, benchmarks/norm_quant.py --sweep). Bounded views
# (FULL false) cost rmsnorm_quant 17% here: each access is a branch to its per-element
# fallback, and the compiler does not schedule loads across them.
VECTORS_PER_THREAD = 1          # per_token_quant
QUANT_NORM_VECTORS_PER_THREAD = 2   # rmsnorm_quant
NORM_VECTORS_PER_THREAD = 1     # rmsnorm
# Bytes of input a thread of a 1024-thread row keeps in registers between the passes (16
# registers; such a block has at most 64 a thread: ROW_KERNELS_1024); longer rows loop
MAX_CACHED_BYTES = 64
MAX_ROW_THREADS = 1024
BLOCK = 256             # threads of a block of short rows, and of the group kernel
GROUP = 128             # per_group_quant's group
GROUP_LANES = 16        # lanes per group: 8 elements each
ABS_BITS = 0x7FFFFFFF   # an f32's bits without the sign


# -- kernels -----------------------------------------------------------------------------------

def _lanes(v, n):
    return [v[i] for i in range(n)] if n > 1 else [v]


@opus.func
def _abs_bits_max(v, n):
    """The largest |lane| of the f32 values ``v`` (n lanes) as u32 bits (NaN above inf)."""
    bits = opus.bitcast(v, opus.u32 if n == 1 else opus.vector_type(opus.u32, n)) & ABS_BITS
    best = None
    for b in _lanes(bits, n):
        best = b if best is None else opus.max(best, b)
    return best


@opus.func
def _abs_bits_max_16(h, n, DT):
    """_abs_bits_max of the f32 values of ``h`` (n lanes of bf16 or f16, n even) without
    widening a lane: the larger |x| of two 16-bit floats has the larger bits & 0x7FFF (NaN
    above inf), so the halves of each 32-bit word are maxed in place (one mask and one max
    per half) and only the winner is widened (bf16: its bits shifted up; f16: a cast)."""
    words = opus.bitcast(h, opus.u32 if n == 2 else opus.vector_type(opus.u32, n // 2))
    hi, lo = None, None
    for w in _lanes(words, n // 2):
        a, b = w & 0x7FFF0000, w & 0x7FFF
        hi = a if hi is None else opus.max(hi, a)
        lo = b if lo is None else opus.max(lo, b)
    top = opus.max(hi >> 16, lo)
    if DT == dt.bf16:
        return top << 16
    wide = opus.cast(opus.bitcast(opus.cast(top, opus.u16), opus.f16), opus.f32)
    return opus.bitcast(wide, opus.u32)


@opus.func
def _row_reduce(parts, TR):
    """Each (value, op, dtype) of ``parts`` reduced by op over the TR threads of its row: warp
    reductions, then (rows of several warps) one exchange through shared memory with one
    barrier for all of them. Every thread gets the results, in order."""
    ws = opus.warp_size()
    if TR <= ws:
        return [opus.warp_reduce(x, op, width=TR) for x, op, _ in parts]
    W = TR // ws
    warp, lane = opus.warp_id(), opus.lane_id()
    slots = []
    for x, op, dtype in parts:
        slot = opus.alloc_smem(dtype, max(BLOCK, TR) // ws)   # one per warp of the block
        x = opus.warp_reduce(x, op)
        if lane == 0:
            slot[warp] = x
        slots.append(slot)
    opus.sync_threads()
    mine = (warp // W) * W + lane % W           # the row's warps' partials, W lanes apart
    return [opus.warp_reduce(slot[mine], op, width=W) for slot, (_, op, _) in zip(slots, parts)]


class _Row:
    """A tensor's view for the calling thread's row: ``view`` (bounded), ``base`` (the row's
    first element in it) and ``live`` (None, or the run-time test that a vector lies in the
    row: views shared by several rows)."""

    def __init__(self, view, base, live):
        self.view, self.base, self.live = view, base, live

    def load(self, col, V):
        """V lanes at col, in accesses of at most VEC_BYTES (each bounded on its own)."""
        step = _access_lanes(self.view, V)
        parts = [self._load(col + j, step) for j in range(0, V, step)]
        return parts[0] if len(parts) == 1 else opus.concat(*parts)

    def _load(self, col, V):
        if self.live is None:
            return self.view.load(self.base + col, vec=V)
        return self.view.load_if(self.live(col), self.base + col, vec=V)

    def store(self, v, col, V):
        step = _access_lanes(self.view, V)
        for j in range(0, V, step):
            part = v if step == V else (v[j] if step == 1 else v[j:j + step])
            if self.live is None:
                self.view.store(part, self.base + col + j, vec=step)
            else:
                self.view.store_if(self.live(col + j), part, self.base + col + j, vec=step)


def _access_lanes(view, V):
    """Lanes of one access of a V-lane vector of view's type: at most VEC_BYTES."""
    return min(V, max(1, VEC_BYTES * 8 // view.dtype.bits))


def _view(p, H, FULL):
    """The global view at p: bounded by H, or unbounded where the launch keeps every access
    in range (FULL: no per-access bound check)."""
    return opus.make_gmem(p) if FULL else opus.make_gmem(p, H)


@opus.func
def _rows_of(p, stride, rows, H, TR, FULL):
    """p's _Row for the calling thread. One row per block (TR >= BLOCK): the row's own view,
    bounded by H (vectors may straddle its end), or unbounded where the launch covers the row
    exactly (FULL: no bound to check, so no per-access branch). Several rows per block: one
    view over the block's rows, so its address and bound are the same in every lane (AMD: a
    wave-uniform buffer resource), and a per-vector test (H is then a multiple of V: no
    straddling)."""
    if TR >= BLOCK:
        return _Row(_view(p + opus.i64(opus.block_id_x()) * stride, H, FULL), 0, None)
    RPB = BLOCK // TR
    first = opus.block_id_x() * RPB
    r = opus.thread_id_x() // TR
    count = opus.min(rows - first, RPB)
    view = opus.make_gmem(p + opus.i64(first) * stride, (count - 1) * stride + H)
    return _Row(view, r * stride, lambda col: (col < H) & (r < count))


@opus.func
def _load_h(x, res, col, V, RESIDUAL, DT):
    """The row's h at ``col`` (V lanes, input type): x, or x + residual rounded to the input
    type and written back to the residual."""
    h = x.load(col, V)
    if RESIDUAL:
        h = opus.cast(opus.cast(h, opus.f32) + opus.cast(res.load(col, V), opus.f32), DT)
        res.store(h, col, V)
    return h


@opus.func
def _stats(h, w, V, NORM, QUANT, ssq, pm, DT):
    """Fold one vector into (sum of h^2 as f32 lanes, max |h * w| as u32 bits)."""
    hf = opus.cast(h, opus.f32)
    if NORM:
        ssq = hf * hf if ssq is None else opus.fma(hf, hf, ssq)
    if QUANT:
        m = _abs_bits_max(hf * opus.cast(w, opus.f32), V) if NORM else \
            _abs_bits_max_16(h, V, DT) if V % 2 == 0 else _abs_bits_max(hf, V)
        pm = m if pm is None else opus.max(pm, m)
    return ssq, pm


@opus.func
def _emit(out, h, w, col, rrms, inv, V, VO, NORM, QUANT, OUT):
    """y = (h * w) * rrms, rounded to OUT or quantized (times inv, saturated), stored."""
    y = opus.cast(h, opus.f32)
    if NORM:
        y = (y * opus.cast(w, opus.f32)) * rrms
    y = opus.cast(y * inv, OUT, sat=True) if QUANT else opus.cast(y, OUT)
    if VO == V:
        out.store(y, col, V)
    else:
        for j in range(0, V, VO):
            out.store(y[j] if VO == 1 else y[j:j + VO], col + j, VO)


@opus.func
def _sum_lanes(v, V):
    total = None
    for s in _lanes(v, V):
        total = s if total is None else total + s
    return total


def _row_kernel(DT, OUT, block=None):
    @opus.kernel(block=block)
    def rows_kernel(x: opus.Ptr[DT], w: opus.Ptr[DT], res: opus.Ptr[DT], out: opus.Ptr[OUT],
                    scales: opus.Ptr[opus.f32], rows: opus.i32, H: opus.i32, sx: opus.i32,
                    sr: opus.i32, so: opus.i32, eps: opus.f32, TR: opus.constexpr = 32,
                    V: opus.constexpr = 8, NV: opus.constexpr = 1, VO: opus.constexpr = 8,
                    CACHED: opus.constexpr = True, NORM: opus.constexpr = True,
                    RESIDUAL: opus.constexpr = False, QUANT: opus.constexpr = False,
                    QMAX: opus.constexpr = 448.0, FULL: opus.constexpr = False):
        """One row per TR threads, max(1, BLOCK // TR) rows per block (module docstring).
        Grid: ceil(rows / rows per block)."""
        lane = opus.thread_id_x() % TR
        row = opus.block_id_x() * max(1, BLOCK // TR) + opus.thread_id_x() // TR
        gx = _rows_of(x, sx, rows, H, TR, FULL)
        gr = _rows_of(res, sr, rows, H, TR, FULL)
        go = _rows_of(out, so, rows, H, TR, FULL)
        gw = _Row(_view(w, H, FULL), 0, None)
        ssq, pm = None, None
        kept = []
        if CACHED:
            # every load issued before the first use: a vector's statistics between two loads
            # would make the next load wait for it (bounded loads are branches, which the
            # compiler does not hoist loads across), one memory latency per vector
            for c in range(NV):
                col = (c * TR + lane) * V
                kept.append((_load_h(gx, gr, col, V, RESIDUAL, DT),
                             gw.load(col, V) if NORM else None))
            for h, wv in kept:
                ssq, pm = _stats(h, wv, V, NORM, QUANT, ssq, pm, DT)
        else:       # one row per block (row_shape): both passes loop over it
            ssq = opus.splat(0.0, V, opus.f32) if V > 1 else opus.f32(0.0)
            pm = opus.u32(0)
            for base in opus.range(0, H, TR * NV * V):
                got = [(_load_h(gx, gr, base + (c * TR + lane) * V, V, RESIDUAL, DT),
                        gw.load(base + (c * TR + lane) * V, V) if NORM else None)
                       for c in range(NV)]   # loads first, as above
                for h, wv in got:
                    ssq, pm = _stats(h, wv, V, NORM, QUANT, ssq, pm, DT)
        rrms, inv = 1.0, 1.0
        parts = []
        if NORM:
            parts.append((_sum_lanes(ssq, V), "sum", opus.f32))
        if QUANT:
            parts.append((pm, "max", opus.u32))
        reduced = _row_reduce(parts, TR)
        if NORM:
            rrms = opus.rsqrt(reduced[0] / opus.f32(H) + eps)
        if QUANT:
            amax = opus.bitcast(reduced[-1], opus.f32)
            if NORM:
                amax = amax * rrms
            inv = opus.select(amax == 0.0, 0.0, QMAX / amax)
            if lane == 0:
                opus.make_gmem(scales, rows)[row] = amax / QMAX
        if CACHED:
            for c in range(NV):
                h, wv = kept[c]
                _emit(go, h, wv, (c * TR + lane) * V, rrms, inv, V, VO, NORM, QUANT, OUT)
        else:
            for base in opus.range(0, H, TR * NV * V):
                cols = [base + (c * TR + lane) * V for c in range(NV)]
                got = [((gr if RESIDUAL else gx).load(col, V),
                        gw.load(col, V) if NORM else None) for col in cols]
                for (h, wv), col in zip(got, cols):
                    _emit(go, h, wv, col, rrms, inv, V, VO, NORM, QUANT, OUT)
    return rows_kernel


def _group_kernel(DT, OUT):
    @opus.kernel
    def groups_kernel(x: opus.Ptr[DT], out: opus.Ptr[OUT], scales: opus.Ptr[opus.f32],
                      H: opus.i32, gpr: opus.i32, sx: opus.i32, so: opus.i32,
                      GPB: opus.constexpr = 16, V: opus.constexpr = 8, VO: opus.constexpr = 8,
                      QMAX: opus.constexpr = 448.0, FULL: opus.constexpr = False):
        """GROUP_LANES lanes per group of GROUP elements, GPB groups of one row per block
        (block GPB * GROUP_LANES threads); gpr groups per row, ceil(gpr / GPB) blocks per row;
        scales row-major [rows, gpr]. FULL: every group whole and every block full (hidden a
        multiple of GPB * GROUP), so the views need no bound. (Two or four groups per thread,
        loaded together, were no faster on the H100: 0.91x and 0.82x copy against 0.92x.)"""
        EPL = GROUP // GROUP_LANES
        per_row = (gpr + GPB - 1) // GPB
        row = opus.block_id_x() // per_row           # the same in the whole block
        g = (opus.block_id_x() - row * per_row) * GPB + opus.thread_id_x() // GROUP_LANES
        lane = opus.thread_id_x() % GROUP_LANES
        r64 = opus.i64(row)
        gx = _view(x + r64 * sx, H, FULL)
        go = _view(out + r64 * so, H, FULL)
        col = g * GROUP + lane * EPL
        parts = [gx.load(col + j, vec=V) for j in range(0, EPL, V)]
        h = parts[0] if len(parts) == 1 else opus.concat(*parts)
        amax = opus.bitcast(opus.warp_reduce(_abs_bits_max_16(h, EPL, DT), "max",
                                             width=GROUP_LANES), opus.f32)
        inv = opus.select(amax == 0.0, 0.0, QMAX / amax)
        q = opus.cast(opus.cast(h, opus.f32) * inv, OUT, sat=True)
        for j in range(0, EPL, VO):
            go.store(q[j] if VO == 1 else q[j:j + VO], col + j, vec=VO)
        if lane == 0:
            opus.make_gmem(scales + r64 * gpr, gpr)[g] = amax / QMAX
    return groups_kernel


_KINDS = (dt.bf16, dt.f16)
_FP8 = (dt.fp8_e4m3, dt.fp8_e4m3fnuz)
_PAIRS = [(d, o) for d in _KINDS for o in _KINDS + _FP8 if o.itemsize == 1 or o is d]
ROW_KERNELS = {pair: _row_kernel(*pair) for pair in _PAIRS}
# the same kernels for 1024-thread blocks, declared so (CUDA __launch_bounds__(1024)): ptxas
# then keeps them within the 64 registers a thread such a block can have (without it, 1024-
# thread launches of the 16-element-vector forms failed on the H100: too many resources)
ROW_KERNELS_1024 = {pair: _row_kernel(*pair, block=MAX_ROW_THREADS) for pair in _PAIRS}
GROUP_KERNELS = {(d, o): _group_kernel(d, o) for d in _KINDS for o in _FP8}


# -- launch shape ------------------------------------------------------------------------------

def row_shape(hidden, vec, per_thread=VECTORS_PER_THREAD, itemsize=2):
    """(TR, NV, CACHED): threads per row, vectors per thread, whether a thread keeps its
    vectors in registers between the passes. TR is the smallest power of two (at most 1024)
    that leaves each thread at most ``per_thread`` vectors of ``vec`` elements, so short rows
    share a warp (TR < warp size: sub-warp reductions) and long rows spread over a block;
    NV covers the rest (up to MAX_CACHED_BYTES of ``itemsize``-byte elements per thread, or
    ``per_thread`` vectors), beyond that both passes loop over the row, a vector at a time."""
    nvec = max(1, -(-hidden // vec))
    tr = 1
    while tr < MAX_ROW_THREADS and tr * per_thread < nvec:
        tr *= 2
    nv = -(-nvec // tr)
    if nv <= max(per_thread, MAX_CACHED_BYTES // (vec * itemsize)):
        return tr, nv, True
    return MAX_ROW_THREADS, 1, False   # one vector a tile: 2 spilled 378 times (32-byte vectors)


# -- host side ---------------------------------------------------------------------------------

def _err(what, msg):
    raise ArgumentError(f"opus.ops.{what}: {msg}")


def _np():
    import numpy
    return numpy


_OPUS_OF_TORCH = {}   # torch dtype -> opus dtype (a dict lookup per call)


def _opus_dtype(x):
    """x's opus dtype, or None where opus has none."""
    if _is_torch(x):
        d = _OPUS_OF_TORCH.get(x.dtype)
        if d is None:
            from ..runtime import tensor_args as ta
            if not ta._TORCH_OF_OPUS:
                ta.init_torch()
            d = next((o for o, t in ta._TORCH_OF_OPUS.items() if t is x.dtype), None)
            if d is not None:
                _OPUS_OF_TORCH[x.dtype] = d
        return d
    return dt.dtype_of_numpy(x.dtype) if hasattr(x, "dtype") else None


def _describe_dtype(x):
    d = _opus_dtype(x)
    return d.name if d is not None else str(getattr(x, "dtype", type(x).__name__))


def _span(x):
    """The argument for a pointer parameter: a torch tensor as it is; a numpy array as the 1-D
    view of the memory from its first element to its last (the interpreter takes contiguous
    arrays; padded rows are inside the span and the kernel skips them)."""
    if _is_torch(x) or x.flags.c_contiguous:
        return x
    n = 0 if x.size == 0 else 1 + sum((e - 1) * s for e, s in zip(x.shape, _strides(x)))
    return _np().lib.stride_tricks.as_strided(x, shape=(n,), strides=(x.itemsize,))


def _address(x):
    return x.data_ptr() if _is_torch(x) else x.ctypes.data


def _fp8(what):
    """The target's e4m3 flavour: OCP e4m3 on NVIDIA and gfx950, e4m3fnuz on gfx942."""
    return current_target().target.resolve_dtype(dt.fp8)


def _check_input(what, x):
    """(rows, hidden, dtype) of the bf16/f16 matrix x, checked."""
    if not (_is_torch(x) or type(x).__module__ == "numpy"):
        _err(what, f"x must be a torch tensor (GPU) or a numpy array (interpreter), got "
                   f"{type(x).__name__}")
    if _is_torch(x) and not x.is_cuda:
        _err(what, "x must be on a CUDA/ROCm device (numpy arrays run in the interpreter)")
    if len(x.shape) != 2:
        _err(what, f"x must be a matrix (rows x hidden), got shape {tuple(x.shape)}")
    d = _opus_dtype(x)
    if d not in _KINDS:
        _err(what, f"x must be bf16 or f16, got {_describe_dtype(x)}")
    rows, hidden = x.shape
    _check_rows(what, "x", x, rows, hidden)
    return rows, hidden, d


def _check_rows(what, name, t, rows, hidden):
    if rows > 0 and hidden > 1 and _strides(t)[1] != 1:
        _err(what, f"{name}'s rows must be contiguous (last stride 1); its strides are "
                   f"{_strides(t)}")
    if rows > 0 and hidden > 0 and _strides(t)[0] < 0:
        _err(what, f"{name} must not have a negative row stride")


def _check_like(what, name, t, x, shape, dtypes, dtype_text):
    """t must be of x's kind (torch on x's device, or numpy), shape and one of dtypes."""
    if _is_torch(t) != _is_torch(x) or (not _is_torch(t) and type(t).__module__ != "numpy"):
        _err(what, f"{name} must be a {'torch tensor' if _is_torch(x) else 'numpy array'} "
                   f"like x, got {type(t).__name__}")
    if _is_torch(t) and t.device != x.device:
        _err(what, f"{name} is on {t.device}, x on {x.device}")
    if tuple(t.shape) != tuple(shape):
        _err(what, f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if _opus_dtype(t) not in dtypes:
        _err(what, f"{name} must be {dtype_text}, got {_describe_dtype(t)}")


def _check_eps(what, eps):
    import math
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) \
            or eps < 0:
        _err(what, f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def _vec(t, rows, most):
    """The widest access (elements, <= most) the address and row stride of t allow."""
    isz = 1 if _opus_dtype(t) is None else _opus_dtype(t).itemsize
    v = most
    while v > 1 and (_address(t) % (v * isz) or (rows > 1 and (_strides(t)[0] * isz) %
                                                  (v * isz))):
        v //= 2
    return v


def _norm_args(what, x, weight, eps, residual, out, scales, quant):
    """Checks of the RMSNorm entries; (out, scales) made when None."""
    rows, hidden, d = _check_input(what, x)
    _check_like(what, "weight", weight, x, (hidden,), (d,), f"{d.name} like x")
    if hidden > 1 and _strides(weight)[0] != 1:
        _err(what, f"weight must be contiguous; its stride is {_strides(weight)[0]}")
    eps = _check_eps(what, eps)
    if residual is not None:
        _check_like(what, "residual", residual, x, (rows, hidden), (d,), f"{d.name} like x")
        _check_rows(what, "residual", residual, rows, hidden)
    od = _fp8(what) if quant else d
    if out is None:
        out = _empty(x, (rows, hidden), od)
    _check_like(what, "out", out, x, (rows, hidden), (od,),
                od.name + (" (the target's e4m3 fp8)" if quant else " like x"))
    _check_rows(what, "out", out, rows, hidden)
    if quant:
        scales = _check_scales(what, x, scales, (rows,))
    return eps, out, scales


def _check_scales(what, x, scales, shape):
    if scales is None:
        return _empty(x, shape, dt.f32)
    _check_like(what, "scales", scales, x, shape, (dt.f32,), "f32")
    want = (shape[1], 1) if len(shape) == 2 else (1,)
    if any(n > 1 and s != w for n, s, w in zip(shape, _strides(scales), want)):
        _err(what, f"scales must be contiguous; its strides are {_strides(scales)}")
    return scales


# (kind, shapes, strides, dtypes, alignments, target) -> (launcher, constexprs); the arguments
# are passed at each call, so a plan holds no addresses
_PLANS = {}


def _plan(key, make):
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 512:
            _PLANS.clear()
        plan = _PLANS[key] = make()
    return plan


def row_config(x, weight, residual, out, norm, shape=None):
    """(grid, block, constexprs) of the row kernel for these arrays: the vector width V is the
    widest every row of x, residual and (norm) the weight allow (VO: out's), then
    row_shape(hidden, V) (or ``shape``, an explicit (TR, NV, CACHED)); rows sharing a block
    take a V that divides hidden (their shared view has no per-row bound)."""
    rows, hidden = x.shape
    d, od = _opus_dtype(x), _opus_dtype(out)
    # quantizing: 32-byte input vectors (two 16-byte loads), so that a vector's fp8 values
    # leave in one 16-byte store (8-byte stores held per-token quantization at 0.82x copy)
    most = (QUANT_VEC_BYTES if od.itemsize == 1 else VEC_BYTES) // d.itemsize
    res = residual if residual is not None else x
    v = min([_vec(x, rows, most), _vec(res, rows, most)] +
            ([_vec(weight, 1, most)] if norm else []))
    per_thread = NORM_VECTORS_PER_THREAD if od.itemsize > 1 else \
        QUANT_NORM_VECTORS_PER_THREAD if norm else VECTORS_PER_THREAD
    tr, nv, cached = shape or row_shape(hidden, v, per_thread)
    if tr < BLOCK and hidden % v:
        v = _pow2_dividing(hidden, v)
        tr, nv, cached = shape or row_shape(hidden, v, per_thread)
    if cached and tr * nv * v < hidden:
        raise ValueError(f"launch shape {(tr, nv, cached)} covers {tr * nv * v} of the "
                         f"{hidden} elements of a row ({v} per vector)")
    rpb = max(1, BLOCK // tr)
    qmax = float(opus.finfo(od).max) if od.itemsize == 1 else 448.0
    return -(-rows // rpb), tr * rpb, dict(
        TR=tr, V=v, NV=nv, VO=min(v, _vec(out, rows, most)), CACHED=cached, NORM=norm,
        RESIDUAL=residual is not None, QUANT=od.itemsize == 1, QMAX=qmax,
        FULL=cached and tr >= BLOCK and tr * nv * v == hidden)


def _launch_rows(x, weight, residual, out, scales, eps, norm, shape=None):
    """Launch the row kernel (arguments checked): rmsnorm (norm, out of x's type),
    rmsnorm_quant (norm, fp8 out) or per_token_quant (fp8 out, weight unused). ``shape``
    (TR, NV, CACHED) replaces row_shape's choice (tests, the benchmark's sweep)."""
    rows, hidden = x.shape
    if rows == 0:
        return
    if hidden == 0:
        if scales is not None:
            scales[...] = 0
        return
    res = residual if residual is not None else x
    args = (_span(x), _span(weight if norm else x), _span(res), _span(out),
            scales if scales is not None else _dummy(x), rows, hidden, _row_stride(x),
            _row_stride(res), _row_stride(out), eps)
    # the plan depends on the arrays' row strides (in args) and addresses modulo 64 bytes
    # (the vector widths), not on the addresses
    key = ("rows", rows, hidden, _opus_dtype(x), _opus_dtype(out), args[7:10],
           _address(x) & 63, _address(res) & 63, _address(weight) & 63, _address(out) & 63,
           norm, residual is not None, shape, current_target())

    def make():
        grid, block, cx = row_config(x, weight, residual, out, norm, shape)
        kernels = ROW_KERNELS_1024 if block == MAX_ROW_THREADS else ROW_KERNELS
        return _bound(kernels[(_opus_dtype(x), _opus_dtype(out))][grid, block], cx, *args)
    _plan(key, make)(*args)


def _bound(launcher, constexprs, *args):
    """launch(*args): the launcher's entry for these constexpr values (looked up once: its run
    is called with the run-time arguments and the constexprs' place kept)."""
    run, full = launcher.bind_entry(*args, **constexprs)
    rest = full[len(args):]
    return lambda *a: run(launcher, a + rest, 0, None)


def _pow2_dividing(n, most):
    v = most
    while n % v:
        v //= 2
    return v


def _row_stride(t):
    """The elements between rows (0 for one row, where it is unused)."""
    return _strides(t)[0] if t.shape[0] > 1 else 0


def group_shape(groups_per_row):
    """Groups of one row per block of the group kernel: 16, 8 or 4 (blocks of 256, 128 or 64
    threads), the one that leaves the fewest idle groups in a row's last block (ties: the
    larger)."""
    return min((16, 8, 4), key=lambda g: -(-groups_per_row // g) * g - groups_per_row)


def _launch_groups(x, out, scales):
    rows, hidden = x.shape
    if rows == 0 or hidden == 0:
        return
    d, od = _opus_dtype(x), _opus_dtype(out)
    gpr = -(-hidden // GROUP)
    args = (_span(x), _span(out), scales, hidden, gpr, _row_stride(x), _row_stride(out))
    key = ("groups", rows, hidden, d, od, args[5:7], _address(x) & 63, _address(out) & 63,
           current_target())

    def make():
        most = GROUP // GROUP_LANES
        v = _vec(x, rows, most)
        gpb = group_shape(gpr)
        launch = GROUP_KERNELS[(d, od)][rows * -(-gpr // gpb), gpb * GROUP_LANES]
        return _bound(launch, dict(GPB=gpb, V=v, VO=min(v, _vec(out, rows, most)),
                                   FULL=hidden % (gpb * GROUP) == 0,
                                   QMAX=float(opus.finfo(od).max)), *args)
    _plan(key, make)(*args)


_DUMMIES = {}


def _dummy(x):
    """A one-element f32 array on x's device (the scales pointer of an unquantized launch)."""
    dev = str(x.device) if _is_torch(x) else "host"
    if dev not in _DUMMIES:
        _DUMMIES[dev] = _empty(x, (1,), dt.f32)
    return _DUMMIES[dev]


def _quant_args(what, x, out, scales, group):
    """Checks of the quantization entries; (out, scales) made when None."""
    rows, hidden, d = _check_input(what, x)
    scale_shape = (rows, -(-hidden // group)) if group else (rows,)
    od = _fp8(what)
    if out is None:
        out = _empty(x, (rows, hidden), od)
    _check_like(what, "out", out, x, (rows, hidden), (od,), od.name + " (the target's e4m3 fp8)")
    _check_rows(what, "out", out, rows, hidden)
    return out, _check_scales(what, x, scales, scale_shape)


# -- implementations ---------------------------------------------------------------------------
# One per operation, shared by numpy calls (the interpreter), the torch operators' CUDA
# kernels and their fake versions (launch=False: checks and output allocation only, for
# torch.compile's tracing).

def _rmsnorm_impl(x, weight, eps, residual, out, scales, quant, launch=True):
    what = "rmsnorm_quant" if quant else "rmsnorm"
    eps, out, scales = _norm_args(what, x, weight, eps, residual, out, scales, quant)
    if launch:
        _launch_rows(x, weight, residual, out, scales, eps, True)
    return out, scales


def _quant_impl(x, out, scales, group, launch=True):
    what = "per_group_quant" if group else "per_token_quant"
    out, scales = _quant_args(what, x, out, scales, group)
    if launch and group:
        _launch_groups(x, out, scales)
    elif launch:
        _launch_rows(x, x, None, out, scales, 0.0, False)
    return out, scales


# -- torch.library -----------------------------------------------------------------------------
# torch.ops.opus.<name>: the functional forms return new tensors (residual, when given, is
# updated in place: it is declared mutated); the *_into forms write given outputs and return
# nothing. torch.compile keeps them opaque, functionalizes the mutations, and traces shapes
# through the fake versions.

_TORCH_LIB = []   # the Library must live as long as its operators

_OPS = {
    "rmsnorm": ("(Tensor x, Tensor weight, float eps, Tensor(a!)? residual) -> Tensor",
                lambda launch: lambda x, w, eps, r: _rmsnorm_impl(x, w, eps, r, None, None,
                                                                  False, launch)[0]),
    "rmsnorm_quant": ("(Tensor x, Tensor weight, float eps, Tensor(a!)? residual) -> "
                      "(Tensor, Tensor)",
                      lambda launch: lambda x, w, eps, r: _rmsnorm_impl(x, w, eps, r, None, None,
                                                                        True, launch)),
    "rmsnorm_into": ("(Tensor x, Tensor weight, float eps, Tensor(a!)? residual, "
                     "Tensor(b!) out, Tensor(c!)? scales) -> ()",
                     lambda launch: lambda x, w, eps, r, o, s: _none(
                         _rmsnorm_impl(x, w, eps, r, o, s, s is not None, launch))),
    "per_token_quant": ("(Tensor x) -> (Tensor, Tensor)",
                        lambda launch: lambda x: _quant_impl(x, None, None, 0, launch)),
    "per_group_quant": ("(Tensor x) -> (Tensor, Tensor)",
                        lambda launch: lambda x: _quant_impl(x, None, None, GROUP, launch)),
    "quant_into": ("(Tensor x, Tensor(a!) out, Tensor(b!) scales, int group) -> ()",
                   lambda launch: lambda x, o, s, g: _none(_quant_impl(x, o, s, g, launch))),
}


def _none(_):
    return None


def _define_torch_ops():
    """Define torch.ops.opus.<name> for each entry of _OPS: the CUDA kernel (also ROCm's) and
    the fake implementation."""
    import torch
    if _TORCH_LIB:
        return
    lib = torch.library.Library("opus", "FRAGMENT")
    register_fake = getattr(torch.library, "register_fake", None) or torch.library.impl_abstract
    for name, (schema, impl) in _OPS.items():
        lib.define(name + schema)
        lib.impl(name, impl(True), "CUDA")
        register_fake(f"opus::{name}", impl(False), lib=lib)
    _TORCH_LIB.append(lib)


def _torch_op(name):
    import torch
    if not _TORCH_LIB:      # torch came after opus.ops: define them now, outside dynamo
        torch.compiler.disable(_define_torch_ops)()
    return getattr(torch.ops.opus, name)


# -- the operations ----------------------------------------------------------------------------

def rmsnorm(x, weight, eps=1e-6, *, residual=None, out=None):
    """RMSNorm of each row: ``out = x * rsqrt(mean(x^2) + eps) * weight``, in f32, rounded
    once to x's type (exactly: ``(x * w) * rsqrt(sum(x^2) / hidden + eps)``). With
    ``residual``, x + residual (rounded to x's type) is first written back to ``residual``
    and normalized (vLLM's / aiter's fused_add_rms_norm: afterwards ``residual`` holds the
    sum and ``out`` its RMSNorm). Torch tensors run on the GPU (current stream, CUDA-graph
    safe; ``torch.ops.opus.rmsnorm`` / ``rmsnorm_into`` for torch.compile); numpy arrays in
    the interpreter as the current target.

    :param x: rows x hidden, bf16 or f16, contiguous rows (any row stride)
    :param weight: hidden, x's dtype, contiguous
    :param eps: added to the mean square, a finite number >= 0
    :param residual: rows x hidden of x's dtype, updated in place (or None)
    :param out: rows x hidden of x's dtype (made when None; may be x itself)
    :returns: out
    :targets: all targets
    """
    if not _is_torch(x) or not _compiling():   # eager: no dispatcher between call and launch
        return _rmsnorm_impl(x, weight, eps, residual, out, None, False)[0]
    eps = _check_eps("rmsnorm", eps)
    if out is None:
        return _torch_op("rmsnorm")(x, weight, eps, residual)
    _torch_op("rmsnorm_into")(x, weight, eps, residual, out, None)
    return out


def rmsnorm_quant(x, weight, eps=1e-6, *, residual=None, out=None, scales=None):
    """RMSNorm (as ``rmsnorm``, residual included) fused with per-token dynamic fp8
    quantization of its f32 result y: ``scales[r] = amax_r / fp8_max`` (amax_r = max |y| of
    row r) and ``out = fp8(y * (fp8_max / amax_r))`` saturated (fp8: the target's e4m3
    flavour, OCP e4m3 with max 448 on NVIDIA and gfx950, e4m3fnuz with max 240 on gfx942).
    A zero row gets scale 0 and zeros; a NaN or infinity in a row makes its scale and values
    NaN (docs/ops.md).

    :param x: rows x hidden, bf16 or f16, contiguous rows
    :param weight: hidden, x's dtype
    :param eps: added to the mean square
    :param residual: rows x hidden of x's dtype, updated in place to x + residual (or None)
    :param out: rows x hidden fp8 (made when None)
    :param scales: rows f32 (made when None)
    :returns: (out, scales)
    :targets: all targets
    """
    if not _is_torch(x) or not _compiling():   # eager: no dispatcher between call and launch
        return _rmsnorm_impl(x, weight, eps, residual, out, scales, True)
    # torch.compile: only torch operations here; the op checks its arguments when it runs
    eps = _check_eps("rmsnorm_quant", eps)
    if out is None or scales is None:
        return _fill(_torch_op("rmsnorm_quant")(x, weight, eps, residual), out, scales)
    _torch_op("rmsnorm_into")(x, weight, eps, residual, out, scales)
    return out, scales


def per_token_quant(x, *, out=None, scales=None):
    """Per-token (per-row) dynamic fp8 quantization: ``scales[r] = max|x[r]| / fp8_max``,
    ``out = fp8(x * (fp8_max / max|x[r]|))`` saturated (rules as ``rmsnorm_quant``).

    :param x: rows x hidden, bf16 or f16, contiguous rows
    :param out: rows x hidden fp8, the target's e4m3 flavour (made when None)
    :param scales: rows f32 (made when None)
    :returns: (out, scales)
    :targets: all targets
    """
    return _quant(x, out, scales, 0, "per_token_quant")


def per_group_quant(x, *, out=None, scales=None):
    """Per-group dynamic fp8 quantization, groups of 128 consecutive elements of a row (the
    last one shorter where hidden is not a multiple of 128): ``scales[r, g] = amax / fp8_max``
    of group g of row r, row-major ``rows x ceil(hidden / 128)``; values as ``per_token_quant``.

    :param x: rows x hidden, bf16 or f16, contiguous rows
    :param out: rows x hidden fp8, the target's e4m3 flavour (made when None)
    :param scales: rows x ceil(hidden / 128) f32, row-major (made when None)
    :returns: (out, scales)
    :targets: all targets
    """
    return _quant(x, out, scales, GROUP, "per_group_quant")


def _quant(x, out, scales, group, name):
    if not _is_torch(x) or not _compiling():   # eager: no dispatcher between call and launch
        return _quant_impl(x, out, scales, group)
    # torch.compile: only torch operations here; the op checks its arguments when it runs
    if out is None or scales is None:
        return _fill(_torch_op(name)(x), out, scales)
    _torch_op("quant_into")(x, out, scales, group)
    return out, scales


def _fill(results, out, scales):
    """(out, scales): the given ones, filled with ``results`` (a functional op's), or the
    results where none was given (under torch.compile, when only one of them is)."""
    q, s = results
    if out is not None:
        out.copy_(q)
        q = out
    if scales is not None:
        scales.copy_(s)
        s = scales
    return q, s


if "torch" in sys.modules:    # defined with the module, so a first call inside torch.compile
    _define_torch_ops()         # (fullgraph) finds them
