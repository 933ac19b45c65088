"""Compile time of the same vector-add kernel (f32, 16-byte vectors, masked tail) in opus,
CuPy RawKernel and Triton.

    PYTHONPATH=src python benchmarks/compile_time.py [--out compile.json] [--systems opus,cupy,triton,amd]

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
                   done; after_context_to_launch_ms = the same minus import, CUDA context and
                   input allocation (define + compile + load + launch + sync).
  fresh_hit        the same with the cache directory already filled by an earlier run.
opus AMD (gfx942) compiles are timed where ``opus.runtime.amd_build`` exists and works.
"""
from __future__ import annotations

import argparse
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

def opus_warm_new_kernel(reps=20, on_gpu=True):
    os.environ["OPUS_CACHE_DISABLE"] = "1"
    import numpy as np
    from opus.runtime import cuda_driver as drv
    on_gpu = on_gpu and drv.driver_available()
    target = None if on_gpu else "sm_90a"
    if on_gpu:
        from opus.runtime.device_array import DeviceArray
        rng = np.random.default_rng()
        hx, hy = (rng.standard_normal(N, dtype=np.float32) for _ in range(2))
        x, y = DeviceArray.from_numpy(hx), DeviceArray.from_numpy(hy)
        o = DeviceArray.from_numpy(np.full(N, np.nan, np.float32))
    cols = {k: [] for k in ("trace_ms", "render_ms", "compile_ms", "total_ms",
                            "load_and_launch_ms", "first_launch_total_ms")}
    cached = []
    for r in range(reps + 2):  # 2 warm-up reps (NVRTC library load, context, ...)
        k = common.make_opus_vector_add()
        t0 = time.perf_counter()
        s = k.specialize(target)
        t1 = time.perf_counter()
        s.source
        t2 = time.perf_counter()
        built = s.compiled
        t3 = time.perf_counter()
        if on_gpu:
            k[(N + BLOCK * 4 - 1) // (BLOCK * 4), BLOCK](x, y, o, N)
            drv.synchronize()
        t4 = time.perf_counter()
        if r < 2:
            continue
        cached.append(built.cached)
        for key, v in (("trace_ms", t1 - t0), ("render_ms", t2 - t1), ("compile_ms", t3 - t2),
                       ("total_ms", t3 - t0), ("load_and_launch_ms", t4 - t3),
                       ("first_launch_total_ms", t4 - t0)):
            cols[key].append(v * 1e3)
    out = {k: summary(v, "ms") for k, v in cols.items() if on_gpu or "launch" not in k}
    out["any_cache_hit"] = any(cached)
    out["target"] = s.target.name
    if on_gpu:
        out["correct"] = bool(np.array_equal(o.to_numpy(), hx + hy))
    os.environ.pop("OPUS_CACHE_DISABLE", None)
    return out


OPUS_FRESH = '''
import time
T0 = time.perf_counter()
import opus
from opus import f32
T1 = time.perf_counter()
import json
import numpy as np
from opus.runtime import cuda_driver as drv
from opus.runtime.device_array import DeviceArray
drv.ensure_context()
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

@opus.kernel
def vector_add(x: opus.Ptr[f32], y: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32,
               VEC: opus.constexpr = 4):
    i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
    gx, gy, go = opus.make_gmem(x, n), opus.make_gmem(y, n), opus.make_gmem(out, n)
    go.store(gx.load(i, vec=VEC) + gy.load(i, vec=VEC), i)

T3 = time.perf_counter()
spec = vector_add.specialize()
T4 = time.perf_counter()
spec.source
T5 = time.perf_counter()
built = spec.compiled
T6 = time.perf_counter()
vector_add[(n + 1023) // 1024, 256](x, y, o, n)
drv.synchronize()
T7 = time.perf_counter()
if PROFILE:
    PR.disable()
    S = io.StringIO()
    pstats.Stats(PR, stream=S).sort_stats("cumulative").print_stats(45)
    print("PROFILE " + json.dumps(S.getvalue()))
ok = bool(np.array_equal(o.to_numpy(), hx + hy))
ms = lambda a, b: (b - a) * 1e3
print("RESULT " + json.dumps({
    "import_to_launch_ms": ms(T0, T7), "after_context_to_launch_ms": ms(T2, T7),
    "import_to_launch_excl_context_ms": ms(T0, T1) + ms(T2, T7), "cached": built.cached,
    "correct": ok, "breakdown_ms": {"import": ms(T0, T1), "context_and_inputs": ms(T1, T2),
    "define": ms(T2, T3), "trace": ms(T3, T4), "render": ms(T4, T5), "compile_or_cache": ms(T5, T6),
    "load_launch_sync": ms(T6, T7)}}))
'''

CUPY_FRESH = '''
import time
T0 = time.perf_counter()
import cupy as cp
T1 = time.perf_counter()
import json
import numpy as np
n = %(n)d
x = cp.random.standard_normal(n, dtype=cp.float32)
y = cp.random.standard_normal(n, dtype=cp.float32)
o = cp.full(n, cp.nan, dtype=cp.float32)
cp.cuda.Device().synchronize()
T2 = time.perf_counter()
k = cp.RawKernel(%(src)r, "vadd")
k(((n + 1023) // 1024,), (256,), (x, y, o, np.int32(n)))
cp.cuda.Device().synchronize()
T3 = time.perf_counter()
ok = bool(cp.array_equal(o, x + y))
ms = lambda a, b: (b - a) * 1e3
print("RESULT " + json.dumps({
    "import_to_launch_ms": ms(T0, T3), "after_context_to_launch_ms": ms(T2, T3),
    "import_to_launch_excl_context_ms": ms(T0, T1) + ms(T2, T3), "correct": ok,
    "breakdown_ms": {"import": ms(T0, T1), "context_and_inputs": ms(T1, T2),
                     "compile_load_launch_sync": ms(T2, T3)}}))
'''

TRITON_FRESH = '''
import time
T0 = time.perf_counter()
import torch
T0b = time.perf_counter()
import triton
import triton.language as tl
T1 = time.perf_counter()
import json
n = %(n)d
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
o = torch.full((n,), float("nan"), device="cuda")
torch.cuda.synchronize()
T2 = time.perf_counter()

@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

vadd[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
torch.cuda.synchronize()
T3 = time.perf_counter()
ok = bool(torch.equal(o, x + y))
ms = lambda a, b: (b - a) * 1e3
print("RESULT " + json.dumps({
    "import_to_launch_ms": ms(T0, T3), "after_context_to_launch_ms": ms(T2, T3),
    "import_to_launch_excl_context_ms": ms(T0, T1) + ms(T2, T3), "correct": ok,
    "breakdown_ms": {"import_torch": ms(T0, T0b), "import_triton": ms(T0b, T1),
                     "context_and_inputs": ms(T1, T2), "compile_load_launch_sync": ms(T2, T3)}}))
'''


def fresh_runs(script_text, cache_var, reps, hit):
    """Run ``script_text`` in fresh processes; cold = a new empty cache dir per run, hit = one
    dir filled by a first (untimed) run."""
    work = tempfile.mkdtemp(prefix="opus-bench-")
    path = os.path.join(work, "fresh_script.py")
    with open(path, "w") as f:
        f.write(script_text)
    env = dict(os.environ)
    env.pop("OPUS_CACHE_DISABLE", None)
    env["PYTHONPATH"] = common.SRC + os.pathsep + env.get("PYTHONPATH", "")
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
    s = OPUS_FRESH % {"n": N}
    return {"fresh_cold": fresh_runs(s, "OPUS_CACHE_DIR", reps, hit=False),
            "fresh_hit": fresh_runs(s, "OPUS_CACHE_DIR", reps, hit=True),
            "profile": opus_fresh_profile(s)}


def opus_fresh_profile(script_text):
    """Where a fresh process's time goes: ``-X importtime`` of ``import opus`` (top modules by
    cumulative time) and a cProfile of define -> first launch done on a cache hit."""
    out = {}
    env = dict(os.environ)
    env.pop("OPUS_CACHE_DISABLE", None)
    env["PYTHONPATH"] = common.SRC + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import opus"], env=env,
                       capture_output=True, text=True, timeout=120)
    rows = []
    for line in p.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    out["import_opus_top_cumulative_us"] = [f"{c:8d} {s:8d} {name}" for c, s, name in rows[:40]]
    work = tempfile.mkdtemp(prefix="opus-prof-")
    path = os.path.join(work, "fresh_script.py")
    with open(path, "w") as f:
        f.write(script_text)
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
    s = CUPY_FRESH % {"n": N, "src": common.CUDA_VECTOR_ADD}
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
    s = TRITON_FRESH % {"n": N}
    out["fresh_cold"] = fresh_runs(s, "TRITON_CACHE_DIR", fresh_reps, hit=False)
    out["fresh_hit"] = fresh_runs(s, "TRITON_CACHE_DIR", fresh_reps, hit=True)
    shutil.rmtree(work, ignore_errors=True)
    return out


# -- opus for AMD ---------------------------------------------------------------------------------

def opus_amd(reps=10):
    out = {"machine": platform.node(), "target": "gfx942"}
    try:
        import opus.runtime.amd_build  # noqa: F401
    except Exception as e:
        out["status"] = f"not measured: opus.runtime.amd_build unavailable ({type(e).__name__}: {e})"
        return out
    os.environ["OPUS_CACHE_DISABLE"] = "1"
    try:
        times = []
        for r in range(reps + 1):
            k = common.make_opus_vector_add()
            t0 = time.perf_counter()
            k.specialize(target="gfx942").compiled
            if r:
                times.append((time.perf_counter() - t0) * 1e3)
        out["compile_ms"] = summary(times, "ms")
        out["what"] = "trace + render + HIP compile (disk cache disabled)"
    except Exception as e:
        out["status"] = f"not measured: {type(e).__name__}: {str(e)[:300]}"
    finally:
        os.environ.pop("OPUS_CACHE_DISABLE", None)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON file to write")
    ap.add_argument("--systems", default="opus,cupy,triton,amd")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--fresh-reps", type=int, default=5)
    a = ap.parse_args()
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
                      opus_amd))
    for name, fn in steps:
        t = time.perf_counter()
        try:
            res[name] = fn()
        except Exception as e:
            import traceback
            errors[name] = traceback.format_exc()[-3000:]
            print(f"{name}: FAILED\n{errors[name]}", file=sys.stderr)
        print(f"[compile_time] {name} done in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    out = {"environment": common.environment(), "compile_time": res}
    if errors:
        out["compile_time"]["errors"] = errors
    if a.out:
        common.write_json(out, a.out)
    for name, r in res.items():
        for k in ("warm_new_kernel", "fresh_cold", "fresh_hit"):
            v = r.get(k) if isinstance(r, dict) else None
            if v:
                m = v.get("total_ms") or v.get("import_to_launch_ms")
                print(f"{name:8s} {k:16s} {m['median']:9.2f} ms"
                      + (f"  (after context: {v['after_context_to_launch_ms']['median']:.2f} ms)"
                         if "after_context_to_launch_ms" in v else ""))
        if name.startswith("opus_amd"):
            print("opus_amd", r.get("compile_ms", r.get("status")))


if __name__ == "__main__":
    main()
