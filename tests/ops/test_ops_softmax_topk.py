"""opus.ops.softmax and opus.ops.topk (ops/rowsoftmax.py, ops/rowtopk.py): in the interpreter as
sm_90a, gfx942 and gfx950 against float64 / sorted numpy references (ragged rows, one row,
1-element rows, empty batches, every dtype, NaN/inf, ties, every launch shape); the AMDGCN of
the warp paths (DPP and ds_bpermute, no LDS); on the GPU against torch, inside a CUDA graph and
under torch.compile."""
import re

import numpy as np
import pytest

import opus
import opus.ops
from opus import dtypes as dt
from opus.ops import rowsoftmax, rowtopk

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
TARGETS = ["sm_90a", "gfx942", "gfx950"]


@pytest.fixture(params=TARGETS)
def target(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


def _data(shape, dtype, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# -- softmax -----------------------------------------------------------------------------------

def softmax_ref(x):
    """torch's softmax in float64: NaN rows where the row holds NaN or +inf or only -inf."""
    x = x.astype(np.float64)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        r = x[idx]
        if np.isnan(r).any() or np.isposinf(r).any() or np.isneginf(r).all():
            out[idx] = np.nan
            continue
        e = np.exp(r - r.max())
        out[idx] = e / e.sum()
    return out


_REL = {np.float32: 2e-6, np.float16: 2.0 ** -10, BF16: 2.0 ** -7}


def _check_softmax(y, x):
    ref = softmax_ref(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    got = y.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), "NaN rows differ"
    ok = ~np.isnan(ref)
    tiny = 2.0 ** -24 if x.dtype == np.float16 else 1e-12   # f16 subnormals' spacing
    tol = _REL[x.dtype.type] * np.abs(ref[ok]) + tiny
    err = np.abs(got[ok] - ref[ok])
    assert (err <= tol).all(), f"max error {err.max()} (ref {ref[ok][err.argmax()]})"


@pytest.mark.parametrize("rows,n,dtype", [
    (3, 1000, np.float32),     # warp: ragged (1000 = 7 lanes' worth short of 8 vectors)
    (5, 7, BF16),              # warp: one partial vector
    (2, 1, np.float16),        # 1-element rows
    (1, 3000, np.float32),     # block, one row, ragged
    (2, 8192, BF16),           # block, whole vectors (not ragged)
    (2, 40001, np.float32),    # online: two passes, ragged
])
def test_softmax_shapes(target, rows, n, dtype):
    x = _data((rows, n), dtype)
    _check_softmax(opus.ops.softmax(x), x)


def test_softmax_launch_rule():
    assert rowsoftmax.plan(1000, 4, 32) == ("warp", 8, 128)
    assert rowsoftmax.plan(8192, 8, 32) == ("block", 4, 256)   # 4-byte rule: 32 per thread
    # 2-byte rows: 16 values per thread in the block shape, longer rows online
    assert rowsoftmax.plan(1024, 8, 32, 2) == ("warp", 4, 128)
    assert rowsoftmax.plan(8192, 8, 32, 2) == ("block", 2, 512)
    assert rowsoftmax.plan(16384, 8, 32, 2) == ("block", 2, 1024)
    assert rowsoftmax.plan(16385, 8, 32, 2)[0] == "online"
    assert rowsoftmax.plan(8192, 4, 64) == ("block", 8, 256)
    assert rowsoftmax.plan(32768, 4, 32) == ("block", 8, 1024)
    assert rowsoftmax.plan(32769, 4, 32)[0] == "online"


def test_softmax_special_values(target):
    x = _data((6, 300), np.float32, seed=3)
    x[0, 5] = np.nan                   # NaN row
    x[1, 17] = np.inf                  # +inf row: NaN (inf - inf)
    x[2, :] = -np.inf                  # all -inf: NaN
    x[3, ::2] = -np.inf                # some -inf: zeros there
    x[4, 7] = 1e30                     # one huge value: 1 there, 0 elsewhere
    x[5, :] = -1e30                    # equal huge negatives: uniform
    y = opus.ops.softmax(x)
    _check_softmax(y, x)
    assert (y[3, ::2] == 0).all() and y[4, 7] == 1.0


def test_softmax_online_special_values(target):
    """The online pass's rescaling with -inf prefixes, NaN and +inf in long rows."""
    x = _data((4, 33000), np.float32, seed=4)
    x[0, :20000] = -np.inf             # a thread's prefix all -inf, then finite values
    x[1, :] = -np.inf
    x[2, 32999] = np.nan
    x[3, 12345] = np.inf
    _check_softmax(opus.ops.softmax(x), x)


def test_softmax_batches_and_out(target):
    x = _data((2, 3, 70), np.float16, seed=5)
    out = np.full_like(x, np.nan)
    assert opus.ops.softmax(x, out=out) is out
    _check_softmax(out, x)
    e = opus.ops.softmax(np.zeros((0, 70), np.float32))
    assert e.shape == (0, 70)


def test_softmax_padded_rows(target):
    """A view with padded rows (stride 72 for 65 elements; the interpreter copies it)."""
    base = _data((4, 72), np.float32, seed=6)
    x = base[:, :65]
    _check_softmax(opus.ops.softmax(x), np.ascontiguousarray(x))


# -- topk --------------------------------------------------------------------------------------

def topk_ref(x, k, largest=True):
    """Values and indices in the documented order: NaN largest, then by value (+0 above -0),
    ties by lower index first; sorted with Python's sort on explicit tuples."""
    x32 = x.astype(np.float32)
    vals = np.empty(x.shape[:-1] + (k,), x.dtype)
    inds = np.empty(x.shape[:-1] + (k,), np.int64)
    for idx in np.ndindex(x.shape[:-1]):
        r = x32[idx]

        def rank(i):
            v = float(r[i])
            nan = np.isnan(v)
            v = 0.0 if nan else v
            if largest:
                return (not nan, -v, bool(np.signbit(r[i])) if not nan else 0, i)
            return (nan, v, not np.signbit(r[i]) if not nan else 0, i)
        order = sorted(range(len(r)), key=rank)[:k]
        inds[idx] = order
        vals[idx] = x[idx][order]
    return vals, inds


def _check_topk(got, x, k, largest=True):
    v, i = got
    rv, ri = topk_ref(x, k, largest)
    assert v.dtype == x.dtype and i.dtype == np.int64 and v.shape == rv.shape
    assert np.array_equal(i, ri), f"indices differ:\n{i}\n{ri}"
    assert np.array_equal(v.view(np.uint8), rv.view(np.uint8)), "values differ (bitwise)"


@pytest.mark.parametrize("rows,n,k,dtype", [
    (3, 256, 8, np.float32),       # the short-row case: one warp per row
    (2, 1000, 40, BF16),           # ragged, a 64-long list on NVIDIA
    (5, 37, 37, np.float16),       # k = n
    (1, 1, 1, np.float32),         # one element
    (4, 129, 128, np.float32),     # the largest k
])
def test_topk_shapes(target, rows, n, k, dtype):
    x = _data((rows, n), dtype, seed=k)
    _check_topk(opus.ops.topk(x, k), x, k)


def test_topk_split_rows(target):
    """Few long rows: slices (whole 512-element groups) each write their lists and the last
    block of each row merges them in the same launch; the largest value last in the last
    slice, the smallest first."""
    assert rowtopk.plan(2, 40000, 64, 8, 32) == ("rows", 4, 2)
    x = _data((2, 20000), np.float32, seed=7)
    x[1, 19999] = 100.0                # the last element of the last slice
    x[0, 0] = -100.0
    _check_topk(rowtopk.launch(x, 64, True, ("rows", 1, 4)), x, 64)
    _check_topk(rowtopk.launch(x, 64, False, ("rows", 2, 3)), x, 64, largest=False)


@pytest.mark.parametrize("shape,n,k,largest", [
    (("rows", 2, 3), 2600, 64, True),      # ragged n (the last slice 552 long, not a multiple of 4)
    (("rows", 1, 4), 1000, 1, True),       # k = 1; slices 3 and 4 start past n (empty lists)
    (("rows", 2, 2), 100, 100, False),     # k = n, one slice empty
    (("rows", 4, 2), 5000, 128, False),    # k = 128 (R = 4 on NVIDIA), 4 warps per slice
])
def test_topk_split_one_launch_repeated(target, monkeypatch, shape, n, k, largest):
    """The split path is one launch (grid: rows x slices), called three times on new data
    with one plan: the workspace and per-row counters are reused, so each call is right only
    if the previous one's last blocks set the counters back to 0 (values and indices vs the
    numpy order)."""
    from opus.frontend.interp_launch import InterpEntry
    grids = []
    run = InterpEntry.run

    def counted(self, launcher, *a):
        grids.append(launcher.grid)
        return run(self, launcher, *a)
    monkeypatch.setattr(InterpEntry, "run", counted)
    monkeypatch.setattr(rowtopk, "_PLANS", {})
    for seed in range(3):
        x = _data((3, n), np.float32, seed=100 * seed + n)
        grids.clear()
        _check_topk(rowtopk.launch(x, k, largest, shape), x, k, largest)
        assert grids == [(3, shape[2], 1)]


def test_topk_split_workspaces_kept():
    """The split path's workspace and counters: made once (zeroed counters) and handed out
    again on the next call (numpy: the interpreter's single stream)."""
    x = np.zeros((3, 100), np.float32)
    spaces = rowtopk._split_workspaces(x, 3 * 2 * 32, 3)
    work, counts = spaces.get()
    assert work.shape == (192,) and work.dtype == np.uint64
    assert counts.dtype == np.int32 and counts.shape == (3,) and not counts.any()
    again = spaces.get()
    assert again[0] is work and again[1] is counts


def test_topk_split_rows_of_warps(target):
    """Slices of 2 warps (each warp's list merged through shared memory), bf16, k = 128."""
    x = _data((3, 9000), BF16, seed=11)
    _check_topk(rowtopk.launch(x, 128, True, ("rows", 2, 1)), x, 128)
    _check_topk(rowtopk.launch(x, 20, False, ("rows", 4, 2)), x, 20, largest=False)


def test_topk_ties_and_special_values(target):
    x = np.random.default_rng(8).integers(-3, 4, (6, 300)).astype(np.float32)  # many ties
    x[1, 9] = np.nan
    x[1, 200] = -np.nan
    x[2, :] = np.inf
    x[3, 50] = -np.inf
    x[4, ::3] = -0.0
    x[4, 1::3] = 0.0
    x[5, :] = 0.0
    for k in (1, 5, 64):
        _check_topk(opus.ops.topk(x, k), x, k)
        _check_topk(opus.ops.topk(x, k, largest=False), x, k, largest=False)


def _special_rows(n, seed):
    """Six rows of n: many ties (integers -3..3), NaN and -NaN, all +inf, a -inf, +-0.0
    interleaved, all zeros."""
    x = np.random.default_rng(seed).integers(-3, 4, (6, n)).astype(np.float32)
    x[1, 9] = np.nan
    x[1, n - 1] = -np.nan
    x[2, :] = np.inf
    x[3, n // 2] = -np.inf
    x[4, ::3] = -0.0
    x[4, 1::3] = 0.0
    x[5, :] = 0.0
    return x


@pytest.mark.parametrize("shape,n,ks", [
    (("short", 32, 16), 300, (1, 5, 32)),       # 16 lanes per row, 2 rows per 32-lane warp
    (("short", 16, 32), 300, (1, 5, 32)),       # a whole 32-lane warp per row
    (("rows", 1, 1), 300, (1, 5, 128)),         # the streaming kernel, one warp per row
    (("rows", 1, 3), 1500, (1, 5, 128)),        # 3 slices of 512 (the last ragged), one launch
    (("rows", 2, 2), 1500, (1, 5, 64)),         # slices of 2 warps merged in shared memory
    (("rows", 4, 3), 2100, (1, 5, 64)),         # 4 warps a slice, the last block's merge
])
def test_topk_every_shape_special_values(target, shape, n, ks):
    """Ties, NaN, +-inf, +-0.0 through every kernel and launch shape, largest and smallest."""
    x = _special_rows(n, seed=n)
    for k, largest in [(ks[0], True), (ks[1], False), (ks[2], True), (ks[2], False)]:
        _check_topk(rowtopk.launch(x, k, largest, shape), x, k, largest)


@pytest.mark.parametrize("rows,n,k,dtype", [
    (4, 1, 1, BF16),               # rows of 1 element: one lane per row, 32 rows per warp
    (3, 37, 32, np.float16),       # ragged: 32 values per lane, 2 lanes per row, k = 32
    (2, 129, 1, BF16),             # k = 1
    (3, 1000, 32, np.float32),     # ragged (not a multiple of 4), 32 lanes per row
])
def test_topk_short_rows(target, rows, n, k, dtype):
    assert rowtopk.plan(rows, n, k, 8, 32)[0] == "short"
    x = _data((rows, n), dtype, seed=n)
    _check_topk(opus.ops.topk(x, k), x, k)
    _check_topk(opus.ops.topk(x, k, largest=False), x, k, largest=False)


def test_topk_long_row_threshold_rises(target):
    """A row ascending then descending: the queue takes every element of the ascending half
    (each enters the list) and almost none after; k = 128 with the smallest too."""
    x = np.concatenate([np.arange(3000), np.arange(3000)[::-1] - 0.5]).astype(np.float32)[None]
    _check_topk(opus.ops.topk(x, 128), x, 128)
    _check_topk(opus.ops.topk(x, 7, largest=False), x, 7, largest=False)


def test_topk_smallest_ascending_rows(target):
    """Rows sorted ascending (every chunk enters the list) and largest=False with bf16."""
    x = np.tile(np.arange(500, dtype=np.float32), (2, 1)).astype(BF16)
    _check_topk(opus.ops.topk(x, 16), x, 16)
    _check_topk(opus.ops.topk(x, 16, largest=False), x, 16, largest=False)


def test_topk_batches_and_empty(target):
    x = _data((2, 3, 50), np.float32, seed=9)
    _check_topk(opus.ops.topk(x, 4), x, 4)
    v, i = opus.ops.topk(np.zeros((0, 50), np.float32), 3)
    assert v.shape == (0, 3) and i.shape == (0, 3)
    v, i = opus.ops.topk(x, 0)
    assert v.shape == (2, 3, 0)


def test_topk_plans_are_kept(monkeypatch):
    """A repeated call reuses its launch plan (the rule is not asked again); another k plans
    anew."""
    x = _data((3, 300), np.float32, seed=12)
    with opus.set_target("sm_90a", interpret=True):
        _check_topk(opus.ops.topk(x, 5), x, 5)

        def no_plan(*a):
            raise AssertionError("planned again")
        monkeypatch.setattr(rowtopk, "plan", no_plan)
        _check_topk(opus.ops.topk(x, 5), x, 5)
        with pytest.raises(AssertionError, match="planned again"):
            opus.ops.topk(x, 6)


def test_topk_launch_rule():
    # short rows: 32 values per lane (where n allows), G lanes per row
    assert rowtopk.plan(16384, 256, 8, 132, 32) == ("short", 16, 16)
    assert rowtopk.plan(3, 1000, 32, 132, 32) == ("short", 32, 32)
    assert rowtopk.plan(3, 37, 5, 132, 32) == ("short", 16, 4)
    assert rowtopk.plan(3, 1, 1, 132, 32) == ("short", 1, 1)
    assert rowtopk.plan(3, 2048, 8, 132, 64) == ("short", 32, 64)   # AMD's 64-lane waves
    assert rowtopk.plan(3, 256, 33, 132, 32) == ("rows", 1, 1)      # k > 32: the streaming kernel
    # long rows: one warp each where rows fill the SMs (16 warps per SM)
    assert rowtopk.plan(4096, 32768, 8, 132, 32) == ("rows", 1, 1)
    assert rowtopk.plan(2112, 8192, 8, 132, 32) == ("rows", 1, 1)
    # few long rows: about 16 warps per SM (64 rows x 8 slices x 4 warps), >= 4096 elements
    # per warp, at most 4 warps a slice
    assert rowtopk.plan(64, 131072, 64, 132, 32) == ("rows", 4, 8)
    assert rowtopk.plan(2048, 32768, 8, 132, 32) == ("rows", 2, 1)
    assert rowtopk.plan(1, 131072, 8, 132, 32) == ("rows", 4, 8)
    assert rowtopk.plan(300, 32768, 64, 132, 32) == ("rows", 4, 2)
    assert rowtopk.plan(7, 12288, 8, 132, 32) == ("rows", 2, 1)      # 3 warps: 2 of them
    assert rowtopk.list_size(8, 32) == 32 and rowtopk.list_size(65, 32) == 128
    assert rowtopk.list_size(8, 64) == 64


@pytest.mark.parametrize("rows", [1, 7, 64, 300, 2000])
@pytest.mark.parametrize("n", [5000, 32768, 131072, 1 << 20])
@pytest.mark.parametrize("sms,ws", [(132, 32), (304, 64)])
def test_topk_split_rule_fills_the_chip(rows, n, sms, ws):
    """Split rows: the warps give every SM more than 8 (of the 16 aimed at) where the rows
    allow it (each warp >= 4096 elements), slices of at most 4 warps, and every warp at
    least 4096 elements."""
    kind, wpr, slices = rowtopk.plan(rows, n, 64, sms, ws)
    assert kind == "rows" and 1 <= wpr <= 4 and wpr & (wpr - 1) == 0
    if slices > 1 or wpr > 1:
        assert n // (wpr * slices) >= 4096
        assert rows * wpr * slices > min(8 * sms, rows * (n // 4096) // 2)
    elif n > 4096 and rows < 16 * sms:
        assert n < 2 * 4096                            # too short to split


# -- AMDGCN: warp reductions and shuffles in DPP / ds_bpermute, no LDS round trips ---------------

def _ds_ops(asm):
    return set(re.findall(r"\bds_\w+", asm))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_softmax_warp_uses_dpp(arch):
    asm = rowsoftmax.SOFTMAX[dt.bf16].asm(target=arch, SHAPE="warp", VEC=8, CHUNKS=2, BLOCK=256,
                                          RAGGED=True)
    assert re.search(r"row_(half_)?mirror|row_bcast", asm), "no DPP row operation"
    assert re.search(r"quad_perm", asm)
    assert not _ds_ops(asm), f"LDS traffic in the warp reduction: {_ds_ops(asm)}"


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_topk_short_rows_use_dpp_not_lds(arch):
    """The short-row kernel: the butterfly's partner lists by DPP moves (xor 1, 2: quad_perm;
    4, 8: row_ror/row_mirror class moves) and ds_bpermute (16, 32), never an LDS array."""
    asm = rowtopk.TOPK_SHORT[dt.f32].asm(target=arch, KOUT=8, P=8, G=64, VEC=4)
    assert re.search(r"quad_perm", asm), "no DPP move for the short butterflies"
    assert _ds_ops(asm) == {"ds_bpermute_b32"}, _ds_ops(asm)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_topk_streaming_queue_in_lds(arch):
    """The streaming kernel: the network's shuffles as DPP / ds_bpermute; LDS holds only the
    candidate queue (64-bit composites)."""
    asm = rowtopk.TOPK[dt.f32].asm(target=arch, K=64, KOUT=8, WPR=1, BLOCK=256, VEC=4)
    assert re.search(r"quad_perm|row_ror", asm), "no DPP move for the short butterflies"
    assert _ds_ops(asm) == {"ds_bpermute_b32", "ds_read_b64", "ds_write_b64"}, _ds_ops(asm)
    assert re.search(r"v_bcnt_u32_b32|s_bcnt1", asm), "the queue's ranks: no bit count"


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_topk_split_counts_release_acquire(arch):
    """The one-launch split: the lists are written back from L2 before the count (buffer_wbl2:
    release), the count is one global atomic add, and the last block invalidates its cache
    before reading the other slices' lists (buffer_inv: acquire)."""
    asm = rowtopk.TOPK[dt.f32].asm(target=arch, K=64, KOUT=64, WPR=4, BLOCK=256, VEC=4,
                                   SPLIT=True)
    assert re.search(r"(global|buffer)_atomic_add\b", asm), "no atomic count"
    assert "buffer_wbl2" in asm and "buffer_inv" in asm


def test_sass_topk_split_counts_release_acquire():
    """sm_90a: a GPU-scope fence after the lists are written, the count an ATOMG.ADD between
    fences, the L1 invalidated (CCTL.IVALL) before the last block reads the lists."""
    sass = rowtopk.TOPK[dt.f32].sass(target="sm_90a", K=64, KOUT=64, WPR=4, BLOCK=128, VEC=4,
                                     SPLIT=True)
    assert re.search(r"ATOMG\.E\.ADD\.S32\.STRONG\.GPU", sass), "no device-scope atomic count"
    assert len(re.findall(r"MEMBAR\.\w+\.GPU", sass)) >= 2 and "CCTL.IVALL" in sass


_LARGEST_LISTS = [   # the most registers each kernel holds: 32 lists of 32, and K = 128
    (rowtopk.TOPK_SHORT, dict(KOUT=32, P=32, G=32, VEC=4)),
    (rowtopk.TOPK, dict(K=128, KOUT=128, WPR=4, BLOCK=128, VEC=4, SPLIT=True)),
    (rowtopk.TOPK, dict(K=128, KOUT=128, WPR=1, BLOCK=128, VEC=4)),
]


@pytest.mark.parametrize("which", range(len(_LARGEST_LISTS)))
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_amdgcn_topk_lists_stay_in_registers(arch, which):
    """No VGPR spills (the short-row kernel's fixed 256-thread block lets a lane hold 32
    composites of its own and a list of 32)."""
    kern, kw = _LARGEST_LISTS[which]
    if kw.get("BLOCK") == 128:
        kw = dict(kw, BLOCK=256)                       # 4 waves of 64
    asm = kern[dt.f32].asm(target=arch, **kw)
    assert re.search(r"\.vgpr_spill_count:\s+0\b", asm), re.findall(r"\.vgpr_\w+:\s+\d+", asm)


@pytest.mark.parametrize("which", range(len(_LARGEST_LISTS)))
def test_sass_topk_lists_stay_in_registers(which):
    kern, kw = _LARGEST_LISTS[which]
    res = kern[dt.f32].resources(target="sm_90a", **kw)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res


# -- GPU ---------------------------------------------------------------------------------------

def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n", [(3, 1000), (1, 1), (7, 3001), (2, 8192), (3, 70001)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gpu_softmax_vs_torch(rows, n, dtype):
    torch = _torch()
    x = torch.randn(rows, n, device="cuda", dtype=getattr(torch, dtype)) * 3
    x[0, 0] = float("nan") if rows > 1 else x[0, 0]
    y = opus.ops.softmax(x)
    ref = torch.softmax(x.float(), -1).to(x.dtype)
    torch.testing.assert_close(y, ref, equal_nan=True, rtol=2e-2 if dtype != "float32" else 1e-5,
                               atol=1e-6)


@pytest.mark.gpu
def test_gpu_softmax_graph_and_compile():
    torch = _torch()
    x = torch.randn(64, 5000, device="cuda", dtype=torch.bfloat16)
    ref = torch.softmax(x.float(), -1).to(x.dtype)
    out = torch.empty_like(x)
    opus.ops.softmax(x, out=out)                    # plan and compile outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        opus.ops.softmax(x, out=out)
    out.zero_()
    g.replay()
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=1e-6)
    f = torch.compile(lambda t: opus.ops.softmax(t * 2), fullgraph=True)
    torch.testing.assert_close(f(x), torch.softmax((x * 2).float(), -1).to(x.dtype),
                               rtol=2e-2, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n,k", [(16, 256, 8), (33, 1000, 40), (8, 32768, 8),
                                      (3, 131072, 64), (5, 129, 128), (4, 5, 5)])
@pytest.mark.parametrize("largest", [True, False])
def test_gpu_topk_vs_torch(rows, n, k, largest):
    torch = _torch()
    x = torch.randn(rows, n, device="cuda")
    x[0, 3] = float("nan")
    v, i = opus.ops.topk(x, k, largest=largest)
    rv, ri = torch.topk(x, k, largest=largest)
    torch.testing.assert_close(v, rv, equal_nan=True, rtol=0, atol=0)
    assert i.dtype == torch.int64
    torch.testing.assert_close(torch.gather(x, 1, i), v, equal_nan=True, rtol=0, atol=0)
    if not largest:   # no ties in random data: indices equal torch's too
        assert torch.equal(i, ri)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,rows,n,k", [
    (("short", 32, 8), 100, 256, 8), (("short", 8, 32), 100, 256, 8),
    (("short", 32, 32), 9, 1000, 32), (("rows", 1, 1), 9, 4000, 64),
    (("rows", 4, 5), 3, 131072, 64), (("rows", 8, 2), 2, 70001, 128),
    (("rows", 1, 7), 2, 50000, 1), (("rows", 4, 8), 64, 131072, 64),
    (("rows", 1, 32), 5, 131072, 64), (("rows", 2, 16), 3, 131073, 8)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_gpu_topk_launch_shapes(shape, rows, n, k, dtype):
    """Every kernel and launch shape against torch.topk (values bit for bit, NaN included;
    indices that gather them), largest and smallest."""
    torch = _torch()
    x = (torch.randn(rows, n, device="cuda") * 3).to(getattr(torch, dtype))
    x[0, n // 3] = float("nan")
    x[-1, n - 1] = float("inf")
    for largest in (True, False):
        v, i = rowtopk.launch(x, k, largest, shape)
        rv, _ = torch.topk(x, k, largest=largest)
        torch.testing.assert_close(v, rv, equal_nan=True, rtol=0, atol=0)
        torch.testing.assert_close(torch.gather(x, 1, i), v, equal_nan=True, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_topk_graph_and_compile():
    torch = _torch()
    x = torch.randn(64, 131072, device="cuda")
    rv, ri = torch.topk(x, 64)
    opus.ops.topk(x, 64)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        v, i = opus.ops.topk(x, 64)
    g.replay()
    torch.testing.assert_close(v, rv, rtol=0, atol=0)
    assert torch.equal(i, ri)
    f = torch.compile(lambda t: opus.ops.topk(t + 1, 8), fullgraph=True)
    v, i = f(x)
    rv, ri = torch.topk(x + 1, 8)
    torch.testing.assert_close(v, rv, rtol=0, atol=0)
    assert torch.equal(i, ri)


@pytest.mark.gpu
def test_gpu_topk_split_graph_replays_and_streams():
    """The one-launch split path (64 x 131072, k = 64): a CUDA graph replayed twice on new
    data (right only if each replay's last blocks set the counters back to 0), then eager
    calls on a second stream (its own workspace) beside the current stream's."""
    torch = _torch()
    x = torch.randn(64, 131072, device="cuda")
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    assert rowtopk.plan(64, 131072, 64, sms, 32)[2] > 1
    opus.ops.topk(x, 64)                            # plan and compile outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        v, i = opus.ops.topk(x, 64)
    for seed in range(2):
        x.copy_(torch.randn(x.shape, device="cuda", generator=torch.Generator(
            device="cuda").manual_seed(seed)))
        g.replay()
        rv, ri = torch.topk(x, 64)
        assert torch.equal(v, rv) and torch.equal(i, ri)
    y = torch.randn_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        vy, iy = opus.ops.topk(y, 64)
    vx, ix = opus.ops.topk(x, 64)
    torch.cuda.synchronize()
    for (got_v, got_i), t in (((vy, iy), y), ((vx, ix), x)):
        rv, ri = torch.topk(t, 64)
        assert torch.equal(got_v, rv) and torch.equal(got_i, ri)


def _assert_topk_like_torch(torch, got, x, k):
    rv, _ = torch.topk(x, k)
    v, i = got
    assert torch.equal(v, rv), "values differ from torch.topk"
    assert torch.equal(torch.gather(x, -1, i), v), "indices do not gather the values"


@pytest.mark.gpu
@pytest.mark.parametrize("n,k", [(1000, 5), (20000, 16), (131072, 64)])  # short, rows, split
def test_gpu_topk_fast_path_layouts_of_one_shape(n, k):
    """Repeated calls (the fast path after the first) with layouts of one shape interleaved:
    dense rows, padded rows, rows 4 bytes past 16-byte alignment, a batch of rows (a view),
    transposed storage (a copy each call); new data at each call, every result against
    torch.topk."""
    torch = _torch()
    rows = 2 if n == 131072 else 8

    def layouts():
        return [torch.randn(rows, n, device="cuda"),
                torch.randn(rows, n + 64, device="cuda")[:, :n],
                torch.randn(rows * n + 1, device="cuda")[1:].view(rows, n),
                torch.randn(2, rows // 2, n, device="cuda"),
                torch.randn(n, rows, device="cuda").t()]
    for _ in range(3):
        for x in layouts():
            _assert_topk_like_torch(torch, opus.ops.topk(x, k), x, k)


@pytest.mark.gpu
@pytest.mark.parametrize("rows,n,k", [(16384, 256, 8), (512, 8192, 8), (64, 131072, 64)])
def test_gpu_topk_fast_path_on_other_streams_and_in_graphs(rows, n, k):
    """The fast path launches on torch's current stream: a capture on the graph's side stream
    after an eager call (a launch on another stream would break the capture), replayed on new
    data, and eager calls on a side stream."""
    torch = _torch()
    x = torch.randn(rows, n, device="cuda")
    _assert_topk_like_torch(torch, opus.ops.topk(x, k), x, k)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = opus.ops.topk(x, k)
    for _ in range(2):
        x.normal_()
        g.replay()
        _assert_topk_like_torch(torch, got, x, k)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = torch.randn(rows, n, device="cuda")
        got = [opus.ops.topk(y, k) for _ in range(2)]
    torch.cuda.synchronize()
    for g2 in got:
        _assert_topk_like_torch(torch, g2, y, k)
