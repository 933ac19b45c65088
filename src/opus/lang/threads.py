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


_SPECIAL_DOC = """{what}

:returns: {returns}
:rtype: run-time i32
:targets: all targets
"""


def _special(which, name, doc=None):
    def f():
        return emit1("special", [], dt.i32, {"which": which})
    f.__name__ = f.__qualname__ = name
    f.__doc__ = _SPECIAL_DOC.format(**doc)
    return f


def _per_axis(which, name, what, returns):
    """The x, y and z functions of one special register (``opus.<name>_x`` ...), documented from
    one template: ``what`` and ``returns`` have an ``{a}`` for the axis."""
    return tuple(_special(f"{which}.{a}", f"{name}_{a}",
                          {"what": what.format(a=a), "returns": returns.format(a=a)})
                 for a in "xyz")


thread_id_x, thread_id_y, thread_id_z = _per_axis(
    "thread_id", "thread_id", "Index of the calling thread in its block along {a} (CUDA "
    "threadIdx.{a}).", "0 .. block_size_{a}() - 1")
block_id_x, block_id_y, block_id_z = _per_axis(
    "block_id", "block_id", "Index of the calling thread's block in the grid along {a} (CUDA "
    "blockIdx.{a}).", "0 .. num_blocks_{a}() - 1")
block_size_x, block_size_y, block_size_z = _per_axis(
    "block_dim", "block_size", "Threads per block along {a} (CUDA blockDim.{a}): the launch's "
    "``block``.", "the block size along {a}, >= 1")
num_blocks_x, num_blocks_y, num_blocks_z = _per_axis(
    "num_blocks", "num_blocks", "Blocks in the grid along {a} (CUDA gridDim.{a}): the launch's "
    "``grid``.", "the grid size in blocks along {a}, >= 1")
grid_size_x, grid_size_y, grid_size_z = _per_axis(
    "grid_size", "grid_size", "Threads (work items) in the grid along {a}: num_blocks_{a}() * "
    "block_size_{a}(), as in the original opus (AMD's grid size; CUDA gridDim.{a} * "
    "blockDim.{a}). The step of a grid-stride loop.",
    "num_blocks_{a}() * block_size_{a}(), wrapping where that product reaches 2**31")


lane_id = _special("lane_id", "lane_id", {
    "what": "Index of the calling thread in its warp.", "returns": "0 .. warp_size() - 1"})
warp_id = _special("warp_id", "warp_id", {
    "what": "Index of the calling thread's warp in its block: the linear thread index (x "
            "fastest) // warp_size().", "returns": "0 .. (threads per block - 1) // warp_size()"})


def warp_size() -> int:
    """Threads per warp of the target: a compile-time int, so it can size vectors and unroll
    loops.

    :returns: 32 on NVIDIA, 64 on AMD (gfx942, gfx950)
    :rtype: int
    :targets: all targets
    """
    return ctx().target.warp_size


def sync_threads():
    """Block-wide barrier (CUDA ``__syncthreads()``, AMD ``s_barrier``): every thread of the
    block waits here until all have arrived, and their shared-memory writes before it are
    visible to all after it. Every thread of the block must reach it.

    :targets: all targets
    """
    emit("barrier")


_CONV = {"d", "i", "u", "x", "X", "f", "e", "g", "c", "ld", "lld", "lu", "llu", "lx", "llx", "p"}


def printf(fmt: str, *args):
    """Device printf, for debugging: each calling thread prints.

    Example: ``opus.printf("thread %d: %f\\n", opus.thread_id_x(), x)``.

    :param fmt: a C printf format; its conversions (``%%`` aside) must match ``args`` in number
    :type fmt: str
    :param args: the values to print (not pointers)
    :type args: run-time scalar values or Python numbers
    :targets: sm_80, sm_86, sm_89, sm_90, sm_90a; not on gfx942, gfx950 (device printf needs
        the ROCm device library's hostcall buffer, which headerless builds do not link)
    """
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
