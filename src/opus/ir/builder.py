"""Builder: appends ops to the current block and enforces scoping while tracing."""
from __future__ import annotations

from .core import Block, Op, Value
from .ops import OPS

__all__ = ["Builder", "ScopeError"]


class ScopeError(Exception):
    """A value was used outside the block (loop body, branch) that defines it."""


class Builder:
    """Holds the block stack of the function being traced.

    ``value_class`` lets the language layer give results its operator-overloading subclass of
    ir.Value while the IR itself stays free of language rules.
    """

    def __init__(self, body: Block, value_class=Value, loc_fn=None):
        self.stack = [body]
        self.value_class = value_class
        self.loc_fn = loc_fn or (lambda: None)

    @property
    def block(self) -> Block:
        return self.stack[-1]

    def push(self, block: Block):
        self.stack.append(block)

    def pop(self) -> Block:
        return self.stack.pop()

    def new_block(self) -> Block:
        return Block(parent=self.block, value_class=self.value_class)

    def check_visible(self, v, what="value"):
        if not isinstance(v, Value):
            raise TypeError(f"IR operand must be a Value, got {type(v).__name__}")
        if v.block is not None and not v.block.encloses(self.block):
            raise ScopeError(
                f"a {what} computed inside a run-time loop or branch is used outside it; "
                f"carry it through the loop (rebind the variable before the loop) or define it "
                f"in both branches")

    def emit(self, kind, operands=(), result_types=(), attrs=None, regions=(), loc=None):
        spec = OPS[kind]
        if spec.operands is not None and len(operands) != spec.operands:
            raise ValueError(f"{kind} takes {spec.operands} operands, got {len(operands)}")
        for o in operands:
            self.check_visible(o)
        op = Op(kind, operands, attrs or {}, loc if loc is not None else self.loc_fn(), regions)
        blk = self.block
        op.results = [self.value_class(t, op, blk) for t in result_types]
        blk.ops.append(op)
        return op
