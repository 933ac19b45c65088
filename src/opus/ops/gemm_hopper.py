"""GEMM: ``opus.ops.gemm(a, b)`` = a @ b, written with the public language (issue 12).

NVIDIA sm_90a: a persistent, warp-specialized kernel.

* Block tile 128 x BN (256, 128 or 64) x one 128-byte row of K per stage (64 bf16/f16, 128
  fp8), f32 accumulation, 384 threads: a producer warpgroup and two consumer warpgroups (64
  rows each). Or (BLOCK_M = 64, unpromoted, for small M: ``_choose_tiling``) 64 x BN tiles,
  each consumer warpgroup all 64 rows x BN / 2 columns. Register budgets move from the
  producer (``setmaxnreg_dec(40)``) to the consumers (``setmaxnreg_inc(232)``).
* The producer's first thread streams tiles of A and B by TMA into a ring of STAGES shared
  stages (128-byte swizzled), each with a "full" mbarrier (the copies' bytes) and an "empty"
  one (one arrival per consumer warpgroup once its wgmmas have read the stage).
* The consumers issue 4 wgmma (m64 nBN k16, or k32 for fp8) per stage, keep one stage's group
  in flight (``wgmma_wait(1)``) and release the stage before it. PROMOTE (fp8 by default):
  each stage's wgmmas sum into one of two partial register tiles in turn, and the partial of
  stage k is added to the f32 sum while stage k + 1's wgmmas run (``_promoted_sum``).
* Tiles are visited persistently (one block per SM, tile += num_blocks) in a grouped order
  (GROUP rows of tiles sweep the columns together, so A and B stay in L2).
* Epilogue: each warp applies the scales, bias, activation and residual to its 16 rows a
  64-column panel at a time, converts them to the output type, writes them into a swizzled
  shared panel, and one lane stores the panels by TMA (which clips at the tensor's edges: M,
  N and K need not be multiples of the tile; K's tail is read as zeros).
* Split-K (SPLIT > 1, where tiles are too few for the SMs: ``_choose_tiling``): a tile's K
  stages are cut into SPLIT ranges, one work unit each; each consumer warp writes its f32
  partial to a workspace slot and counts it (acq_rel, per tile and warp); the last to arrive
  adds the slots in split order, resets the count and runs the epilogue (docs/ops.md).

TMA needs each row of A, B and C to start 16-byte aligned (K and N multiples of 8 for 2-byte
types, of 16 for fp8); other shapes are refused with that reason.
"""

import opus
from opus import dtypes as dt
from opus.frontend.targeting import current_target
from opus.lang.context import PtxBodyRefusal
from . import _fast_call, _rows
from . import _gemm_args as _args
from ._gemm_args import (err as _err, strides as _strides, b_major as _b_major,
                         new_out as _new_out, torch_of as _torch_of, np as _np,
                         dtype_name as _dtype_name)

__all__ = ["gemm", "scaled_gemm", "gemm_kernel", "gemm_kernel_for", "relu", "gelu_tanh", "silu"]

BM = 128
_THREADS = 384
_KSTEPS = 4     # wgmma k-steps (32 bytes of K each) per stage's 128-byte K row


def _tile_coords(tile, m_tiles, n_tiles, group):
    """(row tile, column tile) of tile number ``tile`` in the grouped order: ``group`` row
    tiles sweep all column tiles together."""
    per_group = group * n_tiles
    g = tile // per_group
    first = g * group
    rows = opus.min(m_tiles - first, group)
    r = tile - g * per_group
    return first + r % rows, r // rows


# -- split-K: the work units of a tile and the deterministic reduction of their partials -------

def _work_units(num_tiles, k_tiles, split):
    """(work units, splits per tile): ``split`` (SPLIT) ways per tile, but never more than the
    tile's K stages, so that no unit is empty (a direct launch may pass any K)."""
    if split == 1:
        return num_tiles, 1
    splits = opus.min(k_tiles, split)
    return num_tiles * splits, splits


def _split_of(unit, splits, k_tiles, split):
    """(tile, split index, first K stage, K stages) of work unit ``unit``: a tile's ``splits``
    units are consecutive, and split s takes stages k_tiles * s // splits up to
    k_tiles * (s + 1) // splits (sizes differ by one at most; none is empty)."""
    if split == 1:
        return unit, 0, 0, k_tiles
    tile = unit // splits
    s = unit - tile * splits
    k0 = k_tiles * s // splits
    return tile, s, k0, k_tiles * (s + 1) // splits - k0


def _partial_layout(n):
    """Where a consumer thread's ``n`` accumulators go in its warp's part of a partial slot:
    runs of 4 (one 16-byte store), run r of the warp's 32 lanes together (each store of the
    warp writes 512 contiguous bytes), offset by the lane's 4 * lane (``_partial_at``)."""
    return opus.make_layout((n // 4, 4), stride=(128, 1))


def _partial_at(split, tile, s):
    """The element where this thread's accumulators start in ``tile``'s partial slot ``s``:
    slots of BM x BN, SPLIT per tile; in a slot, the 8 consumer warps' 16 x BN parts."""
    warp, lane, slot_elems, slots = split
    return (tile * slots + s) * slot_elems + warp * (slot_elems // 8) + lane * 4


@opus.func
def _publish_partial(d, split, partials, counts, tile, s, splits):
    """Store this warp's partial ``d`` (each lane's f32 accumulators: the warp's 16 rows of the
    tile) in slot ``s`` and count it in the tile's count for this warp; True for the last of
    the tile's units to arrive, which also sets the count back to zero. Each warp counts alone
    (its epilogue needs only its own rows). Memory order: the lanes' stores, ``sync_warp``
    (orders them before lane 0's next access), lane 0's acq_rel add at device scope (releases
    them; acquires the earlier units' stores), ``sync_warp`` again before the lanes read."""
    warp, lane, _, _ = split
    mine = opus.make_gmem(partials) + _partial_at(split, tile, s)    # constant offsets below
    mine.store(d, _partial_layout(len(d)), vec=4)
    opus.sync_warp()
    old = 0
    at = tile * 8 + warp
    if lane == 0:
        old = opus.atomic_add(counts, 1, at, order="acq_rel", scope="device")
        if old == splits - 1:
            counts[at] = 0      # no other unit of this tile is left in this launch
    opus.sync_warp()
    return opus.shfl(old, 0) == splits - 1


@opus.func
def _sum_partials(split, partials, tile, splits, n):
    """The tile's sum for the last unit's warp (its ``n`` values per lane): slot 0 + slot 1 +
    ... in this order (its own slot re-read too), so the result is the same whichever unit is
    last. Where every slot's values fit in 128 registers (64 x 128 tiles: 32 per lane and
    slot, up to 4 slots), all slots' loads are issued at once (unrolled over SPLIT; branches
    around the slots past ``splits`` serialized the loads); else in pieces of 64 values (32 where n is not a multiple of 64),
    each a run-time loop over the slots: one slot's piece in flight at a time (unrolled,
    ptxas hoisted every slot's loads and spilled)."""
    first = opus.make_gmem(partials) + _partial_at(split, tile, 0)     # constant offsets below
    step = 64 if n % 64 == 0 else 32
    piece = _partial_layout(step)
    sums = []
    for p in range(0, n, step):
        at = piece + 32 * p         # runs p / 4 ..: 128 elements apart
        total = first.load(at, vec=4)
        if n * split[3] <= 128:     # slots past splits re-read the last one, not added
            for j in range(1, split[3]):
                v = (first + opus.min(j, splits - 1) * split[2]).load(at, vec=4)
                total = opus.select(j < splits, total + v, total)
        else:
            for j in opus.range(1, splits):
                total = total + (first + j * split[2]).load(at, vec=4)
        sums.append(total)
    return opus.concat(*sums)


def _make_kernel(out_dtype, min_blocks=None, body="cuda"):
    """The GEMM kernel writing ``out_dtype`` (the bias and residual pointers have that type),
    rendered as ``body`` (docs/ptx_body.md)."""

    @opus.kernel(block=_THREADS, min_blocks=min_blocks, body=body)
    def gemm_kernel(a: opus.TensorMap, b: opus.TensorMap, c: opus.TensorMap, M: opus.i32,
                    N: opus.i32, K: opus.i32, scale_a: opus.Ptr[opus.f32],
                    scale_b: opus.Ptr[opus.f32], bias: opus.Ptr[out_dtype],
                    residual: opus.Ptr[out_dtype], partials: opus.Ptr[opus.f32],
                    counts: opus.Ptr[opus.i32], DT: opus.constexpr = dt.bf16,
                    OUT: opus.constexpr = out_dtype, BN: opus.constexpr = 256,
                    STAGES: opus.constexpr = 3, GROUP: opus.constexpr = 8,
                    B_KMAJOR: opus.constexpr = False, SCALES: opus.constexpr = (0, 0),
                    PROMOTE: opus.constexpr = 0, EPILOGUE: opus.constexpr = (False, None, False),
                    SPLIT: opus.constexpr = 1, BLOCK_M: opus.constexpr = BM):
        """C (M x N) = A (M x K) @ B: B is K x N row-major, or with B_KMAJOR the N x K row-major
        tensor whose transpose is B (fp8 inputs: B_KMAJOR only, as wgmma reads them). SCALES
        (a, b): 0 none, 1 one f32 (scale_a[0] / scale_b[0]), 2 one per row of C (scale_a[m]) / per
        column (scale_b[n]); C = (A @ B) * scales, rounded once to OUT. PROMOTE (0: off): each
        stage's wgmmas (128 of K) accumulate into a fresh partial register tile that is added to
        the f32 sum in the CUDA cores (fp8 wgmma keeps fewer accumulator bits than f32 on the
        H100; this bounds the error as cuBLAS does unless asked for fast accumulation); the
        tile's columns are cut into PROMOTE pieces of BN / PROMOTE, one wgmma group each.
        EPILOGUE (bias, activation, residual): C = activation(C + bias[n]) + residual[m, n] in
        f32 before the one rounding (activation: a Python function of one f32 value, traced
        here; None for none). Persistent: launch one block per SM (or fewer).
        SPLIT > 1 (split-K): each tile's K stages are cut into min(SPLIT, stages) consecutive
        ranges, one work unit each; each consumer warp of a unit writes its f32 partial (its 16
        rows) to the unit's slot of ``partials`` (SPLIT slots of BM x BN per tile) and counts it
        in ``counts[8 * tile + warp]`` (int32, zero before the launch); the warp of the tile's
        last unit to arrive adds the partials in split order (the result does not depend on
        which unit is last), runs the epilogue on its rows and sets the count back to zero (so
        the next launch, or a CUDA graph's replay, finds it zero). Unused with SPLIT = 1.
        BLOCK_M: the tile's rows, 128 (each consumer warpgroup 64 rows x BN) or 64 (without
        PROMOTE: each consumer warpgroup all 64 rows x BN / 2 columns; for small M, where
        128-row tiles would leave SMs idle or re-read A once per 64 columns)."""
        if BLOCK_M not in (64, 128) or (BLOCK_M == 64 and (PROMOTE or BN < 128)):
            raise opus.TraceError(f"BLOCK_M={BLOCK_M} with BN={BN}, PROMOTE={PROMOTE}: the "
                                  f"tile is 128 rows, or 64 rows at least 128 wide unpromoted")
        isz = DT.itemsize
        BKE = 128 // isz                      # K elements per 128-byte (swizzle-wide) row
        KW = 32 // isz                        # K of one wgmma (16 for 2-byte types, 32 for fp8)
        NB = BN // 64
        sw = opus.swizzle_bytes(128, DT)
        a.declare(DT, (BLOCK_M, BKE), swizzle=128)
        if B_KMAJOR:
            b.declare(DT, (BN, BKE), swizzle=128)
        else:
            b.declare(DT, (BKE, 64), swizzle=128)
        c.declare(OUT, (16, 64), swizzle=128)
        a_elems, b_elems = BLOCK_M * BKE, BKE * BN
        sa = opus.dynamic_smem(DT, 0, align=1024)
        sb = opus.dynamic_smem(DT, STAGES * a_elems * isz, align=1024)
        sc = opus.dynamic_smem(OUT, STAGES * (a_elems + b_elems) * isz, align=1024)
        full = opus.alloc_mbarriers(STAGES)
        empty = opus.alloc_mbarriers(STAGES)
        t = opus.thread_id_x()
        if t == 0:
            for s in range(STAGES):
                full[s].init(1)
                empty[s].init(2)        # one arrival per consumer warpgroup
            opus.fence_mbarrier_init()
        opus.sync_threads()
        k_tiles = (K + BKE - 1) // BKE
        m_tiles = (M + BLOCK_M - 1) // BLOCK_M
        n_tiles = (N + BN - 1) // BN
        num_tiles = m_tiles * n_tiles
        units, splits = _work_units(num_tiles, k_tiles, SPLIT)
        wg = t // 128
        if wg == 0:                                             # the producer
            opus.setmaxnreg_dec(40)
            if t == 0:
                it = 0
                for unit in opus.range(opus.block_id_x(), units, opus.num_blocks_x()):
                    tile, _, k0, kn = _split_of(unit, splits, k_tiles, SPLIT)
                    mt, nt = _tile_coords(tile, m_tiles, n_tiles, GROUP)
                    for k in opus.range(k0, k0 + kn):
                        s = it % STAGES
                        empty[s].wait(((it // STAGES) & 1) ^ 1)
                        full[s].arrive_expect_tx((a_elems + b_elems) * isz)
                        opus.tma_load(a, sa + s * a_elems, (mt * BLOCK_M, k * BKE), full[s])
                        if B_KMAJOR:
                            opus.tma_load(b, sb + s * b_elems, (nt * BN, k * BKE), full[s])
                        else:
                            for j in range(NB):
                                opus.tma_load(b, sb + (s * b_elems + j * (BKE * 64)),
                                              (k * BKE, nt * BN + 64 * j), full[s])
                        it += 1
        else:                                                   # the consumers
            opus.setmaxnreg_inc(232)
            # each warpgroup's part of the tile: 64 rows (its own with 128-row tiles, else all)
            # x WN columns (all, or half of them from column h * WN: B's rows or panels from
            # h * WN, 1024-byte aligned, so the swizzle pattern is the same)
            WN, h = (BN, 0) if BLOCK_M == 128 else (BN // 2, wg - 1)
            mma = opus.make_wgmma(DT, DT, opus.f32, (64, WN, KW))
            la = opus.make_layout((BLOCK_M, BKE), swizzle=sw)
            if B_KMAJOR:
                lb = opus.make_layout((BN, BKE), swizzle=sw)
            else:   # (n, k) over NB panels of 64 columns, each BKE rows of 64
                lb = opus.make_layout(((NB, 64), BKE), stride=((BKE * 64, 1), 64), swizzle=sw)
            # the epilogue: each warp's 16 rows as WN / 64 swizzled 64-column panels of its
            # warpgroup's 64 x WN staging tile (panel j at j * 4096), stored by TMA boxes of 16 x 64
            panel = opus.make_wgmma(dt.bf16, dt.bf16, opus.f32, (64, 64, 16))  # layouts only
            lc = panel.layout_c((64, 1)).swizzled(opus.swizzle_bytes(128, OUT))
            w, lane = opus.warp_id() % 4, opus.lane_id()
            stage_c = sc + (wg - 1) * (64 * WN)
            # the stage ring as the consumers read it: this warpgroup's 64 rows of A
            ring = (sa + (wg - 1) * (64 * BKE) if BLOCK_M == 128 else sa, a_elems,
                    sb + h * (WN * BKE), b_elems, la, lb, full, empty,
                    STAGES, t % 128 == 0)
            if PROMOTE:     # wgmmas of BN / PROMOTE columns into two alternating partials
                part = opus.make_wgmma(DT, DT, opus.f32, (64, BN // PROMOTE, KW))
            if SPLIT > 1:   # (consumer warp, lane, slot size, slots per tile)
                split = (4 * (wg - 1) + w, lane, BLOCK_M * BN, SPLIT)
            it = 0
            for unit in opus.range(opus.block_id_x(), units, opus.num_blocks_x()):
                tile, ks, _, kn = _split_of(unit, splits, k_tiles, SPLIT)
                mt, nt = _tile_coords(tile, m_tiles, n_tiles, GROUP)
                if PROMOTE:
                    d = _promoted_sum(part, PROMOTE, ring, it, kn)
                else:
                    acc = opus.wgmma_fence(mma.zeros_c())
                    for k in opus.range(kn):
                        _wait_stage(ring, it + k)
                        acc = _stage_mma(mma, ring, it + k, 0, acc, True)
                        opus.wgmma_wait(1)                      # the previous stage's wgmmas done
                        if k > 0:
                            _release_stage(ring, it + k - 1)
                    d = opus.wgmma_wait(0, acc)
                    _release_stage(ring, it + kn - 1)
                it += kn
                last = True
                if SPLIT > 1:
                    last = _publish_partial(d, split, partials, counts, tile, ks, splits)
                if last:
                    if SPLIT > 1:
                        d = _sum_partials(split, partials, tile, splits, len(d))
                    row0 = mt * BLOCK_M + (64 * (wg - 1) if BLOCK_M == 128 else 0)
                    col0 = nt * BN + h * WN
                    if lane == 0:
                        opus.tma_wait(0, read=True)             # the last tile's panels were read
                    opus.sync_warp()
                    for j in range(WN // 64):   # a 64-column panel at a time: fewer registers
                        col = col0 + 64 * j
                        dj = _scaled(d[32 * j:32 * j + 32], SCALES, scale_a, scale_b, panel,
                                     row0, col, M, N)
                        dj = _epilogue(dj, EPILOGUE, bias, residual, panel, row0, col, M, N)
                        stage_c.store(opus.cast(dj, OUT), lc + j * 4096, vec=2)
                    opus.fence_proxy_async()
                    opus.sync_warp()
                    if lane == 0:
                        for j in range(WN // 64):
                            opus.tma_store(c, stage_c + (j * 4096 + w * 1024),
                                           (row0 + 16 * w, col0 + 64 * j))
                        opus.tma_commit()
            if lane == 0:
                opus.tma_wait(0)
    return gemm_kernel


# -- the consumers' main loop: the stage ring, one stage's wgmmas, promoted accumulation --------
#
# ``ring`` = (a, a_elems, b, b_elems, la, lb, full, empty, stages, leader): this warpgroup's A
# rows of stage 0 and the elements per stage of A and B, the tiles' layouts, the mbarriers and
# whether this thread arrives for the warpgroup. ``i`` counts stages over the block's tiles.

def _slot(i, stages):
    """(ring slot, phase parity) of stage ``i`` >= 0, in unsigned arithmetic (a division by a
    constant without the signed fix-ups)."""
    u = opus.cast(i, opus.u32)
    return u % stages, (u // stages) & 1


@opus.func
def _wait_stage(ring, i):
    """Wait until stage ``i``'s TMA loads have landed."""
    slot, phase = _slot(i, ring[8])
    ring[6][slot].wait(phase)


@opus.func
def _release_stage(ring, i):
    """This warpgroup is done reading stage ``i``: the producer may refill it."""
    if ring[9]:
        ring[7][_slot(i, ring[8])[0]].arrive()


@opus.func
def _stage_mma(mma, ring, i, h, c, accumulate):
    """Stage ``i``'s wgmmas (its 128-byte K row in k-steps of mma.k) for B's columns
    h * mma.n .. (h + 1) * mma.n - 1, into accumulator ``c`` (its values ignored unless
    ``accumulate``), committed as one group; returns the accumulator in flight."""
    a, a_elems, b, b_elems, la, lb, stages = ring[0], ring[1], ring[2], ring[3], ring[4], \
        ring[5], ring[8]
    s = _slot(i, stages)[0]
    c = opus.wgmma_fence(c)
    for kk in range(_KSTEPS):
        c = mma(mma.smem_a(a + s * a_elems, la, origin=(0, mma.k * kk)),
                mma.smem_b(b + s * b_elems, lb, origin=(h * mma.n, mma.k * kk)), c,
                scale_d=accumulate or kk > 0)
    opus.wgmma_commit()
    return c


@opus.func
def _promoted_sum(mma, pieces, ring, it, k_tiles):
    """The tile's sum over its ``k_tiles`` stages (ring stages it ..) with promoted accumulation
    (PROMOTE): the tile's columns are ``pieces`` pieces of mma.n; group g (stage g // pieces,
    piece g % pieces: 4 wgmmas, 128 of K) is summed by the tensor cores into partial g % 2 (two
    register tiles used in turn) and added to that piece's f32 sum in the CUDA cores while
    group g + 1 runs (``wgmma_wait(1)``), so the tensor cores never wait for the adds. Returns
    the 64 x (pieces * mma.n) f32 sum in the accumulator's register order."""
    free = opus.zeros(mma.elem_c, opus.f32)
    sums = tuple(free for _ in range(pieces))
    _wait_stage(ring, it)
    parts = (_stage_mma(mma, ring, it, 0, free, False), free)
    last = it + k_tiles - 1
    if pieces > 1:
        # stage 0's other pieces, then a stage (an even number of groups) per iteration
        parts, sums = _promote_steps(mma, pieces, ring, it, 1, 1, pieces - 1, parts, sums)
        for j in opus.range(1, k_tiles):
            parts, sums = _promote_steps(mma, pieces, ring, it + j, 0, 0, pieces, parts, sums)
        # the last wait in a branch (both arms alike): straight after the loop, ptxas (CUDA 13.0)
        # serializes every wgmma of the kernel (C7514; tests/ops/test_gemm.py checks the SASS)
        if k_tiles > 1:
            sums = _promote_last(ring, last, parts[1], sums)
        else:
            sums = _promote_last(ring, last, parts[1], sums)
        return opus.concat(*sums)
    if k_tiles == 1:
        return _promote_last(ring, last, parts[0], sums)[0]
    # stage 1 issued and stage 0 added before the loop, as in the pieces' case above (a loop
    # entered straight after the first group made ptxas inject a full wait there, C7517, with
    # the accumulators rendered lane by lane)
    parts, sums = _promote_steps(mma, 1, ring, it + 1, 0, 1, 1, parts, sums)
    for j in opus.range((k_tiles - 2) // 2):        # two stages (groups) per iteration
        parts, sums = _promote_steps(mma, 1, ring, it + 2 + 2 * j, 0, 0, 2, parts, sums)
    if k_tiles % 2 == 1:    # one stage left after the pairs
        parts, sums = _promote_steps(mma, 1, ring, last, 0, 0, 1, parts, sums)
        sums = _promote_last(ring, last, parts[0], sums)
    else:
        sums = _promote_last(ring, last, parts[1], sums)
    return sums[0]


@opus.func
def _promote_steps(mma, pieces, ring, stage, h, p, count, parts, sums):
    """``count`` groups from piece ``h`` of ring stage ``stage`` on, the first into partial
    ``p`` (then 1 - p, ...): issue the group into its partial's registers (free since the
    group before the last was added), wait for the group before it, add that partial to its
    piece's sum and release its stage once all its pieces are added."""
    for _ in range(count):
        if h == 0:
            _wait_stage(ring, stage)
        started = _stage_mma(mma, ring, stage, h, parts[p], False)
        done = opus.wgmma_wait(1, parts[1 - p])         # the previous group's partial
        prev = (h - 1) % pieces
        sums = sums[:prev] + (sums[prev] + done,) + sums[prev + 1:]
        if prev == pieces - 1:
            _release_stage(ring, stage - 1 if h == 0 else stage)
        parts = (done, started) if p == 1 else (started, done)
        p, h = 1 - p, (h + 1) % pieces
        if h == 0:
            stage = stage + 1
    return parts, sums


@opus.func
def _promote_last(ring, stage, acc, sums):
    """The last group (the last piece of ring stage ``stage``) added once it completes."""
    sums = sums[:-1] + (sums[-1] + opus.wgmma_wait(0, acc),)
    _release_stage(ring, stage)
    return sums


_KERNELS = {}


def gemm_kernel_for(out_dtype, promoted=False, body="cuda"):
    """The GEMM kernel whose output (and bias, residual) type is ``out_dtype``; ``promoted``:
    the one launched with PROMOTE, declared one block per SM (``min_blocks=1``: without it
    ptxas cannot size the registers at entry and ignores setmaxnreg (C7508), and the 192 and
    256 wide promoted tiles spill); ``body``: "cuda" (C++) or "ptx" (a PTX body in a C++
    shell: the same kernel, compiled without NVVM's optimizer, docs/ptx_body.md)."""
    key = (out_dtype.name, promoted, body)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = _make_kernel(out_dtype, 1 if promoted else None, body)
    return k


gemm_kernel = gemm_kernel_for(dt.bf16)


def _epilogue(d, epilogue, bias, residual, mma, row0, col0, M, N):
    """d + bias, the activation, + residual (EPILOGUE of the kernel), in f32: bias gathered per
    column and the residual per element through the accumulator's layout, from bounded views
    (outside the tensor: zeros, in elements the TMA store drops)."""
    has_bias, act, has_res = epilogue
    if has_bias:
        d = d + opus.cast(opus.make_gmem(bias, N).load(mma.layout_c((0, 1)) + col0, vec=2),
                          opus.f32)
    if act is not None:
        d = opus.make_vector(*[act(d[i]) for i in range(mma.elem_c)])
    if has_res:
        g = opus.make_gmem(residual, M * N)
        d = d + opus.cast(g.load(mma.layout_c((N, 1)) + (row0 * N + col0), vec=2), opus.f32)
    return d


def _scaled(d, scales, scale_a, scale_b, mma, row0, col0, M, N):
    """The accumulator times the scales (SCALES of gemm_kernel). Per-row and per-column
    factors are gathered into register vectors through the accumulator's layout (element i of
    ``mma.layout_c((1, 0))`` is its row, of ``layout_c((0, 1))`` its column), from bounded
    views: zeros past M and N, where the TMA store writes nothing anyway."""
    mode_a, mode_b = scales
    if mode_a == 0 and mode_b == 0:
        return d
    ga = opus.make_gmem(scale_a, M if mode_a == 2 else 1)
    gb = opus.make_gmem(scale_b, N if mode_b == 2 else 1)
    f = 1.0
    if mode_a == 1:
        f = ga[0]
    if mode_b == 1:
        f = f * gb[0]
    if mode_a == 1 or mode_b == 1:
        d = d * f
    if mode_a == 2:
        d = d * ga.load(mma.layout_c((1, 0)) + row0)
    if mode_b == 2:
        d = d * gb.load(mma.layout_c((0, 1)) + col0, vec=2)
    return d


# -- host side ---------------------------------------------------------------------------------

_DTYPES = ("bf16", "f16")
_FP8 = ("fp8_e4m3", "fp8_e5m2")


def gemm(a, b, out=None, *, bias=None, activation=None, residual=None, blocks=None,
         block_n=None, stages=None, split_k=None, block_m=None, body=None):
    """``a @ b`` on the GPU (torch tensors, on the current stream; usable inside CUDA graphs) or
    in the interpreter (numpy arrays, with ``opus.set_target(..., interpret=True)``).

    :param a: M x K, bf16 or f16, row-major (rows may be padded)
    :param b: K x N of a's dtype: row-major, or the transpose of a row-major N x K tensor
        (``w.t()``)
    :param out: M x N of a's dtype, row-major (made when None)
    :param bias: N values of the output's type, added to every row
    :param activation: applied after the bias, before the residual: a Python function of one
        f32 value written with opus operations (``opus.ops.relu``, ``gelu_tanh``, ``silu``, or
        your own), traced into the kernel (one compiled kernel per function)
    :param residual: M x N of the output's type, row-major, added last
    :param blocks: persistent blocks to launch (default: one per SM on the GPU, 4 in the
        interpreter)
    :param block_n: the block tile's width, 64, 128 or 256 (default: 256 where 128 x 256
        tiles give every SM one, else the rule's small tile: docs/ops.md)
    :param stages: shared-memory stages in flight (default: as many as fit, 8 at most)
    :param split_k: K splits per output tile (split-K: each split's f32 partial tile goes to
        a workspace, the last split to finish adds them in a fixed order and runs the
        epilogue: deterministic, one launch); 1 for none, at most K's 64-deep stages. Default:
        split where even the small tiles leave the SMs too much to stream each (docs/ops.md:
        the rule)
    :param block_m: the block tile's height, 128 or 64 (64: at least 128 wide; default: the
        plan's rule, docs/ops.md)
    :param body: how the kernel is rendered: "ptx" (a PTX body in a C++ shell, compiled
        without NVVM's optimizer in half the time: docs/ptx_body.md) or "cuda" (C++). Default:
        "ptx", except for a plan that splits K or an activation using what a PTX body lacks
        (exp, tanh: gelu_tanh, silu), which take "cuda"; an explicit "ptx" does not split K
    :returns: out
    :targets: sm_90a
    """
    done = fast(a, b, out, None, None, None, bias, activation, residual,
                (blocks, block_n, stages, split_k, block_m, body), False)
    if done is not None:
        return done
    return _run(a, b, out, None, None, None, blocks, block_n, stages,
                epilogue=(bias, activation, residual), split_k=split_k, block_m=block_m,
                body=body)


def scaled_gemm(a, b, scale_a, scale_b, out=None, *, out_dtype=None, fast_accum=False,
                bias=None, activation=None, residual=None, blocks=None, block_n=None,
                stages=None, split_k=None, body=None):
    """``(a @ b) * scale_a * scale_b`` for fp8 (e4m3 or e5m2, any pairing of one type) ``a``
    and ``b`` (as ``torch._scaled_mm``): f32 accumulation, scaled once in f32, rounded to
    ``out_dtype``. fp8 wgmma reads both operands K-major: ``b`` must be the transpose of a
    row-major N x K tensor (``w.t()``).

    :param a: M x K fp8, row-major
    :param b: K x N fp8 of a's type, the transpose of a row-major N x K tensor
    :param scale_a: f32: one value (shape () or (1,)) or one per row of a (M or M x 1)
    :param scale_b: f32: one value or one per column of b (N or 1 x N)
    :param out: M x N of ``out_dtype`` (made when None)
    :param out_dtype: bf16 (default), f16 or f32 (torch or opus dtype)
    :param fast_accum: accumulate a whole tile in the wgmma accumulators (faster; the H100's
        fp8 wgmma keeps fewer bits than f32, so the error grows with K, as with
        ``torch._scaled_mm(..., use_fast_accum=True)``); by default each 128-deep stage's
        partial sums are added in f32 while the next stage's wgmmas run (docs/ops.md)
    :param bias: N values of out_dtype added after the scales; ``activation``, ``residual``:
        as in ``opus.ops.gemm``
    :param block_n: the block tile's width: promoted 64, 128 (default; 64 where fewer tiles
        than SMs), 192 or 256 (the last two in 96 / 64 wide pieces per wgmma group); fast
        accumulation 64, 128 or 256 (as ``opus.ops.gemm``)
    :param split_k: K splits per output tile, as in ``opus.ops.gemm`` (K stages of 128 here;
        split tiles are 192 wide when promoted, else 256, unless ``block_n`` says)
    :param body: "ptx", "cuda" or None (the plan's choice), as in
        ``opus.ops.gemm_hopper.gemm``
    :returns: out
    :targets: sm_90a
    """
    done = fast(a, b, out, scale_a, scale_b, out_dtype, bias, activation, residual,
                (blocks, block_n, stages, split_k, None, body), not fast_accum)
    if done is not None:
        return done
    return _run(a, b, out, scale_a, scale_b, out_dtype, blocks, block_n, stages,
                promote=not fast_accum, epilogue=(bias, activation, residual), split_k=split_k,
                body=body)


def _run(a, b, out, scale_a, scale_b, out_dtype, blocks, block_n, stages, promote=False,
         epilogue=(None, None, None), split_k=None, block_m=None, body=None):
    bias, act, res = epilogue
    _check_body(body)
    if split_k is not None and type(split_k) is not int:
        _check_split_k(split_k)     # refused before it reaches the plan key (a list: unhashable)
    if block_m is not None and type(block_m) is not int:
        _check_block_m(block_m)
    sel = current_target()
    key = (sel.target.name, sel.mode, _key(a), _key(b), None if out is None else _key(out),
           None if scale_a is None else _key(scale_a), None if scale_b is None else _key(scale_b),
           str(out_dtype), blocks, block_n, stages, promote,
           None if bias is None else _key(bias), act, None if res is None else _key(res), split_k,
           block_m, body)
    plan, given = _PLANS.get(key), out
    if plan is None:
        scaled = scale_a is not None or scale_b is not None
        if out is None:
            out = _new_out(a, b, _args.out_dtype(a, out_dtype, scaled))
            key = key[:4] + (_key(out),) + key[5:]
        plan = _plan(a, b, out, sel, blocks, block_n, stages, scaled, scale_a, scale_b,
                     out_dtype, promote, epilogue, split_k, block_m, body)
        if len(_PLANS) >= 256:
            _PLANS.clear()
        _PLANS[key] = plan
    if plan is not None:
        plan()
        if sel.mode == "gpu" and torch_exact(a, b, given, scale_a, scale_b, bias, res):
            _remember(plan, a, b, given, scale_a, scale_b, out_dtype, epilogue,
                      (blocks, block_n, stages, split_k, block_m, body), promote)
    elif out is not None and a.shape[1] == 0:
        out[...] = 0
    return out


# -- the fast path: a repeated torch call of a layout planned before --------------------------

# call key (_call_key: the layouts, not the addresses) -> call(a, b, out, scale_a, scale_b,
# bias, residual) -> out (_ByAddress.call)
_CALLS = {}
_NO_OPTIONS = (None,) * 6
_FOREIGN = object()       # an operand of another type in a key: never stored


def fast(a, b, out, scale_a, scale_b, out_dtype, bias, act, res, options, promote):
    """The call's result where torch tensors of these layouts, with these options, were
    checked and planned before (one dict lookup, out's allocation, one launch by addresses);
    None otherwise (the caller takes the general path)."""
    if type(a) is not _fast_call.TENSOR or _fast_call.IS_COMPILING():
        return None
    call = _CALLS.get(_call_key(a, b, out, scale_a, scale_b, out_dtype, bias, act, res,
                                options, promote))
    return None if call is None else call(a, b, out, scale_a, scale_b, bias, res)


def _call_key(a, b, out, scale_a, scale_b, out_dtype, bias, act, res, options, promote):
    """The layouts (shape, strides, dtype, device, address alignment) of a torch call's
    tensors, the target selection, the options (None or ints only, and the body: a bool or
    numpy integer takes the general path) and the rest; None where an option is of another
    type."""
    if options != _NO_OPTIONS and not (
            all(v is None or type(v) is int for v in options[:-1])
            and options[-1] in (None, "cuda", "ptx")):
        return None
    return (current_target(), _fast_call.layout(a), _layout(b), _layout(out), _layout(scale_a), _layout(scale_b),
            None if out_dtype is None else (type(out_dtype), str(out_dtype)),
            _layout(bias), act, _layout(res), options, promote)


def _layout(x):
    if x is None:
        return None
    if type(x) is not _fast_call.TENSOR:
        return _FOREIGN
    return _fast_call.layout(x)


def torch_exact(*arrays):
    """Whether the first array is a torch.Tensor and each other one a torch.Tensor or None
    (exact types: the fast path's gate; subclasses take the general path)."""
    if not _rows.is_torch(arrays[0]):
        return False
    _fast_call.adopt_torch()
    tensor = _fast_call.TENSOR
    return type(arrays[0]) is tensor and all(x is None or type(x) is tensor
                                             for x in arrays[1:])


def _remember(plan, a, b, out, scale_a, scale_b, out_dtype, epilogue, options, promote):
    """Keep the fast path's call for this call's layouts (``out`` the one given, or None)."""
    bias, act, res = epilogue
    key = _call_key(a, b, out, scale_a, scale_b, out_dtype, bias, act, res, options, promote)
    if key is None:
        return
    if len(_CALLS) >= 256:
        _CALLS.clear()
    _CALLS[key] = plan.by_address.call(a, out is not None)


# (target, mode, a, b, out, options) -> the bound launch (a function of nothing) or None
# (nothing to launch); a key holds each tensor's address, shape, strides and dtype, so a plan's tensor
# maps (which encode those) stay valid for every call that finds it
_PLANS = {}


def _key(x):
    if type(x).__module__.startswith("torch"):
        return (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x.device)
    return (x.ctypes.data, x.shape, x.strides, x.dtype)


_SMEM = 232448  # bytes of shared memory a block may have on sm_90

# promoted accumulation: block_n -> the pieces its columns are cut into (PROMOTE), so that the
# f32 sum (block_n / 2 registers) and two partials (block_n / pieces each) take 192 registers
# at most of the consumers' 232 (docs/ops.md: why these widths)
_PROMOTE_PIECES = {64: 1, 128: 1, 192: 2, 256: 4}


def _choose(m, n, sms, block_n, stages, isz, widths=(64, 128, 256), bm=BM):
    """(block_n, stages): the widest tile (``bm`` rows) that still gives every SM work, then
    as many stages as fit beside the epilogue's staging tile."""
    if bm == 64:        # each consumer warpgroup takes half the columns: 64 at least
        widths = tuple(w for w in widths if w >= 128)
    if block_n is None:
        block_n = widths[0]
        for bn in (256, 128):
            if -(-m // bm) * -(-n // bn) >= sms:
                block_n = bn
                break
    if block_n not in widths:
        _err(f"block_n must be {', '.join(map(str, widths[:-1]))} or {widths[-1]}"
             f"{' with block_m=64' if bm == 64 else ''}, got {block_n!r}")
    stage = (bm + block_n) * 128                 # one 128-byte K row of A and B tiles
    fit = (_SMEM - 1024 - bm * block_n * isz) // stage
    if stages is None:      # deeper where they fit (narrow tiles of memory-bound shapes): H100,
        # 128 x 8192 x 8192 at 128 x 64: 8 stages 0.95x cuBLAS, 6 0.92-0.95x (docs/ops.md)
        stages = min(fit, 8)
    if not 1 <= stages <= fit:
        _err(f"stages={stages}: {fit} stages of {stage} bytes fit in shared memory with a "
             f"{block_n}-wide tile")
    return int(block_n), int(stages)     # (numpy integers too: TensorMap boxes take ints)


# split-K: the fewest K stages a split gets from the rule, so that its f32 partial (BM x BN x 4
# bytes, written once and read once) stays at most a third of the operand bytes it streams:
# 8 stages of a 128 x 256 bf16 tile load 384 KiB against a 128 KiB partial
_MIN_SPLIT_STAGES = 8


def _check_body(body):
    from ..targets.ptx_body import BODIES
    if body is not None and (not isinstance(body, str) or body not in BODIES):
        _err(f"body must be one of {', '.join(map(repr, BODIES))} or None (the plan's "
             f"choice), got {body!r}")


def _check_split_k(split_k):
    """split_k is an integer (numpy's too; bool is not) of at least 1."""
    import numbers
    if isinstance(split_k, bool) or not isinstance(split_k, numbers.Integral):
        _err(f"split_k must be an int (K splits per output tile), got {split_k!r}")
    if split_k < 1:
        _err(f"split_k must be at least 1 (1: no split), got {split_k}")


def _choose_split(m, n, k, bke, sms, block_n, split_k, widest, bm=BM):
    """(block_n, split): ``split_k`` where given (1: no split; the tile ``widest`` columns wide
    unless ``block_n`` says), else the rule: where the tiles of that width number at most half
    the SMs, as many splits as keep tiles x splits <= SMs, each of _MIN_SPLIT_STAGES K stages
    or more (none below 2: no split, and ``block_n`` left to _choose's widths). K is read
    in stages of ``bke``."""
    k_stages = -(-k // bke)
    if split_k is not None:
        if split_k > k_stages:
            _err(f"split_k={split_k} is too large: K = {k} is {k_stages} "
                 f"stage{'s' if k_stages > 1 else ''} of {bke} and each split needs one")
        return (block_n or widest) if split_k > 1 else block_n, int(split_k)
    width = block_n or widest
    tiles = -(-m // bm) * -(-n // width)
    split = min(sms // tiles, k_stages // _MIN_SPLIT_STAGES)
    return (width, split) if split >= 2 else (block_n, 1)


# the rule's tiles (rows, columns) where 128 x 256 tiles number fewer than the SMs; of those
# that stream the fewest operand rows per SM, the first (64 x 128 before 128 x 64: H100,
# 128 x 8192 x 8192, 0.98x against 0.96x cuBLAS; docs/ops.md)
_SMALL_TILES = ((128, 128), (64, 256), (64, 128), (128, 64))
# split-K where the busiest SM's rows times the SMs exceed this many times M + N: one SM streams
# ~75 GB/s, DRAM ~3 TB/s, so ~40 SMs saturate it; measured on the H100 (docs/ops.md), unsplit
# won at 3.1 (128 x 8192 x 8192) and 4.0 (256 x 8192 x 8192), split at 6.0 (128 x 4096 x 8192)
_SPLIT_ABOVE = 5


def _streamed(m, n, bm, bn, sms):
    """The operand rows (of A and of B's transpose, each K long) that the busiest SM streams
    with bm x bn tiles: (bm + bn) per tile, one tile per SM and wave."""
    return -(-(-(-m // bm) * -(-n // bn)) // sms) * (bm + bn)


def _choose_tiling(m, n, k, bke, sms, block_m, block_n, split_k):
    """(rows, columns, splits) of an unpromoted GEMM's tile (columns None: _choose's widths).
    Where ``block_m`` or ``block_n`` is given, or 128 x 256 tiles number at least the SMs:
    ``block_m`` or 128 rows and _choose_split's columns and splits. Otherwise (few rows or
    columns) the tile of _SMALL_TILES (no taller than M needs) whose busiest SM streams the
    fewest operand rows, unsplit where the SMs together stream at most _SPLIT_ABOVE times the
    operands' rows (M + N) or ``split_k`` is 1, else split as _choose_split's rule says."""
    if (block_m is not None or block_n is not None or (split_k or 1) > 1
            or -(-m // BM) * -(-n // 256) >= sms):
        bm = block_m or BM
        return (bm,) + _choose_split(m, n, k, bke, sms, block_n, split_k, 256, bm)
    tiles = [(bm, bn) for bm, bn in _SMALL_TILES if bm == 64 or m > 64]
    bm, bn = min(tiles, key=lambda t: _streamed(m, n, *t, sms))
    if split_k == 1 or _streamed(m, n, bm, bn, sms) * sms <= _SPLIT_ABOVE * (m + n):
        return bm, bn, 1
    return (bm,) + _choose_split(m, n, k, bke, sms, bn, None, bn, bm)


def _split_workspace(torch, a, tiles, split, bn, bm=BM):
    """(partials, counts) of a split-K plan, allocated once with it: ``split`` f32 slots of
    bm x bn per tile, and an int32 arrival count per tile and consumer warp (8), zero (each
    launch leaves them zero)."""
    if split == 1:      # unused: the kernel's pointers need something
        return _args.ones(torch, a, dt.f32), _args.ones(torch, a, dt.i32)
    size = tiles * split * bm * bn
    if size >= 2 ** 31:
        _err(f"split_k={split}: the partial tiles ({size} f32 values) need 32-bit offsets; "
             f"split less")
    if torch is not None:
        return (torch.empty(size, dtype=torch.float32, device=a.device),
                torch.zeros(tiles * 8, dtype=torch.int32, device=a.device))
    np = _np()
    return np.zeros(size, np.float32), np.zeros(tiles * 8, np.int32)


def _plan(a, b, out, sel, blocks, block_n, stages, scaled=False, scale_a=None, scale_b=None,
          out_dtype=None, promote=False, epilogue=(None, None, None), split_k=None,
          block_m=None, body=None):
    if sel.target.name != "sm_90a":
        _err(f"the GEMM kernel needs sm_90a (wgmma and TMA); the current target is "
             f"{sel.target.name}")
    m, k, n, da = _args.operands(a, b, _FP8 if scaled else _DTYPES,
                                 "" if scaled else " (fp8 inputs: opus.ops.scaled_gemm)")
    torch = _torch_of(a)
    d = dt.dtype_from_name(da)
    od = _args.out_dtype(a, out_dtype, scaled)
    if od.name not in ("bf16", "f16", "f32"):
        _err(f"out_dtype must be bf16, f16 or f32, got {od.name}")
    if _strides(a)[1] != 1 and k > 1 and m > 0:
        _err(f"a must be row-major (its last dimension contiguous); its strides are "
             f"{_strides(a)}")
    if tuple(out.shape) != (m, n) or _dtype_name(out) != od.name or (
            _strides(out)[1] != 1 and n > 1 and m > 0):
        _err(f"out must be a row-major {m} x {n} {od.name} matrix, got shape {tuple(out.shape)} "
             f"and dtype {_dtype_name(out)}")
    for name, extent, isz in (("K", k, d.itemsize), ("N", n, od.itemsize)):
        if (extent * isz) % 16:
            _err(f"{name} = {extent} is not a multiple of {16 // isz}: TMA needs every row to "
                 f"start 16-byte aligned")
    mode_a, sa = _args.scale_mode(scale_a, "scale_a", "row of a", m, torch, a)
    mode_b, sb = _args.scale_mode(scale_b, "scale_b", "column of b", n, torch, a)
    bias, act, res = epilogue
    _args.check_operand(bias, "bias", (n,), od, torch)
    _args.check_operand(res, "residual", (m, n), od, torch)
    if act is not None and not callable(act):
        _err(f"activation must be a function of one value (e.g. opus.ops.relu), got {act!r}")
    if split_k is not None:
        _check_split_k(split_k)
    if body == "ptx":  # split-K's atomic counter is not in the PTX body yet (docs/ptx_body.md)
        if split_k not in (None, 1):
            _err(f"split_k={split_k} with body='ptx': the PTX body has no split-K yet (its "
                 f"atomic counter); pass split_k=1 or body='cuda'")
        split_k = 1
    if m == 0 or n == 0 or k == 0:
        return None
    kmajor = _b_major(b, k, n)
    if d.itemsize == 1 and not kmajor:
        _err("fp8 wgmma reads B K-major: pass b as the transpose of a row-major N x K tensor "
             "(w.t())")
    if blocks is None:
        blocks = _sm_count(torch, a) if sel.mode == "gpu" else 4
    bke = 128 // d.itemsize
    bm = _check_block_m(block_m)
    if promote:
        block_n, split = _choose_split(m, n, k, bke, blocks, block_n, split_k, 192)
    else:
        bm, block_n, split = _choose_tiling(m, n, k, bke, blocks, block_m and bm, block_n,
                                            split_k)
    if promote and block_n is None:   # H100, 8192^3 tensor scales: 192 0.89x cuBLAS, 256
        # 0.86x, 128 0.82x (2026-11-24); narrower where the wide tiles leave SMs idle
        block_n = next((w for w in (192, 128) if -(-m // BM) * -(-n // w) >= blocks), 64)
    bn, st = _choose(m, n, blocks, block_n, stages, od.itemsize,
                     tuple(_PROMOTE_PIECES) if promote else (64, 128, 256), bm)
    # promoted accumulation in four pieces (block_n 256) gives wrong sums in the tile's first
    # 64 columns with a PTX body on the H100 (found 2026-11-24, not yet understood: the IR is
    # the C++ body's, which is right), so that plan keeps the C++ body
    wrong_in_ptx = promote and _PROMOTE_PIECES[bn] == 4
    chosen = body is None
    if chosen:          # the PTX body where it renders the plan (split-K's atomics: not yet)
        body = "ptx" if split == 1 and not wrong_in_ptx else "cuda"
    if body == "ptx" and wrong_in_ptx:
        _err("block_n=256 with promoted accumulation and body='ptx': the PTX body's result is "
             "wrong there (a known bug, docs/ptx_body.md); use body='cuda' (the default for "
             "this tile) or another block_n")
    bt = (b.t() if torch is not None else b.T) if kmajor else b
    ta = opus.TensorMap(a, (bm, bke), swizzle=128)
    tb = (opus.TensorMap(bt, (bn, bke), swizzle=128) if kmajor
          else opus.TensorMap(b, (bke, 64), swizzle=128))
    if od.itemsize != 2:
        _err(f"out_dtype {od.name}: the epilogue stores 2-byte elements (bf16, f16)")
    tc = opus.TensorMap(out, (16, 64), swizzle=128)
    ones = _args.ones(torch, a, dt.f32)
    dummy = _args.ones(torch, a, od)
    smem = st * (bm + bn) * 128 + bm * bn * od.itemsize
    tiles = -(-m // bm) * -(-n // bn)
    args = (ta, tb, tc, m, n, k, ones if sa is None else sa, ones if sb is None else sb,
            dummy if bias is None else bias, dummy if res is None else res,
            *_split_workspace(torch, a, tiles, split, bn, bm))
    constexprs = dict(DT=d, OUT=od, BN=bn, STAGES=st, B_KMAJOR=kmajor, SCALES=(mode_a, mode_b),
                      PROMOTE=_PROMOTE_PIECES[bn] if promote else 0,
                      EPILOGUE=(bias is not None, act, res is not None), SPLIT=split,
                      BLOCK_M=bm)
    grid = max(1, min(blocks, tiles * split))
    # bound once: a repeated call runs the entry (no keyword binding or entry key per call,
    # which cost the eager call tens of microseconds on the H100's host)
    try:
        launch = gemm_kernel_for(od, promote, body)[grid, _THREADS]
        run, full = launch.bind_entry(*args, **constexprs)
    except PtxBodyRefusal:      # the activation uses what a PTX body lacks (exp, tanh)
        if not chosen:
            raise
        launch = gemm_kernel_for(od, promote, "cuda")[grid, _THREADS]
        run, full = launch.bind_entry(*args, **constexprs)
    by_address = _ByAddress(run, launch, full, smem, (ones, dummy), kmajor, od)
    if split > 1:
        by_address.spaces = _fast_call.Workspaces(
            a, lambda: _split_workspace(torch, a, tiles, split, bn, bm))
    return _Bound(run, launch, full, smem, by_address)


class _Bound:
    """A plan's launch with its bound entry (``run``) and arguments (``full``: the tensor
    maps of the planned tensors); ``by_address`` makes the fast path's call from it."""

    __slots__ = ("run", "launch", "full", "smem", "by_address")

    def __init__(self, run, launch, full, smem, by_address):
        self.run, self.launch, self.full, self.smem = run, launch, full, smem
        self.by_address = by_address

    def __call__(self):
        self.run(self.launch, self.full, self.smem, None)


class _ByAddress:
    """What a launch by addresses of a plan's layout needs: the entry, the arguments after
    the pointers (the split workspace, per stream where split, and the constexprs), the
    unused pointers' stand-ins, and how the tensor maps are made (``call``)."""

    __slots__ = ("run", "launch", "full", "smem", "stand_ins", "kmajor", "od", "spaces")

    def __init__(self, run, launch, full, smem, stand_ins, kmajor, od):
        self.run, self.launch, self.full, self.smem = run, launch, full, smem
        self.stand_ins, self.kmajor, self.od, self.spaces = stand_ins, kmajor, od, None

    def call(self, a, out_given):
        """``call(a, b, out, scale_a, scale_b, bias, residual)`` for tensors of the planned
        layouts (the call key says so): out made when None (``out_given`` False), the tensor
        maps by address (each encoded once per address), the other operands by address, on
        torch's current stream; returns out."""
        run, launch, smem, full = self.run, self.launch, self.smem, self.full
        m, n, k = full[3:6]
        map_a, map_b, map_c = _maps_at(full[0]), _maps_at(full[1], self.kmajor), _maps_at(full[2])
        one, dummy = (x.data_ptr() for x in self.stand_ins)
        rest = _fast_call.by_address(full[10:] if self.spaces is None else full[12:])
        spaces = self.spaces.args if self.spaces is not None else (lambda h: ())
        new_out = None if out_given else _rows.allocator(a, self.od, (m, n))
        stream, device = _fast_call.torch_stream(), a.get_device()

        def call(a, b, out, scale_a, scale_b, bias, residual):   # (stand-ins: kept by _args)
            if out is None:
                out = new_out()
            h = stream(device)
            run(launch, (map_a(a), map_b(b), map_c(out), m, n, k,
                         one if scale_a is None else scale_a.data_ptr(),
                         one if scale_b is None else scale_b.data_ptr(),
                         dummy if bias is None else bias.data_ptr(),
                         dummy if residual is None else residual.data_ptr())
                + spaces(h) + rest, smem, h)
            return out
        return call


_MAPS_KEPT = 4096     # encoded maps kept per planned map (128 bytes each): one per address


def _maps_at(tm, transposed=False):
    """``map_of(x)``: the 128-byte encoding of a tensor map like ``tm`` (its box, swizzle and
    the layout the call key fixes) over tensor x (over x's transpose where ``transposed``: b
    K-major), encoded once per address: x's address is all that differs between the tensors
    of one call key."""
    kept = {tm.address: tm.encode()}
    box, swizzle = tm.box, tm.swizzle

    def map_of(x):
        p = x.data_ptr()
        e = kept.get(p)
        if e is None:
            if len(kept) >= _MAPS_KEPT:
                kept.clear()
            e = kept[p] = opus.TensorMap(x.t() if transposed else x, box,
                                         swizzle=swizzle).encode()
        return e
    return map_of


def _check_block_m(block_m):
    """The tile's rows: ``block_m`` (128 or 64; gemm's option, bf16/f16 only), 128 by
    default."""
    if block_m is None:
        return BM
    import numbers
    if (isinstance(block_m, bool) or not isinstance(block_m, numbers.Integral)
            or block_m not in (64, 128)):
        _err(f"block_m must be 64 or 128 (the sm_90a tile's rows), got {block_m!r}")
    return int(block_m)


# -- activations for the epilogue (functions of one f32 value, written with opus operations) ------

def relu(x):
    """max(x, 0), NaN kept (as torch.relu)."""
    return opus.select(x < 0.0, 0.0, x)


def gelu_tanh(x):
    """GELU with the tanh approximation (torch.nn.functional.gelu(x, approximate="tanh"))."""
    return 0.5 * x * (1.0 + opus.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def silu(x):
    """x * sigmoid(x) (torch.nn.functional.silu)."""
    return x / (1.0 + opus.exp(-x))


_SMS = {}


def _sm_count(torch, a):
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    if dev not in _SMS:
        _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SMS[dev]
