"""Bad input to TMA and mbarriers: tensor maps the driver would refuse (each argument named),
maps that differ from the kernel's declaration, TMA on chips without it (sm_80, gfx942), misuse
in kernels (named at the user's line), and run-time faults the interpreter reports at the line
(waits that never complete, early reads, unfenced or unwaited stores). Each case checks the
error type and that the message names the problem; kernel cases the line (``# ERR: <tag>``);
launches that nothing was written or cached."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f16, f32, i32
from expect import no_new_cache_files, raises, unchanged

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lang"))
from tma_kernels import land_box  # noqa: E402

SM = "sm_90a"


@pytest.fixture
def interpret():
    with opus.set_target(SM, interpret=True):
        yield


@pytest.fixture
def checking(interpret):
    with opus.interp.checking():
        yield


def _x(r=32, c=32, dtype=np.float32):
    return np.arange(r * c, dtype=np.float32).astype(dtype).reshape(r, c)


# -- building a TensorMap: every argument the driver checks ------------------------------------

MAP_CASES = [
    ("strides not a multiple of 16 bytes", lambda: (_x(10, 6), (4, 4)), {},
     ["stride of dimension 0", "24 bytes", "multiple of 16"]),
    ("misaligned base", lambda: (_x()[:, 1:], (8, 8)), {}, ["not 16-byte aligned"]),
    ("innermost not contiguous", lambda: (_x()[:, ::2], (8, 4)), {}, ["innermost", "stride 1"]),
    ("box too big", lambda: (_x(), (300, 8)), {}, ["box[0] = 300", "1 to 256"]),
    ("box zero", lambda: (_x(), (0, 8)), {}, ["box[0] = 0"]),
    ("inner box not 16 bytes", lambda: (_x(), (8, 6)), {}, ["box[-1] = 6", "24 bytes",
                                                             "multiple of 16 bytes"]),
    ("box of the wrong rank", lambda: (_x(), (8, 8, 8)), {}, ["box has 3 entries", "2 dimensions"]),
    ("box not ints", lambda: (_x(), (8.0, 8)), {}, ["box must be a tuple of ints"]),
    ("swizzle not a mode", lambda: (_x(), (8, 8)), {"swizzle": 16}, ["swizzle must be 0, 32, 64 "
                                                                     "or 128"]),
    ("row wider than the swizzle", lambda: (_x(), (8, 32)), {"swizzle": 64},
     ["128 bytes", "64-byte swizzle span"]),
    ("element stride 9", lambda: (_x(), (8, 8)), {"element_strides": (9, 1)},
     ["element_strides[0] = 9", "1 to 8"]),
    ("strided innermost traversal", lambda: (_x(), (8, 8)), {"element_strides": (1, 2)},
     ["element_strides[-1] = 2"]),
    ("l2 promotion", lambda: (_x(), (8, 8)), {"l2_promotion": 32}, ["l2_promotion must be 0, 64"]),
    ("rank 6", lambda: (np.zeros((2,) * 5 + (4,), np.float32), (1,) * 5 + (4,)), {},
     ["6 dimensions", "1 to 5"]),
    ("sub-byte dtype", lambda: (np.zeros((4, 64), ml_dtypes.int4), (4, 32)), {},
     ["int4", "cannot be copied by TMA"]),
    ("not an array", lambda: ([[1.0] * 8] * 8, (8, 8)), {}, ["tensor must be a torch tensor"]),
]


@pytest.mark.parametrize("name,make,kw,needles", MAP_CASES, ids=[c[0] for c in MAP_CASES])
def test_tensor_map_refuses(name, make, kw, needles):
    tensor, box = make()
    with raises(opus.ArgumentError, "TensorMap", *needles):
        opus.TensorMap(tensor, box, **kw)


def test_a_host_map_cannot_be_encoded_for_the_gpu():
    with raises(opus.ArgumentError, "numpy array", "interpreter", "GPU tensor"):
        opus.TensorMap(_x(), (8, 8)).encode()


# -- a map that is not what the kernel declared --------------------------------------------------

@opus.kernel
def _copy_box(a: opus.TensorMap, out: opus.Ptr[f32], SWZ: opus.constexpr = 0):
    a.declare(f32, (8, 16), swizzle=SWZ)
    tile = opus.alloc_smem(f32, 128, align=1024)
    land_box(a, tile, (0, 0))
    for i in range(8):
        out[i * 16 + opus.thread_id_x()] = tile[i * 16 + opus.thread_id_x()]


LAUNCH_CASES = [
    ("wrong dtype", lambda: opus.TensorMap(_x(dtype=np.float16), (8, 16)), {},
     ["'a'", "element type f32", "f16"]),
    ("wrong box", lambda: opus.TensorMap(_x(), (16, 16)), {}, ["'a'", "box (8, 16)", "(16, 16)"]),
    ("wrong swizzle", lambda: opus.TensorMap(_x(), (8, 16), swizzle=64), {},
     ["'a'", "swizzle 0", "64"]),
    ("not a map", lambda: _x(), {}, ["'a'", "expects an opus.TensorMap", "ndarray"]),
]


@pytest.mark.parametrize("name,make,kw,needles", LAUNCH_CASES, ids=[c[0] for c in LAUNCH_CASES])
def test_launch_refuses_a_map_unlike_the_declaration(interpret, name, make, kw, needles):
    out = np.full(128, -1, np.float32)
    with unchanged(out), raises(opus.ArgumentError, *needles):
        _copy_box[1, 16](make(), out, **kw)


# -- chips without TMA ---------------------------------------------------------------------------

@opus.kernel
def _takes_map(a: opus.TensorMap, out: opus.Ptr[f32]):  # ERR: param
    out[0] = 1.0


@pytest.mark.parametrize("target,needles", [
    ("sm_80", ["sm_80", "compute capability 9.0"]), ("sm_86", ["sm_86", "9.0"]),
    ("gfx942", ["gfx942", "AMD GPUs have no tensor memory accelerator"]),
    ("gfx950", ["gfx950", "no tensor memory accelerator"])])
def test_a_tensor_map_parameter_on_a_chip_without_tma(target, needles):
    with raises(opus.TraceError, "opus.TensorMap", "not available", *needles, at="param"):
        _takes_map.source(target=target)


@opus.kernel
def _barrier_only(out: opus.Ptr[f32]):
    bars = opus.alloc_mbarriers(2)  # ERR: mbar
    out[0] = 1.0


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "gfx942"])
def test_mbarriers_on_a_chip_without_them(target):
    with raises(opus.TraceError, "opus.alloc_mbarriers is not available", target, at="mbar"):
        _barrier_only.source(target=target)


def test_tma_on_an_sm_80_interpreter_launch(cache_root):
    out = np.zeros(1, np.float32)
    with opus.set_target("sm_80", interpret=True), no_new_cache_files(cache_root), unchanged(out), \
            raises(opus.TraceError, "sm_80", at="mbar"):
        _barrier_only[1, 1](out)


# -- misuse in kernels -----------------------------------------------------------------------------

@opus.kernel
def _undeclared(a: opus.TensorMap):
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (0, 0), bar)  # ERR: undeclared


@opus.kernel
def _wrong_tile_type(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f16, 256, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (0, 0), bar)  # ERR: tile-type


@opus.kernel
def _unaligned_tile(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=16)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (0, 0), bar)  # ERR: tile-align


@opus.kernel
def _coords_count(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (0, 0, 0), bar)  # ERR: coords


@opus.kernel
def _global_tile(a: opus.TensorMap, g: opus.Ptr[f32]):
    a.declare(f32, (8, 16))
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, g, (0, 0), bar)  # ERR: global-tile


@opus.kernel
def _barrier_array(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    bars = opus.alloc_mbarriers(2)
    opus.tma_load(a, tile, (0, 0), bars)  # ERR: bar-array


@opus.kernel
def _pointer_as_map(g: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_store(g, tile, (0, 0))  # ERR: not-map


@opus.kernel
def _redeclared(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    a.declare(f32, (8, 32))  # ERR: redeclared


@opus.kernel
def _bad_declaration(a: opus.TensorMap):
    a.declare(f32, (8, 6))  # ERR: declare-box


@opus.kernel
def _float_coordinate(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (0, 1.5), bar)  # ERR: float-coord


@opus.kernel
def _wide_coordinate(a: opus.TensorMap, row: opus.i64):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    opus.tma_load(a, tile, (row, 0), bar)  # ERR: wide-coord


@opus.kernel
def _zero_count():
    bar = opus.alloc_mbarriers(1)[0]
    bar.init(0)  # ERR: count


@opus.kernel
def _too_many_bytes():
    bar = opus.alloc_mbarriers(1)[0]
    bar.arrive_expect_tx(1 << 20)  # ERR: tx


@opus.kernel
def _no_barriers():
    bars = opus.alloc_mbarriers(0)  # ERR: none


@opus.kernel
def _wait_groups():
    opus.tma_wait(-1)  # ERR: wait-n


@opus.kernel
def _no_stages(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    pipe = opus.TmaPipeline(a, stages=0)  # ERR: stages


@opus.kernel
def _coords_per_map(a: opus.TensorMap, b: opus.TensorMap):
    a.declare(f32, (8, 16))
    b.declare(f32, (8, 16))
    pipe = opus.TmaPipeline((a, b), stages=2)
    pipe.load(0, ((0, 0),))  # ERR: per-map


KERNEL_CASES = [
    (_undeclared, "undeclared", ["used before the kernel declared", "a.declare(dtype, box)"]),
    (_wrong_tile_type, "tile-type", ["holds f16", "declared with f32"]),
    (_unaligned_tile, "tile-align", ["128-byte aligned", "align=128"]),
    (_coords_count, "coords", ["takes 2 coordinate(s)"]),
    (_global_tile, "global-tile", ["needs shared memory", "global pointer"]),
    (_barrier_array, "bar-array", ["needs one mbarrier", "bars[i]"]),
    (_pointer_as_map, "not-map", ["needs an opus.TensorMap kernel parameter"]),
    (_redeclared, "redeclared", ["contradicts its earlier declaration"]),
    (_bad_declaration, "declare-box", ["box[-1] = 6", "multiple of 16 bytes"]),
    (_float_coordinate, "float-coord", ["coordinate must be an integer", "1.5"]),
    (_wide_coordinate, "wide-coord", ["i64 does not convert implicitly to i32", "opus.cast"]),
    (_zero_count, "count", ["mbarrier count must be 1 to"]),
    (_too_many_bytes, "tx", ["expect_tx bytes must be 0 to"]),
    (_no_barriers, "none", ["at least one barrier"]),
    (_wait_groups, "wait-n", ["tma_wait n must be 0 to 63"]),
    (_no_stages, "stages", ["at least one stage"]),
    (_coords_per_map, "per-map", ["one coordinate tuple per map (2)"]),
]


@pytest.mark.parametrize("kernel,tag,needles", KERNEL_CASES, ids=[c[1] for c in KERNEL_CASES])
def test_kernel_misuse(kernel, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        kernel.source(target=SM)


# -- run-time faults the interpreter names at their line ---------------------------------------

def _tile_and_barrier(a):
    """A helper: ``a`` declared as 8 x 16 f32, a tile for it, an initialised mbarrier, the
    thread index."""
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    t = opus.thread_id_x()
    if t == 0:
        bar.init(1)
    opus.sync_threads()
    return tile, bar, t


@opus.kernel
def _wrong_parity(a: opus.TensorMap, out: opus.Ptr[f32]):
    tile, bar, t = _tile_and_barrier(a)
    if t == 0:
        bar.arrive_expect_tx(a.copy_bytes)
        opus.tma_load(a, tile, (0, 0), bar)
    bar.wait(0)
    out[t] = tile[t]
    bar.wait(1)  # ERR: parity


@opus.kernel
def _stale_parity(a: opus.TensorMap, out: opus.Ptr[f32]):
    tile, bar, t = _tile_and_barrier(a)
    for k in range(2):
        if t == 0:
            bar.arrive_expect_tx(a.copy_bytes)
            opus.tma_load(a, tile, (8 * k, 0), bar)
        bar.wait(0)
        out[t] = tile[t]  # ERR: stale
        opus.sync_threads()


@opus.kernel
def _bytes_short(a: opus.TensorMap, out: opus.Ptr[f32]):
    tile, bar, t = _tile_and_barrier(a)
    if t == 0:
        bar.arrive_expect_tx(a.copy_bytes * 2)
        opus.tma_load(a, tile, (0, 0), bar)
    bar.wait(0)  # ERR: short
    out[t] = tile[t]


@opus.kernel
def _no_expect(a: opus.TensorMap, out: opus.Ptr[f32]):
    tile, bar, t = _tile_and_barrier(a)
    if t == 0:
        opus.tma_load(a, tile, (0, 0), bar)
        bar.arrive()
    bar.wait(0)
    out[t] = tile[t]  # ERR: no-expect


@opus.kernel
def _uninitialised(out: opus.Ptr[f32]):
    bar = opus.alloc_mbarriers(1)[0]
    bar.arrive()  # ERR: uninit


@opus.kernel
def _spin(out: opus.Ptr[f32]):
    bar = opus.alloc_mbarriers(1)[0]
    if opus.thread_id_x() == 0:
        bar.init(1)
    opus.sync_threads()
    while not bar.try_wait(0):  # ERR: spin
        pass


@opus.kernel
def _early_read(a: opus.TensorMap, out: opus.Ptr[f32]):
    tile, bar, t = _tile_and_barrier(a)
    if t == 0:
        bar.arrive_expect_tx(a.copy_bytes)
        opus.tma_load(a, tile, (0, 0), bar)
    opus.sync_threads()
    out[t] = tile[t]  # ERR: early
    bar.wait(0)


@opus.kernel
def _unfenced_store(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    t = opus.thread_id_x()
    for i in range(8):
        tile[i * 16 + t] = 1.0
    opus.sync_threads()
    if t == 0:
        opus.tma_store(a, tile, (0, 0))  # ERR: unfenced
        opus.tma_commit()
        opus.tma_wait(0)


@opus.kernel
def _store_not_waited(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    t = opus.thread_id_x()
    for i in range(8):
        tile[i * 16 + t] = 1.0
    opus.fence_proxy_async()
    opus.sync_threads()
    if t == 0:
        opus.tma_store(a, tile, (0, 0))  # ERR: not-waited
        opus.tma_commit()


@opus.kernel
def _overwritten_source(a: opus.TensorMap):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 128, align=128)
    t = opus.thread_id_x()
    for i in range(8):
        tile[i * 16 + t] = 1.0
    opus.fence_proxy_async()
    opus.sync_threads()
    if t == 0:
        opus.tma_store(a, tile, (0, 0))
        opus.tma_commit()
        tile[0] = 2.0  # ERR: overwrite
        opus.tma_wait(0, read=True)


@opus.kernel
def _tile_too_small(a: opus.TensorMap, out: opus.Ptr[f32]):
    a.declare(f32, (8, 16))
    tile = opus.alloc_smem(f32, 64, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    if opus.thread_id_x() == 0:
        bar.init(1)
        bar.arrive_expect_tx(a.copy_bytes)
        opus.tma_load(a, tile, (0, 0), bar)  # ERR: small


@opus.kernel
def _misaligned_dynamic(a: opus.TensorMap, out: opus.Ptr[f32]):
    a.declare(f32, (8, 16))
    tile = opus.dynamic_smem(f32, 16)
    bar = opus.alloc_mbarriers(1)[0]
    if opus.thread_id_x() == 0:
        bar.init(1)
        bar.arrive_expect_tx(a.copy_bytes)
        opus.tma_load(a, tile, (0, 0), bar)  # ERR: dyn-align


RUN_CASES = [
    (_wrong_parity, "parity", opus.interp.InterpError,
     ["waits for the phase of parity 1", "never completes", "phase 1 (parity 1)"], {}),
    (_stale_parity, "stale", opus.interp.AsyncCopyPendingError,
     ["has not landed", "returned without it", "check that wait's parity"], {}),
    (_bytes_short, "short", opus.interp.InterpError,
     ["never completes", "512 transaction bytes outstanding"], {}),
    (_no_expect, "no-expect", opus.interp.AsyncCopyPendingError,
     ["has not landed", "returned without it", "arrive_expect_tx announced"],
     {}),
    (_uninitialised, "uninit", opus.interp.InterpError, ["before any thread initialised it"], {}),
    (_spin, "spin", opus.interp.InterpError, ["polls for the phase of parity 0",
                                               "never completes"], {}),
    (_early_read, "early", opus.interp.AsyncCopyPendingError,
     ["reads shared memory", "TMA load at", "has not landed", "bar.wait(parity)"], {}),
    (_unfenced_store, "unfenced", opus.interp.AsyncCopyPendingError,
     ["without an opus.fence_proxy_async()"], {}),
    (_store_not_waited, "not-waited", opus.interp.InterpError,
     ["not waited for before its block ended", "opus.tma_wait()"], {}),
    (_overwritten_source, "overwrite", opus.interp.AsyncCopyPendingError,
     ["writes shared memory", "TMA store at", "may not have read it"], {}),
    (_tile_too_small, "small", opus.interp.MemoryFault, ["512-byte box", "does not fit"], {}),
    (_misaligned_dynamic, "dyn-align", opus.interp.MemoryFault, ["not 128-byte aligned"],
     {"smem": 1024}),
]


def _args(kernel):
    names = [p.name for p in kernel.params]
    args = [opus.TensorMap(_x(), (8, 16))] if names[0] == "a" else []
    if "out" in names:
        args.append(np.zeros(16, np.float32))
    return args


@pytest.mark.parametrize("kernel,tag,error,needles,kw", RUN_CASES, ids=[c[1] for c in RUN_CASES])
def test_run_time_faults_name_their_line(checking, kernel, tag, error, needles, kw):
    with raises(error, *needles, at=tag):
        kernel[1, 16](*_args(kernel), **kw)
