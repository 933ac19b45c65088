"""``OperandLayout.transposed`` (swap_ab sees the instruction's C as C^T; any operand may be seen
with its two x-dims exchanged) against the lane tables transcribed from the ISA documents
(isa_lanes.py: the PTX ISA's mma fragment formulas, the AMD calculator's / CDNA guides' MFMA
register mapping; never opus' coordinate functions). Transposed, a lane's register i holds the
cell the document puts there with its row and column exchanged.

The tables' operands have up to three sub-dims per x-dim, lane sub-dims on both sides, y
sub-dims at the start of the second x-dim (mma.sync A and B) and register orders that are not
left to right (mma.sync A's y_order, C's rows-then-columns registers, which transposed run
columns-then-rows); one hand-made layout spreads a row over two lane sub-dims, which no
instruction here does."""
import pytest

from opus.targets import get_target, known_targets
from opus.targets.matrix import OperandLayout

from isa_lanes import tables_for


def _distinct_atoms():
    """One atom per ISA table key and operand shapes (the same instruction on two chips is
    the same layout)."""
    seen, out = set(), []
    for arch in known_targets():
        t = get_target(arch)
        for atom in t.matrix_atoms() + t.matrix_atoms(scaled=True):
            ops = atom.layout.operands
            key = (atom.isa, atom.shape, atom.a.name, atom.b.name, atom.c.name)
            if ops is not None and key not in seen:
                seen.add(key)
                out.append(atom)
    return out


ATOMS = _distinct_atoms()


def _transposed_cell(which, row, col):
    """The document's cell of operand ``which`` as the transposed layout's (x0, x1).

    A is (m, k) = (row, col) and C is (m, n) = (row, col): transposed (col, row). B's layout
    has x-dims (n, k) (B transposed, as the original's adaptors) while the document's B is
    (k, n) = (row, col): transposed, B's x-dims are (k, n) = (row, col)."""
    return (row, col) if which == "B" else (col, row)


@pytest.mark.parametrize("which", "ABC")
@pytest.mark.parametrize("atom", ATOMS, ids=[a.name for a in ATOMS])
def test_transposed_operand_holds_the_isa_cells_with_row_and_column_exchanged(atom, which):
    op = dict(zip("ABC", atom.layout.operands))[which]
    table = dict(zip("ABC", tables_for(atom)))[which]
    t = op.transposed()
    assert t.registers == table.per_lane
    assert t.dim == (op.dim[1], op.dim[0])
    for (row, col), (lane, i) in table.placement().items():
        assert t.coords(lane, i) == _transposed_cell(which, row, col), (lane, i)


def test_the_tables_reach_the_cases_transposed_distinguishes():
    """What the test above relies on: operands whose second x-dim starts with a register
    sub-dim, and a transposed register order that is not left to right."""
    ops = [op for atom in ATOMS for op in atom.layout.operands]
    assert any(op.dim[1][0] == "y" for op in ops)
    assert any(op.transposed().y_order not in (None, tuple(range(len(op.transposed().y_order))))
               for op in ops)


def test_transposed_with_a_row_over_two_lane_sub_dims():
    """Hand-made, 8 lanes x 4 registers: the row is 2 * (lane // 4) + (lane // 2) % 2 = lane // 2
    (two lane sub-dims), the column 4 * (lane % 2) + i (a lane sub-dim, then the registers).
    Transposed, lane l's register i holds (4 * (l % 2) + i, l // 2)."""
    lay = OperandLayout((2, 2, 2, 4), (("p", "p"), ("p", "y")),
                        lambda lane: (lane // 4, (lane // 2) % 2, lane % 2))
    cells = [(lane, i) for lane in range(8) for i in range(4)]
    assert [lay.coords(lane, i) for lane, i in cells] == [
        (lane // 2, 4 * (lane % 2) + i) for lane, i in cells]
    t = lay.transposed()
    assert (t.shape, t.dim, t.registers) == ((2, 4, 2, 2), (("p", "y"), ("p", "p")), 4)
    assert [t.coords(lane, i) for lane, i in cells] == [
        (4 * (lane % 2) + i, lane // 2) for lane, i in cells]
