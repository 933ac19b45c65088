"""targets/matrix.py on small rows written here by hand (one lane, a few registers), where the
right answer is worked out on paper: the emulation's whole-warp rule and chained steps, the
self-checks a malformed row trips, and the lane-map helpers (OperandLayout, round_mantissa)."""
import numpy as np
import pytest

from opus import dtypes as dt
from opus.targets.matrix import EXACT, LaneLayout, MatrixAtom, Numerics, OperandLayout


def _row(coords_a, coords_b, coords_c, shape=(1, 1, 2), warp=1, numerics=EXACT, c=dt.f32,
         a=dt.f32, name="demo"):
    return MatrixAtom(name, shape, a, a, c, warp, LaneLayout(coords_a, coords_b, coords_c),
                      lambda target: True, {"cuda": lambda *args: []}, "demo.isa", numerics)


def test_emulation_needs_whole_warps():
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0))
    pair = _row(lambda l, i: (0, l), lambda l, i: (l, i), lambda l, i: (0, l), shape=(1, 2, 2),
                warp=2)
    with pytest.raises(ValueError) as e:   # three threads of a two-lane row
        pair.emulate([np.ones((3, 1)), np.ones((3, 2)), np.ones((3, 1))], {}, 2)
    assert str(e.value) == "demo needs whole warps: 3 threads is not a multiple of 2"
    # one lane holding A = [1, 2], B = [3, 4]^T, C = 5: D = 1*3 + 2*4 + 5
    assert row.emulate([np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), np.array([[5.0]])],
                       {}, 1)[0].tolist() == [[16.0]]


def test_chained_steps_round_to_c_after_each_step():
    """Two chained steps, each taking one K, with f16 C: step 0 gives 2048 + 1 = 2049, which
    f16 (11 significant bits) rounds to 2048 (ties to even); step 1 adds 1 again: 2048. One
    rounding at the end would give 2050."""
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), c=dt.f16,
               a=dt.f16, numerics=Numerics(k_steps=2))
    assert [k.tolist() for k in row.k_slices()] == [[0], [1]]
    d = row.emulate([np.array([[1.0, 1.0]], np.float16), np.array([[1.0, 1.0]], np.float16),
                     np.array([[2048.0]], np.float16)], {}, 1)[0]
    assert d.dtype == np.float16 and d.tolist() == [[2048.0]]
    once = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), c=dt.f16,
                a=dt.f16)
    assert once.emulate([np.array([[1.0, 1.0]], np.float16), np.array([[1.0, 1.0]], np.float16),
                         np.array([[2048.0]], np.float16)], {}, 1)[0].tolist() == [[2050.0]]


def test_a_chained_step_taking_different_k_of_a_and_b_is_refused():
    row = _row(lambda l, i: (0, i), lambda l, i: (1 - i, 0), lambda l, i: (0, 0),
               numerics=Numerics(k_steps=2))
    with pytest.raises(ValueError) as e:
        row.k_slices()
    assert str(e.value) == "demo: step 0 takes K [0] of A but [1] of B"


def test_an_integer_accumulator_wraps_around_and_stays_i32():
    """i8 x i8 -> i32 (no saturation): 127 * 127 * 2 + (2^31 - 1) = 2^31 + 32257 wraps to
    -2^31 + 32257 = -2147451391."""
    row = _row(lambda l, i: (0, i), lambda l, i: (i, 0), lambda l, i: (0, 0), a=dt.i8, c=dt.i32)
    d = row.emulate([np.array([[127, 127]], np.int8), np.array([[127, 127]], np.int8),
                     np.array([[2 ** 31 - 1]], np.int32)], {}, 1)[0]
    assert d.dtype == np.int32 and d.tolist() == [[-2147451391]]


def test_round_mantissa_passes_infinities_and_every_nan_through():
    """xf32/tf32 input rounding (10 mantissa bits, ties to even) by hand; a NaN whose payload
    sits only in the dropped bits (f32 0x7F800001) must stay a NaN, not round to infinity."""
    from opus.targets.matrix import round_mantissa
    rnd = round_mantissa(10)
    bits = np.array([0x7F800001, 0xFF800001, 0x7FC00000, 0x7F800000, 0xFF800000, 0x7F7FFFFF],
                    np.uint32).view(np.float32)
    out = rnd(bits)
    assert np.isnan(out[:3]).all()
    assert out[3] == np.inf and out[4] == -np.inf
    assert out[5] == np.inf   # the largest f32 rounds up past the largest 10-bit mantissa
    assert rnd(np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -(1 + 2.0 ** -10 + 2.0 ** -12)],
                        np.float32)).tolist() == [1.0, 1 + 2.0 ** -9, -(1 + 2.0 ** -10)]


# -- a row's self-checks, each with its words --------------------------------------------------

_A, _B, _C = (lambda l, i: (0, i)), (lambda l, i: (i, 0)), (lambda l, i: (0, 0))


@pytest.mark.parametrize("change,message", [
    (dict(name=""), "name must be a non-empty string"),
    (dict(shape=(1, 0, 2)), "shape must be (m, n, k) of positive ints, got (1, 0, 2)"),
    (dict(warp=0), "warp 0 must divide m*k, k*n and m*n of (1, 1, 2)"),
    (dict(warp=1.0), "warp 1.0 must divide m*k, k*n and m*n of (1, 1, 2)"),
    (dict(available=3), "available must be a predicate target -> bool"),
    (dict(numerics=Numerics(k_steps=2.0)), "numerics must be a Numerics whose k_steps divides "
     "A's 2 and B's 2 registers per lane, got Numerics(inputs=None, k_steps=2.0, note=\"exact "
     "products, one rounding to C's type\")"),
    (dict(numerics="exact"), "numerics must be a Numerics whose k_steps divides A's 2 and B's 2 "
     "registers per lane, got 'exact'"),
], ids=["name", "shape", "warp0", "warp-float", "available", "k-steps-float", "not-numerics"])
def test_a_malformed_row_is_refused_with_its_reason(change, message):
    fields = dict(name="demo", shape=(1, 1, 2), a=dt.f32, b=dt.f32, c=dt.f32, warp=1,
                  layout=LaneLayout(_A, _B, _C), available=lambda t: True,
                  lowering={"cuda": lambda *a: []}, isa="demo.isa", numerics=EXACT)
    fields.update(change)
    with pytest.raises(ValueError) as e:
        MatrixAtom(**fields)
    assert str(e.value) == f"matrix atom {fields['name']!r}: {message}"


def test_chained_steps_must_divide_both_operands_registers():
    """(1, 2, 2) on one lane: A holds 2 registers, B 4; four steps divide B's but not A's."""
    with pytest.raises(ValueError, match="k_steps divides A's 2 and B's 4 registers"):
        _row(lambda l, i: (0, i), lambda l, i: (i // 2, i % 2), lambda l, i: (0, i),
             shape=(1, 2, 2), numerics=Numerics(k_steps=4))


def test_lane_maps_outside_the_operand_or_overlapping_are_refused():
    with pytest.raises(ValueError) as e:
        _row(lambda l, i: (0, i + 1), _B, _C)
    assert str(e.value) == ("matrix atom 'demo': A element 1 of lane 0 is at (0, 2), outside the "
                            "1x2 operand")
    with pytest.raises(ValueError) as e:
        _row(lambda l, i: (i, 0), _B, _C)
    assert str(e.value) == ("matrix atom 'demo': A element 1 of lane 0 is at (1, 0), outside the "
                            "1x2 operand")
    with pytest.raises(ValueError) as e:   # B[0, 1] held by lane 0 element 1 and lane 1 element 1
        _row(lambda l, i: (0, l), lambda l, i: (0, 1) if (l, i) == (1, 1) else (l, i),
             lambda l, i: (0, l), shape=(1, 2, 2), warp=2)
    assert str(e.value) == ("matrix atom 'demo': B[0, 1] is held by lane 0 element 1 and lane 1 "
                            "element 1")


def test_lowering_index_tables_and_accumulator_check():
    from opus.targets.matrix import atom_index, instruction_table, require_accumulator
    row = MatrixAtom("demo", (1, 1, 2), dt.f32, dt.f32, dt.f32, 1, LaneLayout(_A, _B, _C),
                     lambda t: True, {"cuda": lambda atom, o, r, attrs: [atom.name, o, r, attrs]},
                     "demo.isa")
    assert row.lower["cuda"](["a"], ["d"], {"k": 1}) == ["demo", ["a"], ["d"], {"k": 1}]
    twin = _row(_A, _B, _C, name="demo2")
    assert atom_index([row, twin]) == {("f32", "f32", "f32", (1, 1, 2)): ("demo", "demo2")}
    assert instruction_table([row, twin]) == {"demo": row, "demo2": twin}
    with pytest.raises(ValueError) as e:
        instruction_table([row, _row(_A, _B, _C)])
    assert str(e.value) == "two matrix atoms are named 'demo'"
    require_accumulator(row, ("f32", "i32"), "MFMA")
    with pytest.raises(ValueError) as e:
        require_accumulator(_row(_A, _B, _C, c=dt.f16, a=dt.f16), ("f32", "i32"), "MFMA")
    assert str(e.value) == "matrix atom 'demo': MFMA accumulators here are f32/i32, got f16"


def test_an_operand_layout_needs_two_x_dims_of_p_and_y_tags():
    with pytest.raises(ValueError) as e:
        OperandLayout((2, 2), (("p",), ("q",)), lambda lane: (lane,))
    assert str(e.value) == ("operand layout: dim (('p',), ('q',)) needs two x-dims of 'p'/'y' "
                            "tags, one per entry of the shape (2, 2)")


def test_operand_layout_refusals_and_the_layouts_a_lane_layout_keeps():
    with pytest.raises(ValueError) as e:
        OperandLayout((2, 2), (("p",), ("y",)), lambda lane: (lane,), y_order=(1,))
    assert str(e.value) == "operand layout: y_order (1,) is no permutation of the 1 y sub-dims"
    with pytest.raises(ValueError, match="needs two x-dims"):
        OperandLayout((2, 2, 2), (("p",), ("y",), ("y",)), lambda lane: (lane,))
    a = OperandLayout((1, 2), (("y",), ("p",)), lambda lane: (lane,))   # A (m, k): lane = k
    b = OperandLayout((1, 2), (("y",), ("p",)), lambda lane: (lane,))   # B as (n, k)
    c = OperandLayout((1, 1), (("y",), ("y",)), lambda lane: ())
    lay = LaneLayout.from_operands(a, b, c)
    assert lay.operands == (a, b, c)
    assert [lay.coords_a(l, 0) for l in (0, 1)] == [(0, 0), (0, 1)]
    assert [lay.coords_b(l, 0) for l in (0, 1)] == [(0, 0), (1, 0)]   # (k, n)


def test_an_accumulator_lane_map_outside_c_is_refused_naming_c():
    with pytest.raises(ValueError) as e:
        _row(_A, _B, lambda l, i: (0, 1))
    assert str(e.value) == ("matrix atom 'demo': C element 0 of lane 0 is at (0, 1), outside the "
                            "1x1 operand")


def test_each_lowering_refuses_at_definition_the_rows_it_cannot_spell():
    """A row's lowerings check it when it is built: mma.sync packs A and B elements of one size
    (16-bit A with 32-bit B is no mma.sync), so the row is refused at its definition, not when a
    kernel renders it."""
    from opus.targets.nv_mma import MmaSyncAsm
    layout = LaneLayout(_A, _B, lambda l, i: (0, 0))
    with pytest.raises(ValueError) as e:
        MatrixAtom("demo", (1, 1, 2), dt.f16, dt.f32, dt.f32, 1, layout, lambda target: True,
                   {"cuda": MmaSyncAsm()}, "demo.isa")
    assert str(e.value) == ("matrix atom 'demo': mma.sync packing takes 8-, 16- or 32-bit A and "
                            "B elements of one size, got f16 and f32")
    row = MatrixAtom("demo", (1, 1, 2), dt.f16, dt.f16, dt.f32, 1, layout, lambda target: True,
                     {"cuda": MmaSyncAsm()}, "demo.isa")   # one size: accepted
    assert row.elem_a == 2
