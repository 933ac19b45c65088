"""The torch fast path shared by opus.ops' kernels (top-k, GEMM): a repeated eager call with torch
tensors of a layout that passed the checks before is one dict lookup by a key of the tensors'
accessors, its outputs' allocation and one launch by addresses on torch's current stream.

What is here: the exact-type gate (``TENSOR`` is ``torch.Tensor`` once the first torch call
passed its checks: subclasses such as Parameter or FakeTensor take the general path),
torch.compile's check, torch's current-stream function, launch arguments by address, and the
split workspaces kept per stream. Nothing imports torch before a torch tensor has arrived."""
from . import _rows


class NoTensor:
    """Stands in for torch.Tensor until a torch tensor has been planned for."""


TENSOR = NoTensor                        # torch.Tensor, once adopt_torch ran
IS_COMPILING = None                      # torch.compiler.is_compiling, likewise


def adopt_torch():
    """Torch's tensor type and compile check, for the ops' fast paths (after a checked call)."""
    global TENSOR, IS_COMPILING
    if TENSOR is NoTensor:
        import torch
        IS_COMPILING = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (
            lambda: False)
        TENSOR = torch.Tensor


def torch_stream():
    """``f(device index)``: torch's current stream there, as a raw handle."""
    from opus.runtime import tensor_args
    return tensor_args.torch_raw_stream()


def layout(x):
    """A torch tensor's layout as a call key holds it: shape, strides, dtype, device index
    and address modulo 16 (no torch.device object built)."""
    return x.shape, x.stride(), x.dtype, x.get_device(), x.data_ptr() & 15


def by_address(args):
    """``args`` with each torch tensor replaced by its address (what a launch entry packs)."""
    return tuple(a.data_ptr() if isinstance(a, TENSOR) else a for a in args)


class Workspaces:
    """A split launch's workspace arrays (``new()`` makes a tuple of them, any counters zero;
    the kernel leaves them zero between launches), kept per stream: the calls on one stream
    run in order, so one set serves them all, and calls in flight on two streams never share
    one. A call while its stream is captured into a CUDA graph gets a new set (allocated and
    zeroed in the capture: the graph owns it and zeroes the counters at each replay). A graph
    captured on a stream that has run the plan before uses that stream's set: replay it on
    that stream, not beside calls of the same shape on another."""

    __slots__ = ("new", "kept", "addresses", "stream", "device", "capturing")

    def __init__(self, x, new):
        self.new, self.kept, self.addresses = new, {}, {}
        self.stream, self.device, self.capturing = (lambda device: None), None, None
        if _rows.is_torch(x):
            import torch
            self.stream, self.device = torch_stream(), x.device.index
            self.capturing = torch.cuda.is_current_stream_capturing

    def get(self):
        """The set for the current stream."""
        return self.set_for(self.stream(self.device))

    def set_for(self, h):
        """The set for stream h: the kept one, or a new one (kept unless h is being captured)."""
        arrays = self.kept.get(h)
        if arrays is None:
            arrays = self.new()
            if self.capturing is None or not self.capturing():
                self.kept[h] = arrays
        return arrays

    def args(self, h):
        """The set for stream h as launch arguments: the kept set's addresses (its torch
        tensors kept here), or a set made in a capture itself (alive through the launch)."""
        a = self.addresses.get(h)
        if a is None:
            arrays = self.set_for(h)
            if self.kept.get(h) is not arrays:
                return arrays
            a = self.addresses[h] = tuple(x.data_ptr() for x in arrays)
        return a


def zeroed(x, d, shape):
    """A new array of opus dtype ``d`` and ``shape`` beside ``x``, all zero (counters)."""
    z = _rows.empty(x, shape, d)
    z[...] = 0
    return z


__all__ = ["NoTensor", "TENSOR", "IS_COMPILING", "adopt_torch", "torch_stream", "layout",
           "by_address", "Workspaces", "zeroed"]
