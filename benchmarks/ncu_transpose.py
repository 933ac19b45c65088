"""Shared-memory bank conflicts of the tiled transpose (benchmarks/layouts.py transpose64),
swizzled and plain, from Nsight Compute's counters (issue 10, point 4: a swizzled transposed
tile has no bank conflicts).

    PYTHONPATH=src python benchmarks/ncu_transpose.py [--out benchmarks/results/STEM.json]
        [--rows 4096 --cols 4096] [--ncu /path/to/ncu]

The script finds ncu (--ncu, $NCU, PATH, /usr/local/cuda/bin/ncu, /opt/nvidia/nsight-compute*)
and fails with a clear message without it, or when the driver refuses performance counters
(ERR_NVGPUCTRPERM). It runs itself under ncu in --child mode, which checks both transposes
against torch and then launches each once (swizzled first); ncu profiles the two launches of
transpose64 and the parent parses its CSV. Writes STEM.json and STEM.md with --out.
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

METRICS = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "gpu__time_duration.sum",
]
ORDER = ["swizzled", "plain"]  # the child's launch order


def find_ncu(explicit=None):
    """The ncu executable, or SystemExit naming where it was looked for."""
    places = [explicit, os.environ.get("NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu",
              *sorted(glob.glob("/opt/nvidia/nsight-compute*/ncu"), reverse=True),
              *sorted(glob.glob("/usr/local/cuda*/bin/ncu"), reverse=True)]
    for p in places:
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise SystemExit("ncu_transpose: Nsight Compute's ncu was not found (looked at --ncu, $NCU, "
                     "PATH, /usr/local/cuda/bin/ncu, /opt/nvidia/nsight-compute*/ncu); install "
                     "it or pass --ncu /path/to/ncu")


def child(rows, cols):
    """Check both transposes, then launch each once for ncu to profile."""
    sys.path.insert(0, HERE)
    import torch
    from layouts import transpose64
    x = torch.randn(rows * cols, device="cuda", dtype=torch.bfloat16)
    o = torch.empty_like(x)
    grid = (cols // 64, rows // 64)
    want = x.view(rows, cols).t().contiguous().view(-1)
    for swz in (True, False):  # compile and check outside the profiled launches' order
        o.fill_(float("nan"))
        transpose64[grid, 256](x, o, rows, cols, SWZ=swz)
        torch.cuda.synchronize()
        if not torch.equal(o, want):
            raise SystemExit(f"ncu_transpose: transpose64(SWZ={swz}) gave a wrong result")
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name in ORDER:
        transpose64[grid, 256](x, o, rows, cols, SWZ=(name == "swizzled"))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def profile(ncu, rows, cols):
    """{variant: {metric: value}} from ncu's CSV of the child's two profiled launches."""
    cmd = [ncu, "--csv", "--page", "raw", "--profile-from-start", "off",
           "--kernel-name", "regex:transpose64", "--metrics", ",".join(METRICS),
           sys.executable, os.path.abspath(__file__), "--child", "--rows", str(rows),
           "--cols", str(cols)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(REPO, "src"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    text = r.stdout + r.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise SystemExit("ncu_transpose: the driver refuses access to the GPU performance "
                         "counters (ERR_NVGPUCTRPERM): run as root or set "
                         "NVreg_RestrictProfilingToAdminUsers=0")
    if r.returncode != 0:
        raise SystemExit(f"ncu_transpose: ncu exited with {r.returncode}:\n{text[-4000:]}")
    rows_ = _csv_rows(r.stdout)
    if len(rows_) != len(ORDER):
        raise SystemExit(f"ncu_transpose: expected {len(ORDER)} profiled launches of "
                         f"transpose64, ncu reported {len(rows_)}:\n{text[-4000:]}")
    return {name: {m: _number(row.get(m)) for m in METRICS} for name, row in zip(ORDER, rows_)}


def _csv_rows(out):
    """The data rows of ncu's raw CSV (a header row, a units row, then one row per launch)."""
    start = out.find('"ID"')
    if start < 0:
        return []
    table = list(csv.DictReader(io.StringIO(out[start:])))
    return [r for r in table if r.get("ID", "").strip().isdigit()]


def _number(v):
    if v is None:
        return None
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return None


def markdown(res):
    m = res["metrics"]
    lines = [f"# opus transpose64 shared-memory bank conflicts (ncu), {res['device']}", "",
             f"{res['rows']} x {res['cols']} bf16, 64 x 64 tiles, 256 threads; ncu "
             f"`{res['ncu_version']}`; opus commit `{res['commit']}`", "",
             "| counter | swizzled | plain |", "| --- | --- | --- |"]
    for k in METRICS:
        lines.append(f"| {k} | {m['swizzled'][k]:.0f} | {m['plain'][k]:.0f} |")
    lines += ["", "Bank conflicts are the extra shared-memory wavefronts beyond one per "
              "instruction's request; the swizzled tile's loads and stores should have none."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--ncu")
    ap.add_argument("--out", help="STEM.json (STEM.md beside it)")
    a = ap.parse_args()
    if a.rows % 64 or a.cols % 64:
        raise SystemExit("ncu_transpose: --rows and --cols must be multiples of 64")
    if a.child:
        return child(a.rows, a.cols)
    ncu = find_ncu(a.ncu)
    metrics = profile(ncu, a.rows, a.cols)
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
    import torch
    res = {"device": torch.cuda.get_device_name(), "rows": a.rows, "cols": a.cols,
           "ncu": ncu, "ncu_version": version.splitlines()[-1] if version else "",
           "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "metrics": metrics}
    text = markdown(res)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
        with open(a.out[:-5] + ".md" if a.out.endswith(".json") else a.out + ".md", "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
