"""HIP source -> AMDGCN assembly / code object (hsaco), device-only, through the disk cache.

Compiler: $OPUS_HIP_CLANG when set (a clang >= 20 with the AMDGPU backend; if it is not usable
that is an error, never a silent fallback), else the first clang >= 20 of ROCm's
($ROCM_PATH/llvm/bin/clang, /opt/rocm/llvm/bin/clang) and the system's, else the ``ziglang``
wheel (clang 22 with the AMDGPU backend; its ``ld.lld`` links the code object through a small
wrapper that clang finds via ``-B``). The flags are pinned, so output is reproducible.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time

from ..errors import CompileError, OpusRuntimeError

__all__ = ["build_amd", "assemble_amd", "resources_amd", "hip_compiler", "FLAGS", "last_compile_seconds"]

FLAGS = ("-x", "hip", "-nogpuinc", "-nogpulib", "--cuda-device-only", "--no-gpu-bundle-output",
         "-fuse-cuid=none", "-mcode-object-version=5", "-O3", "-std=c++17",
         "-ffp-contract=off",  # a * b + c rounds twice, as the language defines it
         "-Wno-unused-command-line-argument")
AMD_BUILD_VERSION = "2"

_lock = threading.Lock()
_compiler = None
last_compile_seconds = {}  # (kind, target name) -> wall seconds of the last real compile


class _Compiler:
    def __init__(self, argv, version, lld_dir=None, what=""):
        self.argv, self.version, self.lld_dir, self.what = list(argv), version, lld_dir, what

    def command(self, *args):
        extra = [f"-B{self.lld_dir}"] if self.lld_dir else []
        return self.argv + extra + list(args)


def _probe_clang(argv):
    """(version tuple, None) when ``argv --version`` runs and is clang, else (None, why not)."""
    try:
        r = subprocess.run(argv + ["--version"], capture_output=True, encoding="utf-8",
                           errors="replace", timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"it cannot be run ({e})"
    if r.returncode != 0:
        return None, f"`--version` failed with exit code {r.returncode}: {_tail(r.stderr or r.stdout)}"
    m = re.search(r"clang version (\d+)\.(\d+)\.(\d+)", r.stdout)
    if not m:
        return None, f"it is not clang (its --version says: {_tail(r.stdout)})"
    return tuple(int(x) for x in m.groups()), None


def _tail(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return (text[:n] + "...") if len(text) > n else (text or "(no output)")


def _configured_clang(path: str, variable: str) -> _Compiler:
    """The clang that the environment variable ``variable`` names (``path``); anything wrong
    with it is an error (no fallback to another compiler)."""
    def bad(why):
        return OpusRuntimeError(f"{variable}={path!r} does not name a usable clang: {why}. "
                                f"Point {variable} at a clang >= 20 with the AMDGPU backend, or "
                                "unset it to use ROCm's clang or the ziglang package")
    if not os.path.exists(path):
        raise bad("no such file")
    if os.path.isdir(path):
        raise bad("it is a directory")
    if not os.access(path, os.X_OK):
        raise bad(f"it is not executable (mode {stat.filemode(os.stat(path).st_mode)})")
    v, problem = _probe_clang([path])
    if problem:
        raise bad(problem)
    if v[0] < 20:
        raise bad(f"it is clang {'.'.join(map(str, v))}; AMD targets need clang >= 20")
    return _Compiler([path], ("clang",) + v, None, f"{path} {'.'.join(map(str, v))}")


def _zig_compiler():
    """The ziglang package's clang, or None where the package is not installed. A package that
    is installed but broken is an error saying what to reinstall."""
    try:
        import ziglang
    except ImportError:
        return None
    folders = list(getattr(ziglang, "__path__", None) or [])  # a bare folder has no __file__
    zig = next((os.path.join(f, "zig") for f in folders if os.path.isfile(os.path.join(f, "zig"))),
               None)
    reinstall = "reinstall it with: pip install --force-reinstall ziglang"
    if zig is None:
        raise OpusRuntimeError(f"the ziglang package ({', '.join(folders) or 'no folder'}) has no "
                               f"zig binary, so it cannot compile for AMD targets; {reinstall}")
    v, problem = _probe_clang([zig, "clang"])
    if problem:
        raise OpusRuntimeError(f"the ziglang package's compiler {zig} does not work: {problem}; "
                               f"{reinstall}")
    lld_dir = _lld_wrapper_dir(zig, f"zig-{v[0]}.{v[1]}.{v[2]}")
    return _Compiler([zig, "clang"], ("zig-clang",) + v, lld_dir,
                     f"ziglang clang {'.'.join(map(str, v))}")


# -- the linker wrapper ----------------------------------------------------------------------
# clang's AMDGPU toolchain runs `lld -flavor gnu ...`, found through -B; zig spells the linker
# `zig ld.lld` (and does not take -flavor, nor dispatch on its own name), so a two-line script
# named lld stands in for it. It must be able to run: the cache folder is tried first, then a
# private temporary folder (a cache on a noexec mount cannot run programs).

def _lld_script(zig: str) -> str:
    return f'#!/bin/sh\nif [ "$1" = "-flavor" ]; then shift 2; fi\nexec "{zig}" ld.lld "$@"\n'


def _lld_wrapper_dir(zig: str, tag: str) -> str:
    """A folder whose ``lld`` runs zig's linker (checked by running it)."""
    from .cache import cache_dir
    script = _lld_script(zig)
    problems = []
    for folder in (os.path.join(cache_dir(), "amd-tools", tag), None):
        try:
            if folder is None:
                folder = tempfile.mkdtemp(prefix="opus-amd-lld-")
                import atexit
                atexit.register(shutil.rmtree, folder, True)
            path = _write_lld_wrapper(folder, script)
        except OSError as e:
            problems.append(f"{folder}: cannot write the wrapper ({e})")
            continue
        problem = _lld_wrapper_problem(path)
        if problem is None:
            return folder
        problems.append(f"{path}: {problem}")
    raise OpusRuntimeError("the AMD linker wrapper (a shell script running `zig ld.lld`) cannot "
                           "run in the opus cache nor in a temporary folder: "
                           + "; ".join(problems) + ". Set OPUS_CACHE_DIR or TMPDIR to a folder "
                           "on a mount that allows running programs (not noexec)")


def _write_lld_wrapper(folder: str, script: str) -> str:
    """``folder``/lld holding ``script`` and executable; an existing one is kept only if it is
    both (a wrapper that lost its mode is written again)."""
    path = os.path.join(folder, "lld")
    try:
        with open(path) as f:
            if f.read() == script and os.access(path, os.X_OK):
                return path
    except OSError:
        pass
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(script)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def _lld_wrapper_problem(path: str):
    """None when the wrapper at ``path`` runs zig's linker, else why not."""
    try:
        if os.statvfs(os.path.dirname(path)).f_flag & os.ST_NOEXEC:
            return "its folder is on a noexec mount"
    except OSError:
        pass
    try:
        r = subprocess.run([path, "-flavor", "gnu", "--version"], capture_output=True,
                           encoding="utf-8", errors="replace", timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"it cannot be run ({e})"
    if r.returncode != 0 or "LLD" not in r.stdout:
        return f"`lld --version` through it failed: {_tail(r.stderr or r.stdout)}"
    return None


def hip_compiler() -> _Compiler:
    """The clang used for AMD builds (found once per process)."""
    global _compiler
    with _lock:
        if _compiler is None:
            _compiler = _find_compiler()
        return _compiler


def _find_compiler() -> _Compiler:
    explicit = os.environ.get("OPUS_HIP_CLANG")
    if explicit:
        return _configured_clang(explicit, "OPUS_HIP_CLANG")
    rocm = os.path.join(os.environ.get("ROCM_PATH", "/opt/rocm"), "llvm", "bin", "clang")
    for c in (rocm, "/opt/rocm/llvm/bin/clang", shutil.which("clang")):
        if c and os.path.isfile(c):
            v, _ = _probe_clang([c])
            if v and v[0] >= 20:  # a clang found by default that is older (ROCm 6) is not used
                return _Compiler([c], ("clang",) + v, None, f"{c} {'.'.join(map(str, v))}")
    z = _zig_compiler()
    if z is None:
        raise OpusRuntimeError(
            "no compiler for AMD targets: install ROCm, a clang >= 20 with the AMDGPU backend "
            "(set OPUS_HIP_CLANG), or the 'ziglang' Python package")
    return z


def _compile(source: str, target, kind: str) -> bytes:
    """kind 'asm' (-S) or 'hsaco' (-c, linked code object)."""
    comp = hip_compiler()
    with tempfile.TemporaryDirectory(prefix="opus-amd-") as d:
        src = os.path.join(d, "k.hip")
        out = os.path.join(d, "k.s" if kind == "asm" else "k.hsaco")
        with open(src, "w", encoding="utf-8") as f:
            f.write(source)
        cmd = comp.command(*FLAGS, f"--offload-arch={target.name}",
                           "-S" if kind == "asm" else "-c", "k.hip", "-o", out)
        t0 = time.perf_counter()
        r = _run_clang(comp, cmd, d)
        last_compile_seconds[(kind, target.name)] = time.perf_counter() - t0
        if r.returncode != 0 or not os.path.exists(out):
            raise CompileError(_compile_error(comp, cmd, d, source, r.stderr, target))
        with open(out, "rb") as f:
            return f.read()


def _run_clang(comp, cmd, folder):
    try:
        return subprocess.run(cmd, capture_output=True, encoding="utf-8", errors="replace",
                              cwd=folder, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        raise OpusRuntimeError(f"running {comp.what} failed: {e}") from None


def _compile_error(comp, cmd, folder, source, log, target) -> str:
    """The CompileError message, on the log of the source without markers (diagnostics)."""
    from .diagnostics import located_report, log_without_markers

    def compile_text(text):
        with open(os.path.join(folder, "k.hip"), "w", encoding="utf-8") as f:
            f.write(text)
        r = _run_clang(comp, cmd, folder)
        return r.stderr if r.returncode != 0 else None
    log = log_without_markers(source, log, compile_text)
    return located_report(f"HIP compile for {target.name} failed ({comp.what}):", source,
                          log.strip(), r"\bk\.hip:(\d+):", "k.hip")


def _cached(source, target, kind):
    from .cache import default_cache, make_key
    comp = hip_compiler()
    key = make_key("hip", kind, source, comp.version, target.name, FLAGS, AMD_BUILD_VERSION)
    cache = default_cache()
    hit = cache.get(key)
    if hit is not None:
        return hit, True
    data = _compile(source, target, kind)
    cache.put(key, data)
    return data, False


def build_amd(source: str, target):
    """Code object (ELF hsaco) for ``target``; ``log`` holds the kernels' resource lines."""
    from .build import Built
    binary, cached = _cached(source, target, "hsaco")
    res = resources_amd(binary)
    log = "\n".join(f"{k}: " + ", ".join(f"{a}={b}" for a, b in v.items()) for k, v in res.items())
    return Built(binary, log, hip_compiler().version, cached)


def assemble_amd(source: str, target) -> str:
    """AMDGCN assembly text (with the amdhsa metadata block) for ``target``."""
    data, _ = _cached(source, target, "asm")
    return data.decode()


# -- resources --------------------------------------------------------------------------------
_FIELDS = {".vgpr_count": "vgprs", ".sgpr_count": "sgprs", ".agpr_count": "agprs",
           ".group_segment_fixed_size": "smem_bytes", ".private_segment_fixed_size": "scratch_bytes",
           ".vgpr_spill_count": "vgpr_spills", ".sgpr_spill_count": "sgpr_spills",
           ".max_flat_workgroup_size": "max_block", ".wavefront_size": "wave"}


def resources_amd(obj) -> dict:
    """{kernel name: {vgprs, sgprs, agprs, smem_bytes, scratch_bytes, vgpr_spills, sgpr_spills,
    max_block, wave}} from AMDGCN assembly text or a code object (its NT_AMDGPU_METADATA note)."""
    kernels = _kernels_from_asm(obj) if isinstance(obj, str) else _kernels_from_elf(obj)
    out = {}
    for k in kernels:
        name = k.get(".name")
        out[name] = {v: k[f] for f, v in _FIELDS.items() if f in k}
    return out


def _kernels_from_asm(text):
    m = re.search(r"\.amdgpu_metadata(.*?)\.end_amdgpu_metadata", text, re.S)
    if not m:
        return []
    kernels, cur = [], None
    for line in m.group(1).splitlines():
        km = re.match(r"^(  - |    )(\.[\w]+):\s*(.*)$", line)  # keys of a kernel entry
        if not km:
            if not line.startswith("  "):
                cur = None  # left amdhsa.kernels
            continue
        lead, key, val = km.groups()
        if lead == "  - ":
            cur = {}
            kernels.append(cur)
        if cur is not None and val:
            cur[key] = int(val) if re.fullmatch(r"\d+", val) else val.strip("'\"")
    return [k for k in kernels if ".name" in k]


def _kernels_from_elf(data: bytes):
    import struct
    if data[:4] != b"\x7fELF":
        raise OpusRuntimeError("not an ELF code object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(shnum):
        base = shoff + i * shentsize
        sh_type, = struct.unpack_from("<I", data, base + 4)
        if sh_type != 7:  # SHT_NOTE
            continue
        off, size = struct.unpack_from("<QQ", data, base + 0x18)
        p, end = off, off + size
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz].rstrip(b"\0")
            dstart = p + 12 + ((namesz + 3) & ~3)
            desc = data[dstart:dstart + descsz]
            p = dstart + ((descsz + 3) & ~3)
            if name == b"AMDGPU" and ntype == 32:  # NT_AMDGPU_METADATA (msgpack)
                meta, _ = _unpack_msgpack(desc, 0)
                return meta.get("amdhsa.kernels", [])
    return []


# msgpack type bytes followed by a big-endian length: kind, bytes of the length
_SIZED = {0xDE: ("map", 2), 0xDF: ("map", 4), 0xDC: ("array", 2), 0xDD: ("array", 4),
          0xD9: ("str", 1), 0xDA: ("str", 2), 0xDB: ("str", 4),
          0xC4: ("bin", 1), 0xC5: ("bin", 2), 0xC6: ("bin", 4)}
_FIXED = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
          0xD2: ">i", 0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}


def _msgpack_header(b: bytes, i: int):
    """(kind, length, index after the header) of a map, array, str or bin at b[i]; else None."""
    t = b[i]
    for lo, hi, kind in ((0x80, 0x8F, "map"), (0x90, 0x9F, "array"), (0xA0, 0xBF, "str")):
        if lo <= t <= hi:
            return kind, t - lo, i + 1
    if t in _SIZED:
        kind, w = _SIZED[t]
        return kind, int.from_bytes(b[i + 1:i + 1 + w], "big"), i + 1 + w
    return None


def _unpack_msgpack(b: bytes, i: int):
    """Minimal msgpack decoder (the subset in AMDGPU metadata): (value, index after it)."""
    import struct
    t = b[i]
    if t <= 0x7F:
        return t, i + 1
    if t >= 0xE0:
        return t - 0x100, i + 1
    h = _msgpack_header(b, i)
    if h is not None:
        kind, n, i = h
        if kind in ("map", "array"):
            items = []
            for _ in range(2 * n if kind == "map" else n):
                v, i = _unpack_msgpack(b, i)
                items.append(v)
            return (dict(zip(items[::2], items[1::2])) if kind == "map" else items), i
        raw = b[i:i + n]
        return (raw if kind == "bin" else raw.decode("utf-8", "replace")), i + n
    if t in _FIXED:
        v, = struct.unpack_from(_FIXED[t], b, i + 1)
        return v, i + 1 + struct.calcsize(_FIXED[t])
    if t == 0xC0:
        return None, i + 1
    if t in (0xC2, 0xC3):
        return t == 0xC3, i + 1
    raise OpusRuntimeError(f"unsupported msgpack byte {t:#x} in AMDGPU metadata")
