"""GPU part of the differential suite (pytest -m gpu): the same kernels on the GPU and in the
interpreter as the same target, bitwise for integers, memory and conversions, within ulps for
transcendentals. The generated-program test checks every batch and then fails listing the
mismatches; OPUS_DIFF_REPORT=path.json records the counts and the first mismatches."""
import pytest
from hypothesis import given

import diff_cases
import diff_gen
import diff_run

# NaN and out-of-range inputs are the point: numpy's casts of them need not warn
pytestmark = [pytest.mark.gpu,
              pytest.mark.filterwarnings("ignore:.* encountered in cast:RuntimeWarning")]

BATCH, THREADS, BLOCK = 32, 256, 128
_failures = []


@diff_gen.diff_settings(default_examples=300, shrink=False)
@given(diff_gen.batches(BATCH))
def _gpu_vs_interpreter(batch):
    progs, seed = batch
    _failures.extend(diff_run.check(progs, seed, THREADS, BLOCK, "gpu"))


def test_generated_programs_gpu_vs_interpreter():
    start = dict(diff_run.STATS)
    try:
        _gpu_vs_interpreter()
    finally:
        counts = diff_run.counts_since(start)
        diff_run.write_report("gpu", counts, _failures)
    assert not _failures, (f"{len(_failures)} of {counts['programs']} programs differ "
                           f"({diff_run.verdicts(_failures)}); the first:\n{_failures[0]}")


def _test_kernel_names():
    return sorted(diff_cases.load_test_kernels())


@pytest.mark.parametrize("name", _test_kernel_names())
def test_test_kernel_gpu_vs_interpreter(name):
    if name in diff_cases.SKIP:
        pytest.skip(diff_cases.SKIP[name])
    if name not in diff_cases.CASES:
        pytest.skip("no inputs for this kernel in diff_cases.CASES yet")
    kernel = diff_cases.load_test_kernels()[name]
    case = diff_cases.CASES[name]
    got = diff_cases.run_case(kernel, case, 0, on_gpu=False)
    want = diff_cases.run_case(kernel, case, 0, on_gpu=True)
    problem = diff_cases.differences(name, got, want)
    assert problem is None, problem


@pytest.mark.parametrize("name", sorted(diff_cases.ex.EXAMPLES))
def test_example_gpu_vs_interpreter(name):
    got, _ = diff_cases.run_example(name, on_gpu=False)
    want, _ = diff_cases.run_example(name, on_gpu=True)
    problem = diff_cases.differences(name, got, want)
    assert problem is None, problem
