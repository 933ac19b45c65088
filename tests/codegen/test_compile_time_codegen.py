"""The codegen forms that cut NVRTC's time on the Hopper GEMM (docs/compile_time.md), each
checked for what it must keep: stores of 16-bit vectors as 32-bit words (host-run values
against numpy, and no PRMT re-packing in SASS), wgmma accumulators of 128 lanes as one scalar
per lane (no struct copies in the source; the GEMM's SASS keeps its HGMMAs, registers and no
spills, with no wgmma waits injected by ptxas), the epilogue's swizzles computed once per panel
(and the promoted fp8 GEMM without spills), NVRTC's phase table, and the garbage collector
paused while tracing."""
import gc
import re

import numpy as np
import pytest

import opus
from opus import bf16, f32, i16
from opus.runtime import nvrtc
from hostexec import run_kernel


@opus.kernel
def halves_out(x: opus.Ptr[f32], y: opus.Ptr[bf16], z: opus.Ptr[i16], VEC: opus.constexpr):
    t = opus.thread_id_x()
    v = opus.load(x, t * VEC, vec=VEC)
    opus.store(y, opus.cast(v, bf16), t * VEC, vec=VEC)       # packed cvt pairs, one store
    opus.store(z, opus.cast(v, i16), t * VEC, vec=VEC)        # signed lanes: no sign spill


def _bf16_bits(x):
    """Round-to-nearest-even bf16 bits of f32 values (numpy, by hand)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


@opus.kernel
def copy_bf16x8(x: opus.Ptr[bf16], y: opus.Ptr[bf16]):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 8, vec=8), t * 8, vec=8)  # 16 bytes: four words


def test_16_byte_bf16_vector_store(tmp_path):
    x = np.arange(64, dtype=np.uint16) * 1031 + 7
    y = np.zeros(64, np.uint16)
    run_kernel(copy_bf16x8, 1, 8, x, y, target="sm_90a", workdir=tmp_path)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("vec", [2, 4])
def test_16_bit_vector_stores_keep_every_lane(vec, tmp_path):
    """Each 32-bit word holds lane 2i in its low half and lane 2i+1 in its high half; negative
    i16 lanes do not smear their sign bits over their neighbours."""
    x = (np.arange(8 * vec, dtype=np.float32) - 4 * vec) * 1.37
    y = np.zeros(8 * vec, np.uint16)
    z = np.zeros(8 * vec, np.int16)
    run_kernel(halves_out, 1, 8, x, y, z, target="sm_90a", workdir=tmp_path, VEC=vec)
    np.testing.assert_array_equal(y, _bf16_bits(x))
    np.testing.assert_array_equal(z, np.trunc(x).astype(np.int16))


@opus.kernel
def bf16_pairs_out(x: opus.Ptr[f32], y: opus.Ptr[bf16]):
    t = opus.thread_id_x()
    opus.store(y, opus.cast(opus.load(x, t * 2, vec=2), bf16), t * 2, vec=2)


def test_16_bit_vector_store_is_one_word_store_without_repacking():
    """A bf16 pair from one packed cvt goes to memory as the cvt's word: no PRMT in SASS (the
    struct of two halves was split and re-packed by a PRMT per pair). Lanes that no packed
    cvt made (the i16 casts of halves_out) keep the struct store."""
    src = bf16_pairs_out.source(target="sm_90a")
    assert re.search(r"\*\(unsigned\*\)\(p_y_\d+ \+ ", src), src
    assert not re.search(r"\*\(unsigned\*\)\(p_z_", halves_out.source(target="sm_90a", VEC=2))
    sass = bf16_pairs_out.sass(target="sm_90a")
    assert "F2FP.BF16.F32.PACK_AB" in sass
    assert "PRMT" not in sass, sass


def _gemm(**cv):
    from opus.ops import gemm_hopper as G
    return G.gemm_kernel, dict(dict(DT=bf16), **cv)


def _sass_instructions(sass):
    return sum(1 for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line))


@pytest.mark.parametrize("kmajor,most", [(False, 950), (True, 920)])
def test_gemm_accumulator_is_scalars_and_its_sass_holds(kmajor, most):
    """The m64n256 f32 accumulator (128 lanes) is 128 C variables, never a struct copied whole;
    the kernel keeps 4 HGMMA per stage, no spills, at most 168 registers (the count before),
    and ptxas neither serializes the wgmmas (C7514) nor injects waits (C7517). Its SASS holds
    at most ``most`` instructions (928 and 896 with the epilogue's swizzles hoisted, 1272 and
    1240 before: docs/compile_time.md)."""
    k, cv = _gemm(B_KMAJOR=kmajor)
    src = k.source(target="sm_90a", **cv)
    assert "opus_f32x128" not in src
    assert re.search(r"float v\d+_0, v\d+_1, ", src)
    log = nvrtc.compile_cuda(k.specialize(target="sm_90a", **cv).source, arch="sm_90a").log
    assert "C7514" not in log and "C7517" not in log, log
    res = k.resources(target="sm_90a", **cv)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0 and res["registers"] <= 168
    sass = k.sass(target="sm_90a", **cv)
    assert sum("HGMMA.64x256x16.F32.BF16" in l for l in sass.splitlines()) == 4
    assert _sass_instructions(sass) <= most


def test_gemm_epilogue_swizzles_each_panel_once():
    """The epilogue's 16 stores per 64-column panel (a wgmma fragment into a 128-byte swizzled
    tile) swizzle the thread's base once per panel, 4 in all (64 before: one per store): the
    bf16 swizzle's source mask (bits 6-8: 448) appears once per panel in the CUDA source."""
    k, cv = _gemm()
    assert k.source(target="sm_90a", **cv).count("& 448)") == 4


@pytest.mark.parametrize("block_n,stages,most", [(192, 4, 1420), (256, 3, 1640)])
def test_fp8_promoted_gemm_does_not_spill(block_n, stages, most):
    """The fp8 default of ``opus.ops.scaled_gemm`` (promoted accumulation, block_n 192 with the
    4 stages that fit, tensor scales) and the 256-wide tile: ptxas reports 0 spill bytes (100
    and 168 bytes spilled when each epilogue store recomputed its swizzled address) and the
    SASS stays within ``most`` instructions (1392 and 1608 now, 1648 and 2016 before)."""
    from opus import fp8_e4m3
    from opus.ops import gemm_hopper as G
    k = G.gemm_kernel_for(bf16, promoted=True)
    cv = dict(DT=fp8_e4m3, BN=block_n, STAGES=stages, B_KMAJOR=True, SCALES=(1, 1),
              PROMOTE=G._PROMOTE_PIECES[block_n])
    log = nvrtc.compile_cuda(k.source(target="sm_90a", **cv), arch="sm_90a").log
    assert re.search(r"\b0 bytes spill stores, 0 bytes spill loads", log), log
    res = k.resources(target="sm_90a", **cv)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert _sass_instructions(k.sass(target="sm_90a", **cv)) <= most


def test_nvrtc_phase_table():
    """compile_phases: NVRTC's three phases of a CUBIN compile, each a positive time."""
    r, phases = nvrtc.compile_phases(halves_out.specialize(target="sm_90a", VEC=4).source,
                                     arch="sm_90a")
    assert r.cubin[:4] == b"\x7fELF"
    assert set(phases) == {"CUDA C++ Frontend", "NVVM Optimizer", "PTX Translation"}, phases
    assert all(v > 0 for v in phases.values()), phases


def test_phase_rows_sum_repeated_phases():
    csv = ("File name, phase name, metric, unit\n"  # absent where the file existed
           "kernel.cu, CUDA C++ Frontend, 12.5, ms\n"
           "kernel.cu, NVVM Optimizer, 30, ms\nkernel.cu, NVVM Optimizer, 2, ms\n"
           "kernel.cu, something, 7, KB\n")
    want = {"CUDA C++ Frontend": 12.5, "NVVM Optimizer": 32.0}
    assert nvrtc._phase_rows(csv) == want
    assert nvrtc._phase_rows(csv.split("\n", 1)[1]) == want


@opus.kernel
def records_gc(x: opus.Ptr[opus.i32], NOTE: opus.constexpr):
    NOTE(gc.isenabled())  # runs while tracing
    x[0] = 1


@pytest.mark.parametrize("was_on", [True, False])
def test_trace_runs_with_the_collector_paused(was_on):
    """The collector is off while a kernel is traced and as it was afterwards."""
    seen = []
    (gc.enable if was_on else gc.disable)()
    try:
        records_gc.specialize(target="sm_90a", NOTE=seen.append)
        assert seen == [False]
        assert gc.isenabled() == was_on
    finally:
        gc.enable()
