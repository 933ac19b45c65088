"""GPU tests of the example kernels and launches (run on the device machine: pytest -m gpu)."""
import numpy as np
import pytest

import opus
from opus import examples as ex

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _on_gpu(launch_path):  # each test runs through both launch paths (conftest.py)
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


@pytest.mark.parametrize("dtype", [opus.f32, opus.f16, opus.bf16])
@pytest.mark.parametrize("n", [1, 7, 8, 1000, 4097, 1_000_003])
def test_vector_add(dtype, n):
    ok, msg = ex.run_vector_add(True, dtype, n=n, seed=n)
    assert ok, msg


@pytest.mark.parametrize("blocks", [1, 3, 300])
def test_block_reduce(blocks):
    ok, msg = ex.run_block_reduce(True, blocks=blocks, seed=blocks)
    assert ok, msg


@pytest.mark.parametrize("K", [16, 64, 256])
def test_mma_gemm(K):
    ok, msg = ex.run_mma(True, M=128, N=192, K=K, seed=K)
    assert ok, msg


@pytest.mark.parametrize("M,N,K", [(100, 75, 37), (1, 1, 1), (129, 65, 33), (160, 200, 72),
                                   (1000, 999, 517)])
def test_mma_gemm_ragged(M, N, K):
    """The tiled GEMM on shapes that are not multiples of its block tile (edge tiles element by
    element, zeros outside A and B, stores only inside D)."""
    ok, msg = ex.run_mma(True, M=M, N=N, K=K, seed=M)
    assert ok, msg


def test_torch_stream_and_graph():
    torch = pytest.importorskip("torch")
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    grid = (n + 1023) // 1024
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ex.vector_add[grid, 256](x, y, out, n)   # on torch's current stream (s)
        z = out * 2                                # ordered after the kernel on s
    s.synchronize()
    torch.testing.assert_close(z, (x + y) * 2)
    # CUDA graph capture composes with opus launches
    out.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        ex.vector_add[grid, 256](x, y, out, n)
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y)


def test_launch_argument_errors_on_gpu():
    torch = pytest.importorskip("torch")
    x = torch.randn(16, device="cuda")
    ex.vector_add[1, 256](x, x, x, 16)  # a good launch first: the hot path is set up
    with pytest.raises(opus.ArgumentError, match="'y'"):
        ex.vector_add[1, 256](x, x.half(), x, 16)
    with pytest.raises(opus.ArgumentError, match="'x'.*cpu"):
        ex.vector_add[1, 256](x.cpu(), x, x, 16)
    with pytest.raises(opus.ArgumentError, match="aligned"):
        ex.vector_add[1, 256](x[1:], x, x, 15)
    with pytest.raises(opus.ArgumentError, match="'n'"):
        ex.vector_add[1, 256](x, x, x, 2**40)
    with pytest.raises(opus.ArgumentError, match="'n'"):
        ex.vector_add[1, 256](x, x, x, 16.0)
    with pytest.raises(opus.ArgumentError, match="'out'.*aligned"):
        ex.vector_add[1, 256](x, x, x.data_ptr() + 4, 16)
    with pytest.raises(opus.ArgumentError, match="'out'.*None"):
        ex.vector_add[1, 256](x, x, None, 16)
    with pytest.raises(opus.ArgumentError, match="smem"):
        ex.vector_add[1, 256](x, x, x, 16, smem=-1)
    with pytest.raises(opus.ArgumentError, match="stream"):
        ex.vector_add[1, 256](x, x, x, 16, stream="default")
    with pytest.raises(opus.ArgumentError, match="1024"):
        ex.vector_add[1, 2048](x, x, x, 16)


def test_dynamic_smem_above_48k():
    torch = pytest.importorskip("torch")

    @opus.kernel(block=256)
    def big_smem(out: opus.Ptr[opus.f32], n: opus.i32):
        s = opus.dynamic_smem(opus.f32)
        t = opus.thread_id_x()
        for i in range(t, n, 256):
            s[i] = opus.f32(i)
        opus.sync_threads()
        for i in range(t, n, 256):
            out[i] = s[n - 1 - i]

    n = 100 * 1024 // 4
    out = torch.empty(n, device="cuda")
    big_smem[1, 256](out, n, smem=n * 4)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(n - 1, -1, -1, dtype=torch.float32))
    with pytest.raises(opus.ArgumentError, match="shared memory"):
        big_smem[1, 256](out, n, smem=1 << 20)
