"""Launch entries for the CPU interpreter (numpy arrays in, results written back).

The interpreter runs a kernel as some target and checks a launch as that target's GPU would:
the grid and block against its limits (launch.py), ``smem=`` and ``stream=`` by the GPU entries'
rules. With ``OPUS_INTERPRET_COMPILE=1`` (the test suite sets it) every specialization it
launches is also rendered and compiled for its target, once, through the disk cache: a kernel
that runs in the interpreter as T is then known to build for T.
"""
from __future__ import annotations

import os
import warnings

from ..errors import OpusError, OpusRuntimeError

__all__ = ["InterpEntry", "compile_check_on"]

_no_compiler = set()  # vendors whose compiler is missing here (warned once each)


def compile_check_on() -> bool:
    """Whether interpreter launches also compile their specialization (OPUS_INTERPRET_COMPILE)."""
    return os.environ.get("OPUS_INTERPRET_COMPILE", "") not in ("", "0")


def _compile_for_target(spec):
    """Render and compile ``spec`` for its target; a missing toolchain warns once per vendor
    (there is nothing to check against), every other failure is the kernel's."""
    vendor = spec.target.vendor
    if vendor in _no_compiler:
        return
    try:
        spec.compiled
    except OpusRuntimeError as e:
        if "not found" not in str(e) and "no compiler" not in str(e):
            raise
        _no_compiler.add(vendor)
        warnings.warn(f"OPUS_INTERPRET_COMPILE: {vendor} kernels are not compiled here ({e})",
                      RuntimeWarning, stacklevel=4)


class InterpEntry:
    def __init__(self, kernel, spec):
        try:
            from ..interp import make_runner
        except ImportError as e:
            raise OpusError(f"no NVIDIA GPU was found and the CPU interpreter is not available "
                            f"({e})") from None
        if compile_check_on():
            _compile_for_target(spec)
        self.runner = make_runner(kernel, spec)

    def run(self, launcher, args, smem, stream):
        if stream is not None:
            from ..runtime.launch_plan import stream_handle
            stream_handle(stream)  # checked as on the GPU, then unused: the interpreter has none
        self.runner(launcher.grid, launcher.block, args, smem)
