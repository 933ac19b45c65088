"""Bad input to conversions and quantization: rounding modes a conversion does not have, the
random bits of stochastic rounding missing, misplaced or of the wrong shape or type, scaled and
MX helpers given the wrong types or block sizes. Each case checks the error type, that the
message names the problem, and the kernel line (``# ERR: <tag>``); launched cases also check that
nothing was written and nothing was cached."""
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, f64, fp8_e4m3, fp8_e5m2fnuz, i32, u32
from expect import no_new_cache_files, raises, unchanged

TARGETS = ["sm_90a", "gfx942", "gfx950"]


def _cast_kernel(to, **kw):
    items = tuple(kw.items())  # kernels read immutable globals only

    @opus.kernel
    def k(x: opus.Ptr[f32], y: opus.Ptr[to]):
        i = opus.thread_id_x()
        y[i] = opus.cast(x[i], to, **dict(items))  # ERR: cast
    return k


# (destination, keyword arguments, words the message must hold)
BAD_MODES = [
    (fp8_e4m3, dict(rounding="rz"), ["rz", "fp8_e4m3", "nearest even"]),
    (f16, dict(rounding="truncate"), ["truncate", "bf16", "f16"]),
    (f32, dict(rounding="truncate_with_nan"), ["truncate_with_nan", "bf16"]),
    (fp8_e4m3, dict(rounding="truncate"), ["truncate", "fp8_e4m3"]),
    (f32, dict(rounding="sr", rbits=1), ["sr", "f32", "nearest even"]),
    (opus.e8m0, dict(rounding="sr", rbits=1), ["sr", "e8m0"]),
    (opus.i32, dict(rounding="sr", rbits=1), ["sr", "i32"]),
    (bf16, dict(rounding="rd"), ["unknown rounding", "rd", "'standard' is 'rn'"]),
    (bf16, dict(rounding=None), ["unknown rounding", "None"]),
    (bf16, dict(rounding="RN"), ["unknown rounding", "RN"]),
    (bf16, dict(rounding="sr"), ["rbits", "random bits"]),
    (bf16, dict(rbits=7), ["rbits", "random bits", "'rn'"]),
    (bf16, dict(rounding="truncate", rbits=7), ["rbits", "'truncate'"]),
    (fp8_e4m3, dict(rounding="sr", rbits=-1), ["rbits=-1", "u32"]),
    (fp8_e4m3, dict(rounding="sr", rbits=2 ** 32), ["u32"]),
    (fp8_e4m3, dict(rounding="sr", rbits=1.5), ["rbits", "u32 or i32", "float"]),
    (fp8_e4m3, dict(rounding="sr", rbits=True), ["rbits", "u32 or i32", "bool"]),
    (fp8_e4m3, dict(rounding="sr", rbits="abc"), ["rbits", "u32 or i32", "str"]),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("to,kw,needles", BAD_MODES,
                         ids=[f"{t.name}-{'-'.join(f'{k}={v!r}' for k, v in kw.items())}" for t, kw, _ in BAD_MODES])
def test_rounding_a_conversion_lacks(target, to, kw, needles):
    with raises(opus.TraceError, *needles, at="cast"):
        _cast_kernel(to, **kw).source(target=target)


@opus.kernel
def _sr_from_f64(x: opus.Ptr[f64], r: opus.Ptr[u32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], bf16, rounding="sr", rbits=r[i])  # ERR: sr-f64


@opus.kernel
def _sr_from_int(x: opus.Ptr[i32], r: opus.Ptr[u32], y: opus.Ptr[fp8_e4m3]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], fp8_e4m3, rounding="sr", rbits=r[i])  # ERR: sr-int


@pytest.mark.parametrize("k,tag,src", [(_sr_from_f64, "sr-f64", "f64"), (_sr_from_int, "sr-int", "i32")])
def test_stochastic_rounding_from_a_wide_source(k, tag, src):
    with raises(opus.TraceError, "rounding='sr' converts from f32, f16, bf16", src, "to f32 first", at=tag):
        k.source(target="gfx950")


@opus.kernel
def _sr_lanes(x: opus.Ptr[f32], r: opus.Ptr[u32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x() * 4
    v = opus.make_gmem(x).load(i, vec=4)
    w = opus.make_gmem(r).load(i, vec=2)
    opus.make_gmem(y).store(opus.cast(v, bf16, rounding="sr", rbits=w), i)  # ERR: sr-lanes


@opus.kernel
def _sr_vector_bits_scalar(x: opus.Ptr[f32], r: opus.Ptr[u32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], bf16, rounding="sr", rbits=opus.make_gmem(r).load(0, vec=2))  # ERR: sr-vec


@opus.kernel
def _sr_float_bits(x: opus.Ptr[f32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], bf16, rounding="sr", rbits=x[i])  # ERR: sr-float-bits


@opus.kernel
def _sr_narrow_bits(x: opus.Ptr[f32], r: opus.Ptr[opus.u16], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], bf16, rounding="sr", rbits=r[i])  # ERR: sr-u16


@opus.kernel
def _sr_pointer_bits(x: opus.Ptr[f32], r: opus.Ptr[u32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.cast(x[i], bf16, rounding="sr", rbits=r)  # ERR: sr-ptr


@pytest.mark.parametrize("k,tag,needles", [
    (_sr_lanes, "sr-lanes", ["rbits has 2 lane", "has 4", "one random word per lane"]),
    (_sr_vector_bits_scalar, "sr-vec", ["rbits has 2 lane", "has 1"]),
    (_sr_float_bits, "sr-float-bits", ["rbits must be a u32 or i32", "f32"]),
    (_sr_narrow_bits, "sr-u16", ["rbits must be a u32 or i32", "u16"]),
    (_sr_pointer_bits, "sr-ptr", ["rbits must be a u32 or i32"])])
@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_random_bits_of_the_wrong_shape_or_type(k, tag, needles, target):
    with raises(opus.TraceError, *needles, at=tag):
        k.source(target=target)


def test_interpreter_refuses_before_writing(cache_root):
    """The interpreter running as a target refuses what tracing refuses, before any write, and
    nothing reaches the cache."""
    x = np.ones(32, np.float32)
    y = np.zeros(32, np.uint8).view(opus.fp8_e4m3.np_dtype)
    with no_new_cache_files(cache_root), unchanged(y):
        with opus.set_target("gfx942", interpret=True):
            with raises(opus.TraceError, "rz", "fp8_e4m3", at="cast"):
                _cast_kernel(fp8_e4m3, rounding="rz")[1, 32](x, y)


# -- quantization helpers --------------------------------------------------------------------------

@opus.kernel
def _scaled_int(x: opus.Ptr[i32], y: opus.Ptr[fp8_e4m3]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], fp8_e4m3, 2.0)  # ERR: scaled-int


@opus.kernel
def _scaled_to_i8(x: opus.Ptr[f32], y: opus.Ptr[opus.i8]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], opus.i8, 2.0)  # ERR: scaled-i8


@opus.kernel
def _scaled_to_f32(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], f32, 2.0)  # ERR: scaled-f32


@opus.kernel
def _scaled_rz(x: opus.Ptr[f32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], bf16, 2.0, rounding="rz")  # ERR: scaled-rz


@opus.kernel
def _scaled_bad_inv(x: opus.Ptr[f32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], bf16, "2")  # ERR: scaled-inv


@opus.kernel
def _scaled_not_dtype(x: opus.Ptr[f32], y: opus.Ptr[bf16]):
    i = opus.thread_id_x()
    y[i] = opus.scaled_cast(x[i], "bf16", 2.0)  # ERR: scaled-dtype


@opus.kernel
def _mx_elem_bf16(x: opus.Ptr[f32]):
    v = opus.make_gmem(x).load(0, vec=4)
    opus.mx_quantize(opus.concat(*[v] * 8), bf16)  # ERR: mx-bf16


@opus.kernel
def _mx_elem_fnuz(x: opus.Ptr[f32]):
    v = opus.make_gmem(x).load(0, vec=4)
    opus.mx_quantize(opus.concat(*[v] * 8), fp8_e5m2fnuz)  # ERR: mx-fnuz


@opus.kernel
def _mx_partial_block(x: opus.Ptr[f32]):
    v = opus.make_gmem(x).load(0, vec=4)
    opus.mx_quantize(opus.concat(*[v] * 4), fp8_e4m3)  # ERR: mx-16


@opus.kernel
def _mx_scale_int(x: opus.Ptr[i32]):
    opus.mx_scale(x[0], fp8_e4m3)  # ERR: mx-scale-int


@opus.kernel
def _mx_dequant_scale_f32(x: opus.Ptr[fp8_e4m3], s: opus.Ptr[f32]):
    q = opus.concat(*[opus.make_gmem(x).load(16 * j, vec=16) for j in range(2)])
    opus.mx_dequantize(q, s[0])  # ERR: mx-deq-scale


@opus.kernel
def _mx_dequant_count(x: opus.Ptr[fp8_e4m3], s: opus.Ptr[opus.e8m0]):
    q = opus.concat(*[opus.make_gmem(x).load(16 * j, vec=16) for j in range(4)])
    opus.mx_dequantize(q, s[0])  # ERR: mx-deq-count


@opus.kernel
def _mx_dequant_f32(x: opus.Ptr[f32], s: opus.Ptr[opus.e8m0]):
    opus.mx_dequantize(opus.make_gmem(x).load(0, vec=4), s[0])  # ERR: mx-deq-f32


@opus.kernel
def _tensor_scale_int(x: opus.Ptr[f32]):
    opus.tensor_scale(x[0], opus.i8)  # ERR: tscale-int


@opus.kernel
def _amax_int(x: opus.Ptr[i32]):
    opus.amax(x[0])  # ERR: amax-int


QUANT = [
    (_scaled_int, "scaled-int", ["scaled_cast's x", "f32/f16/bf16"]),
    (_scaled_to_i8, "scaled-i8", ["narrower than f32", "i8"]),
    (_scaled_to_f32, "scaled-f32", ["narrower than f32", "not f32"]),
    (_scaled_rz, "scaled-rz", ["'rn' or 'sr'", "'rz'"]),
    (_scaled_bad_inv, "scaled-inv", ["inv_scale", "str"]),
    (_scaled_not_dtype, "scaled-dtype", ["opus dtype", "'bf16'"]),
    (_mx_elem_bf16, "mx-bf16", ["MX elements", "bf16"]),
    (_mx_elem_fnuz, "mx-fnuz", ["MX elements", "fp8_e5m2fnuz"]),
    (_mx_partial_block, "mx-16", ["whole MX blocks of 32", "16"]),
    (_mx_scale_int, "mx-scale-int", ["mx_scale's amax", "f32/f16/bf16"]),
    (_mx_dequant_scale_f32, "mx-deq-scale", ["scale must be an e8m0"]),
    (_mx_dequant_count, "mx-deq-count", ["64 lanes", "2 blocks", "1 scale"]),
    (_mx_dequant_f32, "mx-deq-f32", ["MX element type"]),
    (_tensor_scale_int, "tscale-int", ["narrower than f32", "i8"]),
    (_amax_int, "amax-int", ["amax's x", "f32/f16/bf16"]),
]


@pytest.mark.parametrize("k,tag,needles", QUANT, ids=[q[1] for q in QUANT])
def test_quantization_helpers(k, tag, needles):
    with raises(opus.TraceError, *needles, at=tag):
        k.source(target="gfx950")
