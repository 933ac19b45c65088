"""GPU timing with device events (CUDA driver or HIP), and snapshots of device buffers that a
timed kernel writes: what ``opus.autotune`` measures with (frontend/autotune.py).

``bench(launch, reset, stream)``: a few warm-up launches, then repetitions each bracketed by a
pair of events on ``stream`` with ``reset()`` (restoring written buffers) outside the pair; the
median of the event times, in milliseconds.
"""
from __future__ import annotations

import ctypes
import statistics

from ..errors import OpusRuntimeError

__all__ = ["bench", "Snapshot"]

_P = ctypes.c_void_p
_declared = set()


def _cuda():
    from . import cuda_driver
    lib = cuda_driver._load()
    if "cuda" not in _declared:
        for name, args in {"cuEventCreate": [ctypes.POINTER(_P), ctypes.c_uint],
                           "cuEventRecord": [_P, _P], "cuEventSynchronize": [_P],
                           "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _P, _P],
                           "cuEventDestroy_v2": [_P],
                           "cuMemcpyDtoD_v2": [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t]
                           }.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _declared.add("cuda")
    cuda_driver.ensure_context()
    return lib, cuda_driver._check


def _hip():
    from . import hip_driver
    lib = hip_driver._load()
    if "hip" not in _declared:
        for name, args in {"hipEventCreate": [ctypes.POINTER(_P)], "hipEventRecord": [_P, _P],
                           "hipEventSynchronize": [_P],
                           "hipEventElapsedTime": [ctypes.POINTER(ctypes.c_float), _P, _P],
                           "hipEventDestroy": [_P]}.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _declared.add("hip")
    return lib, hip_driver._check


class _Events:
    """Create / record / elapsed over one vendor's API (names differ only in their prefix)."""

    def __init__(self, vendor):
        self.vendor = vendor
        if vendor == "nvidia":
            self.lib, self.check = _cuda()
            self.create = lambda h: self.lib.cuEventCreate(h, 0)
            self.record, self.sync = self.lib.cuEventRecord, self.lib.cuEventSynchronize
            self.elapsed, self.destroy = self.lib.cuEventElapsedTime, self.lib.cuEventDestroy_v2
        else:
            self.lib, self.check = _hip()
            self.create = self.lib.hipEventCreate
            self.record, self.sync = self.lib.hipEventRecord, self.lib.hipEventSynchronize
            self.elapsed, self.destroy = self.lib.hipEventElapsedTime, self.lib.hipEventDestroy

    def new(self, n):
        out = []
        for _ in range(n):
            h = _P()
            self.check(self.create(ctypes.byref(h)), "event create")
            out.append(h)
        return out

    def milliseconds(self, start, end) -> float:
        ms = ctypes.c_float()
        self.check(self.sync(end), "event synchronize")
        self.check(self.elapsed(ctypes.byref(ms), start, end), "event elapsed time")
        return ms.value


def _timed(ev, launch, reset, stream, n) -> list:
    """n launches, each between its own pair of events (reset() before each pair)."""
    marks = ev.new(2 * n)
    try:
        for i in range(n):
            reset()
            ev.check(ev.record(marks[2 * i], stream or None), "event record")
            launch()
            ev.check(ev.record(marks[2 * i + 1], stream or None), "event record")
        return [ev.milliseconds(marks[2 * i], marks[2 * i + 1]) for i in range(n)]
    finally:
        for m in marks:
            ev.destroy(m)


def bench(vendor, launch, reset, stream=0, *, warmup=2, budget_ms=40.0, min_reps=5,
          max_reps=100) -> float:
    """The median time of ``launch()`` in milliseconds on ``stream`` of the ``vendor``'s GPU:
    ``warmup`` timed launches estimate it, then enough repetitions to fill about ``budget_ms``
    (between ``min_reps`` and ``max_reps``)."""
    ev = _Events(vendor)
    first = _timed(ev, launch, reset, stream, warmup)
    estimate = max(min(first), 1e-3)
    reps = int(min(max_reps, max(min_reps, budget_ms // estimate)))
    return statistics.median(_timed(ev, launch, reset, stream, reps))


class Snapshot:
    """A copy of one argument's contents that ``restore()`` writes back: torch tensors (any
    device), numpy arrays, and contiguous ``__cuda_array_interface__`` arrays on NVIDIA."""

    def __init__(self, name, value):
        self.value = value
        self._restore, self._release = _snapshot(name, value)

    def restore(self):
        self._restore()

    def release(self):
        """Free the copy (device memory for __cuda_array_interface__ arrays)."""
        self._release()


def _snapshot(name, v):
    module = type(v).__module__
    if module.startswith("torch") and hasattr(v, "copy_"):
        saved = v.detach().clone()
        return (lambda: v.copy_(saved)), _nothing
    if module == "numpy" and hasattr(v, "copy"):
        import numpy as np
        saved = v.copy()
        return (lambda: np.copyto(v, saved)), _nothing
    cai = getattr(v, "__cuda_array_interface__", None)
    if cai is not None:
        return _device_snapshot(name, cai)
    raise OpusRuntimeError(f"autotune restore={name!r}: cannot save and restore a "
                           f"{type(v).__name__}; give a torch tensor, a numpy array or a "
                           f"contiguous __cuda_array_interface__ array")


def _device_snapshot(name, cai):
    import math
    from . import cuda_driver
    shape, strides = tuple(cai["shape"]), cai.get("strides")
    itemsize = int(cai["typestr"][2:])
    if strides is not None and strides != _c_strides(shape, itemsize):
        raise OpusRuntimeError(f"autotune restore={name!r}: the array is not contiguous; "
                               f"restore copies it whole")
    nbytes = math.prod(shape) * itemsize
    ptr = cai["data"][0]
    lib, check = _cuda()
    saved = cuda_driver.mem_alloc(nbytes)
    check(lib.cuMemcpyDtoD_v2(saved, ptr, nbytes), "cuMemcpyDtoD")

    def restore():
        check(lib.cuMemcpyDtoD_v2(ptr, saved, nbytes), "cuMemcpyDtoD")
    return restore, lambda: cuda_driver.mem_free(saved)


def _nothing():
    pass


def _c_strides(shape, itemsize):
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))
