"""What a target refuses, and the words it refuses with (targets/base.py, targets/limits.py),
checked against hand-written values: the launch limits of the CUDA Programming Guide's table of
technical specifications (1024 threads per block, 1024 x 1024 x 64 per axis, grids of
2^31-1 x 65535 x 65535, 48 KiB static shared memory, 227 KiB with the opt-in on 9.0) and of HIP on
CDNA (1024 per axis, work-items per grid axis a u32), the PTX cp.async sizes (4, 8, 16; .cg 16
only) and the messages as a user reads them. The tests build their targets and limits
themselves (not through get_target's cache), so they exercise the constructors too."""
import pytest

from opus.errors import ArgumentError
from opus.targets.amd import AmdTarget
from opus.targets.base import Instruction, OnlyOn, Since, UnsupportedOnTarget
from opus.targets.limits import Limits, check_dynamic_smem, check_launch_shape, static_smem_error
from opus.targets.nvidia import NvidiaTarget

SM90_LIMITS = dict(block_dims=(1024, 1024, 64), threads_per_block=1024,
                   grid_dims=(2 ** 31 - 1, 65535, 65535), grid_items=None,
                   static_smem=48 * 1024, smem_per_block=227 * 1024)
CDNA_LIMITS = dict(block_dims=(1024, 1024, 1024), threads_per_block=1024,
                   grid_dims=(2 ** 31 - 1,) * 3, grid_items=2 ** 32 - 1,
                   static_smem=64 * 1024, smem_per_block=64 * 1024)


# -- Target construction and its fields -------------------------------------------------------

def test_a_target_made_by_name_knows_its_name_and_arch():
    t = NvidiaTarget("sm_86")
    assert t.name == "sm_86"
    assert (t.arch.vendor, t.arch.capability, t.arch.suffix) == ("nvidia", (8, 6), "")
    a = AmdTarget("gfx950")
    assert (a.name, a.arch.vendor, a.arch.major) == ("gfx950", "amd", 9)
    assert repr(a) == "<Target gfx950>"


def test_a_target_of_another_vendor_or_unknown_chip_is_refused_by_name():
    with pytest.raises(ValueError) as e:
        NvidiaTarget("gfx942")
    assert str(e.value) == ("unknown nvidia arch 'gfx942'; known: "
                            "('sm_80', 'sm_86', 'sm_89', 'sm_90', 'sm_90a')")
    with pytest.raises(ValueError) as e:
        AmdTarget("gfx90a")
    assert str(e.value) == "unknown amd arch 'gfx90a'; known: ('gfx942', 'gfx950')"


def test_instruction_keeps_what_it_was_given():
    avail, types_, lower, emu = (lambda t: True), (lambda o, a: []), {"cuda": None}, (lambda *a: [])
    ins = Instruction("nv.demo", avail, types_, lower, emu, doc="a demo")
    assert (ins.name, ins.available, ins.result_types, ins.lower, ins.emulate, ins.doc) == (
        "nv.demo", avail, types_, lower, emu, "a demo")
    assert Instruction("x", avail, types_, lower, emu).doc == ""


def test_availability_predicates_and_their_repr():
    since = Since("sm_89")
    assert [since(NvidiaTarget(n)) for n in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")] == [
        False, False, True, True, True]
    assert not since(AmdTarget("gfx950"))  # gfx 9.5 is past 8.9, but of another vendor
    assert repr(since) == "Since('sm_89')"
    only = OnlyOn("gfx950", "gfx942")
    assert repr(only) == "OnlyOn('gfx942', 'gfx950')"
    assert repr(OnlyOn("sm_90a")) == "OnlyOn('sm_90a')"
    assert only(AmdTarget("gfx942")) and not OnlyOn("gfx950")(AmdTarget("gfx942"))


# -- features a chip lacks: each refusal names the feature, the chip and why --------------------

def _refusal(fn, *args):
    with pytest.raises(UnsupportedOnTarget) as e:
        fn(*args)
    return str(e.value)


def test_amd_only_features_are_refused_on_nvidia_with_the_nvidia_way():
    t = NvidiaTarget("sm_90a")
    assert _refusal(t.require_dpp, "opus.mov_dpp") == (
        "opus.mov_dpp is not available on sm_90a: DPP (data-parallel primitives: mov_dpp, "
        "upd_dpp) is an AMD GFX9 feature; NVIDIA moves values between lanes with opus.shfl / "
        "shfl_xor / shfl_up / shfl_down")
    assert _refusal(t.require_ds_permute, "opus.permute") == (
        "opus.permute is not available on sm_90a: NVIDIA has no forward (push) lane permute: "
        "shuffles pull, so invert the mapping and use opus.bpermute or opus.shfl")
    assert _refusal(t.require_s_waitcnt) == (
        "opus.s_waitcnt is not available on sm_90a: s_waitcnt is AMD's; NVIDIA waits for its "
        "async copies with opus.wait_async (cp.async.wait_group)")
    assert _refusal(t.require_lds_load, 4) == (
        "opus.copy_async_lds (buffer_load ... lds) is not available on sm_90a: buffer_load ... "
        "lds is AMD's; NVIDIA copies global memory to shared memory with opus.copy_async "
        "(cp.async)")


def test_nvidia_only_features_are_refused_on_amd():
    t = AmdTarget("gfx942")
    assert _refusal(t.require_tma, "opus.tma_load") == (
        "opus.tma_load is not available on gfx942: AMD GPUs have no tensor memory accelerator "
        "(TMA) or mbarriers (they are NVIDIA sm_90 features)")
    assert _refusal(t.require_printf) == (
        "printf is not available on gfx942: device printf needs the ROCm device library's "
        "hostcall buffer (ockl), which headerless device-only builds do not link")
    assert _refusal(t.require_cp_async, 16) == (
        "opus.copy_async (cp.async) is not available on gfx942: cp.async is NVIDIA's; AMD copies "
        "global memory to LDS with opus.copy_async_lds (buffer_load ... lds), which writes one "
        "slot per lane from a wave-uniform LDS base instead of any address per thread")


def test_tma_needs_compute_capability_9():
    assert _refusal(NvidiaTarget("sm_89").require_tma, "an mbarrier wait") == (
        "an mbarrier wait is not available on sm_89: TMA and mbarrier waits need compute "
        "capability 9.0 (sm_90, sm_90a); sm_89 is 8.9")
    NvidiaTarget("sm_90").require_tma("an mbarrier wait")  # has it: no error


def test_features_a_chip_has_are_not_refused():
    nv, amd = NvidiaTarget("sm_80"), AmdTarget("gfx950")
    nv.require_printf()
    for nbytes in (4, 8, 16):
        nv.require_cp_async(nbytes)
    nv.require_cp_async(16, "cg")
    amd.require_dpp("opus.mov_dpp")
    amd.require_ds_permute("opus.permute")
    amd.require_s_waitcnt()
    for nbytes in (1, 2, 4, 12, 16):
        amd.require_lds_load(nbytes)


def test_copy_sizes_the_instruction_lacks_are_refused_with_the_sizes_it_has():
    nv = NvidiaTarget("sm_90a")
    assert _refusal(nv.require_cp_async, 2) == (
        "opus.copy_async of 2 bytes per copy is not available on sm_90a: cp.async moves 4, 8 "
        "or 16 bytes")
    assert _refusal(nv.require_cp_async, 8, "cg") == (
        "cache='cg' copies 16 bytes only (PTX cp.async.cg); this copy moves 8 bytes on sm_90a: "
        "use cache='ca'")
    assert _refusal(AmdTarget("gfx942").require_lds_load, 12) == (
        "opus.copy_async_lds of 12 bytes per lane is not available on gfx942: buffer_load ... "
        "lds moves 1, 2 or 4 bytes per lane there")

    class OneSize(NvidiaTarget):
        cp_async_sizes = (16,)
    assert _refusal(OneSize("sm_80").require_cp_async, 4).endswith(": cp.async moves 16 bytes")


def test_f64_math_names_the_functions_the_chip_has():
    t = AmdTarget("gfx942")
    assert t.has_math("exp", _dtype("f32")) and t.has_math("sqrt", _dtype("f64"))
    assert _refusal(t.require_math, "exp", _dtype("f64")) == (
        "opus.exp on f64 is not available on gfx942 (headerless builds link no device math "
        "library; f64 functions here: ceil, floor, rint, rsqrt, sqrt, trunc); compute it in f32")

    class NoF64Math(AmdTarget):
        math_f64 = frozenset()
    assert "f64 functions here: none)" in _refusal(NoF64Math("gfx950").require_math, "sqrt",
                                                   _dtype("f64"))


def _dtype(name):
    import opus.dtypes as dt
    return getattr(dt, name)


def test_cache_hints_per_access_kind():
    nv = NvidiaTarget("sm_90a")
    assert nv.cache_policy("streaming", "store") == ".cs"
    assert nv.cache_policy("read_only", "load") == ".nc"
    # a hint the chip has for loads only: refused on a store (not a KeyError), listing the
    # store hints
    assert _refusal(nv.cache_policy, "last_use", "store") == (
        "cache hint LAST_USE on a store is not available on sm_90a: PTX stores have no last-use "
        "or read-only (non-coherent) forms: those hints apply to loads; store hints here: "
        "NORMAL, STREAMING, EVICT_FIRST, EVICT_LAST, NO_ALLOCATE")
    assert _refusal(AmdTarget("gfx942").cache_policy, "read_only", "load") == (
        "cache hint READ_ONLY on a load is not available on gfx942: CDNA buffer and global "
        "instructions carry coherence-scope (sc0, sc1) and non-temporal (nt) bits only: "
        "STREAMING is the hint they express; load hints here: NORMAL, STREAMING")


# -- launch limits ----------------------------------------------------------------------------

def test_limits_keep_their_fields():
    lim = Limits(**SM90_LIMITS)
    assert repr(lim) == ("Limits(block_dims=(1024, 1024, 64), threads_per_block=1024, "
                         "grid_dims=(2147483647, 65535, 65535), grid_items=None, "
                         "static_smem=49152, smem_per_block=232448)")


@pytest.mark.parametrize("grid,block", [
    ((1, 1, 1), (1024, 1, 1)), ((1, 1, 1), (1, 1024, 1)), ((1, 1, 1), (1, 1, 64)),
    ((1, 1, 1), (16, 1, 64)), ((1, 1, 1), (32, 32, 1)), ((1, 1, 1), (1, 32, 32)),
    ((2 ** 31 - 1, 65535, 65535), (1, 1, 1)),
], ids=["x1024", "y1024", "z64", "16x1x64", "32x32", "1x32x32", "grid-at-limits"])
def test_a_launch_at_the_nvidia_limits_is_accepted(grid, block):
    check_launch_shape(Limits(**SM90_LIMITS), "sm_90a", "k", grid, block)


@pytest.mark.parametrize("grid,block,message", [
    ((1, 1, 1), (1025, 1, 1),
     "kernel 'k': block.x = 1025 exceeds sm_90a's limit of 1024 threads along x "
     "(block=(1025, 1, 1))"),
    ((1, 1, 1), (1, 1, 65),
     "kernel 'k': block.z = 65 exceeds sm_90a's limit of 64 threads along z (block=(1, 1, 65))"),
    ((1, 1, 1), (16, 8, 16),
     "kernel 'k': block (16, 8, 16) has 2048 threads; sm_90a allows at most 1024 per block"),
    ((1, 65536, 1), (1, 1, 1),
     "kernel 'k': grid.y = 65536 exceeds sm_90a's limit of 65535 blocks along y"),
    ((2 ** 31, 1, 1), (1, 1, 1),
     "kernel 'k': grid.x = 2147483648 exceeds sm_90a's limit of 2147483647 blocks along x"),
], ids=["x1025", "z65", "2048-threads", "grid-y", "grid-x"])
def test_a_launch_past_the_nvidia_limits_is_refused(grid, block, message):
    with pytest.raises(ArgumentError) as e:
        check_launch_shape(Limits(**SM90_LIMITS), "sm_90a", "k", grid, block)
    assert str(e.value) == message


def test_amd_counts_work_items_per_grid_axis_in_32_bits():
    lim = Limits(**CDNA_LIMITS)
    # (2^32 - 1) / 3 blocks of 3 = exactly 2^32 - 1 work-items: the most a u32 holds
    check_launch_shape(lim, "gfx942", "k", (1431655765, 1, 1), (3, 1, 1))
    check_launch_shape(lim, "gfx942", "k", (1, 4194303, 1), (1, 1024, 1))
    check_launch_shape(lim, "gfx942", "k", (1, 1, 1), (1, 1, 1024))   # 1024 along z: CDNA has it
    with pytest.raises(ArgumentError) as e:
        check_launch_shape(lim, "gfx942", "k", (1, 4194304, 1), (1, 1024, 1))
    assert str(e.value) == ("kernel 'k': grid.y * block.y = 4194304 * 1024 = 4294967296 "
                            "work-items exceeds gfx942's limit of 4294967295 along y (use fewer "
                            "blocks, each doing more work)")


def test_dynamic_shared_memory_up_to_the_opt_in_limit():
    lim = Limits(**SM90_LIMITS)
    assert check_dynamic_smem(lim, "sm_90a", "k", 232448 - 1024, 1024) == 231424
    with pytest.raises(ArgumentError) as e:
        check_dynamic_smem(lim, "sm_90a", "k", 232448 - 1023, 1024)
    assert str(e.value) == ("kernel 'k' needs 232449 bytes of shared memory (1024 static + "
                            "231425 dynamic); sm_90a allows 232448 per block")
    with pytest.raises(ArgumentError) as e:   # a device's own number wins over the table
        check_dynamic_smem(lim, "sm_90a", "k", 100000, 0, device_max=99999)
    assert str(e.value) == ("kernel 'k' needs 100000 bytes of shared memory (0 static + 100000 "
                            "dynamic); the device allows 99999 per block")
    assert check_dynamic_smem(lim, "sm_90a", "k", 101376, 0, device_max=101376) == 101376


def test_static_shared_memory_limit_and_what_to_use_past_it():
    assert static_smem_error(Limits(**SM90_LIMITS), "sm_90a", 49152) is None
    assert static_smem_error(Limits(**SM90_LIMITS), "sm_90a", 49153) == (
        "static shared memory of 49153 bytes exceeds sm_90a's limit of 49152 bytes per block; "
        "use opus.dynamic_smem for larger buffers (up to 232448 bytes with the static part)")
    # LDS: static and dynamic share one limit, so dynamic shared memory is no way out
    assert static_smem_error(Limits(**CDNA_LIMITS), "gfx942", 65536) is None
    assert static_smem_error(Limits(**CDNA_LIMITS), "gfx942", 65537) == (
        "static shared memory of 65537 bytes exceeds gfx942's limit of 65536 bytes per block")


@pytest.mark.parametrize("smem", [-1, 1.5, True, None])
def test_dynamic_shared_memory_must_be_a_non_negative_int(smem):
    with pytest.raises(ArgumentError) as e:
        check_dynamic_smem(Limits(**SM90_LIMITS), "sm_90a", "k", smem, 0)
    assert str(e.value) == f"smem must be a non-negative int of bytes, got {smem!r}"


# -- conversions two lanes at a time (PTX ISA "cvt"; AMD CDNA3/CDNA4 ISA v_cvt_pk_*) ----------

def test_packed_conversions_by_hand():
    sm89, sm80, cdna3 = NvidiaTarget("sm_89"), NvidiaTarget("sm_80"), AmdTarget("gfx942")
    f32, f16, bf16 = _dtype("f32"), _dtype("f16"), _dtype("bf16")
    e4m3, e5m2 = _dtype("fp8_e4m3"), _dtype("fp8_e5m2")
    assert sm80.packed_conversion(f32, f16) == "cvt.rn.f16x2.f32"     # rounding's default: rn
    assert sm80.packed_conversion(f32, bf16, "rz") == "cvt.rz.bf16x2.f32"
    assert sm80.packed_conversion(f32, e4m3) is None                  # fp8 cvt needs sm_89
    assert sm89.packed_conversion(f32, e4m3) == "cvt.rn.satfinite.e4m3x2.f32"
    # f16 and bf16 lanes widen to f32 (exact) and pair through the f32 instruction
    assert sm89.packed_conversion(f16, e5m2) == "cvt.rn.satfinite.e5m2x2.f32"
    assert sm89.packed_conversion(bf16, e4m3) == "cvt.rn.satfinite.e4m3x2.f32"
    assert sm89.packed_conversion(e4m3, f32) == "cvt.rn.f16x2.e4m3x2"
    # no instruction takes fp8 pairs to the other fp8 (nor f16 lanes to f32 in pairs)
    assert sm89.packed_conversion(e4m3, e5m2) is None
    assert sm89.packed_conversion(f16, f32) is None
    fnuz8, fnuz5 = _dtype("fp8_e4m3fnuz"), _dtype("fp8_e5m2fnuz")
    assert cdna3.packed_conversion(f32, fnuz8) == "v_cvt_pk_fp8_f32"
    assert cdna3.packed_conversion(bf16, fnuz5) == "v_cvt_pk_bf8_f32"
    assert cdna3.packed_conversion(fnuz5, f16) == "v_cvt_pk_f32_bf8"


def test_a_missing_matrix_instruction_lists_what_the_chip_has():
    f16, f32 = _dtype("f16"), _dtype("f32")
    message = _refusal(AmdTarget("gfx950").mma_instruction, f16, f16, f16, (3, 3, 3))
    assert message.startswith("no matrix instruction for f16 x f16 -> f16 with shape 3x3x3 on "
                              "gfx950; available: bf16xbf16->f32 16x16x16, ")
    # CDNA4's block-scaled V_MFMA_SCALE_F32_16X16X128_F8F6F4 and _32X32X64_F8F6F4: one entry
    # each for every pairing of their formats
    for shape in ("16x16x128", "32x32x64"):
        assert (f"fp8_e4m3/fp8_e5m2/fp6_e2m3/fp6_e3m2/fp4_e2m1 (any pairing)->f32 {shape} "
                f"scaled") in message
    assert "f16xf16->f32 32x32x8" in message
    # f32 inputs where only a tf32 instruction exists: named, never given silently
    assert "(the 16x8x8 instruction reads f32 inputs as tf32, 10 mantissa bits: ask " \
           "make_mma(opus.tf32, opus.tf32, f32, shape) for it)" in _refusal(
               NvidiaTarget("sm_80").mma_instruction, f32, f32, f32, (16, 8, 8))


def test_missing_matrix_instruction_messages_in_their_other_forms():
    bf16, f32, e4m3 = _dtype("bf16"), _dtype("f32"), _dtype("fp8_e4m3")
    # bf16 inputs where a tf32 row of the shape exists: no tf32 hint (it is for f32 inputs)
    message = _refusal(NvidiaTarget("sm_80").mma_instruction, bf16, bf16, f32, (16, 8, 4))
    assert message.startswith("no matrix instruction for bf16 x bf16 -> f32 with shape 16x8x4 "
                              "on sm_80; available: ") and "tf32" not in message.split(";")[0]
    assert _refusal(NvidiaTarget("sm_90a").mma_instruction, e4m3, e4m3, f32, (16, 16, 128),
                    True).startswith("no scaled matrix instruction for fp8_e4m3 x fp8_e4m3 -> "
                                     "f32 with shape 16x16x128 on sm_90a; available: ")

    class NoMatrixUnits(NvidiaTarget):
        @classmethod
        def _load_instruction_tables(cls):
            return {}, {}
    assert _refusal(NoMatrixUnits("sm_80").mma_instruction, bf16, bf16, f32, (16, 8, 16)) == (
        "no matrix instruction for bf16 x bf16 -> f32 with shape 16x8x16 on sm_80; available: "
        "none")
