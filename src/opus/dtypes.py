"""Element types: the one place that knows each type's width, kind and host (numpy) twin.

A DType is both an annotation (``n: opus.i32``) and, inside a kernel, a conversion function
(``opus.f32(x)``). Low-precision floats that the hardware only converts (fp8, fp4, e8m0) are
*storage* types: they can be loaded, stored and cast, but not used in arithmetic.

The 8-bit float ``fp8``/``bf8`` names are *target-flavoured*, as in the original: on gfx942 they
mean the FNUZ encodings, everywhere else the OCP ones. The explicit names (``fp8_e4m3``,
``fp8_e4m3fnuz``, ...) never change meaning. Flavoured types are resolved by the Target at trace
time, so the IR only ever holds concrete types.
"""
from __future__ import annotations

__all__ = [
    "DType", "bool_", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "f16", "bf16", "f32", "f64", "fp16", "fp32", "fp64",
    "fp8_e4m3", "fp8_e4m3fnuz", "fp8_e5m2", "fp8_e5m2fnuz", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2",
    "e8m0", "int4", "uint4", "fp8", "bf8", "fp4", "tf32", "ALL_DTYPES", "dtype_from_name",
    "dtype_of_numpy",
]


class DType:
    """A scalar element type: ``opus.f16``, ``opus.i32``, ... are its instances (users do not
    make new ones). Each is an annotation (``n: opus.i32``, ``opus.Ptr[opus.f16]``) and, inside a
    kernel, a conversion (``opus.f32(x)``); each has its own docstring (``help(opus.bf16)``).

    :param name: the type's name (``opus.<name>``)
    :type name: str
    :param bits: width in bits
    :type bits: int
    :param kind: 'bool', 'int', 'uint' or 'float'
    :type kind: str
    :param host: the host twin as "numpy.<name>" or "ml_dtypes.<name>" (None: flavoured names)
    :type host: str or None
    :param storage_only: no arithmetic, only load, store and conversion
    :type storage_only: bool
    :param flavour: for the target-flavoured fp8 names, the key the Target resolves ('fp8' or
        'bf8')
    :type flavour: str or None
    :param c_name: the name generated code uses (default: ``name``)
    :type c_name: str or None
    :targets: all targets (which targets hold values of each type: its own docstring)
    """

    __slots__ = ("name", "bits", "kind", "host", "_np_dtype", "storage_only", "flavour", "c_name")

    def __init__(self, name, bits, kind, host, *, storage_only=False, flavour=None, c_name=None):
        self.name = name
        self.bits = bits
        self.kind = kind
        self.host = host  # "numpy.<name>" or "ml_dtypes.<name>": the host twin, imported lazily
        self._np_dtype = None
        self.storage_only = storage_only
        self.flavour = flavour
        self.c_name = c_name or name

    @property
    def np_dtype(self):
        """The numpy dtype holding this type on the host (None for flavoured fp8/bf8 names).

        Resolved on first use: numpy and ml_dtypes cost ~100 ms of import, which a process that
        only compiles and launches on the GPU never needs to pay.
        """
        if self._np_dtype is None and self.host is not None:
            import importlib
            import numpy as np
            module, attr = self.host.split(".")
            self._np_dtype = np.dtype(getattr(importlib.import_module(module), attr))
        return self._np_dtype

    # -- classification -------------------------------------------------------------------
    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_int(self):
        """Integers, signed or not (bool excluded)."""
        return self.kind in ("int", "uint")

    @property
    def is_signed(self):
        return self.kind == "int" or self.kind == "float"

    @property
    def is_bool(self):
        return self.kind == "bool"

    @property
    def itemsize(self):
        """Bytes of one element in a register (sub-byte types: one byte holding the code in its
        low bits); in memory and vectors sub-byte types are packed (``packed``)."""
        return max(1, self.bits // 8)

    @property
    def packed(self) -> bool:
        """Sub-byte types (fp4, fp6, int4, uint4): packed without gaps in memory and in
        register vectors, element i at bits [i*bits, (i+1)*bits) of the little-endian byte
        stream (element 0 in the low bits of byte 0, as the original packs fp4)."""
        return self.bits < 8 and self.kind != "bool"

    @property
    def pack_elems(self) -> int:
        """Elements in the smallest whole number of bytes: 2 for 4-bit types, 4 for fp6 (three
        bytes), 1 for the others. Vectors and memory accesses hold multiples of it."""
        if not self.packed:
            return 1
        n = 1
        while (n * self.bits) % 8:
            n += 1
        return n

    def nbytes(self, count: int) -> int:
        """Bytes that ``count`` elements take in memory (a multiple of ``pack_elems``)."""
        if self.kind == "bool":
            return count
        return count * self.bits // 8

    def int_range(self):
        """(lo, hi) inclusive for integer types."""
        if self.kind == "int":
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return 0, (1 << self.bits) - 1
        if self.kind == "bool":
            return 0, 1
        raise TypeError(f"{self.name} is not an integer type")

    # -- use inside kernels ----------------------------------------------------------------
    def __call__(self, value, **kw):
        """Inside a kernel: convert ``value`` to this type (see opus.lang.cast)."""
        if _cast_hook is None:  # pragma: no cover - set when opus.lang is imported
            raise RuntimeError("opus.lang is not loaded")
        return _cast_hook(value, self, **kw)

    def __repr__(self):
        return f"opus.{self.name}"

    def __reduce__(self):
        return (dtype_from_name, (self.name,))


_cast_hook = None  # set by opus.lang: DType.__call__ delegates to it
_targets_hook = None  # set by opus.lang: fn(DType) -> the ':targets:' text, from the target table

# What each type holds, for its docstring (the numbers are ml_dtypes'/numpy's finfo).
_FORMATS = {
    "bool": "a boolean (True/False, one byte in memory)",
    "f16": "IEEE binary16 float: 5 exponent and 10 mantissa bits, largest finite value 65504",
    "bf16": "bfloat16: 8 exponent and 7 mantissa bits (f32's range), largest finite value "
            "3.3895e38",
    "f32": "IEEE binary32 float: 8 exponent and 23 mantissa bits, largest finite value 3.4028e38",
    "f64": "IEEE binary64 float: 11 exponent and 52 mantissa bits, largest finite value "
           "1.7976931348623157e308",
    "fp8_e4m3": "OCP FP8 E4M3: 4 exponent and 3 mantissa bits, largest finite value 448; no "
                "infinity, NaN 0x7F/0xFF",
    "fp8_e4m3fnuz": "FP8 E4M3 FNUZ (AMD CDNA3): 4 exponent and 3 mantissa bits, largest finite "
                    "value 240; no infinity, no -0, one NaN 0x80",
    "fp8_e5m2": "OCP FP8 E5M2: 5 exponent and 2 mantissa bits, largest finite value 57344; "
                "infinities and NaNs as in IEEE",
    "fp8_e5m2fnuz": "FP8 E5M2 FNUZ (AMD CDNA3): 5 exponent and 2 mantissa bits, largest finite "
                    "value 57344; no infinity, no -0, one NaN 0x80",
    "fp4_e2m1": "OCP MX FP4 E2M1: 2 exponent and 1 mantissa bits, largest finite value 6 "
                "(values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives); no infinity or NaN; packed "
                "two per byte",
    "fp6_e2m3": "OCP MX FP6 E2M3: 2 exponent and 3 mantissa bits, largest finite value 7.5; "
                "no infinity or NaN; packed four to three bytes",
    "fp6_e3m2": "OCP MX FP6 E3M2: 3 exponent and 2 mantissa bits, largest finite value 28; "
                "no infinity or NaN; packed four to three bytes",
    "tf32": "TensorFloat-32, the tensor cores' input format, held in f32 registers (8 exponent and "
            "23 mantissa bits, largest finite value 3.4028e38) of which the instruction reads the "
            "sign, the exponent and the top 10 mantissa bits. It names a matrix atom's operands "
            "(make_mma(opus.tf32, opus.tf32, opus.f32, shape) takes f32 register vectors), never "
            "a register or memory type",
    "e8m0": "OCP MX scale E8M0: 8 exponent and 0 mantissa bits, 2^(k-127), largest finite value "
            "1.7014e38 (2^127); no sign, no zero, NaN 0xFF",
    "fp8": "the target's 8-bit float with 4 exponent and 3 mantissa bits",
    "bf8": "the target's 8-bit float with 5 exponent and 2 mantissa bits",
}


def _range_text(d) -> str:
    if d.name in _FORMATS:
        return _FORMATS[d.name]
    lo, hi = d.int_range()
    return f"{'signed' if d.kind == 'int' else 'unsigned'} integer, {lo} .. {hi}"


def describe(d) -> str:
    """The docstring of one dtype: what it holds, how to use it, which targets have it."""
    name, *aliases = [n for n in __all__ if globals()[n] is d]  # bool_ is 'bool'; fp16 is f16
    also = f" (also {', '.join('opus.' + a for a in aliases)})" if aliases else ""
    use = ("A storage type: load, store and convert it, no arithmetic."
           if d.storage_only else "Usable in arithmetic.")
    targets = _targets_hook(d) if _targets_hook is not None else "see opus.targets"
    annotation = f"``x: opus.Ptr[opus.{name}]``"
    if not d.storage_only:
        annotation = f"``n: opus.{name}``, " + annotation
    return (f"opus.{name}: {d.bits} bit{'s' if d.bits > 1 else ''}, {_range_text(d)}{also}.\n\n"
            f"{use} As an annotation it types a kernel parameter ({annotation}); called in a "
            f"kernel it converts.\n\n"
            f":param value: what to convert\n"
            f":type value: run-time value (scalar or vector) or Python number\n"
            f":param kw: ``rounding``, ``sat`` (bool) and ``rbits``, as for opus.cast\n"
            f":type kw: str, bool\n"
            f":returns: ``value`` converted to {d.name}, lane by lane for a vector\n"
            f":targets: {targets}\n")


class _OwnDoc:
    """``DType.__doc__``: the class's docstring on the class, each dtype's own (generated by
    describe) on a dtype, so ``help(opus.f16)`` documents f16."""

    def __init__(self, class_doc):
        self.class_doc = class_doc

    def __get__(self, obj, cls=None):
        return self.class_doc if obj is None else describe(obj)


DType.__doc__ = _OwnDoc(DType.__doc__)


bool_ = DType("bool", 1, "bool", "numpy.bool_")
i8 = DType("i8", 8, "int", "numpy.int8")
i16 = DType("i16", 16, "int", "numpy.int16")
i32 = DType("i32", 32, "int", "numpy.int32")
i64 = DType("i64", 64, "int", "numpy.int64")
u8 = DType("u8", 8, "uint", "numpy.uint8")
u16 = DType("u16", 16, "uint", "numpy.uint16")
u32 = DType("u32", 32, "uint", "numpy.uint32")
u64 = DType("u64", 64, "uint", "numpy.uint64")
f16 = DType("f16", 16, "float", "numpy.float16")
bf16 = DType("bf16", 16, "float", "ml_dtypes.bfloat16")
f32 = DType("f32", 32, "float", "numpy.float32")
f64 = DType("f64", 64, "float", "numpy.float64")
fp8_e4m3 = DType("fp8_e4m3", 8, "float", "ml_dtypes.float8_e4m3fn", storage_only=True)
fp8_e4m3fnuz = DType("fp8_e4m3fnuz", 8, "float", "ml_dtypes.float8_e4m3fnuz", storage_only=True)
fp8_e5m2 = DType("fp8_e5m2", 8, "float", "ml_dtypes.float8_e5m2", storage_only=True)
fp8_e5m2fnuz = DType("fp8_e5m2fnuz", 8, "float", "ml_dtypes.float8_e5m2fnuz", storage_only=True)
fp4_e2m1 = DType("fp4_e2m1", 4, "float", "ml_dtypes.float4_e2m1fn", storage_only=True)
fp6_e2m3 = DType("fp6_e2m3", 6, "float", "ml_dtypes.float6_e2m3fn", storage_only=True)
fp6_e3m2 = DType("fp6_e3m2", 6, "float", "ml_dtypes.float6_e3m2fn", storage_only=True)
e8m0 = DType("e8m0", 8, "float", "ml_dtypes.float8_e8m0fnu", storage_only=True)
int4 = DType("int4", 4, "int", "ml_dtypes.int4", storage_only=True)
uint4 = DType("uint4", 4, "uint", "ml_dtypes.uint4", storage_only=True)

# Target-flavoured names (resolved by the Target at trace time; never reach the IR).
fp8 = DType("fp8", 8, "float", None, storage_only=True, flavour="fp8")
bf8 = DType("bf8", 8, "float", None, storage_only=True, flavour="bf8")

# Spellings of the original (fp16_t, fp32_t, ...) without the _t.
fp16, fp32, fp64 = f16, f32, f64
fp4 = fp4_e2m1

ALL_DTYPES = (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64,
              fp8_e4m3, fp8_e4m3fnuz, fp8_e5m2, fp8_e5m2fnuz, fp4_e2m1, fp6_e2m3, fp6_e3m2, e8m0,
              int4, uint4)
# An input format of the matrix units, not a register type: matrix atoms take it (carried in f32
# registers, targets.matrix.register_type); every target refuses it elsewhere. Not in
# ALL_DTYPES (its host twin is float32, which names f32).
tf32 = DType("tf32", 32, "float", "numpy.float32", storage_only=True)

_BY_NAME = {d.name: d for d in ALL_DTYPES + (fp8, bf8, tf32)}
_BY_NAME.update({"fp16": f16, "fp32": f32, "fp64": f64, "fp4": fp4_e2m1})
_by_numpy = None  # numpy dtype -> DType, built on first use (see DType.np_dtype)


def dtype_from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown opus dtype {name!r}; known: {sorted(_BY_NAME)}") from None


def dtype_of_numpy(np_dtype) -> DType | None:
    """The opus dtype whose host twin is ``np_dtype`` (None if there is none)."""
    global _by_numpy
    import numpy as np
    if _by_numpy is None:
        _by_numpy = {d.np_dtype: d for d in ALL_DTYPES}
    return _by_numpy.get(np.dtype(np_dtype))
