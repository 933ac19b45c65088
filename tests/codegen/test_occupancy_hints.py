"""Occupancy and register hints (@opus.kernel(block=, min_blocks=, maxnreg=)): the attributes
in the rendered source, and their effect on the registers ptxas (sm_90a) and clang (gfx942,
gfx950) allocate, against limits computed by hand from each chip's register file."""
import numpy as np
import pytest

import opus

AMD = ("gfx942", "gfx950")


def register_hungry(**hints):
    """96 loads live at once: ~103 registers per thread when nothing caps them."""
    @opus.kernel(**hints)
    def hungry(x: opus.Ptr[opus.f32], n: opus.i32):
        i = opus.thread_id_x()
        vals = []
        for j in range(96):
            vals.append(x[i + j * 256])
        acc = x[i]
        for j in range(96):
            acc = acc * vals[j] + vals[95 - j]
        x[i] = acc
    return hungry


def amd_resources(k, target):
    """k.resources(target=target) for an AMD chip; the test is skipped where no AMD compiler is
    installed (the 'amd' extra), as on the GPU machine, instead of failing."""
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    return k.resources(target=target)


def signature(k, target):
    return next(line for line in k.source(target=target).splitlines() if "hungry_opus(" in line)


@pytest.mark.parametrize("hints,cuda,hip", [
    ({}, "void hungry_opus(", "amdgpu_flat_work_group_size(1, 1024))) void"),
    ({"block": 256}, "__launch_bounds__(256) hungry_opus",
     "amdgpu_flat_work_group_size(1, 256))) void"),
    # AMD: 256 threads = 4 waves; 8 blocks = 32 waves per CU = 8 per SIMD (4 SIMDs)
    ({"block": 256, "min_blocks": 8}, "__launch_bounds__(256, 8) hungry_opus",
     "amdgpu_flat_work_group_size(1, 256), amdgpu_waves_per_eu(8))) void"),
    # 64 threads = 1 wave; 3 blocks = 3 waves per CU: ceil(3 / 4) = 1 per SIMD
    ({"block": 64, "min_blocks": 3}, "__launch_bounds__(64, 3) hungry_opus",
     "amdgpu_flat_work_group_size(1, 64), amdgpu_waves_per_eu(1))) void"),
    # NVRTC refuses __launch_bounds__ beside __maxnreg__; AMD gets half (unified VGPR file)
    ({"block": 256, "maxnreg": 40}, "void __maxnreg__(40) hungry_opus",
     "amdgpu_flat_work_group_size(1, 256), amdgpu_num_vgpr(20))) void"),
    ({"maxnreg": 64}, "void __maxnreg__(64) hungry_opus",
     "amdgpu_flat_work_group_size(1, 1024), amdgpu_num_vgpr(32))) void"),
])
def test_rendered_attributes(hints, cuda, hip):
    k = register_hungry(**hints)
    assert cuda in signature(k, "sm_90a")
    assert "__launch_bounds__" not in signature(k, "sm_90a") or "maxnreg" not in hints
    for t in AMD:
        assert hip in signature(k, t)


def test_uncapped_kernel_needs_many_registers():
    """The baseline the caps below are measured against (else they would prove nothing)."""
    k = register_hungry(block=256)
    assert k.resources(target="sm_90a")["registers"] > 64
    for t in AMD:
        assert amd_resources(k, t)["vgprs"] > 64


def test_min_blocks_caps_registers_sm90a():
    # 8 blocks of 256 threads on one SM: 65536 registers / 2048 threads = 32 each
    r = register_hungry(block=256, min_blocks=8).resources(target="sm_90a")
    assert r["registers"] <= 32 and r["spill_stores"] > 0
    # 4 blocks of 128: 65536 / 512 = 128 each, more than it needs: no cap, no spills
    r = register_hungry(block=128, min_blocks=4).resources(target="sm_90a")
    assert r["registers"] > 64 and r["spill_stores"] == 0


@pytest.mark.parametrize("target", AMD)
def test_min_blocks_caps_vgprs_amd(target):
    # 8 waves per SIMD share its 512 VGPRs per lane: 64 each
    k = register_hungry(block=256, min_blocks=8)
    assert amd_resources(k, target)["vgprs"] <= 64
    assert "; Occupancy: 8" in k.asm(target=target)


@pytest.mark.parametrize("target,field", [("sm_90a", "registers"), ("gfx942", "vgprs"),
                                          ("gfx950", "vgprs")])
@pytest.mark.parametrize("maxnreg", [32, 40, 96])
def test_maxnreg_caps_registers(target, field, maxnreg):
    k = register_hungry(block=256, maxnreg=maxnreg)
    r = k.resources(target=target) if field == "registers" else amd_resources(k, target)
    assert r[field] <= maxnreg
    assert r[field] >= min(maxnreg, 64) - 8  # a cap, not a collapse: it uses what it is given


def test_maxnreg_without_block_compiles_everywhere():
    k = register_hungry(maxnreg=48)
    assert k.resources(target="sm_90a")["registers"] <= 48
    for t in AMD:
        assert amd_resources(k, t)["vgprs"] <= 48


def test_hints_do_not_change_results_in_the_interpreter():
    x = np.linspace(0.5, 1.5, 256 * 97).astype(np.float32)
    want = x.copy()
    acc = want[:256].copy()
    for j in range(96):
        acc = (acc * want[j * 256:(j + 1) * 256]).astype(np.float32)
        acc = (acc + want[(95 - j) * 256:(96 - j) * 256]).astype(np.float32)
    for hints in ({"block": 256, "min_blocks": 8}, {"block": 256, "maxnreg": 32}):
        got = x.copy()
        with opus.set_target("sm_90a", interpret=True):
            register_hungry(**hints)[1, 256](got, 256)
        np.testing.assert_array_equal(got[:256], acc)


@pytest.mark.gpu
@pytest.mark.parametrize("hints", [{"block": 256, "min_blocks": 8}, {"block": 256, "maxnreg": 32},
                                   {"block": 256}])
def test_hinted_kernels_on_gpu(hints):
    """Capped registers spill to local memory; the results stay exact."""
    torch = pytest.importorskip("torch")
    x = torch.linspace(0.5, 1.5, 256 * 97, dtype=torch.float32, device="cuda")
    want = x.cpu().numpy().copy()
    acc = want[:256].copy()
    for j in range(96):
        acc = (acc * want[j * 256:(j + 1) * 256]).astype(np.float32)
        acc = (acc + want[(95 - j) * 256:(96 - j) * 256]).astype(np.float32)
    with opus.set_target(opus.current_target().target.name, interpret=False):
        register_hungry(**hints)[1, 256](x, 256)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x[:256].cpu().numpy(), acc)
