"""A minimal GPU array, so opus runs and is tested on machines with neither torch nor CuPy.

Only what launching needs: a device pointer, a shape, a numpy dtype (ml_dtypes types included),
copies to and from numpy, and ``__cuda_array_interface__`` v3 for interop.
"""
from __future__ import annotations

import math

import numpy as np

from opus.runtime import cuda_driver as _drv

__all__ = ["DeviceArray"]


class DeviceArray:
    """C-contiguous device memory with a shape and a numpy dtype.

    Owns (and frees) its memory unless made with ``DeviceArray(shape, dtype, ptr=...)``.
    """

    def __init__(self, shape, dtype, ptr: int | None = None):
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self._owned = ptr is None
        self.ptr = _drv.mem_alloc(self.nbytes) if ptr is None else int(ptr)

    @classmethod
    def empty(cls, shape, dtype) -> "DeviceArray":
        return cls(shape, dtype)

    @classmethod
    def from_numpy(cls, array) -> "DeviceArray":
        host = np.ascontiguousarray(array)
        out = cls(host.shape, host.dtype)
        if host.nbytes:
            _drv.memcpy_htod(out.ptr, host)
        return out

    @classmethod
    def zeros(cls, shape, dtype) -> "DeviceArray":
        return cls.from_numpy(np.zeros(shape, dtype))

    def to_numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if host.nbytes:
            _drv.memcpy_dtoh(host, self.ptr)  # synchronous: waits for work on the legacy stream
        return host

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def __cuda_array_interface__(self) -> dict:
        # typestr of ml_dtypes types is 'V<n>'; consumers that know opus read .dtype instead.
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": None}

    def free(self):
        if self._owned and self.ptr:
            p, self.ptr = self.ptr, 0
            _drv.mem_free(p)

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown or context gone
            pass

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x})"
