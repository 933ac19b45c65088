"""wgmma's rows against the PTX ISA's tables transcribed in isa_wgmma.py (never derived from
opus' code): every accumulator and A-register fragment, the descriptor's bit fields, the
canonical shared-memory layouts with their swizzles, and the document's worked examples of
LBO / SBO encodings fitted from their exact layouts."""
import numpy as np
import pytest

from opus.targets import get_target
from opus.targets import nv_wgmma as nv

from isa_wgmma import (A_FRAGMENTS, A16_SPOTS, ATF32_SPOTS, A8_SPOTS, CANONICAL, D_SPOTS,
                       DESCRIPTOR_FIELDS, EXAMPLES, SWIZZLE_BITS, SWIZZLE_MODE_VALUE,
                       a_fragment_16bit, a_fragment_8bit, a_fragment_tf32, cute_offset,
                       cute_size, cute_swizzle, d_fragment, matrix_descriptor_encode, parse_cute)

ROWS = [r for r in get_target("sm_90a").instructions.values() if isinstance(r, nv.WgmmaAtom)]
NS = sorted({r.n for r in ROWS})
A_TYPES = sorted({r.a.name: r for r in ROWS if r.a_from == "regs"}.items())


@pytest.mark.parametrize("fn,spots", [(d_fragment, D_SPOTS), (a_fragment_16bit, A16_SPOTS),
                                      (a_fragment_tf32, ATF32_SPOTS), (a_fragment_8bit, A8_SPOTS)],
                         ids=["D", "A16", "Atf32", "A8"])
def test_transcription_agrees_with_the_figures(fn, spots):
    for (t, i), cell in spots.items():
        assert fn(t, i) == cell, (fn.__name__, t, i)


def test_every_row_has_its_tables():
    """Every wgmma row of the target: D's table always, A's by A's register element size."""
    assert len(ROWS) == 2 * (32 * 12 + 18 * 4)  # 12 float type rows, 4 int8 pairings, A twice
    for r in ROWS:
        if r.a_from == "regs":
            assert r.reg_a.bits in A_FRAGMENTS, f"no PTX A-fragment table for {r.name}"


@pytest.mark.parametrize("n", NS)
def test_accumulator_is_the_figure(n):
    lay = nv.accumulator_layout(n)
    got = [lay.coords(t, i) for t in range(128) for i in range(n // 2)]
    want = [d_fragment(t, i) for t in range(128) for i in range(n // 2)]
    assert got == want
    assert sorted(want) == [(r, c) for r in range(64) for c in range(n)]  # each once


@pytest.mark.parametrize("name,row", A_TYPES, ids=[n for n, _ in A_TYPES])
def test_a_registers_are_the_figure(name, row):
    fn, _ = A_FRAGMENTS[row.reg_a.bits]
    lay = row.layout_a()
    for t in range(128):
        for i in range(row.elem_a):
            assert lay.coords(t, i) == fn(t, i), (name, t, i)


def test_descriptor_bit_fields():
    """encode_descriptor packs the fields where the Matrix Descriptor Format table puts them;
    one worked by hand: start 0x1230, LBO 16, SBO 1024 bytes, 128-byte swizzle."""
    assert nv.encode_descriptor(0x1230, 16, 1024, 128) == 0x4000_0040_0001_0123
    rng = np.random.default_rng(1)
    for _ in range(200):
        start, lbo, sbo = (int(x) * 16 for x in rng.integers(0, 1 << 14, 3))
        base, sw = int(rng.integers(0, 8)), int(rng.choice([0, 32, 64, 128]))
        values = (matrix_descriptor_encode(start), matrix_descriptor_encode(lbo),
                  matrix_descriptor_encode(sbo), base, SWIZZLE_MODE_VALUE[sw])
        want = sum(v << first for (first, _, _), v in zip(DESCRIPTOR_FIELDS, values))
        got = nv.encode_descriptor(start, lbo, sbo, sw, base)
        assert got == want
        assert nv.decode_descriptor(got) == {"start": start, "lbo": lbo, "sbo": sbo,
                                             "base_offset": base, "swizzle": sw}


CANON_CASES = [(major, sw, bits) for (major, sw) in CANONICAL for bits in (8, 16, 32)
               if major == "K" or bits == 16]


@pytest.mark.parametrize("major,sw,bits", CANON_CASES,
                         ids=[f"{m}-{s}B-{b}bit" for m, s, b in CANON_CASES])
def test_canonical_layouts_are_the_table(major, sw, bits):
    """opus' canonical_offsets, for repeats m = 2, k = 2 and odd LBO / SBO, equal the table's
    CuTe layout element for element; its swizzle is Swizzle<B, 4, 3> on byte addresses."""
    T = 128 // bits
    W = max(sw // 16, 1)
    names = {"T": T, "m": 2, "k": 2, "LBO": 8 * W * T * 3, "SBO": 8 * W * T * 5}
    shape, stride = (parse_cute(x, names) for x in CANONICAL[major, sw])
    rows, cols = cute_size(shape[0]), cute_size(shape[1])
    want = np.array([[cute_offset(shape[0], stride[0], r) + cute_offset(shape[1], stride[1], c)
                      for c in range(cols)] for r in range(rows)])
    got = nv.canonical_offsets(rows, cols, bits // 8, major, sw, names["LBO"], names["SBO"])
    np.testing.assert_array_equal(got, want)
    addr = np.arange(0, 1 << 13)
    np.testing.assert_array_equal(nv.swizzle_address(addr, sw),
                                  [cute_swizzle(SWIZZLE_BITS[sw], 4, 3, int(x)) for x in addr])


@pytest.mark.parametrize("example", EXAMPLES, ids=[e[0].split(":")[0] for e in EXAMPLES])
def test_worked_examples_fit_to_the_documents_encodings(example):
    """fit_descriptor, given the example's exact layout over one instruction's K (32 bytes for
    K-major, 16 elements for MN-major), finds the major-ness and the LBO / SBO the document
    encodes (an unused LBO encoded 1, "assumed")."""
    _, bits, major, sw, shape, stride, lbo_enc, sbo_enc = example
    k = 256 // bits if major == "K" else 16
    rows = cute_size(shape[0])
    offsets = np.array([[cute_offset(shape[0], stride[0], r) + cute_offset(shape[1], stride[1], c)
                         for c in range(k)] for r in range(rows)])
    got_major, lbo, sbo = nv.fit_descriptor(offsets, bits // 8, sw)
    assert got_major == major
    assert (matrix_descriptor_encode(lbo), matrix_descriptor_encode(sbo)) == (lbo_enc or 1, sbo_enc)
