"""A pointer chosen at run time between two buffers (a run-time `if` merging two pointer
parameters): each lane's loads and stores reach its own buffer, scalar and vector, for all
lanes and inside a branch (inactive lanes, pointing anywhere, touch nothing); an out-of-bounds
lane names its own buffer; a bound holds in each buffer (loads past it read 0, stores past it are
dropped); packed fp4 pairs keep their type. Against numpy on copies of the arrays."""
import os
import re
import sys

import ml_dtypes
import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f32, i32, Ptr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import line_of  # noqa: E402

N = 16


@opus.kernel(block=N)
def pick_and_copy(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], lim: i32):
    t = opus.thread_id_x()
    p = y
    if t % 3 == 0:
        p = x
    out[t] = opus.load(p, t)                        # scalar, every lane
    v = opus.load(p, (t // 4) * 4, vec=4)           # vector, every lane
    opus.store(out, v, N + 4 * t)
    if t < lim:                                     # part of the lanes: masked
        opus.store(p, v + 1.0, 4 * N + 4 * t, vec=4)
        out[5 * N + t] = opus.load(p, 2 * N + t)


def reference(x, y, lim):
    x, y, out = x.copy(), y.copy(), np.zeros(6 * N, np.float32)
    mine = [x if t % 3 == 0 else y for t in range(N)]
    for t in range(N):
        out[t] = mine[t][t]
        out[N + 4 * t:N + 4 * t + 4] = mine[t][t // 4 * 4:t // 4 * 4 + 4]
    for t in range(min(lim, N)):
        mine[t][4 * N + 4 * t:4 * N + 4 * t + 4] = mine[t][t // 4 * 4:t // 4 * 4 + 4] + 1.0
    for t in range(min(lim, N)):   # the loads follow every store in lockstep order
        out[5 * N + t] = mine[t][2 * N + t]
    return x, y, out


@pytest.mark.parametrize("lim", [0, 10, N])
def test_each_lane_reaches_its_own_buffer(lim):
    x = np.arange(8 * N, dtype=np.float32)
    y = -1000.0 - np.arange(8 * N, dtype=np.float32)
    out = np.zeros(6 * N, np.float32)
    wx, wy, wout = reference(x, y, lim)
    with opus.set_target("sm_90a", interpret=True):
        pick_and_copy[1, N](x, y, out, lim)
    np.testing.assert_array_equal(out, wout)
    np.testing.assert_array_equal(x, wx)
    np.testing.assert_array_equal(y, wy)


def test_only_one_buffer_chosen_by_the_active_lanes():
    """lim = 1: only lane 0 (x) stores; y is untouched, out's masked part holds lane 0's only."""
    x = np.arange(8 * N, dtype=np.float32)
    y = np.full(8 * N, 7.0, np.float32)
    out = np.zeros(6 * N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        pick_and_copy[1, N](x, y, out, 1)
    np.testing.assert_array_equal(y, 7.0)
    np.testing.assert_array_equal(x[4 * N:4 * N + 4], [1, 2, 3, 4])
    np.testing.assert_array_equal(out[5 * N:], [2 * N] + [0] * (N - 1))


def test_an_out_of_bounds_lane_names_its_own_buffer():
    """x is long enough for lane 0's vector store; y (short) is not for lane 1's store at
    4 * N + 4 = 68: the fault names y and lane 1."""
    x = np.zeros(8 * N, np.float32)
    y = np.zeros(4 * N + 4, np.float32)
    with opus.set_target("sm_90a", interpret=True), pytest.raises(interp.MemoryFault) as e:
        pick_and_copy[1, N](x, y, np.zeros(6 * N, np.float32), 2)
    assert re.search(r"out-of-bounds store of y\[68\] \(y has 68 elements\) by block \(0, 0, 0\) "
                     r"thread \(1, 0, 0\)", str(e.value)), str(e.value)


@opus.kernel(block=N)
def pick_then_compute(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], lim: i32):
    t = opus.thread_id_x()
    p = y
    if t % 3 == 0:
        p = x
    if t < lim:                                     # lanes lim.. load nothing
        out[t] = opus.load(p, t) * 2.0 + 1.0


def test_a_masked_load_through_two_buffers_feeds_arithmetic():
    """lim = 10: lanes 0..9 load from their own buffer and compute on the value (the
    interpreter computes on every lane, masked or not: the loaded value must be numbers on
    all of them); out[10:] stays untouched."""
    x = np.arange(N, dtype=np.float32)
    y = 100.0 + np.arange(N, dtype=np.float32)
    out = np.full(N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        pick_then_compute[1, N](x, y, out, 10)
    want = [2 * (x[t] if t % 3 == 0 else y[t]) + 1 for t in range(10)] + [-1.0] * (N - 10)
    np.testing.assert_array_equal(out, want)


def test_lanes_outside_the_branch_do_not_load_through_the_merged_pointer():
    """y has 10 elements: lanes 10, 11, 13, 14 point into y past its end but are outside the
    branch (lim = 10), so they load nothing and nothing faults."""
    x = np.arange(N, dtype=np.float32)
    y = 100.0 + np.arange(10, dtype=np.float32)
    out = np.full(N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        pick_then_compute[1, N](x, y, out, 10)
    want = [2 * (x[t] if t % 3 == 0 else y[t]) + 1 for t in range(10)] + [-1.0] * (N - 10)
    np.testing.assert_array_equal(out, want)


@opus.kernel(block=N)
def pick_and_load_past(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], k: i32):
    t = opus.thread_id_x()
    p = y
    if t % 3 == 0:
        p = x
    out[t] = opus.load(p, t + k)  # ERR: multi-load


def test_an_out_of_bounds_load_names_its_buffer_and_the_kernel_line():
    """A load through the merged pointer past y's end (lane 1 at 1 + 4 = 5 of 4 elements) is
    named as a fault of this kernel line, of y and of lane 1, as a one-buffer load is."""
    x = np.zeros(4 * N, np.float32)
    y = np.zeros(4, np.float32)
    with opus.set_target("sm_90a", interpret=True), pytest.raises(interp.MemoryFault) as e:
        pick_and_load_past[1, N](x, y, np.zeros(N, np.float32), 4)
    msg = str(e.value)
    assert msg.startswith(f"{__file__}:{line_of('multi-load', __file__)} `"), msg
    assert re.search(r"out-of-bounds load of y\[5\] \(y has 4 elements\) by block \(0, 0, 0\) "
                     r"thread \(1, 0, 0\)", msg), msg


@opus.kernel(block=N)
def pick_bounded(x: Ptr[f32], y: Ptr[f32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    p = y
    if t % 3 == 0:
        p = x
    out[t] = opus.load(p, t, bound=n)
    opus.store(p, opus.f32(t) + 0.5, t, bound=n)


def test_the_bound_holds_through_a_pointer_merged_from_two_buffers():
    """n = 10 (both buffers have 16 elements): lanes 0..9 read and then overwrite element t of
    their own buffer; lanes 10..15 are past the bound: they read 0 and store nothing."""
    x = np.arange(N, dtype=np.float32) + 100.0
    y = np.arange(N, dtype=np.float32) + 200.0
    out = np.full(N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        pick_bounded[1, N](x, y, out, 10)
    assert out.tolist() == [(100.0 if t % 3 == 0 else 200.0) + t for t in range(10)] + [0.0] * 6
    assert x.tolist() == [t + 0.5 if t % 3 == 0 and t < 10 else 100.0 + t for t in range(N)]
    assert y.tolist() == [t + 0.5 if t % 3 != 0 and t < 10 else 200.0 + t for t in range(N)]


@opus.kernel(block=N)
def pick_fp4_pairs(x: Ptr[opus.fp4], y: Ptr[opus.fp4], out: Ptr[f32]):
    t = opus.thread_id_x()
    p = y
    if t % 2 == 0:
        p = x
    opus.store(out, opus.cast(opus.load(p, 2 * t, vec=2), f32), 2 * t)


def test_fp4_pairs_through_a_pointer_merged_from_two_buffers():
    """Even lanes read x's pair 2t, 2t+1, odd lanes y's: fp4 codes (two a byte, low nibble
    first) decoded by ml_dtypes; x holds codes 0..15 twice, y the same reversed."""
    cx = np.array(list(range(16)) * 2, np.uint8)
    cy = cx[::-1].copy()
    pack = lambda c: (c[0::2] | (c[1::2] << 4)).astype(np.uint8)
    out = np.zeros(2 * N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        pick_fp4_pairs[1, N](pack(cx), pack(cy), out)
    mine = np.concatenate([(cx if t % 2 == 0 else cy)[2 * t:2 * t + 2] for t in range(N)])
    decoded = mine.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert out.tolist() == decoded.tolist()
    # by hand: x[0], x[1] are codes 0, 1; lane 1 reads y[2], y[3] = codes 13, 12 (e2m1: sign,
    # exponent 10, mantissa 1 and 0: -1.5 * 2 and -1.0 * 2)
    assert decoded[:4].tolist() == [0.0, 0.5, -3.0, -2.0]
