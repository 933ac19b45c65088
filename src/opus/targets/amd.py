"""AMD CDNA targets (gfx942 = MI300, gfx950 = MI350) and their instruction table."""
from __future__ import annotations

from .. import dtypes as dt
from .base import Target, UnsupportedOnTarget
from .limits import Limits

__all__ = ["AmdTarget", "AMD_ARCHS"]

AMD_ARCHS = ("gfx942", "gfx950")

# The flavoured fp8/bf8 names follow the hardware conversion/MFMA instructions of the chip:
# gfx942 converts FNUZ encodings, gfx950 the OCP ones (inventory section 1.8).
_FLAVOURS = {
    "gfx942": {"fp8": dt.fp8_e4m3fnuz, "bf8": dt.fp8_e5m2fnuz},
    "gfx950": {"fp8": dt.fp8_e4m3, "bf8": dt.fp8_e5m2},
}
_SMEM = {"gfx942": 65536, "gfx950": 163840}  # LDS bytes per workgroup (CDNA3 / CDNA4 ISA guides)
# f64 functions the AMDGPU backend lowers without a device library (the others need ocml)
_MATH_F64 = frozenset(("sqrt", "rsqrt", "floor", "ceil", "trunc", "rint"))


def _limits(name):
    """Workgroups of at most 1024 work-items, (1024, 1024, 1024) per axis (HIP's
    maxThreadsPerBlock / maxThreadsDim on CDNA). Blocks per grid axis: 2^31-1, the limit of
    HIP's gridDim and of the language's i32 block ids. The HSA dispatch packet holds each grid
    axis in work-items as a u32, so blocks * block size must stay below 2^32 per axis (HIP
    refuses a larger launch with hipErrorInvalidValue). LDS is the only shared memory: static
    and dynamic together fit in it, with no opt-in."""
    lds = _SMEM[name]
    return Limits(block_dims=(1024, 1024, 1024), threads_per_block=1024,
                  grid_dims=(2 ** 31 - 1,) * 3, grid_items=2 ** 32 - 1,
                  static_smem=lds, smem_per_block=lds)


# Cache hints as the cache-policy bits of buffer and global instructions (the aux argument
# of the buffer builtins, as the original's aux: CDNA3/CDNA4 have sc0 and sc1 (coherence
# scope) and nt (non-temporal); LLVM's immediate for gfx940+: bit 0 sc0, bit 1 nt, bit 4 sc1).
# Of the portable hints only STREAMING (nt) is a cache hint there; scope bits are memory-model
# choices, not hints.
_CACHE_HINTS = {"normal": {"load": 0, "store": 0}, "streaming": {"load": 2, "store": 2}}


def _packed_conversions(flavours):
    """Two lanes per instruction: v_cvt_pk_{fp8,bf8}_f32 (f32 -> the flavour's fp8) and
    v_cvt_pk_f32_{fp8,bf8} (back to f32, on to f16/bf16 from there). CDNA4's f32 -> bf16
    (v_cvt_pk_bf16_f32) pairs without help: clang fuses two (__bf16) casts into one."""
    table = {}
    for d in flavours.values():
        kind = "fp8" if "e4m3" in d.name else "bf8"
        table[("f32", d.name, "rn")] = f"v_cvt_pk_{kind}_f32"
        for to in ("f32", "f16", "bf16"):
            table[(d.name, to, "rn")] = f"v_cvt_pk_f32_{kind}"
    return table


# gfx950's fp4 conversions are its scaled ones (CDNA4 has no unscaled f32 <-> fp4 instruction),
# used with the scale 1.0 (f32 bits 0x3F800000: exponent field 127, 2^0 under every reading of
# the operand), where they are plain casts (docs/language.md, "Hardware conversions on gfx950"):
# v_cvt_scalef32_pk_fp4_f32 rounds two f32 to nearest even into one byte (src0 the low
# nibble), fed values clamped to +-6 with NaN fixed up after it, so neither its overflow nor
# its NaN rule (on which AMD's sources disagree) reaches a result; v_cvt_scalef32_pk_f32_fp4
# decodes one byte into two f32, exact. Sources: clang BuiltinsAMDGPU.def ("gfx950-insts"),
# HIP's amd_hip_ocp_fp.hpp (__amd_cvt_floatx2_to_fp4x2_scale, __amd_scale_to_float) and its
# host model amd_hip_ocp_host.hpp (from_float / to_float: exponent arithmetic, one
# nearest-even rounding, saturation to +-6), CK's f4_convert_rne.
_GFX950_FP4 = {("f32", "fp4_e2m1", "rn"): "v_cvt_scalef32_pk_fp4_f32",
               **{("fp4_e2m1", to, "rn"): "v_cvt_scalef32_pk_f32_fp4" for to in ("f32", "f16", "bf16")}}


class AmdTarget(Target):
    vendor = "amd"
    warp_size = 64

    @classmethod
    def _load_instruction_tables(cls):
        from . import amd_mfma, amd_ds_tr
        return {**amd_mfma.INSTRUCTIONS, **amd_ds_tr.INSTRUCTIONS}, amd_mfma.ATOMS

    names = AMD_ARCHS
    cache_hints = _CACHE_HINTS
    cache_hints_missing = ("CDNA buffer and global instructions carry coherence-scope (sc0, "
                           "sc1) and non-temporal (nt) bits only: STREAMING is the hint they "
                           "express")
    math_f64 = _MATH_F64
    cp_async_missing = ("cp.async is NVIDIA's; AMD copies global memory to LDS with "
                        "opus.copy_async_lds (buffer_load ... lds), which writes one slot per "
                        "lane from a wave-uniform LDS base instead of any address per thread")
    s_waitcnt_missing = None
    # v_min/v_max_f32/f64 in IEEE mode quiet a signaling NaN operand (the exact rule skips
    # it: the compiler quiets operands first, v_max x, x, unless they are computed values)
    fast_minmax_nan = "ieee2008"
    dpp_missing = None          # GFX9 DPP16: quad_perm, row shifts, wave shifts, row_bcast
    ds_permute_missing = None
    async_waits_count_copies = True  # s_waitcnt vmcnt: wait_async(n) counts the groups' copies
    tma_missing = ("AMD GPUs have no tensor memory accelerator (TMA) or mbarriers (they are "
                   "NVIDIA sm_90 features)")
    printf_missing = ("device printf needs the ROCm device library's hostcall buffer (ockl), "
                      "which headerless device-only builds do not link")

    def mma_instruction(self, a, b, c, shape, scaled=False):
        """The base's lookup; for a scaled request or the f8f6f4 family's element types (fp4,
        fp6, e8m0) the error also says what the block-scaled MFMAs take (amd_mfma.missing_reason)."""
        from . import amd_mfma
        try:
            return super().mma_instruction(a, b, c, shape, scaled)
        except UnsupportedOnTarget as e:
            why = amd_mfma.missing_reason(self.name, a, b, c, shape, scaled)
            if why is None:
                raise
            raise UnsupportedOnTarget(f"{e}. {why}") from None

    def __init__(self, name):
        super().__init__(name)
        self.flavours = dict(_FLAVOURS[name])
        self.smem_bytes = _SMEM[name]
        self.limits = _limits(name)
        self.buffer_config = 0x00020000  # last dword of a raw buffer resource (gfx9 family)
        # the flavour's encodings convert in hardware (v_cvt_f32_fp8, v_cvt_pk_fp8_f32, ...); the
        # other flavour and e8m0 in the same exact bit arithmetic as on NVIDIA (codegen/fp8.py)
        self.hw_fp8 = frozenset(d.name for d in self.flavours.values())
        # f32 -> bf16 round-to-nearest-even in one instruction (v_cvt_pk_bf16_f32, CDNA4);
        # gfx942 rounds in integer arithmetic
        self.hw_bf16 = name == "gfx950"
        # stochastic rounding in one instruction: v_cvt_sr_{fp8,bf8}_f32 (the flavour's fp8),
        # and on CDNA4 v_cvt_sr_{bf16,f16}_f32
        self.hw_sr = self.hw_fp8 | (frozenset(("bf16", "f16")) if name == "gfx950" else frozenset())
        self.packed_conversions = _packed_conversions(self.flavours)
        if name == "gfx950":
            self.packed_conversions.update(_GFX950_FP4)
        # buffer_load_{ubyte,ushort,dword} ... lds; CDNA4 adds dwordx3 and dwordx4 (clang's
        # __builtin_amdgcn_raw_ptr_buffer_load_lds refuses other sizes: "invalid size value")
        self.lds_load_sizes = (1, 2, 4, 12, 16) if name == "gfx950" else (1, 2, 4)
