"""Bad input to AMD's matrix atoms (opus.make_mma on gfx942/gfx950): a combination the chip lacks
(the error names the types, the shape, the chip and lists what it has), an instruction of the
other CDNA chip (xf32 is gfx942's only, the double-K int8 gfx950's, fp8 encodings differ), the
gfx950 f8f6f4 family asked for without scaled=True (fp4/fp6/e8m0 operands: a trace-time error
naming the scaled atoms, never undefined behaviour), and operands of the wrong register type. Each case checks the error type,
the message and the kernel line (``# ERR: <tag>``); the interpreter refuses as the compiler
does, writing nothing."""
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, i8, i32
from expect import raises, unchanged
from mma_cases import MAKE_FILE, make_kernel as _make, no_row as _no_row


# -- types or shapes no CDNA chip has: the message lists the chip's atoms ---------------------------

@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("a,b,c,shape", [
    (f16, f16, f32, (32, 32, 4)),      # a multi-block shape (2 blocks), not an adaptor atom
    (f16, f16, f32, (4, 4, 4)),        # 16-block
    (f16, f16, f16, (32, 32, 8)),      # MFMA accumulates in f32 only
    (bf16, f16, f32, (32, 32, 8)),     # mixed 16-bit inputs
    (i8, i8, f32, (32, 32, 16)),       # int8 accumulates in i32
    (opus.u8, opus.u8, i32, (32, 32, 16)),  # CDNA has signed int8 only
    (f32, f32, f32, (32, 32, 1)),      # f32 2-block
    (f32, f32, f32, (16, 16, 16)),
    (f16, f16, f32, (32, 16, 8)),      # not square
    (opus.f64, opus.f64, opus.f64, (16, 16, 4)),
], ids=["f16-2block", "f16-4x4", "f16-acc", "bf16xf16", "i8-f32acc", "u8", "f32-2block",
        "f32-k16", "nonsquare", "f64"])
def test_a_combination_no_chip_has_lists_the_chips_atoms(arch, a, b, c, shape):
    _no_row(arch, a, b, c, shape, f"{a.name} x {b.name} -> {c.name}",
            "x".join(map(str, shape)), "f16xf16->f32 32x32x8", "i8xi8->i32 32x32x16")


# -- the other CDNA chip's instructions ------------------------------------------------------------

@pytest.mark.parametrize("shape", [(32, 32, 4), (16, 16, 8)])
def test_xf32_on_gfx950(shape):
    _no_row("gfx950", opus.tf32, opus.tf32, f32, shape, "xf32", "gfx942 only", "CDNA4 removed")


@pytest.mark.parametrize("arch,shape", [("gfx942", (32, 32, 4)), ("gfx942", (16, 16, 8)),
                                        ("sm_90a", (16, 8, 8)), ("sm_80", (16, 8, 4))])
def test_f32_inputs_never_get_the_tf32_instruction_silently(arch, shape):
    _no_row(arch, f32, f32, f32, shape, "reads f32 inputs as tf32", "make_mma(opus.tf32")


@pytest.mark.parametrize("shape", [(32, 32, 32), (16, 16, 64)])
def test_double_k_int8_on_gfx942(shape):
    m, n, k = shape
    _no_row("gfx942", i8, i8, i32, shape, f"v_mfma_i32_{m}x{n}x{k}_i8", "gfx950 only",
            "i8xi8->i32 32x32x16")


@pytest.mark.parametrize("a,b", [(opus.fp8_e4m3, opus.fp8_e4m3), (opus.fp8_e4m3, opus.fp8_e5m2),
                                 (opus.fp8_e5m2, opus.fp8_e4m3), (opus.fp8_e5m2, opus.fp8_e5m2)],
                         ids=["fp8_fp8", "fp8_bf8", "bf8_fp8", "bf8_bf8"])
def test_ocp_fp8_on_gfx942_names_the_fnuz_encodings(a, b):
    _no_row("gfx942", a, b, f32, (32, 32, 16), "gfx950 only", "FNUZ", "opus.fp8")


@pytest.mark.parametrize("a", [opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz])
def test_fnuz_fp8_on_gfx950_names_the_ocp_encodings(a):
    _no_row("gfx950", a, a, f32, (16, 16, 32), "gfx942 only", "OCP")


# -- gfx950's f8f6f4 family: asked for without scaled=True (tests/bad_input/test_scaled_mfma.py
# has the scaled atoms' own cases) ------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("a,b,shape", [
    (opus.fp4, opus.fp4, (32, 32, 64)),
    (opus.fp4, opus.fp4, (16, 16, 128)),
    (opus.fp8, opus.fp4, (32, 32, 64)),
    (opus.fp4, opus.bf8, (16, 16, 128)),
    (opus.e8m0, opus.e8m0, (32, 32, 64)),
], ids=["fp4-32", "fp4-16", "fp8xfp4", "fp4xbf8", "e8m0"])
def test_f8f6f4_types_without_scaled_name_the_scaled_family(arch, a, b, shape):
    if arch == "gfx942":
        want = ("gfx950 instructions", "gfx942 has no such instruction")
    elif a is opus.e8m0:
        want = ("not e8m0", "scales' type", "scale_a=")
    else:
        want = ("scaled=True", "scale_a=", "127 = x1")
    with raises(opus.TraceError, "f8f6f4", "v_mfma_scale_f32_32x32x64_f8f6f4", *want, at="make",
                file=MAKE_FILE):
        _make.source(target=arch, A=a, B=b, C=f32, S=shape)


def test_f8f6f4_without_scaled_in_the_interpreter_writes_nothing():
    out = np.zeros(4, np.float32)
    with opus.set_target("gfx950", interpret=True):
        with unchanged(out), raises(opus.TraceError, "f8f6f4", "scaled=True", at="make",
                                    file=MAKE_FILE):
            _make[1, 64](out, A=opus.fp4, B=opus.fp4, C=f32, S=(32, 32, 64))


# -- operands of the wrong register type -------------------------------------------------------------

@opus.kernel(block=64)
def _call(out: opus.Ptr[f32], WHICH: opus.constexpr):
    mma = opus.make_mma(i8, i8, i32, (32, 32, 16))
    a = opus.zeros(8, i8)
    b = opus.zeros(8, i8)
    c = mma.zeros_c()
    if WHICH == "a-f16":
        a = opus.zeros(8, f16)
    elif WHICH == "a-short":
        a = opus.zeros(4, i8)
    elif WHICH == "b-u8":
        b = opus.zeros(8, opus.u8)
    elif WHICH == "c-f32":
        c = opus.zeros(16, f32)
    elif WHICH == "c-scalar":
        c = 0
    d = mma(a, b, c)  # ERR: call
    out[0] = opus.f32(d[0])


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("which,operand,want", [
    ("a-f16", "A", "i8x8 register vector"), ("a-short", "A", "i8x8 register vector"),
    ("b-u8", "B", "i8x8 register vector"), ("c-f32", "C", "i32x16 register vector"),
    ("c-scalar", "C", "i32x16 register vector"),
])
def test_int8_operands_of_the_wrong_type(arch, which, operand, want):
    with raises(opus.TraceError, f"mma operand {operand} must be a", want, at="call"):
        _call.source(target=arch, WHICH=which)
