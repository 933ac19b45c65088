"""The CUDA driver API through ctypes on libcuda.so.1, opened on first use.

Kernels run in the device's *primary* context, the one PyTorch, CuPy and the CUDA runtime use,
so pointers and streams from those libraries are valid here. We only make it current when the
calling thread has no context at all.

Every call checks its CUresult and raises CudaError naming the call and the error.
"""
from __future__ import annotations

import ctypes
import threading
from collections import namedtuple

from opus.errors import CudaError, OpusRuntimeError

__all__ = [
    "driver_available", "device_count", "driver_version", "device_arch", "device_properties",
    "DeviceProperties", "ensure_context", "load_module", "Module", "Function", "mem_alloc",
    "mem_free", "memcpy_htod", "memcpy_dtoh", "synchronize", "stream_synchronize",
    "tensor_map_encode_tiled",
]

_LIB_NAME = "libcuda.so.1"  # tests point this somewhere absent
_lib = None
_lock = threading.Lock()

# CUresult codes we react to.
CUDA_ERROR_INVALID_CONTEXT = 201
_LOAD_ERRORS = {200: "CUDA_ERROR_INVALID_IMAGE", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
                218: "CUDA_ERROR_INVALID_PTX", 222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"}

_u, _i, _p, _sz = ctypes.c_uint, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
_pp = ctypes.POINTER(ctypes.c_void_p)
_ip = ctypes.POINTER(ctypes.c_int)
_SIGNATURES = {
    "cuInit": [_u],
    "cuDriverGetVersion": [_ip],
    "cuDeviceGetCount": [_ip],
    "cuDeviceGet": [_ip, _i],
    "cuDeviceGetAttribute": [_ip, _i, _i],
    "cuDeviceGetName": [ctypes.c_char_p, _i, _i],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_sz), _i],
    "cuDevicePrimaryCtxRetain": [_pp, _i],
    "cuCtxGetCurrent": [_pp],
    "cuCtxSetCurrent": [_p],
    "cuCtxGetDevice": [_ip],
    "cuCtxSynchronize": [],
    "cuStreamSynchronize": [_p],
    "cuModuleLoadData": [_pp, ctypes.c_char_p],
    "cuModuleUnload": [_p],
    "cuModuleGetFunction": [_pp, _p, ctypes.c_char_p],
    "cuFuncGetAttribute": [_ip, _i, _p],
    "cuFuncSetAttribute": [_p, _i, _i],
    # f, grid xyz, block xyz, shared bytes, stream, kernelParams, extra
    "cuLaunchKernel": [_p, _u, _u, _u, _u, _u, _u, _u, _p, _p, _p],
    "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), _sz],
    "cuMemFree_v2": [ctypes.c_uint64],
    "cuMemcpyHtoD_v2": [ctypes.c_uint64, _p, _sz],
    "cuMemcpyDtoH_v2": [_p, ctypes.c_uint64, _sz],
    "cuGetErrorName": [_i, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [_i, ctypes.POINTER(ctypes.c_char_p)],
}


def _load():
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL(_LIB_NAME)
            except OSError as e:
                raise OpusRuntimeError(
                    f"no NVIDIA driver found ({_LIB_NAME}): opus needs an NVIDIA GPU with its "
                    f"driver installed to run kernels (or run them in the interpreter). [{e}]"
                ) from None
            for name, argtypes in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.argtypes, fn.restype = argtypes, ctypes.c_int
            _check_with(lib, lib.cuInit(0), "cuInit(0)")
            _lib = lib
    return _lib


def _error_text(lib, code: int) -> tuple[str, str]:
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(text))
    return ((name.value or b"CUDA_ERROR_UNKNOWN").decode(),
            (text.value or b"unknown error").decode())


def _check_with(lib, code: int, call: str, hint: str = ""):
    if code:
        name, text = _error_text(lib, code)
        err = CudaError(f"{call} failed: {name} ({code}): {text}" + (f"\n{hint}" if hint else ""))
        err.code, err.name, err.call = code, name, call
        raise err


def _check(code: int, call: str, hint: str = ""):
    if code:
        _check_with(_lib, code, call, hint)


# -- devices -----------------------------------------------------------------------------------

def driver_available() -> bool:
    """True when libcuda loads, initialises and sees at least one GPU. Never raises."""
    try:
        return device_count() > 0
    except Exception:
        return False


def device_count() -> int:
    lib = _load()
    n = ctypes.c_int()
    _check(lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
    return n.value


def driver_version() -> tuple[int, int]:
    """The newest CUDA version the driver supports, e.g. (13, 0)."""
    lib = _load()
    v = ctypes.c_int()
    _check(lib.cuDriverGetVersion(ctypes.byref(v)), "cuDriverGetVersion")
    return v.value // 1000, (v.value % 1000) // 10


def _device(ordinal: int) -> int:
    lib = _load()
    d = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(d), ordinal), f"cuDeviceGet({ordinal})")
    return d.value


def _attr(dev: int, attr: int) -> int:
    v = ctypes.c_int()
    _check(_load().cuDeviceGetAttribute(ctypes.byref(v), attr, _device(dev)),
           f"cuDeviceGetAttribute({attr}, device {dev})")
    return v.value


def compute_capability(dev: int = 0) -> tuple[int, int]:
    return _attr(dev, 75), _attr(dev, 76)


def device_arch(dev: int = 0) -> str:
    """NVRTC arch for the device: Hopper and newer get the 'a' (arch-specific) variant."""
    major, minor = compute_capability(dev)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


DeviceProperties = namedtuple("DeviceProperties", [
    "name", "arch", "compute_capability", "sm_count", "max_shared_memory_per_block",
    "max_shared_memory_per_block_optin", "max_threads_per_block", "max_grid_dims",
    "max_block_dims", "warp_size", "total_memory"])


def device_properties(dev: int = 0) -> DeviceProperties:
    lib = _load()
    buf = ctypes.create_string_buffer(256)
    _check(lib.cuDeviceGetName(buf, 256, _device(dev)), "cuDeviceGetName")
    total = ctypes.c_size_t()
    _check(lib.cuDeviceTotalMem_v2(ctypes.byref(total), _device(dev)), "cuDeviceTotalMem")
    return DeviceProperties(
        name=buf.value.decode(), arch=device_arch(dev), compute_capability=compute_capability(dev),
        sm_count=_attr(dev, 16), max_shared_memory_per_block=_attr(dev, 8),
        max_shared_memory_per_block_optin=_attr(dev, 97), max_threads_per_block=_attr(dev, 1),
        max_grid_dims=(_attr(dev, 5), _attr(dev, 6), _attr(dev, 7)),
        max_block_dims=(_attr(dev, 2), _attr(dev, 3), _attr(dev, 4)),
        warp_size=_attr(dev, 10), total_memory=total.value)


# -- context -----------------------------------------------------------------------------------

_primary: dict[int, int] = {}  # ordinal -> retained primary context (kept for the process)


def ensure_context(device: int | None = None) -> int:
    """Make sure this thread has a context and return it.

    A current context (PyTorch's, CuPy's) is kept when ``device`` is None or matches it;
    otherwise the device's primary context (device 0 by default) is retained and made current.
    """
    lib = _load()
    cur = ctypes.c_void_p()
    _check(lib.cuCtxGetCurrent(ctypes.byref(cur)), "cuCtxGetCurrent")
    if cur.value:
        if device is None:
            return cur.value
        d = ctypes.c_int()
        _check(lib.cuCtxGetDevice(ctypes.byref(d)), "cuCtxGetDevice")
        if d.value == _device(device):
            return cur.value
    ordinal = 0 if device is None else device
    ctx = _primary.get(ordinal)
    if ctx is None:
        h = ctypes.c_void_p()
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(h), _device(ordinal)),
               f"cuDevicePrimaryCtxRetain(device {ordinal})")
        ctx = _primary[ordinal] = h.value
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return ctx


def _current_device() -> int:
    d = ctypes.c_int()
    _check(_lib.cuCtxGetDevice(ctypes.byref(d)), "cuCtxGetDevice")
    return d.value


# -- modules and functions ---------------------------------------------------------------------

def _install_hint(driver: tuple) -> str:
    return (f"install nvidia-cuda-nvrtc {driver[0]}.{driver[1]}.x (pip install 'opus[cuda]') "
            "or update the NVIDIA driver")


def load_module(cubin: bytes, *, nvrtc_version: tuple, device: int | None = None) -> "Module":
    """Load a CUBIN into the current (or primary) context.

    A CUBIN from an NVRTC newer than the driver is refused by the driver with a vague error,
    so that case is caught up front with a message that says what to install.
    """
    drv = driver_version()
    nv = tuple(nvrtc_version[:2])
    if nv > drv:
        raise OpusRuntimeError(
            f"NVRTC {nv[0]}.{nv[1]} produced this CUBIN but the driver supports CUDA "
            f"{drv[0]}.{drv[1]}: {_install_hint(drv)}")
    ctx = ensure_context(device)
    handle = ctypes.c_void_p()
    code = _lib.cuModuleLoadData(ctypes.byref(handle), cubin)
    if code in _LOAD_ERRORS:
        arch = device_arch(_current_device())
        _check(code, "cuModuleLoadData",
               f"The driver (CUDA {drv[0]}.{drv[1]}, GPU {arch}) cannot load this CUBIN from "
               f"NVRTC {nv[0]}.{nv[1]}: it must be compiled for {arch} by an NVRTC no newer than "
               f"the driver; {_install_hint(drv)}")
    _check(code, "cuModuleLoadData")
    return Module(handle.value, ctx, _current_device())


class Module:
    """A loaded CUBIN; unloaded when garbage collected (its Functions keep it alive)."""

    def __init__(self, handle: int, context: int, device: int):
        self.handle, self.context, self.device = handle, context, device

    def get_function(self, name: str) -> "Function":
        f = ctypes.c_void_p()
        _check(_lib.cuModuleGetFunction(ctypes.byref(f), self.handle, name.encode()),
               f"cuModuleGetFunction({name!r})",
               'extern "C" kernels keep their name; C++ ones have a mangled name')
        return Function(f.value, self, name)

    def unload(self):
        if self.handle:
            h, self.handle = self.handle, None
            _check(_lib.cuModuleUnload(h), "cuModuleUnload")

    def __del__(self):
        try:
            self.unload()
        except Exception:  # context already gone (process exit, device reset): nothing to free
            pass


# cuFuncGetAttribute / cuFuncSetAttribute codes
_F_MAX_THREADS, _F_SHARED, _F_CONST, _F_LOCAL, _F_REGS, _F_PTX, _F_BIN, _F_MAX_DYN_SMEM = (
    0, 1, 2, 3, 4, 5, 6, 8)


class Function:
    def __init__(self, handle: int, module: Module, name: str):
        self.handle, self.module, self.name = handle, module, name

    @property
    def device(self) -> int:
        return self.module.device

    def attribute(self, attr: int) -> int:
        v = ctypes.c_int()
        _check(_lib.cuFuncGetAttribute(ctypes.byref(v), attr, self.handle),
               f"cuFuncGetAttribute({attr}, {self.name})")
        return v.value

    num_regs = property(lambda self: self.attribute(_F_REGS))
    shared_bytes = property(lambda self: self.attribute(_F_SHARED), doc="static shared memory")
    const_bytes = property(lambda self: self.attribute(_F_CONST))
    local_bytes = property(lambda self: self.attribute(_F_LOCAL))
    max_threads_per_block = property(lambda self: self.attribute(_F_MAX_THREADS))
    max_dynamic_smem = property(lambda self: self.attribute(_F_MAX_DYN_SMEM))
    binary_version = property(lambda self: self.attribute(_F_BIN))

    def set_max_dynamic_smem(self, nbytes: int):
        """Allow launches with ``nbytes`` of dynamic shared memory (needed above 48 KB)."""
        _check(_lib.cuFuncSetAttribute(self.handle, _F_MAX_DYN_SMEM, int(nbytes)),
               f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}, {self.name})")

    def __repr__(self):
        return f"<opus Function {self.name} at 0x{self.handle:x}>"


# -- tensor maps (TMA) -----------------------------------------------------------------------

_u32p, _u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
# CUtensorMap*, dtype, rank, address, dims, strides (rank-1), box, element strides, interleave,
# swizzle, L2 promotion, OOB fill (cuda.h, CUDA >= 12.0)
_ENCODE_TILED = [_p, _i, _u, _p, _u64p, _u64p, _u32p, _u32p, _i, _i, _i, _i]


def tensor_map_encode_tiled(dtype_code: int, address: int, dims, strides, box, element_strides,
                            swizzle_code: int, l2_code: int, describe: str) -> bytes:
    """cuTensorMapEncodeTiled: the 128-byte CUtensorMap of a tiled tensor (dims, box, element
    strides innermost first; ``strides`` in bytes of dimensions 1.. ; interleave none, OOB fill
    zeros). ``describe`` names every argument for the error: the driver says only "invalid
    value", so runtime/tensor_map.py checks each argument first and names the wrong one."""
    lib = _load()
    fn = getattr(lib, "cuTensorMapEncodeTiled", None)
    if fn is None:
        raise OpusRuntimeError(f"the NVIDIA driver ({_LIB_NAME}) has no cuTensorMapEncodeTiled: "
                               f"tensor maps need a CUDA 12 driver or newer")
    fn.argtypes, fn.restype = _ENCODE_TILED, ctypes.c_int
    rank = len(dims)
    holder = ctypes.create_string_buffer(128 + 64)  # CUtensorMap: 128 bytes, 64-byte aligned
    at = (ctypes.addressof(holder) + 63) // 64 * 64
    _check(fn(at, dtype_code, rank, address, (ctypes.c_uint64 * rank)(*dims),
              (ctypes.c_uint64 * max(1, rank - 1))(*strides), (ctypes.c_uint32 * rank)(*box),
              (ctypes.c_uint32 * rank)(*element_strides), 0, swizzle_code, l2_code, 0),
           f"cuTensorMapEncodeTiled({describe})")
    return ctypes.string_at(at, 128)


# -- memory (for tests and benchmarks without torch/cupy) -----------------------------------

def mem_alloc(nbytes: int) -> int:
    lib = _load()
    ensure_context()
    p = ctypes.c_uint64()
    _check(lib.cuMemAlloc_v2(ctypes.byref(p), max(1, int(nbytes))), f"cuMemAlloc({nbytes})")
    return p.value


def mem_free(ptr: int):
    _check(_load().cuMemFree_v2(ptr), "cuMemFree")


def _host_buffer(arr, writable: bool):
    import numpy as np
    if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
        raise TypeError("host side must be a C-contiguous numpy array")
    if writable and not arr.flags.writeable:
        raise TypeError("destination numpy array is read-only")
    return arr.ctypes.data, arr.nbytes


def memcpy_htod(dst: int, src_array):
    ensure_context()
    ptr, n = _host_buffer(src_array, writable=False)
    _check(_lib.cuMemcpyHtoD_v2(dst, ptr, n), "cuMemcpyHtoD")


def memcpy_dtoh(dst_array, src: int):
    ensure_context()
    ptr, n = _host_buffer(dst_array, writable=True)
    _check(_lib.cuMemcpyDtoH_v2(ptr, src, n), "cuMemcpyDtoH")


def synchronize():
    ensure_context()
    _check(_lib.cuCtxSynchronize(), "cuCtxSynchronize")


def stream_synchronize(stream: int):
    _check(_load().cuStreamSynchronize(stream or None), "cuStreamSynchronize")

