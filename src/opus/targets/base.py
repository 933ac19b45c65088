"""Targets: what a chip offers, asked by the language layer while tracing.

A Target answers: warp size, which fp8 encodings the flavoured ``fp8``/``bf8`` names mean,
which target instructions exist (the instruction table) and which matrix atoms it has.
Each Instruction keeps, in one place, its availability, its lowering per backend, its lane
layout (for matrix instructions) and its interpreter emulation.
"""
from __future__ import annotations

from ..errors import OpusError

__all__ = ["Target", "Instruction", "UnsupportedOnTarget"]


class UnsupportedOnTarget(OpusError):
    pass


class Instruction:
    """A target instruction (an IR ``target_op``).

    name:      key used in the IR (``attrs['name']``)
    archs:     predicate target -> bool: does this chip have it
    result_types: fn(operand_types, attrs) -> list of result types (also validates operands)
    lower:     {backend: fn(operand_exprs, result_vars, attrs) -> list of C lines}
    emulate:   fn(operands (numpy arrays: [threads] or [threads, lanes]), attrs, warp_size)
               -> list of result arrays (same convention); the interpreter's semantics
    """

    def __init__(self, name, archs, result_types, lower, emulate, doc=""):
        self.name, self.archs, self.result_types = name, archs, result_types
        self.lower, self.emulate, self.doc = lower, emulate, doc


class Target:
    """A compilation target (one chip family member)."""

    vendor = "?"
    warp_size = 32
    archs: tuple = ()  # the arch names this class stands for

    def __init__(self, name):
        if name not in self.archs:
            raise ValueError(f"unknown {self.vendor} arch {name!r}; known: {self.archs}")
        self.name = name

    # -- dtypes -----------------------------------------------------------------------------
    flavours: dict = {}

    def resolve_dtype(self, d):
        """Concrete type for a target-flavoured name (fp8/bf8); other types unchanged."""
        if d.flavour is None:
            return d
        return self.flavours[d.flavour]

    # -- instructions ------------------------------------------------------------------------
    instructions: dict = {}

    def instruction(self, name, what=None) -> Instruction:
        ins = self.instructions.get(name)
        if ins is None or not ins.archs(self):
            raise UnsupportedOnTarget(f"{what or name} is not available on {self.name}")
        return ins

    mma_atoms: dict = {}  # (a, b, c, (m, n, k)) -> instruction name

    def mma_instruction(self, a, b, c, shape):
        name = self.mma_atoms.get((a.name, b.name, c.name, tuple(shape)))
        if name is None or not self.instructions[name].archs(self):
            have = sorted(f"{k[0]}x{k[1]}->{k[2]} {k[3][0]}x{k[3][1]}x{k[3][2]}"
                          for k, n in self.mma_atoms.items() if self.instructions[n].archs(self))
            raise UnsupportedOnTarget(
                f"no matrix instruction for {a.name} x {b.name} -> {c.name} with shape "
                f"{'x'.join(map(str, shape))} on {self.name}; available: {', '.join(have) or 'none'}")
        return self.instructions[name]

    def __repr__(self):
        return f"<Target {self.name}>"
