"""Checking mode's shared-memory messages word for word: which element (or byte of a sub-byte
array, counted from the array's own start), which threads, which lines (the access and the
earlier one it races with), for each kind of race and for reads of memory nothing wrote; and a
correct kernel passing. Expected texts are written by hand from the kernels below."""
import re

import os
import sys

import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f32, i32, u8, Ptr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import line_of  # noqa: E402

B0 = "block (0, 0, 0) thread"


def _at(tag):
    """'<this file>:<line>' of the line marked ``# ERR: tag``."""
    return f"{__file__}:{line_of(tag, __file__)}"


def _raises(exc, kernel, block, *args, text):
    with opus.set_target("sm_90a", interpret=True), interp.checking(), pytest.raises(exc) as e:
        kernel[1, block](*args)
    msg = str(e.value)
    assert re.fullmatch(text, msg), f"\n{msg}\n!~\n{text}"


def _sm(name_index):
    return rf"smem\d+{name_index}"


# each kernel pads shared memory with an 8-element f32 array first, so the racing array does
# not start at byte 0 (the message counts from the array's start)

@opus.kernel(block=8)
def write_write(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t // 4 + 2] = 1.0  # ERR: ww
    out[t] = pad[t]


def test_two_threads_writing_one_element_at_once():
    _raises(interp.SharedRaceError, write_write, 8, np.zeros(8, np.float32), text=(
        re.escape(_at("ww")) + r" `.*`: shared-memory race on " + _sm(r"\[2\]") + ": "
        + re.escape(f"{B0} (0, 0, 0) and {B0} (1, 0, 0) write it at once")))


@opus.kernel(block=8)
def write_write_bytes(out: Ptr[u8]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(u8, 16)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[5 + t // 4 * 0] = u8(1)  # ERR: wwb
    out[t] = u8(0)


def test_racing_u8_elements_are_named_by_index():
    _raises(interp.SharedRaceError, write_write_bytes, 8, np.zeros(8, np.uint8), text=(
        re.escape(_at("wwb")) + r" `.*`: shared-memory race on " + _sm(r"\[5\]") + ": "
        + re.escape(f"{B0} (0, 0, 0) and {B0} (1, 0, 0) write it at once")))


@opus.kernel(block=4)
def write_after_one_read(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t] = 1.0
    opus.sync_threads()
    x = s[(t + 1) % 4]  # ERR: read1
    s[t] = x + pad[t]  # ERR: war1
    out[t] = x


def test_a_write_after_another_threads_read():
    """Thread 0 writes s[0], which thread 3 read since the barrier."""
    _raises(interp.SharedRaceError, write_after_one_read, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("war1")) + r" `.*`: shared-memory race on " + _sm(r"\[0\]") + ": "
        + re.escape(f"{B0} (0, 0, 0) writes it after {B0} (3, 0, 0) read it at {_at('read1')}")
        + r" `.*` with no barrier in between"))


@opus.kernel(block=4)
def write_after_many_reads(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t] = 1.0
    opus.sync_threads()
    x = s[1]  # ERR: readall
    s[t] = x  # ERR: warall
    out[t] = x


def test_a_write_after_several_threads_read():
    """Thread 1 writes s[1], which all four threads read since the barrier."""
    _raises(interp.SharedRaceError, write_after_many_reads, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("warall")) + r" `.*`: shared-memory race on " + _sm(r"\[1\]") + ": "
        + re.escape(f"{B0} (1, 0, 0) writes it after several threads read it at "
                    f"{_at('readall')}") + r" `.*` with no barrier in between"))


@opus.kernel(block=4)
def read_after_write(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t] = 1.0  # ERR: w0
    out[t] = s[(t + 3) % 4]  # ERR: raw


def test_a_read_after_another_threads_write():
    """Thread 0 reads s[3], which thread 3 wrote; thread 1 reads thread 0's s[0] (thread 0 as
    the writer is a thread id 0, not 'no writer')."""
    _raises(interp.SharedRaceError, read_after_write, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("raw")) + r" `.*`: shared-memory race on " + _sm(r"\[3\]") + ": "
        + re.escape(f"{B0} (0, 0, 0) reads it after {B0} (3, 0, 0) wrote it at {_at('w0')}")
        + r" `.*` with no barrier in between"))


@opus.kernel(block=4)
def write_after_write(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t] = 1.0  # ERR: w1
    s[(t + 1) % 4] = 2.0  # ERR: waw
    out[t] = pad[t]


def test_a_write_after_another_threads_write():
    _raises(interp.SharedRaceError, write_after_write, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("waw")) + r" `.*`: shared-memory race on " + _sm(r"\[1\]") + ": "
        + re.escape(f"{B0} (0, 0, 0) writes it after {B0} (1, 0, 0) wrote it at {_at('w1')}")
        + r" `.*` with no barrier in between"))


@opus.kernel(block=4)
def uninitialized_int4(out: Ptr[i32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(opus.int4, 16)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s.store(opus.make_vector(opus.int4(1), opus.int4(2)), 2 * t)
    opus.sync_threads()
    v = s.load(2 * t + 8 * (t % 2), vec=2)  # ERR: un4
    out[t] = i32(v[0])


def test_an_uninitialized_sub_byte_read_names_the_byte():
    """Threads 0..3 wrote int4 elements 0..7 (bytes 0..3); threads 0 and 2 read elements 0 and
    4, thread 1 reads elements 10 and 11: byte 5 (counted from the int4 array's start, not from
    the padding's), the first lane that reads unwritten memory."""
    _raises(interp.UninitializedReadError, uninitialized_int4, 4, np.zeros(4, np.int32), text=(
        re.escape(_at("un4")) + r" `.*`: " + re.escape(f"{B0} (1, 0, 0) reads shared memory ")
        + _sm(" byte 5") + re.escape(", which nothing wrote (it holds garbage on the GPU)")))


@opus.kernel(block=8)
def correct_exchange(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 8)
    t = opus.thread_id_x()
    s[t] = opus.f32(t)
    opus.sync_threads()
    x = s[7 - t]
    y = s[0]
    opus.sync_threads()
    s[t] = x + y
    opus.sync_threads()
    out[t] = s[(t + 1) % 8]


def test_a_correct_kernel_passes_in_checking_mode():
    """Writes, a barrier, reads by one and by several threads, a barrier, writes again: no
    error, and the values of the exchange."""
    out = np.zeros(8, np.float32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        correct_exchange[1, 8](out)
    np.testing.assert_array_equal(out, [7 - (t + 1) % 8 for t in range(8)])


@opus.kernel
def uniform_float(x: Ptr[f32], o: Ptr[f32]):
    t = opus.thread_id_x()
    o[t] = opus.uniform(x[t])  # ERR: uni


def test_uniform_float_nan_against_a_number_differs():
    """opus.uniform's check on floats: NaN on every lane of a warp is one value (NaN != NaN
    notwithstanding); NaN on the first lane and 1.0 on lane 3 is not."""
    o = np.zeros(32, np.float32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        uniform_float[1, 32](np.full(32, np.nan, np.float32), o)
        assert np.isnan(o).all()
        x = np.full(32, np.nan, np.float32)
        x[3] = 1.0
        with pytest.raises(interp.InterpError) as e:
            uniform_float[1, 32](x, o)
    assert str(e.value).startswith(_at("uni")) and (
        f"{B0} (3, 0, 0) has 1.0, its warp's first active lane nan") in str(e.value), str(e.value)


@opus.kernel(block=8)
def write_write_late(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 8)
    t = opus.thread_id_x()
    s[opus.min(t, 6)] = 1.0  # ERR: wwl
    out[t] = 0.0


def test_the_first_element_written_twice_is_named():
    """Threads 0..5 write s[0..5]; threads 6 and 7 both write s[6]."""
    _raises(interp.SharedRaceError, write_write_late, 8, np.zeros(8, np.float32), text=(
        re.escape(_at("wwl")) + r" `.*`: shared-memory race on " + _sm(r"\[6\]") + ": "
        + re.escape(f"{B0} (6, 0, 0) and {B0} (7, 0, 0) write it at once")))


@opus.kernel(block=4)
def read_thread_0s_write(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    if t == 0:
        s[0] = 1.0  # ERR: w_t0
    out[t] = s[0]  # ERR: r_t0


def test_a_read_after_thread_0s_write():
    """Thread 0 (thread id 0, not 'no writer') wrote s[0]; thread 0's own read is fine, thread
    1's is the race named."""
    _raises(interp.SharedRaceError, read_thread_0s_write, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("r_t0")) + r" `.*`: shared-memory race on " + _sm(r"\[0\]") + ": "
        + re.escape(f"{B0} (1, 0, 0) reads it after {B0} (0, 0, 0) wrote it at {_at('w_t0')}")
        + r" `.*` with no barrier in between"))


@opus.kernel(block=4)
def readers_in_two_ops(out: Ptr[f32]):
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    s[t] = 1.0
    opus.sync_threads()
    x = 0.0
    if t == 0:
        x = s[3]
    if t == 2:
        x = s[3]  # ERR: r2
    if t == 2:
        s[3] = 5.0  # ERR: w2
    out[t] = x


def test_readers_in_two_ops_are_several_readers():
    """Thread 0 then thread 2 read s[3] (two loads); thread 2 then writes it: thread 0's read
    races with it, so the reader is 'several threads', at the later read's line."""
    _raises(interp.SharedRaceError, readers_in_two_ops, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("w2")) + r" `.*`: shared-memory race on " + _sm(r"\[3\]") + ": "
        + re.escape(f"{B0} (2, 0, 0) writes it after several threads read it at {_at('r2')}")
        + r" `.*` with no barrier in between"))


@opus.kernel
def copy_per_block(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    base = opus.block_id_x() * 32
    tile = opus.alloc_smem(f32, 32)
    opus.copy_async(tile, t, x, base + t)
    opus.commit_async()
    opus.wait_async(0)
    opus.sync_threads()
    out[base + t] = tile[31 - t]


def test_each_block_starts_with_no_copy_pending():
    """An async copy per block, waited for, then read by another thread: every block starts
    with no byte pending (the previous block's copies are complete), so checking mode passes
    and each block's 32 values come out reversed."""
    x = np.arange(96, dtype=np.float32)
    out = np.zeros(96, np.float32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        copy_per_block[3, 32](x, out)
    np.testing.assert_array_equal(out, x.reshape(3, 32)[:, ::-1].reshape(-1))


@opus.kernel(block=4)
def write_after_thread_0s_read(out: Ptr[f32]):
    pad = opus.alloc_smem(f32, 8)
    s = opus.alloc_smem(f32, 4)
    t = opus.thread_id_x()
    pad[t] = 0.0
    s[t] = 1.0
    opus.sync_threads()
    x = 0.0
    if t == 0:
        x = s[2]  # ERR: read0
    if t == 1:
        s[2] = 3.0  # ERR: war0
    out[t] = x + pad[t]


def test_a_write_after_thread_0s_read():
    """Thread 1 writes s[2], which only thread 0 (the lowest thread id) read since the barrier."""
    _raises(interp.SharedRaceError, write_after_thread_0s_read, 4, np.zeros(4, np.float32), text=(
        re.escape(_at("war0")) + r" `.*`: shared-memory race on " + _sm(r"\[2\]") + ": "
        + re.escape(f"{B0} (1, 0, 0) writes it after {B0} (0, 0, 0) read it at {_at('read0')}")
        + r" `.*` with no barrier in between"))
