"""NVRTC through ctypes: CUDA C++ source in, CUBIN (and on demand PTX) out.

ctypes rather than cuda.bindings keeps ``import opus.runtime.nvrtc`` cheap; the library itself
is only opened on the first compile. The library comes from the ``nvidia-cuda-nvrtc`` wheel
(``site-packages/nvidia/cu13/lib``) so its version matches what ``opus[cuda]`` pins.
"""
from __future__ import annotations

import ctypes
import os
import _thread  # not threading: that pulls in functools+collections (~3 ms)

from opus.errors import CompileError, OpusRuntimeError

__all__ = ["CompileResult", "compile_cuda", "nvrtc_version", "nvrtc_path", "compiler_identity"]

_INSTALL_HINT = 'install it with: pip install "opus[cuda]" (the nvidia-cuda-nvrtc 13.0 wheel)'


class CompileResult:
    """What one compile produced. (A plain class: dataclasses costs ~5 ms of import time.)"""

    __slots__ = ("cubin", "ptx", "log", "nvrtc_version")

    def __init__(self, cubin: bytes, ptx: str | None, log: str, nvrtc_version: tuple):
        self.cubin, self.ptx, self.log, self.nvrtc_version = cubin, ptx, log, nvrtc_version

    def _fields(self):
        return (self.cubin, self.ptx, self.log, self.nvrtc_version)

    def __eq__(self, other):
        return type(other) is CompileResult and self._fields() == other._fields()

    def __repr__(self):
        return (f"CompileResult(cubin=<{len(self.cubin)} bytes>, ptx={'<text>' if self.ptx else None}, "
                f"log={self.log[:60]!r}, nvrtc_version={self.nvrtc_version})")


# -- finding and opening the library ---------------------------------------------------------

def _files(folder: str, prefix: str) -> list[str]:
    """Files in ``folder`` whose name starts with ``prefix``, newest version first (os.listdir
    instead of glob keeps the import light)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in sorted(names, reverse=True)
            if n.startswith(prefix) and ".alt." not in n]  # .alt: variant build, not the default


def _wheel_candidates() -> list[str]:
    """libnvrtc files shipped by pip wheels, newest CUDA line first."""
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for base in spec.submodule_search_locations:
        for line in ("cu13", "cu14", "cu12"):
            found += _files(os.path.join(base, line, "lib"), "libnvrtc.so.")
        found += _files(os.path.join(base, "cuda_nvrtc", "lib"), "libnvrtc.so.")  # CUDA 12 wheels
    return found


def _lib_candidates() -> list[str]:
    """Where to look, in order (tests monkeypatch this)."""
    return _wheel_candidates() + ["<pathfinder>", "libnvrtc.so.13", "libnvrtc.so"]


_lock = _thread.allocate_lock()
_lib = None
_lib_path = None


def _open(candidate: str):
    """(library, path) for a candidate, or None where it is not there. A library that is there
    but does not load is an error with the loader's reason: hiding it behind "not found" (or
    another NVRTC further down the list) would leave a broken install undiagnosed."""
    if candidate == "<pathfinder>":
        try:
            from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib
        except ImportError:
            return None
        try:
            candidate = load_nvidia_dynamic_lib("nvrtc").abs_path
        except DynamicLibNotFoundError:
            return None
        except Exception as e:
            raise OpusRuntimeError(f"cuda.pathfinder found NVRTC but could not load it: {e}; "
                                   f"{_INSTALL_HINT}") from None
    try:
        _preload_builtins(candidate)
        return ctypes.CDLL(candidate), candidate
    except OSError as e:
        if _absent(candidate, e):
            return None
        raise OpusRuntimeError(f"NVRTC at {candidate} is there but does not load: {e}. A damaged "
                               "or partial install: reinstall what provides it (for the wheel: "
                               "pip install --force-reinstall nvidia-cuda-nvrtc)") from None


def _absent(candidate: str, error: OSError) -> bool:
    """Whether loading ``candidate`` failed because there is no such library (a path that does
    not exist, a soname the loader does not find), not because the library is broken."""
    if os.path.isabs(candidate):
        return not os.path.exists(candidate)
    return "cannot open shared object file: No such file" in str(error)


def _preload_builtins(lib_path: str):
    """NVRTC dlopens libnvrtc-builtins by soname at compile time; a wheel's lib folder is not on
    the loader path, so load the one next to libnvrtc first (RTLD_GLOBAL makes it findable)."""
    folder = os.path.dirname(lib_path)
    if not folder:
        return
    for path in _files(folder, "libnvrtc-builtins.so."):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def _load():
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            tried = _lib_candidates()
            for cand in tried:
                got = _open(cand)
                if got is not None:
                    lib, _lib_path = got
                    _declare(lib)
                    _lib = lib
                    break
            else:
                raise OpusRuntimeError(
                    "NVRTC (libnvrtc.so) was not found, so opus cannot compile kernels; "
                    f"{_INSTALL_HINT}. Looked in: {', '.join(tried) or '(nowhere)'}")
    return _lib


def _declare(lib):
    P, c_int, c_size_p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)
    sigs = {
        "nvrtcVersion": [ctypes.POINTER(c_int), ctypes.POINTER(c_int)],
        "nvrtcCreateProgram": [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p, c_int,
                               ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)],
        "nvrtcCompileProgram": [P, c_int, ctypes.POINTER(ctypes.c_char_p)],
        "nvrtcDestroyProgram": [ctypes.POINTER(P)],
        "nvrtcGetProgramLogSize": [P, c_size_p],
        "nvrtcGetProgramLog": [P, ctypes.c_char_p],
        "nvrtcGetCUBINSize": [P, c_size_p],
        "nvrtcGetCUBIN": [P, ctypes.c_char_p],
        "nvrtcGetPTXSize": [P, c_size_p],
        "nvrtcGetPTX": [P, ctypes.c_char_p],
    }
    for name, argtypes in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, c_int
    lib.nvrtcGetErrorString.argtypes, lib.nvrtcGetErrorString.restype = [c_int], ctypes.c_char_p


def nvrtc_path() -> str:
    """Absolute path (or soname) of the NVRTC library in use."""
    _load()
    return _lib_path


def _check(result: int, call: str):
    if result != 0:
        msg = _lib.nvrtcGetErrorString(result).decode(errors="replace")
        raise OpusRuntimeError(f"{call} failed: {msg} (nvrtcResult {result})")


_version = None


def nvrtc_version() -> tuple[int, int]:
    global _version
    if _version is None:
        lib = _load()
        major, minor = ctypes.c_int(), ctypes.c_int()
        _check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        _version = (major.value, minor.value)
    return _version


def compiler_identity() -> tuple:
    """What identifies the compiler for cache keys, without opening it when possible.

    Opening libnvrtc costs milliseconds, more than a whole cache hit, so when the library
    that _load would pick is a plain file we identify it by path, size and modification time
    (a different NVRTC is a different file). Otherwise (a soname the loader resolves) we open
    it and use its version. The identity is the same before and after the library is opened
    (else the first kernel compiled in a process would be cached under another key).
    """
    path = _library_file()
    if path is not None:
        st = os.stat(path)
        return ("file", path, st.st_size, st.st_mtime_ns)
    return ("version", nvrtc_path(), nvrtc_version())


def _library_file():
    """The plain file NVRTC is (or, not yet opened, will be) loaded from; None for a soname."""
    if _lib is None:
        for cand in filter(os.path.isabs, _lib_candidates()):
            if os.path.isfile(cand):
                return cand
        _load()
    return _lib_path if os.path.isabs(_lib_path) and os.path.isfile(_lib_path) else None


# -- compiling ---------------------------------------------------------------------------------

def _default_options(arch: str) -> list[str]:
    # sm_XX gives a CUBIN (SASS); -Xptxas -v puts register/spill/smem lines in the log
    # (inspect.resources_from_log reads them).
    # --fmad=false: a * b + c rounds twice, as the language (and the interpreter) define it;
    # fused multiply-adds come only from opus.fma.
    opts = [f"-arch={arch}", "-default-device", "--std=c++17", "--ptxas-options=-v",
            "--fmad=false"]
    if nvrtc_version() >= (12, 9):
        # NVRTC 12.9+ caches results in the driver's ComputeCache when libcuda is present; a
        # hit skips ptxas and so leaves the log without resource lines. opus caches CUBINs
        # itself (cache.py), so NVRTC's cache only costs us those lines.
        opts.append("--no-cache")
    return opts


def options_for(arch: str, options=()) -> tuple:
    """Every option a compile for ``arch`` passes to NVRTC (defaults, then ``options``)."""
    return tuple(_default_options(arch)) + tuple(options)


def _get(prog, size_fn, data_fn) -> bytes:
    size = ctypes.c_size_t()
    _check(size_fn(prog, ctypes.byref(size)), size_fn.__name__)
    buf = ctypes.create_string_buffer(size.value)
    _check(data_fn(prog, buf), data_fn.__name__)
    return buf.raw


def _log(prog) -> str:
    return _get(prog, _lib.nvrtcGetProgramLogSize, _lib.nvrtcGetProgramLog).rstrip(b"\0").decode(
        errors="replace").strip()


def _run(source: str, name: str, options: list[str], want_ptx: bool):
    """One NVRTC compile. Returns (ok, log, cubin_or_ptx)."""
    lib = _load()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        res = lib.nvrtcCompileProgram(prog, len(options), opts)
        log = _log(prog)
        if res != 0:
            return False, log or lib.nvrtcGetErrorString(res).decode(), None
        if want_ptx:
            out = _get(prog, lib.nvrtcGetPTXSize, lib.nvrtcGetPTX).rstrip(b"\0")
        else:
            out = _get(prog, lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        return True, log, out
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_cuda(source: str, *, arch: str, options: tuple[str, ...] = (), name: str = "kernel.cu",
                 want_ptx: bool = False) -> CompileResult:
    """Compile headerless CUDA C++ to a CUBIN for ``arch`` (e.g. "sm_80", "sm_90a").

    Raises CompileError (log + offending source lines) when NVRTC rejects the code.
    With ``want_ptx`` a second compile for the virtual arch (compute_XX) yields the PTX:
    NVRTC only keeps PTX when it stops there.
    """
    parsed = _nvidia_arch(arch)
    version = nvrtc_version()
    opts = list(options_for(arch, options))
    ok, log, cubin = _run(source, name, opts, want_ptx=False)
    if not ok:
        raise CompileError(_compile_error(source, log, name, arch, opts))
    ptx = None
    if want_ptx:
        vopts = [f"-arch={parsed.virtual}"] + [
            o for o in opts[1:] if not o.startswith("--ptxas-options")]
        ok, plog, raw = _run(source, name, vopts, want_ptx=True)
        if not ok:  # pragma: no cover - the CUBIN compile of the same source succeeded
            raise CompileError(format_compile_error(source, plog, name, arch))
        ptx = raw.decode()
    return CompileResult(cubin=cubin, ptx=ptx, log=log, nvrtc_version=version)


def compile_phases(source: str, *, arch: str, options: tuple[str, ...] = (),
                   name: str = "kernel.cu") -> tuple[CompileResult, dict]:
    """``compile_cuda`` with NVRTC's own clock on (its ``--time`` option): the result and the
    milliseconds of each phase NVRTC reports, e.g. {"CUDA C++ Frontend": 40.0, "NVVM Optimizer":
    190.0, "PTX Translation": 160.0} (the last is ptxas; a PTX-only compile has no such row)."""
    import tempfile
    fd, path = tempfile.mkstemp(prefix="opus_nvrtc_time_", suffix=".csv")
    os.close(fd)
    try:
        result = compile_cuda(source, arch=arch, options=tuple(options) + (f"--time={path}",),
                              name=name)
        with open(path) as f:
            return result, _phase_rows(f.read())
    finally:
        os.unlink(path)


def _phase_rows(csv_text: str) -> dict:
    """{phase: ms} from NVRTC's --time table ("file, phase, metric, unit" rows; the header
    row is there only where NVRTC created the file); a phase NVRTC ran more than once (per
    kernel) is summed."""
    phases = {}
    for row in csv_text.splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) >= 4 and cells[3] == "ms":
            phases[cells[1]] = phases.get(cells[1], 0.0) + float(cells[2])
    return phases


def _nvidia_arch(arch: str):
    """The parsed NVIDIA arch name (opus.arch_names, the parser the targets use too)."""
    from ..arch_names import parse_arch
    parsed = parse_arch(arch)
    if parsed.vendor != "nvidia":
        raise ValueError(f"NVRTC compiles for NVIDIA archs ('sm_80', 'sm_90a'), got {arch!r}")
    return parsed


# -- error reports ---------------------------------------------------------------------------

def _compile_error(source: str, log: str, name: str, arch: str, opts: list) -> str:
    """The CompileError message, on the log of the source without markers (diagnostics)."""
    from .diagnostics import log_without_markers

    def compile_text(text):
        ok, text_log, _ = _run(text, name, opts, want_ptx=False)
        return None if ok else text_log
    return format_compile_error(source, log_without_markers(source, log, compile_text), name,
                                arch)


def format_compile_error(source: str, log: str, name: str, arch: str, context: int = 2) -> str:
    """The NVRTC log (on ``source`` without markers) followed by each source line it names,
    with a little context and the Python line it comes from."""
    import re
    from .diagnostics import located_report
    return located_report(f"NVRTC failed to compile {name} for {arch}:", source, log,
                          re.escape(name) + r"\((\d+)\)", name, context)
