"""Thread, block and warp indices, barriers and device printf."""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Value, scalar_of, PointerType
from .context import ctx, TraceError
from .values import emit1, emit, as_value

__all__ = ["thread_id_x", "thread_id_y", "thread_id_z", "block_id_x", "block_id_y", "block_id_z",
           "block_size_x", "block_size_y", "block_size_z", "grid_size_x", "grid_size_y",
           "grid_size_z", "lane_id", "warp_id", "warp_size", "sync_threads", "printf"]


def _special(which):
    def f():
        return emit1("special", [], dt.i32, {"which": which})
    f.__name__ = which.replace(".", "_")
    return f


thread_id_x, thread_id_y, thread_id_z = (_special(f"thread_id.{a}") for a in "xyz")
block_id_x, block_id_y, block_id_z = (_special(f"block_id.{a}") for a in "xyz")
block_size_x, block_size_y, block_size_z = (_special(f"block_dim.{a}") for a in "xyz")
_grid_dim = [_special(f"grid_dim.{a}") for a in "xyz"]


def grid_size_x():
    """Number of blocks along x (gridDim.x)."""
    return _grid_dim[0]()


def grid_size_y():
    return _grid_dim[1]()


def grid_size_z():
    return _grid_dim[2]()


lane_id = _special("lane_id")
warp_id = _special("warp_id")


def warp_size() -> int:
    """Threads per warp of the target (32 on NVIDIA, 64 on AMD gfx9): a compile-time int."""
    return ctx().target.warp_size


def sync_threads():
    """Block-wide barrier (__syncthreads / s_barrier)."""
    emit("barrier")


_CONV = {"d", "i", "u", "x", "X", "f", "e", "g", "c", "ld", "lld", "lu", "llu", "lx", "llx", "p"}


def printf(fmt: str, *args):
    """Device printf (for debugging). Arguments are run-time values or numbers. Not every
    target has it (Target.has_printf: not AMD in headerless builds)."""
    ctx().target.require_printf()
    if not isinstance(fmt, str):
        raise TraceError("printf format must be a str")
    n_conv = fmt.replace("%%", "").count("%")
    if n_conv != len(args):
        raise TraceError(f"printf format has {n_conv} conversions but {len(args)} arguments")
    vals = []
    for a in args:
        v = as_value(a)
        if isinstance(v.type, PointerType):
            raise TraceError("printf of a pointer is not supported")
        vals.append(v)
    emit("printf", vals, [], {"fmt": fmt})
