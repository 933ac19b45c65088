"""Driver-layer tests. Those marked gpu run only where libcuda and a GPU exist."""
import ctypes
import threading

import numpy as np
import pytest

from opus import dtypes as dt
from opus.errors import ArgumentError, CudaError, OpusRuntimeError
from opus.runtime import cuda_driver as drv
from opus.runtime import nvrtc
from opus.runtime.launcher import POINTER_CTYPE, function_launcher, scalar_ctype
from opus.runtime.tensor_args import device_pointer, stream_of
from runtime_kernels import AXPY, SMEM_COPY, VEC_ADD


@pytest.fixture
def no_driver(monkeypatch):
    monkeypatch.setattr(drv, "_LIB_NAME", "/nonexistent/libcuda.so.1")
    monkeypatch.setattr(drv, "_lib", None)


def test_no_driver_is_reported(no_driver):
    assert drv.driver_available() is False
    for call in (drv.device_count, drv.driver_version, lambda: drv.device_arch(0),
                 lambda: drv.device_properties(0), lambda: drv.mem_alloc(16),
                 lambda: drv.load_module(b"", nvrtc_version=(13, 0))):
        with pytest.raises(OpusRuntimeError, match=r"no NVIDIA driver found \(.*libcuda.so.1\)"):
            call()


def test_scalar_ctypes():
    assert scalar_ctype(dt.f32) is ctypes.c_float
    assert scalar_ctype(dt.i64) is ctypes.c_int64
    assert scalar_ctype(dt.u32) is ctypes.c_uint32
    with pytest.raises(TypeError):
        scalar_ctype(dt.bf16)



# -- on a GPU --------------------------------------------------------------------------------

def _load(source, name):
    arch = drv.device_arch(0)
    res = nvrtc.compile_cuda(source, arch=arch)
    return drv.load_module(res.cubin, nvrtc_version=res.nvrtc_version).get_function(name)


@pytest.mark.gpu
def test_device_queries():
    assert drv.device_count() >= 1
    assert drv.driver_version() >= (12, 0)
    props = drv.device_properties(0)
    assert props.arch == drv.device_arch(0) and props.arch.startswith("sm_")
    assert props.sm_count > 0 and props.warp_size == 32
    assert props.max_threads_per_block >= 1024
    assert props.max_shared_memory_per_block_optin >= props.max_shared_memory_per_block
    assert props.max_grid_dims[0] >= 2**31 - 1


@pytest.mark.gpu
def test_vec_add_with_device_array():
    from opus.runtime.device_array import DeviceArray
    f = _load(VEC_ADD, "vec_add")
    assert f.num_regs > 0 and f.max_threads_per_block > 0 and f.local_bytes == 0
    n = 1 << 20
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    b = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    da, db, dc = DeviceArray.from_numpy(a), DeviceArray.from_numpy(b), DeviceArray.empty(n, np.float32)
    assert dc.__cuda_array_interface__["data"][0] == dc.ptr
    launch = function_launcher(f, [POINTER_CTYPE] * 3 + [scalar_ctype(dt.i32)])
    args = [device_pointer(x, param=p, dtype=dt.f32) for x, p in ((da, "a"), (db, "b"), (dc, "c"))]
    launch(((n // 4 + 255) // 256, 1, 1), (256, 1, 1), 0, 0, (*args, n))
    drv.synchronize()
    np.testing.assert_array_equal(dc.to_numpy(), a + b)
    with pytest.raises(ArgumentError):
        launch((1, 1, 1), (1, 1, 1), 0, 0, (1, 2))


@pytest.mark.gpu
def test_scalar_params_and_bf16_array():
    from opus.runtime.device_array import DeviceArray
    import ml_dtypes
    f = _load(AXPY, "axpy")
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    dx, dy = DeviceArray.from_numpy(x), DeviceArray.from_numpy(y)
    launch = function_launcher(f, [ctypes.c_float, POINTER_CTYPE, POINTER_CTYPE, ctypes.c_int64])
    launch((4, 1, 1), (256, 1, 1), 0, 0, (2.5, dx.ptr, dy.ptr, 1000))
    np.testing.assert_array_equal(dy.to_numpy(), 2.5 * x + 1)
    bf = DeviceArray.from_numpy(np.ones(8, ml_dtypes.bfloat16))
    assert device_pointer(bf, param="w", dtype=dt.bf16) == bf.ptr
    np.testing.assert_array_equal(bf.to_numpy().astype(np.float32), np.ones(8, np.float32))


@pytest.mark.gpu
def test_dynamic_shared_memory_100kb():
    from opus.runtime.device_array import DeviceArray
    if drv.device_properties(0).max_shared_memory_per_block_optin < 100 * 1024:
        pytest.skip("GPU has less than 100 KB of opt-in shared memory per block")
    f = _load(SMEM_COPY, "smem_copy")
    n = 100 * 1024 // 4
    src = np.arange(n, dtype=np.float32)
    d_src, d_dst = DeviceArray.from_numpy(src), DeviceArray.empty(n, np.float32)
    launch = function_launcher(f, [POINTER_CTYPE, POINTER_CTYPE, ctypes.c_int32])
    with pytest.raises(CudaError, match="cuLaunchKernel"):  # over 48 KB needs the opt-in
        launch((1, 1, 1), (256, 1, 1), n * 4, 0, (d_src.ptr, d_dst.ptr, n))
    f.set_max_dynamic_smem(n * 4)
    assert f.max_dynamic_smem == n * 4
    launch((1, 1, 1), (256, 1, 1), n * 4, 0, (d_src.ptr, d_dst.ptr, n))
    np.testing.assert_array_equal(d_dst.to_numpy(), src[::-1])


@pytest.mark.gpu
def test_launch_from_another_thread():
    from opus.runtime.device_array import DeviceArray
    f = _load(AXPY, "axpy")
    x, y = np.arange(100, dtype=np.float32), np.full(100, 1.0, np.float32)
    dx, dy = DeviceArray.from_numpy(x), DeviceArray.from_numpy(y)
    launch = function_launcher(f, [ctypes.c_float, POINTER_CTYPE, POINTER_CTYPE, ctypes.c_int64])
    errors = []

    def work():
        try:  # a fresh thread has no current context: the launcher binds the primary one
            launch((2, 1, 1), (64, 1, 1), 0, 0, (2.5, dx.ptr, dy.ptr, 100))
            drv.synchronize()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors
    np.testing.assert_array_equal(dy.to_numpy(), 2.5 * x + 1)  # y = alpha * x + y, by hand


@pytest.mark.gpu
def test_newer_nvrtc_than_driver_is_refused():
    major, minor = drv.driver_version()
    with pytest.raises(OpusRuntimeError, match=r"produced this CUBIN but the driver supports"):
        drv.load_module(b"\x7fELF", nvrtc_version=(major, minor + 1))


@pytest.mark.gpu
def test_wrong_arch_cubin_load_error_explains():
    # SASS only runs within one major version: pick an arch of another major.
    arch = "sm_80" if drv.compute_capability(0)[0] >= 9 else "sm_90a"
    res = nvrtc.compile_cuda(VEC_ADD, arch=arch)
    with pytest.raises(CudaError, match=r"cuModuleLoadData failed.*\n.*opus\[cuda\]"):
        drv.load_module(res.cubin, nvrtc_version=res.nvrtc_version)


@pytest.mark.gpu
def test_launcher_with_torch_on_current_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    a = torch.randn(1 << 16, device="cuda")
    b = torch.randn(1 << 16, device="cuda")
    c = torch.empty_like(a)
    f = _load(VEC_ADD, "vec_add")  # loaded into torch's (primary) context
    launch = function_launcher(f, [POINTER_CTYPE] * 3 + [ctypes.c_int32])
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        stream = stream_of([a, b, c])
        assert stream == side.cuda_stream != 0
        ptrs = [device_pointer(t, param=p, dtype=dt.f32) for t, p in ((a, "a"), (b, "b"), (c, "c"))]
        launch((a.numel() // 4 // 128, 1, 1), (128, 1, 1), 0, stream, (*ptrs, a.numel()))
    side.synchronize()
    torch.testing.assert_close(c, a + b)
    with pytest.raises(ArgumentError, match="parameter 'a' expects f16 but got a torch.float32 tensor"):
        device_pointer(a, param="a", dtype=dt.f16)
    assert stream_of([a]) == torch.cuda.current_stream().cuda_stream
