"""Shared test setup: import opus from src/ and skip @pytest.mark.gpu tests without a GPU."""
import os
import sys

import pytest

_SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)
# spawn'ed worker processes start from PYTHONPATH, not from this sys.path edit
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)
# The contract check: every specialization the interpreter launches in the suite is also
# rendered and compiled for the target it runs as, so a kernel that works in the interpreter but
# would not build for that chip fails here (OPUS_INTERPRET_COMPILE=0 on the command line skips it).
os.environ.setdefault("OPUS_INTERPRET_COMPILE", "1")

# Mutation runs (tools/mutation.py sets OPUS_TEST_FRESH_SPECS=1 for the codegen modules): each
# test traces and renders its kernels itself. A module-level kernel keeps its specializations,
# rendered source and launchers between tests, so mutmut's statistics run would credit only the
# first test that rendered it with the codegen functions it reached, and a mutant of those would
# never meet the other tests' checks (a "survivor" that the suite kills).
if os.environ.get("OPUS_TEST_FRESH_SPECS") == "1":
    import weakref

    from opus.frontend.kernel import Kernel

    _KERNELS = weakref.WeakSet()
    _kernel_init = Kernel.__init__

    def _tracked_init(self, *args, **kwargs):
        _kernel_init(self, *args, **kwargs)
        _KERNELS.add(self)

    Kernel.__init__ = _tracked_init

    @pytest.fixture(autouse=True)
    def _fresh_specializations():
        for k in list(_KERNELS):
            k._specs.clear()
            k._earlier.clear()
            k.launch_entries.clear()
            k._launchers.clear()
        yield


def gpu_available() -> bool:
    try:
        from opus.runtime.cuda_driver import driver_available
    except Exception:
        return False
    return driver_available()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not gpu_available():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (libcuda.so.1)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def requires_gpu():
    """For tests that are not marked gpu but need one for part of their work."""
    if not gpu_available():
        pytest.skip("needs an NVIDIA GPU and driver (libcuda.so.1)")


@pytest.fixture
def requires_amd_compiler():
    """For tests that run the AMD compiler (clang for gfx9): skipped, with the reason, where none
    is installed (CI has the ziglang wheel's clang, the 'amd' extra; a GPU machine may have
    none), instead of erroring."""
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        return hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))


def _kernels_in(namespace):
    from opus.frontend.kernel import Kernel
    for v in list(namespace.values()):
        for k in (v.values() if isinstance(v, dict) else (v,)):
            if isinstance(k, Kernel):
                yield k


@pytest.fixture(params=["C", "Python"])
def launch_path(request, monkeypatch):
    """Runs a test once per launch path: through the C extension (its launcher and hot path;
    skipped where it was not built) and through Python alone. Launchers and launch entries of
    the kernels in the test's module and in opus.examples are dropped before and after, so
    each run makes its own."""
    from opus import examples
    from opus.frontend.gpu_launch import fast_launch_module
    monkeypatch.setenv("OPUS_FAST_LAUNCH", "1" if request.param == "C" else "0")
    if request.param == "C" and fast_launch_module() is None:
        pytest.skip("the C hot path (opus._fastlaunch) is not built")
    kernels = list(_kernels_in(vars(examples))) + list(_kernels_in(vars(request.module)))

    def reset():
        for k in kernels:
            k.launch_entries.clear()
            k._launchers.clear()
    reset()
    yield request.param
    reset()


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    """A private, empty compile cache for the test (OPUS_CACHE_DIR)."""
    root = tmp_path / "opus-cache"
    monkeypatch.setenv("OPUS_CACHE_DIR", str(root))
    monkeypatch.delenv("OPUS_CACHE_DISABLE", raising=False)
    return root


# -- the differential suite's summary line (its counts live in tests/differential/diff_run.py) --
# Under pytest-xdist (the README's `-n auto`) each worker counts the programs it ran; the counts
# travel to the controller in ``workeroutput`` and are added up there.
_DIFF_TOTALS = {}


def _diff_stats():
    run = sys.modules.get("diff_run")
    return dict(run.STATS) if run is not None else {}


def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)
    if out is not None:
        out["diff_stats"] = _diff_stats()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    for k, v in getattr(node, "workeroutput", {}).get("diff_stats", {}).items():
        _DIFF_TOTALS[k] = _DIFF_TOTALS.get(k, 0) + v


def pytest_terminal_summary(terminalreporter):
    s = _DIFF_TOTALS or _diff_stats()
    if s.get("programs"):
        terminalreporter.write_line(
            f"differential: {s['programs']} generated programs in {s['kernels']} kernels checked, "
            f"{s['failures']} failing; {s['tolerated']} thread results skipped as known "
            f"interpreter divergences (diff_ref.TOLERATED)")
