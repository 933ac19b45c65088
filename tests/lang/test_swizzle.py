"""XOR swizzles (lang/layout.py Swizzle): the TMA/wgmma byte modes by hand, bijection, bank
conflicts counted in Python, and a transpose through a swizzled shared tile in the interpreter
against numpy."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32


def test_128_byte_mode_on_halves_permutes_16_byte_chunks_by_row():
    sw = opus.swizzle_bytes(128, opus.f16)
    assert (sw.bits, sw.base, sw.shift) == (3, 3, 3) and sw.period == 512
    u = opus.make_layout((8, 64), swizzle=sw)                 # 8 rows of 128 bytes
    for r in range(8):
        for c in range(8):                                    # chunk c of row r -> c ^ r
            assert u(r, 8 * c) == 64 * r + 8 * (c ^ r)
            assert [u(r, 8 * c + j) - u(r, 8 * c) for j in range(8)] == list(range(8))


@pytest.mark.parametrize("mode, dtype, base", [(32, opus.f16, 3), (64, opus.f32, 2),
                                               (128, opus.fp8_e4m3, 4), (128, opus.f32, 2)])
def test_modes_keep_16_byte_chunks_whole(mode, dtype, base):
    sw = opus.swizzle_bytes(mode, dtype)
    assert sw.base == base and (1 << sw.base) * dtype.itemsize == 16
    assert sw.bits == {32: 1, 64: 2, 128: 3}[mode]


def test_a_swizzle_is_a_bijection_on_each_period():
    sw = opus.Swizzle(3, 2, 4)
    images = [sw(o) for o in range(4 * sw.period)]
    assert sorted(images) == list(range(4 * sw.period))
    assert all(sw(o + sw.period) == sw(o) + sw.period for o in range(sw.period))


def banks(offsets, elem_bytes):
    return [(o * elem_bytes // 4) % 32 for o in offsets]


def test_column_reads_of_a_swizzled_f32_tile_hit_32_banks():
    # 32 x 32 f32 tile; a warp reads one column (32 rows): plain -> all in one bank,
    # Swizzle(5, 0, 5) (XOR the column with the row) -> 32 different banks
    plain = opus.make_layout((32, 32))
    swz = opus.make_layout((32, 32), swizzle=opus.Swizzle(5, 0, 5))
    for c in range(32):
        assert len(set(banks([plain(r, c) for r in range(32)], 4))) == 1
        assert len(set(banks([swz(r, c) for r in range(32)], 4))) == 32
        assert len(set(banks([swz(c, r) for r in range(32)], 4))) == 32   # rows still too


@opus.kernel
def transpose_tile(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32, SWZ: opus.constexpr = True):
    # one 32 x 32 tile per block: rows read coalesced, written to shared memory; columns read
    # from shared memory and written coalesced
    tile = opus.alloc_smem(f32, 32 * 32)
    s = opus.make_layout((32, 32), swizzle=opus.Swizzle(5, 0, 5) if SWZ else None)
    bx, by = opus.block_id_x() * 32, opus.block_id_y() * 32
    tx, ty = opus.thread_id_x(), opus.thread_id_y()
    g, o = opus.make_gmem(x), opus.make_gmem(out)
    for j in range(0, 32, 8):
        tile[s(ty + j, tx)] = g[(by + ty + j) * n + bx + tx]
    opus.sync_threads()
    for j in range(0, 32, 8):
        o[(bx + ty + j) * n + by + tx] = tile[s(tx, ty + j)]


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("swz", [True, False])
def test_transpose_through_a_swizzled_tile(target, swz):
    n = 64
    x = np.random.default_rng(2).standard_normal((n, n)).astype(np.float32)
    out = np.full((n, n), np.nan, np.float32)
    with opus.set_target(target, interpret=True):
        transpose_tile[(2, 2), (32, 8)](x, out, n, SWZ=swz)
    np.testing.assert_array_equal(out, x.T)


def test_vector_access_may_not_cross_a_swizzle_run():
    @opus.kernel
    def k(x: opus.Ptr[f16], out: opus.Ptr[f16]):
        tile = opus.alloc_smem(f16, 512)
        u = opus.make_layout((8, 64), swizzle=opus.swizzle_bytes(128, f16))
        tile.store(opus.make_gmem(x).load(opus.make_layout((8, 64)), vec=16), u, vec=16)

    with pytest.raises(opus.TraceError, match="vec=16 crosses the swizzle's runs of 8"):
        k.specialize("sm_90a")


@opus.kernel(block=64)
def swizzled_roundtrip(x: opus.Ptr[f16], out: opus.Ptr[f16]):
    # 8 rows x 64 halves, one 16-byte chunk per thread, through a 128-byte-swizzled tile
    tile = opus.alloc_smem(f16, 512)
    t = opus.thread_id_x()
    sw = opus.make_layout((8, 64), swizzle=opus.swizzle_bytes(128, f16))
    v = opus.make_gmem(x).load(t * 8, vec=8)
    tile.store(v, sw(t // 8, t % 8 * 8), vec=8)
    opus.sync_threads()
    opus.make_gmem(out).store(tile.load(sw(t // 8, t % 8 * 8), vec=8), t * 8, vec=8)
    opus.make_gmem(out).store(tile.load(t * 8, vec=8), 512 + t * 8, vec=8)


def test_swizzled_chunks_land_where_the_pattern_says():
    x = np.arange(512, dtype=np.float16)
    out = np.full(1024, np.nan, np.float16)
    with opus.set_target("sm_90a", interpret=True):
        swizzled_roundtrip[1, 64](x, out)
    np.testing.assert_array_equal(out[:512], x)                # read back through the swizzle
    raw = out[512:].reshape(8, 8, 8)                            # row, stored chunk, element
    want = np.empty_like(raw)
    for r in range(8):
        for c in range(8):
            want[r, c ^ r] = x[64 * r + 8 * c: 64 * r + 8 * c + 8]
    np.testing.assert_array_equal(raw, want)
