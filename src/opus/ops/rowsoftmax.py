"""Row softmax: ``opus.ops.softmax(x)`` = exp(x - max) / sum(exp(x - max)) over the last
dimension, for f32, bf16 and f16 (computed in f32, written in x's type), any row length.

Three launch shapes, picked by the row length n, the vector width V (16 bytes of x's type:
8 for bf16/f16, 4 for f32, narrower where rows do not start 16-byte aligned) and the warp size
W (32 NVIDIA, 64 AMD), so that each thread holds at most 32 values of its row:

* ``warp``: n <= 32 W. One warp per row (4 warps per block); each lane loads its
  ceil(n / (W V)) vectors into registers, the max and the sum are ``opus.warp_reduce``
  (butterflies on NVIDIA, DPP row operations on AMD): one read, one write, no shared memory.
* ``block``: n <= B * 1024, B = 32 values per thread for 4-byte types and 16 for 2-byte ones
  (H100, 2026-11-24: bf16 rows of 4096 to 16384 ran 3-14 % faster at 16 than at 32, f32 rows
  the same within 1 %). One block per row of T = max(2 W, pow2 >= n / B) threads (at
  most 1024); the row in registers, max and sum by a warp reduction, one word per warp in
  shared memory and a second warp reduction: one read, one write.
* ``online``: longer rows. One block of 512 threads per row: one pass keeps each thread's
  running max m and the sum s of exp(x - m), rescaled by exp(m_old - m_new) when the max
  grows; the threads' (m, s) pairs combine into the row's (M, S); a second pass reads x again
  and writes exp(x - M) / S: two reads and one write (the three-pass form reads three times).

exp(x) is ``exp2(x * log2 e)``. Elements past n (ragged rows) are -inf for the max and 0 in
the sum. Special values follow torch: a row holding NaN or +inf gives NaN everywhere, a row of
only -inf gives NaN, -inf elements of other rows give 0.
"""

import math

import opus
from opus import dtypes as dt

from . import _rows

__all__ = ["softmax", "plan", "SOFTMAX"]

_LOG2E = 1.4426950408889634
_NEG_INF = float("-inf")
_VALUES_PER_THREAD = 32           # registers of the row a thread holds (warp and block shapes)
_BLOCK_VALUES = {1: 16, 2: 16}    # the block shape's, by element size where it is not 32
_MAX_BLOCK = 1024
_ONLINE_BLOCK = 512
_ONLINE_UNROLL = 4                # vectors in flight per thread in the online passes
_WARP_BLOCK_WARPS = 4
_DTYPES = ("f32", "bf16", "f16")


# -- device helpers ----------------------------------------------------------------------------

@opus.func
def _load_row(g, VEC, CHUNKS, STEP, base, n, RAGGED):
    """This thread's CHUNKS vectors of the row view ``g`` (vector c at base + c * STEP) as f32
    scalars; elements at or past n are -inf."""
    vals = []
    for c in range(CHUNKS):
        i = base + c * STEP
        v = opus.cast(g.load(i, vec=VEC), opus.f32)
        for e in range(VEC):
            x = v[e] if VEC > 1 else v
            if RAGGED:
                x = opus.select(i + e < n, x, _NEG_INF)
            vals.append(x)
    return vals


@opus.func
def _store_row(g, vals, VEC, CHUNKS, STEP, base, DT):
    for c in range(CHUNKS):
        lanes = vals[c * VEC:(c + 1) * VEC]
        v = opus.make_vector(*lanes) if VEC > 1 else lanes[0]
        g.store(opus.cast(v, DT), base + c * STEP)


@opus.func
def _tree(op, xs):
    """op over a list of values as a balanced tree (short dependency chains)."""
    while len(xs) > 1:
        pairs = [op(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        xs = pairs + xs[len(xs) - len(xs) % 2:]
    return xs[0]


@opus.func
def _add(a, b):
    return a + b


@opus.func
def _block_reduce(v, op, WARPS):
    """The block's ``op`` of v, in every thread: a warp reduction, one word per warp in shared
    memory, a reduction of those words by every warp."""
    v = opus.warp_reduce(v, op)
    if WARPS == 1:
        return v
    words = opus.alloc_smem(opus.f32, WARPS)
    if opus.lane_id() == 0:
        words[opus.warp_id()] = v
    opus.sync_threads()
    return opus.warp_reduce(words[opus.lane_id() % WARPS], op, width=WARPS)


@opus.func
def _exp_shifted(vals, m):
    """exp(x - m) for each value (exp2 of the difference times log2 e)."""
    return [opus.exp2((x - m) * _LOG2E) for x in vals]


@opus.func
def _normalize(vals, WARPS, BLOCKWIDE):
    """The softmax of the row whose values ``vals`` this thread holds."""
    if BLOCKWIDE:
        m = _block_reduce(_tree(opus.max, vals), "max", WARPS)
    else:
        m = opus.warp_reduce(_tree(opus.max, vals), "max")
    e = _exp_shifted(vals, m)
    if BLOCKWIDE:
        s = _block_reduce(_tree(_add, e), "sum", WARPS)
    else:
        s = opus.warp_reduce(_tree(_add, e), "sum")
    r = 1.0 / s
    return [v * r for v in e]


@opus.func
def _online_stats(g, n, t, VEC, RAGGED, BLOCK):
    """This thread's running max m and sum s of exp(x - m) over its vectors of the row (vector
    j at (j * BLOCK + t) * VEC, UNROLL vectors per iteration)."""
    step = BLOCK * VEC
    m = opus.f32(_NEG_INF)
    s = opus.f32(0.0)
    for i in opus.range(t * VEC, n, step * _ONLINE_UNROLL):
        vals = _load_row(g, VEC, _ONLINE_UNROLL, step, i, n, True)
        m_new = opus.max(m, _tree(opus.max, vals))
        # an all -inf prefix keeps s = 0 (shift by 0 instead of -inf: no -inf - -inf)
        shift = opus.select(m_new == _NEG_INF, 0.0, m_new)
        s = s * opus.exp2((m - shift) * _LOG2E) + _tree(_add, _exp_shifted(vals, shift))
        m = m_new
    return m, s


@opus.func
def _online_write(g, o, n, t, M, r, VEC, BLOCK, DT):
    step = BLOCK * VEC
    for i in opus.range(t * VEC, n, step * _ONLINE_UNROLL):
        vals = _load_row(g, VEC, _ONLINE_UNROLL, step, i, n, True)
        e = [v * r for v in _exp_shifted(vals, M)]
        _store_row(o, e, VEC, _ONLINE_UNROLL, step, i, DT)


def _softmax_for(DT):
    @opus.kernel
    def softmax_rows(x: opus.Ptr[DT], y: opus.Ptr[DT], rows: opus.i32, n: opus.i32,
                     x_stride: opus.i64, y_stride: opus.i64, SHAPE: opus.constexpr = "warp",
                     VEC: opus.constexpr = 8, CHUNKS: opus.constexpr = 1,
                     BLOCK: opus.constexpr = 128, RAGGED: opus.constexpr = True):
        """y[r] = softmax(x[r]) for each of ``rows`` rows of n elements (row r of x at
        r * x_stride). SHAPE "warp": one warp per row, BLOCK / warp size rows per block;
        "block": one row per block of BLOCK threads, CHUNKS vectors each in registers;
        "online": one row per block, two passes. RAGGED: n may not be a multiple of VEC (or of
        the vectors the threads hold), so elements are checked against n."""
        ws = opus.warp_size()
        WARPS = BLOCK // ws
        if SHAPE == "warp":
            row = opus.block_id_x() * WARPS + opus.warp_id()
            t, step = opus.lane_id(), ws * VEC
        else:
            row = opus.block_id_x()
            t, step = opus.thread_id_x(), BLOCK * VEC
        if row < rows:
            r64 = opus.cast(row, opus.i64)
            bound = n if RAGGED else n // VEC * VEC   # a multiple of VEC: whole-vector checks
            g = opus.make_gmem(x + r64 * x_stride, bound)
            o = opus.make_gmem(y + r64 * y_stride, bound)
            if SHAPE == "online":
                m, s = _online_stats(g, n, t, VEC, RAGGED, BLOCK)
                M = _block_reduce(m, "max", WARPS)
                # a thread that saw only -inf (or nothing) adds 0, not 0 * exp(-inf - M)
                part = opus.select(m == _NEG_INF, 0.0, s * opus.exp2((m - M) * _LOG2E))
                S = _block_reduce(part, "sum", WARPS)
                _online_write(g, o, n, t, M, 1.0 / S, VEC, BLOCK, DT)
            else:
                vals = _load_row(g, VEC, CHUNKS, step, t * VEC, n, RAGGED)
                _store_row(o, _normalize(vals, WARPS, SHAPE == "block"), VEC, CHUNKS, step,
                           t * VEC, DT)
    return softmax_rows


SOFTMAX = {d: _softmax_for(d) for d in (dt.f32, dt.bf16, dt.f16)}


# -- the launch-shape rule ---------------------------------------------------------------------

def _pow2_at_least(v):
    return 1 << max(0, math.ceil(math.log2(max(v, 1))))


def plan(n, vec, warp_size, itemsize=4):
    """(SHAPE, CHUNKS, BLOCK threads) for rows of n elements of ``itemsize`` bytes read ``vec``
    at a time on a chip with ``warp_size`` lanes (the module docstring states the rule)."""
    per_thread = max(1, _VALUES_PER_THREAD // vec)        # vectors a thread holds
    if n <= warp_size * vec * per_thread:
        return "warp", max(1, -(-n // (warp_size * vec))), _WARP_BLOCK_WARPS * warp_size
    per_thread = max(1, _BLOCK_VALUES.get(itemsize, _VALUES_PER_THREAD) // vec)
    if n <= _MAX_BLOCK * vec * per_thread:
        block = min(_MAX_BLOCK, max(2 * warp_size, _pow2_at_least(-(-n // (vec * per_thread)))))
        return "block", -(-n // (block * vec)), block
    return "online", _ONLINE_UNROLL, _ONLINE_BLOCK


# -- host side ---------------------------------------------------------------------------------

def softmax(x, dim=-1, *, out=None):
    """Softmax over the last dimension: ``exp(x - max) / sum(exp(x - max))`` per row, computed
    in f32 and written in x's type, as ``torch.softmax(x, -1)`` (NaN or +inf in a row, or a row
    of only -inf, gives NaN there).

    Torch tensors run on the GPU on the current stream (CUDA-graph safe; registered as
    ``torch.ops.opus.softmax``, so it works under ``torch.compile``); numpy arrays run in the
    interpreter as the current target.

    :param x: f32, bf16 or f16, any shape (rows: every dimension but the last)
    :param dim: the dimension normalized: only the last (-1)
    :param out: an array of x's shape and dtype to write (made when None)
    :returns: the softmax, of x's shape and dtype
    :targets: all targets
    """
    if _rows.is_torch(x) and _rows.compiling():
        # torch.compile traces only the op call; the op checks the tensors when it runs
        _rows.check_dim("softmax", x, dim)
        ops = _torch_ops()
        if out is None:
            return ops.softmax(x)
        ops.softmax_out(x, out)
        return out
    _check(x, dim, out)
    if out is None:    # x's shape and dtype, contiguous
        out = x.new_empty(x.shape) if _rows.is_torch(x) else \
            _rows.empty(x, x.shape, dt.dtype_from_name(_rows.dtype_name(x)))
    _launch(x, out)
    return out


def _check(x, dim, out):
    _rows.check_array("softmax", x, "x", _DTYPES)
    _rows.check_dim("softmax", x, dim)
    if out is not None:
        _check_out(x, out)


def _check_out(x, out):
    _rows.check_array("softmax", out, "out", _DTYPES)
    if _rows.is_torch(out) != _rows.is_torch(x):
        _rows.fail("softmax", "out must be of x's kind (both torch tensors or both numpy arrays)")
    if tuple(out.shape) != tuple(x.shape) or _rows.dtype_name(out) != _rows.dtype_name(x):
        _rows.fail("softmax", f"out must have x's shape {tuple(x.shape)} and dtype "
                              f"{_rows.dtype_name(x)}, got {tuple(out.shape)} "
                              f"{_rows.dtype_name(out)}")
    if _rows.is_torch(x) and out.device != x.device:
        _rows.fail("softmax", f"out is on {out.device}, x on {x.device}")
    if _rows.is_torch(out) and not out.is_contiguous():
        _rows.fail("softmax", "out must be contiguous")
    if not _rows.is_torch(out) and not out.flags.c_contiguous:
        _rows.fail("softmax", "out must be C-contiguous")


def _launch(x, out, shape=None):
    """Run the kernel: softmax of x's rows into out (contiguous, x's shape). ``shape``
    overrides the rule's (SHAPE, CHUNKS, BLOCK) (benchmarks/softmax_topk.py measures the
    shapes against each other)."""
    x2, y2 = _rows.as_rows(x), _rows.as_rows(out)   # out is contiguous: a view at most
    rows, n = x2.shape
    if rows == 0 or n == 0:
        return
    key = (_rows.plan_key(x2, y2), _rows.target(), shape)
    launch = _PLANS.get(key)
    if launch is None:
        launch = _PLANS[key] = _plan_launch(x2, y2, shape)
    launch(x2, y2)


_PLANS = {}   # (arrays' shapes/strides/dtypes/alignment, target, override) -> launch(x2, y2)


def _plan_launch(x2, y2, shape):
    rows, n = x2.shape
    d = dt.dtype_from_name(_rows.dtype_name(x2))
    ws = _rows.target().target.warp_size
    vec = min(_rows.vector_width(x2, 16 // d.itemsize), _rows.vector_width(y2, 16 // d.itemsize))
    shape, chunks, block = shape or plan(n, vec, ws, d.itemsize)
    covered = chunks * vec * (ws if shape == "warp" else block)
    ragged = shape == "online" or n % vec != 0 or n != covered
    grid = -(-rows // (block // ws)) if shape == "warp" else rows
    kernel = SOFTMAX[d][grid, block]
    run, full = kernel.bind_entry(x2, y2, rows, n, _rows.row_stride(x2), _rows.row_stride(y2),
                                  SHAPE=shape, VEC=vec, CHUNKS=chunks, BLOCK=block,
                                  RAGGED=ragged)
    rest = full[2:]
    if len(_PLANS) >= 256:
        _PLANS.clear()
    return lambda a, b: run(kernel, (a, b) + rest, 0, None)


_OPS = None


def _torch_ops():
    """torch.ops.opus.softmax (functional) and softmax_out (writes out), defined at first use
    with fake implementations so torch.compile traces them as opaque ops."""
    global _OPS
    if _OPS is None:
        import torch

        @torch.library.custom_op("opus::softmax", mutates_args=())
        def softmax_op(x: torch.Tensor) -> torch.Tensor:
            _check(x, -1, None)
            y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
            _launch(x, y)
            return y

        @softmax_op.register_fake
        def _(x):
            return torch.empty(x.shape, dtype=x.dtype, device=x.device)

        @torch.library.custom_op("opus::softmax_out", mutates_args=("out",))
        def softmax_out_op(x: torch.Tensor, out: torch.Tensor) -> None:
            _check(x, -1, out)
            _launch(x, out)

        @softmax_out_op.register_fake
        def _(x, out):
            return None

        class _Ops:
            softmax = softmax_op
            softmax_out = softmax_out_op
        _OPS = _Ops
    return _OPS
