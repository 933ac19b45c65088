"""AMD target (gfx942 / gfx950): render headerless HIP, compile with clang's AMDGPU backend, and
check the assembly. No AMD GPU needed."""
import os
import re
import sys
import time

import numpy as np
import pytest

import opus
from opus import f16, f32
from opus.examples import mfma_gemm_32x32
from opus.targets import get_target

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_TESTS, "interp"))
from kernels import reduce, vadd_vec  # noqa: E402  (shared with the interpreter tests)

ARCHS = ("gfx942", "gfx950")


@pytest.fixture(scope="module", autouse=True)
def _private_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OPUS_CACHE_DIR", str(tmp_path_factory.mktemp("opus-amd-cache")))
    yield
    mp.undo()


def _compiler_or_skip():
    from opus.runtime.amd_build import hip_compiler
    from opus.errors import OpusRuntimeError
    try:
        return hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))


def asm_of(kernel, arch, **cx):
    _compiler_or_skip()
    from opus.runtime.amd_build import assemble_amd
    return assemble_amd(kernel.source(target=arch, **cx), get_target(arch))


def instrs(asm):
    return [l.strip() for l in asm.splitlines() if l.startswith("\t") and not l.strip().startswith(".")]


# -- kernels ---------------------------------------------------------------------------------------
add = vadd_vec["f16"]  # f16, 8 per access: the README's first kernel


@opus.kernel
def add32(x: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * 4
    gx, go = opus.make_gmem(x, n), opus.make_gmem(out, n)
    go.store(gx.load(i, vec=4) * 2.0, i)


@opus.kernel(block=64)
def mfma_smoke(a: opus.Ptr[f16], b: opus.Ptr[f16], c: opus.Ptr[f32], SHAPE: opus.constexpr = (32, 32, 8)):
    # A is M x K row-major, B is K x N row-major, C is M x N row-major; one wave
    mma = opus.make_mma(f16, f16, f32, SHAPE)
    lane = opus.lane_id()
    av = []
    for i in range(mma.elem_a):
        m, k = mma.coords_a(lane, i)
        av.append(a[m * mma.k + k])
    bv = []
    for i in range(mma.elem_b):
        k, n = mma.coords_b(lane, i)
        bv.append(b[k * mma.n + n])
    cv = mma(opus.make_vector(*av), opus.make_vector(*bv))
    for i in range(mma.elem_c):
        m, n = mma.coords_c(lane, i)
        c[m * mma.n + n] = cv[i]


# -- target basics ---------------------------------------------------------------------------------
def test_target_properties():
    t2, t5 = get_target("gfx942"), get_target("gfx950")
    assert t2.vendor == "amd" and t2.warp_size == 64 and t5.warp_size == 64
    assert t2.smem_bytes == 65536 and t5.smem_bytes == 163840
    assert t2.buffer_config == t5.buffer_config == 0x00020000


def test_fp8_flavours():
    assert get_target("gfx942").resolve_dtype(opus.fp8) is opus.fp8_e4m3fnuz
    assert get_target("gfx942").resolve_dtype(opus.bf8) is opus.fp8_e5m2fnuz
    assert get_target("gfx950").resolve_dtype(opus.fp8) is opus.fp8_e4m3
    assert get_target("gfx950").resolve_dtype(opus.bf8) is opus.fp8_e5m2

    @opus.kernel
    def k(x: opus.Ptr[opus.fp8], y: opus.Ptr[f32]):
        y[0] = opus.cast(x[0], f32)
        x[1] = opus.cast(y[1], opus.fp8)

    assert k.specialize(target="gfx942").function.params[0].type.elem is opus.fp8_e4m3fnuz
    assert k.specialize(target="gfx950").function.params[0].type.elem is opus.fp8_e4m3
    for arch in ARCHS:
        asm = asm_of(k, arch)
        assert "v_cvt_f32_fp8" in asm and "v_cvt_pk_fp8_f32" in asm


@pytest.mark.parametrize("arch,t", [("gfx942", opus.fp8_e4m3), ("gfx942", opus.fp8_e5m2),
                                    ("gfx950", opus.fp8_e4m3fnuz), ("gfx950", opus.fp8_e5m2fnuz),
                                    ("gfx942", opus.e8m0), ("gfx950", opus.e8m0)])
def test_other_fp8_flavour_and_e8m0_convert_in_software(arch, t):
    """The flavour a chip has no instructions for (OCP on gfx942, FNUZ on gfx950) and e8m0 build
    with the bit arithmetic CUDA uses (codegen/fp8.py): no conversion instruction in the asm."""
    @opus.kernel
    def k(x: opus.Ptr[t], y: opus.Ptr[f32]):
        y[0] = opus.cast(x[0], f32)
        x[1] = opus.cast(y[1], t)
        x[2] = opus.cast(y[2], t, sat=True)

    asm = asm_of(k, arch)
    assert not re.search(r"v_cvt_(pk_)?(f32_)?(fp8|bf8)", asm)
    assert f"opus_f32_to_{t.name}" in k.source(target=arch)


def test_f16_32x32x16_is_native_on_gfx950_and_two_chained_mfmas_on_gfx942():
    # gfx942 has no v_mfma_f32_32x32x16_f16: the original's STEP_K issues 32x32x8 twice
    src942 = mfma_smoke.source(target="gfx942", SHAPE=(32, 32, 16))
    assert src942.count("__builtin_amdgcn_mfma_f32_32x32x8f16(") == 2
    assert "mfma_f32_32x32x16_f16" not in src942
    assert "mfma_f32_32x32x16_f16" in mfma_smoke.source(target="gfx950", SHAPE=(32, 32, 16))
    with pytest.raises(opus.TraceError, match="16x16x64 on gfx942"):   # no such f16 shape at all
        mfma_smoke.specialize(target="gfx942", SHAPE=(16, 16, 16 * 4))


def test_printf_is_a_clear_error():
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        opus.printf("%f\n", x[0])

    with pytest.raises(opus.TraceError, match="printf is not available on gfx942"):
        k.source(target="gfx942")


# -- lane layout and emulation ---------------------------------------------------------------------
def test_mfma_32x32x8_layout_matches_inventory():
    s = get_target("gfx942").mma_instruction(f16, f16, f32, (32, 32, 8))
    assert (s.elem_a, s.elem_b, s.elem_c, s.warp) == (4, 4, 16, 64)
    for l in range(64):
        for j in range(4):
            assert s.coords_a(l, j) == (l % 32, 4 * (l // 32) + j)
            assert s.coords_b(l, j) == (4 * (l // 32) + j, l % 32)  # (k, n)
        for r in range(4):
            for j in range(4):
                assert s.coords_c(l, 4 * r + j) == (8 * r + 4 * (l // 32) + j, l % 32)


def test_mfma_16x16x16_layout_matches_inventory():
    s = get_target("gfx942").mma_instruction(f16, f16, f32, (16, 16, 16))
    for l in range(64):
        for j in range(4):
            assert s.coords_a(l, j) == (l % 16, 4 * (l // 16) + j)
            assert s.coords_c(l, j) == (4 * (l // 16) + j, l % 16)


# Every MFMA row of each chip's table: layout against the manual, interpreter against numpy,
# assembly holding the MFMA: tests/targets/test_matrix_atoms.py (it loops over the tables).


# -- rendered source and assembly ------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_add_vec8_fp16_buffer_loads(arch):
    src = add.source(target=arch)
    assert "#include" not in src and "__builtin_amdgcn_make_buffer_rsrc" in src
    assert "amdgpu_flat_work_group_size(1, 1024)" in src
    asm = asm_of(add, arch)
    ins = instrs(asm)
    assert any(i.startswith("buffer_load_dwordx4") for i in ins)
    assert any(i.startswith("buffer_store_dwordx4") for i in ins)
    assert any(i.startswith("buffer_load_ushort") for i in ins)  # exact tail, per element
    assert not any(re.match(r"(global|flat)_(load|store)", i) for i in ins)


@pytest.mark.parametrize("arch", ARCHS)
def test_add_f32_is_branch_free(arch):
    ins = instrs(asm_of(add32, arch))
    assert sum(i.startswith("buffer_load_dwordx4") for i in ins) == 1
    assert sum(i.startswith("buffer_store_dwordx4") for i in ins) == 1
    assert not any(i.startswith("s_cbranch") for i in ins)


def test_negative_offsets_do_not_alias():
    from opus.codegen import hip
    # the byte offset helper maps every negative or too-large element offset to >= num_records
    OOB = hip._OOB
    def boff(off, s, t):
        return (off * s) & 0xFFFFFFFF if 0 <= off <= (OOB - t) // s else OOB
    def nrec(bound, s):
        return 0 if bound <= 0 else (OOB if bound >= OOB // s else bound * s)
    for s, t in ((1, 1), (2, 2), (2, 16), (4, 16), (8, 8)):
        for bound in (0, 1, 7, 1 << 20, (1 << 31) - 1):
            for off in (-(1 << 31), -(1 << 31) // s, -2, -1, 0, bound - 1, bound, 1 << 30, (1 << 31) - 1):
                inb = 0 <= off < bound and off * s + t <= OOB
                assert (boff(off, s, t) < nrec(bound, s)) == inb or off * s + t > OOB
                assert boff(off, s, t) + 15 <= 0xFFFFFFFF


@pytest.mark.parametrize("arch", ARCHS)
def test_reduce_smem_barrier(arch):
    src = reduce.source(target=arch)
    assert "__attribute__((shared))" in src and "amdgpu_flat_work_group_size(1, 256)" in src
    asm = asm_of(reduce, arch)
    ins = instrs(asm)
    assert sum(i == "s_barrier" for i in ins) >= 9
    assert any(i.startswith("ds_write") or i.startswith("ds_read") for i in ins)
    from opus.runtime.amd_build import resources_amd
    r = resources_amd(asm)["reduce_opus"]
    assert r["smem_bytes"] == 1024 and r["max_block"] == 256 and r["vgpr_spills"] == 0


def test_mfma_smoke():
    src = mfma_smoke.source(target="gfx942")
    assert "__builtin_amdgcn_mbcnt_hi" in src
    ins = instrs(asm_of(mfma_smoke, "gfx942"))
    assert any(i.startswith("v_mfma_f32_32x32x8_f16 ") for i in ins), [i for i in ins if "mfma" in i]


@pytest.mark.parametrize("arch", ARCHS)
def test_mfma_gemm_example_builds(arch):
    src = mfma_gemm_32x32.source(target=arch)
    assert "__builtin_amdgcn_mfma_f32_32x32x8f16" in src
    ins = instrs(asm_of(mfma_gemm_32x32, arch))
    assert any(i.startswith("v_mfma_f32_32x32x8") for i in ins), [i for i in ins if "mfma" in i]
    from opus.runtime.amd_build import build_amd, resources_amd
    obj = build_amd(src, get_target(arch)).binary
    assert obj[:4] == b"\x7fELF" and resources_amd(obj)["mma_gemm_opus"]["vgpr_spills"] == 0


def test_build_code_object_and_resources():
    _compiler_or_skip()
    from opus.runtime.build import build
    from opus.runtime.amd_build import resources_amd
    t0 = time.perf_counter()
    b = build(mfma_smoke.source(target="gfx942"), get_target("gfx942"))
    dt = time.perf_counter() - t0
    assert b.binary[:4] == b"\x7fELF" and not b.cached
    r = resources_amd(b.binary)["mfma_smoke_opus"]
    assert r["wave"] == 64 and r["vgprs"] > 0 and r["sgpr_spills"] == 0
    b2 = build(mfma_smoke.source(target="gfx942"), get_target("gfx942"))
    assert b2.cached and b2.binary == b.binary
    assert dt < 30


def test_math_and_conversions_compile():
    @opus.kernel
    def k(x: opus.Ptr[f32], h: opus.Ptr[opus.bf16], q: opus.Ptr[f16], o: opus.Ptr[opus.i32]):
        i = opus.thread_id_x()
        v = x[i]
        r = opus.exp(v) + opus.log(v) + opus.sqrt(v) + opus.rsqrt(v) \
            + opus.tanh(v) + opus.sin(v) + opus.floor(v) + opus.exp2(v)
        h[i] = opus.cast(r, opus.bf16)
        q[i] = opus.cast(r, f16, rounding="rz")
        o[i] = opus.cast(r, opus.i32)
        x[i] = opus.max(r, v)

    for arch in ARCHS:
        src = k.source(target=arch)
        asm = asm_of(k, arch)
        assert "s_endpgm" in asm and "#include" not in src
        assert not any("swappc" in i for i in instrs(asm))  # no library calls
    from opus.runtime.amd_build import build_amd
    assert build_amd(k.source(target="gfx950"), get_target("gfx950")).binary[:4] == b"\x7fELF"


def test_f64_transcendental_is_an_error_naming_the_chip():
    @opus.kernel
    def k(x: opus.Ptr[opus.f64]):
        x[0] = opus.exp(x[0])

    with pytest.raises(Exception, match="exp on f64.*gfx942"):
        k.source(target="gfx942")


def test_hip_driver_missing_library_is_clear():
    from opus.runtime import hip_driver
    if hip_driver.hip_available():
        pytest.skip("ROCm present")
    with pytest.raises(hip_driver.HipError, match="libamdhip64"):
        hip_driver.load_module(b"")
