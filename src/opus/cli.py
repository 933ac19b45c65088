"""``opus`` command line: ``opus demo`` runs the example kernels and checks them."""
from __future__ import annotations

import argparse
import sys
import time


def demo(args) -> int:
    import opus
    from opus.examples import EXAMPLES
    if args.interpret:
        opus.set_target(args.target or "sm_90a", interpret=True)
    elif args.target:
        opus.set_target(args.target)
    sel = opus.current_target()
    where = f"GPU ({sel.target.name})" if sel.mode == "gpu" else \
        f"CPU interpreter as {sel.target.name} (no GPU found)" if not args.interpret else \
        f"CPU interpreter as {sel.target.name}"
    print(f"opus {opus.__version__} demo on {where}")
    failures = 0
    for name, fn in EXAMPLES.items():
        t0 = time.perf_counter()
        try:
            ok, msg = fn(sel.mode == "gpu")
        except Exception as e:  # report and go on: the demo checks every example
            ok, msg = False, f"{name}: {type(e).__name__}: {e}"
        dt = time.perf_counter() - t0
        print(f"  [{'ok' if ok else 'FAIL'}] {msg}  ({dt * 1e3:.0f} ms)")
        failures += not ok
    print("all examples match their references" if not failures else f"{failures} example(s) failed")
    return 1 if failures else 0


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
