"""opus.ops.topk's host path for torch tensors (ops/rowtopk.py): a repeated call is one dict
lookup by a key of x's layout and the arguments, then the outputs' allocation and one launch by
addresses on torch's current stream. Without a GPU: torch CPU tensors pass for CUDA ones, the
launch entries are GpuEntry objects over a stand-in function, and cuLaunchKernelEx is a ctypes
callback that records each launch's grid, stream and parameter values, which the tests compare
with the tensors' own addresses and layouts (benchmarks/launch_cpu.py --ops times the same
setup). Run through the C hot path and the Python one. The results themselves are checked on
the GPU (test_ops_softmax_topk.py's gpu tests)."""
import ctypes
import sys

import numpy as np
import pytest

import opus
import opus.ops
from opus.errors import ArgumentError
from opus.frontend import launch
from opus.ops import _fast_call, _rows, rowtopk
from ops_standin import cpu_as_cuda
from opus.runtime.launcher import LaunchConfig

STREAM = 0x5000          # the raw handle torch's current stream has in these tests
SMS = 132



class _Function:
    """A loaded function stand-in: its handle tells the kernels apart in the launches."""

    HANDLES = {"topk_rows": 0xF001, "topk_short": 0xF002}
    device = -1                       # a CPU tensor's get_device()

    def __init__(self, name):
        self.name, self.handle = name, self.HANDLES[name]

    def set_max_dynamic_smem(self, n):
        pass


class Launches(list):
    """Each launch as a dict: grid, stream, and the parameters' values (``names``)."""

    # parameter order of the kernels (rowtopk): pointers first, then the scalars
    ROWS = ("x", "vals", "inds", "work", "counts", "rows", "n", "x_stride", "slice_len")
    SHORT = ("x", "vals", "inds", "rows", "n", "x_stride")
    TYPES = {"rows": ctypes.c_int32, "n": ctypes.c_int32, "slice_len": ctypes.c_int32,
             "x_stride": ctypes.c_int64}

    def record(self, config, function, params, extra):
        c = LaunchConfig.from_address(config)
        grid = (c.gridDimX, c.gridDimY, c.gridDimZ)
        names = self.ROWS if function == _Function.HANDLES["topk_rows"] else self.SHORT
        ptrs = (ctypes.c_void_p * len(names)).from_address(params)
        values = {name: self.TYPES.get(name, ctypes.c_uint64).from_address(p).value
                  for name, p in zip(names, ptrs)}
        self.append(dict(grid=grid, stream=c.hStream or 0, **values))
        return 0


@pytest.fixture(params=["C", "Python"])
def standin(request, monkeypatch):
    """torch CPU tensors as CUDA ones (see the module docstring); yields (torch, launches,
    state): state["stream"] is the raw handle of torch's current stream, state["capturing"]
    whether it is being captured."""
    launches = Launches()
    kernels = list(rowtopk.TOPK.values()) + list(rowtopk.TOPK_SHORT.values())
    torch, state = cpu_as_cuda(request, monkeypatch, launches.record, _Function, kernels, STREAM)
    monkeypatch.setattr(_rows, "sm_count", lambda x: SMS)
    for name, value in (("_PLANS", {}), ("_DUMMIES", {})):
        monkeypatch.setattr(rowtopk, name, value)
    return torch, launches, state


@pytest.fixture
def general(monkeypatch):
    """Counts calls into topk's general path (argument checks, planning)."""
    calls = []
    for name in ("_checked", "_launch"):
        original = getattr(rowtopk, name)

        def wrapper(*a, _name=name, _original=original):
            calls.append(_name)
            return _original(*a)
        monkeypatch.setattr(rowtopk, name, wrapper)
    return calls


def _expect(launch, x, vals, inds, row_stride):
    assert launch["x"] == x.data_ptr()
    assert launch["vals"] == vals.data_ptr() and launch["inds"] == inds.data_ptr()
    assert launch["x_stride"] == row_stride
    assert launch["stream"] == STREAM


@pytest.mark.parametrize("rows,n,k,grid", [
    (64, 131072, 64, (64, 8, 1)),       # the split, one launch: 8 slices of 4 warps a row
    (4096, 32768, 8, (1024, 1, 1)),     # one warp a row, 4 rows a block
    (16384, 256, 8, (1024, 1, 1)),      # the short-row kernel: 16 rows a block
])
def test_repeated_call_is_one_launch_by_addresses(standin, general, rows, n, k, grid):
    """The second call with new data of the same layout skips the checks and the planning and
    launches x's address with the new outputs' (contiguous rows x k, values in x's dtype,
    int64 indices) on the current stream; the split's workspace is the one kept for it."""
    torch, launches, state = standin
    x = torch.empty(rows, n)
    v0, i0 = opus.ops.topk(x, k)
    assert general == ["_checked", "_launch"] and len(launches) == 1
    general.clear()
    y = torch.empty(rows, n)
    v, i = opus.ops.topk(y, k)
    assert general == [] and len(launches) == 2
    assert v.shape == i.shape == (rows, k) and v.is_contiguous() and i.is_contiguous()
    assert v.dtype == torch.float32 and i.dtype == torch.int64
    first, second = launches
    assert first["grid"] == second["grid"] == grid
    _expect(second, y, v, i, n)
    if grid[1] > 1:   # the split: the workspace made at the first call, kept for the stream
        assert (second["work"], second["counts"]) == (first["work"], first["counts"])
        plan = next(p for p in rowtopk._PLANS.values() if isinstance(p, rowtopk._Plan))
        work, counts = plan.launch.spaces.kept[STREAM]
        assert second["work"] == work.data_ptr() and second["counts"] == counts.data_ptr()
        assert counts.dtype == torch.int32 and not counts.any()


def test_layouts_of_one_shape_keep_their_own_plans(standin, general):
    """Same shape, other row stride or alignment: each layout is planned once and each call
    launches with its own stride (a key without strides would launch the padded rows as
    dense ones); a batch of rows launches x itself (its rows are a view)."""
    torch, launches, state = standin
    dense = torch.empty(8, 1000)
    padded = torch.empty(8, 1024)[:, :1000]
    shifted = torch.empty(8 * 1000 + 1)[1:].view(8, 1000)     # 4 bytes past 16
    batch = torch.empty(2, 4, 1000)
    layouts = [(dense, 1000), (padded, 1024), (shifted, 1000), (batch, 1000)]
    for rounds in range(2):
        for x, stride in layouts:
            general.clear()
            v, i = opus.ops.topk(x, 5)
            assert general == ([] if rounds else ["_checked", "_launch"])
            _expect(launches[-1], x, v, i, stride)
            assert v.shape == x.shape[:-1] + (5,)
    assert launches[0]["grid"] == launches[1]["grid"]


def test_a_copied_layout_is_never_the_fast_path(standin, general):
    """Rows that are not a view of x (a transposed input: as_rows copies them) go through the
    general path at every call, and the launch reads the copy."""
    torch, launches, state = standin
    x = torch.empty(300, 6).t()
    for _ in range(2):
        general.clear()
        v, i = opus.ops.topk(x, 3)
        assert general == ["_checked", "_launch"]
        assert launches[-1]["x"] != x.data_ptr() and launches[-1]["x_stride"] == 300


@pytest.mark.parametrize("bad,needle", [
    (dict(k=True), "k must be an int"),
    (dict(k=5.0), "k must be an int"),
    (dict(largest=1), "largest must be a bool"),
    (dict(sorted=False), "sorted=false is not offered"),
    (dict(sorted=1), "sorted=false is not offered"),
    (dict(dim=0), "only the last dimension"),
    (dict(dim=-1.0), "dim must be an int"),
])
def test_bad_arguments_after_a_planned_call_are_refused(standin, bad, needle):
    """Values equal to a planned call's (True == 1, 5.0 == 5, 1 == True, -1.0 == -1) do not
    take its fast path: the checks refuse them, and nothing is launched."""
    torch, launches, state = standin
    x = torch.empty(4, 300)
    args = dict(k=5, dim=-1, largest=True, sorted=True)
    opus.ops.topk(x, **args)
    opus.ops.topk(x, **dict(args, k=1))
    count = len(launches)
    with pytest.raises(ArgumentError) as e:
        opus.ops.topk(x, **dict(args, **bad))
    assert needle in str(e.value).lower()
    assert len(launches) == count


def test_another_dtype_of_the_same_shape_is_checked(standin):
    torch, launches, state = standin
    opus.ops.topk(torch.empty(4, 300), 5)
    with pytest.raises(ArgumentError, match="has dtype f64"):
        opus.ops.topk(torch.empty(4, 300, dtype=torch.float64), 5)
    assert len(launches) == 1


def test_under_torch_compile_the_torch_op_is_called(standin, monkeypatch):
    """While torch.compile traces, a planned layout still goes to torch.ops.opus.topk."""
    torch, launches, state = standin
    x = torch.empty(4, 300)
    opus.ops.topk(x, 5)
    ops = []

    class Ops:
        @staticmethod
        def topk(*a):
            ops.append(a)
            return "the op's result"
    monkeypatch.setattr(rowtopk, "_torch_ops", lambda: Ops)
    monkeypatch.setattr(_fast_call, "IS_COMPILING", lambda: True)
    monkeypatch.setattr(_rows, "compiling", lambda: True)
    assert opus.ops.topk(x, 5) == "the op's result"
    assert ops == [(x, 5, True)] and len(launches) == 1


def test_a_captured_call_gets_its_own_workspace(standin):
    """A split call while its stream is captured launches with a workspace of its own (the
    graph's), not the kept one, and keeps nothing for the capture's stream; the next eager
    call uses the kept one again."""
    torch, launches, state = standin
    x = torch.empty(64, 131072)
    opus.ops.topk(x, 64)
    state.update(stream=STREAM + 1, capturing=True)
    opus.ops.topk(x, 64)
    opus.ops.topk(x, 64)
    first, cap1, cap2 = launches
    assert cap1["stream"] == cap2["stream"] == STREAM + 1
    assert cap1["work"] != first["work"] and cap1["counts"] != first["counts"]
    state.update(stream=STREAM, capturing=False)
    opus.ops.topk(x, 64)
    assert (launches[-1]["work"], launches[-1]["counts"]) == (first["work"], first["counts"])
    plan = next(p for p in rowtopk._PLANS.values() if isinstance(p, rowtopk._Plan))
    assert list(plan.launch.spaces.kept) == list(plan.launch.spaces.addresses) == [STREAM]


def test_allocator_with_a_shape(standin):
    """_rows.allocator(x, d, shape): new C-contiguous arrays of that shape and dtype beside x
    at each call (torch and numpy)."""
    torch = standin[0]
    x = torch.empty(3, 4)
    for shape, strides in (((2, 3, 5), (15, 5, 1)), ((0, 4), (4, 1)), ((2, 0, 3), (3, 3, 1))):
        new = _rows.allocator(x, opus.i64, shape)
        a, b = new(), new()
        assert a.shape == shape and a.stride() == strides and a.dtype == torch.int64
        assert a.device == x.device and (a.data_ptr() != b.data_ptr() or a.numel() == 0)
    new = _rows.allocator(np.zeros(3, np.float32), opus.f16, (2, 3))
    a, b = new(), new()
    assert a.shape == (2, 3) and a.dtype == np.float16 and a.flags.c_contiguous and a is not b


# -- bound launch entries and the trace's guards (interpreter) ---------------------------------

SCALE = 2.0


@opus.kernel
def _scaled(out: opus.Ptr[opus.f32]):
    out[opus.thread_id_x()] = opus.f32(SCALE) * opus.cast(opus.thread_id_x(), opus.f32)


def test_bound_entries_check_only_guards_outside_opus(monkeypatch):
    """A bound entry of a kernel whose trace read only opus's own module globals (top-k's
    constants and helpers) runs without checking them per launch; a user's kernel keeps its
    guards: rebinding the global it read retraces."""
    from opus.frontend.launch import GuardedEntry
    checked = []
    run = GuardedEntry.run

    def counted(self, *a):
        checked.append(self.kernel.name)
        return run(self, *a)
    monkeypatch.setattr(GuardedEntry, "run", counted)
    monkeypatch.setattr(rowtopk, "_PLANS", {})
    x = np.random.default_rng(0).standard_normal((2, 300)).astype(np.float32)
    with opus.set_target("sm_90a", interpret=True):
        v, i = opus.ops.topk(x, 4)
        assert np.array_equal(v, -np.sort(-x, axis=1)[:, :4])
        assert checked == []
        out = np.zeros(4, np.float32)
        bound, full = _scaled[1, 4].bind_entry(out)
        bound(_scaled[1, 4], full, 0, None)
        assert out.tolist() == [0, 2, 4, 6] and checked == ["_scaled"]
        monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
        bound(_scaled[1, 4], full, 0, None)
        assert out.tolist() == [0, 3, 6, 9]
