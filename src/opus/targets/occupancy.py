"""Occupancy and register hints: what ``@opus.kernel(block=, min_blocks=, maxnreg=)`` asks of
each chip's compiler, checked against what the chip holds.

One function, ``launch_hints``, maps the portable request to the vendor's terms; tracing calls
it (so an impossible request is an error at the kernel's def line) and the renderers spell its
answer (codegen/cuda.py, codegen/hip.py ``launch_attributes``).

- NVIDIA: ``__launch_bounds__(block, min_blocks)`` (PTX .maxntid/.minnctapersm: ptxas caps the
  registers so that ``min_blocks`` blocks fit on one SM), or ``__maxnreg__(maxnreg)`` (PTX
  .maxnreg). NVRTC refuses both on one kernel ("The __launch_bounds__ and __maxnreg__
  qualifiers cannot be applied to the same kernel"), so a kernel with ``maxnreg`` has no launch
  bounds (its fixed block size is still checked at every launch), and ``min_blocks`` with
  ``maxnreg`` is refused (portable kernels: refused on every target).
- AMD: ``amdgpu_flat_work_group_size(1, block)``; ``min_blocks`` blocks per CU become
  ``amdgpu_waves_per_eu(W)`` with W = ceil(min_blocks * waves per block / SIMDs per CU) (the
  compiler then keeps the VGPRs to 512 / W); ``maxnreg`` is the VGPRs of a lane, architectural
  and accumulation together (gfx942/gfx950 have one file of 512), which LLVM's
  ``amdgpu_num_vgpr(N)`` caps at 2 N on such chips (GCNSubtarget::getMaxNumVGPRs doubles the
  request for gfx90a-class chips), so it gets maxnreg // 2.
"""
from __future__ import annotations

from .base import UnsupportedOnTarget

__all__ = ["launch_hints", "combination_problem"]

# Resident threads and blocks per SM (CUDA C++ Programming Guide, "Technical Specifications per
# Compute Capability"). ptxas ignores a .minnctapersm beyond either, with a warning only.
_NV_PER_SM = {"sm_80": (2048, 32), "sm_86": (1536, 16), "sm_89": (1536, 24),
              "sm_90": (2048, 32), "sm_90a": (2048, 32)}
# Registers per thread: ptxas raises a .maxnreg below 24 to 24 and ignores one above 255 (each
# with a warning only), so both are refused here.
_NV_MAXNREG = (24, 255)

# CDNA3/CDNA4 (gfx942, gfx950): 4 SIMDs (execution units) per CU, at most 8 waves per SIMD
# (LLVM AMDGPU getMaxWavesPerEU for gfx90a-class chips: a larger amdgpu_waves_per_eu is
# ignored), one unified file of 512 VGPRs per lane (architectural + accumulation).
_AMD_SIMDS_PER_CU = 4
_AMD_MAX_WAVES_PER_EU = 8
_AMD_MAXNREG = (16, 512)


def launch_hints(target, block, min_blocks=None, maxnreg=None) -> dict:
    """The launch attributes for a kernel with a fixed ``block`` size (or None), at least
    ``min_blocks`` resident blocks per SM/CU and at most ``maxnreg`` registers per thread (each
    or None). NVIDIA: ``{'max_threads': n, 'min_blocks': n}`` or ``{'maxnreg': n}`` (or {});
    AMD: ``{'max_threads': n, 'waves_per_eu': n, 'num_vgpr': n}`` (max_threads always: the
    chip's largest block where none is fixed). Raises UnsupportedOnTarget for a request the
    chip cannot meet."""
    problem = combination_problem(block, min_blocks, maxnreg)
    if problem:
        raise UnsupportedOnTarget(problem)
    if target.vendor == "nvidia":
        return _nvidia(target, block, min_blocks, maxnreg)
    return _amd(target, block, min_blocks, maxnreg)


def combination_problem(block, min_blocks, maxnreg) -> str | None:
    """Why these hints cannot go together on any target (None if they can)."""
    if min_blocks is not None and block is None:
        return ("min_blocks needs a fixed block size (block=...): the resident blocks per "
                "SM/CU depend on the threads per block")
    if min_blocks is not None and maxnreg is not None:
        return ("min_blocks and maxnreg cannot be combined: NVRTC refuses __launch_bounds__ and "
                "__maxnreg__ on one kernel; min_blocks caps the registers through the launch "
                "bounds, maxnreg caps them directly: choose one")
    return None


def _in_range(what, value, bounds, target, why):
    lo, hi = bounds
    if not lo <= value <= hi:
        raise UnsupportedOnTarget(f"{what}={value} is outside {target.name}'s range {lo}..{hi} "
                                  f"({why})")


def _nvidia(target, block, min_blocks, maxnreg):
    if maxnreg is not None:
        _in_range("maxnreg", maxnreg, _NV_MAXNREG, target,
                  "registers per thread; ptxas would silently change other values")
        return {"maxnreg": maxnreg}
    if block is None:
        return {}
    hints = {"max_threads": block}
    if min_blocks is not None:
        threads, blocks = _NV_PER_SM[target.name]
        if min_blocks > blocks or min_blocks * block > threads:
            raise UnsupportedOnTarget(
                f"min_blocks={min_blocks} blocks of {block} threads cannot be resident on one "
                f"{target.name} SM (at most {blocks} blocks and {threads} threads); ptxas would "
                f"ignore the hint")
        hints["min_blocks"] = min_blocks
    return hints


def _amd(target, block, min_blocks, maxnreg):
    hints = {"max_threads": block or target.limits.threads_per_block}
    if min_blocks is not None:
        waves = -(-block // target.warp_size) * min_blocks
        per_eu = -(-waves // _AMD_SIMDS_PER_CU)
        if per_eu > _AMD_MAX_WAVES_PER_EU:
            raise UnsupportedOnTarget(
                f"min_blocks={min_blocks} blocks of {block} threads are {waves} waves per CU, "
                f"{per_eu} per SIMD; {target.name} runs at most {_AMD_MAX_WAVES_PER_EU} per "
                f"SIMD ({_AMD_SIMDS_PER_CU} SIMDs per CU)")
        hints["waves_per_eu"] = per_eu
    if maxnreg is not None:
        _in_range("maxnreg", maxnreg, _AMD_MAXNREG, target,
                  "VGPRs per lane, architectural and accumulation together")
        hints["num_vgpr"] = maxnreg // 2
    return hints
