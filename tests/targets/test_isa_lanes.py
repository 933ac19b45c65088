"""Every matrix atom of every target against the lane tables transcribed from the ISA documents
(tests/targets/isa_lanes.py, written from the PTX ISA and the AMD calculator / CDNA ISA guides,
never from opus' coordinate functions):

* its coords_a/b/c give, for every (lane, element), the cell the document puts there;
* the shared emulation (what the interpreter executes for the instruction) computes A @ B + C
  when A, B and C are placed into the lanes by the document's table and D is read back by it;
* a row of a target's table with no transcribed table fails, naming the instruction;
* the host shim of the MFMA builtins (tests/hostexec/shim/mfma.h, generated from these tables)
  is current and covers every builtin the HIP lowering calls.
"""
import pathlib

import ml_dtypes  # noqa: F401  (bf16 operands)
import numpy as np
import pytest

from opus.targets import get_target, known_targets

from isa_lanes import (ISA_TABLES, MFMA_BUILTINS, MFMA_SHIM, MissingIsaTable,
                       assert_coordinates_match, from_lanes, mfma_shim_source, operand_values,
                       tables_for, to_lanes, tolerance)

ATOMS = [(arch, atom) for arch in known_targets() for atom in get_target(arch).matrix_atoms()]
IDS = [f"{arch}-{atom.name}" for arch, atom in ATOMS]
TABLES = sorted({t for tables in ISA_TABLES.values() for t in tables}, key=str)


def covered(arch):
    """The ISA tables of every atom ``arch`` has (MissingIsaTable for the first without)."""
    t = get_target(arch)
    return {atom.name: tables_for(atom) for atom in t.matrix_atoms() + t.matrix_atoms(scaled=True)}


@pytest.mark.parametrize("arch", known_targets())
def test_every_atom_of_the_target_has_its_isa_tables(arch):
    covered(arch)


def test_a_row_without_isa_tables_is_named(monkeypatch):
    """A new row in a target's table (here CDNA2's i8 32x32x8, which nobody transcribed) fails
    the coverage test with the instruction and the file to edit."""
    from opus import dtypes as dt
    from opus.targets.amd_mfma import mfma
    from opus.targets.base import OnlyOn
    row = mfma(dt.i8, (32, 32, 8), "__builtin_amdgcn_mfma_i32_32x32x8i8", "int", OnlyOn("gfx942"),
               c=dt.i32)
    t = get_target("gfx942")
    monkeypatch.setitem(t.instructions, row.name, row)
    monkeypatch.setitem(t.mma_atoms, row.key, (row.name,))
    with pytest.raises(MissingIsaTable, match=r"no ISA lane table for 'v_mfma_i32_32x32x8_i8' "
                                              r"\(matrix atom 'amd.mfma.i32.32x32x8.i8'\).*isa_lanes.py"):
        covered("gfx942")


@pytest.mark.parametrize("table", TABLES, ids=str)
def test_transcription_agrees_with_the_documents_figures(table):
    """Each formula, as transcribed, puts the entries the document's figure / worked example
    shows where the figure shows them (and covers its operand once: placement() checks)."""
    placed = table.placement()
    assert table.spots, f"{table}: no literal entries from the document to check against"
    for cell, holder in table.spots:
        assert placed[cell] == holder, (str(table), cell)


@pytest.mark.parametrize("arch,atom", ATOMS, ids=IDS)
def test_coordinates_are_the_isa_tables(arch, atom):
    assert_coordinates_match(atom)


@pytest.mark.parametrize("arch,atom", ATOMS, ids=IDS)
def test_emulation_through_the_isa_tables_is_a_times_b_plus_c(arch, atom):
    rng = np.random.default_rng(17)
    warps = 2
    m, n, k = atom.shape
    A = operand_values(atom.a, rng, (warps, m, k))
    B = operand_values(atom.b, rng, (warps, k, n))
    C = operand_values(atom.c, rng, (warps, m, n))
    ta, tb, tc = tables_for(atom)
    (d,) = atom.emulate([to_lanes(A, ta), to_lanes(B, tb), to_lanes(C, tc)], {}, atom.warp)
    ref = np.einsum("wmk,wkn->wmn", A.astype(np.float64), B.astype(np.float64)) + C
    np.testing.assert_allclose(from_lanes(d, tc), ref, **tolerance(atom.c))


AMD_ATOMS = {atom.name: atom for arch, atom in ATOMS if "hip" in atom.lowering}


def test_the_mfma_host_shim_is_generated_from_the_isa_tables():
    shim = pathlib.Path(__file__).resolve().parents[2] / MFMA_SHIM
    assert shim.read_text() == mfma_shim_source(), \
        f"{MFMA_SHIM} is stale: run python tests/targets/isa_lanes.py"


@pytest.mark.parametrize("atom", AMD_ATOMS.values(), ids=AMD_ATOMS)
def test_the_mfma_host_shim_has_the_builtin_of_every_amd_atom(atom):
    builtin = atom.lowering["hip"].builtin
    assert builtin in MFMA_BUILTINS, f"{atom.name} calls {builtin}, which {MFMA_SHIM} lacks: " \
        "add it to MFMA_BUILTINS in tests/targets/isa_lanes.py"
    assert MFMA_BUILTINS[builtin][0] == atom.isa, \
        f"{atom.name}: {builtin} issues {MFMA_BUILTINS[builtin][0]}, the row says {atom.isa}"
