"""The interpreter's MFMA numerics where the hardware differs from one exact dot product rounded
once (matrix.Numerics), each against values computed by hand:

* i8 x i8 -> i32 keeps the low 32 bits of the exact sum (no saturation: wrap-around);
* fp8/bf8 bytes are read in the chip's encoding (gfx942 FNUZ, gfx950 OCP), exactly;
* xf32 (gfx942) rounds each f32 input to 10 mantissa bits, to nearest even, before multiplying;
  the f32 MFMA does not;
* gfx942's STEP_K rows are two instructions: D is rounded to f32 after the first half of K;
* every AMD row's assembly holds its instruction once per chained step (STEP_K: twice).
"""
import ml_dtypes  # noqa: F401  (fp8 host types)
import numpy as np
import pytest

import opus
from opus.targets import get_target

from test_matrix_atoms import lane_kernel, run_interpreted

AMD = ("gfx942", "gfx950")
ROWS = [(arch, atom) for arch in AMD for atom in get_target(arch).matrix_atoms()]


def rows(pred):
    picked = [(arch, atom) for arch, atom in ROWS if pred(atom)]
    assert picked, "no rows selected"
    return pytest.mark.parametrize("arch,atom", picked, ids=[f"{a}-{x.name}" for a, x in picked])


@rows(lambda atom: atom.c.name == "i32")
def test_int8_accumulates_exactly_and_wraps_in_32_bits(arch, atom):
    """All products 127 * 127 (positive) on top of C = 2^31 - 100 overflow; -128 * 127 under
    C = -2^31 + 5 underflow: D is the exact sum modulo 2^32, as a signed 32-bit number."""
    m, n, k = atom.shape
    for a_val, c_val in ((127, 2 ** 31 - 100), (-128, -2 ** 31 + 5)):
        A = np.full((1, m, k), a_val, np.int8)
        B = np.full((1, k, n), 127, np.int8)
        C = np.full((1, m, n), c_val, np.int32)
        exact = c_val + k * a_val * 127
        want = (exact + 2 ** 31) % 2 ** 32 - 2 ** 31
        assert want != exact  # the case does leave the i32 range
        D = run_interpreted(arch, atom, A, B, C)
        assert (D == want).all(), (a_val, np.unique(D))


# the byte 0x40 is 1.0 in E4M3 FNUZ (bias 8) and 2.0 in OCP E4M3 (bias 7); 0x40 in E5M2 FNUZ
# (bias 16) is 1.0, in OCP E5M2 (bias 15) 2.0; 0x01 is the smallest subnormal: 2^-10 (E4M3
# FNUZ), 2^-9 (E4M3), 2^-17 (E5M2 FNUZ), 2^-16 (E5M2)
_BYTE_VALUE = {"fp8_e4m3fnuz": {0x40: 1.0, 0x01: 2.0 ** -10}, "fp8_e4m3": {0x40: 2.0, 0x01: 2.0 ** -9},
               "fp8_e5m2fnuz": {0x40: 1.0, 0x01: 2.0 ** -17}, "fp8_e5m2": {0x40: 2.0, 0x01: 2.0 ** -16}}


@rows(lambda atom: atom.a.bits == 8 and atom.a.is_float)
def test_fp8_bytes_are_read_in_the_chips_encoding_exactly(arch, atom):
    """A = 0x40 everywhere, B = 0x01 everywhere (bytes): D[i][j] = k * value(0x40) * value(0x01)
    of the chip's encodings (the products are exact in f32), and the flavoured names opus.fp8 /
    opus.bf8 pick this chip's row."""
    m, n, k = atom.shape
    A = np.full((1, m, k), 0x40, np.uint8).view(atom.a.np_dtype)
    B = np.full((1, k, n), 0x01, np.uint8).view(atom.b.np_dtype)
    C = np.zeros((1, m, n), np.float32)
    want = k * _BYTE_VALUE[atom.a.name][0x40] * _BYTE_VALUE[atom.b.name][0x01]
    D = run_interpreted(arch, atom, A, B, C)
    assert (D == np.float32(want)).all(), np.unique(D)
    t = get_target(arch)
    flavour = {"e4m3": opus.fp8, "e5m2": opus.bf8}
    a, b = (flavour[x.name.split("_")[1][:4]] for x in (atom.a, atom.b))
    assert t.mma_instruction(t.resolve_dtype(a), t.resolve_dtype(b), atom.c, atom.shape) is atom


# f32 inputs and what xf32 (1 + 10 mantissa bits, to nearest even) makes of them
_XF32_CASES = [
    (1 + 2.0 ** -11, 1.0),                          # a tie: to the even neighbour 1
    (1 + 2.0 ** -11 + 2.0 ** -20, 1 + 2.0 ** -10),  # just above the tie: up
    (1 + 3 * 2.0 ** -11, 1 + 2.0 ** -9),            # a tie between 1 + 2^-10 (odd) and 1 + 2^-9
    (-(1 + 2.0 ** -12), -1.0),                      # below half an xf32 ulp: down in magnitude
    (1 + 2.0 ** -10, 1 + 2.0 ** -10),               # already xf32
]


@rows(lambda atom: atom.a.name in ("f32", "tf32"))   # the xf32 rows' inputs are opus.tf32
def test_xf32_rounds_inputs_to_10_mantissa_bits_f32_does_not(arch, atom):
    """A's column 0 holds the case's value, B's row 0 is 1.0 (everything else 0): D = the value
    as the instruction reads it: rounded to xf32 by the xf32 rows, exact for the f32 rows; the
    same with A and B exchanged (B's inputs are rounded too)."""
    m, n, k = atom.shape
    xf32 = "xf32" in atom.isa
    for x, rounded in _XF32_CASES:
        for a_side in (True, False):
            A = np.zeros((1, m, k), np.float32)
            B = np.zeros((1, k, n), np.float32)
            A[:, :, 0], B[:, 0, :] = (x, 1.0) if a_side else (1.0, x)
            D = run_interpreted(arch, atom, A, B, np.zeros((1, m, n), np.float32))
            want = np.float32(rounded if xf32 else x)
            assert (D == want).all(), (x, a_side, np.unique(D))


@rows(lambda atom: atom.numerics.k_steps == 2)
def test_step_k_rounds_to_f32_between_its_two_instructions(arch, atom):
    """Products 1 (k = 0) and 2^-25 (k = 1) go to the first instruction, -1 (k = 4) to the
    second (the first half of lane group 0's registers holds k 0..3, the second k 4..7): the
    first rounds 1 + 2^-25 to 1 (2^-25 is below half an f32 ulp of 1), the second gives
    1 - 1 = 0. One instruction over all of K would give 2^-25."""
    m, n, k = atom.shape
    A = np.zeros((1, m, k), np.float32)
    B = np.zeros((1, k, n), np.float32)
    A[:, :, 0], A[:, :, 1], A[:, :, 4] = 1, 2.0 ** -5, -1
    B[:, 0, :], B[:, 1, :], B[:, 4, :] = 1, 2.0 ** -20, 1
    D = run_interpreted(arch, atom, A.astype(atom.a.np_dtype), B.astype(atom.b.np_dtype),
                        np.zeros((1, m, n), np.float32))
    assert (D == 0).all(), np.unique(D)
    native = [x for x in get_target("gfx950").matrix_atoms() if x.key == atom.key]
    assert native and native[0].numerics.k_steps == 1  # gfx950's instruction rounds once:
    D950 = run_interpreted("gfx950", native[0], A.astype(atom.a.np_dtype),
                           B.astype(atom.b.np_dtype), np.zeros((1, m, n), np.float32))
    assert (D950 == np.float32(2.0 ** -25)).all(), np.unique(D950)


@rows(lambda atom: True)
def test_assembly_issues_the_instruction_once_per_step(arch, atom):
    """The row's MFMA appears in the AMDGCN as many times as the row chains it (STEP_K: 2)."""
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    asm = lane_kernel(atom).asm(target=arch)
    ops = [line.split()[0] for line in asm.splitlines() if line.startswith("\t") and line.split()]
    mfmas = [op for op in ops if op.startswith("v_mfma")]
    assert mfmas == [atom.isa] * atom.numerics.k_steps, mfmas
