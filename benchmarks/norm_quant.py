"""RMSNorm and dynamic fp8 quantization (issue 14, opus.ops.norm_quant) on bf16 32768 x 8192,
all in one run: RMSNorm + per-token fp8 quant against a Triton kernel doing the same (written
below; its best num_warps of this run) and torch's d2d copy bandwidth for the bytes moved;
RMSNorm alone against copy bandwidth and torch eager; per-token (and per-group) quant against
copy bandwidth. ``--sweep`` also times the row kernel at each vectors-per-thread target of the
launch-shape rule (ops/norm_quant.row_shape) over several row lengths: the measurement the
rule is checked against.

    PYTHONPATH=src python benchmarks/norm_quant.py --sweep --date DATE \
        --out benchmarks/results/DATE-nvidia-h100-issue14-norm-quant.json    # and its .md

Each kernel's output is checked against torch before it is timed (fp8 values within one fp8
step of torch's, scales within 1e-5 relative; bf16 within one bf16 rounding). Times: CUDA events
around a batch of 10 calls (host overheads overlap the device work; per-call time = batch / 10),
median of --reps batches, two passes in alternating order. Bytes moved: every byte read (input,
weight) and written (output, scales); the copy moves 2 x 2n bytes for n bf16 elements.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import opus  # noqa: E402
import opus.ops  # noqa: E402
from opus.ops import norm_quant as nq  # noqa: E402

ROWS, HIDDEN, EPS, FP8_MAX = 32768, 8192, 1e-6, 448.0
BATCH = 10

TRITON_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def rmsnorm_quant(x_ptr, w_ptr, q_ptr, s_ptr, H, stride, eps, BLOCK: tl.constexpr,
                  FP8_MAX: tl.constexpr):
    """One program per row: RMSNorm in f32, the row's amax, scale = amax / FP8_MAX, saturated
    e4m3 values (the same definition as opus.ops.rmsnorm_quant)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(x_ptr + row * stride + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    rrms = tl.rsqrt(tl.sum(x * x, axis=0) / H + eps)
    y = (x * w) * rrms
    amax = tl.max(tl.abs(y), axis=0)
    inv = tl.where(amax == 0.0, 0.0, FP8_MAX / amax)
    q = tl.minimum(tl.maximum(y * inv, -FP8_MAX), FP8_MAX).to(tl.float8e4nv)
    tl.store(q_ptr + row * stride + offs, q, mask=m)
    tl.store(s_ptr + row, amax / FP8_MAX)
'''


def _triton():
    import tempfile
    path = os.path.join(tempfile.mkdtemp(prefix="opus_norm_quant_"), "triton_rmsnorm_quant.py")
    return common.import_module_from_text(TRITON_SOURCE, path, "triton_rmsnorm_quant")


def batched_ms(fn, reps):
    """Per-call device time (ms): CUDA events around BATCH calls, median over reps."""
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        s.record()
        for _ in range(BATCH):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / BATCH)
    return common.summary(times, "ms")


# -- references and checks ---------------------------------------------------------------------

def torch_norm(x, w):
    import torch
    xf = x.float()
    return (xf * w.float()) * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)


def torch_eager_rmsnorm(x, w):
    """The eager formula a model runs (HF Llama's RMSNorm in f32, cast back)."""
    import torch
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def fp8_close(q, s, y):
    """q (fp8) and s (f32 per row) against y (f32 rows) quantized per row: values within one
    fp8 step of torch's, scales within 1e-5 relative."""
    import torch
    amax = y.abs().amax(-1)
    scale = amax / FP8_MAX
    want = (y * (FP8_MAX / amax)[:, None]).clamp(-FP8_MAX, FP8_MAX)
    got = q.float()
    step = torch.exp2(torch.floor(torch.log2(want.abs().clamp_min(2.0 ** -6))) - 3)
    ok_q = bool(((got - want).abs() <= step).all())
    ok_s = bool(((s - scale).abs() <= 1e-5 * scale).all())
    return ok_q and ok_s


def bf16_close(out, y):
    return bool(((out.float() - y).abs() <= y.abs() * 2.0 ** -8 + 1e-6).all())


# -- the run -----------------------------------------------------------------------------------

def run(reps=20):
    import torch
    n = ROWS * HIDDEN
    x = torch.randn(ROWS, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = (1 + 0.5 * torch.randn(HIDDEN, device="cuda")).to(torch.bfloat16)
    o = torch.empty_like(x)
    q = torch.empty(ROWS, HIDDEN, device="cuda", dtype=torch.float8_e4m3fn)
    s = torch.empty(ROWS, device="cuda", dtype=torch.float32)
    gs = torch.empty(ROWS, HIDDEN // 128, device="cuda", dtype=torch.float32)
    tri = _triton()

    def triton_call(num_warps):
        return lambda: tri.rmsnorm_quant[(ROWS,)](x, w, q, s, HIDDEN, HIDDEN, EPS,
                                                  BLOCK=HIDDEN, FP8_MAX=FP8_MAX,
                                                  num_warps=num_warps)
    y = torch_norm(x, w)
    checks = {}
    opus.ops.rmsnorm(x, w, EPS, out=o)
    checks["opus_rmsnorm"] = bf16_close(o, y)
    checks["torch_eager_rmsnorm"] = bf16_close(torch_eager_rmsnorm(x, w), y)
    opus.ops.rmsnorm_quant(x, w, EPS, out=q, scales=s)
    checks["opus_rmsnorm_quant"] = fp8_close(q, s, y)
    opus.ops.per_token_quant(x, out=q, scales=s)
    checks["opus_per_token_quant"] = fp8_close(q, s, x.float())
    opus.ops.per_group_quant(x, out=q, scales=gs)
    checks["opus_per_group_quant"] = fp8_close(q.view(-1, 128), gs.view(-1),
                                               x.float().view(-1, 128))
    triton_warps = {}
    for nw in (4, 8, 16, 32):
        triton_call(nw)()
        torch.cuda.synchronize()
        checks[f"triton_rmsnorm_quant_w{nw}"] = fp8_close(q, s, y)
        triton_warps[nw] = batched_ms(triton_call(nw), reps)["median"]
    best_warps = min(triton_warps, key=triton_warps.get)
    checks["triton_rmsnorm_quant"] = checks[f"triton_rmsnorm_quant_w{best_warps}"]
    checks["torch_copy"] = True

    kernels = {
        "torch_copy": (lambda: o.copy_(x), 4 * n),
        "opus_rmsnorm": (lambda: opus.ops.rmsnorm(x, w, EPS, out=o), 4 * n + 2 * HIDDEN),
        "torch_eager_rmsnorm": (lambda: torch_eager_rmsnorm(x, w), 4 * n + 2 * HIDDEN),
        "opus_rmsnorm_quant": (lambda: opus.ops.rmsnorm_quant(x, w, EPS, out=q, scales=s),
                               3 * n + 2 * HIDDEN + 4 * ROWS),
        "triton_rmsnorm_quant": (triton_call(best_warps), 3 * n + 2 * HIDDEN + 4 * ROWS),
        "opus_per_token_quant": (lambda: opus.ops.per_token_quant(x, out=q, scales=s),
                                 3 * n + 4 * ROWS),
        "opus_per_group_quant": (lambda: opus.ops.per_group_quant(x, out=q, scales=gs),
                                 3 * n + 4 * (n // 128)),
    }
    out = {"rows": ROWS, "hidden": HIDDEN, "checks": checks,
           "triton_num_warps_ms": triton_warps, "triton_num_warps": best_warps,
           "opus_launch_shape": dict(zip(("threads_per_row", "vectors_per_thread", "cached"),
                                         nq.row_shape(HIDDEN, 8)))}
    names = list(kernels)
    for p in range(2):
        for name in names:
            fn, nbytes = kernels[name]
            ms = batched_ms(fn, reps)
            key = name if p == 0 else name + "_repeat"
            out[key] = {"ms": ms, "bytes": nbytes, "gbps": nbytes / (ms["median"] * 1e-3) / 1e9,
                        "correct": checks[name]}
            print(f"[norm_quant] {key:32s} {ms['median']:.4f} ms {out[key]['gbps']:.0f} GB/s "
                  f"{checks[name]}", file=sys.stderr)
        names.reverse()
    gbps = lambda k: (out[k]["gbps"] + out[k + "_repeat"]["gbps"]) / 2
    ms = lambda k: (out[k]["ms"]["median"] + out[k + "_repeat"]["ms"]["median"]) / 2
    out["ratio"] = {
        "opus_rmsnorm_quant_speedup_vs_triton": ms("triton_rmsnorm_quant") / ms("opus_rmsnorm_quant"),
        "opus_rmsnorm_quant_vs_torch_copy": gbps("opus_rmsnorm_quant") / gbps("torch_copy"),
        "opus_rmsnorm_vs_torch_copy": gbps("opus_rmsnorm") / gbps("torch_copy"),
        "opus_rmsnorm_speedup_vs_torch_eager": ms("torch_eager_rmsnorm") / ms("opus_rmsnorm"),
        "opus_per_token_quant_vs_torch_copy": gbps("opus_per_token_quant") / gbps("torch_copy"),
        "opus_per_group_quant_vs_torch_copy": gbps("opus_per_group_quant") / gbps("torch_copy"),
        "triton_rmsnorm_quant_vs_torch_copy": gbps("triton_rmsnorm_quant") / gbps("torch_copy"),
        "note": "bandwidth: mean of the two passes' median GB/s of the bytes each moves; "
                "speedups: ratio of median times",
    }
    return out


def sweep(reps=10, total=1 << 28):
    """The row kernel (rmsnorm and rmsnorm_quant, bf16) at each vectors-per-thread target of
    row_shape for several row lengths (total elements fixed), in GB/s of the bytes moved."""
    import torch
    res = {}
    for hidden in (256, 1024, 2048, 4096, 8192, 16384):
        rows = total // hidden
        x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(x)
        q = torch.empty(rows, hidden, device="cuda", dtype=torch.float8_e4m3fn)
        s = torch.empty(rows, device="cuda", dtype=torch.float32)
        row = {"rule": nq.row_shape(hidden, 8)}
        for per_thread in (1, 2, 4, 8, 16):
            shape = nq.row_shape(hidden, 8, per_thread)
            for name, out, sc, nbytes in (("rmsnorm", o, None, 4 * rows * hidden),
                                          ("rmsnorm_quant", q, s, 3 * rows * hidden)):
                fn = lambda: nq._launch_rows(x, w, None, out, sc, EPS, True, shape=shape)
                t = batched_ms(fn, reps)["median"]
                row[f"{name}_per_thread_{per_thread}"] = {
                    "shape": shape, "ms": t, "gbps": nbytes / (t * 1e-3) / 1e9}
        res[hidden] = row
        print(f"[norm_quant sweep] hidden {hidden}: " + ", ".join(
            f"{k[len('rmsnorm_'):]} {v['gbps']:.0f}" for k, v in row.items() if k != "rule"),
            file=sys.stderr)
    return res


GOALS = [("opus_rmsnorm_quant_speedup_vs_triton", 1.0), ("opus_rmsnorm_quant_vs_torch_copy", 0.9),
         ("opus_rmsnorm_vs_torch_copy", 0.9), ("opus_rmsnorm_speedup_vs_torch_eager", 3.0),
         ("opus_per_token_quant_vs_torch_copy", 0.9)]


def markdown(r, note=""):
    q = r["norm_quant"]
    lines = common.report_head("opus RMSNorm and fp8 quantization", r, note,
                               f"triton {r['environment'].get('triton')}, ")
    lines += ["| goal | measured | target | |", "| --- | --- | --- | --- |"]
    for key, goal in GOALS:
        v = q["ratio"][key]
        lines.append(f"| {key} | {v:.3f} x | >= {goal} x | {'PASS' if v >= goal else '**MISS**'} |")
    lines += ["", f"bf16 {q['rows']} x {q['hidden']}; opus launch shape {q['opus_launch_shape']}; "
              f"Triton num_warps {q['triton_num_warps']} (best of {q['triton_num_warps_ms']} ms); "
              "bytes = every byte read and written; median of CUDA-event times over batches "
              f"of {BATCH} calls, two passes", "", "| kernel | ms | GB/s | correct |",
              "| --- | --- | --- | --- |"]
    for k, v in q.items():
        if isinstance(v, dict) and "gbps" in v:
            lines.append(f"| {k} | {v['ms']['median']:.4f} | {v['gbps']:.0f} | {v['correct']} |")
    if r.get("sweep"):
        lines += ["", "Launch-shape sweep (GB/s; rule = row_shape's (threads per row, vectors "
                  "per thread, cached)):", "",
                  "| hidden | rule | " + " | ".join(f"norm/quant @{p}" for p in (1, 2, 4, 8, 16)) + " |",
                  "| --- | --- |" + " --- |" * 5]
        for hidden, row in r["sweep"].items():
            cells = [f"{row[f'rmsnorm_per_thread_{p}']['gbps']:.0f} / "
                     f"{row[f'rmsnorm_quant_per_thread_{p}']['gbps']:.0f}" for p in (1, 2, 4, 8, 16)]
            lines.append(f"| {hidden} | {tuple(row['rule'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", metavar="STEM.json", help="write STEM.json and STEM.md")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sweep", action="store_true", help="also time row_shape's alternatives")
    ap.add_argument("--note", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    env = common.environment()
    env.setdefault("triton", common.package_version("triton"))
    res = {"date": a.date, "environment": env, "norm_quant": run(a.reps)}
    if a.sweep:
        res["sweep"] = sweep()
    if a.out:
        common.write_report(res, a.out[:-5] if a.out.endswith(".json") else a.out,
                            markdown(res, a.note))
    for k, v in res["norm_quant"]["ratio"].items():
        print(f"{k:52s} {v if isinstance(v, str) else f'{v:.3f}'}")


if __name__ == "__main__":
    main()
