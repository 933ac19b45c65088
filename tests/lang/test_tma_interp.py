"""TMA and mbarriers in the interpreter (as sm_90a) against numpy references written from the
PTX rules (tma_kernels.py), the rendering's SASS (UTMALDG, UTMASTG, SYNCS), and the launch
plan of a TensorMap parameter."""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f16, f32

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tma_kernels as K  # noqa: E402

SM = "sm_90a"


@pytest.fixture(autouse=True)
def _interpret():
    with opus.set_target(SM, interpret=True), opus.interp.checking():
        yield


def _grid(r, c, dtype=np.float32):
    return (np.arange(r * c) % 251 + 1).astype(dtype).reshape(r, c)


# -- loads ---------------------------------------------------------------------------------------

# box starts (row, column): the innermost (column) start is a multiple of 4 f32 = 16 bytes, as
# TMA requires (the H100 faults on -5, -1, 1, 3: test_unaligned_innermost_start_is_refused)
CORNERS = [(0, 0), (15, 12), (-3, -4), (17, 20), (-7, 8), (19, 20), (-8, -16), (20, 0)]


@pytest.mark.parametrize("r0,c0", CORNERS)
def test_2d_box_with_overhang(r0, c0):
    x = _grid(20, 24)
    out = np.full(8 * 16, np.nan, np.float32)
    K.load_box[1, 16](opus.TensorMap(x, (8, 16)), out, r0, c0)
    np.testing.assert_array_equal(out.reshape(8, 16), K.box_reference(x, r0, c0, (8, 16)))


@pytest.mark.parametrize("swz,box", [(32, (8, 8)), (64, (16, 16)), (128, (8, 32))])
def test_swizzled_box_reads_back_through_swizzle_bytes(swz, box):
    """The tile lands swizzled (checked by hand below) and the map's layout undoes it."""
    x = _grid(40, 72)
    out = np.full(box[0] * box[1], np.nan, np.float32)
    K.load_box[1, box[1]](opus.TensorMap(x, box, swizzle=swz), out, 3, 4, BOX=box, SWZ=swz)
    np.testing.assert_array_equal(out.reshape(box), K.box_reference(x, 3, 4, box))


def test_the_128_byte_swizzle_moves_16_byte_chunks_by_row():
    """Where the bytes of a swizzled box land, by hand: 16-byte chunk j of 128-byte row r at
    chunk j ^ (r % 8); read the tile raw (no swizzle in the layout) to see it."""
    @opus.kernel
    def raw(a: opus.TensorMap, out: opus.Ptr[f32]):
        a.declare(f32, (8, 32), swizzle=128)
        tile = opus.alloc_smem(f32, 256, align=1024)
        t = opus.thread_id_x()
        K.land_box(a, tile, (0, 0))
        for i in range(8):
            out[i * 32 + t] = tile[i * 32 + t]
    x = _grid(8, 32)
    out = np.zeros(256, np.float32)
    raw[1, 32](opus.TensorMap(x, (8, 32), swizzle=128), out)
    want = np.zeros((8, 32), np.float32)
    for r in range(8):
        for j in range(8):              # chunk j: 4 f32
            want[r, 4 * (j ^ r):4 * (j ^ r) + 4] = x[r, 4 * j:4 * j + 4]
    np.testing.assert_array_equal(out.reshape(8, 32), want)


def test_3d_f16_box_over_a_strided_tensor():
    base = _grid(3 * 6, 16, np.float16).reshape(3, 6, 16)
    x = base[:, :, :8]                     # rows of 16 elements (32 bytes), 8 used
    out = np.zeros(64, np.float16)
    K.load_box_3d[1, 8](opus.TensorMap(x, (2, 4, 8)), out, 2, 3, 0)
    want = np.zeros((2, 4, 8), np.float16)
    want[0, :3] = x[2, 3:6]                # z = 3 and rows >= 6 are outside
    np.testing.assert_array_equal(out.reshape(2, 4, 8), want)


def test_element_strides_take_every_other_row():
    @opus.kernel
    def strided(a: opus.TensorMap, out: opus.Ptr[f32]):
        a.declare(f32, (8, 4), element_strides=(2, 1))
        tile = opus.alloc_smem(f32, 16, align=128)
        t = opus.thread_id_x()
        K.land_box(a, tile, (1, 0))              # 4 rows of 4 f32
        for i in range(4):
            out[i * 4 + t] = tile[i * 4 + t]
    x = _grid(8, 4)
    out = np.zeros(16, np.float32)
    strided[1, 4](opus.TensorMap(x, (8, 4), element_strides=(2, 1)), out)
    want = np.zeros((4, 4), np.float32)
    want[:4] = [x[1], x[3], x[5], x[7]]
    np.testing.assert_array_equal(out.reshape(4, 4), want)


# -- stores --------------------------------------------------------------------------------------

@pytest.mark.parametrize("r0,c0", [(0, 0), (4, 4), (15, 20), (18, 36), (30, 0)])
def test_store_writes_the_box_inside_the_tensor_only(r0, c0):
    x = _grid(20, 24)
    want = K.store_reference(x, r0, c0, (8, 16))
    K.store_box[1, 16](opus.TensorMap(x, (8, 16)), r0, c0)
    np.testing.assert_array_equal(x, want)


def test_swizzled_store():
    x = _grid(16, 32)
    want = K.store_reference(x, 3, 0, (8, 32))
    K.store_box[1, 32](opus.TensorMap(x, (8, 32), swizzle=128), 3, 0, BOX=(8, 32), SWZ=128)
    np.testing.assert_array_equal(x, want)


# -- the pipeline ------------------------------------------------------------------------------

@pytest.mark.parametrize("k_cols,stages", [(32 * 7, 3), (32 * 5 + 8, 2), (32, 4), (32 * 9, 1),
                                           (64, 3)])
def test_n_stage_pipeline(k_cols, stages):
    x = _grid(20, k_cols) / 7
    blocks = 3
    out = np.full((blocks * 8, 32), np.nan, np.float32)
    k_tiles = -(-k_cols // 32)
    K.column_sums[blocks, 32](opus.TensorMap(x, (8, 32)), out, k_tiles, S=stages)
    np.testing.assert_allclose(out, K.column_sums_reference(x, 8, 32, blocks), rtol=1e-6)


def test_pipeline_with_two_maps_per_stage():
    a, b = _grid(4, 80), _grid(2, 80) * 3
    out = np.zeros(16, np.float32)
    K.two_map_sums[1, 16](opus.TensorMap(a, (4, 16)), opus.TensorMap(b, (2, 16)), out, 5, S=3)
    want = a[0].reshape(5, 16).sum(0) + b[1].reshape(5, 16).sum(0)
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_pipeline_with_no_tiles_loads_nothing():
    out = np.full((8, 32), np.nan, np.float32)
    K.column_sums[1, 32](opus.TensorMap(_grid(8, 32), (8, 32)), out, 0)
    np.testing.assert_array_equal(out, 0)


# -- mbarrier phases ----------------------------------------------------------------------------

def test_phases_and_parity_follow_ptx():
    out = np.full(48, -1, np.int32)
    K.barrier_phases[1, 4](out)
    np.testing.assert_array_equal(out.reshape(4, 12), [K.BARRIER_PHASES] * 4)


def test_a_wait_on_the_running_phase_is_an_error_at_its_line_not_a_hang():
    @opus.kernel
    def stuck(out: opus.Ptr[f32]):
        bar = opus.alloc_mbarriers(1)[0]
        if opus.thread_id_x() == 0:
            bar.init(1)
        opus.sync_threads()
        bar.arrive()
        # phase 1 runs (parity 1) and nobody arrives: the wait below never completes
        bar.wait(1)
    with pytest.raises(opus.interp.InterpError, match=r"test_tma_interp.py:\d+ `bar.wait\(1\)`.*never "
                       r"completes.*phase 1 \(parity 1\)"):
        stuck[1, 1](np.zeros(1, np.float32))


def test_reading_the_destination_before_the_wait_is_reported():
    @opus.kernel
    def early(a: opus.TensorMap, out: opus.Ptr[f32]):
        a.declare(f32, (1, 4))
        tile = opus.alloc_smem(f32, 4, align=128)
        bar = opus.alloc_mbarriers(1)[0]
        t = opus.thread_id_x()
        if t == 0:
            bar.init(1)
            opus.fence_mbarrier_init()
        opus.sync_threads()
        if t == 0:
            bar.arrive_expect_tx(16)
            opus.tma_load(a, tile, (0, 0), bar)
        out[t] = tile[t]
        bar.wait(0)
    x = _grid(1, 4)
    with pytest.raises(opus.interp.AsyncCopyPendingError,
                       match=r"out\[t\] = tile\[t\].*TMA load at .*tma_load.*has not landed"):
        early[1, 4](opus.TensorMap(x, (1, 4)), np.zeros(4, np.float32))


# -- rendering: SASS ----------------------------------------------------------------------------

def _sass_ops(kernel, **constexprs):
    return set(re.findall(r"\b(UTMA[\w.]+|SYNCS\.[\w.]+|UBLKCP[\w.]*)", kernel.sass(target=SM,
                                                                                 **constexprs)))


def test_sass_of_a_load():
    ops = _sass_ops(K.load_box)
    assert "UTMALDG.2D" in ops and any(o.startswith("SYNCS.PHASECHK") for o in ops)
    assert any(o.startswith("SYNCS.ARRIVE") for o in ops), ops


def test_sass_of_a_store_and_a_3d_load():
    assert any(o.startswith("UTMASTG.2D") for o in _sass_ops(K.store_box))
    assert "UTMALDG.3D" in _sass_ops(K.load_box_3d)


def test_sass_of_the_pipeline():
    ops = _sass_ops(K.column_sums)
    assert "UTMALDG.2D" in ops and any(o.startswith("SYNCS.PHASECHK") for o in ops)


def test_tensor_map_parameter_is_a_grid_constant():
    src = K.load_box.source(target=SM)
    assert re.search(r"const __grid_constant__ opus_tensor_map p_a_\d+,", src)
    assert "struct __align__(64) opus_tensor_map { unsigned long long v[16]; };" in src
    assert re.search(r"cp\.async\.bulk\.tensor\.2d.*\{%3, %4\}.*\"r\"\(p_c0_\d+\), "
                     r"\"r\"\(p_r0_\d+\)", src), "coordinates go innermost first"


def test_plan_of_a_tensor_map_parameter():
    from opus.frontend.gpu_launch import plan_of
    spec = K.load_box.specialize(SM, BOX=(8, 16), SWZ=64)
    plan = plan_of(K.load_box, spec)
    a = plan.params[0]
    assert (a.name, a.kind.name, a.offset, a.size, a.align) == ("a", "bytes", 0, 128, 64)
    assert (a.dtype.dtype, a.dtype.box, a.dtype.swizzle) == (f32, (8, 16), 64)
    assert [(p.name, p.offset) for p in plan.params[1:]] == [("out", 128), ("r0", 136),
                                                             ("c0", 140)]


def test_launch_checks_the_map_against_the_declaration():
    x = _grid(20, 24)
    with pytest.raises(opus.ArgumentError, match="'a'.*box \\(8, 16\\).*\\(8, 32\\)"):
        K.load_box[1, 16](opus.TensorMap(x, (8, 32)), np.zeros(128, np.float32), 0, 0)
    with pytest.raises(opus.ArgumentError, match="'a'.*element type f32.*f16"):
        K.load_box[1, 16](opus.TensorMap(x.astype(np.float16), (8, 16)),
                          np.zeros(128, np.float32), 0, 0)


@pytest.mark.parametrize("c0", [-5, -1, 1, 3, 10])
def test_unaligned_innermost_start_is_refused(c0):
    """A box whose innermost start is not 16-byte aligned faults on the GPU (an illegal
    instruction, measured on an H100 for f32 starts -5, -1, 1, 3): the interpreter refuses it
    with a message naming the rule and the line, never silently copies."""
    x = _grid(20, 24)
    out = np.full(128, np.nan, np.float32)
    with pytest.raises(opus.interp.MemoryFault, match=r"innermost coordinate -?\d+ is not a "
                       r"multiple of 4 f32 elements \(16 bytes\)"):
        K.load_box[1, 16](opus.TensorMap(x, (8, 16)), out, 0, c0)


def test_a_static_unaligned_innermost_start_is_a_trace_error():
    @opus.kernel
    def k(a: opus.TensorMap):
        a.declare(f32, (8, 16))
        tile = opus.alloc_smem(f32, 128, align=1024)
        opus.tma_store(a, tile, (0, 6))

    with pytest.raises(opus.TraceError, match="innermost coordinate 6 is not a multiple of 4"):
        k.specialize("sm_90a")


def test_rows_narrower_than_the_swizzle_are_refused():
    """A 16 x 16 f32 box (64-byte rows) in the 128-byte mode: the driver encodes it, but the
    H100 faulted with an illegal address on it in our GPU run, so opus refuses the map (a
    clear error instead of a fault) until the hardware's placement is understood."""
    with pytest.raises(opus.ArgumentError, match="64 bytes, narrower than the 128-byte swizzle"):
        opus.TensorMap(_grid(16, 16), (16, 16), swizzle=128)


@pytest.mark.parametrize("r0,c0", [(-2, 0), (0, -4), (-1, -8)])
def test_a_store_box_starting_before_the_tensor_is_refused(r0, c0):
    """Negative store starts fault on the H100 (illegal instruction: (-2, 0), (0, -4), (-1, 0)
    measured), so the interpreter refuses them naming the rule instead of clipping."""
    x = _grid(20, 24)
    with pytest.raises(opus.interp.MemoryFault, match="may not start before the tensor"):
        K.store_box[1, 16](opus.TensorMap(x, (8, 16)), r0, c0)


def test_try_wait_is_a_test_in_sass():
    """try_wait's result is the phase state at the call: it compiles to the non-suspending
    PHASECHK. (The suspending TRYWAIT form sets its predicate when the phase completes; read
    after later arrivals, which ptxas allows, it answered true after 1 of 2 arrivals on an
    H100: test_mbarrier_phases_on_gpu.) The blocking wait keeps TRYWAIT in its loop."""
    sass = K.barrier_phases.sass(target=SM)
    checks = re.findall(r"SYNCS\.PHASECHK[\w.]*", sass)
    assert len(checks) == 12 and not any("TRYWAIT" in c for c in checks), checks
    assert any("TRYWAIT" in o for o in _sass_ops(K.column_sums))


@opus.kernel
def load_box_dynamic(a: opus.TensorMap, out: opus.Ptr[f32], ALIGN: opus.constexpr = 1024):
    """load_box's 128-byte-swizzled (8, 32) box, landed in dynamic shared memory placed after a
    static mbarrier: the swizzle is of absolute shared addresses, so the tile reads back
    through the map's layout only where the region is 1024-byte aligned."""
    a.declare(f32, (8, 32), swizzle=128)
    tile = opus.dynamic_smem(f32, 0, align=ALIGN)
    t = opus.thread_id_x()
    K.land_box(a, tile, (0, 0))
    u = a.layout()
    for i in range(8):
        out[i * 32 + t] = tile[u(i, t)]


def test_dynamic_smem_aligned_for_a_swizzled_tile():
    x = _grid(8, 32)
    out = np.full(256, np.nan, np.float32)
    load_box_dynamic[1, 32](opus.TensorMap(x, (8, 32), swizzle=128), out, smem=1024)
    np.testing.assert_array_equal(out.reshape(8, 32), x)
    moved = np.full(256, np.nan, np.float32)   # 128-byte aligned (after the 8-byte barrier)
    load_box_dynamic[1, 32](opus.TensorMap(x, (8, 32), swizzle=128), moved, ALIGN=128,
                            smem=1024)
    assert not np.array_equal(moved.reshape(8, 32), x)
    with pytest.raises(opus.interp.MemoryFault, match="not 128-byte aligned"):  # the default
        load_box_dynamic[1, 32](opus.TensorMap(x, (8, 32), swizzle=128), moved, ALIGN=16,
                                smem=1024)
    assert "__align__(1024) unsigned char opus_dyn_smem[]" in load_box_dynamic.source(target=SM)


@pytest.mark.parametrize("align", [8, 24, 2048, True])
def test_dynamic_smem_align_must_be_a_power_of_two_to_1024(align):
    @opus.kernel
    def k(out: opus.Ptr[f32], A: opus.constexpr):
        s = opus.dynamic_smem(f32, 0, align=A)  # ERR
        out[0] = s[0]
    with pytest.raises(opus.TraceError, match="align must be a power of two from 16 to 1024"):
        k[1, 1](np.zeros(1, np.float32), A=align, smem=16)
