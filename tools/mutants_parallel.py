"""Run a module's mutmut mutants in parallel without mutmut's scheduler: for machines with
many cores and little time (the GPU machine: 16 cores, 10-minute calls).

mutmut itself re-runs its statistics or clean pass (minutes for `cemit` and `dialects` with
OPUS_TEST_FRESH_SPECS) before its first mutant in every call. Here mutmut only generates the
mutants and its statistics (which tests reach which function) are read from an earlier run;
each mutant then runs the tests that reached its function, fastest first, stopping at the first
failure, with a time cap, in as many processes as asked. Results go to a JSON-lines file (one
record per mutant: killed, survived, capped = the cap was reached first, no tests), and a second
call resumes after the last record.

    python tools/mutants_parallel.py generate dialects
    python tools/mutants_parallel.py run dialects --stats mutmut-stats.json --names names.txt \\
        --out results.jsonl --jobs 15 --cap 90 --seconds 560
    python tools/mutants_parallel.py run dialects --tests tests/conversions/test_stochastic.py ...

`--tests` replaces the statistics' tests (mutants no statistics test reached); a mutant name
that is no mutant at all (e.g. opus.codegen.hip.x_CONTROL__mutmut_0) runs unmutated, a control
that must survive. Record the results with `tools/mutation.py`'s EQUIVALENT for survivors argued
away and in docs/testing.md ("Scores").
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutation  # noqa: E402


def generate(name):
    """mutmut's generation step only, in .mutation/<name>/mutants (mutmut is stopped when its
    statistics pass begins)."""
    where = mutation.prepare(name, mutation.MODULES[name])
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.Popen([*mutation._MUTMUT, "run", "--max-children", "2", "no_such_mutant"],
                         cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    seen = ""
    while "Running stats" not in seen:
        ch = p.stdout.read(1)
        if not ch:
            break
        seen += ch
    p.kill()
    p.wait()
    return os.path.join(where, "mutants")


def run(name, stats, names, out, jobs, cap, seconds, tests, mutants=None):
    module = mutation.MODULES[name]
    mutants = mutants or os.path.join(mutation._scratch(name), "mutants")
    deadline = time.time() + seconds
    st = json.load(open(stats)) if stats else {"tests_by_mangled_function_name": {},
                                                 "duration_by_test": {}}
    reach, dur = st["tests_by_mangled_function_name"], st["duration_by_test"]
    done = set()
    if os.path.exists(out):
        done = {json.loads(line)["name"] for line in open(out) if line.strip()}
    todo = [n for n in names if n not in done]
    env = dict(os.environ, **module.env, PYTHONPATH=os.pathsep.join(
        ["src", os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    lock, caches = threading.Lock(), {}

    def one(mutant):
        if time.time() > deadline - 5:
            return
        selected = tests or sorted(reach.get(re.sub(r"__mutmut_\d+$", "", mutant), ()),
                                   key=lambda t: dur.get(t, 0))
        # pytest 9 finds no node id whose parameter id holds a space: name the function
        selected = list(dict.fromkeys(re.sub(r"\[.* .*\]$", "", t) for t in selected))
        rec = {"name": mutant}
        if not selected:
            rec["status"] = "no tests"
        else:
            cache = caches.setdefault(threading.get_ident(), tempfile.mkdtemp(prefix="opus-mut"))
            left = min(cap, deadline - time.time())
            t0 = time.time()
            try:
                p = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                                    "no:cacheprovider", "-m", "not gpu", "--tb=no", *selected],
                                   cwd=mutants, capture_output=True, text=True, timeout=left,
                                   env=dict(env, MUTANT_UNDER_TEST=mutant, OPUS_CACHE_DIR=cache))
                rec["status"] = {0: "survived", 1: "killed", 5: "no tests"}.get(
                    p.returncode, f"error rc={p.returncode}")
                if p.returncode not in (0, 1, 5):
                    rec["info"] = (p.stdout + p.stderr)[-600:]
            except subprocess.TimeoutExpired:
                rec["status"] = "capped" if left >= cap - 1 else "not checked"
            rec["secs"] = round(time.time() - t0, 1)
        with lock, open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")

    with ThreadPoolExecutor(jobs) as ex:
        list(ex.map(one, todo))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("generate", "run"))
    ap.add_argument("module", choices=sorted(mutation.MODULES))
    ap.add_argument("--stats", help="a mutmut-stats.json of the module (which tests reach what)")
    ap.add_argument("--names", help="file of mutant names, one per line")
    ap.add_argument("--out", help="JSON-lines results (appended; resumed)")
    ap.add_argument("--mutants", help="the mutants folder (default .mutation/<module>/mutants)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cap", type=float, default=90, help="seconds per mutant")
    ap.add_argument("--seconds", type=float, default=1e9, help="stop starting mutants after")
    ap.add_argument("--tests", nargs="*", help="run these instead of the statistics' tests")
    a = ap.parse_args(argv)
    if a.what == "generate":
        print(generate(a.module))
        return 0
    names = [line.strip() for line in open(a.names) if line.strip()]
    run(a.module, a.stats, names, a.out, a.jobs, a.cap, a.seconds, a.tests, a.mutants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
