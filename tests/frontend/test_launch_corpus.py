"""One corpus of launch arguments through every launch path, without a GPU.

The paths: the C hot path (opus._fastlaunch, where built), the generated Python path, the
generated path called from another thread (its own buffers, launch_once), and the AMD entry
(the plan's general path into a stand-in for libamdhip64). cuLaunchKernelEx is a ctypes
stand-in recording the config and every parameter's bytes. Each good case must give, on every
path, the bytes written here by hand (offsets and encodings of the plan below, worked out
independently of the plan code), the stream handle, grid, block and smem; each bad case must
raise the same error type and message everywhere, naming the problem.

The launchers' memo (PyLauncher and the C LauncherBase) is driven through one script of calls
at the end: both must send the same calls to the remembered run and the rest to _slow_call.
"""
import ctypes
import math
import struct
import threading

import numpy as np
import pytest

import opus
from opus import dtypes as dt
from opus.errors import ArgumentError
from opus.frontend import gpu_launch
from opus.frontend.gpu_launch import GpuEntry, plan_of
from opus.frontend.hip_launch import HipEntry
from opus.runtime import cuda_driver, hip_driver
from opus.runtime.launch_plan import (LaunchPlan, pointer_param, scalar_param, tensor_map_param)
from opus.runtime.tensor_map import TensorMap, TensorMapNeed
from opus.runtime.launcher import LaunchConfig
from opus.targets import get_target

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_void_p)

# The plan under test: argument 2 is a constexpr (not a parameter), the rest are parameters.
PLAN = LaunchPlan([
    pointer_param(0, "x", dt.f32, 16), pointer_param(1, "y", dt.f16), scalar_param(3, "k", dt.i8),
    scalar_param(4, "m", dt.u32), scalar_param(5, "big", dt.i64), scalar_param(6, "ubig", dt.u64),
    scalar_param(7, "a", dt.f32), scalar_param(8, "b", dt.f64), scalar_param(9, "flag", dt.bool_),
    scalar_param(10, "h", dt.i16),
    tensor_map_param(11, "tmap", TensorMapNeed(dt.f32, (8, 32), 0, (1, 1))),
])
# by hand: (offset, struct code) of each parameter; 8-byte pointers, natural alignment, the
# 128-byte struct at the next multiple of 64
LAYOUT = [(0, "Q"), (8, "Q"), (16, "b"), (20, "I"), (24, "q"), (32, "Q"), (40, "f"), (48, "d"),
          (56, "?"), (58, "h"), (64, "128s")]
SIZE = 192
SIZES = [struct.calcsize(code) for _, code in LAYOUT]


def packed(values):
    out = bytearray(SIZE)
    for (off, code), v in zip(LAYOUT, values):
        struct.pack_into("=" + code, out, off, v)
    return bytes(out)


class Recorder:
    """cuLaunchKernelEx: records grid, block, smem, stream and the parameter bytes."""

    def __init__(self):
        self.launches = []
        self.fn = LAUNCH(self._launch)

    def _launch(self, config, function, params, extra):
        c = LaunchConfig.from_address(config)
        ptrs = (ctypes.c_void_p * len(SIZES)).from_address(params)
        self.launches.append(dict(
            grid=(c.gridDimX, c.gridDimY, c.gridDimZ), block=(c.blockDimX, c.blockDimY, c.blockDimZ),
            smem=c.sharedMemBytes, stream=c.hStream or 0, function=function,
            data=_gather(ptrs)))
        return 0


def _gather(ptrs):
    out = bytearray(SIZE)
    for (off, _), size, p in zip(LAYOUT, SIZES, ptrs):
        out[off:off + size] = ctypes.string_at(p, size)
    return bytes(out)


class FakeHip:
    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        ptrs = (ctypes.c_void_p * len(SIZES)).from_address(params.value)
        self.launches.append(dict(grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                  stream=stream or 0, function=f, data=_gather(ptrs)))
        return 0

    def hipGetErrorString(self, rc):
        return b"fake"


class Function:
    handle, device, name = 0xF00D, 0, "corpus"

    def set_max_dynamic_smem(self, n):
        pass


class Launcher:
    grid, block = (3, 2, 1), (128, 1, 1)


class Array:
    """A GPU array as CuPy or numba show it, backed by numpy for its dtype."""

    def __init__(self, address, np_dtype):
        self.dtype = np.dtype(np_dtype)
        self.__cuda_array_interface__ = {"data": (address, False), "shape": (4,),
                                         "typestr": self.dtype.str, "version": 3}


class TorchStream:
    cuda_stream = 0xABC


class CupyStream:
    ptr = 0xDEF


class HandleStream:
    handle = 0x123


class OddStream:  # .cuda_stream is not an int: the rule goes on to .ptr
    cuda_stream = "0xABC"
    ptr = 0x77


TMAP = bytes(range(128))


class Array2D:
    """A 2-D GPU array (CUDA array interface) of f32 rows of 128 elements, 100 of them used."""

    def __init__(self, address, np_dtype=np.float32):
        self.dtype = np.dtype(np_dtype)
        self.__cuda_array_interface__ = {
            "data": (address, False), "shape": (64, 100), "typestr": self.dtype.str,
            "strides": (128 * self.dtype.itemsize, self.dtype.itemsize), "version": 3}


def fake_encode(code, address, dims, strides, box, element_strides, swizzle, l2, describe):
    """cuTensorMapEncodeTiled: its arguments packed into the 128 bytes, to compare with by hand."""
    out = struct.pack("=iQ2Q1Q2I2Iii", code, address, *dims, *strides, *box, *element_strides,
                      swizzle, l2)
    return out + bytes(128 - len(out))


MAP = TensorMap(Array2D(0x100000), (8, 32))
# by hand: FLOAT32 (7), innermost first: dims (100, 64), the row stride 512 bytes, box (32, 8),
# element strides 1, no swizzle (0), L2 promotion 128 bytes (2)
MAP_BYTES = struct.pack("=iQ2Q1Q2I2Iii", 7, 0x100000, 100, 64, 512, 32, 8, 1, 1, 0, 2)
MAP_BYTES += bytes(128 - len(MAP_BYTES))
GOOD = (0x1000, 0x2002, 0, -128, 0, -2 ** 63, 0, 1.5, -2.25, True, -32768, TMAP)
GOOD_VALUES = (0x1000, 0x2002, -128, 0, -2 ** 63, 0, 1.5, -2.25, True, -32768, TMAP)


def case(**changes):
    """GOOD with arguments replaced: {position: value}."""
    args = list(GOOD)
    for k, v in changes.items():
        args[int(k[1:])] = v
    return tuple(args)


def want(**changes):
    vals = list(GOOD_VALUES)
    for k, v in changes.items():
        vals[int(k[1:])] = v
    return vals


# (id, args, smem, stream, expected values or None, expected stream)
GOOD_CASES = [
    ("raw ints", GOOD, 0, None, want(), 0),
    ("edges high", case(a3=127, a4=2 ** 32 - 1, a5=2 ** 63 - 1, a6=2 ** 64 - 1, a7=3.4028234663852886e38,
                        a8=1e308, a9=False, a10=32767), 0, None,
     want(a2=127, a3=2 ** 32 - 1, a4=2 ** 63 - 1, a5=2 ** 64 - 1, a6=3.4028234663852886e38, a7=1e308,
          a8=False, a9=32767), 0),
    ("infinities", case(a7=float("inf"), a8=float("-inf")), 0, None,
     want(a6=float("inf"), a7=float("-inf")), 0),
    ("nan", case(a7=float("nan"), a8=float("nan")), 0, None, want(a6=math.nan, a7=math.nan), 0),
    ("numpy scalars", case(a3=np.int8(-5), a4=np.uint32(7), a7=np.float32(0.5), a8=np.float64(2.0),
                           a9=np.bool_(True), a10=np.int16(3)), 0, None,
     want(a2=-5, a3=7, a6=0.5, a7=2.0, a8=True, a9=3), 0),
    ("ints for floats and bool", case(a7=2, a8=-3, a9=1), 0, None, want(a6=2.0, a7=-3.0, a8=True), 0),
    ("cuda array interface", case(a0=Array(0x4000, np.float32), a1=Array(0x5002, np.float16)), 0,
     None, want(a0=0x4000, a1=0x5002), 0),
    ("struct as bytearray and numpy", case(a11=bytearray(TMAP)), 0, None, want(), 0),
    ("struct as numpy", case(a11=np.frombuffer(TMAP, np.uint8)), 0, None, want(), 0),
    ("tensor map", case(a11=MAP), 0, None, want(a10=MAP_BYTES), 0),
    ("smem", GOOD, 4096, None, want(), 0),
    ("int stream", GOOD, 0, 7, want(), 7),
    ("zero stream", GOOD, 0, 0, want(), 0),
    ("numpy stream", GOOD, 0, np.uint64(9), want(), 9),
    ("torch stream", GOOD, 0, TorchStream(), want(), 0xABC),
    ("cupy stream", GOOD, 0, CupyStream(), want(), 0xDEF),
    ("handle stream", GOOD, 0, HandleStream(), want(), 0x123),
    ("odd stream", GOOD, 0, OddStream(), want(), 0x77),
    ("max stream", GOOD, 0, 2 ** 64 - 1, want(), 2 ** 64 - 1),
]

# (id, args, smem, stream, error type, needles)
BAD_CASES = [
    ("i8 above", case(a3=128), 0, None, ArgumentError, ["'k'", "outside -128..127"]),
    ("u32 negative", case(a4=-1), 0, None, ArgumentError, ["'m'", "outside 0..4294967295"]),
    ("u64 beyond", case(a6=2 ** 64), 0, None, ArgumentError, ["'ubig'", "outside"]),
    ("bool for i64", case(a5=True), 0, None, ArgumentError, ["'big'", "got a bool"]),
    ("float for int", case(a3=1.0), 0, None, ArgumentError, ["'k'", "expects an integer"]),
    ("f32 overflow", case(a7=1e39), 0, None, ArgumentError, ["'a'", "outside its range"]),
    ("string for f64", case(a8="1.0"), 0, None, ArgumentError, ["'b'", "expects a number"]),
    ("bool param 2", case(a9=2), 0, None, ArgumentError, ["'flag'", "outside 0..1"]),
    ("struct too short", case(a11=TMAP[:127]), 0, None, ArgumentError,
     ["'tmap'", "128 bytes", "127 bytes"]),
    ("struct an int", case(a11=5), 0, None, ArgumentError, ["'tmap'", "bytes-like"]),
    ("tensor map of another box", case(a11=TensorMap(Array2D(0x100000), (8, 16))), 0, None,
     ArgumentError, ["'tmap'", "box (8, 32)", "(8, 16)"]),
    ("tensor map of another dtype", case(a11=TensorMap(Array2D(0x100000, np.float16), (8, 32))),
     0, None, ArgumentError, ["'tmap'", "element type f32", "f16"]),
    ("misaligned", case(a0=0x1008), 0, None, ArgumentError, ["'x'", "aligned to 16"]),
    ("negative address", case(a0=-16), 0, None, ArgumentError, ["'x'", "not a device address"]),
    ("address beyond 64 bits", case(a1=2 ** 64), 0, None, ArgumentError,
     ["'y'", "not a device address"]),
    ("float address", case(a0=4096.0), 0, None, ArgumentError, ["'x'", "expected a torch tensor"]),
    ("None address", case(a1=None), 0, None, ArgumentError, ["'y'", "got None"]),
    ("wrong dtype", case(a0=Array(0x4000, np.float16)), 0, None, ArgumentError,
     ["'x'", "expects f32", "f16"]),
    ("negative stream", GOOD, 0, -1, ArgumentError, ["stream must be an int handle"]),
    ("string stream", GOOD, 0, "abc", ArgumentError, ["stream must be an int handle"]),
    ("bool stream", GOOD, 0, True, ArgumentError, ["stream must be an int handle"]),
    ("stream beyond 64 bits", GOOD, 0, 2 ** 64, ArgumentError, ["stream must be an int handle"]),
    ("object stream", GOOD, 0, object(), ArgumentError, ["stream must be an int handle"]),
    ("negative smem", GOOD, -1, None, ArgumentError, ["smem"]),
    ("bool smem", GOOD, True, None, ArgumentError, ["smem"]),
]


def _gpu_entry(recorder, fast, monkeypatch):
    monkeypatch.setenv("OPUS_FAST_LAUNCH", "1" if fast else "0")
    return GpuEntry("corpus", get_target("sm_90a"), 0, PLAN, Function(), 227 * 1024,
                    cu_launch=recorder.fn)


def _paths(monkeypatch):
    """{path name: (launch(args, smem, stream), its list of recorded launches)}."""
    paths = {}
    monkeypatch.setattr(cuda_driver, "tensor_map_encode_tiled", fake_encode)
    rec = Recorder()
    entry = _gpu_entry(rec, True, monkeypatch)
    if entry.fast is not None:
        paths["C"] = (lambda a, s, st: entry.fast(Launcher(), a, s, st), rec.launches)
    rec_py = Recorder()
    py = _gpu_entry(rec_py, False, monkeypatch)
    assert py.fast is None
    paths["Python"] = (lambda a, s, st: py.python_run(Launcher(), a, s, st), rec_py.launches)

    def elsewhere(a, s, st):  # another thread: launch_once with buffers of its own
        box = []
        t = threading.Thread(target=lambda: _capture(box, py.python_run, Launcher(), a, s, st))
        t.start()
        t.join()
        if box:
            raise box[0]
    paths["Python, other thread"] = (elsewhere, rec_py.launches)
    hip = FakeHip()
    hip.launches = []
    monkeypatch.setattr(hip_driver, "_lib", hip)
    amd = HipEntry("corpus", get_target("gfx942"), 0, PLAN, 0x2000)
    paths["HIP"] = (lambda a, s, st: amd.run(Launcher(), a, s, st), hip.launches)
    return paths


def _capture(box, fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - handed to the calling thread
        box.append(e)


@pytest.mark.parametrize("name,args,smem,stream,values,handle", GOOD_CASES,
                         ids=[c[0] for c in GOOD_CASES])
def test_every_path_packs_the_same_bytes(monkeypatch, name, args, smem, stream, values, handle):
    expected = packed(values)
    paths = _paths(monkeypatch)
    assert len(paths) >= 3
    for path, (launch, launches) in paths.items():
        launch(args, smem, stream)
        got = launches[-1]
        assert got["data"] == expected, path
        assert got["stream"] == handle, path
        assert (got["grid"], got["block"], got["smem"]) == ((3, 2, 1), (128, 1, 1), smem), path


@pytest.mark.parametrize("name,args,smem,stream,error,needles", BAD_CASES,
                         ids=[c[0] for c in BAD_CASES])
def test_every_path_refuses_bad_input_alike(monkeypatch, name, args, smem, stream, error,
                                            needles):
    messages = {}
    for path, (launch, launches) in _paths(monkeypatch).items():
        with pytest.raises(error) as info:
            launch(args, smem, stream)
        assert not launches, path
        messages[path] = str(info.value)
        for needle in needles:
            assert needle.lower() in messages[path].lower(), (path, messages[path])
    # NVIDIA paths word an smem error with their target; every other message is one text
    nvidia = {m for p, m in messages.items() if p != "HIP"}
    assert len(nvidia) == 1, messages
    if "smem" not in name:
        assert set(messages.values()) == nvidia, messages


def test_the_c_path_launches_the_common_cases_itself(monkeypatch):
    fl = gpu_launch.fast_launch_module()
    if fl is None:
        pytest.skip("the C hot path (opus._fastlaunch) is not built")
    rec, fallen, py_rec = Recorder(), [], Recorder()
    py = _gpu_entry(py_rec, False, monkeypatch)

    def fallback(*call):
        fallen.append(call)
        return py.python_run(*call)
    c = fl.new(ctypes.cast(rec.fn, ctypes.c_void_p).value, 0xF00D, PLAN.c_table(fl.KINDS),
               PLAN.size, PLAN.nargs, fallback, threading.get_ident(), 0, 48 * 1024)
    exact = [c_ for c_ in GOOD_CASES if c_[0] in ("raw ints", "infinities", "nan", "smem",
                                                   "int stream", "torch stream", "cupy stream",
                                                   "handle stream", "zero stream")]
    for _, args, smem, stream, values, handle in exact:
        c(Launcher(), args, smem, stream)
        assert rec.launches[-1]["data"] == packed(values)
        assert rec.launches[-1]["stream"] == handle
    assert not fallen
    c(Launcher(), case(a6=2 ** 64 - 1), 0, None)  # u64 above i64: the Python path
    c(Launcher(), case(a11=bytearray(TMAP)), 0, None)  # not exact bytes: the Python path
    monkeypatch.setattr(cuda_driver, "tensor_map_encode_tiled", fake_encode)
    c(Launcher(), case(a11=MAP), 0, None)  # a TensorMap: checked and encoded by the Python path
    assert py_rec.launches[-1]["data"] == packed(want(a10=MAP_BYTES))
    assert len(fallen) == 3


def test_a_plan_of_a_kind_the_c_module_lacks_launches_from_python(monkeypatch):
    fl = gpu_launch.fast_launch_module()
    if fl is None:
        pytest.skip("the C hot path (opus._fastlaunch) is not built")
    monkeypatch.setattr(fl, "KINDS", {k: v for k, v in fl.KINDS.items() if k != "bytes"})
    rec = Recorder()
    entry = _gpu_entry(rec, True, monkeypatch)
    assert entry.fast is None and entry.run is entry.python_run
    entry.run(Launcher(), GOOD, 0, None)
    assert rec.launches[-1]["data"] == packed(GOOD_VALUES)


@opus.kernel
def planned(x: opus.Ptr[opus.f32], S: opus.constexpr, n: opus.i32, y: opus.Ptr[opus.f32],
            a: opus.f32):
    i = opus.thread_id_x()
    if i < n:
        y[i] = x[i] * a


def test_plan_of_a_traced_kernel():
    spec = planned.specialize("sm_90a", S=1)
    plan = plan_of(planned, spec)
    got = [(p.name, p.arg, p.kind.name, p.offset, p.size, p.align) for p in plan.params]
    assert got == [("x", 0, "ptr", 0, 8, spec.align["x"]), ("n", 2, "int", 8, 4, 4),
                   ("y", 3, "ptr", 16, 8, spec.align["y"]), ("a", 4, "f32", 24, 4, 4)]
    assert plan.size == 28 and plan.nargs == 5


# -- the memo: one rule for PyLauncher and the C LauncherBase --------------------------------

def _launcher_kinds():
    from opus.frontend import launch
    kinds = {"Python": launch.PyLauncher}
    fl = gpu_launch.fast_launch_module()
    if fl is not None:
        assert fl.MEMO_SIZE == launch.MEMO_SIZE
        kinds["C"] = launch._c_launcher_class(fl)
    return kinds


def _recording(base):
    class Recording(base):
        __slots__ = ("calls",)

        def __init__(self):
            if "_memo" in base.__slots__:  # PyLauncher's memo (LauncherBase's is in C)
                self._memo = {}
            self.calls = []

        def _slow_call(self, *args, smem=0, stream=None, **kwargs):
            self.calls.append(("slow", args, smem, stream, kwargs))

        def run(self, launcher, args, smem, stream):
            assert launcher is self
            self.calls.append(("run", args, smem, stream, {}))
    return Recording


def _memo_script(la):
    sel = opus.frontend.targeting.current_target()
    la(1, 2)
    la._remember(2, sel, la.run)
    la(3, 4)
    la(5, 6, smem=128, stream=7)
    la(1, n=2)
    la(1, 2, 3)
    with opus.set_target("gfx942", interpret=True):
        la(9, 9)
    la(8, 8)
    la._remember(63, sel, la.run)
    la(*range(63))
    la._remember(64, sel, la.run)  # beyond the memo: never remembered
    la(*range(64))
    la._remember(0, "another selection", la.run)
    la()
    return [(kind, len(args), smem, stream, kw) for kind, args, smem, stream, kw in la.calls]


def test_both_launchers_follow_one_memo_rule():
    import opus.frontend.targeting  # noqa: F401
    expected = [("slow", 2, 0, None, {}), ("run", 2, 0, None, {}), ("run", 2, 128, 7, {}),
                ("slow", 1, 0, None, {"n": 2}), ("slow", 3, 0, None, {}),
                ("slow", 2, 0, None, {}), ("run", 2, 0, None, {}), ("run", 63, 0, None, {}),
                ("slow", 64, 0, None, {}), ("slow", 0, 0, None, {})]
    for name, kind in _launcher_kinds().items():
        assert _memo_script(_recording(kind)()) == expected, name
