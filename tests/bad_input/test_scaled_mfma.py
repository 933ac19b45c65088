"""Bad input to gfx950's block-scaled f8f6f4 MFMAs (opus.make_mma(..., scaled=True) and the
atom's call): another chip (gfx942, NVIDIA), K other than 128 / 64, a format the instructions do
not read, a non-f32 accumulator, missing or mistyped scales, opsel out of range, operands of the
wrong register type, a tiled MMA of a scaled atom. Each case checks the error type, the message
and the kernel line (``# ERR: <tag>``); the interpreter refuses as the compiler does, writing
nothing, and a refused compile caches nothing."""
import numpy as np
import pytest

import opus
from opus import f16, f32

from expect import no_new_cache_files, raises, unchanged

fp4, fp6, bf6, fp8, bf8 = opus.fp4_e2m1, opus.fp6_e2m3, opus.fp6_e3m2, opus.fp8_e4m3, opus.fp8_e5m2


@opus.kernel(block=64)
def _make(out: opus.Ptr[f32], A: opus.constexpr, B: opus.constexpr, C: opus.constexpr,
          S: opus.constexpr, SCALED: opus.constexpr = True):
    opus.make_mma(A, B, C, S, scaled=SCALED)  # ERR: make


def _make_fails(arch, a, b, c, shape, *needles, scaled=True):
    with raises(opus.TraceError, *needles, at="make"):
        _make.source(target=arch, A=a, B=b, C=c, S=shape, SCALED=scaled)


# -- the chip ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,shape", [(fp4, fp4, (32, 32, 64)), (fp8, fp4, (16, 16, 128)),
                                       (fp6, bf8, (32, 32, 64)), (bf6, fp6, (16, 16, 128))],
                         ids=["fp4xfp4", "fp8xfp4", "fp6xbf8", "bf6xfp6"])
def test_gfx942_has_no_scaled_mfma(a, b, shape):
    _make_fails("gfx942", a, b, f32, shape, "no scaled matrix instruction", "gfx942",
                "v_mfma_scale_f32_16x16x128_f8f6f4", "gfx950 instructions",
                "gfx942 has no such instruction", "available:")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_nvidia_has_no_scaled_atom(arch):
    _make_fails(arch, fp8, fp8, f32, (16, 8, 32), "no scaled matrix instruction", arch,
                "available:")


# -- shape, formats, accumulator ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(16, 16, 64), (32, 32, 128), (16, 16, 32), (32, 32, 16),
                                   (16, 32, 128)], ids=lambda s: "x".join(map(str, s)))
def test_k_other_than_128_or_64_names_the_shapes(shape):
    _make_fails("gfx950", fp4, fp8, f32, shape, "16x16x128 and 32x32x64",
                f"not {'x'.join(map(str, shape))}", "32 elements per e8m0 scale")


@pytest.mark.parametrize("a,b,bad", [(f16, f16, "f16"), (opus.bf16, fp8, "bf16"), (opus.i8, fp4, "i8"),
                                     (opus.fp8_e4m3fnuz, fp8, "fp8_e4m3fnuz"), (fp4, opus.int4, "int4"),
                                     (opus.e8m0, fp4, "e8m0")],
                         ids=["f16", "bf16", "i8", "fnuz", "int4", "e8m0"])
def test_a_format_the_instructions_do_not_read(a, b, bad):
    _make_fails("gfx950", a, b, f32, (16, 16, 128), "formats are",
                "fp8_e4m3/fp8_e5m2/fp6_e2m3/fp6_e3m2/fp4_e2m1", f"not {bad}")


def test_e8m0_as_an_operand_points_to_the_scale_arguments():
    _make_fails("gfx950", opus.e8m0, opus.e8m0, f32, (32, 32, 64), "scales' type", "scale_a=")


@pytest.mark.parametrize("c", [f16, opus.i32, opus.bf16], ids=["f16", "i32", "bf16"])
def test_accumulator_other_than_f32(c):
    _make_fails("gfx950", fp4, fp4, c, (32, 32, 64), "accumulate in f32", f"not {c.name}")


@pytest.mark.parametrize("flag", [1, "yes", None], ids=["int", "str", "none"])
def test_scaled_must_be_a_bool(flag):
    _make_fails("gfx950", fp4, fp4, f32, (32, 32, 64), "scaled must be a bool", repr(flag),
                scaled=flag)


def test_swap_ab_names_the_swapped_request():
    with raises(opus.TraceError, "swap_ab=True needs the 16x16x64 atom", "16x16x128 and 32x32x64",
                at="swap"):
        _swap.source(target="gfx950")


@opus.kernel(block=64)
def _swap(out: opus.Ptr[f32]):
    opus.make_mma(fp4, fp8, f32, (16, 16, 64), swap_ab=True, scaled=True)  # ERR: swap


# -- the call ------------------------------------------------------------------------------------------

@opus.kernel(block=64)
def _call(out: opus.Ptr[f32], s8: opus.Ptr[opus.e8m0], WHICH: opus.constexpr):
    mma = opus.make_mma(fp4, fp8, f32, (16, 16, 128), scaled=True)
    a = opus.zeros(32, fp4)
    b = opus.zeros(32, fp8)
    s = s8[0]
    s4 = opus.load(s8, 0, vec=4)
    if WHICH == "no scale_a":
        d = mma(a, b, scale_b=s)  # ERR: no scale_a
    elif WHICH == "no scale_b":
        d = mma(a, b, scale_a=s)  # ERR: no scale_b
    elif WHICH == "f32 scale":
        d = mma(a, b, scale_a=opus.f32(1.0), scale_b=s)  # ERR: f32 scale
    elif WHICH == "int scale":
        d = mma(a, b, scale_a=s, scale_b=127)  # ERR: int scale
    elif WHICH == "u8 scale":
        d = mma(a, b, scale_a=opus.u8(127), scale_b=s)  # ERR: u8 scale
    elif WHICH == "fp8 scale":
        d = mma(a, b, scale_a=opus.cast(1.0, fp8), scale_b=s)  # ERR: fp8 scale
    elif WHICH == "e8m0x2 scale":
        d = mma(a, b, scale_a=s4[0:2], scale_b=s)  # ERR: e8m0x2 scale
    elif WHICH == "opsel 4":
        d = mma(a, b, scale_a=s4, scale_b=s, opsel_a=4)  # ERR: opsel 4
    elif WHICH == "opsel -1":
        d = mma(a, b, scale_a=s, scale_b=s4, opsel_b=-1)  # ERR: opsel -1
    elif WHICH == "opsel scalar":
        d = mma(a, b, scale_a=s, scale_b=s, opsel_a=1)  # ERR: opsel scalar
    elif WHICH == "opsel float":
        d = mma(a, b, scale_a=s4, scale_b=s, opsel_a=1.0)  # ERR: opsel float
    elif WHICH == "A type":
        d = mma(opus.zeros(32, fp8), b, scale_a=s, scale_b=s)  # ERR: A type
    elif WHICH == "B length":
        d = mma(a, opus.zeros(16, fp8), scale_a=s, scale_b=s)  # ERR: B length
    elif WHICH == "C type":
        d = mma(a, b, opus.zeros(4, f16), scale_a=s, scale_b=s)  # ERR: C type
    elif WHICH == "tiled":
        d = opus.make_tiled_mma(mma, (1, 1, 1), (1, 1, 1))  # ERR: tiled
    out[0] = d[0]


CALL_CASES = [
    ("no scale_a", "needs scale_a=", "127 = x1"),
    ("no scale_b", "needs scale_b=", "e8m0x4"),
    ("f32 scale", "scale_a must be an e8m0", "got f32"),
    ("int scale", "scale_b must be an e8m0", "got int"),
    ("u8 scale", "scale_a must be an e8m0", "got u8"),
    ("fp8 scale", "scale_a must be an e8m0", "got fp8_e4m3"),
    ("e8m0x2 scale", "scale_a must be an e8m0", "e8m0x2"),
    ("opsel 4", "opsel_a must be a compile-time int", "0..3", "got 4"),
    ("opsel -1", "opsel_b must be a compile-time int", "got -1"),
    ("opsel scalar", "opsel_a", "0 for one e8m0", "got 1"),
    ("opsel float", "opsel_a must be a compile-time int", "got 1.0"),
    ("A type", "operand A must be a fp4_e2m1x32", "got fp8_e4m3x32"),
    ("B length", "operand B must be a fp8_e4m3x32", "got fp8_e4m3x16"),
    ("C type", "operand C must be a f32x4", "got f16x4"),
    ("tiled", "make_tiled_mma takes no scaled atoms", "per tile"),
]


@pytest.mark.parametrize("which,needles", [(c[0], c[1:]) for c in CALL_CASES], ids=[c[0] for c in CALL_CASES])
def test_call_errors_name_the_argument(which, needles, cache_root):
    with no_new_cache_files(cache_root), raises(opus.TraceError, *needles, at=which):
        _call.asm(target="gfx950", WHICH=which)


@pytest.mark.parametrize("which", ["no scale_a", "opsel 4", "A type"])
def test_the_interpreter_refuses_and_writes_nothing(which):
    out = np.zeros(4, np.float32)
    s8 = np.full(4, 127, np.uint8)
    with opus.set_target("gfx950", interpret=True):
        with unchanged(out), raises(opus.TraceError, at=which):
            _call[1, 64](out, s8.view(opus.e8m0.np_dtype), WHICH=which)


def test_gfx942_in_the_interpreter_writes_nothing():
    out = np.zeros(4, np.float32)
    with opus.set_target("gfx942", interpret=True):
        with unchanged(out), raises(opus.TraceError, "gfx942 has no such instruction", at="make"):
            _make[1, 64](out, A=fp4, B=fp4, C=f32, S=(32, 32, 64))
