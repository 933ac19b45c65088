"""Bad input to the toolchain: kernel and parameter names that are C/C++ keywords, device
builtins or non-ASCII; broken compiler configuration (OPUS_HIP_CLANG, NVRTC, ziglang, the AMD
linker wrapper); compile errors, which must name the kernel's Python line; unknown targets."""
import importlib.util
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import opus
from opus import f32
from opus.codegen import cemit
from opus.runtime import amd_build, nvrtc

from expect import cache_files, no_new_cache_files, raises

ARCHS = {"nvidia": ("sm_80", "sm_90a"), "amd": ("gfx942", "gfx950")}


def _module(tmp_path, source, stem):
    """Import ``source`` (UTF-8) as a module from a file (kernels need a source file)."""
    path = tmp_path / f"{stem}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"opus_bad_input_{stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel_named(tmp_path, name, params=("x", "n"), stem="k"):
    """A kernel ``name(<params[0]>: Ptr[f32], <params[1]>: i32)`` adding 1 to elements < n."""
    p, n = params
    src = (f"import opus\nfrom opus import f32\n\n@opus.kernel\n"
           f"def {name}({p}: opus.Ptr[f32], {n}: opus.i32):\n"
           f"    i = opus.thread_id_x()\n"
           f"    g = opus.make_gmem({p}, {n})\n"
           f"    g.store(g.load(i) + 1.0, i)\n")
    return getattr(_module(tmp_path, src, stem), name)


def _compiles_and_runs(kernel, vendor, symbol):
    """Rendered, compiled and found under ``symbol`` on both of the vendor's chips, and run by
    the interpreter (x + 1 below n, the rest untouched)."""
    for arch in ARCHS[vendor]:
        assert kernel.specialize(target=arch).symbol == symbol
        assert f" {symbol}(" in kernel.source(target=arch)
        if vendor == "nvidia":
            assert kernel.resources(target=arch)["registers"] > 0  # ptxas names the entry
        else:
            assert kernel.resources(target=arch)["wave"] == 64  # the code object's metadata
    x = np.arange(40, dtype=np.float32)
    with opus.set_target(ARCHS[vendor][-1], interpret=True):
        kernel[1, 32](x, 30)
    np.testing.assert_array_equal(x, np.r_[np.arange(1, 31), np.arange(30, 40)].astype(np.float32))


# -- names: C/C++ keywords, device builtins, non-ASCII ------------------------------------------
# The expected symbols are written out by hand: <name>_opus; non-ASCII letters as _<hex>_ with
# "_" doubled, then _opus_u.
NAMES = {"exp": "exp_opus", "max": "max_opus", "printf": "printf_opus",
         "template": "template_opus", "int": "int_opus", "main": "main_opus",
         "threadIdx": "threadIdx_opus", "__syncthreads": "__syncthreads_opus",
         "größe": "gr_f6__df_e_opus_u", "内核": "_5185__6838__opus_u"}


@pytest.mark.parametrize("vendor", sorted(ARCHS))
@pytest.mark.parametrize("name", sorted(NAMES))
def test_kernel_name_that_is_a_keyword_builtin_or_non_ascii(name, vendor, tmp_path, cache_root):
    _compiles_and_runs(_kernel_named(tmp_path, name), vendor, NAMES[name])


@pytest.mark.parametrize("vendor", sorted(ARCHS))
def test_names_differing_only_in_non_ascii_letters_get_distinct_symbols(vendor, tmp_path,
                                                                        cache_root):
    a = _kernel_named(tmp_path, "kern_ä", stem="a")
    b = _kernel_named(tmp_path, "kern_ö", stem="b")
    _compiles_and_runs(a, vendor, "kern___e4__opus_u")
    _compiles_and_runs(b, vendor, "kern___f6__opus_u")


@pytest.mark.parametrize("vendor", sorted(ARCHS))
@pytest.mark.parametrize("params,c_params", [
    (("float", "threadIdx"), "float* p_float_1, int p_threadIdx_2"),
    (("asm", "exp"), "float* p_asm_1, int p_exp_2"),
    (("größe", "n"), "float* p_gr_f6__df_e_1, int p_n_2"),
], ids=["float-threadIdx", "asm-exp", "non-ascii"])
def test_parameter_names_that_are_keywords_builtins_or_non_ascii(params, c_params, vendor,
                                                                 tmp_path, cache_root):
    k = _kernel_named(tmp_path, "k", params)
    _compiles_and_runs(k, vendor, "k_opus")
    assert f"k_opus({c_params})" in k.source(target=ARCHS[vendor][0])


# -- OPUS_HIP_CLANG: a configured compiler that is broken is an error, not a fallback ----------

def _amd_kernel():
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        x[0] = 1.0

    return k


@pytest.fixture
def fresh_amd_compiler(monkeypatch):
    """hip_compiler() looks again (it is found once per process)."""
    monkeypatch.setattr(amd_build, "_compiler", None)


def _script(path, body, mode=0o755):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize("setup,reason", [
    (lambda d: str(d / "no" / "clang"), "no such file"),
    (lambda d: _script(d / "clang", 'echo "clang version 21.0.0"\n', 0o644), "not executable"),
    (lambda d: str(d), "is a directory"),
    (lambda d: _script(d / "clang", "echo broken >&2; exit 3\n"), "exit code 3"),
    (lambda d: _script(d / "clang", 'echo "clang version 18.1.8"\n'), "clang 18.1.8"),
], ids=["missing", "not-executable", "directory", "failing-script", "too-old"])
def test_broken_opus_hip_clang_is_an_error_naming_it(setup, reason, tmp_path, monkeypatch,
                                                     cache_root, fresh_amd_compiler):
    path = setup(tmp_path)
    monkeypatch.setenv("OPUS_HIP_CLANG", path)
    with no_new_cache_files(cache_root), \
            raises(opus.OpusRuntimeError, "OPUS_HIP_CLANG", path, reason):
        _amd_kernel().asm(target="gfx942")


# -- NVRTC that is there but broken ---------------------------------------------------------------

def test_corrupt_nvrtc_library_reports_the_loader_error(tmp_path, monkeypatch, cache_root):
    fake = tmp_path / "libnvrtc.so.13"
    fake.write_text("this is not a shared object\n" * 8)  # longer than an ELF header
    monkeypatch.setattr(nvrtc, "_lib", None)
    monkeypatch.setattr(nvrtc, "_lib_path", None)
    monkeypatch.setattr(nvrtc, "_version", None)
    monkeypatch.setattr(nvrtc, "_lib_candidates", lambda: [str(fake)])
    with no_new_cache_files(cache_root), \
            raises(opus.OpusRuntimeError, str(fake), "does not load", "invalid ELF header"):
        _amd_kernel().resources(target="sm_90a")


# -- the ziglang package: installed but without its compiler -------------------------------------

def _only_ziglang(monkeypatch, tmp_path):
    """No clang but the ziglang package's can be found (ROCm or a system clang would be)."""
    if os.path.isfile("/opt/rocm/llvm/bin/clang"):
        pytest.skip("ROCm's clang is found before the ziglang package here")
    monkeypatch.delenv("OPUS_HIP_CLANG", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


@pytest.mark.parametrize("init", [False, True], ids=["bare-folder", "package-without-zig"])
def test_ziglang_without_its_binary_says_what_to_reinstall(init, tmp_path, monkeypatch,
                                                           cache_root, fresh_amd_compiler):
    _only_ziglang(monkeypatch, tmp_path)
    pkg = tmp_path / "site" / "ziglang"
    pkg.mkdir(parents=True)
    monkeypatch.delitem(sys.modules, "ziglang", raising=False)
    if init:  # the package's files without its binary (a partial or wrong-platform install)
        (pkg / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
    else:  # the folder an uninstall can leave behind: it imports as a namespace package
        bare = types.ModuleType("ziglang")
        bare.__path__ = [str(pkg)]
        monkeypatch.setitem(sys.modules, "ziglang", bare)
    with no_new_cache_files(cache_root), \
            raises(opus.OpusRuntimeError, "ziglang", str(pkg), "no zig binary",
                   "pip install --force-reinstall ziglang"):
        _amd_kernel().asm(target="gfx942")


# -- the AMD linker wrapper (ziglang) ---------------------------------------------------------------

def _zig_or_skip(monkeypatch, tmp_path):
    _only_ziglang(monkeypatch, tmp_path)
    try:
        import ziglang  # noqa: F401
    except ImportError:
        pytest.skip("the ziglang package is not installed")


def _wrapper(cache_root):
    found = [f for f in cache_files(cache_root) if f.endswith(os.sep + "lld")]
    assert len(found) == 1, found
    return found[0]


def test_linker_wrapper_that_lost_its_run_bit_is_made_runnable_again(tmp_path, monkeypatch,
                                                                     cache_root,
                                                                     fresh_amd_compiler):
    _zig_or_skip(monkeypatch, tmp_path)
    amd_build.hip_compiler()
    lld = _wrapper(cache_root)
    os.chmod(lld, 0o644)  # e.g. restored from a backup without modes
    monkeypatch.setattr(amd_build, "_compiler", None)  # a new process
    obj = amd_build.build_amd(_amd_kernel().specialize(target="gfx942").source,
                              opus.targets.get_target("gfx942")).binary
    assert obj[:4] == b"\x7fELF" and os.access(lld, os.X_OK)


@pytest.fixture
def noexec_dir(tmp_path):
    """A folder on a noexec tmpfs mount (skipped where mounting is not allowed)."""
    d = tmp_path / "noexec"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "noexec,size=16m", "tmpfs", str(d)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a noexec tmpfs here (needs root)")
    yield d
    subprocess.run(["umount", "-l", str(d)], capture_output=True)


def test_cache_on_a_noexec_mount_keeps_the_wrapper_elsewhere(noexec_dir, tmp_path, monkeypatch,
                                                            fresh_amd_compiler):
    _zig_or_skip(monkeypatch, tmp_path)
    monkeypatch.setenv("OPUS_CACHE_DIR", str(noexec_dir / "cache"))
    obj = amd_build.build_amd(_amd_kernel().specialize(target="gfx942").source,
                              opus.targets.get_target("gfx942")).binary
    assert obj[:4] == b"\x7fELF"
    assert not amd_build.hip_compiler().lld_dir.startswith(str(noexec_dir))


def test_no_place_to_run_the_wrapper_is_an_error_naming_the_mount(noexec_dir, tmp_path,
                                                                 monkeypatch, fresh_amd_compiler):
    import tempfile
    _zig_or_skip(monkeypatch, tmp_path)
    monkeypatch.setenv("OPUS_CACHE_DIR", str(noexec_dir / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(noexec_dir))
    with raises(opus.OpusRuntimeError, "linker wrapper", "noexec", str(noexec_dir), "TMPDIR"):
        _amd_kernel().asm(target="gfx942")


# -- compile errors name the kernel's Python line --------------------------------------------------

def _exp_kernel():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: opus.i32):
        i = opus.thread_id_x()
        g = opus.make_gmem(x, n)
        g.store(opus.exp(g.load(i)) * 2.0, i)  # ERR: bad-math

    return k


def _vector_kernel():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: opus.i32):
        g = opus.make_gmem(x, n)
        v = g.load(opus.thread_id_x() * 4, vec=4)
        v = opus.fma(v, v, v)  # ERR: bad-vector-lane
        g.store(v, opus.thread_id_x() * 4, vec=4)

    return k


def _toolchain_ready(arch):
    """Find the compiler first: its set-up (the AMD linker wrapper in the cache folder) is not
    a compile result."""
    if arch.startswith("gfx"):
        amd_build.hip_compiler()


def _corrupt(monkeypatch, kind, last=False):
    """Make the emitter write one undeclared identifier for ops of ``kind``: right after the
    op's first line, or after its last (the lines of a vector op share its Python line)."""
    method = "render_" + kind
    original = getattr(cemit.CEmitter, method)

    def broken(self, op, indent):
        if last:
            original(self, op, indent)
            self.line(indent, "opus_undeclared_for_test = 1;")
        else:
            self.line(indent, "opus_undeclared_for_test = 1;")
            original(self, op, indent)

    monkeypatch.setattr(cemit.CEmitter, method, broken)


@pytest.mark.parametrize("arch", ["sm_90a", "gfx942"])
def test_compile_error_names_the_python_line(arch, monkeypatch, cache_root):
    _corrupt(monkeypatch, "math")
    _toolchain_ready(arch)
    with no_new_cache_files(cache_root), \
            raises(opus.CompileError, "opus_undeclared_for_test", arch, at="bad-math") as info:
        _exp_kernel().resources(target=arch)
    assert "> " in str(info.value)  # the generated line is shown too


@pytest.mark.parametrize("arch", ["sm_80", "gfx950"])
def test_compile_error_in_the_last_line_of_a_vector_op_names_its_python_line(arch, monkeypatch,
                                                                             cache_root):
    _corrupt(monkeypatch, "fma", last=True)
    _toolchain_ready(arch)
    with no_new_cache_files(cache_root), \
            raises(opus.CompileError, "opus_undeclared_for_test", at="bad-vector-lane"):
        _vector_kernel().resources(target=arch)


# -- unknown or wrong-vendor targets in inspection ------------------------------------------------

@pytest.mark.parametrize("call,needles", [
    (lambda k: k.source(target="sm_99"), ("unknown target", "sm_99", "sm_90a")),
    (lambda k: k.source(target="gfx90a"), ("unknown target", "gfx90a", "gfx942")),
    (lambda k: k.source(target="SM_90A"), ("unknown target", "SM_90A")),
    (lambda k: k.asm(target="gfx1100"), ("unknown target", "gfx1100")),
    (lambda k: k.ptx(target="sm_75"), ("unknown target", "sm_75")),
], ids=["source-sm_99", "source-gfx90a", "source-uppercase", "asm-gfx1100", "ptx-sm_75"])
def test_unknown_target_name(call, needles, cache_root):
    with no_new_cache_files(cache_root), raises(ValueError, *needles):
        call(_amd_kernel())


@pytest.mark.parametrize("call,needles", [
    (lambda k: k.ptx(target="gfx942"), ("PTX", "NVIDIA", "gfx942")),
    (lambda k: k.sass(target="gfx942"), ("SASS", "NVIDIA", "gfx942", ".asm")),
    (lambda k: k.asm(target="sm_90a"), (".asm", "AMD", "sm_90a")),
], ids=["ptx-on-amd", "sass-on-amd", "asm-on-nvidia"])
def test_inspection_for_the_other_vendor(call, needles, cache_root):
    with no_new_cache_files(cache_root), raises(opus.OpusError, *needles):
        call(_amd_kernel())


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["exp", "printf", "__syncthreads", "größe", "内核"])
def test_kernel_named_like_a_builtin_launches_on_the_gpu(name, tmp_path, cache_root):
    # the driver finds the kernel by its symbol (cuModuleGetFunction / hipModuleGetFunction)
    torch = pytest.importorskip("torch")
    k = _kernel_named(tmp_path, name)
    x = torch.arange(40, dtype=torch.float32, device="cuda")
    with opus.set_target(opus.current_target().target.name, interpret=False):
        k[1, 32](x, 30)
    torch.cuda.synchronize()
    want = np.r_[np.arange(1, 31), np.arange(30, 40)].astype(np.float32)
    np.testing.assert_array_equal(x.cpu().numpy(), want)
