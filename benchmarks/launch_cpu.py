"""CPU cost of a memoized launch, no GPU needed: cuLaunchKernelEx is a C no-op (compiled here
with cc), so what is timed is opus's own work per ``k[grid, block](x, y, o, n)`` and per
entry ``run``, through the C hot path and the generated Python path. The arrays are torch-like
stand-ins (their accessors are Python methods, slower than torch's), so compare runs of this
script with each other, not with GPU launch figures.

    PYTHONPATH=src python benchmarks/launch_cpu.py [--reps 7] [--count 200000]

Each figure: nanoseconds per call, the best of --reps loops of --count calls (the machine's
load only adds time); run it interleaved with another checkout to compare.
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


if __name__ == "__main__":
    main()
