"""What each chip has for atomics and synchronization: rows asked while tracing (lang/atomics.py,
lang/sync.py). The renderers spell what a row names; the interpreter follows the semantics of
ir/ops.py plus the few numeric facts kept here (``f32_add_flushes``).

Atomic rows are keyed (op, type, space): type is a dtype name or a packed pair ('f16x2',
'bf16x2'); space is 'global', 'shared' or 'buffer' (an AMD bounded view: buffer_atomic_*, the
buffer unit's range check drops out-of-range lanes). A row's value is the instruction the
compiler emits for it (the SASS or AMDGCN mnemonic tests look for). Sources: PTX ISA "atom" /
"red" (types per op; .bf16x2 add needs sm_90, checked against ptxas: "requires .target sm_90
or higher"); the CDNA3/CDNA4 ISA guides' global, buffer and DS atomics, checked against clang
22 (gfx942 has no global or buffer f32 min/max: clang emits a CAS loop; buffer pk_add_bf16 is
gfx950 only: the backend cannot select it for gfx942).
"""
from __future__ import annotations

from .base import UnsupportedOnTarget

__all__ = ["ATOMIC_OPS", "ORDERS", "SCOPES", "atomic_row", "atomic_rows", "f32_add_flushes",
           "require_named_barrier", "require_amd_hint", "require_clock", "CLOCKS", "HINTS"]

ATOMIC_OPS = ("add", "min", "max", "exch", "cas", "and", "or", "xor", "inc", "dec", "load",
              "store")
ORDERS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("block", "device", "system")

_INTS32 = ("i32", "u32")
_INTS64 = ("i64", "u64")
_INTS = _INTS32 + _INTS64
_BITS = _INTS + ("f32", "f64")   # exch, cas, load, store move bits


def _nvidia_rows(target):
    """PTX atom/red on .global and .shared (every chip here is sm_80 or later)."""
    rows = {}
    packed = ("f16x2", "bf16x2") if target.arch.capability >= (9, 0) else ("f16x2",)
    for space, unit in (("global", "ATOMG"), ("shared", "ATOMS")):
        for t in _INTS + ("f32", "f64") + packed:
            rows[("add", t, space)] = f"{unit}.ADD"
        for op in ("min", "max"):
            for t in _INTS:
                rows[(op, t, space)] = f"{unit}.{op.upper()}"
        for op in ("and", "or", "xor"):
            for t in _INTS:
                rows[(op, t, space)] = f"{unit}.{op.upper()}"
        for t in _BITS:
            rows[("exch", t, space)] = f"{unit}.EXCH"
            rows[("cas", t, space)] = f"{unit}.CAS"
            rows[("load", t, space)] = "LD"
            rows[("store", t, space)] = "ST"
        rows[("inc", "u32", space)] = f"{unit}.INC"
        rows[("dec", "u32", space)] = f"{unit}.DEC"
    return rows


def _amd_rows(target):
    """CDNA3/CDNA4 global_atomic_*, ds_* and buffer_atomic_* (gfx942, gfx950)."""
    rows = {}
    int_op = {"add": "add", "and": "and", "or": "or", "xor": "xor", "exch": "swap",
              "cas": "cmpswap"}
    for t in _INTS:
        x2 = "_x2" if t in _INTS64 else ""
        for op, name in int_op.items():
            rows[(op, t, "global")] = f"global_atomic_{name}{x2}"
        for op in ("min", "max"):
            rows[(op, t, "global")] = f"global_atomic_{'s' if t[0] == 'i' else 'u'}{op}{x2}"
        for op, name in int_op.items():  # the mnemonic's stem (ds_add_rtn_u32, ds_and_b64, ...)
            rows[(op, t, "shared")] = {"swap": "ds_wrxchg", "cmpswap": "ds_cmpst"}.get(name, f"ds_{name}")
        for op in ("min", "max"):
            rows[(op, t, "shared")] = f"ds_{op}"
    for t in ("f32", "f64"):
        x2 = "_x2" if t == "f64" else ""
        rows[("exch", t, "global")] = f"global_atomic_swap{x2}"
        rows[("cas", t, "global")] = f"global_atomic_cmpswap{x2}"
        rows[("exch", t, "shared")] = "ds_wrxchg"
        rows[("cas", t, "shared")] = "ds_cmpst"
        rows[("add", t, "global")] = f"global_atomic_add_{t}"
        rows[("add", t, "shared")] = f"ds_add_{t}"
        rows[("min", t, "shared")] = f"ds_min_{t}"
        rows[("max", t, "shared")] = f"ds_max_{t}"
    rows[("min", "f64", "global")] = "global_atomic_min_f64"
    rows[("max", "f64", "global")] = "global_atomic_max_f64"
    for t in ("f16x2", "bf16x2"):
        rows[("add", t, "global")] = f"global_atomic_pk_add_{t[:-2]}"
        rows[("add", t, "shared")] = f"ds_pk_add_{t[:-2]}"
    for space in ("global", "shared"):
        for t in _BITS:
            rows[("load", t, space)] = "load"
            rows[("store", t, space)] = "store"
        prefix = "global_atomic_" if space == "global" else "ds_"
        rows[("inc", "u32", space)] = f"{prefix}inc{'_u32' if space == 'shared' else ''}"
        rows[("dec", "u32", space)] = f"{prefix}dec{'_u32' if space == 'shared' else ''}"
    # buffer atomics (bounded views): the 32-bit integer ops, f32 / f64 add, f64 min/max and
    # the packed halves; bf16x2 on gfx950 only
    for t in _INTS32:
        for op in ("add", "and", "or", "xor", "exch", "cas"):
            rows[(op, t, "buffer")] = f"buffer_atomic_{int_op[op]}"
        for op in ("min", "max"):
            rows[(op, t, "buffer")] = f"buffer_atomic_{'s' if t[0] == 'i' else 'u'}{op}"
    rows[("add", "f32", "buffer")] = "buffer_atomic_add_f32"
    rows[("add", "f64", "buffer")] = "buffer_atomic_add_f64"
    rows[("min", "f64", "buffer")] = "buffer_atomic_min_f64"
    rows[("max", "f64", "buffer")] = "buffer_atomic_max_f64"
    rows[("add", "f16x2", "buffer")] = "buffer_atomic_pk_add_f16"
    if target.name == "gfx950":
        rows[("add", "bf16x2", "buffer")] = "buffer_atomic_pk_add_bf16"
    return rows


_ROWS = {}


def atomic_rows(target) -> dict:
    """{(op, type, space): instruction} of ``target`` (made once per chip)."""
    rows = _ROWS.get(target.name)
    if rows is None:
        rows = _ROWS[target.name] = (_nvidia_rows if target.vendor == "nvidia" else _amd_rows)(target)
    return rows


def atomic_row(target, op, type_key, space) -> str:
    """The instruction of atomic ``op`` on ``type_key`` in ``space``, or UnsupportedOnTarget
    naming the chip and the types it has for that op there."""
    rows = atomic_rows(target)
    row = rows.get((op, type_key, space))
    if row is not None:
        return row
    have = [t for (o, t, s) in rows if o == op and s == space]
    where = {"global": "global memory", "shared": "shared memory",
             "buffer": "a bounded global view (buffer atomics)"}[space]
    raise UnsupportedOnTarget(
        f"atomic_{op} on {type_key} in {where} is not available on {target.name}; it has "
        f"atomic_{op} there for {', '.join(have) or 'no type'}")


def f32_add_flushes(target, space) -> bool:
    """Does an f32 atomic add flush subnormal inputs and results to (sign-preserving) zero:
    NVIDIA's global-memory atom/red .add.f32 do (PTX ISA, atom; SASS REDG.E.ADD.F32.FTZ.RN),
    its shared-memory adds are a CAS loop around an FADD that keeps subnormals."""
    return target.vendor == "nvidia" and space == "global"


# -- synchronization ------------------------------------------------------------------------
def require_named_barrier(target, what):
    """NVIDIA has 16 hardware barriers per block (bar.sync / bar.arrive id, count); CDNA has
    one (s_barrier)."""
    if target.vendor != "nvidia":
        raise UnsupportedOnTarget(
            f"{what} is not available on {target.name}: CDNA has one workgroup barrier "
            f"(s_barrier, opus.sync_threads) and no named or partial barriers")


HINTS = ("s_setprio", "s_nop", "s_sleep", "sched_barrier", "sched_group_barrier")


def require_amd_hint(target, name):
    """The AMD scheduling and wave-priority instructions exist on CDNA only."""
    if target.vendor != "amd":
        raise UnsupportedOnTarget(
            f"opus.{name} is not available on {target.name}: it is an AMD instruction "
            f"(ptxas schedules NVIDIA code itself and has no equivalent)")


# clock reads: name -> {vendor: (result dtype name, spelling)}
CLOCKS = {
    "clock": {"nvidia": ("u32", "%clock"), "amd": ("u32", "s_memtime")},
    "clock64": {"nvidia": ("u64", "%clock64"), "amd": ("u64", "s_memtime")},
    "globaltimer": {"nvidia": ("u64", "%globaltimer")},
    "s_memtime": {"amd": ("u64", "s_memtime")},
    "s_memrealtime": {"amd": ("u64", "s_memrealtime")},
}


def require_clock(target, name) -> str:
    """The result dtype name of clock read ``name`` on ``target``, or UnsupportedOnTarget."""
    row = CLOCKS[name].get(target.vendor)
    if row is None:
        alt = {"globaltimer": "opus.s_memrealtime() (a constant 100 MHz counter)",
               "s_memtime": "opus.clock64()", "s_memrealtime": "opus.globaltimer() (nanoseconds)"}
        raise UnsupportedOnTarget(f"opus.{name} is not available on {target.name}; use "
                                  f"{alt[name]}")
    return row[0]
