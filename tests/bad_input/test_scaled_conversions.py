"""Bad input to the scaled and MX conversions (opus.scaled_cast, opus.mx_quantize,
opus.mx_dequantize, opus.mx_scale), traced as gfx950, where fp4 conversions use the chip's
v_cvt_scalef32_pk_* instructions: each case checks the error type, that the message names the
problem and the argument, the kernel line (``# ERR: <tag>``), and that nothing was written or
cached."""
import numpy as np
import pytest

import opus
from opus import f32, fp4_e2m1, i32
from expect import no_new_cache_files, raises, unchanged

TARGET = "gfx950"


def launch(k, *args):
    with opus.set_target(TARGET, interpret=True):
        k[1, 1](*args)


def _vec(x, n):
    g = opus.make_gmem(x, 64)
    return opus.concat(*[g.load(4 * j, vec=4) for j in range(n // 4)])


@opus.kernel
def mx_16_lanes(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 16), fp4_e2m1)  # ERR: mx-16


@opus.kernel
def mx_int_element(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 32), opus.i8)  # ERR: mx-int


@opus.kernel
def mx_f16_element(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 32), opus.f16)  # ERR: mx-f16


@opus.kernel
def mx_int_values(x: opus.Ptr[i32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 32), fp4_e2m1)  # ERR: mx-ints


@opus.kernel
def deq_two_scales(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 32), fp4_e2m1)
    d = opus.mx_dequantize(q, opus.make_vector(s, s))  # ERR: deq-count


@opus.kernel
def deq_f32_scale(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    q, s = opus.mx_quantize(_vec(x, 32), fp4_e2m1)
    d = opus.mx_dequantize(q, x[0])  # ERR: deq-f32


@opus.kernel
def deq_not_mx(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    d = opus.mx_dequantize(_vec(x, 32), opus.mx_scale(x[0], fp4_e2m1))  # ERR: deq-f32q


@opus.kernel
def scaled_string_scale(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    z = opus.scaled_cast(_vec(x, 32), fp4_e2m1, "2")  # ERR: sc-str


@opus.kernel
def scaled_rz(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    z = opus.scaled_cast(_vec(x, 32), fp4_e2m1, 2.0, rounding="rz")  # ERR: sc-rz


@opus.kernel
def scaled_to_f32(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    z = opus.scaled_cast(_vec(x, 32), opus.f32, 2.0)  # ERR: sc-f32


@opus.kernel
def scaled_int_values(x: opus.Ptr[i32], y: opus.Ptr[f32]):
    z = opus.scaled_cast(_vec(x, 32), fp4_e2m1, 2.0)  # ERR: sc-ints


@opus.kernel
def scale_of_e8m0(x: opus.Ptr[f32], y: opus.Ptr[f32]):
    s = opus.mx_scale(x[0], opus.e8m0)  # ERR: scale-e8m0


CASES = [
    (mx_16_lanes, f32, ("whole MX blocks", "32", "16"), "mx-16"),
    (mx_int_element, f32, ("MX elements", "i8"), "mx-int"),
    (mx_f16_element, f32, ("MX elements", "f16"), "mx-f16"),
    (mx_int_values, i32, ("mx_quantize's x", "f32"), "mx-ints"),
    (deq_two_scales, f32, ("mx_dequantize", "1 blocks", "2 scale"), "deq-count"),
    (deq_f32_scale, f32, ("mx_dequantize's scale", "e8m0"), "deq-f32"),
    (deq_not_mx, f32, ("mx_dequantize's q", "MX element type"), "deq-f32q"),
    (scaled_string_scale, f32, ("scaled_cast's inv_scale", "str"), "sc-str"),
    (scaled_rz, f32, ("scaled_cast", "'rn' or 'sr'", "rz"), "sc-rz"),
    (scaled_to_f32, f32, ("scaled_cast", "narrower than f32", "f32"), "sc-f32"),
    (scaled_int_values, i32, ("scaled_cast's x", "f32"), "sc-ints"),
    (scale_of_e8m0, f32, ("mx_scale", "MX elements", "e8m0"), "scale-e8m0"),
]


@pytest.mark.parametrize("kernel, xt, needles, tag", CASES, ids=[c[3] for c in CASES])
def test_trace_errors(kernel, xt, needles, tag, cache_root):
    x = np.arange(64, dtype=xt.np_dtype)
    y = np.zeros(64, np.float32)
    with no_new_cache_files(cache_root), unchanged(x, y):
        with raises(opus.TraceError, *needles, at=tag):
            launch(kernel, x, y)
