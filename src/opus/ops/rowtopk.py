"""Per-row top-k: ``values, indices = opus.ops.topk(x, k)`` over the last dimension, k up to
128, for f32, bf16 and f16; values in x's type, indices int64 (as torch.topk), sorted
(largest first, or smallest first with ``largest=False``).

Order. Each element becomes a 64-bit composite: its value's 32-bit order key (the f32 bits,
sign-flipped so that unsigned order is float order; every NaN the largest key, as torch counts
NaN; inverted for ``largest=False``) above ``0xFFFFFFFF - index``. Composites are distinct, so
the order is total: larger values first, and among equal values the lower index first. The
values returned equal torch's (as multisets, NaN included); the indices of equal values may
differ from torch's, which does not define them. -0.0 ranks below +0.0 (as in torch's radix
select).

Algorithm, all in registers but the cross-warp step: a warp keeps a sorted list of its best
K = max(k rounded up to a power of two, W) composites (W lanes, R = K / W per lane, position
lane * R + i). It streams its elements in chunks of R per lane (16-byte loads; a group of
2 V per lane is read at once); a chunk holding no composite above the list's k-th (one vote) is
skipped; otherwise the chunk is sorted by a bitonic network of ``opus.shfl_xor`` steps (within
a lane for strides below R), reversed against the list (lane ^ (W-1)), the elementwise max
taken (a bitonic sequence holding the K best of both) and that merged by log2 K more steps.
The warps of a block then merge their lists pairwise through shared memory (log2 warps
levels), and the first k positions are written: indices from the composites,
values gathered from x (NaN payloads and -0.0 kept).

Launch shapes: rows of up to 4096 elements, or enough rows to give every SM 16 warps: one
warp per row (4 rows per block). Otherwise (long rows, few rows) each row is cut into S slices
of 8 warps each (S such that rows * S * 8 warps fill the SMs, each warp keeping >= 2048
elements), every slice writes its sorted K composites to a workspace, and a second launch of
the same kernel merges each row's S * K composites with one warp per row.
"""

import opus
from opus import dtypes as dt

from . import _rows

__all__ = ["topk", "plan", "TOPK"]

_DTYPES = ("f32", "bf16", "f16")
_MAX_K = 128
_WARP_ROW_MAX = 4096          # rows up to this many elements get one warp each
_SLICE_WARPS = 8              # warps cooperating on one slice of a long row
_MIN_PER_WARP = 2048          # elements each warp of a split row keeps at least
_WARPS_PER_SM = 32


# -- composites --------------------------------------------------------------------------------

@opus.func
def _order_key(x, LARGEST):
    """The u32 order key of f32 x: unsigned order = float order, NaN largest (inverted for
    the smallest first)."""
    b = opus.bitcast(x, opus.u32)
    flip = opus.select((b >> 31) != opus.u32(0), opus.u32(0xFFFFFFFF), opus.u32(0x80000000))
    key = opus.select(x != x, opus.u32(0xFFFFFFFF), b ^ flip)
    if not LARGEST:
        key = ~key
    return key


@opus.func
def _composite(x, idx, LARGEST):
    """(order key << 32) | (0xFFFFFFFF - idx) as a u64 (idx a u32 index in the row)."""
    hi = opus.cast(_order_key(opus.cast(x, opus.f32), LARGEST), opus.u64) << 32
    return hi | opus.cast(opus.u32(0xFFFFFFFF) - idx, opus.u64)


@opus.func
def _index_of(c):
    return opus.u32(0xFFFFFFFF) - opus.cast(c & opus.u64(0xFFFFFFFF), opus.u32)


# -- the distributed bitonic network (R values per lane, position lane * R + i) ----------------

@opus.func
def _cas(vals, stride, size, R):
    """One compare-exchange step of a bitonic network over the warp's W * R values: positions
    p and p ^ stride, the larger first in blocks of ``size`` whose bit ``size`` of p is 0
    (descending) and last in the others; ``size`` = 0 sorts every block descending."""
    lane = opus.lane_id()
    out = list(vals)
    if stride < R:                            # both in this lane
        for i in range(R):
            j = i ^ stride
            if j > i:
                a, b = vals[i], vals[j]
                hi, lo = opus.max(a, b), opus.min(a, b)
                if size == 0 or size < R:
                    desc = size == 0 or (i & size) == 0
                    out[i], out[j] = (hi, lo) if desc else (lo, hi)
                else:
                    desc = (lane & (size // R)) == 0
                    out[i] = opus.select(desc, hi, lo)
                    out[j] = opus.select(desc, lo, hi)
        return out
    m = stride // R                           # the partner lane's distance
    lower = (lane & m) == 0
    if size == 0:
        keep_max = lower
    else:
        keep_max = lower == ((lane & (size // R)) == 0)
    for i in range(R):
        other = opus.shfl_xor(vals[i], m)
        out[i] = opus.select(keep_max, opus.max(vals[i], other), opus.min(vals[i], other))
    return out


@opus.func
def _sort_desc(vals, K, R):
    size = 2
    while size <= K:
        stride = size // 2
        while stride >= 1:
            vals = _cas(vals, stride, 0 if size == K else size, R)
            stride //= 2
        size *= 2
    return vals


@opus.func
def _merge_bitonic(vals, K, R):
    """A bitonic sequence of K values sorted descending."""
    stride = K // 2
    while stride >= 1:
        vals = _cas(vals, stride, 0, R)
        stride //= 2
    return vals


@opus.func
def _merge_sorted(best, other_reversed, K, R):
    """The K largest of two descending lists, the second given reversed (ascending)."""
    both = [opus.max(best[i], other_reversed[i]) for i in range(R)]
    return _merge_bitonic(both, K, R)


@opus.func
def _insert_chunk(best, chunk, K, R):
    """``best`` (descending) with the K largest of best and chunk."""
    s = _sort_desc(chunk, K, R)
    ws = opus.warp_size()
    rev = [opus.shfl_xor(s[R - 1 - i], ws - 1) for i in range(R)]
    return _merge_sorted(best, rev, K, R)


@opus.func
def _kth(best, k, R):
    """The composite at position k - 1 of the list, in every lane."""
    return opus.shfl(best[(k - 1) % R], (k - 1) // R)


# -- the kernel --------------------------------------------------------------------------------

def _topk_for(DT):
    @opus.kernel
    def topk_rows(x: opus.Ptr[DT], cand: opus.Ptr[opus.u64], vals: opus.Ptr[DT],
                  inds: opus.Ptr[opus.i64], part: opus.Ptr[opus.u64], rows: opus.i32,
                  n: opus.i32, x_stride: opus.i64, k: opus.i32, slice_len: opus.i32,
                  K: opus.constexpr = 32, KOUT: opus.constexpr = 8,
                  WPR: opus.constexpr = 1, BLOCK: opus.constexpr = 128,
                  VEC: opus.constexpr = 4, LOADS: opus.constexpr = 2,
                  COMPOSITES: opus.constexpr = False, PARTIAL: opus.constexpr = False,
                  LARGEST: opus.constexpr = True):
        """The KOUT best of each row (or slice). Input: x's rows (row r at r * x_stride), or
        with COMPOSITES the rows of n u64 composites in ``cand`` (a first pass's slices).
        Output: values and int64 indices (k-major rows of KOUT), or with PARTIAL each slice's
        K composites into ``part``. WPR warps per row slice (1: BLOCK / warp size rows per
        block); grid x: row blocks, grid y: slices of slice_len elements."""
        ws = opus.warp_size()
        R = K // ws
        NL = max(LOADS, R // VEC)             # loads per group: at least one chunk of R
        L = VEC * NL                          # elements per lane per group
        wid, lane = opus.warp_id(), opus.lane_id()
        if WPR == 1:
            row = opus.block_id_x() * (BLOCK // ws) + wid
            w = 0
        else:
            row = opus.block_id_x()
            w = wid
        start = opus.block_id_y() * slice_len
        end = opus.min(start + slice_len, n)
        r64 = opus.cast(opus.min(row, rows - 1), opus.i64)
        if COMPOSITES:
            g = opus.make_gmem(cand + r64 * n, n)
        else:
            g = opus.make_gmem(x + r64 * x_stride, n)
        best = [opus.u64(0)] * R
        thr = opus.u64(0)
        group = ws * L
        live = row < rows
        first = opus.select(live, start + w * group, end)
        for base in opus.range(first, end, WPR * group):
            cs = []
            for ld in range(NL):
                off = base + (ld * ws + lane) * VEC
                v = g.load(off, vec=VEC)
                for el in range(VEC):
                    idx = off + el
                    e = v[el] if VEC > 1 else v
                    if COMPOSITES:
                        c = e
                    else:
                        c = _composite(e, opus.cast(idx, opus.u32), LARGEST)
                    cs.append(opus.select(idx < end, c, opus.u64(0)))
            for sub in range(L // R):
                chunk = cs[sub * R:(sub + 1) * R]
                above = chunk[0] > thr
                for i in range(1, R):
                    above = above | (chunk[i] > thr)
                if opus.any_lanes(above):
                    best = _insert_chunk(best, chunk, K, R)
                    thr = _kth(best, KOUT, R)
        if WPR > 1:
            lists = opus.alloc_smem(opus.u64, WPR * K)
            for i in range(R):
                lists[wid * K + lane * R + i] = best[i]
            opus.sync_threads()
            h = 1
            while h < WPR:
                if wid % (2 * h) == 0:
                    other = []
                    for i in range(R):
                        other.append(lists[(wid + h) * K + K - 1 - (lane * R + i)])
                    best = _merge_sorted(best, other, K, R)
                    for i in range(R):
                        lists[wid * K + lane * R + i] = best[i]
                opus.sync_threads()
                h *= 2
        if live and w == 0:
            for i in range(R):
                p = lane * R + i
                if PARTIAL:
                    slot = (r64 * opus.num_blocks_y() + opus.block_id_y()) * K + p
                    part[slot] = best[i]
                else:
                    if p < KOUT:
                        j = _index_of(best[i])
                        xi = opus.cast(j, opus.i64)
                        vals[r64 * KOUT + p] = x[r64 * x_stride + xi]
                        inds[r64 * KOUT + p] = xi
    return topk_rows


TOPK = {d: _topk_for(d) for d in (dt.f32, dt.bf16, dt.f16)}


# -- the launch-shape rule ---------------------------------------------------------------------

def list_size(k, warp_size):
    """K: the warp's list, k rounded up to a power of two, at least one value per lane."""
    K = warp_size
    while K < k:
        K *= 2
    return K


def plan(rows, n, sms, warp_size):
    """(warps per slice, slices) for ``rows`` rows of n elements on ``sms`` multiprocessors
    (the module docstring states the rule): one warp per row where rows are short or give
    every SM 16 warps, else slices of 8 warps, enough of them to give every SM 32 warps."""
    want = sms * _WARPS_PER_SM
    if n <= _WARP_ROW_MAX or 2 * rows >= want:
        return 1, 1
    per_row = -(-want // rows)                               # warps each row should get
    most = max(1, n // _MIN_PER_WARP)                        # warps the row can keep busy
    warps = min(per_row, most)
    if warps <= 1:
        return 1, 1
    wpr = min(_SLICE_WARPS, 1 << (warps.bit_length() - 1))
    return wpr, max(1, -(-warps // wpr))


# -- host side ---------------------------------------------------------------------------------

def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (or smallest) elements of each row of x along the last dimension, as
    ``torch.topk``: ``(values, indices)``, values in x's type, indices int64, each row sorted
    largest first (smallest first with ``largest=False``). NaN counts as the largest value.
    Among equal values the lower index comes first (torch leaves that order undefined: the
    values always equal torch's, the indices of tied values may differ).

    Torch tensors run on the GPU on the current stream (CUDA-graph safe; registered as
    ``torch.ops.opus.topk`` for torch.compile); numpy arrays run in the interpreter as the
    current target.

    :param x: f32, bf16 or f16, any shape with a last dimension of n >= k elements
    :param k: how many, 0 <= k <= min(n, 128)
    :param dim: only the last dimension (-1)
    :param largest: the largest (True) or the smallest (False)
    :param sorted: must be True (the kernel always sorts)
    :returns: (values, indices), each of x's shape with the last dimension k
    :targets: all targets
    """
    compiling = _rows.is_torch(x) and _rows.compiling()
    if not compiling:     # (under torch.compile the op checks the tensor when it runs)
        _rows.check_array("topk", x, "x", _DTYPES)
    _rows.check_dim("topk", x, dim)
    n = x.shape[-1]
    if type(k) is not int or isinstance(k, bool):
        _rows.fail("topk", f"k must be an int, got {type(k).__name__} {k!r}")
    if not 0 <= k <= min(n, _MAX_K):
        _rows.fail("topk", f"k={k} is out of range: 0 <= k <= min(n, {_MAX_K}) with rows of "
                           f"n = {n} elements")
    if type(largest) is not bool:
        _rows.fail("topk", f"largest must be a bool, got {largest!r}")
    if sorted is not True:
        _rows.fail("topk", "sorted=False is not offered: the results are always sorted")
    if compiling:
        return _torch_ops().topk(x, k, largest)
    return _run(x, k, largest)


def _run(x, k, largest):
    d = dt.dtype_from_name(_rows.dtype_name(x))
    shape = tuple(x.shape[:-1]) + (k,)
    vals, inds = _rows.empty(x, shape, d), _rows.empty(x, shape, dt.i64)
    x2 = _rows.as_rows(x)
    rows, n = x2.shape
    if rows == 0 or k == 0:
        return vals, inds
    sel = _rows.target()
    ws = sel.target.warp_size
    K = list_size(k, ws)
    wpr, slices = plan(rows, n, _rows.sm_count(x), ws)
    vec = _rows.vector_width(x2, 16 // d.itemsize)
    kern = TOPK[d]
    stride = _rows.row_stride(x2)
    v2, i2 = vals.reshape(rows, k), inds.reshape(rows, k)
    common = dict(K=K, KOUT=k, LARGEST=largest)
    if slices == 1:
        block = 4 * ws if wpr == 1 else wpr * ws
        grid = -(-rows // 4) if wpr == 1 else rows
        kern[grid, block](x2, _dummy(x), v2, i2, _dummy(x), rows, n, stride, k, n,
                          WPR=wpr, BLOCK=block, VEC=vec, **common)
        return vals, inds
    slice_len = -(-n // slices)
    part = _rows.empty(x, (rows, slices * K), dt.u64)
    kern[(rows, slices), wpr * ws](x2, _dummy(x), v2, i2, part, rows, n, stride, k,
                                   slice_len, WPR=wpr, BLOCK=wpr * ws, VEC=vec, PARTIAL=True,
                                   **common)
    m = slices * K
    kern[-(-rows // 4), 4 * ws](x2, part, v2, i2, _dummy(x), rows, m, stride, k, m,
                                WPR=1, BLOCK=4 * ws, VEC=2, COMPOSITES=True, **common)
    return vals, inds


_DUMMIES = {}


def _dummy(x):
    """A one-element u64 array on x's device: the pointer arguments a launch does not use."""
    key = str(x.device) if _rows.is_torch(x) else "host"
    a = _DUMMIES.get(key)
    if a is None:
        a = _DUMMIES[key] = _rows.empty(x, (2,), dt.u64)
    return a


_OPS = None


def _torch_ops():
    """torch.ops.opus.topk, defined at first use with a fake implementation (torch.compile
    traces it as one opaque op)."""
    global _OPS
    if _OPS is None:
        import torch

        @torch.library.custom_op("opus::topk", mutates_args=())
        def topk_op(x: torch.Tensor, k: int, largest: bool) -> tuple[torch.Tensor, torch.Tensor]:
            _rows.check_array("topk", x, "x", _DTYPES)
            return _run(x, k, largest)

        @topk_op.register_fake
        def _(x, k, largest):
            shape = tuple(x.shape[:-1]) + (k,)
            return (torch.empty(shape, dtype=x.dtype, device=x.device),
                    torch.empty(shape, dtype=torch.int64, device=x.device))

        class _Ops:
            topk = topk_op
        _OPS = _Ops
    return _OPS
