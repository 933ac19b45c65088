"""Layouts as static algebra (lang/layout.py): offsets against hand-computed values, static
parts folding to Python ints, and run-time entries emitting only the arithmetic they need."""
import numpy as np
import pytest

import opus
from opus import i32, f32
from opus.lang.layout import Layout


def test_packed_row_major_is_the_default():
    u = opus.make_layout((128, 64))
    assert u.stride() == (64, 1)
    assert u(4, 8) == 4 * 64 + 8 == 264 and type(u(4, 8)) is int
    assert opus.make_layout(128, 64).stride() == (64, 1)           # extents as arguments
    assert opus.make_layout((2, 3, 4)).stride() == (12, 4, 1)


def test_explicit_strides_and_queries():
    u = opus.make_layout((4, 6), (1, 4))                             # column-major
    assert [u(i, j) for i in range(2) for j in range(2)] == [0, 4, 1, 5]
    assert u.shape() == (4, 6) and u.shape(1) == 6 and u.stride(0) == 1
    assert u.rank == 2 and u.size() == 24 and u.cosize() == 24


def test_nested_shape_takes_leaf_or_mode_coordinates():
    # the guide's 48 x 32 tile seen as [[3, 16], [4, 8]], packed
    u = opus.make_layout(((3, 16), (4, 8)))
    assert u.stride() == ((512, 32), (8, 1))
    for r, c in [(0, 0), (21, 19), (47, 31), (16, 8)]:
        assert u(r, c) == r * 32 + c                                 # x coordinates unravel
        assert u(r // 16, r % 16, c // 8, c % 8) == r * 32 + c       # one per leaf
        assert u((r // 16, r % 16), (c // 8, c % 8)) == r * 32 + c  # one tuple per mode


def test_linear_shift_and_slices():
    u = opus.make_layout((8, 16))
    assert (u + 5)(1, 2) == 16 + 2 + 5
    v = u
    v += 3
    assert v(0, 0) == 3 and u(0, 0) == 0                             # layouts are values
    row = u[2, :]
    assert row.shape() == (16,) and row(7) == 2 * 16 + 7
    col = u[:, 5]
    assert [col(i) for i in range(3)] == [5, 21, 37]


def test_zipped_divide_matches_the_tiled_index():
    z = opus.zipped_divide(opus.make_layout((128, 64)), (32, 16))
    assert z.shape() == ((32, 16), (4, 4))
    rng = np.random.default_rng(0)
    for _ in range(50):
        r, c, ti, tj = rng.integers(0, 32), rng.integers(0, 16), rng.integers(0, 4), rng.integers(0, 4)
        assert z((int(r), int(c)), (int(ti), int(tj))) == (32 * ti + r) * 64 + 16 * tj + c


def test_coord_fixes_leaves_and_the_call_takes_the_open_ones():
    u = opus.make_layout((3, 16, 4, 8), (512, 32, 8, 1), coord=(opus.Y, 5, 2, opus.Y))
    assert u.y_shape() == (3, 8) and u.y_strides() == (512, 1)
    assert u(1, 7) == 512 + 5 * 32 + 2 * 8 + 7


@pytest.mark.parametrize("bad, needle", [
    (lambda: opus.make_layout((0, 4)), "positive extent"),
    (lambda: opus.make_layout((4, 4), (1,)), "structure"),
    (lambda: opus.make_layout((4, 4))(4, 0), "outside its extent 4"),
    (lambda: opus.make_layout((4, 4))(1, 2, 3), "takes 2 coordinates"),
    (lambda: opus.make_layout((4, 4), coord=(opus.Y,)), "coord has 1 entries"),
    (lambda: opus.make_layout((4, 4), coord=(opus.Y, 1))(1, 2), "1 open"),
    (lambda: opus.make_layout((4, 2.5)), "Python int or a run-time integer"),
    (lambda: opus.zipped_divide(opus.make_layout((10, 4)), (3, 4)), "does not divide"),
    (lambda: opus.make_layout((4, 4))[1], "needs 2 entries"),
])
def test_bad_layouts_say_what_is_wrong(bad, needle):
    with pytest.raises(opus.TraceError, match=needle):
        bad()


@opus.kernel
def _strided_read(x: opus.Ptr[f32], out: opus.Ptr[f32], ld: i32, rows: i32):
    # a run-time stride and extent: out[t] = x[t // 4 * ld + t % 4]
    u = opus.make_layout((rows, 4), (ld, 1))
    t = opus.thread_id_x()
    out[t] = opus.make_gmem(x).load(u(t // 4, t % 4))


def test_run_time_strides_in_a_kernel_against_numpy():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(16, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        _strided_read[1, 16](x, out, 10, 4)
    t = np.arange(16)
    np.testing.assert_array_equal(out, x[t // 4 * 10 + t % 4])


def test_static_parts_emit_no_code():
    # a static layout called with static coordinates folds completely: the kernel's only
    # index arithmetic is the thread index's
    @opus.kernel
    def k(out: opus.Ptr[i32]):
        u = opus.make_layout(((3, 16), (4, 8)))
        out[opus.thread_id_x()] = u(21, 19) + u[1, :](3)

    src = k.specialize("sm_90a").source
    body = [l.strip() for l in src.splitlines() if "=" in l and not l.strip().startswith(("//", "#"))]
    # 691 + 35 folded into one literal; the only other line reads the thread index
    assert body == ["int v2 = (int)threadIdx.x;", "p_out_1[v2] = 726;"]


def test_swizzled_adds_or_removes_a_swizzle():
    """Offsets of a swizzled copy: the 128-byte bf16 swizzle moves 8-element (16-byte) chunk j
    of 64-element row r to chunk j ^ (r % 8), by hand; shifts are swizzled whole."""
    u = opus.make_layout((8, 64))
    sw = opus.swizzle_bytes(128, opus.bf16)
    s = u.swizzled(sw)
    for r, c in [(0, 0), (1, 0), (3, 17), (7, 63)]:
        assert s(r, c) == r * 64 + ((c // 8) ^ (r % 8)) * 8 + c % 8
    assert (s + 64)(0, 0) == 64 + 8                     # row 1's first chunk
    assert s.swizzled(None)(3, 17) == u(3, 17) and u.swizzle is None
    with pytest.raises(opus.TraceError, match="Layout.swizzled takes an opus.Swizzle"):
        u.swizzled(128)


@opus.kernel
def broadcast_rows(x: opus.Ptr[f32], out: opus.Ptr[f32]):
    """Thread t gathers x[2t .. 2t+1] four times over (a y-dim of stride 0, as a per-row
    factor over an accumulator's columns) and stores the 8 values."""
    t = opus.thread_id_x()
    u = opus.make_layout((4, 2), (0, 1), coord=(opus.Y, opus.Y)) + 2 * t
    v = opus.make_gmem(x).load(u, vec=2)
    opus.make_gmem(out).store(v, opus.make_layout((8,), coord=(opus.Y,)) + 8 * t, vec=4)


def test_a_stride_zero_y_dim_loads_each_address_once():
    x = np.arange(8, dtype=np.float32) * 3 + 1
    out = np.zeros(32, np.float32)
    with opus.set_target("sm_90a", interpret=True):
        broadcast_rows[1, 4](x, out)
    np.testing.assert_array_equal(out.reshape(4, 8), np.tile(x.reshape(4, 2), (1, 4)))
    assert broadcast_rows.source(target="sm_90a").count("*(const opus_f32x2*)(p_x_") == 1
