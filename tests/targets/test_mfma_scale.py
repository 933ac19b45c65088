"""gfx950's block-scaled f8f6f4 MFMAs (v_mfma_scale_f32_16x16x128_f8f6f4, _32x32x64_f8f6f4) in
every operand-format pairing, against a numpy reference written from the ISA's definition:

    D[m][n] = C[m][n] + sum_b 2^(Xa[m][b] - 127) * 2^(Xb[b][n] - 127) * sum_{k in block b} A[m][k] B[k][n]

with blocks of 32 K elements and lane l passing the scale of row l % M (column l % N of B), block
l // M (CDNA4 ISA guide ch. 7; the ROCm blog's section 5.4; Triton's scaled-MFMA scale layout).
A and B are placed into the lanes by the tables transcribed from the documents (isa_lanes.py),
decoded with ml_dtypes, the products and scales applied in float64.

* the interpreter as gfx950, all 50 rows, one e8m0 per lane and four packed with opsel;
* the layouts (mma.layout_a/b/c, swap_ab) feeding the atom in a small scaled GEMM, in the
  interpreter and as generated HIP run on the host (the builtin shimmed from the ISA tables);
* AMDGCN: clang issues v_mfma_scale_f32_* with the pairing's cbsz/blgp and 8/6/4 VGPRs per
  operand; opsel reaches op_sel/op_sel_hi;
* special values: an E8M0 255 is NaN, the scales' extremes are exact;
* on an AMD gfx950 GPU (marked gpu).
"""
import re

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import f32
from opus.targets import get_target

from isa_lanes import assert_coordinates_match, from_lanes, tables_for, to_lanes

GFX950 = get_target("gfx950")
ROWS = GFX950.matrix_atoms(scaled=True)
FORMATS = (opus.fp8_e4m3, opus.fp8_e5m2, opus.fp6_e2m3, opus.fp6_e3m2, opus.fp4_e2m1)
CODE = {"fp8_e4m3": 0, "fp8_e5m2": 1, "fp6_e2m3": 2, "fp6_e3m2": 3, "fp4_e2m1": 4}  # cbsz/blgp


def ids(rows):
    return [r.name for r in rows]


# -- values and the reference ----------------------------------------------------------------------

def codes(dtype, rng, shape):
    """Random finite codes of ``dtype`` (every fp4/fp6 code; fp8 without NaN/inf), as its
    ml_dtypes array (one code per byte)."""
    bits = dtype.bits
    c = rng.integers(0, 1 << bits, shape).astype(np.uint8)
    x = c.view(dtype.np_dtype)
    bad = ~np.isfinite(x.astype(np.float64))
    while bad.any():  # redraw the fp8 NaN / inf codes
        c[bad] = rng.integers(0, 1 << bits, int(bad.sum()))
        x = c.view(dtype.np_dtype)
        bad = ~np.isfinite(x.astype(np.float64))
    return x


def reference(A, B, C, Xa, Xb):
    """The ISA's definition in float64: per 32-wide K block, the exact dot product times
    2^(Xa - 127) * 2^(Xb - 127) (Xa [m, blocks], Xb [blocks, n] as E8M0 codes; 255: NaN)."""
    def scale(x):
        x = x.astype(np.float64)
        return np.where(x == 255, np.nan, 2.0 ** (x - 127))
    A, B = A.astype(np.float64), B.astype(np.float64)
    D = C.astype(np.float64).copy()
    for b in range(A.shape[-1] // 32):
        k = slice(32 * b, 32 * b + 32)
        D = D + scale(Xa[..., :, b:b + 1]) * scale(Xb[..., b:b + 1, :]) * (A[..., :, k] @ B[..., k, :])
    return D


def scale_lanes(Xa, Xb, m, n):
    """[warps, 64] scale bytes per lane by the ISA's rule: lane l = b * m + row (b * n + col)."""
    W, _, nb = Xa.shape
    sa = np.zeros((W, 64), np.uint8)
    sb = np.zeros((W, 64), np.uint8)
    for lane in range(64):
        sa[:, lane] = Xa[:, lane % m, lane // m]
        sb[:, lane] = Xb[:, lane // n, lane % n]
    return sa, sb


# -- the interpreter, lanes placed by the documents' tables -------------------------------------

def lane_kernel(row):
    """Each lane loads its 32 A and B elements from a[lane * 32 + i] (b likewise), its C from
    c[lane * elem_c + i], its scale (or four of them: the one at byte lane % 4 is the lane's)
    from sa[lane] (sa[4 * lane .. +3]) and stores D as it holds it."""
    ta, tb, shape = row.a, row.b, row.shape

    @opus.kernel
    def k(a: opus.Ptr[ta], b: opus.Ptr[tb], c: opus.Ptr[f32], d: opus.Ptr[f32],
          sa: opus.Ptr[opus.e8m0], sb: opus.Ptr[opus.e8m0], SEL: opus.constexpr):
        mma = opus.make_mma(ta, tb, f32, shape, scaled=True)
        t = opus.thread_id_x()
        av = opus.concat(opus.load(a, t * 32, vec=16), opus.load(a, t * 32 + 16, vec=16))
        bv = opus.concat(opus.load(b, t * 32, vec=16), opus.load(b, t * 32 + 16, vec=16))
        cv = opus.make_vector([c[t * mma.elem_c + i] for i in range(mma.elem_c)])
        if SEL < 0:
            dv = mma(av, bv, cv, scale_a=sa[t], scale_b=sb[t])
        else:
            x4a = opus.make_vector([sa[t * 4 + i] for i in range(4)])
            x4b = opus.make_vector([sb[t * 4 + i] for i in range(4)])
            dv = mma(av, bv, cv, scale_a=x4a, scale_b=x4b, opsel_a=SEL, opsel_b=3 - SEL)
        for i in range(mma.elem_c):
            d[t * mma.elem_c + i] = dv[i]
    return k


def pack(dtype, x):
    """A flat array of ``dtype`` values as the kernel argument (sub-byte types packed)."""
    x = np.ascontiguousarray(x).reshape(-1)
    return opus.pack(x, dtype) if dtype.packed else x


def run_lanes(row, A, B, C, Xa, Xb, sel=None):
    W = len(A)
    ta, tb, tc = tables_for(row)
    a, b, c = (to_lanes(X, t) for X, t in ((A, ta), (B, tb), (C, tc)))
    sa, sb = scale_lanes(Xa, Xb, row.m, row.n)
    if sel is not None:  # four bytes per lane, the lane's own at byte sel (A) / 3 - sel (B)
        rng = np.random.default_rng(1)
        sa4 = rng.integers(0, 255, (W * 64, 4)).astype(np.uint8)
        sb4 = rng.integers(0, 255, (W * 64, 4)).astype(np.uint8)
        sa4[:, sel], sb4[:, 3 - sel] = sa.reshape(-1), sb.reshape(-1)
        sa, sb = sa4, sb4
    d = np.full(c.size, np.nan, np.float32)
    with opus.set_target("gfx950", interpret=True):
        lane_kernel(row)[1, W * 64](
            pack(row.a, a), pack(row.b, b), c.reshape(-1), d,
            sa.reshape(-1).view(ml_dtypes.float8_e8m0fnu), sb.reshape(-1).view(ml_dtypes.float8_e8m0fnu),
            SEL=-1 if sel is None else sel)
    return from_lanes(d.reshape(-1, row.elem_c), tc)


def operands(row, rng, W=2, lo=117, hi=138):
    A = codes(row.a, rng, (W, row.m, row.k))
    B = codes(row.b, rng, (W, row.k, row.n))
    C = rng.standard_normal((W, row.m, row.n)).astype(np.float32)
    Xa = rng.integers(lo, hi, (W, row.m, row.k // 32)).astype(np.uint8)
    Xb = rng.integers(lo, hi, (W, row.k // 32, row.n)).astype(np.uint8)
    return A, B, C, Xa, Xb


def test_every_pairing_of_both_shapes_is_a_row_of_gfx950_only():
    got = {(r.a.name, r.b.name, r.shape) for r in ROWS}
    assert got == {(a.name, b.name, s) for a in FORMATS for b in FORMATS
                   for s in ((16, 16, 128), (32, 32, 64))}
    assert get_target("gfx942").matrix_atoms(scaled=True) == []
    for r in ROWS:
        assert r.isa == f"v_mfma_scale_f32_{r.m}x{r.n}x{r.k}_f8f6f4" and r.c is f32


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_coordinates_are_the_isa_tables(row):
    assert_coordinates_match(row)


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_interpreter_is_the_isa_definition(row):
    A, B, C, Xa, Xb = operands(row, np.random.default_rng(CODE[row.a.name] * 5 + CODE[row.b.name]))
    want = reference(A, B, C, Xa, Xb)
    assert np.isfinite(want).all() and np.abs(want).max() > 1
    D = run_lanes(row, A, B, C, Xa, Xb)
    np.testing.assert_allclose(D, want, rtol=1e-6, atol=1e-6)
    # the scales matter block by block: one block's scale of one row doubled changes that row
    Xa2 = Xa.copy()
    Xa2[:, 3, 1] += 1
    assert not np.allclose(reference(A, B, C, Xa2, Xb)[:, 3], want[:, 3])


OPSEL_ROWS = [r for r in ROWS if r.a.name in ("fp4_e2m1", "fp8_e5m2") and r.b.name in ("fp6_e3m2", "fp8_e4m3")]


@pytest.mark.parametrize("sel", [0, 1, 2, 3])
@pytest.mark.parametrize("row", OPSEL_ROWS, ids=ids(OPSEL_ROWS))
def test_opsel_picks_the_byte_of_a_packed_scale(row, sel):
    A, B, C, Xa, Xb = operands(row, np.random.default_rng(sel), W=1)
    np.testing.assert_allclose(run_lanes(row, A, B, C, Xa, Xb, sel=sel), reference(A, B, C, Xa, Xb),
                               rtol=1e-6, atol=1e-6)


def test_scale_255_is_nan_and_the_extremes_are_exact():
    row = GFX950.mma_instruction(opus.fp4_e2m1, opus.fp4_e2m1, f32, (32, 32, 64), scaled=True)
    A = np.full((1, 32, 64), 1.0).astype(ml_dtypes.float4_e2m1fn)
    B = np.full((1, 64, 32), 6.0).astype(ml_dtypes.float4_e2m1fn)
    C = np.zeros((1, 32, 32), np.float32)
    Xa = np.full((1, 32, 2), 127, np.uint8)
    Xb = np.full((1, 2, 32), 127, np.uint8)
    Xa[0, 0, 0] = 0      # 2^-127 (times B's 2^127 below: x1)
    Xb[0, 0, 0] = 254    # 2^127
    Xa[0, 5, 1] = 255    # NaN: row 5 is NaN
    D = run_lanes(row, A, B, C, Xa, Xb)[0]
    assert D[0, 0] == 192 + 192                     # block 0: 2^-127 * 2^127 * 192, exact
    assert np.isinf(D[1:5, 0]).all() and np.isinf(D[6:, 0]).all()  # 2^127 * 192: f32 overflow
    assert (D[0, 1:] == np.float32(2.0 ** -127 * 192 + 192)).all()
    assert np.isnan(D[5]).all()                     # Xa 255 in row 5's block 1
    rest = np.delete(D, 5, axis=0)[1:, 1:]
    assert (rest == 384).all()


# -- the layouts, swap_ab and a GEMM: interpreter and host execution ------------------------------

def gemm(a_t, b_t, shape, swap_ab=False):
    """D (M x N) = sum over K tiles of the scaled atom: A (M x K) and B stored N x K (K-major,
    as MX data is), scales Xa (M x K/32) and Xb (N x K/32) row-major, one wave per tile of D."""
    m, n, k = shape
    va = 32 if a_t.bits == 4 else 16   # one K run of the lane
    vb = 32 if b_t.bits == 4 else 16

    @opus.kernel
    def mx_gemm(a: opus.Ptr[a_t], b: opus.Ptr[b_t], xa: opus.Ptr[opus.e8m0], xb: opus.Ptr[opus.e8m0],
                d: opus.Ptr[f32], M: opus.i32, N: opus.i32, K: opus.i32):
        mma = opus.make_mma(a_t, b_t, f32, shape, scaled=True, swap_ab=swap_ab)
        tiles_n = N // n
        tm, tn = opus.block_id_x() // tiles_n * m, opus.block_id_x() % tiles_n * n
        l = opus.lane_id()
        acc = mma.zeros_c()
        for kt in range(0, K, k):
            ra = opus.make_gmem(a + tm * K + kt).load(mma.layout_a((K, 1)), vec=va)
            rb = opus.make_gmem(b + tn * K + kt).load(mma.layout_b((K, 1)), vec=vb)
            # the lane's scales: row l % m of A, column l % n of B, block l // m of this K tile
            sa = xa[(tm + l % m) * (K // 32) + kt // 32 + l // m]
            sb = xb[(tn + l % n) * (K // 32) + kt // 32 + l // n]
            acc = mma(ra, rb, acc, scale_a=sa, scale_b=sb)
        opus.make_gmem(d + tm * N + tn).store(acc, mma.layout_c((N, 1)))
    return mx_gemm


GEMM_CASES = [(opus.fp4_e2m1, opus.fp4_e2m1, (32, 32, 64)), (opus.fp8_e4m3, opus.fp4_e2m1, (16, 16, 128)),
              (opus.fp6_e2m3, opus.fp8_e5m2, (32, 32, 64)), (opus.fp6_e3m2, opus.fp6_e2m3, (16, 16, 128))]
GM, GN, GK = 64, 32, 256


def gemm_data(a_t, b_t, k, seed):
    """Operands and the expected D: one instruction per K tile of k, each rounding to f32."""
    rng = np.random.default_rng(seed)
    A = codes(a_t, rng, (GM, GK))
    Bt = codes(b_t, rng, (GN, GK))
    Xa = rng.integers(120, 135, (GM, GK // 32)).astype(np.uint8)
    Xb = rng.integers(120, 135, (GN, GK // 32)).astype(np.uint8)
    want = np.zeros((GM, GN), np.float32)
    for t in range(0, GK, k):
        ks, bs = slice(t, t + k), slice(t // 32, (t + k) // 32)
        want = reference(A[:, ks], Bt[:, ks].T, want, Xa[:, bs], Xb[:, bs].T).astype(np.float32)
    return A, Bt, Xa, Xb, want


def gemm_args(a_t, b_t, A, Bt, Xa, Xb, d):
    e8 = ml_dtypes.float8_e8m0fnu
    return [pack(a_t, A), pack(b_t, Bt), Xa.reshape(-1).view(e8), Xb.reshape(-1).view(e8), d, GM, GN, GK]


@pytest.mark.parametrize("swap_ab", [False, True], ids=["plain", "swap_ab"])
@pytest.mark.parametrize("a_t,b_t,shape", GEMM_CASES, ids=[f"{a.name}x{b.name}-{s[0]}" for a, b, s in GEMM_CASES])
def test_layouts_feed_a_scaled_gemm_in_the_interpreter(a_t, b_t, shape, swap_ab):
    A, Bt, Xa, Xb, want = gemm_data(a_t, b_t, shape[2], 3)
    d = np.full((GM, GN), np.nan, np.float32)
    with opus.set_target("gfx950", interpret=True):
        gemm(a_t, b_t, shape, swap_ab)[(GM // shape[0]) * (GN // shape[1]), 64](
            *gemm_args(a_t, b_t, A, Bt, Xa, Xb, d))
    np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)


def test_scaled_gemm_executed_on_the_host(tmp_path):
    """The generated HIP (the builtin with cbsz/blgp, zero-padded fp6/fp4 operands, scales and
    opsel) compiled for the host with the builtin shimmed from the ISA tables (mfma.h)."""
    from hostexec import HostProgram, Launch
    program = HostProgram("gfx950")
    runs = []
    for a_t, b_t, shape in GEMM_CASES:
        kernel = program.add(gemm(a_t, b_t, shape).specialize(target="gfx950"))
        A, Bt, Xa, Xb, want = gemm_data(a_t, b_t, shape[2], 11)
        d = np.full((GM, GN), np.nan, np.float32)
        runs.append((want, d, Launch(kernel, (GM // shape[0]) * (GN // shape[1]), 64,
                                     gemm_args(a_t, b_t, A, Bt, Xa, Xb, d))))
    program.build(tmp_path)
    program.run([launch for *_, launch in runs])
    for want, d, _ in runs:
        np.testing.assert_allclose(d, want, rtol=1e-6, atol=1e-6)


# -- AMDGCN --------------------------------------------------------------------------------------

def _all_pairings(shape, opsel):
    @opus.kernel
    def k(p0: opus.Ptr[opus.fp8_e4m3], p1: opus.Ptr[opus.fp8_e5m2], p2: opus.Ptr[opus.fp6_e2m3],
          p3: opus.Ptr[opus.fp6_e3m2], p4: opus.Ptr[opus.fp4_e2m1], d: opus.Ptr[f32],
          sa: opus.Ptr[opus.e8m0]):
        t = opus.thread_id_x()
        ptr = (p0, p1, p2, p3, p4)
        x4 = opus.load(sa, t * 4, vec=4)
        acc = opus.zeros(shape[0] * shape[1] // 64, f32)
        for ia, ta in enumerate(FORMATS):
            for ib, tb in enumerate(FORMATS):
                mma = opus.make_mma(ta, tb, f32, shape, scaled=True)
                av = opus.concat(opus.load(ptr[ia], t * 32, vec=16),
                                 opus.load(ptr[ia], t * 32 + 16, vec=16))
                bv = opus.concat(opus.load(ptr[ib], t * 32 + 2048, vec=16),
                                 opus.load(ptr[ib], t * 32 + 2064, vec=16))
                acc = mma(av, bv, acc, scale_a=x4, scale_b=x4, opsel_a=opsel, opsel_b=3 - opsel)
        for i in range(0, mma.elem_c, 4):
            opus.store(d, acc[i:i + 4], t * mma.elem_c + i)
    return k


@pytest.mark.parametrize("shape", [(16, 16, 128), (32, 32, 64)], ids=["16x16x128", "32x32x64"])
def test_amdgcn_issues_each_pairing_with_its_cbsz_blgp_and_register_widths(shape):
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    asm = _all_pairings(shape, 1).asm(target="gfx950")
    isa = f"v_mfma_scale_f32_{shape[0]}x{shape[1]}x{shape[2]}_f8f6f4"
    lines = [l.strip() for l in asm.splitlines() if l.strip().startswith(isa)]
    regs = {0: 8, 1: 8, 2: 6, 3: 6, 4: 4}
    seen = set()
    for l in lines:
        cbsz = int((re.search(r"cbsz:(\d)", l) or [0, 0])[1])
        blgp = int((re.search(r"blgp:(\d)", l) or [0, 0])[1])
        ops = re.findall(r"[va]\[(\d+):(\d+)\]", l)
        (a0, a1), (b0, b1) = ops[1], ops[2]  # D, A, B, C
        assert int(a1) - int(a0) + 1 == regs[cbsz] and int(b1) - int(b0) + 1 == regs[blgp], l
        assert "op_sel:[1,0,0]" in l and "op_sel_hi:[0,1,0]" in l, l  # opsel_a 1, opsel_b 2
        seen.add((cbsz, blgp))
    assert seen == {(a, b) for a in range(5) for b in range(5)}, (sorted(seen), lines)


# -- an AMD gfx950 GPU ---------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("a_t,b_t,shape", GEMM_CASES, ids=[f"{a.name}x{b.name}-{s[0]}" for a, b, s in GEMM_CASES])
def test_on_a_gfx950_gpu(a_t, b_t, shape):
    torch = pytest.importorskip("torch")
    if not (torch.cuda.is_available() and getattr(torch.version, "hip", None)
            and "gfx950" in torch.cuda.get_device_properties(0).gcnArchName):
        pytest.skip("needs a ROCm build of torch and a gfx950 GPU")
    A, Bt, Xa, Xb, want = gemm_data(a_t, b_t, shape[2], 23)
    d = np.full((GM, GN), np.nan, np.float32)
    args = [torch.from_numpy(np.ascontiguousarray(x).view(np.uint8)).cuda() if isinstance(x, np.ndarray)
            else x for x in gemm_args(a_t, b_t, A, Bt, Xa, Xb, d)]
    gemm(a_t, b_t, shape)[(GM // shape[0]) * (GN // shape[1]), 64](*args)
    got = args[4].view(torch.float32).cpu().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
