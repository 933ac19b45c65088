"""The C launch hot path is optional, but where it can be built it must have been: a broken
build would otherwise only show as skipped tests (test_fastlaunch.py) and slower launches."""
import os
import shutil
import sysconfig
import warnings

import pytest


def test_extension_is_built_where_a_compiler_and_headers_exist():
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not (headers and compiler):
        pytest.skip("no C compiler or Python headers here: opus launches from Python")
    how = ("pip install -e . builds it; PYTHONPATH=src runs need "
           "`python setup.py build_ext --inplace`")
    try:
        import opus._fastlaunch as fl
    except ImportError as e:
        pytest.fail(f"opus._fastlaunch is not built although {compiler} and Python.h exist "
                    f"({how}): {e}")
    from opus.runtime.launch_plan import C_ABI_VERSION
    assert getattr(fl, "VERSION", None) == C_ABI_VERSION, \
        f"opus._fastlaunch was built from older sources ({how})"


def test_a_stale_build_is_ignored_with_a_warning(monkeypatch):
    fl = pytest.importorskip("opus._fastlaunch", reason="C extension not built")
    from opus.frontend import gpu_launch
    from opus.runtime.launch_plan import C_ABI_VERSION
    monkeypatch.setattr(fl, "VERSION", C_ABI_VERSION - 1)
    monkeypatch.setattr(gpu_launch, "_stale_warned", [])
    with pytest.warns(RuntimeWarning, match="built from older sources"):
        assert gpu_launch.fast_launch_module() is None
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        assert gpu_launch.fast_launch_module() is None
    assert not later  # warned once
