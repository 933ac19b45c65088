"""NVIDIA targets (sm_80 .. sm_90a) and their instruction table."""
from __future__ import annotations

from .. import dtypes as dt
from .base import Target
from . import nv_mma

__all__ = ["NvidiaTarget", "NVIDIA_ARCHS"]

NVIDIA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")


class NvidiaTarget(Target):
    vendor = "nvidia"
    warp_size = 32
    flavours = {"fp8": dt.fp8_e4m3, "bf8": dt.fp8_e5m2}
    instructions = dict(nv_mma.INSTRUCTIONS)
    mma_atoms = dict(nv_mma.ATOMS)

    archs = NVIDIA_ARCHS

    def __init__(self, name):
        super().__init__(name)
        self.sm = int(name[3:5])  # 80, 86, 89, 90
