"""What the interpreter's memory faults and soffset checks say, word for word: which element,
which thread (the lane of a vector access, not its element), whether the GPU would check the
access, and (AMD) which lane's soffset differs from its warp's first active lane. Expected
messages are written by hand from the launch (found unchecked by mutation testing,
docs/testing.md)."""
import os
import sys

import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f32, i32

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_TESTS, "bad_input"))
from expect import line_of  # noqa: E402

HERE = os.path.basename(__file__)
UNCHECKED = (" — an access without a bound is unchecked on the GPU and faults or corrupts memory "
             "there")


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        yield


@opus.kernel
def pairs(x: opus.Ptr[f32], out: opus.Ptr[f32], start: i32):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    v = opus.load(x, start + 2 * i, vec=2)
    out[i] = v[0] + v[1]


@opus.kernel
def bounded_pairs(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
    i = opus.thread_id_x()
    v = opus.make_gmem(x, n).load(2 * i, vec=2)
    out[i] = v[0] + v[1]


@opus.kernel
def same_element(x: opus.Ptr[f32], out: opus.Ptr[f32], k: i32):
    out[opus.thread_id_x()] = x[k]


def fault_message(kernel, grid, block, *args) -> str:
    with pytest.raises(interp.MemoryFault) as e:
        kernel[grid, block](*args)
    return str(e.value)


def test_vector_fault_names_the_lane_not_the_element():
    # thread i reads x[2 + 2i], x[3 + 2i]: thread 7 is the first to reach x[16]
    msg = fault_message(pairs, 1, 8, np.zeros(16, np.float32), np.zeros(8, np.float32), 2)
    assert msg.endswith("out-of-bounds load of x[16] (x has 16 elements) by block (0, 0, 0) "
                        "thread (7, 0, 0)" + UNCHECKED), msg


def test_fault_of_the_second_of_two_lanes():
    # two threads: thread 0 reads x[2], x[3]; thread 1 reads x[4] of four
    msg = fault_message(pairs, 1, 2, np.zeros(4, np.float32), np.zeros(2, np.float32), 2)
    assert msg.endswith("x[4] (x has 4 elements) by block (0, 0, 0) thread (1, 0, 0)" + UNCHECKED)


def test_fault_in_a_later_block():
    # blocks of 4: block 1's thread 1 (i = 5) is the first to read x[12] of twelve
    msg = fault_message(pairs, 2, 4, np.zeros(12, np.float32), np.zeros(8, np.float32), 2)
    assert msg.endswith("x[12] (x has 12 elements) by block (1, 0, 0) thread (1, 0, 0)" + UNCHECKED)


def test_every_thread_reading_one_bad_element_names_thread_0():
    msg = fault_message(same_element, 1, 4, np.zeros(8, np.float32), np.zeros(4, np.float32), 9)
    assert msg.endswith("out-of-bounds load of x[9] (x has 8 elements) by block (0, 0, 0) "
                        "thread (0, 0, 0)" + UNCHECKED), msg


def test_bounded_access_past_the_array_says_nothing_about_unchecked_accesses():
    # the view claims 12 elements of an 8-element array: thread 2 reads x[4], x[5]; thread 4 x[8]
    msg = fault_message(bounded_pairs, 1, 6, np.zeros(8, np.float32), np.zeros(6, np.float32), 12)
    assert msg.endswith("out-of-bounds load of x[8] (x has 8 elements) by block (0, 0, 0) "
                        "thread (4, 0, 0)"), msg


# -- AMD soffset: one value per warp (gfx942: 64 lanes) ------------------------------------------

@opus.kernel
def soffset_first_lane_differs(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    t = opus.thread_id_x()
    y[t] = opus.make_gmem(x, 128).load(0, soffset=opus.min(t, 1) * 5)  # ERR: soffset-lane


@opus.kernel
def soffset_per_warp(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    t = opus.thread_id_x()
    b = opus.block_id_x()
    s = b * 8 + t // 64 * 4  # uniform in each warp, different in every warp of the grid
    y[b * opus.block_size_x() + t] = opus.make_gmem(x, 128).load(0, soffset=s)


@opus.kernel
def soffset_under_a_branch(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    t = opus.thread_id_x()
    if t < 32:  # lanes 32..63 are inactive: their soffset 4 does not count
        y[t] = opus.make_gmem(x, 128).load(0, soffset=t // 32 * 4)


def test_soffset_error_names_the_first_differing_lane_and_the_first_lane_value():
    x = np.arange(128, dtype=np.float32)
    with opus.set_target("gfx942"), pytest.raises(interp.InterpError) as e:
        soffset_first_lane_differs[1, 64](x, np.zeros(64, np.float32))
    msg = str(e.value)
    assert f"{HERE}:{line_of('soffset-lane', __file__)}" in msg, msg
    assert msg.endswith("soffset must be the same on every active lane of a warp (AMD reads it "
                        "from the first one); block (0, 0, 0) thread (1, 0, 0) has 5, its warp's "
                        "first active lane 0"), msg


def test_soffset_uniform_per_warp_with_a_partial_warp_in_each_block():
    # blocks of 96 threads on 64-lane warps: warps t 0..63 and 64..95 of each block
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(192, np.float32)
    with opus.set_target("gfx942"):
        soffset_per_warp[2, 96](x, y)
    t = np.arange(96)
    want = np.concatenate([b * 8 + t // 64 * 4 for b in (0, 1)]).astype(np.float32)
    np.testing.assert_array_equal(y, want)


def test_soffset_of_inactive_lanes_does_not_count():
    x = np.arange(128, dtype=np.float32)
    y = np.full(64, -1, np.float32)
    with opus.set_target("gfx942"):
        soffset_under_a_branch[1, 64](x, y)
    np.testing.assert_array_equal(y, [0.0] * 32 + [-1.0] * 32)
