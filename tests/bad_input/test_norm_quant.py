"""Bad input to opus.ops.rmsnorm, rmsnorm_quant, per_token_quant and per_group_quant
(ops/norm_quant.py): each an ArgumentError naming the operation, the argument and the problem,
with every given array left unwritten and nothing compiled into the cache."""
import numpy as np
import pytest

import opus
import opus.ops
from opus.errors import ArgumentError
from expect import raises, unchanged, no_new_cache_files

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
FNUZ = ml_dtypes.float8_e4m3fnuz


def _x(rows=4, hidden=256, dtype=BF16):
    return np.ones((rows, hidden), dtype)


def _w(hidden=256, dtype=BF16):
    return np.ones(hidden, dtype)


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _fp8(rows=4, hidden=256, dtype=E4M3):
    return np.zeros((rows, hidden), dtype)


# name -> (operation, arguments, keyword arguments, needles); a callable builds them fresh
RMSNORM = {
    "x 1-D": ("rmsnorm", lambda: ((np.ones(8, BF16), _w(8)), {}), ["rmsnorm", "x must be a matrix", "(8,)"]),
    "x 3-D": ("rmsnorm", lambda: ((np.ones((2, 3, 8), BF16), _w(8)), {}), ["x must be a matrix", "(2, 3, 8)"]),
    "x f32": ("rmsnorm", lambda: ((_x(dtype=np.float32), _w()), {}), ["x must be bf16 or f16", "f32"]),
    "x int8": ("rmsnorm", lambda: ((_x(dtype=np.int8), _w()), {}), ["bf16 or f16", "i8"]),
    "x a list": ("rmsnorm", lambda: (([[1.0, 2.0]], _w(2)), {}), ["torch tensor", "numpy array", "list"]),
    "x column-major": ("rmsnorm", lambda: ((np.ones((256, 4), BF16).T, _w()), {}),
                       ["x's rows must be contiguous", "strides"]),
    "weight too short": ("rmsnorm", lambda: ((_x(), _w(255)), {}), ["weight must have shape (256,)", "(255,)"]),
    "weight 2-D": ("rmsnorm", lambda: ((_x(), np.ones((1, 256), BF16)), {}), ["weight must have shape (256,)"]),
    "weight f16 for bf16 x": ("rmsnorm", lambda: ((_x(), _w(dtype=np.float16)), {}),
                              ["weight must be bf16 like x", "f16"]),
    "weight strided": ("rmsnorm", lambda: ((_x(), np.ones(512, BF16)[::2]), {}),
                       ["weight must be contiguous", "stride is 2"]),
    "weight a list": ("rmsnorm", lambda: ((_x(2, 2), [1.0, 1.0]), {}), ["weight must be a numpy array like x", "list"]),
    "eps negative": ("rmsnorm", lambda: ((_x(), _w(), -1e-6), {}), ["eps must be a finite number >= 0", "-1e-06"]),
    "eps nan": ("rmsnorm", lambda: ((_x(), _w(), float("nan")), {}), ["eps must be a finite number", "nan"]),
    "eps inf": ("rmsnorm", lambda: ((_x(), _w(), float("inf")), {}), ["eps must be a finite number", "inf"]),
    "eps a string": ("rmsnorm", lambda: ((_x(), _w(), "1e-6"), {}), ["eps must be a finite number", "'1e-6'"]),
    "eps a bool": ("rmsnorm", lambda: ((_x(), _w(), True), {}), ["eps must be a finite number", "True"]),
    "residual shape": ("rmsnorm", lambda: ((_x(), _w()), {"residual": _x(3)}),
                       ["residual must have shape (4, 256)", "(3, 256)"]),
    "residual dtype": ("rmsnorm", lambda: ((_x(), _w()), {"residual": _x(dtype=np.float16)}),
                       ["residual must be bf16 like x", "f16"]),
    "residual column-major": ("rmsnorm", lambda: ((_x(), _w()), {"residual": np.ones((256, 4), BF16).T}),
                              ["residual's rows must be contiguous"]),
    "residual f32": ("rmsnorm", lambda: ((_x(), _w()), {"residual": _x(dtype=np.float32)}),
                     ["residual must be bf16", "f32"]),
    "out shape": ("rmsnorm", lambda: ((_x(), _w()), {"out": _x(4, 128)}), ["out must have shape (4, 256)", "(4, 128)"]),
    "out f32": ("rmsnorm", lambda: ((_x(), _w()), {"out": _x(dtype=np.float32)}), ["out must be bf16 like x", "f32"]),
    "out fp8 for rmsnorm": ("rmsnorm", lambda: ((_x(), _w()), {"out": _fp8()}), ["out must be bf16", "fp8_e4m3"]),
    "out column-major": ("rmsnorm", lambda: ((_x(), _w()), {"out": np.ones((256, 4), BF16).T}),
                         ["out's rows must be contiguous"]),
    "out a list": ("rmsnorm", lambda: ((_x(1, 2), _w(2)), {"out": [[0.0, 0.0]]}), ["out must be a numpy array"]),
}

QUANT = {
    "rq out bf16": ("rmsnorm_quant", lambda: ((_x(), _w()), {"out": _x()}),
                    ["rmsnorm_quant", "out must be fp8_e4m3", "the target's e4m3 fp8", "bf16"]),
    "rq out e5m2": ("rmsnorm_quant", lambda: ((_x(), _w()), {"out": _fp8(dtype=ml_dtypes.float8_e5m2)}),
                    ["out must be fp8_e4m3", "fp8_e5m2"]),
    "rq out fnuz on sm_90a": ("rmsnorm_quant", lambda: ((_x(), _w()), {"out": _fp8(dtype=FNUZ)}),
                              ["out must be fp8_e4m3 ", "fp8_e4m3fnuz"]),
    "rq scales (rows, 1)": ("rmsnorm_quant", lambda: ((_x(), _w()), {"scales": _f32(4, 1)}),
                            ["scales must have shape (4,)", "(4, 1)"]),
    "rq scales f16": ("rmsnorm_quant", lambda: ((_x(), _w()), {"scales": np.zeros(4, np.float16)}),
                      ["scales must be f32", "f16"]),
    "rq scales strided": ("rmsnorm_quant", lambda: ((_x(), _w()), {"scales": _f32(8)[::2]}),
                          ["scales must be contiguous", "(2,)"]),
    "rq residual dtype": ("rmsnorm_quant", lambda: ((_x(), _w()), {"residual": _x(dtype=np.float16)}),
                          ["rmsnorm_quant", "residual must be bf16 like x"]),
    "rq weight length": ("rmsnorm_quant", lambda: ((_x(), _w(100)), {}), ["weight must have shape (256,)"]),
    "rq eps negative": ("rmsnorm_quant", lambda: ((_x(), _w(), -0.5), {}), ["eps must be a finite number >= 0"]),
    "rq x f32": ("rmsnorm_quant", lambda: ((_x(dtype=np.float32), _w()), {}), ["x must be bf16 or f16", "f32"]),
    "pt x f32": ("per_token_quant", lambda: ((_x(dtype=np.float32),), {}), ["per_token_quant", "x must be bf16 or f16"]),
    "pt x 3-D": ("per_token_quant", lambda: ((np.ones((2, 2, 8), BF16),), {}), ["x must be a matrix", "(2, 2, 8)"]),
    "pt x column-major": ("per_token_quant", lambda: ((np.ones((256, 4), BF16).T,), {}),
                          ["x's rows must be contiguous"]),
    "pt out shape": ("per_token_quant", lambda: ((_x(),), {"out": _fp8(4, 255)}), ["out must have shape (4, 256)"]),
    "pt out f16": ("per_token_quant", lambda: ((_x(),), {"out": _x(dtype=np.float16)}), ["out must be fp8_e4m3", "f16"]),
    "pt scales shape": ("per_token_quant", lambda: ((_x(),), {"scales": _f32(5)}), ["scales must have shape (4,)", "(5,)"]),
    "pt scales f64": ("per_token_quant", lambda: ((_x(),), {"scales": np.zeros(4)}), ["scales must be f32", "f64"]),
    "pt x a tuple": ("per_token_quant", lambda: (((1.0, 2.0),), {}), ["torch tensor", "numpy array", "tuple"]),
    "pg scales floor": ("per_group_quant", lambda: ((_x(4, 300),), {"scales": _f32(4, 2)}),
                        ["per_group_quant", "scales must have shape (4, 3)", "(4, 2)"]),
    "pg scales flat": ("per_group_quant", lambda: ((_x(),), {"scales": _f32(8)}), ["scales must have shape (4, 2)", "(8,)"]),
    "pg scales column-major": ("per_group_quant", lambda: ((_x(),), {"scales": _f32(2, 4).T}),
                               ["scales must be contiguous"]),
    "pg x int32": ("per_group_quant", lambda: ((_x(dtype=np.int32),), {}), ["x must be bf16 or f16", "i32"]),
    "pg out bf16": ("per_group_quant", lambda: ((_x(),), {"out": _x()}), ["out must be fp8_e4m3"]),
    "pg out fp8 rows padded wrong": ("per_group_quant", lambda: ((_x(),), {"out": np.zeros((256, 4), E4M3).T}),
                                     ["out's rows must be contiguous"]),
}

CASES = {**RMSNORM, **QUANT}


def _arrays(args, kw):
    return [a for a in list(args) + list(kw.values()) if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(name, cache_root):
    op, make, needles = CASES[name]
    args, kw = make()
    with opus.set_target("sm_90a", interpret=True):
        with raises(ArgumentError, f"opus.ops.{op}", *needles), unchanged(*_arrays(args, kw)), \
                no_new_cache_files(cache_root):
            getattr(opus.ops, op)(*args, **kw)


@pytest.mark.parametrize("op", ["rmsnorm_quant", "per_token_quant", "per_group_quant"])
def test_ocp_fp8_out_on_gfx942(op, cache_root):
    """gfx942's fp8 is e4m3fnuz (max 240): an OCP e4m3 out is refused by name."""
    x = _x()
    args = (x, _w()) if op == "rmsnorm_quant" else (x,)
    out = _fp8()
    with opus.set_target("gfx942", interpret=True):
        with raises(ArgumentError, op, "out must be fp8_e4m3fnuz", "fp8_e4m3"), unchanged(out), \
                no_new_cache_files(cache_root):
            getattr(opus.ops, op)(*args, out=out)
