"""Hot launch overhead and memory bandwidth of opus, against CuPy RawKernel, Triton and torch.

    PYTHONPATH=src python benchmarks/launch_overhead.py [--out launch.json] [--count 20000]

launch     host time per launch of the vector add on n=1024 f32 (1 block of 256 threads):
           the wall clock of a loop of ``--count`` launches divided by the count, after a
           warm-up, synchronizing before starting and before stopping the clock; median of 5
           rounds, each round one loop of every variant (order rotated round to round).
           opus is launched as users write it (``k[grid, block](x, y, out, n)``) with torch
           tensors, CuPy arrays and raw int addresses, through the C hot path (opus._fastlaunch,
           where built) and through the Python path alone (OPUS_FAST_LAUNCH=0); the lower
           layers of the same call are timed too (pre-built launcher, the launch entry's
           hot path and generated Python function, function_launcher's closure, bare ctypes
           cuLaunchKernelEx and cuLaunchKernel calls), so differences give each layer's cost.
           CuPy RawKernel takes CuPy arrays, Triton torch tensors; torch.add(out=) for scale.
profile    cProfile of opus launches with torch tensors (top functions by own time).
bandwidth  1 GiB per array: opus vector_add and an opus copy (16-byte accesses) against
           torch ``y.copy_(x)`` and ``torch.add(x, y, out=o)``: CUDA events, median of 30,
           inputs redrawn at random before every rep, bytes = read + written; outputs are
           poisoned with NaN and checked once.
"""
import argparse
import cProfile
import ctypes
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def launch_overhead(count, repeats):
    import numpy as np
    import torch
    import cupy as cp
    import triton
    from opus.runtime import cuda_driver as drv

    n = 1024
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    o = torch.full((n,), float("nan"), device="cuda")
    cx, cy = cp.asarray(x.cpu().numpy()), cp.asarray(y.cpu().numpy())
    co = cp.full(n, cp.nan, dtype=cp.float32)
    sync = torch.cuda.synchronize
    res, checks = {}, {}

    k = common.make_opus_vector_add()
    k[1, 256](x, y, o, n)
    sync()
    checks["opus_torch"] = bool(torch.equal(o, x + y))
    k[1, 256](cx, cy, co, n)
    sync()
    checks["opus_cupy"] = bool(cp.array_equal(co, cx + cy))
    entry = next(iter(k.launch_entries.values()))
    hot_path = "C (opus._fastlaunch)" if entry.fast is not None else "Python"
    # the same kernel with the Python path alone (the choice is made when the entry is made)
    kp = common.make_opus_vector_add()
    os.environ["OPUS_FAST_LAUNCH"] = "0"
    try:
        o.fill_(float("nan"))
        kp[1, 256](x, y, o, n)
    finally:
        del os.environ["OPUS_FAST_LAUNCH"]
    sync()
    checks["opus_torch_python_path"] = bool(torch.equal(o, x + y))
    kp[1, 256](cx, cy, co, n)
    pre = k[1, 256]
    xp, yp, op = x.data_ptr(), y.data_ptr(), o.data_ptr()
    from opus.runtime.launcher import (POINTER_CTYPE, LaunchConfig, ParamBlock, launch_ex,
                                       function_launcher)
    launch = function_launcher(entry.function, [POINTER_CTYPE] * 3 + [ctypes.c_int32])
    args = (x, y, o, n, 4)
    g3, b3 = (1, 1, 1), (256, 1, 1)
    vals = (xp, yp, op, n)
    block = ParamBlock.for_plan(entry.plan)
    block.pack(block.buffer, 0, *vals)
    fh = entry.function.handle
    cu = drv._lib.cuLaunchKernel
    cu_ex = launch_ex()
    cfg = LaunchConfig()
    cfg.set(g3, b3, 0, 0)
    cfg_ptr, fh_ptr = ctypes.c_void_p(ctypes.addressof(cfg)), ctypes.c_void_p(fh)

    ck = cp.RawKernel(common.CUDA_VECTOR_ADD, "vadd")
    co.fill(cp.nan)
    ck((1,), (256,), (cx, cy, co, np.int32(n)))
    o.fill_(float("nan"))

    import tempfile
    work = tempfile.mkdtemp(prefix="triton-launch-")
    tmod = common.import_module_from_text(common.TRITON_VECTOR_ADD.replace("TAG", "launch"),
                                          os.path.join(work, "tk_launch.py"), "tk_launch")
    tk = tmod.vadd
    tk[(1,)](x, y, o, n, BLOCK=1024)
    sync()
    checks["triton_torch"] = bool(torch.equal(o, x + y))
    sync()
    checks["cupy_rawkernel"] = bool(cp.array_equal(co, cx + cy))

    variants = [
        ("opus_torch", lambda: k[1, 256](x, y, o, n)),
        ("opus_cupy", lambda: k[1, 256](cx, cy, co, n)),
        ("opus_int_ptrs", lambda: k[1, 256](xp, yp, op, n)),
        ("opus_torch_python_path", lambda: kp[1, 256](x, y, o, n)),
        ("opus_cupy_python_path", lambda: kp[1, 256](cx, cy, co, n)),
        ("opus_int_ptrs_python_path", lambda: kp[1, 256](xp, yp, op, n)),
        ("opus_torch_prebuilt_launcher", lambda: pre(x, y, o, n)),
        ("opus_torch_entry_run", lambda: entry.run(pre, args, 0, None)),
        ("opus_torch_entry_python_run", lambda: entry.python_run(pre, args, 0, None)),
        ("opus_make_launcher_closure", lambda: launch(g3, b3, 0, 0, vals)),
        ("bare_ctypes_cuLaunchKernelEx", lambda: cu_ex(cfg_ptr, fh_ptr, block.params, None)),
        ("bare_ctypes_cuLaunchKernel", lambda: cu(fh, 1, 1, 1, 256, 1, 1, 0, 0, block.params,
                                                  None)),
        ("cupy_rawkernel", lambda: ck((1,), (256,), (cx, cy, co, np.int32(n)))),
        ("triton_torch", lambda: tk[(1,)](x, y, o, n, BLOCK=1024)),
        ("torch_add_out", lambda: torch.add(x, y, out=o)),
    ]
    burst = {}
    res.update(common.host_loops_interleaved_us(dict(variants), count=count, warmup=2000,
                                                repeats=repeats, sync=sync))
    for name, fn in variants:
        burst[name] = common.host_burst_us(fn, sync=sync)
        print(f"[launch] {name:32s} {res[name]['median']:.2f} us, burst "
              f"{burst[name]['median']:.2f} us", file=sys.stderr)
    # GPU time per launch in the long loop: if it is close to the host time, the loop was
    # limited by the GPU (or the driver's queue), not by the host.
    gpu = {}
    for name in ("bare_ctypes_cuLaunchKernelEx", "opus_torch", "cupy_rawkernel"):
        fn = dict(variants)[name]
        s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync()
        s0.record()
        for _ in range(count):
            fn()
        s1.record()
        sync()
        gpu[name] = s0.elapsed_time(s1) * 1e3 / count

    # Costs of the pieces of the opus torch path, measured alone.
    micro = {}
    from opus.runtime.tensor_args import device_pointer, stream_of
    from opus import f32
    from opus.frontend.targeting import current_target
    for name, fn in [
        ("Launcher(k, (1, 256)) i.e. k[1, 256]", lambda: k[1, 256]),
        ("device_pointer(torch tensor)", lambda: device_pointer(x, param="x", dtype=f32)),
        ("stream_of(args)", lambda: stream_of(args)),
        ("current_target()", current_target),
    ]:
        micro[name] = common.host_loop_us(fn, count=100000, warmup=1000, repeats=3)["median"]

    # cProfile of the user-level call.
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20000):
        k[1, 256](x, y, o, n)
    pr.disable()
    sync()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
    return {"launch": res, "launch_hot_path": hot_path, "launch_burst_host_only": burst,
            "launch_gpu_us_per_launch": gpu, "launch_checks": checks, "launch_micro_us": micro,
            "launch_profile": s.getvalue()[-6000:],
            "launch_config": {"n": n, "grid": 1, "block": 256, "count": count,
                              "repeats": repeats}}


def bandwidth(gib=1.0, reps=30):
    import torch
    n = int(gib * (1 << 30)) // 4
    x = torch.empty(n, device="cuda")
    y = torch.empty(n, device="cuda")
    o = torch.empty(n, device="cuda")
    add = common.make_opus_vector_add()
    cpy = common.make_opus_vector_copy()
    grid = (n + 1023) // 1024

    def fresh():
        x.normal_()
        y.normal_()

    def poison():
        o.fill_(float("nan"))

    # correctness, once each, on fresh inputs and a poisoned output
    checks = {}
    fresh(); poison(); add[grid, 256](x, y, o, n)
    checks["opus_add"] = bool(torch.equal(o, x + y))
    fresh(); poison(); cpy[grid, 256](x, o, n)
    checks["opus_copy"] = bool(torch.equal(o, x))
    fresh(); poison(); o.copy_(x)
    checks["torch_copy"] = bool(torch.equal(o, x))
    torch.cuda.synchronize()

    kernels = {
        "torch_copy": (lambda: o.copy_(x), 2),
        "opus_copy": (lambda: cpy[grid, 256](x, o, n), 2),
        "opus_add": (lambda: add[grid, 256](x, y, o, n), 3),
        "torch_add": (lambda: torch.add(x, y, out=o), 3),
    }
    out = {"gib_per_array": gib, "n": n}
    # two passes in alternating order, to see the spread between identical measurements
    for p in range(2):
        for name, (fn, arrays) in kernels.items():
            ms = common.cuda_event_ms(fn, reps=reps, warmup=5, before=fresh)
            nbytes = arrays * n * 4
            key = name if p == 0 else name + "_repeat"
            out[key] = {"ms": ms, "bytes": nbytes, "gbps": nbytes / (ms["median"] * 1e-3) / 1e9,
                        "correct": checks.get(name, "")}
            print(f"[bandwidth] {key:16s} {ms['median']:.3f} ms {out[key]['gbps']:.0f} GB/s",
                  file=sys.stderr)
        kernels = dict(reversed(list(kernels.items())))
    best = lambda k: max(out[k]["gbps"], out[k + "_repeat"]["gbps"])
    med = lambda k: (out[k]["gbps"] + out[k + "_repeat"]["gbps"]) / 2
    out["ratio"] = {"opus_copy_vs_torch_copy": med("opus_copy") / med("torch_copy"),
                    "opus_add_vs_torch_copy": med("opus_add") / med("torch_copy"),
                    "opus_add_vs_torch_add": med("opus_add") / med("torch_add"),
                    "note": "mean of the two passes' median GB/s"}
    out["checks"] = checks
    del x, y, o
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=None)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--skip", default="", help="comma list of: launch,bandwidth")
    a = ap.parse_args()
    res = {}
    import traceback
    if "launch" not in a.skip:
        try:
            res.update(launch_overhead(a.count, a.repeats))
        except Exception:
            res["launch_error"] = traceback.format_exc()[-3000:]
            print(res["launch_error"], file=sys.stderr)
    if "bandwidth" not in a.skip:
        try:
            res["bandwidth"] = bandwidth(a.gib)
        except Exception:
            res["bandwidth_error"] = traceback.format_exc()[-3000:]
            print(res["bandwidth_error"], file=sys.stderr)
    out = {"environment": common.environment(), "launch_overhead": res}
    if a.out:
        common.write_json(out, a.out)
    for k, v in res.get("launch", {}).items():
        print(f"launch {k:32s} {v['median']:7.2f} us   burst(host only) "
              f"{res['launch_burst_host_only'][k]['median']:7.2f} us")
    print("gpu us/launch in loop", res.get("launch_gpu_us_per_launch"))
    for k, v in res.get("launch_micro_us", {}).items():
        print(f"micro  {k:40s} {v:7.3f} us")
    bw = res.get("bandwidth", {})
    for k, v in bw.items():
        if isinstance(v, dict) and "gbps" in v:
            print(f"bw     {k:20s} {v['ms']['median']:.3f} ms {v['gbps']:7.0f} GB/s {v['correct']}")
    if "ratio" in bw:
        print("ratios", bw["ratio"])
    if "launch_profile" in res:
        print(res["launch_profile"][:2500])


if __name__ == "__main__":
    main()
