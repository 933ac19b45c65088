"""Source -> binary for a target, through the disk cache (the compile step of the house)."""
from __future__ import annotations

import struct
from collections import namedtuple

from ..errors import OpusRuntimeError

__all__ = ["Built", "build", "build_ptx", "resources", "OPTIONS", "OPUS_BUILD_VERSION"]

OPTIONS = ()              # extra NVRTC options beyond the defaults of runtime.nvrtc
OPUS_BUILD_VERSION = "3"  # bump when codegen changes in a way the source text does not show


# What a build produced (a namedtuple: dataclasses costs ~1 ms of import in a fresh process).
#   binary: CUBIN (NVIDIA) or code object (AMD); log: compiler log (resource lines);
#   compiler_version: tuple; cached: came from the disk cache.
Built = namedtuple("Built", "binary log compiler_version cached")


# Cache entry: compiler version (major, minor), log length, then the log (UTF-8) and the binary.
# (struct rather than json: json's import alone costs a cache hit in a fresh process ~1 ms.)
_META = struct.Struct("<iiI")


def _pack(binary: bytes, log: str, version) -> bytes:
    text = log.encode()
    return _META.pack(version[0], version[1], len(text)) + text + binary


def _unpack(data: bytes):
    major, minor, n = _META.unpack_from(data)
    start = _META.size
    if start + n > len(data):
        raise ValueError("truncated build entry")
    return data[start + n:], data[start:start + n].decode(), (major, minor)


def build(source: str, target) -> Built:
    if target.vendor == "nvidia":
        from . import nvrtc
        from .cache import default_cache, make_key
        # the options NVRTC gets (defaults such as --fmad=false included) are part of the key,
        # as the AMD builds' flags are: changing one must not serve CUBINs built without it
        key = make_key("cuda", source, nvrtc.compiler_identity(), target.name,
                       nvrtc.options_for(target.name, OPTIONS), OPUS_BUILD_VERSION)
        cache = default_cache()
        hit = cache.get(key)
        if hit is not None:
            try:
                binary, log, v = _unpack(hit)
                return Built(binary, log, v, True)
            except (ValueError, struct.error):
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


def resources(built: Built, symbol: str, target=None) -> dict:
    """Registers, shared memory, spills of the kernel whose C symbol is ``symbol`` (the
    kernel's name as codegen.kernel_symbol spells it) in ``built``."""
    if target is not None and target.vendor == "amd":
        from .amd_build import resources_amd
        return resources_amd(built.binary)[symbol]
    if built.log:
        from .inspect import resources_from_log
        r = resources_from_log(built.log, symbol)
        if r:
            return r
    from .inspect import resources_from_cubin
    return resources_from_cubin(built.binary, symbol)
