"""Exact numerics of the mma.sync atoms in the interpreter (PTX ISA 9.7.14.5.14 "mma",
"Precision and rounding"), each against values computed by hand or by numpy from the PTX text,
never from opus' emulation:

* s8/u8 -> s32 without ``.satfinite``: "the accumulated value is wrapped" - modulo 2^32;
* tf32 operands are f32 registers of which the tensor cores read the top 10 mantissa bits (the
  low 13 are ignored: a truncation), so inputs that differ only there give the same D;
* fp8 (e4m3/e5m2) products are exact, each operand read in its own format;
* f16 accumulators: the exact sum rounded once to f16 (opus' documented emulation);
* SASS: what NVRTC 13 makes of each row (HMMA, IMMA, QMMA on sm_89, fp8 converted to f16 for
  HMMA on sm_90).

The kernel loads the operands through the atom's layouts (mma.layout_a/b/c), as users do;
tests/lang/test_gpu_mma_sync.py runs the same kernels on the GPU."""
import functools
import pathlib
import re
import sys

import ml_dtypes
import numpy as np
import pytest

import opus
from opus.targets import get_target

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "targets"))
from isa_lanes import operand_values  # noqa: E402  (values every atom reads exactly)

INT8 = ("i8", "u8")
FP8 = ("fp8_e4m3", "fp8_e5m2")


def atom(arch, name):
    return get_target(arch).instructions[name]


def names(kind):
    """Row names of the NVIDIA table by kind: 'int', 'tf32', 'fp8', 'f16acc'."""
    rows = get_target("sm_90a").matrix_atoms()
    pick = {"int": lambda r: r.c.name == "i32", "tf32": lambda r: r.a.name == "tf32",
            "fp8": lambda r: r.a.name in FP8, "f16acc": lambda r: r.c.name == "f16"}[kind]
    return [r.name for r in rows if r.name.startswith("nv.mma.") and pick(r)]


@functools.lru_cache(maxsize=None)
def tile_kernel(row):
    """One warp: D = A @ B + C on one M x N x K tile; A (M x K), B (K x N) and C/D (M x N)
    row-major, loaded and stored through the atom's partition layouts."""
    a, b, c, shape = row.a, row.b, row.c, row.shape
    ra, rb = row.reg_a, row.reg_b  # f32 registers for tf32
    M, N, K = shape

    @opus.kernel
    def tile(pa: opus.Ptr[ra], pb: opus.Ptr[rb], pc: opus.Ptr[c], pd: opus.Ptr[c]):
        mma = opus.make_mma(a, b, c, shape)
        va = opus.make_gmem(pa).load(mma.layout_a((K, 1)))
        vb = opus.make_gmem(pb).load(mma.layout_b((1, N)))
        vc = opus.make_gmem(pc).load(mma.layout_c((N, 1)))
        opus.make_gmem(pd).store(mma(va, vb, vc), mma.layout_c((N, 1)))
    return tile


def run(arch, row, A, B, C):
    """D from the interpreter running as ``arch``."""
    D = np.zeros_like(C)
    with opus.set_target(arch, interpret=True):
        tile_kernel(row)[1, 32](A, B, C, D)
    return D


def wrap32(x):
    """Python ints modulo 2^32 as two's complement s32 (PTX's wrapped accumulator)."""
    return ((np.asarray(x, object) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int64)


# -- integers: exact, the s32 accumulator wraps ----------------------------------------------------

def int_operands(row, seed):
    """Full-range A and B; C within 2^10 of the s32 limit that A @ B heads for, so most sums
    leave s32."""
    rng = np.random.default_rng(seed)
    M, N, K = row.shape
    A = operand_values(row.a, rng, (M, K))
    B = operand_values(row.b, rng, (K, N))
    near = rng.integers(0, 2 ** 10, (M, N))
    ab = A.astype(np.int64) @ B.astype(np.int64)
    C = np.where(ab >= 0, 2 ** 31 - 1 - near, -2 ** 31 + near)
    return A, B, C.astype(np.int32)


@pytest.mark.parametrize("name", names("int"))
def test_integer_accumulator_wraps_modulo_2_32(name):
    row = atom("sm_80", name)
    A, B, C = int_operands(row, 11)
    exact = C.astype(object) + A.astype(object).dot(B.astype(object))  # Python ints
    D = run("sm_80", row, A, B, C)
    want = wrap32(exact)
    assert ((exact > 2 ** 31 - 1) | (exact < -2 ** 31)).sum() > 16  # the case is exercised
    np.testing.assert_array_equal(D.astype(np.int64), want)


@pytest.mark.parametrize("name", names("int"))
def test_integer_extremes_by_hand(name):
    """Every A element the type's minimum, every B its maximum: each product by hand
    (-128 * 127 = -16256, -128 * 255 = -32640, 0 * x = 0 for u8's minimum)."""
    row = atom("sm_80", name)
    M, N, K = row.shape
    lo_a = {"i8": -128, "u8": 0}[row.a.name]
    hi_b = {"i8": 127, "u8": 255}[row.b.name]
    A = np.full((M, K), lo_a, row.a.np_dtype)
    B = np.full((K, N), hi_b, row.b.np_dtype)
    C = np.full((M, N), 7, np.int32)
    D = run("sm_80", row, A, B, C)
    assert (D == 7 + K * lo_a * hi_b).all(), np.unique(D)


# -- tf32: the low 13 mantissa bits of the f32 registers are not read ------------------------------

def with_low_bits(x, rng):
    """f32 values with random low 13 mantissa bits (sign, exponent and top 10 bits kept)."""
    bits = x.astype(np.float32).view(np.uint32)
    noise = rng.integers(0, 1 << 13, x.shape).astype(np.uint32)
    return ((bits & np.uint32(0xFFFFE000)) | noise).view(np.float32)


@pytest.mark.parametrize("name", names("tf32"))
def test_tf32_ignores_the_low_13_mantissa_bits(name):
    row = atom("sm_80", name)
    M, N, K = row.shape
    rng = np.random.default_rng(5)
    A = operand_values(row.a, rng, (M, K))   # 11 significant bits: tf32 values
    B = operand_values(row.b, rng, (K, N))
    C = rng.standard_normal((M, N)).astype(np.float32)
    noisy_A, noisy_B = with_low_bits(A, rng), with_low_bits(B, rng)
    assert (noisy_A != A).mean() > 0.9 and (noisy_B != B).mean() > 0.9
    clean = run("sm_80", row, A, B, C)
    noisy = run("sm_80", row, noisy_A, noisy_B, C)
    np.testing.assert_array_equal(noisy, clean)
    # the tf32 values' products and sums are exact in float64: one rounding to f32
    np.testing.assert_array_equal(clean, (A.astype(np.float64) @ B.astype(np.float64)
                                          + C).astype(np.float32))


@pytest.mark.parametrize("name", names("tf32"))
@pytest.mark.parametrize("bits,value", [(0x3F801FFF, 1.0), (0xBF801FFF, -1.0),
                                        (0x40400000 | 0x1ABC, 3.0)],
                         ids=["one", "minus-one", "three"])
def test_tf32_truncates_toward_zero(name, bits, value):
    """1 + 0x1FFF * 2^-23 keeps 1.0 (rounding to nearest would give 1 + 2^-10): D = K * value."""
    row = atom("sm_80", name)
    M, N, K = row.shape
    A = np.full((M, K), np.uint32(bits)).view(np.float32)
    B = np.ones((K, N), np.float32)
    D = run("sm_80", row, A, B, np.zeros((M, N), np.float32))
    assert (D == K * value).all(), np.unique(D)


# -- fp8: exact products, each operand in its own format ------------------------------------------

def finite_fp8(dtype, rng, shape, max_exp):
    """Random finite values of an fp8 type with |x| < 2^max_exp (subnormals included)."""
    np_t = dtype.np_dtype
    every = np.arange(256, dtype=np.uint8).view(np_t).astype(np.float64)
    ok = np.isfinite(every) & (np.abs(every) < 2.0 ** max_exp)
    return rng.choice(every[ok], shape).astype(np_t)


@pytest.mark.parametrize("name", names("fp8"))
def test_fp8_products_are_exact(name):
    """Products of fp8 values (subnormals to the largest used) and their sums are exact in
    float64; D is that sum rounded once to C's type."""
    row = atom("sm_89", name)
    M, N, K = row.shape
    rng = np.random.default_rng(3)
    top = 4 if row.c.name == "f16" else 8   # keeps the f16 sums finite
    A = finite_fp8(row.a, rng, (M, K), top)
    B = finite_fp8(row.b, rng, (K, N), top)
    C = rng.standard_normal((M, N)).astype(row.c.np_dtype)
    D = run("sm_89", row, A, B, C)
    exact = A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)
    np.testing.assert_array_equal(D, exact.astype(row.c.np_dtype))


@pytest.mark.parametrize("name", names("fp8"))
def test_fp8_bytes_are_read_in_each_operands_format(name):
    """Byte 0x48 is 4.0 as e4m3 (exponent 9 - 7) and 8.0 as e5m2 (exponent 18 - 15): D is
    K * a * b of the two formats, by hand."""
    row = atom("sm_89", name)
    M, N, K = row.shape
    value = {"fp8_e4m3": 4.0, "fp8_e5m2": 8.0}
    A = np.full((M, K), 0x48, np.uint8).view(row.a.np_dtype)
    B = np.full((K, N), 0x48, np.uint8).view(row.b.np_dtype)
    D = run("sm_89", row, A, B, np.zeros((M, N), row.c.np_dtype))
    assert (D == K * value[row.a.name] * value[row.b.name]).all(), np.unique(D)


# -- f16 accumulators: the exact sum, rounded once -------------------------------------------------

@pytest.mark.parametrize("name", names("f16acc"))
def test_f16_accumulator_rounds_the_exact_sum_once(name):
    """C = 2048 (f16's spacing there is 2) plus products 1 and 1: the exact 2050 is an f16;
    adding in f16 one product at a time would round 2049 back to 2048 twice."""
    arch = "sm_89" if name.split(".")[3] in FP8 else "sm_80"
    row = atom(arch, name)
    M, N, K = row.shape
    A = np.zeros((M, K), np.float32)
    A[:, :2] = 1
    B = np.ones((K, N), np.float32)
    C = np.full((M, N), 2048, np.float16)
    D = run(arch, row, A.astype(row.a.np_dtype), B.astype(row.b.np_dtype), C)
    assert (D == 2050).all(), np.unique(D)


# -- SASS: what NVRTC 13 emits for each row ---------------------------------------------------------

_SASS_TYPE = {"i8": "S8", "u8": "U8", "i32": "S32", "fp8_e4m3": "E4M3", "fp8_e5m2": "E5M2", "f32": "F32",
              "f16": "F16"}


def expected_sass(arch, row):
    """The instruction(s) the row becomes, by hand from the NVRTC 13 disassembly: HMMA for 16-bit
    and tf32 inputs (.BF16/.TF32 suffixes), IMMA.<shape>.<A>.<B> for 8-bit integers,
    QMMA.16832.<C>.<A>.<B> for fp8 on sm_89; sm_90 has no fp8 mma.sync unit: the bytes are
    converted to f16 (F2FP.F16.<type>.UNPACK_B) for two HMMA.16816."""
    m, n, k = row.shape
    shape = f"{m}{n}{k}"
    c = _SASS_TYPE[row.c.name]
    if row.c.name == "i32":
        return [f"IMMA.{shape}.{_SASS_TYPE[row.a.name]}.{_SASS_TYPE[row.b.name]}"]
    if row.a.name in FP8:
        if arch == "sm_89":
            return [f"QMMA.{shape}.{c}.{_SASS_TYPE[row.a.name]}.{_SASS_TYPE[row.b.name]}"]
        return [f"F2FP.F16.{_SASS_TYPE[row.a.name]}.UNPACK_B",
                f"F2FP.F16.{_SASS_TYPE[row.b.name]}.UNPACK_B", f"HMMA.16816.{c} "]
    suffix = {"bf16": ".BF16", "tf32": ".TF32", "f16": ""}[row.a.name]
    return [f"HMMA.{shape}.{c}{suffix} "]


SASS_ROWS = [("sm_80", r.name) for r in get_target("sm_80").matrix_atoms()
             if r.name.startswith("nv.mma.")]
SASS_ROWS += [(arch, name) for arch in ("sm_89", "sm_90a") for name in names("fp8")]
SASS_ROWS += [("sm_90a", "nv.mma.m16n8k8.tf32.f32"), ("sm_90a", "nv.mma.m16n8k16.u8.i8.i32")]


@pytest.mark.parametrize("arch,name", SASS_ROWS, ids=[f"{a}-{n}" for a, n in SASS_ROWS])
def test_sass_has_the_matrix_instruction(arch, name):
    row = atom(arch, name)
    sass = tile_kernel(row).specialize(target=arch).sass
    for want in expected_sass(arch, row):
        assert want in sass, (want, sorted(set(re.findall(r"\b[A-Z0-9]+MMA[.A-Z0-9]*", sass))))
    if arch == "sm_90a" and row.a.name in FP8:
        assert len(re.findall(r"\bHMMA\.16816", sass)) == 2 and "QMMA" not in sass
