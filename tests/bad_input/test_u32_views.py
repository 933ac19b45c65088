"""Bad input to views with 32-bit offsets (opus.make_gmem(ptr, offsets="u32")): a wrong
``offsets`` value, the promise asked of a bounded view or access, and broken promises at run
time (the interpreter's MemoryFault names the kernel line; the faulting access writes nothing)."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32, i64, u64
from expect import no_new_cache_files, raises, unchanged

TARGETS = ["gfx942", "sm_90a"]


# -- trace-time errors ------------------------------------------------------------------------------

def _view_with(offsets):
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        g = opus.make_gmem(x, offsets=offsets)  # ERR: bad-offsets
        g[0] = 1.0
    return k


@pytest.mark.parametrize("offsets", ["u64", "U32", "i64", 32, None, True, ("u32",)],
                         ids=repr)
def test_offsets_must_be_i32_or_u32(offsets, cache_root):
    with no_new_cache_files(cache_root), raises(opus.TraceError, "offsets must be one of",
                                                "'u32'", at="bad-offsets"):
        _view_with(offsets).source(target="gfx942")


@opus.kernel
def bounded_u32_size(x: opus.Ptr[f32], n: i32):
    g = opus.make_gmem(x, n, offsets="u32")  # ERR: bounded-size
    g[0] = 1.0


@opus.kernel
def bounded_u32_nbytes(x: opus.Ptr[f32]):
    g = opus.make_gmem(x, nbytes=64, offsets="u32")  # ERR: bounded-nbytes
    g[0] = 1.0


@pytest.mark.parametrize("k,tag", [(bounded_u32_size, "bounded-size"),
                                   (bounded_u32_nbytes, "bounded-nbytes")])
@pytest.mark.parametrize("target", TARGETS)
def test_a_bounded_view_refuses_the_promise(k, tag, target):
    with raises(opus.TraceError, "unbounded views", "32-bit", at=tag):
        k.source(target=target)


@opus.kernel
def bounded_u32_load(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
    out[0] = opus.load(x, 1, bound=n, offsets="u32")  # ERR: bounded-load


@opus.kernel
def bounded_u32_store(x: opus.Ptr[f32], n: i32):
    opus.store(x, 1.0, 2, bound=n, offsets="u32")  # ERR: bounded-store


@pytest.mark.parametrize("k,tag,what", [(bounded_u32_load, "bounded-load", "load"),
                                        (bounded_u32_store, "bounded-store", "store")])
def test_a_bounded_access_refuses_the_promise(k, tag, what):
    with raises(opus.TraceError, what, "unbounded accesses", at=tag):
        k.source(target="gfx942")


@opus.kernel
def pointer_bad_offsets(x: opus.Ptr[f32]):
    opus.store(x, 1.0, 0, offsets="unsigned")  # ERR: pointer-bad


def test_pointer_access_offsets_value():
    with raises(opus.TraceError, "store", "offsets must be one of", at="pointer-bad"):
        pointer_bad_offsets.source(target="sm_90a")


# -- broken promises at run time (interpreter) ------------------------------------------------------

@opus.kernel
def read_at(x: opus.Ptr[f16], out: opus.Ptr[f16], off: i32):
    t = opus.thread_id_x()
    opus.make_gmem(out)[t] = opus.make_gmem(x, offsets="u32")[off + t]  # ERR: read-at


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("off", [-1, -4, -(2 ** 31)])
def test_negative_offset(target, off):
    x, out = np.arange(8, dtype=np.float16), np.zeros(4, np.float16)
    with opus.set_target(target, interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "offsets=\"u32\"", "outside the promised", at="read-at"):
        read_at[1, 4](x, out, off)


@opus.kernel
def read_wide(x: opus.Ptr[f16], out: opus.Ptr[f16], off: i64):
    opus.make_gmem(out)[opus.thread_id_x()] = opus.make_gmem(x, offsets="u32")[off]  # ERR: read-wide


@pytest.mark.parametrize("off", [2 ** 31, 2 ** 32, 2 ** 62, -(2 ** 63)])
def test_offset_at_or_past_4_gib(off):
    """f16: the promise ends at 2^31 elements (2^32 bytes), far past the buffer: the promise's
    error, not the out-of-bounds one."""
    x, out = np.arange(8, dtype=np.float16), np.zeros(2, np.float16)
    with opus.set_target("gfx942", interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "promised [0, 2147483648)", "f16", at="read-wide"):
        read_wide[1, 2](x, out, off)


@opus.kernel
def read_u64(x: opus.Ptr[f32], out: opus.Ptr[f32], off: u64):
    opus.make_gmem(out)[opus.thread_id_x()] = opus.make_gmem(x, offsets="u32")[off]  # ERR: read-u64


@pytest.mark.parametrize("off", [2 ** 30, 2 ** 63, 2 ** 64 - 1])
def test_unsigned_64_bit_offset(off):
    x, out = np.arange(8, dtype=np.float32), np.zeros(2, np.float32)
    with opus.set_target("gfx942", interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "promised [0, 1073741824)", at="read-u64"):
        read_u64[1, 2](x, out, off)


@opus.kernel
def store_at(out: opus.Ptr[f32], off: i32):
    opus.make_gmem(out, offsets="u32").store(opus.cast(opus.thread_id_x(), f32), off - opus.thread_id_x())  # ERR: store-at


@pytest.mark.parametrize("target", TARGETS)
def test_store_with_a_lane_outside_writes_nothing(target):
    """Lanes 0..2 are inside, lane 3 is at -1: the store faults before writing any lane."""
    out = np.full(8, -5, np.float32)
    with opus.set_target(target, interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "outside the promised", "thread (3, 0, 0)", at="store-at"):
        store_at[1, 4](out, 2)


@opus.kernel
def shifted_back(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    g = opus.make_gmem(x, offsets="u32") + 4
    opus.make_gmem(out)[opus.thread_id_x()] = g[opus.thread_id_x() - 1]  # ERR: shifted


def test_promise_counts_from_a_shifted_view():
    """x[3] is inside the array, but -1 from the shifted view breaks the view's promise."""
    x, out = np.arange(8, dtype=np.float32), np.zeros(2, np.float32)
    with opus.set_target("gfx942", interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "offset -1", "outside the promised", at="shifted"):
        shifted_back[1, 2](x, out)


@opus.kernel(block=64)
def soffset_sum(x: opus.Ptr[f32], out: opus.Ptr[f32], off: i32, so: i32):
    t = opus.thread_id_x()
    opus.make_gmem(out)[t] = opus.make_gmem(x, offsets="u32").load(off + t, soffset=so)  # ERR: soffset


@pytest.mark.parametrize("off,so", [(0, -1), (-70, 5), (2 ** 30 - 64, 64), (2 ** 31 - 1, 2 ** 31 - 1)])
def test_offset_plus_soffset_outside(off, so):
    x, out = np.arange(256, dtype=np.float32), np.zeros(64, np.float32)
    with opus.set_target("gfx942", interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "outside the promised", at="soffset"):
        soffset_sum[1, 64](x, out, off, so)


@opus.kernel
def layout_before(x: opus.Ptr[f16], out: opus.Ptr[f16], ld: i32):
    lay = opus.make_layout((2, 8), (ld, 1))
    v = opus.make_gmem(x, offsets="u32").load(lay + (-ld))  # ERR: layout
    opus.make_gmem(out).store(v, lay)


@pytest.mark.parametrize("target", TARGETS)
def test_layout_issue_outside(target):
    x, out = np.arange(64, dtype=np.float16), np.zeros(32, np.float16)
    with opus.set_target(target, interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "outside the promised", at="layout"):
        layout_before[1, 1](x, out, 16)


@opus.kernel
def carried(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
    g = opus.make_gmem(x, offsets="u32")
    acc = 0.0
    for i in range(n):          # the view is carried through the loop, its promise with it
        acc = acc + g[2 - 2 * i]  # ERR: carried
        g = g + 1
    opus.make_gmem(out)[0] = acc


def test_promise_kept_through_a_run_time_loop():
    """Offsets 2, 0, -2 from views at x, x+1, x+2: the third reads x[0], inside the array, at
    offset -2 of its view, which breaks the promise."""
    x, out = np.arange(8, dtype=np.float32), np.zeros(1, np.float32)
    with opus.set_target("gfx942", interpret=True):
        carried[1, 1](x, out, 2)                      # x[2] + x[1]
    assert out[0] == 3
    with opus.set_target("gfx942", interpret=True), unchanged(out), \
            raises(opus.interp.MemoryFault, "offset -2", at="carried"):
        carried[1, 1](x, out, 3)
