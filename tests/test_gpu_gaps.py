"""GPU twins of the issue-17 gap tests: the same kernels (tests/interp/gap_kernels.py) against
the same references as their interpreter tests (test_multidim.py, test_fma32.py,
test_printf_stdout.py, tests/frontend/test_loops_and_views.py), on the device: multi-dimensional
launches, fma rounding, printf read from the process's stdout, a launch from a fresh thread,
run-time loops with unroll, make_smem views and bounded loads and stores."""
import os
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest

import opus

_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_TESTS, "interp"))
sys.path.insert(0, os.path.join(_TESTS, "frontend"))
import gap_kernels as GK  # noqa: E402
from test_fma32 import TIES, f32_round, near_ties  # noqa: E402
from test_loops_and_views import DIGITS, digits_of, smem_windows_reference  # noqa: E402
from test_printf_stdout import printed_lines  # noqa: E402

from test_gpu_views_threads import _on_gpu, _run  # noqa: E402, F401 - _on_gpu: autouse

pytestmark = pytest.mark.gpu


# -- multi-dimensional launches -----------------------------------------------------------------

@pytest.mark.parametrize("grid,block", GK.LAUNCHES + [((4, 3, 2), (16, 8, 4)),
                                                      ((2, 2, 2), (2, 2, 2))])
def test_each_thread_knows_its_six_indices_and_the_sizes(grid, block):
    shape = tuple(g * b for g, b in zip(grid[::-1], block[::-1]))
    out, packed = _run(GK.linear_ids, grid, block,
                       [np.full(shape, -1, np.int32), np.full(shape, -1, np.int32)])
    want_lin, want_packed = GK.linear_ids_reference(grid, block)
    np.testing.assert_array_equal(packed, want_packed)
    np.testing.assert_array_equal(out, want_lin)


def test_a_kernel_launched_from_a_fresh_thread_writes_its_results():
    # the thread has no current CUDA context of its own; its first launch must bind one
    grid, block = (2, 1, 2), (4, 3, 1)
    shape = (2, 3, 8)
    results, errors = [], []
    selection = opus.current_target()

    def work():
        try:
            with opus.set_target(selection.target.name, interpret=selection.mode == "interp"):
                results.append(_run(GK.linear_ids, grid, block,
                                    [np.full(shape, -1, np.int32),
                                     np.full(shape, -1, np.int32)]))
        except Exception as e:  # reported below
            errors.append(e)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    (out, packed), = results
    want_lin, want_packed = GK.linear_ids_reference(grid, block)
    np.testing.assert_array_equal(out, want_lin)
    np.testing.assert_array_equal(packed, want_packed)


# -- fma ---------------------------------------------------------------------------------------------

def _fma_on_gpu(a, b, c):
    a, b, c = (np.array(v, np.float32) for v in (a, b, c))
    block = min(len(a), 256)
    _, _, _, fused, twice = _run(GK.fma_and_mul_add, len(a) // block, block,
                                 [a, b, c, np.full_like(a, np.nan), np.full_like(a, np.nan)])
    return a, b, c, fused, twice


def test_fma_ties_round_once_by_hand():
    _, _, _, fused, twice = _fma_on_gpu(*([float(t[k]) for t in TIES] for k in range(3)))
    assert fused.tolist() == [float(t[3]) for t in TIES]
    assert twice.tolist() == [float(t[4]) for t in TIES]


def test_fma_is_the_exact_value_rounded_once_to_f32():
    a, b, c, fused, twice = _fma_on_gpu(*near_ties(2048, 17))
    want = [f32_round(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
            for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(fused, np.array(want, np.float32))
    np.testing.assert_array_equal(twice, a * b + c)


# -- printf --------------------------------------------------------------------------------------------

def test_printf_lines_on_the_gpu():
    # the order of lines from different threads is not defined on the GPU: compare as sets
    lines = printed_lines("gpu")
    assert sorted(lines) == sorted(GK.PRINT_LINES), lines


# -- loops and views --------------------------------------------------------------------------------

@pytest.mark.parametrize("unroll", [1, 4, None])
@pytest.mark.parametrize("bounds", [(0, 8, 1), (8, -1, -1), (1, 10, 3), (2, 2, 1), (5, 0, -2)])
def test_run_time_loop_with_unroll(unroll, bounds):
    _, out = _run(GK.digits_in_order, 1, 2, [DIGITS, np.full(2, -1, np.int32)], *bounds, unroll)
    assert out.tolist() == [digits_of(*bounds)] * 2


@pytest.mark.parametrize("m", [0, 1, 13, 31, 32])
def test_make_smem_views(m):
    x = np.arange(1, 33, dtype=np.float32)
    _, out = _run(GK.smem_windows, 1, 32, [x, np.full(160, -1, np.float32)], m)
    np.testing.assert_array_equal(out, smem_windows_reference(x, m))


@pytest.mark.parametrize("n,base", [(10, -8), (16, 0), (13, 0), (0, 0), (5, 4), (20, -4)])
def test_bounded_vector_load_and_store_lanes(n, base):
    x = np.arange(1, 25, dtype=np.float32)
    _, y, out = _run(GK.bounded_quads, 1, 5,
                     [x, np.full(24, -1, np.float32), np.full(20, -1, np.float32)], n, base)
    want_out, want_y = GK.bounded_quads_reference(x, n, base)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(y, want_y)


def test_bounded_scalar_and_broadcast_stores():
    x = np.arange(1, 17, dtype=np.float32)
    _, y, out = _run(GK.bounded_scalars, 1, 16,
                     [x, np.full(24, -1, np.float32), np.full(16, -1, np.float32)], 10, -3)
    want_out, want_y = GK.bounded_scalars_reference(x)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(y, want_y)
