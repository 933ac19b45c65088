"""Launch entries for NVIDIA GPUs: argument checks and packing, then cuLaunchKernel."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError

__all__ = ["GpuEntry", "scalar_checker"]

_DEFAULT_SMEM = 48 * 1024


def scalar_checker(name, dtype):
    """A function converting a Python/numpy scalar for parameter ``name`` of ``dtype``,
    refusing values that would change (no silent truncation)."""
    if dtype.is_int or dtype.is_bool:
        lo, hi = dtype.int_range()

        def check_int(x):
            if isinstance(x, (bool, np.bool_)) and not dtype.is_bool:
                raise ArgumentError(f"parameter {name!r} expects {dtype.name}, got a bool")
            if not isinstance(x, (numbers.Integral, np.integer)):
                raise ArgumentError(f"parameter {name!r} expects an integer ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            x = int(x)
            if not lo <= x <= hi:
                raise ArgumentError(f"parameter {name!r} is {dtype.name}: {x} is outside "
                                    f"{lo}..{hi}")
            return x
        return check_int
    if dtype in (dt.f32, dt.f64):
        def check_float(x):
            if not isinstance(x, (numbers.Real, np.floating, np.integer)) or isinstance(x, bool):
                raise ArgumentError(f"parameter {name!r} expects a number ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            return float(x)
        return check_float
    raise ArgumentError(f"parameter {name!r}: {dtype.name} scalars cannot be kernel parameters yet "
                        f"(pass f32 and convert inside the kernel)")


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, numbers.Integral):
        return int(stream)
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if isinstance(h, numbers.Integral):
            return int(h)
    raise ArgumentError(f"stream must be an int handle, a torch.cuda.Stream or a CuPy stream, "
                        f"got {type(stream).__name__}")


class GpuEntry:
    """Compiled, loaded kernel plus its prepared argument handling."""

    def __init__(self, kernel, spec):
        from ..runtime import cuda_driver as drv
        from ..runtime.launcher import POINTER_CTYPE, make_launcher, scalar_ctype
        from ..runtime.tensor_args import device_pointer, stream_of
        self.name = kernel.name
        built = spec.compiled
        drv.ensure_context()
        self.module = drv.load_module(built.binary, nvrtc_version=built.compiler_version)
        self.function = self.module.get_function(spec.function.name)
        props = drv.device_properties(self.function.device)
        self.max_smem = props.max_shared_memory_per_block_optin
        self.static_smem = spec.static_smem
        self.smem_limit_set = _DEFAULT_SMEM - self.static_smem
        self._stream_of = stream_of
        ctypes_, steps = [], []
        for p, ip in zip(spec.function.params, [q for q in kernel.params if q.kind != "constexpr"]):
            if p.type.__class__.__name__ == "PointerType":
                ctypes_.append(POINTER_CTYPE)
                steps.append(("ptr", ip.index, p.name, p.type.elem, spec.align.get(p.name, 1)))
            else:
                ctypes_.append(scalar_ctype(p.type))
                steps.append(("scalar", ip.index, p.name, scalar_checker(p.name, p.type), None))
        self.launch = make_launcher(self.function, ctypes_)
        # one converter per parameter, built once: the launch loop only calls them
        self.converters = [self._converter(device_pointer, *st) for st in steps]

    @staticmethod
    def _converter(dp, kind, i, name, x, align):
        if kind != "ptr":
            return lambda args: x(args[i])
        if align == 1:
            return lambda args: dp(args[i], param=name, dtype=x)

        def ptr(args):
            p = dp(args[i], param=name, dtype=x)
            if p % align:
                raise ArgumentError(f"parameter {name!r}: address {hex(p)} is not aligned to "
                                    f"{align} bytes, which the kernel's {align}-byte vector "
                                    f"accesses need")
            return p
        return ptr

    def __call__(self, grid, block, args, smem, stream):
        vals = [c(args) for c in self.converters]
        if smem:
            if not isinstance(smem, numbers.Integral) or smem < 0:
                raise ArgumentError(f"smem must be a non-negative int of bytes, got {smem!r}")
            if smem > self.smem_limit_set:
                total = smem + self.static_smem
                if total > self.max_smem:
                    raise ArgumentError(f"kernel {self.name!r} needs {total} bytes of shared memory "
                                        f"({self.static_smem} static + {smem} dynamic); the device "
                                        f"allows {self.max_smem}")
                self.function.set_max_dynamic_smem(smem)
                self.smem_limit_set = smem
        h = _stream_handle(stream)
        if h is None:
            h = self._stream_of(args) or 0
        self.launch(grid, block, smem, h, vals)
