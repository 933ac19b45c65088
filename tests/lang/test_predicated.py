"""Predicated accesses (load_if / store_if on views, scalar, vector and layout forms), in the
interpreter as NVIDIA and AMD, against numpy: a false predicate reads zeros and writes nothing,
a true one is the plain access (negative offsets of unbounded views included)."""
import numpy as np
import pytest

import opus
from opus import f16, f32, i32

TARGETS = ["sm_90a", "gfx942"]


@opus.kernel
def scalar_and_vector(x: opus.Ptr[f32], out: opus.Ptr[f32], keep: i32):
    t = opus.thread_id_x()
    g, o = opus.make_gmem(x) + 4, opus.make_gmem(out)   # unbounded, shifted: t - 4 reaches x[0]
    on = (t % keep) == 0
    o[t] = g.load_if(on, t - 4)                          # negative offsets with pred true
    v = g.load_if(on, 4 * t - 4, vec=4)
    o.store_if(t < 8, v, 64 + 4 * t, vec=4)              # threads 8.. write nothing


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_and_vector_predicates(target):
    x = np.arange(1, 129, dtype=np.float32)
    out = np.full(128, -1, np.float32)
    with opus.set_target(target, interpret=True):
        scalar_and_vector[1, 16](x, out, 3)
    t = np.arange(16)
    on = t % 3 == 0
    want = np.full(128, -1, np.float32)
    want[:16] = np.where(on, x[t], 0)
    for k in range(8):
        want[64 + 4 * k: 68 + 4 * k] = x[4 * k: 4 * k + 4] if on[k] else 0
    np.testing.assert_array_equal(out, want)


@opus.kernel
def bounded_pred(x: opus.Ptr[f32], out: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    g = opus.make_gmem(x, n)                              # bounded: both rules apply
    opus.make_gmem(out).store(g.load_if(t % 2 == 1, 4 * t, vec=4), 4 * t, vec=4)


@pytest.mark.parametrize("target", TARGETS)
def test_predicate_and_bound_together(target):
    x = np.arange(1, 33, dtype=np.float32)
    out = np.full(32, -1, np.float32)
    with opus.set_target(target, interpret=True):
        bounded_pred[1, 8](x, out, 22)
    want = np.zeros(32, np.float32)
    for t in range(1, 8, 2):
        for i in range(4):
            e = 4 * t + i
            want[e] = x[e] if e < 22 else 0
    np.testing.assert_array_equal(out, want)


@opus.kernel(block=64)
def layout_pred(x: opus.Ptr[f16], out: opus.Ptr[f16], rows: i32):
    # the guide's tile, rows past `rows` skipped by a predicate on the issue index (y0)
    lane = opus.thread_id_x()
    tile = opus.Tile((3, 16, 4, 8), ((opus.Y, opus.P), (opus.P, opus.Y)))
    u = opus.partition(tile, (32, 1), (lane // 4, lane % 4))
    g, o = opus.make_gmem(x), opus.make_gmem(out)
    regs = g.load_if(lambda y0, y1: 16 * y0 + lane // 4 < rows, u, vec=8)
    o.store_if(lambda y0, y1: y0 != 1, regs, u, vec=8)   # a static predicate per issue


@pytest.mark.parametrize("target", TARGETS)
def test_layout_predicates_per_issue(target):
    x = np.arange(48 * 32, dtype=np.float16)
    out = np.full(48 * 32, -1, np.float16)
    with opus.set_target(target, interpret=True):
        layout_pred[1, 64](x, out, 40)
    want = x.reshape(48, 32).copy()
    want[40:] = 0            # loads past row 40 read zeros (and are stored as zeros)
    want[16:32] = -1         # issue y0 == 1 is not stored
    np.testing.assert_array_equal(out.reshape(48, 32), want)


def test_static_false_predicate_emits_no_access():
    @opus.kernel
    def k(x: opus.Ptr[f32], out: opus.Ptr[f32]):
        g = opus.make_gmem(x)
        out[0] = g.load_if(False, 0, vec=4)[1]
        g.store_if(False, 1.0, 0)

    src = k.specialize("sm_90a").source
    assert "p_x_1[" not in src and "(p_x_1 +" not in src


def test_predicate_must_be_a_bool_or_a_number():
    @opus.kernel
    def k(x: opus.Ptr[f32], out: opus.Ptr[f32]):
        out[0] = opus.make_gmem(x).load_if(x, 0)

    with pytest.raises(opus.TraceError, match="pointer cannot be a load_if/store_if predicate"):
        k.specialize("sm_90a")
