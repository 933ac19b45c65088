"""GPU runs of every mma.sync row the device has, with the kernels of test_mma_sync_numerics.py:

* integer rows bit for bit against the interpreter and the wrapped s32 reference (the hardware is
  exact; no .satfinite, so it wraps);
* float rows against the interpreter within the accumulation's rounding (PTX leaves order and
  intermediate rounding unspecified): |gpu - interpreter| <= K * eps * (sum |a * b| + |c|), eps
  2^-22 for f32 accumulators (one rounding per add and a few bits to spare), 2^-9 for f16;
* tf32: inputs that differ only in the low 13 mantissa bits give the same D bit for bit, and
  1 + 0x1FFF * 2^-23 reads as 1.0 (truncation), the property the interpreter emulates;
* fp8: each operand in its own format (0x48 = 4.0 e4m3, 8.0 e5m2), exact small sums.
Run with ``pytest -m gpu`` on the device machine (sm_80 .. sm_90a; fp8 rows need sm_89)."""
import os
import sys

import numpy as np
import pytest

import opus
from opus.targets import get_target

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_mma_sync_numerics as N  # noqa: E402

pytestmark = pytest.mark.gpu

ALL_ROWS = [r.name for r in get_target("sm_90a").matrix_atoms() if r.name.startswith("nv.mma.")]


def _device_arch():
    return opus.current_target().target.name


def _row(name):
    arch = _device_arch()
    row = get_target(arch).instructions[name]
    if not row.available_on(get_target(arch)):
        pytest.skip(f"{name} is not available on {arch}")
    return arch, row


def on_gpu(arch, row, A, B, C):
    from opus.runtime.device_array import DeviceArray
    dev = [DeviceArray.from_numpy(np.ascontiguousarray(x)) for x in (A, B, C, np.zeros_like(C))]
    with opus.set_target(arch, interpret=False):
        N.tile_kernel(row)[1, 32](*dev)
    return dev[3].to_numpy()


def random_operands(row, seed):
    rng = np.random.default_rng(seed)
    M, Nn, K = row.shape
    if row.c.is_int:
        return N.int_operands(row, seed)
    A = N.operand_values(row.a, rng, (M, K))
    B = N.operand_values(row.b, rng, (K, Nn))
    if row.a.name in N.FP8:
        top = 4 if row.c.name == "f16" else 8
        A, B = N.finite_fp8(row.a, rng, (M, K), top), N.finite_fp8(row.b, rng, (K, Nn), top)
    C = rng.standard_normal((M, Nn)).astype(row.c.np_dtype)
    return A, B, C


@pytest.mark.parametrize("name", ALL_ROWS)
def test_row_on_gpu_matches_the_interpreter(name):
    arch, row = _row(name)
    A, B, C = random_operands(row, 21)
    gpu = on_gpu(arch, row, A, B, C)
    interp = N.run(arch, row, A, B, C)
    if row.c.is_int:
        np.testing.assert_array_equal(gpu, interp)
        exact = C.astype(object) + A.astype(object).dot(B.astype(object))
        np.testing.assert_array_equal(gpu.astype(np.int64), N.wrap32(exact))
        return
    magnitude = (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))
                 + np.abs(C.astype(np.float64)))
    eps = 2.0 ** -22 if row.c.name == "f32" else 2.0 ** -9
    err = np.abs(gpu.astype(np.float64) - interp.astype(np.float64))
    assert (err <= row.k * eps * magnitude).all(), (err.max(), name)


@pytest.mark.parametrize("name", N.names("tf32"))
def test_tf32_low_bits_are_ignored_on_gpu(name):
    arch, row = _row(name)
    M, Nn, K = row.shape
    rng = np.random.default_rng(5)
    A = N.operand_values(row.a, rng, (M, K))
    B = N.operand_values(row.b, rng, (K, Nn))
    C = rng.standard_normal((M, Nn)).astype(np.float32)
    clean = on_gpu(arch, row, A, B, C)
    noisy = on_gpu(arch, row, N.with_low_bits(A, rng), N.with_low_bits(B, rng), C)
    np.testing.assert_array_equal(noisy, clean)


@pytest.mark.parametrize("name", N.names("tf32"))
@pytest.mark.parametrize("bits,value", [(0x3F801FFF, 1.0), (0xBF801FFF, -1.0)],
                         ids=["one", "minus-one"])
def test_tf32_truncates_on_gpu(name, bits, value):
    arch, row = _row(name)
    M, Nn, K = row.shape
    A = np.full((M, K), np.uint32(bits)).view(np.float32)
    D = on_gpu(arch, row, A, np.ones((K, Nn), np.float32), np.zeros((M, Nn), np.float32))
    assert (D == K * value).all(), np.unique(D)


@pytest.mark.parametrize("name", N.names("int"))
def test_integer_extremes_on_gpu(name):
    """The packing of signed and unsigned bytes (a sign-extended byte would corrupt its
    neighbours): A the type's minimum, B its maximum, by hand."""
    arch, row = _row(name)
    M, Nn, K = row.shape
    lo_a = {"i8": -128, "u8": 0}[row.a.name]
    hi_b = {"i8": 127, "u8": 255}[row.b.name]
    A = np.full((M, K), lo_a, row.a.np_dtype)
    B = np.full((K, Nn), hi_b, row.b.np_dtype)
    A[:, 1::4] = {"i8": -1, "u8": 255}[row.a.name]   # a byte whose sign bit is set, mid-register
    D = on_gpu(arch, row, A, B, np.full((M, Nn), 7, np.int32))
    want = 7 + (K - K // 4) * lo_a * hi_b + (K // 4) * A[0, 1].astype(np.int64) * hi_b
    assert (D == want).all(), (np.unique(D), want)


@pytest.mark.parametrize("name", N.names("fp8"))
def test_fp8_formats_on_gpu(name):
    arch, row = _row(name)
    M, Nn, K = row.shape
    value = {"fp8_e4m3": 4.0, "fp8_e5m2": 8.0}
    A = np.full((M, K), 0x48, np.uint8).view(row.a.np_dtype)
    B = np.full((K, Nn), 0x48, np.uint8).view(row.b.np_dtype)
    D = on_gpu(arch, row, A, B, np.zeros((M, Nn), row.c.np_dtype))
    assert (D == K * value[row.a.name] * value[row.b.name]).all(), np.unique(D)
