"""Arithmetic paths of codegen/cemit.py that the differential programs do not generate, run on
the host in both dialects against the rules of ir/ops.py written out by hand, numpy and
ml_dtypes (issue 17.4: the survivors of render_binary, binary_expr, to_f32, _to_f32,
_wrap_type and _narrow):

* min/max with nan="fast": on AMD the chip's own v_min/v_max_f32/f64 in IEEE mode (a
  signaling NaN operand gives a quiet NaN: the opus_{min,max}_ieee2008_* helpers, shim/hip.h),
  elsewhere and for 16-bit floats the language's rule; and min/max by that rule (NaN operands,
  signed zeros) of every float type, scalars and vectors;
* min/max of bools (and / or);
* f32 literals beyond f32's range rounded to +-inf, the largest finite value kept;
* 8- and 16-bit integer + - * and negation wrapping at their width, with the host's undefined
  behaviour sanitizer on (C promotes narrow operands to int, where 65535 * 65535 overflows),
  and on the GPU (NVRTC 13.0 dropped a narrowing cast that the C left to it);
* sub-byte lanes converted to bool (x != 0) through their f32 value;
* the renderer's refusal of an op on bools that the language never hands it.
"""
import functools
import math

import ml_dtypes
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, f64, i8, i16, u8, u16
from opus.codegen.cemit import CodegenError
from opus.codegen.cuda import CudaEmitter
from hostexec import HostProgram, Launch, NotHostExecutable, run_kernel
from hostexec.runner import prepare_source

TARGETS = ["sm_80", "gfx942"]


def _run_each(target, kernel_of, args_of, types, tmp_path):
    """One host program for ``target`` holding ``kernel_of(T)`` for each of ``types``, one
    launch each (one block of ``args_of(T)[0]`` threads, arguments ``args_of(T)[1]``): the
    arguments, updated."""
    prog, launches = HostProgram(target), []
    for T in types:
        threads, args = args_of(T)
        launches.append(Launch(prog.add(kernel_of(T).specialize(target=target)), 1, threads, args))
    prog.build(tmp_path)
    prog.run(launches)
    return [l.args for l in launches]


# -- min/max of floats: the language's rule and AMD's nan="fast" ----------------------------

# signaling NaNs (quiet bit clear, payload in the low bits), a quiet NaN of each type
SNAN = {"f16": 0x7C01, "bf16": 0x7F81, "f32": 0x7F800001, "f64": 0x7FF0000000000001}
QNAN = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000}
S, Q = "snan", "qnan"
# signaling NaNs either side and of either sign, quiet NaNs, two NaNs, signed zeros, infinities
PAIRS = [(S, 2.0), (2.0, S), ("-snan", -3.0), (S, Q), (Q, 5.0), (5.0, Q), (Q, Q), (-0.0, 0.0),
         (0.0, -0.0), (math.inf, -math.inf), (1.5, -7.0), (-7.0, 1.5), (S, math.inf),
         (-math.inf, S), (0.25, 0.25), (-0.0, -0.0)]


def _bits_type(T):
    return np.dtype(f"u{T.itemsize}")


def _operands(T):
    """PAIRS as two arrays of T (NaNs by their bits)."""
    u, top = _bits_type(T), 1 << (T.bits - 1)
    special = {S: SNAN[T.name], "-snan": SNAN[T.name] | top, Q: QNAN[T.name]}

    def bits(v):
        if v in special:
            return special[v]
        return int(np.array(v, T.np_dtype).view(u))
    return tuple(np.array([bits(p[k]) for p in PAIRS], u).view(T.np_dtype) for k in (0, 1))


MANTISSA_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}


def _is_snan(v, T):
    """A NaN whose quiet bit (the mantissa's top bit) is clear."""
    quiet = 1 << (MANTISSA_BITS[T.name] - 1)
    return bool(np.isnan(np.float64(v))) and not int(np.array(v).view(_bits_type(T))) & quiet


def _number_rule(o, a, b):
    """ir/ops.py min/max: a NaN operand (quiet or signaling) yields the other, -0 < +0."""
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    below = (a, math.copysign(1, a)) < (b, math.copysign(1, b))
    return a if below == (o == "min") else b


def _ieee2008_rule(o, a, b, T):
    """ir/ops.py nan='ieee2008' (v_min/v_max in IEEE mode): the same, except that a signaling
    NaN operand gives a quiet NaN."""
    return math.nan if _is_snan(a, T) or _is_snan(b, T) else _number_rule(o, float(a), float(b))


def _check_floats(got, want, what):
    nan = np.isnan(want.astype(np.float64))
    assert (np.isnan(got.astype(np.float64)) == nan).all(), (what, got, want)
    assert got[~nan].tobytes() == want[~nan].tobytes(), (what, got, want)   # signed zeros too


@functools.cache
def minmax_of(T):
    """Each thread two pairs: min and max of both nan modes, lane by lane and as a vector."""
    @opus.kernel
    def minmax(x: opus.Ptr[T], y: opus.Ptr[T], lo: opus.Ptr[T], hi: opus.Ptr[T],
               flo: opus.Ptr[T], fhi: opus.Ptr[T], vlo: opus.Ptr[T], vfhi: opus.Ptr[T]):
        i = opus.thread_id_x() * 2
        for k in range(2):
            lo[i + k] = opus.min(x[i + k], y[i + k])
            hi[i + k] = opus.max(x[i + k], y[i + k])
            flo[i + k] = opus.min(x[i + k], y[i + k], nan="fast")
            fhi[i + k] = opus.max(x[i + k], y[i + k], nan="fast")
        a, b = opus.load(x, i, vec=2), opus.load(y, i, vec=2)
        opus.store(vlo, opus.min(a, b), i)
        opus.store(vfhi, opus.max(a, b, nan="fast"), i)
    return minmax


FLOATS = [f32, f64, f16, bf16]


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_min_max_by_the_nan_rule_of_each_mode(target, tmp_path):
    """nan="number" everywhere and nan="fast" on NVIDIA and for 16-bit floats: a signaling NaN
    yields the other operand; nan="fast" of f32/f64 on AMD (v_min/v_max_f32/f64): it gives a
    quiet NaN. Quiet NaNs yield the other operand in every mode, -0 < +0."""
    def args_of(T):
        outs = [np.zeros(len(PAIRS), T.np_dtype) for _ in range(6)]
        return len(PAIRS) // 2, [*_operands(T), *outs]

    for T, (x, y, *outs) in zip(FLOATS, _run_each(target, minmax_of, args_of, FLOATS, tmp_path)):
        fast_is_ieee2008 = target.startswith("gfx") and T.name in ("f32", "f64")

        def want(o, fast):
            ieee2008 = fast and fast_is_ieee2008
            rule = (lambda a, b: _ieee2008_rule(o, a, b, T)) if ieee2008 else \
                (lambda a, b: _number_rule(o, float(a), float(b)))
            out = np.array([rule(a, b) for a, b in zip(x, y)], np.float64)
            assert not ieee2008 or np.isnan(out).sum() == 7     # 6 signaling, Q with Q
            return out.astype(T.np_dtype)

        for got, o, fast in zip(outs, ("min", "max", "min", "max", "min", "max"),
                                (False, False, True, True, False, True)):
            _check_floats(got, want(o, fast), T.name)


# -- min/max of bools -------------------------------------------------------------------------

@opus.kernel
def bool_minmax(x: opus.Ptr[opus.bool_], y: opus.Ptr[opus.bool_], lo: opus.Ptr[opus.bool_],
                hi: opus.Ptr[opus.bool_]):
    t = opus.thread_id_x()
    lo[t] = opus.min(x[t], y[t])
    hi[t] = opus.max(x[t], y[t])


@pytest.mark.parametrize("target", TARGETS)
def test_min_of_bools_is_and_max_is_or(target, tmp_path):
    x, y = np.array([0, 0, 1, 1], np.bool_), np.array([0, 1, 0, 1], np.bool_)
    lo, hi = np.ones(4, np.bool_), np.zeros(4, np.bool_)
    run_kernel(bool_minmax, 1, 4, x, y, lo, hi, target=target, workdir=tmp_path)
    assert lo.tolist() == [False, False, False, True] and hi.tolist() == [False, True, True, True]


def test_an_op_the_language_never_applies_to_bools_is_refused():
    """Tracing promotes bool operands of + - * // % to i32 (/ to f32) and refuses shifts of
    bools, so only an internal error brings one here: the message names the op and the type."""
    spec = bool_minmax.specialize(target="sm_80")
    with pytest.raises(CodegenError) as info:
        CudaEmitter(spec.function, spec.target).binary_expr("add", "a", "b", opus.bool_)
    assert info.value.raw_message == "add on bool"


# -- f32 literals beyond f32's range -------------------------------------------------------

TIE = 2.0 ** 128 - 2.0 ** 103          # half-way between f32's largest finite value and 2^128
F32_MAX = (2 - 2.0 ** -23) * 2.0 ** 127


@opus.kernel
def huge_literals(x: opus.Ptr[f32], o: opus.Ptr[f32]):
    o[0] = x[0] * 1e39
    o[1] = x[0] * -1e39
    o[2] = x[0] - (-1e300)
    o[3] = x[0] * TIE
    o[4] = x[0] * -TIE
    o[5] = x[0] * math.nextafter(TIE, 0)


@pytest.mark.parametrize("target", TARGETS)
def test_f32_literals_beyond_the_range_round_to_infinity(target, tmp_path):
    """Round to nearest even: 1e39, 1e300 and the tie (the largest finite value is odd) go to
    +-inf; just below the tie stays the largest finite value."""
    o = np.zeros(6, np.float32)
    run_kernel(huge_literals, 1, 1, np.float32([1.0]), o, target=target, workdir=tmp_path)
    assert o.tolist() == [math.inf, -math.inf, math.inf, math.inf, -math.inf, F32_MAX]


# -- 8- and 16-bit integers wrap at their width ---------------------------------------------

NARROW = [i8, u8, i16, u16]


def _narrow_pairs(T):
    """Operands at and around the type's ends, whose sums, differences, products and
    negations leave its range."""
    lo, hi = T.int_range()
    vals = [lo, lo + 1, -1 if lo else 1, 0, 1, hi // 2 + 1, hi - 1, hi]
    return np.array([(a, b) for a in vals for b in vals], np.int64).T


def _wrap(v, T):
    lo, hi = T.int_range()
    return (v - lo) % (hi - lo + 1) + lo


@functools.cache
def wrapping(T):
    @opus.kernel
    def wraps(x: opus.Ptr[T], y: opus.Ptr[T], add: opus.Ptr[T], sub: opus.Ptr[T],
              mul: opus.Ptr[T], neg: opus.Ptr[T], wide: opus.Ptr[opus.i32]):
        t = opus.thread_id_x()
        add[t], sub[t], mul[t] = x[t] + y[t], x[t] - y[t], x[t] * y[t]
        neg[t] = -x[t]
        wide[t] = opus.i32(-x[t]) + opus.i32(x[t] - y[t])    # the narrow results widened
    return wraps


def _wrap_case(T):
    """(operands and zeroed outputs, the wanted outputs) of ``wrapping(T)``."""
    a, b = _narrow_pairs(T)
    want = [_wrap(a + b, T), _wrap(a - b, T), _wrap(a * b, T), _wrap(-a, T)]
    want.append(_wrap(-a, T) + _wrap(a - b, T))
    args = [a.astype(T.np_dtype), b.astype(T.np_dtype)]
    args += [np.zeros(a.size, T.np_dtype) for _ in range(4)] + [np.zeros(a.size, np.int32)]
    return args, [w.astype(T.np_dtype) for w in want[:4]] + [want[4].astype(np.int32)]


@pytest.mark.parametrize("target", TARGETS)
def test_narrow_integer_arithmetic_wraps_without_undefined_behaviour(target, tmp_path,
                                                                     monkeypatch):
    """The wanted values are Python integers reduced to the type's range by hand; the host
    program runs under -fsanitize=undefined, so an operation the C leaves to int (a product
    of two unsigned shorts, a left shift of a negative or too large int) stops it."""
    monkeypatch.setenv("OPUS_HOSTEXEC_UBSAN", "1")
    cases = {T: _wrap_case(T) for T in NARROW}
    ran = _run_each(target, wrapping, lambda T: (cases[T][0][0].size, cases[T][0]), NARROW,
                    tmp_path)
    for T, args in zip(NARROW, ran):
        for got, w in zip(args[2:], cases[T][1]):
            np.testing.assert_array_equal(got, w, err_msg=T.name)


@pytest.mark.gpu
@pytest.mark.parametrize("T", NARROW, ids=lambda t: t.name)
def test_gpu_narrow_integer_arithmetic_wraps(T):
    """NVRTC 13.0 dropped the truncation of (short)(0 - x) when the result was widened later
    (-(-32768) came out 32768): codegen sign-extends narrow signed results by shifts."""
    torch = pytest.importorskip("torch")
    args, want = _wrap_case(T)
    signed = lambda a: f"int{8 * a.itemsize}"                                # noqa: E731
    dev = [torch.from_numpy(a.view(signed(a))).cuda().view(getattr(torch, a.dtype.name))
           for a in args]
    wrapping(T)[1, args[0].size](*dev)
    for got, w in zip(dev[2:], want):
        host = got.view(getattr(torch, signed(w))).cpu().numpy().view(w.dtype)
        np.testing.assert_array_equal(host, w, err_msg=T.name)


@pytest.mark.parametrize("target", TARGETS)
def test_narrow_signed_results_sign_extend_by_shifts(target):
    """The form the GPU test above needs, pinned where no GPU runs: a plain (short) cast of
    the wrapped 32-bit result computes the same on the host (C++ converts modulo 2^16), but
    NVRTC 13.0 dropped it when the result was widened later. Each of the six narrow results
    of ``wrapping`` (+, -, *, two negations, the - widened) is sign-extended by shifts."""
    for T, ctype in ((i8, "signed char"), (i16, "short")):
        lines = [l.strip() for l in wrapping(T).source(target=target).splitlines()]
        narrow = [l for l in lines if l.startswith(f"{ctype} v") and f" = ({ctype})" in l]
        shift = 32 - T.bits
        assert len(narrow) == 6 and all(l.startswith(f"{ctype} v") and f" = ({ctype})((int)("
                                        in l and l.endswith(f") << {shift}) >> {shift});")
                                        for l in narrow), narrow


# -- sub-byte lanes to bool ----------------------------------------------------------------

SUB_BYTE = [opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.int4, opus.uint4]


@functools.cache
def to_bool(T):
    vec = T.pack_elems

    @opus.kernel
    def nonzero(x: opus.Ptr[T], o: opus.Ptr[opus.bool_]):
        i = opus.thread_id_x() * vec
        b = opus.cast(opus.load(x, i, vec=vec), opus.bool_)
        for k in range(vec):
            o[i + k] = b[k]
    return nonzero


def _pack(codes, bits):
    """Element i at bits [i*bits, (i+1)*bits) of a little-endian byte stream (ir/ops.py)."""
    stream = sum(int(c) << (i * bits) for i, c in enumerate(codes))
    return np.frombuffer(stream.to_bytes(len(codes) * bits // 8, "little"), np.uint8).copy()


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_every_sub_byte_code_converts_to_bool_as_nonzero(target, tmp_path):
    """Every code: false exactly for the zeros (fp4/fp6: +0 and -0, ml_dtypes' values)."""
    codes = {T: np.arange(1 << T.bits, dtype=np.uint8) for T in SUB_BYTE}

    def args_of(T):
        return codes[T].size // T.pack_elems, [_pack(codes[T], T.bits),
                                               np.zeros(codes[T].size, np.bool_)]

    for T, (_, o) in zip(SUB_BYTE, _run_each(target, to_bool, args_of, SUB_BYTE, tmp_path)):
        values = codes[T].view(T.np_dtype).astype(np.float64)   # ml_dtypes: int4 two's complement
        np.testing.assert_array_equal(o, values != 0, err_msg=T.name)
        assert (~o).sum() == (2 if T.kind == "float" else 1), T.name


# -- the runner's inline GCN ---------------------------------------------------------------

def test_inline_gcn_is_rewritten_into_its_shim_or_refused():
    """v_min_f32 becomes opus_gcn::v_min_f32 (shim/hip.h); an instruction without a shim is
    not host-executable; the empty compiler barrier is left to the host compiler."""
    barrier = '__asm__ volatile("" ::: "memory");'
    src = ('float f(float a, float b) { float r; __asm__("%s" : "=v"(r) : "v"(a)%s); '
           + barrier + ' return r; }')
    kept = prepare_source(src % ("v_min_f32 %0, %1, %2", ', "v"(b)'), "amd")
    assert "opus_gcn::v_min_f32(r, a, b);" in kept and barrier in kept
    with pytest.raises(NotHostExecutable, match="inline GCN 'v_exp_f32' has no host shim"):
        prepare_source(src % ("v_exp_f32 %0, %1", ""), "amd")
