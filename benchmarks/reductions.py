"""Warp-shuffle reductions against torch (issue 13): a sum and a max over 2^28 f32 values, each
thread accumulating 16-byte loads in a grid-stride loop, then opus.warp_reduce (butterfly
shuffles on NVIDIA, DPP on AMD), the warps' results through a few words of shared memory, one
partial per block, and a second one-block pass over the partials; beside the same kernels with
the block reduction done the way the shuffles replace (a shared-memory tree with a barrier per
level), torch.sum / torch.amax and torch's d2d copy bandwidth, in the same run.

    PYTHONPATH=src python benchmarks/reductions.py --out benchmarks/results/DATE-reductions.json
    PYTHONPATH=src python benchmarks/reductions.py --counts    # CPU only: instruction counts

Timing (/work/.library/device/METHOD.md): each variant is checked against torch on fresh random
inputs first; then CUDA events, warm-up, median of --reps with fresh inputs outside the timed
region, two passes in alternating order. Bytes = one read of the input (the copy: read + write).
The CPU part counts the instructions of the block reduction alone (one value per thread, no
loads in a loop) in SASS (NVRTC, sm_90a) and AMDGCN (clang, gfx942), per element reduced.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import opus  # noqa: E402
from opus import f32, i32  # noqa: E402

BLOCK = 256
GRID = 1024          # blocks of the first pass (a multiple of 4: the partials load as f32x4)
LOG2_N = 28
SUM_INIT, MAX_INIT = 0.0, float("-inf")


def _combine(op, a, b):
    return a + b if op == "sum" else opus.max(a, b)


def _thread_total(x, n, OP):
    """This thread's op over its 16-byte chunks of x (a grid-stride loop)."""
    g = opus.make_gmem(x)
    acc = f32(SUM_INIT if OP == "sum" else MAX_INIT)
    for i in range((opus.block_id_x() * BLOCK + opus.thread_id_x()) * 4, n, opus.grid_size_x() * 4):
        v = g.load(i, vec=4)
        acc = _combine(OP, acc, _combine(OP, _combine(OP, v[0], v[1]), _combine(OP, v[2], v[3])))
    return acc


def _block_by_warps(acc, OP):
    """The block's op: a warp reduction, one word per warp in shared memory, one more warp
    reduction of those words by warp 0 (lane 0 of thread 0 holds the result)."""
    nw = BLOCK // opus.warp_size()
    acc = opus.warp_reduce(acc, OP)
    words = opus.alloc_smem(f32, nw)
    if opus.lane_id() == 0:
        words[opus.warp_id()] = acc
    opus.sync_threads()
    return opus.warp_reduce(words[opus.lane_id() % nw], OP, width=nw)


def _block_by_smem(acc, OP):
    """The block's op as a shared-memory tree: BLOCK words, log2(BLOCK) levels, a barrier each."""
    t = opus.thread_id_x()
    s = opus.alloc_smem(f32, BLOCK)
    s[t] = acc
    opus.sync_threads()
    k = BLOCK // 2
    while k >= 1:  # compile-time: unrolled
        if t < k:
            s[t] = _combine(OP, s[t], s[t + k])
        opus.sync_threads()
        k //= 2
    return s[0]


@opus.kernel(block=BLOCK)
def reduce_warp(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, OP: opus.constexpr):
    r = _block_by_warps(_thread_total(x, n, OP), OP)
    if opus.thread_id_x() == 0:
        out[opus.block_id_x()] = r


@opus.kernel(block=BLOCK)
def reduce_smem(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, OP: opus.constexpr):
    r = _block_by_smem(_thread_total(x, n, OP), OP)
    if opus.thread_id_x() == 0:
        out[opus.block_id_x()] = r


# the block reduction alone (one value per thread), for the instruction counts
@opus.kernel(block=BLOCK)
def block_warp(x: opus.Ptr[f32], out: opus.Ptr[f32], OP: opus.constexpr):
    r = _block_by_warps(x[opus.block_id_x() * BLOCK + opus.thread_id_x()], OP)
    if opus.thread_id_x() == 0:
        out[opus.block_id_x()] = r


@opus.kernel(block=BLOCK)
def block_smem(x: opus.Ptr[f32], out: opus.Ptr[f32], OP: opus.constexpr):
    r = _block_by_smem(x[opus.block_id_x() * BLOCK + opus.thread_id_x()], OP)
    if opus.thread_id_x() == 0:
        out[opus.block_id_x()] = r


@opus.kernel(block=BLOCK)
def warp_only(x: opus.Ptr[f32], out: opus.Ptr[f32], OP: opus.constexpr):
    t = opus.block_id_x() * BLOCK + opus.thread_id_x()
    out[t] = opus.warp_reduce(x[t], OP)


@opus.kernel(block=BLOCK)
def warp_bpermute_ladder(x: opus.Ptr[f32], out: opus.Ptr[f32], one: i32, OP: opus.constexpr):
    """The plain ladder DPP replaces: a butterfly of shuffles whose lane masks are known only at
    run time (``one`` is 1), so every step is a ds_bpermute on AMD."""
    t = opus.block_id_x() * BLOCK + opus.thread_id_x()
    v = x[t]
    k = 1
    while k < opus.warp_size():
        v = _combine(OP, v, opus.shfl_xor(v, one * k))
        k *= 2
    out[t] = v


# -- instruction counts (CPU) -----------------------------------------------------------------------

def _sass_count(kernel, **cx):
    sass = kernel.specialize(target="sm_90a", **cx).sass
    ins = [l for l in sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    body = [l for l in ins if not re.search(r"\b(NOP|BRA|EXIT)\b", l)]
    return {"total": len(body), "shfl": sum("SHFL" in l for l in body),
            "bar": sum("BAR" in l for l in body), "sts_lds": sum(("STS" in l or "LDS" in l)
                                                             for l in body)}


def _amdgcn_count(kernel, **cx):
    from opus.runtime.amd_build import assemble_amd
    from opus.targets import get_target
    asm = assemble_amd(kernel.source(target="gfx942", **cx), get_target("gfx942"))
    ins = [l.strip() for l in asm.splitlines() if l.startswith("\t")
           and not l.strip().startswith((".", ";")) and not l.strip().startswith("s_nop")]
    ins = [l for l in ins if l != "s_endpgm"]
    return {"total": len(ins), "dpp": sum("_dpp" in l for l in ins),
            "ds_bpermute": sum(l.startswith("ds_bpermute") for l in ins),
            "barrier": sum(l.startswith("s_barrier") for l in ins),
            "lds": sum(l.startswith("ds_") for l in ins)}


def counts():
    """Static instruction counts of the block reduction (BLOCK values) and of one warp
    reduction, with the per-element figure (total / elements reduced)."""
    out = {}
    for op in ("sum", "max"):
        for name, k, elems in (("warp_shuffle_block", block_warp, BLOCK),
                               ("smem_tree_block", block_smem, BLOCK),
                               ("warp_reduce_only", warp_only, None),
                               ("warp_bpermute_ladder", warp_bpermute_ladder, None)):
            row = {}
            for isa, fn, ws in (("sass_sm90a", _sass_count, 32), ("amdgcn_gfx942", _amdgcn_count, 64)):
                try:
                    c = fn(k, OP=op)
                except Exception as e:  # a toolchain missing here: say so in the report
                    row[isa] = {"error": f"{type(e).__name__}: {e}"}
                    continue
                c["per_element"] = c["total"] / (elems or ws)
                row[isa] = c
            out[f"{name}_{op}"] = row
    return out


# -- GPU timing ---------------------------------------------------------------------------------------

def run(reps=30):
    import torch
    n = 1 << LOG2_N
    x = torch.empty(n, device="cuda", dtype=torch.float32)
    part = torch.empty(GRID, device="cuda", dtype=torch.float32)
    res = torch.empty(1, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def fresh():
        x.uniform_(-1.0, 1.0)

    def two_pass(kernel, op):
        def go():
            kernel[GRID, BLOCK](x, part, n, OP=op)
            kernel[1, BLOCK](part, res, GRID, OP=op)
        return go

    kernels = {"torch_copy": lambda: y.copy_(x),
               "torch_sum": lambda: torch.sum(x), "torch_amax": lambda: torch.amax(x)}
    for op in ("sum", "max"):
        kernels[f"opus_warp_{op}"] = two_pass(reduce_warp, op)
        kernels[f"opus_smem_{op}"] = two_pass(reduce_smem, op)
    checks = {}
    for op, ref in (("sum", lambda: torch.sum(x.double())), ("max", lambda: torch.amax(x))):
        for kind in ("warp", "smem"):
            fresh()
            res.fill_(float("nan"))
            kernels[f"opus_{kind}_{op}"]()
            torch.cuda.synchronize()
            want = float(ref())
            got = float(res[0])
            ok = got == want if op == "max" else abs(got - want) <= 1e-3 * max(1.0, n ** 0.5)
            checks[f"opus_{kind}_{op}"] = {"ok": bool(ok), "got": got, "want": want}
    out = {"n": n, "grid": GRID, "block": BLOCK, "checks": checks}
    for p in range(2):
        for name, fn in kernels.items():
            ms = common.cuda_event_ms(fn, reps=reps, warmup=5, before=fresh)
            nbytes = (2 if name == "torch_copy" else 1) * 4 * n
            key = name if p == 0 else name + "_repeat"
            out[key] = {"ms": ms, "bytes": nbytes, "gbps": nbytes / (ms["median"] * 1e-3) / 1e9}
            print(f"[reductions] {key:24s} {ms['median']:.3f} ms {out[key]['gbps']:.0f} GB/s",
                  file=sys.stderr)
        kernels = dict(reversed(list(kernels.items())))
    med = lambda k: (out[k]["gbps"] + out[k + "_repeat"]["gbps"]) / 2
    out["ratio"] = {
        "warp_sum_vs_copy": med("opus_warp_sum") / med("torch_copy"),
        "warp_max_vs_copy": med("opus_warp_max") / med("torch_copy"),
        "warp_sum_vs_torch_sum": med("opus_warp_sum") / med("torch_sum"),
        "warp_max_vs_torch_amax": med("opus_warp_max") / med("torch_amax"),
        "smem_sum_vs_copy": med("opus_smem_sum") / med("torch_copy"),
        "smem_max_vs_copy": med("opus_smem_max") / med("torch_copy"),
        "note": "GB/s ratios, mean of the two passes' medians; copy GB/s counts read + write",
    }
    return out


GOALS = [("warp sum / torch copy_ bandwidth", "warp_sum_vs_copy", 0.9),
         ("warp max / torch copy_ bandwidth", "warp_max_vs_copy", 0.9),
         ("warp sum / torch.sum", "warp_sum_vs_torch_sum", None),
         ("warp max / torch.amax", "warp_max_vs_torch_amax", None)]


def markdown(res, note=""):
    env = res.get("environment", {})
    lines = [f"# opus warp reductions, {res.get('date', '')}, {env.get('device', 'CPU only')}", ""]
    if env:
        lines += [f"driver {env.get('driver')}, NVRTC {env.get('nvrtc')}, torch {env.get('torch')}, "
                  f"opus commit `{env.get('git_commit')}`", ""]
    if note:
        lines += [note, ""]
    r = res.get("reductions")
    if r:
        lines += ["| goal | measured | target | result |", "| --- | --- | --- | --- |"]
        for label, key, goal in GOALS:
            v = r["ratio"][key]
            verdict = "-" if goal is None else ("PASS" if v >= goal else "**MISS**")
            lines.append(f"| {label} | {v:.3f} x | {'>= ' + str(goal) + ' x' if goal else '-'} "
                         f"| {verdict} |")
        lines += ["", f"2^{LOG2_N} f32 (uniform in [-1, 1), fresh per rep); bytes = one read "
                  f"(copy: read + write); grid {r['grid']} x {r['block']} then one block over the "
                  "partials; median of CUDA-event times, two passes", "",
                  "| kernel | ms | GB/s | checked |", "| --- | --- | --- | --- |"]
        for k, v in r.items():
            if isinstance(v, dict) and "gbps" in v:
                c = r["checks"].get(k.replace("_repeat", ""), {}).get("ok", "-")
                lines.append(f"| {k} | {v['ms']['median']:.3f} | {v['gbps']:.0f} | {c} |")
        lines.append("")
    c = res.get("counts")
    if c:
        lines += ["## Instruction counts of the block reduction (static, per element reduced)", "",
                  f"One value per thread, block of {BLOCK}: the warp-shuffle version (warp_reduce, "
                  "one word per warp in shared memory, warp_reduce again) against the shared-memory "
                  "tree it replaces; `warp_reduce_only` is one warp reduction per warp (32 or 64 "
                  "elements). Totals are the kernel's instructions without NOP/BRA/EXIT "
                  "(s_nop/s_endpgm), loads and stores included.", "",
                  "| kernel | SASS sm_90a total | per element | SHFL | BAR | AMDGCN gfx942 total "
                  "| per element | DPP | ds_bpermute | s_barrier |", "| --- |" + " --- |" * 9]
        for name, row in c.items():
            s, a = row.get("sass_sm90a", {}), row.get("amdgcn_gfx942", {})
            lines.append(f"| {name} | {s.get('total', s.get('error', '-'))} | "
                         f"{s.get('per_element', 0):.3f} | {s.get('shfl', '-')} | {s.get('bar', '-')} | "
                         f"{a.get('total', a.get('error', '-'))} | {a.get('per_element', 0):.3f} | "
                         f"{a.get('dpp', '-')} | {a.get('ds_bpermute', '-')} | {a.get('barrier', '-')} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", help="STEM.json (and STEM.md) to write")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--counts", action="store_true", help="instruction counts only (no GPU)")
    ap.add_argument("--note", default="")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    res = {"date": a.date, "counts": counts()}
    if not a.counts:
        res["environment"] = common.environment()
        res["reductions"] = run(a.reps)
    md = markdown(res, a.note)
    if a.out:
        common.write_report(res, a.out[:-5] if a.out.endswith(".json") else a.out, md)
    print(md)


if __name__ == "__main__":
    main()
