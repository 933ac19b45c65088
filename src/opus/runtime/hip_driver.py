"""Minimal ctypes binding of the HIP module API (libamdhip64.so), for launching opus code objects
on a ROCm machine: load a code object, get a kernel, launch it with packed kernel arguments.

Only used where ROCm is installed; everything raises a clear OpusRuntimeError otherwise.
"""
from __future__ import annotations

import ctypes
import os

from ..errors import OpusRuntimeError

__all__ = ["HipError", "hip_available", "load_module", "get_function", "launch", "pack_args",
           "synchronize"]

_HIP_LAUNCH_PARAM_BUFFER_POINTER = ctypes.c_void_p(0x01)
_HIP_LAUNCH_PARAM_BUFFER_SIZE = ctypes.c_void_p(0x02)
_HIP_LAUNCH_PARAM_END = ctypes.c_void_p(0x03)

_lib = None


class HipError(OpusRuntimeError):
    pass


def _load():
    global _lib
    if _lib is not None:
        return _lib
    names = ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7"]
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    names += [os.path.join(rocm, "lib", n) for n in names]
    err = None
    for n in names:
        try:
            lib = ctypes.CDLL(n)
            break
        except OSError as e:
            err = e
    else:
        raise HipError(f"the HIP runtime (libamdhip64.so) was not found ({err}); AMD kernels can be "
                       "rendered and compiled here, but launching them needs ROCm")
    lib.hipGetErrorString.restype = ctypes.c_char_p
    lib.hipModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.hipModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
    lib.hipModuleLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    _lib = lib
    return lib


def hip_available() -> bool:
    try:
        _load()
        return True
    except HipError:
        return False


def _check(rc, what):
    if rc != 0:
        msg = _lib.hipGetErrorString(rc)
        raise HipError(f"{what} failed: {msg.decode() if msg else rc} (hipError {rc})")


def load_module(code_object: bytes):
    """hipModule_t for a code object (keeps the bytes alive with the handle)."""
    lib = _load()
    mod = ctypes.c_void_p()
    buf = ctypes.create_string_buffer(code_object, len(code_object))
    _check(lib.hipModuleLoadData(ctypes.byref(mod), buf), "hipModuleLoadData")
    return mod


def get_function(module, name: str):
    lib = _load()
    f = ctypes.c_void_p()
    _check(lib.hipModuleGetFunction(ctypes.byref(f), module, name.encode()),
           f"hipModuleGetFunction({name!r})")
    return f


def pack_args(values) -> bytes:
    """Kernel-argument buffer: each (ctypes value) at its natural alignment, as the ABI lays out
    the kernarg segment (pointers as c_void_p, i32 as c_int, ...)."""
    out = bytearray()
    for v in values:
        size, align = ctypes.sizeof(v), ctypes.alignment(v)
        out += b"\0" * (-len(out) % align)
        out += bytes(v)
    return bytes(out)


def launch(function, grid, block, args: bytes, smem: int = 0, stream=None):
    """hipModuleLaunchKernel with the arguments passed as one packed buffer."""
    lib = _load()
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    buf = ctypes.create_string_buffer(args, max(len(args), 1))
    size = ctypes.c_size_t(len(args))
    extra = (ctypes.c_void_p * 5)(_HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.cast(buf, ctypes.c_void_p),
                                   _HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.cast(ctypes.pointer(size), ctypes.c_void_p),
                                   _HIP_LAUNCH_PARAM_END)
    _check(lib.hipModuleLaunchKernel(function, *g, *b, smem, stream, None, extra), "hipModuleLaunchKernel")


def synchronize():
    _check(_load().hipDeviceSynchronize(), "hipDeviceSynchronize")
