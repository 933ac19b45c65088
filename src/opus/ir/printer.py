"""Text form of the IR, for tests, debugging and ``kernel.ir()``."""
from __future__ import annotations

from .types import type_str

__all__ = ["format_function"]


def _attrs(op):
    if not op.attrs:
        return ""
    parts = []
    for k, v in op.attrs.items():
        parts.append(f"{k}={getattr(v, 'name', v)!s}" if hasattr(v, "bits") else f"{k}={v!r}")
    return " {" + ", ".join(parts) + "}"


def _value(v):
    return f"%{v.id}:{type_str(v.type)}"


def _block(block, indent, out):
    pad = "  " * indent
    for op in block.ops:
        res = ", ".join(map(_value, op.results))
        lhs = f"{res} = " if res else ""
        ops = ", ".join(f"%{o.id}" for o in op.operands)
        out.append(f"{pad}{lhs}{op.kind}({ops}){_attrs(op)}")
        for i, region in enumerate(op.regions):
            args = ", ".join(map(_value, region.args))
            out.append(f"{pad}  ^{i}({args}):")
            _block(region, indent + 2, out)


def format_function(fn) -> str:
    params = ", ".join(f"{p.name}: {type_str(p.type)} = %{p.value.id}" for p in fn.params)
    out = [f"kernel {fn.name}({params}) {fn.attrs!r}"]
    _block(fn.body, 1, out)
    return "\n".join(out)
