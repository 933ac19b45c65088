"""launcher.bind_entry: the entry's run for fixed constexprs (opus.ops' launch plans call it
with new run-time arguments), which launches as the launcher would and still checks them."""
import numpy as np
import pytest

import opus
from opus.errors import ArgumentError


@pytest.fixture(autouse=True)
def _both_launchers(launch_path):
    """Each test runs with the C launcher (CLauncher) and the Python one (PyLauncher)."""
    yield


@opus.kernel
def scaled(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], n: opus.i32,
           MUL: opus.constexpr = 1.0, ADD: opus.constexpr = 0.0):
    i = opus.block_id_x() * opus.block_size_x() + opus.thread_id_x()
    if i < n:
        out[i] = x[i] * MUL + ADD


def test_bound_run_launches_with_new_arguments():
    with opus.set_target("sm_90a", interpret=True):
        la = scaled[1, 64]
        x = np.arange(64, dtype=np.float32)
        run, full = la.bind_entry(x, np.zeros(64, np.float32), 64, ADD=0.5, MUL=3.0)
        assert full[3:] == (3.0, 0.5)          # the constexprs in parameter order
        y, out = np.full(64, 2.0, np.float32), np.zeros(64, np.float32)
        run(la, (y, out, 40) + full[3:], 0, None)
        assert (out[:40] == 6.5).all() and (out[40:] == 0).all()


def test_bound_run_still_checks_run_time_arguments():
    with opus.set_target("sm_90a", interpret=True):
        la = scaled[1, 64]
        x = np.zeros(64, np.float32)
        run, full = la.bind_entry(x, x, 64, MUL=2.0)
        with pytest.raises(ArgumentError, match="out"):
            run(la, (x, np.zeros(64, np.int32)) + full[2:], 0, None)   # int32 for f32
