"""Every warp-level shared-memory access row (ldmatrix, stmatrix, ds_read_b64_tr_*) of every
target against the lane tables transcribed from the ISA documents (tests/targets/
isa_lanes_ldst.py, never computed from opus' source rules):

* its ``source`` gives, for every (lane, element), the (address lane, row element) the
  document's table does;
* its emulation (what the interpreter executes) moves random rows as the table says, both ways;
* a row with no transcribed table fails, naming the instruction;
* availability: ldmatrix on every NVIDIA target (sm_75+), stmatrix on sm_90/sm_90a only, the
  transposing LDS reads on gfx950 only.
"""
import numpy as np
import pytest

from opus.targets import get_target, known_targets
from opus.targets.warp_access import WarpAccess

from isa_lanes_ldst import ACCESS_TABLES, MissingAccessTable, access_table_for


def warp_accesses(arch):
    t = get_target(arch)
    return [r for r in t.instructions.values() if isinstance(r, WarpAccess) and r.available_on(t)]


ROWS = [(arch, row) for arch in known_targets() for row in warp_accesses(arch)]
IDS = [f"{arch}-{row.name}" for arch, row in ROWS]


def by_table(table):
    """(address lane, element) arrays [lanes, elems] read off the transcribed table."""
    s = np.empty((table.lanes, table.elems), np.int64)
    e = np.empty_like(s)
    for lane in range(table.lanes):
        for i in range(table.elems):
            s[lane, i], e[lane, i] = table.received(lane, i)
    return s, e


@pytest.mark.parametrize("table", sorted(ACCESS_TABLES.values(), key=str), ids=str)
def test_transcription_agrees_with_the_documents_examples(table):
    assert table.spots, f"{table}: no literal entries from the document"
    for (lane, i), want in table.spots:
        assert table.received(lane, i) == want, (str(table), lane, i)
    s, e = by_table(table)   # and it moves every element of every addressed row once
    pairs = set(zip(s.ravel().tolist(), e.ravel().tolist()))
    assert pairs == {(a, b) for a in range(table.rows) for b in range(table.vec)}


@pytest.mark.parametrize("arch,row", ROWS, ids=IDS)
def test_source_is_the_isa_table(arch, row):
    table = access_table_for(row)
    assert (row.warp, row.elems, row.rows, row.vec) == (table.lanes, table.elems, table.rows,
                                                        table.vec)
    for lane in range(row.warp):
        for i in range(row.elems):
            assert row.source(lane, i) == table.received(lane, i), (row.name, lane, i)


@pytest.mark.parametrize("arch,row", ROWS, ids=IDS)
def test_emulation_moves_data_as_the_isa_table(arch, row):
    rng = np.random.default_rng(5)
    warps = 2
    s, e = by_table(access_table_for(row))
    if row.kind == "load":
        rows = rng.integers(0, 2 ** 15, (warps, row.warp, row.vec)).astype(np.int16)
        rows[:, row.rows:] = 0  # lanes that address nothing read nothing
        (regs,) = row.emulate([rows.reshape(-1, row.vec)], {}, row.warp)
        want = np.array([[[rows[w, s[l, i], e[l, i]] for i in range(row.elems)]
                          for l in range(row.warp)] for w in range(warps)])
        np.testing.assert_array_equal(regs.reshape(warps, row.warp, row.elems), want)
    else:
        regs = rng.integers(0, 2 ** 15, (warps, row.warp, row.elems)).astype(np.int16)
        (rows,) = row.emulate([regs.reshape(-1, row.elems)], {}, row.warp)
        want = np.zeros((warps, row.warp, row.vec), np.int16)
        for w in range(warps):
            for l in range(row.warp):
                for i in range(row.elems):
                    want[w, s[l, i], e[l, i]] = regs[w, l, i]
        np.testing.assert_array_equal(rows.reshape(warps, row.warp, row.vec), want)


def test_every_row_has_a_table():
    assert ROWS
    for _, row in ROWS:
        access_table_for(row)


def test_a_row_without_a_table_is_named():
    """A new row nobody transcribed (here sm_100's b8 ldmatrix) fails, naming the instruction
    and the file to edit."""
    from opus.targets.base import Since
    from opus.targets.nv_ldmatrix import ldmatrix_source
    row = WarpAccess(name="nv.ldmatrix.m16n16.x2.trans.b8", family="ldmatrix", kind="load",
                     bits=16, warp=32, rows=16, vec=8, elems=4, source=ldmatrix_source(True),
                     available=Since("sm_80"), requires="sm_100a", lowering={"cuda": None},
                     isa="ldmatrix.sync.aligned.m16n16.x2.trans.shared.b8")
    with pytest.raises(MissingAccessTable, match=r"'ldmatrix.sync.aligned.m16n16.x2.trans.shared"
                                                 r".b8'.*isa_lanes_ldst.py"):
        access_table_for(row)


@pytest.mark.parametrize("arch", known_targets())
def test_availability(arch):
    have = {row.family for row in warp_accesses(arch)}
    want = {"sm_80": {"ldmatrix"}, "sm_86": {"ldmatrix"}, "sm_89": {"ldmatrix"},
            "sm_90": {"ldmatrix", "stmatrix"}, "sm_90a": {"ldmatrix", "stmatrix"},
            "gfx942": set(), "gfx950": {"ds_read_tr"}}[arch]
    assert have == want


def test_a_row_whose_source_repeats_an_element_is_refused():
    from opus.targets.base import Since
    with pytest.raises(ValueError, match="row of lane 0 element 0 goes to lane 0 element 0 and "
                                         "to lane 0 element 1"):
        WarpAccess(name="bad", family="ldmatrix", kind="load", bits=16, warp=32, rows=8, vec=8,
                   elems=2, source=lambda lane, i: (0, 0) if lane == 0 else (lane % 8, 0),
                   available=Since("sm_80"), requires="sm_80", lowering={"cuda": None},
                   isa="x")
