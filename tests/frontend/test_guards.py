"""The pieces of a specialization's guards (frontend/calls.py), against hand-written answers:
which values are compared by value, by identity, not at all or refused (_kind_of_new_type);
when two constexpr or global values count as the same (same_data: same types, -0.0 apart from
0.0, tuples element by element); when a trace's guards still hold (guards_hold); and the words
of the refusal of a mutable global or closure variable."""
import enum
import functools
from collections import namedtuple

import numpy as np

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
