"""targets/matrix.py on small rows written here by hand (one lane, a few registers), where the
right answer is worked out on paper: the emulation's whole-warp rule and chained steps, the
self-checks a malformed row trips, and the lane-map helpers (OperandLayout, round_mantissa)."""
import numpy as np
import pytest

from opus import dtypes as dt
from opus.targets.matrix import EXACT, LaneLayout, MatrixAtom, Numerics, OperandLayout


def _row(coords_a, coords_b, coords_c, shape=(1, 1, 2), warp=1, numerics=EXACT, c=dt.f32,
         a=dt.f32, name="demo"):
    return MatrixAtom(name, shape, a, a, c, warp, LaneLayout(coords_a, coords_b, coords_c),
                      lambda target: True, {"cuda": lambda *args: []}, "demo.isa", numerics)


def test_emulation_needs_whole_warps():
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0))
    pair = _row(lambda l, i: (0, l), lambda l, i: (l, i), lambda l, i: (0, l), shape=(1, 2, 2),
                warp=2)
    with pytest.raises(ValueError) as e:   # three threads of a two-lane row
        pair.emulate([np.ones((3, 1)), np.ones((3, 2)), np.ones((3, 1))], {}, 2)
    assert str(e.value) == "demo needs whole warps: 3 threads is not a multiple of 2"
    # one lane holding A = [1, 2], B = [3, 4]^T, C = 5: D = 1*3 + 2*4 + 5
    assert row.emulate([np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), np.array([[5.0]])],
                       {}, 1)[0].tolist() == [[16.0]]


def test_chained_steps_round_to_c_after_each_step():
    """Two chained steps, each taking one K, with f16 C: step 0 gives 2048 + 1 = 2049, which
    f16 (11 significant bits) rounds to 2048 (ties to even); step 1 adds 1 again: 2048. One
    rounding at the end would give 2050."""
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), c=dt.f16,
               a=dt.f16, numerics=Numerics(k_steps=2))
    assert [k.tolist() for k in row.k_slices()] == [[0], [1]]
    d = row.emulate([np.array([[1.0, 1.0]], np.float16), np.array([[1.0, 1.0]], np.float16),
                     np.array([[2048.0]], np.float16)], {}, 1)[0]
    assert d.dtype == np.float16 and d.tolist() == [[2048.0]]
    once = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), c=dt.f16,
                a=dt.f16)
    assert once.emulate([np.array([[1.0, 1.0]], np.float16), np.array([[1.0, 1.0]], np.float16),
                         np.array([[2048.0]], np.float16)], {}, 1)[0].tolist() == [[2050.0]]


def test_a_chained_step_taking_different_k_of_a_and_b_is_refused():
    row = _row(lambda l, i: (0, i), lambda l, i: (1 - i, 0), lambda l, i: (0, 0),
               numerics=Numerics(k_steps=2))
    with pytest.raises(ValueError) as e:
        row.k_slices()
    assert str(e.value) == "demo: step 0 takes K [0] of A but [1] of B"


def test_an_integer_accumulator_wraps_around_and_stays_i32():
    """i8 x i8 -> i32 (no saturation): 127 * 127 * 2 + (2^31 - 1) = 2^31 + 32257 wraps to
    -2^31 + 32257 = -2147451391."""
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), a=dt.i8, c=dt.i32)
    d = row.emulate([np.array([[127, 127]], np.int8), np.array([[127, 127]], np.int8),
                     np.array([[2 ** 31 - 1]], np.int32)], {}, 1)[0]
    assert d.dtype == np.int32 and d.tolist() == [[-2147451391]]


def test_round_mantissa_passes_infinities_and_every_nan_through():
    """xf32/tf32 input rounding (10 mantissa bits, ties to even) by hand; a NaN whose payload
    sits only in the dropped bits (f32 0x7F800001) must stay a NaN, not round to infinity."""
    from opus.targets.matrix import round_mantissa
    rnd = round_mantissa(10)
    bits = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7F800000, 0xFF800000, 0x7F7FFFFF],
                    np.uint32).view(np.float32)
    out = rnd(bits)
    assert np.isnan(out[:3]).all()
    assert out[3] == np.inf and out[4] == -np.inf
    assert out[5] == np.inf   # the largest f32 rounds up past the largest 10-bit mantissa
    assert rnd(np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -10 + 2.0 ** -12)],
                        np.float32)).tolist() == [1.0, 1 + 2.0 ** -9, -(1 + 2.0 ** -10)]
