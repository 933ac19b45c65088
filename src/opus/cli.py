"""``opus`` command line: ``opus demo`` runs the example kernels and checks them."""
from __future__ import annotations

import argparse
import contextlib
import sys
import time


def _selection(args):
    """The target the demo runs on, as a context manager (the choice ends with the demo)."""
    import opus
    if args.interpret:
        return opus.set_target(args.target or "sm_90a", interpret=True)
    if args.target:
        return opus.set_target(args.target)
    return contextlib.nullcontext()


def demo(args) -> int:
    import opus
    from opus.examples import EXAMPLES
    with _selection(args):
        sel = opus.current_target()
        on_gpu = sel.mode == "gpu"
        where = f"GPU ({sel.target.name})" if on_gpu else f"CPU interpreter as {sel.target.name}" \
            + ("" if args.interpret or args.target else " (no GPU found)")
        print(f"opus {opus.__version__} demo on {where}")
        failures = sum(not _run_example(name, fn, on_gpu) for name, fn in EXAMPLES.items())
    print("all examples match their references" if not failures else f"{failures} example(s) failed")
    return 1 if failures else 0


def _run_example(name, fn, on_gpu) -> bool:
    t0 = time.perf_counter()
    try:
        ok, msg = fn(on_gpu)
    except Exception as e:  # report and go on: the demo checks every example
        ok, msg = False, f"{name}: {type(e).__name__}: {e}"
    dt = time.perf_counter() - t0
    print(f"  [{'ok' if ok else 'FAIL'}] {msg}  ({dt * 1e3:.0f} ms)")
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="opus")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the example kernels and check them against numpy")
    d.add_argument("--interpret", action="store_true", help="use the CPU interpreter even with a GPU")
    d.add_argument("--target", help="target name (sm_80, sm_90a, gfx942, gfx950)")
    args = p.parse_args(argv)
    if args.cmd == "demo":
        return demo(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
