"""Bad input to kernel definitions: syntax a kernel cannot have, returns and variables that do
not fit run-time control flow, bad loop bounds, kernels launched from kernels, parameters
without annotations, mutable globals, errors inside helper functions (at the helper's line,
with the call chain), Python's math on run-time values. Each case checks the error type, that
the message names the problem, and the offending line (``# ERR: <tag>``); where a launch is
involved, that nothing was written or cached."""
import math

import numpy as np
import pytest

import opus
from opus import f32, i32, Ptr
from expect import line_of, no_new_cache_files, raises, unchanged

SM = "sm_90a"


def trace(k, **constexprs):
    return k.source(target=SM, **constexprs)


# -- syntax kernels cannot have -----------------------------------------------------------------

@opus.kernel
def _try(x: Ptr[f32]):
    try:  # ERR: try
        x[0] = 1.0
    except IndexError:
        pass


def test_try():
    with raises(opus.TraceError, "try/except is not supported", at="try"):
        trace(_try)


G = 1


@opus.kernel
def _global(x: Ptr[f32]):
    global G  # ERR: global
    x[0] = 1.0


def test_global():
    with raises(opus.TraceError, "global statements are not supported", at="global"):
        trace(_global)


def _make_nonlocal():
    v = 1.0

    @opus.kernel
    def k(x: Ptr[f32]):
        nonlocal v  # ERR: nonlocal
        x[0] = v
    return k


def test_nonlocal():
    with raises(opus.TraceError, "nonlocal statements are not supported", at="nonlocal"):
        trace(_make_nonlocal())


@opus.kernel
def _yield(x: Ptr[f32]):
    x[0] = 1.0
    yield  # ERR: yield


def test_yield():
    with raises(opus.TraceError, "yield is not supported", "generator", at="yield"):
        trace(_yield)


@opus.kernel
def _yield_from(x: Ptr[f32]):
    yield from range(3)  # ERR: yield-from


def test_yield_from():
    with raises(opus.TraceError, "yield is not supported", at="yield-from"):
        trace(_yield_from)


@opus.kernel
async def _async_kernel(x: Ptr[f32]):  # ERR: async-kernel
    x[0] = 1.0


def test_async_kernel():
    with raises(opus.TraceError, "async def is not supported", at="async-kernel"):
        trace(_async_kernel)


@opus.kernel
def _nested_async(x: Ptr[f32]):
    async def helper():  # ERR: nested-async
        await helper()
    x[0] = 1.0


def test_async_def_inside_a_kernel():
    with raises(opus.TraceError, "async def is not supported", at="nested-async"):
        trace(_nested_async)


@opus.kernel
def _class(x: Ptr[f32]):
    class Box:  # ERR: class
        pass
    x[0] = 1.0


def test_class_definition():
    with raises(opus.TraceError, "class definitions are not supported", at="class"):
        trace(_class)


@opus.kernel
def _del(x: Ptr[f32]):
    v = x[0]
    del v  # ERR: del
    x[0] = 1.0


def test_del_of_a_variable():
    with raises(opus.TraceError, "`del v` is not supported", "rebind", at="del"):
        trace(_del)


@opus.kernel
def _match(x: Ptr[f32], MODE: opus.constexpr = 1):
    match MODE:  # ERR: match
        case 1:
            x[0] = 1.0


def test_match():
    with raises(opus.TraceError, "match statements are not supported", "if/elif", at="match"):
        trace(_match)


@opus.kernel
def _walrus(x: Ptr[f32], n: i32):
    if (m := n + 1) > 2:  # ERR: walrus
        x[0] = opus.f32(m)


def test_assignment_expression():
    with raises(opus.TraceError, "assignment expressions (:=) are not supported", at="walrus"):
        trace(_walrus)


@opus.kernel
def _for_else(x: Ptr[f32], n: i32):
    for i in range(n):  # ERR: for-else
        x[i] = 1.0
    else:
        x[0] = 2.0


def test_for_else():
    with raises(opus.TraceError, "for/else is not supported", at="for-else"):
        trace(_for_else)


@opus.kernel
def _while_else(x: Ptr[f32], n: i32):
    i = 0
    while i < n:  # ERR: while-else
        i += 1
    else:
        x[0] = 2.0


def test_while_else():
    with raises(opus.TraceError, "while/else is not supported", at="while-else"):
        trace(_while_else)


def test_star_args_parameter():
    with raises(opus.TraceError, "*args/**kwargs parameters are not supported", at="star-args"):
        @opus.kernel
        def k(x: Ptr[f32],
              *rest):  # ERR: star-args
            pass


def test_star_kwargs_parameter():
    with raises(opus.TraceError, "*args/**kwargs parameters are not supported", at="kwargs"):
        @opus.kernel
        def k(x: Ptr[f32],
              **options):  # ERR: kwargs
            pass


@opus.kernel
def _range_keyword(x: Ptr[f32], n: i32):
    for i in range(0, n, step=2):  # ERR: range-kw
        x[i] = 1.0


def test_range_with_keyword_arguments():
    with raises(opus.TraceError, "range() in a kernel's `for` takes 1 to 3 plain arguments",
                at="range-kw"):
        trace(_range_keyword)


pick = lambda v: 1.0 if v > 0.0 else 2.0  # noqa: E731  # ERR: lambda


@opus.kernel
def _lambda(x: Ptr[f32]):
    x[0] = pick(x[1])  # ERR: lambda-call


def test_lambda_with_a_runtime_condition_points_at_the_lambda():
    with raises(opus.TraceError, "truth value", at="lambda") as info:
        trace(_lambda)
    assert f"test_definition.py:{line_of('lambda-call')}" in str(info.value)


# -- returns and variables -----------------------------------------------------------------------

@opus.kernel
def _return_value(x: Ptr[f32]):
    return x[0]  # ERR: return-value


def test_kernel_returning_a_value():
    with raises(opus.TraceError, "a kernel cannot return a value", "pointer parameter",
                at="return-value"):
        trace(_return_value)


@opus.kernel
def _one_branch(x: Ptr[f32], n: i32):
    if n > 3:
        v = 1.5
    x[0] = v  # ERR: one-branch


def test_variable_set_in_one_branch_used_after():
    with raises(opus.TraceError, "'v'", "only one branch", f"line {line_of('one-branch') - 2}",
                at="one-branch"):
        trace(_one_branch)


@opus.kernel
def _before_assignment(x: Ptr[f32], n: i32):
    for i in range(n):
        acc = acc + x[i]  # ERR: before-assignment


def test_variable_used_before_assignment_in_a_loop():
    with raises(opus.TraceError, "'acc'", "used before it is assigned", at="before-assignment"):
        trace(_before_assignment)


@opus.kernel
def _first_in_loop(x: Ptr[f32], n: i32):
    for i in range(n):
        last = x[i]
    x[0] = last  # ERR: first-in-loop


def test_variable_first_assigned_in_a_runtime_loop():
    with raises(opus.TraceError, "'last'", "first assigned inside the run-time loop",
                at="first-in-loop"):
        trace(_first_in_loop)


@opus.kernel
def _scalar_to_vector(x: Ptr[f32], n: i32):
    acc = x[0]
    for i in range(n):  # ERR: scalar-to-vector
        acc = opus.make_vector(acc, acc)


def test_loop_carried_scalar_becoming_a_vector():
    with raises(opus.TraceError, "'acc' is f32 before the loop", "f32x2", at="scalar-to-vector"):
        trace(_scalar_to_vector)


@opus.kernel
def _signed_unsigned(x: Ptr[f32], n: i32):
    acc = opus.i32(0)
    for i in range(n):  # ERR: signed-unsigned
        acc = opus.u32(i)
    x[0] = opus.f32(acc)


def test_loop_carried_type_change_that_cannot_be_promoted():
    with raises(opus.TraceError, "'acc'", "i32", "u32", at="signed-unsigned"):
        trace(_signed_unsigned)


@opus.kernel
def _static_changes(x: Ptr[f32], n: i32):
    mode = "a"
    for i in range(n):  # ERR: static-changes
        mode = "b"
    x[0] = opus.f32(len(mode))


def test_compile_time_value_changed_in_a_runtime_loop():
    with raises(opus.TraceError, "'mode'", "compile-time value that changes", at="static-changes"):
        trace(_static_changes)


@opus.kernel
def _branch_objects(x: Ptr[f32], n: i32):
    if n > 0:  # ERR: branch-objects
        mode = "a"
    else:
        mode = "b"
    x[0] = opus.f32(len(mode))


def test_different_compile_time_objects_in_runtime_branches():
    with raises(opus.TraceError, "'mode'", "different compile-time object", at="branch-objects"):
        trace(_branch_objects)


# -- loop bounds and conditions -----------------------------------------------------------------

@opus.kernel
def _float_bound(x: Ptr[f32]):
    for i in range(2.5):  # ERR: float-bound
        x[i] = 1.0


@opus.kernel
def _pointer_bound(x: Ptr[f32]):
    for i in range(x):  # ERR: pointer-bound
        x[i] = 1.0


@opus.kernel
def _vector_bound(x: Ptr[f32], n: i32):
    for i in range(opus.make_vector(n, n)):  # ERR: vector-bound
        x[0] = 1.0


@opus.kernel
def _runtime_float_bound(x: Ptr[f32]):
    for i in range(x[0]):  # ERR: runtime-float-bound
        x[1] = 1.0


@pytest.mark.parametrize("k,needles,tag", [
    (_float_bound, ("range arguments must be integers", "2.5"), "float-bound"),
    (_pointer_bound, ("range() bounds must be scalar integers", "ptr<f32"), "pointer-bound"),
    (_vector_bound, ("range() bounds must be scalar integers", "i32x2"), "vector-bound"),
    (_runtime_float_bound, ("range() bounds must be scalar integers", "got f32"),
     "runtime-float-bound"),
], ids=["float", "pointer", "vector", "runtime-float"])
def test_bad_range_bounds(k, needles, tag):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)


@opus.kernel
def _runtime_break(x: Ptr[f32], n: i32):
    for i in range(n):  # ERR: runtime-break
        if i > 2:
            break


def test_break_in_a_runtime_loop():
    with raises(opus.TraceError, "break/continue", "compile-time range() bounds",
                at="runtime-break"):
        trace(_runtime_break)


@opus.kernel
def _runtime_break_condition(x: Ptr[f32], n: i32):
    for i in range(4):
        if i > n:  # ERR: runtime-break-cond
            break


def test_break_under_a_runtime_condition():
    with raises(opus.TraceError, "break/continue", "compile-time condition",
                at="runtime-break-cond"):
        trace(_runtime_break_condition)


@opus.kernel
def _opus_range_break(x: Ptr[f32], n: i32):
    for i in opus.range(n):  # ERR: opus-range-break
        if i > 2:
            break


def test_break_in_an_opus_range_loop():
    with raises(opus.TraceError, "opus.range cannot use break/continue", at="opus-range-break"):
        trace(_opus_range_break)


@opus.kernel
def _vector_if(x: Ptr[f32], n: i32):
    v = opus.make_vector(n, n)
    if v > 0:  # ERR: vector-if
        x[0] = 1.0


def test_if_on_a_vector():
    with raises(opus.TraceError, "`if` on a vector condition", "opus.select", at="vector-if"):
        trace(_vector_if)


@opus.kernel
def _vector_while(x: Ptr[f32], n: i32):
    while opus.make_vector(n, n) > 0:  # ERR: vector-while
        n = n - 1


def test_while_on_a_vector():
    with raises(opus.TraceError, "`while` on a vector condition", at="vector-while"):
        trace(_vector_while)


# -- kernels inside kernels --------------------------------------------------------------------

@opus.kernel
def _other(x: Ptr[f32]):
    x[0] = 1.0


@opus.kernel
def _launches(x: Ptr[f32]):
    _other[1, 32](x)  # ERR: launch-inside


@opus.kernel
def _calls_kernel(x: Ptr[f32]):
    _other(x)  # ERR: call-kernel-inside


def test_kernel_launched_inside_a_kernel(interpret, cache_root):
    x = np.zeros(4, np.float32)
    with no_new_cache_files(cache_root), unchanged(x), \
            raises(opus.TraceError, "kernels cannot launch kernels", "helper function",
                   at="launch-inside"):
        _launches[1, 4](x)


def test_kernel_called_inside_a_kernel():
    with raises(opus.TraceError, "_other", "cannot be launched from inside a kernel",
                at="call-kernel-inside"):
        trace(_calls_kernel)


# -- parameters ---------------------------------------------------------------------------------

def test_unannotated_parameter():
    with raises(opus.TraceError, "parameter 'n' needs an annotation", "opus.constexpr",
                at="unannotated"):
        @opus.kernel
        def k(x: Ptr[f32],
              n):  # ERR: unannotated
            pass


def test_parameter_annotated_with_a_python_type():
    with raises(opus.TraceError, "parameter 'n' needs an annotation", "opus.i32",
                at="python-type"):
        @opus.kernel
        def k(x: Ptr[f32],
              n: int):  # ERR: python-type
            pass


def test_annotation_that_cannot_be_evaluated():
    with raises(opus.TraceError, "cannot evaluate the annotation of 'y'", "NoSuchType",
                at="bad-string-annotation"):
        @opus.kernel
        def k(x: Ptr[f32],
              y: "NoSuchType"):  # noqa: F821  # ERR: bad-string-annotation
            pass


# -- mutable globals and closure variables ------------------------------------------------------

TABLE = [1.0, 2.0]
WEIGHTS = {"a": 1.0}
LUT = np.arange(4, dtype=np.float32)
NESTED = (1.0, [2.0])


@opus.kernel
def _reads_list(x: Ptr[f32]):
    x[0] = TABLE[0]  # ERR: global-list


@opus.kernel
def _reads_dict(x: Ptr[f32]):
    x[0] = WEIGHTS["a"]  # ERR: global-dict


@opus.kernel
def _reads_array(x: Ptr[f32]):
    x[0] = opus.f32(float(LUT[1]))  # ERR: global-array


@opus.kernel
def _reads_nested(x: Ptr[f32]):
    x[0] = NESTED[0]  # ERR: global-nested


@pytest.mark.parametrize("k,name,kind,tag", [
    (_reads_list, "TABLE", "list", "global-list"),
    (_reads_dict, "WEIGHTS", "dict", "global-dict"),
    (_reads_array, "LUT", "ndarray", "global-array"),
    (_reads_nested, "NESTED", "tuple", "global-nested"),
], ids=["list", "dict", "ndarray", "tuple-with-list"])
def test_mutable_global(k, name, kind, tag):
    with raises(opus.TraceError, f"global {name!r}, a mutable {kind}", "tuple",
                "opus.constexpr", at=tag):
        trace(k)


def _closure_list_kernel():
    offsets = [0, 1]

    @opus.kernel
    def k(x: Ptr[f32]):
        x[0] = opus.f32(offsets[1])  # ERR: closure-list
    return k


def test_mutable_closure_variable():
    with raises(opus.TraceError, "variable 'offsets', a mutable list", at="closure-list"):
        trace(_closure_list_kernel())


def helper_reading_table(v):
    return v * TABLE[1]  # ERR: helper-global-list


@opus.kernel
def _helper_reads_list(x: Ptr[f32]):
    x[0] = helper_reading_table(x[1])


def test_mutable_global_read_by_a_helper():
    with raises(opus.TraceError, "global 'TABLE', a mutable list", at="helper-global-list"):
        trace(_helper_reads_list)


def test_mutable_global_at_launch_writes_and_caches_nothing(interpret, cache_root):
    x = np.ones(4, np.float32)
    with no_new_cache_files(cache_root), unchanged(x), \
            raises(opus.TraceError, "global 'TABLE'", at="global-list"):
        _reads_list[1, 4](x)


# -- errors inside helpers: at the helper's line, with the call chain --------------------------

def bad_bound(x, n):
    for j in range(1.5):  # ERR: helper-bound
        x[j] = 1.0


@opus.kernel
def _helper_error(x: Ptr[f32], n: i32):
    bad_bound(x, n)  # ERR: helper-caller


def test_error_inside_a_helper_points_at_the_helper():
    with raises(opus.TraceError, "range arguments must be integers", "helper 'bad_bound'",
                f"test_definition.py:{line_of('helper-caller')}", at="helper-bound"):
        trace(_helper_error)


def inner_helper(v):
    return opus.make_vector(v, v) + v.no_such_attribute  # ERR: inner-helper


def outer_helper(v):
    w = v * 2.0
    return inner_helper(w)  # ERR: outer-helper


@opus.kernel
def _nested_helper_error(x: Ptr[f32]):
    x[0] = outer_helper(x[1])  # ERR: nested-caller


def test_error_in_a_nested_helper_names_each_call():
    with raises(opus.TraceError, "no_such_attribute", "helper 'inner_helper'",
                f"test_definition.py:{line_of('outer-helper')}",
                f"test_definition.py:{line_of('nested-caller')}", at="inner-helper"):
        trace(_nested_helper_error)


def helper_with_try(v):
    try:  # ERR: helper-try
        return v
    finally:
        pass


@opus.kernel
def _helper_try(x: Ptr[f32]):
    x[0] = helper_with_try(x[1])  # ERR: helper-try-caller


def test_unsupported_syntax_in_a_helper():
    with raises(opus.TraceError, "try/except is not supported",
                f"test_definition.py:{line_of('helper-try-caller')}", at="helper-try"):
        trace(_helper_try)


def returns_in_one_branch(v):
    if v > 0.0:  # ERR: one-sided-return
        return v


@opus.kernel
def _one_sided_return(x: Ptr[f32]):
    x[0] = returns_in_one_branch(x[1])


def test_helper_returning_in_only_one_runtime_branch():
    with raises(opus.TraceError, "returns in only one branch of the run-time `if`",
                at="one-sided-return"):
        trace(_one_sided_return)


def returns_in_loop(x, n):
    for j in range(n):
        if j > 2:
            return x[j]  # ERR: return-in-loop
    return 0.0


@opus.kernel
def _return_in_loop(x: Ptr[f32], n: i32):
    x[0] = returns_in_loop(x, n)


def test_helper_returning_from_a_runtime_loop():
    with raises(opus.TraceError, "cannot return from inside a run-time loop", at="return-in-loop"):
        trace(_return_in_loop)


def returns_two_shapes(v):
    if v > 0.0:  # ERR: two-shapes
        return v, v
    return v


@opus.kernel
def _two_shapes(x: Ptr[f32]):
    x[0] = returns_two_shapes(x[1])


def test_helper_returning_different_structures():
    with raises(opus.TraceError, "returned value differs in structure", at="two-shapes"):
        trace(_two_shapes)


def helper_with_global_statement(v):
    global G  # ERR: helper-global
    return v


@opus.kernel
def _helper_global(x: Ptr[f32]):
    x[0] = helper_with_global_statement(x[1])


def test_global_statement_in_a_helper():
    with raises(opus.TraceError, "global statements are not supported", at="helper-global"):
        trace(_helper_global)


@opus.kernel
def _inner_def_error(x: Ptr[f32], n: i32):
    def local_helper(v):
        return v + undefined_name  # noqa: F821  # ERR: inner-def
    x[0] = local_helper(x[1])


def test_error_in_a_helper_defined_inside_the_kernel():
    with raises(opus.TraceError, "NameError", "undefined_name", "helper 'local_helper'",
                at="inner-def"):
        trace(_inner_def_error)


# -- Python's functions and opus names -----------------------------------------------------------

@opus.kernel
def _unknown_attribute(x: Ptr[f32]):
    x[0] = opus.exps(x[1])  # ERR: unknown-attr


def test_unknown_opus_attribute():
    with raises(opus.TraceError, "no attribute 'exps'", "did you mean opus.exp",
                at="unknown-attr"):
        trace(_unknown_attribute)


@opus.kernel
def _math_exp(x: Ptr[f32]):
    x[0] = math.exp(x[1])  # ERR: math-exp


@opus.kernel
def _numpy_sqrt(x: Ptr[f32]):
    x[0] = np.sqrt(x[1])  # ERR: numpy-sqrt


@opus.kernel
def _builtin_max(x: Ptr[f32]):
    x[0] = max(x[1], x[2])  # ERR: builtin-max


@opus.kernel
def _builtin_int(x: Ptr[f32]):
    x[0] = opus.f32(int(x[1]))  # ERR: builtin-int


@pytest.mark.parametrize("k,needles,tag", [
    (_math_exp, ("math.exp() was given a run-time value", "use opus.exp"), "math-exp"),
    (_numpy_sqrt, ("sqrt() was given a run-time value", "use opus.sqrt"), "numpy-sqrt"),
    (_builtin_max, ("max() was given a run-time value", "use opus.max"), "builtin-max"),
    (_builtin_int, ("int() was given a run-time value", "use opus.i32"), "builtin-int"),
], ids=["math.exp", "numpy.sqrt", "max", "int"])
def test_python_math_on_runtime_values(k, needles, tag):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)


@pytest.fixture
def interpret():
    with opus.set_target(SM, interpret=True):
        yield
