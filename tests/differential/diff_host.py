"""Generated programs rendered for a GPU target and executed on the host CPU (tests/hostexec):
every batch becomes one kernel, all kernels of a run one host binary, and each program's
output is compared bitwise (the suite's NaN rule) with the interpreter running as the same
target and with the independent reference."""
from __future__ import annotations

import numpy as np

import diff_gen
import diff_run
from diff_gen import ExprProg
from hostexec import HostProgram, Launch


def runnable_on(prog, target) -> bool:
    """Whether the target has every operation of ``prog``: AMD targets lack most f64
    transcendental functions (Target.math_f64), which tracing refuses."""
    if isinstance(prog, ExprProg) and prog.root.op == "math" and prog.root.type == "f64":
        return target.has_math(prog.root.attr, _f64())
    return True


def _f64():
    import opus
    return opus.f64


class HostBatch:
    """One batch: its programs, kernel, inputs, the host run's outputs."""

    def __init__(self, progs, seed, nthreads, block, target):
        self.progs, self.seed, self.nthreads, self.block = progs, seed, nthreads, block
        source, self.spans = diff_gen.render(progs, block)
        self.kernel, self.path = diff_run.load_kernel(source)
        self.spec = self.kernel.specialize(target=target)
        self.args = diff_run.make_args(progs, nthreads, seed)
        self.host = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self.args.items()}


def run_on_host(batches, target, nthreads, block, workdir):
    """Trace, render and compile every batch for ``target`` into one host program and run
    it; returns the HostBatches with their host outputs."""
    from opus.targets import get_target
    t = get_target(target)
    prog = HostProgram(t)
    done, launches = [], []
    for progs, seed in batches:
        progs = [p for p in progs if runnable_on(p, t)]
        if not progs:
            continue
        b = HostBatch(progs, seed, nthreads, block, target)
        launches.append(Launch(prog.add(b.spec), nthreads // block, block,
                               diff_run.arg_list(progs, b.host)))
        done.append(b)
    prog.build(workdir)
    prog.run(launches)
    return done


def compare(b: HostBatch, target):
    """Reports of the programs whose host result differs from the interpreter's (as
    ``target``) or the reference's."""
    interp = diff_run.run_interp(b.kernel, b.progs, b.args, b.nthreads, b.block, target)
    ref = diff_run.run_reference(b.progs, b.args, b.nthreads, b.block)
    failures = []
    for k, p in enumerate(b.progs):
        for want, name in ((ref, "reference"), (interp, "interpreter")):
            bad = diff_run.mismatches(p, b.host[f"o{k}"], want[f"o{k}"])
            if f"skip/o{k}" in want:
                bad = bad[~want[f"skip/o{k}"][bad]]
            if len(bad):
                failures.append(diff_run.describe(
                    k, p, b.spans[k], b.args, b.host[f"o{k}"], want[f"o{k}"], bad,
                    (f"host ({target})", name)) + f"\n  (kernel source: {b.path})")
    return failures
