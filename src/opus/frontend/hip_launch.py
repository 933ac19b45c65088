"""Launch entries for AMD GPUs through ROCm's HIP runtime: the same ``kernel[grid, block](...)``
as on NVIDIA, with the code object built by runtime/amd_build.py.

This path is written against HIP's documented module API but has not run on AMD hardware (we
have none): it is kept small and goes through the general argument checks only.
"""
from __future__ import annotations

from .gpu_launch import EntryParams

__all__ = ["HipEntry"]


class HipEntry(EntryParams):
    """A code object loaded with hipModuleLoadData, launched with hipModuleLaunchKernel."""

    def __init__(self, kernel, spec, device=0):
        from ..runtime import hip_driver as hip
        super().__init__(kernel, spec)
        self.device = device
        self.module = hip.load_module(spec.compiled.binary)
        self.function = hip.get_function(self.module, spec.symbol)
        self._hip = hip

    def run(self, launcher, args, smem, stream):
        from ..runtime.launcher import ParamBlock
        values = self.values(args)
        smem = self.check_smem_size(smem)  # against the target's LDS size
        handle = self.stream(stream, args)
        block = ParamBlock(self.param_ctypes)  # per launch: no sharing between threads
        block.pack(block.buffer, 0, *values)
        self._hip.launch(self.function, launcher.grid, launcher.block, block.params, smem,
                         handle)
