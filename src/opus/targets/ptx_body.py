"""What a PTX body renders (``@opus.kernel(body="ptx")``, docs/ptx_body.md): asked while tracing.

A kernel with ``body="ptx"`` is rendered as PTX inside one CUDA C++ shell (codegen/ptx.py). The
PTX body renders the op kinds of ``PTX_BODY_KINDS``, each possibly with a narrower check of its
types and attributes; tracing asks ``ptx_body_refusal`` for every op it emits, so an op the PTX
body lacks is a TraceError at the user's line (never a fall back to C++, never a render-time
surprise). codegen/ptx.py renders exactly these kinds (a test holds the two to each other).
"""
from __future__ import annotations

from ..ir import PointerType, VectorType

__all__ = ["BODIES", "PTX_BODY_KINDS", "PTX_BODY_MATH", "ptx_body_refusal", "body_refusal"]

BODIES = ("cuda", "ptx")

# math functions whose CUDA lowering is one exact PTX instruction (sqrt.rn, cvt.rmi/rpi/rzi/rni),
# so a PTX body gives the very bits the C++ body gives
PTX_BODY_MATH = frozenset({"sqrt", "floor", "ceil", "trunc", "rint"})

# scalar types a PTX body holds in registers (bool: .pred; narrower integers: a .b32 register
# holding the value sign- or zero-extended; f16/bf16: .b16; pointers: .b64 global, .b32 shared)
_REGISTER_TYPES = frozenset("bool i8 i16 i32 i64 u8 u16 u32 u64 f16 bf16 f32 f64".split())


def _elem(t):
    """The scalar type a value of type t holds in registers (a pointer: none of its elements;
    what is loaded through it is checked as the load's result)."""
    if isinstance(t, PointerType):
        return None
    return t.elem if isinstance(t, VectorType) else t


def _no_nan_attr(types, attrs):
    if attrs.get("nan"):
        return "the nan='fast' min/max (an AMD instruction's rule)"
    return None


def _math(types, attrs):
    if attrs["fn"] not in PTX_BODY_MATH:
        return (f"opus.{attrs['fn']} (the PTX body has the exact math functions "
                f"{', '.join(sorted(PTX_BODY_MATH))})")
    return None


def _cast(types, attrs):
    if attrs["rounding"] == "sr":
        return "stochastic rounding (rounding='sr')"
    return None


def _access(types, attrs):
    for a, what in (("cache", "a cache hint"), ("soffset", "a scalar offset (soffset)"),
                    ("u32", "a u32 offset promise")):
        if attrs.get(a):
            return f"a load or store with {what}"
    return None


def _target_op(types, attrs):
    """wgmma (A from shared memory, or from registers of 16/32-bit elements; f32 or i32
    accumulators, updated in place), its fence/commit/wait, and setmaxnreg."""
    from .nv_wgmma import INSTRUCTIONS, WgmmaControl
    name = attrs["name"]
    row = INSTRUCTIONS.get(name)
    if row is None:
        return f"the instruction {name} (the PTX body has wgmma and setmaxnreg)"
    if isinstance(row, WgmmaControl):
        return None
    if row.c.itemsize != 4:
        return f"{name}: a {row.c.name} accumulator (the PTX body keeps f32 and i32 ones)"
    if row.a_from == "regs" and row.reg_a.itemsize == 1:
        return f"{name}: A of {row.a.name} from registers"
    return None


# op kind -> None (every form) or fn(operand and result types, attrs) -> why not, or None
PTX_BODY_KINDS = {
    "const": None, "binary": _no_nan_attr, "cmp": None, "unary": None, "math": _math,
    "fma": None, "select": None, "cast": _cast, "bitcast": None,
    "vector": None, "extract": None, "insert": None, "broadcast": None, "vector_permute": None,
    "ptr_add": None, "load": _access, "store": _access, "smem_alloc": None, "dyn_smem": None,
    "special": None, "barrier": None, "uniform": None,
    "shuffle": None, "vote": None, "warp_redux": None,
    "sync_warp": None, "named_barrier": None, "memory_fence": None, "clock": None,
    "mbarrier_init": None, "mbarrier_arrive": None, "mbarrier_expect_tx": None,
    "mbarrier_try_wait": None, "mbarrier_wait": None, "fence": None, "tma_load": None,
    "tma_store": None, "bulk_commit_group": None, "bulk_wait_group": None,
    "target_op": _target_op,
    "for": None, "if": None, "while": None, "yield": None, "condition": None, "return": None,
}


def ptx_body_refusal(kind, operand_types, result_types, attrs):
    """Why an op of ``kind`` (with these operand and result types and attrs) cannot be in a PTX
    body, or None where it can."""
    if kind not in PTX_BODY_KINDS:
        return f"op {kind!r}"
    for t in list(operand_types) + list(result_types):
        e = _elem(t)
        if getattr(e, "name", None) is not None and e.name not in _REGISTER_TYPES:
            return f"{e.name} values (op {kind!r})"
    check = PTX_BODY_KINDS[kind]
    return None if check is None else check(list(operand_types) + list(result_types), attrs)


def body_refusal(body, target) -> str | None:
    """Why ``@opus.kernel(body=body)`` cannot be traced for ``target``, or None."""
    if body == "ptx" and target.vendor != "nvidia":
        return (f"body='ptx' renders the kernel as NVIDIA PTX; {target.name} is an "
                f"{target.vendor.upper()} target (leave body at its default 'cuda', which "
                f"renders HIP C++ there)")
    return None
