"""opus.ops.rmsnorm, rmsnorm_quant, per_token_quant and per_group_quant (ops/norm_quant.py) in
the interpreter as sm_90a, gfx942 and gfx950 (checking mode), on ragged shapes, both dtypes,
NaN/inf rows, against references written here in float64 numpy (then ml_dtypes casts with
explicit saturation); the AMD renderings' warp reductions in AMDGCN (DPP row operations, no
LDS round trip); on the GPU (marked gpu) against torch, inside a CUDA graph and under
torch.compile."""
import numpy as np
import pytest

import opus
import opus.ops
from opus.ops import norm_quant as nq

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
DTYPES = (BF16, np.float16)
FP8 = {"sm_90a": ml_dtypes.float8_e4m3fn, "gfx942": ml_dtypes.float8_e4m3fnuz,
       "gfx950": ml_dtypes.float8_e4m3fn}
REL = 1e-5   # the kernels' f32 arithmetic (a few roundings, rsqrt) against float64


@pytest.fixture(params=["sm_90a", "gfx942", "gfx950"])
def target(request):
    with opus.set_target(request.param, interpret=True), opus.interp.checking():
        yield request.param


# -- references (float64, then explicit rounding and saturation) --------------------------------

def ref_norm(x, w, eps, residual=None):
    """(h, y): h = x (+ residual, rounded to x's type), y = h * w / sqrt(mean(h^2) + eps)."""
    h = x.astype(np.float64)
    if residual is not None:
        h = (h + residual.astype(np.float64)).astype(x.dtype).astype(np.float64)
    ms = (h * h).mean(axis=1, keepdims=True) if h.shape[1] else np.zeros((h.shape[0], 1))
    return h, h * w.astype(np.float64) / np.sqrt(ms + eps)


def ref_quant(y, fp8):
    """(acceptable fp8 value bounds lo, hi, scales) for values y (float64, quantized per row
    of y): scale = amax / max (NaN if the row has one), values y / scale saturated, where a
    value within REL of a rounding boundary may round either way."""
    fmax = float(ml_dtypes.finfo(fp8).max)
    with np.errstate(invalid="ignore", divide="ignore"):
        amax = np.max(np.abs(y), axis=1, keepdims=True) if y.shape[1] else np.zeros((len(y), 1))
        scale = amax / fmax
        v = np.where(scale == 0, 0.0, y / np.where(scale == 0, 1.0, scale))

    def cast(a):
        return np.clip(a, -fmax, fmax).astype(fp8).astype(np.float64)   # explicit saturation
    lo, hi = cast(v * (1 - np.sign(v) * REL)), cast(v * (1 + np.sign(v) * REL))
    return lo, hi, scale[:, 0]


def close_to(got, want, dtype):
    """got (dtype) within one rounding of float64 want (plus REL): half an ulp and the
    kernel's f32 slack; NaN where want is NaN."""
    g = got.astype(np.float64)
    mant = 7 if dtype == BF16 else 10
    tiny = 2.0 ** (-133 if dtype == BF16 else -24)
    with np.errstate(divide="ignore", invalid="ignore"):
        ulp = np.maximum(2.0 ** (np.floor(np.log2(np.abs(want))) - mant), tiny)
        ok = (np.abs(g - want) <= 0.5 * ulp + REL * np.abs(want)) | (np.isnan(g) & np.isnan(want))
    assert ok.all(), f"{(~ok).sum()} off, e.g. at {np.argwhere(~ok)[0]}: " \
                     f"{g[~ok][:4]} vs {want[~ok][:4]}"


def check_quant(q, s, y, fp8):
    assert q.dtype == fp8 and s.dtype == np.float32 and s.shape == (len(y),)
    lo, hi, scale = ref_quant(y, fp8)
    g = q.astype(np.float64)
    both_nan = np.isnan(g) & np.isnan(lo)
    ok = both_nan | ((g >= np.minimum(lo, hi)) & (g <= np.maximum(lo, hi)))
    assert ok.all(), f"{(~ok).sum()} values off, e.g. at {np.argwhere(~ok)[0]}: " \
                     f"{g[~ok][:4]} not in [{lo[~ok][:4]}, {hi[~ok][:4]}]"
    sf = s.astype(np.float64)
    with np.errstate(invalid="ignore"):
        good = (np.isnan(sf) & np.isnan(scale)) | (np.abs(sf - scale) <= REL * np.abs(scale))
    assert good.all(), (sf, scale)


def inputs(rows, hidden, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, hidden)) * scale).astype(dtype)
    w = (1 + 0.5 * rng.standard_normal(hidden)).astype(dtype)
    return x, w


# ragged hidden sizes: 1 element, odd (element accesses), 40 (whole vectors), 129 / 1000
# (ragged tails), 3000 (a row over several warps: the shared-memory exchange)
SHAPES = [(5, 1), (3, 7), (4, 40), (2, 129), (3, 1000), (1, 3000)]


# -- rmsnorm ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,hidden", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm(target, rows, hidden, dtype):
    x, w = inputs(rows, hidden, dtype, seed=hidden)
    out = opus.ops.rmsnorm(x, w, 1e-5)
    assert out.dtype == dtype and out.shape == x.shape
    close_to(out, ref_norm(x, w, 1e-5)[1], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_fused_residual_add(target, dtype):
    """residual becomes x + residual (rounded once); out is the RMSNorm of that sum."""
    x, w = inputs(6, 200, dtype, seed=1)
    r = inputs(6, 200, dtype, seed=2)[0]
    r0 = r.copy()
    h, y = ref_norm(x, w, 1e-6, residual=r0)
    out = opus.ops.rmsnorm(x, w, 1e-6, residual=r)
    np.testing.assert_array_equal(r.astype(np.float64), h)
    close_to(out, y, dtype)


def test_rmsnorm_padded_rows_and_in_place(target):
    """Rows 16-byte aligned by a padded stride (hidden 13: 16-byte loads with a bounded
    tail, the padding never touched), normalized in place."""
    big = np.full((4, 16), 7.0, BF16)
    x = big[:, :13]
    x[...] = inputs(4, 13, BF16, seed=3)[0]
    w = inputs(4, 13, BF16, seed=4)[1]
    want = ref_norm(x, w, 1e-6)[1]
    assert opus.ops.rmsnorm(x, w, out=x) is x
    close_to(x, want, BF16)
    assert (big[:, 13:].astype(np.float32) == 7).all()


def test_rmsnorm_empty_batch_and_one_row(target):
    x, w = inputs(0, 64, BF16)
    assert opus.ops.rmsnorm(x, w).shape == (0, 64)
    x, w = inputs(1, 64, BF16, seed=5)
    close_to(opus.ops.rmsnorm(x, w), ref_norm(x, w, 1e-6)[1], BF16)


def test_rmsnorm_nan_and_inf_rows(target):
    """A NaN row is NaN throughout; an infinity makes the mean square inf, so the row's finite
    elements become 0 and its infinite one NaN (IEEE arithmetic); other rows are untouched."""
    x, w = inputs(4, 50, BF16, seed=6)
    x[1, 7] = np.nan
    x[2, 3] = np.inf
    out = opus.ops.rmsnorm(x, w).astype(np.float64)
    assert np.isnan(out[1]).all()
    assert np.isnan(out[2, 3]) and (out[2, np.arange(50) != 3] == 0).all()
    close_to(out[[0, 3]], ref_norm(x[[0, 3]], w, 1e-6)[1], BF16)


def test_rmsnorm_rows_longer_than_registers(target):
    """The looping form (rows too long to keep in registers; here forced on a short row by an
    explicit launch shape: 4 threads x 2 vectors per tile, 5 tiles), residual included."""
    x, w = inputs(3, 300, BF16, seed=7)
    r = inputs(3, 300, BF16, seed=8)[0]
    h, y = ref_norm(x, w, 1e-6, residual=r.copy())
    out = np.empty_like(x)
    nq._launch_rows(x, w, r, out, None, 1e-6, True, shape=(4, 2, False))
    np.testing.assert_array_equal(r.astype(np.float64), h)
    close_to(out, y, BF16)


@pytest.mark.parametrize("shape", [None, (256, 2, True), (256, 1, False), (512, 1, True)])
def test_one_row_per_block(target, shape):
    """Rows of 256+ threads (a block each: the row's own view, the shared-memory exchange
    across warps): by the rule (8192 wide: 256 threads x 2 vectors of 16) and, on a ragged 2051-wide
    row padded to 2056 (16-byte rows, so 16-byte vectors straddle the row's end), kept in
    registers, looped in 2048-element tiles, or with more threads than vectors."""
    if shape is None:
        x, w = (_aligned(a) for a in inputs(2, 8192, BF16, seed=14))
        r = _aligned(inputs(2, 8192, BF16, seed=15)[0])
        assert nq.row_config(x, w, r, _aligned(np.zeros(x.shape, FP8[target])), True)[:2] == (2, 256)
    else:
        big = np.full((3, 2056), 5.0, BF16)
        x = big[:, :2051]
        x[...], w = inputs(3, 2051, BF16, seed=16)
        r = np.zeros((3, 2056), BF16)[:, :2051]
        r[...] = inputs(3, 2051, BF16, seed=17)[0]
    h, y = ref_norm(x, w, 1e-6, residual=r.copy())
    q, s = np.empty(x.shape, FP8[target]), np.empty(len(x), np.float32)
    nq._launch_rows(x, w, r, q, s, 1e-6, True, shape=shape)
    np.testing.assert_array_equal(r.astype(np.float64), h)
    check_quant(q, s, y, FP8[target])
    if shape is not None:
        assert (big[:, 2051:].astype(np.float32) == 5).all()


def test_launch_configuration():
    """The rule's choices (ops/norm_quant.row_shape, docs/ops.md) and the vector widths from
    the rows' alignment: 16-byte vectors for 8192-wide bf16 rows (the weight, one row, counts
    its own alignment only): RMSNorm 1024 threads x 1 vector (1024 vectors of 8); the quantizing
    forms read 32-byte vectors where rows allow; short rows share blocks of 256 threads;
    an odd width falls to element accesses; a padded 13-wide row keeps 16-byte loads only
    with a row to itself."""
    x = np.zeros((4, 8192), BF16)
    assert nq.row_config(x, np.zeros(8192, BF16), None, x, True) == (4, 1024, dict(
        TR=1024, V=8, NV=1, VO=8, CACHED=True, NORM=True, RESIDUAL=False, QUANT=False,
        QMAX=448.0, FULL=True))
    # the quantizing forms on 32-byte aligned rows (as torch allocates): 16-element vectors,
    # per-token 512 threads x 1, RMSNorm + quant 256 x 2 (the H100 sweep in norm_quant.py)
    xa, q = _aligned(x), _aligned(np.zeros((4, 8192), ml_dtypes.float8_e4m3fn))
    grid, block, cx = nq.row_config(xa, xa[0], None, q, False)
    assert (grid, block, cx["V"], cx["VO"], cx["NV"], cx["QUANT"], cx["QMAX"]) == (
        4, 512, 16, 16, 1, True, 448)
    grid, block, cx = nq.row_config(xa, xa[0], None, q, True)
    assert (grid, block, cx["V"], cx["NV"]) == (4, 256, 16, 2)
    grid, block, cx = nq.row_config(xa[:, 8:], xa[0, 8:], None, q[:, 8:], False)  # 16-byte
    assert (block, cx["V"], cx["VO"]) == (1024, 8, 8)
    x = np.zeros((1000, 128), np.float16)
    grid, block, cx = nq.row_config(x, np.zeros(128, np.float16), None, x, True)
    assert (grid, block, cx["TR"], cx["NV"], cx["V"]) == (63, 256, 16, 1, 8)  # 16 rows a block
    x = np.zeros((3, 7), BF16)
    assert nq.row_config(x, np.zeros(7, BF16), None, x, True)[2]["V"] == 1
    padded = np.zeros((3, 16), BF16)[:, :13]
    assert nq.row_config(padded, np.zeros(13, BF16), None, padded, True)[2]["V"] == 1
    assert nq.row_config(padded, np.zeros(13, BF16), None, padded, True,
                         shape=(256, 1, True))[2]["V"] == 8
    assert nq.row_shape(140000, 8, 4) == (1024, 1, False) and nq.row_shape(1, 1) == (1, 1, True)
    # 1024-thread rows keep at most 64 bytes a thread (a 1024-thread block has 64 registers)
    assert nq.row_shape(32768, 16, 1) == (1024, 2, True)
    assert nq.row_shape(32784, 16, 2) == (1024, 1, False)
    assert nq.row_shape(32768, 8, 1) == (1024, 4, True)
    assert [nq.group_shape(g) for g in (64, 56, 3, 1)] == [16, 8, 4, 4]


# -- rmsnorm_quant ------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,hidden", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_quant(target, rows, hidden, dtype):
    x, w = inputs(rows, hidden, dtype, seed=hidden + 1)
    q, s = opus.ops.rmsnorm_quant(x, w, 1e-5)
    check_quant(q, s, ref_norm(x, w, 1e-5)[1], FP8[target])


def _aligned(a, to=256):
    """A copy of a whose data starts on a ``to``-byte boundary (numpy promises 16)."""
    buf = np.empty(a.nbytes + to, np.uint8)
    start = -buf.ctypes.data % to
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("rows,hidden", [(2, 2064), (1, 8200)])
def test_quant_rows_of_32_byte_vectors(target, rows, hidden):
    """The quantizing variants read 16 bf16 per vector (two 16-byte loads, one 16-byte fp8
    store) where the rows allow it, ragged ends included; with a residual too."""
    x, w = (_aligned(a) for a in inputs(rows, hidden, BF16, seed=hidden))
    assert nq.row_config(x, w, None, _aligned(np.zeros(x.shape, FP8[target])), True)[2]["V"] \
        == 16
    r = _aligned(inputs(rows, hidden, BF16, seed=hidden + 1)[0])
    h, y = ref_norm(x, w, 1e-6, residual=r.copy())
    q, s = opus.ops.rmsnorm_quant(x, w, residual=r)
    np.testing.assert_array_equal(r.astype(np.float64), h)
    check_quant(q, s, y, FP8[target])
    q, s = opus.ops.per_token_quant(x)
    check_quant(q, s, x.astype(np.float64), FP8[target])


def test_rmsnorm_quant_residual_and_loop(target):
    x, w = inputs(5, 260, np.float16, seed=9)
    r = inputs(5, 260, np.float16, seed=10)[0]
    r2 = r.copy()
    h, y = ref_norm(x, w, 1e-6, residual=r.copy())
    q, s = opus.ops.rmsnorm_quant(x, w, residual=r)
    np.testing.assert_array_equal(r.astype(np.float64), h)
    check_quant(q, s, y, FP8[target])
    q2, s2 = np.empty_like(q), np.empty_like(s)
    nq._launch_rows(x, w, r2, q2, s2, 1e-6, True, shape=(2, 4, False))
    check_quant(q2, s2, y, FP8[target])


def test_rmsnorm_quant_nan_inf_zero_rows(target):
    """NaN or inf in a row: its scale and every value NaN; a zero row: scale 0, zeros."""
    x, w = inputs(4, 33, BF16, seed=11)
    x[0, 5] = np.nan
    x[1, 0] = -np.inf
    x[2] = 0
    q, s = opus.ops.rmsnorm_quant(x, w)
    qf = q.astype(np.float64)
    assert np.isnan(s[:2]).all() and np.isnan(qf[:2]).all()
    assert s[2] == 0 and (qf[2] == 0).all()
    check_quant(q[3:], s[3:], ref_norm(x[3:], w, 1e-6)[1], FP8[target])


# -- per_token_quant / per_group_quant -----------------------------------------------------------

@pytest.mark.parametrize("rows,hidden", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_per_token_quant(target, rows, hidden, dtype):
    x = inputs(rows, hidden, dtype, seed=hidden + 2, scale=3.0)[0]
    q, s = opus.ops.per_token_quant(x)
    check_quant(q, s, x.astype(np.float64), FP8[target])


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_token_quant_nan_inf_zero_empty(target, dtype):
    """NaN: the row's scale and values NaN; inf: scale inf, the infinity NaN, the finite
    values 0 (x * (max / inf)); zero row: scale 0; no rows: nothing. (The NaN is the high
    half of a 32-bit word, the infinity the low half: the amax compares them in place.)"""
    x = inputs(4, 20, dtype, seed=12)[0]
    x[0, 19] = np.nan
    x[1, 2] = np.inf
    x[2] = 0
    q, s = opus.ops.per_token_quant(x)
    qf = q.astype(np.float64)
    assert np.isnan(s[0]) and np.isnan(qf[0]).all()
    assert s[1] == np.inf and np.isnan(qf[1, 2]) and (qf[1, np.arange(20) != 2] == 0).all()
    assert s[2] == 0 and (qf[2] == 0).all()
    check_quant(q[3:], s[3:], x[3:].astype(np.float64), FP8[target])
    q, s = opus.ops.per_token_quant(x[:0])
    assert q.shape == (0, 20) and s.shape == (0,)


def ref_groups(x):
    """x's rows cut into groups of 128 (the last shorter) as rows of their own, zero-padded:
    per-group quantization is per-token quantization of these."""
    rows, hidden = x.shape
    g = -(-hidden // 128)
    pad = np.zeros((rows, g * 128))
    pad[:, :hidden] = x.astype(np.float64)
    return pad.reshape(rows * g, 128), g


@pytest.mark.parametrize("rows,hidden", [(3, 128), (2, 300), (4, 7), (1, 1), (2, 1000),
                                         (2, 2048), (3, 1024)])   # the last two: FULL
@pytest.mark.parametrize("dtype", DTYPES)
def test_per_group_quant(target, rows, hidden, dtype):
    x = inputs(rows, hidden, dtype, seed=hidden + 3, scale=2.0)[0]
    x[0, :min(hidden, 128)] *= 100      # groups of very different ranges
    q, s = opus.ops.per_group_quant(x)
    grouped, g = ref_groups(x)
    assert s.shape == (rows, g) and q.shape == x.shape
    qpad = np.zeros((rows, g * 128), FP8[target])
    qpad[:, :hidden] = q
    check_quant(qpad.reshape(rows * g, 128), s.reshape(-1), grouped, FP8[target])


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_group_quant_nan_inf_stay_in_their_group(target, dtype):
    x = inputs(2, 384, dtype, seed=13)[0]
    x[0, 130] = np.nan
    x[1, 300] = np.inf
    q, s = opus.ops.per_group_quant(x)
    qf = q.astype(np.float64)
    assert np.isnan(s[0, 1]) and np.isnan(qf[0, 128:256]).all()
    assert s[1, 2] == np.inf and np.isnan(qf[1, 300]) and (qf[1, 256:300] == 0).all()
    grouped, _ = ref_groups(x)
    keep = [0, 2, 3, 4]                  # the groups without NaN/inf (row-major group index)
    check_quant(np.ascontiguousarray(q.reshape(6, 128)[keep]), s.reshape(-1)[keep],
                grouped[keep], FP8[target])


# -- the reductions in machine code --------------------------------------------------------------

def _amd_instrs(kernel, arch, **cx):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "amd"))
    from test_amd_target import asm_of, instrs
    return instrs(asm_of(kernel, arch, **cx))


def _count(lines, pattern):
    import re
    return sum(1 for line in lines if re.search(pattern, line))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_row_reductions_are_dpp(arch):
    """rmsnorm_quant's two row reductions (f32 sum, u32 max) as DPP row operations fused into
    v_add_f32 / v_max_u32: a row of one wave (64 threads) ends with row_bcast:15/31, a row of
    16 lanes stays within a DPP row; neither touches LDS. A row of 4 waves adds one exchange:
    one barrier, one LDS write per reduction and one read. Rows sharing a block (16 lanes)
    share one wave-uniform view: no waterfall loop over per-lane buffer resources."""
    kernel = nq.ROW_KERNELS[(opus.bf16, FP8[arch] is ml_dtypes.float8_e4m3fnuz and
                             opus.fp8_e4m3fnuz or opus.fp8_e4m3)]
    cx = dict(V=8, NV=2, VO=8, QUANT=True, QMAX=240.0)
    for tr in (64, 16, 256):
        ins = _amd_instrs(kernel, arch, TR=tr, **cx)
        for op in ("v_add_f32_dpp", "v_max_u32_dpp"):
            assert _count(ins, op + r".*quad_perm:\[1,0,3,2\]") >= 1, (tr, op)
            assert _count(ins, op + r".*row_half_mirror") >= 1 and \
                _count(ins, op + r".*row_mirror") >= 1, (tr, op)
        assert _count(ins, r"ds_bpermute|ds_permute|ds_swizzle") == 0, tr
        assert _count(ins, r"v_readfirstlane") <= 2, tr    # wave-uniform views: no waterfall
        if tr >= 64:
            assert _count(ins, r"row_bcast:15") >= 2 and _count(ins, r"row_bcast:31") >= 2, tr
        lds = [line for line in ins if line.startswith("ds_")]
        if tr <= 64:
            assert lds == [] and _count(ins, r"^s_barrier") == 0, (tr, lds)
        else:
            assert _count(ins, r"^s_barrier") == 1, tr
            assert _count(lds, r"^ds_write") == 2 and 1 <= _count(lds, r"^ds_read") <= 2, lds


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_group_reduction_is_dpp_and_uniform(arch):
    """per_group_quant's 16-lane amax: v_max_u32 with DPP row operations, no LDS; the row
    views are wave-uniform (no waterfall loop over per-lane buffer resources: those read each
    lane's resource with v_readfirstlane, hundreds of them here before; the one or two left
    are the scalar division of the block index)."""
    fp8 = opus.fp8_e4m3fnuz if arch == "gfx942" else opus.fp8_e4m3
    ins = _amd_instrs(nq.GROUP_KERNELS[(opus.bf16, fp8)], arch, GPB=16, V=8, VO=8)
    assert _count(ins, r"v_max_u32_dpp.*row_mirror") == 1
    assert _count(ins, r"^ds_") == 0 and _count(ins, r"v_readfirstlane") <= 2


def test_sass_rows_covered_exactly_have_no_bound_checks():
    """A launch that covers each row exactly (FULL: 8192 = 256 threads x 2 vectors of 16) reads
    x and the weight with 16-byte loads only (no per-element fallback, which a bounded view
    keeps for a vector straddling the row's end) and stores 16 fp8 per access."""
    import re
    cx = dict(TR=256, V=16, NV=2, VO=16, CACHED=True, NORM=True, QUANT=True, QMAX=448.0)
    k = nq.ROW_KERNELS[(opus.bf16, opus.fp8_e4m3)]
    full = [l for l in k.specialize(target="sm_90a", FULL=True, **cx).sass.splitlines()
            if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    assert _count(full, r"LDG\.E\.128") == 8 and _count(full, r"LDG\.E\.U16") == 0
    assert _count(full, r"STG\.E\.128") == 2 and _count(full, r"STG\.E\.U8") == 0
    bounded = k.specialize(target="sm_90a", FULL=False, **cx).sass
    assert "LDG.E.U16" in bounded


def test_sass_whole_warp_max_is_redux():
    """On sm_90a the u32 amax of a 32-thread row is one REDUX.MAX, the f32 sum 5 SHFL.BFLY."""
    import re
    spec = nq.ROW_KERNELS[(opus.bf16, opus.fp8_e4m3)].specialize(
        target="sm_90a", TR=32, V=8, NV=2, VO=8, QUANT=True)
    sass = [l for l in spec.sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", l)]
    assert _count(sass, r"REDUX\.MAX") == 1 and _count(sass, r"SHFL\.BFLY") == 5
    assert _count(sass, r"BAR\.SYNC") == 0


# -- GPU: torch tensors --------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _np_of(t):
    """A torch GPU tensor as a numpy array of the matching ml_dtypes/numpy type."""
    torch = _torch()
    names = {torch.bfloat16: BF16, torch.float16: np.float16, torch.float32: np.float32,
             torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn,
             torch.float8_e4m3fnuz: ml_dtypes.float8_e4m3fnuz}
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        return t.view(torch.uint8).cpu().numpy().view(names[t.dtype])
    return t.float().cpu().numpy().astype(names[t.dtype])


def torch_norm(x, w, eps, residual=None):
    """The torch reference: (h, y) in float64 on the GPU."""
    torch = _torch()
    h = x.double()
    if residual is not None:
        h = (h + residual.double()).to(x.dtype).double()
    return h, h * w.double() * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


def _gpu_inputs(rows, hidden, dtype, seed=0):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, hidden, device="cuda", generator=g).to(dtype)
    w = (1 + 0.5 * torch.randn(hidden, device="cuda", generator=g)).to(dtype)
    r = torch.randn(rows, hidden, device="cuda", generator=g).to(dtype)
    return x, w, r


def _fp8_np(q):
    return _np_of(q).dtype.type


GPU_SHAPES = [(1, 1), (3, 7), (2, 129), (257, 4096), (64, 8192), (5, 13001), (2, 32768),
              (1, 131072), (2, 140000)]


@pytest.mark.gpu
@pytest.mark.parametrize("rows,hidden", GPU_SHAPES)
@pytest.mark.parametrize("dt_name", ["bfloat16", "float16"])
def test_gpu_against_torch(rows, hidden, dt_name):
    """Every op against torch on the GPU; 140000 is past the registers (the looping form)."""
    torch = _torch()
    dtype = getattr(torch, dt_name)
    x, w, r = _gpu_inputs(rows, hidden, dtype, seed=hidden)
    npd = BF16 if dt_name == "bfloat16" else np.float16
    out = opus.ops.rmsnorm(x, w, 1e-5)
    close_to(_np_of(out), torch_norm(x, w, 1e-5)[1].cpu().numpy(), npd)
    r0 = r.clone()
    q, s = opus.ops.rmsnorm_quant(x, w, 1e-5, residual=r)
    h, y = torch_norm(x, w, 1e-5, residual=r0)
    assert torch.equal(r.double(), h)
    check_quant(_np_of(q), _np_of(s), y.cpu().numpy(), _fp8_np(q))
    q, s = opus.ops.per_token_quant(x)
    check_quant(_np_of(q), _np_of(s), x.double().cpu().numpy(), _fp8_np(q))
    q, s = opus.ops.per_group_quant(x)
    grouped, g = ref_groups(_np_of(x))
    qpad = np.zeros((rows, g * 128), _fp8_np(q))
    qpad[:, :hidden] = _np_of(q)
    check_quant(qpad.reshape(rows * g, 128), _np_of(s).reshape(-1), grouped, _fp8_np(q))


@pytest.mark.gpu
def test_gpu_nan_inf_and_empty():
    torch = _torch()
    x, w, _ = _gpu_inputs(3, 300, torch.bfloat16)
    x[0, 5] = float("nan")
    x[1, 9] = float("inf")
    q, s = opus.ops.rmsnorm_quant(x, w)
    assert torch.isnan(s[:2]).all() and torch.isnan(q[:2].float()).all()
    check_quant(_np_of(q[2:]), _np_of(s[2:]), torch_norm(x[2:], w, 1e-6)[1].cpu().numpy(),
                _fp8_np(q))
    q, s = opus.ops.per_token_quant(x)
    assert torch.isnan(s[0]) and s[1] == float("inf") and torch.isnan(q[1, 9].float())
    assert opus.ops.rmsnorm(x[:0], w).shape == (0, 300)


@pytest.mark.gpu
def test_gpu_cuda_graph_and_side_stream():
    """Captured in a CUDA graph (on a side stream), replayed on new inputs."""
    torch = _torch()
    x, w, r = _gpu_inputs(64, 4096, torch.bfloat16, seed=1)
    opus.ops.rmsnorm(x, w)                       # plans and compiles outside the capture
    opus.ops.rmsnorm_quant(x, w)
    opus.ops.per_group_quant(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = opus.ops.rmsnorm(x, w)
        q, s = opus.ops.rmsnorm_quant(x, w)
        gq, gs = opus.ops.per_group_quant(x)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    y = torch_norm(x, w, 1e-6)[1]
    close_to(_np_of(out), y.cpu().numpy(), BF16)
    check_quant(_np_of(q), _np_of(s), y.cpu().numpy(), _fp8_np(q))
    grouped, g = ref_groups(_np_of(x))
    check_quant(_np_of(gq).reshape(-1, 128), _np_of(gs).reshape(-1), grouped, _fp8_np(gq))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out2 = opus.ops.rmsnorm(x, w)
    side.synchronize()
    assert torch.equal(out2, out)


@pytest.mark.gpu
def test_gpu_torch_compile():
    """The torch.library operators under torch.compile(fullgraph=True): the residual update is
    functionalized and the results equal the eager ones; out= and scales= forms too."""
    torch = _torch()
    x, w, r = _gpu_inputs(33, 1000, torch.float16, seed=2)

    def f(x, w, r):
        out = opus.ops.rmsnorm(x, w, 1e-6, residual=r)
        q, s = opus.ops.rmsnorm_quant(x, w, 1e-6)
        tq, ts = opus.ops.per_token_quant(out)
        gq, gs = opus.ops.per_group_quant(out)
        return out * 2, q, s, tq, ts, gq, gs
    r_eager, r_compiled = r.clone(), r.clone()
    want = f(x, w, r_eager)
    got = torch.compile(f, fullgraph=True)(x, w, r_compiled)
    assert torch.equal(r_compiled, r_eager)
    for a, b in zip(got, want):
        assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 else a,
                           b.view(torch.uint8) if b.element_size() == 1 else b)
    o, sc = torch.empty_like(got[1]), torch.empty_like(got[2])
    torch.compile(lambda x, w: opus.ops.rmsnorm_quant(x, w, out=o, scales=sc),
                  fullgraph=True)(x, w)
    assert torch.equal(o.view(torch.uint8), want[1].view(torch.uint8)) and torch.equal(sc, want[2])
