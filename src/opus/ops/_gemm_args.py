"""Host-side argument handling shared by the GEMMs (ops/gemm_hopper.py, ops/gemm_amd.py): the
matrices' shapes, strides, dtypes and where they live, and the errors that name them."""
from opus import dtypes as dt
from opus.errors import ArgumentError


def err(msg):
    raise ArgumentError(f"opus.ops.gemm: {msg}")


def shape2(x, name):
    shape = tuple(x.shape)
    if len(shape) != 2:
        err(f"{name} must be a matrix (2 dimensions), got shape {shape}")
    return shape


def operands(a, b, kinds, hint=""):
    """(M, K, N, dtype name) of a (M x K) and b (K x N), both of one type among ``kinds``."""
    (m, k), (k2, n) = shape2(a, "a"), shape2(b, "b")
    if k != k2:
        err(f"inner dimensions differ: a is {m} x {k}, b is {k2} x {n}")
    da, db = dtype_name(a), dtype_name(b)
    if da not in kinds or db != da:
        err(f"a and b must both be {' or both '.join(kinds)}, got {da} and {db}{hint}")
    return m, k, n, da


def strides(x):
    s = x.stride() if callable(getattr(x, "stride", None)) else tuple(
        st // x.itemsize for st in x.strides)
    return tuple(s)


def b_major(b, k, n):
    """True if ``b`` (K x N) is the transpose of a row-major N x K tensor (K contiguous), False
    if it is row-major (N contiguous)."""
    s = strides(b)
    if s[1] == 1 or n == 1:
        return False
    if s[0] == 1 or k == 1:
        return True
    err(f"b must have one contiguous dimension (row-major K x N, or the transpose of a "
         f"row-major N x K tensor); its strides are {s}")


def new_out(a, b, d):
    torch = torch_of(a)
    m, n = a.shape[0], b.shape[1]
    if torch is not None:
        from ..runtime import tensor_args as ta
        if not ta._TORCH_OF_OPUS:
            ta.init_torch()
        return torch.empty((m, n), dtype=ta._TORCH_OF_OPUS[d], device=a.device)
    return np().zeros((m, n), d.np_dtype)


def torch_of(x):
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        if not x.is_cuda:
            err("torch tensors must be on a CUDA device (numpy arrays run in the interpreter)")
        return torch
    return None


def np():
    import numpy
    return numpy


_NAME_OF_TORCH = {}   # torch dtype -> opus's name for it (a dict lookup per call)


def dtype_name(x):
    if type(x).__module__.startswith("torch"):
        name = _NAME_OF_TORCH.get(x.dtype)
        if name is not None:
            return name
        from ..runtime import tensor_args as ta
        if not ta._TORCH_OF_OPUS:
            ta.init_torch()
        d = next((o for o, tt in ta._TORCH_OF_OPUS.items() if tt is x.dtype), None)
        if d is None:
            return str(x.dtype)
        _NAME_OF_TORCH[x.dtype] = d.name
        return d.name
    d = dt.dtype_of_numpy(x.dtype)
    return d.name if d is not None else str(x.dtype)


def out_dtype(a, out_dtype, scaled):
    """The output's opus dtype: out_dtype (a torch or opus dtype), else a's type, or bf16 for
    a scaled (fp8) GEMM."""
    if out_dtype is None:
        return dt.bf16 if scaled else dt.dtype_from_name(dtype_name(a))
    if isinstance(out_dtype, dt.DType):
        return out_dtype
    from ..runtime import tensor_args as ta
    if not ta._TORCH_OF_OPUS:
        ta.init_torch()
    d = next((o for o, tt in ta._TORCH_OF_OPUS.items() if tt is out_dtype), None)
    if d is None:
        err(f"out_dtype must be bf16, f16 or f32, got {out_dtype!r}")
    return d


def scale_mode(x, name, along, extent, torch, a):
    """(SCALES entry, the f32 array to pass): 1 for one value, 2 for one per ``along``."""
    if x is None:
        return 0, None
    if dtype_name(x) != "f32":
        err(f"{name} must be f32, got {dtype_name(x)}")
    if torch is not None and not x.is_cuda:
        err(f"{name} must be on the GPU with a and b")
    size = 1
    for e in x.shape:
        size *= e
    shape = tuple(x.shape)
    if size == 1 and len(shape) <= 2:
        return 1, x
    if size == extent and len(shape) <= 2 and max(shape) == extent:
        if torch is not None and not x.is_contiguous():
            err(f"{name} must be contiguous")
        return 2, x
    err(f"{name} must hold one value or one per {along} ({extent}); its shape is {shape}")


def check_operand(x, name, shape, od, torch):
    """An epilogue operand: ``shape``, of the output's type, row-major and contiguous."""
    if x is None:
        return
    if tuple(x.shape) != shape or dtype_name(x) != od.name:
        err(f"{name} must be {' x '.join(map(str, shape))} of {od.name} (the output's type), "
             f"got shape {tuple(x.shape)} and {dtype_name(x)}")
    contiguous = x.is_contiguous() if torch is not None else x.flags.c_contiguous
    if not contiguous:
        err(f"{name} must be contiguous (row-major)")
    if torch is not None and not x.is_cuda:
        err(f"{name} must be on the GPU with a and b")


ONES_BY_DEVICE = {}


def ones(torch, a, d):
    """A one-element array of 1 of type ``d`` on a's device (the pointers of operands a call
    does not use: scales of an unscaled GEMM, an absent bias or residual)."""
    dev = (str(a.device) if torch is not None else "host", d.name)
    x = ONES_BY_DEVICE.get(dev)
    if x is None:
        if torch is not None:
            from ..runtime import tensor_args as ta
            if not ta._TORCH_OF_OPUS:
                ta.init_torch()
            x = torch.ones(1, dtype=ta._TORCH_OF_OPUS[d], device=a.device)
        else:
            x = np().ones(1, d.np_dtype)
        ONES_BY_DEVICE[dev] = x
    return x
