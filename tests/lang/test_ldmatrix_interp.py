"""ldmatrix / stmatrix (NVIDIA) and ds_read_b64_tr_b16/_b8 (AMD gfx950) in the interpreter
against numpy references written from the documents' pictures (8 x 8 matrices and their
transposes; interleaved transposes of 16-lane blocks), the ldmatrix -> mma.sync and
ds_read_tr -> MFMA paths against A @ B, and the instructions in SASS (LDSM, STSM) and AMDGCN.
The kernels and references are shared with the GPU twins (test_gpu_ldmatrix.py)."""
import numpy as np
import pytest

import opus
import opus.interp as interp
from opus import f16, f32, i32

ROWS_IN_TILE = 64       # the shared tile: 64 rows of 8 elements
TILE = 8 * ROWS_IN_TILE
UNUSED = -(1 << 20)     # offset given by lanes whose address the instruction ignores


# -- kernels ---------------------------------------------------------------------------------------

@opus.kernel
def ld_kernel(src: opus.Ptr[f16], offs: opus.Ptr[i32], out: opus.Ptr[f16],
              NUM: opus.constexpr = 4, TRANS: opus.constexpr = False):
    """Each warp: the tile from src (one per warp), ldmatrix at each lane's offset, registers out."""
    t = opus.thread_id_x()
    w = opus.warp_id()
    tile = opus.alloc_smem(f16, TILE * 2)
    base = w * TILE
    for k in range(TILE // 32):
        tile[base + k * 32 + opus.lane_id()] = src[base + k * 32 + opus.lane_id()]
    opus.sync_threads()
    v = opus.ldmatrix(tile + base, offs[t], num=NUM, trans=TRANS)
    for i in range(2 * NUM):
        out[t * 2 * NUM + i] = v[i]


@opus.kernel
def st_kernel(src: opus.Ptr[f16], offs: opus.Ptr[i32], out: opus.Ptr[f16],
              NUM: opus.constexpr = 4, TRANS: opus.constexpr = False):
    """Each warp: zero its tile, stmatrix each lane's registers (from src) at its offset, copy out."""
    t = opus.thread_id_x()
    w = opus.warp_id()
    tile = opus.alloc_smem(f16, TILE * 2)
    base = w * TILE
    for k in range(TILE // 32):
        tile[base + k * 32 + opus.lane_id()] = f16(0.0)
    opus.sync_threads()
    v = opus.make_vector(*[src[t * 2 * NUM + i] for i in range(2 * NUM)])
    opus.stmatrix((tile + base).ptr, offs[t], v, trans=TRANS)  # a shared pointer works too
    opus.sync_threads()
    for k in range(TILE // 32):
        out[base + k * 32 + opus.lane_id()] = tile[base + k * 32 + opus.lane_id()]


@opus.kernel(block=32)
def ldsm_mma(a: opus.Ptr[f16], b: opus.Ptr[f16], c: opus.Ptr[f32]):
    """D = A @ B with mma.sync m16n8k16: A (16 x 16, row-major) by ldmatrix.x4, B (16 x 8, k x n,
    row-major) by ldmatrix.x2.trans; the lanes address rows as the PTX ISA's figures say."""
    lane = opus.lane_id()
    sa = opus.alloc_smem(f16, 256)
    sb = opus.alloc_smem(f16, 128)
    for k in range(8):
        sa[k * 32 + lane] = a[k * 32 + lane]
    for k in range(4):
        sb[k * 32 + lane] = b[k * 32 + lane]
    opus.sync_threads()
    av = opus.ldmatrix(sa, (lane % 16) * 16 + (lane // 16) * 8, num=4)
    bv = opus.ldmatrix(sb, (lane % 16) * 8, num=2, trans=True)
    mma = opus.make_mma(f16, f16, f32, (16, 8, 16))
    d = mma(av, bv)
    for i in range(mma.elem_c):
        m, n = mma.coords_c(lane, i)
        c[m * 8 + n] = d[i]


def _tr_kernel(dtype, n):
    """One wave: 128 * n elements to LDS, ds_read_b64_tr_b<bits> at each lane's offset, out."""
    @opus.kernel(block=64)
    def tr(src: opus.Ptr[dtype], offs: opus.Ptr[i32], out: opus.Ptr[dtype]):
        t = opus.thread_id_x()
        tile = opus.alloc_smem(dtype, 128 * n)
        for k in range(2 * n):
            tile[k * 64 + t] = src[k * 64 + t]
        opus.sync_threads()
        v = opus.ds_read_tr(tile, offs[t])
        for i in range(n):
            out[t * n + i] = v[i]
    return tr


tr_kernel = _tr_kernel(opus.u16, 4)
tr8_kernel = _tr_kernel(opus.u8, 8)


@opus.kernel(block=64)
def tr_mfma(a_cm: opus.Ptr[f16], b: opus.Ptr[f16], c: opus.Ptr[f32]):
    """D = A @ B with gfx950's v_mfma_f32_16x16x32_f16, A (16 x 32) stored column-major and read
    by two ds_read_b64_tr_b16 as the CDNA4 ISA describes: lane 16g + 4r + q reads the 4
    consecutive M values 4q .. 4q+3 of column K = 8g + 4h + r (read h = 0, 1)."""
    lane = opus.lane_id()
    sa = opus.alloc_smem(f16, 512)
    for k in range(8):
        sa[k * 64 + lane] = a_cm[k * 64 + lane]
    opus.sync_threads()
    g, r, q = lane // 16, (lane % 16) // 4, lane % 4
    lo = opus.ds_read_tr(sa, (8 * g + r) * 16 + 4 * q)
    hi = opus.ds_read_tr(sa, (8 * g + 4 + r) * 16 + 4 * q)
    mma = opus.make_mma(f16, f16, f32, (16, 16, 32))
    bv = []
    for i in range(mma.elem_b):
        k, n = mma.coords_b(lane, i)
        bv.append(b[k * 16 + n])
    d = mma(opus.concat(lo, hi), opus.make_vector(*bv))
    for i in range(mma.elem_c):
        m, n = mma.coords_c(lane, i)
        c[m * 16 + n] = d[i]


# -- references (numpy, from the documents' pictures) ----------------------------------------------

def row_offsets(warps, num, seed):
    """Each warp's lanes 0 .. 8*num-1 address distinct random rows of its tile; the others an
    offset far outside it (the instruction must not use it)."""
    rng = np.random.default_rng(seed)
    offs = np.full((warps, 32), UNUSED, np.int32)
    for w in range(warps):
        offs[w, :8 * num] = rng.permutation(ROWS_IN_TILE)[:8 * num] * 8
    return offs


def fragments(mats, trans):
    """Per lane the PTX figure's fragment: matrix m's (row lane // 4, cols 2 * (lane % 4) + {0,
    1}), of each matrix or of its transpose; [32, 2 * num]."""
    frag = mats.transpose(0, 2, 1) if trans else mats
    lanes = np.arange(32)
    return np.stack([frag[m, lanes // 4, 2 * (lanes % 4) + j]
                     for m in range(mats.shape[0]) for j in (0, 1)], axis=1)


def ldmatrix_reference(tiles, offs, num, trans):
    out = []
    for tile, o in zip(tiles, offs):
        mats = np.stack([tile[o[8 * m + r]:o[8 * m + r] + 8] for m in range(num) for r in range(8)])
        out.append(fragments(mats.reshape(num, 8, 8), trans))
    return np.concatenate(out)


def stmatrix_reference(regs, offs, num, trans):
    """The tiles stmatrix leaves: each lane's registers placed as the fragments say."""
    tiles = np.zeros((len(offs), TILE), regs.dtype)
    lanes = np.arange(32)
    for w, o in enumerate(offs):
        mats = np.zeros((num, 8, 8), regs.dtype)
        for m in range(num):
            for j in (0, 1):
                mats[m, lanes // 4, 2 * (lanes % 4) + j] = regs[w * 32:(w + 1) * 32, 2 * m + j]
        if trans:
            mats = mats.transpose(0, 2, 1)
        for m in range(num):
            for r in range(8):
                tiles[w, o[8 * m + r]:o[8 * m + r] + 8] = mats[m, r]
    return tiles.reshape(-1)


def ds_read_tr_reference(tile, offs, n):
    """Per 16-lane block: the loads of lanes q, q + 16/n, ... (interleaved) form an n x n
    matrix whose transpose goes to lanes n*q .. n*q + n-1."""
    loads = np.stack([tile[o:o + n] for o in offs])
    out = np.empty_like(loads)
    for b in range(64 // 16):
        for q in range(16 // n):
            src = [16 * b + q + (16 // n) * k for k in range(n)]
            out[16 * b + n * q:16 * b + n * q + n] = loads[src].T
    return out


def tr_offsets(n, seed):
    """Distinct random n-element (8-byte) chunks of a 128 * n element tile, one per lane."""
    return (np.random.default_rng(seed).permutation(128)[:64] * n).astype(np.int32)


def run_ld(num, trans, warps=2, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.standard_normal(warps * TILE).astype(np.float16)
    offs = row_offsets(warps, num, seed)
    out = np.full(warps * 32 * 2 * num, np.nan, np.float16)
    ld_kernel[1, 32 * warps](src, offs.reshape(-1), out, NUM=num, TRANS=trans)
    return out.reshape(-1, 2 * num), ldmatrix_reference(src.reshape(warps, TILE), offs, num, trans)


def run_st(num, trans, warps=2, seed=0):
    rng = np.random.default_rng(seed)
    regs = rng.standard_normal((warps * 32, 2 * num)).astype(np.float16)
    offs = row_offsets(warps, num, seed)
    out = np.full(warps * TILE, np.nan, np.float16)
    st_kernel[1, 32 * warps](regs.reshape(-1), offs.reshape(-1), out, NUM=num, TRANS=trans)
    return out, stmatrix_reference(regs, offs, num, trans)


def run_ldsm_mma(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = np.full((16, 8), np.nan, np.float32)
    ldsm_mma[1, 32](a.reshape(-1), b.reshape(-1), c.reshape(-1))
    return c, a.astype(np.float64) @ b.astype(np.float64)


def run_tr(bits, seed=0):
    n = 64 // bits
    dt = np.uint16 if bits == 16 else np.uint8
    tile = np.random.default_rng(seed).integers(0, 1 << bits, 128 * n).astype(dt)
    offs = tr_offsets(n, seed)
    out = np.zeros(64 * n, dt)
    (tr_kernel if bits == 16 else tr8_kernel)[1, 64](tile, offs, out)
    return out.reshape(64, n), ds_read_tr_reference(tile, offs, n)


def run_tr_mfma(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((16, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    c = np.full((16, 16), np.nan, np.float32)
    tr_mfma[1, 64](np.ascontiguousarray(a.T).reshape(-1), b.reshape(-1), c.reshape(-1))
    return c, a.astype(np.float64) @ b.astype(np.float64)


# -- interpreter -----------------------------------------------------------------------------------

@pytest.fixture
def sm90():
    with opus.set_target("sm_90a", interpret=True):
        yield


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_ldmatrix(sm90, num, trans):
    got, want = run_ld(num, trans, seed=num)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_stmatrix(sm90, num, trans):
    got, want = run_st(num, trans, seed=num)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_ldmatrix_feeds_mma_sync(arch):
    with opus.set_target(arch, interpret=True):
        c, ref = run_ldsm_mma()
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_ldmatrix_x4_is_the_mma_a_fragment(sm90):
    """Register i of lane l after ldmatrix.x4 (lane l addressing row l % 16, column
    8 * (l // 16) of a row-major 16 x 16 tile) is A[coords_a(l, i)] of mma m16n8k16."""
    a = np.arange(256, dtype=np.float16).reshape(16, 16)
    offs = np.array([(l % 16) * 16 + (l // 16) * 8 for l in range(32)], np.int32)
    src = np.zeros(2 * TILE, np.float16)
    src[:256] = a.reshape(-1)
    out = np.zeros(2 * 32 * 8, np.float16)
    ld_kernel[1, 64](src, np.concatenate([offs, offs]), out, NUM=4, TRANS=False)
    from opus.targets import get_target
    atom = get_target("sm_90a").mma_instruction(opus.f16, opus.f16, opus.f32, (16, 8, 16))
    want = [[a[atom.coords_a(l, i)] for i in range(8)] for l in range(32)]
    np.testing.assert_array_equal(out.reshape(64, 8)[:32], want)


@pytest.mark.parametrize("bits", [16, 8])
def test_ds_read_tr(bits):
    with opus.set_target("gfx950", interpret=True):
        got, want = run_tr(bits, seed=bits)
    np.testing.assert_array_equal(got, want)


def test_ds_read_tr_feeds_mfma():
    with opus.set_target("gfx950", interpret=True):
        c, ref = run_tr_mfma()
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_ldmatrix_of_unwritten_shared_memory_is_reported(sm90):
    """Checking mode sees the rows ldmatrix reads (the load's shadow checks)."""
    @opus.kernel(block=32)
    def uninit(out: opus.Ptr[f16]):
        tile = opus.alloc_smem(f16, 256)
        v = opus.ldmatrix(tile, opus.lane_id() * 8, num=4)
        out[opus.lane_id()] = v[0]
    with interp.checking(), pytest.raises(interp.UninitializedReadError, match=r"smem\d\[\d+\]"):
        uninit[1, 32](np.zeros(32, np.float16))


def test_misaligned_row_is_a_fault(sm90):
    """A row address off its 16-byte alignment faults as a misaligned vector access would."""
    offs = row_offsets(2, 4, 0)
    offs[0, 5] += 4
    with pytest.raises(interp.MemoryFault, match=r"misaligned 8-element load .* 16-byte aligned"):
        ld_kernel[1, 64](np.zeros(2 * TILE, np.float16), offs.reshape(-1),
                         np.zeros(2 * 32 * 8, np.float16), NUM=4)


def test_part_of_a_warp_is_an_error(sm90):
    @opus.kernel(block=32)
    def half(out: opus.Ptr[f16]):
        tile = opus.alloc_smem(f16, 256)
        for k in range(8):
            tile[k * 32 + opus.lane_id()] = f16(1.0)
        opus.sync_threads()
        if opus.lane_id() < 16:
            v = opus.ldmatrix(tile, opus.lane_id() * 8, num=2)
            out[opus.lane_id()] = v[0]
    with pytest.raises(interp.InterpError, match=r"ldmatrix.x2.b16 executed by only part of warp 0"):
        half[1, 32](np.zeros(32, np.float16))


# -- generated code --------------------------------------------------------------------------------

def sass_spelling(op, num, trans):
    """How cuobjdump prints it: LDSM.16.M88 (x1), LDSM.16.MT88.4 (x4 .trans), ..."""
    return f"{op}.16.{'MT88' if trans else 'M88'}{'' if num == 1 else f'.{num}'} "


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_sass_has_ldsm(num, trans):
    sass = ld_kernel.specialize(target="sm_80", NUM=num, TRANS=trans).sass
    assert sass_spelling("LDSM", num, trans) in sass


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_sass_has_stsm(num, trans):
    sass = st_kernel.specialize(target="sm_90a", NUM=num, TRANS=trans).sass
    assert sass_spelling("STSM", num, trans) in sass


def test_ldsm_mma_sass():
    sass = ldsm_mma.specialize(target="sm_80").sass
    assert "LDSM.16.M88.4" in sass and "LDSM.16.MT88.2" in sass and "HMMA.16816.F32" in sass


@pytest.mark.parametrize("kernel,bits", [(tr_kernel, 16), (tr8_kernel, 8), (tr_mfma, 16)])
def test_amdgcn_has_ds_read_tr(kernel, bits):
    from opus.runtime.amd_build import assemble_amd, hip_compiler
    from opus.errors import OpusRuntimeError
    from opus.targets import get_target
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    asm = assemble_amd(kernel.source(target="gfx950"), get_target("gfx950"))
    assert f"ds_read_b64_tr_b{bits} " in asm
