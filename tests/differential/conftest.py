"""Differential tests: the suite's modules on sys.path, and a summary line of how many
generated programs were checked."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import diff_run  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    s = diff_run.STATS
    if s["programs"]:
        terminalreporter.write_line(
            f"differential: {s['programs']} generated programs in {s['kernels']} kernels checked, "
            f"{s['failures']} failing; {s['tolerated']} thread results skipped as known "
            f"interpreter divergences (diff_ref.TOLERATED)")
