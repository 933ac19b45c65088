"""Matrix atoms' operands as partition layouts (the original's adaptors): for every atom of every
target, bulk loads through mma.layout_a/b/c feed the instruction and D = A @ B + C matches numpy
in the interpreter; p/y shapes by hand from the opus inventory (1.18) and the PTX ISA."""
import pathlib
import sys

import numpy as np
import pytest

import opus
from opus import f32
from opus.targets import get_target, known_targets

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "targets"))
from isa_lanes import operand_values, tolerance  # noqa: E402  (values every atom reads exactly)

ATOMS = [(arch, atom) for arch in known_targets() for atom in get_target(arch).matrix_atoms()]


def _kernel(atom, vec_a, vec_b, vec_c, b_transposed):
    ab, bb, cd = atom.a, atom.b, atom.c
    ra, rb = atom.reg_a, atom.reg_b  # the registers' types (f32 for tf32)
    M, N, K = atom.shape
    shape = atom.shape

    @opus.kernel
    def tile(a: opus.Ptr[ra], b: opus.Ptr[rb], c: opus.Ptr[cd], d: opus.Ptr[cd]):
        mma = opus.make_mma(ab, bb, cd, shape)
        ga, gb, gc = opus.make_gmem(a), opus.make_gmem(b), opus.make_gmem(c)
        ra = ga.load(mma.layout_a((K, 1)), vec=vec_a)
        # B as the adaptor sees it: x-dims (n, k); stored n x k (transposed) or k x n
        rb = gb.load(mma.layout_b((K, 1) if b_transposed else (1, N)), vec=vec_b)
        rc = gc.load(mma.layout_c((N, 1)), vec=vec_c)
        opus.make_gmem(d).store(mma(ra, rb, rc), mma.layout_c((N, 1)), vec=vec_c)
    return tile


def _widest(layout_y_shape, elem_bytes, operand):
    """The widest vector (<= 16 bytes) along the last register sub-dim, where that sub-dim is
    the innermost of the operand's second x-dim (contiguous in a row-major array); MFMA's C
    runs its registers down the rows (one element per row), which is what swap_ab is for."""
    if operand._slots[-1] != len(operand.shape) - 1:
        return 1
    last = layout_y_shape[-1]
    v = 1
    while v * 2 <= last and last % (v * 2) == 0 and v * 2 * elem_bytes <= 16:
        v *= 2
    return v


@pytest.mark.parametrize("arch,atom", ATOMS, ids=[f"{a}-{t.name}" for a, t in ATOMS])
@pytest.mark.parametrize("wide", [False, True], ids=["vec1", "widest"])
def test_layouts_feed_the_atom(arch, atom, wide):
    M, N, K = atom.shape
    with opus.set_target(arch, interpret=True):
        if wide:
            from opus.lang.mma import MmaAtom
            m = MmaAtom(atom)
            ops = atom.layout.operands
            va = _widest(m.y_shape_a(), atom.a.itemsize, ops[0])
            vb = _widest(m.y_shape_b(), atom.b.itemsize, ops[1])
            vc = _widest(m.y_shape_c(), atom.c.itemsize, ops[2])
            # A and B load a whole 32-bit register's worth at once (tf32: one element; or the
            # lane's only element)
            assert (va * atom.a.itemsize >= 4 or atom.elem_a == 1)
            assert (vb * atom.b.itemsize >= 4 or atom.elem_b == 1)
        else:
            va = vb = vc = 1
        k = _kernel(atom, va, vb, vc, b_transposed=wide)
        rng = np.random.default_rng(3)
        A = operand_values(atom.a, rng, (M, K))
        B = operand_values(atom.b, rng, (K, N))
        C = operand_values(atom.c, rng, (M, N))
        D = np.full((M, N), -1, atom.c.np_dtype)
        Bstore = np.ascontiguousarray(B.T) if wide else B
        k[1, atom.warp](A, Bstore, C, D)
    ref = A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)
    np.testing.assert_allclose(D, ref, **tolerance(atom.c))


def test_mfma_32x32x8_shapes_as_the_original():
    # inventory 1.18: A (32x8) = [(32 p), (1 y, 2 p, 4 y)], C = [(4 y, 2 p, 4 y), (32 p)]
    with opus.set_target("gfx942", interpret=True):
        from opus.lang.mma import MmaAtom
        m = MmaAtom(get_target("gfx942").mma_instruction(opus.f16, opus.f16, f32, (32, 32, 8)))
        assert m.p_shape_a() == (32, 2) and m.y_shape_a() == (1, 4)
        assert m.p_shape_b() == (32, 2) and m.y_shape_b() == (1, 4)
        assert m.p_shape_c() == (2, 32) and m.y_shape_c() == (4, 4)


def test_mma_sync_m16n8k16_register_order_is_the_ptx_one():
    # PTX: a0,a1 row g cols 2t,2t+1; a2,a3 row g+8; a4,a5 row g cols 2t+8..; a6,a7 row g+8:
    # the y sub-dims are (row half h, k half kk, element e) and registers run (kk, h, e)
    atom = get_target("sm_90a").mma_instruction(opus.bf16, opus.bf16, f32, (16, 8, 16))
    from opus.lang.mma import MmaAtom
    m = MmaAtom(atom)
    assert m.y_shape_a() == (2, 2, 2) and m.p_shape_a() == (8, 4)
    lay = atom.layout.operands[0]
    want = [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]   # lane 0
    assert [lay.coords(0, i) for i in range(8)] == want


SQUARE = [(arch, atom) for arch, atom in ATOMS if atom.m == atom.n]


@pytest.mark.parametrize("arch,atom", SQUARE, ids=[f"{a}-{t.name}" for a, t in SQUARE])
def test_swap_ab_holds_c_along_rows_and_computes_the_same_product(arch, atom):
    # inventory 1.18: swap_ab issues (b, a, c), the instruction computes C^T; lane l then holds
    # C[m = l mod 32][n = 8r + 4(l div 32) + j] on 32x32x8: a row's contiguous run, vector stores
    M, N, K = atom.shape
    ab, bb, cd, shape = atom.a, atom.b, atom.c, atom.shape
    ra, rb = atom.reg_a, atom.reg_b

    @opus.kernel
    def tile(a: opus.Ptr[ra], b: opus.Ptr[rb], c: opus.Ptr[cd], d: opus.Ptr[cd], VC: opus.constexpr):
        mma = opus.make_mma(ab, bb, cd, shape, swap_ab=True)
        ga, gb, gc = opus.make_gmem(a), opus.make_gmem(b), opus.make_gmem(c)
        ra = ga.load(mma.layout_a((K, 1)))
        rb = gb.load(mma.layout_b((1, N)))
        rc = gc.load(mma.layout_c((N, 1)), vec=VC)
        opus.make_gmem(d).store(mma(ra, rb, rc), mma.layout_c((N, 1)), vec=VC)

    from opus.lang.mma import MmaAtom
    swapped = MmaAtom(atom, swap_ab=True)
    vc = swapped.y_shape_c()[-1]
    assert vc > 1   # C's registers now run along rows: a vector store per run
    rng = np.random.default_rng(5)
    A = operand_values(ab, rng, (M, K))
    B = operand_values(bb, rng, (K, N))
    C = operand_values(cd, rng, (M, N))
    D = np.full((M, N), -1, cd.np_dtype)
    with opus.set_target(arch, interpret=True):
        tile[1, atom.warp](A, B, C, D, VC=min(vc, 4))
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64) + C, **tolerance(cd))
    if (M, K) == (32, 8) and arch.startswith("gfx"):
        for lane in (0, 33, 63):
            for i in range(16):
                r, j = divmod(i, 4)
                assert swapped.coords_c(lane, i) == (lane % 32, 8 * r + 4 * (lane // 32) + j)


def test_swap_ab_needs_the_swapped_atom():
    @opus.kernel
    def k(out: opus.Ptr[f32]):
        opus.make_mma(opus.bf16, opus.bf16, f32, (16, 8, 16), swap_ab=True)

    with pytest.raises(opus.TraceError, match="swap_ab=True needs the 8x16x16 atom"):
        k.specialize("sm_90a")
