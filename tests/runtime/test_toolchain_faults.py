"""Configuration faults of the toolchain are reported with their cause, never hidden behind
"not found" or a silent fallback (runtime/nvrtc.py, runtime/amd_build.py, cuda_driver.py).
The user-level cases (through kernel.asm/.resources) are in tests/bad_input/test_toolchain.py."""
import os

import pytest

from opus.errors import OpusRuntimeError
from opus.runtime import amd_build, nvrtc


@pytest.fixture
def fresh_nvrtc(monkeypatch):
    """candidates(*paths): NVRTC is looked for again, among ``paths``."""
    def candidates(*paths):
        for name in ("_lib", "_lib_path", "_version"):
            monkeypatch.setattr(nvrtc, name, None)
        monkeypatch.setattr(nvrtc, "_lib_candidates", lambda: list(paths))
    return candidates


def _real_nvrtc():
    nvrtc.nvrtc_version()
    if not os.path.isabs(nvrtc.nvrtc_path()):
        pytest.skip("NVRTC is loaded by soname here, not from a file")
    return nvrtc.nvrtc_path()


def test_absent_libraries_are_not_found(fresh_nvrtc, tmp_path):
    fresh_nvrtc(str(tmp_path / "libnvrtc.so.13"), "libnvrtc.so.opus-test-absent")
    with pytest.raises(OpusRuntimeError, match=r"was not found.*pip install"):
        nvrtc.nvrtc_version()


def test_a_file_that_is_not_a_shared_object_is_reported_with_the_loader_error(fresh_nvrtc,
                                                                              tmp_path):
    bad = tmp_path / "libnvrtc.so.13"
    bad.write_text("not ELF\n" * 20)
    good = _real_nvrtc()
    fresh_nvrtc(str(bad), good)  # no fallback to the good one after it: the fault is reported
    with pytest.raises(OpusRuntimeError) as info:
        nvrtc.nvrtc_version()
    msg = str(info.value)
    assert str(bad) in msg and "invalid ELF header" in msg and "not found" not in msg


def test_a_broken_builtins_library_next_to_nvrtc_is_reported(fresh_nvrtc, tmp_path):
    lib = tmp_path / "libnvrtc.so.13"
    lib.symlink_to(_real_nvrtc())
    builtins = tmp_path / "libnvrtc-builtins.so.13.0"
    builtins.write_bytes(b"\0" * 4096)
    fresh_nvrtc(str(lib))
    with pytest.raises(OpusRuntimeError, match=r"does not load: .*libnvrtc-builtins\.so\.13\.0"):
        nvrtc.nvrtc_version()


def test_pathfinder_failing_to_load_what_it_found_is_reported(fresh_nvrtc, monkeypatch):
    pathfinder = pytest.importorskip("cuda.pathfinder")

    def broken(name):
        raise RuntimeError(f"dlopen of {name} failed: undefined symbol: opus_test")

    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", broken)
    fresh_nvrtc("<pathfinder>")
    with pytest.raises(OpusRuntimeError, match=r"pathfinder found NVRTC .*undefined symbol"):
        nvrtc.nvrtc_version()


# -- the AMD linker wrapper ---------------------------------------------------------------------

def _zig_or_skip():
    try:
        import ziglang
    except ImportError:
        pytest.skip("the ziglang package is not installed")
    return os.path.join(list(ziglang.__path__)[0], "zig")


def test_wrapper_without_run_bit_is_written_again(tmp_path):
    zig = _zig_or_skip()
    folder = tmp_path / "tools"
    folder.mkdir()
    lld = folder / "lld"
    lld.write_text(amd_build._lld_script(zig))
    lld.chmod(0o644)
    assert amd_build._lld_wrapper_problem(str(lld)) is not None  # as it was: it cannot run
    assert amd_build._write_lld_wrapper(str(folder), amd_build._lld_script(zig)) == str(lld)
    assert os.access(lld, os.X_OK) and amd_build._lld_wrapper_problem(str(lld)) is None


def test_wrapper_folder_that_cannot_run_programs_falls_back_to_a_temporary_one(tmp_path,
                                                                               monkeypatch):
    zig = _zig_or_skip()
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "cache"))
    real = amd_build._lld_wrapper_problem
    monkeypatch.setattr(amd_build, "_lld_wrapper_problem", lambda p: "its folder is on a noexec "
                        "mount" if p.startswith(str(tmp_path)) else real(p))
    folder = amd_build._lld_wrapper_dir(zig, "zig-test")
    assert not folder.startswith(str(tmp_path)) and real(os.path.join(folder, "lld")) is None


def test_no_folder_that_can_run_the_wrapper_is_an_error_naming_each(tmp_path, monkeypatch):
    zig = _zig_or_skip()
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(amd_build, "_lld_wrapper_problem",
                        lambda p: "its folder is on a noexec mount")
    with pytest.raises(OpusRuntimeError) as info:
        amd_build._lld_wrapper_dir(zig, "zig-test")
    msg = str(info.value)
    assert str(tmp_path / "cache" / "amd-tools" / "zig-test" / "lld") in msg
    assert "opus-amd-lld-" in msg and "noexec" in msg and "OPUS_CACHE_DIR" in msg


# -- NVRTC newer than the driver ---------------------------------------------------------------

def test_cubin_from_an_nvrtc_newer_than_the_driver_is_refused_with_what_to_install(monkeypatch):
    from opus.runtime import cuda_driver as drv
    monkeypatch.setattr(drv, "driver_version", lambda: (12, 4))
    with pytest.raises(OpusRuntimeError) as info:
        drv.load_module(b"\x7fELF", nvrtc_version=(13, 0))
    msg = str(info.value)
    assert "NVRTC 13.0" in msg and "CUDA 12.4" in msg and "pip install" in msg
