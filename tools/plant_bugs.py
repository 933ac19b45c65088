"""Plant known one-line bugs, one at a time, in a fresh copy of the tree, and check that the CI
test command (no GPU) fails for each (issue 17: "tests that catch wrong generated code").

    .venv/bin/python tools/plant_bugs.py                 # every bug, the whole CI suite
    .venv/bin/python tools/plant_bugs.py --only shl_guard,mfma_operand_swap
    .venv/bin/python tools/plant_bugs.py --tests tests/hostexec tests/differential   # faster
    .venv/bin/python tools/plant_bugs.py --list

Each bug is an exact text replacement in one source file (the run fails loudly if the text is
no longer there, so the list cannot rot silently). The copy is a `git worktree` of HEAD with the
working tree's uncommitted changes left out; the suite first runs once without a bug (it must
pass, or every bug would look caught), then once per bug with `-x` (the first failure is
enough) and -p no:cacheprovider, with bytecode writing off so no stale .pyc hides the bug.
Exit status: 0 when every planted bug was caught, 1 otherwise.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (file, text to find, replacement, what it breaks)
BUGS = {
    "whole_vector_bound": (
        "src/opus/codegen/cemit.py",
        'return f"{bound_c} >= {vec} && (unsigned){off_c} <= (unsigned)({bound_c} - {vec})"',
        'return f"{bound_c} >= {vec} && (unsigned){off_c} <= (unsigned)({bound_c} - {vec} + 1)"',
        "a bounded vector access whose last element is at the bound counts as in range"),
    "lane_bound": (
        "src/opus/codegen/cemit.py",
        '{i} >= 0 && (long long){off_c} + {i} < (long long){bound_c}"',
        '{i} >= 0 && (long long){off_c} + {i} <= (long long){bound_c}"',
        "the per-element tail of a bounded vector access reads one element past the bound"),
    "shl_guard": (
        "src/opus/codegen/cemit.py",
        'return f"(({ut}){y} < {w}u ? ({ct})(({ut}){x} << {y}) : ({ct})0)"',
        'return f"(({ut}){y} <= {w}u ? ({ct})(({ut}){x} << {y}) : ({ct})0)"',
        "x << n with n equal to the width is C's undefined shift instead of 0"),
    "signed_shift_fill": (
        "src/opus/codegen/cemit.py",
        'return f"(({ut}){y} < {w}u ? ({ct})({x} >> {y}) : ({ct})({x} < 0 ? -1 : 0))"',
        'return f"(({ut}){y} < {w}u ? ({ct})(({ut}){x} >> {y}) : ({ct})({x} < 0 ? -1 : 0))"',
        "a signed right shift fills with zeros (logical) instead of the sign"),
    "floordiv_fixup": (
        "src/opus/codegen/cemit.py",
        "return ({ct})(q - (((a % b) != 0) & ((a < 0) != (b < 0))));",
        "return ({ct})(q);",
        "// on operands of different signs truncates instead of flooring"),
    "mma_a_register_order": (
        "src/opus/targets/nv_mma.py",
        '(("y", "p"), ("y", "p", "y")), gt, y_order=(1, 0, 2))',
        '(("y", "p"), ("y", "p", "y")), gt, y_order=(0, 1, 2))',
        "mma.sync A: a lane's registers run row half before k half (a2/a3 and a4/a5 exchanged)"),
    "mma_c_row_split": (
        "src/opus/targets/nv_mma.py",
        'lay_c = OperandLayout((2, 8, 4, 2), (("y", "p"), ("p", "y")), gt)',
        'lay_c = OperandLayout((8, 2, 4, 2), (("p", "y"), ("p", "y")), gt)',
        "mma.sync C/D: rows g and g + 8 become 2g and 2g + 1"),
    "mfma_operand_swap": (
        "src/opus/targets/amd_mfma.py",
        'f"__builtin_bit_cast(opus_mfma_a, {a}), __builtin_bit_cast(opus_mfma_b, "\n'
        '                         f"{b}), __builtin_bit_cast(opus_mfma_c, {c}), 0, 0, 0));")',
        'f"__builtin_bit_cast(opus_mfma_a, {b}), __builtin_bit_cast(opus_mfma_b, "\n'
        '                         f"{a}), __builtin_bit_cast(opus_mfma_c, {c}), 0, 0, 0));")',
        "MFMA: A and B swapped in the builtin call (src0 must be A)"),
    "buffer_offset_width": (
        "src/opus/codegen/hip.py",
        'return f"(({u} < {lim}u ? {u} : {lim}u) * {s}u)"',
        'return f"(({u} < {lim}u ? {u} : {lim}u))"',
        "HIP buffer accesses: the byte offset (voffset) ignores the element size"),
}


def _worktree(base):
    path = tempfile.mkdtemp(prefix="opus-plant-")
    os.rmdir(path)
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", path, base], check=True)
    return path


def _plant(tree, name):
    rel, old, new, _ = BUGS[name]
    path = os.path.join(tree, rel)
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit(f"{name}: the text to replace occurs {text.count(old)} times in {rel} "
                         f"(expected once): update BUGS in tools/plant_bugs.py")
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def _restore(tree, name):
    subprocess.run(["git", "-C", tree, "checkout", "-q", "--", BUGS[name][0]], check=True)


def run(names, tests, python, base, check_baseline=True):
    tree = _worktree(base)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.path.join(tree, "src"))
    env.pop("OPUS_CACHE_DIR", None)
    results = {}
    try:
        # the C extension of the copy: built in place, as an install would (else Python launches)
        for so in os.listdir(os.path.join(ROOT, "src", "opus")):
            if so.startswith("_fastlaunch") and so.endswith(".so"):
                shutil.copy(os.path.join(ROOT, "src", "opus", so), os.path.join(tree, "src", "opus"))
        if check_baseline:  # a suite that already fails would "catch" every bug
            p = subprocess.run([python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                *tests], cwd=tree, capture_output=True, text=True,
                               env=dict(env, OPUS_CACHE_DIR=tempfile.mkdtemp(prefix="opus-plant-cache-")))
            if p.returncode != 0:
                first = next((l for l in p.stdout.splitlines() if l.startswith(("FAILED", "ERROR"))), "")
                raise SystemExit(f"the suite fails without any planted bug ({first or p.stdout[-500:]}): "
                                 f"make it pass first (or --no-baseline)")
            print("baseline passes", flush=True)
        for name in names:
            _plant(tree, name)
            cache = tempfile.mkdtemp(prefix="opus-plant-cache-")
            t = time.time()
            p = subprocess.run([python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                *tests], cwd=tree, capture_output=True, text=True,
                               env=dict(env, OPUS_CACHE_DIR=cache))
            shutil.rmtree(cache, ignore_errors=True)
            caught = p.returncode != 0
            first = next((l for l in p.stdout.splitlines() if l.startswith(("FAILED", "ERROR"))), "")
            results[name] = (caught, time.time() - t, first)
            print(f"{'caught' if caught else 'MISSED':7s} {name:22s} {time.time() - t:6.0f} s  {first[:110]}",
                  flush=True)
            _restore(tree, name)
    finally:
        subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=False)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", help="comma list of bug names")
    ap.add_argument("--tests", nargs="*", default=["tests"], help="pytest arguments (default: tests)")
    ap.add_argument("--base", default="HEAD", help="commit to plant into (default HEAD)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the first run without a bug (it must pass for the verdicts to mean anything)")
    a = ap.parse_args()
    if a.list:
        for name, (rel, _, _, what) in BUGS.items():
            print(f"{name:22s} {rel:32s} {what}")
        return 0
    names = a.only.split(",") if a.only else list(BUGS)
    unknown = [n for n in names if n not in BUGS]
    if unknown:
        raise SystemExit(f"unknown bug(s) {unknown}; --list shows them")
    results = run(names, a.tests, sys.executable, a.base, not a.no_baseline)
    missed = [n for n, (caught, _, _) in results.items() if not caught]
    print(f"{len(results) - len(missed)} of {len(results)} planted bugs caught"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
