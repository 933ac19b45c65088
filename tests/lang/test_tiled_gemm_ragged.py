"""The demo's tiled GEMM (opus.examples TILED_GEMM, one source for both vendors) on shapes that
are not multiples of its 64 x 64 x 16 block tile: in the interpreter as sm_90a, gfx942 and
gfx950, and its generated HIP executed on the host, element by element against numpy; the
inner-tile path keeps the loads and stores as wide as the atoms' layouts allow (SASS, AMDGCN);
``inside_a/b/c`` predicates on their own."""
import collections
import re

import numpy as np
import pytest

import opus
from opus import examples as ex
from opus import bf16, f32

SHAPES = [(100, 75, 37), (1, 1, 1), (129, 65, 33), (64, 64, 16), (160, 200, 72)]


def operands(dtype, M, N, K, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(dtype.np_dtype)
    b = rng.standard_normal((K, N)).astype(dtype.np_dtype)
    return a, b, a.astype(np.float64) @ b.astype(np.float64)


def grid(M, N):
    return -(-N // 64), -(-M // 64)


@pytest.mark.parametrize("target", ["sm_90a", "gfx942", "gfx950"])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_ragged_tiled_gemm_in_the_interpreter(target, M, N, K):
    vendor = "nvidia" if target.startswith("sm") else "amd"
    dtype = ex.MMA_ATOMS[vendor][0]
    a, b, want = operands(dtype, M, N, K, seed=M + N + K)
    d = np.full((M, N), np.nan, np.float32)
    with opus.set_target(target, interpret=True):
        ex.TILED_GEMM[vendor][grid(M, N), 128 if vendor == "nvidia" else 256](a, b, d, M, N, K)
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5 * np.sqrt(K))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_ragged_tiled_gemm_hip_executed_on_the_host(arch, tmp_path):
    from hostexec import HostProgram, Launch
    program = HostProgram(arch)
    kernel = program.add(ex.TILED_GEMM["amd"].specialize(target=arch))
    runs = []
    for M, N, K in ((100, 75, 37), (129, 65, 40)):
        a, b, want = operands(opus.f16, M, N, K, seed=K)
        d = np.full((M, N), np.nan, np.float32)
        runs.append((d, want, Launch(kernel, grid(M, N), 256, [a, b, d, M, N, K])))
    program.build(tmp_path)
    program.run([launch for *_, launch in runs])
    for d, want, _ in runs:
        np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-4)


def _count(pattern, text):
    return collections.Counter(re.findall(pattern, text))


def test_inner_tiles_keep_vector_accesses_in_sass():
    """sm_90a, mma.sync m16n8k16 bf16 with expand (2, 4, 1): a lane's A registers are 2 x 8
    bf16 in 8 pairs of consecutive k (8 32-bit LDG.E), its C registers 8 x 4 f32 in 16 pairs of
    consecutive n (16 STG.E.64); the edge path adds only scalar accesses (U16 loads, 32-bit
    STG.E of one f32)."""
    c = _count(r"\b(LDG\.E[\w.]*|STG\.E[\w.]*|HMMA[\w.]*)",
               ex.TILED_GEMM["nvidia"].sass(target="sm_90a"))
    assert c["LDG.E"] == 8 and c["STG.E.64"] == 16, c
    assert c["HMMA.16816.F32.BF16"] == 2 * 8, c  # 2 x 4 atoms, in the inner and the edge path


def test_inner_tiles_keep_vector_accesses_in_amdgcn():
    """gfx942, MFMA 32x32x8 f16 with expand (1, 1, 2): a lane's A registers are 2 runs of 4
    consecutive f16 (2 global_load_dwordx2); the edge path's loads are buffer loads (the range
    check, no branch)."""
    asm = ex.TILED_GEMM["amd"].asm(target="gfx942")
    c = _count(r"\b(global_load_\w+|buffer_load_\w+|v_mfma_\w+)", asm)
    assert c["global_load_dwordx2"] == 2, c
    assert c["buffer_load_ushort"] > 0 and not any("dwordx" in k for k in c if "buffer" in k), c


@opus.kernel
def _store_inside(out: opus.Ptr[f32], rows: opus.i32, cols: opus.i32, VEC: opus.constexpr):
    tmma = opus.make_tiled_mma(opus.make_mma(bf16, bf16, f32, (16, 8, 16)), (1, 2, 1), (2, 1, 1))
    acc = tmma.zeros_c() + 1.0
    opus.make_gmem(out).store_if(tmma.inside_c(rows, cols, vec=VEC), acc, tmma.layout_c((16, 1)),
                                 vec=VEC)


@pytest.mark.parametrize("vec", [1, 2])
@pytest.mark.parametrize("rows,cols", [(32, 16), (17, 5), (0, 16), (1, 1)])
def test_inside_c_stores_only_inside(vec, rows, cols):
    """A 32 x 16 tile (2 warps x the 16x8 atom twice along n): with vec=1 exactly rows x cols
    is written; with vec=2 (C's pairs of consecutive n) only the pairs wholly inside."""
    out = np.zeros((32, 16), np.float32)
    with opus.set_target("sm_90a", interpret=True):
        _store_inside[1, 64](out, rows, cols, VEC=vec)
    want = np.zeros((32, 16), np.float32)
    want[:rows, :cols if vec == 1 else cols - cols % 2] = 1
    np.testing.assert_array_equal(out, want)


def test_inside_needs_a_positive_static_vec():
    @opus.kernel
    def k(out: opus.Ptr[f32]):
        tmma = opus.make_tiled_mma(opus.make_mma(bf16, bf16, f32, (16, 8, 16)))
        tmma.inside_c(4, 4, vec=0)

    with pytest.raises(opus.TraceError, match="inside_c vec must be a positive compile-time int"):
        k.specialize("sm_90a")
