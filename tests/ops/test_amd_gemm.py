"""opus.ops.gemm on AMD (ops/gemm_amd.py): the tiled-MFMA GEMM in the interpreter as gfx942 and
gfx950 (ragged M, N, K, both B layouts, every tile), its generated HIP executed on the host
(tests/hostexec: MFMAs from the ISA's lane tables), and its AMDGCN (no scratch; the main loop's
MFMAs, buffer loads, LDS accesses and density against aiter's production kernel), each against
a float32 product computed with numpy, within the output type's rounding."""
import collections
import re

import numpy as np
import pytest

import opus
import opus.ops
from opus.ops import gemm_amd
from test_gemm import BF16, _inputs, _check   # the sm_90a tests' inputs and tolerance


@pytest.fixture(params=["gfx942", "gfx950"])
def amd(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


@pytest.mark.parametrize("m,n,k,b_kmajor", [
    (200, 296, 72, True),    # ragged M and N, K not a multiple of the 32-deep stage
    (200, 296, 72, False),
    (129, 8, 8, True),       # one row past a tile, one narrow column tile, one k step
    (129, 8, 8, False),
    (256, 256, 512, True),   # whole tiles, 16 stages: the two-tile loop runs 7 times
    (256, 256, 512, False),
    (70, 136, 160, True),    # an odd count of loop tiles (5): the single peeled tile
    (33, 40, 13, True),      # K odd: element-wide loads, K tail inside the only tile
    (7, 9, 5, False),        # N odd: element-wide B loads and C stores
])
def test_bf16_in_the_interpreter(amd, m, n, k, b_kmajor):
    a, b = _inputs(m, n, k, BF16, b_kmajor, seed=m + n + k)
    _check(opus.ops.gemm(a, b), a, b)


@pytest.mark.parametrize("block_m,block_n,b_kmajor", [
    (128, 64, True), (128, 128, False), (256, 128, True), (256, 192, True), (128, 256, False)])
def test_every_tile(amd, block_m, block_n, b_kmajor):
    a, b = _inputs(300, 420, 96, BF16, b_kmajor, seed=block_n)
    _check(opus.ops.gemm(a, b, block_m=block_m, block_n=block_n), a, b)


def test_f16_into_a_given_output(amd):
    a, b = _inputs(70, 136, 40, np.float16, True, seed=2)
    out = np.full((70, 136), np.nan, np.float16)
    assert opus.ops.gemm(a, b, out=out) is out
    _check(out, a, b)


def test_empty_dimensions(amd):
    a, b = _inputs(5, 16, 8, BF16, False)
    assert opus.ops.gemm(a[:0], b).shape == (0, 16)
    out = np.full((5, 16), 7, BF16)
    opus.ops.gemm(np.zeros((5, 0), BF16), np.zeros((0, 16), BF16), out=out)
    assert (out.astype(np.float32) == 0).all()


def test_inf_past_k_stays_out():
    """The K tail is masked, not read and multiplied by zeros: row 0's tail (k = 40..63 of
    its last 32-deep tile) would read row 1, which is inf; row 0 of C stays finite."""
    a, b = _inputs(2, 16, 40, BF16, True, seed=5)
    a[1] = np.inf
    with opus.set_target("gfx942", interpret=True):
        c = opus.ops.gemm(a, b)
    _check(c[:1], a[:1], b)


def host_launch(program, arch, a, b, c, block, bias=None, residual=None, scales=(None, None),
                **constexprs):
    """A hostexec Launch of the kernel for a's and c's types on a (M x K), b (K x N, either
    layout), c (M x N), with the tile ``block`` (BM, BN) and the vector widths and atom that
    gemm_amd picks; absent bias, residual and scales get one-element arrays."""
    from hostexec import Launch
    (m, k), n, kmajor = a.shape, b.shape[1], not b.flags.c_contiguous
    d, od = (opus.dtypes.dtype_of_numpy(x.dtype) for x in (a, c))
    wide = 16 // d.itemsize
    spec = gemm_amd.kernel_for(d, od).specialize(
        target=arch, BM=block[0], BN=block[1],
        ATOM_K=32 if arch == "gfx950" or d.itemsize == 1 else 16, VA=gemm_amd._widest(k, wide),
        VB=gemm_amd._widest(k if kmajor else n, wide), VC=gemm_amd._widest(n, 4),
        B_KMAJOR=kmajor, **constexprs)
    one, one_f32 = np.ones(1, c.dtype), np.ones(1, np.float32)
    bt = np.ascontiguousarray(b.T) if kmajor else b
    args = [a, bt, c, m, n, k, one if bias is None else bias,
            one if residual is None else residual,
            *[one_f32 if s is None else s for s in scales]]
    return Launch(program.add(spec), (-(-n // block[1]), -(-m // block[0])), 256, args)


def run_on_host(arch, tmp_path, make):
    """Build the launches of ``make(program)`` (pairs (launch, check)) into one host program,
    run them, then call each check."""
    from hostexec import HostProgram
    program = HostProgram(arch)
    runs = make(program)
    program.build(tmp_path)
    program.run([launch for launch, _ in runs])
    for _, check in runs:
        check()


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_hip_executed_on_the_host(arch, tmp_path):
    def make(program):
        runs = []
        for m, n, k, kmajor, bm, bn in ((100, 75, 37, True, 128, 64),
                                        (130, 72, 72, False, 256, 64)):
            a, b = _inputs(m, n, k, BF16, kmajor, seed=k)
            c = np.full((m, n), np.nan, BF16)
            runs.append((host_launch(program, arch, a, b, c, (bm, bn)),
                         lambda c=c, a=a, b=b: _check(c, a, b)))
        return runs
    run_on_host(arch, tmp_path, make)


# -- AMDGCN ------------------------------------------------------------------------------------

def _main_loop(asm):
    """The instructions of the smallest loop holding MFMAs (benchmarks/amd_codegen.py)."""
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
    import amd_codegen as ac
    lines, found = ac.loops(asm)
    loops = [ac._instructions(lines[a:b + 1]) for _, a, b in found]
    loops = [ins for ins in loops if any(x.startswith("v_mfma") for x in ins)]
    return min(loops, key=len)


def _ops(ins):
    return collections.Counter(re.match(r"(\S+)", x).group(1) for x in ins)


def test_gfx942_main_loop_beats_the_anchor_density():
    """256 x 192 tile, B K-major, gfx942: two K tiles per iteration, each 6 x ... per wave:
    8 x 6 atoms x 2 MFMAs (192 per iteration), 14 buffer_load_dwordx4 (7 per tile: 256 + 192
    rows of 64 bytes over 256 lanes), as many 16-byte LDS writes, 28 16-byte LDS reads (8 A +
    6 B per tile); no scratch. Density (MFMAs per instruction) above the anchor's 64 / 96."""
    k = gemm_amd.GEMM_AMD[opus.bf16]
    asm = k.asm(target="gfx942", BM=256, BN=192)
    res = k.resources(target="gfx942", BM=256, BN=192)
    loop = _main_loop(asm)
    c = _ops(loop)
    assert c["v_mfma_f32_16x16x16_bf16"] == 192, c
    assert c["buffer_load_dwordx4"] == 14 and c["ds_write_b128"] == 14, c
    assert c["ds_read_b128"] == 28, c
    assert not any(op.startswith(("scratch_", "buffer_store", "v_accvgpr")) for op in c), c
    assert c["v_mfma_f32_16x16x16_bf16"] / len(loop) > 64 / 96, (len(loop), c)
    assert res["scratch_bytes"] == 0 and res["vgpr_spills"] == 0, res
    assert res["smem_bytes"] == gemm_amd.lds_bytes(256, 192), res


def test_gfx950_uses_the_32_deep_atom():
    asm = gemm_amd.GEMM_AMD[opus.f16].asm(target="gfx950", ATOM_K=32, BM=256, BN=192)
    c = _ops(_main_loop(asm))
    assert c["v_mfma_f32_16x16x32_f16"] == 96 and c["buffer_load_dwordx4"] == 14, c


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,b_kmajor", [(1000, 1500, 296, True), (513, 264, 100, False)])
def test_on_an_amd_gpu(m, n, k, b_kmajor):
    """torch tensors on a ROCm device (through the HIP runtime), on a ragged shape, against
    torch.matmul within bf16 rounding."""
    torch = pytest.importorskip("torch")
    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        pytest.skip("needs a ROCm build of torch and an AMD GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16)
    b = w.t() if b_kmajor else w.t().contiguous()
    c = opus.ops.gemm(a, b)
    ref = a.float() @ b.float()
    assert torch.allclose(c.float(), ref, rtol=2 ** -7, atol=1e-3 * ref.abs().max().item())
