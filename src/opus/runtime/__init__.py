"""opus runtime: NVRTC compile, on-disk binary cache, CUDA driver (load/launch), argument
marshalling and SASS/resource inspection.

Nothing is imported here, so ``import opus.runtime.nvrtc`` stays cheap; submodules load on
first attribute access (``opus.runtime.cuda_driver``).
"""
import importlib

_SUBMODULES = ("nvrtc", "cache", "cuda_driver", "launcher", "device_array", "tensor_args",
               "inspect")
__all__ = list(_SUBMODULES)


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
