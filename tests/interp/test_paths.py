"""Divergent paths that wait for each other (interp/paths.py): warp-specialized kernels, where
one side of an ``if`` waits on mbarriers the other side arrives on, run in the interpreter;
paths that can never go on are an error naming every path's wait. References: numpy."""
import numpy as np
import pytest

import opus
from opus import f32, i32

SM = "sm_90a"


@pytest.fixture(autouse=True)
def _interpret():
    with opus.set_target(SM, interpret=True), opus.interp.checking():
        yield


def _init(*pairs):
    """Thread 0 initialises each (barrier, arrival count); the block then meets at a barrier."""
    if opus.thread_id_x() == 0:
        for bar, count in pairs:
            bar.init(count)
        opus.fence_mbarrier_init()
    opus.sync_threads()


@opus.kernel
def ring(x: opus.TensorMap, out: opus.Ptr[f32], n_tiles: i32, S: opus.constexpr = 2):
    """Warp 0's first thread (the producer) copies tile k of x (rows of 32) by TMA into stage
    k % S of a ring once the consumers released it; warp 1 (the consumers) sums each tile's
    column into out. More tiles than stages: the producer must wait for the consumers and the
    consumers for the producer, turn by turn."""
    x.declare(f32, (1, 32))
    ring = opus.alloc_smem(f32, 32 * S, align=128)
    full = opus.alloc_mbarriers(S)
    empty = opus.alloc_mbarriers(S)
    t = opus.thread_id_x()
    _init(*[(full[s], 1) for s in range(S)], *[(empty[s], 32) for s in range(S)])
    if t < 32:
        if t == 0:
            for k in opus.range(n_tiles):
                s = k % S
                empty[s].wait(((k // S) & 1) ^ 1)
                full[s].arrive_expect_tx(32 * 4)
                opus.tma_load(x, ring + s * 32, (k, 0), full[s])
    else:
        c = t - 32
        acc = 0.0
        for k in opus.range(n_tiles):
            s = k % S
            full[s].wait((k // S) & 1)
            acc = acc + ring[s * 32 + c] * opus.cast(k + 1, f32)
            empty[s].arrive()
        out[c] = acc


def test_producer_and_consumers_take_turns():
    x = (np.arange(7 * 32) % 13).astype(np.float32).reshape(7, 32)
    out = np.zeros(32, np.float32)
    ring[1, 64](opus.TensorMap(x, (1, 32)), out, 7)
    np.testing.assert_array_equal(out, (x * np.arange(1, 8, dtype=np.float32)[:, None]).sum(0))


@opus.kernel
def spin(x: opus.TensorMap, out: opus.Ptr[f32]):
    """The consumers poll try_wait in a loop while the producer (the other path) has yet to
    issue the copy: the spin lets it run."""
    x.declare(f32, (1, 32))
    tile = opus.alloc_smem(f32, 32, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    t = opus.thread_id_x()
    _init((bar, 1))
    if t < 32:                               # the consumers come first in program order
        polls = 0
        while not bar.try_wait(0):
            polls += 1
        out[t] = tile[t] + opus.cast(polls, f32) * 0.0
    elif t == 32:
        bar.arrive_expect_tx(32 * 4)
        opus.tma_load(x, tile, (0, 0), bar)


def test_a_try_wait_spin_lets_the_other_path_run():
    x = np.arange(32, dtype=np.float32).reshape(1, 32) * 3
    out = np.zeros(32, np.float32)
    spin[1, 64](opus.TensorMap(x, (1, 32)), out)
    np.testing.assert_array_equal(out, x[0])


@opus.kernel
def deadlock(x: opus.TensorMap, out: opus.Ptr[f32]):
    """Both sides wait for a phase nobody completes: the producer for a release that the
    consumers give only after data the producer never sends."""
    x.declare(f32, (1, 32))
    tile = opus.alloc_smem(f32, 32, align=128)
    full = opus.alloc_mbarriers(1)[0]
    empty = opus.alloc_mbarriers(1)[0]
    t = opus.thread_id_x()
    _init((full, 1), (empty, 32))
    if t < 32:
        if t == 0:
            empty.wait(0)                    # waits for the consumers' first release
            full.arrive_expect_tx(32 * 4)
            opus.tma_load(x, tile, (0, 0), full)
    else:
        full.wait(0)                         # waits for the producer's copy
        out[t - 32] = tile[t - 32]
        empty.arrive()


def test_paths_that_wait_for_each_other_are_an_error_naming_both():
    x = np.zeros((1, 32), np.float32)
    with pytest.raises(opus.interp.InterpError) as e:
        deadlock[1, 64](opus.TensorMap(x, (1, 32)), np.zeros(32, np.float32))
    msg = str(e.value)
    assert "never completes" in msg and "no other path of the block can go on" in msg
    assert "test_paths.py:" in msg and "empty.wait(0)" in msg and "full.wait(0)" in msg


@opus.kernel
def wrong_parity(x: opus.TensorMap, out: opus.Ptr[f32]):
    """The producer's copy completes phase 0; the consumers then wait for phase 1 too, which
    nothing completes: once the producer's path has ended, their wait is the error."""
    x.declare(f32, (1, 32))
    tile = opus.alloc_smem(f32, 32, align=128)
    bar = opus.alloc_mbarriers(1)[0]
    t = opus.thread_id_x()
    _init((bar, 1))
    if t < 32:
        if t == 0:
            bar.arrive_expect_tx(32 * 4)
            opus.tma_load(x, tile, (0, 0), bar)
    else:
        bar.wait(0)
        out[t - 32] = tile[t - 32]
        bar.wait(1)                          # the phase after the copy's


def test_a_wait_nothing_completes_is_an_error_once_the_other_path_ended():
    x = np.zeros((1, 32), np.float32)
    with pytest.raises(opus.interp.InterpError, match=r"test_paths.py:\d+ `bar.wait\(1\).*"
                                                      r"parity 1, which never completes"):
        wrong_parity[1, 64](opus.TensorMap(x, (1, 32)), np.zeros(32, np.float32))
