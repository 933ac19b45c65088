"""opus: thread- and warp-level GPU kernels in Python for NVIDIA and AMD GPUs.

Python is the metaprogramming language: Python values are compile-time, traced values are
run-time. A kernel is traced into one IR and rendered as headerless CUDA C++ (NVRTC) or HIP
C++ (clang), or run by the CPU interpreter with the hardware's semantics.
"""
__version__ = "0.1.0"

from .dtypes import (DType, bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64,
                     fp16, fp32, fp64, fp8_e4m3, fp8_e4m3fnuz, fp8_e5m2, fp8_e5m2fnuz, fp4_e2m1,
                     fp6_e2m3, fp6_e3m2, e8m0, int4, uint4, fp8, bf8, fp4, tf32)
from .errors import OpusError, CompileError, ArgumentError, OpusRuntimeError
from . import lang as _lang  # installs dtype conversion
from .lang.context import TraceError
from .lang.values import cast, bitcast
from .lang.quantize import (scaled_cast, amax, tensor_scale, mx_scale, mx_quantize,
                            mx_dequantize)
from .lang.vectors import (make_vector, insert, concat, splat, zeros, vector_type, sizeof_bits,
                           is_packed, num_packs)
from .host_types import (pack_fp4, unpack_fp4, pack_fp6, unpack_fp6, pack_int4, unpack_int4,
                         pack_uint4, unpack_uint4, pack, unpack, torch_dtype)
from .lang.math import (exp, exp2, log, log2, sqrt, rsqrt, sin, cos, tanh, floor, ceil, trunc,
                        rint, fma, max, min, med3, mulhi, popc, select, tdiv, tmod)
from .lang.uniform import readfirstlane, uniform
from .lang.mdiv import mdiv
from .lang.numeric_limits import finfo, iinfo, numeric_limits
from .lang.memory import make_gmem, make_smem, alloc_smem, dynamic_smem, load, store, Cache
from .lang.async_copy import copy_async, copy_async_lds, commit_async, wait_async, s_waitcnt
from .lang.threads import (thread_id_x, thread_id_y, thread_id_z, block_id_x, block_id_y,
                           block_id_z, block_size_x, block_size_y, block_size_z, num_blocks_x,
                           num_blocks_y, num_blocks_z, grid_size_x, grid_size_y, grid_size_z,
                           lane_id, warp_id, warp_size, sync_threads, printf)
from .lang.mma import make_mma, make_tiled_mma
from .lang.atomics import (atomic_add, atomic_min, atomic_max, atomic_exch, atomic_cas,
                          atomic_and, atomic_or, atomic_xor, atomic_inc, atomic_dec, atomic_load,
                          atomic_store)
from .lang.sync import (sync_warp, barrier_sync, barrier_arrive, fence, s_waitcnt_vmcnt,
                        s_waitcnt_lgkmcnt, s_setprio, s_nop, s_sleep, sched_barrier,
                        sched_group_barrier, clock, clock64, globaltimer, s_memtime,
                        s_memrealtime, workgroup_barrier)
from .lang.wgmma import (make_wgmma, wgmma_fence, wgmma_commit, wgmma_wait, setmaxnreg_inc,
                         setmaxnreg_dec)
from .lang.tma import (alloc_mbarriers, tma_load, tma_store, tma_commit, tma_wait,
                       fence_proxy_async, fence_mbarrier_init, TmaPipeline)
from .runtime.tensor_map import TensorMap
from .lang.ldmatrix import ldmatrix, stmatrix, ds_read_tr
from .lang.warp import (shfl, shfl_up, shfl_down, shfl_xor, mov_dpp, upd_dpp, dpp, ballot,
                        any_lanes, all_lanes, warp_any, warp_all, active_mask, lanemask_lt,
                        lanemask_le, lanemask_gt, lanemask_ge, permute, bpermute, warp_reduce,
                        warp_scan)
from .lang.layout import Y, Layout, CachedLayout, Swizzle, swizzle_bytes, make_layout, zipped_divide
from .lang.partition import P, Tile, partition, unfold_x_stride, unfold_p_coord, p_shape, y_shape
from .frontend import (Ptr, constexpr, kernel, func, range, static_ford, set_target,
                       current_target)
from .frontend.autotune import autotune, AutotuneError

# The public API: every name here has a docstring naming its parameters, their types, what it
# returns and which targets have it (tests/test_public_api.py enforces it; docs/api.md is
# generated from these docstrings by tools/gen_api_docs.py).
__all__ = [
    # types and conversions
    "DType", "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
    "f64", "fp16", "fp32", "fp64", "fp8_e4m3", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz",
    "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "e8m0", "int4", "uint4", "fp8", "bf8", "fp4", "tf32",
    "cast", "bitcast", "scaled_cast", "amax", "tensor_scale", "mx_scale", "mx_quantize",
    "mx_dequantize", "vector_type", "sizeof_bits", "is_packed", "num_packs",
    # sub-byte arrays on the host, torch's dtypes
    "pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6", "pack_int4", "unpack_int4", "pack_uint4",
    "unpack_uint4", "pack", "unpack", "torch_dtype",
    # memory
    "make_gmem", "make_smem", "alloc_smem", "dynamic_smem", "load", "store", "Cache",
    # asynchronous global -> shared copies
    "copy_async", "copy_async_lds", "commit_async", "wait_async", "s_waitcnt",
    # threads and synchronisation
    "thread_id_x", "thread_id_y", "thread_id_z", "block_id_x", "block_id_y", "block_id_z",
    "block_size_x", "block_size_y", "block_size_z", "num_blocks_x", "num_blocks_y",
    "num_blocks_z", "grid_size_x", "grid_size_y", "grid_size_z", "lane_id", "warp_id",
    "warp_size", "sync_threads", "printf",
    # synchronization: warp and named barriers, fences, the cross-block barrier, AMD wait
    # counters and scheduling hints, clocks
    "sync_warp", "barrier_sync", "barrier_arrive", "fence", "workgroup_barrier",
    "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt", "s_setprio", "s_nop", "s_sleep", "sched_barrier",
    "sched_group_barrier", "clock", "clock64", "globaltimer", "s_memtime", "s_memrealtime",
    # atomics on global and shared memory
    "atomic_add", "atomic_min", "atomic_max", "atomic_exch", "atomic_cas", "atomic_and",
    "atomic_or", "atomic_xor", "atomic_inc", "atomic_dec", "atomic_load", "atomic_store",
    # math
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil", "trunc",
    "rint", "fma", "max", "min", "med3", "mulhi", "popc", "select", "tdiv", "tmod",
    # wave-uniform values
    "readfirstlane", "uniform",
    # fast division by a run-time divisor; numeric limits of every dtype
    "mdiv", "finfo", "iinfo", "numeric_limits",
    # vectors
    "make_vector", "insert", "concat", "splat", "zeros",
    # layouts and x/p/y partitions
    "make_layout", "Layout", "CachedLayout", "zipped_divide", "Swizzle", "swizzle_bytes", "Y", "P", "Tile", "partition", "unfold_x_stride",
    "unfold_p_coord", "p_shape", "y_shape",
    # cross-lane operations: shuffles, DPP, votes, lane masks, permutes, reductions and scans
    "shfl", "shfl_up", "shfl_down", "shfl_xor", "mov_dpp", "upd_dpp", "dpp", "ballot",
    "any_lanes", "all_lanes", "warp_any", "warp_all", "active_mask", "lanemask_lt",
    "lanemask_le", "lanemask_gt", "lanemask_ge", "permute", "bpermute", "warp_reduce",
    "warp_scan",
    # matrix atoms and warp-level shared accesses with lane layouts
    "make_mma", "make_tiled_mma", "ldmatrix", "stmatrix", "ds_read_tr",
    # warpgroup matrix multiply-accumulate (NVIDIA sm_90a)
    "make_wgmma", "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg_inc", "setmaxnreg_dec",
    # the tensor memory accelerator and mbarriers (NVIDIA sm_90)
    "TensorMap", "TmaPipeline", "alloc_mbarriers", "tma_load", "tma_store", "tma_commit",
    "tma_wait", "fence_proxy_async", "fence_mbarrier_init",
    # kernels and launching
    "kernel", "func", "Ptr", "constexpr", "range", "static_ford", "autotune",
    # targets
    "set_target", "current_target",
    # errors
    "OpusError", "TraceError", "CompileError", "ArgumentError", "OpusRuntimeError",
    "AutotuneError",
]


def __getattr__(name):
    # opus.interp loads on first use (it is only needed without a GPU or in checking mode);
    # opus.ops (the kernel library) too: importing it defines its kernels
    if name in ("interp", "ops"):
        import importlib
        return importlib.import_module("." + name, __name__)
    from .lang.vectors import vector_type_named
    vt = vector_type_named(name)  # opus.f16x8, opus.fp4x32, ...
    if vt is not None:
        return vt
    hint = ""
    if not name.startswith("_"):  # a misspelt opus.exp in a kernel: name the close ones
        import difflib
        near = difflib.get_close_matches(name, [n for n in globals() if not n.startswith("_")])
        hint = "; did you mean " + " or ".join(f"opus.{n}" for n in near) + "?" if near else ""
    raise AttributeError(f"module 'opus' has no attribute {name!r}{hint}")
