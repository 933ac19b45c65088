"""printf read from a process's stdout: the kernel runs in a child process (printf_child.py)
and its output is compared with lines written by hand. In CI the child runs in the
interpreter; the GPU twin (tests/test_gpu_gaps.py) runs it on the device, where printf goes
through the driver's buffer to the C-level stdout."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gap_kernels as GK  # noqa: E402

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "printf_child.py")


def printed_lines(where):
    """The lines a child process running print_values ``where`` ("gpu" or a target name) wrote
    to its stdout."""
    r = subprocess.run([sys.executable, CHILD, where], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_printf_lines_from_a_child_process_in_the_interpreter():
    # threads print in order here; each line is checked whole (conversions, widths, signs)
    assert printed_lines("sm_90a") == GK.PRINT_LINES
