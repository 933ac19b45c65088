"""The opus IR: typed, structured (regions instead of gotos), in SSA form.

A kernel is a ``Function`` whose ``body`` Block holds ``Op``s. Control flow is structured:
``for``/``if``/``while`` ops own nested Blocks; values that flow around a loop or out of a branch
are block arguments and ``yield`` operands, as in MLIR's scf dialect. Every backend (CUDA and HIP
renderers, the numpy interpreter) walks this one form. The op catalogue, with each op's operands,
attributes and results, is ``OPS`` in ``ir/ops.py``.
"""
from __future__ import annotations

import itertools

from .types import type_str

__all__ = ["Value", "Op", "Block", "Function", "Param", "Loc"]

_ids = itertools.count()


class Loc:
    """A source location in the user's kernel (file, line, function), and the text of that
    line as the kernel's source snapshot had it (None: unknown), so generated comments show the
    code that was traced even if the file was edited since."""

    __slots__ = ("file", "line", "func", "text")

    def __init__(self, file: str, line: int, func: str = "", text: str | None = None):
        self.file, self.line, self.func, self.text = file, line, func, text

    def __repr__(self):
        return f"{self.file}:{self.line}"


class Value:
    """An SSA value: the result of an op or an argument of a block.

    ``owner`` is the defining Op (None for block arguments); ``block`` is the Block it is
    visible in (its definition's block), used to reject uses outside their scope.
    """

    __slots__ = ("type", "owner", "block", "id", "hint")

    def __init__(self, type, owner=None, block=None, hint=None):
        self.type = type
        self.owner = owner
        self.block = block
        self.id = next(_ids)
        self.hint = hint

    def __repr__(self):
        return f"%{self.id}:{type_str(self.type)}"


class Op:
    """One operation: ``kind`` names it in the catalogue (ir/ops.py); ``attrs`` hold static data."""

    __slots__ = ("kind", "operands", "results", "attrs", "regions", "loc")

    def __init__(self, kind, operands, attrs, loc, regions=()):
        self.kind = kind
        self.operands = list(operands)
        self.results = []
        self.attrs = attrs
        self.regions = list(regions)
        self.loc = loc

    @property
    def result(self):
        if len(self.results) != 1:
            raise ValueError(f"op {self.kind} has {len(self.results)} results")
        return self.results[0]

    def __repr__(self):
        return f"<Op {self.kind}>"


class Block:
    """A straight-line list of ops with arguments (loop induction/carried values)."""

    __slots__ = ("ops", "args", "parent", "value_class")

    def __init__(self, parent=None, value_class=None):
        self.ops = []
        self.args = []
        self.parent = parent  # the enclosing Block (None for a function body)
        # class of the block's argument values (the language layer's Value subclass)
        self.value_class = value_class or (parent.value_class if parent else Value)

    def add_arg(self, type, hint=None):
        v = self.value_class(type, None, self, hint)
        self.args.append(v)
        return v

    def encloses(self, other: "Block") -> bool:
        """True if ``self`` is ``other`` or one of its ancestors."""
        b = other
        while b is not None:
            if b is self:
                return True
            b = b.parent
        return False


class Param:
    """A kernel parameter: name, IR type (scalar or pointer) and its body block argument."""

    __slots__ = ("name", "type", "value")

    def __init__(self, name, type, value):
        self.name, self.type, self.value = name, type, value

    def __repr__(self):
        return f"{self.name}: {type_str(self.type)}"


class Function:
    """A traced kernel.

    attrs: ``block_size`` (fixed threads per block or None -> launch bounds), ``min_blocks``
    and ``maxnreg`` (occupancy and register hints: targets/occupancy.py), ``target`` (the
    Target's name), ``dyn_smem`` (True if the kernel reads dynamic shared memory).
    """

    def __init__(self, name, params, body, attrs=None):
        self.name = name
        self.params = params
        self.body = body
        self.attrs = attrs or {}

    def walk(self):
        """All ops, pre-order, descending into regions."""
        def rec(block):
            for op in block.ops:
                yield op
                for r in op.regions:
                    yield from rec(r)
        return rec(self.body)

    def __str__(self):
        from .printer import format_function
        return format_function(self)
