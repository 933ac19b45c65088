"""The C launch hot path is optional, but where it can be built it must have been: a broken
build would otherwise only show as skipped tests (test_fastlaunch.py) and slower launches."""
import os
import shutil
import sysconfig

import pytest


def test_extension_is_built_where_a_compiler_and_headers_exist():
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not (headers and compiler):
        pytest.skip("no C compiler or Python headers here: opus launches from Python")
    try:
        import opus._fastlaunch  # noqa: F401
    except ImportError as e:
        pytest.fail(f"opus._fastlaunch is not built although {compiler} and Python.h exist "
                    f"(pip install -e . builds it; PYTHONPATH=src runs need "
                    f"`python setup.py build_ext --inplace`): {e}")
