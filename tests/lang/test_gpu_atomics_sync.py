"""GPU runs (NVIDIA) of the atomics and synchronization kernels of test_atomics_sync_interp.py
against the same numpy references, where the result does not depend on the GPU's order of
conflicting lanes: histograms (global and shared), distinct tickets, integer reductions, CAS
winners per address, packed f16x2 sums of exactly representable values, bounded views, the
f32 global add's flush of subnormals, the one-thread-per-block spin lock, the cross-block chain,
named-barrier producer/consumer, sync_warp exchanges (full and disjoint half-warp masks), clock
reads; and the SASS of each is what test_sync_atomics_isa.py checks."""
import os
import sys

import numpy as np
import pytest

import opus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_atomics_sync_interp as K  # noqa: E402
from test_gpu_layouts import _on_gpu, _run  # noqa: E402,F401  (the GPU fixture and runner)

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(7)


@pytest.mark.parametrize("shared", [False, True])
def test_histogram_on_gpu(shared):
    x = RNG.integers(0, 16, 100000).astype(np.int32)
    _, h = _run(K.histogram, (391,), (256,), [x, np.zeros(16, np.uint32)], 100000, SHARED=shared)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=16))


def test_tickets_are_distinct_on_gpu():
    c, t = _run(K.tickets, (64,), (128,), [np.zeros(1, np.uint32), np.zeros(8192, np.uint32)])
    assert c[0] == 8192
    np.testing.assert_array_equal(np.sort(t), np.arange(8192))


def test_integer_reductions_on_gpu():
    x = RNG.integers(-2 ** 31, 2 ** 31, 384, dtype=np.int64).astype(np.int32)
    r0 = np.array([2 ** 31 - 1, -2 ** 31, -1, 0, 0, 0], np.int32)
    _, r, u = _run(K.int_ops, (3,), (128,), [x, r0, np.zeros(2, np.uint64)])
    assert r[0] == x.min() and r[1] == x.max()
    assert r[2] == np.bitwise_and.reduce(x) and r[3] == np.bitwise_or.reduce(x)
    assert r[4] == np.bitwise_xor.reduce(x)
    assert r[5] == np.int64(x.astype(np.int64).sum()).astype(np.int32)
    assert u[0] == (x.view(np.uint32).astype(np.uint64) << np.uint64(20)).max()
    assert u[1] == 384 * 0xFFFFFFFF


def test_cas_one_winner_per_address_on_gpu():
    a, old = _run(K.cas_once, (1,), (64,), [np.zeros(4, np.uint32), np.zeros(64, np.uint32)])
    lanes = np.arange(64)
    for k in range(4):  # the lane whose CAS found 0 wrote its own id + 1; the others saw it
        winners = lanes[(lanes % 4 == k) & (old == 0)]
        assert len(winners) == 1 and a[k] == winners[0] + 1
        assert (old[(lanes % 4 == k) & (old != 0)] == a[k]).all()


def test_packed_f16x2_add_on_gpu():
    x = RNG.integers(-8, 9, 128).astype(np.float16)  # small integers: every sum is exact
    h, _ = _run(K.packed_add, (1,), (64,), [np.zeros(4, np.float16), x])
    want = np.zeros(4, np.float64)
    for i in range(64):
        want[2 * (i % 2):2 * (i % 2) + 2] += x[2 * i:2 * i + 2]
    np.testing.assert_array_equal(h, want.astype(np.float16))


def test_bounded_view_on_gpu():
    h, o = _run(K.bounded, (1,), (64,), [np.full(40, 7, np.uint32), np.full(64, 99, np.uint32)], 10)
    want = np.full(40, 7, np.uint32)
    want[:10] = 8
    np.testing.assert_array_equal(h, want)
    np.testing.assert_array_equal(o, np.where((np.arange(64) >= 4) & (np.arange(64) < 14), 7, 0))


@pytest.mark.parametrize("shared,flushed", [(False, True), (True, False)])
def test_f32_add_subnormals_on_gpu(shared, flushed):
    tiny = np.float32(1e-40)
    _, acc, _ = _run(K.float_sum, (1,), (1,), [np.full(1, tiny, np.float32), np.zeros(1, np.float32),
                                               np.zeros(1, np.float32)], SHARED=shared)
    assert acc[0] == (0.0 if flushed else tiny)


def test_float_sum_on_gpu():
    x = RNG.integers(-1000, 1000, 256).astype(np.float32)  # exact in any order
    _, acc, old = _run(K.float_sum, (1,), (256,), [x, np.zeros(1, np.float32),
                                                   np.zeros(256, np.float32)], SHARED=False)
    assert acc[0] == x.sum()


def test_spin_lock_on_gpu():
    lock, c = _run(K.locked_count, (64,), (128,), [np.zeros(1, np.uint32), np.zeros(1, np.uint32)],
                   PER_BLOCK=True)
    assert c[0] == 64 and lock[0] == 0


def test_workgroup_barrier_chain_on_gpu():
    sem, o = _run(K.chain, (8,), (64,), [np.zeros(1, np.uint32), np.zeros(9, np.int32)],
                  GRID_WIDE=False)
    assert sem[0] == 8
    np.testing.assert_array_equal(o[1:], np.cumsum(np.arange(8) * 100))


def test_grid_wide_workgroup_barrier_on_gpu():
    """Four blocks are co-resident on any GPU here, so the grid-wide wait completes on it (the
    interpreter refuses it: test_grid_wide_barrier_is_refused_not_hung)."""
    sem, o = _run(K.chain, (4,), (64,), [np.zeros(1, np.uint32), np.zeros(5, np.int32)],
                  GRID_WIDE=True)
    assert sem[0] == 4 and (o[1:] >= 400).all()


def test_named_barrier_producer_consumer_on_gpu():
    (o,) = _run(K.producer_consumer, (1,), (128,), [np.zeros(64, np.float32)], CONSUMER_FIRST=False)
    np.testing.assert_array_equal(o, np.arange(64) * 2.0)


def test_named_barrier_consumers_first_on_gpu():
    """On the GPU the order of the branches does not matter (the interpreter refuses this one)."""
    (o,) = _run(K.producer_consumer, (1,), (128,), [np.zeros(64, np.float32)], CONSUMER_FIRST=True)
    np.testing.assert_array_equal(o, np.arange(64) * 2.0)


def test_sync_warp_on_gpu():
    (o,) = _run(K.warp_exchange, (1,), (64,), [np.zeros(64, np.int32)], MASK=None)
    np.testing.assert_array_equal(o, (np.arange(64) ^ 1) * 3)
    (o,) = _run(K.two_groups, (1,), (32,), [np.zeros(32, np.int32)])
    np.testing.assert_array_equal(o, (np.arange(32) ^ 1) + 100)


def test_clock_on_gpu():
    (o,) = _run(K.clocks, (1,), (64,), [np.zeros(64, np.uint64)])
    assert (o.astype(np.int64) >= 0).all() and (o < 10 ** 6).all()


def test_exchange_load_store_on_gpu():
    a, o = _run(K.exch_load_store, (1,), (32,), [np.array([-1, 0], np.float32), np.zeros(64, np.float32)])
    seen = np.r_[o[:32], a[0]]
    np.testing.assert_array_equal(np.sort(seen), np.r_[-1, np.arange(32)].astype(np.float32))
    assert (o[32:] == 2.5).all()
