"""opus.range(unroll=), opus.static_ford, opus.make_smem and the free opus.load/opus.store with
a bound: results in the interpreter (as NVIDIA and AMD chips) against references worked out in
Python (loop orders, the bound rule: elements at k < 0 or k >= bound read 0 and are not
written), and what the renderers make of them (a run-time loop with its unroll pragma, which
the compiler follows). The GPU twins are in tests/test_gpu_gaps.py."""
import os
import re
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interp"))
import gap_kernels as GK  # noqa: E402

DIGITS = np.array([3, 1, 4, 1, 5, 9, 2, 6, 8, 7], np.int32)


@pytest.fixture(params=["sm_90a", "gfx942"])
def interpret(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


def digits_of(start, stop, step):
    acc = 0
    for i in range(start, stop, step):
        acc = acc * 10 + int(DIGITS[i])
    return acc


# -- opus.range(unroll=) ----------------------------------------------------------------------------

@pytest.mark.parametrize("unroll", [1, 3, 4, None])
@pytest.mark.parametrize("bounds", [(0, 8, 1), (8, -1, -1), (1, 10, 3), (2, 2, 1), (5, 0, -2),
                                    (0, 9, 4), (3, 7, 1)])
def test_run_time_loop_with_unroll_visits_each_element_in_order(interpret, unroll, bounds):
    out = np.full(2, -1, np.int32)
    GK.digits_in_order[1, 2](DIGITS, out, *bounds, unroll)
    assert out.tolist() == [digits_of(*bounds)] * 2


def test_compile_time_bounds_still_make_a_run_time_loop(interpret):
    out = np.full(1, -1, np.int32)
    GK.static_bounds_loop[1, 1](DIGITS, out)
    assert out[0] == 1196  # x[1], x[3], x[5], x[7]
    kinds = [op.kind for op in GK.static_bounds_loop.specialize(target=interpret).function.walk()]
    assert kinds.count("for") == 1 and kinds.count("load") == 1


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_the_rendered_loop_carries_its_unroll_pragma(target):
    for unroll in (1, 4):
        lines = GK.digits_in_order.source(target=target, UNROLL=unroll).splitlines()
        at = [k for k, line in enumerate(lines) if line.strip() == f"#pragma unroll {unroll}"]
        # HIP emits a small loop with a run-time step twice, the copy for a positive step
        # without the sign test (codegen/hip.py render_for): the pragma is on each copy
        assert len(at) == (2 if target == "gfx942" else 1), lines
        assert all(re.match(r"\s*for \(int \w+ = ", lines[k + 1]) for k in at), lines
    assert "#pragma unroll" not in GK.digits_in_order.source(target=target, UNROLL=None)
    static = GK.static_bounds_loop.source(target=target)
    assert "#pragma unroll 2" in static and static.count("for (") == 1
    assert GK.digits_in_order.specialize(target=target, UNROLL=4).compiled.binary


def test_nvrtc_follows_the_pragma():
    # one loop whatever the run-time step's sign (its test is one compare of iv and the bound
    # xor-ed with a sign mask); unroll 1: one load, marked nounroll; unroll 4: four copies
    def ptx(unroll):
        return GK.digits_in_order.ptx(target="sm_90a", UNROLL=unroll)
    assert len(re.findall(r"\bld\.global\.", ptx(1))) == 1
    assert ptx(1).count('.pragma "nounroll"') == 1
    assert len(re.findall(r"\bld\.global\.", ptx(4))) >= 4


# -- static_ford -------------------------------------------------------------------------------------

def test_static_ford_visits_the_last_dimension_fastest(interpret):
    out = np.full(10, -1, np.int32)
    GK.ford_order[1, 1](out)
    assert out.tolist() == [0, 1, 2, 10, 11, 12, 0, 1, 100, 101]
    kinds = [op.kind for op in GK.ford_order.specialize(target=interpret).function.walk()]
    assert "for" not in kinds and kinds.count("store") == 10  # unrolled while tracing


# -- make_smem ---------------------------------------------------------------------------------------

def smem_windows_reference(x, m):
    t = np.arange(32)
    bounded = np.where(t < m, x, 0)
    after = np.where(t < m, 100 + t, x)  # the bounded store dropped at t >= m
    quads = np.where(t < m, after, 0)
    return np.concatenate([bounded, bounded, x, after, quads]).astype(np.float32)


@pytest.mark.parametrize("m", [0, 1, 13, 31, 32])
def test_make_smem_views_bound_reads_and_writes(interpret, m):
    x = np.arange(1, 33, dtype=np.float32)
    out = np.full(160, -1, np.float32)
    GK.smem_windows[1, 32](x, out, m)
    np.testing.assert_array_equal(out, smem_windows_reference(x, m))


# -- opus.load / opus.store with a bound --------------------------------------------------------------

@pytest.mark.parametrize("n,base", [(10, -8), (16, 0), (13, 0), (0, 0), (5, 4), (20, -4)])
def test_bounded_vector_load_and_store_lanes(interpret, n, base):
    """Five threads, four elements each, from base: lanes at k < 0 or k >= n read 0 (also where
    the array goes on) and are not written."""
    x = np.arange(1, 25, dtype=np.float32)
    y, out = np.full(24, -1, np.float32), np.full(20, -1, np.float32)
    GK.bounded_quads[1, 5](x, y, out, n, base)
    want_out, want_y = GK.bounded_quads_reference(x, n, base)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(y, want_y)


def test_bounded_scalar_and_broadcast_stores(interpret):
    x = np.arange(1, 17, dtype=np.float32)
    y, out = np.full(24, -1, np.float32), np.full(16, -1, np.float32)
    GK.bounded_scalars[1, 16](x, y, out, 10, -3)
    want_out, want_y = GK.bounded_scalars_reference(x)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(y, want_y)
