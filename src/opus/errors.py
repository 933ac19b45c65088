"""Exception classes of opus (a plain module: every layer may import it)."""


class OpusError(Exception):
    """Base of every error opus raises on purpose."""


class OpusRuntimeError(OpusError):
    """Compiler, driver or loader problems."""


class CompileError(OpusError):
    """The device compiler rejected generated code."""


class CudaError(OpusRuntimeError):
    """A CUDA driver call failed."""


class ArgumentError(OpusError, TypeError):
    """A launch argument does not fit its parameter."""
