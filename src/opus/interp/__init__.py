"""The CPU interpreter: runs the IR of a kernel with numpy, with the hardware's semantics.

``make_runner(kernel, spec)`` is what ``opus.set_target(..., interpret=True)`` launches go
through; ``run_function(fn, target, grid, block, args, smem=0)`` runs an IR Function directly.
Arguments: numpy arrays (C-contiguous, of the parameter's element dtype; written in place) for
pointers, numbers for scalars.

Checking mode (``opus.interp.check = True``, ``with opus.interp.checking():`` or the environment
variable ``OPUS_INTERP_CHECK=1``) also reports shared-memory races between barriers, reads of
shared memory nothing wrote, cross-lane reads of lanes that do not take part (shuffles,
warp reductions: InactiveLaneReadError), and accesses of an async copy's destination before its wait. Out-of-bounds accesses without a bound, misaligned vector accesses
and barriers reached by part of a block are always errors.
"""
from __future__ import annotations

import contextlib
import numbers
import os

import numpy as np

from ..errors import ArgumentError
from ..ir import PointerType, TENSOR_MAP, VectorType
from ..targets.limits import check_dynamic_smem, check_launch_shape
from .engine import Program, Buf
from .errors import (InterpError, MemoryFault, BarrierError, SharedRaceError,
                     UninitializedReadError, AsyncCopyPendingError, InactiveLaneReadError)

__all__ = ["make_runner", "run_function", "check", "checking", "InterpError", "MemoryFault",
           "BarrierError", "SharedRaceError", "UninitializedReadError", "AsyncCopyPendingError",
           "InactiveLaneReadError"]

check = False  # module-level switch for checking mode


def _checking_on():
    return check or os.environ.get("OPUS_INTERP_CHECK", "") not in ("", "0")


@contextlib.contextmanager
def checking(enabled=True):
    """Turn checking mode on (or off) inside a ``with`` block."""
    global check
    prev = check
    check = enabled
    try:
        yield
    finally:
        check = prev


def _ptr_arg(a, name, elem, align):
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"parameter {name!r} expects a numpy array in the interpreter, got "
                            f"{type(a).__name__}")
    if elem.packed:  # sub-byte types take their packed bytes (host_types.py)
        from ..host_types import packed_arg_error
        why = packed_arg_error(elem, a.dtype, a.nbytes)
        if why is not None:
            raise ArgumentError(f"parameter {name!r}: {why}")
    elif a.dtype != elem.np_dtype:
        raise ArgumentError(f"parameter {name!r} expects an array of {elem.name} "
                            f"({elem.np_dtype}), got {a.dtype}")
    if not a.flags.c_contiguous:
        raise ArgumentError(f"parameter {name!r}: the array must be C-contiguous "
                            f"(use np.ascontiguousarray)")
    addr = a.ctypes.data
    if align > 1 and addr % align:
        raise ArgumentError(f"parameter {name!r}: address {hex(addr)} is not aligned to {align} "
                            f"bytes, which the kernel's {align}-byte vector accesses need")
    return Buf(a.reshape(-1), name, "global", addr, ebits=elem.bits if elem.packed else None)


def _dim3(x, what):
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        x = (x,)
    if (not isinstance(x, (tuple, list)) or not 1 <= len(x) <= 3
            or any(not isinstance(d, numbers.Integral) or isinstance(d, bool) or d < 1 for d in x)):
        raise ArgumentError(f"{what} must be 1 to 3 positive ints, got {x!r}")
    return tuple(int(d) for d in x) + (1,) * (3 - len(x))


def _smem_checked(prog, name, smem):
    """``smem=`` checked as a GPU launch checks it, with the target's limits."""
    return check_dynamic_smem(prog.target.limits, prog.target.name, name, smem, prog.static_smem)


def _launch_checks(prog, name, grid, block, smem):
    """The checks of a GPU launch, with the target's limits: (grid3, block3, dynamic smem)."""
    grid, block = _dim3(grid, "grid"), _dim3(block, "block")
    check_launch_shape(prog.target.limits, prog.target.name, name, grid, block)
    return grid, block, _smem_checked(prog, name, smem)


def _steps(fn, names_to_index, align):
    from ..runtime.launch_plan import scalar_checker
    steps = []
    for i, p in zip(names_to_index, fn.params):
        if isinstance(p.type, PointerType):
            steps.append((True, i, p.name, p.type.elem, align.get(p.name, 1)))
        elif p.type == TENSOR_MAP:
            steps.append((False, i, p.name, _tensor_map_checker(fn, p.name), None))
        elif isinstance(p.type, VectorType):  # a by-value struct (opus.mdiv): its u32 words
            steps.append((False, i, p.name, _struct_checker(p.name, p.type), None))
        else:
            steps.append((False, i, p.name, scalar_checker(p.name, p.type), None))
    return steps


def _struct_checker(name, t):
    """A by-value struct argument (opus.mdiv, or its bytes) as the vector of words the kernel
    reads."""
    import numpy as np
    from ..runtime.launch_plan import _bytes_checker
    check = _bytes_checker(name, t.n * t.elem.itemsize)
    return lambda a: np.frombuffer(check(a), t.elem.np_dtype).copy()


def _tensor_map_checker(fn, name):
    """An opus.TensorMap argument checked against what the kernel declared of it."""
    from ..runtime.tensor_map import check_tensor_map
    need = (fn.attrs.get("tensor_maps") or {}).get(name)
    return lambda a: check_tensor_map(a, name, need, interpreter=True)


def _convert(steps, args):
    out = []
    for is_ptr, i, name, x, align in steps:
        a = args[i]
        out.append(_ptr_arg(a, name, x, align) if is_ptr else x(a))
    return out


def make_runner(kernel, spec):
    """The launch function for one specialization: run(grid3, block3, args, smem_bytes), where
    grid3 and block3 are the launcher's, already checked against the target
    (frontend/launch.py check_shape)."""
    fn = spec.function
    prog = Program(fn, spec.target)
    idx = [q.index for q in kernel.params if q.kind != "constexpr"]
    steps = _steps(fn, idx, spec.align or {})

    def run(grid, block, args, smem=0):
        smem = _smem_checked(prog, kernel.name, smem)
        prog.launch(grid, block, _convert(steps, args), smem, _checking_on())
    run.program = prog
    return run


def run_function(fn, target, grid, block, args, smem=0):
    """Run IR Function ``fn`` as ``target`` (a Target or its name); ``args`` follow fn.params."""
    if isinstance(target, str):
        from ..targets import get_target
        target = get_target(target)
    cache = fn.__dict__.setdefault("_interp_programs", {})
    prog = cache.get(target.name)
    if prog is None:
        prog = cache[target.name] = Program(fn, target)
    if len(args) != len(fn.params):
        raise ArgumentError(f"kernel {fn.name!r} takes {len(fn.params)} arguments, got {len(args)}")
    steps = _steps(fn, range(len(fn.params)), fn.attrs.get("align") or {})
    grid, block, smem = _launch_checks(prog, fn.name, grid, block, smem)
    prog.launch(grid, block, _convert(steps, args), smem, _checking_on())
