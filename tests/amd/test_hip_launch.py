"""The AMD launch route, without AMD hardware: GPU discovery from a fake KFD topology, and
``kernel[grid, block](...)`` through HipEntry into a stand-in for libamdhip64 that records what
HIP would receive (code object, kernel name, grid, block, every kernel argument)."""
import ctypes

import pytest

import opus
from opus.frontend import targeting
from opus.runtime import hip_driver


def _node(root, name, version):
    d = root / name
    d.mkdir()
    (d / "properties").write_text(f"cpu_cores_count 0\ngfx_target_version {version}\n"
                                  f"simd_count 304\n")


def test_amd_gpus_are_read_from_the_kfd_topology(tmp_path, monkeypatch):
    _node(tmp_path, "0", 0)        # the CPU node
    _node(tmp_path, "1", 90402)    # MI300X
    _node(tmp_path, "2", 90500)    # MI355X
    _node(tmp_path, "10", 90010)   # MI210 (numeric order, not text order)
    monkeypatch.setattr(hip_driver, "_KFD_NODES", str(tmp_path))
    assert hip_driver.amd_gpu_archs() == ["gfx942", "gfx950", "gfx90a"]
    monkeypatch.setattr(hip_driver, "_KFD_NODES", str(tmp_path / "absent"))
    assert hip_driver.amd_gpu_archs() == []


class FakeHip:
    """Records the HIP module API calls opus makes."""

    def __init__(self, arg_types):
        self.images, self.launches = [], []
        self.arg_types = arg_types  # to read the arguments while they exist

    def hipGetErrorString(self, rc):
        return b"fake error"

    def hipModuleLoadData(self, module_ref, image):
        self.images.append(bytes(image))
        module_ref._obj.value = 0x1000
        return 0

    def hipModuleGetFunction(self, function_ref, module, name):
        self.kernel_name = name.decode()
        function_ref._obj.value = 0x2000
        return 0

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        args = [_argument(params.value, i, t) for i, t in enumerate(self.arg_types)]
        self.launches.append(dict(grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                  stream=stream, args=args, extra=extra))
        return 0


@opus.kernel
def saxpy(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32], a: opus.f32, n: opus.i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        y[i] = a * x[i] + y[i]


def _argument(params, i, ctype):
    slot = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))[i]
    return ctypes.cast(slot, ctypes.POINTER(ctype))[0]


def test_launch_goes_through_hip_with_packed_arguments(monkeypatch):
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except Exception as e:
        pytest.skip(f"no AMD compiler here: {e}")
    fake = FakeHip([ctypes.c_uint64, ctypes.c_uint64, ctypes.c_float, ctypes.c_int32])
    monkeypatch.setattr(hip_driver, "_lib", fake)
    monkeypatch.setattr(targeting, "_found", ["gfx942"])
    with opus.set_target("gfx942", interpret=False) as sel:
        assert sel.mode == "gpu"
        saxpy[4, 64](0x7000_0000, 0x7100_0000, 2.5, 250, stream=0x55)
        saxpy[4, 64](0x7000_0000, 0x7100_0000, 2.5, 250)  # same entry, default stream
        with pytest.raises(opus.ArgumentError, match="'n'"):
            saxpy[4, 64](0x7000_0000, 0x7100_0000, 2.5, 2**31)
    assert len(fake.images) == 1 and fake.images[0][:4] == b"\x7fELF"
    assert fake.kernel_name == "saxpy_opus"  # the kernel's C symbol (codegen.kernel_symbol)
    first, second = fake.launches
    assert first["grid"] == (4, 1, 1) and first["block"] == (64, 1, 1)
    assert first["smem"] == 0 and first["stream"] == 0x55 and first["extra"] is None
    assert first["args"] == second["args"] == [0x7000_0000, 0x7100_0000, 2.5, 250]
    assert second["stream"] is None  # 0, the default stream, goes to HIP as a null handle


def test_no_amd_gpu_means_no_gpu_mode(monkeypatch):
    monkeypatch.setattr(targeting, "_found", [None])
    with pytest.raises(RuntimeError, match="no gfx942 GPU found"):
        opus.set_target("gfx942", interpret=False)
