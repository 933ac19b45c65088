"""Which target kernels run on now: the GPU found, or the interpreter as some target.

Order of precedence: ``opus.set_target(...)`` (also a context manager), then the environment
(``OPUS_INTERPRET=1`` runs in the interpreter; ``OPUS_TARGET`` names the interpreter's target),
then the hardware: an NVIDIA GPU if the driver finds one, else an AMD gfx942/gfx950 with ROCm's
HIP runtime, else the interpreter as sm_90a.
"""
from __future__ import annotations

import os

from ..targets import get_target

__all__ = ["set_target", "current_target", "Selection"]


class Selection:
    """A target plus how kernels run on it: mode 'gpu' or 'interp'."""

    __slots__ = ("target", "mode", "key")

    def __init__(self, target, mode):
        self.target, self.mode = target, mode
        self.key = (target.name, mode)

    def __repr__(self):
        return f"<{self.mode} {self.target.name}>"


# Mutated in place, never rebound: the C launcher reads these very lists (launch.py).
_stack: list[Selection] = []
_auto: list[Selection] = []


class set_target:
    """Select the target: ``opus.set_target("gfx942")`` runs kernels in the interpreter as an
    MI300; ``opus.set_target("sm_90a", interpret=True)`` as an H100; ``set_target(None)``
    returns to automatic selection. Usable as a context manager (restores the previous one)."""

    def __init__(self, name, interpret=None):
        if name is None:
            _stack.clear()
            self.sel = None
            return
        t = get_target(name)
        if interpret is None:
            interpret = _gpu_arch() != name
        self.sel = Selection(t, "interp" if interpret else "gpu")
        if not interpret and _gpu_arch() != name:
            found = _gpu_arch()
            raise RuntimeError(f"no {name} GPU found (this machine has "
                               f"{found or 'no GPU opus can use'}); use interpret=True")
        self._prev = list(_stack)
        _stack.append(self.sel)

    def __enter__(self):
        return self.sel

    def __exit__(self, *exc):
        _stack[:] = self._prev


_found = []  # [arch or None] once looked up: the hardware does not change under a process


def _gpu_arch():
    """The arch of the GPU kernels run on: NVIDIA device 0 if the CUDA driver finds one, else
    the first AMD GPU that opus targets and the HIP runtime can drive; None without either."""
    if not _found:
        _found.append(_find_gpu_arch())
    return _found[0]


def _find_gpu_arch():
    from ..runtime.cuda_driver import driver_available, device_count, device_arch
    try:
        if driver_available() and device_count() > 0:
            return device_arch(0)
    except Exception:
        pass
    from ..runtime.hip_driver import amd_gpu_archs, hip_available
    from ..targets.amd import AMD_ARCHS
    archs = [a for a in amd_gpu_archs() if a in AMD_ARCHS]
    return archs[0] if archs and hip_available() else None


def current_target() -> Selection:
    if _stack:
        return _stack[-1]
    if _auto:
        return _auto[0]
    if os.environ.get("OPUS_INTERPRET", "") not in ("", "0"):
        sel = Selection(get_target(os.environ.get("OPUS_TARGET", "sm_90a")), "interp")
    else:
        arch = _gpu_arch()
        sel = Selection(get_target(arch), "gpu") if arch else \
            Selection(get_target(os.environ.get("OPUS_TARGET", "sm_90a")), "interp")
    _auto.append(sel)
    return sel
