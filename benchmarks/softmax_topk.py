"""opus.ops.softmax and opus.ops.topk against torch (issue 14), in one run:

- softmax, 32768 x 8192 bf16: opus (the rule's launch shape) against torch's d2d copy of the
  same bytes (read + write) and torch.softmax in eager mode; goals >= 0.9x copy bandwidth and
  >= 3x torch eager;
- the softmax launch-shape rule measured: for row lengths 1024 .. 131072 in f32 and bf16 (about
  512 MiB per input), every shape the kernel offers at that length ("warp" up to 32 values per
  lane, "block" up to 32 per thread of 1024, "online" always) against the rule's choice;
- top-k f32: 4096 x 32768 (k=8), 64 x 131072 (k=64), 16384 x 256 (k=8) against torch.topk;
  goals >= 4x, >= 4x, >= 2x;
- the top-k launch-shape rule measured: for those three shapes, other launch shapes the kernels
  offer (rowtopk.launch) against the rule's choice, per eager call and replayed from a CUDA
  graph (device time: the split shapes' host part is the same one launch, so the rule is
  judged on the graph column); for 64 x 131072 the one-launch split's (warps per slice,
  slices) around the rule's 4 x 8.

    PYTHONPATH=src python benchmarks/softmax_topk.py --out benchmarks/results/DATE-GPU-softmax-topk.json
    PYTHONPATH=src python benchmarks/softmax_topk.py --report THAT.json   # writes THAT.md

Every kernel is checked against torch first (softmax within the type's rounding, top-k values
equal to torch's and indices that gather them); timing: CUDA events, warm-up, median of --reps
with fresh random inputs outside the timed region, two passes in alternating order (common.py).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import opus  # noqa: E402
import opus.ops  # noqa: E402
from opus.ops import rowsoftmax, rowtopk  # noqa: E402

SOFTMAX_SHAPE = (32768, 8192)
TOPK_CASES = [(4096, 32768, 8, 4.0), (64, 131072, 64, 4.0), (16384, 256, 8, 2.0)]
RULE_LENGTHS = (1024, 4096, 8192, 16384, 32768, 65536, 131072)
TOPK_SHAPES = {   # other launch shapes per top-k case (rowtopk.plan's choice is added)
    (4096, 32768, 8): [("rows", 2, 1), ("rows", 1, 2)],
    (64, 131072, 64): [("rows", 4, 8), ("rows", 2, 16), ("rows", 1, 32), ("rows", 8, 4),
                       ("rows", 4, 16), ("rows", 2, 32), ("rows", 4, 4), ("rows", 8, 8),
                       ("rows", 2, 8), ("rows", 1, 64), ("rows", 4, 5)],
    (16384, 256, 8): [("short", 16, 16), ("short", 8, 32), ("short", 64, 4), ("rows", 1, 1)],
}


def _timed(out, name, fn, fresh, reps, nbytes=None):
    """Two passes (the caller alternates the order): median ms and GB/s per pass."""
    ms = common.cuda_event_ms(fn, reps=reps, warmup=5, before=fresh)
    entry = {"ms": ms}
    if nbytes:
        entry["bytes"] = nbytes
        entry["gbps"] = nbytes / (ms["median"] * 1e-3) / 1e9
    out.setdefault(name, []).append(entry)
    print(f"[softmax_topk] {name:34s} {ms['median']:.4f} ms"
          + (f" {entry['gbps']:.0f} GB/s" if nbytes else ""), file=sys.stderr)


def _median_ms(out, name):
    return sum(e["ms"]["median"] for e in out[name]) / len(out[name])


def _check_softmax(torch, y, x):
    ref = torch.softmax(x.float(), -1)
    return bool(torch.allclose(y.float(), ref, rtol=2 ** -7, atol=1e-7))


def run_softmax(torch, reps):
    rows, n = SOFTMAX_SHAPE
    x = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    y, c = torch.empty_like(x), torch.empty_like(x)
    fresh = lambda: x.normal_().mul_(3)
    fresh()
    opus.ops.softmax(x, out=y)
    checks = {"opus": _check_softmax(torch, y, x), "torch_eager": True, "torch_copy": True}
    kernels = {"torch_copy": lambda: c.copy_(x), "torch_eager": lambda: torch.softmax(x, -1),
               "opus": lambda: opus.ops.softmax(x, out=y)}
    out = {"shape": [rows, n], "dtype": "bf16", "checks": checks}
    times = {}
    names = list(kernels)
    for _ in range(2):
        for name in names:
            _timed(times, name, kernels[name], fresh, reps, 2 * x.numel() * x.element_size())
        names.reverse()
    out["times"] = times
    gbps = lambda k: sum(e["gbps"] for e in times[k]) / len(times[k])
    out["ratio"] = {"opus_vs_torch_copy": gbps("opus") / gbps("torch_copy"),
                    "opus_speedup_vs_torch_eager": _median_ms(times, "torch_eager")
                    / _median_ms(times, "opus")}
    return out


def _shapes_at(n, vec, ws):
    """Every (SHAPE, CHUNKS, BLOCK) the kernel can run rows of n with (values per thread <= 32
    for the register-resident shapes)."""
    per = max(1, 32 // vec)
    shapes = []
    if n <= ws * vec * per:
        shapes.append(("warp", -(-n // (ws * vec)), 4 * ws))
    for block in (128, 256, 512, 1024):
        chunks = -(-n // (block * vec))
        if chunks <= per and block * vec * chunks < 2 * n:
            shapes.append(("block", chunks, block))
    shapes.append(("online", 4, 512))
    return shapes


def run_rule(torch, reps):
    """The softmax shapes against each other per row length and dtype."""
    res = []
    for dname, isz in (("float32", 4), ("bfloat16", 2)):
        dtype = getattr(torch, dname)
        vec = 16 // isz
        for n in RULE_LENGTHS:
            rows = max(1, (1 << 29) // (n * isz))
            x = torch.empty(rows, n, device="cuda", dtype=dtype)
            y = torch.empty_like(x)
            fresh = lambda: x.normal_()
            fresh()
            rule = rowsoftmax.plan(n, vec, 32, isz)
            row = {"dtype": dname, "n": n, "rows": rows, "rule": list(rule), "shapes": {}}
            for shape in _shapes_at(n, vec, 32):
                rowsoftmax._launch(x, y, shape)
                ok = _check_softmax(torch, y, x)
                times = {}
                _timed(times, f"{dname} n={n} {shape}",
                       lambda: rowsoftmax._launch(x, y, shape), fresh, reps,
                       2 * x.numel() * isz)
                e = next(iter(times.values()))[0]
                row["shapes"]["/".join(map(str, shape))] = {"ms": e["ms"]["median"],
                                                            "gbps": e["gbps"], "correct": ok}
            best = max(row["shapes"], key=lambda s: row["shapes"][s]["gbps"])
            row["fastest"] = best
            row["rule_vs_fastest"] = (row["shapes"]["/".join(map(str, rule))]["gbps"]
                                      / row["shapes"][best]["gbps"])
            res.append(row)
            del x, y
    return res


def run_topk(torch, reps):
    res = []
    for rows, n, k, goal in TOPK_CASES:
        x = torch.empty(rows, n, device="cuda")
        fresh = lambda: x.normal_()
        fresh()
        v, i = opus.ops.topk(x, k)
        rv, _ = torch.topk(x, k)
        ok = bool(torch.equal(v, rv)) and bool(torch.equal(torch.gather(x, 1, i), v))
        times = {}
        fns = {"torch_topk": lambda: torch.topk(x, k), "opus": lambda: opus.ops.topk(x, k)}
        for name in list(fns):        # the same calls replayed from CUDA graphs: device time
            fns[name + "_graph"] = _graph_of(torch, fns[name])
        names = list(fns)
        for _ in range(2):
            for name in names:
                _timed(times, f"{rows}x{n} k={k} {name}", fns[name], fresh, reps, x.numel() * 4)
            names.reverse()
        t = {name: _median_ms(times, f"{rows}x{n} k={k} {name}") for name in fns}
        host = {"torch_topk": fns["torch_topk"], "opus": fns["opus"],
                "opus_launch": lambda: rowtopk.launch(x, k, True)}
        host.update(_host_parts(x, k))
        res.append({"rows": rows, "n": n, "k": k, "goal": goal, "correct": ok,
                    "torch_ms": t["torch_topk"], "opus_ms": t["opus"],
                    "speedup": t["torch_topk"] / t["opus"],
                    "torch_graph_ms": t["torch_topk_graph"], "opus_graph_ms": t["opus_graph"],
                    "speedup_graph": t["torch_topk_graph"] / t["opus_graph"],
                    "host_us": {name: _host_us(torch, f) for name, f in host.items()},
                    "opus_read_gbps": x.numel() * 4 / (t["opus"] * 1e-3) / 1e9})
        del x
    return res


def _graph_of(torch, fn):
    """fn captured in a CUDA graph (after a warm-up call: plans made, kernels compiled): its
    replay, for device times without the host's part."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def _host_parts(x, k):
    """The parts of opus.ops.topk's host time (its fast path, after a first call planned x's
    layout): the plan key's making and lookup, the two output allocations, the launch by
    addresses alone (the launch entry and cuLaunchKernelEx)."""
    from opus.ops import _rows
    from opus.runtime import tensor_args
    plan = rowtopk._PLANS[(_rows.plan_key(x), _rows.target(), k, True, None)]
    out = (x.shape[0], k)
    new_vals, new_inds = (_rows.allocator(x, plan.dtype, out),
                          _rows.allocator(x, opus.i64, out))
    v, i = new_vals(), new_inds()
    run, kern, rest, workspace = plan.launch.by_address()
    stream, dev = tensor_args.torch_raw_stream(), x.get_device()
    args = (x.data_ptr(), v.data_ptr(), i.data_ptr())

    def bare_launch():
        h = stream(dev)
        run(kern, args + workspace(h) + rest, 0, h)
    return {"part_key": lambda: rowtopk._PLANS.get(rowtopk._call_key(x, k, True, -1, None)),
            "part_alloc": lambda: (new_vals(), new_inds()), "part_launch": bare_launch}


def _host_us(torch, fn, calls=200, loops=5):
    """Host microseconds per call of fn (calls queued back to back, the GPU not waited for),
    the least of ``loops`` loops (the machine's noise only adds time: the parts of a call,
    timed apart, then add up). CUDA events around one eager call measure the larger of this
    and the device time where the GPU has nothing queued before it."""
    import time
    best = float("inf")
    for _ in range(loops):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - t0)
    torch.cuda.synchronize()
    return best / calls * 1e6


def run_topk_shapes(torch, reps):
    """Each top-k case's launch shapes against each other (values checked against torch)."""
    res = []
    for (rows, n, k), others in TOPK_SHAPES.items():
        x = torch.empty(rows, n, device="cuda")
        fresh = lambda: x.normal_()
        fresh()
        rule = rowtopk.plan(rows, n, k, torch.cuda.get_device_properties(0).multi_processor_count,
                            32)
        row = {"rows": rows, "n": n, "k": k, "rule": list(rule), "shapes": {}}
        for shape in [rule] + [s for s in others if s != rule]:
            rv, _ = torch.topk(x, k)    # the timing before refreshed x
            v, i = rowtopk.launch(x, k, True, shape)
            ok = bool(torch.equal(v, rv)) and bool(torch.equal(torch.gather(x, 1, i), v))
            times = {}
            call = lambda: rowtopk.launch(x, k, True, shape)
            _timed(times, f"topk {rows}x{n} k={k} {shape}", call, fresh, reps)
            _timed(times, f"topk {rows}x{n} k={k} {shape} graph", _graph_of(torch, call), fresh,
                   reps)
            e, eg = (es[0] for es in times.values())
            row["shapes"]["/".join(map(str, shape))] = {"ms": e["ms"]["median"],
                                                        "graph_ms": eg["ms"]["median"],
                                                        "correct": ok}
        best = min(row["shapes"], key=lambda s: row["shapes"][s]["graph_ms"])
        row["fastest"] = best
        row["rule_vs_fastest"] = (row["shapes"][best]["graph_ms"]
                                  / row["shapes"]["/".join(map(str, rule))]["graph_ms"])
        res.append(row)
        del x
    return res


def markdown(r, note=""):
    s = r.get("softmax")
    lines = common.report_head("opus softmax and top-k", r, note)
    lines += ["| goal | measured | target | |", "| --- | --- | --- | --- |"]
    goals = []
    if s:
        goals = [("softmax 32768x8192 bf16 / torch copy bandwidth",
                  s["ratio"]["opus_vs_torch_copy"], 0.9, s["checks"]["opus"]),
                 ("softmax 32768x8192 bf16 speedup vs torch eager",
                  s["ratio"]["opus_speedup_vs_torch_eager"], 3.0, s["checks"]["opus"])]
    for t in r["topk"]:
        goals.append((f"top-k f32 {t['rows']}x{t['n']} k={t['k']} speedup vs torch.topk",
                      t["speedup"], t["goal"], t["correct"]))
    for label, v, goal, ok in goals:
        lines.append(f"| {label} | {v:.2f} x | >= {goal} x | "
                     f"{'PASS' if v >= goal and ok else '**MISS**'}{'' if ok else ' (wrong)'} |")
    for k, es in (s["times"].items() if s else ()):
        if k == next(iter(s["times"])):
            lines += ["", "## softmax 32768 x 8192 bf16 (bytes: read + write)", "",
                      "| kernel | ms (pass 1, pass 2) | GB/s |", "| --- | --- | --- |"]
        passes = ", ".join("%.3f" % e["ms"]["median"] for e in es)
        lines.append(f"| {k} | {passes} | {sum(e['gbps'] for e in es) / len(es):.0f} |")
    lines += ["", "## top-k f32 (GB/s: the input read once)", "",
              "| rows x n, k | torch.topk ms | opus ms | speedup | opus GB/s | correct |",
              "| --- | --- | --- | --- | --- | --- |"]
    for t in r["topk"]:
        lines.append(f"| {t['rows']} x {t['n']}, {t['k']} | {t['torch_ms']:.3f} | "
                     f"{t['opus_ms']:.3f} | {t['speedup']:.2f} | {t['opus_read_gbps']:.0f} | "
                     f"{t['correct']} |")
    if r["topk"] and "opus_graph_ms" in r["topk"][0]:
        lines += ["", "## top-k replayed from CUDA graphs (device time), and host time per "
                  "eager call (opus.ops.topk; rowtopk.launch: the same without the argument "
                  "checks)", "", "| rows x n, k | torch.topk ms | opus ms | speedup | "
                  "host us torch.topk | host us opus | host us rowtopk.launch |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for t in r["topk"]:
            h = t["host_us"]
            launch_us = f"{h['opus_launch']:.1f}" if "opus_launch" in h else "-"
            lines.append(f"| {t['rows']} x {t['n']}, {t['k']} | {t['torch_graph_ms']:.3f} | "
                         f"{t['opus_graph_ms']:.3f} | {t['speedup_graph']:.2f} | "
                         f"{h['torch_topk']:.1f} | {h['opus']:.1f} | {launch_us} |")
    if r["topk"] and "part_key" in r["topk"][0]["host_us"]:
        lines += ["", "## host us per eager opus.ops.topk call, by part (the plan key made and "
                  "looked up; the two outputs allocated; the launch by addresses: launch entry "
                  "and cuLaunchKernelEx)", "", "| rows x n, k | whole call | key | outputs | "
                  "launch | rest |", "| --- | --- | --- | --- | --- | --- |"]
        for t in r["topk"]:
            h = t["host_us"]
            parts = h["part_key"] + h["part_alloc"] + h["part_launch"]
            lines.append(f"| {t['rows']} x {t['n']}, {t['k']} | {h['opus']:.1f} | "
                         f"{h['part_key']:.1f} | {h['part_alloc']:.1f} | "
                         f"{h['part_launch']:.1f} | {h['opus'] - parts:.1f} |")
    if r.get("topk_shapes"):
        lines += ["", "## top-k launch shapes (ms per eager call / replayed from a CUDA graph; "
                  "rule / fastest: the fastest's graph time over the rule's)", "",
                  "| rows x n, k | rule | fastest | rule / fastest | every shape |",
                  "| --- | --- | --- | --- | --- |"]
        for row in r["topk_shapes"]:
            every = ", ".join(f"{s} {v['ms']:.3f}"
                              + (f" / {v['graph_ms']:.3f}" if "graph_ms" in v else "")
                              + ("" if v["correct"] else " (wrong)")
                              for s, v in row["shapes"].items())
            lines.append(f"| {row['rows']} x {row['n']}, {row['k']} | "
                         f"{'/'.join(map(str, row['rule']))} | {row['fastest']} | "
                         f"{row['rule_vs_fastest']:.2f} | {every} |")
    if r.get("rule"):
        lines += ["", "## softmax launch shapes per row length (GB/s, read + write, ~512 MiB in)",
                  "", "| dtype | n | rule | fastest | rule / fastest | every shape |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for row in r["rule"]:
            every = ", ".join(f"{k} {v['gbps']:.0f}" for k, v in row["shapes"].items())
            lines.append(f"| {row['dtype']} | {row['n']} | {'/'.join(map(str, row['rule']))} | "
                         f"{row['fastest']} | {row['rule_vs_fastest']:.2f} | {every} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-rule", action="store_true", help="skip the launch-shape sweep")
    ap.add_argument("--no-topk-shapes", action="store_true",
                    help="skip the top-k launch-shape comparison")
    ap.add_argument("--topk-only", action="store_true",
                    help="only top-k (its goals and launch shapes), no softmax")
    ap.add_argument("--report", metavar="JSON", help="write STEM.md from an earlier --out JSON")
    ap.add_argument("--note", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    if a.report:
        common.rewrite_report(a.report, markdown, a.note, a.date)
        return
    import torch
    res = {"environment": common.environment()}
    if not a.topk_only:
        res["softmax"] = run_softmax(torch, a.reps)
    res["topk"] = run_topk(torch, a.reps)
    if not a.no_topk_shapes:
        res["topk_shapes"] = run_topk_shapes(torch, max(5, a.reps // 3))
    if not a.no_rule and not a.topk_only:
        res["rule"] = run_rule(torch, max(5, a.reps // 3))
    if a.out:
        common.write_report(res, a.out[:-5] if a.out.endswith(".json") else a.out,
                            markdown(res, a.note))
    else:
        print(markdown(res, a.note))


if __name__ == "__main__":
    main()
