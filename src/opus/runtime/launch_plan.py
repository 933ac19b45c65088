"""The launch plan: each kernel parameter declared once, every launch path derived from it.

A kernel's run-time parameters are described by one LaunchPlan of ParamPlan records: the kind
of value (a Kind below), its position among the launch arguments, its offset and size in the
parameter block, its accepted range and alignment. From that plan come

  * the parameter block: its struct format, offsets and size (runtime/launcher.ParamBlock);
  * the general path: check and convert every argument (LaunchPlan.values, used by the NVIDIA
    and AMD entries alike, and by the fast paths for whatever they do not recognise);
  * the generated Python fast path's inline test per scalar (Kind.inline, frontend/gpu_launch.py);
  * the C hot path's parameter table (LaunchPlan.c_table: a header with C_ABI_VERSION and the
    record size, then one RECORD per parameter, the ParamRecord struct of _fastlaunch.c, which
    refuses a table of another version or record size).

The stream rule (launch_stream) is here too: every path follows it (the fast paths implement
its common cases inline; tests/frontend/test_launch_corpus.py proves they agree).

Adding an argument kind (a 128-byte CUtensorMap by value, a bf16 scalar, ...) is one Kind in
KINDS and a constructor producing its ParamPlan. It reaches the C hot path when _fastlaunch.c
has a case of the same name in its KINDS (by-value structs already do: "bytes"); a kind the C
module does not list gives its entries no C path (they launch from Python, correctly), so no
version bump is needed to add one.
"""
from __future__ import annotations

import numbers
import struct

from opus import dtypes as _dt
from opus.errors import ArgumentError

__all__ = ["C_ABI_VERSION", "Kind", "KINDS", "ParamPlan", "LaunchPlan", "pointer_param",
           "scalar_param", "by_value_param", "tensor_map_param", "scalar_checker", "stream_handle",
           "launch_stream"]

# The version of what the C hot path takes (FASTLAUNCH_VERSION in _fastlaunch.c); a module
# built from other sources is not used (frontend/gpu_launch.fast_launch_module checks it).
C_ABI_VERSION = 4
# c_table's layout: a header (version, record size), then per parameter: kind, argument
# position, offset, size, lo, hi, alignment (ParamRecord in _fastlaunch.c)
C_HEADER = struct.Struct("=ii")
C_RECORD = struct.Struct("=iiqqqqQ")

F32_MAX = 3.4028234663852886e38
_I64_MAX = 2 ** 63 - 1
_U64_MAX = 2 ** 64 - 1


class Kind:
    """How one kind of parameter value is passed.

    ``name`` is also the name of the C hot path's kind (``_fastlaunch.KINDS``). ``inline`` is the
    generated Python path's test for an argument ``{v}`` that may be packed as it is; when it is
    true the argument goes to the general check (None: always). Pointers are read inline by the
    generator itself (it knows the adopted tensor types). Plain classes here and below:
    dataclasses costs a fresh process's first launch ~1 ms of import."""
    __slots__ = ("name", "inline")

    def __init__(self, name: str, inline: str | None = None):
        self.name, self.inline = name, inline

    def __repr__(self):
        return f"Kind({self.name!r})"


PTR = Kind("ptr")
INT = Kind("int", "type({v}) is not int or not {lo!r} <= {v} <= {hi!r}")
BOOL = Kind("bool", "type({v}) is not bool")
F32 = Kind("f32", "type({v}) is not float or not {lo!r} <= {v} <= {hi!r}")
F64 = Kind("f64", "type({v}) is not float")
BYTES = Kind("bytes", "type({v}) is not bytes or len({v}) != {size}")  # by-value structs
KINDS = {k.name: k for k in (PTR, INT, BOOL, F32, F64, BYTES)}


class ParamPlan:
    """One run-time parameter: what the launch paths need to read, check and pack it.

    name; arg: position in the launch's full argument tuple; kind: a Kind; code: struct code of
    its bytes in the parameter block; size: bytes it takes; align: pointer: the address alignment
    the kernel needs, others: in the block; dtype: pointer: element dtype, scalar: its dtype,
    bytes: None, or for a TensorMap parameter what the kernel needs of the map (tensor_map_param);
    lo, hi: accepted range (int, f32, bool); offset: in the parameter block (-1
    until LaunchPlan lays it out)."""
    __slots__ = ("name", "arg", "kind", "code", "size", "align", "dtype", "lo", "hi", "offset")

    def __init__(self, name, arg, kind, code, size, align, dtype=None, lo=0, hi=0, offset=-1):
        self.name, self.arg, self.kind, self.code = name, arg, kind, code
        self.size, self.align, self.dtype = size, align, dtype
        self.lo, self.hi, self.offset = lo, hi, offset

    def _fields(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __eq__(self, other):
        return type(other) is ParamPlan and self._fields() == other._fields()

    def __hash__(self):
        return hash(self._fields())

    def __repr__(self):
        return "ParamPlan(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"

    @property
    def block_align(self):
        """Where its bytes may start in the block: natural alignment, a struct's own."""
        return 8 if self.kind is PTR else self.align if self.kind is BYTES else self.size

    def check_address(self, address):
        """A pointer's value read by the general path: a 64-bit device address."""
        if not 0 <= address <= _U64_MAX:
            raise ArgumentError(f"parameter {self.name!r}: {address} is not a device address "
                                f"(0 <= address < 2**64)")
        return address

    def misaligned(self, address):
        raise ArgumentError(f"parameter {self.name!r}: address {hex(address)} is not aligned to "
                            f"{self.align} bytes, which the kernel's {self.align}-byte vector "
                            f"accesses need")


def pointer_param(arg, name, elem, align=1):
    """A device pointer to ``elem`` elements whose address must be ``align``-byte aligned."""
    return ParamPlan(name, arg, PTR, "Q", 8, align, elem, 0, _U64_MAX)


_INT_CODES = {(1, True): "b", (2, True): "h", (4, True): "i", (8, True): "q",
              (1, False): "B", (2, False): "H", (4, False): "I", (8, False): "Q"}


def scalar_param(arg, name, dtype):
    """A scalar passed by value (bool, integers, f32, f64)."""
    if dtype.is_bool:
        return ParamPlan(name, arg, BOOL, "?", 1, 1, dtype, 0, 1)
    if dtype.is_int:
        lo, hi = dtype.int_range()
        size = dtype.bits // 8
        return ParamPlan(name, arg, INT, _INT_CODES[size, lo < 0], size, size, dtype, lo, hi)
    if dtype is _dt.f32:
        return ParamPlan(name, arg, F32, "f", 4, 4, dtype, -F32_MAX, F32_MAX)
    if dtype is _dt.f64:
        return ParamPlan(name, arg, F64, "d", 8, 8, dtype)
    raise ArgumentError(f"parameter {name!r}: {dtype.name} scalars cannot be kernel parameters "
                        f"yet (pass f32 and convert inside the kernel)")


def by_value_param(arg, name, size, align=8):
    """``size`` bytes passed by value (a struct such as a 128-byte, 64-byte aligned CUtensorMap):
    the argument is any bytes-like object of exactly that size."""
    if size < 1 or align < 1 or align & (align - 1):
        raise ValueError(f"parameter {name!r}: by-value size {size} / alignment {align}")
    return ParamPlan(name, arg, BYTES, f"{size}s", size, align)


def _round_up(n, a):
    return (n + a - 1) // a * a


class LaunchPlan:
    """A kernel's run-time parameters in order, laid out in one parameter block."""

    def __init__(self, params):
        laid, fmt, end = [], ["="], 0
        for p in params:
            off = _round_up(end, p.block_align)
            fmt.append(f"{off - end}x" if off > end else "")
            fmt.append(p.code)
            laid.append(_replace_offset(p, off))
            end = off + p.size
        self.params = tuple(laid)
        self.size = end
        self.layout = struct.Struct("".join(fmt))
        self.offsets = tuple(p.offset for p in self.params)
        self.nargs = max((p.arg for p in self.params), default=-1) + 1
        self.checkers = tuple(None if p.kind is PTR else _checker(p) for p in self.params)
        first = [i for i, p in enumerate(self.params) if p.kind is PTR]
        self.first_pointer = first[0] if first else None

    def values(self, args, pointer):
        """Every parameter's value, checked, in order: the general path. ``pointer(i, arg)``
        reads pointer parameter i's argument (the entry's rule for arrays and devices)."""
        out = []
        for i, (p, check) in enumerate(zip(self.params, self.checkers)):
            if check is None:
                v = pointer(i, args[p.arg])
                if v % p.align:
                    p.misaligned(v)
            else:
                v = check(args[p.arg])
            out.append(v)
        return out

    def c_table(self, kind_codes):
        """The C hot path's parameter table, or None when a kind has no C code in
        ``kind_codes`` (the C module's KINDS): such entries launch from Python."""
        if any(p.kind.name not in kind_codes for p in self.params):
            return None
        head = C_HEADER.pack(C_ABI_VERSION, C_RECORD.size)
        return head + b"".join(
            C_RECORD.pack(kind_codes[p.kind.name], p.arg, p.offset, p.size,
                          int(max(p.lo, -_I64_MAX - 1)) if p.kind is INT else 0,
                          int(min(p.hi, _I64_MAX)) if p.kind is INT else 0,  # u64 above: Python
                          p.align if p.kind is PTR else 1)
            for p in self.params)


def tensor_map_param(arg, name, need=None):
    """An opus.TensorMap parameter: its 128-byte CUtensorMap by value, 64-byte aligned (the
    BYTES kind, so raw encoded bytes take the C hot path). An opus.TensorMap argument is checked
    against ``need`` (what the kernel declared, runtime.tensor_map.TensorMapNeed, kept in the
    plan's ``dtype`` slot) and encoded by the general path."""
    if need is None:
        from opus.runtime.tensor_map import TensorMapNeed
        need = TensorMapNeed(None, None, None, None)  # declared nothing: any map
    p = by_value_param(arg, name, 128, 64)
    p.dtype = need
    return p


def _replace_offset(p, offset):
    return ParamPlan(p.name, p.arg, p.kind, p.code, p.size, p.align, p.dtype, p.lo, p.hi, offset)


def _checker(p):
    if p.kind is BYTES:
        return _bytes_checker(p.name, p.size, p.dtype)
    return scalar_checker(p.name, p.dtype)


def _is_bool(x):
    # numpy.bool_ is not a bool subclass, and checking by name avoids importing numpy
    return isinstance(x, bool) or type(x).__name__ in ("bool_", "bool")


def scalar_checker(name, dtype):
    """A function converting a Python/numpy scalar for parameter ``name`` of ``dtype``,
    refusing values that would change (no silent truncation)."""
    if dtype.is_int or dtype.is_bool:
        lo, hi = dtype.int_range()

        def check_int(x):
            if _is_bool(x):
                if dtype.is_bool:
                    return int(bool(x))
                raise ArgumentError(f"parameter {name!r} expects {dtype.name}, got a bool")
            if not isinstance(x, numbers.Integral):  # numpy's integers register as Integral
                raise ArgumentError(f"parameter {name!r} expects an integer ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            x = int(x)
            if not lo <= x <= hi:
                raise ArgumentError(f"parameter {name!r} is {dtype.name}: {x} is outside "
                                    f"{lo}..{hi}")
            return x
        return check_int
    if dtype in (_dt.f32, _dt.f64):
        def check_float(x):
            if not isinstance(x, numbers.Real) or _is_bool(x):
                raise ArgumentError(f"parameter {name!r} expects a number ({dtype.name}), got "
                                    f"{type(x).__name__} {x!r}")
            x = float(x)
            if dtype is _dt.f32 and abs(x) > F32_MAX and abs(x) != float("inf"):
                raise ArgumentError(f"parameter {name!r} is f32: {x!r} is outside its range")
            return x
        return check_float
    raise ArgumentError(f"parameter {name!r}: {dtype.name} scalars cannot be kernel parameters yet "
                        f"(pass f32 and convert inside the kernel)")


def _bytes_checker(name, size, need=None):
    tensor_map = None
    if need is not None:  # a TensorMap parameter: maps are checked against what it declared
        from opus.runtime.tensor_map import TensorMap, check_tensor_map
        tensor_map = TensorMap

    def check_bytes(x):
        if tensor_map is not None and isinstance(x, tensor_map):
            return check_tensor_map(x, name, need)
        packed = getattr(type(x), "opus_param_bytes", None)  # opus.mdiv and other structs
        if packed is not None:
            x = packed(x)
        try:
            m = memoryview(x)
        except TypeError:
            m = None
        if m is None or m.nbytes != size or not m.c_contiguous:
            got = f"{m.nbytes} bytes" if m is not None else type(x).__name__
            what = "an opus.TensorMap or " if tensor_map is not None else ""
            raise ArgumentError(f"parameter {name!r} is passed by value: it expects {what}a "
                                f"contiguous bytes-like object of {size} bytes, got {got}")
        return m.tobytes()
    return check_bytes


def stream_handle(stream):
    """The handle of a ``stream=`` argument: an int, or an object's int ``cuda_stream`` (torch),
    ``ptr`` (CuPy) or ``handle``, in that order. Every entry kind follows this rule (the
    interpreter checks it too, then ignores the stream)."""
    h = stream
    if not isinstance(h, numbers.Integral):
        for attr in ("cuda_stream", "ptr", "handle"):
            h = getattr(stream, attr, None)
            if isinstance(h, numbers.Integral):
                break
    if isinstance(h, numbers.Integral) and not _is_bool(h) and 0 <= h < 2 ** 64:
        return int(h)
    raise ArgumentError(f"stream must be an int handle (0 <= handle < 2**64), a torch.cuda.Stream "
                        f"or a CuPy stream, got {type(stream).__name__} {stream!r}")


def launch_stream(stream, args):
    """The stream a launch goes to: the one given, else torch's current stream for the first
    CUDA torch tensor among the arguments, else 0 (the legacy default stream)."""
    if stream is not None:
        return stream_handle(stream)
    from opus.runtime.tensor_args import stream_of
    return stream_of(args) or 0
