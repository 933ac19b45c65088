"""Thread, block and warp indices, barriers and device printf."""
from __future__ import annotations

from .. import dtypes as dt
from ..ir import Value, scalar_of, PointerType
from .context import ctx, TraceError
from .values import emit1, emit, as_value

__all__ = ["thread_id_x", "thread_id_y", "thread_id_z", "block_id_x", "block_id_y", "block_id_z",
           "block_size_x", "block_size_y", "block_size_z", "num_blocks_x", "num_blocks_y",
           "num_blocks_z", "grid_size_x", "grid_size_y", "grid_size_z", "lane_id", "warp_id",
           "warp_size", "sync_threads", "printf"]


def _special(which, name, doc=None):
    def f():
        return emit1("special", [], dt.i32, {"which": which})
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _per_axis(which, name, doc):
    """The x, y and z functions of one special register (``opus.<name>_x`` ...); ``doc`` has an
    ``{a}`` for the axis."""
    return tuple(_special(f"{which}.{a}", f"{name}_{a}", doc.format(a=a)) for a in "xyz")


thread_id_x, thread_id_y, thread_id_z = _per_axis(
    "thread_id", "thread_id", "Index of the thread in its block along {a} (CUDA threadIdx.{a}).")
block_id_x, block_id_y, block_id_z = _per_axis(
    "block_id", "block_id", "Index of the block in the grid along {a} (CUDA blockIdx.{a}).")
block_size_x, block_size_y, block_size_z = _per_axis(
    "block_dim", "block_size", "Threads per block along {a} (CUDA blockDim.{a}).")
num_blocks_x, num_blocks_y, num_blocks_z = _per_axis(
    "num_blocks", "num_blocks", "Blocks in the grid along {a} (CUDA gridDim.{a}).")
grid_size_x, grid_size_y, grid_size_z = _per_axis(
    "grid_size", "grid_size", "Threads (work items) in the grid along {a}: num_blocks_{a}() * "
    "block_size_{a}(), as in the original opus (AMD's grid size; CUDA gridDim.{a} * "
    "blockDim.{a}). An i32: it wraps where that product reaches 2**31. The step of a "
    "grid-stride loop.")


lane_id = _special("lane_id", "lane_id", "Index of the thread in its warp (0 .. warp_size() - 1).")
warp_id = _special("warp_id", "warp_id", "Index of the warp in its block: the linear thread index "
                   "(x fastest) // warp_size().")


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
