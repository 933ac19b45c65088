"""Errors the interpreter raises (all are opus.errors.OpusError subclasses)."""
from __future__ import annotations

import linecache

from ..errors import OpusError

__all__ = ["InterpError", "MemoryFault", "BarrierError", "SharedRaceError",
           "UninitializedReadError", "AsyncCopyPendingError", "InactiveLaneReadError", "where"]


class InterpError(OpusError):
    """The kernel did something that is an error (or undefined behaviour) on the hardware."""


class MemoryFault(InterpError):
    """Out-of-bounds or misaligned memory access (a fault on the GPU)."""


class BarrierError(InterpError):
    """A barrier reached by only part of the block (a deadlock on the GPU)."""


class SharedRaceError(InterpError):
    """Two threads accessed one shared-memory address between barriers, at least one writing."""


class UninitializedReadError(InterpError):
    """A read of shared memory that nothing wrote (checking mode)."""


class InactiveLaneReadError(UninitializedReadError):
    """A cross-lane operation read a lane that does not take part in it (inactive or exited;
    checking mode): undefined on the GPU."""


class AsyncCopyPendingError(SharedRaceError):
    """Shared memory accessed while an async copy into it has not been waited for (checking
    mode): the copy may land before or after the access."""


def where(loc) -> str:
    """'file:line `source text`' for an op's location: the text the kernel was traced from
    (``loc.text``, the source snapshot), else the file's line now."""
    if loc is None:
        return "<unknown line>"
    src = (loc.text if loc.text is not None else linecache.getline(loc.file, loc.line)).strip()
    return f"{loc.file}:{loc.line}" + (f" `{src}`" if src else "")
