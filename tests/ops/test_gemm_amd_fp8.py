"""opus.ops.scaled_gemm on AMD (ops/gemm_amd.py): fp8 GEMM with f32 scales, in the interpreter
as gfx942 (FNUZ e4m3fnuz / e5m2fnuz) and gfx950 (OCP e4m3fn / e5m2) on ragged shapes, every
scale mode and output type, with the epilogue; its generated HIP executed on the host; its
AMDGCN (fp8 MFMAs in the main loop, no scratch, no byte shuffling). References: the fp8 inputs
decoded by ml_dtypes, multiplied in float64 with numpy."""
import collections
import re

import numpy as np
import pytest

import opus
import opus.ops
from opus.ops import gemm_amd
from test_gemm import BF16, _np_act
from test_amd_gemm import _main_loop, _ops, host_launch, run_on_host

ml_dtypes = pytest.importorskip("ml_dtypes")
E4M3 = {"gfx942": ml_dtypes.float8_e4m3fnuz, "gfx950": ml_dtypes.float8_e4m3fn}
E5M2 = {"gfx942": ml_dtypes.float8_e5m2fnuz, "gfx950": ml_dtypes.float8_e5m2}
HALF_ULP = {BF16: 2.0 ** -8, np.float16: 2.0 ** -11, np.float32: 2.0 ** -24}


@pytest.fixture(params=["gfx942", "gfx950"])
def amd(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


def _inputs(m, n, k, f8, mode_a, mode_b, seed=0):
    """a (M x K), b (K x N, the transpose of a row-major N x K), scales of the modes."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(f8)
    b = rng.standard_normal((n, k)).astype(f8).T
    sa = np.float32([0.5]) if mode_a == "tensor" else rng.uniform(0.5, 2, m).astype(np.float32)
    sb = np.float32([2.0]) if mode_b == "tensor" else rng.uniform(0.5, 2, n).astype(np.float32)
    return a, b, sa, sb


def _product(a, b, sa, sb):
    return ((a.astype(np.float64) @ b.astype(np.float64)) * sa.reshape(-1, 1).astype(np.float64)
            * sb.reshape(1, -1).astype(np.float64))


def _check(c, ref):
    """Within half an output ulp (one rounding) plus 1e-5 of the largest value (the f32
    sums' own error)."""
    tol = HALF_ULP[c.dtype.type] * np.abs(ref) + 1e-5 * np.abs(ref).max()
    bad = np.abs(c.astype(np.float64) - ref) > tol
    assert not bad.any(), f"{bad.sum()} elements off, e.g. at {np.argwhere(bad)[0]}"


@pytest.mark.parametrize("m,n,k,mode_a,mode_b,out_dtype,tile", [
    (200, 136, 200, "row", "column", None, None),       # ragged M, N; K = 3 x 64 + 8
    (130, 264, 256, "tensor", "tensor", "f16", None),   # 4 whole K stages (the loop runs)
    (300, 200, 72, "row", "tensor", "f32", (128, 64)),  # whole and edge tiles
    (70, 80, 33, "tensor", "column", "bf16", None),     # K odd: byte-wide loads
    (64, 64, 448, "row", "column", "bf16", (128, 64)),  # 7 stages: the odd peeled tile
])
def test_scaled_fp8(amd, m, n, k, mode_a, mode_b, out_dtype, tile):
    a, b, sa, sb = _inputs(m, n, k, E4M3[amd], mode_a, mode_b, seed=k)
    bm, bn = tile or (None, None)
    od = out_dtype and getattr(opus, out_dtype)
    c = opus.ops.scaled_gemm(a, b, sa, sb, out_dtype=od, block_m=bm, block_n=bn)
    assert c.dtype == (od.np_dtype if od else BF16) and c.shape == (m, n)
    _check(c, _product(a, b, sa, sb))


def test_e5m2_and_fast_accum(amd):
    """The chip's e5m2 as well; fast_accum changes nothing on AMD (f32 MFMA accumulation)."""
    a, b, sa, sb = _inputs(40, 48, 100, E5M2[amd], "row", "column", seed=2)
    c = opus.ops.scaled_gemm(a, b, sa, sb, fast_accum=True)
    _check(c, _product(a, b, sa, sb))
    assert np.array_equal(c.view(np.uint16),
                          opus.ops.scaled_gemm(a, b, sa, sb).view(np.uint16))


def test_scales_then_epilogue(amd):
    """act(a @ b * scales + bias) + residual, one rounding."""
    a, b, sa, sb = _inputs(70, 80, 64, E4M3[amd], "row", "column", seed=4)
    rng = np.random.default_rng(5)
    bias = rng.standard_normal(80).astype(BF16)
    res = rng.standard_normal((70, 80)).astype(BF16)
    c = opus.ops.scaled_gemm(a, b, sa, sb, bias=bias, activation=opus.ops.silu, residual=res)
    ref = _np_act("silu", _product(a, b, sa, sb) + bias.astype(np.float64))
    _check(c, ref + res.astype(np.float64))


def test_given_f32_output(amd):
    a, b, sa, sb = _inputs(20, 24, 32, E4M3[amd], "tensor", "tensor", seed=6)
    out = np.full((20, 24), np.nan, np.float32)
    assert opus.ops.scaled_gemm(a, b, sa, sb, out, out_dtype=opus.f32) is out
    _check(out, _product(a, b, sa, sb))


def test_k_zero(amd):
    """K = 0: zeros (scaled), then the epilogue alone."""
    f8 = E4M3[amd]
    a, b = np.zeros((6, 0), f8), np.zeros((10, 0), f8).T
    one = np.ones(1, np.float32)
    assert (opus.ops.scaled_gemm(a, b, one, one).astype(np.float32) == 0).all()
    bias = np.linspace(-1, 1, 10).astype(BF16)
    c = opus.ops.scaled_gemm(a, b, one, one, bias=bias, activation=opus.ops.relu)
    _check(c, np.broadcast_to(np.maximum(bias.astype(np.float64), 0), (6, 10)))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_hip_executed_on_the_host(arch, tmp_path):
    """The generated HIP (the 64-bit-word MFMA operands, the fp8 MFMAs, scales) on the host."""
    def make(program):
        runs = []
        for m, n, k, names, modes, bm, bn in (
                (100, 76, 100, ("row", "column"), (2, 2), 128, 64),
                (130, 72, 64, ("tensor", "tensor"), (1, 1), 256, 64)):
            a, b, sa, sb = _inputs(m, n, k, E4M3[arch], *names, seed=k)
            c = np.full((m, n), np.nan, BF16)
            ref = _product(a, b, sa, sb)
            runs.append((host_launch(program, arch, a, b, c, (bm, bn), scales=(sa, sb),
                                     SCALES=modes), lambda c=c, ref=ref: _check(c, ref)))
        return runs
    run_on_host(arch, tmp_path, make)


@pytest.mark.parametrize("arch,f8", [("gfx942", "fp8_e4m3fnuz"), ("gfx950", "fp8_e4m3")])
def test_amdgcn_fp8_main_loop(arch, f8):
    """The default 256 x 192 tile with row and column scales: per 64-deep K tile 96 fp8 MFMAs
    (8 x 6 atoms x 2 of 32 deep), 7 + 7 16-byte global loads and LDS writes, 14 16-byte LDS
    reads; two tiles per iteration; no byte shuffling of the operands (v_and / v_or3 / SDWA /
    v_perm: the 8-bit vectors' slices), no scalar branch per load, no scratch; MFMA density
    above the anchor's 64 / 96 with twice the K per MFMA."""
    k = gemm_amd.kernel_for(getattr(opus, f8), opus.bf16)
    cv = dict(target=arch, BM=256, BN=192, ATOM_K=32, VA=16, VB=16, SCALES=(2, 2))
    loop = _ops(_main_loop(k.asm(**cv)))
    res = k.resources(**cv)
    assert loop["v_mfma_f32_16x16x32_fp8_fp8"] == 192, loop
    assert loop["buffer_load_dwordx4"] == 14 and loop["ds_write_b128"] == 14, loop
    assert loop["ds_read_b128"] == 28, loop
    shuffles = [op for op in loop if op.startswith(("v_and", "v_or", "v_perm", "v_lshl"))
                or "sdwa" in op]
    assert not shuffles, loop
    assert loop["s_cbranch_scc1"] == 0 and loop["s_cmp_lt_i32"] == 0, loop
    assert not any(op.startswith(("scratch_", "buffer_store")) for op in loop), loop
    assert 192 / sum(loop.values()) > 64 / 96, loop
    assert res["scratch_bytes"] == 0 and res["vgpr_spills"] == 0, res
    assert res["smem_bytes"] == gemm_amd.lds_bytes(256, 192), res


@pytest.mark.gpu
def test_on_an_amd_gpu():
    """torch fp8 tensors on a ROCm device (the chip's e4m3), row and column scales, ragged,
    against the float64 product of the same values."""
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        pytest.skip("needs a ROCm build of torch and an AMD GPU")
    arch = torch.cuda.get_device_properties(0).gcnArchName.split(":")[0]
    f8 = torch.float8_e4m3fnuz if arch == "gfx942" else torch.float8_e4m3fn
    g = torch.Generator(device="cuda").manual_seed(0)
    m, n, k = 1000, 1500, 296
    a = torch.randn(m, k, device="cuda", generator=g).to(f8)
    w = torch.randn(n, k, device="cuda", generator=g).to(f8)
    sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
    sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
    c = opus.ops.scaled_gemm(a, w.t(), sa, sb)
    ref = (a.double() @ w.double().t()) * sa.double() * sb.double()
    assert ((c.double() - ref).abs() <= 2 ** -8 * ref.abs() + 1e-5 * ref.abs().max()).all()
