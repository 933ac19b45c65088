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

Short rows (the short-row kernel, ``TOPK_SHORT``: k <= 32, n <= 32 values per lane of a whole
warp): G lanes per row, P values per lane (powers of two, P * G >= n, P = 16 where n allows,
up to 32 where it must: 16384 x 256 runs 2 rows per warp, G = 16). Each lane loads its P
values (16-byte vectors), keeps the KL (k rounded up to a power of two) best as a descending
list by a merge sort in its registers (no shuffles), then log2 G butterfly steps merge the
lanes' lists: ``shfl_xor`` of the partner's list, and a bitonic merge of the two keeping KL
(the larger of a[i] and b[KL - 1 - i] is a bitonic list holding the KL best). Every lane of the row then holds the
row's list; lane i writes positions i, i + G, ...

Long rows (the streaming kernel, ``TOPK``): a warp keeps a sorted list of its best K =
max(k rounded up to a power of two, W) composites across its W lanes (R = K / W per lane,
position lane * R + i) and streams its elements in groups of 512 (16 per lane, 16-byte loads;
the next group's loads are issued before the current one is filtered, so a warp has two in
flight). An element costs one compare: its value (as f32) against the list's k-th composite
turned back into an f32 threshold (``!(x < t)``: NaN and ties pass; the composite order
decides later). Passing elements (rare once the list fills: the threshold rises as about k /
elements seen) are appended to the warp's queue in shared memory, a ring (in a group where
some lane passes, one vote per 4 elements of each lane, then one ballot per element, the slot
from ``opus.popc`` of the lanes below), raw: value bits and index, the order key made when a
merge takes them. The first group, before the list has a k-th, is filtered by
a bound from it and the next group (both loaded): each lane's c-th best (c = k / W rounded up
to a power of two), the least over the warp (W * c >= k elements are at least it). Every whole K of the queue is merged into the list: sorted by a bitonic network of
``opus.shfl_xor`` steps (within a lane for strides below R), reversed against the list (lane ^
(W - 1)), the elementwise max taken (a bitonic sequence holding the K best of both) and that
merged by log2 K more steps; the k-th is broadcast as the new threshold. The rest of the queue
stays where it is (a ring: no copy to its front, which held 16 more registers per lane). The warps of a block
merge their lists pairwise through shared memory, and the first k positions are written:
indices from the composites, values gathered from x (NaN payloads and -0.0 kept). Shuffles
and votes name the whole warp as members (every lane takes part), so NVIDIA reads no active
mask per shuffle.

Split rows, one launch: a row cut into S slices (blocks of WPR warps, grid y) has each block
write its sorted K composites to a workspace (rows x S x K), fence (release at device scope)
and count itself in a per-row counter (``atomic_add`` acq_rel by one thread); the block that
counts last (it sees every other slice's list) merges the S - 1 other lists into its own
(its warps take every WPR-th list; a list whose best is not above the warp's k-th is skipped,
the others merged sorted against sorted: one max and log2 K steps, no sort), then through
shared memory, writes the row and sets the counter back to 0, so the next launch (and every
CUDA-graph replay) starts from zero without a reset. The workspace and counters are made
once per launch plan and stream (``_fast_call.Workspaces``): no allocation or host sync per call.

Launch shapes (``plan``, the rule; ``launch`` runs any shape): the short-row kernel where it
applies. Otherwise one warp per row (4 per block) for rows of up to 4096 elements or where the
rows give every SM 16 warps. Otherwise (few long rows) each row gets w = min(16 * SMs / rows,
n / 4096) warps (every SM about 16 warps, each warp at least 4096 elements: 8 groups), in S =
w / WPR blocks of WPR = min(4, w rounded down to a power of two) warps: 64 x 131072 on 132 SMs
is 8 slices of 4 warps (2048 warps, 4096 elements each). Four warps per block keep the last
block's merge short (each of its warps merges S / 4 lists, then two steps in shared memory)
while the slices stay many; the merge being in the same launch, more slices cost no second
launch any more (the earlier two-launch split favoured few).
"""

import opus
from opus import dtypes as dt
from opus.frontend.targeting import current_target

from . import _fast_call, _rows

__all__ = ["topk", "plan", "launch", "short_shape", "TOPK", "TOPK_SHORT"]

_DTYPES = ("f32", "bf16", "f16")
_MAX_K = 128
_WARP_ROW_MAX = 4096          # rows up to this many elements get one warp each
_SLICE_WARPS = 4              # warps per block (one slice) of a split long row
_MIN_PER_WARP = 4096          # elements each warp of a split row keeps at least
_WARPS_PER_SM = 16            # warps a split of few long rows aims to give every SM
_ROW_WARPS_PER_SM = 16        # rows per SM from which long rows get one warp each
_SHORT_MAX_K = 32             # the short-row kernel: k up to 32,
_SHORT_P = 32                 # ... at most 32 values per lane,
_SHORT_P_FIRST = 16           # ... 16 where n allows (H100, 16384 x 256 k = 8: P = 16 0.055 ms,
                              # 8 0.069, 32 0.091, 64 0.083 per eager call)


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
    return _from_raw(_raw(x, idx), LARGEST)


@opus.func
def _raw(e, idx):
    """A queued element: its f32 bits above the composite's low half (0xFFFFFFFF - idx); the
    order key is made when a merge takes it (_from_raw), not for every element queued."""
    b = opus.bitcast(opus.cast(e, opus.f32), opus.u32)
    return (opus.cast(b, opus.u64) << 32) | opus.cast(opus.u32(0xFFFFFFFF) - idx, opus.u64)


@opus.func
def _from_raw(r, LARGEST):
    """The composite of a queued (_raw) element."""
    f = opus.bitcast(opus.cast(r >> 32, opus.u32), opus.f32)
    return (opus.cast(_order_key(f, LARGEST), opus.u64) << 32) | (r & opus.u64(0xFFFFFFFF))


@opus.func
def _index_of(c):
    return opus.u32(0xFFFFFFFF) - opus.cast(c & opus.u64(0xFFFFFFFF), opus.u32)


# -- the distributed bitonic network (R values per lane, position lane * R + i) ----------------

@opus.func
def _order2(a, b):
    """(larger, smaller) of two composites from one 64-bit compare: the smaller is the other
    bits (a ^ b ^ larger, one LOP3 per half); as two selects the compiler turns the pair into
    max and min and compares twice."""
    hi = opus.select(a > b, a, b)
    return hi, a ^ b ^ hi


def _full():
    """The whole warp as a compile-time member mask (every lane of these kernels takes part in
    every shuffle and vote: no activemask read per shuffle)."""
    return (1 << opus.warp_size()) - 1


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
                hi, lo = _order2(vals[i], vals[j])
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
        other = opus.shfl_xor(vals[i], m, mask=_full())
        out[i] = opus.select(keep_max == (vals[i] > other), vals[i], other)
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
    rev = [opus.shfl_xor(s[R - 1 - i], ws - 1, mask=_full()) for i in range(R)]
    return _merge_sorted(best, rev, K, R)


@opus.func
def _kth(best, k, R):
    """The composite at position k - 1 of the list, in every lane."""
    return opus.shfl(best[(k - 1) % R], (k - 1) // R, mask=_full())


# -- lists inside one lane (the short rows' first step: no shuffles) ----------------------------

@opus.func
def _lane_merge_bitonic(seq):
    """A bitonic list of one lane's values sorted descending (a power-of-two length)."""
    out = list(seq)
    stride = len(out) // 2
    while stride >= 1:
        for i in range(len(out)):
            if i & stride == 0:
                out[i], out[i + stride] = _order2(out[i], out[i + stride])
        stride //= 2
    return out


@opus.func
def _lane_merge(a, b, KL):
    """The min(KL, 2 len) largest of two descending lists of one length, descending: both
    whole (a then b reversed is bitonic) or, when only KL fit, the larger of a[i] and
    b[len - 1 - i] (a bitonic list holding the KL largest)."""
    n = len(a)
    if 2 * n <= KL:
        return _lane_merge_bitonic(a + b[::-1])
    return _lane_merge_bitonic([opus.max(a[i], b[n - 1 - i]) for i in range(n)])


@opus.func
def _lane_top(vals, KL):
    """The min(KL, len) largest of one lane's values (a power-of-two count), descending: a
    merge sort whose merges keep KL."""
    if len(vals) == 1:
        return list(vals)
    h = len(vals) // 2
    return _lane_merge(_lane_top(vals[:h], KL), _lane_top(vals[h:], KL), KL)


# -- thresholds --------------------------------------------------------------------------------

@opus.func
def _threshold_f32(thr, LARGEST):
    """The f32 whose order key is the composite thr's: ``!(x < t)`` (``!(x > t)`` for the
    smallest) then holds for every x whose composite can be above thr (NaN x included); the
    empty list's 0 gives a NaN t, which every x passes."""
    key = opus.cast(thr >> 32, opus.u32)
    if not LARGEST:
        key = ~key
    b = opus.select(key >= opus.u32(0x80000000), key ^ opus.u32(0x80000000), ~key)
    return opus.bitcast(b, opus.f32)


@opus.func
def _may_enter(e, thr_f, LARGEST):
    """Whether value e can be above the list's k-th (thr_f, its f32): one compare."""
    f = opus.cast(e, opus.f32)
    if LARGEST:
        return ~(f < thr_f)
    return ~(f > thr_f)


# -- the kernels -------------------------------------------------------------------------------

_GROUP = 512          # elements a warp reads per step of the streaming loop (16 per lane at 32)
_SUB = 4              # elements per lane behind one vote in a group where some may enter


_SHORT_BLOCK = 256    # threads per block of the short-row kernel (fixed: AMD then allows 512
                      # VGPRs a lane, which P = 32 lists of k = 32 need without spilling)


def _short_for(DT):
    @opus.kernel(block=_SHORT_BLOCK)
    def topk_short(x: opus.Ptr[DT], vals: opus.Ptr[DT], inds: opus.Ptr[opus.i64],
                   rows: opus.i32, n: opus.i32, x_stride: opus.i64,
                   KOUT: opus.constexpr = 8, P: opus.constexpr = 32, G: opus.constexpr = 8,
                   VEC: opus.constexpr = 4, LARGEST: opus.constexpr = True):
        """The KOUT best of each short row (n <= P * G): G lanes per row (warp size / G rows
        per warp), P elements per lane. Each lane keeps the KL = KOUT rounded up to a power of
        two best of its P (a merge sort in registers), then log2 G butterfly steps merge the
        lanes' lists (shfl_xor of the partner's list, a bitonic merge keeping KL): every lane
        of the row ends with the row's list and writes every G-th of its first KOUT."""
        ws = opus.warp_size()
        KL = _pow2_at_least(KOUT)
        lane = opus.lane_id()
        gl = lane % G
        row = (opus.block_id_x() * (_SHORT_BLOCK // ws) + opus.warp_id()) * (ws // G) + lane // G
        r64 = opus.cast(opus.min(row, rows - 1), opus.i64)
        g = opus.make_gmem(x + r64 * x_stride, n)
        V = min(VEC, P)
        cs = []
        for ld in range(P // V):
            off = (ld * G + gl) * V
            v = g.load(off, vec=V)
            for el in range(V):
                idx = off + el
                e = v[el] if V > 1 else v
                c = _composite(e, opus.cast(idx, opus.u32), LARGEST)
                cs.append(opus.select(idx < n, c, opus.u64(0)))
        best = _lane_top(cs, KL)
        d = 1
        while d < G:
            other = [opus.shfl_xor(c, d, mask=_full()) for c in best]
            best = _lane_merge(best, other, KL)
            d *= 2
        if row < rows:
            for j in range(-(-KOUT // G)):
                c = best[j * G]
                for i in range(1, min(G, len(best) - j * G)):
                    c = opus.select(gl == i, best[j * G + i], c)
                p = j * G + gl
                if p < KOUT:
                    xi = opus.cast(_index_of(c), opus.i64)
                    vals[r64 * KOUT + p] = x[r64 * x_stride + xi]
                    inds[r64 * KOUT + p] = xi
    return topk_short


def _topk_for(DT):
    @opus.kernel
    def topk_rows(x: opus.Ptr[DT], vals: opus.Ptr[DT], inds: opus.Ptr[opus.i64],
                  work: opus.Ptr[opus.u64], counts: opus.Ptr[opus.i32], rows: opus.i32,
                  n: opus.i32, x_stride: opus.i64, slice_len: opus.i32,
                  K: opus.constexpr = 32, KOUT: opus.constexpr = 8,
                  WPR: opus.constexpr = 1, BLOCK: opus.constexpr = 128,
                  VEC: opus.constexpr = 4, SPLIT: opus.constexpr = False,
                  LARGEST: opus.constexpr = True):
        """The KOUT best of each row: values and int64 indices (rows of KOUT). WPR warps
        per block (1: BLOCK / warp size rows per block, grid x the row blocks; else one row
        per block, grid x the rows). With SPLIT, grid y cuts each row into slices of
        slice_len elements, one block each: each block writes its list to ``work`` (rows x
        slices x K composites), counts itself in ``counts[row]`` (release / acquire), and
        the row's last block merges the slices' lists, writes the row and sets the count back
        to 0 (for the next launch: CUDA-graph replays need no reset).

        Each warp streams its elements in groups of _GROUP (the next group's loads in flight
        while one is filtered); an element costs one compare with the list's k-th (thr);
        those that pass are appended to the warp's queue in shared memory (ballot, rank =
        popc of the lanes below), and every full K of the queue is merged into the list (the
        distributed bitonic network), which raises thr."""
        ws = opus.warp_size()
        R = K // ws
        QN = K + _GROUP                       # queue slots per warp: < K left + one group
        wid = opus.warp_id()
        if WPR == 1:
            row = opus.block_id_x() * (BLOCK // ws) + wid
            w = 0
        else:
            row = opus.block_id_x()
            w = wid
        start = opus.block_id_y() * slice_len
        end = opus.min(start + slice_len, n)
        r64 = opus.cast(opus.min(row, rows - 1), opus.i64)
        g = opus.make_gmem(x + r64 * x_stride, n)
        q = opus.alloc_smem(opus.u64, (BLOCK // ws) * QN)
        live = row < rows
        first = opus.select(live, start + w * _GROUP, end)
        best = _stream(g, q, wid * QN, first, end, n, WPR * _GROUP, K, KOUT, VEC, LARGEST)
        if WPR > 1:
            best = _merge_warps(q, best, QN, K, WPR)
        if SPLIT:
            flag = opus.alloc_smem(opus.u32, 1)
            last = _publish(work, counts, flag, best, row, K)
            if last:
                best = _merge_slices(work, best, row, w, K, KOUT, WPR)
                if WPR > 1:
                    best = _merge_warps(q, best, QN, K, WPR)
        else:
            last = live
        if last and w == 0:
            lane = opus.lane_id()
            for i in range(R):
                p = lane * R + i
                if p < KOUT:
                    xi = opus.cast(_index_of(best[i]), opus.i64)
                    vals[r64 * KOUT + p] = x[r64 * x_stride + xi]
                    inds[r64 * KOUT + p] = xi
    return topk_rows


@opus.func
def _load_group(g, base, end, n, VEC):
    """A warp's group of _GROUP values from ``base`` (VEC-wide loads, lane-interleaved):
    none read where base is at or past end (the prefetch after a warp's last group)."""
    ws = opus.warp_size()
    lane = opus.lane_id()
    L = _GROUP // ws
    V = min(VEC, L)
    at = opus.select(base < end, base, n)     # past the row's bound: no memory read
    es = []
    for ld in range(L // V):
        v = g.load(at + (ld * ws + lane) * V, vec=V)
        for el in range(V):
            es.append(v[el] if V > 1 else v)
    return es


@opus.func
def _stream(g, q, qb, first, end, n, step, K, KOUT, VEC, LARGEST):
    """The list (R composites per lane, descending) of the K best of the warp's groups
    first, first + step, ... below end; q[qb:qb + K + _GROUP] is the warp's queue, a ring
    (cnt entries from head: a merge takes whole K from the head, nothing is moved)."""
    ws = opus.warp_size()
    lane = opus.lane_id()
    R = K // ws
    L = _GROUP // ws
    V = min(VEC, L)
    QN = K + _GROUP
    below = opus.lanemask_lt()
    best = [opus.u64(0)] * R
    thr = opus.u64(0)
    thr_f = _threshold_f32(thr, LARGEST)
    cnt = opus.i32(0)                     # the queue's length (the same in every lane)
    head = opus.i32(0)                    # its first entry's slot
    nxt = _load_group(g, first, end, n, VEC)
    for base in opus.range(first, end, step):
        es = nxt
        nxt = _load_group(g, base + step, end, n, VEC)
        ids = [base + ((j // V) * ws + lane) * V + j % V for j in range(L)]
        if base == first:                 # the empty list's threshold: a bound from this
            nids = [i + step for i in ids]    # group and the next (already loaded)
            t = _first_bound(es + nxt, ids + nids, end, KOUT, LARGEST)
            thr_f = _threshold_f32(opus.cast(t, opus.u64) << 32, LARGEST)
        ps = [_may_enter(e, thr_f, LARGEST) for e in es]
        some = ps[0]
        for p in ps[1:]:
            some = some | p
        if opus.any_lanes(some, mask=_full()):
            for sub in range(0, L, _SUB):     # a vote per _SUB elements, then one each
                some = ps[sub]
                for p in ps[sub + 1:sub + _SUB]:
                    some = some | p
                if opus.any_lanes(some, mask=_full()):
                    for i in range(sub, sub + _SUB):
                        cnt = _enqueue(q, qb, head, cnt, ps[i] & (ids[i] < end), es[i],
                                       ids[i], below, QN)
            if cnt >= K:
                best, thr, head, cnt = _drain(q, qb, head, cnt, best, thr, K, KOUT, QN,
                                              LARGEST)
                thr_f = _threshold_f32(thr, LARGEST)
    if cnt > 0:
        opus.sync_warp()
        chunk = []
        for i in range(R):
            s = lane * R + i
            at = qb + _ring(head + opus.min(s, QN - 1), QN)
            chunk.append(opus.select(s < cnt, _from_raw(q[at], LARGEST), opus.u64(0)))
        best = _insert_chunk(best, chunk, K, R)
    return best


@opus.func
def _ring(s, QN):
    """Slot s (below 2 QN) of a ring of QN slots."""
    return opus.select(s >= QN, s - QN, s)


@opus.func
def _merge_warps(q, best, QN, K, WPR):
    """The block's WPR warps' lists merged pairwise through q: warp 0's list is the block's
    (the other warps' are partial)."""
    ws = opus.warp_size()
    R = K // ws
    wid, lane = opus.warp_id(), opus.lane_id()
    qb = wid * QN
    opus.sync_threads()
    for i in range(R):
        q[qb + lane * R + i] = best[i]
    opus.sync_threads()
    h = 1
    while h < WPR:
        if wid % (2 * h) == 0:
            other = []
            for i in range(R):
                other.append(q[(wid + h) * QN + K - 1 - (lane * R + i)])
            best = _merge_sorted(best, other, K, R)
            for i in range(R):
                q[qb + lane * R + i] = best[i]
        opus.sync_threads()
        h *= 2
    return best


@opus.func
def _publish(work, counts, flag, best, row, K):
    """Warp 0 writes the block's list to its slot of ``work`` and releases it; thread 0 counts
    the block in counts[row] (acq_rel: the last to count sees every slice's list) and, when it
    is the row's last, sets the count back to 0. Returns whether this block is the last (the
    same in every thread)."""
    ws = opus.warp_size()
    R = K // ws
    lane = opus.lane_id()
    slices = opus.num_blocks_y()
    if opus.warp_id() == 0:
        slot = (opus.cast(row, opus.i64) * slices + opus.block_id_y()) * K + lane * R
        for i in range(R):
            work[slot + i] = best[i]
        opus.fence("device", "acq_rel")
    opus.sync_threads()
    if opus.thread_id_x() == 0:
        old = opus.atomic_add(counts, opus.i32(1), off=row, order="acq_rel", scope="device")
        is_last = old == opus.cast(slices - 1, opus.i32)
        if is_last:
            opus.atomic_store(counts, opus.i32(0), off=row)
        flag[0] = opus.select(is_last, opus.u32(1), opus.u32(0))
    opus.sync_threads()
    return flag[0] != opus.u32(0)


@opus.func
def _merge_slices(work, best, row, w, K, KOUT, WPR):
    """In the row's last block: warp w merges the slices' lists w, w + WPR, ... (skipping
    its own block's, which warp 0's list holds already, and every list whose best is not
    above the warp's k-th) into its list (empty but for warp 0's)."""
    ws = opus.warp_size()
    R = K // ws
    lane = opus.lane_id()
    slices = opus.num_blocks_y()
    own = opus.block_id_y()
    rbase = opus.cast(row, opus.i64) * slices * K + (K - 1 - lane * R)
    if WPR > 1:
        best = [opus.select(w == 0, b, opus.u64(0)) for b in best]
    thr = _kth(best, KOUT, R)
    nxt = _load_list(work, rbase, w, slices, K, R)
    for j in opus.range(w, slices, WPR):
        other = nxt                                       # reversed: ascending
        nxt = _load_list(work, rbase, j + WPR, slices, K, R)
        if opus.any_lanes((other[R - 1] > thr) & (j != own), mask=_full()):
            best = _merge_sorted(best, other, K, R)
            thr = _kth(best, KOUT, R)
    return best


@opus.func
def _load_list(work, rbase, j, slices, K, R):
    """Slice j's list from the workspace (this lane's R, reversed: ascending), loaded before
    the previous list is merged; j past the last slice reads the last one (unused)."""
    at = rbase + opus.cast(opus.min(j, slices - 1), opus.i64) * K
    return [work[at - i] for i in range(R)]


@opus.func
def _first_bound(es, ids, end, KOUT, LARGEST):
    """A lower bound (an order key) on the k-th best of the warp's first two groups, so that
    the first does not queue every element: each lane's c-th best of its elements (c = k / W
    rounded up to a power of two), the least of those over the warp: W * c >= k elements are
    at least it, so no element below it is among the k best of the warp's elements (the
    second group's too: it is seen later, but the bound holds for every element from the
    start); 0 (every element passes) where a lane has fewer than c elements. Two groups: a
    higher bound (H100 model, 4096 elements a warp: 5.6 list merges a warp, not 6.6)."""
    ws = opus.warp_size()
    c = _pow2_at_least(-(-KOUT // ws))
    keys = [opus.select(ids[i] < end, _order_key(opus.cast(es[i], opus.f32), LARGEST),
                        opus.u32(0)) for i in range(len(es))]
    t = _lane_top(keys, c)[c - 1]
    m = 1
    while m < ws:
        t = opus.min(t, opus.shfl_xor(t, m, mask=_full()))
        m *= 2
    return t


@opus.func
def _enqueue(q, qb, head, cnt, p, e, idx, below, QN):
    """Append element e (at index idx) to the warp's queue (cnt entries from head in the ring
    q[qb:qb + QN]) where p holds in this lane, raw (_raw); the lanes voting p take the next
    slots in lane order; returns the new length."""
    voters = opus.ballot(p, mask=_full())
    if voters != 0:
        if p:
            rank = opus.cast(opus.popc(voters & below), opus.i32)
            q[qb + _ring(head + cnt + rank, QN)] = _raw(e, opus.cast(idx, opus.u32))
        cnt = cnt + opus.cast(opus.popc(voters), opus.i32)
    return cnt


@opus.func
def _drain(q, qb, head, cnt, best, thr, K, KOUT, QN, LARGEST):
    """Merge every whole K of the queue (from head in the ring q[qb:qb + QN]) into the list (a
    chunk none of whose composites is above thr any more is skipped); the rest (< K) stays
    where it is. Returns (best, thr, head, cnt)."""
    R = K // opus.warp_size()
    lane = opus.lane_id()
    opus.sync_warp()
    done = (cnt // K) * K
    for h in opus.range(0, done, K):
        chunk = [_from_raw(q[qb + _ring(head + h + lane * R + i, QN)], LARGEST)
                 for i in range(R)]
        above = chunk[0] > thr
        for i in range(1, R):
            above = above | (chunk[i] > thr)
        if opus.any_lanes(above, mask=_full()):
            best = _insert_chunk(best, chunk, K, R)
            thr = _kth(best, KOUT, R)
    opus.sync_warp()
    return best, thr, _ring(head + done, QN), cnt - done


TOPK = {d: _topk_for(d) for d in (dt.f32, dt.bf16, dt.f16)}
TOPK_SHORT = {d: _short_for(d) for d in (dt.f32, dt.bf16, dt.f16)}


# -- the launch-shape rule ---------------------------------------------------------------------

def _pow2_at_least(v):
    p = 1
    while p < v:
        p *= 2
    return p


def list_size(k, warp_size):
    """K: the warp's list, k rounded up to a power of two, at least one value per lane."""
    return max(warp_size, _pow2_at_least(k))


def short_shape(n, k, warp_size):
    """(P, G) for rows of n elements with the short-row kernel: P values per lane, G lanes per
    row (powers of two, P * G >= n), or None where it does not apply (k > 32 or n above
    32 values per lane of a whole warp). P is at least 16 (where n allows): the lanes' own
    merges cost no shuffles, so fewer lanes per row save shuffles, but 32 values and their
    indices per lane cost occupancy (measured: _SHORT_P_FIRST)."""
    if k > _SHORT_MAX_K or n > _SHORT_P * warp_size:
        return None
    p = max(_pow2_at_least(-(-n // warp_size)), min(_pow2_at_least(n), _SHORT_P_FIRST))
    return p, _pow2_at_least(-(-n // p))


def plan(rows, n, k, sms, warp_size):
    """The launch shape for ``rows`` rows of n elements, top k, on ``sms`` multiprocessors (the
    module docstring states the rule): ``("short", P, G)``, or ``("rows", warps per slice,
    slices)``."""
    s = short_shape(n, k, warp_size)
    if s is not None:
        return ("short",) + s
    if n <= _WARP_ROW_MAX or rows >= sms * _ROW_WARPS_PER_SM:
        return "rows", 1, 1
    warps = min(-(-sms * _WARPS_PER_SM // rows), n // _MIN_PER_WARP)
    if warps <= 1:
        return "rows", 1, 1
    wpr = min(_SLICE_WARPS, 1 << (warps.bit_length() - 1))
    return "rows", wpr, warps // wpr


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
    if (type(x) is _fast_call.TENSOR and type(k) is int and type(dim) is int
            and type(largest) is bool and sorted is True and not _fast_call.IS_COMPILING()):
        call = _PLANS.get(_call_key(x, k, largest, dim, None))
        if call is not None:       # this layout with these arguments passed the checks before
            return call(x)
    return _checked(x, k, dim, largest, sorted)


def _checked(x, k, dim, largest, sorted):
    """topk's argument checks, then the launch (or, under torch.compile, the torch op)."""
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
    return _launch(x, k, largest, None, dim)


def _run(x, k, largest):
    return launch(x, k, largest)


def launch(x, k, largest, shape=None):
    """topk of x (checked) with the launch shape ``shape`` (as plan returns it; None: the
    rule's), for tests and the benchmark's comparisons. What a launch needs is planned once per
    layout of x's rows (shape, strides, dtype, device, alignment), target, k, largest and
    shape, and kept (_PLANS); a repeated call with a torch tensor is one dict lookup by a key
    made from a few accessors, then the outputs' allocation and one bound launch."""
    if type(x) is _fast_call.TENSOR and not _fast_call.IS_COMPILING():
        call = _PLANS.get(_call_key(x, k, largest, -1, shape))
        if call is not None:
            return call(x)
    return _launch(x, k, largest, shape, -1)


# Launch plans, two kinds of key (never equal: 5 and 6 entries):
#   (x's rows' layout: _rows.plan_key, target, k, largest, shape) -> _Plan (any array);
#   _call_key of a torch tensor (whose rows are x itself or a view) -> call(x) -> (vals, inds).
_PLANS = {}


def _call_key(x, k, largest, dim, shape):
    """A torch tensor's key in _PLANS: x's own layout (its rows are x or a view of it: the
    same alignment), the target selection and the arguments; no torch.device object built."""
    return (_fast_call.layout(x), current_target(), k, largest, dim, shape)


def _launch(x, k, largest, shape, dim):
    """The general path: x's rows, their plan (made once), the launch; for a torch tensor
    whose rows need no copy, the fast path's entry is kept too."""
    x2 = _rows.as_rows(x)
    key = (_rows.plan_key(x2), _rows.target(), k, largest, shape)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= 256:
            _PLANS.clear()
        plan = _PLANS[key] = _plan_launch(x, x2, k, largest, shape)
    out = tuple(x.shape[:-1]) + (k,)
    result = plan(x2, out)    # the launch entries accepted x (its device, its alignment)
    if _rows.is_torch(x) and x2.data_ptr() == x.data_ptr():
        _fast_call.adopt_torch()
        _PLANS[_call_key(x, k, largest, dim, shape)] = plan.call(x, out)
    return result


class _Plan:
    """A launch plan: the element type, the output allocators and ``launch(x2, vals, inds)``
    (the bound launch entries; None where there is nothing to compute)."""

    __slots__ = ("dtype", "new_vals", "new_inds", "launch")

    def __init__(self, x, d, launch):
        self.dtype, self.launch = d, launch
        self.new_vals, self.new_inds = _rows.allocator(x, d), _rows.allocator(x, dt.i64)

    def __call__(self, x2, out):
        """(values, indices) of shape ``out`` for the rows x2."""
        vals, inds = self.new_vals(out), self.new_inds(out)   # contiguous: rows x k
        if self.launch is not None:
            self.launch(x2, vals, inds)
        return vals, inds

    def call(self, x, out):
        """``call(x)``: the same for torch tensors of x's layout (checked: its dtype and
        device, and its rows are x or a view of it) by their addresses, which is all the
        kernels read: no checks in the launch entry, no view made; the outputs' shape bound
        into their allocators."""
        new_vals = _rows.allocator(x, self.dtype, out)
        new_inds = _rows.allocator(x, dt.i64, out)
        b = self.launch
        if b is None:
            return lambda x: (new_vals(), new_inds())
        run, kern, rest, workspace = b.by_address()
        stream, device = _fast_call.torch_stream(), x.get_device()

        def call(x):
            vals, inds = new_vals(), new_inds()
            h = stream(device)
            run(kern, (x.data_ptr(), vals.data_ptr(), inds.data_ptr()) + workspace(h) + rest,
                0, h)
            return vals, inds
        return call


class _Bound:
    """A plan's bound launch: ``run(kern, (x2, vals, inds) + workspace + rest, 0, stream)``,
    the workspace (work, counts) a split launch's, per stream (``spaces``), or in ``rest``."""

    __slots__ = ("kern", "run", "rest", "spaces")

    def __init__(self, kern, run, rest, spaces=None):
        self.kern, self.run, self.rest, self.spaces = kern, run, rest, spaces

    def __call__(self, x2, v, i):
        """The launch with arrays of any kind (the launch entry checks them)."""
        if self.spaces is None:
            self.run(self.kern, (x2, v, i) + self.rest, 0, None)
            return
        h = self.spaces.stream(self.spaces.device)
        self.run(self.kern, (x2, v, i) + self.spaces.set_for(h) + self.rest, 0, h)

    def by_address(self):
        """(run, kern, rest, workspace) for launches by addresses (torch): rest with its
        tensors (the unused pointers' stand-ins) as their addresses, ``workspace(h)`` the
        workspace arguments for stream h (a bound method: it keeps this _Bound, and so rest's
        tensors, alive)."""
        return self.run, self.kern, _fast_call.by_address(self.rest), self.workspace_args

    def workspace_args(self, h):
        """The workspace arguments of a launch on stream h by addresses (_Plan.call)."""
        return () if self.spaces is None else self.spaces.args(h)


def _plan_launch(x, x2, k, largest, shape):
    """The _Plan for this input's layout: the launch shape, vector width, output allocators
    and launch entries, bound once."""
    d = dt.dtype_from_name(_rows.dtype_name(x))
    rows, n = x2.shape
    if rows == 0 or k == 0:
        return _Plan(x, d, None)
    ws = _rows.target().target.warp_size
    kind, a, b = shape or plan(rows, n, k, _rows.sm_count(x), ws)
    if kind == "short":
        return _Plan(x, d, _plan_short(x2, d, k, largest, a, b))
    return _Plan(x, d, _plan_rows(x, x2, d, k, largest, a, b))


def _plan_short(x2, d, k, largest, p, g):
    """The short-row kernel: rows of G lanes, P values per lane."""
    rows, n = x2.shape
    per_block = _SHORT_BLOCK // g                  # rows: warps of ws / G rows each
    kern = TOPK_SHORT[d][-(-rows // per_block), _SHORT_BLOCK]
    vec = _rows.vector_width(x2, 16 // d.itemsize)
    run, full = kern.bind_entry(x2, x2, x2, rows, n, _rows.row_stride(x2), KOUT=k, P=p, G=g,
                                VEC=vec, LARGEST=largest)
    return _Bound(kern, run, full[3:])


def _plan_rows(x, x2, d, k, largest, wpr, slices):
    """The streaming kernel: one warp per row (4 rows per block), or blocks of wpr warps per
    row; with slices > 1 each row is cut into that many blocks, which merge in the same
    launch through a workspace kept per stream (_fast_call.Workspaces)."""
    rows, n = x2.shape
    ws = _rows.target().target.warp_size
    stride = _rows.row_stride(x2)
    common = dict(K=list_size(k, ws), KOUT=k, LARGEST=largest,
                  VEC=_rows.vector_width(x2, 16 // d.itemsize))
    work, counts = _dummy(x, dt.u64), _dummy(x, dt.i32)
    if slices == 1:
        block = 4 * ws if wpr == 1 else wpr * ws
        kern = TOPK[d][-(-rows // 4) if wpr == 1 else rows, block]
        run, full = kern.bind_entry(x2, x2, x2, work, counts, rows, n, stride, n, WPR=wpr,
                                    BLOCK=block, **common)
        return _Bound(kern, run, full[3:])
    slice_len = -(-n // (slices * _GROUP)) * _GROUP      # whole groups: aligned vectors
    kern = TOPK[d][(rows, slices), wpr * ws]
    run, full = kern.bind_entry(x2, x2, x2, work, counts, rows, n, stride, slice_len, WPR=wpr,
                                BLOCK=wpr * ws, SPLIT=True, **common)
    return _Bound(kern, run, full[5:], _split_workspaces(x, rows * slices * common["K"], rows))


def _split_workspaces(x, work_len, rows):
    """The split launch's (work, counts) per stream: each slice's list and per-row counts."""
    return _fast_call.Workspaces(x, lambda: (_rows.empty(x, (work_len,), dt.u64),
                                             _fast_call.zeroed(x, dt.i32, (rows,))))


_DUMMIES = {}


def _dummy(x, d):
    """A two-element array of opus dtype d on x's device: the pointer arguments a launch
    does not use."""
    key = (str(x.device) if _rows.is_torch(x) else "host", d)
    a = _DUMMIES.get(key)
    if a is None:
        a = _DUMMIES[key] = _rows.empty(x, (2,), d)
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
