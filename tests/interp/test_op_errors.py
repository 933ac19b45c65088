"""The interpreter's error choke points: an error raised while compiling or running an op
names the op's kernel file:line (and the kernel), whatever raised it: a fault the kernel
makes, an instruction's emulation, or a bug in one op's compilation."""
import os
import sys

import numpy as np
import pytest

import opus
import opus.interp as interp
from opus.interp import errors
from opus.interp.engine import Program
from opus.targets import get_target

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bad_input"))
from expect import raises  # noqa: E402

MMA = (opus.bf16, opus.bf16, opus.f32, (16, 8, 16))


@pytest.fixture(autouse=True)
def interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


@opus.kernel
def load_pairs(x: opus.Ptr[opus.f32], out: opus.Ptr[opus.f32], start: opus.i32):
    i = opus.thread_id_x()
    v = opus.load(x, start + 2 * i, vec=2)  # ERR: pair-load
    out[i] = v[0] + v[1]


@opus.kernel(block=32)
def mma_zero(D: opus.Ptr[opus.f32]):
    mma = opus.make_mma(*MMA)
    lane = opus.lane_id()
    a = opus.make_vector([0.0] * mma.elem_a, dtype=opus.bf16)
    b = opus.make_vector([0.0] * mma.elem_b, dtype=opus.bf16)
    d = mma(a, b, opus.make_vector([0.0] * mma.elem_c, dtype=opus.f32))  # ERR: mma
    D[lane] = d[0]


@opus.kernel
def sqrt_each(x: opus.Ptr[opus.f32]):
    i = opus.thread_id_x()
    x[i] = opus.sqrt(x[i])  # ERR: sqrt


@pytest.fixture
def file_edited_since(monkeypatch):
    """The kernel files' lines now read otherwise: messages must quote the traced text."""
    monkeypatch.setattr(errors.linecache, "getline", lambda *a, **kw: "edited_since_traced()\n")


def test_misaligned_vector_load_names_the_line(file_edited_since):
    """A 2-element load from an odd element (4-byte, not 8-byte aligned) faults on the GPU."""
    x, out = np.arange(64, dtype=np.float32), np.zeros(8, np.float32)
    with raises(interp.MemoryFault, "misaligned 2-element load", "8-byte aligned",
                "thread (0, 0, 0)", "opus.load(x, start + 2 * i, vec=2)", at="pair-load"):
        load_pairs[1, 8](x, out, 1)
    load_pairs[1, 8](x, out, 2)  # aligned: runs
    np.testing.assert_array_equal(out, x[2:18:2] + x[3:18:2])


def test_out_of_bounds_in_checking_mode_names_the_line(file_edited_since):
    x, out = np.arange(16, dtype=np.float32), np.zeros(8, np.float32)
    with interp.checking(), raises(interp.MemoryFault, "out-of-bounds load of x[16]",
                                   "opus.load(x, start + 2 * i, vec=2)", at="pair-load"):
        load_pairs[1, 8](x, out, 2)


def test_emulation_error_names_the_instruction_line(monkeypatch):
    target_class = type(get_target("sm_90a"))
    lookup = target_class.instruction

    class BrokenEmulation:
        """The target's instruction, whose emulation raises."""
        def __init__(self, ins):
            self.ins = ins

        def __getattr__(self, name):
            return getattr(self.ins, name)

        def emulate(self, operands, attrs, warp_size):
            raise ValueError("lane map mismatch")
    monkeypatch.setattr(target_class, "instruction",
                        lambda self, *a, **kw: BrokenEmulation(lookup(self, *a, **kw)))
    with raises(interp.InterpError, "kernel 'mma_zero'", "running op 'target_op'",
                "ValueError: lane map mismatch", at="mma") as info:
        mma_zero[1, 32](np.zeros(32, np.float32))
    assert isinstance(info.value.__cause__, ValueError)


def test_internal_error_compiling_an_op_names_its_line(monkeypatch):
    def broken(self, op):
        raise RuntimeError("no numpy function")
    monkeypatch.setattr(Program, "exec_math", broken)
    with raises(interp.InterpError, "kernel 'sqrt_each'", "compiling op 'math'",
                "RuntimeError: no numpy function", at="sqrt"):
        sqrt_each[1, 4](np.ones(4, np.float32))
