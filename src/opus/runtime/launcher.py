"""The launch hot path: one prepared cuLaunchKernel call per kernel.

cuLaunchKernel takes ``void** kernelParams``: one pointer per parameter, to that parameter's
value. make_launcher allocates the ctypes value slots and that pointer array once; a launch
only assigns ``slot.value``s and makes a single ctypes call, with no per-launch allocation.

Not thread-safe: two threads launching through the same launcher at once can mix up argument
values (make one launcher per thread if you need that).
"""
from __future__ import annotations

import ctypes

from opus import dtypes as _dt
from opus.errors import ArgumentError
from opus.runtime import cuda_driver as _drv

__all__ = ["make_launcher", "scalar_ctype", "POINTER_CTYPE"]

POINTER_CTYPE = ctypes.c_uint64  # device addresses are 64-bit on every CUDA target

_SCALAR_CTYPES = {
    _dt.bool_: ctypes.c_bool, _dt.i8: ctypes.c_int8, _dt.i16: ctypes.c_int16,
    _dt.i32: ctypes.c_int32, _dt.i64: ctypes.c_int64, _dt.u8: ctypes.c_uint8,
    _dt.u16: ctypes.c_uint16, _dt.u32: ctypes.c_uint32, _dt.u64: ctypes.c_uint64,
    _dt.f32: ctypes.c_float, _dt.f64: ctypes.c_double,
}


def scalar_ctype(dtype) -> type:
    """ctypes type that holds a by-value kernel parameter of opus ``dtype``.

    f16/bf16 and storage-only types have no ctypes twin: pass them as the same-width unsigned
    integer holding their bits, and declare the parameter that way in the kernel.
    """
    try:
        return _SCALAR_CTYPES[dtype]
    except KeyError:
        raise TypeError(f"no ctypes type for a scalar {dtype!r} kernel parameter; pass its bits "
                        "as an unsigned integer of the same width") from None


def make_launcher(function, param_ctypes):
    """Return ``launch(grid3, block3, smem, stream_handle, values)`` for ``function``.

    ``param_ctypes`` lists each kernel parameter's ctypes type (POINTER_CTYPE for pointers,
    scalar_ctype(dtype) for scalars) in declaration order; ``values`` are plain ints/floats in
    the same order. ``stream_handle`` is a CUstream as int (0 = legacy default stream).
    """
    lib = _drv._load()
    cu_launch = lib.cuLaunchKernel  # argtypes set once in cuda_driver
    handle = function.handle
    slots = tuple(t() for t in param_ctypes)
    n = len(slots)
    pointers = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(s) for s in slots])
    params = ctypes.addressof(pointers) if n else None

    def failed(code, grid, block, smem, stream):
        if code == _drv.CUDA_ERROR_INVALID_CONTEXT:
            # First launch from a thread with no context (e.g. a worker thread): bind the
            # module's context and try once more.
            _drv.ensure_context(function.device)
            code = cu_launch(handle, *grid, *block, smem, stream, params, None)
            if not code:
                return
        _drv._check(code, f"cuLaunchKernel({function.name}, grid={tuple(grid)}, "
                          f"block={tuple(block)}, smem={smem}, stream={stream})")

    def launch(grid, block, smem, stream, values):
        if len(values) != n:
            raise ArgumentError(f"{function.name} takes {n} arguments, got {len(values)}")
        for slot, value in zip(slots, values):
            slot.value = value
        gx, gy, gz = grid
        bx, by, bz = block
        code = cu_launch(handle, gx, gy, gz, bx, by, bz, smem, stream, params, None)
        if code:
            failed(code, grid, block, smem, stream)

    launch.function = function
    launch._keepalive = (slots, pointers)  # the pointer array points into these
    return launch
