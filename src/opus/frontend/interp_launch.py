"""Launch entries for the CPU interpreter (numpy arrays in, results written back)."""
from __future__ import annotations

from ..errors import OpusError

__all__ = ["InterpEntry"]


class InterpEntry:
    def __init__(self, kernel, spec):
        try:
            from ..interp import make_runner
        except ImportError as e:
            raise OpusError(f"no NVIDIA GPU was found and the CPU interpreter is not available "
                            f"({e})") from None
        self.runner = make_runner(kernel, spec)

    def run(self, launcher, args, smem, stream):
        self.runner(launcher.grid, launcher.block, args, smem)
