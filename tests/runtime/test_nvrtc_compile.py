import re
import subprocess
import sys

import pytest

from opus.errors import CompileError, OpusRuntimeError
from opus.runtime import inspect as rt_inspect
from opus.runtime import nvrtc
from runtime_kernels import VEC_ADD


def test_version():
    major, minor = nvrtc.nvrtc_version()
    assert major >= 12 and minor >= 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compile_gives_cubin_with_vector_loads(arch):
    res = nvrtc.compile_cuda(VEC_ADD, arch=arch)
    assert res.cubin[:4] == b"\x7fELF"  # a CUBIN, not PTX text
    assert res.ptx is None
    assert res.nvrtc_version == nvrtc.nvrtc_version()
    listing = rt_inspect.sass(res.cubin)
    assert f"code for {arch}" in listing
    assert "LDG.E.128" in listing
    assert "STG.E.128" in listing


def test_ptx_on_demand():
    res = nvrtc.compile_cuda(VEC_ADD, arch="sm_90a", want_ptx=True)
    assert res.cubin[:4] == b"\x7fELF"
    assert ".target sm_90a" in res.ptx
    assert ".entry vec_add" in res.ptx


def test_resources_from_log_and_cubin():
    res = nvrtc.compile_cuda(VEC_ADD, arch="sm_90a")
    from_log = rt_inspect.resources_from_log(res.log)
    assert from_log["registers"] > 0
    assert from_log["spill_stores"] == 0 and from_log["spill_loads"] == 0
    assert rt_inspect.resources_from_log(res.log, kernel="vec_add") == from_log
    from_cubin = rt_inspect.resources_from_cubin(res.cubin)
    assert from_cubin["registers"] == from_log["registers"]


def test_user_options_are_passed():
    src = "extern \"C\" __global__ void k(int* p) { p[0] = VALUE; }"
    nvrtc.compile_cuda(src, arch="sm_80", options=("-DVALUE=3",))
    with pytest.raises(CompileError):
        nvrtc.compile_cuda(src, arch="sm_80")


def test_compile_error_shows_source_line():
    bad = VEC_ADD.replace("float4 r;", "float4 r; undefined_thing(r);")
    with pytest.raises(CompileError) as info:
        nvrtc.compile_cuda(bad, arch="sm_80", name="my_kernel.cu")
    msg = str(info.value)
    line_no = bad.splitlines().index("    float4 r; undefined_thing(r);") + 1
    assert "undefined_thing" in msg and "error" in msg
    assert f"my_kernel.cu, line {line_no}:" in msg
    assert re.search(rf"^> +{line_no} \|     float4 r; undefined_thing\(r\);$", msg, re.M)
    assert "sm_80" in msg


def test_bad_arch_is_rejected():
    with pytest.raises(ValueError):
        nvrtc.compile_cuda(VEC_ADD, arch="compute_80")


def test_missing_nvrtc_says_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_version", None)
    monkeypatch.setattr(nvrtc, "_lib_candidates", lambda: ["/nonexistent/libnvrtc.so.13"])
    with pytest.raises(OpusRuntimeError, match=r'pip install "opus\[cuda\]"'):
        nvrtc.compile_cuda(VEC_ADD, arch="sm_80")


def test_import_is_light():
    # numpy may come in through opus/__init__; the driver bindings and torch must not.
    code = ("import sys, opus.runtime.nvrtc; "
            "bad = [m for m in sys.modules if m.startswith(('cuda', 'torch'))]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
