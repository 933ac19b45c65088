"""Targets: one object per chip, holding the instruction table the language layer consults."""
from .base import Target, Instruction, UnsupportedOnTarget
from .nvidia import NvidiaTarget, NVIDIA_ARCHS

_cache = {}


def get_target(name: str) -> Target:
    """The Target for an arch name: 'sm_80'..'sm_90a' (NVIDIA), 'gfx942'/'gfx950' (AMD)."""
    t = _cache.get(name)
    if t is None:
        if name in NVIDIA_ARCHS:
            t = NvidiaTarget(name)
        else:
            try:
                from .amd import AmdTarget, AMD_ARCHS
            except ImportError:
                AMD_ARCHS = ()
            if name in AMD_ARCHS:
                t = AmdTarget(name)
            else:
                raise ValueError(f"unknown target {name!r}; known: {NVIDIA_ARCHS + tuple(AMD_ARCHS)}")
        t = _cache.setdefault(name, t)  # two threads at once: both get the one kept
    return t
