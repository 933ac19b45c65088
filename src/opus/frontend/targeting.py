"""Which target kernels run on now: the GPU found, or the interpreter as some target.

Order of precedence: ``opus.set_target(...)`` (also a context manager), then the environment
(``OPUS_INTERPRET=1`` runs in the interpreter; ``OPUS_TARGET`` names the interpreter's target),
then the hardware: an NVIDIA GPU if the driver finds one, else an AMD gfx942/gfx950 with ROCm's
HIP runtime, else the interpreter as sm_90a.

Threads: ``set_target`` selects for the calling thread (its context, as ``contextvars`` defines
it) alone. A new thread starts from the automatic selection, not from its creator's; an asyncio
task starts from a copy of its creator's context, so it inherits the selection there. The
automatic selection (environment, hardware) is found once and is the same for every thread.
"""
from __future__ import annotations

import _thread  # not threading: that import costs ~1 ms of opus's import time
import os
from contextvars import ContextVar

from ..targets import get_target

__all__ = ["set_target", "current_target", "Selection"]


class Selection:
    """A target plus how kernels run on it: mode 'gpu' or 'interp'. One object per (target,
    mode) (see _selection), so launchers can memoize by identity."""

    __slots__ = ("target", "mode", "key")

    def __init__(self, target, mode):
        self.target, self.mode = target, mode
        self.key = (target.name, mode)

    def __repr__(self):
        return f"<{self.mode} {self.target.name}>"


_selections: dict = {}  # (target name, mode) -> its one Selection


def _selection(target, mode) -> Selection:
    return _selections.setdefault((target.name, mode), Selection(target, mode))


# The explicit selection of this thread/context, or None for the automatic one. A ContextVar
# (not a module global) so that set_target in one thread never retargets launches in another;
# its value is a Selection, never mutated, so a restore is just setting the previous value.
# The C launcher reads this very variable and _auto (frontend/launch.py: watch_selection).
_selected: ContextVar[Selection | None] = ContextVar("opus_target", default=None)
_auto: list[Selection] = []  # [the automatic selection] once found; never rebound
_lock = _thread.RLock()      # finding the automatic selection and the GPU, once per process


class set_target:
    """Select the target for the calling thread: ``opus.set_target("gfx942")`` runs kernels in
    the interpreter as an MI300; ``opus.set_target("sm_90a", interpret=True)`` as an H100;
    ``set_target(None)`` returns to automatic selection (the GPU found, else the interpreter).
    Usable as a context manager (``with opus.set_target("gfx950"): ...`` restores the previous
    one). Other threads keep their own selection; new threads start automatic.

    :param name: sm_80, sm_86, sm_89, sm_90, sm_90a, gfx942, gfx950, or None for automatic
    :type name: str or None
    :param interpret: True: the CPU interpreter as that chip; False: the GPU, which must be that
        chip; None: the GPU if it is that chip, else the interpreter
    :type interpret: bool or None
    :targets: all targets
    """

    def __init__(self, name, interpret=None):
        if interpret not in (None, True, False):
            raise TypeError(f"opus.set_target: interpret must be True, False or None, "
                            f"got {interpret!r}")
        self._prev = _selected.get()
        if name is None:
            if interpret is not None:
                raise TypeError("opus.set_target(None) returns to automatic selection; "
                                "interpret= needs a target name")
            self.sel = None
        else:
            self.sel = _explicit(name, interpret)
        _selected.set(self.sel)

    def __enter__(self):
        return self.sel

    def __exit__(self, *exc):
        _selected.set(self._prev)


def _explicit(name, interpret) -> Selection:
    t = _target_named(name, "opus.set_target")
    if interpret is None:
        interpret = _gpu_arch() != name
    elif not interpret and _gpu_arch() != name:
        found = _gpu_arch()
        raise RuntimeError(f"opus.set_target: no {name} GPU found (this machine has "
                           f"{found or 'no GPU opus can use'}); use interpret=True")
    return _selection(t, "interp" if interpret else "gpu")


def _known_names() -> tuple:
    from ..targets.nvidia import NVIDIA_ARCHS
    try:
        from ..targets.amd import AMD_ARCHS
    except ImportError:
        AMD_ARCHS = ()
    return tuple(NVIDIA_ARCHS) + tuple(AMD_ARCHS)


def _target_named(name, what):
    """The Target called ``name``; a clear error naming ``what`` gave it otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"{what}: a target is named by a string such as 'sm_90a' or 'gfx942', "
                        f"got {name!r} ({type(name).__name__})")
    if name.strip().lower() in ("", "none", "auto"):
        raise ValueError(f"{what}: unknown target {name!r} (for the automatic selection use "
                         f"opus.set_target(None)); known: {', '.join(_known_names())}")
    try:
        return get_target(name)  # its errors say "not supported yet" or what is malformed
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


_found = []  # [arch or None] once looked up: the hardware does not change under a process


def _gpu_arch():
    """The arch of the GPU kernels run on: NVIDIA device 0 if the CUDA driver finds one, else
    the first AMD GPU that opus targets and the HIP runtime can drive; None without either."""
    if not _found:
        with _lock:
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
    """The target and mode that launches from the calling thread use (cheap: the launch path
    asks each time).

    :returns: the selection: ``.target`` (the Target, ``.target.name`` such as 'sm_90a') and
        ``.mode`` ('gpu' or 'interp')
    :rtype: Selection
    :targets: all targets
    """
    sel = _selected.get()
    if sel is not None:
        return sel
    return _auto[0] if _auto else _automatic()


_FLAG_VALUES = {"": False, "0": False, "false": False, "no": False, "off": False,
                "1": True, "true": True, "yes": True, "on": True}


def env_flag(var: str) -> bool:
    """The boolean environment variable ``var`` (unset: False); a clear error for other values."""
    raw = os.environ.get(var, "")
    value = _FLAG_VALUES.get(raw.strip().lower())
    if value is None:
        raise ValueError(f"environment variable {var}={raw!r}: expected 1/0, true/false, "
                         f"yes/no or on/off")
    return value


def _automatic() -> Selection:
    """The selection without set_target, found once for the process (environment, then the
    hardware) under a lock, so every thread gets the same object."""
    with _lock:
        if not _auto:
            _auto.append(_find_automatic())
    return _auto[0]


def _find_automatic() -> Selection:
    named = os.environ.get("OPUS_TARGET", "").strip()
    fallback = _target_named(named, "environment variable OPUS_TARGET") if named else \
        get_target("sm_90a")
    if env_flag("OPUS_INTERPRET"):
        return _selection(fallback, "interp")
    arch = _gpu_arch()
    return _selection(get_target(arch), "gpu") if arch else _selection(fallback, "interp")
