"""Look inside compiled kernels: SASS listings and resource usage (registers, spills, smem).

Resource numbers come from the ptxas -v lines that nvrtc.compile_cuda puts in its log; for a
CUBIN without a log, ``cuobjdump -res-usage`` reads them from the binary. cuobjdump comes from
the ``nvidia-cuda-cuobjdump`` wheel (part of ``opus[test]``) or a CUDA toolkit on PATH.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile

from opus.errors import OpusRuntimeError

__all__ = ["find_tool", "sass", "resources_from_log", "resources_from_cubin"]


def find_tool(name: str) -> str:
    """Path of a CUDA binary tool (cuobjdump, nvdisasm): pip wheel first, then PATH/CUDA_HOME."""
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        hits = sorted(glob.glob(os.path.join(base, "cu1*", "bin", name)), reverse=True)
        hits += glob.glob(os.path.join(base, "cuda_" + name, "bin", name))  # CUDA 12 wheels
        for h in hits:
            if os.access(h, os.X_OK):
                return h
    found = shutil.which(name)
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", name), os.X_OK):
            return os.path.join(home, "bin", name)
    raise OpusRuntimeError(
        f"{name} was not found; install it with pip install \"opus[test]\" "
        f"(or pip install nvidia-cuda-{name}), or put a CUDA toolkit's bin on PATH")


def _cuobjdump(cubin: bytes, flag: str) -> str:
    tool = find_tool("cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([tool, flag, f.name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise OpusRuntimeError(f"cuobjdump {flag} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def sass(cubin: bytes) -> str:
    """The SASS listing of every kernel in ``cubin`` (cuobjdump -sass)."""
    return _cuobjdump(cubin, "-sass")


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM0 = re.compile(r"(\d+) bytes cmem\[0\]")


def _pick(table: dict, kernel: str | None, where: str) -> dict:
    if kernel is not None:
        return table.get(kernel, {})  # {} like a log without ptxas lines: callers fall back
    if len(table) > 1:
        raise ValueError(f"the {where} describes several kernels {sorted(table)}; pass kernel=")
    return next(iter(table.values()), {})


def _blank() -> dict:
    return {"registers": 0, "shared_bytes": 0, "spill_stores": 0, "spill_loads": 0,
            "stack_frame": 0, "barriers": 0, "const_bytes": 0}


def resources_from_log(log: str, kernel: str | None = None) -> dict:
    """Resource usage of ``kernel`` (or of the only kernel) from ptxas -v lines in an NVRTC log.

    Keys: registers, shared_bytes (static), spill_stores, spill_loads, stack_frame (bytes),
    barriers, const_bytes (cmem[0]). Empty dict when the log has no ptxas lines for it (NVRTC
    errors, a named kernel that is not there). Several kernels and no name: ValueError.
    """
    table: dict = {}
    current = framed = None  # the entry being described; whose stack frame line comes next
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = table.setdefault(m.group(1), _blank())
        elif m := _PROPS.search(line):
            framed = table.get(m.group(1))  # None for non-inlined device functions
        elif m := _FRAME.search(line):
            if framed is not None:
                framed["stack_frame"], framed["spill_stores"], framed["spill_loads"] = map(
                    int, m.groups())
        elif (m := _USED.search(line)) and current is not None:
            current["registers"] = int(m.group(1))
            for key, rx in (("barriers", _BARRIERS), ("shared_bytes", _SMEM),
                            ("const_bytes", _CMEM0)):
                if mm := rx.search(line):
                    current[key] = int(mm.group(1))
    return _pick(table, kernel, "NVRTC log")


_RES_FUNC = re.compile(r"^\s*Function (\S+):\s*$")
_RES_PAIR = re.compile(r"(\w+(?:\[\d+\])?):(\d+)")


def resources_from_cubin(cubin: bytes, kernel: str | None = None) -> dict:
    """Same keys as resources_from_log, read from the binary with ``cuobjdump -res-usage``.

    The binary does not record spills, so spill_stores/spill_loads are None here; stack_frame
    is the STACK figure and LOCAL bytes are reported as local_bytes.
    """
    table: dict = {}
    current = None
    for line in _cuobjdump(cubin, "-res-usage").splitlines():
        m = _RES_FUNC.match(line)
        if m:
            current = table.setdefault(m.group(1), _blank())
            current.update(spill_stores=None, spill_loads=None, local_bytes=0)
            continue
        if current is not None and "REG:" in line:
            pairs = dict(_RES_PAIR.findall(line))
            current["registers"] = int(pairs.get("REG", 0))
            current["stack_frame"] = int(pairs.get("STACK", 0))
            current["shared_bytes"] = int(pairs.get("SHARED", 0))
            current["local_bytes"] = int(pairs.get("LOCAL", 0))
            current["const_bytes"] = int(pairs.get("CONSTANT[0]", 0))
            current.pop("barriers", None)  # not in -res-usage output
            current = None
    return _pick(table, kernel, "CUBIN")
