"""The interpreter's misaligned-access fault: a vector access at an address that is not a
multiple of its size faults on the GPU, so the interpreter raises interp.MemoryFault naming the
access (its width, load or store, the buffer and element), the required alignment, the first
thread that made it, and the kernel line. Addresses worked out by hand from element sizes."""
import os
import sys

import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f16, f32, i32

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import raises  # noqa: E402


@pytest.fixture(autouse=True, params=["sm_90a", "gfx942"])
def interpret(request):
    with opus.set_target(request.param, interpret=True):
        yield


@opus.kernel
def store_quads(x: opus.Ptr[f32], y: opus.Ptr[f32], start: i32):
    i = opus.thread_id_x()
    opus.store(y, opus.load(x, 4 * i, vec=4), start + 4 * i)  # ERR: quad-store


@opus.kernel
def one_lane_off(x: opus.Ptr[f32], out: opus.Ptr[f32], bad: i32):
    t = opus.thread_id_y() * opus.block_size_x() + opus.thread_id_x()
    lin = opus.block_id_x() * opus.block_size_x() * opus.block_size_y() + t
    off = 4 * lin + opus.select(lin == bad, 2, 0)
    v = opus.load(x, off, vec=4)  # ERR: one-lane
    out[lin] = v[0]


@opus.kernel
def shared_pairs(out: opus.Ptr[f32], start: i32):
    s = opus.alloc_smem(f32, 64)
    i = opus.thread_id_x()
    for k in range(4):
        s[i + 16 * k] = opus.f32(i + 16 * k)
    opus.sync_threads()
    v = s.load(start + 2 * i, vec=2)  # ERR: smem-pair
    out[i] = v[0] + v[1]


@opus.kernel
def bounded_halves(x: opus.Ptr[f16], out: opus.Ptr[f16], n: i32, start: i32):
    g = opus.make_gmem(x, n)
    i = opus.thread_id_x()
    opus.store(out, g.load(start + 8 * i, vec=8), 8 * i)  # ERR: bounded-f16


@opus.kernel
def shifted_quads(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, shift: i32):
    g = opus.make_gmem(x, n) + shift
    i = opus.thread_id_x()
    opus.store(out, g.load(4 * i, vec=4), 4 * i)  # ERR: shifted-view


def test_misaligned_vector_store_names_width_buffer_element_and_line():
    # y[2 + 4i]: 8 bytes past a 16-byte boundary; a 4 x f32 store needs 16
    x, y = np.arange(32, dtype=np.float32), np.full(40, -1, np.float32)
    with raises(interp.MemoryFault, "misaligned 4-element store of y[2]", "16-byte aligned",
                "thread (0, 0, 0)", at="quad-store"):
        store_quads[1, 8](x, y, 2)
    assert (y == -1).all()  # the faulting store wrote nothing
    store_quads[1, 8](x, y, 4)  # aligned: runs
    np.testing.assert_array_equal(y, np.r_[[-1] * 4, np.arange(32), [-1] * 4])


def test_the_fault_names_the_one_misaligned_thread():
    # block (4, 2), 2 blocks; linear thread 13 is block 1, thread 13 - 8 = 5 = (1, 1); it reads
    # x[4 * 13 + 2] = x[54]
    x, out = np.arange(80, dtype=np.float32), np.zeros(16, np.float32)
    with raises(interp.MemoryFault, "misaligned 4-element load of x[54]",
                "block (1, 0, 0) thread (1, 1, 0)", at="one-lane"):
        one_lane_off[2, (4, 2)](x, out, 13)
    one_lane_off[2, (4, 2)](x, out, -1)
    np.testing.assert_array_equal(out, np.arange(0, 64, 4))


def test_misaligned_shared_memory_access():
    # s[1 + 2i] is 4 bytes past an 8-byte boundary (shared arrays are at least 16-byte aligned)
    out = np.zeros(16, np.float32)
    with raises(interp.MemoryFault, "misaligned 2-element load", "[1]", "8-byte aligned",
                "thread (0, 0, 0)", at="smem-pair"):
        shared_pairs[1, 16](out, 1)
    shared_pairs[1, 16](out, 0)
    np.testing.assert_array_equal(out, np.arange(0, 32, 2) + np.arange(1, 33, 2))


def test_bounded_access_faults_when_whole_and_not_when_wholly_outside():
    """A bounded vector access that is wholly inside its bound is one vector access: misaligned,
    it faults. One wholly outside touches no memory (loads read 0): no fault."""
    x, out = np.arange(64, dtype=np.float16), np.full(32, -1, np.float16)
    # f16 x 8 = 16 bytes; x[4]: 8 bytes in
    with raises(interp.MemoryFault, "misaligned 8-element load of x[4]", "16-byte aligned",
                at="bounded-f16"):
        bounded_halves[1, 4](x, out, 64, 4)
    bounded_halves[1, 4](x, out, 64, 68)  # x[68 + 8i]: past n = 64 for every thread
    np.testing.assert_array_equal(out, np.zeros(32, np.float16))


def test_a_misaligned_array_is_refused_at_launch():
    buf = np.zeros(40, np.float32)
    x = buf[1:33]  # 4 bytes past numpy's (16-byte aligned) allocation
    assert buf.ctypes.data % 16 == 0
    with raises(opus.ArgumentError, "parameter 'x'", "not aligned to 16 bytes"):
        store_quads[1, 8](x, np.zeros(40, np.float32), 0)


def test_a_view_shifted_off_the_vector_size_faults():
    # g = x + 2 floats: g[4i] is x[2 + 4i], 8 bytes past a 16-byte boundary
    x, out = np.arange(40, dtype=np.float32), np.full(16, -1, np.float32)
    with raises(interp.MemoryFault, "misaligned 4-element load of x[2]", "16-byte aligned",
                at="shifted-view"):
        shifted_quads[1, 4](x, out, 40, 2)
    shifted_quads[1, 4](x, out, 40, 8)
    np.testing.assert_array_equal(out, np.arange(8, 24))
