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


@pytest.fixture
def interpret():
    with opus.set_target(SM, interpret=True):
        yield


def where(tag):
    """``<this file>:<line of the tag>``, as a message names a caller's line."""
    return f"test_definition.py:{line_of(tag)}"


# -- syntax kernels cannot have -----------------------------------------------------------------

@opus.kernel
def _try(x: Ptr[f32]):
    try:  # ERR: try
        x[0] = 1.0
    except IndexError:
        pass


G = 1


@opus.kernel
def _global(x: Ptr[f32]):
    global G  # ERR: global
    x[0] = 1.0


def _make_nonlocal():
    v = 1.0

    @opus.kernel
    def k(x: Ptr[f32]):
        nonlocal v  # ERR: nonlocal
        x[0] = v
    return k


@opus.kernel
def _yield(x: Ptr[f32]):
    x[0] = 1.0
    yield  # ERR: yield


@opus.kernel
def _yield_from(x: Ptr[f32]):
    yield from range(3)  # ERR: yield-from


@opus.kernel
async def _async_kernel(x: Ptr[f32]):  # ERR: async-kernel
    x[0] = 1.0


@opus.kernel
def _nested_async(x: Ptr[f32]):
    async def helper():  # ERR: nested-async
        await helper()
    x[0] = 1.0


@opus.kernel
def _class(x: Ptr[f32]):
    class Box:  # ERR: class
        pass
    x[0] = 1.0


@opus.kernel
def _del(x: Ptr[f32]):
    v = x[0]
    del v  # ERR: del
    x[0] = 1.0


@opus.kernel
def _match(x: Ptr[f32], MODE: opus.constexpr = 1):
    match MODE:  # ERR: match
        case 1:
            x[0] = 1.0


@opus.kernel
def _walrus(x: Ptr[f32], n: i32):
    if (m := n + 1) > 2:  # ERR: walrus
        x[0] = opus.f32(m)


@opus.kernel
def _for_else(x: Ptr[f32], n: i32):
    for i in range(n):  # ERR: for-else
        x[i] = 1.0
    else:
        x[0] = 2.0


@opus.kernel
def _while_else(x: Ptr[f32], n: i32):
    i = 0
    while i < n:  # ERR: while-else
        i += 1
    else:
        x[0] = 2.0


@opus.kernel
def _range_keyword(x: Ptr[f32], n: i32):
    for i in range(0, n, step=2):  # ERR: range-kw
        x[i] = 1.0


pick = lambda v: 1.0 if v > 0.0 else 2.0  # noqa: E731  # ERR: lambda


@opus.kernel
def _lambda(x: Ptr[f32]):
    x[0] = pick(x[1])  # ERR: lambda-call


def test_lambda_with_a_runtime_condition_points_at_the_lambda():
    with raises(opus.TraceError, "truth value", at="lambda") as info:
        trace(_lambda)
    assert where("lambda-call") in str(info.value)


# -- returns and variables -----------------------------------------------------------------------

@opus.kernel
def _return_value(x: Ptr[f32]):
    return x[0]  # ERR: return-value


@opus.kernel
def _one_branch(x: Ptr[f32], n: i32):
    if n > 3:
        v = 1.5
    x[0] = v  # ERR: one-branch


@opus.kernel
def _before_assignment(x: Ptr[f32], n: i32):
    for i in range(n):
        acc = acc + x[i]  # ERR: before-assignment


@opus.kernel
def _first_in_loop(x: Ptr[f32], n: i32):
    for i in range(n):
        last = x[i]
    x[0] = last  # ERR: first-in-loop


@opus.kernel
def _scalar_to_vector(x: Ptr[f32], n: i32):
    acc = x[0]
    for i in range(n):  # ERR: scalar-to-vector
        acc = opus.make_vector(acc, acc)


@opus.kernel
def _signed_unsigned(x: Ptr[f32], n: i32):
    acc = opus.i32(0)
    for i in range(n):  # ERR: signed-unsigned
        acc = opus.u32(i)
    x[0] = opus.f32(acc)


@opus.kernel
def _static_changes(x: Ptr[f32], n: i32):
    mode = "a"
    for i in range(n):  # ERR: static-changes
        mode = "b"
    x[0] = opus.f32(len(mode))


@opus.kernel
def _branch_objects(x: Ptr[f32], n: i32):
    if n > 0:  # ERR: branch-objects
        mode = "a"
    else:
        mode = "b"
    x[0] = opus.f32(len(mode))


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


@opus.kernel
def _runtime_break(x: Ptr[f32], n: i32):
    for i in range(n):  # ERR: runtime-break
        if i > 2:
            break


@opus.kernel
def _runtime_break_condition(x: Ptr[f32], n: i32):
    for i in range(4):
        if i > n:  # ERR: runtime-break-cond
            break


@opus.kernel
def _opus_range_break(x: Ptr[f32], n: i32):
    for i in opus.range(n):  # ERR: opus-range-break
        if i > 2:
            break


@opus.kernel
def _vector_if(x: Ptr[f32], n: i32):
    v = opus.make_vector(n, n)
    if v > 0:  # ERR: vector-if
        x[0] = 1.0


@opus.kernel
def _vector_while(x: Ptr[f32], n: i32):
    while opus.make_vector(n, n) > 0:  # ERR: vector-while
        n = n - 1


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


# -- parameters ---------------------------------------------------------------------------------

# Each defines a kernel whose parameters @opus.kernel refuses (at definition, not at a launch).

def _star_args():
    @opus.kernel
    def k(x: Ptr[f32],
          *rest):  # ERR: star-args
        pass


def _star_kwargs():
    @opus.kernel
    def k(x: Ptr[f32],
          **options):  # ERR: kwargs
        pass


def _unannotated():
    @opus.kernel
    def k(x: Ptr[f32],
          n):  # ERR: unannotated
        pass


def _python_type():
    @opus.kernel
    def k(x: Ptr[f32],
          n: int):  # ERR: python-type
        pass


def _unknown_string_annotation():
    @opus.kernel
    def k(x: Ptr[f32],
          y: "NoSuchType"):  # noqa: F821  # ERR: bad-string-annotation
        pass


@pytest.mark.parametrize("define,needles,tag", [
    (_star_args, ("*args/**kwargs parameters are not supported",), "star-args"),
    (_star_kwargs, ("*args/**kwargs parameters are not supported",), "kwargs"),
    (_unannotated, ("parameter 'n' needs an annotation", "opus.constexpr"), "unannotated"),
    (_python_type, ("parameter 'n' needs an annotation", "opus.i32"), "python-type"),
    (_unknown_string_annotation, ("cannot evaluate the annotation of 'y'", "NoSuchType"),
     "bad-string-annotation"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_parameters(define, needles, tag):
    with raises(opus.TraceError, *needles, at=tag):
        define()


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


def helper_reading_table(v):
    return v * TABLE[1]  # ERR: helper-global-list


@opus.kernel
def _helper_reads_list(x: Ptr[f32]):
    x[0] = helper_reading_table(x[1])


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


def inner_helper(v):
    return opus.make_vector(v, v) + v.no_such_attribute  # ERR: inner-helper


def outer_helper(v):
    w = v * 2.0
    return inner_helper(w)  # ERR: outer-helper


@opus.kernel
def _nested_helper_error(x: Ptr[f32]):
    x[0] = outer_helper(x[1])  # ERR: nested-caller


def helper_with_try(v):
    try:  # ERR: helper-try
        return v
    finally:
        pass


@opus.kernel
def _helper_try(x: Ptr[f32]):
    x[0] = helper_with_try(x[1])  # ERR: helper-try-caller


def returns_in_one_branch(v):
    if v > 0.0:  # ERR: one-sided-return
        return v


@opus.kernel
def _one_sided_return(x: Ptr[f32]):
    x[0] = returns_in_one_branch(x[1])


def returns_in_loop(x, n):
    for j in range(n):
        if j > 2:
            return x[j]  # ERR: return-in-loop
    return 0.0


@opus.kernel
def _return_in_loop(x: Ptr[f32], n: i32):
    x[0] = returns_in_loop(x, n)


def returns_two_shapes(v):
    if v > 0.0:  # ERR: two-shapes
        return v, v
    return v


@opus.kernel
def _two_shapes(x: Ptr[f32]):
    x[0] = returns_two_shapes(x[1])


def helper_with_global_statement(v):
    global G  # ERR: helper-global
    return v


@opus.kernel
def _helper_global(x: Ptr[f32]):
    x[0] = helper_with_global_statement(x[1])


@opus.kernel
def _inner_def_error(x: Ptr[f32], n: i32):
    def local_helper(v):
        return v + undefined_name  # noqa: F821  # ERR: inner-def
    x[0] = local_helper(x[1])


# -- Python's functions and opus names -----------------------------------------------------------

@opus.kernel
def _unknown_attribute(x: Ptr[f32]):
    x[0] = opus.exps(x[1])  # ERR: unknown-attr


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


# -- every case above that fails while tracing: the kernel, what the message names, the tag --

TRACE_CASES = [
    (_try, ("try/except is not supported",), "try"),
    (_global, ("global statements are not supported",), "global"),
    (_make_nonlocal(), ("nonlocal statements are not supported",), "nonlocal"),
    (_yield, ("yield is not supported", "generator"), "yield"),
    (_yield_from, ("yield is not supported",), "yield-from"),
    (_async_kernel, ("async def is not supported",), "async-kernel"),
    (_nested_async, ("async def is not supported",), "nested-async"),
    (_class, ("class definitions are not supported",), "class"),
    (_del, ("`del v` is not supported", "rebind"), "del"),
    (_match, ("match statements are not supported", "if/elif"), "match"),
    (_walrus, ("assignment expressions (:=) are not supported",), "walrus"),
    (_for_else, ("for/else is not supported",), "for-else"),
    (_while_else, ("while/else is not supported",), "while-else"),
    (_range_keyword, ("range() in a kernel's `for` takes 1 to 3 plain arguments",), "range-kw"),
    (_return_value, ("a kernel cannot return a value", "pointer parameter"), "return-value"),
    (_one_branch, ("'v'", "only one branch", f"line {line_of('one-branch') - 2}"), "one-branch"),
    (_before_assignment, ("'acc'", "used before it is assigned"), "before-assignment"),
    (_first_in_loop, ("'last'", "first assigned inside the run-time loop"), "first-in-loop"),
    (_scalar_to_vector, ("'acc' is f32 before the loop", "f32x2"), "scalar-to-vector"),
    (_signed_unsigned, ("'acc'", "i32", "u32"), "signed-unsigned"),
    (_static_changes, ("'mode'", "compile-time value that changes"), "static-changes"),
    (_branch_objects, ("'mode'", "different compile-time object"), "branch-objects"),
    (_runtime_break, ("break/continue", "compile-time range() bounds"), "runtime-break"),
    (_runtime_break_condition, ("break/continue", "compile-time condition"), "runtime-break-cond"),
    (_opus_range_break, ("opus.range cannot use break/continue",), "opus-range-break"),
    (_vector_if, ("`if` on a vector condition", "opus.select"), "vector-if"),
    (_vector_while, ("`while` on a vector condition",), "vector-while"),
    (_calls_kernel, ("_other", "cannot be launched from inside a kernel"), "call-kernel-inside"),
    (_closure_list_kernel(), ("variable 'offsets', a mutable list",), "closure-list"),
    (_helper_reads_list, ("global 'TABLE', a mutable list",), "helper-global-list"),
    (_helper_error, ("range arguments must be integers", "helper 'bad_bound'",
                     where("helper-caller")), "helper-bound"),
    (_nested_helper_error, ("no_such_attribute", "helper 'inner_helper'", where("outer-helper"),
                            where("nested-caller")), "inner-helper"),
    (_helper_try, ("try/except is not supported", where("helper-try-caller")), "helper-try"),
    (_one_sided_return, ("returns in only one branch of the run-time `if`",), "one-sided-return"),
    (_return_in_loop, ("cannot return from inside a run-time loop",), "return-in-loop"),
    (_two_shapes, ("returned value differs in structure",), "two-shapes"),
    (_helper_global, ("global statements are not supported",), "helper-global"),
    (_inner_def_error, ("NameError", "undefined_name", "helper 'local_helper'"), "inner-def"),
    (_float_bound, ("range arguments must be integers", "2.5"), "float-bound"),
    (_pointer_bound, ("range() bounds must be scalar integers", "ptr<f32"), "pointer-bound"),
    (_vector_bound, ("range() bounds must be scalar integers", "i32x2"), "vector-bound"),
    (_runtime_float_bound, ("range() bounds must be scalar integers", "got f32"),
     "runtime-float-bound"),
    (_math_exp, ("math.exp() was given a run-time value", "use opus.exp"), "math-exp"),
    (_numpy_sqrt, ("sqrt() was given a run-time value", "use opus.sqrt"), "numpy-sqrt"),
    (_builtin_max, ("max() was given a run-time value", "use opus.max"), "builtin-max"),
    (_builtin_int, ("int() was given a run-time value", "use opus.i32"), "builtin-int"),
    (_unknown_attribute, ("no attribute 'exps'", "did you mean opus.exp"), "unknown-attr"),
]


@pytest.mark.parametrize("k,needles,tag", TRACE_CASES, ids=[t for _, _, t in TRACE_CASES])
def test_trace_error(k, needles, tag):
    with raises(opus.TraceError, *needles, at=tag):
        trace(k)
