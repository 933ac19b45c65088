"""Cross-lane operations (issue 13.1) in the interpreter against numpy references written from
the vendors' documents (CUDA __shfl_*_sync / PTX shfl.sync, the CDNA3 ISA's DPP and
ds_permute/ds_bpermute), on 32-lane (sm_90a) and 64-lane (gfx942, gfx950) warps: every
primitive, widths, divergent lanes, partial warps, and the checking mode's report of reads
from lanes that do not take part."""
import numpy as np
import pytest

import opus
from opus import f16, f32, f64, i32, i64, u8, u32, bool_

TARGETS = ["sm_90a", "gfx942", "gfx950"]
WS = {"sm_90a": 32, "gfx942": 64, "gfx950": 64}
RNG = np.random.default_rng(13)


def widths(arch):
    return [1 << k for k in range(WS[arch].bit_length())]


# -- references (written from the documents, lane by lane) ----------------------------------------

def ref_shuffle(x, src, mode, width, ws, active=None):
    """CUDA __shfl_*_sync(mask, var, srcLane/delta/laneMask, width) per warp (PTX shfl.sync with
    c = ((32-width)<<8) | clamp; b's low log2(ws) bits). Reads from inactive lanes give 0."""
    n = len(x)
    out = np.zeros_like(x)
    active = np.ones(n, bool) if active is None else active
    for t in range(n):
        warp0, lane = t - t % ws, t % ws
        base = lane - lane % width
        b = int(src[t]) % ws
        if mode == "idx":
            j = base + int(src[t]) % width
        elif mode == "up":
            j = lane - b if lane - b >= base else lane
        elif mode == "down":
            j = lane + b if lane + b <= base + width - 1 else lane
        else:
            j = lane ^ b if (lane ^ b) <= base + width - 1 else lane
        out[t] = x[warp0 + j] if active[warp0 + j] else 0
    return out


@opus.kernel
def shuffle_kernel(x: opus.Ptr[f32], s: opus.Ptr[i32], o: opus.Ptr[f32], MODE: opus.constexpr,
                   W: opus.constexpr, STATIC: opus.constexpr = None, T: opus.constexpr = f32):
    t = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    v = opus.cast(x[t], T)
    src = s[t] if STATIC is None else STATIC
    f = {"idx": opus.shfl, "up": opus.shfl_up, "down": opus.shfl_down, "xor": opus.shfl_xor}[MODE]
    o[t] = opus.cast(f(v, src, width=W), f32)


def run(kernel, arch, grid, block, *args, **cx):
    with opus.set_target(arch, interpret=True):
        kernel[grid, block](*args, **cx)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("mode", ["idx", "up", "down", "xor"])
def test_shuffle_runtime_lane_every_width(arch, mode):
    ws = WS[arch]
    n = 4 * ws
    x = RNG.integers(-1000, 1000, n).astype(np.float32)
    s = RNG.integers(-3 * ws, 3 * ws, n).astype(np.int32)
    for w in widths(arch):
        o = np.full(n, np.nan, np.float32)
        run(shuffle_kernel, arch, 2, 2 * ws, x, s, o, MODE=mode, W=w)
        np.testing.assert_array_equal(o, ref_shuffle(x, s, mode, w, ws), err_msg=f"width {w}")


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("mode,src,w", [
    ("xor", 1, 64), ("xor", 2, 4), ("xor", 3, 16), ("xor", 8, 16), ("xor", 8, 32), ("xor", 2, 2),
    ("xor", 40, 64), ("up", 3, 16), ("up", 15, 16), ("down", 5, 16), ("up", 1, 64),
    ("down", 1, 64), ("idx", 2, 4), ("idx", 37, 64), ("idx", 5, 32), ("up", 17, 16)])
def test_shuffle_compile_time_lane(arch, mode, src, w):
    """Compile-time patterns (AMD lowers many to one DPP move or readlane) give the shuffle's
    result."""
    ws = WS[arch]
    w = min(w, ws)
    n = 2 * ws
    x = RNG.integers(-1000, 1000, n).astype(np.float32)
    o = np.full(n, np.nan, np.float32)
    run(shuffle_kernel, arch, 1, n, x, np.zeros(n, np.int32), o, MODE=mode, W=w, STATIC=src)
    np.testing.assert_array_equal(o, ref_shuffle(x, np.full(n, src), mode, w, ws))


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("T", [f16, u8, i64, f64, bool_])
def test_shuffle_other_types(arch, T):
    """8/16-bit values and bools widen to 32 bits, 64-bit ones move as two halves: exact."""
    ws = WS[arch]
    n = 2 * ws
    if T == f64:
        x = RNG.normal(size=n) * 1e300  # needs all 64 bits
        xs = np.zeros(n, np.float64)
    elif T == i64:
        x = RNG.integers(-2 ** 62, 2 ** 62, n)
    else:
        x = RNG.integers(0, 2 if T == bool_ else 200, n)
    s = RNG.integers(0, ws, n).astype(np.int32)

    @opus.kernel
    def k(x: opus.Ptr[T], s: opus.Ptr[i32], o: opus.Ptr[T]):
        t = opus.thread_id_x()
        o[t] = opus.shfl(x[t], s[t], width=16)

    xa = x.astype(T.np_dtype)
    o = np.zeros(n, T.np_dtype)
    run(k, arch, 1, n, xa, s, o)
    np.testing.assert_array_equal(o, ref_shuffle(xa, s, "idx", 16, ws))


@pytest.mark.parametrize("arch", TARGETS)
def test_shuffle_vector_lane_by_lane(arch):
    ws = WS[arch]

    @opus.kernel
    def k(x: opus.Ptr[f32], o: opus.Ptr[f32]):
        t = opus.thread_id_x()
        v = opus.make_vector(x[2 * t], x[2 * t + 1])
        r = opus.shfl_down(v, 3)
        o[2 * t] = r[0]
        o[2 * t + 1] = r[1]

    x = np.arange(2 * ws, dtype=np.float32)
    o = np.zeros(2 * ws, np.float32)
    run(k, arch, 1, ws, x, o)
    for e in range(2):
        np.testing.assert_array_equal(o[e::2], ref_shuffle(x[e::2], np.full(ws, 3), "down", ws, ws))


# -- divergence: reads from lanes that do not take part ---------------------------------------------

@opus.kernel
def divergent_kernel(x: opus.Ptr[f32], s: opus.Ptr[i32], o: opus.Ptr[f32]):
    t = opus.thread_id_x()
    r = -1.0
    if t % 3 != 0:
        r = opus.shfl(x[t], s[t])  # ERR: divergent
    o[t] = r


@pytest.mark.parametrize("arch", TARGETS)
def test_divergent_shuffle_reads_active_lanes(arch):
    ws = WS[arch]
    n = 2 * ws
    active = np.arange(n) % 3 != 0
    x = np.arange(n, dtype=np.float32) + 1
    # every active lane reads an active lane of its warp: defined
    src = np.array([RNG.choice([l for l in range(ws) if active[t - t % ws + l]])
                    for t in range(n)], np.int32)
    o = np.zeros(n, np.float32)
    with opus.interp.checking():
        run(divergent_kernel, arch, 1, n, x, src, o)
    want = np.where(active, ref_shuffle(x, src, "idx", ws, ws, active), -1)
    np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("arch", TARGETS)
def test_read_from_inactive_lane(arch):
    """Outside checking mode such a read gives 0; checking mode reports it at the line."""
    ws = WS[arch]
    n = ws
    x = np.arange(n, dtype=np.float32) + 1
    src = np.zeros(n, np.int32)  # lane 0 is inactive (0 % 3 == 0)
    o = np.zeros(n, np.float32)
    run(divergent_kernel, arch, 1, n, x, src, o)
    np.testing.assert_array_equal(o, np.where(np.arange(n) % 3 != 0, 0, -1))
    from opus.interp import InactiveLaneReadError
    with opus.interp.checking(), pytest.raises(InactiveLaneReadError) as e:
        run(divergent_kernel, arch, 1, n, x, src, o)
    msg = str(e.value)
    assert "test_cross_lane_interp.py:" in msg and "reads lane 0" in msg and "thread (1, 0, 0)" in msg


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942"])
def test_partial_warp_counts_missing_lanes_as_exited(arch):
    """A block of 1.5 warps: the last warp's missing lanes are never read as values."""
    ws = WS[arch]
    n = ws + ws // 2
    x = np.arange(n, dtype=np.float32) + 1
    s = np.full(n, ws - 1, np.int32)
    o = np.zeros(n, np.float32)
    run(shuffle_kernel, arch, 1, n, x, s, o, MODE="idx", W=ws)
    want = np.concatenate([np.full(ws, x[ws - 1]), np.zeros(ws // 2)])
    np.testing.assert_array_equal(o, want)


# -- DPP (AMD) --------------------------------------------------------------------------------------

def ref_dpp(old, x, ctrl, row_mask, bank_mask, bound_ctrl, active):
    """GFX9 DPP16 (CDNA3 ISA, "DPP"), lane by lane: the source lane of each control, a disabled
    row/bank keeps old, an invalid or inactive source gives 0 (bound_ctrl) or old."""
    out = old.copy()
    ws = 64
    for t in range(len(x)):
        w0, r = t - t % ws, t % ws
        row, p = r // 16, r % 16
        if not (row_mask >> row) & 1 or not (bank_mask >> (p // 4)) & 1:
            continue
        if ctrl <= 0xff:
            s = r - r % 4 + ((ctrl >> (2 * (r % 4))) & 3)
        elif 0x101 <= ctrl <= 0x10f:
            s = r + (ctrl - 0x100) if p + (ctrl - 0x100) < 16 else None
        elif 0x111 <= ctrl <= 0x11f:
            s = r - (ctrl - 0x110) if p >= ctrl - 0x110 else None
        elif 0x121 <= ctrl <= 0x12f:
            s = row * 16 + (p - (ctrl - 0x120)) % 16
        elif ctrl == 0x130:
            s = r + 1 if r < 63 else None
        elif ctrl == 0x138:
            s = r - 1 if r > 0 else None
        elif ctrl == 0x134:
            s = (r + 1) % 64
        elif ctrl == 0x13c:
            s = (r - 1) % 64
        elif ctrl == 0x140:
            s = row * 16 + 15 - p
        elif ctrl == 0x141:
            s = row * 16 + (p // 8) * 8 + 7 - p % 8
        elif ctrl == 0x142:
            s = row * 16 - 1 if row > 0 else None
        else:
            s = 31 if row >= 2 else None
        if s is None or not active[w0 + s]:
            out[t] = 0 if bound_ctrl else old[t]
        else:
            out[t] = x[w0 + s]
    return out


CTRLS = [(opus.dpp.quad_perm(1, 0, 3, 2), 0xb1), (opus.dpp.quad_perm(2, 3, 0, 1), 0x4e),
         (opus.dpp.quad_perm(3, 3, 0, 1), None), (opus.dpp.row_shl(4), 260),
         (opus.dpp.row_shr(4), 276), (opus.dpp.row_shl(1), None), (opus.dpp.row_shr(15), None),
         (opus.dpp.row_ror(5), None), (opus.dpp.wave_shl(), None), (opus.dpp.wave_shr(), None),
         (opus.dpp.wave_rol(), None), (opus.dpp.wave_ror(), None), (opus.dpp.row_mirror(), None),
         (opus.dpp.row_half_mirror(), None), (opus.dpp.row_bcast15(), None),
         (opus.dpp.row_bcast31(), None)]


@opus.kernel
def dpp_kernel(old: opus.Ptr[i32], x: opus.Ptr[i32], o: opus.Ptr[i32], C: opus.constexpr,
               RM: opus.constexpr, BM: opus.constexpr, BC: opus.constexpr,
               DIVERGE: opus.constexpr = False):
    t = opus.thread_id_x()
    r = -7
    if not DIVERGE or t % 5 != 1:
        r = opus.upd_dpp(old[t], x[t], C, row_mask=RM, bank_mask=BM, bound_ctrl=BC)
    o[t] = r


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("ctrl,raw", CTRLS, ids=[repr(c) for c, _ in CTRLS])
def test_dpp_controls(arch, ctrl, raw):
    if raw is not None:
        assert ctrl == raw  # the original's raw numbers (aiter's topk) name the same controls
    n = 128
    old = RNG.integers(-1000, -1, n).astype(np.int32)
    x = RNG.integers(1, 1000, n).astype(np.int32)
    for rm, bm, bc, div in [(0xF, 0xF, True, False), (0xF, 0xF, False, False),
                            (0xA, 0x5, False, False), (0xC, 0x3, True, False),
                            (0xF, 0xF, False, True), (0xF, 0xF, True, True)]:
        o = np.zeros(n, np.int32)
        run(dpp_kernel, arch, 1, n, old, x, o, C=ctrl, RM=rm, BM=bm, BC=bc, DIVERGE=div)
        active = (np.arange(n) % 5 != 1) if div else np.ones(n, bool)
        want = np.where(active, ref_dpp(old, x, int(ctrl), rm, bm, bc, active), -7)
        np.testing.assert_array_equal(o, want, err_msg=f"{ctrl!r} rm {rm:#x} bm {bm:#x} bc {bc}")


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_mov_dpp_unwritten_lanes_are_zero(arch):
    @opus.kernel
    def k(x: opus.Ptr[f32], o: opus.Ptr[f32]):
        t = opus.thread_id_x()
        o[t] = opus.mov_dpp(x[t], opus.dpp.row_shr(2), bank_mask=0b0110, bound_ctrl=False)

    x = np.arange(64, dtype=np.float32) + 1
    o = np.full(64, np.nan, np.float32)
    run(k, arch, 1, 64, x, o)
    want = ref_dpp(np.zeros(64, np.float32), x, 0x112, 0xF, 0b0110, False, np.ones(64, bool))
    np.testing.assert_array_equal(o, want)


# -- votes, lane masks, permutes --------------------------------------------------------------------

@opus.kernel
def vote_kernel(p: opus.Ptr[i32], ob: opus.Ptr[u32], oa: opus.Ptr[i32], M: opus.constexpr):
    t = opus.thread_id_x()
    if t % 4 != 3:
        b = opus.ballot(p[t] != 0)
        m = opus.active_mask()
        bits = opus.make_vector(b, m) if M == 32 else opus.make_vector(
            u32(b), u32(b >> 32), u32(m), u32(m >> 32))
        for i in range(M // 16):
            ob[(M // 16) * t + i] = bits[i]
        oa[3 * t] = i32(opus.any_lanes(p[t]))
        oa[3 * t + 1] = i32(opus.all_lanes(p[t] != 0))
        oa[3 * t + 2] = i32(opus.warp_all(p[t]))


@pytest.mark.parametrize("arch", TARGETS)
def test_ballot_any_all_active_mask(arch):
    ws = WS[arch]
    n = 2 * ws
    active = np.arange(n) % 4 != 3
    for p in [RNG.integers(0, 2, n), np.ones(n, int), np.where(active, 1, 0), np.zeros(n, int)]:
        p = p.astype(np.int32)
        ob = np.zeros((ws // 16) * n, np.uint32)
        oa = np.zeros(3 * n, np.int32)
        run(vote_kernel, arch, 1, n, p, ob, oa, M=ws)
        for w in range(2):
            lanes = range(w * ws, (w + 1) * ws)
            ballot = sum(1 << (t % ws) for t in lanes if active[t] and p[t])
            amask = sum(1 << (t % ws) for t in lanes if active[t])
            anyp = int(any(p[t] for t in lanes if active[t]))
            allp = int(all(p[t] for t in lanes if active[t]))
            for t in lanes:
                if not active[t]:
                    continue
                words = ob[(ws // 16) * t:(ws // 16) * (t + 1)]
                got = [int(v) for v in words]
                want = ([ballot, amask] if ws == 32 else
                        [ballot & 0xFFFFFFFF, ballot >> 32, amask & 0xFFFFFFFF, amask >> 32])
                assert got == want, (t, got, want)
                assert list(oa[3 * t:3 * t + 3]) == [anyp, allp, allp]


@pytest.mark.parametrize("arch", TARGETS)
def test_lane_masks(arch):
    ws = WS[arch]
    T = u32 if ws == 32 else opus.u64

    @opus.kernel
    def k(o: opus.Ptr[T]):
        t = opus.thread_id_x()
        o[4 * t] = opus.lanemask_lt()
        o[4 * t + 1] = opus.lanemask_le()
        o[4 * t + 2] = opus.lanemask_gt()
        o[4 * t + 3] = opus.lanemask_ge()

    o = np.zeros(4 * ws, T.np_dtype)
    run(k, arch, 1, ws, o)
    full = (1 << ws) - 1
    for l in range(ws):
        want = [(1 << l) - 1, (2 << l) - 1, full ^ ((2 << l) - 1), full ^ ((1 << l) - 1)]
        assert [int(v) for v in o[4 * l:4 * l + 4]] == want, l


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_permute_forward(arch):
    """ds_permute: lane (addr>>2)%64 receives; the highest sender wins; no sender gives 0."""
    @opus.kernel
    def k(x: opus.Ptr[i32], a: opus.Ptr[i32], o: opus.Ptr[i32]):
        t = opus.thread_id_x()
        o[t] = opus.permute(x[t], a[t])

    n = 128
    x = np.arange(n, dtype=np.int32) + 100
    a = RNG.integers(0, 64 * 4 * 3, n).astype(np.int32)
    o = np.zeros(n, np.int32)
    run(k, arch, 1, n, x, a, o)
    want = np.zeros(n, np.int32)
    for t in range(n):  # ascending lanes: a later (higher) sender overwrites
        want[t - t % 64 + (a[t] >> 2) % 64] = x[t]
    np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("arch", TARGETS)
def test_bpermute_byte_addresses(arch):
    ws = WS[arch]

    @opus.kernel
    def k(x: opus.Ptr[f32], a: opus.Ptr[i32], o: opus.Ptr[f32]):
        t = opus.thread_id_x()
        o[t] = opus.bpermute(x[t], a[t])

    n = 2 * ws
    x = RNG.normal(size=n).astype(np.float32)
    a = RNG.integers(0, 4 * ws * 4, n).astype(np.int32)
    o = np.zeros(n, np.float32)
    run(k, arch, 1, n, x, a, o)
    want = np.array([x[t - t % ws + (a[t] >> 2) % ws] for t in range(n)], np.float32)
    np.testing.assert_array_equal(o, want)


# -- reductions and scans ---------------------------------------------------------------------------

NP_OPS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}


@opus.kernel
def reduce_kernel(x: opus.Ptr[i32], o: opus.Ptr[i32], OP: opus.constexpr, W: opus.constexpr,
                  T: opus.constexpr, SCAN: opus.constexpr = None):
    t = opus.thread_id_x()
    v = opus.cast(x[t], T)
    if SCAN is None:
        r = opus.warp_reduce(v, OP, width=W)
    else:
        r = opus.warp_scan(v, OP, width=W, exclusive=SCAN == "exclusive")
    o[t] = opus.cast(r, i32)


def ref_reduce(x, op, w, scan=None, identity=0):
    g = x.reshape(-1, w)
    f = NP_OPS[op]
    if scan is None:
        return np.repeat(f.reduce(g, axis=1), w)
    inc = f.accumulate(g, axis=1)
    if scan == "inclusive":
        return inc.reshape(-1)
    exc = np.concatenate([np.full((g.shape[0], 1), identity, g.dtype), inc[:, :-1]], axis=1)
    return exc.reshape(-1)


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("op", list(NP_OPS))
@pytest.mark.parametrize("T", [i32, u32, f32, opus.i16, f64])
def test_warp_reduce(arch, op, T):
    if op in ("and", "or", "xor") and T.is_float:
        pytest.skip("bitwise ops are for integers (the bad-input suite checks the refusal)")
    ws = WS[arch]
    n = 2 * ws
    lo = 0 if T == u32 else -300
    x = RNG.integers(lo, 300, n).astype(np.int32)
    for w in widths(arch):
        o = np.zeros(n, np.int32)
        run(reduce_kernel, arch, 1, n, x, o, OP=op, W=w, T=T)
        xv = x.astype(np.int64)
        want = ref_reduce(xv, op, w)
        if T == opus.i16 and op == "sum":
            want = want.astype(np.int16).astype(np.int64)
        np.testing.assert_array_equal(o, want, err_msg=f"width {w}")


@pytest.mark.parametrize("arch", TARGETS)
@pytest.mark.parametrize("op", ["sum", "max", "min", "xor", "and"])
@pytest.mark.parametrize("scan", ["inclusive", "exclusive"])
def test_warp_scan(arch, op, scan):
    ws = WS[arch]
    n = 2 * ws
    x = RNG.integers(-300, 300, n).astype(np.int32)
    identity = {"sum": 0, "max": -2 ** 31, "min": 2 ** 31 - 1, "xor": 0, "and": -1}[op]
    for w in widths(arch):
        o = np.zeros(n, np.int32)
        run(reduce_kernel, arch, 1, n, x, o, OP=op, W=w, T=i32, SCAN=scan)
        want = ref_reduce(x.astype(np.int64), op, w, scan, identity).astype(np.int32)
        np.testing.assert_array_equal(o, want, err_msg=f"width {w}")


@pytest.mark.parametrize("arch", TARGETS)
def test_float_reduce_nan_and_signed_zero(arch):
    """max skips a NaN (opus.max's rule), a group of NaNs gives NaN, -0.0 sums stay -0.0."""
    ws = WS[arch]

    @opus.kernel
    def k(x: opus.Ptr[f32], o: opus.Ptr[f32], OP: opus.constexpr):
        t = opus.thread_id_x()
        o[t] = opus.warp_reduce(x[t], OP)

    x = np.full(2 * ws, -0.0, np.float32)
    o = np.zeros(2 * ws, np.float32)
    run(k, arch, 1, 2 * ws, x, o, OP="sum")
    assert np.all(np.signbit(o)) and np.all(o == 0)
    x = np.arange(2 * ws, dtype=np.float32)
    x[3] = np.nan
    x[ws:] = np.nan
    run(k, arch, 1, 2 * ws, x, o, OP="max")
    assert np.all(o[:ws] == ws - 1) and np.all(np.isnan(o[ws:]))


@pytest.mark.parametrize("arch", TARGETS)
def test_f16_and_vector_reduce(arch):
    ws = WS[arch]

    @opus.kernel
    def k(x: opus.Ptr[f16], o: opus.Ptr[f16]):
        t = opus.thread_id_x()
        v = opus.make_vector(x[2 * t], x[2 * t + 1])
        r = opus.warp_reduce(v, "max", width=8)
        o[2 * t] = r[0]
        o[2 * t + 1] = r[1]

    x = RNG.normal(size=2 * ws).astype(np.float16)
    o = np.zeros(2 * ws, np.float16)
    run(k, arch, 1, ws, x, o)
    for e in range(2):
        np.testing.assert_array_equal(o[e::2], ref_reduce(x[e::2], "max", 8))


@pytest.mark.parametrize("arch", TARGETS)
def test_partial_group_reduce_is_reported(arch):
    """A reduction with lanes of its warp elsewhere reads lanes that do not take part:
    checking mode reports it (outside, the value is undefined)."""
    @opus.kernel
    def k(x: opus.Ptr[i32], o: opus.Ptr[i32]):
        t = opus.thread_id_x()
        if t != 5:
            o[t] = opus.warp_reduce(x[t], "sum")

    ws = WS[arch]
    from opus.interp import InactiveLaneReadError
    with opus.interp.checking(), pytest.raises(InactiveLaneReadError, match="lane"):
        run(k, arch, 1, ws, np.ones(ws, np.int32), np.zeros(ws, np.int32))


@pytest.mark.parametrize("arch", TARGETS)
def test_member_mask(arch):
    """An explicit member mask: half the warp shuffles among itself; a lane outside its mask,
    or a named lane that does not come, is an error at the line."""
    ws = WS[arch]

    @opus.kernel
    def k(x: opus.Ptr[f32], o: opus.Ptr[f32], MASK: opus.constexpr, LIMIT: opus.constexpr):
        t = opus.thread_id_x()
        if t < LIMIT:
            o[t] = opus.shfl_xor(x[t], 1, mask=MASK)  # ERR: member-mask

    half = (1 << (ws // 2)) - 1
    x = np.arange(ws, dtype=np.float32)
    o = np.zeros(ws, np.float32)
    run(k, arch, 1, ws, x, o, MASK=half, LIMIT=ws // 2)
    np.testing.assert_array_equal(o[:ws // 2], x[:ws // 2] .reshape(-1, 2)[:, ::-1].reshape(-1))
    with pytest.raises(opus.interp.InterpError, match="leaves it out"):
        run(k, arch, 1, ws, x, o, MASK=half, LIMIT=ws // 2 + 1)
    with pytest.raises(opus.interp.InterpError, match="forever"):
        run(k, arch, 1, ws, x, o, MASK=half, LIMIT=ws // 2 - 2)
