"""The conversions in generated code: packed instructions (SASS through NVRTC + nvdisasm, AMDGCN
through clang), the software paths executed on the host (tests/hostexec) bit for bit as the
interpreter, and on an NVIDIA GPU (pytest -m gpu) every new path bit for bit as the
interpreter."""
import functools
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import opus
from opus.targets import get_target
from conv_kernels import converter, stochastic, cast_on, sr_on, run, gpu_arch
from hostexec import run_kernel
from hostexec.float_refs import same_floats
from test_rounding import random_f32

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "amd"))
from test_amd_target import asm_of  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FP8_OCP = [opus.fp8_e4m3, opus.fp8_e5m2]


def _sass_count(kernel, pattern, arch="sm_90a"):
    return len(re.findall(pattern, kernel.sass(target=arch)))


# -- NVIDIA: one F2FP per lane pair ---------------------------------------------------------------

@pytest.mark.parametrize("t", [opus.f16, opus.bf16], ids=lambda t: t.name)
@pytest.mark.parametrize("rounding", ["rn", "rz"])
def test_f32_to_half_pairs_are_one_f2fp(t, rounding):
    """8 lanes, 4 cvt.<rnd>.<t>x2.f32: SASS F2FP...PACK_AB with both sources registers (a
    scalar conversion packs with RZ, the zero register, as its second source)."""
    k = converter(opus.f32, t, rounding, False, 8 // 2)  # 4 lanes per thread
    sass = k.sass(target="sm_90a")
    packs = re.findall(r"F2FP\.[\w.]*PACK_AB[.\w]* R\d+, R\d+, R\d+", sass)
    assert len(packs) == 2, re.findall(r"F2FP[^;]*", sass)  # 4 lanes: 2 pairs
    assert not re.search(r"F2FP\.[\w.]*PACK_AB[.\w]* R\d+, RZ", sass)
    assert f"cvt.{rounding}.{t.name}x2.f32" in k.source(target="sm_80")


@pytest.mark.parametrize("t", FP8_OCP, ids=lambda t: t.name)
def test_fp8_pairs_on_sm90a(t):
    kind = t.name.split("_")[1].upper()
    assert _sass_count(converter(opus.f32, t, "rn", True, 4), rf"F2FP\.SATFINITE\.{kind}\.F32\.PACK_AB") == 2
    assert _sass_count(converter(t, opus.f32, "rn", False, 4), rf"F2FP\.F16\.{kind}\.UNPACK_B") == 2


def test_e2m1x2_is_not_on_these_chips():
    """cvt.rn.satfinite.e2m1x2.f32 needs sm_100a; the targets here have no packed fp4 entry
    (fp4 converts in exact software, helper L's register form)."""
    for arch in ("sm_80", "sm_89", "sm_90a"):
        table = opus.targets.get_target(arch).packed_conversions
        assert not [k for k in table if "fp4" in k[0] or "fp4" in k[1]]


# -- AMD: v_cvt_pk_fp8_f32 once per two values -----------------------------------------------------

@opus.kernel
def _fp8_round_trip(x: opus.Ptr[opus.f32], q: opus.Ptr[opus.fp8], z: opus.Ptr[opus.f32], n: opus.i32):
    i = opus.thread_id_x() * 8
    gx, gq, gz = opus.make_gmem(x, n), opus.make_gmem(q, n), opus.make_gmem(z, n)
    v = opus.concat(gx.load(i, vec=4), gx.load(i + 4, vec=4))
    gq.store(opus.cast(v, opus.fp8), i)
    back = opus.cast(gq.load(i, vec=8), opus.f32)
    gz.store(back[0:4], i)
    gz.store(back[4:8], i + 4)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amd_fp8_pairs(arch):
    """8 values: 4 v_cvt_pk_fp8_f32 (before: 8, one per value) and 4 v_cvt_pk_f32_fp8."""
    c = Counter(re.findall(r"v_cvt\w*", asm_of(_fp8_round_trip, arch)))
    assert c["v_cvt_pk_fp8_f32"] == 4, c
    assert c["v_cvt_pk_f32_fp8_e32"] + c["v_cvt_pk_f32_fp8"] == 4, c
    assert c["v_cvt_f32_fp8"] + c["v_cvt_f32_fp8_e32"] + c["v_cvt_f32_fp8_sdwa"] == 0, c


@opus.kernel
def _to_bf16(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.bf16]):
    i = opus.thread_id_x() * 8
    v = opus.concat(opus.make_gmem(x).load(i, vec=4), opus.make_gmem(x).load(i + 4, vec=4))
    opus.make_gmem(y).store(opus.cast(v, opus.bf16), i)


def test_gfx950_bf16_pairs():
    """clang fuses two (__bf16) casts into one v_cvt_pk_bf16_f32: 8 values, 4 instructions."""
    c = Counter(re.findall(r"v_cvt\w*", asm_of(_to_bf16, "gfx950")))
    assert c["v_cvt_pk_bf16_f32"] == 4, c


@pytest.mark.parametrize("arch,t,instr", [
    ("gfx942", opus.fp8_e4m3fnuz, "v_cvt_sr_fp8_f32"), ("gfx942", opus.fp8_e5m2fnuz, "v_cvt_sr_bf8_f32"),
    ("gfx950", opus.fp8_e4m3, "v_cvt_sr_fp8_f32"), ("gfx950", opus.fp8_e5m2, "v_cvt_sr_bf8_f32"),
    ("gfx950", opus.bf16, "v_cvt_sr_bf16_f32"), ("gfx950", opus.f16, "v_cvt_sr_f16_f32")])
def test_amd_stochastic_rounding_instructions(arch, t, instr):
    sat = t.storage_only
    asm = asm_of(stochastic(opus.f32, t, sat, 4), arch)
    assert len(re.findall(instr + r"\b", asm)) == 4


@pytest.mark.parametrize("arch,t", [("gfx942", opus.fp8_e4m3), ("gfx942", opus.bf16), ("gfx950", opus.fp8_e4m3fnuz)])
def test_amd_software_stochastic_rounding_where_the_chip_lacks_it(arch, t):
    assert opus.targets.get_target(arch).conversion(opus.f32, t, "sr") == "software"
    assert "v_cvt_sr" not in asm_of(stochastic(opus.f32, t, False, 4), arch)


# -- software paths executed on the host, bit for bit as the interpreter ---------------------------

def _host(kernel, arrays, out_dtype, target, tmp_path, vec=4):
    n = len(arrays[0])
    out = np.zeros(n, out_dtype)
    grid = ((n + vec - 1) // vec + 255) // 256
    run_kernel(kernel, grid, 256, *arrays, out, n, target=target, workdir=tmp_path)
    return out


SW_SR = [("sm_80", opus.fp8_e4m3, True), ("sm_90a", opus.fp8_e5m2, False), ("sm_80", opus.bf16, False),
         ("sm_90a", opus.f16, False), ("gfx942", opus.fp8_e4m3, False), ("gfx942", opus.bf16, False),
         ("gfx942", opus.f16, False), ("gfx950", opus.fp8_e4m3fnuz, True),
         ("gfx950", opus.fp8_e5m2fnuz, False)]


@pytest.mark.parametrize("target,t,sat", SW_SR, ids=[f"{a}-{t.name}-{s}" for a, t, s in SW_SR])
def test_host_software_stochastic_rounding(target, t, sat, tmp_path):
    x = random_f32(1 << 14, seed=11)
    r = np.random.default_rng(12).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = _host(stochastic(opus.f32, t, sat, 4), [x, r], t.np_dtype, target, tmp_path)
    assert same_floats(got, sr_on(target, x, r, opus.f32, t, sat=sat)) if not t.storage_only else \
        np.array_equal(got.view(np.uint8), sr_on(target, x, r, opus.f32, t, sat=sat).view(np.uint8))


# the chips' own stochastic conversions (v_cvt_sr_*: tests/hostexec/shim/hip.h, from AMD's model)
HW_SR = [("gfx942", opus.fp8_e4m3fnuz, False), ("gfx942", opus.fp8_e4m3fnuz, True),
         ("gfx942", opus.fp8_e5m2fnuz, False), ("gfx942", opus.fp8_e5m2fnuz, True),
         ("gfx950", opus.fp8_e4m3, False), ("gfx950", opus.fp8_e4m3, True),
         ("gfx950", opus.fp8_e5m2, False), ("gfx950", opus.fp8_e5m2, True),
         ("gfx950", opus.bf16, False), ("gfx950", opus.f16, False)]


@pytest.mark.parametrize("target,t,sat", HW_SR, ids=[f"{a}-{t.name}-{s}" for a, t, s in HW_SR])
def test_host_hardware_stochastic_rounding(target, t, sat, tmp_path):
    """The v_cvt_sr_* paths as rendered (NaN, the overflow decision from the random bits, the
    clamp), on the host through the instructions' shims, against the interpreter. random_f32
    holds every bf16 value and its neighbours: every value between the format's max and the
    next step above it, where the random bits decide between max and overflow."""
    assert get_target(target).conversion(opus.f32, t, "sr") == "hardware"
    x = random_f32(1 << 14, seed=15)
    r = np.random.default_rng(16).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = _host(stochastic(opus.f32, t, sat, 4), [x, r], t.np_dtype, target, tmp_path)
    ref = sr_on(target, x, r, opus.f32, t, sat=sat)
    assert same_floats(got, ref) if not t.storage_only else \
        np.array_equal(got.view(np.uint8), ref.view(np.uint8))


HOST_CASTS = [("sm_80", opus.f32, opus.f16, "rn", False), ("sm_80", opus.f32, opus.bf16, "rz", False),
              ("sm_90a", opus.f32, opus.bf16, "rn", False), ("sm_90a", opus.f32, opus.fp8_e4m3, "rn", False),
              ("sm_80", opus.f32, opus.bf16, "truncate", False),
              ("gfx942", opus.f32, opus.bf16, "truncate_with_nan", False),
              ("gfx942", opus.f32, opus.fp8_e4m3fnuz, "rn", False), ("gfx942", opus.f32, opus.fp8_e5m2fnuz, "rn", True),
              ("gfx950", opus.f32, opus.fp8_e4m3, "rn", False), ("gfx950", opus.f32, opus.fp8_e5m2, "rn", True),
              ("gfx942", opus.fp8_e4m3fnuz, opus.f32, "rn", False), ("gfx950", opus.fp8_e5m2, opus.bf16, "rn", False),
              # pairs from and to 16-bit floats: through f32 on each side of the pair instruction
              ("gfx942", opus.f16, opus.fp8_e4m3fnuz, "rn", False), ("gfx950", opus.bf16, opus.fp8_e5m2, "rn", True),
              ("gfx942", opus.fp8_e5m2fnuz, opus.f16, "rn", False), ("gfx950", opus.fp8_e4m3, opus.f16, "rn", False),
              ("gfx950", opus.fp8_e5m2, opus.f16, "rn", True),   # sat: for fp8 targets only
              # fp8 to fp8 through f32: sat clamps e5m2's larger values (and infinities)
              ("sm_90a", opus.fp8_e5m2, opus.fp8_e4m3, "rn", True), ("sm_90a", opus.fp8_e5m2, opus.fp8_e4m3, "rn", False),
              ("gfx942", opus.fp8_e5m2fnuz, opus.fp8_e4m3fnuz, "rn", True)]


@pytest.mark.parametrize("target,src,dst,rnd,sat", HOST_CASTS,
                         ids=[f"{a}-{s.name}-{d.name}-{r}-{'sat' if t else 'nosat'}" for a, s, d, r, t in HOST_CASTS])
def test_host_packed_and_truncating_casts(target, src, dst, rnd, sat, tmp_path):
    """The packed pairs (PTX cvt x2 shims, v_cvt_pk_* shims: tests/hostexec/shim) and the bf16
    truncations as rendered, against the interpreter."""
    if src is opus.f32:
        x = random_f32(1 << 14, seed=13)
    else:   # every code of the source type (16-bit ones: all 65536)
        x = np.arange(1 << (8 * src.itemsize), dtype=np.uint32).astype(
            np.uint16 if src.itemsize == 2 else np.uint8).view(src.np_dtype)
    got = _host(converter(src, dst, rnd, sat, 4), [x], dst.np_dtype, target, tmp_path)
    ref = cast_on(target, x, src, dst, rounding=rnd, sat=sat)
    assert same_floats(got, ref) if not dst.storage_only else np.array_equal(got.view(np.uint8), ref.view(np.uint8))


# -- on the GPU ------------------------------------------------------------------------------------

GPU_CASTS = [(opus.f32, t, r, False) for t in (opus.f16, opus.bf16) for r in ("rn", "rz")] + \
            [(opus.f32, opus.bf16, r, False) for r in ("truncate", "truncate_with_nan")] + \
            [(opus.f32, t, "rn", s) for t in FP8_OCP for s in (False, True)] + \
            [(t, d, "rn", False) for t in FP8_OCP for d in (opus.f32, opus.f16, opus.bf16)]


@pytest.mark.gpu
@pytest.mark.parametrize("vec", [1, 2, 4])
@pytest.mark.parametrize("src,dst,rnd,sat", GPU_CASTS,
                         ids=[f"{s.name}-{d.name}-{r}-{'sat' if t else 'nosat'}" for s, d, r, t in GPU_CASTS])
def test_gpu_casts_match_interp(src, dst, rnd, sat, vec):
    x = random_f32() if src is opus.f32 else np.tile(np.arange(256, dtype=np.uint8), 64).view(src.np_dtype)
    x = x[:len(x) // 4 * 4]
    got = run(converter(src, dst, rnd, sat, vec), [x], dst.np_dtype, vec, gpu_arch(), device=True)
    ref = cast_on(gpu_arch(), x, src, dst, rounding=rnd, sat=sat, vec=vec)
    assert same_floats(got, ref) if not dst.storage_only else np.array_equal(got.view(np.uint8), ref.view(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("t,sat", [(opus.fp8_e4m3, False), (opus.fp8_e4m3, True), (opus.fp8_e5m2, False),
                                   (opus.fp8_e4m3fnuz, True), (opus.bf16, False), (opus.f16, False)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_gpu_stochastic_rounding_matches_interp(t, sat):
    x = random_f32()
    r = np.random.default_rng(14).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    got = run(stochastic(opus.f32, t, sat, 4), [x, r], t.np_dtype, 4, gpu_arch(), device=True)
    ref = sr_on(gpu_arch(), x, r, opus.f32, t, sat=sat)
    assert same_floats(got, ref) if not t.storage_only else np.array_equal(got.view(np.uint8), ref.view(np.uint8))


@opus.kernel
def fp8_variants(x: opus.Ptr[opus.f32], a: opus.Ptr[opus.fp8_e4m3fnuz],
                 b: opus.Ptr[opus.fp8_e4m3fnuz], c: opus.Ptr[opus.fp8_e5m2fnuz], n: opus.i32):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 2
    v = opus.load(x, i, vec=2, bound=n)
    opus.store(a, opus.cast(v, opus.fp8_e4m3fnuz), i, vec=2, bound=n)
    opus.store(b, opus.cast(v, opus.fp8_e4m3fnuz, sat=True), i, vec=2, bound=n)
    opus.store(c, opus.cast(v, opus.fp8_e5m2fnuz), i, vec=2, bound=n)


def test_host_one_kernel_with_several_fp8_encoders(tmp_path):
    """gfx942: three packed encoders in one kernel (sat and not, two formats), each with its own
    fix-up helper (NaN and overflow codes), against the interpreter."""
    x = random_f32(1 << 12, seed=21)
    outs = [np.zeros(len(x), t.np_dtype) for t in (opus.fp8_e4m3fnuz, opus.fp8_e4m3fnuz,
                                                   opus.fp8_e5m2fnuz)]
    run_kernel(fp8_variants, (len(x) // 2 + 255) // 256, 256, x, *outs, len(x), target="gfx942",
               workdir=tmp_path)
    for got, (t, sat) in zip(outs, [(opus.fp8_e4m3fnuz, False), (opus.fp8_e4m3fnuz, True),
                                    (opus.fp8_e5m2fnuz, False)]):
        ref = cast_on("gfx942", x, opus.f32, t, rounding="rn", sat=sat)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@opus.kernel
def odd_pairs(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.fp8_e4m3], SAT: opus.constexpr):
    t = opus.thread_id_x()
    v = opus.concat(opus.load(x, 4 * t, vec=2), opus.splat(x[4 * t + 2], 1))   # 3 lanes
    c = opus.cast(v, opus.fp8_e4m3, sat=SAT)
    for k in range(3):
        y[3 * t + k] = c[k]


@pytest.mark.parametrize("sat", [False, True])
def test_host_an_odd_lane_count_converts_its_last_lane_alone(sat, tmp_path):
    """sm_90a converts f32 pairs with one cvt.rn.satfinite.e4m3x2.f32; of 3 lanes the third is
    converted on its own, with the same saturation rule."""
    x = random_f32(64, seed=22) * 64          # many beyond e4m3's 448
    y = np.zeros(48, np.uint8)
    run_kernel(odd_pairs, 1, 16, x, y.view(opus.fp8_e4m3.np_dtype), target="sm_90a",
               workdir=tmp_path, SAT=sat)
    keep = np.array([4 * t + k for t in range(16) for k in range(3)])
    ref = cast_on("sm_90a", x[keep], opus.f32, opus.fp8_e4m3, rounding="rn", sat=sat)
    np.testing.assert_array_equal(y, ref.view(np.uint8))


@opus.kernel
def software_variants(x: opus.Ptr[opus.f32], a: opus.Ptr[opus.fp8_e4m3],
                      b: opus.Ptr[opus.fp8_e4m3], c: opus.Ptr[opus.e8m0], d: opus.Ptr[opus.e8m0],
                      y: opus.Ptr[opus.f32], z: opus.Ptr[opus.f32], n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        v = x[i]
        a[i] = opus.cast(v, opus.fp8_e4m3)
        b[i] = opus.cast(v, opus.fp8_e4m3, sat=True)
        c[i] = opus.cast(v, opus.e8m0)
        d[i] = opus.cast(v, opus.e8m0, sat=True)
        y[i] = opus.cast(opus.cast(v, opus.fp8_e4m3, sat=True), opus.f32)
        z[i] = opus.cast(opus.cast(v, opus.fp8_e5m2, sat=True), opus.f32)


def test_host_software_encoders_and_decoders_side_by_side(tmp_path):
    """sm_80 (no fp8 instructions): each software encoder and decoder is a helper named for its
    format and saturation; two of each in one kernel must stay two (a shared name would give
    both the first one's body). Against the interpreter, conversion by conversion."""
    x = random_f32(1 << 12, seed=23) * 256
    n = len(x)
    a, b = np.zeros(n, opus.fp8_e4m3.np_dtype), np.zeros(n, opus.fp8_e4m3.np_dtype)
    c, d = np.zeros(n, opus.e8m0.np_dtype), np.zeros(n, opus.e8m0.np_dtype)
    y, z = np.zeros(n, np.float32), np.zeros(n, np.float32)
    run_kernel(software_variants, (n + 255) // 256, 256, x, a, b, c, d, y, z, n,
               target="sm_80", workdir=tmp_path)
    bits = lambda v: v.view(np.uint8)
    for got, t, sat in ((a, opus.fp8_e4m3, False), (b, opus.fp8_e4m3, True),
                        (c, opus.e8m0, False), (d, opus.e8m0, True)):
        np.testing.assert_array_equal(bits(got), bits(cast_on("sm_80", x, opus.f32, t, sat=sat)))
    for got, t in ((y, opus.fp8_e4m3), (z, opus.fp8_e5m2)):
        q = cast_on("sm_80", x, opus.f32, t, sat=True)
        assert same_floats(got, cast_on("sm_80", q, t, opus.f32))


@opus.kernel
def half_pairs(x: opus.Ptr[opus.f32], h: opus.Ptr[opus.f16], b: opus.Ptr[opus.bf16],
               r: opus.Ptr[opus.f16]):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 2
    v = opus.load(x, i, vec=2)
    opus.store(h, opus.cast(v, opus.f16), i, vec=2)
    opus.store(b, opus.cast(v, opus.bf16), i, vec=2)
    opus.store(r, opus.cast(v, opus.f16, rounding="rz"), i, vec=2)


def test_host_packed_half_pairs_side_by_side(tmp_path):
    """sm_90a: cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32 and cvt.rz.f16x2.f32 in one kernel, each its
    own helper, against the interpreter."""
    pool = random_f32(64, seed=24)            # random bits and the formats' special cases
    x = pool[np.random.default_rng(24).choice(len(pool), 8192, replace=False)]
    h, r = np.zeros(8192, np.float16), np.zeros(8192, np.float16)
    b = np.zeros(8192, opus.bf16.np_dtype)
    run_kernel(half_pairs, 16, 256, x, h, b, r, target="sm_90a", workdir=tmp_path)
    for got, t, rnd in ((h, opus.f16, "rn"), (b, opus.bf16, "rn"), (r, opus.f16, "rz")):
        assert same_floats(got, cast_on("sm_90a", x, opus.f32, t, rounding=rnd))


@functools.lru_cache(None)
def hardware_variants(a_t, b_t):
    """Each of the chip's fp8 helpers twice in one kernel (encoders with and without sat, two
    formats, their stochastic forms, the decoders) and gfx950's 16-bit stochastic forms."""
    @opus.kernel
    def k(x: opus.Ptr[opus.f32], r: opus.Ptr[opus.u32], a: opus.Ptr[a_t], b: opus.Ptr[a_t],
          c: opus.Ptr[b_t], sa: opus.Ptr[a_t], sb: opus.Ptr[a_t], sc: opus.Ptr[b_t],
          h: opus.Ptr[opus.f16], g: opus.Ptr[opus.bf16], y: opus.Ptr[opus.f32],
          z: opus.Ptr[opus.f32], n: opus.i32):
        i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
        if i < n:
            v, rb = x[i], r[i]
            a[i] = opus.cast(v, a_t)
            b[i] = opus.cast(v, a_t, sat=True)
            c[i] = opus.cast(v, b_t)
            sa[i] = opus.cast(v, a_t, rounding="sr", rbits=rb)
            sb[i] = opus.cast(v, a_t, rounding="sr", sat=True, rbits=rb)
            sc[i] = opus.cast(v, b_t, rounding="sr", rbits=rb)
            h[i] = opus.cast(v, opus.f16, rounding="sr", rbits=rb)
            g[i] = opus.cast(v, opus.bf16, rounding="sr", rbits=rb)
            y[i] = opus.cast(opus.cast(v, a_t, sat=True), opus.f32)
            z[i] = opus.cast(opus.cast(v, b_t, sat=True), opus.f32)
    return k


@pytest.mark.parametrize("target,a_t,b_t", [("gfx942", opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz),
                                            ("gfx950", opus.fp8_e5m2, opus.fp8_e4m3)])
def test_host_hardware_helpers_side_by_side(target, a_t, b_t, tmp_path):
    """One lane at a time (no pairs): the chip's encoders, stochastic conversions and decoders
    are helpers named for format and sat; two of a kind in one kernel must stay two. Against
    the same kernel in the interpreter, output by output."""
    pool = random_f32(1 << 10, seed=25)
    x = pool[np.random.default_rng(25).choice(len(pool), 1 << 13, replace=False)]
    x[:64] = np.float32([448, 480, 57344, 61440, 240, 256]).repeat(11)[:64] * \
        np.where(np.arange(64) % 2, -1, 1).astype(np.float32)
    r = np.random.default_rng(26).integers(0, 1 << 32, len(x), dtype=np.uint64).astype(np.uint32)
    k = hardware_variants(a_t, b_t)
    types = [a_t, a_t, b_t, a_t, a_t, b_t, opus.f16, opus.bf16, opus.f32, opus.f32]
    outs = {}
    for where in ("host", "interp"):
        o = [np.zeros(len(x), t.np_dtype) for t in types]
        grid = (len(x) + 255) // 256
        if where == "host":
            run_kernel(k, grid, 256, x, r, *o, len(x), target=target, workdir=tmp_path)
        else:
            with opus.set_target(target, interpret=True):
                k[grid, 256](x, r, *o, len(x))
        outs[where] = o
    for i, (got, ref) in enumerate(zip(outs["host"], outs["interp"])):
        assert same_floats(got.view(ref.dtype), ref) if not types[i].storage_only else \
            np.array_equal(got.view(np.uint8), ref.view(np.uint8)), f"output {i}"


@opus.kernel
def ocp_pair_variants(x: opus.Ptr[opus.f32], a: opus.Ptr[opus.fp8_e4m3], b: opus.Ptr[opus.fp8_e4m3],
                      c: opus.Ptr[opus.fp8_e5m2], y: opus.Ptr[opus.f32], z: opus.Ptr[opus.f32]):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 2
    v = opus.load(x, i, vec=2)
    opus.store(a, opus.cast(v, opus.fp8_e4m3), i, vec=2)
    opus.store(b, opus.cast(v, opus.fp8_e4m3, sat=True), i, vec=2)
    opus.store(c, opus.cast(v, opus.fp8_e5m2), i, vec=2)
    opus.store(y, opus.cast(opus.cast(v, opus.fp8_e4m3, sat=True), opus.f32), i, vec=2)
    opus.store(z, opus.cast(opus.cast(v, opus.fp8_e5m2, sat=True), opus.f32), i, vec=2)


def test_host_ocp_pair_helpers_side_by_side(tmp_path):
    """sm_90a: the cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 encoders (with and without sat, two
    formats) and the cvt.rn.f16x2.{e4m3x2,e5m2x2} decoders in one kernel, each its own helper,
    against the interpreter."""
    pool = random_f32(64, seed=27)
    x = pool[np.random.default_rng(27).choice(len(pool), 8192, replace=False)]
    a, b = np.zeros(8192, opus.fp8_e4m3.np_dtype), np.zeros(8192, opus.fp8_e4m3.np_dtype)
    c = np.zeros(8192, opus.fp8_e5m2.np_dtype)
    y, z = np.zeros(8192, np.float32), np.zeros(8192, np.float32)
    run_kernel(ocp_pair_variants, 16, 256, x, a, b, c, y, z, target="sm_90a", workdir=tmp_path)
    for got, t, sat in ((a, opus.fp8_e4m3, False), (b, opus.fp8_e4m3, True), (c, opus.fp8_e5m2, False)):
        np.testing.assert_array_equal(got.view(np.uint8),
                                      cast_on("sm_90a", x, opus.f32, t, sat=sat).view(np.uint8))
    for got, t in ((y, opus.fp8_e4m3), (z, opus.fp8_e5m2)):
        q = cast_on("sm_90a", x, opus.f32, t, sat=True)
        assert same_floats(got, cast_on("sm_90a", q, t, opus.f32))


@opus.kernel
def software_sr_variants(x: opus.Ptr[opus.f32], r: opus.Ptr[opus.u32], a: opus.Ptr[opus.fp8_e4m3],
                         b: opus.Ptr[opus.fp8_e5m2], h: opus.Ptr[opus.bf16], n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        a[i] = opus.cast(x[i], opus.fp8_e4m3, rounding="sr", rbits=r[i])
        b[i] = opus.cast(x[i], opus.fp8_e5m2, rounding="sr", rbits=r[i])
        h[i] = opus.cast(x[i], opus.bf16, rounding="sr", rbits=r[i])


def test_host_software_stochastic_grids_side_by_side(tmp_path):
    """sm_80 (no stochastic instructions): one grid helper per destination format; three in
    one kernel must stay three. Against the interpreter."""
    x = random_f32(1 << 10, seed=28)
    n = len(x)
    r = np.random.default_rng(29).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    a, b = np.zeros(n, opus.fp8_e4m3.np_dtype), np.zeros(n, opus.fp8_e5m2.np_dtype)
    h = np.zeros(n, opus.bf16.np_dtype)
    run_kernel(software_sr_variants, (n + 255) // 256, 256, x, r, a, b, h, n, target="sm_80",
               workdir=tmp_path)
    for got, t in ((a, opus.fp8_e4m3), (b, opus.fp8_e5m2)):
        np.testing.assert_array_equal(got.view(np.uint8),
                                      sr_on("sm_80", x, r, opus.f32, t).view(np.uint8))
    assert same_floats(h, sr_on("sm_80", x, r, opus.f32, opus.bf16))
