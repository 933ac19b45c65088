"""The interpreter's loads and stores at their edges, against hand-written values and messages:
bounded and masked loads from zero-length, two- and one-element arrays (the lanes left out read
nothing, the others their element; the zeros past a bound keep the array's type and the vector's
shape), a masked load of one element for all lanes past the end (named by the first active
lane), sub-byte elements past a bound reading 0, a bounded store whose bound exceeds the array
(with every lane inside the bound and with some dropped by it: the fault has no "unchecked"
note), a store to a read-only numpy array, word for word with the kernel's file:line; scalar
loads of an array placed off its alignment, a pair store by part of the lanes (only those lanes'
alignment is checked), a misaligned pair cut by a bound (read element by element), u64 bounds
past int64 (unsigned however large) and stores counted as a spinning loop's progress."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f32, i32, Ptr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import line_of  # noqa: E402

N = 8
WHO = "block (0, 0, 0) thread ({}, 0, 0)"
UNCHECKED = (" — an access without a bound is unchecked on the GPU and faults or corrupts memory "
             "there")


def _line(tag):
    """'<this file>:<line>' of the line marked ``# ERR: tag``."""
    return f"{__file__}:{line_of(tag, __file__)}"


def _error(exc, kernel, *args):
    with opus.set_target("sm_90a", interpret=True), pytest.raises(exc) as e:
        kernel[1, N](*args)
    return str(e.value)


# -- masked loads from tiny arrays -----------------------------------------------------------------

@opus.kernel
def pairs_bounded(x: Ptr[i32], out: Ptr[i32], n: i32):
    t = opus.thread_id_x()
    v = opus.load(x, 2 * t, vec=2, bound=n)
    out[t] = (v[0] ^ v[1]) + 5   # an integer operator: the pairs past the bound are i32 too


def test_a_bounded_vector_load_from_a_zero_length_array():
    """n = 0: every lane's pair is past the bound of the empty x and reads (0, 0): 0 ^ 0 + 5."""
    out = np.zeros(N, np.int32)
    with opus.set_target("sm_90a", interpret=True):
        pairs_bounded[1, N](np.zeros(0, np.int32), out, 0)
    assert out.tolist() == [5] * N


def test_a_bounded_vector_load_from_two_elements():
    """n = 2: lane 0 loads x[0:2] = (13, 7): 13 ^ 7 + 5 = 10 + 5; the others read (0, 0)."""
    out = np.zeros(N, np.int32)
    with opus.set_target("sm_90a", interpret=True):
        pairs_bounded[1, N](np.array([13, 7], np.int32), out, 2)
    assert out.tolist() == [15] + [5] * (N - 1)


@opus.kernel
def scalar_below(x: Ptr[f32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    r = f32(-1.0)
    if t < n:
        r = x[t] * 2.0
    out[t] = r


@pytest.mark.parametrize("n", [0, 1])
def test_a_masked_load_from_a_one_element_array(n):
    """x = [2.5]: with n = 1 lane 0 reads it (5.0), the lanes left out read nothing; n = 0:
    nobody reads it."""
    out = np.zeros(N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        scalar_below[1, N](np.array([2.5], np.float32), out, n)
    assert out.tolist() == [5.0] * n + [-1.0] * (N - n)


@opus.kernel
def one_element_for_the_upper_lanes(x: Ptr[f32], out: Ptr[f32], k: i32):
    t = opus.thread_id_x()
    if t >= 3:
        out[t] = x[k]  # ERR: uniform-past


def test_a_uniform_element_past_the_end_names_the_first_active_lane():
    """Every lane reads the same x[8] of 8 elements, inside a branch lanes 0..2 skip: the fault
    names lane 3, the first lane that reads it."""
    msg = _error(interp.MemoryFault, one_element_for_the_upper_lanes, np.zeros(N, np.float32),
                 np.zeros(N, np.float32), N)
    want = f": out-of-bounds load of x[8] (x has 8 elements) by {WHO.format(3)}{UNCHECKED}"
    assert msg.startswith(f"{_line('uniform-past')} `") and msg.endswith(want), msg


# -- sub-byte elements past a bound ----------------------------------------------------------------

@opus.kernel
def fp4_pairs_bounded(x: Ptr[opus.fp4], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    v = opus.make_gmem(x, n).load(2 * t, vec=2)
    opus.store(out, opus.cast(v, f32), 2 * t)


def test_fp4_elements_past_the_bound_read_zero():
    """x: 16 fp4 codes 1..15, 9 (nonzero: 0 is what an element past the bound reads), packed
    two a byte, low nibble first; bound n = 5: elements 0..4 decode (ml_dtypes), 5..15 read 0."""
    codes = np.array(list(range(1, 16)) + [9], np.uint8)
    x = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
    out = np.full(2 * N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        fp4_pairs_bounded[1, N](x, out, 5)
    decoded = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    assert out.tolist() == decoded[:5].tolist() + [0.0] * 11
    assert decoded[:5].tolist() == [0.5, 1.0, 1.5, 2.0, 3.0]   # e2m1 codes 1..5 by hand


# -- store faults ----------------------------------------------------------------------------------

@opus.kernel
def bounded_store(out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    opus.store(out, opus.f32(t), t, bound=n)  # ERR: bounded-store


@pytest.mark.parametrize("n", [N, N - 1], ids=["every-lane-inside", "lane-7-dropped"])
def test_a_bounded_store_past_the_array_faults_without_the_unchecked_note(n):
    """out has 5 elements, the bound n is 8 (every lane inside it) or 7 (lane 7 dropped): lane
    5 stores past out's end; the access has a bound, so the message has no note. Nothing is
    stored by the faulting instruction."""
    out = np.full(5, -1.0, np.float32)
    msg = _error(interp.MemoryFault, bounded_store, out, n)
    want = f": out-of-bounds store of out[5] (out has 5 elements) by {WHO.format(5)}"
    assert msg.startswith(f"{_line('bounded-store')} `") and msg.endswith(want), msg
    assert out.tolist() == [-1.0] * 5


@opus.kernel
def store_one(out: Ptr[f32]):
    t = opus.thread_id_x()
    out[t] = 1.0  # ERR: read-only


def test_a_store_to_a_read_only_array_names_it_and_the_line():
    out = np.zeros(N, np.float32)
    out.setflags(write=False)
    msg = _error(interp.InterpError, store_one, out)
    assert msg.startswith(f"{_line('read-only')} `"), msg
    assert msg.endswith(": store to out, whose numpy array is read-only"), msg
    assert out.tolist() == [0.0] * N


@opus.kernel
def scalars_in_and_out_of_a_branch(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    p = x + 1                 # accesses through p ask no alignment of x at launch
    r = p[t - 1]              # x[t], every lane
    if t >= 2:
        r = r + p[t - 3]      # x[t - 2], lanes 2..7 only
    out[t] = r


def test_scalar_accesses_of_an_array_numpy_placed_off_its_alignment():
    """x's f32 elements start 1 byte into a numpy buffer (a host array may; the GPU gets an
    aligned copy), accepted at launch as the kernel reaches x only through x + 1: scalar loads
    by every lane and by part of the lanes are not checked for alignment, as C aligns a scalar
    by its type. out[t] = x[t] + x[t - 2] for t >= 2."""
    raw = np.zeros(4 * N + 1, np.uint8)
    x = raw[1:].view(np.float32)
    assert x.ctypes.data % 4 == 1
    x[:] = np.arange(1, N + 1)
    out = np.zeros(N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        scalars_in_and_out_of_a_branch[1, N](x, out)
    assert out.tolist() == [1.0, 2.0] + [(t + 1) + (t - 1) for t in range(2, N)]


@opus.kernel
def upper_lanes_store_pairs(x: Ptr[f32], idx: Ptr[i32], out: Ptr[f32]):
    t = opus.thread_id_x()
    v = opus.load(x, 2 * t, vec=2)
    i = idx[t]                # read by every lane, before the branch
    if t >= 4:
        opus.store(out, v, i, vec=2)


def test_a_masked_pair_store_checks_the_alignment_of_its_lanes_only():
    """Lanes 4..7 store their pairs at the aligned 8, 10, 12, 14; lanes 0..3, whose pairs at
    1, 3, 5, 7 would be misaligned, are outside the branch: no fault, out[8:16] = x[8:16], the
    rest untouched."""
    x = np.arange(1, 2 * N + 1, dtype=np.float32)
    idx = np.array([1, 3, 5, 7, 8, 10, 12, 14], np.int32)
    out = np.full(2 * N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        upper_lanes_store_pairs[1, N](x, idx, out)
    assert out.tolist() == [-1.0] * N + list(range(N + 1, 2 * N + 1))


@opus.kernel
def bounded_pairs_from(x: Ptr[f32], idx: Ptr[i32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    opus.store(out, opus.load(x, idx[t], bound=n, vec=2), 2 * t)


def test_a_misaligned_pair_cut_by_the_bound_is_read_element_by_element():
    """Bound 14: lane 0's pair at the odd 13 is cut (x[13] inside, x[14] past the bound), so it
    is read element by element and needs no alignment: (14, 0); lanes 1..7 read the whole
    aligned pairs at 0, 2, ..., 12."""
    x = np.arange(1, 17, dtype=np.float32)
    idx = np.array([13, 0, 2, 4, 6, 8, 10, 12], np.int32)
    out = np.full(2 * N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        bounded_pairs_from[1, N](x, idx, out, 14)
    assert out.tolist() == [14.0, 0.0] + list(range(1, 15))


@opus.kernel
def bounded_by_u64(x: Ptr[f32], out: Ptr[f32], n: opus.u64):
    t = opus.thread_id_x()
    out[t] = opus.load(x, t, bound=n)


def test_a_u64_bound_beyond_int64():
    """A u64 bound counts as unsigned however large: 2^64 - 1 and 2^63 admit every lane (x[t]),
    5 admits lanes 0..4 (the others read 0). One test: the kernel's program is built once, at
    its first launch (mutmut counts the test that builds it as the one reaching Program._window)."""
    x = np.arange(1, N + 1, dtype=np.float32)
    for n in (2**64 - 1, 2**63, 5):
        out = np.full(N, -1.0, np.float32)
        with opus.set_target("sm_90a", interpret=True):
            bounded_by_u64[1, N](x, out, n)
        assert out.tolist() == [float(t + 1) if t < n else 0.0 for t in range(N)], n


@opus.kernel
def count_while_storing(cnt: Ptr[opus.u32], out: Ptr[opus.u32]):
    if opus.thread_id_x() == 0:
        while opus.atomic_add(cnt, 1) < 3:   # old values 0, 1, 2 loop; 3 ends it
            out[0] = out[0] + 1              # changes memory: the loop makes progress


def test_every_store_counts_as_progress_of_a_spinning_loop():
    """A run-time while with an atomic is checked for progress (an iteration changing nothing
    would spin forever): here each iteration's atomic add and store change memory, and each
    counts, so three iterations run: cnt 4, out 3, no "no progress" error."""
    cnt, out = np.zeros(1, np.uint32), np.zeros(1, np.uint32)
    with opus.set_target("sm_90a", interpret=True):
        count_while_storing[1, N](cnt, out)
    assert (int(cnt[0]), int(out[0])) == (4, 3)
