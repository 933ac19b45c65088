"""CPU cost of a memoized launch, no GPU needed: cuLaunchKernelEx is a C no-op (compiled here
with cc), so what is timed is opus's own work per ``k[grid, block](x, y, o, n)`` and per
entry ``run``, through the C hot path and the generated Python path. The arrays are torch-like
stand-ins (their accessors are Python methods, slower than torch's), so compare runs of this
script with each other, not with GPU launch figures.

    PYTHONPATH=src python benchmarks/launch_cpu.py [--reps 7] [--count 200000]

Each figure: nanoseconds per call, the best of --reps loops of --count calls (the machine's
load only adds time); run it interleaved with another checkout to compare.

    PYTHONPATH=src python benchmarks/launch_cpu.py --ops     (needs torch, CPU-only is enough)

times whole opus.ops calls (gemm, topk, softmax, rmsnorm, the quantizations) on torch CPU
tensors that pass for CUDA ones (cuTensorMapEncodeTiled returns 128 zero bytes for the GEMM's
tensor maps): ``Tensor.is_cuda`` reads True, launch entries are GpuEntry objects
over a stand-in function and the no-op cuLaunchKernelEx (nothing is compiled or loaded), the
current stream is 0 and the chip has 132 SMs. What is timed is opus's host work per call plus
torch's own (allocating outputs: CPU allocations of large tensors cost more than the CUDA
caching allocator's, so the ops' tests pass ``out=`` where they can), in microseconds.
"""
import argparse
import ctypes
import os
import subprocess
import tempfile
import time

import opus
from opus import f32, i32
from opus.frontend import gpu_launch, launch
from opus.frontend.targeting import current_target
from opus.targets import get_target


def noop_launch():
    d = tempfile.mkdtemp()
    src, lib = os.path.join(d, "noop.c"), os.path.join(d, "noop.so")
    with open(src, "w") as f:
        f.write("int noop_launch(void *a, void *b, void *c, void *d) { return 0; }\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    fn = ctypes.CDLL(lib).noop_launch
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 4, ctypes.c_int
    return fn


@opus.kernel
def vadd(x: opus.Ptr[f32], y: opus.Ptr[f32], o: opus.Ptr[f32], n: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        o[i] = x[i] + y[i]


class Function:
    handle, device, name = 0xF00D, 0, "vadd"

    def set_max_dynamic_smem(self, n):
        pass


class DType:
    pass


F32 = DType()


class Tensor:
    def __init__(self, p):
        self.p, self.dtype = p, F32

    def data_ptr(self):
        return self.p

    def get_device(self):
        return 0


class Parameter(Tensor):
    pass


def entry(fast, cu_launch):
    os.environ["OPUS_FAST_LAUNCH"] = "1" if fast else "0"
    spec = vadd.specialize("sm_90a")
    e = gpu_launch.GpuEntry(vadd.name, get_target("sm_90a"), spec.static_smem,
                            gpu_launch.plan_of(vadd, spec), Function(), 99 * 1024, cu_launch)
    dtypes = (F32, F32, F32, None)
    e._adopt(Tensor, dtypes, lambda d: 0)
    if e.fast is not None:
        e.fast.adopt_torch(Tensor, Parameter, dtypes, lambda d: 0)
    return e


def best(f, count, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(count):
            f()
        times.append((time.perf_counter() - t) / count * 1e9)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--count", type=int, default=200000)
    a = ap.parse_args()
    cu = noop_launch()
    x, y, o = Tensor(0x1000), Tensor(0x2000), Tensor(0x3000)
    args = (x, y, o, 1000)
    fl = gpu_launch.fast_launch_module()
    for fast in ([True] if fl is not None else []) + [False]:
        e = entry(fast, cu)
        cls = launch._c_launcher_class(fl) if fast else launch.PyLauncher
        la = cls(vadd, (4, 256))
        la._remember(4, current_target(), e.run)
        run = e.run
        tag = "C" if fast else "Python"
        print(f"{tag:6s} entry.run {best(lambda: run(la, args, 0, None), a.count, a.reps):6.0f} ns"
              f"   launcher call {best(lambda: la(x, y, o, 1000), a.count, a.reps):6.0f} ns")


def ops_main(count, reps):
    """Microseconds per opus.ops call, torch CPU tensors passing for CUDA ones."""
    import torch
    import opus.ops as ops
    from opus.frontend import targeting
    from opus.ops import _rows, norm_quant
    cu = noop_launch()

    class CpuFunction(Function):
        device = -1          # torch's get_device() of a CPU tensor

    class CpuEntry(gpu_launch.GpuEntry):
        def _adopt_torch(self):
            from opus.runtime import tensor_args
            tensor_args.init_torch()
            dtypes = self._per_param(tensor_args.torch_dtype)
            self._adopt(torch.Tensor, dtypes, lambda d: 0)
            if self.fast is not None:
                self.fast.adopt_torch(torch.Tensor, torch.nn.Parameter, dtypes, lambda d: 0)
            self._torch_adopted = True

    launch._make_entry = lambda k, sel, spec: CpuEntry(
        k.name, spec.target, spec.static_smem, gpu_launch.plan_of(k, spec), CpuFunction(),
        227 * 1024, cu)
    torch.Tensor.is_cuda = property(lambda self: True)
    _rows.sm_count = lambda x: 132
    torch._C._cuda_getCurrentRawStream = lambda d: 0   # stream 0 (tensor_args.init_torch
                                                       # reads it at every entry's adoption)
    torch.cuda.is_current_stream_capturing = lambda: False
    targeting._selected.set(targeting._selection(get_target("sm_90a"), "gpu"))
    from opus.ops import gemm_hopper
    from opus.runtime import cuda_driver
    gemm_hopper._sm_count = lambda torch, a: 132
    cuda_driver.tensor_map_encode_tiled = lambda *args: bytes(128)   # no driver: bytes stand in
    norm_quant._torch_op("rmsnorm")   # a CPU kernel for the torch.library ops too (older
    for name, (_, impl) in norm_quant._OPS.items():   # opus dispatched eager calls there)
        norm_quant._TORCH_LIB[0].impl(name, impl(True), "CPU")

    bf = torch.bfloat16
    x, w = torch.randn(4096, 8192, dtype=bf), torch.randn(8192, dtype=bf)
    y, q = torch.empty_like(x), torch.empty(4096, 8192, dtype=torch.float8_e4m3fn)
    s, sg = torch.empty(4096), torch.empty(4096, 64)
    t1, t2, t3 = torch.randn(4096, 32768), torch.randn(64, 131072), torch.randn(16384, 256)
    ga, gw = torch.randn(128, 8192).to(bf), torch.randn(8192, 8192).to(bf)
    gout = torch.empty(128, 8192, dtype=bf)
    cases = {
        "gemm 128x8192x8192 bf16 w.t()": lambda: ops.gemm(ga, gw.t()),
        "gemm 128x8192x8192 bf16 w.t() out=": lambda: ops.gemm(ga, gw.t(), out=gout),
        "gemm 128x8192x8192 bf16 out=": lambda: ops.gemm(ga, gw, out=gout),
        "topk 4096x32768 k=8": lambda: ops.topk(t1, 8),
        "topk 64x131072 k=64 (split, one launch)": lambda: ops.topk(t2, 64),
        "topk 16384x256 k=8": lambda: ops.topk(t3, 8),
        "softmax 4096x8192 bf16": lambda: ops.softmax(x),
        "softmax 4096x8192 bf16 out=": lambda: ops.softmax(x, out=y),
        "rmsnorm 4096x8192 bf16 out=": lambda: ops.rmsnorm(x, w, out=y),
        "rmsnorm_quant out=, scales=": lambda: ops.rmsnorm_quant(x, w, out=q, scales=s),
        "per_token_quant out=, scales=": lambda: ops.per_token_quant(x, out=q, scales=s),
        "per_group_quant out=, scales=": lambda: ops.per_group_quant(x, out=q, scales=sg),
    }
    for name, f in cases.items():
        f()                     # plans made
        print(f"{name:36s} {best(f, count, reps) / 1000:7.2f} us")


if __name__ == "__main__":
    import sys
    if "--ops" in sys.argv:
        sys.argv.remove("--ops")
        ap = argparse.ArgumentParser()
        ap.add_argument("--reps", type=int, default=5)
        ap.add_argument("--count", type=int, default=2000)
        a = ap.parse_args()
        ops_main(a.count, a.reps)
    else:
        main()
