"""GEMM on AMD CDNA3/CDNA4 (gfx942, gfx950): ``opus.ops.gemm(a, b)`` = a @ b and
``opus.ops.scaled_gemm(a, b, scale_a, scale_b)`` for fp8, written with the public language
(issue 12).

* Block tile BM x BN x 32 (BM 128 or 256; BN 64 to 256, 256 x 192 by default for a K-major B:
  the densest tile whose accumulators fit beside the operands), 256 threads = 2 x 2 waves: a
  tiled MFMA (``make_tiled_mma``) of 16 x 16 atoms with swapped operands (each lane then
  holds four consecutive columns of C: 8-byte stores), each wave BM/2 x BN/2 of C in f32
  accumulators. gfx942 issues v_mfma_f32_16x16x16{bf16_1k,f16} twice per 32-deep slice,
  gfx950 its 16x16x32 form once. ``min_blocks=1``: one block per CU, a wave may hold 512
  registers.
* Operands go global -> registers -> LDS -> registers. Global loads are bounded buffer loads
  (the hardware range check gives zeros past M, N and the array's end) at loop-invariant
  per-lane offsets, the K step riding in the instruction's scalar offset (``soffset``).
  Register staging double-buffers them: the next K tile's loads are issued before the current
  tile's MFMAs and written to the other of two LDS stages after them, one barrier per tile.
* LDS holds both operands K-major ([row][k], 32 k per row, 64 bytes) with the 16-byte chunks
  XOR-swizzled by (row // 2) % 4 (``_lds``): the MFMA reads (16 rows x 16 bytes per 16 lanes)
  and the 16-byte staging writes fall in distinct bank groups for every 8 lanes (no
  conflicts), and every offset is still a per-lane base plus a constant (immediate offsets,
  no per-access arithmetic).
* Each lane reads 8 consecutive k of a row per 16-byte LDS read. On gfx942 the first four feed
  the first 16-deep MFMA and the last four the second: a permutation of K applied alike to A
  and B, which leaves the product unchanged (inventory 1.18) and halves the reads.
* The main loop runs two K tiles per iteration (stages 0 and 1 fixed), its loads unmasked;
  the last tile's loads (K not a multiple of 32) are masked by a per-lane predicate on k and
  peeled out of the loop with the tile before it. Scheduling: ``sched_group_barrier`` puts
  the next tile's global loads first and this tile's LDS reads next, ``sched_barrier`` keeps
  the MFMAs before the next tile's writes, and explicit ``s_waitcnt``s (one for the loads,
  two for the LDS reads, halves of A) replace one wait per access.
* B row-major (K x N, N contiguous) is transposed on its way into LDS (element stores), so the
  MFMA reads are the same; columns past N are moved out of the buffer's range once, before the
  loop.
* Epilogue, from the accumulators' registers (no LDS round trip), one 32-row strip of the wave
  tile (an MFMA row repeat) at a time, so that its loads and temporaries add a strip's
  registers, not the whole tile's: optional bias (gathered per column once per tile),
  activation (a Python function of one f32, traced per element) and residual (gathered per
  element through the accumulators' layout), in f32, then one rounding to the output type;
  bias and residual are read through bounded views (zeros past N and M x N). Stored 4 columns
  at a time where the tile is inside C, element by element (masked) at its ragged edge.

Vector widths: A and K-major B are loaded 8 elements (16 bytes) at a time when K is a multiple
of 8 (else 4, 2, 1), row-major B likewise by N; C is stored 4 at a time when N allows.

fp8 (``scaled_gemm``: the chip's encoding, FNUZ on gfx942, OCP on gfx950; B K-major): the same
kernel with 64-byte LDS rows holding 64 k (BK = 64, 16 elements per 16-byte access), two
v_mfma_f32_16x16x32_fp8_fp8 per slice on both chips fed from one 16-byte LDS read cut into
two 64-bit words (``_mfma_words``: bit casts, where the tiled MMA's slices of an 8-bit float
vector would be rendered byte by byte), and f32 scales (one value, per row of A, per column
of B) applied in the epilogue before the bias.
"""
from __future__ import annotations

import opus
from opus import dtypes as dt
from opus.targets.base import UnsupportedOnTarget
from opus.ir import Value, type_str
from . import _gemm_args as _args
from ._gemm_args import (err as _err, operands as _operands, strides as _strides,
                         b_major as _b_major, dtype_name as _dtype_name, torch_of as _torch_of,
                         new_out as _new_out)

__all__ = ["gemm", "scaled_gemm", "GEMM_AMD", "kernel_for", "lds_bytes"]

ROW_BYTES = 64          # K per LDS stage row: 32 bf16/f16 (one 32-deep slice) or 64 fp8
_THREADS = 256          # 2 x 2 waves of 64


def bk_of(itemsize):
    """Elements of K per stage (one LDS row of 64 bytes)."""
    return ROW_BYTES // itemsize


def lds_bytes(bm, bn):
    """Bytes of LDS a block tile of bm x bn uses (two stages of A and B, 64-byte rows)."""
    return 2 * (bm + bn) * ROW_BYTES


def _lds(row, k, bk):
    """LDS element offset of (row, k) in a stage of rows of bk elements (64 bytes, two rows
    per 128-byte bank line): the 16-byte chunk k // (bk / 4) is XORed with (row // 2) % 4
    (CuTe's Swizzle<2, 3, 3> on the 2-byte element offset). Rows 0..7 of one chunk (8 lanes of
    an MFMA read) and the 8 chunks of rows r, r + 1 (8 lanes of a staging write) then fill the
    8 bank groups of a line once each. The XOR depends on row % 8 only, which is fixed per
    lane in every access here, so offsets stay a per-lane base plus constants."""
    return row * bk + (k ^ (((row >> 1) & 3) * (bk // 4)))


def _kmajor_loads(rows, ld, V, r0, bk):
    """Per-lane (global offsets, LDS offsets) of a tile of ``rows`` x bk from a K-contiguous
    matrix with leading dimension ``ld``, starting at row ``r0``, V elements per load: thread t
    loads row t // (bk/V) + pass * (256 V / bk), columns V * (t % (bk/V)). Rows at or past the
    bound read zeros through the buffer's range check."""
    ch = bk // V
    rp = _THREADS // ch
    t = opus.thread_id_x()
    row, kc = t // ch, (t % ch) * V
    goff = [(r0 + row + rp * p) * ld + kc for p in range(rows // rp)]
    # the swizzle depends on row % 8: passes of a multiple of 8 rows keep it (a constant
    # step), fewer (1-byte elements one at a time: 4 rows) change it
    loff = [_lds(row, kc, bk) + rp * bk * p if rp % 8 == 0 else _lds(row + rp * p, kc, bk)
            for p in range(rows // rp)]
    return goff, loff, kc


def _gemm_for(DT, OUT):
    """The GEMM kernel reading ``DT`` operands (bf16, f16, or the chip's fp8) and writing
    ``OUT`` (bias, residual: ``OUT``)."""
    BK = bk_of(DT.itemsize)
    RV = 16 // DT.itemsize      # elements of one 16-byte LDS read

    @opus.kernel(block=_THREADS, min_blocks=1)
    def gemm_amd(a: opus.Ptr[DT], b: opus.Ptr[DT], c: opus.Ptr[OUT], M: opus.i32, N: opus.i32,
                 K: opus.i32, bias: opus.Ptr[OUT], residual: opus.Ptr[OUT],
                 scale_a: opus.Ptr[opus.f32], scale_b: opus.Ptr[opus.f32],
                 BM: opus.constexpr = 256, BN: opus.constexpr = 128,
                 ATOM_K: opus.constexpr = 16, VA: opus.constexpr = 8, VB: opus.constexpr = 8,
                 VC: opus.constexpr = 4, B_KMAJOR: opus.constexpr = True,
                 SCHED: opus.constexpr = True, EPILOGUE: opus.constexpr = (False, None, False),
                 SCALES: opus.constexpr = (0, 0)):
        """C (M x N) = A (M x K, row-major) @ B: B is K x N row-major, or with B_KMAJOR the
        N x K row-major tensor whose transpose is B. Grid: (ceil(N / BN), ceil(M / BM)).
        VA divides K; VB divides K (B_KMAJOR) or N; VC divides N.
        SCALES (scale_a's, scale_b's): 0 none, 1 one value, 2 one per row of A / column of B;
        C is multiplied by them first. EPILOGUE (has bias, activation or None, has residual):
        C = activation(C + bias[n]) + residual[m, n]. All in f32 before the one rounding to
        OUT (the pointers of absent pieces are not read)."""
        EM, EN = BM // 32, BN // 32
        tmma = opus.make_tiled_mma(opus.make_mma(DT, DT, opus.f32, (16, 16, ATOM_K),
                                                 swap_ab=True),
                                   (EM, EN, BK // ATOM_K), (2, 2, 1))
        # the same MFMAs over half of the rows (the first or last EM/2 repeats)
        half_mma = opus.make_tiled_mma(tmma.atom, (EM // 2, EN, BK // ATOM_K), (2, 2, 1))
        acc_len = tmma.elem_c
        m0, n0 = opus.block_id_y() * BM, opus.block_id_x() * BN
        t, lane = opus.thread_id_x(), opus.lane_id()
        wm, wn = opus.warp_id() // 2, opus.warp_id() % 2
        a_stage, b_stage = BM * BK, BN * BK
        sa = opus.alloc_smem(DT, 2 * a_stage)
        sb = opus.alloc_smem(DT, 2 * b_stage)
        # bounds written as multiples of the vector width (the host picks widths dividing K
        # and N), so the renderer knows every vector lies wholly inside or outside
        a_bound = M * (K // VA * VA)
        ga = opus.make_gmem(a, a_bound)
        a_goff, a_loff, a_kc = _kmajor_loads(BM, K, VA, m0, BK)
        if B_KMAJOR:
            b_bound = N * (K // VB * VB)
            gb = opus.make_gmem(b, b_bound)
            b_goff, b_loff, b_kc = _kmajor_loads(BN, K, VB, n0, BK)
        else:
            b_bound = K * (N // VB * VB)
            gb = opus.make_gmem(b, b_bound)
            chb = BN // VB
            rpb = _THREADS // chb
            bk_row, bn_col = t // chb, (t % chb) * VB
            col_in = n0 + bn_col < N
            b_goff = [opus.select(col_in, (bk_row + rpb * p) * N + n0 + bn_col, b_bound)
                      for p in range(BK // rpb)]
            b_loff = [bk_row + rpb * p for p in range(BK // rpb)]   # k of each pass
        # MFMA operand reads: lane l reads RV consecutive k (16 bytes) at RV (l // 16) of row
        # 32 e + 16 w + l % 16 (the tiled MMA's row of atom repeat e in wave w)
        r16, k8 = lane % 16, (lane // 16) * RV
        a_read = _lds(16 * wm + r16, k8, BK)
        b_read = _lds(16 * wn + r16, k8, BK)

        def load_tile(k0, masked):
            """The K tile at k0 into registers: [A loads], [B loads]."""
            # k0 >= 0 as unsigned: the scalar offset's clamp then needs no negative test (for
            # 1-byte elements a signed one adds a compare and branch per load)
            so = opus.cast(k0, opus.u32)
            if masked:
                av = [ga.load_if(a_kc + k0 < K, o, vec=VA, soffset=so) for o in a_goff]
            else:
                av = [ga.load(o, vec=VA, soffset=so) for o in a_goff]
            if B_KMAJOR and masked:
                bv = [gb.load_if(b_kc + k0 < K, o, vec=VB, soffset=so) for o in b_goff]
            elif B_KMAJOR:
                bv = [gb.load(o, vec=VB, soffset=so) for o in b_goff]
            else:   # rows past K lie past the bound: zeros without a mask
                bv = [gb.load(o, vec=VB, soffset=k0 * N) for o in b_goff]
            return av, bv

        def stage_tile(regs, stage):
            """Registers of a K tile into LDS stage ``stage`` (0/1, static or run-time)."""
            av, bv = regs
            for v, o in zip(av, a_loff):
                sa.store(v, o + stage * a_stage, vec=VA)
            for v, o in zip(bv, b_loff):
                if B_KMAJOR:
                    sb.store(v, o + stage * b_stage, vec=VB)
                else:     # transposed: element e of the n-vector is row n + e of [n][k]
                    for e in range(VB):
                        sb.store(v[e] if VB > 1 else v,
                                 _lds(bn_col + e, o, BK) + stage * b_stage)

        def mma_tile(stage, acc):
            """acc += the K tile in LDS stage ``stage``: B's reads and the first half of A's,
            one wait, the MFMAs of that half while the rest of A arrives, one wait, the
            other half (two waits instead of one per A read)."""
            bv = [sb.load(b_read + stage * b_stage + e * 32 * BK, vec=RV) for e in range(EN)]
            av = [sa.load(a_read + stage * a_stage + e * 32 * BK, vec=RV) for e in range(EM)]
            opus.sched_barrier(0)
            opus.s_waitcnt(lgkmcnt=EM // 2)
            half = acc_len // 2
            lo = half_tile(av[:EM // 2], bv, acc[:half])
            opus.s_waitcnt(lgkmcnt=0)
            hi = half_tile(av[EM // 2:], bv, acc[half:])
            return opus.concat(lo, hi)

        def half_tile(av, bv, acc):
            """The MFMAs of half of the row repeats: the tiled MMA on the reads' vectors, or
            for 8-bit floats _mfma_words (their slices would be rendered byte by byte)."""
            if DT.itemsize == 1:
                return _mfma_words(tmma.atom, av, bv, acc, BK // ATOM_K)
            return half_mma(opus.concat(*av), opus.concat(*bv), acc)

        def step(stage, acc, regs, k_next, mode):
            """One K tile: stage its registers, then load tile k_next (mode: None, 'plain',
            'masked') while the MFMAs of this one run."""
            opus.s_waitcnt(vmcnt=0)     # this tile's loads landed: one wait, not one a write
            stage_tile(regs, stage)
            opus.sync_threads()
            if mode is not None:
                regs = load_tile(k_next, mode == "masked")
            if SCHED and mode == "plain":
                _order(len(regs[0]) + len(regs[1]), EM + EN)
            acc = mma_tile(stage, acc)
            opus.sched_barrier(0)   # MFMAs stay before the next tile's writes and barrier
            return acc, regs

        tiles = (K + BK - 1) // BK
        acc = tmma.zeros_c()
        regs = load_tile(0, True)
        # tiles 0 .. tiles-3 load their successor unmasked, two per iteration (fixed stages)
        for j in opus.range((tiles - 2) // 2):
            k0 = j * (2 * BK)
            acc, regs = step(0, acc, regs, k0 + BK, "plain")
            acc, regs = step(1, acc, regs, k0 + 2 * BK, "plain")
        if (tiles > 2) & ((tiles - 2) % 2 == 1):
            acc, regs = step(0, acc, regs, (tiles - 2) * BK, "plain")
        if tiles >= 2:      # the tile before the last loads the last one, masked
            acc, regs = step((tiles - 2) % 2, acc, regs, (tiles - 1) * BK, "masked")
        # (tiles + 1) % 2: the last tile's stage, and a valid one when K = 0 (no tiles: the
        # masked loads read zeros and the epilogue still runs)
        acc, regs = step((tiles + 1) % 2, acc, regs, 0, None)

        # one MFMA row repeat of the wave tile: 32 rows of the block (2 waves x 16), EN atoms
        strip = opus.make_tiled_mma(tmma.atom, (1, EN, BK // ATOM_K), (2, 2, 1))
        whole = (m0 + BM <= M) & (n0 + BN <= N)
        _write_c(acc, c, (scale_a, scale_b, SCALES), bias, residual, strip, EM, whole, m0, n0,
                 M, N, VC, EPILOGUE, OUT)
    return gemm_amd


@opus.func     # a helper with a run-time `if` (opus's own functions are otherwise called as is)
def _write_c(acc, c, scales, bias, residual, strip, strips, whole, m0, n0, M, N, VC, epilogue,
             out):
    """C = the epilogue of the accumulators rounded to ``out``, one strip (``strip``'s 32 rows,
    acc's next strip.elem_c values) at a time, from registers (no LDS round trip): a strip's
    loads and activation temporaries are all the epilogue adds to the accumulators'
    registers. In f32: the scales (``scales``: scale_a, scale_b, SCALES), then EPILOGUE (bias,
    activation, residual). Per-column scales and the bias are gathered once (every strip has
    the same columns), per-row scales and the residual per strip, through the accumulator's
    layout, VC at a time (VC divides N: a vector lies wholly inside or outside a row), from
    bounded views that read zeros past M, N and M x N. A ``whole`` tile is stored VC columns
    at a time, a tile at C's ragged edge element by element (masked)."""
    has_bias, act, has_res = epilogue
    scale_a, scale_b, (mode_a, mode_b) = scales
    row = N // VC * VC      # = N, written so the renderer knows no vector straddles a bound
    gc, gr = opus.make_gmem(c, M * row), opus.make_gmem(residual, M * row)
    uc = strip.layout_c((N, 1)) + (m0 * N + n0)
    cols = strip.layout_c((0, 1)) + n0
    f = (opus.make_gmem(scale_a, 1)[0] if mode_a == 1 else 1.0) * (
        opus.make_gmem(scale_b, 1)[0] if mode_b == 1 else 1.0)
    if mode_b == 2:
        fb = opus.make_gmem(scale_b, row).load(cols, vec=VC)
    if has_bias:
        bv = opus.cast(opus.make_gmem(bias, row).load(cols, vec=VC), opus.f32)
    per = strip.elem_c
    for i in range(strips):
        d, off = acc[i * per:(i + 1) * per], uc + 32 * i * N
        if mode_a == 1 or mode_b == 1:
            d = d * f
        if mode_a == 2:     # one row per lane in a strip: the same address, loaded once
            d = d * opus.make_gmem(scale_a, M).load(strip.layout_c((1, 0)) + (m0 + 32 * i),
                                                    vec=1)
        if mode_b == 2:
            d = d * fb
        if has_bias:
            d = d + bv
        if act is not None:
            d = opus.make_vector(*[_activated(act, d[e]) for e in range(per)])
        if has_res:
            d = d + opus.cast(gr.load(off, vec=VC), opus.f32)
        d = opus.cast(d, out)
        if whole:
            gc.store(d, off, vec=VC)
        else:
            gc.store_if(strip.inside_c(M - m0 - 32 * i, N - n0), d, off, vec=1)


@opus.func     # a helper, so that the activation is traced as one (run-time `if`s in it work)
def _activated(act, x):
    """act(x) as one f32 value; a function returning anything else (a vector, a bool, a
    pointer) is refused, naming it and the line defining it."""
    y = act(x)
    number = isinstance(y, (int, float)) and not isinstance(y, bool)
    scalar = isinstance(y, Value) and isinstance(y.type, dt.DType) and (
        y.type.is_float or y.type.is_int)
    if not (number or scalar):
        code = getattr(act, "__code__", None)
        where = f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""
        got = type_str(y.type) if isinstance(y, Value) else type(y).__name__
        raise opus.TraceError(f"activation {getattr(act, '__name__', act)!r}{where} must "
                              f"return one number (an f32) for its one f32 value, got {got}")
    return opus.cast(y, opus.f32) if scalar else opus.f32(y)


def _mfma_words(atom, av, bv, acc, ek):
    """acc + the MFMAs of A reads ``av`` (one per row repeat) and B reads ``bv`` (one per
    column repeat) in the tiled MMA's order (k piece, row repeat, column repeat; acc holds
    the atoms' accumulators row repeat by column repeat), each 16-byte read cut into ``ek``
    operands of 8 bytes through 64-bit words: bit casts, where slices and concatenations of
    8-bit float vectors would be rendered byte by byte."""
    word = opus.vector_type(opus.u64, 2)
    operand = opus.vector_type(atom.dtype_a, atom.elem_a)

    def pieces(v):
        w = opus.bitcast(v, word)
        return [opus.bitcast(w[kk], operand) for kk in range(ek)]

    a8, b8 = [pieces(v) for v in av], [pieces(v) for v in bv]
    n, en = atom.elem_c, len(bv)
    cs = [acc[i * n:(i + 1) * n] for i in range(len(av) * en)]
    for kk in range(ek):
        for i in range(len(av)):
            for j in range(en):
                cs[i * en + j] = atom(a8[i][kk], b8[j][kk], cs[i * en + j])
    return opus.concat(*cs)


def _order(loads, reads):
    """The order of a tile's memory instructions after its barrier, for the scheduler
    (sched_group_barrier masks: 0x20 VMEM reads, 0x100 DS reads): the next tile's global
    loads first, so their latency hides behind every MFMA of this tile, then this tile's LDS
    reads."""
    opus.sched_group_barrier(0x20, loads, 0)
    opus.sched_group_barrier(0x100, reads, 0)


GEMM_AMD = {d: _gemm_for(d, d) for d in (dt.bf16, dt.f16)}
_KERNELS = {(d.name, d.name): k for d, k in GEMM_AMD.items()}


def kernel_for(in_dtype, out_dtype):
    """The kernel reading ``in_dtype`` and writing ``out_dtype`` (made at first use)."""
    key = (in_dtype.name, out_dtype.name)
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = _gemm_for(in_dtype, out_dtype)
    return k


# -- host side ---------------------------------------------------------------------------------

_BLOCK_M = (128, 256)
_BLOCK_N = {True: (64, 128, 192, 256), False: (64, 128, 256)}   # by B_KMAJOR


def _widest(extent, most=8):
    """The widest vector (<= most elements) that divides ``extent``: rows then start aligned."""
    v = most
    while extent % v:
        v //= 2
    return v


def _choose(m, n, kmajor, block_m, block_n):
    """(BM, BN): 256 rows where M has more than 128, 192 columns (B K-major; the densest tile
    whose accumulators fit beside the operands) or 128 where N has more than 128, else the
    narrowest that covers M, N."""
    if block_m is None:
        block_m = 256 if m > 128 else 128
    if block_n is None:
        block_n = (192 if kmajor else 128) if n > 128 else (128 if n > 64 else 64)
    if block_m not in _BLOCK_M:
        _err(f"block_m must be 128 or 256, got {block_m!r}")
    if block_n not in _BLOCK_N[kmajor]:
        allowed = ", ".join(map(str, _BLOCK_N[kmajor]))
        layout = "K-major B (w.t())" if kmajor else "row-major B"
        _err(f"block_n must be one of {allowed} with {layout}, got {block_n!r}")
    if block_m * block_n > 256 * 192:
        _err(f"a {block_m} x {block_n} block tile needs more accumulator registers than a "
             f"wave has beside its operands (at most 256 x 192)")
    return block_m, block_n


def gemm(a, b, out=None, *, bias=None, activation=None, residual=None, block_m=None,
         block_n=None):
    """``a @ b`` on gfx942/gfx950: torch tensors on the GPU (through the HIP runtime, on the
    current stream), numpy arrays in the interpreter. ``opus.ops.gemm`` calls it when the
    current target is an AMD chip (ops/__init__.py).

    :param a: M x K, bf16 or f16, row-major
    :param b: K x N of a's dtype: row-major, or the transpose of a row-major N x K tensor
    :param out: M x N of a's dtype, row-major (made when None)
    :param bias: N values of the output's type, added to every row
    :param activation: applied after the bias, before the residual: a Python function of one
        f32 value written with opus operations (``opus.ops.relu``, ``gelu_tanh``, ``silu``, or
        your own), traced into the kernel
    :param residual: M x N of the output's type, row-major, added last
    :param block_m: block tile rows, 128 or 256 (default: 256 where M > 128)
    :param block_n: block tile columns: 64, 128, 192 or 256 with a K-major B, 64, 128 or 256
        with a row-major one (default: 192 / 128 where N > 128)
    :returns: out (the epilogue in f32, rounded once)
    :targets: gfx942, gfx950
    """
    sel = _amd_target()
    m, k, n, da = _operands(a, b, ("bf16", "f16"), " (fp8 inputs: opus.ops.scaled_gemm)")
    d = dt.dtype_from_name(da)
    return _run(sel, a, b, out, d, d, (0, None, 0, None), (bias, activation, residual),
                block_m, block_n)


_FP8 = ("fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz")


def scaled_gemm(a, b, scale_a, scale_b, out=None, *, out_dtype=None, fast_accum=False,
                bias=None, activation=None, residual=None, block_m=None, block_n=None):
    """``(a @ b) * scale_a * scale_b`` for 8-bit float ``a`` and ``b`` of one type on
    gfx942/gfx950 (as ``torch._scaled_mm``; ``opus.ops.scaled_gemm`` calls it on an AMD
    target): f32 accumulation (MFMA), scaled once in f32, then the epilogue, rounded once to
    ``out_dtype``. The chip's 8-bit floats: gfx942 FNUZ (fp8_e4m3fnuz, fp8_e5m2fnuz), gfx950
    OCP (fp8_e4m3 = torch.float8_e4m3fn, fp8_e5m2); another is refused with the MFMA table's
    reason.

    :param a: M x K fp8, row-major
    :param b: K x N fp8 of a's type, the transpose of a row-major N x K tensor (``w.t()``)
    :param scale_a: f32: one value (shape () or (1,)) or one per row of a (M or M x 1)
    :param scale_b: f32: one value or one per column of b (N or 1 x N)
    :param out: M x N of ``out_dtype`` (made when None)
    :param out_dtype: bf16 (default), f16 or f32 (torch or opus dtype)
    :param fast_accum: accepted for the NVIDIA signature; the MFMAs accumulate in f32 either
        way (same results)
    :param bias: N values of out_dtype added after the scales; ``activation``, ``residual``:
        as in ``gemm``
    :param block_m: block tile rows, 128 or 256
    :param block_n: block tile columns, 64, 128, 192 or 256
    :returns: out
    :targets: gfx942, gfx950
    """
    sel = _amd_target()
    m, k, n, da = _operands(a, b, _FP8, " (bf16/f16 inputs: opus.ops.gemm)")
    d = dt.dtype_from_name(da)
    try:
        sel.target.mma_instruction(d, d, dt.f32, (16, 16, 32))
    except UnsupportedOnTarget as e:
        _err(f"{da} inputs on {sel.target.name}: {e}")
    od = _args.out_dtype(a, out_dtype, True)
    if od.name not in ("bf16", "f16", "f32"):
        _err(f"out_dtype must be bf16, f16 or f32, got {od.name}")
    torch = _torch_of(a)
    mode_a, sa = _args.scale_mode(scale_a, "scale_a", "row of a", m, torch, a)
    mode_b, sb = _args.scale_mode(scale_b, "scale_b", "column of b", n, torch, a)
    if k > 0 and n > 0 and not _b_major(b, k, n):
        _err("the fp8 GEMM reads B K-major: pass b as the transpose of a row-major N x K "
             "tensor (w.t())")
    return _run(sel, a, b, out, d, od, (mode_a, sa, mode_b, sb), (bias, activation, residual),
                block_m, block_n)


def _amd_target():
    from ..frontend.targeting import current_target
    sel = current_target()
    if sel.target.vendor != "amd":
        _err(f"the AMD GEMM kernel needs gfx942 or gfx950; the current target is "
             f"{sel.target.name}")
    return sel


def _run(sel, a, b, out, d, od, scales, epilogue, block_m, block_n):
    """Check the rest and launch: ``d`` the inputs' type, ``od`` the output's, ``scales``
    (SCALES mode of a, its array, of b, its array), ``epilogue`` (bias, activation, residual)."""
    m, k = a.shape
    n = b.shape[1]
    torch = _torch_of(a)
    if not _contiguous_rows(a, k):
        _err(f"a must be row-major with contiguous rows; its strides are {_strides(a)}")
    if out is None:
        out = _new_out(a, b, od)
    if tuple(out.shape) != (m, n) or _dtype_name(out) != od.name or not _contiguous_rows(out, n):
        _err(f"out must be a row-major {m} x {n} {od.name} matrix with contiguous rows, got "
             f"shape {tuple(out.shape)} and dtype {_dtype_name(out)}")
    bias, activation, residual = epilogue
    _args.check_operand(bias, "bias", (n,), od, torch)
    _args.check_operand(residual, "residual", (m, n), od, torch)
    if activation is not None and not callable(activation):
        _err(f"activation must be a function of one value (e.g. opus.ops.relu), got "
             f"{activation!r}")
    pieces = (bias is not None, activation, residual is not None)
    if m == 0 or n == 0 or (k == 0 and pieces == (False, None, False)):
        _choose(m, n, True, block_m, block_n)   # the options are still checked
        out[...] = 0
        return out
    kmajor = k > 0 and _b_major(b, k, n)   # K = 0 (an epilogue alone): b is never read
    bt = (b.t() if hasattr(b, "t") and callable(b.t) else b.T) if kmajor else b
    if not _contiguous_rows(bt, n if not kmajor else k):
        _err(f"b's rows must be contiguous (no padding between them); its strides are "
             f"{_strides(b)}")
    bm, bn = _choose(m, n, kmajor, block_m, block_n)
    mode_a, sa, mode_b, sb = scales
    one = _args.ones(torch, a, dt.f32)     # the pointer of an absent scale
    dummy = _args.ones(torch, a, od)       # of an absent bias or residual
    wide = 16 // d.itemsize                   # elements of a 16-byte load
    atom_k = 32 if d.itemsize == 1 or sel.target.name == "gfx950" else 16
    grid = (-(-n // bn), -(-m // bm))
    kernel_for(d, od)[grid, _THREADS](
        a, bt, out, m, n, k, dummy if bias is None else bias,
        dummy if residual is None else residual, one if sa is None else sa,
        one if sb is None else sb, BM=bm, BN=bn, ATOM_K=atom_k, VA=_widest(k, wide),
        VB=_widest(k if kmajor else n, wide), VC=_widest(n, 4), B_KMAJOR=kmajor,
        EPILOGUE=pieces, SCALES=(mode_a, mode_b))
    return out


def _contiguous_rows(x, cols):
    """Row-major with rows one after another (what the kernel's offsets r * cols + c assume)."""
    s = _strides(x)
    return x.shape[0] <= 1 or cols == 0 or (s[1] == 1 or cols == 1) and s[0] == cols
