"""Swizzled offsets with the run-time part's swizzle computed once (lang/layout.py SwizzledSum,
lang/known_bits.py; docs/layouts.md "Swizzled offsets").

Every offset a swizzled layout gives, for bases the ops prove bits of (a wgmma fragment's lane
coordinates, a stage shift) and bases they do not (a thread index times an odd stride, a kernel
argument), at every static offset of one period of the swizzle plus static shifts that are
negative or past a period, equals the plain formula swizzle(base + c) computed here by hand in
numpy. The interpreter runs the IR the layout emits, through layout calls and through the
per-issue offsets of layout-driven accesses. The IR holds one swizzle per base where the bits
allow it, and the general one per offset where a carry may reach the swizzle's bits."""
import numpy as np
import pytest

import opus
from opus import i32
from opus.lang.known_bits import may_bits

WARPS = 4
THREADS = 32 * WARPS


# -- the run-time bases: (p-coordinates, their strides, a run-time shift) ------------------------

def _fragment(t, lane, a):
    """A wgmma accumulator fragment's thread part (the GEMM epilogue's): bits 1-2, 6-8, 10-11."""
    return (opus.warp_id() % 4, lane // 4, lane % 4), (1024, 64, 2), 0


def _fragment_staged(t, lane, a):
    """The fragment plus a run-time stage shift of whole 4096-element tiles (a multiple of every
    period here): added after the swizzle."""
    return (opus.warp_id() % 4, lane // 4, lane % 4), (1024, 64, 2), (a % 4) * 4096


def _rows(t, lane, a):
    """A thread index (no bound proved) times 64: bits from 6 up may be set."""
    return (t,), (64,), 0


def _odd_stride(t, lane, a):
    """The lane times 5 (0 .. 155): carries into every bit, so the general form."""
    return (lane,), (5,), 0


def _argument(t, lane, a):
    """A kernel argument (nothing known) plus the lane times 8."""
    return (lane,), (8,), a


BASES = {"fragment": _fragment, "fragment_staged": _fragment_staged, "rows": _rows,
         "odd_stride": _odd_stride, "argument": _argument}


def _base_by_hand(kind, a, warp_size=32):
    """Each thread's base offset (numpy int64), from the definitions above."""
    t = np.arange(THREADS, dtype=np.int64)
    lane, warp = t % warp_size, t // warp_size
    fragment = (warp % 4) * 1024 + (lane // 4) * 64 + (lane % 4) * 2
    return {"fragment": fragment, "fragment_staged": fragment + (a % 4) * 4096, "rows": t * 64,
            "odd_stride": lane * 5, "argument": lane * 8 + a}[kind]


def _swizzle_by_hand(o, bits, base, shift):
    """CuTe's Swizzle<bits, base, shift> on element offsets: bits [base + shift, + bits) XORed
    into bits [base, + bits)."""
    return o ^ ((o >> shift) & (((1 << bits) - 1) << base))


@opus.kernel(block=THREADS)
def swizzled_offsets(out: opus.Ptr[i32], a: i32, SW: opus.constexpr, BASE: opus.constexpr,
                     LINEAR: opus.constexpr, N: opus.constexpr, CACHED: opus.constexpr,
                     YSTRIDE: opus.constexpr = 1):
    """out[t, y] = the offset of y (0 .. N - 1, stride YSTRIDE) in a layout whose other coordinates
    are thread t's base (BASE, one of BASES) and whose linear shift is the run-time part plus LINEAR:
    through one layout call per y, or (CACHED) the per-issue offsets of its vec=1 accesses."""
    t = opus.thread_id_x()
    coords, strides, shift = BASE(t, opus.lane_id(), a)
    extents = tuple(1 << 20 for _ in coords)      # coordinates are never checked at run time
    u = opus.make_layout(extents + (N,), strides + (YSTRIDE,), coords + (opus.Y,), swizzle=SW)
    u = u + shift + LINEAR
    offsets = u.cached(1).offsets() if CACHED else [u(y) for y in range(N)]
    for y, off in enumerate(offsets):
        out[t * N + y] = off


SWIZZLES = [opus.Swizzle(3, 3, 3), opus.Swizzle(2, 2, 3), opus.Swizzle(2, 1, 4),
            opus.Swizzle(1, 2, 3)]


@pytest.mark.parametrize("kind", sorted(BASES))
@pytest.mark.parametrize("sw", SWIZZLES, ids=repr)
@pytest.mark.parametrize("a,linear,cached", [(7, 3 * 4096 + 5, False), (-12345, -37, True)])
def test_every_offset_equals_the_plain_formula(kind, sw, a, linear, cached):
    """Offsets y + linear for y over one period: every low part once, and past the period or
    below 0 by the static shift."""
    n = sw.period
    out = np.full(THREADS * n, -1, np.int32)
    with opus.set_target("sm_90a", interpret=True):
        swizzled_offsets[1, THREADS](out, a, SW=sw, BASE=BASES[kind], LINEAR=linear, N=n,
                                     CACHED=cached)
    plain = _base_by_hand(kind, a)[:, None] + linear + np.arange(n)[None, :]
    want = _swizzle_by_hand(plain, sw.bits, sw.base, sw.shift)
    np.testing.assert_array_equal(out.reshape(THREADS, n), want)


def _swizzles(ir):
    """How many swizzles the IR computes: its ANDs (the kernel has no other)."""
    return ir.count("{op='and'}")


@pytest.mark.parametrize("cached", [False, True])
def test_a_proved_base_is_swizzled_once(cached):
    """The fragment's eight 16-byte chunks of a 128-byte row (offsets 0, 8, .. 56; no carry
    can reach bits 3-5 from its base): one swizzle of the base (its AND with the source mask)
    and a XOR per chunk, through the per-issue offsets; layout calls make one each."""
    ir = swizzled_offsets.ir(target="sm_90a", SW=opus.Swizzle(3, 3, 3), BASE=_fragment,
                             LINEAR=0, N=8, CACHED=cached, YSTRIDE=8)
    assert _swizzles(ir) == (1 if cached else 8), ir


def test_a_possible_carry_keeps_the_general_form():
    """Lane * 5 (0 .. 155) may carry into bits 3-8 from any of those chunks: each offset but 0
    (the base's own) is swizzled whole."""
    ir = swizzled_offsets.ir(target="sm_90a", SW=opus.Swizzle(3, 3, 3), BASE=_odd_stride,
                             LINEAR=0, N=8, CACHED=True, YSTRIDE=8)
    assert _swizzles(ir) == 8, ir


@opus.kernel(block=THREADS)
def probe_bits(a: i32, NOTE: opus.constexpr):
    """Hands the bits known of some index values to NOTE while tracing."""
    lane, w = opus.lane_id(), opus.warp_id()
    NOTE("lane", may_bits(lane))
    NOTE("lane // 4 * 64", may_bits(lane // 4 * 64))
    NOTE("lane % 4 * 2 + lane // 4 * 64", may_bits(lane % 4 * 2 + lane // 4 * 64))
    NOTE("w % 4 * 1024", may_bits(w % 4 * 1024))
    NOTE("w", may_bits(w))
    NOTE("a * 24", may_bits(a * 24))
    NOTE("lane * 5", may_bits(lane * 5))
    NOTE("lane * 5 + lane", may_bits(lane * 5 + lane))
    NOTE("(a & 12) | 1", may_bits((a & 12) | 1))
    NOTE("a * 16 - lane * 8", may_bits(a * 16 - lane * 8))
    NOTE("lane >> 2 << 4", may_bits((lane >> 2) << 4))
    NOTE("a % 6", may_bits(a % 6))
    NOTE("a tmod 8", may_bits(opus.tmod(a, 8)))
    NOTE("a * 2**30", may_bits(a * (1 << 30)))
    NOTE("lane * 2**26", may_bits(lane * (1 << 26)))
    NOTE("lane * 2**27", may_bits(lane * (1 << 27)))


def test_known_bits_by_hand():
    """Masks worked out by hand from each op's definition; -1 (or ones from a bit up) where
    nothing bounds the value: a kernel argument, the warp index, C's remainder of a value that
    may be negative, a product that may wrap into the sign bit."""
    seen = {}
    probe_bits.specialize(target="sm_90a", NOTE=lambda k, v: seen.__setitem__(k, v))
    assert seen == {
        "lane": 31,
        "lane // 4 * 64": 0b111 << 6,
        "lane % 4 * 2 + lane // 4 * 64": 0b111000110,   # disjoint: the union
        "w % 4 * 1024": 0b11 << 10,
        "w": -1,
        "a * 24": -1 << 3,                              # 24 = 8 * 3: a multiple of 8
        "lane * 5": 255,                                # 0 .. 155
        "lane * 5 + lane": 511,                         # overlapping: at most 255 + 31
        "(a & 12) | 1": 13,
        "a * 16 - lane * 8": -1 << 3,
        "lane >> 2 << 4": 0b111 << 4,
        "a % 6": 7,                                     # Python's mod: 0 .. 5
        "a tmod 8": -1,
        "a * 2**30": -1 << 30,
        "lane * 2**26": 31 << 26,                       # below the sign bit
        "lane * 2**27": -1 << 27,                       # may reach the sign bit
    }
