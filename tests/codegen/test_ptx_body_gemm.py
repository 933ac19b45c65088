"""PTX bodies, step 2 (docs/ptx_body.md): mbarriers, TMA, fences, bulk groups, wgmma and
setmaxnreg in a PTX body, and the Hopper GEMM rendered as one (``body="ptx"``).

Without a GPU (NVRTC to CUBIN): each new kind's SASS (SYNCS / UTMALDG / UTMASTG / HGMMA ...);
the instruction text is one template both renderers fill (the C++ asm keeps its exact text);
wgmma forms the PTX body keeps and refuses (at the user's line); the GEMM's PTX body has the
C++ body's wgmma per stage, the same warpgroup fences and waits, no spills, no C7514 / C7517 /
C7519, and updates its accumulators in place (no f32 register copies); the GEMM with
body="ptx" in the interpreter. On a GPU (-m gpu): TMA and mbarrier kernels, wgmma of each kept
form, and the GEMM (ragged shapes, f16, an epilogue, the promoted fp8 kernel) through the PTX
body against numpy / torch and bit for bit against the C++ body.
"""
import os
import re
import sys

import numpy as np
import pytest

import opus
from opus import f16, bf16, f32, i8, u8, i32
from opus.codegen.cuda import _TMA
from opus.ops import gemm_hopper as G
from opus.runtime import nvrtc

from bad_input.expect import raises

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "lang"))
import tma_kernels as K  # noqa: E402
from wgmma_kernels import wg_gemm_for, memory_type, k_of, run_gemm  # noqa: E402

TARGET = "sm_90a"


def ptx_of(k):
    """The same kernel with a PTX body."""
    return opus.kernel(block=k.block, min_blocks=k.min_blocks, body="ptx")(k.fn)


def sass_ops(k, **constexprs):
    text = k.sass(target=TARGET, **constexprs)
    return re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", text)


def body_of(src):
    """The PTX lines of a PTX body's asm statement (the C string literals unquoted)."""
    return [l.strip().strip('"').replace("\\n", "").replace("%%", "%").strip()
            for l in src[src.index("asm volatile("):].splitlines()]


# -- the instruction text in one place ------------------------------------------------------------

def test_the_cuda_dialect_keeps_its_asm_text():
    """The C++ asm statements filled from the shared PTX templates are the ones written by hand
    before (the C++ body's output unchanged)."""
    assert _TMA["mbarrier_init"] == ('asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: '
                                     '"r"({bar}), "r"({count}) : "memory");')
    assert _TMA["tma_load"].format(rank=2, dst="d", tmap="m", bar="b", slots="%3, %4",
                                   coords='"r"(x), "r"(y)') == (
        'asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx'
        '::bytes [%0], [%1, {%3, %4}], [%2];" :: "r"(d), "l"((unsigned long long)&m), "r"(b), '
        '"r"(x), "r"(y) : "memory");')
    assert _TMA["mbarrier_arrive_expect_tx"].format(bar="b", bytes="n") == (
        '{ unsigned long long opus_st; asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 '
        '%0, [%1], %2;" : "=l"(opus_st) : "r"(b), "r"(n) : "memory"); }')
    assert _TMA["mbarrier_test_wait_fn"].format() == (
        'bool opus_mbar_test_wait(unsigned bar, int parity) { unsigned ok; asm volatile("{ .reg '
        '.pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; '
        '}" : "=r"(ok) : "r"(bar), "r"((unsigned)parity & 1u) : "memory"); return ok != 0; }')
    assert _TMA["bulk_wait_group_read"].format(n=0) == \
        'asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");'


# -- each new kind in SASS ---------------------------------------------------------------------------

def test_tma_load_and_mbarriers_in_sass():
    ops = sass_ops(ptx_of(K.load_box))
    assert "UTMALDG.2D" in ops                       # cp.async.bulk.tensor ... complete_tx
    assert "SYNCS.EXCH.64" in ops                    # mbarrier.init
    assert "SYNCS.ARRIVE.TRANS64" in ops or "SYNCS.ARRIVE.TRANS64.A1T0" in ops
    assert any(o.startswith("SYNCS.PHASECHK.TRANS64") for o in ops)   # the wait loop
    assert _async_ops(ops) == _async_ops(sass_ops(K.load_box))   # as the C++ body's


def _async_ops(ops):
    """The mbarrier, TMA and barrier instructions, in order (not FENCE.VIEW.ASYNC.S: ptxas puts
    one before the C++ body's mbarrier.init, none before the PTX body's; both GEMMs have two)."""
    return [o for o in ops if o.startswith(("SYNCS", "UTMA", "DEPBAR", "BAR"))]


def test_tma_store_and_bulk_groups_in_sass():
    ops = sass_ops(ptx_of(K.store_box))
    assert "UTMASTG.2D" in ops and "UTMACMDFLUSH" in ops   # the store, commit_group
    assert _async_ops(ops) == _async_ops(sass_ops(K.store_box))


def test_mbarrier_test_wait_in_sass():
    ptx = body_of(ptx_of(K.barrier_phases).source(target=TARGET))
    assert sum("mbarrier.test_wait.parity" in l for l in ptx) == 12     # bar.try_wait: 12 calls
    assert "SYNCS.PHASECHK.TRANS64" in sass_ops(ptx_of(K.barrier_phases))


def _wgmma_sass(a, b, c, a_from, n, body="ptx"):
    k = k_of(a)
    sw = 2 * k * memory_type(a).itemsize
    kern = wg_gemm_for(memory_type(a), memory_type(b), c)
    kern = ptx_of(kern) if body == "ptx" else kern
    return kern.sass(target=TARGET, AT=a, BT=b, CT=c, N=n, KT=2 * k, A_FROM=a_from, SW_A=sw,
                     SW_B=sw)


@pytest.mark.parametrize("a,b,c,a_from,n,mnemonic", [
    (f16, f16, f32, "smem", 64, "HGMMA.64x64x16.F32 "),
    (bf16, bf16, f32, "regs", 256, "HGMMA.64x256x16.F32.BF16 "),
    (i8, u8, i32, "smem", 48, "IGMMA.64x48x32.S8.U8 "),
])
def test_wgmma_forms_in_sass(a, b, c, a_from, n, mnemonic):
    sass = _wgmma_sass(a, b, c, a_from, n)
    lines = [l for l in sass.splitlines() if "GMMA" in l]
    assert len(lines) == 2 and all(mnemonic in l for l in lines), lines
    assert all(bool(re.search(r"R\d+, R\d+, gdesc", l)) == (a_from == "regs") for l in lines)
    assert "WARPGROUP.ARRIVE" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass


@pytest.mark.parametrize("a,b,c,a_from,needle", [
    (f16, f16, f16, "smem", "a f16 accumulator"),
    (u8, u8, i32, "regs", "A of u8 from registers"),
])
def test_wgmma_forms_the_ptx_body_refuses(a, b, c, a_from, needle):
    with raises(opus.TraceError, needle, "body='ptx'"):
        _wgmma_sass(a, b, c, a_from, 64)


# -- the GEMM ---------------------------------------------------------------------------------------

GEMMS = {  # name: (out dtype, promoted, constexprs)
    "bf16-bn256": (bf16, False, dict(DT=bf16, GROUP=5)),
    "bf16-bn128": (bf16, False, dict(DT=bf16, BN=128, STAGES=4, GROUP=5)),
    "f16-epilogue": (f16, False, dict(DT=f16, OUT=f16, BN=128, STAGES=4,
                                      EPILOGUE=(True, G.relu, True))),
    "fp8-promoted": (bf16, True, dict(DT=opus.fp8_e4m3, BN=128, STAGES=4, B_KMAJOR=True,
                                      SCALES=(2, 2), PROMOTE=G._PROMOTE_PIECES[128])),
}


@pytest.mark.parametrize("name", list(GEMMS))
def test_gemm_ptx_body_sass_matches_the_cpp_body(name):
    """The PTX body's SASS has the C++ body's wgmmas (count and shape), warpgroup fences and
    waits; ptxas neither serializes the wgmmas (C7514) nor injects waits or arrives (C7517,
    C7519); nothing spills; the registers stay within the C++ body's."""
    od, promoted, cv = GEMMS[name]
    cpp, ptx = G.gemm_kernel_for(od, promoted), G.gemm_kernel_for(od, promoted, body="ptx")
    log = nvrtc.compile_cuda(ptx.source(target=TARGET, **cv), arch=TARGET).log
    for code in ("C7514", "C7517", "C7519"):
        assert code not in log, log
    want, got = sass_ops(cpp, **cv), sass_ops(ptx, **cv)
    for kind in ("GMMA", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "UTMALDG", "UTMASTG"):
        assert sum(kind in o for o in got) == sum(kind in o for o in want) > 0, kind
    res, ref = ptx.resources(target=TARGET, **cv), cpp.resources(target=TARGET, **cv)
    assert res["spill_stores"] == res["spill_loads"] == res["stack_frame"] == 0, res
    assert res["registers"] <= ref["registers"], (res, ref)
    assert len(got) <= 1.15 * len(want), (len(got), len(want))


def test_gemm_accumulators_are_updated_in_place():
    """No f32 register is copied into another in the bf16 GEMM's PTX body: each wgmma's D is
    its accumulator's registers, the k-loop carries them without moves."""
    ptx = body_of(G.gemm_kernel_for(bf16, body="ptx").source(target=TARGET, DT=bf16, GROUP=5))
    wgmma = [l for l in ptx if l.startswith("wgmma.mma_async")]
    assert len(wgmma) == 4
    regs = {re.search(r"\{([^}]*)\}", l).group(1) for l in wgmma}
    assert len(regs) == 1                            # one accumulator, the same 128 registers
    assert not [l for l in ptx if re.match(r"mov\.f32 %of\d+, %of\d+;", l)]


@pytest.fixture
def sm90():
    with opus.set_target(TARGET, interpret=True), opus.interp.checking():
        yield


def _inputs(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


def test_gemm_with_a_ptx_body_in_the_interpreter(sm90):
    """The whole GEMM traces under the PTX body's table (every op kind it needs is there) and
    computes a @ b (ragged M and N, K not a multiple of the stage)."""
    import ml_dtypes
    a, b = _inputs(200, 296, 72, ml_dtypes.bfloat16)
    c = G.gemm(a, b, body="ptx")
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2 ** -8, atol=1e-4)


@pytest.mark.parametrize("bad", ["sass", "", 1])
def test_gemm_bad_body_names_the_argument(sm90, bad):
    import ml_dtypes
    a, b = _inputs(8, 8, 8, ml_dtypes.bfloat16)
    with raises(opus.ArgumentError, "body", repr(bad)):
        G.gemm(a, b, body=bad)


def test_split_k_with_a_ptx_body(sm90):
    """Split-K's atomic counter is not in the PTX body yet: the kernel refuses it at its line
    while tracing, so the plan does not split K for a PTX body (a shape it splits for the C++
    body runs unsplit) and an explicit split_k > 1 is an ArgumentError naming both."""
    import ml_dtypes
    with raises(opus.TraceError, "op 'atomic'", "body='ptx'", "gemm_hopper.py"):
        G.gemm_kernel_for(bf16, body="ptx").source(target=TARGET, DT=bf16, SPLIT=2)
    a, b = _inputs(64, 64, 2048, ml_dtypes.bfloat16)
    assert G._choose_tiling(64, 64, 2048, 64, 4, None, None, None)[2] > 1   # split for C++
    c = G.gemm(a, b, body="ptx", blocks=4)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2 ** -8, atol=1e-3)
    with raises(opus.ArgumentError, "split_k=2", "body='ptx'"):
        G.gemm(a, b, body="ptx", split_k=2)


# -- on the GPU ---------------------------------------------------------------------------------------

def _torch_sm90():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs an sm_90 GPU")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("r0,c0", [(0, 0), (15, 12), (-3, -4), (19, 20)])
def test_gpu_tma_load_box(r0, c0):
    from opus.runtime.device_array import DeviceArray
    x = (np.arange(20 * 24) % 251 + 1).astype(np.float32).reshape(20, 24)
    dx, dout = DeviceArray.from_numpy(x), DeviceArray.from_numpy(np.full(128, np.nan, np.float32))
    with opus.set_target(TARGET, interpret=False):
        ptx_of(K.load_box)[1, 16](opus.TensorMap(dx, (8, 16)), dout, r0, c0)
    np.testing.assert_array_equal(dout.to_numpy().reshape(8, 16),
                                  K.box_reference(x, r0, c0, (8, 16)))


@pytest.mark.gpu
@pytest.mark.parametrize("r0,c0", [(0, 0), (15, 20), (18, 36)])
def test_gpu_tma_store_box(r0, c0):
    from opus.runtime.device_array import DeviceArray
    x = (np.arange(20 * 40) % 251 + 1).astype(np.float32).reshape(20, 40)
    want = K.store_reference(x, r0, c0, (8, 16))
    dx = DeviceArray.from_numpy(x)
    with opus.set_target(TARGET, interpret=False):
        ptx_of(K.store_box)[1, 16](opus.TensorMap(dx, (8, 16)), r0, c0)
    np.testing.assert_array_equal(dx.to_numpy(), want)


@pytest.mark.gpu
def test_gpu_mbarrier_phases():
    from opus.runtime.device_array import DeviceArray
    dout = DeviceArray.from_numpy(np.full(48, -1, np.int32))
    with opus.set_target(TARGET, interpret=False):
        ptx_of(K.barrier_phases)[1, 4](dout)
    np.testing.assert_array_equal(dout.to_numpy().reshape(4, 12), [K.BARRIER_PHASES] * 4)


@pytest.mark.gpu
@pytest.mark.parametrize("a,b,c,a_from,n", [(f16, f16, f32, "smem", 64),
                                            (bf16, bf16, f32, "regs", 256),
                                            (i8, u8, i32, "smem", 48)])
def test_gpu_wgmma(a, b, c, a_from, n):
    from opus.runtime.device_array import DeviceArray

    def launch(kernel, arrays, sd, constexprs):
        dev = [DeviceArray.from_numpy(x) for x in arrays]
        ptx_of(kernel)[1, 128](*dev, sd, **constexprs)
        return dev[3].to_numpy()
    k = k_of(a)
    sw = 2 * k * a.itemsize
    with opus.set_target(TARGET, interpret=False):
        got, want = run_gemm(a, b, c, n, 2 * k, seed=n, SW_A=sw, SW_B=sw, A_FROM=a_from,
                             launch=launch)
    if c.kind == "int":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _check_torch(torch, c, a, b):
    ref = a.float() @ b.float()
    half_ulp = 2.0 ** -8 if c.dtype == torch.bfloat16 else 2.0 ** -11
    tol = half_ulp * ref.abs() + 1e-5 * ref.abs().max()
    assert ((c.float() - ref).abs() <= tol).all()


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k,b_kmajor", [(1000, 1112, 264, False), (4096, 4096, 4096, True),
                                            (1, 8, 8, False), (333, 776, 1032, True)])
def test_gpu_gemm_ptx_body(m, n, k, b_kmajor):
    """Against torch's f32 product, and bit for bit against the C++ body (the same wgmmas in
    the same order, the same rounding)."""
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
    b = (torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16).t() if b_kmajor else
         torch.randn(k, n, device="cuda", generator=g).to(torch.bfloat16))
    with opus.set_target(TARGET, interpret=False):
        got = G.gemm(a, b, body="ptx", split_k=1)
        want = G.gemm(a, b, split_k=1)
    torch.cuda.synchronize()
    _check_torch(torch, got, a, b)
    assert torch.equal(got, want)


@pytest.mark.gpu
def test_gpu_gemm_ptx_body_f16_epilogue_and_narrow_tiles():
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(7)
    m, n, k = 300, 392, 200
    a = torch.randn(m, k, device="cuda", generator=g).half()
    b = torch.randn(k, n, device="cuda", generator=g).half()
    bias = torch.randn(n, device="cuda", generator=g).half()
    res = torch.randn(m, n, device="cuda", generator=g).half()
    with opus.set_target(TARGET, interpret=False):
        for bn in (64, 128):
            kw = dict(bias=bias, activation=G.relu, residual=res, block_n=bn, blocks=4,
                      split_k=1)
            got, want = G.gemm(a, b, body="ptx", **kw), G.gemm(a, b, **kw)
            torch.cuda.synchronize()
            assert torch.equal(got, want), bn
    ref = torch.relu(a.float() @ b.float() + bias.float()) + res.float()
    assert ((got.float() - ref).abs() <= 2e-2 * ref.abs() + 2e-2).all()


def test_promoted_256_wide_tiles_keep_the_cpp_body(sm90):
    """Four promoted pieces per tile (block_n 256) come out wrong with a PTX body on the H100
    (the tile's first 64 columns): the plan keeps the C++ body there, an explicit PTX body is
    refused with the reason."""
    import ml_dtypes
    rng = np.random.default_rng(3)
    e4m3 = ml_dtypes.float8_e4m3fn
    a = rng.standard_normal((64, 128)).astype(e4m3)
    w = rng.standard_normal((256, 128)).astype(e4m3)
    one = np.ones(1, np.float32)
    with raises(opus.ArgumentError, "block_n=256", "body='ptx'", "body='cuda'"):
        G.scaled_gemm(a, w.T, one, one, block_n=256, body="ptx")
    G._PLANS.clear()
    c = G.scaled_gemm(a, w.T, one, one, block_n=256)
    assert list(G._PLANS.values())[-1].launch.kernel.body == "cuda"
    ref = a.astype(np.float32) @ w.astype(np.float32).T
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2 ** -7, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [64, 128, 192])
@pytest.mark.parametrize("fast_accum", [False, True])
def test_gpu_scaled_fp8_ptx_body_tile_widths(fast_accum, block_n):
    """Each promoted tile width (one or two pieces) and fast accumulation: PTX body = C++ body."""
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(12)
    a = torch.randn(256, 512, device="cuda", generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(512, 512, device="cuda", generator=g).to(torch.float8_e4m3fn)
    one = torch.ones(1, device="cuda")
    if fast_accum and block_n == 192:
        block_n = 256          # fast accumulation's widths: 64, 128, 256
    with opus.set_target(TARGET, interpret=False):
        got = G.scaled_gemm(a, w.t(), one, one, block_n=block_n, fast_accum=fast_accum,
                            body="ptx")
        want = G.scaled_gemm(a, w.t(), one, one, block_n=block_n, fast_accum=fast_accum,
                             body="cuda")
    torch.cuda.synchronize()
    assert torch.equal(got, want)


@pytest.mark.gpu
@pytest.mark.parametrize("fast_accum", [False, True])
def test_gpu_scaled_fp8_ptx_body(fast_accum):
    torch = _torch_sm90()
    g = torch.Generator(device="cuda").manual_seed(11)
    m, n, k = 520, 392, 1008      # ragged: not a multiple of the 128-deep stage
    a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda", generator=g) + 0.5
    sb = torch.rand(1, n, device="cuda", generator=g) + 0.5
    with opus.set_target(TARGET, interpret=False):
        kw = dict(fast_accum=fast_accum, split_k=1)
        got = G.scaled_gemm(a, w.t(), sa, sb, body="ptx", **kw)
        want = G.scaled_gemm(a, w.t(), sa, sb, **kw)
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    ref = (a.float() @ w.float().t()) * sa * sb
    assert ((got.float() - ref).abs() <= 2 ** -7 * ref.abs() + 1e-2 * ref.abs().max()).all()
