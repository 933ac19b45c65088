"""opus.ops.gemm / scaled_gemm's host path for torch tensors (ops/gemm_hopper.py): a repeated
call with tensors of layouts planned before is one dict lookup by a key of their layouts and
the options, out's allocation (out=None) and one launch by addresses on torch's current stream:
the tensor maps encoded once per address, the other operands as addresses. Without a GPU, as
tests/ops/test_topk_host.py: torch CPU tensors pass for CUDA ones, launch entries are GpuEntry
objects over a stand-in function, cuLaunchKernelEx is a ctypes callback recording each launch,
and cuTensorMapEncodeTiled a stand-in whose 128 bytes hold the map's address, dimensions and
row stride, so the tests read which tensor each map covers. The results are checked against
torch on the GPU (test_gemm.py's gpu tests)."""
import ctypes
import struct

import numpy as np
import pytest

import opus
import opus.ops
from opus import dtypes as dt
from opus.errors import ArgumentError
from opus.ops import _fast_call, _gemm_args, gemm_hopper
from ops_standin import cpu_as_cuda
from opus.runtime import cuda_driver
from opus.runtime.launcher import LaunchConfig

STREAM = 0x5000
SMS = 132
_MAPS = ("a", "b", "c")
_PARAMS = _MAPS + ("M", "N", "K", "scale_a", "scale_b", "bias", "residual", "partials",
                   "counts")


def _fake_encode(code, address, dims, strides, box, es, swizzle, l2, describe):
    """The map's address, its dims (innermost first) and row stride in bytes, as 4 u64."""
    return struct.pack("<4Q", address, dims[0], dims[1], strides[0]).ljust(128, b"\0")


class _Function:
    device, name, handle = -1, "gemm_kernel", 0xF00D

    def set_max_dynamic_smem(self, n):
        pass


class Launches(list):
    """Each launch: grid, stream, each map's (address, inner dim, outer dim, row stride bytes)
    and the other parameters' values."""

    def record(self, config, function, params, extra):
        c = LaunchConfig.from_address(config)
        ptrs = (ctypes.c_void_p * len(_PARAMS)).from_address(params)
        got = dict(grid=(c.gridDimX, c.gridDimY, c.gridDimZ), stream=c.hStream or 0)
        for name, p in zip(_PARAMS, ptrs):
            if name in _MAPS:
                got[name] = struct.unpack("<4Q", ctypes.string_at(p, 32))
            elif name in ("M", "N", "K"):
                got[name] = ctypes.c_int32.from_address(p).value
            else:
                got[name] = ctypes.c_uint64.from_address(p).value
        self.append(got)
        return 0


@pytest.fixture(params=["C", "Python"])
def standin(request, monkeypatch):
    """(torch, launches, state) with torch CPU tensors passing for CUDA ones; state["stream"]
    is torch's current raw stream, state["capturing"] whether it is being captured."""
    launches = Launches()
    kernels = [gemm_hopper.gemm_kernel_for(dt.bf16, promoted) for promoted in (False, True)]
    torch, state = cpu_as_cuda(request, monkeypatch, launches.record, lambda name: _Function(),
                               kernels, STREAM)
    monkeypatch.setattr(gemm_hopper, "_sm_count", lambda torch, a: SMS)
    monkeypatch.setattr(cuda_driver, "tensor_map_encode_tiled", _fake_encode)
    for name in ("_PLANS", "_CALLS"):
        monkeypatch.setattr(gemm_hopper, name, {})
    monkeypatch.setattr(_gemm_args, "ONES_BY_DEVICE", {})
    return torch, launches, state


@pytest.fixture
def planned(monkeypatch):
    """Counts the general path's plans (argument checks, tiling, maps, entry binding)."""
    calls = []
    original = gemm_hopper._plan

    def plan(*a, **kw):
        calls.append(a[0].shape)
        return original(*a, **kw)
    monkeypatch.setattr(gemm_hopper, "_plan", plan)
    return calls


def _map(x, row_stride=None):
    """What the stand-in encoding holds for a map over the 2-D tensor x (row-major)."""
    rows, cols = x.shape
    return (x.data_ptr(), cols, rows, (row_stride or x.stride(0)) * x.element_size())


def _bf16(torch, *shape):
    return torch.empty(*shape, dtype=torch.bfloat16)


M, N, K = 128, 512, 256


def test_repeated_call_is_one_launch_by_addresses(standin, planned):
    """New tensors of the planned layouts: no second plan; the maps cover the new a, the new
    weight (b = w.t(): the map is over w) and the new out, M, N, K as planned, on the current
    stream, the unused pointers the one-valued stand-ins'."""
    torch, launches, state = standin
    a, w, out = _bf16(torch, M, K), _bf16(torch, N, K), _bf16(torch, M, N)
    assert opus.ops.gemm(a, w.t(), out=out) is out
    a2, w2, out2 = _bf16(torch, M, K), _bf16(torch, N, K), _bf16(torch, M, N)
    assert opus.ops.gemm(a2, w2.t(), out=out2) is out2
    assert len(planned) == 1 and len(launches) == 2
    first, second = launches
    assert second["grid"] == first["grid"] and second["stream"] == STREAM
    assert (second["a"], second["b"], second["c"]) == (_map(a2), _map(w2), _map(out2))
    assert (second["M"], second["N"], second["K"]) == (M, N, K)
    ones = _gemm_args.ONES_BY_DEVICE
    one, stand_in = ones[("cpu", "f32")].data_ptr(), ones[("cpu", "bf16")].data_ptr()
    assert second["scale_a"] == second["scale_b"] == one
    assert second["bias"] == second["residual"] == stand_in
    assert {k: v for k, v in first.items() if k not in _MAPS} == {
        k: v for k, v in second.items() if k not in _MAPS}


def test_out_none_is_planned_once_and_allocates_one_output(standin, planned):
    """out=None: the first call plans, later ones allocate a new row-major M x N bf16 output
    each and launch its address (the general path planned again at every call: the plan
    was keyed by the output's address)."""
    torch, launches, state = standin
    a, w = _bf16(torch, M, K), _bf16(torch, K, N)
    outs = [opus.ops.gemm(a, w) for _ in range(3)]
    assert len(planned) == 1 and len(launches) == 3
    for out, got in zip(outs, launches):
        assert out.shape == (M, N) and out.dtype == torch.bfloat16 and out.is_contiguous()
        assert got["c"] == _map(out) and got["b"] == _map(w)


def test_interleaved_layouts_of_one_shape_keep_their_own_calls(standin, planned):
    """a dense and a with padded rows, b row-major and b = w.t(), called in turn: each layout
    planned once, each launch with its own map (row stride; b's map over b or over w)."""
    torch, launches, state = standin
    dense, padded = _bf16(torch, M, K), _bf16(torch, M, K + 64)[:, :K]
    b_rows, w = _bf16(torch, K, N), _bf16(torch, N, K)
    cases = [(dense, b_rows, _map(b_rows)), (padded, b_rows, _map(b_rows)),
             (dense, w.t(), _map(w)), (padded, w.t(), _map(w))]
    for _ in range(2):
        for a, b, b_map in cases:
            opus.ops.gemm(a, b)
            assert launches[-1]["a"] == _map(a, a.stride(0)) and launches[-1]["b"] == b_map
    assert len(planned) == 4 and len(launches) == 8
    assert launches[1]["a"][3] == (K + 64) * 2


def test_side_stream_and_split_workspaces_per_stream(standin, planned):
    """split_k=2: the launch on a side stream gets that stream and its own workspace, the
    first stream's is reused on it; a call while the stream is captured gets a new one that
    is not kept (the graph owns it)."""
    torch, launches, state = standin
    a, w = _bf16(torch, M, K), _bf16(torch, N, K)
    opus.ops.gemm(a, w.t(), split_k=2)
    opus.ops.gemm(a, w.t(), split_k=2)
    state["stream"] = 0x6000
    opus.ops.gemm(a, w.t(), split_k=2)
    state["stream"], state["capturing"] = 0x7000, True
    opus.ops.gemm(a, w.t(), split_k=2)
    assert len(planned) == 1
    spaces = [(x["partials"], x["counts"]) for x in launches]
    assert [x["stream"] for x in launches] == [STREAM, STREAM, 0x6000, 0x7000]
    assert spaces[1] != spaces[0]          # the general path's own, then the stream's
    assert len({spaces[1], spaces[2], spaces[3]}) == 3
    (key, call), = gemm_hopper._CALLS.items()
    assert key[-2][3] == 2                 # the options: split_k=2


def test_scaled_gemm_passes_the_scales_addresses(standin, planned):
    """fp8 with per-row and per-column scales and a bias: the second call launches the new
    scales' and bias' addresses."""
    torch, launches, state = standin
    f8 = torch.float8_e4m3fn

    def operands():
        return (torch.empty(M, K, dtype=f8), torch.empty(N, K, dtype=f8), torch.empty(M),
                torch.empty(N), _bf16(torch, N))
    for a, w, sa, sb, bias in (operands(), operands()):
        out = opus.ops.scaled_gemm(a, w.t(), sa, sb, bias=bias)
    assert len(planned) == 1
    got = launches[-1]
    assert (got["a"], got["b"], got["c"]) == (_map(a), _map(w), _map(out))
    assert (got["scale_a"], got["scale_b"], got["bias"]) == (
        sa.data_ptr(), sb.data_ptr(), bias.data_ptr())


def test_other_types_and_torch_compile_take_the_general_path(standin, planned, monkeypatch):
    """A Parameter (a subclass) as b, a numpy integer option and a call under torch.compile
    are planned by the general path each time, never served by another layout's call."""
    torch, launches, state = standin
    a, w = _bf16(torch, M, K), _bf16(torch, N, K)
    opus.ops.gemm(a, w.t(), block_n=128)
    opus.ops.gemm(a, w.t(), block_n=128)
    assert len(planned) == 1
    p = torch.nn.Parameter(_bf16(torch, K, N), requires_grad=False)   # (w.t() is a Tensor)
    runs = []
    original = gemm_hopper._run
    monkeypatch.setattr(gemm_hopper, "_run", lambda *x, **kw: runs.append(1) or original(
        *x, **kw))
    opus.ops.gemm(a, p, block_n=128)
    opus.ops.gemm(a, p, block_n=128)
    opus.ops.gemm(a, w.t(), block_n=np.int64(128))
    monkeypatch.setattr(_fast_call, "IS_COMPILING", lambda: True)
    opus.ops.gemm(a, w.t(), block_n=128)
    assert len(runs) == 4 and len(launches) == 6
    assert launches[3]["b"] == _map(p)


@pytest.mark.parametrize("kw,needle", [
    (dict(split_k=True), "split_k must be an int"),
    (dict(block_m=True), "block_m must be 64 or 128"),
    (dict(block_n=True), "block_n must be"),
])
def test_bool_options_are_refused_after_fast_calls(standin, kw, needle):
    """A bool equals 1 (and hashes so): after calls with the int planned, the bool still gets
    the general path's refusal, not the int's plan."""
    torch, launches, state = standin
    a, w = _bf16(torch, M, K), _bf16(torch, N, K)
    for _ in range(2):
        opus.ops.gemm(a, w.t(), **{name: 1 for name in kw if name == "split_k"})
    with pytest.raises(ArgumentError, match=needle):
        opus.ops.gemm(a, w.t(), **kw)
