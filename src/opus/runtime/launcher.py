"""The driver end of a launch: cuLaunchKernelEx with a prepared parameter block and config.

cuLaunchKernelEx takes four pointers (config, function, kernelParams, extra) where
cuLaunchKernel takes eleven scalars; through ctypes that difference is ~1 us per launch,
a quarter of the whole launch budget (benchmarks/launch_paths.py measures it). So:

  * ParamBlock packs every parameter value into one buffer with a single struct.pack_into;
    its ``kernelParams`` array (one pointer per parameter, into that buffer) is built once.
  * LaunchConfig is CUlaunchConfig: grid, block, shared bytes and stream, rewritten only
    where a launch differs from the previous one.

The buffers are reused, so one ParamBlock/LaunchConfig pair must not be used by two threads at
once: the kernel launch path (frontend/gpu_launch.py) gives other threads fresh ones.
"""
from __future__ import annotations

import ctypes
import struct

from opus import dtypes as _dt
from opus.errors import ArgumentError
from opus.runtime import cuda_driver as _drv

__all__ = ["function_launcher", "scalar_ctype", "POINTER_CTYPE", "LaunchConfig", "ParamBlock",
           "launch_ex", "check_launch", "launch_once"]

POINTER_CTYPE = ctypes.c_uint64  # device addresses are 64-bit on every CUDA target

_SCALAR_CTYPES = {
    _dt.bool_: ctypes.c_bool, _dt.i8: ctypes.c_int8, _dt.i16: ctypes.c_int16,
    _dt.i32: ctypes.c_int32, _dt.i64: ctypes.c_int64, _dt.u8: ctypes.c_uint8,
    _dt.u16: ctypes.c_uint16, _dt.u32: ctypes.c_uint32, _dt.u64: ctypes.c_uint64,
    _dt.f32: ctypes.c_float, _dt.f64: ctypes.c_double,
}
# struct codes with native size and alignment, matching the C parameter types
_STRUCT_CODES = {
    ctypes.c_bool: "?", ctypes.c_int8: "b", ctypes.c_int16: "h", ctypes.c_int32: "i",
    ctypes.c_int64: "q", ctypes.c_uint8: "B", ctypes.c_uint16: "H", ctypes.c_uint32: "I",
    ctypes.c_uint64: "Q", ctypes.c_float: "f", ctypes.c_double: "d",
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


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h, CUDA >= 12.0); no launch attributes."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]

    def set(self, grid, block, smem, stream):
        self.gridDimX, self.gridDimY, self.gridDimZ = grid
        self.blockDimX, self.blockDimY, self.blockDimZ = block
        self.sharedMemBytes = smem
        self.hStream = stream or None


class ParamBlock:
    """One buffer holding all parameter values, and the kernelParams array pointing into it.

    ``pack(buffer, 0, *values)`` stores the values (plain ints/floats, in parameter order);
    ``params`` is the ``void**`` to hand to the launch.
    """

    def __init__(self, param_ctypes):
        codes = []
        for t in param_ctypes:
            try:
                codes.append(_STRUCT_CODES[t])
            except KeyError:
                raise TypeError(f"unsupported kernel parameter type {t!r}") from None
        layout = struct.Struct("@" + "".join(codes))
        # native alignment: field i starts where a struct of fields 0..i ends, minus its size
        offsets = [struct.calcsize("@" + "".join(codes[:i + 1])) - struct.calcsize(codes[i])
                   for i in range(len(codes))]
        self._build(layout, offsets)

    @classmethod
    def for_plan(cls, plan):
        """The block a LaunchPlan (runtime/launch_plan.py) lays out."""
        block = cls.__new__(cls)
        block._build(plan.layout, plan.offsets)
        return block

    def _build(self, layout, offsets):
        self.n = len(offsets)
        self.offsets, self.size = list(offsets), layout.size
        self.buffer = ctypes.create_string_buffer(max(layout.size, 8))
        base = ctypes.addressof(self.buffer)
        self.array = (ctypes.c_void_p * max(self.n, 1))(*[base + o for o in offsets])
        self.params = ctypes.c_void_p(ctypes.addressof(self.array) if self.n else None)
        self.pack = layout.pack_into


def _cu_launch_kernel_ex():
    fn = _drv._load().cuLaunchKernelEx
    fn.argtypes = [ctypes.c_void_p] * 4
    fn.restype = ctypes.c_int
    return fn


_launch_ex = None


def launch_ex():
    """The cuLaunchKernelEx entry point: (config*, CUfunction, void** params, void** extra)."""
    global _launch_ex
    if _launch_ex is None:
        _launch_ex = _cu_launch_kernel_ex()
    return _launch_ex


def check_launch(code, function, config_ptr, params, config):
    """Handle a failed launch: retry once after binding a context (first launch from a thread
    with none, e.g. a worker thread), else raise CudaError naming the launch."""
    if code == _drv.CUDA_ERROR_INVALID_CONTEXT:
        _drv.ensure_context(function.device)
        code = launch_ex()(config_ptr, function.handle, params, None)
        if not code:
            return
    grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
    block = (config.blockDimX, config.blockDimY, config.blockDimZ)
    _drv._check(code, f"cuLaunchKernelEx({function.name}, grid={grid}, block={block}, "
                      f"smem={config.sharedMemBytes}, stream={config.hStream or 0})")


def launch_once(function, plan, values, grid, block, smem, stream, cu_launch=None):
    """One launch of a LaunchPlan's values with buffers of its own (any thread may call it)."""
    params = ParamBlock.for_plan(plan)
    params.pack(params.buffer, 0, *values)
    config = LaunchConfig()
    config.set(grid, block, smem, stream)
    config_ptr = ctypes.c_void_p(ctypes.addressof(config))
    code = (cu_launch or launch_ex())(config_ptr, function.handle, params.params, None)
    if code:
        check_launch(code, function, config_ptr, params.params, config)


def function_launcher(function, param_ctypes):
    """Return ``launch(grid3, block3, smem, stream_handle, values)`` for ``function``.

    ``param_ctypes`` lists each kernel parameter's ctypes type (POINTER_CTYPE for pointers,
    scalar_ctype(dtype) for scalars) in declaration order; ``values`` are plain ints/floats in
    the same order. ``stream_handle`` is a CUstream as int (0 = legacy default stream).
    Not thread-safe (one parameter block per launcher; see the module docstring).
    """
    block = ParamBlock(param_ctypes)
    config = LaunchConfig()
    config_ptr = ctypes.c_void_p(ctypes.addressof(config))
    handle = ctypes.c_void_p(function.handle)
    cu_launch = launch_ex()

    def launch(grid, block3, smem, stream, values):
        if len(values) != block.n:
            raise ArgumentError(f"{function.name} takes {block.n} arguments, got {len(values)}")
        block.pack(block.buffer, 0, *values)
        config.set(grid, block3, smem, stream)
        code = cu_launch(config_ptr, handle, block.params, None)
        if code:
            check_launch(code, function, config_ptr, block.params, config)

    launch.function = function
    launch._keepalive = (block, config)
    return launch
