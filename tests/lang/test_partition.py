"""x/p/y partitions (lang/partition.py) and layout-driven bulk access (lang/memory.py), in the
interpreter as NVIDIA (warp 32) and AMD (wave 64) targets, against numpy. The guide's 48x32
example (opus guide section 11) is the first test, as written there."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32, P, Y

TARGETS = ["sm_90a", "gfx942"]

# the guide: tensor [48, 32] viewed as [[3, 16], [4, 8]] with dims ((y, p), (p, y)):
# 8 contiguous elements per thread per row, 4 threads per row, 16 rows, 3 repeats
GUIDE = opus.Tile((3, 16, 4, 8), ((Y, P), (P, Y)))


@opus.kernel(block=64)
def guide_tile(x: opus.Ptr[f16], out: opus.Ptr[f16], ld: i32):
    lane = opus.thread_id_x()
    u = opus.partition(GUIDE, (ld, 1), (lane // 4, lane % 4))  # the guide's p-coordinates
    regs = opus.make_gmem(x).load(u, vec=8)                       # 3 issues x 8 elements
    mine = opus.make_layout((24,)) + lane * 24
    opus.make_gmem(out).store(regs, mine, vec=8)


def reference_guide(x, ld):
    t = np.arange(64)[:, None, None]
    y0 = np.arange(3)[None, :, None]
    y1 = np.arange(8)[None, None, :]
    rows, cols = 16 * y0 + t // 4, (t % 4) * 8 + y1
    return x.reshape(-1)[rows * ld + cols].reshape(64 * 24)


@pytest.mark.parametrize("target", TARGETS)
def test_the_guides_48x32_example(target):
    ld = 40  # a padded row: the tile is x[:48, :32] of a 48 x 40 array
    x = (np.arange(48 * ld) % 2039).astype(np.float16)
    out = np.full(64 * 24, np.nan, np.float16)
    with opus.set_target(target, interpret=True):
        guide_tile[1, 64](x, out, ld)
    np.testing.assert_array_equal(out, reference_guide(x, ld))


def test_unfold_functions_by_hand():
    dim, shape = ((Y, P), (P, Y)), (3, 16, 4, 8)
    assert opus.unfold_x_stride(dim, shape, (32, 1)) == (512, 32, 8, 1)
    assert opus.unfold_p_coord(dim, (7, 2)) == (Y, 7, 2, Y)
    assert opus.p_shape(dim, shape) == (16, 4) and opus.y_shape(dim, shape) == (3, 8)
    u = opus.partition(GUIDE, (32, 1), (7, 2))
    assert u.y_shape() == (3, 8)
    assert u(2, 5) == (16 * 2 + 7) * 32 + 2 * 8 + 5


@opus.kernel(block=64)
def guide_default_p(x: opus.Ptr[f16], out: opus.Ptr[f16]):
    # p-coordinates left to the default: the thread unravelled row-major over p_shape (16, 4)
    u = opus.partition(GUIDE)                     # packed 48 x 32
    g, o = opus.make_gmem(x), opus.make_gmem(out)
    o.store(g.load(u, vec=8), u, vec=8)           # a tile copy through registers


@pytest.mark.parametrize("target", TARGETS)
def test_default_p_coordinates_cover_the_tile_once(target):
    # 64 threads; on the NVIDIA target that is two warps (the default uses the block's
    # thread index), on AMD one wave (its lane): the copy must be exact either way
    x = np.random.default_rng(1).standard_normal(48 * 32).astype(np.float16)
    out = np.full(48 * 32, np.nan, np.float16)
    with opus.set_target(target, interpret=True):
        guide_default_p[1, 64](x, out)
    np.testing.assert_array_equal(out, x)


@opus.kernel(block=32)
def wide_issue(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
    # 16 f32 per issue (64 bytes) is split into 16-byte accesses; bounded views read 0 past n
    t = opus.thread_id_x()
    u = opus.make_layout((2, 16), (512, 1)) + t * 16
    g, o = opus.make_gmem(x, n), opus.make_gmem(out, n)
    o.store(g.load(u, vec=16), u, vec=16)


@pytest.mark.parametrize("target", TARGETS)
def test_issues_wider_than_16_bytes_split_and_keep_bounds(target):
    n = 1000  # rows at 0 and 512 of 32 threads x 16: the second row ends past n
    x = np.arange(1024, dtype=np.float32) + 1
    out = np.full(1024, -1, np.float32)
    with opus.set_target(target, interpret=True):
        wide_issue[1, 32](x, out, n)
    want = np.full(1024, -1, np.float32)
    want[:n] = x[:n]
    np.testing.assert_array_equal(out, want)


def test_vector_accesses_need_a_contiguous_last_y_dim():
    @opus.kernel
    def k(x: opus.Ptr[f32], out: opus.Ptr[f32]):
        u = opus.make_layout((4, 4), (1, 4))   # column-major: the last dim strides by 4
        out[0] = opus.make_gmem(x).load(u, vec=4)[0]

    with pytest.raises(opus.TraceError, match="contiguous"):
        k.specialize("sm_90a")


def test_vec_must_divide_the_last_y_extent():
    @opus.kernel
    def k(x: opus.Ptr[f32], out: opus.Ptr[f32]):
        out[0] = opus.make_gmem(x).load(opus.make_layout((4, 6)), vec=4)[0]

    with pytest.raises(opus.TraceError, match="does not divide"):
        k.specialize("sm_90a")


def test_partition_checks_p_coordinate_count():
    with pytest.raises(opus.TraceError, match="has 1 entries; dim"):
        opus.partition(GUIDE, (32, 1), (3,))
