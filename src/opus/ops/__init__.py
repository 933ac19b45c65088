"""The kernel library: torch-facing operations written with opus's public language (each module
says its design; docs/ops.md lists them). Import it as ``opus.ops``."""
from .gemm_hopper import gemm, scaled_gemm

__all__ = ["gemm", "scaled_gemm"]
