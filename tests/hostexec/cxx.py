"""The host C++ compiler the tests use to run generated kernels on the CPU."""
import shutil
import sys

import pytest


def host_cxx():
    """The command (a list) that runs the host C++ compiler: c++/g++/clang++ where installed,
    else the ziglang wheel's clang (the ``amd`` extra). Skips the calling test when neither
    is there."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx:
        return [cxx]
    try:
        import ziglang  # noqa: F401  (the amd extra)
        return [sys.executable, "-m", "ziglang", "c++"]
    except ImportError:
        pytest.skip("no host C++ compiler")
