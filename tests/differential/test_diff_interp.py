"""CPU part of the differential suite: generated programs in the interpreter (as sm_90a) against
the independent reference (diff_ref), and the reference's own rounding against numpy."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given

import diff_cases
import diff_gen
import diff_run
from diff_ref import round_float
from diff_types import FORMATS, max_finite

# NaN and out-of-range inputs are the point: numpy's casts of them need not warn
pytestmark = pytest.mark.filterwarnings("ignore:.* encountered in cast:RuntimeWarning")

BATCH, THREADS, BLOCK = 16, 64, 32
_failures = []


@diff_gen.diff_settings(default_examples=200, shrink=True)
@given(diff_gen.batches(BATCH))
def _interpreter_vs_reference(batch):
    progs, seed = batch
    failures = diff_run.check(progs, seed, THREADS, BLOCK, "reference")
    _failures.extend(failures)
    assert not failures, failures[0]


def test_generated_programs_interpreter_vs_reference():
    start = dict(diff_run.STATS)
    try:
        _interpreter_vs_reference()
    finally:
        diff_run.write_report("reference", diff_run.counts_since(start), _failures)


@diff_gen.diff_settings(default_examples=25, shrink=True)
@given(diff_gen.batches(BATCH))
def test_generated_kernels_compile_for_sm_90a(batch):
    """NVRTC (no GPU needed) accepts what the CUDA renderer makes of generated programs."""
    kernel, _ = diff_run.load_kernel(diff_gen.render(batch[0], BLOCK)[0])
    assert kernel.specialize(target=diff_run.TARGET).compiled.binary


# -- the reference's rounding, checked against numpy where numpy is exact ------------------------

NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}


@pytest.mark.parametrize("t", ["f16", "bf16", "f32"])
def test_round_float_nearest_matches_numpy(t):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(20000) * 2.0 ** rng.integers(-160, 140, 20000)
    with np.errstate(over="ignore"):
        want = x.astype(NUMPY[t]).astype(np.float64)
    got = np.array([round_float(float(v), t) for v in x])
    assert np.array_equal(got, want)


@pytest.mark.parametrize("t", ["f16", "bf16", "f32"])
def test_round_float_toward_zero(t):
    rng = np.random.default_rng(8)
    p, emin, _ = FORMATS[t]
    for v in rng.standard_normal(3000) * 2.0 ** rng.integers(emin - p, 20, 3000):
        r = round_float(float(v), t, "rz")
        nearest = round_float(float(v), t)
        assert abs(r) <= abs(v) and math.copysign(1, r) == math.copysign(1, v)
        assert r == nearest or abs(nearest) > abs(v)  # rz is nearest or its neighbour inward
    assert round_float(1e30, "f16", "rz") == max_finite("f16")


def test_round_float_integers_round_once():
    # 2**53 + 2**29 + 1 is just above an f32 tie; rounding through f64 first would go down
    assert round_float(2 ** 53 + 2 ** 29 + 1, "f32") == 2.0 ** 53 + 2.0 ** 30
    assert round_float(2 ** 24 + 1, "f32") == 2.0 ** 24
    assert round_float(-(2 ** 64), "f16") == -math.inf


# -- the demo and test kernels' GPU inputs work (the GPU part compares their runs) ---------------

@pytest.mark.parametrize("name", sorted(diff_cases.CASES))
def test_case_inputs_run_in_interpreter(name):
    kernel = diff_cases.load_test_kernels()[name]
    assert diff_cases.run_case(kernel, diff_cases.CASES[name], 0, on_gpu=False)


@pytest.mark.parametrize("name", sorted(diff_cases.ex.EXAMPLES))
def test_example_outputs_are_recorded(name):
    record, (ok, msg) = diff_cases.run_example(name, on_gpu=False)
    assert ok, msg
    assert record, "the runner copied nothing back through examples._device"
