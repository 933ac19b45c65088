"""User arguments -> device pointers for kernel parameters, with checks that name the parameter.

Accepted, in the order they are tried:
  * torch tensors (torch is imported only when one is seen),
  * anything with ``__cuda_array_interface__`` (CuPy, numba, opus DeviceArray, ...),
  * anything with ``__dlpack__`` + ``__dlpack_device__`` (read through the capsule with ctypes),
  * plain ints: a raw device address, taken on trust.

ml_dtypes types (bf16, fp8, ...) have no typestr of their own in the CUDA array interface
(bfloat16 is '<V2', every fp8 is '<V1'). We use the object's ``.dtype`` when it is a numpy
dtype (DeviceArray, CuPy); otherwise a 'V' typestr is accepted for any ml_dtypes-backed opus
type of the same width, which checks the width but not the encoding.

How to read each type is decided once per ``type(arg)`` and cached, so the common case (the
same tensor class every call) is one dict lookup plus the extractor.
"""
from __future__ import annotations

import ctypes

from opus import dtypes as _dt
from opus.errors import ArgumentError

__all__ = ["device_pointer", "is_contiguous", "stream_of", "init_torch", "torch_dtype",
           "torch_raw_stream", "torch_device_index"]

_WHERE = "opus needs CUDA memory on the GPU (or run in the interpreter)"


def _wrong_device(param, where):
    return ArgumentError(f"parameter {param!r} is on {where}; {_WHERE}")


def _mismatch(param, dtype, got):
    return ArgumentError(f"parameter {param!r} expects {dtype.name} but got {got}")


# -- torch -------------------------------------------------------------------------------------

_TORCH_OF_OPUS: dict = {}  # opus DType -> torch.dtype, filled on first torch tensor
_torch_stream = None


def init_torch():
    global _torch_stream
    import torch
    from opus.host_types import TORCH_NAMES  # one table: opus.torch_dtype reads it too
    for opus_name, torch_name in TORCH_NAMES.items():
        t = getattr(torch, torch_name, None)  # older torch lacks some (uint32, e8m0, ...)
        if t is not None:
            _TORCH_OF_OPUS[_dt.dtype_from_name(opus_name)] = t
    # The private call returns the raw cudaStream_t without building a torch.cuda.Stream.
    _torch_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
        lambda index: torch.cuda.current_stream(index).cuda_stream)


def torch_dtype(dtype):
    """The torch dtype twin of opus ``dtype`` (None if torch has none); call init_torch first."""
    return _TORCH_OF_OPUS.get(dtype)


def torch_raw_stream():
    """``f(device_index) -> int``: torch's current stream there, as a raw handle."""
    if _torch_stream is None:
        init_torch()
    return _torch_stream


def torch_device_index(arg):
    """The CUDA device index of a torch tensor (-1 on the CPU); None for anything else."""
    if (_EXTRACTORS.get(type(arg)) or _classify(arg)) is _from_torch:
        return arg.get_device()
    return None


def _from_torch(t, param, dtype):
    if not t.is_cuda:
        raise _wrong_device(param, t.device.type)
    if dtype is not None and dtype.packed:  # the packed bytes: uint8 (or float4_e2m1fn_x2)
        import torch
        if t.dtype is torch.uint8:
            _check_packed(param, dtype, "uint8", t.numel())
        elif t.dtype is not _TORCH_OF_OPUS.get(dtype):
            from opus.host_types import packed_takes
            raise ArgumentError(f"parameter {param!r} expects {dtype.name} as {packed_takes(dtype)}; "
                                f"got a {t.dtype} tensor")
    elif dtype is not None and t.dtype is not _TORCH_OF_OPUS.get(dtype):
        raise _mismatch(param, dtype, f"a {t.dtype} tensor")
    return t.data_ptr()


def _check_packed(param, dtype, got, nbytes):
    """ArgumentError unless an array of numpy dtype name ``got`` (nbytes bytes) holds the
    packed bytes a sub-byte ``dtype`` parameter takes (host_types.packed_arg_error)."""
    from opus.host_types import packed_arg_error
    why = packed_arg_error(dtype, got, nbytes)
    if why is not None:
        raise ArgumentError(f"parameter {param!r}: {why}")


# -- __cuda_array_interface__ ------------------------------------------------------------------

def _np_dtype_of(obj, cai):
    import numpy as np  # objects with this interface come from numpy-based libraries
    d = getattr(obj, "dtype", None)
    return d if isinstance(d, np.dtype) else np.dtype(cai["typestr"])


def _dtype_matches(got, dtype) -> bool:
    want = dtype.np_dtype  # (only this type's host twin: ml_dtypes loads for its own types)
    if got == want:
        return True
    # A bare 'V<n>' typestr (ml_dtypes lost in transit): accept by width (see module docstring).
    return (got.kind == "V" and got.fields is None and want is not None and want.kind == "V"
            and got.itemsize == want.itemsize and got.type.__name__ == "void")


def _describe(got) -> str:
    od = _dt.dtype_of_numpy(got)
    return od.name if od is not None else str(got)


def _from_cai(obj, param, dtype):
    cai = obj.__cuda_array_interface__
    if dtype is not None and dtype.packed:
        got = _np_dtype_of(obj, cai)
        count = 1
        for s in cai["shape"]:
            count *= s
        _check_packed(param, dtype, got, count * got.itemsize)
    elif dtype is not None:
        got = _np_dtype_of(obj, cai)
        if not _dtype_matches(got, dtype):
            raise _mismatch(param, dtype, f"a {type(obj).__name__} of {_describe(got)}")
    return int(cai["data"][0] or 0)


# -- DLPack ------------------------------------------------------------------------------------

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.argtypes, _capsule_name.restype = [ctypes.py_object], ctypes.c_char_p
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.argtypes, _capsule_ptr.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p

# DLManagedTensorVersioned puts version(8) + manager_ctx(8) + deleter(8) + flags(8) first.
_VERSIONED_OFFSET = 32
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_DEVICES = {1: "cpu", 3: "cuda_host (pinned host memory)", 4: "opencl", 7: "vulkan",
               8: "metal", 10: "rocm", 11: "rocm_host", 14: "oneapi", 15: "webgpu"}
# (DLDataTypeCode, bits) -> opus dtype name
_DL_DTYPES = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16", (6, 8): "bool",
    (10, 8): "fp8_e4m3", (11, 8): "fp8_e4m3fnuz", (12, 8): "fp8_e5m2", (13, 8): "fp8_e5m2fnuz",
    (14, 8): "e8m0", (17, 4): "fp4_e2m1", (0, 4): "int4", (1, 4): "uint4",
}


def _read_dlpack(capsule, layout: bool = False):
    """(DLTensor copy, shape, strides) from a capsule. Everything is read here, while the
    capsule (and so the producer's shape/strides arrays) is alive; strides is None if compact."""
    name = _capsule_name(capsule)
    if name not in (b"dltensor", b"dltensor_versioned"):
        raise ArgumentError(f"__dlpack__ returned a capsule named {name!r} (already consumed?)")
    base = _capsule_ptr(capsule, name)
    offset = _VERSIONED_OFFSET if name == b"dltensor_versioned" else 0
    t = _DLTensor.from_buffer_copy(ctypes.string_at(base + offset, ctypes.sizeof(_DLTensor)))
    if not layout:
        return t, None, None
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
    return t, shape, strides


def _dlpack_capsule(obj, on_cuda: bool):
    if on_cuda:
        try:
            return obj.__dlpack__(stream=-1)  # -1: we order work ourselves, no producer sync
        except (TypeError, ValueError, BufferError, RuntimeError):
            pass  # producers that predate the stream argument
    return obj.__dlpack__()


def _from_dlpack(obj, param, dtype):
    dev_type, _ = obj.__dlpack_device__()
    if dev_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise _wrong_device(param, _DL_DEVICES.get(int(dev_type), f"DLPack device {dev_type}"))
    t, _, _ = _read_dlpack(_dlpack_capsule(obj, on_cuda=True))
    if dtype is not None and dtype.packed and (t.code, t.bits, t.lanes) == (1, 8, 1):
        pass  # the packed bytes as uint8
    elif dtype is not None:
        got = _DL_DTYPES.get((t.code, t.bits)) if t.lanes == 1 else None
        if got != dtype.name:
            desc = got or f"DLPack dtype (code={t.code}, bits={t.bits}, lanes={t.lanes})"
            raise _mismatch(param, dtype, f"a {type(obj).__name__} of {desc}")
    return (t.data or 0) + t.byte_offset


# -- raw addresses and the rest -----------------------------------------------------------------

def _from_int(value, param, dtype):
    return value


def _from_none(value, param, dtype):
    raise ArgumentError(f"parameter {param!r} got None; it needs a GPU array or a device address")


def _unsupported(value, param, dtype):
    raise ArgumentError(
        f"parameter {param!r} got a {type(value).__module__}.{type(value).__qualname__}; "
        "expected a torch tensor, a CuPy array, an object with __cuda_array_interface__ or "
        "__dlpack__, or an int device address")


def _classify(arg):
    tp = type(arg)
    if tp.__module__.startswith("torch") and hasattr(arg, "data_ptr"):
        if not _TORCH_OF_OPUS:
            init_torch()
        return _from_torch
    if arg is None:
        return _from_none
    if isinstance(arg, int) and not isinstance(arg, bool):
        return _from_int
    if hasattr(arg, "__cuda_array_interface__"):
        return _from_cai
    if hasattr(arg, "__dlpack__") and hasattr(arg, "__dlpack_device__"):
        return _from_dlpack
    return _unsupported


_EXTRACTORS: dict[type, object] = {}


def device_pointer(arg, *, param: str, dtype) -> int:
    """Device address for kernel parameter ``param`` of element type ``dtype`` (an opus DType;
    None skips the dtype check). Non-contiguous arrays give their base pointer: callers that
    care use is_contiguous. Flavoured fp8/bf8 dtypes must be resolved to concrete ones first."""
    try:
        extract = _EXTRACTORS[type(arg)]
    except KeyError:
        extract = _EXTRACTORS[type(arg)] = _classify(arg)
    return extract(arg, param, dtype)


# -- layout and streams -------------------------------------------------------------------------

def _c_contiguous(shape, strides, itemsize) -> bool:
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def is_contiguous(arg) -> bool:
    """Whether ``arg`` is dense row-major (C order). Raw ints count as contiguous."""
    extract = _EXTRACTORS.get(type(arg)) or _classify(arg)
    if extract is _from_torch:
        return bool(arg.is_contiguous())
    if extract is _from_cai:
        cai = arg.__cuda_array_interface__
        if cai.get("strides") is None:
            return True
        return _c_contiguous(cai["shape"], cai["strides"], _np_dtype_of(None, cai).itemsize)
    flags = getattr(arg, "flags", None)  # host numpy arrays
    if hasattr(flags, "c_contiguous"):
        return bool(flags.c_contiguous)
    if extract is _from_dlpack:
        on_cuda = arg.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED)
        _, shape, strides = _read_dlpack(_dlpack_capsule(arg, on_cuda), layout=True)
        return strides is None or _c_contiguous(shape, strides, 1)
    return extract is _from_int


def stream_of(args) -> int | None:
    """The stream to launch on: torch's current stream for the first CUDA torch tensor among
    ``args``, else None (meaning the legacy default stream, handle 0)."""
    for a in args:
        if _EXTRACTORS.get(type(a)) is _from_torch or (
                type(a).__module__.startswith("torch") and hasattr(a, "data_ptr")):
            if _torch_stream is None:
                init_torch()
            if a.is_cuda:
                return _torch_stream(a.get_device())
    return None
