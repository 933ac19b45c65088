"""Shared pieces of the opus benchmarks: the vector-add kernel in each system, timing helpers,
environment facts, and the report writer.

    # merge the JSON parts that compile_time.py / launch_overhead.py wrote into a dated report
    python benchmarks/common.py report PART.json [PART.json ...] --date 2026-11-21 \
        [--out benchmarks/results]

Timing conventions (see /work/.library/device/METHOD.md): warm up first, repeat, report the
median (and min/max); device work is timed with CUDA events, or by synchronizing before the
host clock is read; inputs are random (never zeros) and outputs are checked.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SRC = os.path.join(REPO, "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)

# -- the same kernel in each system -------------------------------------------------------------

def opus_vector_add_source():
    """Module text defining ``opus.examples.vector_add`` (for fresh-process scripts, which
    define the kernel themselves so that defining and tracing it are timed)."""
    import inspect
    from opus.examples import vector_add
    return "import opus\nfrom opus import f32\n\n" + inspect.getsource(vector_add.fn)


def make_opus_vector_add():
    """A fresh ``Kernel`` object each call (nothing traced or compiled yet) around the body of
    ``opus.examples.vector_add`` (f32, VEC=4 -> 16-byte accesses, masked tail)."""
    from opus.examples import vector_add
    from opus.frontend.kernel import Kernel
    return Kernel(vector_add.fn, vector_add.block)


def make_opus_vector_copy():
    """out = x with 16-byte accesses (f32x4), masked tail."""
    import opus
    from opus import f32

    @opus.kernel
    def vector_copy(x: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32, VEC: opus.constexpr = 4):
        i = (opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()) * VEC
        gx, go = opus.make_gmem(x, n), opus.make_gmem(out, n)
        go.store(gx.load(i, vec=VEC), i)
    return vector_copy


# Hand-written CUDA C++ for CuPy RawKernel: float4 loads/stores, scalar tail.
CUDA_VECTOR_ADD = r'''
extern "C" __global__ void vadd(const float* __restrict__ x, const float* __restrict__ y,
                                float* __restrict__ out, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    float4 a = *reinterpret_cast<const float4*>(x + i);
    float4 b = *reinterpret_cast<const float4*>(y + i);
    float4 c;
    c.x = a.x + b.x; c.y = a.y + b.y; c.z = a.z + b.z; c.w = a.w + b.w;
    *reinterpret_cast<float4*>(out + i) = c;
  } else {
    for (int j = i; j < n; ++j) out[j] = x[j] + y[j];
  }
}
'''

# Triton: a module text (Triton reads the function's source from its file, so it is written
# to a file and imported). TAG goes into a comment so that each copy hashes differently.
TRITON_VECTOR_ADD = '''
import triton
import triton.language as tl

@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # TAG
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
'''


def import_module_from_text(text, path, name):
    """Write ``text`` to ``path`` and import it as module ``name`` (Triton needs a real file)."""
    import importlib.util
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- statistics and timing ------------------------------------------------------------------------

def summary(xs, unit):
    """Median/min/max/mean of a list of samples, with the unit and count."""
    xs = list(xs)
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "mean": statistics.fmean(xs), "n": len(xs), "unit": unit}


def host_loop_us(fn, count=20000, warmup=2000, repeats=5, sync=None):
    """Host time per call (µs) of ``fn`` called ``count`` times in a loop: warm-up first,
    synchronize before starting and before stopping the clock; median over ``repeats``."""
    return host_loops_interleaved_us({"fn": fn}, count, warmup, repeats, sync)["fn"]


def host_loops_interleaved_us(fns, count=20000, warmup=2000, repeats=5, sync=None):
    """host_loop_us for several variants ({name: fn}), their loops interleaved: round r times
    one loop of each, in an order rotated by r, so drift of the host (clocks, other tenants)
    and the order of measurement fall on every variant alike. Medians over ``repeats``."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    per = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = fns[name]
            if sync:
                sync()
            t = time.perf_counter()
            for _ in range(count):
                fn()
            if sync:
                sync()
            per[name].append((time.perf_counter() - t) / count * 1e6)
    return {name: summary(v, "us/launch") for name, v in per.items()}


def host_burst_us(fn, burst=256, bursts=60, sync=None):
    """Host time per call of ``fn`` in short bursts (fewer launches than the driver's queue
    holds, so the host never waits for the GPU): the clock stops before the synchronize."""
    for _ in range(burst):
        fn()
    per = []
    for _ in range(bursts):
        sync()
        t = time.perf_counter()
        for _ in range(burst):
            fn()
        per.append((time.perf_counter() - t) / burst * 1e6)
    sync()
    return summary(per, "us/launch")


def cuda_event_ms(fn, reps=30, warmup=5, before=None):
    """Per-run device time (ms) of ``fn`` with CUDA events, median of ``reps``; ``before`` runs
    outside the timed region before each rep (fresh inputs, poisoning)."""
    import torch
    for _ in range(warmup):
        if before:
            before()
        fn()
    torch.cuda.synchronize()
    times = []
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(reps):
        if before:
            before()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return summary(times, "ms")


# -- environment -------------------------------------------------------------------------------------

def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception as e:  # not installed
        return f"unavailable ({type(e).__name__})"


def environment():
    env = {"python": platform.python_version(), "host": platform.node(),
           "git_commit": os.environ.get("OPUS_GIT_COMMIT") or _git_head(),
           "torch": _version("torch"), "triton": _version("triton"), "cupy": _version("cupy")}
    try:
        import opus
        env["opus"] = opus.__version__
        from opus.runtime import nvrtc
        env["nvrtc"] = ".".join(map(str, nvrtc.nvrtc_version()))
    except Exception as e:
        env["nvrtc"] = f"unavailable ({e})"
    try:
        from opus.frontend.gpu_launch import fast_launch_module
        env["launch_hot_path"] = "C (opus._fastlaunch)" if fast_launch_module() else "Python"
    except Exception as e:
        env["launch_hot_path"] = f"unknown ({e})"
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                            "memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        name, driver, clk, mem = [s.strip() for s in q.stdout.splitlines()[0].split(",")]
        env.update(device=name, driver=driver, max_sm_clock=clk, memory=mem)
    except Exception as e:
        env.update(device="none", driver=f"unavailable ({type(e).__name__})")
    try:
        from opus.runtime import cuda_driver as drv
        if drv.driver_available():
            env["cuda_driver_api"] = ".".join(map(str, drv.driver_version()))
            env["arch"] = drv.device_arch(0)
    except Exception:
        pass
    return env


def package_version(name):
    """An installed distribution's version (by its pip name), or why there is none."""
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_environment():
    """Facts for a run on this machine's CPU alone (the interpreter, AMD compiles): CPU model and
    cores, Python and numpy, the opus commit."""
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")),
                     platform.processor())
    return {"device": "cpu", "cpu": model, "nproc": len(os.sched_getaffinity(0)),
            "host": platform.node(), "python": platform.python_version(),
            "numpy": _version("numpy"), "ml_dtypes": _version("ml_dtypes"), "opus": _version("opus"),
            "git_commit": os.environ.get("OPUS_GIT_COMMIT") or _git_head(),
            "load_avg_1m_at_start": os.getloadavg()[0]}  # other work on the machine skews timings


def _git_head():
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def write_json(obj, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)


def write_report(obj, stem, markdown):
    """STEM.json and STEM.md: the report of a script that writes its own (no merge step)."""
    write_json(obj, stem + ".json")
    with open(stem + ".md", "w") as f:
        f.write(markdown)
    print(stem + ".json", stem + ".md")


# -- report ------------------------------------------------------------------------------------------

# (label, path in the merged results, goal, comparison, unit)
GOALS = [
    ("opus new kernel, warm process (trace+render+NVRTC, no disk cache)",
     ("compile_time", "opus", "warm_new_kernel", "total_ms", "median"), 30.0, "<=", "ms"),
    ("opus first kernel, fresh process, empty cache (import -> first launch done; CUDA "
     "context included, making the inputs left out)",
     ("compile_time", "opus", "fresh_cold", "import_to_launch_ms", "median"), 300.0, "<=", "ms"),
    ("  same, excluding CUDA context creation too (the same cost in every system)",
     ("compile_time", "opus", "fresh_cold", "import_to_launch_excl_context_ms", "median"), 300.0,
     "<=", "ms"),
    ("opus cache hit, fresh process (after import -> first launch done, CUDA context excluded)",
     ("compile_time", "opus", "fresh_hit", "after_context_to_launch_ms", "median"), 5.0, "<=", "ms"),
    ("opus hot launch, torch tensors, `k[grid, block](...)`",
     ("launch_overhead", "launch", "opus_torch", "median"), 4.0, "<=", "us"),
    ("opus copy bandwidth / torch copy_ (1 GiB)",
     ("launch_overhead", "bandwidth", "ratio", "opus_copy_vs_torch_copy"), 0.90, ">=", "x"),
    ("opus vector_add bandwidth / torch copy_ (1 GiB)",
     ("launch_overhead", "bandwidth", "ratio", "opus_add_vs_torch_copy"), 0.90, ">=", "x"),
]


def _get(d, path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, dict) and "median" in v:
        return f"{v['median']:.3g} {v.get('unit', unit)} (min {v['min']:.3g}, n={v['n']})"
    if isinstance(v, float):
        return f"{v:.3g}{(' ' + unit) if unit else ''}"
    return str(v)


def render_markdown(res):
    env = res.get("environment", {})
    lines = [f"# opus benchmarks, {res.get('date')}, {env.get('device', '?')}", "",
             f"driver {env.get('driver')}, CUDA driver API {env.get('cuda_driver_api')}, "
             f"NVRTC {env.get('nvrtc')}, torch {env.get('torch')}, triton {env.get('triton')}, "
             f"cupy {env.get('cupy')}, Python {env.get('python')}, opus commit "
             f"`{env.get('git_commit')}`, launch hot path: {env.get('launch_hot_path', '?')}",
             "",
             "## Goals", "", "| goal | measured (median) | target | result |",
             "| --- | --- | --- | --- |"]
    for label, path, goal, cmp, unit in GOALS:
        v = _get(res, path)
        if v is None:
            ok = "not measured"
        else:
            ok = "PASS" if (v <= goal if cmp == "<=" else v >= goal) else "**MISS**"
        lines.append(f"| {label} | {_fmt(v, unit)} | {cmp} {goal:g} {unit} | {ok} |")
    ct = res.get("compile_time", {})
    if ct:
        lines += ["", "## Compile time (median ms)", "",
                  "| system | new kernel, warm process | fresh process, empty cache: total wall "
                  "/ import->launch / after context->launch | fresh process, cache hit: wall / "
                  "import->launch / after context->launch |", "| --- | --- | --- | --- |"]
        for sysname in ("opus", "cupy", "triton"):
            s = ct.get(sysname) or {}
            w = _get(s, ("warm_new_kernel", "total_ms", "median"))
            row = [sysname, _fmt(w, "ms")]
            for k in ("fresh_cold", "fresh_hit"):
                f = s.get(k) or {}
                row.append(" / ".join(_fmt(_get(f, (m, "median"))) for m in
                                      ("wall_ms", "import_to_launch_ms",
                                       "after_context_to_launch_ms")))
            lines.append("| " + " | ".join(row) + " |")
        o = _get(ct, ("opus", "warm_new_kernel"))
        if o:
            lines += ["", "opus new-kernel breakdown (median ms): " + ", ".join(
                f"{k[:-3]} {o[k]['median']:.2f}" for k in ("trace_ms", "render_ms", "compile_ms",
                                                           "load_and_launch_ms") if k in o)]
        for k in ("fresh_cold", "fresh_hit"):
            b = _get(ct, ("opus", k, "breakdown_ms"))
            if b:
                lines.append(f"opus {k} breakdown (median ms): " + ", ".join(
                    f"{n} {v['median']:.2f}" for n, v in b.items()))
        for key, amd in ct.items():
            if not key.startswith("opus_amd"):
                continue
            lines += ["", f"opus AMD (gfx942) new kernel, trace+render+compile, no disk cache, "
                      f"{key[9:].replace('_', ' ')} `{amd.get('machine')}`: "
                      + (_fmt(_get(amd, ("compile_ms",)), "ms") if "compile_ms" in amd
                         else amd.get("status", "n/a"))]
    lo = res.get("launch_overhead", {})
    if lo.get("launch"):
        lines += ["", "## Hot launch overhead (host µs per launch, n=1024, 1 block, median of "
                  "5 rounds of 20k, variants interleaved; burst = host time of 256-launch "
                  "bursts, clock stopped before the sync)", "", "| variant | µs/launch | burst µs/launch |", "| --- | --- | --- |"]
        burst = lo.get("launch_burst_host_only", {})
        for k, v in lo["launch"].items():
            b = burst.get(k, {}).get("median")
            lines.append(f"| {k} | {v['median']:.2f} | {'' if b is None else f'{b:.2f}'} |")
    bw = lo.get("bandwidth")
    if bw:
        lines += ["", f"## Bandwidth, {bw.get('gib_per_array')} GiB per array (bytes read + "
                  "written, CUDA events, median)", "", "| kernel | ms | GB/s | correct |",
                  "| --- | --- | --- | --- |"]
        for k, v in bw.items():
            if isinstance(v, dict) and "gbps" in v:
                lines.append(f"| {k} | {v['ms']['median']:.3f} | {v['gbps']:.0f} | "
                             f"{v.get('correct', '')} |")
    lines.append("")
    return "\n".join(lines)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["report"])
    ap.add_argument("parts", nargs="+")
    ap.add_argument("--date", required=True)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--tag", default="", help="added to the file name (several runs a day)")
    a = ap.parse_args(argv)
    res = {"date": a.date}
    for p in a.parts:
        with open(p) as f:
            part = json.load(f)
        if "environment" in part and "environment" not in res:
            res["environment"] = part["environment"]
        for k, v in part.items():
            if k == "environment":
                continue
            if isinstance(v, dict) and isinstance(res.get(k), dict):
                res[k].update(v)
            else:
                res[k] = v
    dev = res.get("environment", {}).get("device", "nodevice")
    slug = "".join(c if c.isalnum() else "-" for c in dev).strip("-").lower()
    while "--" in slug:
        slug = slug.replace("--", "-")
    base = os.path.join(a.out, f"{a.date}-{slug}" + (f"-{a.tag}" if a.tag else ""))
    write_json(res, base + ".json")
    with open(base + ".md", "w") as f:
        f.write(render_markdown(res))
    print(base + ".json", base + ".md")


if __name__ == "__main__":
    main(sys.argv[1:])


# -- the bandwidth scripts' reports (layouts, quantize, softmax_topk, norm_quant) ------------------

def report_head(title, res, note="", extra=""):
    """The first lines of a script's markdown report: title with date and device, the
    environment line (``extra``: more versions, e.g. "triton 3.6, "), the note if any."""
    env = res["environment"]
    lines = [f"# {title}, {res.get('date', '')}, {env.get('device')}", "",
             f"driver {env.get('driver')}, NVRTC {env.get('nvrtc')}, torch {env.get('torch')}, "
             f"{extra}opus commit `{env.get('git_commit')}`", ""]
    return lines + ([note, ""] if note else [])


def kernel_rows(section):
    """The "kernel | ms | GB/s | correct" table of every timed entry of ``section``."""
    lines = ["| kernel | ms | GB/s | correct |", "| --- | --- | --- | --- |"]
    for k, v in section.items():
        if isinstance(v, dict) and "gbps" in v:
            lines.append(f"| {k} | {v['ms']['median']:.3f} | {v['gbps']:.0f} | {v['correct']} |")
    return lines


def rewrite_report(path, markdown, note="", date=""):
    """(Re)write STEM.md from the results JSON at ``path`` (STEM.json): ``markdown(results,
    note)``, with ``date`` as the results' date where given."""
    with open(path) as f:
        res = json.load(f)
    res["date"] = date or res.get("date", "")
    with open(path[:-5] + ".md", "w") as f:
        f.write(markdown(res, note))


def report_main(doc, key, run, markdown, width=40):
    """The command line of a bandwidth script: ``--out`` JSON of ``{environment, key: run(gib,
    reps)}``, ``--report JSON`` (re)writes its markdown (with ``--note``, ``--date``); prints the
    run's ratios."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--report", metavar="JSON", help="write STEM.md from an earlier --out JSON "
                    "(STEM = the JSON's path without .json); --note adds a paragraph")
    ap.add_argument("--note", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    if a.report:
        rewrite_report(a.report, markdown, a.note, a.date)
        return
    res = {"environment": environment(), key: run(a.gib, a.reps)}
    if a.out:
        write_json(res, a.out)
    for k, v in res[key]["ratio"].items():
        print(f"{k:{width}s} {v if isinstance(v, str) else f'{v:.3f}'}")
