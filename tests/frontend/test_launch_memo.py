"""The launch path's shortcuts (cached launchers, per-launcher memo of the last entry) never
serve a stale entry: a change of target or of a constexpr value gets the right kernel."""
import numpy as np

import opus


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
