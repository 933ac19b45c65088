"""The HIP renderer's buffer accesses on the paths the differential programs do not generate,
host-executed as gfx942 (tests/hostexec/shim/hip.h models the buffer unit: each dword checked
against num_records, offsets unsigned) against numpy: vectors of each width up to 16 bytes at
run-time offsets (one buffer instruction where the unit's check is exact, else one access per
element), byte elements (whose offsets need no clamp when offset and bound are 32-bit signed,
codegen/hip.py ``_voffset``; unsigned and 64-bit ones do), and scalar offsets of byte elements
(a negative soffset must read as out of range, ``_soffset``).

Each case runs several starting offsets (multiples of the vector: vector accesses are aligned,
ir/ops.py) and bounds, so whole vectors lie below 0, in range, across the bound or past it."""
import functools

import numpy as np
import pytest

import opus
from opus import bf16, f32, f64, i32, i64, u8, u32
from hostexec import HostProgram, Launch, run_kernel


@functools.cache
def bounded_copies(T, VEC, OFF, BOUND):
    """y[VEC t + i] = x[start + VEC t + i] where 0 <= that < n, else 0 (a bounded load);
    z[start + VEC t + i] = x[VEC t + i] where 0 <= start + VEC t + i < n (a bounded store)."""
    @opus.kernel
    def copies(x: opus.Ptr[T], y: opus.Ptr[T], z: opus.Ptr[T], start: OFF, n: BOUND):
        t = opus.thread_id_x()
        off = start + OFF(t * VEC)
        opus.store(y, opus.load(x, off, vec=VEC, bound=n), t * VEC, vec=VEC)
        opus.store(z, opus.load(x, t * VEC, vec=VEC), off, vec=VEC, bound=n)
    return copies


THREADS = 4


def _run(T, VEC, OFF, BOUND, cases, tmp_path):
    """Launch once per (start, n) of ``cases``; check y and z against numpy."""
    k = bounded_copies(T, VEC, OFF, BOUND)
    prog = HostProgram("gfx942")
    kid = prog.add(k.specialize(target="gfx942"))
    prog.build(tmp_path)
    size = THREADS * VEC
    x = (np.arange(size) % 120 + 3).astype(T.np_dtype)
    launches, outs = [], []
    for start, n in cases:
        y, z = np.full(size, 99, T.np_dtype), np.full(size, 99, T.np_dtype)
        launches.append(Launch(kid, 1, THREADS, [x.copy(), y, z, start, n]))
        outs.append((start, n, y, z))
    prog.run(launches)
    j = np.arange(size)
    for start, n, y, z in outs:
        src = start + j                                   # the load's element of y[j]
        want_y = np.where((src >= 0) & (src < n), x[np.clip(src, 0, size - 1)], 0)
        np.testing.assert_array_equal(y, want_y.astype(T.np_dtype), err_msg=f"load {start} {n}")
        want_z = np.full(size, 99, T.np_dtype)
        ok = (src >= 0) & (src < n)                       # the store's element of x[j]
        want_z[src[ok]] = x[j[ok]]
        np.testing.assert_array_equal(z, want_z, err_msg=f"store {start} {n}")


WIDTHS = [(f32, 4), (f32, 2), (bf16, 8), (bf16, 2), (u8, 16), (u8, 8), (f64, 2)]


@pytest.mark.parametrize("T, VEC", WIDTHS, ids=[f"{t.name}x{v}" for t, v in WIDTHS])
def test_vectors_at_run_time_offsets(T, VEC, tmp_path):
    """Offsets unknown when compiling (so the alignment is only the element's): vectors below
    0, across 0, inside, across the bound (inside one dword or between two) and past it."""
    size = THREADS * VEC
    bounds = (size, size - 1, size - VEC // 2, VEC + 1, 0, -5)
    _run(T, VEC, i32, i32, [(k * VEC, n) for k in (0, 1, -1, -2) for n in bounds], tmp_path)


BYTES = [(1, i32, i32), (2, i32, i32), (4, i32, i32), (4, u32, i32), (4, i32, i64), (4, i64, i32)]


@pytest.mark.parametrize("VEC, OFF, BOUND", BYTES,
                         ids=[f"x{v}-{o.name}-{b.name}" for v, o, b in BYTES])
def test_byte_elements_with_signed_unsigned_and_64_bit_offsets(VEC, OFF, BOUND, tmp_path):
    """u8 elements: a 32-bit signed offset with a 32-bit bound goes unclamped (a negative
    offset is >= 2^31 unsigned, past any 32-bit bound); unsigned offsets and 64-bit offsets or
    bounds are clamped like wider elements (a 64-bit offset of 2^32 once wrapped to 0 here and
    read and wrote in range). Unsigned offsets here start at 0 or above."""
    starts = [0, VEC, 2 * VEC, 2 ** 20, 2 ** 31 - VEC]
    if OFF.kind == "int":
        starts += [-VEC, -2 * VEC, -(2 ** 31), -(2 ** 20)]
    if OFF.bits == 64:   # past 2^32: truncated to 32 bits these would land in range
        starts += [2 ** 32, 2 ** 32 + VEC, -(2 ** 32), 2 ** 40]
    bounds = (THREADS * VEC - 1, THREADS * VEC - VEC // 2, 1)
    _run(u8, VEC, OFF, BOUND, [(k, n) for k in starts for n in bounds], tmp_path)


@pytest.mark.parametrize("OFF", [i32, u32], ids=lambda t: t.name)
def test_byte_elements_with_bounds_past_2_to_the_31(OFF, tmp_path):
    """A 64-bit bound past 2^31 bytes gives num_records up to 0xfffffff0: a negative i32 offset
    read as unsigned (2^32 - k) would then be in range, so it must be clamped (the bound is
    not backed by memory: the right code never reaches past the array, a wrong one reads or
    writes 4 GiB away and the host run fails)."""
    starts = [0] + ([-4, -8, -20, -(2 ** 20), -(2 ** 31)] if OFF.kind == "int" else [])
    _run(u8, 4, OFF, i64, [(k, n) for k in starts for n in (2 ** 31 + 5, 2 ** 32, 2 ** 40)],
         tmp_path)


@opus.kernel
def byte_soffsets(x: opus.Ptr[u8], y: opus.Ptr[u8], s: i32, s64: i64, n: i32):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 4, vec=4, bound=n, soffset=s), t * 4, vec=4)
    opus.store(y, opus.load(x, t * 4, vec=4, bound=n, soffset=s64), 16 + t * 4, vec=4)


@pytest.mark.parametrize("s", [0, 4, 8, -4, -8, -(2 ** 31), 2 ** 31 - 4])
def test_byte_scalar_offsets(s, tmp_path):
    """x[4t + s + i] where 0 <= 4t + s + i < n, else 0, for an i32 and an i64 scalar offset of
    byte elements: a negative soffset is out of range whole (ir/ops.py), not wrapped around.
    (Multiples of 4: the 4-byte vectors stay aligned.)"""
    prog = HostProgram("gfx942")
    kid = prog.add(byte_soffsets.specialize(target="gfx942"))
    prog.build(tmp_path)
    x = (np.arange(16) * 7 + 1).astype(np.uint8)
    y = np.full(32, 99, np.uint8)
    n = 14
    prog.run([Launch(kid, 1, 4, [x, y, s, s, n])])
    j = np.arange(16)
    src = j + s
    want = np.where((s >= 0) & (src >= 0) & (src < n), x[np.clip(src, 0, 15)], 0).astype(np.uint8)
    np.testing.assert_array_equal(y[:16], want, err_msg="i32 soffset")
    np.testing.assert_array_equal(y[16:], want, err_msg="i64 soffset")


@opus.kernel
def byte_soffsets_big_bound(x: opus.Ptr[u8], y: opus.Ptr[u8], s: i32, u: u32, n: i64):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 4, vec=4, bound=n, soffset=s), t * 4, vec=4)
    opus.store(y, opus.load(x, t * 4, vec=4, bound=n, soffset=u), 16 + t * 4, vec=4)


@pytest.mark.parametrize("s", [0, 4, -4, -20, -(2 ** 20), -(2 ** 31)])
@pytest.mark.parametrize("n", [2 ** 32, 2 ** 40])
def test_byte_scalar_offsets_with_bounds_past_2_to_the_31(s, n, tmp_path):
    """As above with a 64-bit bound of 2^32 or more (num_records 0xfffffff0, not backed by
    memory): a negative i32 soffset stays out of range; the u32 one is 0 or 4 (its values past
    2^31 are in range by their unsigned value, so unbacked here)."""
    prog = HostProgram("gfx942")
    kid = prog.add(byte_soffsets_big_bound.specialize(target="gfx942"))
    prog.build(tmp_path)
    x = (np.arange(64) * 7 + 1).astype(np.uint8)   # every in-bound element read is backed
    y = np.full(32, 99, np.uint8)
    prog.run([Launch(kid, 1, 4, [x, y, s, max(s, 0), n])])
    j = np.arange(16)
    want = (x[j + s] if s >= 0 else np.zeros(16)).astype(np.uint8)
    np.testing.assert_array_equal(y[:16], want, err_msg="i32 soffset")
    np.testing.assert_array_equal(y[16:], x[j + max(s, 0)], err_msg="u32 soffset")


@pytest.mark.parametrize("T", [f32, bf16, f64], ids=lambda t: t.name)
def test_64_bit_offsets_past_2_to_the_32_of_wider_elements(T, tmp_path):
    """An i64 offset is clamped in 64 bits: 2^32 + 4 truncated to 32 bits would be 4, in range."""
    VEC = 16 // T.itemsize
    starts = [0, VEC, 2 ** 32, 2 ** 32 + VEC, -(2 ** 32), 2 ** 33 + 2 * VEC]
    _run(T, VEC, i64, i32, [(k, THREADS * VEC - 1) for k in starts], tmp_path)


# -- loop versions (codegen/hip.py render_for): each version's results ------------------------------

@opus.kernel
def byte_vectors_in_a_loop(x: opus.Ptr[u8], y: opus.Ptr[u8], m: i32, n: i32):
    """4-byte vectors of bytes at 16 k + 4 t, bound n: the fast version (taken where n is a
    multiple of 4, so no dword straddles the bound) reads whole dwords."""
    t = opus.thread_id_x()
    for k in opus.range(m):
        opus.store(y, opus.load(x, 16 * k + 4 * t, vec=4, bound=n), 16 * k + 4 * t, vec=4)


@opus.kernel
def bound_inside_the_loop(x: opus.Ptr[u8], y: opus.Ptr[u8], m: i32, n: i32):
    """The bound is computed in the loop: no condition before the loop can name it."""
    t = opus.thread_id_x()
    for k in opus.range(m):
        b = opus.min(n, 16 * k + 9)
        opus.store(y, opus.load(x, 16 * k + 4 * t, vec=4, bound=b), 16 * k + 4 * t, vec=4)


@opus.kernel
def long_loop_down(x: opus.Ptr[u8], y: opus.Ptr[i32], hi: i32, lo: i32, st: i32, n: i32):
    """A run-time step in a loop too long for a step version: the exactness version must keep
    the step's sign test (the step is negative here)."""
    t = opus.thread_id_x()
    acc = i32(0)
    for i in opus.range(hi, lo, st):
        for k in range(20):
            v = opus.load(x, 4 * (i + k), vec=4, bound=n)
            acc = acc + i32(v[0]) + i32(v[3])
    y[t] = acc


@pytest.mark.parametrize("n", [10, 12, 13, 34, 42, 64])
def test_byte_vectors_in_a_loop_each_bound(n, tmp_path):
    """Bounds 10, 34 and 42 are 2 mod 4 (and have bits 0 and 2 clear): only the per-element
    path loads their last dword's first two bytes."""
    x = np.arange(1, 65, dtype=np.uint8)
    want = np.where(np.arange(64) < n, x, 0).astype(np.uint8)
    prog = HostProgram("gfx942")
    ks = [prog.add(k.specialize(target="gfx942")) for k in (byte_vectors_in_a_loop,
                                                            bound_inside_the_loop)]
    prog.build(tmp_path)
    y, z = np.full(64, 0xEE, np.uint8), np.full(64, 0xEE, np.uint8)
    prog.run([Launch(ks[0], 1, 4, [x.copy(), y, 4, n]), Launch(ks[1], 1, 4, [x.copy(), z, 4, n])])
    np.testing.assert_array_equal(y, want)
    k = np.arange(64) // 16
    np.testing.assert_array_equal(z, np.where(np.arange(64) < np.minimum(n, 16 * k + 9), x, 0))


@pytest.mark.parametrize("hi,lo,st", [(10, 0, -3), (0, 10, 3), (5, 5, -1)])
def test_a_long_loop_with_a_run_time_step_either_way(hi, lo, st, tmp_path):
    x = np.arange(1, 129, dtype=np.uint8)
    n = 74                               # 2 mod 4: the exactness version is not taken
    y = np.zeros(2, np.int32)
    prog = HostProgram("gfx942")
    k = prog.add(long_loop_down.specialize(target="gfx942"))
    prog.build(tmp_path)
    runs = [(n, np.zeros(2, np.int32)), (76, np.zeros(2, np.int32))]
    prog.run([Launch(k, 1, 2, [x.copy(), y, hi, lo, st, b]) for b, y in runs])
    for b, y in runs:
        xb = np.where(np.arange(128) < b, x.astype(np.int64), 0)
        want = sum(int(xb[4 * (i + kk)]) + int(xb[4 * (i + kk) + 3])
                   for i in range(hi, lo, st) for kk in range(20))
        np.testing.assert_array_equal(y, [want, want], err_msg=f"bound {b}")


# -- pointers whose alignment is unknown when compiling (codegen/hip.py _exactness, per lane) ------

@functools.cache
def shifted_copies(T, VEC):
    """As bounded_copies, through x + k and z + k (k known only at run time: the vector's
    alignment is only its element's, so whether a whole vector's buffer check is exact is
    decided per lane from the offset and the bound)."""
    @opus.kernel
    def copies(x: opus.Ptr[T], y: opus.Ptr[T], z: opus.Ptr[T], k: i32, start: i32, n: i32):
        t = opus.thread_id_x()
        off = start + t * VEC
        opus.store(y, opus.load(x + k, off, vec=VEC, bound=n), t * VEC, vec=VEC)
        opus.store(z + k, opus.load(x, t * VEC, vec=VEC), off, vec=VEC, bound=n)
    return copies


SHIFTED = [(u8, 4), (u8, 16), (bf16, 2), (bf16, 8), (f32, 4)]


@pytest.mark.parametrize("T, VEC", SHIFTED, ids=[f"{t.name}x{v}" for t, v in SHIFTED])
def test_vectors_through_a_pointer_moved_at_run_time(T, VEC, tmp_path):
    """Starts below 0, across 0 and inside; bounds inside one dword, between two, at the end
    and none."""
    size = 8 * VEC
    k = 2 * VEC                          # run-time alignment holds: accesses stay aligned
    x = (np.arange(size) % 120 + 3).astype(T.np_dtype)
    prog = HostProgram("gfx942")
    kid = prog.add(shifted_copies(T, VEC).specialize(target="gfx942"))
    prog.build(tmp_path)
    room = size - k                      # elements from x + k to x's end
    cases = [(s, n) for s in (0, VEC, -VEC, -2 * VEC) for n in
             (room, room - 1, THREADS * VEC - 1, THREADS * VEC - VEC // 2, VEC + 1, 2, 0)]
    launches, outs = [], []
    for start, n in cases:
        y, z = np.full(THREADS * VEC, 99, T.np_dtype), np.full(size, 99, T.np_dtype)
        launches.append(Launch(kid, 1, THREADS, [x.copy(), y, z, k, start, n]))
        outs.append((start, n, y, z))
    prog.run(launches)
    j = np.arange(THREADS * VEC)
    for start, n, y, z in outs:
        e = start + j                                     # element of x + k, z + k
        ok = (e >= 0) & (e < n)
        want_y = np.where(ok, x[np.clip(k + e, 0, size - 1)], 0).astype(T.np_dtype)
        np.testing.assert_array_equal(y, want_y, err_msg=f"load {start} {n}")
        want_z = np.full(size, 99, T.np_dtype)
        want_z[k + e[ok]] = x[j[ok]]
        np.testing.assert_array_equal(z, want_z, err_msg=f"store {start} {n}")


@opus.kernel
def shifted_soffset_copies(x: opus.Ptr[u8], y: opus.Ptr[u8], z: opus.Ptr[u8], k: i32,
                           start: i32, so: i32, n: i32):
    """x + k with k = 1 and off = start + 4 t with start = -1: the vectors' addresses stay
    aligned while off itself is negative for lane 0 (its elements off + so + i reach 0)."""
    t = opus.thread_id_x()
    off = start + 4 * t
    opus.store(y, opus.load(x + k, off, vec=4, bound=n, soffset=so), 4 * t, vec=4)
    opus.store(z + k, opus.load(x, 4 * t, vec=4), off, vec=4, bound=n, soffset=so)


@pytest.mark.parametrize("so", [0, 1, 5])
@pytest.mark.parametrize("n", [7, 10, 13])
def test_a_scalar_offset_does_not_bring_a_negative_offset_into_range(so, n, tmp_path):
    """ir/ops.py: with a scalar offset each element is accessed only if off >= 0, soffset >= 0
    and off + soffset + i < bound; lane 0's off is -1, so its whole vector is out of range even
    where -1 + soffset + i >= 0 (per element: the bound is not a multiple of 4)."""
    x = (np.arange(64) * 3 + 1).astype(np.uint8)
    y, z = np.full(16, 99, np.uint8), np.full(64, 99, np.uint8)
    run_kernel(shifted_soffset_copies, 1, 4, x, y, z, 1, -1, so, n, target="gfx942",
               workdir=tmp_path)
    j = np.arange(16)
    off = -1 + 4 * (j // 4)
    e = off + so + j % 4                              # element of x + 1 / z + 1
    ok = (off >= 0) & (e < n)
    np.testing.assert_array_equal(y, np.where(ok, x[np.clip(1 + e, 0, 63)], 0))
    want_z = np.full(64, 99, np.uint8)
    want_z[1 + e[ok]] = x[j[ok]]
    np.testing.assert_array_equal(z, want_z)
