"""The HIP renderer's static facts about offsets, bounds and pointers (codegen/hip.py), by hand
values on traced kernels: which bounds are known multiples (``_known_multiple``: a whole vector
is then checked exactly by the buffer unit), which loop offsets are the induction variable plus
a constant (``_iv_plus_const``: the loop version without clamps), and how far a pointer is known
to be aligned (``_alignment``). Each fact only ever allows a faster form, so a wrong "no"
costs speed and a wrong "yes" correctness: both directions are pinned here."""
import pytest

import opus
from opus import f32, i32
from opus.codegen import hip
from opus.ir import access_operands


def _loads(kernel, **constexprs):
    spec = kernel.specialize(target="gfx942", **constexprs)
    return spec, [op for op in spec.function.walk() if op.kind == "load"]


@opus.kernel
def bounds(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32, c: i32):
    t = opus.thread_id_x()
    y[t] = (opus.load(x, t, bound=12) + opus.load(x, t, bound=n * 8) + opus.load(x, t, bound=8 * n)
            + opus.load(x, t, bound=n * 6) + opus.load(x, t, bound=n * 8 + 16)
            + opus.load(x, t, bound=n * 8 - 16) + opus.load(x, t, bound=n * 8 + 4)
            + opus.load(x, t, bound=opus.select(c > 0, 8, 16))
            + opus.load(x, t, bound=opus.select(c > 0, 12, 8))
            + opus.load(x, t, bound=opus.select(c > 0, 8, 12)) + opus.load(x, t, bound=n)
            + opus.load(x, t, bound=(n * 8) | 16))


# multiples of 2, 4, 8 that hold for every n and c, by hand
KNOWN = [
    (True, True, False),    # 12
    (True, True, True),     # n * 8
    (True, True, True),     # 8 * n: either factor
    (True, False, False),   # n * 6
    (True, True, True),     # n * 8 + 16: both terms
    (True, True, True),     # n * 8 - 16
    (True, True, False),    # n * 8 + 4
    (True, True, True),     # select(c, 8, 16): both arms
    (True, True, False),    # select(c, 12, 8)
    (True, True, False),    # select(c, 8, 12)
    (False, False, False),  # n: unknown
    (False, False, False),  # (n * 8) | 16: only sums, differences and products are followed
]


def test_known_multiples_of_bounds():
    _, loads = _loads(bounds)
    got = [tuple(hip._known_multiple(access_operands(op)[3], g) for g in (2, 4, 8))
           for op in loads]
    assert got == KNOWN


@opus.kernel
def loop_offsets(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    acc = opus.f32(0.0)
    for i in opus.range(n):
        acc = acc + (opus.load(x, i, bound=n) + opus.load(x, i + 3, bound=n)
                     + opus.load(x, i - 2, bound=n) + opus.load(x, 3 + i, bound=n)
                     + opus.load(x, i * 2, bound=n) + opus.load(x, 3 - i, bound=n)
                     + opus.load(x, i + n, bound=n) + opus.load(x, t, bound=n)
                     + opus.load(x, t + 3, bound=n))
    y[t] = acc


def test_offsets_that_are_the_induction_variable_plus_a_constant():
    """i, i + 3, i - 2, 3 + i are iv + c; i * 2, 3 - i, i + n, t and t + 3 are not."""
    spec, _ = _loads(loop_offsets)
    loop = next(op for op in spec.function.walk() if op.kind == "for")
    iv = loop.regions[0].args[0]
    got = [hip._iv_plus_const(access_operands(op)[1], iv)
           for op in loop.regions[0].ops if op.kind == "load"]
    assert got == [0, 3, -2, 3, None, None, None, None, None]


@opus.kernel
def shifted(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32):
    t = opus.thread_id_x()
    v = opus.load(x, 4 * t, vec=4, bound=n)
    for q in (x + 3, x + 4, x + 0, x + n, x + 2 + 4, y, x + opus.i32(0)):
        v = v + opus.load(q, 4 * t, vec=4, bound=n)
    q = x
    for i in opus.range(n):
        v = v + opus.load(q, 4 * t, vec=4, bound=n)
        q = q + 8
    opus.store(y, v, 4 * t, vec=4)


def test_pointer_alignment_through_constant_offsets():
    """x and y are 16-byte aligned (their 16-byte accesses: the launch checks it); x + k is
    aligned to the lowest set bit of 4k bytes, at most x's own and at least an element:
    x + 3 -> 4, x + 4 -> 16, x + 0 -> 16 (folded: x itself), x + n -> 4 (unknown),
    (x + 2) + 4 -> 8, x + i32(0) -> 16 (a traced zero: an offset of 0), and a pointer carried
    through a loop -> 4 (unknown)."""
    spec, loads = _loads(shifted)
    assert spec.function.attrs["align"] == {"x": 16, "y": 16, "n": 1}
    em = hip.HipEmitter(spec.function, spec.target)
    assert [em._alignment(access_operands(op)[0]) for op in loads] == [16, 4, 16, 16, 4, 8, 16, 16, 4]


@opus.kernel
def bounded_shared(x: opus.Ptr[opus.f32], y: opus.Ptr[opus.f32], n: opus.i32):
    t = opus.thread_id_x()
    tile = opus.alloc_smem(opus.f32, 256)
    tile.store(opus.make_gmem(x, n).load(t), t)
    opus.sync_threads()
    y[t] = opus.make_smem(tile, n).load(255 - t)


def test_a_bounded_shared_access_is_no_buffer_access():
    """Buffer resources are for global memory: a bounded shared view's access is an LDS access
    with its own bound test; the one buffer resource is the bounded global view's."""
    src = bounded_shared.source(target="gfx942")
    rsrcs = [l for l in src.splitlines() if "make_buffer_rsrc" in l]
    assert len(rsrcs) == 1 and "(void*)p_x_1," in rsrcs[0], rsrcs
