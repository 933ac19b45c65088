"""Speed of the CPU interpreter, the everyday test path (no GPU needed).

    PYTHONPATH=src python benchmarks/interp_speed.py [--reps 5] [--report STEM]

Goals (from the issue): a 1M-element vector add in < 1 s and a 128x128x128 GEMM built from the
matrix-instruction atom in < 2 s, on the 2-core CPU machine. Each case is timed as:
  trace_ms         specializing a fresh ``Kernel`` (trace to IR), median of --reps
  first_launch_ms  the first launch of a fresh ``Kernel``: trace + interpreter setup + run
  run_ms           later launches (the warm-up launch excluded), median of --reps
Outputs are poisoned with NaN before every launch and checked against numpy after it (float64
references for the reductions and GEMMs). The block reduction also runs in checking mode
(shared-memory race and uninitialized-read checks) to give that mode's slowdown.
With --report STEM the results go to STEM.json and STEM.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import namedtuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import summary  # noqa: E402

import opus  # noqa: E402
from opus import examples as ex  # noqa: E402
from opus import f32  # noqa: E402
from opus.frontend.kernel import Kernel  # noqa: E402
from opus.interp import checking  # noqa: E402
from opus.targets import get_target  # noqa: E402

N = 1 << 20
GEMM = 128
GOALS_MS = {"vector_add_f32x4": 1000.0, "vector_add_scalar": 1000.0,
            "gemm_128_sm_90a": 2000.0, "gemm_128_gfx942": 2000.0}


@opus.kernel
def vector_add_scalar(x: opus.Ptr[f32], y: opus.Ptr[f32], out: opus.Ptr[f32], n: opus.i32):
    """One element per thread: four times the threads of the f32x4 example."""
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        out[i] = x[i] + y[i]


# -- cases ----------------------------------------------------------------------------------------

# what one case launches, the array it writes, the numpy reference and its tolerance (0: bit-exact)
Launch = namedtuple("Launch", "kernel grid block args out want tol")


def vector_add_case(rng, target):
    x, y = rng.standard_normal(N, np.float32), rng.standard_normal(N, np.float32)
    out = np.empty(N, np.float32)
    return Launch(ex.vector_add, N // 1024, 256, (x, y, out, N), out, x + y, 0.0)


def vector_add_scalar_case(rng, target):
    return vector_add_case(rng, target)._replace(kernel=vector_add_scalar, grid=N // 256)


def gemm_case(rng, target):
    t = get_target(target)
    dtype, (m, n, _) = ex.MMA_ATOMS[t.vendor]
    a, b = (rng.standard_normal((GEMM, GEMM)).astype(dtype.np_dtype) for _ in range(2))
    d = np.empty((GEMM, GEMM), np.float32)
    warps = (GEMM // m) * (GEMM // n)  # one warp per m x n tile, 4 warps a block
    return Launch(ex.MMA_GEMM[t.vendor], warps // 4, 4 * t.warp_size, (a, b, d, GEMM, GEMM, GEMM),
                  d, a.astype(np.float64) @ b.astype(np.float64), 1e-5)


def block_reduce_case(rng, target):
    blocks = N // 1024
    x = rng.standard_normal(N, np.float32)
    out = np.empty(blocks, np.float32)
    want = x.astype(np.float64).reshape(blocks, 1024).sum(axis=1)
    return Launch(ex.block_reduce, blocks, 256, (x, out, N), out, want, 1e-5)


CASES = {  # name: (case, target, checking mode)
    "vector_add_f32x4": (vector_add_case, "sm_90a", False),
    "vector_add_scalar": (vector_add_scalar_case, "sm_90a", False),
    "gemm_128_sm_90a": (gemm_case, "sm_90a", False),
    "gemm_128_gfx942": (gemm_case, "gfx942", False),
    "block_reduce_1m": (block_reduce_case, "sm_90a", False),
    "block_reduce_1m_checking": (block_reduce_case, "sm_90a", True),
}


# -- timing -------------------------------------------------------------------------------------

def checked_launch(k, c):
    """ms of one launch of ``k`` with ``c``'s arguments; the output is poisoned first and compared
    with the reference after."""
    c.out[...] = np.nan
    t = time.perf_counter()
    k[c.grid, c.block](*c.args)
    ms = (time.perf_counter() - t) * 1e3
    if c.tol == 0:
        ok = np.array_equal(c.out, c.want)
    else:
        ok = np.max(np.abs(c.out - c.want)) <= c.tol * np.max(np.abs(c.want))
    if not ok:
        raise AssertionError(f"{k.name}: result does not match numpy")
    return ms


def time_case(case, target, check_mode, reps, seed=0):
    c = case(np.random.default_rng(seed), target)
    trace = []
    for _ in range(reps):
        fresh = Kernel(c.kernel.fn, c.kernel.block)
        t = time.perf_counter()
        fresh.specialize(target)
        trace.append((time.perf_counter() - t) * 1e3)
    k = Kernel(c.kernel.fn, c.kernel.block)
    with opus.set_target(target, interpret=True), checking(check_mode):
        first = checked_launch(k, c)
        runs = [checked_launch(k, c) for _ in range(reps)]
    return {"target": target, "checking": check_mode, "grid": c.grid, "block": c.block,
            "threads": c.grid * c.block, "trace_ms": summary(trace, "ms"), "first_launch_ms": first,
            "run_ms": summary(runs, "ms"), "correct": True}


def run_all(reps):
    res = {name: time_case(case, target, chk, reps) for name, (case, target, chk) in CASES.items()}
    res["checking_slowdown_block_reduce"] = (res["block_reduce_1m_checking"]["run_ms"]["median"]
                                             / res["block_reduce_1m"]["run_ms"]["median"])
    return res


# -- report -------------------------------------------------------------------------------------

def markdown(report):
    env, res = report["environment"], report["interp_speed"]
    lines = [f"# opus interpreter speed, {report['date']}, CPU only ({env['cpu']}, "
             f"{env['nproc']} cores)", "",
             f"Python {env['python']}, numpy {env['numpy']}, ml_dtypes {env['ml_dtypes']}, "
             f"opus commit `{env['git_commit']}`", "",
             "Median ms of warm launches (warm-up launch excluded; min, n); trace = specializing "
             "a fresh kernel; first launch = trace + interpreter setup + run. Every launch's "
             "output is checked against numpy.", "",
             "| case | target | threads | trace | first launch | run | goal |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in res.items():
        if not isinstance(r, dict):
            continue
        goal = GOALS_MS.get(name)
        verdict = "" if goal is None else \
            f"< {goal:g} ms: {'PASS' if r['run_ms']['median'] < goal else '**MISS**'}"
        lines.append(f"| {name} | {r['target']}{' (checking)' if r['checking'] else ''} | "
                     f"{r['threads']} | {r['trace_ms']['median']:.1f} | {r['first_launch_ms']:.1f} | "
                     f"{r['run_ms']['median']:.1f} ({r['run_ms']['min']:.1f}, {r['run_ms']['n']}) | "
                     f"{verdict} |")
    lines += ["", f"Checking mode slows the block reduction by "
              f"{res['checking_slowdown_block_reduce']:.2f}x.", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--report", metavar="STEM", help="write STEM.json and STEM.md")
    a = ap.parse_args()
    report = {"date": time.strftime("%Y-%m-%d"), "environment": common.cpu_environment(),
              "interp_speed": run_all(a.reps)}
    md = markdown(report)
    print(md)
    if a.report:
        common.write_report(report, a.report, md)


if __name__ == "__main__":
    main()
