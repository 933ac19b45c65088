"""The launch path's shortcuts (cached launchers, per-launcher memo of the last entry) never
serve a stale entry: a change of target or of a constexpr value gets the right kernel."""
import numpy as np
import pytest

import opus


@pytest.fixture(autouse=True)
def _both_launchers(launch_path):
    """Each test runs with the C launcher (CLauncher) and the Python one (PyLauncher)."""
    yield


@opus.kernel
def fill_warp_size(out: opus.Ptr[opus.i32], n: opus.i32, ADD: opus.constexpr = 0):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        out[i] = opus.warp_size() + ADD


def _run(*args, **kw):
    out = np.zeros(64, np.int32)
    fill_warp_size[1, 64](out, 64, *args, **kw)
    return out


def test_target_change_reaches_the_memoized_launcher():
    with opus.set_target("sm_90a", interpret=True):
        assert (_run() == 32).all()
        assert (_run() == 32).all()  # memoized
    with opus.set_target("gfx942"):
        assert (_run() == 64).all()
    with opus.set_target("sm_90a", interpret=True):
        assert (_run() == 32).all()


def test_constexpr_given_after_memoized_default():
    with opus.set_target("sm_90a", interpret=True):
        assert (_run() == 32).all()
        assert (_run(5) == 37).all()
        assert (_run(ADD=7) == 39).all()
        assert (_run() == 32).all()


def test_argument_errors_after_memo():
    with opus.set_target("sm_90a", interpret=True):
        _run()
        out = np.zeros(64, np.int32)
        try:
            fill_warp_size[1, 64](out, 2**40)
        except opus.ArgumentError as e:
            assert "'n'" in str(e)
        else:
            raise AssertionError("an out-of-range i32 was accepted")


@opus.kernel
def divide_seven(out: opus.Ptr[opus.f32], S: opus.constexpr):
    # Python arithmetic at trace time: a float S divides (7 / 2.0 = 3.5), any other floors
    out[0] = opus.f32(float(7 / S) if isinstance(S, float) else float(7 // S))


def test_equal_constexprs_of_other_types_are_other_kernels():
    # 2 == 2.0 == np.int64(2), and True == 1: each must trace its own kernel, at launch and in
    # inspection, in any order, nested in tuples too
    cases = [(2, 3.0), (2.0, 3.5), (True, 7.0), (2, 3.0), (1.0, 7.0), (2.0, 3.5), (1, 7.0)]
    with opus.set_target("sm_90a", interpret=True):
        for s, want in cases:
            out = np.zeros(1, np.float32)
            divide_seven[1, 1](out, s)
            assert out[0] == want, s
        out = np.zeros(1, np.float32)
        divide_seven[1, 1](out, np.int64(2))
        assert out[0] == 3.0
    assert "0x1.c" in divide_seven.source("sm_90a", S=2.0)   # 3.5
    assert "0x1.8" in divide_seven.source("sm_90a", S=2)     # 3.0


@opus.kernel
def shape_sum(out: opus.Ptr[opus.f32], SHAPE: opus.constexpr):
    out[0] = opus.f32(float(SHAPE[0] / 4) if isinstance(SHAPE[0], float) else float(SHAPE[0] // 4))


def test_constexpr_tuples_are_keyed_by_their_element_types():
    with opus.set_target("sm_90a", interpret=True):
        for shape, want in (((10, 1), 2.0), ((10.0, 1), 2.5), ((10, 1), 2.0)):
            out = np.zeros(1, np.float32)
            shape_sum[1, 1](out, shape)
            assert out[0] == want, shape


def test_launcher_kind_follows_the_launch_path(launch_path):
    want = {"C": "CLauncher", "Python": "PyLauncher"}[launch_path]
    assert type(fill_warp_size[1, 64]).__name__ == want
    assert fill_warp_size[1, 64] is fill_warp_size[1, 64]  # cached per configuration
