"""The tiled MMA over warpgroups (opus.make_tiled_mma with a wgmma atom, sm_90a) in the
interpreter against numpy: 1, 2 and 4 warpgroups along m and n, atom repeats along m, n, k,
A from shared memory and from registers, B K- and N-major; the partition layouts element by
element against PTX's accumulator formula; fence/wait on tiled accumulators; HGMMA in SASS;
bad arguments. Kernel and reference: tiled_wgmma_kernels.py (shared with the GPU twin in
test_gpu_wgmma.py)."""
import numpy as np
import pytest

import opus
from opus import f16, bf16, f32
from opus import interp

import tiled_wgmma_kernels as T

CASES = [  # dtype, atom N, expand, tile (warpgroups), options
    (f16, 128, (1, 1, 4), (2, 1, 1), {}),                  # 128 x 128 x 64 from 2x m64n128k16
    (f16, 32, (2, 2, 2), (1, 1, 1), {}),                   # one warpgroup, repeats m, n, k
    (f16, 64, (1, 1, 2), (1, 2, 1), {}),                   # 2 warpgroups along n
    (bf16, 32, (2, 1, 1), (2, 2, 1), {}),                  # 4 warpgroups, m repeats between
    (f16, 64, (1, 2, 2), (2, 1, 1), {"A_FROM": "regs"}),  # A from registers
    (bf16, 64, (2, 1, 2), (1, 2, 1), {"B_MAJOR": "MN"}),  # B's tile N-major (transposed)
    (f16, 128, (1, 1, 4), (2, 1, 1), {"A_FROM": "regs", "B_MAJOR": "MN"}),
]
IDS = [f"{d.name}-n{n}-e{''.join(map(str, e))}-t{''.join(map(str, t))}-"
       f"{'-'.join(f'{v}' for v in kw.values()) or 'smem'}" for d, n, e, t, kw in CASES]


@pytest.mark.parametrize("dtype,wn,expand,tile,kw", CASES, ids=IDS)
def test_tiled_wgmma_gemm_matches_numpy(dtype, wn, expand, tile, kw):
    with opus.set_target("sm_90a", interpret=True), interp.checking():
        D, want = T.run(dtype, wn, expand, tile, blocks=(2, 2), seed=wn + sum(expand), **kw)
    np.testing.assert_allclose(D, want, rtol=1e-5, atol=1e-4)


def test_layout_c_matches_ptx_accumulator_formula():
    """PTX 9.7.15.5.1.1: warpgroup thread t (warp w, groupID g, threadID_in_group q) holds as
    element i of its m64nN accumulator D[16w + 8((i // 2) % 2) + g][8(i // 4) + 2q + i % 2];
    tiled: row em * T_M * 64 + gm * 64 + that, column en * T_N * N + gn * N + that, registers
    [E_M][E_N][atom's]."""
    from opus.lang.tiled_wgmma import TiledWgmma
    from opus.lang.wgmma import Wgmma
    from opus.targets import get_target
    from opus.targets.nv_wgmma import wgmma_name
    n, (em, en), (tm, tn) = 16, (2, 3), (2, 2)
    row = get_target("sm_90a").instruction(wgmma_name(n, 16, f16, f16, f32, "smem"))
    t = TiledWgmma(Wgmma(row), (em, en, 1), (tm, tn, 1))
    ldc = en * tn * n
    for gm, gn in ((0, 0), (1, 0), (1, 1)):
        for thread in (0, 37, 127):
            w, g, q = thread // 32, thread % 32 // 4, thread % 4
            u = t.layout_c((ldc, 1), (gm, w, g, gn, q))
            assert u.y_shape() == (em, en, n // 8, 2, 2)
            for i in range(em):
                for j in range(en):
                    for e in range(n // 2):
                        r = i * tm * 64 + gm * 64 + 16 * w + 8 * ((e // 2) % 2) + g
                        c = j * tn * n + gn * n + 8 * (e // 4) + 2 * q + e % 2
                        assert u(i, j, e // 4, (e // 2) % 2, e % 2) == r * ldc + c


def test_sass_has_one_hgmma_per_atom_issue():
    """128 x 128 x 64 over 2 warpgroups: E_K = 4 wgmmas m64n128k16 per K tile."""
    sass = T.tiled_wg_gemm_for(f16).sass(target="sm_90a", WN=128, EXPAND=(1, 1, 4),
                                         TILE=(2, 1, 1))
    lines = [l for l in sass.splitlines() if "GMMA" in l]
    assert len(lines) == 4 and all("HGMMA.64x128x16.F32 " in l for l in lines), lines
    assert "WARPGROUP.ARRIVE" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass


def test_sass_of_register_a_and_repeats():
    """One warpgroup, expand (2, 2, 2), A from registers: 8 HGMMA.64x32x16, each with a
    register A operand before the descriptor."""
    sass = T.tiled_wg_gemm_for(bf16).sass(target="sm_90a", WN=32, EXPAND=(2, 2, 2),
                                          TILE=(1, 1, 1), A_FROM="regs")
    lines = [l for l in sass.splitlines() if "GMMA" in l]
    assert len(lines) == 8 and all("HGMMA.64x32x16.F32.BF16 R" in l for l in lines), lines


# -- fence / wait on tiled accumulators, layouts, errors --------------------------------------

def _trace(body, target="sm_90a"):
    @opus.kernel
    def k(x: opus.Ptr[f16], out: opus.Ptr[f32]):
        body(x, out)
    return k.specialize(target)


def _tmma(wn=64, expand=(1, 1, 1), tile=(2, 1, 1), a_from="smem"):
    return opus.make_tiled_mma(opus.make_wgmma(f16, f16, f32, (64, wn, 16), a_from=a_from),
                               expand, tile)


def test_tiled_accumulator_cannot_be_read_in_flight():
    def body(x, out):
        t = _tmma()
        acc = t.zeros_c()
        acc + 1.0
    with pytest.raises(opus.TraceError, match="cannot be read before its wgmma completes"):
        _trace(body)


def test_warpgroups_along_k_are_refused():
    with pytest.raises(opus.TraceError, match="k must be 1"):
        _trace(lambda x, out: _tmma(tile=(1, 1, 2)))


def test_b_has_no_register_layout_and_smem_a_needs_smem_a():
    with pytest.raises(opus.TraceError, match="B is in shared memory"):
        _trace(lambda x, out: _tmma().layout_b((1, 64)))
    with pytest.raises(opus.TraceError, match="reads A from shared memory"):
        _trace(lambda x, out: _tmma().layout_a((64, 1)))

    def body(x, out):
        s = opus.alloc_smem(f16, 128 * 64, align=1024)
        _tmma(a_from="regs").smem_a(s, opus.make_layout((128, 64)))
    with pytest.raises(opus.TraceError, match="takes A in registers"):
        _trace(body)


def test_uneven_row_blocks_are_refused():
    """Warpgroup 1's rows (64..127) at offsets that are not warpgroup 0's shifted by one step
    (rows in blocks of 48 with a gap after each): one descriptor cannot serve both warpgroups
    with a run-time start address. Evenly spaced 64-row blocks (here 128 rows apart) are fine."""
    def body(x, out):
        s = opus.alloc_smem(f16, 256 * 64, align=1024)
        sw = opus.swizzle_bytes(128, f16)
        apart = opus.make_layout(((2, 64), 64), ((128 * 64, 64), 1), swizzle=sw)
        _tmma().smem_a(s, apart)
        gaps = opus.make_layout(((3, 48), 64), ((48 * 64 + 512, 64), 1), swizzle=sw)
        _tmma().smem_a(s, gaps)  # ERR: gaps
    line = next(i for i, l in enumerate(open(__file__), 1) if "# ERR: gaps" in l)
    with pytest.raises(opus.TraceError,
                       match=rf"test_tiled_wgmma.py:{line} .*do not repeat at one offset"):
        _trace(body)


def test_operand_kinds_checked():
    def body(x, out):
        s = opus.alloc_smem(f16, 128 * 64, align=1024)
        t = _tmma()
        la = opus.make_layout((128, 64), swizzle=opus.swizzle_bytes(128, f16))
        t(t.smem_b(s, la), t.smem_b(s, la))
    with pytest.raises(opus.TraceError,
                       match=r"A must be tmma.smem_a\(view, layout\).*got tmma.smem_b"):
        _trace(body)


def test_wgmma_tiling_only_on_sm_90a():
    with pytest.raises(opus.TraceError, match="sm_90a"):
        _trace(lambda x, out: _tmma(), target="sm_90")


def test_register_operands_checked():
    def wrong_a(x, out):
        s = opus.alloc_smem(f16, 64 * 64, align=1024)
        t = _tmma(expand=(1, 1, 2), tile=(1, 1, 1), a_from="regs")
        lb = opus.make_layout((64, 64), swizzle=opus.swizzle_bytes(128, f16))
        t(opus.make_gmem(x).load(0, vec=8), (s, lb))   # one atom's A; the tile takes 2 x 8
    with pytest.raises(opus.TraceError, match=r"A \(from registers\) must be a f16x16"):
        _trace(wrong_a)

    def wrong_c(x, out):
        _tmma(expand=(2, 1, 1)).acc(opus.make_gmem(x).load(0, vec=8))
    with pytest.raises(opus.TraceError, match="accumulator must be a f32x64 register vector"):
        _trace(wrong_c)


@opus.kernel(block=256)
def _store_inside(out: opus.Ptr[f32], rows: opus.i32, cols: opus.i32):
    tmma = opus.make_tiled_mma(opus.make_wgmma(f16, f16, f32, (64, 16, 16)), (1, 2, 1), (2, 1, 1))
    d = opus.wgmma_wait(0, opus.wgmma_fence(tmma.zeros_c())) + 1.0
    opus.make_gmem(out).store_if(tmma.inside_c(rows, cols), d, tmma.layout_c((32, 1)), vec=1)


def test_inside_c_over_warpgroups():
    """A 128 x 32 tile over 2 warpgroups: only the rows x cols corner is stored (ragged edges
    of a wgmma GEMM's D)."""
    out = np.zeros((128, 32), np.float32)
    with opus.set_target("sm_90a", interpret=True):
        _store_inside[1, 256](out, 100, 21)
    want = np.zeros((128, 32), np.float32)
    want[:100, :21] = 1
    np.testing.assert_array_equal(out, want)
