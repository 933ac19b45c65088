"""Differential tests: the suite's modules on sys.path (tests/conftest.py prints the summary
line of how many generated programs were checked)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import diff_run  # noqa: E402,F401  (counts in diff_run.STATS)

