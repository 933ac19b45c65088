"""The C hot path of launches (src/opus/_fastlaunch.c), driven without a GPU: its launch
function is a ctypes stand-in for cuLaunchKernelEx that records the config and every parameter
value it is handed. Each case checks either the exact launch (against values computed here) or
that the call went, untouched, to the Python fallback (which owns every error message)."""
import ctypes
import struct
import sys
import threading

import pytest

from opus import dtypes as dt
from opus.runtime.launch_plan import (C_ABI_VERSION, C_HEADER, C_RECORD, LaunchPlan,
                                      pointer_param, scalar_param)
from opus.runtime.launcher import LaunchConfig

fl = pytest.importorskip("opus._fastlaunch", reason="C extension not built (no C compiler)")


LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)


class Driver:
    """Records launches; reads parameter i with struct code codes[i] through kernelParams."""

    def __init__(self, codes, result=0):
        self.codes, self.result, self.launches = codes, result, []
        self.fn = LAUNCH(self._launch)
        self.address = ctypes.cast(self.fn, ctypes.c_void_p).value

    def _launch(self, config, function, params, extra):
        c = LaunchConfig.from_address(config)  # CUlaunchConfig, as the ctypes path lays it out
        ptrs = (ctypes.c_void_p * len(self.codes)).from_address(params)
        values = tuple(struct.unpack(code, ctypes.string_at(p, struct.calcsize(code)))[0]
                       for code, p in zip(self.codes, ptrs))
        self.launches.append(dict(grid=(c.gridDimX, c.gridDimY, c.gridDimZ),
                                  block=(c.blockDimX, c.blockDimY, c.blockDimZ),
                                  smem=c.sharedMemBytes, stream=c.hStream or 0,
                                  function=function, extra=extra, values=values))
        return self.result


class DType:  # a dtype object of its own (reference counts are checked below)
    def __init__(self, name):
        self.name = name


F32, F16 = DType("f32"), DType("f16")


class Tensor:  # stands in for torch.Tensor: the three accessors the hot path uses
    def __init__(self, ptr, dtype=F32, device=0):
        self.ptr, self.dtype, self.device = ptr, dtype, device

    def data_ptr(self):
        return self.ptr

    def get_device(self):
        return self.device


class Parameter(Tensor):  # stands in for torch.nn.Parameter
    pass


class Memory:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class CupyArray:  # stands in for cupy.ndarray: .dtype and .data (.ptr, .device_id)
    def __init__(self, ptr, dtype="np-f32", device=0):
        self.dtype, self.data = dtype, Memory(ptr, device)


class Launcher:
    def __init__(self, grid=(1, 1, 1), block=(256, 1, 1)):
        self.grid, self.block = grid, block


class Fallback:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


# vector add: (x, y, out: pointers aligned to 16, n: i32, then a constexpr the path ignores)
PARAMS = LaunchPlan([pointer_param(0, "x", dt.f32, 16), pointer_param(1, "y", dt.f32, 16),
                     pointer_param(2, "out", dt.f32, 16), scalar_param(3, "n", dt.i32)])
CODES = ("Q", "Q", "Q", "i")
STREAM_BASE = 0x5000


def make(plan=PARAMS, codes=CODES, result=0, device=0, smem_max=48 * 1024, owner=None):
    drv, fb = Driver(codes, result), Fallback()
    obj = fl.new(drv.address, 0xF00D, plan.c_table(fl.KINDS), plan.size, plan.nargs, fb,
                 threading.get_ident() if owner is None else owner, device, smem_max)
    obj.adopt_torch(Tensor, Parameter,
                    tuple(F32 if p.kind.name == "ptr" else None for p in plan.params),
                    lambda dev: STREAM_BASE + dev)
    return obj, drv, fb


def vadd_args(n=1000, **kw):
    return (Tensor(0x1000, **kw), Tensor(0x2000), Tensor(0x3000), n, 4)


def test_torch_tensors_launch_on_torch_stream_with_packed_values():
    obj, drv, fb = make()
    obj(Launcher((3, 2, 1), (128, 2, 1)), vadd_args(), 0, None)
    assert not fb.calls
    assert drv.launches == [dict(grid=(3, 2, 1), block=(128, 2, 1), smem=0,
                                 stream=STREAM_BASE, function=0xF00D, extra=None,
                                 values=(0x1000, 0x2000, 0x3000, 1000))]


def test_parameters_are_tensors_too():
    obj, drv, fb = make()
    obj(Launcher(), (Parameter(0x1000), Tensor(0x2000), Parameter(0x3000), 5, 4), 0, None)
    assert not fb.calls
    assert drv.launches[0]["values"] == (0x1000, 0x2000, 0x3000, 5)
    assert drv.launches[0]["stream"] == STREAM_BASE


def test_config_follows_the_launcher_smem_and_stream():
    obj, drv, fb = make()
    a, b = Launcher((1, 1, 1), (64, 1, 1)), Launcher((7, 1, 1), (256, 1, 1))
    for la, smem, stream in [(a, 0, None), (b, 512, None), (a, 0, 99), (b, 1024, 0)]:
        obj(la, vadd_args(), smem, stream)
    assert not fb.calls
    got = [(d["grid"][0], d["block"][0], d["smem"], d["stream"]) for d in drv.launches]
    assert got == [(1, 64, 0, STREAM_BASE), (7, 256, 512, STREAM_BASE), (1, 64, 0, 99),
                   (7, 256, 1024, 0)]


class TorchStream:
    cuda_stream = 0xABC


class CupyStream:
    ptr = 0xDEF


class OddStream:
    cuda_stream = "0xABC"


def test_stream_objects_give_their_handle():
    obj, drv, fb = make()
    for stream in (TorchStream(), CupyStream()):
        obj(Launcher(), vadd_args(), 0, stream)
    assert not fb.calls
    assert [d["stream"] for d in drv.launches] == [0xABC, 0xDEF]
    obj(Launcher(), vadd_args(), 0, OddStream())
    assert len(fb.calls) == 1 and len(drv.launches) == 2


def test_raw_int_addresses_use_the_default_stream():
    obj, drv, fb = make()
    obj(Launcher(), (0x10, 0x20, 0x30, -5, 4), 0, None)
    assert not fb.calls and drv.launches[0]["values"] == (0x10, 0x20, 0x30, -5)
    assert drv.launches[0]["stream"] == 0


def test_cupy_arrays_after_adoption():
    obj, drv, fb = make()
    args = (CupyArray(0x100), CupyArray(0x200), CupyArray(0x300), 7, 4)
    obj(Launcher(), args, 0, None)
    assert len(fb.calls) == 1 and not drv.launches  # not adopted yet: the Python path
    obj.adopt_cupy(CupyArray, ("np-f32", "np-f32", "np-f32", None))
    obj(Launcher(), args, 0, None)
    assert len(fb.calls) == 1
    assert drv.launches[0]["values"] == (0x100, 0x200, 0x300, 7)
    assert drv.launches[0]["stream"] == 0


@pytest.mark.parametrize("case", [
    "wrong dtype", "wrong device", "misaligned", "negative address", "address beyond 64 bits",
    "float address", "n too large", "n a float", "n a bool", "n a numpy-like int",
    "short args", "args a list", "smem above limit", "smem negative", "smem a bool",
    "stream object", "negative stream", "torch tensor later decides stream", "accessor raises",
    "unknown array type", "cupy device", "keyword argument",
])
def test_everything_unusual_goes_to_the_fallback_untouched(case):
    obj, drv, fb = make()
    obj.adopt_cupy(CupyArray, ("np-f32", "np-f32", "np-f32", None))
    la, args, smem, stream = Launcher(), list(vadd_args()), 0, None

    class NumpyLikeInt(int):
        pass

    class Raising(Tensor):
        pass

    if case == "wrong dtype":
        args[1] = Tensor(0x2000, dtype=F16)
    elif case == "wrong device":
        args[2] = Tensor(0x3000, device=1)
    elif case == "misaligned":
        args[0] = Tensor(0x1008)
    elif case == "negative address":
        args[0] = -16
    elif case == "address beyond 64 bits":
        args[0] = 2 ** 64
    elif case == "float address":
        args[0] = 4096.0
    elif case == "n too large":
        args[3] = 2 ** 31
    elif case == "n a float":
        args[3] = 3.0
    elif case == "n a bool":
        args[3] = True
    elif case == "n a numpy-like int":
        args[3] = NumpyLikeInt(3)
    elif case == "short args":
        args = args[:3]
    elif case == "args a list":
        pass
    elif case == "smem above limit":
        smem = 48 * 1024 + 1
    elif case == "smem negative":
        smem = -1
    elif case == "smem a bool":
        smem = True
    elif case == "stream object":
        stream = object()
    elif case == "negative stream":
        stream = -1
    elif case == "torch tensor later decides stream":
        args[0] = 0x1000
    elif case == "accessor raises":
        args[1] = Tensor(0x2000)
        args[1].data_ptr = None  # calling it raises TypeError inside the hot path
    elif case == "unknown array type":
        args[1] = Raising(0x2000)  # a subclass: not the exact adopted type
    elif case == "cupy device":
        args[0] = CupyArray(0x100, device=3)
    call_args = args if case == "args a list" else tuple(args)
    if case == "keyword argument":
        with pytest.raises(TypeError):
            obj(la, call_args, smem, stream=stream)  # the fallback (Fallback) takes no kwargs
        return
    obj(la, call_args, smem, stream)
    assert not drv.launches
    assert len(fb.calls) == 1
    got = fb.calls[0]
    assert got[0] is la and got[1] is call_args and got[2] is smem and got[3] is stream
    assert sys.exc_info() == (None, None, None)


def test_raising_smem_max_lets_larger_launches_through():
    obj, drv, fb = make()
    obj(Launcher(), vadd_args(), 100_000, None)
    assert len(fb.calls) == 1
    obj.smem_max = 100_000
    obj(Launcher(), vadd_args(), 100_000, None)
    assert len(fb.calls) == 1 and drv.launches[0]["smem"] == 100_000


def test_other_threads_go_to_the_fallback():
    obj, drv, fb = make()
    t = threading.Thread(target=obj, args=(Launcher(), vadd_args(), 0, None))
    t.start()
    t.join()
    assert len(fb.calls) == 1 and not drv.launches


def test_failed_launch_is_retried_by_the_fallback():
    obj, drv, fb = make(result=201)  # CUDA_ERROR_INVALID_CONTEXT
    args = vadd_args()
    obj(Launcher(), args, 0, None)
    assert len(drv.launches) == 1 and len(fb.calls) == 1 and fb.calls[0][1] is args


SCALARS = LaunchPlan([scalar_param(i, f"s{i}", d) for i, d in enumerate(
    (dt.i8, dt.u32, dt.i64, dt.f32, dt.f64, dt.bool_, dt.i16))])
SCALAR_CODES = ("b", "I", "q", "f", "d", "?", "h")


def test_scalar_plan_lays_out_natural_offsets():
    # i8 at 0, u32 at 4, i64 at 8, f32 at 16, f64 at 24, bool at 32, i16 at 34: 36 bytes
    assert SCALARS.offsets == (0, 4, 8, 16, 24, 32, 34) and SCALARS.size == 36


@pytest.mark.parametrize("vals", [
    (-128, 2 ** 32 - 1, -2 ** 63, 1.5, -2.25, True, -32768),
    (127, 0, 2 ** 63 - 1, float("inf"), 1e300, False, 32767),
    (-1, 1, -1, -3.4028234663852886e38, float("-inf"), True, -1),
])
def test_scalars_are_stored_exactly(vals):
    obj, drv, fb = make(SCALARS, SCALAR_CODES)
    obj(Launcher(), vals, 0, None)
    assert not fb.calls
    want = list(vals)
    want[3] = struct.unpack("f", struct.pack("f", vals[3]))[0]
    assert list(drv.launches[0]["values"]) == want


@pytest.mark.parametrize("index,value", [(0, 128), (0, -129), (1, -1), (1, 2 ** 32), (3, 1e39),
                                          (3, 1), (4, 2), (5, 1), (5, 0), (6, 2 ** 15)])
def test_scalars_out_of_range_or_of_another_type_go_to_the_fallback(index, value):
    obj, drv, fb = make(SCALARS, SCALAR_CODES)
    vals = [0, 0, 0, 0.0, 0.0, False, 0]
    vals[index] = value
    obj(Launcher(), tuple(vals), 0, None)
    assert not drv.launches and len(fb.calls) == 1


def test_nan_scalars_pass():
    obj, drv, fb = make(SCALARS, SCALAR_CODES)
    obj(Launcher(), (0, 0, 0, float("nan"), float("nan"), False, 0), 0, None)
    v = drv.launches[0]["values"]
    assert v[3] != v[3] and v[4] != v[4]


def test_no_reference_leaks():
    obj, drv, fb = make()
    la, args = Launcher(), vadd_args()
    dtype, x = args[0].dtype, args[0]
    obj(la, args, 0, None)
    before = [sys.getrefcount(o) for o in (la, x, dtype, args)]
    for _ in range(2000):
        obj(la, args, 0, None)
    assert [sys.getrefcount(o) for o in (la, x, dtype, args)] == before
    assert len(drv.launches) == 2001


def _table(*records, version=C_ABI_VERSION, record_size=C_RECORD.size):
    """A parameter table written by hand: (kind name, arg, offset, size, lo, hi, align)."""
    return C_HEADER.pack(version, record_size) + b"".join(
        C_RECORD.pack(fl.KINDS.get(r[0], 9), *r[1:]) for r in records)


@pytest.mark.parametrize("table,error", [
    (_table(("nine", 0, 0, 8, 0, 0, 1)), "bad parameter 0"),
    (_table(("ptr", 5, 0, 8, 0, 0, 1)), "bad parameter 0"),
    (_table(("ptr", 0, 0, 8, 0, 0, 0)), "bad parameter 0"),
    (_table(("ptr", 0, 0, 8, 0, 0, 3)), "bad parameter 0"),  # not a power of two
    (_table(("ptr", 0, 0, 8, 0, 0, 1))[:-4], "this module reads"),  # a torn record
    (_table(("ptr", 0, 4, 8, 0, 0, 1)), "bad parameter 0"),  # 8 bytes at 4 overrun 8
    (_table(("int", 0, 0, 3, 0, 1, 1)), "bad parameter 0"),
    (_table(("bytes", 0, 0, 16, 0, 0, 1)), "bad parameter 0"),  # 16 bytes in an 8-byte block
    (_table(("ptr", 0, 0, 8, 0, 0, 1), version=C_ABI_VERSION - 1), "parameter table of version"),
    (_table(("ptr", 0, 0, 8, 0, 0, 1), record_size=40), "with 40-byte records"),
    (b"\x04\x00", "no header"),
])
def test_bad_construction_is_refused(table, error):
    drv = Driver(("Q",))
    with pytest.raises(ValueError, match=error):
        fl.new(drv.address, 1, table, 8, 1, Fallback(), threading.get_ident(), 0, 0)


def test_collected_with_its_cycle():
    import gc
    import weakref
    obj, drv, fb = make()

    class Entry:
        pass

    entry = Entry()
    entry.run = obj
    fb.entry = entry  # entry -> obj -> fallback -> entry, as in GpuEntry
    ref = weakref.ref(entry)
    del entry, obj, fb
    gc.collect()
    assert ref() is None


# -- LauncherBase: the memo hit of kernel[grid, block](...) in C ----------------------------------

class Selected:
    """The test's own explicit selection (a ContextVar, as targeting._selected)."""

    def __init__(self):
        import contextvars
        self.var = contextvars.ContextVar("test_selected", default=None)

    def append(self, sel):  # set_target(sel)
        self.var.set(sel)

    def clear(self):  # set_target(None)
        self.var.set(None)


@pytest.fixture
def selection():
    """A selection variable and auto list of the test's own, handed to the C side; targeting's
    are restored."""
    from opus.frontend import targeting
    stack, auto = Selected(), ["auto-selection"]
    fl.watch_selection(stack.var, auto)
    yield stack, auto
    fl.watch_selection(targeting._selected, targeting._auto)


class Recorder(fl.LauncherBase):
    def __init__(self):
        self.slow, self.runs = [], []

    def _slow_call(self, *args, **kwargs):
        self.slow.append((args, kwargs))

    def run(self, launcher, args, smem, stream):
        assert launcher is self
        self.runs.append((args, smem, stream))
        return "ran"


def test_remembered_count_and_selection_call_run_directly(selection):
    stack, auto = selection
    la = Recorder()
    assert la(1, 2) is None and la.slow == [((1, 2), {})]  # nothing remembered yet
    la._remember(2, "auto-selection", la.run)
    assert la(3, 4) == "ran"
    assert la(5, 6, smem=128, stream=7) == "ran"
    assert la(5, 6, stream=8) == "ran"
    assert la.runs == [((3, 4), 0, None), ((5, 6), 128, 7), ((5, 6), 0, 8)]
    la(1, 2, 3)  # another count
    la(1, n=2)  # a kernel argument by name
    stack.append("pushed")  # set_target(...): another selection
    la(9, 9)
    stack.clear()
    auto.clear()  # nothing selected yet: Python decides
    la(9, 9)
    assert la.slow == [((1, 2), {}), ((1, 2, 3), {}), ((1,), {"n": 2}), ((9, 9), {}),
                       ((9, 9), {})]
    assert len(la.runs) == 3


def test_selection_on_the_stack_wins(selection):
    stack, _ = selection
    la = Recorder()
    stack.append("pushed")
    la._remember(1, "pushed", la.run)
    assert la(1) == "ran"
    stack.clear()
    la(1)
    assert len(la.runs) == 1 and len(la.slow) == 1


def test_many_arguments_always_take_the_python_path(selection):
    la = Recorder()
    la._remember(64, "auto-selection", la.run)  # beyond the memo: ignored
    la(*range(64))
    la(*range(100), smem=5)
    assert not la.runs and len(la.slow) == 2 and la.slow[1][1] == {"smem": 5}


def test_errors_from_run_propagate_and_references_balance(selection):
    la = Recorder()

    def failing(launcher, args, smem, stream):
        raise ValueError("from run")  # a new one each time (a re-raised one keeps its frames)
    la._remember(1, "auto-selection", failing)
    arg = object()
    before = sys.getrefcount(arg)
    for _ in range(1000):
        with pytest.raises(ValueError):
            la(arg)
    assert sys.getrefcount(arg) == before


def test_run_may_remember_a_new_run_while_it_runs(selection):
    la = Recorder()
    calls = []

    def first(launcher, args, smem, stream):
        calls.append("first")
        la._remember(1, "auto-selection", second)  # drops the memo's reference to first

    def second(launcher, args, smem, stream):
        calls.append("second")
    la._remember(1, "auto-selection", first)
    del first
    la(0)
    la(0)
    assert calls == ["first", "second"]


def test_launchers_are_collected_with_their_cycles(selection):
    import gc
    import weakref
    la = Recorder()
    la._remember(0, "auto-selection", la.run)  # launcher -> bound method -> launcher
    ref = weakref.ref(la)
    del la
    gc.collect()
    assert ref() is None
