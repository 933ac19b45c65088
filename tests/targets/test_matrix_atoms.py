"""Every matrix atom of every target, from the target's own table: laid out by the lane tables
transcribed from the ISA documents (isa_lanes.py; test_isa_lanes.py checks the coordinates and
the emulation against them), the interpreter computes A @ B + C through it
(float64 accumulation, one rounding), and its rendering compiles to the instruction it names
(NVRTC for NVIDIA rows, clang for AMD rows, whose assembly must hold the MFMA)."""
import ml_dtypes  # noqa: F401  (bf16 inputs)
import numpy as np
import pytest

import opus
from opus.targets import get_target, known_targets

from isa_lanes import (assert_coordinates_match, from_lanes, operand_values, tables_for, to_lanes,
                       tolerance)

ATOMS = [(arch, atom) for arch in known_targets() for atom in get_target(arch).matrix_atoms()]
IDS = [f"{arch}-{atom.name}" for arch, atom in ATOMS]


# -- the interpreter, through the ISA documents' layouts (isa_lanes.py) ----------------------------

def lane_kernel(atom):
    """Each lane loads its registers from a[lane * elem_a + i] (likewise b, c) and stores D's
    the same way: the test lays the matrices out per the ISA document (isa_lanes.py)."""
    ta, tb, tc, shape = atom.a, atom.b, atom.c, atom.shape
    ra, rb = atom.reg_a, atom.reg_b  # the registers' types (f32 for tf32)

    @opus.kernel
    def k(a: opus.Ptr[ra], b: opus.Ptr[rb], c: opus.Ptr[tc], d: opus.Ptr[tc]):
        mma = opus.make_mma(ta, tb, tc, shape)
        t = opus.thread_id_x()
        av = opus.make_vector([a[t * mma.elem_a + i] for i in range(mma.elem_a)])
        bv = opus.make_vector([b[t * mma.elem_b + i] for i in range(mma.elem_b)])
        cv = opus.make_vector([c[t * mma.elem_c + i] for i in range(mma.elem_c)])
        dv = mma(av, bv, cv)
        for i in range(mma.elem_c):
            d[t * mma.elem_c + i] = dv[i]
    return k


def run_interpreted(arch, atom, A, B, C):
    warps = len(A)
    ta, tb, tc = tables_for(atom)
    a, b, c = (to_lanes(X, t).reshape(-1) for X, t in ((A, ta), (B, tb), (C, tc)))
    d = np.full_like(c, np.nan if atom.c.is_float else -1)
    assert get_target(arch).mma_instruction(atom.a, atom.b, atom.c, atom.shape) is atom
    with opus.set_target(arch, interpret=True):
        lane_kernel(atom)[1, warps * atom.warp](a, b, c, d)
    return from_lanes(d, tc)


@pytest.mark.parametrize("arch,atom", ATOMS, ids=IDS)
def test_interpreter_computes_a_times_b_plus_c(arch, atom):
    rng = np.random.default_rng(7)
    W = 2
    A = operand_values(atom.a, rng, (W, atom.m, atom.k))
    B = operand_values(atom.b, rng, (W, atom.k, atom.n))
    C = operand_values(atom.c, rng, (W, atom.m, atom.n))
    D = run_interpreted(arch, atom, A, B, C)
    ref = np.einsum("wmk,wkn->wmn", A.astype(np.float64), B.astype(np.float64)) + C
    np.testing.assert_allclose(D, ref, **tolerance(atom.c))


# one rounding: float accumulators of one instruction (fp8 inputs cannot hold 2^-20; integer and
# chained rows have their own numerics tests, tests/targets/test_mfma_numerics.py)
ONE_ROUNDING = [(arch, atom) for arch, atom in ATOMS if atom.c.is_float and atom.a.bits > 8
                and atom.numerics.k_steps == 1]


@pytest.mark.parametrize("arch,atom", ONE_ROUNDING, ids=[f"{a}-{x.name}" for a, x in ONE_ROUNDING])
def test_interpreter_accumulates_in_float64_and_rounds_once(arch, atom):
    """Products 1, 2^-25 (k-2 times) and -1: each small one is below half an f32 ulp of 1, so a
    float32 sum in any order that meets +1 before -1 loses them; the exact sum, rounded once,
    is (k-2) * 2^-25."""
    A = np.full((1, atom.m, atom.k), 2.0 ** -5)
    B = np.full((1, atom.k, atom.n), 2.0 ** -20)
    A[:, :, 0], A[:, :, -1], B[:, 0, :], B[:, -1, :] = 1, -1, 1, 1
    C = np.zeros((1, atom.m, atom.n), atom.c.np_dtype)
    D = run_interpreted(arch, atom, A.astype(atom.a.np_dtype), B.astype(atom.b.np_dtype), C)
    assert (D == np.float32((atom.k - 2) * 2.0 ** -25)).all(), np.unique(D)


# -- rendering: compiles to the instruction the row names ------------------------------------------

COMPILED = [(arch, atom) for arch, atom in ATOMS if arch in ("sm_80", "sm_90a", "gfx942", "gfx950")]


@pytest.mark.parametrize("arch,atom", COMPILED, ids=[f"{a}-{x.name}" for a, x in COMPILED])
def test_rendering_compiles_to_the_instruction(arch, atom):
    k = lane_kernel(atom)
    if get_target(arch).vendor == "nvidia":
        assert atom.isa in k.ptx(target=arch)  # NVRTC compiled it (CUBIN, then PTX)
        return
    from opus.errors import OpusRuntimeError
    from opus.runtime.amd_build import hip_compiler
    try:
        hip_compiler()
    except OpusRuntimeError as e:
        pytest.skip(str(e))
    asm = k.asm(target=arch)
    lines = [l.strip() for l in asm.splitlines() if l.startswith("\t")]
    assert any(l.split()[0] == atom.isa for l in lines if l), [l for l in lines if "mfma" in l]


# -- a row outside the tables: new shapes and element sizes are rows, not code ---------------------

def _extra_rows():
    from opus import dtypes as dt
    from opus.targets.base import Since
    from opus.targets.nv_mma import mma_sync
    return [("sm_80", mma_sync(16, 8, 8, dt.f16, dt.f32, Since("sm_80"))),
            ("sm_89", mma_sync(16, 8, 32, dt.fp8_e4m3, dt.f32, Since("sm_89")))]


@pytest.mark.parametrize("arch,atom", _extra_rows(), ids=lambda x: getattr(x, "name", x))
def test_a_new_mma_sync_row_needs_no_new_code(arch, atom, monkeypatch):
    t = get_target(arch)
    monkeypatch.setitem(t.instructions, atom.name, atom)
    monkeypatch.setitem(t.mma_atoms, atom.key, (atom.name,))
    assert_coordinates_match(atom)
    test_interpreter_computes_a_times_b_plus_c(arch, atom)
    assert atom.isa in lane_kernel(atom).ptx(target=arch)


@pytest.mark.parametrize("change,needle", [
    (dict(shape=(16, 8)), "shape must be (m, n, k)"),
    (dict(a="f16"), "a must be a concrete DType"),
    (dict(warp=48), "warp 48 must divide"),
    (dict(lowering={"metal": None}), "lowering must map backends"),
    (dict(isa=""), "isa must name"),
], ids=["shape", "dtype", "warp", "backend", "isa"])
def test_a_malformed_row_is_refused(change, needle):
    import dataclasses
    row = get_target("sm_80").matrix_atoms()[0]
    fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
    with pytest.raises(ValueError, match=f"matrix atom '{row.name}': " + needle.replace("(", r"\(").replace(")", r"\)")):
        type(row)(**{**fields, **change})


def test_a_row_whose_lanes_overlap_is_refused():
    import dataclasses
    from opus.targets.matrix import LaneLayout
    row = get_target("gfx942").matrix_atoms()[0]
    lay = row.layout
    bad = LaneLayout(lay.coords_a, lambda lane, i: lay.coords_b(lane % 32, i), lay.coords_c)
    with pytest.raises(ValueError, match=r"B\[\d+, \d+\] is held by lane \d+ element \d+ and lane"):
        dataclasses.replace(row, layout=bad)
