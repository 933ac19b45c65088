"""Bad input to the scalar utilities (issue 13 points 2, 5, 6, 7): med3 / min / max / mulhi
operands and modes, mdiv divisors and dividends (host and kernel), mdiv kernel arguments,
finfo / iinfo / numeric_limits of the wrong dtype, readfirstlane / uniform operands and a
broken uniform promise at run time. Each case checks the error type, that the message names the
problem and, for kernel lines, the line (``# ERR: <tag>``); a refused launch writes nothing."""
import numpy as np
import pytest

import opus
from opus import f32, i32, i64, u32
from opus.interp import InterpError
from expect import raises, unchanged


def trace(k, target="sm_90a", **constexprs):
    return k.source(target=target, **constexprs)


# -- med3, min, max, mulhi -------------------------------------------------------------------------

@opus.kernel
def _med3_fp8(x: opus.Ptr[opus.fp8_e4m3], o: opus.Ptr[opus.fp8_e4m3]):
    i = opus.thread_id_x()
    o[i] = opus.med3(x[i], x[i + 1], x[i + 2])  # ERR: med3-fp8


def test_med3_of_a_storage_type():
    with raises(opus.TraceError, "storage type", "opus.med3", at="med3-fp8"):
        trace(_med3_fp8)


@opus.kernel
def _med3_lengths(x: opus.Ptr[f32], o: opus.Ptr[f32]):
    v = opus.load(x, 0, vec=4)
    w = opus.load(x, 4, vec=2)
    o[0] = opus.med3(v, w, 1.0)[0]  # ERR: med3-len


def test_med3_of_vectors_of_different_lengths():
    with raises(opus.TraceError, "different lengths", "opus.med3", at="med3-len"):
        trace(_med3_lengths)


@opus.kernel
def _med3_ptr(x: opus.Ptr[f32], o: opus.Ptr[f32]):
    o[0] = opus.med3(x, 1.0, 2.0)  # ERR: med3-ptr


def test_med3_of_a_pointer():
    with raises(opus.TraceError, "pointers", at="med3-ptr"):
        trace(_med3_ptr)


@opus.kernel
def _max_mode(x: opus.Ptr[f32], NAN: opus.constexpr):
    x[0] = opus.max(x[0], x[1], nan=NAN)  # ERR: nan-mode


@pytest.mark.parametrize("mode", ["fastest", None, "propagate"])
def test_max_nan_mode_must_be_known(mode):
    with raises(opus.TraceError, "nan must be 'number' or 'fast'", repr(mode), at="nan-mode"):
        trace(_max_mode, NAN=mode)


@opus.kernel
def _mulhi(x: opus.Ptr[i64], y: opus.Ptr[f32]):
    x[0] = opus.mulhi(x[0], x[1])  # ERR: mulhi-64


@opus.kernel
def _mulhi_f(y: opus.Ptr[f32]):
    y[0] = opus.mulhi(y[0], y[1])  # ERR: mulhi-f


@pytest.mark.parametrize("k,tag,what", [(_mulhi, "mulhi-64", "i64"), (_mulhi_f, "mulhi-f", "f32")])
def test_mulhi_needs_32_bit_integers(k, tag, what):
    with raises(opus.TraceError, "32-bit integer", what, at=tag):
        trace(k)


# -- mdiv ------------------------------------------------------------------------------------------

def test_mdiv_divisor_zero_on_the_host():
    with raises(ValueError, "division by zero", ">= 1"):
        opus.mdiv(0)


@pytest.mark.parametrize("d", [-1, 2 ** 32, 2 ** 40])
def test_mdiv_divisor_out_of_u32(d):
    with raises(ValueError, "1 .. 2**32-1", str(d)):
        opus.mdiv(d)


@pytest.mark.parametrize("d", [3.0, True, "7", None])
def test_mdiv_divisor_must_be_an_integer(d):
    with raises(TypeError, "must be an integer", type(d).__name__):
        opus.mdiv(d)


@opus.kernel
def _mdiv_runtime_ctor(d: opus.Ptr[u32], o: opus.Ptr[u32]):
    m = opus.mdiv(d[0])  # ERR: mdiv-ctor
    o[0] = m.div(o[1])


def test_mdiv_of_a_run_time_value_points_to_make():
    with raises(opus.TraceError, "opus.mdiv.make(d)", at="mdiv-ctor"):
        trace(_mdiv_runtime_ctor)


@opus.kernel
def _mdiv_float_dividend(d: opus.Ptr[u32], x: opus.Ptr[f32], o: opus.Ptr[u32]):
    m = opus.mdiv.make(d[0])
    o[0] = m.div(x[0])  # ERR: mdiv-float


@opus.kernel
def _mdiv_wide_dividend(d: opus.Ptr[u32], x: opus.Ptr[i64], o: opus.Ptr[u32]):
    o[0] = opus.mdiv.make(d[0]).mod(x[0])  # ERR: mdiv-wide


@opus.kernel
def _mdiv_vector_divisor(d: opus.Ptr[u32], o: opus.Ptr[u32]):
    m = opus.mdiv.make(opus.load(d, 0, vec=2))  # ERR: mdiv-vec
    o[0] = m.div(o[1])


@pytest.mark.parametrize("k,tag,needles", [
    (_mdiv_float_dividend, "mdiv-float", ("mdiv.div", "at most 32 bits", "f32")),
    (_mdiv_wide_dividend, "mdiv-wide", ("mdiv.divmod", "at most 32 bits", "i64")),
    (_mdiv_vector_divisor, "mdiv-vec", ("opus.mdiv.make", "scalar integer"))])
def test_mdiv_operands_must_be_u32_scalars(k, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)


@opus.kernel
def _mdiv_negative_static(d: opus.Ptr[u32], o: opus.Ptr[u32]):
    o[0] = opus.mdiv.make(d[0]).div(-1)  # ERR: mdiv-neg


def test_mdiv_static_dividend_out_of_u32():
    with raises(opus.TraceError, "u32 (0 .. 2**32-1)", "-1", at="mdiv-neg"):
        trace(_mdiv_negative_static)


def test_mdiv_host_dividend_out_of_u32():
    with raises(opus.TraceError, "u32", str(2 ** 32)):
        opus.mdiv(7).div(2 ** 32)


@opus.kernel
def _mdiv_param(n: opus.Ptr[u32], m: opus.mdiv, q: opus.Ptr[u32]):
    q[opus.thread_id_x()] = m.div(n[opus.thread_id_x()])


@pytest.mark.parametrize("arg,needle", [(7, "int"), (b"\0" * 12, "12 bytes"), (3.5, "float"),
                                         (opus.finfo(f32), "finfo")])
def test_mdiv_parameter_takes_an_mdiv(arg, needle):
    n, q = np.arange(64, dtype=np.uint32), np.zeros(64, np.uint32)
    with opus.set_target("sm_90a"), unchanged(q), raises(
            opus.ArgumentError, "'m'", "passed by value", "16 bytes", needle):
        _mdiv_param[1, 64](n, arg, q)


# -- numeric limits --------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,dtype,needles", [
    (opus.finfo, i32, ("not a floating-point type", "opus.iinfo")),
    (opus.finfo, opus.bool_, ("not a floating-point type",)),
    (opus.iinfo, f32, ("not an integer type", "opus.finfo")),
    (opus.finfo, opus.fp8, ("fp8", "name the format")),
    (opus.numeric_limits, opus.bf8, ("bf8", "name the format")),
    (opus.finfo, "f32", ("needs an opus dtype", "str")),
    (opus.numeric_limits, np.float32, ("needs an opus dtype",)),
    (opus.iinfo, 32, ("needs an opus dtype", "int"))])
def test_limits_of_the_wrong_type(fn, dtype, needles):
    with raises(TypeError, *needles):
        fn(dtype)


# -- readfirstlane / uniform -----------------------------------------------------------------------

@opus.kernel
def _rfl_vector(x: opus.Ptr[f32]):
    v = opus.load(x, 0, vec=4)
    x[0] = opus.readfirstlane(v)[0]  # ERR: rfl-vec


@opus.kernel
def _uniform_vector(x: opus.Ptr[f32]):
    x[0] = opus.uniform(opus.load(x, 0, vec=2))[1]  # ERR: uni-vec


@opus.kernel
def _rfl_pointer(x: opus.Ptr[f32]):
    p = opus.readfirstlane(x)  # ERR: rfl-ptr
    p[0] = 1.0


@opus.kernel
def _uniform_string(x: opus.Ptr[f32]):
    x[0] = opus.uniform("x")  # ERR: uni-str


@pytest.mark.parametrize("k,tag,needles", [
    (_rfl_vector, "rfl-vec", ("opus.readfirstlane", "takes a scalar", "vector of 4")),
    (_uniform_vector, "uni-vec", ("opus.uniform", "takes a scalar", "vector of 2")),
    (_rfl_pointer, "rfl-ptr", ("opus.readfirstlane", "scalar number")),
    (_uniform_string, "uni-str", ("opus.uniform", "run-time scalar", "str"))])
@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_lane_reads_take_scalars(k, tag, needles, target):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k, target)


@opus.kernel
def _broken_promise(x: opus.Ptr[i32], o: opus.Ptr[i32]):
    i = opus.thread_id_x()
    base = opus.uniform(x[i])  # ERR: broken-uniform
    o[i] = base


@pytest.mark.parametrize("target,lane", [("sm_90a", 33), ("gfx942", 65), ("gfx950", 127)])
def test_broken_uniform_promise_in_checking_mode(target, lane):
    x = np.full(128, 4, np.int32)
    x[lane] = -2
    o = np.zeros(128, np.int32)
    with opus.set_target(target), opus.interp.checking(), unchanged(o), \
            raises(InterpError, "opus.uniform", f"thread ({lane}, 0, 0)", "has -2",
                   "first active lane 4", at="broken-uniform"):
        _broken_promise[1, 128](x, o)
