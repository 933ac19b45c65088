"""Emitter paths the differential programs do not generate, run on the host: dynamic shared
memory at an offset and of a narrow type, printf of every argument kind, a run-time while loop
carrying values, pointer arithmetic, an early return; plus CodegenError's message and the
indentation of the rendered C. Expectations are hand-written or computed with numpy
(issue 17.4: these kill the mutants of codegen/cemit.py that survived with the old selection)."""
import re

import numpy as np
import pytest

import opus
from opus import f16, f32, i8, i32, u8
from opus.codegen.cemit import CodegenError
from opus.ir.core import Loc
from hostexec import run_kernel


@opus.kernel
def dyn_two_views(x: opus.Ptr[i32], y: opus.Ptr[u8]):
    t = opus.thread_id_x()
    words = opus.dynamic_smem(i32, 0)           # bytes [0, 4 * 32)
    bytes_ = opus.dynamic_smem(u8, 4 * 32)      # bytes [128, 160): after the words
    words.store(x[t], t)
    bytes_.store(u8(t * 3), t)
    opus.sync_threads()
    x[t] = words.load(31 - t)
    y[t] = bytes_.load((t + 5) % 32)


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_dynamic_smem_views_of_two_types_at_their_offsets(target, tmp_path):
    x = np.arange(32, dtype=np.int32) * 1000 - 7
    y = np.zeros(32, np.uint8)
    want_x = x[::-1].copy()
    want_y = ((np.arange(32) + 5) % 32 * 3).astype(np.uint8)
    run_kernel(dyn_two_views, 1, 32, x, y, target=target, workdir=tmp_path, smem=160)
    np.testing.assert_array_equal(x, want_x)
    np.testing.assert_array_equal(y, want_y)


@opus.kernel
def print_kinds(h: opus.Ptr[f16], s: opus.Ptr[f32], b: opus.Ptr[i8], w: opus.Ptr[i32]):
    t = opus.thread_id_x()
    opus.printf("h=%.4f s=%.3f b=%d w=%d p=%d\n", h[t], s[t], b[t], w[t], w[t] > 0)


def test_printf_of_each_argument_kind(tmp_path):
    h = np.float16([1.5, -0.0009765625])   # f16 exactly: widened to double
    s = np.float32([0.25, -3.125])
    b = np.int8([-128, 127])               # narrow integers widened to int
    w = np.int32([-70000, 5])
    out = run_kernel(print_kinds, 1, 2, h, s, b, w, target="sm_80", workdir=tmp_path)
    assert out == ("h=1.5000 s=0.250 b=-128 w=-70000 p=0\n"
                   "h=-0.0010 s=-3.125 b=127 w=5 p=1\n")


@opus.kernel
def collatz_steps(x: opus.Ptr[i32], steps: opus.Ptr[i32]):
    t = opus.thread_id_x()
    v = x[t]
    n = 0
    while v != 1:
        if v % 2 == 0:
            v = v // 2
        else:
            v = 3 * v + 1
        n = n + 1
    steps[t] = n


def _collatz(v):
    n = 0
    while v != 1:
        v = v // 2 if v % 2 == 0 else 3 * v + 1
        n += 1
    return n


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_run_time_while_carries_its_values(target, tmp_path):
    x = np.int32([1, 2, 3, 6, 7, 27, 97, 871])
    steps = np.full(8, -1, np.int32)
    run_kernel(collatz_steps, 1, 8, x, steps, target=target, workdir=tmp_path)
    np.testing.assert_array_equal(steps, [_collatz(int(v)) for v in x])


@opus.kernel
def shifted_copy_with_early_return(x: opus.Ptr[f32], y: opus.Ptr[f32], n: i32, k: i32):
    t = opus.thread_id_x()
    if t >= n:
        return
    src = x + k          # pointer arithmetic: element k of x
    dst = y + (t + 1)
    dst[-1] = src[t] * 2.0


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_pointer_arithmetic_and_early_return(target, tmp_path):
    x = np.arange(40, dtype=np.float32) - 10
    y = np.full(32, 99.0, np.float32)
    run_kernel(shifted_copy_with_early_return, 1, 32, x, y, 20, 7, target=target,
               workdir=tmp_path)
    want = np.full(32, 99.0, np.float32)
    want[:20] = x[7:27] * 2          # threads 20..31 returned before writing
    np.testing.assert_array_equal(y, want)


def test_rendered_c_is_indented_by_its_braces():
    """Each code line of the kernel body is indented two spaces per enclosing brace (readable
    `k.source()`), through a while loop inside an if (with an else) inside a for."""
    @opus.kernel
    def nested(x: opus.Ptr[i32], n: i32):
        t = opus.thread_id_x()
        for i in opus.range(n):
            if t > i:
                v = x[t]
                while v > 3:
                    v = v - 3
                x[t] = v
            else:
                x[t] = i
    src = nested.source(target="sm_80")
    body = src[src.index("nested"):]
    body = body[body.index("{\n") + 2:]
    depth, lines = 1, 0
    for line in body.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "//")):
            continue   # a source comment is indented like the code line it introduces
        depth -= line.lstrip().startswith("}")
        if depth == 0:
            break
        assert line == "  " * depth + line.lstrip(), (depth, line)
        depth += line.rstrip().endswith("{")
        lines += 1
    assert "while (true) {" in src and lines > 8


def test_codegen_error_names_the_kernel_line():
    loc = Loc("k.py", 12, "f", "    x = y  \n")
    e = CodegenError("no such op", loc, kernel="kern")
    assert str(e) == "k.py:12 (kernel 'kern'): no such op\n    x = y"
    assert e.raw_message == "no such op" and e.loc is loc


@pytest.mark.parametrize("text", [None, "", "   "])
def test_codegen_error_without_kernel_or_line_text(text):
    e = CodegenError("no such op", Loc("k.py", 3, "f", text))
    assert str(e) == "k.py:3: no such op"
    assert str(CodegenError("bare")) == "bare"


@opus.kernel
def bounded_copy_i64(x: opus.Ptr[i32], y: opus.Ptr[i32], n: opus.i64):
    off = opus.i64(opus.thread_id_x()) * 4 - 8     # 64-bit offsets, the first two negative
    v = opus.load(x, off, vec=4, bound=n)
    opus.store(y, v, off + 8, vec=4)


@pytest.mark.parametrize("n", [10, 11, 12, 13])
def test_bounded_vector_load_with_64_bit_offsets(n, tmp_path):
    """Elements below 0 or at and past the bound read 0 (opus.load), whole vectors and tails."""
    x = np.arange(1, 25, dtype=np.int32) * 11
    y = np.full(24, -1, np.int32)
    run_kernel(bounded_copy_i64, 1, 6, x, y, n, target="sm_80", workdir=tmp_path)
    want = np.zeros(24, np.int32)
    want[8:8 + n] = x[:n]            # y[j] = x[j - 8] where 0 <= j - 8 < n
    np.testing.assert_array_equal(y, want)


@opus.kernel
def prints_one(x: opus.Ptr[i32]):
    opus.printf("%d\n", x[0])


@opus.kernel
def copies_async(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 32)
    opus.copy_async(tile, opus.thread_id_x(), opus.make_gmem(x, 32), opus.thread_id_x())


@opus.kernel
def copies_async_lds(x: opus.Ptr[f32]):
    tile = opus.alloc_smem(f32, 64)
    opus.copy_async_lds(tile, 0, opus.make_gmem(x, 64), opus.thread_id_x())


@pytest.mark.parametrize("kernel,target,check,words", [
    (prints_one, "gfx942", "require_printf",
     "internal: printf reached the hip renderer for gfx942 (Target.printf_missing: tracing "
     "refuses it)"),
    (copies_async, "gfx942", "require_cp_async",
     "internal: cp.async reached the hip renderer for gfx942 (Target.require_cp_async refuses "
     "it while tracing)"),
    (copies_async_lds, "sm_80", "require_lds_load",
     "internal: buffer_load ... lds reached the cuda renderer for sm_80 (Target.require_lds_load "
     "refuses it while tracing)"),
])
def test_renderer_refuses_what_tracing_should_have_refused(kernel, target, check, words,
                                                           monkeypatch):
    """The renderers' second line of defence: with the tracing check switched off, rendering
    an op the chip lacks is an internal CodegenError naming the op, backend, chip and check."""
    from opus.targets import get_target
    monkeypatch.setattr(type(get_target(target)), check, lambda self, *a, **k: None)
    with pytest.raises(CodegenError) as info:
        kernel.source(target=target)
    assert info.value.raw_message == words


@opus.kernel
def prints_quotes(x: opus.Ptr[i32]):
    opus.printf('say "%d" \\ then\ttab\n', x[0])


def test_printf_format_keeps_quotes_backslashes_and_newlines(tmp_path):
    out = run_kernel(prints_quotes, 1, 1, np.int32([42]), target="sm_80", workdir=tmp_path)
    assert out == 'say "42" \\ then\ttab\n'


@opus.kernel
def f64_specials(y: opus.Ptr[opus.f64]):
    y[0] = opus.f64(float("inf"))
    y[1] = opus.f64(float("-inf"))
    y[2] = opus.f64(-0.0)
    y[3] = opus.f64(2.5)


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_f64_constants_that_c_cannot_spell_as_literals(target, tmp_path):
    y = np.zeros(4, np.float64)
    run_kernel(f64_specials, 1, 1, y, target=target, workdir=tmp_path)
    assert y.tobytes() == np.float64([np.inf, -np.inf, -0.0, 2.5]).tobytes()


@opus.kernel
def bounded_far(x: opus.Ptr[i32], y: opus.Ptr[i32], base: opus.i64, n: i32):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, base + t * 4, vec=4, bound=n), t * 4, vec=4)


@opus.kernel
def bounded_below_huge_bound(x: opus.Ptr[i32], y: opus.Ptr[i32], n: opus.i64):
    t = opus.thread_id_x()
    opus.store(y, opus.load(x, t * 4 - 8, vec=4, bound=n), t * 4, vec=4)


def test_bound_check_keeps_offsets_and_bounds_past_32_bits(tmp_path):
    """A 64-bit offset 2^32 + 4 against a bound of 10 is past the end (reads 0; truncated to 32
    bits it would look in range), and a 32-bit offset of -8 is below 0 however large the
    64-bit bound (2^33 - 4: minus the vector, truncated to 32 bits, it would admit -8)."""
    x = np.arange(1, 17, dtype=np.int32)
    y = np.full(16, -1, np.int32)
    run_kernel(bounded_far, 1, 4, x, y, 2**32 + 4, 10, target="sm_80", workdir=tmp_path)
    np.testing.assert_array_equal(y, np.zeros(16, np.int32))
    y = np.full(16, -1, np.int32)
    (tmp_path / "huge").mkdir()
    run_kernel(bounded_below_huge_bound, 1, 4, x, y, 2**33 - 4, target="sm_80",
               workdir=tmp_path / "huge")
    want = np.zeros(16, np.int32)
    want[8:] = x[:8]
    np.testing.assert_array_equal(y, want)


@opus.kernel
def range_sums(x: opus.Ptr[i32], out: opus.Ptr[i32], lo: i32, hi: i32, step: i32):
    acc = 0
    for i in opus.range(lo, hi, step):            # run-time step: either sign
        acc = acc + x[i] * (i + 1)
    out[0] = acc
    down = 0
    for i in opus.range(15, -1, -3):              # compile-time negative step
        down = down * 3 + x[i]
    out[1] = down
    n = 0
    for i in opus.range(lo, hi, 2, unroll=2):     # unrolled by the compiler: same iterations
        n = n * 5 + i
    out[2] = n
    back = 0
    for i in opus.range(hi, lo, -step):           # a second run-time step, computed
        back = back * 2 + x[i]
    for i in opus.range(0, 4):                    # compile-time step 1
        back = back * 2 + i
    out[3] = back


def _range_sums(x, lo, hi, step):
    acc = sum(int(x[i]) * (i + 1) for i in range(lo, hi, step))
    down = 0
    for i in range(15, -1, -3):
        down = down * 3 + int(x[i])
    n = 0
    for i in range(lo, hi, 2):
        n = n * 5 + i
    back = 0
    for i in range(hi, lo, -step):
        back = back * 2 + int(x[i])
    for i in range(0, 4):
        back = back * 2 + i
    return [acc, down, n, back]


@pytest.mark.parametrize("lo,hi,step", [(1, 14, 3), (13, 0, -4), (12, 3, -1), (5, 5, 1),
                                        (2, 9, 7), (14, 2, 2)])
@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_for_loops_with_run_time_and_negative_steps(target, lo, hi, step, tmp_path):
    x = (np.arange(16, dtype=np.int32) * 7) % 11 - 5
    out = np.zeros(4, np.int32)
    run_kernel(range_sums, 1, 1, x, out, lo, hi, step, target=target, workdir=tmp_path)
    np.testing.assert_array_equal(out, np.int32(_range_sums(x, lo, hi, step)))
    assert "#pragma unroll 2\n" in range_sums.source(target=target)   # unroll= reaches the compiler


@opus.kernel
def swaps_in_a_loop(out: opus.Ptr[i32], n: i32):
    a, b = 0, 1
    for _ in opus.range(n):
        a, b = b, a + b          # the two carried values are assigned at once
    out[0] = a
    out[1] = b
    c, d = 1, 2
    for _ in opus.range(n + 1):
        c, d = d, c              # a plain swap: each side is the other's carried value
    out[2] = c * 10 + d


def test_loop_carried_values_are_assigned_together(tmp_path):
    out = np.zeros(3, np.int32)
    run_kernel(swaps_in_a_loop, 1, 1, out, 10, target="sm_80", workdir=tmp_path)
    # Fibonacci F(10), F(11); 11 swaps of (1, 2) leave (2, 1)
    np.testing.assert_array_equal(out, [55, 89, 21])
