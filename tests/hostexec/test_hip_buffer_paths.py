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
from hostexec import HostProgram, Launch


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


@pytest.mark.parametrize("T", [f32, bf16, f64], ids=lambda t: t.name)
def test_64_bit_offsets_past_2_to_the_32_of_wider_elements(T, tmp_path):
    """An i64 offset is clamped in 64 bits: 2^32 + 4 truncated to 32 bits would be 4, in range."""
    VEC = 16 // T.itemsize
    starts = [0, VEC, 2 ** 32, 2 ** 32 + VEC, -(2 ** 32), 2 ** 33 + 2 * VEC]
    _run(T, VEC, i64, i32, [(k, THREADS * VEC - 1) for k in starts], tmp_path)
