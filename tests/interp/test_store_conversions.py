"""What a store (and a vector lane) still converts implicitly: widening, int -> float,
bool -> any, Python numbers in range; and the shift amount clamped before it is narrowed.
References are worked out by hand or with numpy, never with opus."""
import numpy as np
import pytest

import opus
from opus import bool_, f16, f32, i8, i32, i64, u8


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


def _copy(src, dst):
    @opus.kernel
    def k(x: opus.Ptr[src], y: opus.Ptr[dst]):
        i = opus.thread_id_x()
        y[i] = x[i]
    return k


@pytest.mark.parametrize("src,dst,x,want", [
    (i32, i64, np.array([-5, 2**31 - 1], np.int32), [-5, 2**31 - 1]),     # sign-extends
    (u8, i32, np.array([255, 7], np.uint8), [255, 7]),                     # zero-extends
    (f16, f32, np.array([0.1, -65504], np.float16), [float(np.float16(0.1)), -65504.0]),
    (bool_, f32, np.array([True, False]), [1.0, 0.0]),
    (i32, f32, np.array([16777217, -3], np.int32), [16777216.0, -3.0]),   # int -> float rounds
], ids=lambda v: getattr(v, "name", ""))
def test_widening_stores(src, dst, x, want):
    y = np.zeros(2, dst.np_dtype)
    _copy(src, dst)[1, 2](x, y)
    assert y.tolist() == want


@opus.kernel
def _literals(y8: opus.Ptr[i8], yh: opus.Ptr[f16], yb: opus.Ptr[bool_], yi: opus.Ptr[i32]):
    y8[0] = -128
    y8[1] = 127.0          # an integral float literal is exact
    yh[0] = 0.1            # rounded to the nearest f16
    yh[1] = 65504.0        # the largest finite f16
    yh[2] = float("inf")   # non-finite literals are meant
    yb[0] = True
    yb[1] = 0
    yi[0] = opus.f16(2.5) > 2  # bool -> i32


def test_literals_in_range():
    y8, yh = np.zeros(2, np.int8), np.zeros(3, np.float16)
    yb, yi = np.ones(2, bool), np.zeros(1, np.int32)
    _literals[1, 1](y8, yh, yb, yi)
    assert y8.tolist() == [-128, 127]
    assert yh.tolist() == [float(np.float16(0.1)), 65504.0, float("inf")]
    assert yb.tolist() == [True, False] and yi.tolist() == [1]


@opus.kernel
def _vector_of_mixed_lanes(h: opus.Ptr[f16], x: opus.Ptr[f32], out: opus.Ptr[f32]):
    v = opus.make_vector(opus.load(h, 0, vec=2), x[0], x[1])  # f16 lanes widen to f32
    opus.store(out, v, 0)
    w = opus.insert(opus.load(x, 4, vec=4), 2, h[0])           # an f16 into an f32 lane
    opus.store(out, w, 4)


def test_make_vector_and_insert_widen_each_lane():
    h = np.array([0.5, -2.25], np.float16)
    x = np.arange(8, dtype=np.float32) + 10
    out = np.zeros(8, np.float32)
    _vector_of_mixed_lanes[1, 1](h, x, out)
    assert out.tolist() == [0.5, -2.25, 10, 11, 14, 15, 0.5, 17]


@opus.kernel
def _shift_by_wide(x: opus.Ptr[i32], a: opus.Ptr[i64], out: opus.Ptr[i32]):
    i = opus.thread_id_x()
    out[i] = x[i] << a[i]
    out[i + 4] = x[i] >> a[i]


def test_shift_amount_is_clamped_before_narrowing():
    # amounts >= 32 shift everything out (<<) or leave the sign (>>); 2**32 + 1 must not
    # become 1, nor -1 (read as unsigned: 2**64 - 1) become 31
    x = np.array([3, 3, -8, 5], np.int32)
    a = np.array([1, 2**32, 2**32 + 1, -1], np.int64)
    out = np.zeros(8, np.int32)
    _shift_by_wide[1, 4](x, a, out)
    assert out.tolist() == [6, 0, 0, 0, 1, 0, -1, 0]
