"""Targets: one object per chip, holding the instruction table the language layer consults."""
from ..arch_names import Arch, ArchNameError, parse_arch
from ..errors import OpusError
from .base import Target, Instruction, UnsupportedOnTarget
from .nvidia import NvidiaTarget, NVIDIA_ARCHS

__all__ = ["get_target", "known_targets", "parse_arch", "Arch", "ArchNameError",
           "ArchNotSupported", "Target", "Instruction", "UnsupportedOnTarget"]

_cache = {}


class ArchNotSupported(OpusError, ValueError):
    """A well-formed arch name of a chip opus has no target for (yet)."""


def _classes() -> dict:
    """{vendor: Target class}; AMD's only where its module imports."""
    classes = {"nvidia": NvidiaTarget}
    try:
        from .amd import AmdTarget
    except ImportError:
        return classes
    classes["amd"] = AmdTarget
    return classes


def known_targets() -> tuple:
    """The arch names opus has targets for."""
    return tuple(n for cls in _classes().values() for n in cls.names)


def get_target(name: str) -> Target:
    """The Target for an arch name: 'sm_80'..'sm_90a' (NVIDIA), 'gfx942'/'gfx950' (AMD).

    A name that is no arch name raises ArchNameError; a chip opus has no target for yet
    (sm_100a, gfx90a) ArchNotSupported; both are ValueErrors that list the known names."""
    t = _cache.get(name)
    if t is None:
        t = _cache.setdefault(name, _new_target(name))  # two threads at once: both get the one kept
    return t


def _new_target(name) -> Target:
    if name in NvidiaTarget.names:  # the common case: no need to import AMD's tables (~10 ms)
        return NvidiaTarget(name)
    known = ", ".join(known_targets())
    try:
        arch = parse_arch(name)
    except ArchNameError as e:
        raise ArchNameError(f"unknown target {name!r}: {e}; known: {known}") from None
    cls = _classes().get(arch.vendor)
    if cls is None or name not in cls.names:
        raise ArchNotSupported(f"unknown target {name!r}: {arch.describe()} is not supported yet; "
                               f"known: {known}")
    return cls(name)
