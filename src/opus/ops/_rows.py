"""Host-side pieces shared by the row-wise ops (softmax, topk): argument checks, the (rows, n)
view of an input, dtype names for torch and numpy arrays, and torch.library registration.

Torch tensors run on the GPU on torch's current stream; numpy arrays run in the interpreter as
the current target. Nothing here imports torch until a torch tensor arrives."""
from __future__ import annotations

from opus import dtypes as dt
from opus.errors import ArgumentError
from opus.frontend.targeting import current_target

# opus's name for the element type of a torch tensor or numpy array (or the foreign name where
# opus has none): one definition for the library (ops/_gemm_args.py)
from ._gemm_args import dtype_name


def fail(op, msg):
    raise ArgumentError(f"opus.ops.{op}: {msg}")


def is_torch(x):
    return type(x).__module__.startswith("torch")


def check_array(op, x, name, dtypes):
    """``x`` is a torch tensor on a CUDA device or a numpy array, of one of ``dtypes``, with at
    least one dimension; returns its opus dtype."""
    if is_torch(x):
        if not x.is_cuda:
            fail(op, f"{name} is a torch tensor on {x.device.type}: it must be on a CUDA device "
                     f"(numpy arrays run in the interpreter)")
    elif type(x).__module__ != "numpy":
        fail(op, f"{name} must be a torch tensor or a numpy array, got {type(x).__name__}")
    if len(x.shape) == 0:
        fail(op, f"{name} must have at least one dimension (a row), got a scalar")
    d = dtype_name(x)
    if d not in dtypes:
        fail(op, f"{name} has dtype {d}; {op} takes {', '.join(dtypes)}")
    return dt.dtype_from_name(d)


def check_dim(op, x, dim):
    """Only the last dimension is supported: ``dim`` must name it."""
    nd = len(x.shape)
    if type(dim) is not int or not -nd <= dim < nd:
        fail(op, f"dim must be an int naming one of x's {nd} dimensions, got {dim!r}")
    if dim % nd != nd - 1:
        fail(op, f"dim={dim}: only the last dimension (dim=-1) is supported; move it last "
                 f"(x.transpose(dim, -1)) first")


def strides(x):
    if is_torch(x):
        return tuple(x.stride())
    return tuple(s // x.itemsize for s in x.strides)


def as_rows(x):
    """``x`` as a (rows, n) matrix whose rows are contiguous: for torch a view where the
    leading dimensions collapse to one stride (padded rows stay padded), else a contiguous
    copy; numpy arrays (the interpreter takes C-contiguous ones) a C-contiguous copy where
    needed."""
    shape = x.shape
    n = shape[-1]
    torch = is_torch(x)
    if torch and len(shape) == 2 and (n <= 1 or x.stride(1) == 1):
        return x                                    # the common case: no new view
    rows = 1
    for e in shape[:-1]:
        rows *= e
    if torch:
        x2 = x.reshape(rows, n)
        if n > 1 and x2.stride(1) != 1:
            x2 = x2.contiguous()
        return x2
    import numpy as np
    return np.ascontiguousarray(x.reshape(rows, n))


def row_stride(x2):
    """The element stride between rows of a (rows, n) matrix (0 for one row: it is unused)."""
    return strides(x2)[0] if x2.shape[0] > 1 else 0


def vector_width(x2, most):
    """The widest vector (<= ``most`` elements, a power of two) at which every row of ``x2``
    starts aligned: it divides the row stride and the base address."""
    isz = dt.dtype_from_name(dtype_name(x2)).itemsize
    addr = x2.data_ptr() if is_torch(x2) else x2.ctypes.data
    v = most
    while v > 1 and (row_stride(x2) % v or addr % (v * isz)):
        v //= 2
    return v


def empty(x, shape, d):
    """A new array of opus dtype ``d`` beside ``x`` (same device, or numpy)."""
    if is_torch(x):
        import torch
        from opus.runtime import tensor_args as ta
        if not ta._TORCH_OF_OPUS:
            ta.init_torch()
        return torch.empty(shape, dtype=ta._TORCH_OF_OPUS[d], device=x.device)
    import numpy as np
    return np.empty(shape, d.np_dtype)


def allocator(x, d, shape=None):
    """``new(shape)``: new arrays of opus dtype ``d`` beside ``x``, as ``empty`` makes them,
    with the dtype and device looked up once (a launch plan keeps it); with ``shape``,
    ``new()`` makes C-contiguous arrays of that shape (torch: ``empty_strided`` with every
    argument bound, ~0.4 us cheaper a call than ``empty``)."""
    if is_torch(x):
        import functools
        import torch
        from opus.runtime import tensor_args as ta
        if not ta._TORCH_OF_OPUS:
            ta.init_torch()
        kw = dict(dtype=ta._TORCH_OF_OPUS[d], device=x.device)
        if shape is None:
            return functools.partial(torch.empty, **kw)
        return functools.partial(torch.empty_strided, shape, _contiguous_strides(shape), **kw)
    import numpy as np
    if shape is None:
        return lambda shape: np.empty(shape, d.np_dtype)
    return lambda: np.empty(shape, d.np_dtype)


def _contiguous_strides(shape):
    strides, step = [], 1
    for e in reversed(shape):
        strides.append(step)
        step *= max(e, 1)
    return tuple(reversed(strides))


def target():
    """The current target selection (``.target``, ``.mode``)."""
    return current_target()


_SMS = {}


def sm_count(x):
    """The multiprocessors of x's GPU (a fixed 8 in the interpreter)."""
    if not is_torch(x):
        return 8
    import torch
    dev = x.device.index if x.device.index is not None else torch.cuda.current_device()
    if dev not in _SMS:
        _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SMS[dev]


_IS_COMPILING = []   # [torch.compiler.is_compiling or None], looked up at the first call


def compiling():
    """True while torch.compile traces (the ops then go through their torch.library
    registration; eager calls launch directly, without the dispatcher's overhead)."""
    if not _IS_COMPILING:
        import torch
        _IS_COMPILING.append(getattr(getattr(torch, "compiler", None), "is_compiling", None))
    f = _IS_COMPILING[0]
    return bool(f and f())


def plan_key(*arrays):
    """What a launch plan depends on: each array's shape, strides, dtype, device and the
    alignment of its address (its vector width), not the address itself."""
    key = []
    for a in arrays:
        if is_torch(a):
            key.append((a.shape, a.stride(), a.dtype, a.device, a.data_ptr() & 15))
        else:
            key.append((a.shape, strides(a), a.dtype, "host", a.ctypes.data & 15))
    return tuple(key)
