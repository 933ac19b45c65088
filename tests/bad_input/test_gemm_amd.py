"""Bad input to opus.ops.gemm on AMD (ops/gemm_amd.py) and to its target dispatch
(ops/__init__.py): each an ArgumentError naming the argument and the problem, with the output
left unwritten and nothing compiled into the cache."""
import numpy as np
import pytest

import opus
import opus.ops
from opus.ops import gemm_amd
from expect import raises, unchanged, no_new_cache_files

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16


def _m(rows, cols, dtype=BF16):
    return np.ones((rows, cols), dtype)


def _kmajor(k, n, dtype=BF16):
    return np.ones((n, k), dtype).T


@pytest.fixture(params=["gfx942", "gfx950"])
def amd(request, cache_root):
    with opus.set_target(request.param, interpret=True):
        yield cache_root


# (a, b, out, options, needles): out None means let gemm make it
CASES = {
    "inner dims": (lambda: (_m(8, 16), _m(8, 16), None, {}), ["inner dimensions differ", "8 x 16"]),
    "a 3-D": (lambda: (np.ones((2, 8, 8), BF16), _m(8, 8), None, {}), ["a must be a matrix", "(2, 8, 8)"]),
    "b 1-D": (lambda: (_m(8, 8), np.ones(8, BF16), None, {}), ["b must be a matrix"]),
    "f32 inputs": (lambda: (_m(8, 8, np.float32), _m(8, 8, np.float32), None, {}),
                   ["bf16 or both f16", "f32"]),
    "mixed types": (lambda: (_m(8, 8), _m(8, 8, np.float16), None, {}),
                    ["bf16 or both f16", "bf16 and f16"]),
    "int8 inputs": (lambda: (_m(8, 8, np.int8), _m(8, 8, np.int8), None, {}), ["i8"]),
    "a column-major": (lambda: (np.ones((16, 8), BF16).T, _m(16, 8), None, {}),
                       ["a must be row-major", "strides"]),
    "a padded rows": (lambda: (np.ones((8, 24), BF16)[:, :16], _m(16, 8), None, {}),
                      ["a must be row-major with contiguous rows", "(24, 1)"]),
    "b neither layout": (lambda: (_m(8, 8), np.ones((16, 16), BF16)[::2, ::2], None, {}),
                         ["b must have one contiguous dimension"]),
    "b padded rows": (lambda: (_m(8, 16), np.ones((16, 24), BF16)[:, :8], None, {}),
                      ["b's rows must be contiguous"]),
    "b K-major padded": (lambda: (_m(8, 16), np.ones((8, 24), BF16)[:, :16].T, None, {}),
                         ["b's rows must be contiguous"]),
    "out shape": (lambda: (_m(8, 16), _m(16, 8), _m(8, 9), {}), ["out must be a row-major 8 x 8 bf16",
                                                                  "(8, 9)"]),
    "out dtype": (lambda: (_m(8, 16), _m(16, 8), _m(8, 8, np.float16), {}),
                  ["out must be a row-major 8 x 8 bf16", "f16"]),
    "out column-major": (lambda: (_m(8, 16), _m(16, 8), np.ones((8, 8), BF16).T, {}),
                         ["out must be a row-major", "contiguous rows"]),
    "out f32": (lambda: (_m(8, 16), _m(16, 8), _m(8, 8, np.float32), {}), ["dtype f32"]),
    "block_m 96": (lambda: (_m(8, 16), _m(16, 8), None, {"block_m": 96}), ["block_m must be 128 or 256", "96"]),
    "block_m 512": (lambda: (_m(8, 16), _m(16, 8), None, {"block_m": 512}), ["block_m must be 128 or 256"]),
    "block_n 96": (lambda: (_m(8, 16), _m(16, 8), None, {"block_n": 96}),
                   ["block_n must be one of 64, 128, 256 with row-major b", "96"]),
    "block_n 192 row-major": (lambda: (_m(8, 16), _m(16, 8), None, {"block_n": 192}),
                              ["block_n must be one of", "row-major b", "192"]),
    "block_n 32 K-major": (lambda: (_m(8, 16), _kmajor(16, 8), None, {"block_n": 32}),
                           ["block_n must be one of 64, 128, 192, 256 with k-major b"]),
    "tile too big": (lambda: (_m(8, 16), _kmajor(16, 8), None, {"block_m": 256, "block_n": 256}),
                     ["256 x 256 block tile", "accumulator registers", "at most 256 x 192"]),
    "blocks on AMD": (lambda: (_m(8, 16), _m(16, 8), None, {"blocks": 4}),
                      ["blocks= is an sm_90a option", "block_m and block_n"]),
    "stages on AMD": (lambda: (_m(8, 16), _m(16, 8), None, {"stages": 2}),
                      ["stages= is an sm_90a option"]),
    "block_n string": (lambda: (_m(8, 16), _m(16, 8), None, {"block_n": "128"}),
                       ["block_n must be one of", "'128'"]),
    # the fused epilogue's operands (bias: N of the output's type; residual: M x N)
    "bias too short": (lambda: (_m(8, 16), _m(16, 8), None, {"bias": np.ones(7, BF16)}),
                       ["bias must be 8 of bf16", "(7,)"]),
    "bias 2-D": (lambda: (_m(8, 16), _m(16, 8), None, {"bias": _m(1, 8)}),
                 ["bias must be 8 of bf16", "(1, 8)"]),
    "bias f32": (lambda: (_m(8, 16), _m(16, 8), None, {"bias": np.ones(8, np.float32)}),
                 ["bias must be 8 of bf16 (the output's type)", "f32"]),
    "bias strided": (lambda: (_m(8, 16), _m(16, 8), None, {"bias": np.ones(16, BF16)[::2]}),
                     ["bias must be contiguous"]),
    "residual shape": (lambda: (_m(8, 16), _m(16, 8), None, {"residual": _m(8, 9)}),
                       ["residual must be 8 x 8 of bf16", "(8, 9)"]),
    "residual f16": (lambda: (_m(8, 16), _m(16, 8), None, {"residual": _m(8, 8, np.float16)}),
                     ["residual must be 8 x 8 of bf16", "f16"]),
    "residual transposed": (lambda: (_m(8, 16), _m(16, 8), None,
                                     {"residual": np.ones((8, 8), BF16).T}),
                            ["residual must be contiguous (row-major)"]),
    "residual of f16 out": (lambda: (_m(8, 16, np.float16), _m(16, 8, np.float16), None,
                                     {"residual": _m(8, 8)}),
                            ["residual must be 8 x 8 of f16", "bf16"]),
    "activation a string": (lambda: (_m(8, 16), _m(16, 8), None, {"activation": "relu"}),
                            ["activation must be a function of one value", "'relu'"]),
    "activation a number": (lambda: (_m(8, 16), _m(16, 8), None, {"activation": 0.5}),
                            ["activation must be a function", "0.5"]),
    "bias with K = 0": (lambda: (_m(8, 0), _m(0, 8), None, {"bias": np.ones(9, BF16)}),
                        ["bias must be 8 of bf16"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_anything_runs(amd, case):
    make, needles = CASES[case]
    a, b, out, options = make()
    given = np.zeros((1, 1), BF16) if out is None else out if out.flags.c_contiguous else out.base
    with no_new_cache_files(amd), unchanged(given), raises(opus.ArgumentError, "opus.ops.gemm",
                                                           *needles):
        opus.ops.gemm(a, b, out, **options)


def test_an_amd_block_m_on_hopper_names_the_sm90a_heights(cache_root):
    a, b = _m(8, 16), _m(16, 8)
    with opus.set_target("sm_90a", interpret=True), no_new_cache_files(cache_root), \
            raises(opus.ArgumentError, "block_m must be 64 or 128", "sm_90a", "256"):
        opus.ops.gemm(a, b, block_m=256)


def test_the_amd_kernel_refuses_an_nvidia_target(cache_root):
    with opus.set_target("sm_90a", interpret=True), no_new_cache_files(cache_root), \
            raises(opus.ArgumentError, "needs gfx942 or gfx950", "sm_90a"):
        gemm_amd.gemm(_m(8, 16), _m(16, 8))


def test_empty_inputs_still_check_the_options(amd):
    out = np.full((0, 8), 7, BF16)
    with raises(opus.ArgumentError, "block_m must be 128 or 256"):
        opus.ops.gemm(_m(0, 16), _m(16, 8), out, block_m=64)


# activations that cannot be fused: each a TraceError naming the function and its line
def _vector_activation(x):  # ERR: act-vector
    return opus.make_vector(x, x)


def _mask_activation(x):  # ERR: act-bool
    return x < 0.0


def _failing_activation(x):
    return opus.shfl(x, "lane")  # ERR: act-inside


@pytest.mark.parametrize("act,tag,needles", [
    (_vector_activation, "act-vector", ["activation '_vector_activation'", "one number", "f32x2"]),
    (_mask_activation, "act-bool", ["activation '_mask_activation'", "one number", "got bool"]),
    (_failing_activation, "act-inside", ["opus.shfl", "lane must be an integer"]),
])
def test_activation_that_cannot_be_fused(amd, act, tag, needles):
    out = np.full((8, 8), 7, BF16)
    with no_new_cache_files(amd), unchanged(out), raises(opus.TraceError, *needles, at=tag):
        opus.ops.gemm(_m(8, 16), _m(16, 8), out, activation=act)


# -- opus.ops.scaled_gemm on AMD -----------------------------------------------------------------

CHIP_F8 = {"gfx942": ml_dtypes.float8_e4m3fnuz, "gfx950": ml_dtypes.float8_e4m3fn}
OTHER_F8 = {"gfx942": ml_dtypes.float8_e4m3fn, "gfx950": ml_dtypes.float8_e4m3fnuz}
ONE = np.ones(1, np.float32)


def _f8(arch, rows, cols, table=CHIP_F8):
    return np.zeros((rows, cols), table[arch])


def _f8_kmajor(arch, k, n, table=CHIP_F8):
    return np.zeros((n, k), table[arch]).T


# name -> (function of the chip giving (a, b, scale_a, scale_b, options), needles)
SCALED = {
    "the other fp8 encoding": (lambda c: (_f8(c, 8, 32, OTHER_F8), _f8_kmajor(c, 32, 8, OTHER_F8),
                                          ONE, ONE, {}),
                               ["inputs on gfx", "8-bit float mfmas read"]),
    "mixed fp8 types": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8, OTHER_F8), ONE, ONE, {}),
                        ["a and b must both be"]),
    "bf16 inputs": (lambda c: (_m(8, 32), _kmajor(32, 8), ONE, ONE, {}),
                    ["bf16 and bf16", "bf16/f16 inputs: opus.ops.gemm"]),
    "row-major b": (lambda c: (_f8(c, 8, 32), _f8(c, 32, 8), ONE, ONE, {}),
                    ["reads b k-major", "w.t()"]),
    "scale_a f16": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), np.ones(1, np.float16), ONE,
                               {}), ["scale_a must be f32", "f16"]),
    "scale_b length": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE,
                                  np.ones(5, np.float32), {}),
                       ["scale_b must hold one value or one per column of b (8)", "(5,)"]),
    "scale_a 2 columns": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8),
                                     np.ones((8, 2), np.float32), ONE, {}),
                          ["scale_a must hold one value or one per row of a (8)", "(8, 2)"]),
    "out_dtype i32": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE,
                                 {"out_dtype": opus.i32}),
                      ["out_dtype must be bf16, f16 or f32", "i32"]),
    "out of another type": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE,
                                       {"out": np.zeros((8, 8), np.float32)}),
                            ["out must be a row-major 8 x 8 bf16", "f32"]),
    "bias of bf16 for f32 out": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE,
                                            {"out_dtype": opus.f32, "bias": np.ones(8, BF16)}),
                                 ["bias must be 8 of f32", "bf16"]),
    "blocks on AMD": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE, {"blocks": 2}),
                      ["blocks= is an sm_90a option"]),
    "split_k on AMD": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE, {"split_k": 2}),
                       ["split_k= is an sm_90a option"]),
    "block_n 96": (lambda c: (_f8(c, 8, 32), _f8_kmajor(c, 32, 8), ONE, ONE, {"block_n": 96}),
                   ["block_n must be one of 64, 128, 192, 256", "96"]),
}


@pytest.mark.parametrize("case", list(SCALED))
def test_scaled_gemm_refused(amd, request, case):
    arch = request.node.callspec.params["amd"]
    make, needles = SCALED[case]
    a, b, sa, sb, options = make(arch)
    out = options.get("out", np.zeros((1, 1), BF16))
    with no_new_cache_files(amd), unchanged(out), raises(opus.ArgumentError, "opus.ops.gemm",
                                                         *needles):
        opus.ops.scaled_gemm(a, b, sa, sb, **options)


def test_fp8_to_gemm_names_scaled_gemm(amd, request):
    arch = request.node.callspec.params["amd"]
    with no_new_cache_files(amd), raises(opus.ArgumentError, "fp8 inputs: opus.ops.scaled_gemm"):
        opus.ops.gemm(_f8(arch, 8, 32), _f8_kmajor(arch, 32, 8))


def test_scaled_block_m_on_hopper_names_the_vendor(cache_root):
    f8 = ml_dtypes.float8_e4m3fn
    with opus.set_target("sm_90a", interpret=True), no_new_cache_files(cache_root), \
            raises(opus.ArgumentError, "block_m= is an AMD option"):
        opus.ops.scaled_gemm(np.zeros((8, 32), f8), np.zeros((8, 32), f8).T, ONE, ONE,
                             block_m=128)
