"""Compile time of the same vector-add kernel (f32, 16-byte vectors, masked tail) in opus,
CuPy RawKernel and Triton.

    PYTHONPATH=src python benchmarks/compile_time.py [--out compile.json] [--systems opus,cupy,triton,amd]
        [--report STEM]

For each system:
  warm_new_kernel  a kernel never seen before, in a process that has already compiled one
                   (libraries loaded, context up): opus = trace + render + NVRTC with the disk
                   cache disabled (OPUS_CACHE_DISABLE=1), a fresh ``Kernel`` object per rep;
                   CuPy = RawKernel(...).compile() on source with a unique comment; Triton =
                   first call (+ sync) of a fresh @triton.jit function with a unique comment.
  fresh_cold       a fresh ``python`` that imports the system, makes inputs, defines the kernel,
                   launches it once and synchronizes, with an empty cache directory.
                   wall_ms = the whole subprocess as the parent sees it (interpreter start too);
                   import_to_launch_ms = from before the import to after the first launch is
                   done, leaving out the making of the inputs (numpy/torch random numbers and
                   copies: user code); it includes CUDA context creation.
                   after_context_to_launch_ms = define + compile + load + launch + sync.
  fresh_hit        the same with the cache directory already filled by an earlier run.
  amd              (--systems amd; no GPU needed) opus' new kernel for gfx942 and gfx950: trace +
                   render + clang to a code object, and to assembly only, disk cache disabled.
                   With --report STEM it writes STEM.json and STEM.md on its own:
                   --systems amd --report benchmarks/results/2026-11-21-cpu-amd-compile
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import summary  # noqa: E402

N = 1_000_003  # odd: the masked tail is exercised
BLOCK = 256


# -- opus ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def no_disk_cache():
    os.environ["OPUS_CACHE_DISABLE"] = "1"
    try:
        yield
    finally:
        os.environ.pop("OPUS_CACHE_DISABLE", None)


def new_kernel_times(target, compile_step, reps, launch=None, warmup=2):
    """Per-rep ms of a kernel never seen before (a fresh ``Kernel``, disk cache off): trace
    (``specialize``), render (``.source``), ``compile_step(spec)`` and, with ``launch``, load +
    launch. The first ``warmup`` reps (library loads, context) are dropped. Returns the summaries
    and the compile steps' results."""
    steps = ["trace_ms", "render_ms", "compile_ms", "total_ms"]
    if launch:
        steps += ["load_and_launch_ms", "first_launch_total_ms"]
    cols, results = {k: [] for k in steps}, []
    with no_disk_cache():
        for r in range(warmup + reps):
            k = common.make_opus_vector_add()
            t0 = time.perf_counter()
            s = k.specialize(target)
            t1 = time.perf_counter()
            s.source
            t2 = time.perf_counter()
            built = compile_step(s)
            t3 = time.perf_counter()
            if launch:
                launch(k)
            t4 = time.perf_counter()
            if r < warmup:
                continue
            results.append(built)
            for key, v in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3, t4 - t0)):
                cols[key].append(v * 1e3)
    return {k: summary(v, "ms") for k, v in cols.items()}, results


def gpu_vector_add():
    """For timing new kernels on the GPU: a launch of kernel ``k`` on fixed random inputs, and a
    check of the last launch's output."""
    import numpy as np
    from opus.runtime import cuda_driver as drv
    from opus.runtime.device_array import DeviceArray
    rng = np.random.default_rng()
    hx, hy = (rng.standard_normal(N, dtype=np.float32) for _ in range(2))
    x, y = DeviceArray.from_numpy(hx), DeviceArray.from_numpy(hy)
    o = DeviceArray.from_numpy(np.full(N, np.nan, np.float32))

    def launch(k):
        k[(N + BLOCK * 4 - 1) // (BLOCK * 4), BLOCK](x, y, o, N)
        drv.synchronize()
    return launch, lambda: bool(np.array_equal(o.to_numpy(), hx + hy))


def opus_warm_new_kernel(reps=20, on_gpu=True):
    import opus
    from opus.runtime import cuda_driver as drv
    on_gpu = on_gpu and drv.driver_available()
    launch, correct = gpu_vector_add() if on_gpu else (None, None)
    target = None if on_gpu else "sm_90a"
    out, built = new_kernel_times(target, lambda s: s.compiled, reps, launch)
    out["any_cache_hit"] = any(b.cached for b in built)
    out["target"] = target or opus.current_target().target.name
    if on_gpu:
        out["correct"] = correct()
    return out


# Fresh-process scripts (run by fresh_runs). Each sets T0 (before the import), T1 (imported),
# T_CTX (CUDA context created), T2 (inputs ready), T3 (first launch done), STEPS (the breakdown:
# name -> (start, end)) and RESULT (what else to report), then FRESH_TAIL prints them.
# import_to_launch_ms leaves out T_CTX..T2, making the inputs: that is the user's code (numpy or
# torch random numbers, host-to-device copies), not the system's.
FRESH_TAIL = '''
ms = lambda a, b: (b - a) * 1e3
RESULT.update(import_to_launch_ms=ms(T0, T_CTX) + ms(T2, T3), after_context_to_launch_ms=ms(T2, T3),
              import_to_launch_excl_context_ms=ms(T0, T1) + ms(T2, T3),
              breakdown_ms={k: ms(a, b) for k, (a, b) in STEPS.items()})
print("RESULT " + json.dumps(RESULT))
'''

OPUS_FRESH = '''
import time
T0 = time.perf_counter()
import opus
T1 = time.perf_counter()
from opus.runtime import cuda_driver as drv
drv.ensure_context()
T_CTX = time.perf_counter()
import json
import numpy as np
from opus.runtime.device_array import DeviceArray
n = %(n)d
rng = np.random.default_rng()
hx, hy = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
x, y = DeviceArray.from_numpy(hx), DeviceArray.from_numpy(hy)
o = DeviceArray.from_numpy(np.full(n, np.nan, np.float32))
drv.synchronize()
import os
PROFILE = os.environ.get("OPUS_BENCH_PROFILE")
if PROFILE:
    import cProfile, pstats, io
    PR = cProfile.Profile()
    PR.enable()
T2 = time.perf_counter()
%(kernel)s
T_DEFINED = time.perf_counter()
spec = vector_add.specialize()
T_TRACED = time.perf_counter()
spec.source
T_RENDERED = time.perf_counter()
built = spec.compiled
T_COMPILED = time.perf_counter()
vector_add[(n + 1023) // 1024, 256](x, y, o, n)
drv.synchronize()
T3 = time.perf_counter()
if PROFILE:
    PR.disable()
    S = io.StringIO()
    pstats.Stats(PR, stream=S).sort_stats("cumulative").print_stats(45)
    print("PROFILE " + json.dumps(S.getvalue()))
RESULT = {"cached": built.cached, "correct": bool(np.array_equal(o.to_numpy(), hx + hy))}
STEPS = {"import": (T0, T1), "context": (T1, T_CTX), "inputs": (T_CTX, T2), "define": (T2, T_DEFINED),
         "trace": (T_DEFINED, T_TRACED), "render": (T_TRACED, T_RENDERED),
         "compile_or_cache": (T_RENDERED, T_COMPILED), "load_launch_sync": (T_COMPILED, T3)}
'''

CUPY_FRESH = '''
import time
T0 = time.perf_counter()
import cupy as cp
T1 = time.perf_counter()
cp.cuda.Device(0).synchronize()  # creates the context
T_CTX = time.perf_counter()
import json
import numpy as np
n = %(n)d
x = cp.random.standard_normal(n, dtype=cp.float32)
y = cp.random.standard_normal(n, dtype=cp.float32)
o = cp.full(n, cp.nan, dtype=cp.float32)
cp.cuda.Device().synchronize()
T2 = time.perf_counter()
k = cp.RawKernel(%(kernel)r, "vadd")
k(((n + 1023) // 1024,), (256,), (x, y, o, np.int32(n)))
cp.cuda.Device().synchronize()
T3 = time.perf_counter()
RESULT = {"correct": bool(cp.array_equal(o, x + y))}
STEPS = {"import": (T0, T1), "context": (T1, T_CTX), "inputs": (T_CTX, T2),
         "compile_load_launch_sync": (T2, T3)}
'''

TRITON_FRESH = '''
import time
T0 = time.perf_counter()
import torch
T_TORCH = time.perf_counter()
import triton
import triton.language as tl
T1 = time.perf_counter()
torch.cuda.init()
torch.cuda.synchronize()  # creates the context
T_CTX = time.perf_counter()
import json
n = %(n)d
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
o = torch.full((n,), float("nan"), device="cuda")
torch.cuda.synchronize()
T2 = time.perf_counter()
%(kernel)s
vadd[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
torch.cuda.synchronize()
T3 = time.perf_counter()
RESULT = {"correct": bool(torch.equal(o, x + y))}
STEPS = {"import_torch": (T0, T_TORCH), "import_triton": (T_TORCH, T1),
         "context": (T1, T_CTX), "inputs": (T_CTX, T2), "compile_load_launch_sync": (T2, T3)}
'''


def fresh_script(template, kernel):
    """A fresh-process script: ``template`` with the benchmark's n and kernel, then FRESH_TAIL."""
    return template % {"n": N, "kernel": kernel} + FRESH_TAIL


def script_in_tempdir(script_text, prefix):
    """(work dir, script path, environment) for running ``script_text`` in a fresh process
    that imports opus from this checkout."""
    work = tempfile.mkdtemp(prefix=prefix)
    path = os.path.join(work, "fresh_script.py")
    with open(path, "w") as f:
        f.write(script_text)
    env = dict(os.environ)
    env.pop("OPUS_CACHE_DISABLE", None)
    env["PYTHONPATH"] = common.SRC + os.pathsep + env.get("PYTHONPATH", "")
    return work, path, env


def fresh_runs(script_text, cache_var, reps, hit):
    """Run ``script_text`` in fresh processes; cold = a new empty cache dir per run, hit = one
    dir filled by a first (untimed) run."""
    work, path, env = script_in_tempdir(script_text, "opus-bench-")
    runs = []
    shared = os.path.join(work, "cache-shared")
    for r in range(reps + (1 if hit else 0)):
        env[cache_var] = shared if hit else os.path.join(work, f"cache-{r}")
        t = time.perf_counter()
        p = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                           timeout=300, cwd=work)
        wall = (time.perf_counter() - t) * 1e3
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        if p.returncode or not line:
            raise RuntimeError(f"fresh run failed ({p.returncode}): {p.stderr[-3000:]}")
        d = json.loads(line[-1][7:])
        d["wall_ms"] = wall
        if hit and r == 0:
            continue  # filled the cache
        runs.append(d)
    shutil.rmtree(work, ignore_errors=True)
    out = {k: summary([d[k] for d in runs], "ms") for k in
           ("wall_ms", "import_to_launch_ms", "after_context_to_launch_ms",
            "import_to_launch_excl_context_ms")}
    out["breakdown_ms"] = {k: summary([d["breakdown_ms"][k] for d in runs], "ms")
                           for k in runs[0]["breakdown_ms"]}
    out["correct"] = all(d["correct"] for d in runs)
    if "cached" in runs[0]:
        out["cached"] = [d["cached"] for d in runs]
    return out


def opus_fresh(reps):
    s = fresh_script(OPUS_FRESH, common.opus_vector_add_source())
    return {"fresh_cold": fresh_runs(s, "OPUS_CACHE_DIR", reps, hit=False),
            "fresh_hit": fresh_runs(s, "OPUS_CACHE_DIR", reps, hit=True),
            "profile": opus_fresh_profile(s)}


def opus_fresh_profile(script_text):
    """Where a fresh process's time goes: ``-X importtime`` of ``import opus`` (top modules by
    cumulative time) and a cProfile of define -> first launch done on a cache hit."""
    out = {}
    work, path, env = script_in_tempdir(script_text, "opus-prof-")
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import opus"], env=env,
                       capture_output=True, text=True, timeout=120)
    rows = []
    for line in p.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    out["import_opus_top_cumulative_us"] = [f"{c:8d} {s:8d} {name}" for c, s, name in rows[:40]]
    env["OPUS_CACHE_DIR"] = os.path.join(work, "cache")
    subprocess.run([sys.executable, path], env=env, capture_output=True, timeout=120, cwd=work)
    env["OPUS_BENCH_PROFILE"] = "1"
    p = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True,
                       timeout=120, cwd=work)
    prof = [l for l in p.stdout.splitlines() if l.startswith("PROFILE ")]
    out["cache_hit_define_to_launch_cprofile"] = json.loads(prof[0][8:]) if prof else p.stderr[-2000:]
    shutil.rmtree(work, ignore_errors=True)
    return out


# -- CuPy ---------------------------------------------------------------------------------------

def cupy_all(reps=20, fresh_reps=3):
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-cache-")
    import cupy as cp
    import numpy as np
    x = cp.random.standard_normal(N, dtype=cp.float32)
    y = cp.random.standard_normal(N, dtype=cp.float32)
    o = cp.full(N, cp.nan, dtype=cp.float32)
    grid = ((N + 1023) // 1024,)
    comp, first = [], []
    for r in range(reps + 2):
        src = common.CUDA_VECTOR_ADD + f"// {uuid.uuid4().hex}\n"
        k = cp.RawKernel(src, "vadd")
        t0 = time.perf_counter()
        k.compile()
        t1 = time.perf_counter()
        k2 = cp.RawKernel(src + "// first call\n", "vadd")
        cp.cuda.Device().synchronize()
        t2 = time.perf_counter()
        k2(grid, (BLOCK,), (x, y, o, np.int32(N)))
        cp.cuda.Device().synchronize()
        t3 = time.perf_counter()
        if r >= 2:
            comp.append((t1 - t0) * 1e3)
            first.append((t3 - t2) * 1e3)
    out = {"warm_new_kernel": {"total_ms": summary(comp, "ms"),
                               "what": "RawKernel.compile(): NVRTC + module load",
                               "first_launch_total_ms": summary(first, "ms"),
                               "correct": bool(cp.array_equal(o, x + y))}}
    s = fresh_script(CUPY_FRESH, common.CUDA_VECTOR_ADD)
    out["fresh_cold"] = fresh_runs(s, "CUPY_CACHE_DIR", fresh_reps, hit=False)
    out["fresh_hit"] = fresh_runs(s, "CUPY_CACHE_DIR", fresh_reps, hit=True)
    return out


# -- Triton -------------------------------------------------------------------------------------

def triton_all(reps=10, fresh_reps=3):
    work = tempfile.mkdtemp(prefix="triton-bench-")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "cache")
    import torch
    import triton
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    o = torch.full((N,), float("nan"), device="cuda")
    first, entries = [], []
    for r in range(reps + 2):
        tag = uuid.uuid4().hex
        cdir = os.path.join(work, f"cache-{r}")
        os.environ["TRITON_CACHE_DIR"] = cdir
        knobs = getattr(triton, "knobs", None)
        if knobs is not None and hasattr(knobs, "cache"):
            try:
                knobs.cache.dir = cdir
            except Exception:
                pass
        mod = common.import_module_from_text(common.TRITON_VECTOR_ADD.replace("TAG", tag),
                                             os.path.join(work, f"tk_{tag}.py"), f"tk_{tag}")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        mod.vadd[(triton.cdiv(N, 1024),)](x, y, o, N, BLOCK=1024)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if r >= 2:
            first.append((t1 - t0) * 1e3)
            entries.append(sum(len(f) for _, _, f in os.walk(cdir)))
    out = {"warm_new_kernel": {"total_ms": summary(first, "ms"),
                               "files_written_to_cache_per_rep": entries,
                               "what": "first call of a new @triton.jit function + sync "
                                       "(compile + load + launch), empty cache",
                               "correct": bool(torch.equal(o, x + y))}}
    s = fresh_script(TRITON_FRESH, common.TRITON_VECTOR_ADD)
    out["fresh_cold"] = fresh_runs(s, "TRITON_CACHE_DIR", fresh_reps, hit=False)
    out["fresh_hit"] = fresh_runs(s, "TRITON_CACHE_DIR", fresh_reps, hit=True)
    shutil.rmtree(work, ignore_errors=True)
    return out


# -- opus for AMD ---------------------------------------------------------------------------------

AMD_ARCHS = ("gfx942", "gfx950")
AMD_OUTPUTS = {"code_object": lambda s: s.compiled, "asm": lambda s: s.asm}


def opus_amd(reps=20):
    """opus' new-kernel compile time for each AMD arch, to a code object and to assembly only.
    Needs a clang (the ziglang wheel, ROCm or OPUS_HIP_CLANG), no GPU."""
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import FLAGS, hip_compiler
    out = {"machine": platform.node()}
    try:
        out["compiler"] = hip_compiler().what
    except OpusRuntimeError as e:
        out["status"] = f"not measured: {e}"
        return out
    out["ziglang"] = common.package_version("ziglang")
    out["flags"] = " ".join(FLAGS)
    out["what"] = "trace + render + clang, a new kernel per rep, disk cache disabled"
    for arch in AMD_ARCHS:
        out[arch] = {kind: new_kernel_times(arch, step, reps)[0] for kind, step in AMD_OUTPUTS.items()}
    # the headline that common.py's merged report prints
    out["target"], out["compile_ms"] = "gfx942", out["gfx942"]["code_object"]["total_ms"]
    return out


def amd_markdown(report):
    """The report of a ``--systems amd`` run."""
    env = report["environment"]
    lines = [f"# opus AMD compile time, {report['date']}, CPU only ({env['cpu']}, "
             f"{env['nproc']} cores)", ""]
    for key, amd in report["compile_time"].items():
        if "status" in amd:
            lines += [f"{key}: {amd['status']}", ""]
            continue
        lines += [f"{amd['compiler']} (ziglang {amd['ziglang']}), Python {env['python']}, numpy "
                  f"{env['numpy']}, opus commit `{env['git_commit']}`", "",
                  "A new kernel per rep (the vector add: f32, 16-byte vectors, masked tail; a fresh "
                  "`Kernel`, disk cache disabled), 2 warm-up reps; median ms (min, n):", "",
                  "| target | output | trace | render | clang | total |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for arch in AMD_ARCHS:
            for kind in AMD_OUTPUTS:
                t = amd[arch][kind]
                lines.append(f"| {arch} | {kind.replace('_', ' ')} | " + " | ".join(
                    f"{t[k]['median']:.2f} ({t[k]['min']:.2f}, {t[k]['n']})"
                    for k in ("trace_ms", "render_ms", "compile_ms", "total_ms")) + " |")
    return "\n".join(lines + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON file to write")
    ap.add_argument("--systems", default="opus,cupy,triton,amd")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--fresh-reps", type=int, default=5)
    ap.add_argument("--report", metavar="STEM", help="with --systems amd: write STEM.json and "
                    "STEM.md (environment of this CPU machine)")
    a = ap.parse_args()
    if a.report and a.systems != "amd":
        ap.error("--report is for --systems amd; merge other parts with common.py report")
    systems = a.systems.split(",")
    res, errors = {}, {}
    steps = []
    if "opus" in systems:
        steps.append(("opus", lambda: {"warm_new_kernel": opus_warm_new_kernel(a.reps),
                                       **opus_fresh(a.fresh_reps)}))
    if "cupy" in systems:
        steps.append(("cupy", lambda: cupy_all(a.reps, max(3, a.fresh_reps // 2))))
    if "triton" in systems:
        steps.append(("triton", lambda: triton_all(max(5, a.reps // 2), max(3, a.fresh_reps // 2))))
    if "amd" in systems:
        from opus.runtime import cuda_driver as drv
        steps.append(("opus_amd_" + ("gpu_machine" if drv.driver_available() else "cpu_machine"),
                      lambda: opus_amd(a.reps)))
    for name, fn in steps:
        t = time.perf_counter()
        try:
            res[name] = fn()
        except Exception:
            import traceback
            errors[name] = traceback.format_exc()[-3000:]
            print(f"{name}: FAILED\n{errors[name]}", file=sys.stderr)
        print(f"[compile_time] {name} done in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    out = {"environment": common.cpu_environment() if a.report else common.environment(),
           "compile_time": res}
    if errors:
        out["compile_time"]["errors"] = errors
    if a.out:
        common.write_json(out, a.out)
    if a.report:
        out["date"] = time.strftime("%Y-%m-%d")
        common.write_report(out, a.report, amd_markdown(out))
    for name, r in res.items():
        for k in ("warm_new_kernel", "fresh_cold", "fresh_hit"):
            v = r.get(k) if isinstance(r, dict) else None
            if v:
                m = v.get("total_ms") or v.get("import_to_launch_ms")
                print(f"{name:8s} {k:16s} {m['median']:9.2f} ms"
                      + (f"  (after context: {v['after_context_to_launch_ms']['median']:.2f} ms)"
                         if "after_context_to_launch_ms" in v else ""))
        if name.startswith("opus_amd"):
            print(name, r.get("status", ""))
            for arch in AMD_ARCHS:
                for kind in AMD_OUTPUTS:
                    if arch in r:
                        print(f"  {arch} {kind:12s} {r[arch][kind]['total_ms']['median']:9.2f} ms")


if __name__ == "__main__":
    main()
