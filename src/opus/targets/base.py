"""Targets: what a chip offers, asked by the language layer while tracing.

A Target answers: warp size, which fp8 encodings the flavoured ``fp8``/``bf8`` names mean,
what is available (dtypes, conversions and how they are done, math per dtype, printf, launch
and shared-memory limits), which target instructions exist (the instruction table) and which
matrix atoms it has. Tracing asks these questions; the interpreter and the renderers follow the
answers and decide nothing themselves.
Each Instruction keeps, in one place, its availability, its lowering per backend, its lane
layout (for matrix instructions) and its interpreter emulation.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..arch_names import parse_arch
from ..errors import OpusError

__all__ = ["Target", "Instruction", "Since", "OnlyOn", "UnsupportedOnTarget", "RZ_CONVERSIONS",
           "TRUNCATE_CONVERSIONS", "SR_CONVERSIONS", "SR_FORMATS", "SR_SOURCES", "ROUNDINGS"]


class UnsupportedOnTarget(OpusError):
    """What a kernel asks for does not exist on the target (a trace-time error)."""


# Types no target holds in registers. The sub-byte types (fp4, fp6, int4, uint4) are held
# everywhere: a scalar is a byte with the code in its low bits, a vector packs them (ir/ops.py).
_NO_REGISTER_FORM = {}
_NO_REGISTER_FORM["tf32"] = ("tf32 is the tensor cores' input format, not a register type: keep "
                             "the values in f32 and ask make_mma(opus.tf32, opus.tf32, opus.f32, "
                             "shape), whose operands are f32 registers")
# conversions that may truncate (rounding='rz'); every other one rounds to nearest even
RZ_CONVERSIONS = ("f16", "bf16", "e8m0")
# the original's bf16 truncations (ir/ops.py cast): its modes 2 and 1
TRUNCATE_CONVERSIONS = ("bf16",)
# stochastic rounding (rounding='sr', random bits an operand): destinations and sources
# destination -> (mantissa bits m, smallest normal exponent emin), the parameters of the rule
SR_FORMATS = {"f16": (10, -14), "bf16": (7, -126), "fp8_e4m3": (3, -6), "fp8_e5m2": (2, -14),
              "fp8_e4m3fnuz": (3, -7), "fp8_e5m2fnuz": (2, -15), "fp6_e2m3": (3, 0),
              "fp6_e3m2": (2, -2), "fp4_e2m1": (1, 0)}
SR_CONVERSIONS = tuple(SR_FORMATS)
SR_SOURCES = ("f32", "f16", "bf16")
ROUNDINGS = ("rn", "rz", "truncate", "truncate_with_nan", "sr")


class Instruction:
    """A target instruction (an IR ``target_op``).

    name:      key used in the IR (``attrs['name']``)
    available: predicate target -> bool (``Since``, ``OnlyOn``); ask ``available_on(target)``
    result_types: fn(operand_types, attrs) -> list of result types (also validates operands)
    lower:     {backend: fn(operand_exprs, result_vars, attrs) -> list of C lines}
    emulate:   fn(operands (numpy arrays: [threads] or [threads, lanes]), attrs, warp_size)
               -> list of result arrays (same convention); the interpreter's semantics
    Matrix instructions are rows of ``matrix.MatrixAtom``, which has this interface less
    ``result_types`` and ``doc`` (the language checks an mma's operand types: lang/mma.py).
    """

    def __init__(self, name, available, result_types, lower, emulate, doc=""):
        self.name, self.available, self.result_types = name, available, result_types
        self.lower, self.emulate, self.doc = lower, emulate, doc

    def available_on(self, target) -> bool:
        """Does ``target``'s chip have this instruction."""
        return self.available(target)


class Since:
    """Availability of a family-wide instruction: every chip of the vendor from ``first`` on
    (mma.sync: ``Since("sm_80")``). Compares compute capabilities, so sm_100 counts."""

    def __init__(self, first):
        self.first = parse_arch(first)

    def __call__(self, target) -> bool:
        a = target.arch
        return a.vendor == self.first.vendor and a.capability >= self.first.capability

    def __repr__(self):
        return f"Since({self.first.name!r})"


class OnlyOn:
    """Availability of an instruction on the chips named (gfx950's MFMA, sm_90a's wgmma)."""

    def __init__(self, *names):
        for n in names:
            parse_arch(n)  # a misspelt name fails here, not as a silently absent instruction
        self.names = frozenset(names)

    def __call__(self, target) -> bool:
        return target.name in self.names

    def __repr__(self):
        return f"OnlyOn({', '.join(map(repr, sorted(self.names)))})"


def _sizes(sizes) -> str:
    """'1, 2 or 4' of a tuple of sizes."""
    *head, last = map(str, sizes)
    return f"{', '.join(head)} or {last}" if head else last


class Target:
    """A compilation target (one chip family member)."""

    vendor = "?"
    warp_size = 32
    names: tuple = ()  # the arch names this class stands for

    def __init__(self, name):
        if name not in self.names:
            raise ValueError(f"unknown {self.vendor} arch {name!r}; known: {self.names}")
        self.name = name
        self.arch = parse_arch(name)  # vendor, major, minor, suffix

    # -- dtypes -----------------------------------------------------------------------------
    flavours: dict = {}

    def resolve_dtype(self, d):
        """Concrete type for a target-flavoured name (fp8/bf8); other types unchanged."""
        if d.flavour is None:
            return d
        return self.flavours[d.flavour]

    # -- availability: one table per target, asked while tracing ------------------------------
    # The interpreter running as this target and the renderer for it both follow these
    # answers, so a kernel that traces for a target builds for it (renderers only spell).
    unavailable_dtypes: dict = _NO_REGISTER_FORM  # dtype name -> why it is not available
    hw_fp8: frozenset = frozenset()  # fp8 encodings the chip converts in hardware
    math_f64 = None                  # f64 math functions available (None: every one)
    printf_missing = None            # why device printf is not available here (None: it is)
    # why TMA (cp.async.bulk.tensor), mbarriers and the async-proxy fences are not available
    # here (None: they are)
    tma_missing = "the tensor memory accelerator (TMA) and mbarriers are NVIDIA sm_90 features"
    limits = None                    # targets.limits.Limits
    # cross-lane operations (lang/warp.py): why AMD's DPP moves and the forward permute
    # (ds_permute_b32) are not available here (None: they are), and whether redux.sync
    # (one-instruction 32-bit integer warp reductions) is
    dpp_missing = "DPP (data-parallel primitives) is an AMD GFX9 feature"
    ds_permute_missing = "the forward lane permute is AMD's ds_permute_b32"
    has_redux_sync = False

    @property
    def has_printf(self) -> bool:
        return self.printf_missing is None

    def has_dtype(self, d) -> bool:
        return self.resolve_dtype(d).name not in self.unavailable_dtypes

    def require_dtype(self, d, what="values"):
        """``d`` resolved, or UnsupportedOnTarget naming it, the chip and why."""
        d = self.resolve_dtype(d)
        why = self.unavailable_dtypes.get(d.name)
        if why is not None:
            raise UnsupportedOnTarget(f"{d.name} {what} are not available on {self.name}: {why}")
        return d

    hw_sr: frozenset = frozenset()   # destinations the chip rounds stochastically itself
    # (src name, dst name, rounding) -> the instruction converting two lanes at once
    packed_conversions: dict = {}

    def conversion(self, src, dst, rounding="rn", sat=False) -> str:
        """How ``src`` converts to ``dst`` here: 'hardware' (a conversion instruction: fp8, or
        stochastic rounding the chip does), 'software' (exact bit arithmetic: storage types the
        chip does not convert, stochastic rounding it lacks) or 'native' (the dialect's
        arithmetic). Raises UnsupportedOnTarget for what cannot be done."""
        src, dst = self.require_dtype(src), self.require_dtype(dst)
        self._check_rounding(src, dst, rounding)
        if rounding == "sr":
            return "hardware" if dst.name in self.hw_sr else "software"
        if not (src.storage_only or dst.storage_only):
            return "native"
        if src.name in self.hw_fp8 or dst.name in self.hw_fp8:
            return "hardware"
        return "software"

    @staticmethod
    def _check_rounding(src, dst, rounding):
        """UnsupportedOnTarget for a rounding mode the conversion src -> dst does not have
        (the same on every target: ir/ops.py cast)."""
        allowed = {"rz": RZ_CONVERSIONS, "truncate": TRUNCATE_CONVERSIONS,
                   "truncate_with_nan": TRUNCATE_CONVERSIONS, "sr": SR_CONVERSIONS}.get(rounding)
        if allowed is not None and dst.name not in allowed:
            raise UnsupportedOnTarget(
                f"rounding={rounding!r} is available for conversions to {', '.join(allowed)}; "
                f"conversions to {dst.name} round to nearest even")
        if rounding == "sr" and src.name not in SR_SOURCES and src is not dst:
            raise UnsupportedOnTarget(
                f"rounding='sr' converts from {', '.join(SR_SOURCES)} (exact in f32); convert "
                f"the {src.name} value to f32 first")

    def packed_conversion(self, src, dst, rounding="rn"):
        """The instruction that converts two lanes of ``src`` to ``dst`` at once here (a name
        from ``packed_conversions``), or None: vector casts pair their lanes through it. f16 and
        bf16 lanes going to a storage type widen to f32 first (exactly) and pair from there."""
        if src.name in ("f16", "bf16") and dst.storage_only:
            src = dt.f32
        return self.packed_conversions.get((src.name, dst.name, rounding))

    def has_math(self, fn, dtype) -> bool:
        return dtype.name != "f64" or self.math_f64 is None or fn in self.math_f64

    def require_math(self, fn, dtype):
        if not self.has_math(fn, dtype):
            have = ", ".join(sorted(self.math_f64)) or "none"
            raise UnsupportedOnTarget(
                f"opus.{fn} on f64 is not available on {self.name} (headerless builds link no "
                f"device math library; f64 functions here: {have}); compute it in f32")

    def require_tma(self, what):
        """UnsupportedOnTarget naming ``what`` (an mbarrier or TMA operation) and the chip,
        unless the chip has the tensor memory accelerator and mbarriers."""
        if self.tma_missing is not None:
            raise UnsupportedOnTarget(f"{what} is not available on {self.name}: {self.tma_missing}")

    def require_dpp(self, what):
        """UnsupportedOnTarget naming ``what`` (a DPP move) and the chip, unless it has DPP."""
        if self.dpp_missing is not None:
            raise UnsupportedOnTarget(f"{what} is not available on {self.name}: {self.dpp_missing}")

    def require_ds_permute(self, what):
        if self.ds_permute_missing is not None:
            raise UnsupportedOnTarget(f"{what} is not available on {self.name}: "
                                      f"{self.ds_permute_missing}")

    def require_printf(self):
        if not self.has_printf:
            raise UnsupportedOnTarget(f"printf is not available on {self.name}: {self.printf_missing}")

    # -- asynchronous global -> shared copies (lang/async_copy.py; docs/layouts.md section 4) --
    # Each vendor has one kind: NVIDIA's cp.async (any destination address per thread, groups
    # committed and waited for) and AMD's buffer_load ... lds (one slot per lane from a
    # wave-uniform LDS base, counted by vmcnt). The *_missing texts say why a chip lacks one.
    # opus.min/max(nan="fast"): the op's nan attr where the chip's one min/max instruction
    # differs from the exact rule on f32/f64 (ir/ops.py binary min/max); None: it does not
    # (PTX min/max.f32/f64 skip every NaN and order -0 < +0)
    fast_minmax_nan = None
    cp_async_sizes: tuple = ()       # bytes one cp.async moves (.ca); .cg moves 16 only
    cp_async_missing = "it has no cp.async"
    lds_load_sizes: tuple = ()       # bytes one buffer_load ... lds moves per lane
    lds_load_missing = "it has no buffer loads to LDS"
    s_waitcnt_missing = "it has no s_waitcnt counters"   # None: the chip has s_waitcnt
    async_waits_count_copies = False  # True: a wait counts copy instructions, not groups

    def require_cp_async(self, nbytes, cache="ca"):
        """Raise UnsupportedOnTarget unless one cp.async of ``nbytes`` bytes with cache
        operator ``cache`` ('ca' or 'cg') exists here."""
        if not self.cp_async_sizes:
            raise UnsupportedOnTarget(f"opus.copy_async (cp.async) is not available on "
                                      f"{self.name}: {self.cp_async_missing}")
        if nbytes not in self.cp_async_sizes:
            raise UnsupportedOnTarget(
                f"opus.copy_async of {nbytes} bytes per copy is not available on {self.name}: "
                f"cp.async moves {_sizes(self.cp_async_sizes)} bytes")
        if cache == "cg" and nbytes != 16:
            raise UnsupportedOnTarget(
                f"cache='cg' copies 16 bytes only (PTX cp.async.cg); this copy moves {nbytes} "
                f"bytes on {self.name}: use cache='ca'")

    def require_lds_load(self, nbytes):
        """Raise UnsupportedOnTarget unless buffer_load ... lds of ``nbytes`` per lane exists."""
        if not self.lds_load_sizes:
            raise UnsupportedOnTarget(f"opus.copy_async_lds (buffer_load ... lds) is not "
                                      f"available on {self.name}: {self.lds_load_missing}")
        if nbytes not in self.lds_load_sizes:
            raise UnsupportedOnTarget(
                f"opus.copy_async_lds of {nbytes} bytes per lane is not available on "
                f"{self.name}: buffer_load ... lds moves {_sizes(self.lds_load_sizes)} bytes "
                f"per lane there")

    def require_s_waitcnt(self):
        if self.s_waitcnt_missing is not None:
            raise UnsupportedOnTarget(f"opus.s_waitcnt is not available on {self.name}: "
                                      f"{self.s_waitcnt_missing}")

    # -- cache hints (opus.Cache): hint name -> {access kind: the target's spelling} ---------
    # The renderers spell what this table says; a hint missing for a kind is refused while
    # tracing (an error, never a silently dropped hint).
    cache_hints: dict = {"normal": {"load": None, "store": None}}
    cache_hints_missing = "its loads and stores take no cache hints"

    def cache_policy(self, hint, kind):
        """The spelling of cache hint ``hint`` (an opus.Cache value's name) on a ``kind``
        ('load' or 'store') access here, or UnsupportedOnTarget naming the hint, the chip,
        why, and the hints it has."""
        row = self.cache_hints.get(hint)
        if row is None or kind not in row:
            have = ", ".join(h.upper() for h, r in self.cache_hints.items() if kind in r)
            raise UnsupportedOnTarget(
                f"cache hint {hint.upper()} on a {kind} is not available on {self.name}: "
                f"{self.cache_hints_missing}; {kind} hints here: {have}")
        return row[kind]

    # -- instructions ------------------------------------------------------------------------
    # The vendor's matrix-atom table (nv_mma.py, amd_mfma.py) is read the first time a kernel
    # asks for an instruction, not when the target is made: its rows check themselves when
    # built, which a kernel without matrix instructions should not pay for at its first trace.
    @classmethod
    def _load_instruction_tables(cls):
        """(instructions {name: Instruction}, mma_atoms {key: names}) of this vendor."""
        return {}, {}

    @classmethod
    def _instruction_tables(cls):
        tables = cls.__dict__.get("_tables")
        if tables is None:
            ins, atoms = cls._load_instruction_tables()
            tables = (dict(ins), dict(atoms))
            if cls.__dict__.get("_tables") is None:  # two threads at once: the first one is kept
                cls._tables = tables
            tables = cls._tables
        return tables

    @property
    def instructions(self) -> dict:
        """{name: Instruction} of this vendor (availability per chip: ``available_on``)."""
        return self._instruction_tables()[0]

    @property
    def mma_atoms(self) -> dict:
        """(a, b, c, (m, n, k)) -> instruction names (matrix.atom_index)."""
        return self._instruction_tables()[1]

    def instruction(self, name, what=None) -> Instruction:
        ins = self.instructions.get(name)
        if ins is None or not ins.available_on(self):
            raise UnsupportedOnTarget(f"{what or name} is not available on {self.name}")
        return ins

    def matrix_atoms(self, scaled=False) -> list:
        """The matrix atoms this chip has (grouped by types and shape): those make_mma gives,
        or with ``scaled`` the block-scaled ones (make_mma(..., scaled=True); their calls take
        scale operands)."""
        return [ins for names in self.mma_atoms.values() for ins in map(self.instructions.get, names)
                if ins.available_on(self) and getattr(ins, "scaled", False) == scaled]

    def mma_instruction(self, a, b, c, shape, scaled=False):
        """The matrix row for (a, b, c, shape); ``scaled``: a block-scaled one (its key ends
        in 'scaled': amd_mfma_scale)."""
        key = (a.name, b.name, c.name, tuple(shape)) + (("scaled",) if scaled else ())
        for name in self.mma_atoms.get(key, ()):
            if self.instructions[name].available_on(self):
                return self.instructions[name]
        have = sorted({getattr(x, "summary", None) or
                       f"{x.a.name}x{x.b.name}->{x.c.name} {x.m}x{x.n}x{x.k}"
                       for x in self.matrix_atoms() + self.matrix_atoms(scaled=True)})
        hint = ""
        if a.name == b.name == "f32" and any(
                self.instructions[n].available_on(self)
                for n in self.mma_atoms.get(("tf32", "tf32", c.name, tuple(shape)), ())):
            # the reduced-precision f32 inputs are asked for by name, never given silently
            hint = (f" (the {'x'.join(map(str, shape))} instruction reads f32 inputs as tf32, 10 "
                    f"mantissa bits: ask make_mma(opus.tf32, opus.tf32, {c.name}, shape) for it)")
        raise UnsupportedOnTarget(
            f"no {'scaled ' if scaled else ''}matrix instruction for {a.name} x {b.name} -> {c.name} with shape "
            f"{'x'.join(map(str, shape))} on {self.name}{hint}; available: "
            f"{', '.join(have) or 'none'}")

    def __repr__(self):
        return f"<Target {self.name}>"
