"""AMD CDNA targets (gfx942 = MI300, gfx950 = MI350) and their instruction table."""
from __future__ import annotations

from .. import dtypes as dt
from .base import Target
from . import amd_mfma

__all__ = ["AmdTarget", "AMD_ARCHS"]

AMD_ARCHS = ("gfx942", "gfx950")

# The flavoured fp8/bf8 names follow the hardware conversion/MFMA instructions of the chip:
# gfx942 converts FNUZ encodings, gfx950 the OCP ones (inventory section 1.8).
_FLAVOURS = {
    "gfx942": {"fp8": dt.fp8_e4m3fnuz, "bf8": dt.fp8_e5m2fnuz},
    "gfx950": {"fp8": dt.fp8_e4m3, "bf8": dt.fp8_e5m2},
}
_SMEM = {"gfx942": 65536, "gfx950": 163840}  # LDS bytes per workgroup


class AmdTarget(Target):
    vendor = "amd"
    warp_size = 64
    instructions = dict(amd_mfma.INSTRUCTIONS)
    mma_atoms = dict(amd_mfma.ATOMS)

    archs = AMD_ARCHS

    def __init__(self, name):
        super().__init__(name)
        self.flavours = dict(_FLAVOURS[name])
        self.smem_bytes = _SMEM[name]
        self.buffer_config = 0x00020000  # last dword of a raw buffer resource (gfx9 family)
        self.fp8_types = frozenset(d.name for d in self.flavours.values())  # hardware-converted
