"""The cached form of a layout (``Layout.cached(vec)``, ``make_layout(..., cached=vec)``; the
original's ``layout_cached``): per-issue offsets computed once where it is made. Interpreter
results equal the plain layout's and numpy's; in a loop over the stages of a swizzled shared
tile it takes fewer instructions per iteration (AMDGCN from clang for gfx942, SASS from NVRTC
for sm_90a); misuse is a clear error."""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f16, f32, i32

_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "benchmarks")

STAGES, ROWS, COLS = 4, 64, 64
TILE = ROWS * COLS


@opus.kernel(block=64)
def stage_sums(x: opus.Ptr[f16], out: opus.Ptr[f16], n: i32, tile: i32,
               CACHED: opus.constexpr = False, SHIFT: opus.constexpr = "stage"):
    """Thread t sums row t of a 128-byte-swizzled 64 x 64 f16 tile over n iterations, stage
    k % 4 of four (the stage shift, a multiple of the swizzle's period, changes per iteration):
    (k % 4) * TILE, which the layout proves a multiple of the period, or (SHIFT="argument")
    (k % 4) * tile with tile = TILE a kernel argument, which it cannot."""
    s = opus.alloc_smem(f16, STAGES * TILE, align=1024)
    t = opus.thread_id_x()
    for i in range(t, STAGES * TILE, 64):
        s[i] = x[i]
    opus.sync_threads()
    u = opus.make_layout((ROWS, COLS), coord=(t, opus.Y), swizzle=opus.swizzle_bytes(128, f16))
    if CACHED:
        u = u.cached(8)
    acc = opus.zeros(COLS, f16)
    for k in opus.range(n, unroll=1):
        acc = acc + s.load(u + (k % STAGES) * (TILE if SHIFT == "stage" else tile), vec=8)
    opus.make_gmem(out).store(acc, opus.make_layout((ROWS, COLS), coord=(t, opus.Y)), vec=8)


def _swizzle_128b_f16(o):
    """CUDA's 128-byte swizzle on f16 element offsets, by hand: the 16-byte chunk (bits 3-5)
    XOR the 128-byte row modulo 8 (bits 6-8)."""
    return o ^ ((o >> 3) & 0x38)


def _stage_sums_reference(x, n):
    out = np.zeros((ROWS, COLS), np.float64)
    for k in range(n):
        for t in range(ROWS):
            for c in range(COLS):
                out[t, c] += x[(k % STAGES) * TILE + _swizzle_128b_f16(t * COLS + c)]
    return out.astype(np.float16).ravel()


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("shift", ["stage", "argument"])
def test_swizzled_stage_loop_interpreter(target, cached, shift):
    x = (np.arange(STAGES * TILE) % 7).astype(np.float16)  # small integers: f16 sums exact
    out = np.full(ROWS * COLS, -1, np.float16)
    with opus.set_target(target, interpret=True):
        stage_sums[1, 64](x, out, 6, TILE, CACHED=cached, SHIFT=shift)
    np.testing.assert_array_equal(out, _stage_sums_reference(x, 6))


@opus.kernel(block=32)
def strided_rows(x: opus.Ptr[f32], out: opus.Ptr[f32], ld: i32, n: i32, step: i32,
                 CACHED: opus.constexpr = False):
    """Thread t reads a 4 x 4 block (rows ld apart: a run-time y-stride) at t * 4 + k * step,
    skipping block row 2 (load_if), n times; stores the sum through a (cached) layout."""
    t = opus.thread_id_x()
    u = opus.make_layout((32, 4, 4), (4, ld, 1), coord=(t, opus.Y, opus.Y))
    v = opus.make_layout((32, 4, 4), coord=(t, opus.Y, opus.Y))
    if CACHED:
        u, v = u.cached(4), opus.make_layout((32, 4, 4), coord=(t, opus.Y, opus.Y), cached=4)
    g = opus.make_gmem(x)
    acc = opus.zeros(16, f32)
    for k in range(n):
        acc = acc + g.load_if(lambda i, j: i != 2, u + k * step, vec=4)
    opus.make_gmem(out).store(acc, v)


@pytest.mark.parametrize("cached", [False, True])
def test_runtime_stride_load_if_and_store_interpreter(cached):
    ld, n, step = 160, 3, 12
    x = np.arange(4 * ld + 32 * 4 + n * step, dtype=np.float32)
    out = np.full(32 * 16, -1, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        strided_rows[1, 32](x, out, ld, n, step, CACHED=cached)
    want = np.zeros((32, 4, 4), np.float32)
    for k in range(n):
        for t in range(32):
            for i in (0, 1, 3):
                want[t, i] += x[t * 4 + i * ld + k * step + np.arange(4)]
    np.testing.assert_array_equal(out, want.ravel())


def test_static_offsets_stay_python_ints():
    """A static layout's cached offsets are the issues' offsets, computed by hand; Python ints
    (made outside any kernel: nothing to emit)."""
    c = opus.make_layout((4, 16), (100, 1), cached=8) + 3
    assert c.offsets() == (3, 11, 103, 111, 203, 211, 303, 311)
    assert c(2, 1) == 211 and c.issue_shape() == (4, 2)


@pytest.mark.parametrize("family", ["amd", "nvidia"])
def test_cached_swizzled_loop_takes_fewer_instructions(family):
    """With a shift the layout cannot prove a multiple of the swizzle's period, the plain
    layout recomputes each issue's swizzle (and, with AND, shift, XOR) every iteration; the
    cached one adds the stage shift to offsets computed before the loop. Counted in the loop
    that holds the shared reads (unroll=1: one iteration per loop body)."""
    counts = {c: _loop_size(family, c, "argument") for c in (False, True)}
    assert counts[True] + 8 <= counts[False], counts  # at least one instruction per issue saved


@pytest.mark.parametrize("family", ["amd", "nvidia"])
def test_plain_swizzled_loop_swizzles_once_per_iteration(family):
    """A stage shift the layout proves a multiple of the period is added after the swizzle
    (lang/layout.py SwizzledSum): the plain layout's loop is at most one instruction per issue
    longer than the cached one's (it was 14 and 23 longer when each issue was swizzled)."""
    counts = {c: _loop_size(family, c, "stage") for c in (False, True)}
    assert counts[False] <= counts[True] + 8, counts


def _loop_size(family, cached, shift):
    if family == "amd":
        bodies = amd_loop_bodies(stage_sums.source(target="gfx942", CACHED=cached, SHIFT=shift))
        reads = [b for b in bodies if any(i.startswith("ds_read") for i in b)]
    else:
        bodies = sass_loop_bodies(stage_sums.sass(target="sm_90a", CACHED=cached, SHIFT=shift))
        reads = [b for b in bodies if any(i.startswith("LDS") for i in b)]
    assert len(reads) == 1, [len(b) for b in bodies]
    return len(reads[0])


def amd_loop_bodies(source):
    """The instructions of each loop of the gfx942 assembly (benchmarks/amd_codegen.py's
    counting: a label to the last backward branch to it)."""
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import assemble_amd
    from opus.targets import get_target
    sys.path.insert(0, _BENCH)
    import amd_codegen
    try:
        asm = assemble_amd(source, get_target("gfx942"))
    except OpusRuntimeError as e:  # no clang for AMD here
        pytest.skip(str(e))
    lines, found = amd_codegen.loops(asm)
    return [amd_codegen._instructions(lines[a:b + 1]) for _, a, b in found]


def sass_loop_bodies(sass):
    """The instructions of each loop of a SASS listing: from a backward branch's target to it."""
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in
           re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([^;]*?)\s*;", sass)]
    bodies = []
    for addr, text in ins:
        m = re.match(r"BRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) <= addr:
            bodies.append([x for a, x in ins if int(m.group(1), 16) <= a <= addr])
    return bodies


# -- misuse ----------------------------------------------------------------------------------------
@opus.kernel(block=64)
def _misuse(x: opus.Ptr[f16], WHAT: opus.constexpr = ""):
    s = opus.alloc_smem(f16, TILE, align=1024)
    t = opus.thread_id_x()
    u = opus.make_layout((ROWS, COLS), coord=(t, opus.Y), swizzle=opus.swizzle_bytes(128, f16))
    c = u.cached(8)
    if WHAT == "vec":
        x[t] = s.load(c, vec=4)[0]
    elif WHAT == "shift":
        x[t] = s.load(c + 64, vec=8)[0]
    elif WHAT == "index":
        x[t] = s[c(8)]
    elif WHAT == "make":
        opus.make_layout((4, 4), cached=0)
    elif WHAT == "wide":
        u.cached(16)


@pytest.mark.parametrize("what,needles", [
    ("vec", ["vec=4: this cached layout holds the offsets of vec=8 accesses"]),
    ("shift", ["shifts after the swizzle", "64 is not a multiple", "period 512"]),
    ("index", ["outside the issue space (8,)"]),
    ("make", ["vec must be a positive compile-time int"]),
    ("wide", ["vec=16 crosses the swizzle's runs of 8"]),
])
def test_misuse_is_a_clear_error(what, needles):
    with pytest.raises(opus.TraceError) as e:
        _misuse.source(target="sm_90a", WHAT=what)
    for n in needles:
        assert n in str(e.value), str(e.value)
