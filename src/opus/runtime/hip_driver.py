"""Minimal ctypes binding of the HIP module API (libamdhip64.so), for launching opus code objects
on a ROCm machine: load a code object, get a kernel, launch it with packed kernel arguments.

Only used where ROCm is installed; everything raises a clear OpusRuntimeError otherwise.
"""
from __future__ import annotations

import ctypes
import os

from ..errors import OpusRuntimeError

__all__ = ["HipError", "hip_available", "amd_gpu_archs", "load_module", "get_function",
           "launch", "synchronize"]

_KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"  # tests point this at a fake tree
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
    lib.hipModuleLaunchKernel.restype = ctypes.c_int
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
    mod.image = buf  # the handle keeps the image alive, whether or not HIP copied it
    return mod


def get_function(module, name: str):
    lib = _load()
    f = ctypes.c_void_p()
    _check(lib.hipModuleGetFunction(ctypes.byref(f), module, name.encode()),
           f"hipModuleGetFunction({name!r})")
    return f


def launch(function, grid, block, params, smem: int = 0, stream: int = 0):
    """hipModuleLaunchKernel with ``params``, a ``void**`` to one pointer per kernel argument
    (runtime.launcher.ParamBlock.params), as on CUDA."""
    _check(_load().hipModuleLaunchKernel(function, *grid, *block, smem, stream or None, params,
                                         None),
           f"hipModuleLaunchKernel(grid={tuple(grid)}, block={tuple(block)}, smem={smem})")


def synchronize():
    _check(_load().hipDeviceSynchronize(), "hipDeviceSynchronize")


def amd_gpu_archs() -> list[str]:
    """gfx names of the AMD GPUs the kernel driver (KFD) lists, without loading HIP.

    A node's ``gfx_target_version`` is major*10000 + minor*100 + stepping, so 90402 is gfx942
    and 90010 is gfx90a (minor and stepping are printed in hex). CPU nodes report 0.
    """
    archs = []
    try:
        nodes = sorted(os.listdir(_KFD_NODES), key=lambda n: int(n) if n.isdigit() else -1)
    except OSError:
        return archs
    for node in nodes:
        try:
            with open(os.path.join(_KFD_NODES, node, "properties")) as f:
                props = dict(line.split(None, 1) for line in f if line.strip())
            v = int(props.get("gfx_target_version", "0"))
        except (OSError, ValueError):
            continue
        if v:
            archs.append(f"gfx{v // 10000}{(v // 100) % 100:x}{v % 100:x}")
    return archs
