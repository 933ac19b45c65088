"""Bad input to opus.ops.softmax and opus.ops.topk (ops/rowsoftmax.py, ops/rowtopk.py): each an
ArgumentError naming the argument and the problem, with the given output left unwritten and
nothing compiled into the cache."""
import numpy as np
import pytest

import opus
import opus.ops
from expect import raises, unchanged, no_new_cache_files

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16


@pytest.fixture(params=["sm_90a", "gfx942"])
def interp(request, cache_root):
    with opus.set_target(request.param, interpret=True):
        yield cache_root


def _x(shape=(4, 16), dtype=np.float32):
    return np.ones(shape, dtype)


class _NotAnArray:
    shape = (4, 16)


# (call, needles): the call gets no out= (softmax's out cases are below)
SOFTMAX_CASES = {
    "f64 input": (lambda: opus.ops.softmax(_x(dtype=np.float64)), ["x has dtype f64", "bf16"]),
    "int input": (lambda: opus.ops.softmax(_x(dtype=np.int32)), ["x has dtype i32"]),
    "fp8 input": (lambda: opus.ops.softmax(_x(dtype=ml_dtypes.float8_e4m3fn)),
                  ["x has dtype", "f32, bf16, f16"]),
    "bool input": (lambda: opus.ops.softmax(_x(dtype=np.bool_)), ["x has dtype"]),
    "scalar": (lambda: opus.ops.softmax(np.float32(1.0) * np.ones((), np.float32)),
               ["at least one dimension", "scalar"]),
    "a list": (lambda: opus.ops.softmax([[1.0, 2.0]]), ["torch tensor or a numpy array", "list"]),
    "other object": (lambda: opus.ops.softmax(_NotAnArray()), ["_NotAnArray"]),
    "dim 0": (lambda: opus.ops.softmax(_x(), dim=0), ["dim=0", "only the last dimension"]),
    "dim -2": (lambda: opus.ops.softmax(_x((2, 3, 4)), dim=-2), ["dim=-2", "last"]),
    "dim 1 of 3": (lambda: opus.ops.softmax(_x((2, 3, 4)), dim=1), ["dim=1"]),
    "dim out of range": (lambda: opus.ops.softmax(_x(), dim=2), ["dim must be", "2 dimensions"]),
    "dim below range": (lambda: opus.ops.softmax(_x(), dim=-3), ["dim must be", "-3"]),
    "dim a float": (lambda: opus.ops.softmax(_x(), dim=1.0), ["dim must be an int"]),
    "dim None": (lambda: opus.ops.softmax(_x(), dim=None), ["dim must be an int", "None"]),
}


@pytest.mark.parametrize("case", list(SOFTMAX_CASES))
def test_softmax_bad_input(interp, case):
    call, needles = SOFTMAX_CASES[case]
    with no_new_cache_files(interp), raises(opus.ArgumentError, "opus.ops.softmax", *needles):
        call()


# (x, out, needles)
OUT_CASES = {
    "out shape": (_x(), _x((4, 15)), ["out must have x's shape (4, 16)", "(4, 15)"]),
    "out transposed shape": (_x(), _x((16, 4)), ["(16, 4)"]),
    "out dtype": (_x(), _x(dtype=np.float16), ["dtype f32", "f16"]),
    "out bf16 for f16": (_x(dtype=np.float16), _x(dtype=BF16), ["dtype f16", "bf16"]),
    "out int": (_x(), _x(dtype=np.int32), ["out has dtype i32"]),
    "out 1-D": (_x(), np.ones(64, np.float32), ["(64,)"]),
    "out strided": (_x(), np.ones((4, 32), np.float32)[:, ::2], ["C-contiguous"]),
    "out column-major": (_x(), np.asfortranarray(np.ones((4, 16), np.float32)),
                         ["C-contiguous"]),
    "out a list": (_x(), [[0.0] * 16] * 4, ["out must be a torch tensor or a numpy array"]),
}


@pytest.mark.parametrize("case", list(OUT_CASES))
def test_softmax_bad_out(interp, case):
    x, out, needles = OUT_CASES[case]
    # (unchanged() compares bytes of C-contiguous arrays: a column-major out through its
    # transpose, a strided one through its base)
    arrays = []
    if isinstance(out, np.ndarray):
        arrays = [out if out.flags.c_contiguous else out.T if out.T.flags.c_contiguous
                  else out.base]
    with no_new_cache_files(interp), unchanged(*arrays), \
            raises(opus.ArgumentError, "opus.ops.softmax", *needles):
        opus.ops.softmax(x, out=out)


TOPK_CASES = {
    "k above n": (lambda: opus.ops.topk(_x((2, 5)), 6), ["k=6 is out of range", "n = 5"]),
    "k above 128": (lambda: opus.ops.topk(_x((2, 300)), 129), ["k=129", "128"]),
    "k far above": (lambda: opus.ops.topk(_x((2, 300)), 1000), ["k=1000"]),
    "k negative": (lambda: opus.ops.topk(_x(), -1), ["k=-1 is out of range"]),
    "k a float": (lambda: opus.ops.topk(_x(), 2.0), ["k must be an int", "float"]),
    "k a bool": (lambda: opus.ops.topk(_x(), True), ["k must be an int", "bool"]),
    "k None": (lambda: opus.ops.topk(_x(), None), ["k must be an int", "None"]),
    "k a numpy array": (lambda: opus.ops.topk(_x(), np.array([2])), ["k must be an int"]),
    "k with an empty row": (lambda: opus.ops.topk(_x((3, 0)), 1), ["k=1", "n = 0"]),
    "f64 input": (lambda: opus.ops.topk(_x(dtype=np.float64), 2), ["x has dtype f64"]),
    "int input": (lambda: opus.ops.topk(_x(dtype=np.int64), 2), ["x has dtype i64"]),
    "u8 input": (lambda: opus.ops.topk(_x(dtype=np.uint8), 2), ["x has dtype u8"]),
    "fp8 input": (lambda: opus.ops.topk(_x(dtype=ml_dtypes.float8_e5m2), 2), ["x has dtype"]),
    "scalar": (lambda: opus.ops.topk(np.ones((), np.float32), 1), ["at least one dimension"]),
    "a list": (lambda: opus.ops.topk([1.0, 2.0], 1), ["torch tensor or a numpy array"]),
    "dim 0": (lambda: opus.ops.topk(_x(), 2, dim=0), ["dim=0", "only the last"]),
    "dim -2 of 3": (lambda: opus.ops.topk(_x((2, 3, 4)), 2, dim=-2), ["dim=-2"]),
    "dim out of range": (lambda: opus.ops.topk(_x(), 2, dim=5), ["dim must be", "5"]),
    "dim a string": (lambda: opus.ops.topk(_x(), 2, dim="last"), ["dim must be an int"]),
    "largest None": (lambda: opus.ops.topk(_x(), 2, largest=None), ["largest must be a bool"]),
    "largest an int": (lambda: opus.ops.topk(_x(), 2, largest=1), ["largest must be a bool"]),
    "largest a string": (lambda: opus.ops.topk(_x(), 2, largest="yes"),
                         ["largest must be a bool", "yes"]),
    "sorted False": (lambda: opus.ops.topk(_x(), 2, sorted=False), ["sorted=False"]),
    "sorted None": (lambda: opus.ops.topk(_x(), 2, sorted=None), ["sorted=False"]),
}


@pytest.mark.parametrize("case", list(TOPK_CASES))
def test_topk_bad_input(interp, case):
    call, needles = TOPK_CASES[case]
    with no_new_cache_files(interp), raises(opus.ArgumentError, "opus.ops.topk", *needles):
        call()


def test_input_left_unchanged_by_a_refused_call(interp):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with unchanged(x), raises(opus.ArgumentError, "k=5"):
        opus.ops.topk(x, 5)
    with unchanged(x), raises(opus.ArgumentError, "dim=0"):
        opus.ops.softmax(x, dim=0)


@pytest.mark.parametrize("op", ["softmax", "topk"])
def test_torch_cpu_tensor_is_refused(op):
    torch = pytest.importorskip("torch")
    x = torch.ones(4, 16)
    args = (x,) if op == "softmax" else (x, 2)
    with raises(opus.ArgumentError, f"opus.ops.{op}", "on cpu", "CUDA device"):
        getattr(opus.ops, op)(*args)
