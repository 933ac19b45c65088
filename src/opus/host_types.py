"""The host side of opus's element types: torch's dtypes, and sub-byte arrays packed for kernels.

Sub-byte types (fp4 e2m1, fp6 e2m3/e3m2, int4, uint4) are packed in device memory without gaps,
element i at bits [i*b, (i+1)*b) of the little-endian byte stream (ir/ops.py, "Sub-byte
types"): two fp4/int4 per byte, element 0 in the low nibble; four fp6 in three bytes. numpy
(ml_dtypes) holds them one per byte instead, so a kernel's ``opus.Ptr[opus.fp4]`` takes the
packed bytes: a uint8 array from ``opus.pack_fp4(values)`` (or, on the GPU, a torch uint8 tensor
or a ``torch.float4_e2m1fn_x2`` one); ``opus.unpack_fp4(bytes)`` reads results back.

numpy and ml_dtypes load only when a function here is called (``import opus`` stays light),
torch only when ``torch_dtype`` is asked.
"""
from __future__ import annotations

from . import dtypes as _dt
from .errors import ArgumentError

__all__ = ["pack", "unpack", "pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6", "pack_int4",
           "unpack_int4", "pack_uint4", "unpack_uint4", "torch_dtype", "TORCH_NAMES",
           "packed_nbytes", "packed_elements", "codes_to_bytes", "bytes_to_codes",
           "packed_arg_error", "packed_takes", "PACKED_ARGS"]

# opus dtype name -> torch dtype name (torch.float4_e2m1fn_x2 holds two fp4 per element: the
# packed bytes; int4, uint4 and fp6 have no torch dtype: torch.uint8 holds their bytes)
TORCH_NAMES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
    "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
    "fp8_e4m3": "float8_e4m3fn", "fp8_e4m3fnuz": "float8_e4m3fnuz", "fp8_e5m2": "float8_e5m2",
    "fp8_e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu", "fp4_e2m1": "float4_e2m1fn_x2",
}


def torch_dtype(dtype):
    """torch's dtype for opus ``dtype``: ``torch.float8_e4m3fn`` for opus.fp8_e4m3, ...,
    ``torch.float4_e2m1fn_x2`` (two packed values per element) for opus.fp4; None where the
    installed torch has none (int4, uint4 and fp6 never: their packed bytes are torch.uint8;
    older torch lacks uint32, e8m0, float4). Imports torch.

    :param dtype: a concrete opus dtype (the flavoured fp8/bf8 mean a chip's type: name it)
    :type dtype: DType
    :returns: the torch dtype, or None
    :rtype: torch.dtype or None
    :targets: host (all targets)
    """
    if not isinstance(dtype, _dt.DType):
        raise TypeError(f"opus.torch_dtype takes an opus dtype, got {dtype!r}")
    if dtype.flavour is not None:
        raise ValueError(f"opus.{dtype.name} names a different type on each chip (OCP or FNUZ "
                         f"fp8); ask for the concrete one (opus.fp8_e4m3, opus.fp8_e4m3fnuz, ...)")
    import torch
    name = TORCH_NAMES.get(dtype.name)
    return None if name is None else getattr(torch, name, None)


# -- kernel arguments of sub-byte types ------------------------------------------------------------

PACKED_ARGS = ("a uint8 array of the packed bytes (opus.pack_{short}(values)); on the GPU also a "
               "torch uint8 tensor{torch}")


def packed_takes(dtype) -> str:
    """What an ``opus.Ptr[dtype]`` parameter of a sub-byte type takes, for messages."""
    short = {"fp4_e2m1": "fp4", "int4": "int4", "uint4": "uint4"}.get(dtype.name, "fp6")
    torch = " or a torch.float4_e2m1fn_x2 tensor" if dtype.name == "fp4_e2m1" else ""
    return PACKED_ARGS.format(short=short, torch=torch)


def packed_arg_error(dtype, got, nbytes):
    """Why an array of numpy dtype ``got`` holding ``nbytes`` bytes cannot be the argument of
    an ``opus.Ptr[dtype]`` parameter (sub-byte ``dtype``), or None: such a parameter takes the
    packed bytes, never one element per byte (ml_dtypes' float4_e2m1fn arrays are that)."""
    import numpy as np
    takes = packed_takes(dtype)
    group = dtype.nbytes(dtype.pack_elems)
    if np.dtype(got) == dtype.np_dtype:
        return (f"expects {dtype.name} packed {dtype.pack_elems} to {group} byte"
                f"{'s' if group > 1 else ''}, got an array of {dtype.np_dtype} (one element "
                f"per byte): pass {takes}")
    if np.dtype(got) != np.uint8:
        return f"expects {dtype.name} as {takes}; got an array of {np.dtype(got)}"
    if nbytes % group:
        return (f"expects {dtype.name} as packed bytes, {dtype.pack_elems} elements per "
                f"{group} bytes; {nbytes} bytes are not a whole number of groups (opus.pack_fp6 "
                f"pads the last one)")
    return None


# -- packing ---------------------------------------------------------------------------------------

def _packed_dtype(dtype, what):
    if not isinstance(dtype, _dt.DType) or not dtype.packed:
        raise ArgumentError(f"{what} packs the sub-byte types (opus.fp4_e2m1, opus.fp6_e2m3, "
                            f"opus.fp6_e3m2, opus.int4, opus.uint4), got {dtype!r}")
    return dtype


def packed_nbytes(dtype, count: int) -> int:
    """Bytes that ``count`` packed elements take, the last group of pack_elems padded."""
    groups = -(-count // dtype.pack_elems)
    return groups * dtype.nbytes(dtype.pack_elems)


def packed_elements(dtype, nbytes: int) -> int:
    """Elements that ``nbytes`` packed bytes hold (a whole number of groups)."""
    return nbytes // dtype.nbytes(dtype.pack_elems) * dtype.pack_elems


def codes_to_bytes(codes, bits: int):
    """uint8 codes (..., k) of ``bits``-bit elements, k a multiple of the group: the packed bytes
    (..., k*bits/8), element i at bits [i*bits, (i+1)*bits) of the little-endian stream."""
    import numpy as np
    codes = np.asarray(codes, np.uint8)
    per = 2 if bits == 4 else 4  # elements per group (1 byte for 4-bit, 3 bytes for 6-bit)
    g = codes.reshape(codes.shape[:-1] + (codes.shape[-1] // per, per)).astype(np.uint32)
    word = np.zeros(g.shape[:-1], np.uint32)
    mask = np.uint32((1 << bits) - 1)
    for i in range(per):
        word |= (g[..., i] & mask) << np.uint32(i * bits)
    nb = per * bits // 8
    out = np.stack([(word >> np.uint32(8 * j)).astype(np.uint8) for j in range(nb)], axis=-1)
    return out.reshape(codes.shape[:-1] + (codes.shape[-1] * bits // 8,))


def bytes_to_codes(data, bits: int):
    """The inverse of codes_to_bytes: packed bytes (..., m), m a multiple of the group's bytes,
    as uint8 codes (..., m*8/bits)."""
    import numpy as np
    data = np.asarray(data, np.uint8)
    per = 2 if bits == 4 else 4
    nb = per * bits // 8
    g = data.reshape(data.shape[:-1] + (data.shape[-1] // nb, nb)).astype(np.uint32)
    word = np.zeros(g.shape[:-1], np.uint32)
    for j in range(nb):
        word |= g[..., j] << np.uint32(8 * j)
    mask = np.uint32((1 << bits) - 1)
    codes = np.stack([((word >> np.uint32(i * bits)) & mask).astype(np.uint8) for i in range(per)],
                     axis=-1)
    return codes.reshape(data.shape[:-1] + (data.shape[-1] // nb * per,))


def _codes_of(values, dtype, what):
    """The element codes (uint8, one per element) of ``values`` as ``dtype``: an array of
    dtype's ml_dtypes twin as it is, numbers converted (floats to nearest even as opus.cast;
    integers must be in range)."""
    import numpy as np
    nd = dtype.np_dtype
    a = np.asarray(values)
    if a.dtype != nd:
        if dtype.is_int:
            if a.dtype.kind not in "biu":
                raise ArgumentError(f"{what}: {dtype.name} takes integers, got an array of "
                                    f"{a.dtype}")
            lo, hi = dtype.int_range()
            if a.size and (a.min() < lo or a.max() > hi):
                bad = a[(a < lo) | (a > hi)].flat[0]
                raise ArgumentError(f"{what}: {bad} is outside {dtype.name}'s range {lo}..{hi}")
        elif a.dtype.kind not in "biuf" and a.dtype.kind != "V":
            raise ArgumentError(f"{what}: cannot convert an array of {a.dtype} to {dtype.name}")
        with np.errstate(over="ignore", invalid="ignore"):
            a = a.astype(np.float32).astype(nd) if a.dtype.kind in "fV" else a.astype(nd)
    return a.view(np.uint8) & np.uint8((1 << dtype.bits) - 1)


def pack(values, dtype):
    """``values`` as ``dtype``'s packed bytes, the form kernels read through an
    ``opus.Ptr[dtype]``: ``opus.pack(x, opus.fp4)``. Packs along the last axis (element 0 in
    the low bits, ir/ops.py); a 1-D array's last group is padded with zero codes (5 fp4 take 3
    bytes), a longer one's last axis must hold whole groups.

    :param values: numbers (floats round to nearest even as opus.cast does; integers must be in
        the type's range) or an array of the type's ml_dtypes twin
    :type values: array-like
    :param dtype: opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.int4 or opus.uint4
    :type dtype: DType
    :returns: the packed bytes: shape (..., bytes of the last axis)
    :rtype: numpy.ndarray of uint8
    :targets: host (all targets)
    """
    import numpy as np
    what = f"opus.pack(..., opus.{dtype.name})" if isinstance(dtype, _dt.DType) else "opus.pack"
    dtype = _packed_dtype(dtype, what)
    codes = _codes_of(values, dtype, what)
    if codes.ndim == 0:
        codes = codes.reshape(1)
    per = dtype.pack_elems
    k = codes.shape[-1]
    if k % per:
        if codes.ndim > 1:
            raise ArgumentError(f"{what}: the last axis holds {k} elements; packed rows hold "
                                f"whole groups of {per} {dtype.name} (pad it, or pack a 1-D "
                                f"array, whose tail is padded)")
        codes = np.concatenate([codes, np.zeros(per - k % per, np.uint8)])
    return codes_to_bytes(codes, dtype.bits)


def unpack(data, dtype, count=None):
    """Packed bytes of ``dtype`` (from opus.pack or a kernel) as an array of its ml_dtypes twin,
    one element per byte: ``opus.unpack(out, opus.fp4, n).astype(np.float32)``. Unpacks along
    the last axis.

    :param data: the packed bytes
    :type data: numpy.ndarray of uint8
    :param dtype: opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.int4 or opus.uint4
    :type dtype: DType
    :param count: elements of the last axis to return (None: every element the bytes hold)
    :type count: int or None
    :returns: the elements
    :rtype: numpy.ndarray of the ml_dtypes type (ml_dtypes.float4_e2m1fn, ...)
    :targets: host (all targets)
    """
    import numpy as np
    what = f"opus.unpack(..., opus.{dtype.name})" if isinstance(dtype, _dt.DType) else "opus.unpack"
    dtype = _packed_dtype(dtype, what)
    a = np.asarray(data)
    if a.dtype != np.uint8:
        hint = (f" (one {dtype.name} per byte: that is unpacked already)"
                if a.dtype == dtype.np_dtype else "")
        raise ArgumentError(f"{what} takes packed bytes (a uint8 array), got an array of "
                            f"{a.dtype}{hint}")
    if a.ndim == 0:
        raise ArgumentError(f"{what} takes an array of bytes, got a 0-d array")
    group = dtype.nbytes(dtype.pack_elems)
    if a.shape[-1] % group:
        raise ArgumentError(f"{what}: {a.shape[-1]} bytes are not whole groups of {group} bytes "
                            f"({dtype.pack_elems} packed {dtype.name} each)")
    have = packed_elements(dtype, a.shape[-1])
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                              or not 0 <= count <= have):
        raise ArgumentError(f"{what}: count={count!r}, but {a.shape[-1]} bytes hold {have} "
                            f"{dtype.name} elements")
    codes = bytes_to_codes(a, dtype.bits)
    if count is not None:
        codes = codes[..., :count]
    return np.ascontiguousarray(codes).view(dtype.np_dtype)


def _pair(dtype):
    def pack_it(values):
        return pack(values, dtype)

    def unpack_it(data, count=None):
        return unpack(data, dtype, count)
    return pack_it, unpack_it


pack_fp4, unpack_fp4 = _pair(_dt.fp4_e2m1)
pack_int4, unpack_int4 = _pair(_dt.int4)
pack_uint4, unpack_uint4 = _pair(_dt.uint4)


def pack_fp6(values, dtype=_dt.fp6_e2m3):
    """opus.pack(values, dtype) for an fp6 type (default opus.fp6_e2m3): four per three bytes.

    :param values: numbers or an array of the type's ml_dtypes twin
    :type values: array-like
    :param dtype: opus.fp6_e2m3 or opus.fp6_e3m2
    :type dtype: DType
    :returns: the packed bytes
    :rtype: numpy.ndarray of uint8
    :targets: host (all targets)
    """
    _fp6_only(dtype, "pack_fp6")
    return pack(values, dtype)


def unpack_fp6(data, dtype=_dt.fp6_e2m3, count=None):
    """opus.unpack(data, dtype, count) for an fp6 type (default opus.fp6_e2m3).

    :param data: the packed bytes
    :type data: numpy.ndarray of uint8
    :param dtype: opus.fp6_e2m3 or opus.fp6_e3m2
    :type dtype: DType
    :param count: elements to return (None: all)
    :type count: int or None
    :returns: the elements
    :rtype: numpy.ndarray of ml_dtypes.float6_e2m3fn or float6_e3m2fn
    :targets: host (all targets)
    """
    _fp6_only(dtype, "unpack_fp6")
    return unpack(data, dtype, count)


def _fp6_only(dtype, what):
    if dtype not in (_dt.fp6_e2m3, _dt.fp6_e3m2):
        raise ArgumentError(f"opus.{what} takes opus.fp6_e2m3 or opus.fp6_e3m2, got {dtype!r}")


def _doc(name, dtype, verb):
    per = "two per byte, element 0 in the low nibble"
    if verb == "pack":
        return (f"opus.pack(values, opus.{dtype.name}): {dtype.name} packed {per}.\n\n"
                f":param values: numbers or an array of the type's ml_dtypes twin\n"
                f":type values: array-like\n:returns: the packed bytes\n"
                f":rtype: numpy.ndarray of uint8\n:targets: host (all targets)\n")
    return (f"opus.unpack(data, opus.{dtype.name}, count): the {dtype.name} elements of packed "
            f"bytes ({per}).\n\n:param data: the packed bytes\n:type data: numpy.ndarray of "
            f"uint8\n:param count: elements to return (None: all)\n:type count: int or None\n"
            f":returns: the elements\n:rtype: numpy.ndarray of {dtype.host}\n"
            f":targets: host (all targets)\n")


for _f, _d, _v in ((pack_fp4, _dt.fp4_e2m1, "pack"), (unpack_fp4, _dt.fp4_e2m1, "unpack"),
                   (pack_int4, _dt.int4, "pack"), (unpack_int4, _dt.int4, "unpack"),
                   (pack_uint4, _dt.uint4, "pack"), (unpack_uint4, _dt.uint4, "unpack")):
    _f.__name__ = _f.__qualname__ = f"{_v}_{_d.name.split('_')[0]}"
    _f.__doc__ = _doc(_f.__name__, _d, _v)
