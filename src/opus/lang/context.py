"""The trace in progress: its builder, target and source-location lookup.

The language layer emits IR through ``ctx()``; the frontend creates the context when it traces
a kernel. Outside a trace, ``ctx()`` raises a clear error (opus functions are kernel-only).
"""
from __future__ import annotations

import sys
from contextvars import ContextVar

from ..errors import OpusError
from ..ir import Loc

__all__ = ["TraceContext", "ctx", "tracing", "TraceError", "PtxBodyRefusal"]


class TraceError(OpusError):
    """An error in the user's kernel, reported with the kernel's file and line: raised while a
    kernel is traced (at its first launch or inspection), its message starts with
    ``file:line (kernel 'name'):`` and quotes the line.

    :ivar raw_message: the message without the location
    :ivar loc: where in the user's source (``.file``, ``.line``), or None
    """

    def __init__(self, message, loc=None, source_line=None, kernel=None, notes=()):
        self.raw_message = message
        self.loc = loc
        where = ""
        if loc is not None:
            where = f"{loc.file}:{loc.line}"
            if kernel:
                where += f" (kernel {kernel!r})"
            where += ": "
        text = where + message
        if source_line:
            text += "\n    " + source_line.strip()
        for note in notes:  # e.g. the kernel line that called the helper where the error is
            text += "\n" + note
        super().__init__(text)


class PtxBodyRefusal(TraceError):
    """A TraceError for an op a PTX body does not render yet (targets/ptx_body.py): a library
    kernel that picks its own body (opus.ops.gemm) catches it and takes the C++ body."""


class TraceContext:
    """State of one kernel trace.

    kernel_codes: {code object of the rewritten kernel or a helper: its CodeInfo} (to find the
        user's current line and its text in the source snapshot).
    dynamic_depth: how many run-time regions (for/if/while bodies) enclose the current point.
    returned: a compile-time ``return`` ended the trace of the kernel.
    """

    def __init__(self, builder, target, kernel_name, kernel_codes):
        self.builder = builder
        self.target = target
        self.kernel_name = kernel_name
        self.kernel_codes = kernel_codes
        self.frontend = None  # the frontend's state of this trace (frontend/calls.py)
        self.dynamic_depth = 0
        self.returned = False
        self.smem_count = 0
        self.smem_bytes = 0
        self.uses_dyn_smem = False
        self.dyn_smem_align = 16  # bytes: the largest alignment a dynamic_smem view asked for
        self.align_req = {}  # pointer parameter Value -> bytes of alignment its accesses need
        self.tensor_maps = {}  # TensorMap parameter Value -> its TensorMapNeed (tmap.declare)
        # @opus.kernel(body=...): with "ptx", each op emitted is checked against the PTX body's
        # table (targets/ptx_body.py), so what it lacks is an error at the user's line
        self.body = "cuda"

    def loc(self):
        f = sys._getframe(1)
        codes = self.kernel_codes
        while f is not None:
            info = codes.get(f.f_code)
            if info is not None:
                return Loc(f.f_code.co_filename, f.f_lineno, self.kernel_name,
                           info.source.line(f.f_lineno))
            f = f.f_back
        return None


# The trace in progress, per thread (and per asyncio task): a ContextVar rather than one list
# for the process, so threads tracing kernels at once each emit into their own builder, and
# rather than threading.local because .get() is the cheapest lookup of the two (ctx() runs for
# every emitted op) and a context also isolates tasks of one thread.
_current: ContextVar[TraceContext | None] = ContextVar("opus_trace", default=None)


def ctx() -> TraceContext:
    c = _current.get()
    if c is None:
        raise OpusError("opus kernel functions can only be called inside a kernel being traced "
                        "(decorate the function with @opus.kernel and launch it)")
    return c


class tracing:
    """Context manager making ``c`` the current trace of this thread (nests: the previous one
    is current again on exit)."""

    def __init__(self, c: TraceContext):
        self.c = c

    def __enter__(self):
        self._token = _current.set(self.c)
        return self.c

    def __exit__(self, *exc):
        _current.reset(self._token)


def target_row(name, what, missing):
    """The current target's instruction row ``name`` (ldmatrix, wgmma, ... rows); a TraceError
    naming the chip otherwise: ``missing`` says why where the target has no such row at all,
    the row's ``requires`` where this chip lacks it."""
    t = ctx().target
    row = t.instructions.get(name)
    if row is None:
        raise TraceError(f"{what} is not available on {t.name}: {missing}")
    if not row.available_on(t):
        raise TraceError(f"{what} is not available on {t.name}: it needs {row.requires}")
    return row
