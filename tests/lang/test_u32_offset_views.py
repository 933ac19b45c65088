"""Unbounded views with 32-bit offsets (opus.make_gmem(ptr, offsets="u32"), issue 10 point 7):
the interpreter's semantics against numpy (plain, layout-driven, soffset, shifted and carried
views) and its check of the promise; the AMDGCN (SGPR base + 32-bit VGPR offset, no 64-bit
address arithmetic) and the SASS (32-bit index math, one 64-bit multiply-add per access)."""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f16, f32, i32, i64, u64

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "amd"))
from test_amd_target import asm_of  # noqa: E402

TARGETS = ["sm_90a", "gfx942"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "cache"))


@opus.kernel
def scale_add(x: opus.Ptr[f16], y: opus.Ptr[f16], out: opus.Ptr[f32], n: i32):
    gx, gy = opus.make_gmem(x, offsets="u32"), opus.make_gmem(y, offsets="u32")
    go = opus.make_gmem(out, offsets="u32")
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 8
    if i < n:
        s = opus.cast(gx.load(i, vec=8), f32) * 2.0 + opus.cast(gy.load(i, vec=8), f32)
        go.store(s[0:4], i, vec=4)
        go.store(s[4:8], i + 4, vec=4)
        go[n + i // 8] = opus.cast(gx[i], f32)           # element access


@pytest.mark.parametrize("target", TARGETS)
def test_plain_accesses_match_numpy(target):
    rng = np.random.default_rng(1)
    n = 8 * 40                                           # 40 of the 64 threads work
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    out = np.full(n + n // 8, -7, np.float32)
    with opus.set_target(target, interpret=True):
        scale_add[2, 32](x, y, out, n)
    want = np.concatenate([x.astype(np.float32) * 2 + y.astype(np.float32),
                           x[::8].astype(np.float32)])
    np.testing.assert_array_equal(out, want)


@opus.kernel
def layout_copy(x: opus.Ptr[f16], out: opus.Ptr[f16], ld: i32):
    t = opus.thread_id_x()
    lay = opus.make_layout((2, 8), (ld, 1))                # 2 rows of 8: two 16-byte issues
    src = opus.make_gmem(x, offsets="u32") + ld * (1 + 2 * t)  # shifted: the promise counts from here
    opus.make_gmem(out, offsets="u32").store(src.load(lay), lay + 2 * ld * t)


@pytest.mark.parametrize("target", TARGETS)
def test_layout_access_through_a_shifted_view(target):
    ld = 16
    x = np.arange(5 * ld, dtype=np.float16)
    out = np.zeros(4 * ld, np.float16)
    with opus.set_target(target, interpret=True):
        layout_copy[1, 2](x, out, ld)
    want = np.zeros(4 * ld, np.float16)
    for r in range(4):
        want[r * ld:r * ld + 8] = x[(r + 1) * ld:(r + 1) * ld + 8]
    np.testing.assert_array_equal(out, want)


@opus.kernel(block=64)
def soffset_loop(x: opus.Ptr[f32], out: opus.Ptr[f32], steps: i32, base: i32):
    g = opus.make_gmem(x, offsets="u32")
    o = opus.make_gmem(out, offsets="u32")
    t = opus.thread_id_x()
    acc = opus.zeros(4, f32)
    for k in range(steps):                    # the view carried through a run-time loop
        acc = acc + g.load(4 * t + base, vec=4, soffset=k * 256)
    o.store(acc, 4 * t, vec=4)


@pytest.mark.parametrize("target", ["gfx942", "sm_90a"])
def test_soffset_is_part_of_the_offset(target):
    x = np.random.default_rng(2).standard_normal(3 * 256 + 8).astype(np.float32)
    out = np.zeros(256, np.float32)
    with opus.set_target(target, interpret=True):
        soffset_loop[1, 64](x, out, 3, 8)
    want = sum(x[8 + 256 * k: 8 + 256 * k + 256] for k in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-6)
    # off negative, off + soffset in range: allowed (the promise is on the sum)
    out2 = np.zeros(256, np.float32)
    with opus.set_target(target, interpret=True):
        soffset_loop[1, 64](x[256:], out2, 1, 0)     # k = 0 only: the plain case
    np.testing.assert_array_equal(out2, x[256:512])


@opus.kernel(block=64)
def negative_then_soffset(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    t = opus.thread_id_x()
    v = opus.make_gmem(x, offsets="u32").load(t - 64, soffset=64)   # t - 64 < 0, sum = t
    opus.make_gmem(out, offsets="u32")[t] = v


def test_negative_off_with_soffset_in_range():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with opus.set_target("gfx942", interpret=True):
        negative_then_soffset[1, 64](x, out)
    np.testing.assert_array_equal(out, x)


@opus.kernel
def at_offset(x: opus.Ptr[f32], out: opus.Ptr[f32], off: i64, active: i32):
    t = opus.thread_id_x()
    if t < active:
        opus.make_gmem(out)[t] = opus.make_gmem(x, offsets="u32")[off]


def test_inactive_lanes_are_not_checked():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    with opus.set_target("gfx942", interpret=True):
        at_offset[1, 4](x, out, 2, 4)
    np.testing.assert_array_equal(out, [2, 2, 2, 2])
    with opus.set_target("gfx942", interpret=True):  # no active lane: no access, no error
        at_offset[1, 4](x, out, -1, 0)


def test_the_limit_is_the_promise_not_the_buffer():
    """2^30 - 1 f32 elements is inside the promise (an ordinary out-of-bounds fault of the
    4-element buffer); 2^30 is outside it (the promise's error)."""
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    with opus.set_target("gfx942", interpret=True):
        with pytest.raises(opus.interp.MemoryFault) as inside:
            at_offset[1, 4](x, out, 2 ** 30 - 1, 4)
        with pytest.raises(opus.interp.MemoryFault) as outside:
            at_offset[1, 4](x, out, 2 ** 30, 4)
    assert "promised" not in str(inside.value) and "out-of-bounds" in str(inside.value)
    assert "promised [0, 1073741824)" in str(outside.value)
    assert "test_u32_offset_views.py:" in str(outside.value)


@opus.kernel
def unsigned_offset(x: opus.Ptr[f16], out: opus.Ptr[f16], off: u64):
    opus.make_gmem(out)[opus.thread_id_x()] = opus.make_gmem(x, offsets="u32")[off]


@pytest.mark.parametrize("off,ok", [(3, True), (2 ** 31, False), (2 ** 63 + 3, False)])
def test_u64_offsets(off, ok):
    x = np.arange(4, dtype=np.float16)
    out = np.zeros(2, np.float16)
    with opus.set_target("gfx942", interpret=True):
        if ok:
            unsigned_offset[1, 2](x, out, off)
            np.testing.assert_array_equal(out, [3, 3])
        else:
            with pytest.raises(opus.interp.MemoryFault, match="promised"):
                unsigned_offset[1, 2](x, out, off)


# -- the code: AMDGCN and SASS ----------------------------------------------------------------------

def _vadd(T, VEC, offsets):
    @opus.kernel
    def vadd(x: opus.Ptr[T], y: opus.Ptr[T], out: opus.Ptr[T], n: i32):
        gx, gy, go = (opus.make_gmem(p, offsets=offsets) for p in (x, y, out))
        step = opus.grid_size_x() * VEC
        for i in range((opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC, n, step):
            go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)
    return vadd


def _sgpr_based(access):
    """A global access in the SGPR-base form: a 32-bit VGPR offset (a single vN) and an SGPR
    pair, not a 64-bit VGPR address with ``off``."""
    return (re.search(r"\bv\d+\b.*, s\[\d+:\d+\]( offset:-?\d+)?$", access) is not None
            and not re.search(r"\boff\b", access))


def _global_accesses(asm):
    return [l.strip() for l in asm.splitlines() if re.match(r"\s+global_(load|store)", l)]


@pytest.mark.parametrize("T,VEC,width", [(f32, 4, "dwordx4"), (f16, 8, "dwordx4"), (f16, 2, "dword")])
def test_amdgcn_uses_the_sgpr_base_and_a_32_bit_offset(T, VEC, width):
    asm = asm_of(_vadd(T, VEC, "u32"), "gfx942")
    acc = _global_accesses(asm)
    # 3 accesses in each of the loop's two copies (codegen/hip.py render_for: the run-time
    # step's sign tested once before the loop)
    assert len(acc) == 6 and all(width in a for a in acc), acc
    # global_load_dwordx4 v[..], vN, s[..]: one VGPR offset and an SGPR pair base, never `off`
    assert all(_sgpr_based(a) for a in acc), acc
    assert "v_lshl_add_u64" not in asm and "v_add_co_u32" not in asm and "v_ashrrev_i32" not in asm
    plain = asm_of(_vadd(T, VEC, "i32"), "gfx942")   # the signed view: 64-bit addresses
    assert "v_lshl_add_u64" in plain or "v_add_co_u32" in plain


def test_amdgcn_4_wave_gemm_loop_has_no_64_bit_address_math():
    bench = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "benchmarks")
    sys.path.insert(0, bench)
    import amd_codegen
    import runpy
    path = os.path.join(os.environ["OPUS_CACHE_DIR"], "k.py")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(amd_codegen.KERNELS_SOURCE)
    cases = runpy.run_path(path)["CASES"]
    for name, most in (("mfma 4 waves 4x4, index, u32", 47), ("mfma 4 waves 4x4, soffset, u32", 47)):
        family, make = cases[name]
        asm = asm_of(make(), "gfx942")
        lines, found = amd_codegen.loops(asm)
        (lab, a, b), = [f for f in found if any("v_mfma" in l for l in lines[f[1]:f[2]])]
        body = amd_codegen._instructions(lines[a:b + 1])
        loads = [l for l in body if l.startswith("global_load")]
        assert len(loads) == 8 and all(_sgpr_based(l) for l in loads), loads
        assert not any(l.startswith(("v_lshl_add_u64", "v_add_co", "v_ashrrev")) for l in body), body
        assert len(body) <= most, (name, len(body))   # the original's 47


def test_sass_index_math_is_32_bit():
    """NVIDIA: a 32-bit index, times the element size plus the 64-bit base in one unsigned wide
    multiply-add per access (IMAD.WIDE.U32), nothing sign-extended. (The signed view's
    IMAD.WIDE costs the same here: on NVIDIA the promise changes the spelling, not the count.)"""
    sass = _vadd(f32, 4, "u32").sass(target="sm_90a")
    assert "LDG.E.128" in sass and "STG.E.128" in sass
    assert len(re.findall(r"IMAD\.WIDE\.U32 ", sass)) == 3
    assert not re.search(r"IMAD\.WIDE |SHF\.R\.S32|IADD3\.X|IMAD\.X", sass)


# -- on the GPU (the lead runs these): the rendered u32 addresses against numpy ----------------------

@pytest.mark.gpu
def test_u32_views_on_gpu():
    from opus.runtime.device_array import DeviceArray
    rng = np.random.default_rng(3)
    n = 8 * 40
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    dev = [DeviceArray.from_numpy(a) for a in (x, y, np.full(n + n // 8, -7, np.float32))]
    with opus.set_target(opus.current_target().target.name, interpret=False):
        scale_add[2, 32](*dev, n)
    want = np.concatenate([x.astype(np.float32) * 2 + y.astype(np.float32),
                           x[::8].astype(np.float32)])
    np.testing.assert_array_equal(dev[2].to_numpy(), want)
    xs = rng.standard_normal(3 * 256 + 8).astype(np.float32)
    dx, do = DeviceArray.from_numpy(xs), DeviceArray.from_numpy(np.zeros(256, np.float32))
    with opus.set_target(opus.current_target().target.name, interpret=False):
        soffset_loop[1, 64](dx, do, 3, 8)                # u32 + soffset inside a loop
    np.testing.assert_allclose(do.to_numpy(), sum(xs[8 + 256 * k: 264 + 256 * k] for k in range(3)),
                               rtol=1e-6)
