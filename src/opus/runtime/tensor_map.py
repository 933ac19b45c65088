"""``opus.TensorMap``: a tensor map for the tensor memory accelerator (TMA, NVIDIA sm_90), built
on the host from a tensor and a box.

A TensorMap holds the parameters of CUDA's ``cuTensorMapEncodeTiled`` in the tensor's own order
(shape, strides and box outermost first, as numpy and torch write them; the driver's order,
innermost first, is made only when encoding). Every argument is checked here, naming the one
that is wrong, because the driver answers a bad one with a bare CUDA_ERROR_INVALID_VALUE.
Encoding needs the driver, so it happens lazily, on the first GPU launch that passes the map
(``encode()``); the interpreter reads the same object (a map built from a numpy array), which is
why a machine without a GPU never encodes one.

A kernel takes a map as a parameter annotated ``opus.TensorMap`` (passed by value as the
128-byte, 64-byte aligned ``const __grid_constant__ CUtensorMap``) and says what it needs of it
with ``tmap.declare(dtype, box, ...)`` (lang/tma.py): the launch checks the map against that.
"""
from __future__ import annotations

from collections import namedtuple

from opus import dtypes as _dt
from opus.errors import ArgumentError

__all__ = ["TensorMap", "TensorMapNeed", "CopyGeometry", "check_tensor_map", "box_problem",
           "SWIZZLE_MODES"]

# CUtensorMapDataType by element type: TMA copies bits, so the 1-byte types (fp8, e8m0, bool)
# travel as UINT8 and i16 as UINT16
_DTYPE_CODES = {
    "u8": 0, "i8": 0, "bool": 0, "fp8_e4m3": 0, "fp8_e4m3fnuz": 0, "fp8_e5m2": 0,
    "fp8_e5m2fnuz": 0, "e8m0": 0, "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5,
    "f16": 6, "f32": 7, "f64": 8, "bf16": 9,
}
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
_L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}  # bytes -> CUtensorMapL2promotion
_MAX_BOX = 256
_MAX_ELEMENT_STRIDE = 8

class TensorMapNeed(namedtuple("TensorMapNeed", "dtype box swizzle element_strides")):
    """What a kernel needs of a TensorMap parameter (from ``tmap.declare``; a field None: any),
    and what a map offers (``TensorMap.need()``)."""

    __slots__ = ()

    @property
    def copy_shape(self) -> tuple:
        """Elements one copy moves per dimension: ``ceil(box / element_strides)``."""
        return tuple(-(-b // e) for b, e in zip(self.box, self.element_strides))

    @property
    def copy_bytes(self) -> int:
        """Bytes one copy moves (what an mbarrier's expect_tx counts for it)."""
        n = self.dtype.itemsize
        for d in self.copy_shape:
            n *= d
        return n


def _err(msg):
    raise ArgumentError(f"TensorMap: {msg}")


class _Tensor:
    """What a TensorMap reads of a tensor: element type, shape and strides (elements), base
    address, and where it lives (host: a numpy array, for the interpreter)."""

    def __init__(self, dtype, shape, strides, address, host, keep):
        self.dtype, self.shape, self.strides = dtype, tuple(shape), tuple(strides)
        self.address, self.host, self.keep = address, host, keep


def _elements(byte_strides, itemsize, what):
    out = []
    for i, s in enumerate(byte_strides):
        if s % itemsize:
            _err(f"{what}: the stride of dimension {i} is {s} bytes, not a whole number of "
                 f"{itemsize}-byte elements")
        out.append(s // itemsize)
    return out


def _packed(shape):
    out, n = [], 1
    for d in reversed(shape):
        out.append(n)
        n *= d
    return out[::-1]


def _from_numpy(a):
    d = _dt.dtype_of_numpy(a.dtype)
    if d is None:
        _err(f"tensor: numpy dtype {a.dtype} has no opus element type")
    return _Tensor(d, a.shape, _elements(a.strides, a.dtype.itemsize, "tensor"), a.ctypes.data,
                   True, a)


def _from_torch(t):
    from . import tensor_args as ta
    if not t.is_cuda:
        return _from_numpy(t.numpy())  # a CPU tensor: its memory, seen by the interpreter
    if not ta._TORCH_OF_OPUS:
        ta.init_torch()
    d = next((o for o, tt in ta._TORCH_OF_OPUS.items() if tt is t.dtype), None)
    if d is None:
        _err(f"tensor: torch dtype {t.dtype} has no opus element type")
    return _Tensor(d, t.shape, t.stride(), t.data_ptr(), False, t)


def _from_cai(obj):
    from . import tensor_args as ta
    cai = obj.__cuda_array_interface__
    npd = ta._np_dtype_of(obj, cai)
    d = _dt.dtype_of_numpy(npd)
    if d is None:
        _err(f"tensor: dtype {npd} has no opus element type")
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    strides = _packed(shape) if strides is None else _elements(strides, npd.itemsize, "tensor")
    return _Tensor(d, shape, strides, int(cai["data"][0] or 0), False, obj)


def _from_dlpack(obj):
    from . import tensor_args as ta
    dev_type, _ = obj.__dlpack_device__()
    on_cuda = dev_type in (ta._DL_CUDA, ta._DL_CUDA_MANAGED)
    if not on_cuda:
        _err(f"tensor: a DLPack array on {ta._DL_DEVICES.get(int(dev_type), dev_type)}; TMA reads "
             f"CUDA memory (the interpreter takes numpy arrays)")
    t, shape, strides = ta._read_dlpack(ta._dlpack_capsule(obj, True), layout=True)
    name = ta._DL_DTYPES.get((t.code, t.bits)) if t.lanes == 1 else None
    if name is None:
        _err(f"tensor: DLPack dtype (code={t.code}, bits={t.bits}, lanes={t.lanes}) has no opus "
             f"element type")
    return _Tensor(_dt.dtype_from_name(name), shape, strides or _packed(shape),
                   (t.data or 0) + t.byte_offset, False, obj)


def _read_tensor(x) -> _Tensor:
    tp = type(x)
    if tp.__module__ == "numpy" and tp.__name__ == "ndarray":
        return _from_numpy(x)
    if tp.__module__.startswith("torch") and hasattr(x, "data_ptr"):
        return _from_torch(x)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        return _from_dlpack(x)
    _err(f"tensor must be a torch tensor, a CuPy array (or anything with "
         f"__cuda_array_interface__ or __dlpack__), or a numpy array for the interpreter; got "
         f"{tp.__module__}.{tp.__qualname__}")


def _int_tuple(x, name, rank):
    if isinstance(x, int) and not isinstance(x, bool) and rank == 1:
        x = (x,)
    if (not isinstance(x, (tuple, list)) or
            any(not isinstance(v, int) or isinstance(v, bool) for v in x)):
        _err(f"{name} must be a tuple of ints, one per dimension of the tensor, got {x!r}")
    if len(x) != rank:
        _err(f"{name} has {len(x)} entries but the tensor has {rank} dimensions")
    return tuple(x)


def box_problem(dtype, box, swizzle, element_strides):
    """What is wrong with copying boxes of ``box`` elements of ``dtype`` with ``swizzle`` and
    ``element_strides`` (the driver's rules, named by argument), or None. ``box`` and
    ``element_strides`` are tuples of ints of one length (the rank)."""
    if getattr(dtype, "name", None) not in _DTYPE_CODES:
        what = dtype.name if isinstance(dtype, _dt.DType) else repr(dtype)
        return (f"dtype: {what} elements cannot be copied by TMA (it moves elements of 1, 2, 4 "
                f"or 8 bytes: opus integer and float types; no sub-byte types before sm_100)")
    if not 1 <= len(box) <= 5:
        return f"box has {len(box)} dimensions; TMA copies 1 to 5"
    for i, b in enumerate(box):
        if not 1 <= b <= _MAX_BOX:
            return f"box[{i}] = {b}: each box extent must be 1 to {_MAX_BOX} elements"
    for i, e in enumerate(element_strides):
        if not 1 <= e <= _MAX_ELEMENT_STRIDE:
            return f"element_strides[{i}] = {e}: each must be 1 to {_MAX_ELEMENT_STRIDE}"
    if element_strides[-1] != 1:
        return (f"element_strides[-1] = {element_strides[-1]}: the innermost dimension is copied "
                f"whole (1)")
    row = box[-1] * dtype.itemsize
    if row % 16:
        return (f"box[-1] = {box[-1]} {dtype.name} elements is {row} bytes; the innermost box "
                f"extent must be a multiple of 16 bytes")
    if swizzle not in SWIZZLE_MODES or isinstance(swizzle, bool):
        return f"swizzle must be 0, 32, 64 or 128 (bytes, as opus.swizzle_bytes), got {swizzle!r}"
    if swizzle and row > swizzle:
        return (f"box[-1] = {box[-1]} {dtype.name} elements is {row} bytes, more than the "
                f"{swizzle}-byte swizzle span: use a wider swizzle or a narrower box")
    if swizzle and row < swizzle:
        # the driver encodes such a map, but on the H100 a 64-byte row in the 128-byte mode
        # faulted with an illegal address in our GPU tests: refused until that is understood
        return (f"box[-1] = {box[-1]} {dtype.name} elements is {row} bytes, narrower than the "
                f"{swizzle}-byte swizzle span: opus supports swizzled boxes whose rows span the "
                f"swizzle exactly (use swizzle={row} or a box of {swizzle // dtype.itemsize} "
                f"elements)")
    return None


class CopyGeometry:
    """``copy_shape`` and ``copy_bytes`` of whatever has a ``need()`` (a TensorMap, and the
    kernel's view of a TensorMap parameter)."""

    __slots__ = ()

    @property
    def copy_shape(self) -> tuple:
        """Elements one copy moves per dimension: ``ceil(box / element_strides)``."""
        return self.need().copy_shape

    @property
    def copy_bytes(self) -> int:
        """Bytes one copy moves (what an mbarrier's expect_tx counts for it)."""
        return self.need().copy_bytes


class TensorMap(CopyGeometry):
    """A TMA tensor map (CUDA's CUtensorMap, through ``cuTensorMapEncodeTiled``): the tensor
    ``tensor`` seen as boxes of ``box`` elements, which a kernel copies between global and
    shared memory with ``opus.tma_load`` / ``opus.tma_store`` (or an ``opus.TmaPipeline``).
    Shapes, strides, boxes and coordinates are in the tensor's order (outermost first; the
    innermost dimension must be contiguous). Box elements outside the tensor read as zeros and
    are not written by stores. As a kernel parameter annotation, ``tmap: opus.TensorMap``: the
    kernel declares the dtype and box it expects with ``tmap.declare(...)``, and launches check
    the map against it.

    Example: ``a = opus.TensorMap(x, box=(64, 32), swizzle=64)`` for a 2-D f16 ``x``.

    :param tensor: the global tensor, 1 to 5 dimensions: a torch tensor or a CuPy array (or
        anything with ``__cuda_array_interface__`` or ``__dlpack__``) in GPU memory; a numpy
        array (or CPU torch tensor) for the interpreter. Its base address must be 16-byte
        aligned and its strides (but the innermost, which must be 1) multiples of 16 bytes
    :type tensor: array
    :param box: elements per dimension of one copy, each 1 to 256; the innermost one a
        multiple of 16 bytes
    :type box: tuple of ints
    :param swizzle: the shared-memory swizzle in bytes: 0 (none), 32, 64 or 128, the modes of
        ``opus.swizzle_bytes``; the innermost box row must fit in it
    :type swizzle: int
    :param element_strides: a traversal step per dimension (1 to 8; the innermost must be 1):
        a copy takes every ``s``-th element, ``ceil(box / s)`` of them (None: all 1)
    :type element_strides: tuple of ints or None
    :param l2_promotion: L2 fetch granularity in bytes: 0 (none), 64, 128 or 256
    :type l2_promotion: int
    :targets: sm_90, sm_90a; not on sm_80, sm_86, sm_89, gfx942, gfx950 (made anywhere:
        the interpreter reads maps of numpy arrays)
    """

    __slots__ = ("dtype", "shape", "strides", "box", "swizzle", "element_strides",
                 "l2_promotion", "address", "on_host", "tensor", "_encoded")

    def __init__(self, tensor, box, *, swizzle=0, element_strides=None, l2_promotion=128):
        t = _read_tensor(tensor)
        rank = len(t.shape)
        if not 1 <= rank <= 5:
            _err(f"tensor has {rank} dimensions; TMA maps 1 to 5")
        self.dtype, self.shape, self.strides = t.dtype, t.shape, t.strides
        self.address, self.on_host, self.tensor = t.address, t.host, t.keep
        self.box = _int_tuple(box, "box", rank)
        self.element_strides = (1,) * rank if element_strides is None else _int_tuple(
            element_strides, "element_strides", rank)
        self.swizzle, self.l2_promotion = swizzle, l2_promotion
        self._encoded = None
        self._check()

    # -- checks: the driver's documented requirements, each naming its argument ------------
    def _check(self):
        why = box_problem(self.dtype, self.box, self.swizzle, self.element_strides)
        if why is not None:
            _err(why)
        self._check_shape(self.dtype.itemsize)
        if self.l2_promotion not in _L2_PROMOTION or isinstance(self.l2_promotion, bool):
            _err(f"l2_promotion must be 0, 64, 128 or 256 (bytes), got {self.l2_promotion!r}")

    def _check_shape(self, isz):
        if self.address % 16:
            _err(f"tensor: its address {hex(self.address)} is not 16-byte aligned (TMA needs "
                 f"16); a slice that starts mid-row moves it")
        for i, n in enumerate(self.shape):
            if not 1 <= n <= 2 ** 32:
                _err(f"tensor: dimension {i} has {n} elements; TMA needs 1 to 2**32")
        if self.strides[-1] != 1 and self.shape[-1] > 1:
            _err(f"tensor: the innermost dimension must be contiguous (stride 1), its stride is "
                 f"{self.strides[-1]} elements")
        for i, (n, s) in enumerate(zip(self.shape[:-1], self.strides[:-1])):
            if n > 1 and (s <= 0 or (s * isz) % 16 or s * isz >= 2 ** 40):
                _err(f"tensor: the stride of dimension {i} is {s} elements ({s * isz} bytes); TMA "
                     f"needs a positive multiple of 16 bytes below 2**40 (pad the rows)")

    # -- what copies move ---------------------------------------------------------------------
    def need(self) -> TensorMapNeed:
        """What this map offers, in the form a kernel's declaration takes."""
        return TensorMapNeed(self.dtype, self.box, self.swizzle, self.element_strides)

    # -- encoding (GPU launches) ----------------------------------------------------------------
    def _driver_arguments(self):
        """(dtype code, dims, byte strides of dims 1.., box, element strides, swizzle code,
        L2 code), innermost first as cuTensorMapEncodeTiled takes them. A dimension of extent
        1 is never stepped over, so its stride is any valid one."""
        isz = self.dtype.itemsize
        strides = []
        for i in range(len(self.shape) - 1):
            s = self.strides[i] * isz
            if self.shape[i] == 1:
                s = -(-self.shape[i + 1] * max(1, self.strides[i + 1]) * isz // 16) * 16
            strides.append(s)
        return (_DTYPE_CODES[self.dtype.name], self.shape[::-1], strides[::-1], self.box[::-1],
                self.element_strides[::-1], SWIZZLE_MODES[self.swizzle],
                _L2_PROMOTION[self.l2_promotion])

    def encode(self) -> bytes:
        """The 128-byte CUtensorMap (encoded once, by the driver)."""
        if self._encoded is None:
            if self.on_host:
                raise ArgumentError(
                    "TensorMap: this map was built from a numpy array (host memory), which only "
                    "the interpreter reads; build it from a GPU tensor to launch on the GPU")
            code, dims, strides, box, es, swz, l2 = self._driver_arguments()
            from . import cuda_driver
            self._encoded = cuda_driver.tensor_map_encode_tiled(
                code, self.address, dims, strides, box, es, swz, l2, self._describe())
        return self._encoded

    def _describe(self):
        code, dims, strides, box, es, swz, l2 = self._driver_arguments()
        return (f"dtype={self.dtype.name} (code {code}), rank={len(dims)}, "
                f"address={hex(self.address)}, dims={list(dims)}, byte strides={list(strides)}, "
                f"box={list(box)}, element strides={list(es)}, interleave=none, swizzle={swz}, "
                f"L2 promotion={l2}, OOB fill=zeros; innermost first")

    def __repr__(self):
        where = "host" if self.on_host else "device"
        return (f"opus.TensorMap({self.dtype.name}, shape={self.shape}, strides={self.strides}, "
                f"box={self.box}, swizzle={self.swizzle}, {where})")


def _mismatch(param, need, tmap):
    have = tmap.need()
    for field, what in (("dtype", "element type"), ("box", "box"), ("swizzle", "swizzle"),
                        ("element_strides", "element strides")):
        want, got = getattr(need, field), getattr(have, field)
        if want is not None and want != got:
            show = (lambda v: v.name) if field == "dtype" else repr
            return (f"parameter {param!r}: the kernel declared a TensorMap with {what} "
                    f"{show(want)}, but the map's is {show(got)} ({tmap!r})")
    return None


def check_tensor_map(x, param, need, interpreter=False):
    """``x`` checked as the argument of TensorMap parameter ``param`` whose kernel declared
    ``need`` (a TensorMapNeed, or None): the map itself for the interpreter, its 128 encoded
    bytes for a GPU launch."""
    if not isinstance(x, TensorMap):
        raise ArgumentError(f"parameter {param!r} expects an opus.TensorMap, got "
                            f"{type(x).__name__}")
    why = _mismatch(param, need, x) if need is not None else None
    if why is not None:
        raise ArgumentError(why)
    if interpreter:
        if not x.on_host:
            raise ArgumentError(f"parameter {param!r}: the TensorMap was built from a GPU tensor; "
                                f"the interpreter reads numpy arrays (build it from one)")
        return x
    return x.encode()
