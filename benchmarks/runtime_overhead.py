"""Host-side cost of the opus runtime: NVRTC compile, and launch overhead (needs a GPU).

    PYTHONPATH=src python benchmarks/runtime_overhead.py
"""
import ctypes
import subprocess
import sys
import time

EMPTY = r'extern "C" __global__ void empty(const float* a, const float* b, float* c, int n) {}'
SMALL = r"""
extern "C" __global__ void vec_add(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
"""


def per_call_us(fn, n=20000, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def compile_times():
    code = ("import time; t=time.perf_counter(); import opus.runtime.nvrtc as n; t1=time.perf_counter();"
            f"n.compile_cuda({SMALL!r}, arch='sm_90a'); t2=time.perf_counter();"
            f"n.compile_cuda({SMALL!r}, arch='sm_90a'); t3=time.perf_counter();"
            "print(f'{(t1-t)*1e3:.1f} {(t2-t1)*1e3:.1f} {(t3-t2)*1e3:.1f}')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imp, first, warm = out.stdout.split()
    print(f"import opus.runtime.nvrtc: {imp} ms; compile first call: {first} ms; warm: {warm} ms")


def launch_overhead():
    from opus import dtypes as dt
    from opus.runtime import cuda_driver as drv, nvrtc
    from opus.runtime.launcher import POINTER_CTYPE, function_launcher
    from opus.runtime.tensor_args import device_pointer, stream_of
    if not drv.driver_available():
        print("no GPU: launch overhead not measured")
        return
    res = nvrtc.compile_cuda(EMPTY, arch=drv.device_arch(0))
    f = drv.load_module(res.cubin, nvrtc_version=res.nvrtc_version).get_function("empty")
    launch = function_launcher(f, [POINTER_CTYPE] * 3 + [ctypes.c_int32])
    p = drv.mem_alloc(1 << 20)
    g, b, vals = (1, 1, 1), (32, 1, 1), (p, p, p, 1)
    ours = per_call_us(lambda: launch(g, b, 0, 0, vals))
    drv.synchronize()
    # The same cuLaunchKernel with the argument array prepared once: the driver's own cost
    # plus one ctypes call; the difference to `ours` is the launcher's Python work.
    raw_fn = drv._lib.cuLaunchKernel
    arr = launch._keepalive[1]
    addr = ctypes.addressof(arr)
    raw = per_call_us(lambda: raw_fn(f.handle, 1, 1, 1, 32, 1, 1, 0, 0, addr, None))
    drv.synchronize()
    print(f"launch via function_launcher: {ours:.2f} us; bare ctypes cuLaunchKernel: {raw:.2f} us; "
          f"launcher overhead: {ours - raw:.2f} us")
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    a = torch.zeros(1024, device="cuda")
    args = (a, a, a)

    def full():
        ptrs = [device_pointer(t, param="x", dtype=dt.f32) for t in args]
        launch(g, b, 0, stream_of(args) or 0, (*ptrs, 1024))

    full_us = per_call_us(full)
    ptr_us = per_call_us(lambda: device_pointer(a, param="x", dtype=dt.f32), n=100000)
    stream_us = per_call_us(lambda: stream_of(args), n=100000)
    torch.cuda.synchronize()
    print(f"torch tensors: device_pointer {ptr_us:.3f} us each, stream_of {stream_us:.3f} us, "
          f"3 pointers + stream + launch: {full_us:.2f} us")


if __name__ == "__main__":
    compile_times()
    launch_overhead()
