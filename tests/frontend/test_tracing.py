"""Tracer and control flow: the IR a kernel produces, and the errors bad kernels get."""
import pytest

import opus
from opus import f16, f32, i32, u32


def ops_of(k, **cx):
    fn = k.specialize(target="sm_90a", **cx).function
    return [op.kind for op in fn.walk()], fn


def test_static_range_unrolls_and_dynamic_range_loops():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        acc = 0.0
        for i in range(4):          # static: unrolled
            acc = acc + x[i]
        for i in range(n):          # dynamic: one IR for loop carrying acc
            acc = acc + x[i]
        x[0] = acc

    kinds, fn = ops_of(k)
    assert kinds.count("for") == 1
    assert kinds.count("load") == 5
    loop = next(op for op in fn.walk() if op.kind == "for")
    assert [str(r.type) for r in loop.results] == ["opus.f32"] or \
        [r.type.name for r in loop.results] == ["f32"]


def test_python_int_carried_by_dynamic_loop_becomes_i32():
    @opus.kernel
    def k(out: opus.Ptr[i32], n: i32):
        count = 0
        for i in range(n):
            count += 2
        out[0] = count

    _, fn = ops_of(k)
    loop = next(op for op in fn.walk() if op.kind == "for")
    assert loop.results[0].type is opus.i32


def test_dynamic_if_merges_values_and_promotes():
    @opus.kernel
    def k(out: opus.Ptr[f32], n: i32):
        if n > 3:
            v = 1.5
        else:
            v = opus.f32(n)
        out[0] = v

    kinds, fn = ops_of(k)
    ifop = next(op for op in fn.walk() if op.kind == "if")
    assert [r.type for r in ifop.results] == [opus.f32]


def test_variable_from_one_branch_is_an_error_at_its_use():
    @opus.kernel
    def k(out: opus.Ptr[f32], n: i32):
        if n > 3:
            v = 1.5
        out[0] = v

    with pytest.raises(opus.TraceError) as e:
        k.specialize(target="sm_90a")
    msg = str(e.value)
    assert "'v'" in msg and "only one branch" in msg
    assert "test_tracing.py" in msg and "out[0] = v" in msg


def test_static_if_runs_one_branch_only():
    @opus.kernel
    def k(out: opus.Ptr[f32], MODE: opus.constexpr):
        if MODE == "a":
            out[0] = 1.0
        else:
            out[0] = undefined_name  # noqa: F821 - never traced for MODE == "a"

    kinds, _ = ops_of(k, MODE="a")
    assert "if" not in kinds


def test_while_static_and_dynamic():
    @opus.kernel
    def k(out: opus.Ptr[i32], n: i32):
        k2 = 1
        while k2 < 64:        # static: unrolled 6 times
            k2 *= 2
        i = 0
        while i < n:          # dynamic
            i = i + k2
        out[0] = i

    kinds, _ = ops_of(k)
    assert kinds.count("while") == 1 and kinds.count("condition") == 1


def test_break_in_dynamic_loop_is_a_clear_error():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        for i in range(n):
            if i > 2:
                break

    with pytest.raises(opus.TraceError, match="compile-time"):
        k.specialize(target="sm_90a")


def test_break_in_static_loop_works():
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        for i in range(10):
            if i == 3:
                break
            x[i] = 1.0

    kinds, _ = ops_of(k)
    assert kinds.count("store") == 3


def test_value_leaking_out_of_loop_is_an_error():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        box = []
        for i in range(n):
            box.append(x[i])
        x[0] = box[0]

    with pytest.raises(opus.TraceError, match="outside"):
        k.specialize(target="sm_90a")


def test_list_of_accumulators_is_carried():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        accs = [0.0, 0.0, 0.0, 0.0]
        for i in range(n):
            for j in range(4):
                accs[j] = accs[j] + x[i * 4 + j]
        for j in range(4):
            x[j] = accs[j]

    _, fn = ops_of(k)
    loop = next(op for op in fn.walk() if op.kind == "for")
    assert len(loop.results) == 4


def test_early_return_under_dynamic_condition():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        i = opus.thread_id_x()
        if i >= n:
            return
        x[i] = 2.0

    kinds, _ = ops_of(k)
    assert "return" in kinds and kinds.index("return") < kinds.index("store")


def test_bool_operators_on_runtime_values():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        i = opus.thread_id_x()
        if i > 0 and i < n or not (i != 5):
            x[i] = 1.0 if i < 3 else 2.0

    kinds, fn = ops_of(k)
    ops = [op.attrs.get("op") for op in fn.walk() if op.kind == "binary"]
    assert "and" in ops and "or" in ops
    assert "select" in kinds


def test_type_rules():
    def trace(body):
        @opus.kernel
        def k(a: opus.Ptr[f32], n: i32, m: u32):
            body(a, n, m)
        return k.specialize(target="sm_90a")

    with pytest.raises(opus.TraceError, match="i32 and u32|u32 and i32"):
        trace(lambda a, n, m: a.__setitem__(0, opus.f32(n + m)))
    with pytest.raises(opus.TraceError, match="does not fit i32"):
        trace(lambda a, n, m: a.__setitem__(0, opus.f32(n + 2**40)))
    f = trace(lambda a, n, m: a.__setitem__(0, n / 2)).function
    div = next(op for op in f.walk() if op.kind == "binary" and op.attrs["op"] == "div")
    assert div.results[0].type is opus.f32
    f = trace(lambda a, n, m: a.__setitem__(0, opus.f16(1.0) + a[1])).function
    add = next(op for op in f.walk() if op.kind == "binary")
    assert add.results[0].type is opus.f32


def test_runtime_value_as_python_bool_is_an_error():
    @opus.kernel
    def k(x: opus.Ptr[f32], n: i32):
        def helper(v):
            return 1 if bool(v) else 2
        x[0] = helper(n)

    with pytest.raises(opus.TraceError, match="truth value"):
        k.specialize(target="sm_90a")


def test_annotation_errors():
    with pytest.raises(opus.OpusError, match="'n' needs an annotation"):
        @opus.kernel
        def k(x: opus.Ptr[f32], n):
            pass


def test_error_points_at_kernel_line():
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        v = x.load(0) if False else None
        opus.make_gmem(x).load(0, vec=3)

    with pytest.raises(opus.TraceError) as e:
        k.specialize(target="sm_90a")
    assert "vec must be one of" in str(e.value) and "load(0, vec=3)" in str(e.value)


def test_unsupported_mma_names_types_and_chip():
    @opus.kernel
    def k(x: opus.Ptr[f32]):
        opus.make_mma(opus.f32, opus.f32, opus.f32, (16, 8, 16))

    with pytest.raises(opus.TraceError, match="f32 x f32 -> f32.*sm_90a"):
        k.specialize(target="sm_90a")


def test_constexpr_specializations_are_cached():
    @opus.kernel
    def k(x: opus.Ptr[f32], V: opus.constexpr = 1):
        x[0] = opus.f32(V)

    a = k.specialize(target="sm_90a", V=1)
    assert k.specialize(target="sm_90a") is a
    assert k.specialize(target="sm_90a", V=2) is not a
