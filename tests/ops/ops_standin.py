"""torch CPU tensors passing for CUDA ones, for the host-path tests of opus.ops without a GPU
(test_topk_host.py, test_gemm_host.py): ``Tensor.is_cuda`` reads True, launch entries are
GpuEntry objects over a stand-in function whose cuLaunchKernelEx is a ctypes callback (the
test's recorder), torch's current raw stream and capture state are the test's, and the target
is sm_90a on the GPU."""
import ctypes

import pytest

from opus.frontend import gpu_launch, launch, targeting
from opus.ops import _fast_call
from opus.targets import get_target

_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 4)


def cpu_as_cuda(request, monkeypatch, record, function_of, kernels, stream):
    """Set it up for the test (``request.param``: "C" or "Python", the launch path); returns
    (torch, state): state["stream"] is the raw handle of torch's current stream (``stream``
    first), state["capturing"] whether it is being captured. ``record(config, function,
    params, extra)`` receives each launch; ``function_of(kernel name)`` is the loaded-function
    stand-in; ``kernels``' launch entries start empty (the stand-in entries stay there)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("OPUS_FAST_LAUNCH", "1" if request.param == "C" else "0")
    if request.param == "C" and gpu_launch.fast_launch_module() is None:
        pytest.skip("the C hot path (opus._fastlaunch) is not built")
    cu_launch = _LAUNCH(record)

    class CpuEntry(gpu_launch.GpuEntry):
        def _adopt_torch(self):
            from opus.runtime import tensor_args
            tensor_args.init_torch()
            dtypes = self._per_param(tensor_args.torch_dtype)
            raw_stream = tensor_args.torch_raw_stream()
            self._adopt(torch.Tensor, dtypes, raw_stream)
            if self.fast is not None:
                self.fast.adopt_torch(torch.Tensor, torch.nn.Parameter, dtypes, raw_stream)
            self._torch_adopted = True

    monkeypatch.setattr(launch, "_make_entry", lambda k, sel, spec: CpuEntry(
        k.name, spec.target, spec.static_smem, gpu_launch.plan_of(k, spec), function_of(k.name),
        227 * 1024, cu_launch))
    for kern in kernels:
        monkeypatch.setattr(kern, "launch_entries", {})
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    state = dict(stream=stream, capturing=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: state["stream"],
                        raising=False)
    from opus.runtime import tensor_args
    monkeypatch.setattr(tensor_args, "_torch_stream", None)   # read again from torch._C
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: state["capturing"])
    monkeypatch.setattr(_fast_call, "TENSOR", _fast_call.NoTensor)
    monkeypatch.setattr(_fast_call, "IS_COMPILING", None)
    token = targeting._selected.set(targeting._selection(get_target("sm_90a"), "gpu"))
    request.addfinalizer(lambda: targeting._selected.reset(token))
    return torch, state
