"""The interpreter's memory faults at their edges, word for word: one element past the end by
every lane; a bounded access whose bound exceeds the buffer (the lanes inside the bound but
past the buffer fault, without the "unchecked on the GPU" note); misaligned vector accesses by
part of the lanes (inside a branch); masked shared-memory loads in checking mode (loads, not
writes: several readers are no race); packed fp4 accesses off a byte's start (named as loads;
lanes outside a branch unchecked) and pointer steps by whole bytes; vector alignment by
address in a shifted shared array, scalar accesses unchecked; a bounded pair through
per-lane pointers; a bounded store inside a branch; a whole misaligned pair faulting beside
a pair the bound cuts. Expected texts written by hand from the kernels."""
import os
import re
import sys

import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f32, i32, Ptr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import line_of  # noqa: E402

N = 8
WHO = "block (0, 0, 0) thread ({}, 0, 0)"
UNCHECKED = " — an access without a bound is unchecked on the GPU"


def _line(tag):
    """'<this file>:<line>' of the line marked ``# ERR: tag``."""
    return f"{__file__}:{line_of(tag, __file__)}"


def _fault(kernel, *args, block=N):
    with opus.set_target("sm_90a", interpret=True), pytest.raises(interp.MemoryFault) as e:
        kernel[1, block](*args)
    return str(e.value)


@opus.kernel
def shifted_copy(x: Ptr[f32], out: Ptr[f32], k: i32):
    t = opus.thread_id_x()
    out[t] = x[t + k]  # ERR: shift


def test_one_past_the_end_by_every_lane():
    """k = 1: lane 7 reads x[8] of 8 elements; every lane is active and the access has no
    bound."""
    msg = _fault(shifted_copy, np.zeros(N, np.float32), np.zeros(N, np.float32), 1)
    assert msg.startswith(f"{_line('shift')} `") and (
        f": out-of-bounds load of x[8] (x has 8 elements) by {WHO.format(7)}{UNCHECKED}") in msg, msg


@opus.kernel
def bounded_copy(x: Ptr[f32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    out[t] = opus.load(x, t, bound=n)  # ERR: bounded


def test_a_bound_past_the_buffer_faults_at_the_first_lane_past_it():
    """bound 7 on a 5-element x: lanes 0..4 read, lanes 5 and 6 are inside the bound but past x
    (lane 5 is named), lane 7 is dropped by the bound. The access has a bound: no note."""
    msg = _fault(bounded_copy, np.zeros(5, np.float32), np.zeros(N, np.float32), 7)
    want = f": out-of-bounds load of x[5] (x has 5 elements) by {WHO.format(5)}"
    assert msg.startswith(f"{_line('bounded')} `") and msg.endswith(want), msg


def test_a_bound_at_the_buffer_end_reads_zeros_past_it():
    x = np.arange(1, 6, dtype=np.float32)
    out = np.full(N, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        bounded_copy[1, N](x, out, 5)
    np.testing.assert_array_equal(out, [1, 2, 3, 4, 5, 0, 0, 0])


@opus.kernel
def masked_pairs(x: Ptr[f32], out: Ptr[f32], start: i32):
    t = opus.thread_id_x()
    if t >= 4:
        v = opus.load(x, start + 2 * t, vec=2)  # ERR: pair
        opus.store(out, v, 2 * t, vec=2)


def test_misaligned_vector_load_by_part_of_the_lanes():
    """start = 1: lanes 4..7 load pairs from odd elements (4-byte aligned, a 2 x f32 access needs
    8); lanes 0..3 are inactive. Lane 4 is named, with its first element x[9]."""
    msg = _fault(masked_pairs, np.zeros(4 * N, np.float32), np.zeros(2 * N, np.float32), 1)
    want = (f": misaligned 2-element load of x[9] by {WHO.format(4)}: a vector access needs a "
            f"8-byte aligned address")
    assert msg.startswith(f"{_line('pair')} `") and msg.endswith(want), msg


def test_aligned_vector_loads_by_part_of_the_lanes():
    x = np.arange(4 * N, dtype=np.float32)
    out = np.zeros(2 * N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        masked_pairs[1, N](x, out, 0)
    np.testing.assert_array_equal(out, [0] * 8 + list(range(8, 16)))


@opus.kernel(block=N)
def masked_shared_reads(out: Ptr[f32]):
    s = opus.alloc_smem(f32, N)
    t = opus.thread_id_x()
    s[t] = opus.f32(t * 10)
    opus.sync_threads()
    if t < 4:
        out[t] = s[2]       # several readers of one element: no race
    else:
        out[t] = s[t - 4]


def test_masked_shared_loads_are_reads_in_checking_mode():
    out = np.zeros(N, np.float32)
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        masked_shared_reads[1, N](out)
    np.testing.assert_array_equal(out, [20, 20, 20, 20, 0, 10, 20, 30])


# -- packed (4-bit) elements: an access starts a byte, aligned to its size ------------------------

@opus.kernel
def packed_load_at(x: Ptr[opus.fp4], y: Ptr[opus.fp4], k: i32):
    t = opus.thread_id_x()
    off = 8 * t + k * (t // 2)  # lanes 0 and 1 at 0 and 8, lanes 2 and 3 shifted by k
    if t < 2:
        opus.store(y, opus.load(x, off, vec=8), 8 * t)


def test_packed_lanes_outside_the_branch_are_not_checked():
    """k = 3: lanes 2 and 3 would load 8 fp4 elements from offsets 19 and 27 (not a byte's
    start) but are outside the branch, so nothing faults and lanes 0 and 1 copy x[0:16]."""
    x = np.arange(32, dtype=np.uint8)  # 64 packed fp4 elements
    y = np.zeros(32, np.uint8)
    with opus.set_target("sm_90a", interpret=True):
        packed_load_at[1, 4](x, y, 3)
    np.testing.assert_array_equal(y, np.where(np.arange(32) < 8, x, 0))


def test_a_packed_load_off_a_byte_is_named_as_a_load():
    """k = 3: lane 0 loads 8 fp4 elements from offset 3, which does not start a byte: the
    fault names the load, the element, the lane and the rule."""
    x = np.zeros(32, np.uint8)
    msg = _fault(packed_odd_load, x, np.zeros(32, np.uint8), 3, block=2)
    want = (f": misaligned 8-element load of x[3] by {WHO.format(0)}: element offset 3 does not "
            f"start a byte (4-bit elements come 2 to 1 byte)")
    assert msg.startswith(f"{_line('odd')} `") and msg.endswith(want), msg


@opus.kernel
def packed_odd_load(x: Ptr[opus.fp4], y: Ptr[opus.fp4], k: i32):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, 8 * t + k, vec=8), 8 * t)  # ERR: odd


# -- alignment is of the address, not of the index: a shared array placed off 16 bytes -----------

@opus.kernel
def vector_from_shifted_smem(out: Ptr[f32], k: i32):
    t = opus.thread_id_x()
    pad = opus.alloc_smem(f32, 1, align=4)  # bytes 0..3
    s = opus.alloc_smem(f32, 15, align=4)   # bytes 4..63: s[3] starts at byte 16
    pad[0] = 0.0
    if t < 15:
        s[t] = opus.f32(t)
    opus.sync_threads()
    if t == 0:
        opus.store(out, s.load(k, vec=4), 0)  # ERR: smem-vec


def test_a_vector_load_aligned_by_its_address_in_a_shifted_array():
    """s starts at byte 4: s[3..6] lie at bytes 16..31, a 16-byte aligned vector (its index 3
    is not a multiple of 4, its address is); s[4..7] at bytes 20..35 is misaligned."""
    out = np.zeros(4, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        vector_from_shifted_smem[1, 16](out, 3)
    np.testing.assert_array_equal(out, [3, 4, 5, 6])
    msg = _fault(vector_from_shifted_smem, out, 4, block=16)
    assert msg.startswith(f"{_line('smem-vec')} `") and ": misaligned 4-element load of " in msg and (
        f"[4] by {WHO.format(0)}: a vector access needs a 16-byte aligned address") in msg, msg


@opus.kernel
def scalars_of_an_under_aligned_array(out: Ptr[f32]):
    t = opus.thread_id_x()
    pad = opus.alloc_smem(opus.u8, 1, align=1)
    s = opus.alloc_smem(f32, 4, align=1)  # at byte 4: an f32 array is 4-byte aligned
    pad[0] = opus.u8(0)
    s[t] = opus.f32(t)
    opus.sync_threads()
    out[t] = s[3 - t]


def test_scalar_accesses_are_not_checked_for_alignment():
    """A scalar access is aligned by its type (C gives the `__shared__ __align__(1) float`
    array its natural alignment): an f32 array asked for 1-byte alignment after one byte is
    read and written element by element without a fault."""
    out = np.zeros(4, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        scalars_of_an_under_aligned_array[1, 4](out)
    np.testing.assert_array_equal(out, [3, 2, 1, 0])


@opus.kernel
def pair_of_an_under_aligned_array(out: Ptr[f32]):
    pad = opus.alloc_smem(opus.u8, 1, align=1)
    s = opus.alloc_smem(f32, 8, align=1)   # C places it 4-byte aligned whatever align says
    t = opus.thread_id_x()
    pad[0] = opus.u8(0)
    s[t] = opus.f32(t)
    opus.sync_threads()
    if t == 0:
        v = s.load(1, vec=2)               # elements 1, 2: byte 8 once s is at byte 4
        out[0] = v[0] + v[1]


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_arrays_keep_their_elements_natural_alignment(target):
    """alloc_smem's align is raised to the element's size, as C does for `__align__(1) float`:
    the rendered declaration says 4, and the interpreter places the array at byte 4 (at byte 1,
    the pair at elements 1-2 would fault as misaligned)."""
    with opus.set_target(target, interpret=True):
        src = pair_of_an_under_aligned_array.specialize().source
        out = np.zeros(1, np.float32)
        pair_of_an_under_aligned_array[1, 8](out)
    assert re.search(r"__align__\(4\)\s+float\s+smem1\b|__attribute__\(\(aligned\(4\)\)\)\s+float\s+smem1\b",
                     src), src[:600]
    assert out[0] == 3.0


@opus.kernel
def packed_pointer_step(x: Ptr[opus.fp4], y: Ptr[opus.fp4], k: i32):
    t = opus.thread_id_x()
    p = x + k * t  # ERR: step
    opus.store(y, opus.load(p, 0, vec=2), 2 * t)


def test_packed_pointer_steps_by_whole_bytes():
    """k = 2: lane t's pointer starts at element 2t (byte t) and copies that byte to y[2t:2t+2];
    k = 3: lane 1's step of 3 fp4 elements splits a byte, named with the type and the rule."""
    x = (np.arange(8, dtype=np.uint8) * 17).astype(np.uint8)  # 16 packed fp4 elements
    y = np.zeros(8, np.uint8)
    with opus.set_target("sm_90a", interpret=True):
        packed_pointer_step[1, 8](x, y, 2)
    np.testing.assert_array_equal(y, x)
    msg = _fault(packed_pointer_step, x, y, 3, block=8)
    want = (f": pointer step of 3 fp4_e2m1 elements by {WHO.format(1)} does not land on a byte: "
            f"fp4_e2m1 is packed 2 to whole bytes, so pointer steps are multiples of 2")
    assert msg.startswith(f"{_line('step')} `") and msg.endswith(want), msg


@opus.kernel
def per_lane_window(x: Ptr[f32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    p = x + 2 * t  # each lane's window starts at its own pointer
    opus.store(out, opus.load(p, 0, bound=n, vec=2), 2 * t)


def test_a_bounded_pair_through_per_lane_pointers():
    """bound 1 counts from each lane's pointer x + 2t: its pair's first element x[2t] is inside
    the window, the second is dropped (0)."""
    x = np.arange(1, 17, dtype=np.float32)
    out = np.full(16, -1.0, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        per_lane_window[1, N](x, out, 1)
    np.testing.assert_array_equal(out, [v if i % 2 == 0 else 0 for i, v in enumerate(x)])


@opus.kernel
def bounded_store_in_branch(out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    if t < 4:
        opus.store(out, opus.f32(t) + 1.0, t, bound=n)


def test_a_bounded_store_inside_a_branch_stores_only_the_branchs_lanes():
    """bound 6 admits lanes 0..5, the branch only 0..3: lanes 4 and 5 store nothing."""
    out = np.zeros(N, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        bounded_store_in_branch[1, N](out, 6)
    np.testing.assert_array_equal(out, [1, 2, 3, 4, 0, 0, 0, 0])


@opus.kernel
def bounded_pairs_at(x: Ptr[f32], idx: Ptr[i32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    opus.store(out, opus.load(x, idx[t], bound=n, vec=2), 2 * t)  # ERR: pairs


def test_a_misaligned_whole_pair_faults_beside_a_cut_one():
    """Lanes at 1, 2, 4, ..., 14 with bound 15: lane 7's pair is cut by the bound (element-wise,
    no alignment needed), lane 0's x[1..2] is whole and misaligned: it faults."""
    idx = np.array([1, 2, 4, 6, 8, 10, 12, 14], np.int32)
    msg = _fault(bounded_pairs_at, np.zeros(16, np.float32), idx, np.zeros(16, np.float32), 15)
    want = (f": misaligned 2-element load of x[1] by {WHO.format(0)}: a vector access needs a "
            f"8-byte aligned address")
    assert msg.startswith(f"{_line('pairs')} `") and msg.endswith(want), msg
