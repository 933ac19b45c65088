"""Launch entries for AMD GPUs through ROCm's HIP runtime: the same ``kernel[grid, block](...)``
as on NVIDIA, with the code object built by runtime/amd_build.py.

This path is written against HIP's documented module API but has not run on AMD hardware (we
have none): it is kept small and goes through the general argument checks only.
"""
from __future__ import annotations

from ..runtime.launch_plan import launch_stream
from .gpu_launch import EntryParams, plan_of

__all__ = ["HipEntry"]


class HipEntry(EntryParams):
    """A code object loaded with hipModuleLoadData, launched with hipModuleLaunchKernel; its
    arguments go through the plan's general path and are packed by the plan's layout."""

    @classmethod
    def load(cls, kernel, spec, device=0):
        from ..runtime import hip_driver as hip
        module = hip.load_module(spec.compiled.binary)
        entry = cls(kernel.name, spec.target, spec.static_smem, plan_of(kernel, spec),
                    hip.get_function(module, spec.symbol), device)
        entry.module = module
        return entry

    def __init__(self, name, target, static_smem, plan, function, device=0):
        from ..runtime import hip_driver
        super().__init__(name, target, static_smem, plan)
        self.device = device
        self.function = function
        self._hip = hip_driver

    def run(self, launcher, args, smem, stream):
        from ..runtime.launcher import ParamBlock
        values = self.values(args)
        smem = self.check_smem_size(smem)  # against the target's LDS size
        handle = launch_stream(stream, args)
        block = ParamBlock.for_plan(self.plan)  # per launch: no sharing between threads
        block.pack(block.buffer, 0, *values)
        self._hip.launch(self.function, launcher.grid, launcher.block, block.params, smem,
                         handle)
