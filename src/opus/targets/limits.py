"""Launch limits of a chip: block and grid shape, shared memory per block.

One ``Limits`` per target (targets/nvidia.py, targets/amd.py hold the numbers and say where each
comes from). Every launch path checks against it through the functions here: the NVIDIA and AMD
GPU entries, and the interpreter running as that target, so a launch the interpreter accepts is
one the GPU accepts, with the same message when it is not.
"""
from __future__ import annotations

import numbers

from ..errors import ArgumentError

__all__ = ["Limits", "check_launch_shape", "check_dynamic_smem", "static_smem_error"]

_AXES = "xyz"


class Limits:
    """block_dims: threads per block along x, y, z; threads_per_block: their product's limit;
    grid_dims: blocks along x, y, z; grid_items: blocks * block size along one axis (AMD
    dispatches count work-items in 32 bits; None where there is no such limit);
    static_smem: bytes of static shared memory per block; smem_per_block: static + dynamic bytes
    with the opt-in (the launch path opts in by itself, so this is the limit that matters).
    A plain class (typing.NamedTuple would make ``import opus`` import typing)."""
    __slots__ = ("block_dims", "threads_per_block", "grid_dims", "grid_items", "static_smem",
                 "smem_per_block")

    def __init__(self, *, block_dims: tuple, threads_per_block: int, grid_dims: tuple,
                 grid_items: int | None, static_smem: int, smem_per_block: int):
        self.block_dims, self.threads_per_block = block_dims, threads_per_block
        self.grid_dims, self.grid_items = grid_dims, grid_items
        self.static_smem, self.smem_per_block = static_smem, smem_per_block

    def __repr__(self):
        return "Limits(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def check_launch_shape(limits: Limits, target: str, kernel: str, grid, block):
    """Refuse a grid/block (3-tuples of positive ints) that ``target`` cannot launch."""
    for n, m, a in zip(block, limits.block_dims, _AXES):
        if n > m:
            raise ArgumentError(f"kernel {kernel!r}: block.{a} = {n} exceeds {target}'s limit of "
                                f"{m} threads along {a} (block={block})")
    nthreads = block[0] * block[1] * block[2]
    if nthreads > limits.threads_per_block:
        raise ArgumentError(f"kernel {kernel!r}: block {block} has {nthreads} threads; {target} "
                            f"allows at most {limits.threads_per_block} per block")
    for g, m, a in zip(grid, limits.grid_dims, _AXES):
        if g > m:
            raise ArgumentError(f"kernel {kernel!r}: grid.{a} = {g} exceeds {target}'s limit of "
                                f"{m} blocks along {a}")
    if limits.grid_items is not None:
        for g, b, a in zip(grid, block, _AXES):
            if g * b > limits.grid_items:
                raise ArgumentError(
                    f"kernel {kernel!r}: grid.{a} * block.{a} = {g} * {b} = {g * b} work-items "
                    f"exceeds {target}'s limit of {limits.grid_items} along {a} (use fewer "
                    f"blocks, each doing more work)")


def check_dynamic_smem(limits: Limits, target: str, kernel: str, smem, static_smem: int,
                       device_max: int | None = None) -> int:
    """``smem=`` (dynamic shared bytes) as an int, refused when it is not a non-negative int or
    when static + dynamic exceed what one block may have (``device_max``, where a device says,
    else the target's table)."""
    if not isinstance(smem, numbers.Integral) or isinstance(smem, bool) or smem < 0:
        raise ArgumentError(f"smem must be a non-negative int of bytes, got {smem!r}")
    smem = int(smem)
    most = limits.smem_per_block if device_max is None else device_max
    total = smem + static_smem
    if total > most:
        who = "the device" if device_max is not None else target
        raise ArgumentError(f"kernel {kernel!r} needs {total} bytes of shared memory "
                            f"({static_smem} static + {smem} dynamic); {who} allows {most} per "
                            f"block")
    return smem


def static_smem_error(limits: Limits, target: str, total: int) -> str | None:
    """Why ``total`` bytes of static shared memory cannot be declared (None if they can)."""
    if total <= limits.static_smem:
        return None
    return (f"static shared memory of {total} bytes exceeds {target}'s limit of "
            f"{limits.static_smem} bytes per block; use opus.dynamic_smem for larger buffers "
            f"(up to {limits.smem_per_block} bytes with the static part)"
            if limits.smem_per_block > limits.static_smem else
            f"static shared memory of {total} bytes exceeds {target}'s limit of "
            f"{limits.static_smem} bytes per block")
