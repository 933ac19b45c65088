"""Generated CUDA and HIP C++ executed on the host CPU (README.md in this folder)."""
from .runner import (HostExecError, HostKernel, HostProgram, Launch, NotHostExecutable,
                     host_cxx, run_kernel)

__all__ = ["HostExecError", "HostKernel", "HostProgram", "Launch", "NotHostExecutable",
           "host_cxx", "run_kernel"]
