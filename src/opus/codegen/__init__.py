"""Renderers from IR to device source: CUDA C++ (NVIDIA) and HIP C++ (AMD)."""
from .cemit import CodegenError, kernel_symbol


def render(fn, target) -> str:
    """Device source for a traced Function on ``target``."""
    if target.vendor == "nvidia" and fn.attrs.get("body") == "ptx":
        from .ptx import render_ptx_shell  # docs/ptx_body.md
        return render_ptx_shell(fn, target)
    if target.vendor == "nvidia":
        from .cuda import render_cuda
        return render_cuda(fn, target)
    if target.vendor == "amd":
        from .hip import render_hip
        return render_hip(fn, target)
    raise CodegenError(f"no renderer for {target!r}")
