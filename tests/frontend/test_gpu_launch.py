"""GPU tests of the generated launch path (frontend/gpu_launch.py): every branch of it gives
the same results as a plain reference, whatever mix of arguments, configurations and threads."""
import threading

import numpy as np
import pytest

import opus
from opus import examples as ex

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _on_gpu(launch_path):  # each test runs through both launch paths (conftest.py)
    with opus.set_target(opus.current_target().target.name, interpret=False):
        yield


@opus.kernel
def write_scalars(out: opus.Ptr[opus.f64], a: opus.i8, b: opus.u32, c: opus.i64, d: opus.f32,
                  e: opus.f64, f: opus.bool_, g: opus.u64):
    if opus.thread_id_x() == 0:
        out[0] = opus.f64(a)
        out[1] = opus.f64(b)
        out[2] = opus.f64(c)
        out[3] = opus.f64(d)
        out[4] = e
        out[5] = opus.f64(opus.select(f, 1, 0))
        out[6] = opus.f64(g)


@pytest.mark.parametrize("vals", [
    (-128, 2**32 - 1, -(2**62), 1.5, -2.25, True, 2**53),
    (127, 0, 2**62, float("inf"), float("nan"), False, 0),
    (np.int8(-3), np.uint32(7), np.int64(-9), np.float32(0.1), np.float64(1e300), np.bool_(True),
     np.uint64(5)),
])
def test_scalar_parameters_of_every_kind(vals):
    out = torch.full((7,), -1.0, dtype=torch.float64, device="cuda")
    write_scalars[1, 32](out, *vals)
    torch.cuda.synchronize()
    want = [float(v) if not isinstance(v, (bool, np.bool_)) else float(bool(v)) for v in vals]
    want[3] = float(np.float32(vals[3]))
    np.testing.assert_array_equal(out.cpu().numpy(), np.array(want))


def test_grids_and_launchers_alternate():
    # one launch entry, several configurations in turn: the config is rewritten when it changes
    n = 5000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    outs = []
    for grid, block in [((n + 1023) // 1024, 256), ((n + 511) // 512, 128), ((n + 1023) // 1024, 256)]:
        o = torch.full_like(x, float("nan"))
        ex.vector_add[grid, block](x, y, o, n)
        outs.append(o)
    torch.cuda.synchronize()
    for o in outs:
        assert torch.equal(o, x + y)


def test_keyword_and_positional_constexpr():
    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    o1, o2, o3 = (torch.full_like(x, float("nan")) for _ in range(3))
    ex.vector_add[n // 1024, 256](x, y, o1, n)
    ex.vector_add[n // 512, 256](x, y, o2, n, 2)
    ex.vector_add[n // 256, 256](x, y, o3, n=n, VEC=1)
    torch.cuda.synchronize()
    for o in (o1, o2, o3):
        assert torch.equal(o, x + y)


def test_other_threads_get_their_own_buffers():
    # The creator thread reuses one parameter block; other threads must not share it.
    n = 1 << 16
    xs = [torch.full((n,), float(i), device="cuda") for i in range(8)]
    ys = [torch.full((n,), 1000.0 * i, device="cuda") for i in range(8)]
    outs = [torch.empty(n, device="cuda") for _ in range(8)]
    grid = n // 1024
    ex.vector_add[grid, 256](xs[0], ys[0], outs[0], n)  # make the entry in this thread
    errors = []

    def work(i):
        try:
            for _ in range(200):
                ex.vector_add[grid, 256](xs[i], ys[i], outs[i], n)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 8)]
    for t in threads:
        t.start()
    work(0)
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    assert not errors
    for i in range(8):
        assert torch.equal(outs[i], xs[i] + ys[i]), i


def test_stream_comes_from_the_first_torch_tensor():
    cp = pytest.importorskip("cupy")
    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    cx = cp.asarray(x)  # shares memory: a CuPy view of x
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ex.vector_add[n // 1024, 256](cx, y, out, n)  # first pointer is CuPy, stream from y
        z = out * 2
    s.synchronize()
    torch.testing.assert_close(z, (x + y) * 2)


def test_dynamic_smem_sizes_change_between_launches():
    @opus.kernel(block=128)
    def reverse(out: opus.Ptr[opus.i32], n: opus.i32):
        s = opus.dynamic_smem(opus.i32)
        t = opus.thread_id_x()
        for i in range(t, n, 128):
            s[i] = i
        opus.sync_threads()
        for i in range(t, n, 128):
            out[i] = s[n - 1 - i]

    for n in (100, 60000 // 4, 100, 200000 // 4):
        out = torch.zeros(n, dtype=torch.int32, device="cuda")
        reverse[1, 128](out, n, smem=n * 4)
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), torch.arange(n - 1, -1, -1, dtype=torch.int32)), n


def test_wrong_device_index_is_named():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = torch.randn(1024, device="cuda:0")
    ex.vector_add[1, 256](x, x, x, 1024)
    x1 = torch.randn(1024, device="cuda:1")
    with pytest.raises(opus.ArgumentError, match="'x'.*cuda:1"):
        ex.vector_add[1, 256](x1, x, x, 1024)


def test_entry_takes_the_selected_hot_path(launch_path):
    x = torch.randn(1024, device="cuda")
    ex.vector_add[1, 256](x, x, x, 1024)
    entry = next(iter(ex.vector_add.launch_entries.values()))
    assert (entry.fast is not None) == (launch_path == "C")
    assert entry.run is (entry.fast or entry.python_run)


def test_cupy_arrays_and_raw_addresses_launch_repeatedly():
    cp = pytest.importorskip("cupy")
    n = 3000
    x, y = cp.random.standard_normal(n, dtype=cp.float32), cp.random.standard_normal(n, dtype=cp.float32)
    outs = [cp.full(n, cp.nan, dtype=cp.float32) for _ in range(3)]
    for o in outs:  # the first launch makes the entry; later ones take the hot path
        ex.vector_add[(n + 1023) // 1024, 256](x, y, o, n)
    raw = cp.full(n, cp.nan, dtype=cp.float32)
    for _ in range(2):
        ex.vector_add[(n + 1023) // 1024, 256](x.data.ptr, y.data.ptr, raw.data.ptr, n)
    cp.cuda.Device().synchronize()
    for o in outs + [raw]:
        assert cp.array_equal(o, x + y)
    with pytest.raises(opus.ArgumentError, match="'y'.*f32"):
        ex.vector_add[1, 256](x, y.astype(cp.float16), outs[0], n)
    with pytest.raises(opus.ArgumentError, match="'x'.*aligned"):
        ex.vector_add[1, 256](x[1:], y[1:], outs[0][1:], n - 1)


@pytest.mark.filterwarnings("ignore:ExternalStream is deprecated:DeprecationWarning")
@pytest.mark.parametrize("form", ["torch", "int", "cupy"])
def test_explicit_stream_is_the_one_launched_on(form):
    # Captured into a CUDA graph on stream s: only a launch really on s is in the graph (a
    # launch elsewhere would fail under capture or leave the replayed output untouched).
    n = 1 << 16
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros_like(x)
    s = torch.cuda.Stream()
    if form == "cupy":
        cp = pytest.importorskip("cupy")
        stream = cp.cuda.ExternalStream(s.cuda_stream)
    else:
        stream = s if form == "torch" else s.cuda_stream
    with torch.cuda.stream(s):
        for _ in range(2):  # the entry is made, then the hot path is warm
            ex.vector_add[n // 1024, 256](x, y, out, n, stream=stream)
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        ex.vector_add[n // 1024, 256](x, y, out, n, stream=stream)
    out.zero_()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


def test_nn_parameters_launch_like_tensors():
    n = 4096
    w = torch.nn.Parameter(torch.randn(n, device="cuda"))
    y = torch.randn(n, device="cuda")
    outs = [torch.full_like(y, float("nan")) for _ in range(2)]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # the first pointer (a Parameter) decides the stream
        for o in outs:
            ex.vector_add[n // 1024, 256](w, y, o, n)
            o.mul_(2)  # ordered after the kernel only if the kernel ran on s
    s.synchronize()
    for o in outs:
        assert torch.equal(o, (w.detach() + y) * 2)
