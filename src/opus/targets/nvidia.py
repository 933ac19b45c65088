"""NVIDIA targets (sm_80 .. sm_90a) and their instruction table."""
from __future__ import annotations

from .. import dtypes as dt
from .base import Target
from .limits import Limits

__all__ = ["NvidiaTarget", "NVIDIA_ARCHS"]

NVIDIA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")

# Shared memory a block may have with the opt-in (cudaDevAttrMaxSharedMemoryPerBlockOptin; CUDA
# C++ Programming Guide, "Technical Specifications per Compute Capability": 163 KB on 8.0,
# 99 KB on 8.6 and 8.9, 227 KB on 9.0).
_SMEM_OPTIN = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448,
               "sm_90a": 232448}


def _limits(name):
    """The Programming Guide's per-compute-capability table: blocks of at most 1024 threads,
    (1024, 1024, 64) per axis; grids of (2^31-1, 65535, 65535) blocks. Static __shared__ is at
    most 48 KB per block (ptxas refuses more: "uses too much shared data (..., 0xc000 max)"),
    as is dynamic shared memory without the opt-in that the launch path makes by itself."""
    return Limits(block_dims=(1024, 1024, 64), threads_per_block=1024,
                  grid_dims=(2 ** 31 - 1, 65535, 65535), grid_items=None,
                  static_smem=48 * 1024, smem_per_block=_SMEM_OPTIN[name])


# Cache hints as PTX ld/st qualifiers (PTX ISA, "ld" and "st": cache operators .cs/.lu, the
# non-coherent read-only path ld.global.nc, L1 eviction priorities). The .L2::evict_* forms
# need 256-bit accesses (sm_100), so EVICT_FIRST/LAST are the L1 priorities. SASS: LDG.E.EF
# (.cs, .L1::evict_first), .LU, .CONSTANT (.nc), .EL, .NA.
_CACHE_HINTS = {
    "normal": {"load": "", "store": ""},
    "streaming": {"load": ".cs", "store": ".cs"},
    "last_use": {"load": ".lu"},
    "read_only": {"load": ".nc"},
    "evict_first": {"load": ".L1::evict_first", "store": ".L1::evict_first"},
    "evict_last": {"load": ".L1::evict_last", "store": ".L1::evict_last"},
    "no_allocate": {"load": ".L1::no_allocate", "store": ".L1::no_allocate"},
}


def _packed_conversions(hw_fp8):
    """Two lanes per cvt (PTX ISA, cvt): f32 -> f16x2/bf16x2 with .rn or .rz (sm_80), and where
    the chip converts OCP fp8 (sm_89) f32 -> e4m3x2/e5m2x2 (.rn.satfinite) and e4m3x2/e5m2x2 ->
    f16x2 (lanes that continue to f32 or bf16 widen from there). e2m1x2 needs sm_100a: none of
    these chips has it."""
    table = {("f32", h, r): f"cvt.{r}.{h}x2.f32" for h in ("f16", "bf16") for r in ("rn", "rz")}
    for d in sorted(hw_fp8):
        kind = d.split("_")[1] + "x2"
        table[("f32", d, "rn")] = f"cvt.rn.satfinite.{kind}.f32"
        for to in ("f16", "f32", "bf16"):
            table[(d, to, "rn")] = f"cvt.rn.f16x2.{kind}"
    return table


class NvidiaTarget(Target):
    vendor = "nvidia"
    warp_size = 32
    flavours = {"fp8": dt.fp8_e4m3, "bf8": dt.fp8_e5m2}

    @classmethod
    def _load_instruction_tables(cls):
        from . import nv_mma, nv_ldmatrix, nv_wgmma
        return ({**nv_mma.INSTRUCTIONS, **nv_ldmatrix.INSTRUCTIONS, **nv_wgmma.INSTRUCTIONS},
                nv_mma.ATOMS)

    names = NVIDIA_ARCHS
    cache_hints = _CACHE_HINTS
    cache_hints_missing = ("PTX stores have no last-use or read-only (non-coherent) forms: "
                           "those hints apply to loads")
    # cp.async (PTX ISA 7.0, sm_80+): 4, 8 or 16 bytes with .ca, 16 with .cg; every target
    # here is sm_80 or later
    cp_async_sizes = (4, 8, 16)
    lds_load_missing = ("buffer_load ... lds is AMD's; NVIDIA copies global memory to shared "
                        "memory with opus.copy_async (cp.async)")
    s_waitcnt_missing = ("s_waitcnt is AMD's; NVIDIA waits for its async copies with "
                         "opus.wait_async (cp.async.wait_group)")
    dpp_missing = ("DPP (data-parallel primitives: mov_dpp, upd_dpp) is an AMD GFX9 feature; "
                   "NVIDIA moves values between lanes with opus.shfl / shfl_xor / shfl_up / "
                   "shfl_down")
    ds_permute_missing = ("NVIDIA has no forward (push) lane permute: shuffles pull, so invert "
                          "the mapping and use opus.bpermute or opus.shfl")

    def __init__(self, name):
        super().__init__(name)
        self.limits = _limits(name)
        # cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and cvt.rn.f16x2.{e4m3x2,e5m2x2} need sm_89
        # (PTX ISA, cvt); other fp8 encodings and older chips convert in exact bit arithmetic
        self.hw_fp8 = (frozenset(("fp8_e4m3", "fp8_e5m2")) if self.arch.capability >= (8, 9)
                       else frozenset())
        # redux.sync.{add,min,max}.{u32,s32} and .{and,or,xor}.b32: sm_80 (PTX ISA, redux.sync)
        self.has_redux_sync = self.arch.capability >= (8, 0)
        self.packed_conversions = _packed_conversions(self.hw_fp8)
        # cp.async.bulk.tensor, mbarrier expect_tx/try_wait and fence.proxy.async: sm_90 (PTX ISA)
        if self.arch.capability >= (9, 0):
            self.tma_missing = None
        else:
            major, minor = self.arch.capability
            self.tma_missing = (f"TMA and mbarrier waits need compute capability 9.0 (sm_90, "
                                f"sm_90a); {name} is {major}.{minor}")


def tma_box_start_problem(what, coord, dtype) -> str:
    """The message for a box whose innermost start is not 16-byte aligned: the H100 faults with
    an illegal instruction on such a copy (measured: f32 box starts -5, -1, 1, 3 fault; -16, -4,
    0, 20 do not), so the interpreter refuses it with this message and tracing does for static
    coordinates."""
    per = 16 // dtype.itemsize
    return (f"{what}: the innermost coordinate {coord} is not a multiple of {per} {dtype.name} "
            f"elements (16 bytes): a TMA box must start on a 16-byte boundary in its innermost "
            f"dimension (the GPU faults with an illegal instruction otherwise)")


def tma_store_start_problem(coords) -> str | None:
    """Why a TMA store box may not start at ``coords`` (ints), or None: a negative start in any
    dimension faults on the H100 with an illegal instruction (measured: (-2, 0), (0, -4), (-1, 0)
    fault; boxes overhanging the far end, (18, 36) of a 20 x 40 tensor, are clipped as loads)."""
    bad = [(i, c) for i, c in enumerate(coords) if c < 0]
    if not bad:
        return None
    i, c = bad[0]
    return (f"tma_store: coordinate {i} is {c}: a TMA store box may not start before the tensor "
            f"(negative starts fault on the GPU with an illegal instruction; boxes past its end "
            f"are clipped)")
