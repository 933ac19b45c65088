"""Source -> binary for a target, through the disk cache (the compile step of the house)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import OpusRuntimeError

__all__ = ["Built", "build", "build_ptx", "resources", "OPTIONS", "OPUS_BUILD_VERSION"]

OPTIONS = ()              # extra NVRTC options beyond the defaults of runtime.nvrtc
OPUS_BUILD_VERSION = "1"  # bump when codegen changes in a way the source text does not show


@dataclass(frozen=True)
class Built:
    binary: bytes           # CUBIN (NVIDIA) or code object (AMD)
    log: str                # compiler log (resource lines)
    compiler_version: tuple
    cached: bool            # came from the disk cache


def _pack(binary: bytes, log: str, version) -> bytes:
    meta = json.dumps({"log": log, "version": list(version)}).encode()
    return len(meta).to_bytes(4, "little") + meta + binary


def _unpack(data: bytes):
    n = int.from_bytes(data[:4], "little")
    meta = json.loads(data[4:4 + n])
    return data[4 + n:], meta["log"], tuple(meta["version"])


def build(source: str, target) -> Built:
    if target.vendor == "nvidia":
        from . import nvrtc
        from .cache import default_cache, make_key
        version = nvrtc.nvrtc_version()
        key = make_key("cuda", source, version, target.name, OPTIONS, OPUS_BUILD_VERSION)
        cache = default_cache()
        hit = cache.get(key)
        if hit is not None:
            try:
                binary, log, v = _unpack(hit)
                return Built(binary, log, v, True)
            except (ValueError, KeyError):
                pass  # an entry from another format: rebuild it
        r = nvrtc.compile_cuda(source, arch=target.name, options=OPTIONS)
        cache.put(key, _pack(r.cubin, r.log, r.nvrtc_version))
        return Built(r.cubin, r.log, r.nvrtc_version, False)
    if target.vendor == "amd":
        from .amd_build import build_amd
        return build_amd(source, target)
    raise OpusRuntimeError(f"no compiler for {target!r}")


def build_ptx(source: str, target) -> str:
    from . import nvrtc
    return nvrtc.compile_cuda(source, arch=target.name, options=OPTIONS, want_ptx=True).ptx


def resources(built: Built, kernel_name: str, target=None) -> dict:
    if target is not None and target.vendor == "amd":
        from .amd_build import resources_amd
        return resources_amd(built.binary)[kernel_name]
    if built.log:
        from .inspect import resources_from_log
        r = resources_from_log(built.log, kernel_name)
        if r:
            return r
    from .inspect import resources_from_cubin
    return resources_from_cubin(built.binary, kernel_name)
