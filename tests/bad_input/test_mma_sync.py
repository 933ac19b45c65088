"""Bad input to NVIDIA's mma.sync atoms (opus.make_mma on sm_80 .. sm_90a): a combination the
chip lacks (the error names the types, the shape, the chip and lists what it has: fp8 before
sm_89, accumulators and shapes PTX does not have, f32 inputs that must be asked for as tf32),
make_mma arguments that are not types or shapes, tf32 used as a register type, operands of the
wrong register type or length, a partial warp in the interpreter, and malformed table rows. Each
case checks the error type, the message and, for kernel errors, the kernel line
(``# ERR: <tag>``); a failed interpreter launch writes nothing."""
import numpy as np
import pytest

import opus
from opus import bf16, f16, f32, i8, i32, tf32, u8
from opus import fp8_e4m3 as e4m3, fp8_e5m2 as e5m2
from opus.targets import get_target
from opus.targets.base import Since, UnsupportedOnTarget
from expect import raises, unchanged
from mma_cases import MAKE_FILE, make_kernel as _make, no_row as _no_row


# -- fp8 mma.sync needs sm_89 (PTX ISA 8.4): the sm_80/sm_86 list has no fp8 row ----------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_86"])
@pytest.mark.parametrize("a,b", [(e4m3, e4m3), (e4m3, e5m2), (e5m2, e4m3), (e5m2, e5m2)],
                         ids=["e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3", "e5m2xe5m2"])
def test_fp8_before_sm_89(arch, a, b):
    _no_row(arch, a, b, f32, (16, 8, 32), f"{a.name} x {b.name} -> f32", "16x8x32",
            "i8xi8->i32 16x8x32", "tf32xtf32->f32 16x8x8")
    with raises(opus.TraceError, f"{a.name} x {b.name} -> f16") as info:
        _make.source(target=arch, A=a, B=b, C=f16, S=(16, 8, 32))
    assert "fp8" not in str(info.value).split("available:")[1]


def test_flavoured_fp8_names_resolve_before_the_lookup():
    # opus.fp8 is e4m3 on NVIDIA: the error names the concrete type
    _no_row("sm_86", opus.fp8, opus.bf8, f32, (16, 8, 32), "fp8_e4m3 x fp8_e5m2 -> f32")


# -- what PTX's mma.sync does not have (every NVIDIA chip): the list names what there is ------

@pytest.mark.parametrize("a,b,c,shape,hint", [
    (bf16, bf16, f16, (16, 8, 16), "bf16xbf16->f32 16x8x16"),  # bf16 accumulates in f32 only
    (bf16, bf16, f16, (16, 8, 8), "bf16xbf16->f32 16x8x8"),
    (f16, bf16, f32, (16, 8, 16), "f16xf16->f32 16x8x16"),     # mixed 16-bit inputs
    (tf32, tf32, f16, (16, 8, 8), "tf32xtf32->f32 16x8x8"),    # tf32 accumulates in f32 only
    (tf32, tf32, f32, (16, 8, 16), "tf32xtf32->f32 16x8x4"),
    (f32, f32, f32, (16, 8, 8), "tf32xtf32->f32 16x8x8"),      # f32 inputs: ask for tf32
    (f32, f32, f32, (16, 8, 4), "tf32xtf32->f32 16x8x4"),
    (i8, i8, f32, (16, 8, 32), "i8xi8->i32 16x8x32"),          # integers accumulate in s32
    (i8, i8, i32, (16, 8, 8), "i8xi8->i32 16x8x16"),
    (u8, u8, i32, (16, 8, 64), "u8xu8->i32 16x8x32"),          # k64 is the 4-bit shape
    (e4m3, i8, f32, (16, 8, 32), "fp8_e4m3xfp8_e4m3->f32 16x8x32"),
    (e4m3, e4m3, f32, (16, 8, 16), "fp8_e4m3xfp8_e4m3->f32 16x8x32"),  # PTX 8.7's k16: not a row
    (e4m3, e4m3, bf16, (16, 8, 32), "fp8_e4m3xfp8_e4m3->f16 16x8x32"),
    (opus.fp8_e4m3fnuz, opus.fp8_e4m3fnuz, f32, (16, 8, 32), "fp8_e4m3xfp8_e4m3->f32"),
    (f16, f16, f32, (16, 16, 16), "f16xf16->f32 16x8x16"),     # no m16n16 mma.sync
    (f16, f16, f32, (8, 8, 4), "f16xf16->f32 16x8x8"),         # sm_70's m8n8k4: not a row
    (opus.f64, opus.f64, opus.f64, (16, 8, 4), "f16xf16->f32 16x8x16"),
], ids=["bf16-f16acc-k16", "bf16-f16acc-k8", "f16xbf16", "tf32-f16acc", "tf32-k16", "f32-k8",
        "f32-k4", "i8-f32acc", "i8-k8", "u8-k64", "e4m3xi8", "e4m3-k16", "e4m3-bf16acc",
        "fnuz", "m16n16", "m8n8k4", "f64"])
def test_a_combination_ptx_lacks(a, b, c, shape, hint):
    _no_row("sm_90a", a, b, c, shape, f"{a.name} x {b.name} -> {c.name}",
            "x".join(map(str, shape)), hint)


# -- make_mma's arguments -------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,c,shape,needles", [
    ("f16", f16, f32, (16, 8, 16), ("make_mma a must be an element type", "'f16'")),
    (f16, np.float16, f32, (16, 8, 16), ("make_mma b must be an element type", "float16")),
    (f16, f16, None, (16, 8, 16), ("make_mma c must be an element type", "None")),
    (f16, f16, f32, (16, 8), ("shape must be (m, n, k)", "(16, 8)")),
    (f16, f16, f32, 16, ("shape must be (m, n, k)", "16")),
    (f16, f16, f32, (16, 8, 0), ("positive ints", "(16, 8, 0)")),
    (f16, f16, f32, (16.0, 8, 16), ("positive ints", "16.0")),
], ids=["a-str", "b-numpy", "c-none", "shape-2", "shape-int", "shape-zero", "shape-float"])
def test_make_mma_arguments(a, b, c, shape, needles):
    with raises(opus.TraceError, *needles, at="make", file=MAKE_FILE):
        _make.source(target="sm_90a", A=a, B=b, C=c, S=shape)


# -- tf32 names the tensor cores' input, never a register or memory type --------------------------

@opus.kernel
def _tf32_pointer(x: opus.Ptr[tf32]):  # ERR: tf32-ptr
    pass


@opus.kernel
def _tf32_cast(x: opus.Ptr[f32]):
    x[0] = opus.f32(opus.tf32(x[0]))  # ERR: tf32-cast


@opus.kernel
def _tf32_opus_cast(x: opus.Ptr[f32]):
    x[0] = opus.f32(opus.cast(x[0], opus.tf32))  # ERR: tf32-opus-cast


@opus.kernel
def _tf32_zeros(x: opus.Ptr[f32]):
    v = opus.zeros(4, opus.tf32)  # ERR: tf32-zeros
    x[0] = opus.f32(v[0])


@opus.kernel
def _tf32_smem(x: opus.Ptr[f32]):
    s = opus.alloc_smem(tf32, 64)  # ERR: tf32-smem
    x[0] = 0.0


@pytest.mark.parametrize("kernel,tag,what", [
    (_tf32_pointer, "tf32-ptr", "tf32 pointers"),
    (_tf32_cast, "tf32-cast", "tf32 values"),
    (_tf32_opus_cast, "tf32-opus-cast", "tf32 values"),
    (_tf32_zeros, "tf32-zeros", "tf32 values"),
    (_tf32_smem, "tf32-smem", "tf32 shared arrays"),
], ids=["pointer", "call", "cast", "zeros", "smem"])
def test_tf32_is_not_a_register_type(kernel, tag, what):
    with raises(opus.TraceError, what, "not available on sm_90a", "input format",
                "make_mma(opus.tf32, opus.tf32, opus.f32", at=tag):
        kernel.source(target="sm_90a")


# -- operands of the wrong register type or length ----------------------------------------------

@opus.kernel
def _operands(out: opus.Ptr[f32], A: opus.constexpr, B: opus.constexpr, C: opus.constexpr,
              S: opus.constexpr, WHICH: opus.constexpr, T: opus.constexpr, N: opus.constexpr):
    mma = opus.make_mma(A, B, C, S)
    ops = {"A": opus.zeros(mma.elem_a, mma.dtype_a), "B": opus.zeros(mma.elem_b, mma.dtype_b),
           "C": mma.zeros_c()}
    ops[WHICH] = opus.zeros(N, T)
    mma(ops["A"], ops["B"], ops["C"])  # ERR: issue


@pytest.mark.parametrize("a,b,c,shape,which,t,n,want,got", [
    (tf32, tf32, f32, (16, 8, 8), "A", f16, 4, "f32x4", "f16x4"),     # tf32 registers are f32
    (tf32, tf32, f32, (16, 8, 4), "B", f32, 2, "B must be a f32 ", "f32x2"),  # one register: scalar
    (i8, i8, i32, (16, 8, 32), "A", i8, 8, "i8x16", "i8x8"),            # k16's A length
    (u8, u8, i32, (16, 8, 16), "A", i8, 8, "u8x8", "i8x8"),             # signedness
    (i8, u8, i32, (16, 8, 32), "B", i8, 8, "u8x8", "i8x8"),             # B's own type
    (f16, f16, f16, (16, 8, 16), "C", f32, 4, "f16x4", "f32x4"),        # f16 accumulator
    (i8, i8, i32, (16, 8, 16), "C", f32, 4, "i32x4", "f32x4"),
    (e4m3, e4m3, f32, (16, 8, 32), "A", e5m2, 16, "fp8_e4m3x16", "fp8_e5m2x16"),
    (e4m3, e5m2, f32, (16, 8, 32), "B", u8, 8, "fp8_e5m2x8", "u8x8"),   # raw bytes
], ids=["tf32-f16", "tf32-k4-b-vector", "i8-length", "u8-signedness", "i8xu8-b", "f16acc-c",
        "int-c", "e4m3-a", "e5m2-b-bytes"])
def test_operand_of_the_wrong_register_type(a, b, c, shape, which, t, n, want, got):
    with raises(opus.TraceError, f"mma operand {which}", want, f"got {got}", at="issue"):
        _operands.source(target="sm_90a", A=a, B=b, C=c, S=shape, WHICH=which, T=t, N=n)


# -- the interpreter needs whole warps; a row the chip lacks is refused by name --------------------

@opus.kernel
def _tile(pa: opus.Ptr[f32], pb: opus.Ptr[f32], pc: opus.Ptr[f32], pd: opus.Ptr[f32]):
    mma = opus.make_mma(tf32, tf32, f32, (16, 8, 8))
    va = opus.make_gmem(pa).load(mma.layout_a((8, 1)))
    vb = opus.make_gmem(pb).load(mma.layout_b((1, 8)))
    vc = opus.make_gmem(pc).load(mma.layout_c((8, 1)))
    opus.make_gmem(pd).store(mma(va, vb, vc), mma.layout_c((8, 1)))


@pytest.mark.parametrize("threads", [16, 48])
def test_partial_warp_in_the_interpreter(threads):
    A, B, C = np.ones((16, 8), np.float32), np.ones((8, 8), np.float32), np.ones((16, 8), np.float32)
    D = np.full((16, 8), 5.0, np.float32)
    with unchanged(D), opus.set_target("sm_80", interpret=True):
        with raises(opus.interp.InterpError, f"{threads} threads",
                    "not a whole number of 32-thread warps"):
            _tile[1, threads](A, B, C, D)


def test_the_instruction_of_a_later_chip():
    with raises(UnsupportedOnTarget, "nv.mma.m16n8k32.fp8_e4m3.f32", "not available on sm_86"):
        get_target("sm_86").instruction("nv.mma.m16n8k32.fp8_e4m3.f32")


# -- malformed rows of the table (nv_mma.mma_sync) -------------------------------------------------

@pytest.mark.parametrize("kw,needles", [
    (dict(m=16, n=8, k=16, ab=f16, c=f32, b=i8), ("8-, 16- or 32-bit A and B elements of one size",
                                                  "f16 and i8")),
    (dict(m=16, n=8, k=16, ab=f16, c=opus.f64), ("no PTX type for f64", "f16", "s32")),
    (dict(m=16, n=16, k=16, ab=f16, c=f32), ("m16n16k16", "m16n8k* family")),
], ids=["mixed-sizes", "f64-acc", "m16n16"])
def test_a_malformed_row_is_refused(kw, needles):
    from opus.targets.nv_mma import mma_sync
    b = kw.pop("b", None)
    with raises(ValueError, *needles):
        mma_sync(kw["m"], kw["n"], kw["k"], kw["ab"], kw["c"], Since("sm_80"), b=b)
