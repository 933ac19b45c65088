"""opus.autotune on the GPU: real compiles, device-event timing, restores, the disk file, and
reuse by a fresh tuned object (run on the device machine: pytest -m gpu)."""
import json

import numpy as np
import pytest

import opus

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _gpu_and_private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path / "cache"))
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


@opus.kernel
def accumulate(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32,
               BLOCK: opus.constexpr, UNROLL: opus.constexpr):
    base = (opus.block_id_x() * BLOCK + opus.thread_id_x()) * UNROLL
    for u in range(UNROLL):
        i = base + u
        if i < n:
            out[i] = out[i] + x[i]


CONFIGS = [{"BLOCK": b, "UNROLL": u} for b in (64, 128, 256, 512) for u in (1, 4)]
GRID = lambda m: (m["n"] + m["BLOCK"] * m["UNROLL"] - 1) // (m["BLOCK"] * m["UNROLL"])  # noqa


def tuned():
    return opus.autotune(configs=CONFIGS, key="n", restore="out")(accumulate)


def files(tmp_path):
    return sorted((tmp_path / "cache" / "autotune").glob("*.json"))


@pytest.mark.parametrize("n", [1, 1000, 1 << 22])
def test_tuned_accumulate_is_exact_and_stored(tmp_path, n, monkeypatch):
    x = torch.arange(n, dtype=torch.float32, device="cuda")
    out = torch.full((n,), 3.0, dtype=torch.float32, device="cuda")
    t = tuned()
    t[GRID, lambda m: m["BLOCK"]](x, out, n)
    torch.cuda.synchronize()
    # every timed run was undone: out = 3 + x exactly once
    np.testing.assert_array_equal(out.cpu().numpy(), 3.0 + np.arange(n, dtype=np.float32))
    [f] = files(tmp_path)
    data = json.loads(f.read_text())
    times = [v for v in data["times"] if v is not None]
    assert len(times) == len(CONFIGS) and all(v > 0 for v in times)
    assert data["times"][data["winner"]] == min(times)
    # a fresh tuned object (as a new process) reads the file and times nothing
    from opus.runtime import timing
    monkeypatch.setattr(timing, "bench", lambda *a, **k: pytest.fail("timed again"))
    again = tuned()
    out2 = torch.zeros(n, dtype=torch.float32, device="cuda")
    again[GRID, lambda m: m["BLOCK"]](x, out2, n)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out2.cpu().numpy(), np.arange(n, dtype=np.float32))
    assert list(again.chosen.values()) == [CONFIGS[data["winner"]]]


def test_tuned_on_a_side_stream(tmp_path):
    n = 100_000
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.ones(n, device="cuda")
        out = torch.zeros(n, device="cuda")
        tuned()[GRID, lambda m: m["BLOCK"]](x, out, n)
    s.synchronize()
    assert torch.equal(out, torch.ones(n, device="cuda"))


@pytest.mark.skipif(not torch.cuda.is_available() or
                    torch.cuda.get_device_capability() != (9, 0), reason="opus.ops.gemm: sm_90a")
def test_tuned_host_function_over_ops_gemm(tmp_path):
    """A host function tuning opus.ops.gemm's tile width and stages (its public options)."""
    @opus.autotune(configs=[{"block_n": bn, "stages": st} for bn in (128, 256) for st in (3, 4)],
                   key=("a", "b"), restore="out")
    def mm(a, b, out, *, block_n, stages):
        return opus.ops.gemm(a, b, out, block_n=block_n, stages=stages)

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(1000, 520, device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(520, 760, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.empty(1000, 760, device="cuda", dtype=torch.bfloat16)
    mm(a, b, out)
    torch.cuda.synchronize()
    want = (a.float() @ b.float())
    torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-1)
    assert len(files(tmp_path)) == 1
