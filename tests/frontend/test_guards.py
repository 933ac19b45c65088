"""The pieces of a specialization's guards (frontend/calls.py), against hand-written answers:
which values are compared by value, by identity, not at all or refused (_kind_of_new_type);
when two constexpr or global values count as the same (same_data: same types, -0.0 apart from
0.0, tuples element by element); when a trace's guards still hold (guards_hold); and the words
of the refusal of a mutable global or closure variable."""
import enum
import functools
from collections import namedtuple

import numpy as np
import pytest

from opus import dtypes as dt
from opus.frontend.calls import (_CODE, _DATA, _MUTABLE, _OBJECT, _has_value, _kind_of_new_type,
                                 _mutable_message, guards_hold, same_data)
from opus.ir import Value

Pair = namedtuple("Pair", "a b")


class Colour(enum.Enum):
    RED = 1


class Callable:
    def __call__(self):
        return 1


def _with(*attrs):
    """An instance of a fresh class having just these attributes (each None)."""
    return type("Probe", (), dict.fromkeys(attrs))()


def test_kinds_of_values_a_trace_may_read():
    assert _kind_of_new_type(type, Colour) == _CODE                      # a class
    assert _kind_of_new_type(Callable, Callable()) == _CODE               # a callable object
    assert _kind_of_new_type(functools.partial, functools.partial(print)) == _CODE
    assert _kind_of_new_type(np.float32, np.float32(1.5)) == _DATA
    assert _kind_of_new_type(Colour, Colour.RED) == _DATA
    assert _kind_of_new_type(np.ndarray, np.zeros(2)) == _MUTABLE
    for attr in ("__array_interface__", "__cuda_array_interface__", "__dlpack__", "__array__",
                 "__setitem__"):
        probe = _with(attr)
        assert _kind_of_new_type(type(probe), probe) == _MUTABLE, attr
    plain = _with("something_else")
    assert _kind_of_new_type(type(plain), plain) == _OBJECT


def test_same_data_means_equal_and_of_the_same_types():
    for a, b in [(2, 2), (2.5, 2.5), (-0.0, -0.0), ("ab", "ab"), ((1, (2, "x")), (1, (2, "x"))),
                 (Pair(1, 2), Pair(1, 2)), (np.float32(-0.0), np.float32(-0.0)), ((), ())]:
        assert same_data(a, b), (a, b)
    for a, b in [(2, 2.0), (True, 1), (0.0, -0.0), (np.float32(0.0), np.float32(-0.0)),
                 ((1, 2), (1, 3)), ((1, 2), (1, 2, 3)), ((1, 2.0), (1, 2)), ((1, 2), Pair(1, 2)),
                 ((-0.0,), (0.0,)), (2, "2"), (None, 0)]:
        assert not same_data(a, b), (a, b)


def test_guards_hold_while_globals_keep_their_values():
    g = {"N": 4, "ACC": dt.f32, "T": (1, 2.0)}
    guards = [(g, "N", 4, True), (g, "ACC", dt.f32, False), (g, "T", (1, 2.0), True)]
    assert guards_hold(guards)
    g["T"] = (1, 2.0)             # an equal new tuple: compared by value
    assert guards_hold(guards)
    g["T"] = (1, 2)               # equal, but an int where a float was
    assert not guards_hold(guards)
    g["T"] = (1, 2.0)
    g["N"] = 4.0
    assert not guards_hold(guards)
    g["N"] = 4
    g["ACC"] = dt.f16             # compared by identity
    assert not guards_hold(guards)
    g["ACC"] = dt.f32
    del g["N"]                    # a global deleted
    assert not guards_hold(guards)


def test_guards_on_closure_cells():
    def outer(v):
        def inner():
            return v
        return inner.__closure__[0]
    cell = outer(0.5)
    assert guards_hold([(cell, None, 0.5, True)])
    assert not guards_hold([(cell, None, -0.5, True)])
    cell.cell_contents = 0.5
    assert guards_hold([(cell, None, 0.5, True)])
    del cell.cell_contents       # an emptied cell: ValueError when read
    assert not guards_hold([(cell, None, 0.5, True)])


def test_the_refusal_of_a_mutable_value_says_which_kind_of_name():
    assert _mutable_message("TABLE", [1], False) == (
        "kernel code reads the global 'TABLE', a mutable list: a change to it after the kernel is "
        "compiled could not be seen. Use a tuple (or another immutable value) or pass it as an "
        "opus.constexpr parameter")
    assert _mutable_message("offs", {}, True).startswith(
        "kernel code reads the variable 'offs', a mutable dict: ")


def test_run_time_values_in_arguments():
    v = Value(dt.f32)
    assert _has_value(v) and _has_value((1, v)) and _has_value([v])
    assert not _has_value((1, 2)) and not _has_value([]) and not _has_value(3)


# -- type signatures, value kinds of tuples and new types, user code ----------------------------

def test_type_signature_by_hand():
    from opus.frontend.kernel import type_signature
    assert type_signature(2) is int and type_signature("a") is str and type_signature(0.0) is float
    assert type_signature(-0.0) == (float, "-0")
    assert type_signature(np.float32(-0.0)) == (np.float32, "-0")
    assert type_signature((1, (-0.0, 2.0))) == (int, ((float, "-0"), float))
    assert type_signature(Pair(1, 2.0)) == (Pair, (int, float))


def test_kinds_of_tuples_and_of_types_seen_the_first_time():
    from opus.frontend.calls import _kind
    assert _kind((1, "a", (2.0,))) == _DATA and _kind(frozenset({1, 2})) == _DATA
    assert _kind((1, [2])) == _MUTABLE and _kind(((), ({},))) == _MUTABLE

    class Fresh:          # a type _kind has not seen: asked of _kind_of_new_type with the value
        def __call__(self):
            return 0
    assert _kind(Fresh()) == _CODE and _kind(Fresh()) == _CODE   # and again, memoized

    class Number(float):
        pass
    assert _kind(Number(1.0)) == _DATA


def test_user_code_is_guarded_library_code_is_not(tmp_path):
    import json
    from opus.frontend.calls import _user_code
    assert _user_code(test_user_code_is_guarded_library_code_is_not)   # this file's function
    assert _user_code(dt.f16)                                         # a dtype
    assert not _user_code(json.dumps) and not _user_code(np.sum) and not _user_code(dict)
    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "opus_guard_pkg.py").write_text("import opus\n\n\n@opus.func\ndef marked(v):\n"
                                              "    return v\n\n\ndef plain(v):\n    return v\n")
    import importlib
    import sys
    sys.path.insert(0, str(folder))
    try:
        mod = importlib.import_module("opus_guard_pkg")
    finally:
        sys.path.remove(str(folder))
    assert _user_code(mod.marked) and not _user_code(mod.plain)   # @opus.func marks it


# -- retracing: what a trace read, per closure cell, per target -----------------------------------

def _closure_kernel():
    import opus
    a, b = 1.0, 2.0

    @opus.kernel
    def k(out: opus.Ptr[opus.f32]):
        out[0] = opus.f32(a) + opus.f32(b)

    def set_b(v):
        nonlocal b
        b = v
    return k, set_b


def test_every_closure_variable_a_trace_reads_is_guarded():
    import opus
    k, set_b = _closure_kernel()
    out = np.zeros(1, np.float32)
    with opus.set_target("sm_80", interpret=True):
        k[1, 1](out)
        assert out[0] == 3.0
        set_b(5.0)        # the second of two cells
        k[1, 1](out)
        assert out[0] == 6.0


SCALE = 2.0


def _scaled_kernel():
    import opus

    @opus.kernel
    def k(out: opus.Ptr[opus.f32]):
        out[0] = opus.f32(SCALE)
    return k


def test_an_equal_global_keeps_its_specialization_and_each_target_its_own():
    global SCALE
    k = _scaled_kernel()
    s80 = k.specialize("sm_80")
    SCALE = float("2.0")                    # a new float object, equal: data is compared by value
    assert k.specialize("sm_80") is s80
    SCALE = 3.0
    s80_3 = k.specialize("sm_80")
    assert s80_3 is not s80 and s80_3.target.name == "sm_80"
    SCALE = 2.0                             # back: the earlier specialization again
    assert k.specialize("sm_80") is s80
    SCALE = 3.0
    assert k.specialize("sm_80") is s80_3
    SCALE = 2.0
    # another target under today's values: its own specialization, never sm_80's
    assert k.specialize("sm_90a").target.name == "sm_90a"
    SCALE = 2.0


def test_names_a_kernel_cannot_find():
    import opus

    @opus.kernel
    def k(out: opus.Ptr[opus.f32]):
        out[0] = opus.f32(not_defined_anywhere)   # noqa: F821
    with pytest.raises(Exception) as e:
        k.specialize("sm_80")
    assert "not_defined_anywhere" in str(e.value) and isinstance(e.value, (NameError,
                                                                            opus.TraceError))
    assert not isinstance(e.value, TypeError)

    def make():
        @opus.kernel
        def late_reader(out: opus.Ptr[opus.f32]):
            out[0] = opus.f32(late)
        try:
            late_reader.specialize("sm_80")
        finally:
            late = 1.0   # noqa: F841  (assigned only after the trace)
    with pytest.raises(Exception) as e:
        make()
    assert "'late' of the enclosing function is used before it is assigned" in str(e.value)


def test_a_kernel_whose_globals_hold_the_builtins_module(tmp_path):
    """In a script (__main__) a module's __builtins__ is the builtins module, elsewhere its
    dict: kernel code finds min() either way."""
    import builtins
    import opus
    path = tmp_path / "opus_script_kernel.py"
    text = ("import opus\n\n\n@opus.kernel\ndef k(out: opus.Ptr[opus.f32]):\n"
            "    out[0] = opus.f32(min(7, 3))\n")
    path.write_text(text)
    scope = {"__builtins__": builtins, "__name__": "__main__"}
    exec(compile(text, str(path), "exec"), scope)
    out = np.zeros(1, np.float32)
    with opus.set_target("sm_80", interpret=True):
        scope["k"][1, 1](out)
    assert out[0] == 3.0


# -- Python's math given a run-time value: the hint -------------------------------------------------

_TAIL = ("was given a run-time value: Python's functions run while the kernel is traced and "
         "cannot compute with run-time values; ")


def test_the_hint_for_pythons_math_on_run_time_values():
    import math
    from opus.frontend.calls import _runtime_value_hint as hint
    v = Value(dt.f32)
    assert hint(math.exp, (v,), {}) == "math.exp() " + _TAIL + "use opus.exp"
    assert hint(max, (1.0, v), {}) == "max() " + _TAIL + "use opus.max"
    assert hint(np.sqrt, ((v, 2.0),), {}) == "numpy.sqrt() " + _TAIL + "use opus.sqrt"
    assert hint(math.exp, (), {"x": v}) == "math.exp() " + _TAIL + "use opus.exp"   # by keyword
    assert hint(math.lgamma, (v,), {}) == (
        "math.lgamma() " + _TAIL + "opus has no run-time version of it; compute it from opus "
        "functions")
    assert hint(np.linalg.norm, (v,), {}) == (
        "numpy.linalg.norm() " + _TAIL + "opus has no run-time version of it; compute it from "
        "opus functions")

    class NamelessMath:                   # a callable of a numeric module without a __name__
        __module__ = "math"
    f = NamelessMath()
    assert hint(f, (v,), {}) == f"math.{f!r}() " + _TAIL + (
        "opus has no run-time version of it; compute it from opus functions")
    # no hint: no run-time value, a builtin with no run-time counterpart, other modules, objects
    # without a module
    import json
    assert hint(math.exp, (1.0,), {"x": 2}) is None
    assert hint(len, (v,), {}) is None and hint(json.dumps, (v,), {}) is None
    assert hint(object(), (v,), {}) is None


def test_an_error_of_pythons_math_on_compile_time_values_is_the_users():
    import math
    import opus

    @opus.kernel
    def k(out: opus.Ptr[opus.f32]):
        out[0] = opus.f32(math.sqrt(-1.0))
    with pytest.raises(opus.TraceError) as e:   # at the user's line, as Python said it
        k.specialize("sm_80")
    assert "ValueError: math domain error" in str(e.value)
