"""Helper functions called from kernels are traced like kernels: run-time if/for/while work in
them, values they return under a run-time `if` are merged, they nest, recurse on compile-time
values and close over variables; results are checked in the interpreter against numpy, and
both vendors' sources are rendered."""
import functools

import numpy as np
import pytest

import opus
from opus import f32, i32, Ptr

RNG = np.random.default_rng(7)
N = 64


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


def both_sources(k, **cx):
    """The kernel's CUDA and HIP sources (each must render)."""
    return k.source(target="sm_90a", **cx), k.source(target="gfx942", **cx)


# -- helpers with run-time control flow -------------------------------------------------------

def relu(v):
    if v > 0.0:        # run-time: both paths return (the rest of the body is the else)
        return v
    return 0.0


def row_sum(x, row, n):
    acc = 0.0
    for j in range(n):  # run-time bound
        acc = acc + x[row * n + j]
    return acc


def wrap(i, n):
    while i >= n:       # run-time condition
        i = i - n
    return i


@opus.kernel
def uses_helpers(x: Ptr[f32], out: Ptr[f32], n: i32):
    t = opus.thread_id_x()
    out[t] = relu(x[t]) + row_sum(x, wrap(t + 3 * n, n), n)


def test_helpers_with_runtime_if_for_while_run_in_the_interpreter():
    n = 8
    x = RNG.standard_normal(n * n).astype(np.float32)
    out = np.zeros(n * n, np.float32)
    uses_helpers[1, n * n](x, out, n)
    t = np.arange(n * n)
    rows = np.cumsum(x.reshape(n, n), axis=1, dtype=np.float32)[:, -1]  # in loop order
    expect = np.maximum(x, np.float32(0)) + rows[(t + 3 * n) % n]
    np.testing.assert_array_equal(out, expect)
    # the helpers stay plain Python functions outside kernels
    assert relu(-2.0) == 0.0 and relu(3.0) == 3.0
    assert row_sum([1.0, 2.0, 3.0, 4.0], 1, 2) == 7.0 and wrap(7, 3) == 1


def test_helper_control_flow_is_run_time_code_in_both_vendors_sources():
    for src in both_sources(uses_helpers):
        assert "for (" in src and "while (" in src and "if (" in src
        # the helpers' own lines are named in the generated code
        assert "if v > 0.0:" in src and "acc = acc + x[row * n + j]" in src


# -- nesting, recursion, closures, tuples -------------------------------------------------------

def clamp(v, lo, hi):
    return lo if v < lo else (hi if v > hi else v)


def soft_clamp(v, limit):
    w = clamp(v, -limit, limit)   # a helper calling a helper
    if w == limit:
        w = relu(w) * 0.5
    return w


def tree_sum(vals):
    # recursion on a compile-time tuple length: unrolled into a balanced tree of adds
    if len(vals) == 1:
        return vals[0]
    h = len(vals) // 2
    return tree_sum(vals[:h]) + tree_sum(vals[h:])


def min_max(a, b):
    if a < b:                     # run-time: both branches return a tuple of one structure
        return a, b
    else:
        return b, a


@opus.kernel
def nested(x: Ptr[f32], out: Ptr[f32], LIMIT: opus.constexpr = 1.0):
    t = opus.thread_id_x()
    base = t * 4
    lo, hi = min_max(x[base], x[base + 1])
    s = tree_sum(tuple(x[base + j] for j in range(4)))
    out[t * 4 + 0] = soft_clamp(x[base + 2], LIMIT)
    out[t * 4 + 1] = s
    out[t * 4 + 2] = lo
    out[t * 4 + 3] = hi


def test_nested_recursive_and_tuple_returning_helpers():
    x = (RNG.standard_normal(N * 4) * 2).astype(np.float32)
    out = np.zeros(N * 4, np.float32)
    nested[1, N](x, out)
    q = x.reshape(N, 4)
    c = np.clip(q[:, 2], -1.0, 1.0)
    c = np.where(c == 1.0, 0.5, c)
    got = out.reshape(N, 4)
    np.testing.assert_array_equal(got[:, 0], c)
    np.testing.assert_allclose(got[:, 1], (q[:, 0] + q[:, 1]) + (q[:, 2] + q[:, 3]), rtol=1e-6)
    np.testing.assert_array_equal(got[:, 2], np.minimum(q[:, 0], q[:, 1]))
    np.testing.assert_array_equal(got[:, 3], np.maximum(q[:, 0], q[:, 1]))
    # three adds per thread, no loop: the recursion ran while tracing
    ir = nested.ir(target="sm_90a")
    assert ir.count(" add ") + ir.count("add(") >= 3 or ir.count("add") >= 3


def make_scaled_kernel(scale, threshold):
    def scaled(v):                       # a closure: reads scale and threshold
        if v > threshold:
            v = v * scale
        return v

    @opus.kernel
    def k(x: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()

        def twice(v):                    # a helper defined in the kernel, returning early
            if v < 0.0:
                return -v
            return scaled(v) * 2.0
        out[t] = twice(x[t])
    return k


def test_closures_and_helpers_defined_inside_kernels():
    x = RNG.standard_normal(N).astype(np.float32)
    out = np.zeros(N, np.float32)
    make_scaled_kernel(3.0, 0.5)[1, N](x, out)
    expect = np.where(x < 0, -x, np.where(x > 0.5, x * 3.0, x) * 2.0).astype(np.float32)
    np.testing.assert_array_equal(out, expect)


class Tile:
    """A user class whose method has run-time control flow."""

    def __init__(self, width):
        self.width = width

    def index(self, i):
        if i >= self.width:
            i = i - self.width
        return i


@opus.func
def halve_if_big(v):
    if v > 1.0:
        v = v * 0.5
    return v


@opus.kernel
def methods_and_marked(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    tile = Tile(32)
    scale = functools.partial(clamp, lo=-1.0, hi=1.0)
    out[tile.index(t)] = halve_if_big(x[t]) + scale(x[t])


def test_methods_partials_and_opus_func():
    x = (RNG.standard_normal(N) * 2).astype(np.float32)
    out = np.zeros(N, np.float32)
    methods_and_marked[1, 32](x, out)  # 32 threads: index(t) == t
    expect = np.where(x[:32] > 1, x[:32] * 0.5, x[:32]) + np.clip(x[:32], -1, 1)
    np.testing.assert_array_equal(out[:32], expect.astype(np.float32))
    assert halve_if_big(4.0) == 2.0  # @opus.func leaves it a Python function


def test_opus_func_refuses_what_it_cannot_rewrite():
    with pytest.raises(TypeError, match="def"):
        opus.func(lambda v: v)
    with pytest.raises(TypeError, match="def"):
        opus.func(len)


# -- the rewrite of a helper is cached per code object --------------------------------------------

def scale_a(v):
    if v > 0.0:
        v = v * 2.0
    return v


def scale_b(v):
    if v > 0.0:
        v = v * 5.0
    return v


def test_helper_rewrite_follows_its_code_object():
    from opus.frontend import calls

    def g(v):
        return v

    @opus.kernel
    def k(x: Ptr[f32], out: Ptr[f32], TAG: opus.constexpr = 0):
        t = opus.thread_id_x()
        out[t] = g(x[t])

    g.__code__ = scale_a.__code__
    x = np.array([1.0, -1.0], np.float32)
    out = np.zeros(2, np.float32)
    k[1, 2](x, out, 1)
    np.testing.assert_array_equal(out, [2.0, -1.0])
    conv = calls._known(scale_a.__code__)
    k[1, 2](x, out, 2)  # another specialization: the cached rewrite of that code object
    assert calls._known(scale_a.__code__) is conv
    g.__code__ = scale_b.__code__  # new code: rewritten anew
    k[1, 2](x, out, 3)
    np.testing.assert_array_equal(out, [5.0, -1.0])


# -- returns -------------------------------------------------------------------------------------

def sign_or_zero(v):
    if v > 0.0:
        return 1.0
    elif v < 0.0:
        return -1.0
    return 0.0


def first_positive(x, NN):
    for j in range(NN):          # compile-time loop: a return ends the trace of the helper
        if j == 2:
            return x[j]
    return x[0]


@opus.kernel
def returns(x: Ptr[f32], out: Ptr[f32]):
    t = opus.thread_id_x()
    out[t] = sign_or_zero(x[t]) + first_positive(x, 4)


def test_returns_under_runtime_and_compile_time_control_flow():
    x = np.array([0.0, 2.5, -1.0, 3.0] * 4, np.float32)
    out = np.zeros(16, np.float32)
    returns[1, 16](x, out)
    np.testing.assert_array_equal(out, np.sign(x) + x[2])


def test_trace_of_a_helper_uses_one_if_per_runtime_branch():
    kinds = [op.kind for op in returns.specialize(target="sm_90a").function.walk()]
    assert kinds.count("if") == 2 and "for" not in kinds


@pytest.mark.gpu
def test_helpers_on_the_gpu(launch_path):
    torch = pytest.importorskip("torch")
    n = 8
    x = torch.randn(n * n, dtype=torch.float32, device="cuda")
    out = torch.zeros(n * n, dtype=torch.float32, device="cuda")
    with opus.set_target(opus.current_target().target.name, interpret=False):
        uses_helpers[1, n * n](x, out, n)
    torch.cuda.synchronize()
    xh = x.cpu().numpy()
    rows = np.cumsum(xh.reshape(n, n), axis=1, dtype=np.float32)[:, -1]
    t = np.arange(n * n)
    np.testing.assert_array_equal(out.cpu().numpy(),
                                  np.maximum(xh, np.float32(0)) + rows[(t + 3 * n) % n])
