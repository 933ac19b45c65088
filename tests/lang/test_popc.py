"""opus.popc: set bits of integers in the interpreter (sm_90a, gfx942) against Python's count,
a ballot's rank with lanemask_lt, trace-time folding, bad operands, and the instructions it
renders to (POPC on sm_90a, v_bcnt on gfx942)."""
import numpy as np
import pytest

import opus


@opus.kernel
def _counts(x: opus.Ptr[opus.u32], y: opus.Ptr[opus.u64], o: opus.Ptr[opus.i32]):
    t = opus.thread_id_x()
    above = opus.ballot(x[t] > opus.u32(1 << 31))
    o[t * 4] = opus.cast(opus.popc(x[t]), opus.i32)
    o[t * 4 + 1] = opus.cast(opus.popc(y[t]), opus.i32)
    o[t * 4 + 2] = opus.cast(opus.popc(above & opus.lanemask_lt()), opus.i32)
    o[t * 4 + 3] = opus.cast(opus.popc(opus.cast(x[t], opus.i8)), opus.i32)


def _bits(v):
    return bin(int(v)).count("1")


@pytest.mark.parametrize("target,ws", [("sm_90a", 32), ("gfx942", 64)])
def test_popc_interpreter(target, ws):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2 ** 32, ws, dtype=np.uint32)
    x[:3] = [0, 0xFFFFFFFF, 0x80]           # none, all, the i8 sign bit alone
    y = rng.integers(0, 2 ** 63, ws, dtype=np.uint64) * 2 + 1
    y[0] = np.uint64(2 ** 64 - 1)
    o = np.zeros(4 * ws, np.int32)
    with opus.set_target(target, interpret=True):
        _counts[1, ws](x, y, o)
    o = o.reshape(ws, 4)
    assert o[:, 0].tolist() == [_bits(v) for v in x]
    assert o[:, 1].tolist() == [_bits(v) for v in y]
    above = x > 2 ** 31
    assert o[:, 2].tolist() == [int(above[:lane].sum()) for lane in range(ws)]
    assert o[:, 3].tolist() == [_bits(int(v) & 0xFF) for v in x]   # i8: its 8 bits only


def test_popc_folds_python_ints():
    assert opus.popc(0) == 0 and opus.popc(0xF0F0) == 8 and opus.popc(2 ** 64 - 1) == 64


def test_popc_renders_one_instruction():
    sass = _counts.sass(target="sm_90a")
    assert sass.count("POPC") >= 4, sass          # u32, both halves of the u64, the rank, i8
    asm = _counts.asm(target="gfx942")
    assert "v_bcnt_u32_b32" in asm or "s_bcnt1" in asm


@opus.kernel
def _popc_float(y: opus.Ptr[opus.f32]):
    y[0] = opus.popc(y[1])


@opus.kernel
def _popc_negative(y: opus.Ptr[opus.i32]):
    y[0] = opus.popc(-1)


def test_popc_bad_operands():
    with opus.set_target("sm_90a", interpret=True):
        with pytest.raises(opus.TraceError, match="popc needs an integer operand, got f32"):
            _popc_float[1, 1](np.zeros(2, np.float32))
        with pytest.raises(opus.TraceError, match="integer >= 0"):
            _popc_negative[1, 1](np.zeros(2, np.int32))
