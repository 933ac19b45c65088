"""Bad split_k= to opus.ops.gemm / scaled_gemm and bad block_m= to opus.ops.gemm
(ops/gemm_hopper.py, split-K and 64-row tiles on sm_90a): each an ArgumentError naming the
option and what is wrong, with the output left unwritten and nothing compiled into the
cache."""
import numpy as np
import pytest

import opus
import opus.ops
from expect import raises, unchanged, no_new_cache_files

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
F8 = ml_dtypes.float8_e4m3fn


@pytest.fixture
def sm90(cache_root):
    with opus.set_target("sm_90a", interpret=True):
        yield cache_root


def _bf16(k, split_k):
    return (np.ones((16, k), BF16), np.ones((k, 16), BF16)), {"split_k": split_k}


def _bf16_m(block_m, **options):
    return (np.ones((16, 64), BF16), np.ones((64, 16), BF16)), {"block_m": block_m, **options}


def _fp8(k, split_k):
    one = np.ones(1, np.float32)
    return (np.ones((16, k), F8), np.ones((16, k), F8).T, one, one), {"split_k": split_k}


# (the op, its arguments, needles)
CASES = {
    "zero": (opus.ops.gemm, _bf16(64, 0), ["split_k must be at least 1", "got 0"]),
    "negative": (opus.ops.gemm, _bf16(64, -3), ["split_k must be at least 1", "-3"]),
    "float": (opus.ops.gemm, _bf16(64, 2.0), ["split_k must be an int", "2.0"]),
    "string": (opus.ops.gemm, _bf16(64, "2"), ["split_k must be an int", "'2'"]),
    "bool": (opus.ops.gemm, _bf16(64, True), ["split_k must be an int", "True"]),
    "list": (opus.ops.gemm, _bf16(64, [2]), ["split_k must be an int", "[2]"]),
    "numpy float": (opus.ops.gemm, _bf16(64, np.float32(2)), ["split_k must be an int"]),
    "more than K's stages": (opus.ops.gemm, _bf16(128, 3),
                             ["split_k=3 is too large", "K = 128 is 2 stages of 64"]),
    "more than a ragged K's stages": (opus.ops.gemm, _bf16(136, 4),
                                      ["split_k=4 is too large", "K = 136 is 3 stages of 64"]),
    "one stage, two splits": (opus.ops.gemm, _bf16(8, 2), ["split_k=2 is too large",
                                                           "K = 8 is 1 stage of 64"]),
    "zero with K = 0": (opus.ops.gemm, _bf16(0, 0), ["split_k must be at least 1"]),
    "fp8 zero": (opus.ops.scaled_gemm, _fp8(128, 0), ["split_k must be at least 1"]),
    "fp8 float": (opus.ops.scaled_gemm, _fp8(128, 1.5), ["split_k must be an int", "1.5"]),
    "fp8 more than K's stages": (opus.ops.scaled_gemm, _fp8(256, 3),
                                 ["split_k=3 is too large", "K = 256 is 2 stages of 128"]),
    "block_m 32": (opus.ops.gemm, _bf16_m(32), ["block_m must be 64 or 128", "got 32"]),
    "block_m 256 (AMD's)": (opus.ops.gemm, _bf16_m(256), ["block_m must be 64 or 128",
                                                         "sm_90a", "got 256"]),
    "block_m float": (opus.ops.gemm, _bf16_m(64.0), ["block_m must be 64 or 128", "64.0"]),
    "block_m string": (opus.ops.gemm, _bf16_m("64"), ["block_m must be 64 or 128", "'64'"]),
    "block_m bool": (opus.ops.gemm, _bf16_m(True), ["block_m must be 64 or 128", "True"]),
    "block_m list": (opus.ops.gemm, _bf16_m([64]), ["block_m must be 64 or 128", "[64]"]),
    "block_m 64, 64 wide": (opus.ops.gemm, _bf16_m(64, block_n=64),
                            ["block_n must be 128 or 256 with block_m=64", "got 64"]),
    "block_m 64, more stages than fit": (opus.ops.gemm, _bf16_m(64, block_n=256, stages=5),
                                         ["stages=5", "4 stages of 40960 bytes fit",
                                          "256-wide"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_anything_runs(sm90, case):
    op, (args, options), needles = CASES[case]
    m, n = args[0].shape[0], args[1].shape[1]
    out = np.full((m, n), 7, BF16)
    with no_new_cache_files(sm90), unchanged(out), raises(opus.ArgumentError, "opus.ops.gemm",
                                                          *needles):
        op(*args, out=out, **options)


@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_split_k_on_amd_names_the_vendor(cache_root, target):
    a, b = np.ones((16, 64), BF16), np.ones((64, 16), BF16)
    with opus.set_target(target, interpret=True), no_new_cache_files(cache_root), \
            raises(opus.ArgumentError, "split_k= is an sm_90a option"):
        opus.ops.gemm(a, b, split_k=2)


def test_a_workspace_past_32_bit_offsets(sm90):
    """2048 tiles of 128 x 256 in 32 splits: 2^31 partial values, past the kernel's i32
    offsets (numpy's zeros are not touched: no memory is used)."""
    a, b = np.zeros((8192, 2048), BF16), np.zeros((2048, 8192), BF16)
    out = np.zeros((8192, 8192), BF16)
    with no_new_cache_files(sm90), raises(opus.ArgumentError, "split_k=32",
                                          "need 32-bit offsets", "split less"):
        opus.ops.gemm(a, b, out=out, split_k=32)
