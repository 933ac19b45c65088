"""Kernels and launchers shared by the conversion tests: one cast per lane of a loaded vector
(so vector casts, and with them the packed paths, are what runs), in the interpreter as a target
or on the GPU."""
import functools

import numpy as np

import opus

TARGETS = ["sm_90a", "gfx942", "gfx950"]
BLOCK = 256


@functools.lru_cache(None)
def converter(src, dst, rounding="rn", sat=False, vec=4):
    """y[i..i+vec) = cast(x[i..i+vec), dst) (through bounded views: any n works)."""
    @opus.kernel
    def conv(x: opus.Ptr[src], y: opus.Ptr[dst], n: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        gx, gy = opus.make_gmem(x, n), opus.make_gmem(y, n)
        gy.store(opus.cast(gx.load(i, vec=vec), dst, rounding=rounding, sat=sat), i)
    return conv


@functools.lru_cache(None)
def stochastic(src, dst, sat=False, vec=4):
    """y = cast(x, dst, rounding='sr', rbits=r) lane by lane."""
    @opus.kernel
    def conv(x: opus.Ptr[src], r: opus.Ptr[opus.u32], y: opus.Ptr[dst], n: opus.i32):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * vec
        gx, gr, gy = opus.make_gmem(x, n), opus.make_gmem(r, n), opus.make_gmem(y, n)
        gy.store(opus.cast(gx.load(i, vec=vec), dst, rounding="sr", sat=sat,
                           rbits=gr.load(i, vec=vec)), i)
    return conv


def _grid(n, vec):
    return max(1, ((n + vec - 1) // vec + BLOCK - 1) // BLOCK)


def run(kernel, arrays, out_dtype, vec, target, device=False):
    """kernel(*arrays, out, n) on ``target`` (interpreter, or the GPU with device=True)."""
    n = len(arrays[0])
    if not device:
        out = np.zeros(n, out_dtype)
        with opus.set_target(target, interpret=True):
            kernel[_grid(n, vec), BLOCK](*arrays, out, n)
        return out
    from opus.runtime.device_array import DeviceArray
    from opus.runtime import cuda_driver
    d_in = [DeviceArray.from_numpy(np.ascontiguousarray(a)) for a in arrays]
    d_out = DeviceArray.zeros(n, out_dtype)
    with opus.set_target(target, interpret=False):
        kernel[_grid(n, vec), BLOCK](*d_in, d_out, n)
    cuda_driver.synchronize()
    return d_out.to_numpy()


def cast_on(target, x, src, dst, rounding="rn", sat=False, vec=4, device=False):
    return run(converter(src, dst, rounding, sat, vec), [x], dst.np_dtype, vec, target, device)


def sr_on(target, x, r, src, dst, sat=False, vec=4, device=False):
    return run(stochastic(src, dst, sat, vec), [x, r], dst.np_dtype, vec, target, device)


def gpu_arch():
    """The GPU's target (the default target on a GPU machine)."""
    return opus.current_target().target.name
