"""GEMM against cuBLAS (issue 12): ``opus.ops.gemm`` (persistent warp-specialized TMA + wgmma,
sm_90a) and ``torch.matmul`` in the same run, on the issue's shapes (bf16; B row-major and B
given as the transpose of a row-major N x K weight), each with the tile width and K splits the
plan picks (64 x 128 tiles at the decode shape 128 x 8192 x 8192; the alternatives, split-K among
them, and other small-M shapes timed beside it: DECODE_ROWS); ``opus.ops.scaled_gemm`` (fp8 e4m3, tensor and row/column scales, bf16 out) against
``torch._scaled_mm`` at 8192^3.

    PYTHONPATH=src python benchmarks/gemm.py [--out gemm.json] [--reps 30] [--only fp8|bf16|decode]
        [--compile-only [--body cuda|ptx|both]]

Each shape: fresh random inputs, our result checked against torch's (max error relative to the
largest output) before timing; then two passes in alternating order (ours, torch; torch, ours),
each the median of --reps CUDA-event timings after warm-up, of two kinds: eager (one call
between the events: the host's launch path is in it, as it is for a call the GPU waits on)
and device (a CUDA graph of GRAPH_CALLS calls replayed, per call: the kernels back to back, as
in a captured decode step; for calls of ~50 us the eager time is mostly the hosts' launch
paths). TFLOP/s = 2 M N K / time (device). Also
recorded: the kernel's registers and spills, its SASS's wgmma count, and the compile time of
a new configuration in a warm process, split into trace, render and NVRTC, for the C++ body
and for the PTX body (``body="ptx"``: the kernel as PTX in one C++ shell, docs/ptx_body.md).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from softmax_topk import _host_us  # noqa: E402  (host us per call, calls queued back to back)

import opus  # noqa: E402
import opus.ops  # noqa: E402
from opus.ops import gemm_hopper as G  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (128, 8192, 8192), (8192, 8192, 1024)]

# small M (docs/ops.md: the rule): the plan's choice at the decode shape is timed in SHAPES;
# these time its alternatives (128 x 64 unsplit: the choice before 64-row tiles; split-K on
# 128 x 128 and on 128 x 256 tiles: the session-8 rule) and other small-M shapes with the plan's
# choice and an alternative, in the same run, so that the rule follows the measurement
DECODE_ROWS = [(128, 8192, 8192, {"block_n": 64, "split_k": 1}),
               (128, 8192, 8192, {"block_n": 128, "split_k": 2}),
               (128, 8192, 8192, {"block_n": 256, "split_k": 4}),
               (64, 8192, 8192, None),
               (256, 8192, 8192, None),
               (256, 8192, 8192, {"block_n": 256, "split_k": 2}),
               (128, 4096, 8192, None),
               (128, 4096, 8192, {"split_k": 1}),
               (128, 2048, 8192, None),
               (128, 2048, 8192, {"split_k": 1})]
DECODE = {(128, 8192, 8192), (8192, 8192, 1024)}     # --only decode: these SHAPES and DECODE_ROWS
GRAPH_CALLS = 10
BODY = {}       # --body for the timed calls: {} (the library's default) or {"body": "cuda"|"ptx"}


def _compare(torch, f_ours, f_torch, ours, reps, flops, row, host=None):
    """``row`` completed with the error of ours (written to ``ours``) against torch's result
    (what ``f_torch`` returns) and both timings (two passes in alternating order, each the median
    of ``reps`` CUDA-event timings; the best pass counts)."""
    ours.fill_(float("nan"))
    f_ours()
    ref = f_torch()
    torch.cuda.synchronize()
    row["max_rel_err_vs_torch"] = ((ours.float() - ref.float()).abs().max()
                                   / ref.float().abs().max()).item()
    fns = {"opus": f_ours, "torch": f_torch}
    graphs = {who: _graph_of(torch, fn) for who, fn in fns.items()}
    times = {"opus": [], "torch": []}
    eager = {"opus": [], "torch": []}
    for order in (("opus", "torch"), ("torch", "opus")):
        for who in order:
            times[who].append(common.cuda_event_ms(graphs[who].replay, reps=reps, warmup=3)
                              ["median"] / GRAPH_CALLS)
            eager[who].append(common.cuda_event_ms(fns[who], reps=reps, warmup=5)["median"])
    for who in times:
        ms, eager_ms = min(times[who]), min(eager[who])
        row[who] = {"ms": ms, "tflops": flops / ms / 1e9, "passes_ms": times[who],
                    "eager_ms": eager_ms, "eager_passes_ms": eager[who]}
    row["ratio_opus_vs_torch"] = row["torch"]["ms"] / row["opus"]["ms"]
    row["eager_ratio_opus_vs_torch"] = row["torch"]["eager_ms"] / row["opus"]["eager_ms"]
    # host us per call (``host``: more calls to time, e.g. without out=): the least of 3 loops
    # of 100 calls queued back to back
    fns.update(host or {})
    row["host_us"] = {who: _host_us(torch, fn, calls=100, loops=3) for who, fn in fns.items()}
    return row


def _graph_of(torch, fn):
    """A CUDA graph of GRAPH_CALLS calls of ``fn`` (captured on a side stream, as torch asks;
    ``fn`` has run before, so its plan and torch's workspace exist outside the capture)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for _ in range(GRAPH_CALLS):
                fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return graph


def _plan_choice(torch, m, n, k, options):
    """The tile, stages and K splits the plan picks for a bf16 GEMM (the rule, or ``options``)."""
    sms = G._sm_count(torch, torch.empty(1, device="cuda"))
    bm, bn, split = G._choose_tiling(m, n, k, 64, sms, options.get("block_m"),
                                     options.get("block_n"), options.get("split_k"))
    bn, stages = G._choose(m, n, sms, bn, None, 2, bm=bm)
    return f"{bm} x {bn}, {stages} stages, split_k={split}"


def _one(torch, m, n, k, b_kmajor, reps, options=None):
    """bf16 against torch.matmul; ``options``: opus.ops.gemm's keywords (None: the plan's)."""
    options = dict(options or {}, **BODY)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    if b_kmajor:
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
    else:
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    ours = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ref = torch.empty_like(ours)
    label = ("N x K transposed" if b_kmajor else "K x N") + (
        ", " + ", ".join(f"{key}={v}" for key, v in options.items()) if options else "")
    return _compare(torch, lambda: opus.ops.gemm(a, b, out=ours, **options),
                    lambda: torch.matmul(a, b, out=ref), ours, reps, 2.0 * m * n * k,
                    {"m": m, "n": n, "k": k, "b": label,
                     "plan": _plan_choice(torch, m, n, k, options)},
                    {"opus_no_out": lambda: opus.ops.gemm(a, b, **options),
                     "torch_no_out": lambda: torch.matmul(a, b)})


def _one_fp8(torch, m, n, k, rowwise, reps, fast=False, block_n=None):
    """fp8 e4m3 x e4m3 -> bf16 with f32 scales, against torch._scaled_mm (cuBLASLt), both with
    promoted (default) or fast accumulation; ``block_n``: our tile width (None: the default)."""
    a = (torch.randn(m, k, device="cuda") / 2).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda") / 2).to(torch.float8_e4m3fn)
    if rowwise:
        sa = torch.rand(m, 1, device="cuda") + 0.5
        sb = torch.rand(1, n, device="cuda") + 0.5
    else:
        sa = torch.tensor(0.75, device="cuda")
        sb = torch.tensor(1.25, device="cuda")
    ours = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    return _compare(torch, lambda: opus.ops.scaled_gemm(a, w.t(), sa, sb, out=ours,
                                                        fast_accum=fast, block_n=block_n, **BODY),
                    lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb,
                                             out_dtype=torch.bfloat16, use_fast_accum=fast),
                    ours, reps, 2.0 * m * n * k,
                    {"m": m, "n": n, "k": k,
                     "b": "fp8 e4m3, " + ("row/column scales" if rowwise else "tensor scales")
                     + (", fast accumulation" if fast else "")
                     + ("" if block_n is None else f", block_n={block_n}")})


# (row/column scales, fast accumulation, block_n): the defaults (promoted: 128 wide), the other
# promoted tile widths (192: two 96-wide pieces per stage, 256: four 64-wide pieces; docs/ops.md),
# and fast accumulation at 128 (what the promoted 128-wide tile could reach without the adds)
FP8_ROWS = [(False, False, None), (True, False, None), (False, False, 192), (False, False, 256),
            (False, True, None), (True, True, None), (False, True, 128)]


def _kernel_facts():
    """The bf16 kernel: 128 x 256 at 3 stages (the large shapes), split in 4 (the decode shape's
    session-8 choice), and 64 x 128 at 8 stages (the decode shape's)."""
    from opus import bf16
    k = G.gemm_kernel
    out = {}
    for kmajor, split, bm in ((False, 1, 128), (True, 1, 128), (False, 4, 128), (True, 4, 128),
                              (False, 1, 64), (True, 1, 64)):
        cv = dict(DT=bf16, STAGES=3, B_KMAJOR=kmajor, SPLIT=split)
        if bm == 64:
            cv.update(BLOCK_M=64, BN=128, STAGES=8)
        sass = k.sass(target="sm_90a", **cv)
        out[f"b_kmajor={kmajor}" + (f", split_k={split}" if split > 1 else "")
            + (", 64 x 128, 8 stages" if bm == 64 else "")] = {
            "resources": k.resources(target="sm_90a", **cv),
            "hgmma_in_sass": sum(1 for l in sass.splitlines() if "HGMMA" in l)}
    return out


def _kernel_facts_fp8():
    """The promoted fp8 kernel (tensor scales) at each tile width: registers, spills, QGMMAs and
    the waits that leave one group in flight (WARPGROUP.DEPBAR.LE gsb0, 0x1: the adds overlap
    the next stage's QGMMAs)."""
    from opus import bf16, fp8_e4m3
    k = G.gemm_kernel_for(bf16, promoted=True)
    out = {}
    for bn, stages in ((128, 6), (192, 4), (256, 3)):
        cv = dict(DT=fp8_e4m3, BN=bn, STAGES=stages, B_KMAJOR=True, SCALES=(1, 1),
                  PROMOTE=G._PROMOTE_PIECES[bn])
        sass = k.sass(target="sm_90a", **cv)
        out[f"block_n={bn}"] = {
            "resources": k.resources(target="sm_90a", **cv),
            "qgmma_in_sass": sum(1 for l in sass.splitlines() if "QGMMA" in l),
            "wait_one_in_sass": sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x1")}
    return out


# NVRTC's phases (its --time table) under the names the report uses
_NVRTC_PHASES = {"CUDA C++ Frontend": "frontend_ms", "NVVM Optimizer": "nvvm_ms",
                 "PTX Translation": "ptxas_ms"}


def _compile_time(groups=(3, 5, 7), body="cuda"):
    """A new configuration (GROUP changes the code) in a warm process, each phase timed: trace
    (Python to IR: ``specialize``), render (IR to the CUDA C++ NVRTC gets), and NVRTC to CUBIN
    (wall time, and NVRTC's own split: C++ front end, NVVM optimizer to PTX, ptxas). The warm-up
    traces, renders and compiles one configuration first, so NVRTC is loaded and initialized.
    ``body``: the kernel's rendering, "cuda" (C++) or "ptx" (a PTX body)."""
    from opus import bf16
    from opus.runtime import nvrtc
    k = G.gemm_kernel_for(bf16, body=body)
    warm = k.specialize(target="sm_90a", DT=bf16, GROUP=8)
    nvrtc.compile_cuda(warm.source, arch="sm_90a")
    rows = []
    for group in groups:
        t0 = time.perf_counter()
        spec = k.specialize(target="sm_90a", DT=bf16, GROUP=group)
        t1 = time.perf_counter()
        src = spec.source
        t2 = time.perf_counter()
        _, phases = nvrtc.compile_phases(src, arch="sm_90a")
        t3 = time.perf_counter()
        row = {"body": body, "trace_ms": (t1 - t0) * 1e3, "render_ms": (t2 - t1) * 1e3,
               "nvrtc_ms": (t3 - t2) * 1e3, "total_ms": (t3 - t0) * 1e3}
        row.update({key: phases.get(name) for name, key in _NVRTC_PHASES.items()})
        rows.append(row)
    return rows


def compile_report(rows) -> str:
    """One line on the compile of a new configuration (the best of ``rows``)."""
    best = min(rows, key=lambda r: r["total_ms"])
    split = ", ".join(f"{label} {best[key]:.0f} ms" for label, key in
                      (("C++ front end", "frontend_ms"), ("NVVM", "nvvm_ms"), ("ptxas", "ptxas_ms"))
                      if best.get(key) is not None)
    body = {"cuda": "C++ body", "ptx": "PTX body"}[best.get("body", "cuda")]
    return (f"Compile of a new configuration ({body}), warm process (best of {len(rows)}): trace "
            f"{best['trace_ms']:.0f} ms, render {best['render_ms']:.0f} ms, NVRTC "
            f"{best['nvrtc_ms']:.0f} ms ({split}), total {best['total_ms']:.0f} ms.")


def run(reps, only=None):
    import torch
    torch.manual_seed(0)
    rows = []
    bf16 = [(m, n, k, None) for m, n, k in SHAPES] + DECODE_ROWS
    if only == "decode":
        bf16 = [(m, n, k, None) for m, n, k in SHAPES if (m, n, k) in DECODE] + DECODE_ROWS
    if BODY.get("body") == "ptx":   # the PTX body does not split K (docs/ptx_body.md)
        bf16 = [row for row in bf16 if (row[3] or {}).get("split_k", 1) == 1]
    for m, n, k, options in bf16 if only != "fp8" else ():
        for kmajor in (False, True):
            r = _one(torch, m, n, k, kmajor, reps, options)
            print(f"{m}x{n}x{k} B {r['b']:44s} ({r['plan']}) opus {r['opus']['tflops']:6.0f} "
                  f"TF/s  torch {r['torch']['tflops']:6.0f} TF/s  ratio "
                  f"{r['ratio_opus_vs_torch']:.3f} (eager {r['eager_ratio_opus_vs_torch']:.3f})"
                  f"  err {r['max_rel_err_vs_torch']:.2g}", flush=True)
            rows.append(r)
    for rowwise, fast, block_n in FP8_ROWS if only in (None, "fp8") else ():
        r = _one_fp8(torch, 8192, 8192, 8192, rowwise, reps, fast, block_n)
        print(f"8192^3 {r['b']:62s} opus {r['opus']['tflops']:6.0f} TF/s  torch._scaled_mm "
              f"{r['torch']['tflops']:6.0f} TF/s  ratio {r['ratio_opus_vs_torch']:.3f}  "
              f"err {r['max_rel_err_vs_torch']:.2g}", flush=True)
        rows.append(r)
    return {"shapes": rows, "kernel": _kernel_facts(), "kernel_fp8": _kernel_facts_fp8(),
            "compile_new_config": _compile_time(),
            "compile_new_config_ptx": _compile_time(body="ptx")}


def _facts_lines(facts, sass):
    """The report's lines on compiled kernels: registers, spills and ``sass(facts)``."""
    return [f"- {key}: {v['resources'].get('registers')} registers/thread at compile time (the "
            f"consumers raise theirs to 232 with setmaxnreg), {v['resources'].get('spill_stores')} "
            f"spill stores, {v['resources'].get('spill_loads')} spill loads, {sass(v)}"
            for key, v in facts.items()]


def markdown(res):
    env = res["environment"]
    lines = [f"# opus GEMM vs cuBLAS (torch.matmul), {env.get('device')}", "",
             f"opus `{env.get('git_commit', '?')[:10]}`, torch {env.get('torch')}, NVRTC "
             f"{env.get('nvrtc')}, driver {env.get('driver')}; bf16 in and out, f32 "
             f"accumulation. Best of two passes (alternating order), each the median of "
             f"{res['reps']} CUDA-event timings of a CUDA graph of {GRAPH_CALLS} calls (device "
             f"time per call; TFLOP/s from it) and of one eager call (the host's launch path "
             f"included). benchmarks/gemm.py says how.", "",
             "| M x N x K | B | opus plan | opus TFLOP/s | torch TFLOP/s (matmul; fp8: _scaled_mm) "
             "| opus / torch (device) | opus us | torch us | opus / torch (eager) | max rel. err |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in res["gemm"]["shapes"]:
        lines.append(f"| {r['m']} x {r['n']} x {r['k']} | {r['b']} | {r.get('plan', '')} | "
                     f"{r['opus']['tflops']:.0f} | {r['torch']['tflops']:.0f} | "
                     f"{r['ratio_opus_vs_torch']:.3f} | {r['opus']['ms'] * 1e3:.1f} | "
                     f"{r['torch']['ms'] * 1e3:.1f} | {r['eager_ratio_opus_vs_torch']:.3f} | "
                     f"{r['max_rel_err_vs_torch']:.2g} |")
    host = [r for r in res["gemm"]["shapes"] if "opus_no_out" in r.get("host_us", {})]
    if host:
        lines += ["", "Host us per eager call (100 calls queued back to back, the least of 3 "
                  "loops; with out= as timed above, and without):", "",
                  "| M x N x K | B | opus out= | torch out= | opus | torch |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for r in host:
            h = r["host_us"]
            lines.append(f"| {r['m']} x {r['n']} x {r['k']} | {r['b']} | {h['opus']:.1f} | "
                         f"{h['torch']:.1f} | {h['opus_no_out']:.1f} | {h['torch_no_out']:.1f} |")
    lines += ["", "Kernel (sm_90a, bf16; 128 x 256 and 3 stages unless it says):", ""]
    lines += _facts_lines(res["gemm"]["kernel"], lambda v: f"{v['hgmma_in_sass']} HGMMA in SASS")
    if "kernel_fp8" in res["gemm"]:
        lines += ["", "fp8 kernel with promoted accumulation (sm_90a, tensor scales):", ""]
        lines += _facts_lines(res["gemm"]["kernel_fp8"], lambda v: (
            f"{v['qgmma_in_sass']} QGMMA and {v['wait_one_in_sass']} one-group-in-flight waits "
            f"in SASS"))
    lines += ["", compile_report(res["gemm"]["compile_new_config"]), ""]
    if "compile_new_config_ptx" in res["gemm"]:
        lines += [compile_report(res["gemm"]["compile_new_config_ptx"]), ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", help="STEM: writes STEM.json and STEM.md")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--only", choices=("bf16", "fp8", "decode"),
                    help="time only these rows (decode: 128 x 8192 x 8192, 8192 x 8192 x 1024 "
                         "and DECODE_ROWS)")
    ap.add_argument("--compile-only", action="store_true",
                    help="only the compile of a new configuration (no GPU needed)")
    ap.add_argument("--body", choices=("cuda", "ptx", "both"),
                    help="with --compile-only: the C++ body (default), the PTX body, or both; "
                         "else the body of the timed calls (default: the library's)")
    a = ap.parse_args()
    if a.compile_only:
        for body in ("cuda", "ptx") if a.body == "both" else (a.body or "cuda",):
            print(compile_report(_compile_time(groups=(3, 5, 7, 9, 11), body=body)), flush=True)
        return
    if a.body == "both":
        ap.error("--body both needs --compile-only")
    if a.body:
        BODY["body"] = a.body
    res = {"environment": common.environment(), "reps": a.reps, "body": a.body,
           "gemm": run(a.reps, a.only)}
    if a.out:
        common.write_report(res, a.out, markdown(res))


if __name__ == "__main__":
    main()
