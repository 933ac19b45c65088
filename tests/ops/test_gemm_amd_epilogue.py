"""opus.ops.gemm's fused epilogue on AMD (ops/gemm_amd.py): C = activation(A @ B + bias[n]) +
residual[m, n] in f32, rounded once to the output type. In the interpreter as gfx942 and gfx950
(ragged M, N, K, both B layouts, bf16 and f16, each piece alone and all together; exact-size
bias and residual arrays, so an unbounded read past them would be a MemoryFault), its generated
HIP executed on the host, and its AMDGCN (the main loop as without an epilogue, no scratch, no
LDS traffic added), each against float64 numpy references."""
import collections
import re

import numpy as np
import pytest

import opus
import opus.ops
from opus.ops import gemm_amd
from test_gemm import BF16, _inputs, _np_act
from test_amd_gemm import _main_loop, _ops, host_launch, run_on_host

HALF_ULP = {BF16: 2.0 ** -8, np.float16: 2.0 ** -11}


@pytest.fixture(params=["gfx942", "gfx950"])
def amd(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


def _operands(m, n, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(dtype),
            rng.standard_normal((m, n)).astype(dtype))


def _reference(a, b, bias, act, residual):
    """act(a @ b + bias) + residual in float64 (None: the piece is absent)."""
    x = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        x = x + bias.astype(np.float64)
    if act is not None:
        x = _np_act(act, x)
    if residual is not None:
        x = x + residual.astype(np.float64)
    return x


def _check(c, ref):
    """c within half an output ulp of the float64 reference (one rounding), plus 1e-4 of the
    largest output for the f32 sums' own error."""
    tol = HALF_ULP[c.dtype.type] * np.abs(ref) + 1e-4 * np.abs(ref).max()
    bad = np.abs(c.astype(np.float64) - ref) > tol
    assert not bad.any(), f"{bad.sum()} elements off, e.g. at {np.argwhere(bad)[0]}"


PIECES = {"bias": ("bias", None, False), "relu": (None, "relu", False),
          "gelu_tanh": (None, "gelu_tanh", False), "silu": (None, "silu", False),
          "residual": (None, None, True), "all": ("bias", "gelu_tanh", True)}


# block 128 x 64 over 300 x 200: whole tiles and tiles at the ragged edge of M and N; K = 72:
# the masked, peeled last K tile
SHAPES = [(300, 200, 72, True, BF16, (128, 64)), (300, 200, 72, False, np.float16, (128, 64))]
# the default 256 x 192 tile (K-major) and 256 x 128 (row-major), one tile past the edge
MORE = [(200, 296, 40, True, np.float16, None),
        (130, 72, 13, False, BF16, None)]       # K odd: element-wise loads; N = 72: VC = 4


@pytest.mark.parametrize("piece,m,n,k,b_kmajor,dtype,tile", [
    (piece, *shape) for piece in PIECES for shape in SHAPES] + [("all", *s) for s in MORE])
def test_each_piece_and_all_together(amd, piece, m, n, k, b_kmajor, dtype, tile):
    has_bias, act, has_res = PIECES[piece]
    a, b = _inputs(m, n, k, dtype, b_kmajor, seed=m + k)
    bias, res = _operands(m, n, dtype, seed=n)
    bias, res = (bias if has_bias else None), (res if has_res else None)
    bm, bn = tile or (None, None)
    c = opus.ops.gemm(a, b, bias=bias, activation=act and getattr(opus.ops, act),
                      residual=res, block_m=bm, block_n=bn)
    assert c.dtype == dtype and c.shape == (m, n)
    _check(c, _reference(a, b, bias, act, res))


def test_odd_n_and_a_users_activation(amd):
    """N odd: element-wide bias and residual loads (VC = 1); a lambda as the activation."""
    a, b = _inputs(70, 9, 24, BF16, False, seed=4)
    bias, res = _operands(70, 9, BF16, seed=5)
    c = opus.ops.gemm(a, b, bias=bias, activation=lambda x: x * x, residual=res)
    x = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    _check(c, x * x + res.astype(np.float64))


def _leaky(x):
    if x < 0.0:         # a run-time `if` in an activation
        x = 0.125 * x
    return x


def test_activation_with_a_branch_or_a_constant(amd):
    a, b = _inputs(40, 24, 16, BF16, True, seed=3)
    x = a.astype(np.float64) @ b.astype(np.float64)
    _check(opus.ops.gemm(a, b, activation=_leaky), np.where(x < 0, x / 8, x))
    _check(opus.ops.gemm(a, b, activation=lambda x: 2), np.full_like(x, 2.0))


def test_rounded_once(amd):
    """a @ b = 1 + 3 * 2^-9 in every element (exact in f32, between bf16 neighbours 1 and
    1 + 2^-7); bias -0.5 and residual -0.5 leave 3 * 2^-9 (exact in bf16). A kernel rounding
    before the bias or before the residual writes 2^-7 instead."""
    a = np.array([[1.0, 3 * 2.0 ** -9]] * 5, BF16)
    b = np.ones((2, 8), BF16)
    bias = np.full(8, -0.5, BF16)
    res = np.full((5, 8), -0.5, BF16)
    c = opus.ops.gemm(a, b, bias=bias, residual=res)
    assert (c.astype(np.float64) == 3 * 2.0 ** -9).all(), c


def test_inputs_are_read_not_written(amd):
    """bias and residual keep their values; out is written where it lies (a given array)."""
    a, b = _inputs(40, 24, 16, BF16, True, seed=8)
    bias, res = _operands(40, 24, BF16, seed=9)
    keep = bias.copy(), res.copy()
    out = np.full((40, 24), np.nan, BF16)
    assert opus.ops.gemm(a, b, out, bias=bias, activation=opus.ops.relu, residual=res) is out
    assert np.array_equal(bias.view(np.uint16), keep[0].view(np.uint16))
    assert np.array_equal(res.view(np.uint16), keep[1].view(np.uint16))
    _check(out, _reference(a, b, bias, "relu", res))


def test_k_zero_still_applies_the_epilogue(amd):
    """K = 0: a @ b is zeros, so C = act(bias) + residual (not zeros)."""
    bias, res = _operands(6, 10, BF16, seed=1)
    c = opus.ops.gemm(np.zeros((6, 0), BF16), np.zeros((0, 10), BF16), bias=bias,
                      activation=opus.ops.silu, residual=res)
    _check(c, _reference(np.zeros((6, 0)), np.zeros((0, 10)), bias, "silu", res))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_hip_executed_on_the_host(arch, tmp_path):
    """The generated HIP (not the interpreter) of the whole epilogue, at a ragged edge."""
    def make(program):
        runs = []
        for m, n, k, kmajor, bm, bn in ((100, 76, 37, True, 128, 64),
                                        (130, 72, 40, False, 256, 64)):
            a, b = _inputs(m, n, k, BF16, kmajor, seed=k)
            bias, res = _operands(m, n, BF16, seed=m)
            c = np.full((m, n), np.nan, BF16)
            ref = _reference(a, b, bias, "gelu_tanh", res)
            runs.append((host_launch(program, arch, a, b, c, (bm, bn), bias, res,
                                     EPILOGUE=(True, opus.ops.gelu_tanh, True)),
                         lambda c=c, ref=ref: _check(c, ref)))
        return runs
    run_on_host(arch, tmp_path, make)


# -- AMDGCN ------------------------------------------------------------------------------------

def _code(arch, epilogue):
    k = gemm_amd.GEMM_AMD[opus.bf16]
    cv = dict(target=arch, BM=256, BN=192, ATOM_K=32 if arch == "gfx950" else 16,
              EPILOGUE=epilogue)
    asm = k.asm(**cv)
    every = collections.Counter(re.match(r"\s*(\S+)", x).group(1)
                                for x in asm.splitlines() if re.match(r"\s+[a-z]", x))
    return _ops(_main_loop(asm)), every, k.resources(**cv)


@pytest.mark.parametrize("arch,act", [("gfx942", "gelu_tanh"), ("gfx950", "silu")])
def test_amdgcn_main_loop_unchanged_no_scratch_no_lds(arch, act):
    """The default 256 x 192 tile with bias, activation and residual: the main loop is the plain
    kernel's instruction for instruction count (192 gfx942 / 96 gfx950 MFMAs, density above
    the anchor's 64 / 96 on gfx942), no scratch or spills, the same LDS instructions in the
    whole kernel (the epilogue works from registers), and its global loads are 6 bias vectors
    (once per tile: the 6 column atoms of a wave) and 48 residual vectors (8 x 6 atoms), each
    4 columns (8 bytes)."""
    loop, every, res = _code(arch, (True, getattr(opus.ops, act), True))
    plain_loop, plain_every, _ = _code(arch, (False, None, False))
    assert loop == plain_loop, (loop, plain_loop)
    mfma = sum(v for op, v in loop.items() if op.startswith("v_mfma"))
    assert mfma == (192 if arch == "gfx942" else 96), loop
    if arch == "gfx942":
        assert mfma / sum(loop.values()) > 64 / 96, loop
    assert res["scratch_bytes"] == 0 and res["vgpr_spills"] == 0, res
    assert res["smem_bytes"] == gemm_amd.lds_bytes(256, 192), res
    lds = lambda ops: {op: v for op, v in ops.items() if op.startswith("ds_")}
    assert lds(every) == lds(plain_every), (lds(every), lds(plain_every))
    assert every["buffer_load_dwordx2"] == 6 + 48 and plain_every["buffer_load_dwordx2"] == 0
    assert not any(op.startswith("scratch_") for op in every), every


@pytest.mark.gpu
@pytest.mark.parametrize("b_kmajor", [True, False])
def test_on_an_amd_gpu(b_kmajor):
    """torch tensors on a ROCm device, ragged shape, every piece, against torch in float64."""
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        pytest.skip("needs a ROCm build of torch and an AMD GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    m, n, k = 1000, 1500, 296
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
    bias = torch.randn(n, device="cuda", generator=g).to(torch.bfloat16)
    res = torch.randn(m, n, device="cuda", generator=g).to(torch.bfloat16)
    b = w.t() if b_kmajor else w.t().contiguous()
    c = opus.ops.gemm(a, b, bias=bias, activation=opus.ops.gelu_tanh, residual=res)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
    ref = ref + res.double()
    assert ((c.double() - ref).abs() <= 2 ** -8 * ref.abs() + 1e-3 * ref.abs().max()).all()
