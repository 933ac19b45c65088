"""opus.ops.gemm (ops/gemm_hopper.py): the persistent warp-specialized sm_90a GEMM, in the
interpreter as sm_90a (ragged shapes, both B layouts, every tile width, several tiles per block)
and on the GPU (torch tensors, CUDA graphs, a side stream), against a float32 product computed
with numpy / torch, within the output type's rounding."""
import re

import numpy as np
import pytest

import opus
import opus.ops

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16


def _inputs(m, n, k, dtype, b_kmajor, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if b_kmajor:
        b = np.ascontiguousarray(b.T).T      # K x N whose transpose (N x K) is row-major
    return a, b


def _check(c, a, b):
    """c within half an output ulp (2^-8 relative for bf16, 2^-11 for f16) of the float32 product
    (plus the float32 sums' own rounding)."""
    ref = a.astype(np.float32) @ b.astype(np.float32)
    half_ulp = 2.0 ** -8 if c.dtype == BF16 else 2.0 ** -11
    tol = half_ulp * np.abs(ref) + 1e-5 * np.abs(ref).max()
    bad = ~(np.abs(c.astype(np.float32) - ref) <= tol)      # NaN (never written) is bad too
    assert not bad.any(), f"{bad.sum()} elements off, e.g. at {np.argwhere(bad)[0]}"


@pytest.fixture
def sm90():
    with opus.set_target("sm_90a", interpret=True), opus.interp.checking():
        yield


@pytest.mark.parametrize("m,n,k,b_kmajor", [
    (200, 296, 72, False),   # ragged M, N; K not a multiple of the 64-deep stage
    (33, 264, 136, True),
    (129, 8, 8, True),       # one column panel, one k step
    (256, 512, 320, False),  # whole tiles, 5 stages of K (more than the ring holds)
])
def test_bf16_in_the_interpreter(sm90, m, n, k, b_kmajor):
    a, b = _inputs(m, n, k, BF16, b_kmajor)
    _check(opus.ops.gemm(a, b), a, b)


@pytest.mark.parametrize("block_n", [64, 128])
def test_narrower_tiles_and_more_tiles_than_blocks(sm90, block_n):
    a, b = _inputs(300, 392, 128, BF16, False, seed=1)   # 3 x 7 tiles of 128 x 64 on 4 blocks
    _check(opus.ops.gemm(a, b, block_n=block_n, blocks=4), a, b)


def test_f16_into_a_given_output(sm90):
    a, b = _inputs(70, 136, 40, np.float16, True, seed=2)
    out = np.full((70, 136), np.nan, np.float16)
    assert opus.ops.gemm(a, b, out=out) is out
    _check(out, a, b)


def test_empty_dimensions(sm90):
    a, b = _inputs(5, 16, 8, BF16, False)
    assert opus.ops.gemm(a[:0], b).shape == (0, 16)
    out = np.full((5, 16), 7, BF16)
    opus.ops.gemm(np.zeros((5, 0), BF16), np.zeros((0, 16), BF16), out=out)
    assert (out.astype(np.float32) == 0).all()


@pytest.mark.parametrize("a_shape,b_shape,kw,needle", [
    ((16, 12), (12, 16), {}, "K = 12 is not a multiple of 8"),
    ((16, 16), (16, 12), {}, "N = 12 is not a multiple of 8"),
    ((16, 16), (8, 16), {}, "inner dimensions differ"),
    ((16, 16), (16, 16), {"block_n": 96}, "block_n must be 64, 128 or 256"),
    ((16, 16), (16, 16), {"stages": 9}, "stages=9"),
])
def test_bad_shapes_and_options(sm90, a_shape, b_shape, kw, needle):
    with pytest.raises(opus.ArgumentError, match=needle):
        opus.ops.gemm(np.zeros(a_shape, BF16), np.zeros(b_shape, BF16), **kw)


def test_bad_types_and_layouts(sm90):
    with pytest.raises(opus.ArgumentError, match="must both be bf16 or both f16, got bf16 and f16"):
        opus.ops.gemm(np.zeros((8, 8), BF16), np.zeros((8, 8), np.float16))
    b = np.zeros((16, 32), BF16)[:, ::2]                   # no contiguous dimension
    with pytest.raises(opus.ArgumentError, match="b must have one contiguous dimension"):
        opus.ops.gemm(np.zeros((8, 16), BF16), b)


def test_other_targets_are_refused():
    with opus.set_target("sm_80", interpret=True):
        with pytest.raises(opus.ArgumentError, match="needs sm_90a.*current target is sm_80"):
            opus.ops.gemm(np.zeros((8, 8), BF16), np.zeros((8, 8), BF16))
    f8 = np.zeros((16, 16), ml_dtypes.float8_e4m3fn)
    with opus.set_target("gfx942", interpret=True):   # the AMD kernel: OCP fp8 is not gfx942's
        with pytest.raises(opus.ArgumentError, match="fp8_e4m3 inputs on gfx942.*FNUZ"):
            opus.ops.scaled_gemm(f8, f8.T, np.ones(1, np.float32), np.ones(1, np.float32))


# -- on the GPU ------------------------------------------------------------------------------------

def _torch_sm90():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs an sm_90 GPU")
    return torch


def _check_torch(torch, c, a, b):
    _check(c.float().cpu().numpy().astype(BF16 if c.dtype == torch.bfloat16 else np.float16),
           a.float().cpu().numpy(), b.float().cpu().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,b_kmajor", [(1000, 1112, 264, False), (4096, 4096, 4096, True),
                                            (1, 8, 8, False), (128, 8192, 8192, False),
                                            (333, 776, 1032, True)])
def test_gpu_shapes(m, n, k, b_kmajor):
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = (torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16).t() if b_kmajor else
         torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16))
    _check_torch(torch, opus.ops.gemm(a, b), a, b)


@pytest.mark.gpu
def test_gpu_f16_in_a_cuda_graph_and_on_a_side_stream():
    torch = _torch_sm90()
    a = torch.randn(520, 264, device="cuda").half()
    b = torch.randn(264, 392, device="cuda").half()
    out = torch.full((520, 392), float("nan"), device="cuda", dtype=torch.float16)
    opus.ops.gemm(a, b, out=out)                             # compiles and plans outside
    out.fill_(float("nan"))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opus.ops.gemm(a, b, out=out)
    graph.replay()
    torch.cuda.synchronize()
    _check_torch(torch, out, a, b)
    side = torch.cuda.Stream()
    out2 = torch.empty_like(out)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        opus.ops.gemm(a, b, out=out2)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    _check_torch(torch, out2, a, b)


# -- fp8 with scales ---------------------------------------------------------------------------------

F8 = ml_dtypes.float8_e4m3fn


def _scaled_inputs(m, n, k, mode_a, mode_b, seed=3):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(F8)
    b = rng.standard_normal((n, k)).astype(F8).T            # the transpose of N x K
    sa = np.float32([0.5]) if mode_a == "tensor" else rng.uniform(0.5, 2, m).astype(np.float32)
    sb = np.float32([2.0]) if mode_b == "tensor" else rng.uniform(0.5, 2, n).astype(np.float32)
    return a, b, sa, sb


def _check_scaled(c, a, b, sa, sb, sums=1e-5):
    """Within bf16 output rounding plus ``sums`` x the largest output for the sums' own
    error."""
    ref = (a.astype(np.float32) @ b.astype(np.float32)) * sa.reshape(-1, 1) * sb.reshape(1, -1)
    tol = 2.0 ** -8 * np.abs(ref) + sums * np.abs(ref).max()
    assert (np.abs(c.astype(np.float32) - ref) <= tol).all()


@pytest.mark.parametrize("m,n,k,mode_a,mode_b", [
    (200, 136, 96, "tensor", "tensor"), (130, 264, 256, "row", "column"),
    (64, 64, 128, "row", "tensor"), (70, 80, 48, "tensor", "column")])
@pytest.mark.parametrize("fast_accum", [False, True])
def test_scaled_fp8_in_the_interpreter(sm90, m, n, k, mode_a, mode_b, fast_accum):
    a, b, sa, sb = _scaled_inputs(m, n, k, mode_a, mode_b)
    c = opus.ops.scaled_gemm(a, b, sa, sb, fast_accum=fast_accum)
    assert c.dtype == BF16
    _check_scaled(c, a, b, sa, sb)


@pytest.mark.parametrize("m,n,k,block_n,blocks", [
    (136, 200, 384, 128, 4),    # 3 stages: one loop pair, then the odd stage
    (70, 264, 592, 128, 4),     # K not a multiple of the 128-deep promotion: 5 stages, zeros in
    (130, 136, 512, 128, 1),    # 4 stages (a pair, then the even tail); 4 tiles on one block
    (200, 176, 400, 64, 3),     # narrow tiles, 4 stages, more tiles than blocks
    (130, 400, 384, 192, 2),    # 2 pieces of 96 columns per stage; 3 stages; ragged N
    (70, 520, 272, 256, 2),     # 4 pieces of 64 columns; 3 stages (the last 16 deep)
    (64, 256, 128, 256, 1),     # one stage: the loop never runs
])
def test_promoted_schedule(sm90, m, n, k, block_n, blocks):
    """Promoted accumulation's two alternating partials over odd and even stage counts,
    ragged M, N and K, several tiles per block (each tile's ring position differs), per-row and
    per-column scales."""
    a, b, sa, sb = _scaled_inputs(m, n, k, "row", "column", seed=k)
    c = opus.ops.scaled_gemm(a, b, sa, sb, block_n=block_n, blocks=blocks)
    _check_scaled(c, a, b, sa, sb)


@pytest.mark.parametrize("block_n,scales,most", [(64, (2, 2), 1530), (128, (2, 2), 2050),
                                                 (128, (1, 1), 1700), (192, (2, 2), 1870),
                                                 (256, (2, 2), 2340)])
def test_promoted_sass_overlaps_the_adds(block_n, scales, most):
    """NVRTC for sm_90a, no GPU: the promoted kernel's QGMMAs are not serialized by ptxas (no
    C7514) and it injects no waits of its own (C7517), the consumers wait for all but the
    newest group (WARPGROUP.DEPBAR.LE gsb0, 0x1: a stage's adds overlap the next stage's
    QGMMAs), nothing spills and the SASS holds at most ``most`` instructions (1496, 2008,
    1664, 1832 and 2288 with the epilogue's swizzles hoisted in the layouts; 1576, 2160, 1816,
    2072 and 2616 when each store swizzled its own address)."""
    from opus import fp8_e4m3
    from opus.ops import gemm_hopper as G
    from opus.runtime import nvrtc
    cv = dict(DT=fp8_e4m3, BN=block_n, STAGES=4, B_KMAJOR=True, SCALES=scales,
              PROMOTE=G._PROMOTE_PIECES[block_n])
    k = G.gemm_kernel_for(opus.bf16, promoted=True)
    log = nvrtc.compile_cuda(k.source(target="sm_90a", **cv), arch="sm_90a").log
    assert "C7514" not in log and "C7517" not in log, log
    sass = k.sass(target="sm_90a", **cv)
    piece = block_n // G._PROMOTE_PIECES[block_n]
    assert f"QGMMA.64x{piece}x32.F32.E4M3.E4M3" in sass
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass
    res = k.resources(target="sm_90a", **cv)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert sum(1 for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line)) <= most


def test_promoted_accumulation_tile_widths(sm90):
    a, b, sa, sb = _scaled_inputs(32, 32, 32, "tensor", "tensor")
    with pytest.raises(opus.ArgumentError, match="block_n must be 64, 128, 192 or 256, got 96"):
        opus.ops.scaled_gemm(a, b, sa, sb, block_n=96)
    with pytest.raises(opus.ArgumentError, match="block_n must be 64, 128 or 256, got 192"):
        opus.ops.scaled_gemm(a, b, sa, sb, block_n=192, fast_accum=True)


def test_scaled_fp8_refusals(sm90):
    a, b, sa, sb = _scaled_inputs(32, 32, 32, "tensor", "tensor")
    with pytest.raises(opus.ArgumentError, match="fp8 wgmma reads B K-major"):
        opus.ops.scaled_gemm(a, np.ascontiguousarray(b), sa, sb)
    with pytest.raises(opus.ArgumentError, match="scale_b must hold one value or one per column"):
        opus.ops.scaled_gemm(a, b, sa, np.ones(5, np.float32))
    with pytest.raises(opus.ArgumentError, match="scale_a must be f32"):
        opus.ops.scaled_gemm(a, b, np.ones(1, np.float16), sb)
    with pytest.raises(opus.ArgumentError, match=r"fp8 inputs: opus.ops.scaled_gemm"):
        opus.ops.gemm(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("mode_a,mode_b", [("tensor", "tensor"), ("row", "column")])
def test_gpu_scaled_fp8(mode_a, mode_b):
    torch = _torch_sm90()
    a, b, sa, sb = _scaled_inputs(1000, 1048, 528, mode_a, mode_b)
    ta = torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    c = opus.ops.scaled_gemm(ta, tw.t(), torch.from_numpy(sa).cuda(), torch.from_numpy(sb).cuda())
    # the H100's fp8 wgmma keeps about 14 bits of its 128-deep stage sums (DeepSeek-V3
    # report; measured: fast accumulation then errs like torch's use_fast_accum=True), which
    # promotion adds in f32: 2^-10 of the largest output covers those stage sums' error
    _check_scaled(c.float().cpu().numpy(), a, b, sa, sb, sums=2.0 ** -10)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [64, 128, 192, 256])
def test_gpu_promoted_errors_match_cublas(block_n):
    """Promoted accumulation errs as cuBLAS's default does (torch._scaled_mm), both against a
    float64 product, at K = 8000 (ragged M, N and K: the last stage is 64 deep; each a
    multiple of 16, which torch._scaled_mm requires); fast accumulation's error is in the
    message for comparison."""
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(11)
    m, n, k = 1008, 1424, 8000
    a = (torch.randn(m, k, device="cuda", generator=g) / 2).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda", generator=g) / 2).to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    ref = a.double() @ w.double().t()

    def mean_err(c):
        return ((c.double() - ref).abs().mean() / ref.abs().mean()).item()

    ours = mean_err(opus.ops.scaled_gemm(a, w.t(), one, one, block_n=block_n))
    cublas = mean_err(torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one,
                                       out_dtype=torch.bfloat16))
    fast = mean_err(torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one,
                                     out_dtype=torch.bfloat16, use_fast_accum=True))
    assert ours <= 1.05 * cublas, (ours, cublas, fast)


def test_fp8_rows_must_be_16_byte_aligned(sm90):
    a, b, sa, sb = _scaled_inputs(16, 16, 24, "tensor", "tensor")
    with pytest.raises(opus.ArgumentError, match="K = 24 is not a multiple of 16"):
        opus.ops.scaled_gemm(a, b, sa, sb)


# -- fused epilogues ------------------------------------------------------------------------------

def _np_act(name, x):
    if name == "relu":
        return np.where(x < 0, 0.0, x)
    if name == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return x / (1 + np.exp(-x))


@pytest.mark.parametrize("act", ["relu", "gelu_tanh", "silu"])
def test_bias_activation_residual(sm90, act):
    """out = act(a @ b + bias) + residual, in float64 for the reference, against the kernel's
    one rounding to bf16."""
    a, b = _inputs(130, 200, 72, BF16, False, seed=5)
    rng = np.random.default_rng(6)
    bias = rng.standard_normal(200).astype(BF16)
    res = rng.standard_normal((130, 200)).astype(BF16)
    c = opus.ops.gemm(a, b, bias=bias, activation=getattr(opus.ops, act), residual=res)
    ref = _np_act(act, a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64))
    ref = ref + res.astype(np.float64)
    tol = 2.0 ** -8 * np.abs(ref) + 1e-4 * np.abs(ref).max()
    assert (np.abs(c.astype(np.float64) - ref) <= tol).all()


def _planned_body():
    """The body of the kernel the last new plan launched (opus.ops.gemm_hopper's plan cache)."""
    from opus.ops import gemm_hopper as G
    return list(G._PLANS.values())[-1].launch.kernel.body


@pytest.mark.parametrize("act,split,body", [(None, None, "ptx"), ("relu", None, "ptx"),
                                            ("silu", None, "cuda"), ("gelu_tanh", None, "cuda"),
                                            (None, 2, "cuda")])
def test_the_plan_picks_the_body(sm90, act, split, body):
    """Default: the PTX body (docs/ptx_body.md); the C++ body where the activation uses exp or
    tanh (not in a PTX body) or the plan splits K (its atomics: not in a PTX body)."""
    from opus.ops import gemm_hopper as G
    G._PLANS.clear()
    a, b = _inputs(70, 136, 256, BF16, False, seed=8)
    c = opus.ops.gemm(a, b, activation=act and getattr(opus.ops, act), split_k=split)
    assert _planned_body() == body
    ref = _np_act(act, a.astype(np.float64) @ b.astype(np.float64)) if act else \
        a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c.astype(np.float64) - ref) <= 2.0 ** -8 * np.abs(ref)
            + 1e-4 * np.abs(ref).max()).all()


def test_an_explicit_body_is_kept(sm90):
    """body='cuda' is used as given; body='ptx' with an activation a PTX body lacks is the
    trace's error at the activation's line (no silent change of body)."""
    from opus.ops import gemm_hopper as G
    a, b = _inputs(70, 136, 64, BF16, False, seed=9)
    G._PLANS.clear()
    opus.ops.gemm(a, b, body="cuda")
    assert _planned_body() == "cuda"
    with pytest.raises(opus.TraceError, match="not available in a PTX body"):
        opus.ops.gemm(a, b, activation=opus.ops.silu, body="ptx")
    with pytest.raises(opus.ArgumentError, match="body must be one of 'cuda', 'ptx' or None"):
        opus.ops.gemm(a, b, body="sass")


def test_a_users_activation_and_fp8_with_bias(sm90):
    a, b, sa, sb = _scaled_inputs(70, 80, 64, "row", "column")
    bias = np.linspace(-1, 1, 80).astype(BF16)
    c = opus.ops.scaled_gemm(a, b, sa, sb, bias=bias, activation=lambda x: x * x)
    ref = ((a.astype(np.float64) @ b.astype(np.float64)) * sa[:, None] * sb[None, :]
           + bias.astype(np.float64)) ** 2
    assert (np.abs(c.astype(np.float64) - ref) <= 2.0 ** -8 * ref + 1e-4 * ref.max()).all()


def test_bad_epilogue_operands(sm90):
    a, b = _inputs(16, 16, 16, BF16, False)
    with pytest.raises(opus.ArgumentError, match="bias must be 16 of bf16"):
        opus.ops.gemm(a, b, bias=np.zeros(8, BF16))
    with pytest.raises(opus.ArgumentError, match="residual must be 16 x 16 of bf16"):
        opus.ops.gemm(a, b, residual=np.zeros((16, 16), np.float32))
    with pytest.raises(opus.ArgumentError, match="activation must be a function"):
        opus.ops.gemm(a, b, activation="relu")
    with opus.set_target("gfx942", interpret=True):   # the AMD kernel checks them alike
        with pytest.raises(opus.ArgumentError, match="bias must be 16 of bf16"):
            opus.ops.gemm(a, b, bias=np.zeros(8, BF16))


@pytest.mark.gpu
def test_gpu_fused_epilogue():
    torch = _torch_sm90()
    a = torch.randn(1000, 520, device="cuda").bfloat16()
    b = torch.randn(520, 776, device="cuda").bfloat16()
    bias = torch.randn(776, device="cuda").bfloat16()
    res = torch.randn(1000, 776, device="cuda").bfloat16()
    c = opus.ops.gemm(a, b, bias=bias, activation=opus.ops.gelu_tanh, residual=res)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    ref = ref + res.double()
    assert ((c.double() - ref).abs() <= 2 ** -8 * ref.abs() + 1e-3 * ref.abs().max()).all()


def test_a_plan_is_per_target():
    """The same arrays under another target are planned (and refused) there, not launched with
    the first target's plan."""
    a, b = _inputs(16, 16, 16, BF16, False)
    out = np.zeros((16, 16), BF16)
    with opus.set_target("sm_90a", interpret=True):
        opus.ops.gemm(a, b, out=out)
    with opus.set_target("sm_80", interpret=True):
        with pytest.raises(opus.ArgumentError, match="needs sm_90a"):
            opus.ops.gemm(a, b, out=out)


# -- split-K ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,k,split,b_kmajor,block_n,blocks", [
    (200, 296, 1000, np.int64(3), False, None, 4),  # ragged M, N, K: splits of 5, 5, 6 stages
    #                                                   (the last 40 deep); a numpy int
    (70, 136, 200, 4, True, 128, 4),       # as many splits as stages: one each, the last 8 deep
    (33, 264, 520, 3, False, 64, 2),       # 15 units on 2 blocks: a block's units span tiles
    (129, 64, 640, 2, True, 64, 3),        # 2 row tiles, 10 stages in halves
])
def test_split_k_in_the_interpreter(sm90, m, n, k, split, b_kmajor, block_n, blocks):
    a, b = _inputs(m, n, k, BF16, b_kmajor, seed=k)
    _check(opus.ops.gemm(a, b, split_k=split, block_n=block_n, blocks=blocks), a, b)


@pytest.mark.parametrize("blocks", [1, 2, 4])
@pytest.mark.parametrize("block_m", [None, 64])
def test_split_k_sums_in_split_order_whichever_split_is_last(sm90, blocks, block_m):
    """Three one-stage splits whose f32 partials are 2^26, -2^26 and j (column j): summed in
    split order, (2^26 - 2^26) + j = j exactly; any other order rounds j + 2^26 to a multiple
    of 8 first. The interpreter runs blocks one after another, so the last split of a tile to
    arrive is split 2 (1 block), split 1 of tile 0 (2 blocks: units 0 and 2 run on block 0
    first) or split 0 of tile 1 (4 blocks: unit 3 runs on block 3, after units 4 and 5).
    64-row tiles (2 x 2 of them) sum with every slot's loads in flight at once."""
    m, n = 70, 200                          # 2 tiles 128 wide, ragged
    a = np.ones((m, 192), BF16)
    b = np.empty((192, n), np.float32)
    b[:64], b[64:128] = 2.0 ** 20, -2.0 ** 20
    b[128:] = np.arange(n, dtype=np.float32) / 64
    out = opus.ops.gemm(a, b.astype(BF16), split_k=3, block_n=128, blocks=blocks,
                        block_m=block_m)
    assert (out.astype(np.float32) == np.arange(n, dtype=np.float32)).all()


def test_split_k_repeated_calls_reset_the_counts(sm90):
    """One plan called three times: each call's last splits set the tile counts back to zero,
    else the next call's arrivals never see the last count and nothing is stored (the NaNs
    stay)."""
    a, b = _inputs(130, 136, 448, BF16, False, seed=7)
    out = np.empty((130, 136), BF16)
    for _ in range(3):
        out[...] = np.nan
        opus.ops.gemm(a, b, out=out, split_k=3, block_n=64)
        _check(out, a, b)


def test_split_k_with_bias_activation_residual(sm90):
    a, b = _inputs(130, 200, 456, BF16, True, seed=8)
    rng = np.random.default_rng(9)
    bias = rng.standard_normal(200).astype(BF16)
    res = rng.standard_normal((130, 200)).astype(BF16)
    c = opus.ops.gemm(a, b, bias=bias, activation=opus.ops.gelu_tanh, residual=res, split_k=3)
    ref = _np_act("gelu_tanh", a.astype(np.float64) @ b.astype(np.float64)
                  + bias.astype(np.float64)) + res.astype(np.float64)
    tol = 2.0 ** -8 * np.abs(ref) + 1e-4 * np.abs(ref).max()
    assert (np.abs(c.astype(np.float64) - ref) <= tol).all()


@pytest.mark.parametrize("m,n,k,split,block_n,fast_accum", [
    (136, 200, 640, 2, 128, False),    # promoted, 5 stages of 128: splits of 2 and 3
    (70, 264, 400, 4, 192, False),     # promoted in 96-wide pieces, 4 one-stage splits, ragged K
    (130, 136, 528, 3, None, True),    # fast accumulation, the split's default width (256)
])
def test_split_k_scaled_fp8(sm90, m, n, k, split, block_n, fast_accum):
    a, b, sa, sb = _scaled_inputs(m, n, k, "row", "column", seed=k)
    c = opus.ops.scaled_gemm(a, b, sa, sb, block_n=block_n, fast_accum=fast_accum,
                             split_k=split)
    _check_scaled(c, a, b, sa, sb)


@pytest.mark.parametrize("tiling", [(128, 128, 4), (64, 128, 4)])
def test_split_k_more_than_the_stages_is_clamped_by_the_kernel(sm90, monkeypatch, tiling):
    """A launch whose SPLIT exceeds K's stages (the host refuses it, a direct launch may not):
    the kernel splits K only as many ways as it has stages, so no unit is empty (an empty one
    would release a ring stage it never used), and 64-row tiles (every slot loaded at once)
    add only the slots in use."""
    from opus.ops import gemm_hopper as G
    monkeypatch.setattr(G, "_choose_tiling", lambda *args: tiling)
    monkeypatch.setattr(G, "_choose_split", lambda *args: (128, 4))     # promoted
    a, b = _inputs(130, 200, 128, BF16, False, seed=10)         # 2 stages, SPLIT = 4
    _check(opus.ops.gemm(a, b), a, b)
    a, b, sa, sb = _scaled_inputs(130, 200, 256, "row", "column", seed=10)   # promoted too
    _check_scaled(opus.ops.scaled_gemm(a, b, sa, sb), a, b, sa, sb)


# -- 64-row tiles (block_m=64: each consumer warpgroup all 64 rows x half the columns) ------------

@pytest.mark.parametrize("m,n,k,b_kmajor,block_n,split,blocks", [
    (70, 136, 200, False, 128, 1, 4),     # ragged: 2 x 2 tiles, the last row tile 6 rows
    (33, 264, 136, True, 256, 1, 2),      # 128 columns per warpgroup, ragged N, 3 stages
    (130, 392, 520, False, 128, 1, 3),    # 3 x 4 tiles on 3 blocks, 9 stages: the ring wraps
    (100, 264, 1000, True, 256, 3, 4),    # split: 2 x 2 tiles x 3 splits on 4 blocks
    (64, 128, 960, False, 128, 4, 2),     # one tile, 4 splits on 2 blocks
])
def test_block_m_64_in_the_interpreter(sm90, m, n, k, b_kmajor, block_n, split, blocks):
    a, b = _inputs(m, n, k, BF16, b_kmajor, seed=m + k)
    _check(opus.ops.gemm(a, b, block_m=64, block_n=block_n, split_k=split, blocks=blocks), a, b)


def test_block_m_64_f16_with_bias_activation_residual(sm90):
    a, b = _inputs(70, 264, 328, np.float16, True, seed=12)
    rng = np.random.default_rng(13)
    bias = rng.standard_normal(264).astype(np.float16)
    res = rng.standard_normal((70, 264)).astype(np.float16)
    for split in (1, 2):
        c = opus.ops.gemm(a, b, bias=bias, activation=opus.ops.silu, residual=res,
                          block_m=64, block_n=256, split_k=split, blocks=3)
        ref = _np_act("silu", a.astype(np.float64) @ b.astype(np.float64)
                      + bias.astype(np.float64)) + res.astype(np.float64)
        tol = 2.0 ** -11 * np.abs(ref) + 1e-4 * np.abs(ref).max()
        assert (np.abs(c.astype(np.float64) - ref) <= tol).all()


def test_block_m_64_scaled_fp8_fast_accum(sm90):
    """fp8 with fast accumulation takes the unpromoted kernel, so the small-M rule's 64-row
    tiles (here 2 x 8 of 64 x 128 for 16 blocks), with row and column scales."""
    from opus.ops import gemm_hopper as G
    assert G._choose_tiling(70, 1024, 528, 128, 16, None, None, None) == (64, 128, 1)
    a, b, sa, sb = _scaled_inputs(70, 1024, 528, "row", "column", seed=14)
    _check_scaled(opus.ops.scaled_gemm(a, b, sa, sb, fast_accum=True, blocks=16), a, b, sa, sb)


@pytest.mark.parametrize("cv", [dict(BN=128, STAGES=8), dict(BN=128, STAGES=8, B_KMAJOR=True),
                                dict(BN=256, STAGES=4, SPLIT=2)])
def test_block_m_64_sass(cv):
    """NVRTC for sm_90a, no GPU: each consumer warpgroup's wgmmas are 64 x BN / 2 (HGMMA), and
    nothing spills."""
    from opus.ops import gemm_hopper as G
    sass = G.gemm_kernel.sass(target="sm_90a", BLOCK_M=64, **cv)
    assert f"HGMMA.64x{cv['BN'] // 2}x16.F32.BF16" in sass
    assert f"HGMMA.64x{cv['BN']}x16" not in sass
    res = G.gemm_kernel.resources(target="sm_90a", BLOCK_M=64, **cv)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,b_kmajor,options", [
    (128, 8192, 8192, False, {}),         # the decode shape: the plan's 64 x 128 tiles
    (128, 8192, 8192, True, {}),
    (70, 4104, 3000, True, {"block_m": 64, "block_n": 256}),      # ragged
    (100, 2056, 5000, False, {"block_m": 64, "split_k": 3}),      # ragged, split
])
def test_gpu_block_m_64_in_a_cuda_graph(m, n, k, b_kmajor, options):
    """64-row tiles on the GPU against the float32 product, eager and in a CUDA graph replayed
    twice (bitwise equal: no split, or splits summed in order)."""
    torch = _torch_sm90()
    from opus.ops import gemm_hopper as G
    sms = G._sm_count(torch, torch.empty(1, device="cuda"))
    if not options and sms == 132:
        assert G._choose_tiling(m, n, k, 64, sms, None, None, None) == (64, 128, 1)
    g = torch.Generator(device="cuda").manual_seed(m + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
    if b_kmajor:
        b = b.t().contiguous().t()
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    opus.ops.gemm(a, b, out=out, **options)
    torch.cuda.synchronize()
    _check_torch(torch, out, a, b)
    first = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opus.ops.gemm(a, b, out=out, **options)
    for _ in range(2):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, first)


def test_block_m_64_refuses_a_promoted_or_narrow_kernel():
    """A direct launch's BLOCK_M=64 with PROMOTE or a 64-wide tile (a warpgroup's half would be
    32 columns) is refused while tracing, naming the tile."""
    from opus.ops import gemm_hopper as G
    for cv in (dict(BN=64), dict(DT=opus.fp8_e4m3, BN=128, B_KMAJOR=True, PROMOTE=1)):
        with pytest.raises(opus.TraceError, match="BLOCK_M=64"):
            G.gemm_kernel_for(opus.bf16, promoted="PROMOTE" in cv).specialize(
                target="sm_90a", BLOCK_M=64, **cv)


@pytest.mark.parametrize("m,n,k,blocks,planned", [
    (64, 128, 1024, 8, (1, 2, 128, 64)),  # one 64 x 128 tile (192 rows) on 8 blocks: 8 x 192 >
    #                                       5 x (64 + 128): min(8 // 1, 16 // 8) = 2 splits
    (128, 256, 1024, 4, (4, 1, 128, 64)),  # four 64 x 128 tiles on 4 blocks: 4 x 192 <= 5 x 384
])
def test_the_plan_tiles_and_splits_by_the_rule(sm90, monkeypatch, m, n, k, blocks, planned):
    """No block_m, block_n or split_k: the plan's tile and splits (its workspace's arguments)."""
    from opus.ops import gemm_hopper as G
    seen = []
    workspace = G._split_workspace
    monkeypatch.setattr(G, "_split_workspace",
                        lambda *args: seen.append(args[2:6]) or workspace(*args))
    a, b = _inputs(m, n, k, BF16, True, seed=11)
    _check(opus.ops.gemm(a, b, blocks=blocks), a, b)
    assert seen == [planned]                        # (tiles, splits, block_n, block_m)


@pytest.mark.parametrize("m,n,k,options,expect", [
    # rows streamed by the busiest SM per tile shape (128 x 128, 64 x 256, 64 x 128, 128 x 64):
    (128, 8192, 8192, {}, (64, 128, 1)),      # decode: 256, 320, 192, 192; 132 x 192 <= 5 x 8320
    (64, 8192, 8192, {}, (64, 128, 1)),       # M = 64: 64-row tiles only, 320 and 192
    (256, 8192, 8192, {}, (128, 128, 1)),     # 256, 320, 2 x 192, 2 x 192; 132 x 256 <= 5 x 8448
    (512, 8192, 8192, {}, (128, 128, 1)),     # 2 x 256, 2 x 320, 4 x 192, 4 x 192
    (128, 4096, 8192, {}, (64, 128, 2)),      # 132 x 192 > 5 x 4224: min(132 // 64, 128 // 8)
    (128, 2048, 8192, {}, (64, 128, 4)),      # 32 tiles: 4 splits of 32 stages
    (1024, 1024, 8192, {}, (64, 128, 1)),     # 128 tiles of 64 x 128: no room for a split
    (128, 2048, 960, {}, (64, 128, 1)),       # 15 stages: no split (each needs 8)
    (128, 2048, 8192, {"split_k": 1}, (64, 128, 1)),      # no split asked for
    (128, 8192, 8192, {"block_n": 128}, (128, 128, 2)),   # a width given: 128 rows, split
    (128, 8192, 8192, {"block_m": 64}, (64, 256, 2)),     # 64 rows given: 64 tiles, split
    (128, 8192, 8192, {"split_k": 4}, (128, 256, 4)),     # splits given: 128 x 256
    (4096, 4096, 4096, {}, (128, None, 1)),   # 512 tiles of 128 x 256: _choose's widths
    (8192, 8192, 1024, {}, (128, None, 1)),   # 2048 tiles
    (1024, 8192, 8192, {}, (128, None, 1)),   # 256 tiles
])
def test_tiling_rule(m, n, k, options, expect):
    """The plan's rule on an H100 (132 SMs), bf16 (K stages of 64)."""
    from opus.ops import gemm_hopper as G
    assert G._choose_tiling(m, n, k, 64, 132, options.get("block_m"), options.get("block_n"),
                            options.get("split_k")) == expect


@pytest.mark.parametrize("m,n,k,block_n,expect", [
    (128, 8192, 8192, None, (256, 4)),    # 32 tiles of 128 x 256, 4 splits of 32 stages
    (128, 8192, 8192, 128, (128, 2)),     # 64 tiles of the width asked for: 2 splits
    (128, 8192, 1024, None, (256, 2)),    # 16 stages: 2 splits of 8 (the fewest a split gets)
    (128, 8192, 960, None, (None, 1)),    # 15 stages: no split
    (1024, 8192, 8192, None, (None, 1)),  # 256 tiles: more than half the SMs have one
])
def test_split_rule(m, n, k, block_n, expect):
    """The split rule (promoted fp8, and unpromoted tiles whose width is given) on an H100."""
    from opus.ops import gemm_hopper as G
    assert G._choose_split(m, n, k, 64, 132, block_n, None, 256) == expect


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,split", [(128, 2048, 8192, None),    # the rule: 4 splits
                                         (200, 4104, 3000, 3)])      # ragged, splits of 15/16
def test_gpu_split_k_in_a_cuda_graph_replayed_twice(m, n, k, split):
    """Split-K on the GPU against torch, inside a CUDA graph replayed twice (each replay needs
    the tile counts its predecessor left at zero), and bitwise equal across calls (the sum's
    order does not depend on which split finishes last)."""
    torch = _torch_sm90()
    from opus.ops import gemm_hopper as G
    sms = G._sm_count(torch, torch.empty(1, device="cuda"))
    assert G._choose_tiling(m, n, k, 64, sms, None, None, split)[2] > 1   # 4 on an H100
    g = torch.Generator(device="cuda").manual_seed(m + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    opus.ops.gemm(a, b, out=out, split_k=split)               # compiles and plans outside
    first = out.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        opus.ops.gemm(a, b, out=out, split_k=split)
    for _ in range(2):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check_torch(torch, out, a, b)
        assert torch.equal(out, first)
    for _ in range(3):
        assert torch.equal(opus.ops.gemm(a, b, split_k=split), first)


@pytest.mark.gpu
def test_gpu_split_k_sums_in_split_order():
    """The interpreter's cancellation case (test_split_k_sums_in_split_order_whichever_split_is_last)
    on the GPU, where the splits race: 64 tiles of 3 one-stage splits, every column exact."""
    torch = _torch_sm90()
    m, n = 130, 4096
    a = torch.ones(m, 192, device="cuda", dtype=torch.bfloat16)
    b = torch.empty(192, n, device="cuda")
    b[:64], b[64:128] = 2.0 ** 20, -2.0 ** 20
    b[128:] = (torch.arange(n, device="cuda") % 256) / 64
    for _ in range(5):
        out = opus.ops.gemm(a, b.bfloat16(), split_k=3, block_n=128)
        assert torch.equal(out.float(), ((torch.arange(n, device="cuda") % 256).float())
                           .expand(m, n))


@pytest.mark.gpu
def test_gpu_split_k_scaled_fp8_with_epilogue():
    torch = _torch_sm90()
    a, b, sa, sb = _scaled_inputs(256, 2048, 4096, "row", "column")
    ta = torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    tw = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    bias = torch.randn(2048, device="cuda").bfloat16()
    c = opus.ops.scaled_gemm(ta, tw.t(), torch.from_numpy(sa).cuda(), torch.from_numpy(sb).cuda(),
                             bias=bias, activation=opus.ops.relu, split_k=4)
    ref = ((a.astype(np.float64) @ b.astype(np.float64)) * sa[:, None] * sb[None, :]
           + bias.double().cpu().numpy())
    ref = np.where(ref < 0, 0.0, ref)
    got = c.double().cpu().numpy()
    assert (np.abs(got - ref) <= 2.0 ** -8 * np.abs(ref) + 2.0 ** -10 * np.abs(ref).max()).all()


@pytest.mark.parametrize("promoted,cv", [
    (False, dict(BN=256, STAGES=3, SPLIT=4)),
    (True, dict(DT=opus.fp8_e4m3, BN=192, STAGES=4, B_KMAJOR=True, SCALES=(2, 2), PROMOTE=2,
                SPLIT=3)),
])
def test_split_k_sass(promoted, cv):
    """NVRTC for sm_90a, no GPU: the split-K kernels keep their wgmmas (HGMMA / QGMMA), spill
    nothing (the partial sums load one slot's piece at a time), and count arrivals with a
    release fence before the device-scope add and an L1 invalidation after it (acq_rel)."""
    from opus.ops import gemm_hopper as G
    k = G.gemm_kernel_for(opus.bf16, promoted=promoted)
    sass = k.sass(target="sm_90a", **cv)
    assert ("QGMMA.64x96x32" if promoted else "HGMMA.64x256x16") in sass
    res = k.resources(target="sm_90a", **cv)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    lines = [ln.split(";")[0].split("*/")[-1].strip() for ln in sass.splitlines()]
    lines = [ln for ln in lines if ln]
    add = next(i for i, ln in enumerate(lines) if ln.startswith("ATOMG.E.ADD.S32.STRONG.GPU"))
    assert "MEMBAR.ALL.GPU" in lines[add - 4:add] and lines[add + 1] == "CCTL.IVALL", \
        lines[add - 4:add + 2]


# -- the host fast path on the GPU (tests/ops/test_gemm_host.py: its launches without one) -------

def _close(torch, got, want):
    """got (bf16/f16) equals the f32 reference to the output type's rounding."""
    assert torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2 * want.abs().max().item())


@pytest.mark.gpu
def test_gpu_fast_path_interleaved_layouts_of_one_shape():
    """Dense and padded a, row-major b and b = w.t(), called in turn with new values each
    time (out=None and out=): every result is its own inputs' product."""
    torch = _torch_sm90()
    m, n, k = 128, 1024, 512
    g = torch.Generator(device="cuda").manual_seed(7)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", generator=g).to(torch.bfloat16)
    makers = [lambda: (rand(m, k), rand(k, n)), lambda: (rand(m, k + 64)[:, :k], rand(k, n)),
              lambda: (rand(m, k), rand(n, k).t()), lambda: (rand(m, k + 64)[:, :k],
                                                            rand(n, k).t())]
    for i in range(3):
        for make in makers:
            a, b = make()
            out = opus.ops.gemm(a, b) if i % 2 == 0 else opus.ops.gemm(
                a, b, out=torch.empty(m, n, device="cuda", dtype=torch.bfloat16))
            _close(torch, out, a.float() @ b.float())


@pytest.mark.gpu
@pytest.mark.parametrize("split_k", [1, 2])
def test_gpu_fast_path_side_stream_then_graph_capture(split_k):
    """After eager calls (the fast path's), the same layout on a side stream and captured
    into a CUDA graph (split-K: the capture's own workspace) gives each call's product; the
    graph replays new values copied into its inputs."""
    torch = _torch_sm90()
    m, n, k = 128, 768, 1024
    a, w = torch.randn(m, k, device="cuda").half(), torch.randn(n, k, device="cuda").half()
    for _ in range(3):
        _close(torch, opus.ops.gemm(a, w.t(), split_k=split_k), a.float() @ w.float().t())
    side = torch.cuda.Stream()
    a2 = torch.randn(m, k, device="cuda").half()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out2 = opus.ops.gemm(a2, w.t(), split_k=split_k)
        out3 = opus.ops.gemm(a, w.t(), split_k=split_k)
    torch.cuda.current_stream().wait_stream(side)
    _close(torch, out2, a2.float() @ w.float().t())
    _close(torch, out3, a.float() @ w.float().t())
    static_a = torch.zeros_like(a)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = opus.ops.gemm(static_a, w.t(), split_k=split_k)
    for x in (a, a2):
        static_a.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        _close(torch, static_out, x.float() @ w.float().t())
    _close(torch, opus.ops.gemm(a2, w.t(), split_k=split_k), a2.float() @ w.float().t())


@pytest.mark.gpu
def test_gpu_fast_path_scaled_gemm_with_new_scales():
    """Repeated fp8 calls with per-row / per-column scales and a bias, new values each call:
    each result is (a @ b) * scales + bias of its own operands."""
    torch = _torch_sm90()
    m, n, k = 128, 512, 512
    for _ in range(3):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        sa, sb = torch.rand(m, device="cuda") + 0.5, torch.rand(n, device="cuda") + 0.5
        bias = torch.randn(n, device="cuda").to(torch.bfloat16)
        out = opus.ops.scaled_gemm(a, w.t(), sa, sb, bias=bias)
        want = (a.float() @ w.float().t()) * sa[:, None] * sb[None, :] + bias.float()
        _close(torch, out, want)
