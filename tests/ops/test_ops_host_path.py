"""The host side of opus.ops: a repeated call with the same layout is its launch plan's dict
lookup and the launch entries' runs, never the launcher's general path (binding keyword
constexprs, building the entry key, finding the entry). Checked by counting calls into that
path, in the interpreter (numpy arrays go through the same plans and launch entries as torch
tensors); each call's result is checked against numpy, so the counted call did launch."""
import numpy as np
import pytest

import opus
import opus.ops
from opus.frontend.kernel import Kernel
from opus.frontend import launch
from opus.ops import gemm_hopper, norm_quant, rowsoftmax, rowtopk


@pytest.fixture(params=["sm_90a", "gfx942"])
def target(request):
    with opus.set_target(request.param, interpret=True):
        yield request.param


@pytest.fixture
def general_path(monkeypatch):
    """Counts calls into the launcher's general path; plans start empty (so the first call
    plans, and goes through it)."""
    calls = []

    def counted(owner, name):
        original = getattr(owner, name)

        def wrapper(*a, **kw):
            calls.append(name)
            return original(*a, **kw)
        monkeypatch.setattr(owner, name, wrapper)
    counted(launch._Launch, "_slow_call")
    counted(launch._Launch, "_call")
    counted(launch, "_entry_for")
    counted(Kernel, "launch_arguments")
    for mod in (rowtopk, rowsoftmax, norm_quant, gemm_hopper):
        monkeypatch.setattr(mod, "_PLANS", {})
    return calls


def _twice(calls, x, fresh, call, check):
    """call() on x, then again after x is refilled in place (same layout): the first plans
    (through the general path), the second does not; both results checked."""
    check(call())
    assert calls, "the first call did not plan through the launcher"
    calls.clear()
    fresh()
    check(call())
    assert calls == [], f"a repeated call went through {calls}"


def _rand(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("rows,n,k", [(4, 256, 8), (3, 1000, 5), (2, 3000, 64)])
def test_topk_repeated_call_takes_the_fast_path(target, general_path, rows, n, k):
    x = _rand((rows, n), 1)   # distinct values: the order is unique

    def check(got):
        v, i = got
        want = np.argsort(-x, axis=1, kind="stable")[:, :k]
        assert np.array_equal(i, want)
        assert np.array_equal(v, np.take_along_axis(x, want, axis=1))
    _twice(general_path, x, lambda: x.__setitem__(..., _rand((rows, n), 2)),
           lambda: opus.ops.topk(x, k), check)


def test_topk_two_launch_plan_takes_the_fast_path(general_path, monkeypatch):
    """The sliced launch and its merge (the two-launch plan) are both bound once."""
    x = _rand((2, 4096), 3)
    with opus.set_target("sm_90a", interpret=True):
        def check(got):
            want = np.sort(x, axis=1)[:, ::-1][:, :16]
            assert np.array_equal(got[0], want)
        _twice(general_path, x, lambda: x.__setitem__(..., _rand((2, 4096), 4)),
               lambda: rowtopk.launch(x, 16, True, ("rows", 1, 4)), check)


def test_softmax_repeated_call_takes_the_fast_path(target, general_path):
    x, out = _rand((3, 300), 5), np.empty((3, 300), np.float32)

    def check(y):
        e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    _twice(general_path, x, lambda: x.__setitem__(..., _rand((3, 300), 6)),
           lambda: opus.ops.softmax(x, out=out), check)


def test_rmsnorm_repeated_call_takes_the_fast_path(target, general_path):
    x, w = _rand((4, 512), 7, np.float16), _rand((512,), 8, np.float16)
    out = np.empty_like(x)

    def check(y):
        h = x.astype(np.float64)
        want = h * w / np.sqrt((h * h).mean(axis=1, keepdims=True) + 1e-6)
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-3, atol=1e-3)
    _twice(general_path, x, lambda: x.__setitem__(..., _rand((4, 512), 9, np.float16)),
           lambda: opus.ops.rmsnorm(x, w, out=out), check)


@pytest.mark.parametrize("op,group", [("per_token_quant", 0), ("per_group_quant", 128)])
def test_quant_repeated_call_takes_the_fast_path(target, general_path, op, group):
    x = _rand((3, 384), 10, np.float16)
    fmax = 240.0 if target == "gfx942" else 448.0      # e4m3fnuz on gfx942, OCP e4m3 else
    first = getattr(opus.ops, op)(x)                   # the target's fp8 arrays, made once
    out, scales = np.empty_like(first[0]), np.empty_like(first[1])

    def check(got):
        a = np.abs(x.astype(np.float32))
        amax = a.max(axis=1) if not group else a.reshape(3, -1, group).max(axis=2)
        np.testing.assert_allclose(got[1], amax / np.float32(fmax), rtol=1e-6)
    general_path.clear()
    norm_quant._PLANS.clear()   # (the call above planned for its own outputs' alignment)
    _twice(general_path, x, lambda: x.__setitem__(..., _rand((3, 384), 11, np.float16)),
           lambda: getattr(opus.ops, op)(x, out=out, scales=scales), check)


def test_gemm_repeated_call_takes_the_fast_path(general_path):
    """opus.ops.gemm's plan is bound once too (its constexprs were keywords per call)."""
    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    a, b = _rand((64, 64), 5).astype(bf16), _rand((64, 128), 6).astype(bf16)
    out = np.empty((64, 128), bf16)

    def check(got):
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.allclose(got.astype(np.float64), want, rtol=2e-2,
                           atol=2e-2 * np.abs(want).max())
    with opus.set_target("sm_90a", interpret=True):
        _twice(general_path, a, lambda: a.__setitem__(..., _rand((64, 64), 7).astype(bf16)),
               lambda: opus.ops.gemm(a, b, out=out), check)
