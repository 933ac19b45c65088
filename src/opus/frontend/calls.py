"""Calls in kernel code: helper functions, and the globals a trace reads.

The rewrite turns every call in kernel code into ``rt.call(f, *args, **kw)``. A plain Python
function of the user's (or one marked ``@opus.func``) is then rewritten like a kernel, once per
code object, and traced as a helper: run-time ``if``/``for``/``while`` work in it, errors point
at its own lines. Everything else is called as it is; a kernel launched from a kernel is an
error.

Every rewritten function runs with a namespace that reads through to its module's globals and
its closure cells and records what the trace read (``_Namespace``): compile-time data (numbers,
strings, tuples, ...) and other objects become the specialization's guards, so changing a
global retraces; code (modules, functions, classes, dtypes, kernels) is not guarded; mutable
containers are refused at the line that reads them. The user's own functions and dtypes are
guarded by identity (rebinding ``ACT = gelu`` or ``ACC = opus.f16`` retraces); library code is
not guarded.
"""
from __future__ import annotations

import enum
import functools
import inspect
import linecache
import math
import numbers
import os
import sys
import types

from ..dtypes import DType
from ..ir import Value
from ..lang.context import TraceError, ctx
from .rewrite import CodeInfo, Rewritten, SourceSnapshot, capture_source, rewrite_function

__all__ = ["Frame", "TraceState", "call", "func", "guards_hold", "same_data",
           "register_rewritten", "plain_code_info"]


# -- frames: one per call of a rewritten function being traced ------------------------------------

class Frame:
    """One call of the kernel or of a helper: the run-time regions (``"if"``/``"loop"``)
    opened inside it, and whether it has returned (``value``: what it returned)."""

    __slots__ = ("kind", "regions", "returned", "value")

    def __init__(self, kind):
        self.kind = kind  # "kernel" or "helper"
        self.regions = []
        self.returned = False
        self.value = None


class TraceState:
    """The frontend's state of one trace: frames, guards, and this trace's helper functions."""

    def __init__(self, rt, infos):
        self.rt = rt
        self.frames = []
        self.guards = {}   # (id of a globals dict or cell, name) -> guard
        self.bound = {}    # user function -> its rewritten function in this trace
        self.code_info = dict(infos)  # code object -> CodeInfo (what ctx.loc looks for)
        self.info_seen = set()

    def bind(self, fn, rewritten: Rewritten):
        """The rewritten ``fn``, reading its globals and closure through a recording namespace."""
        ns = _Namespace(self, fn)
        g = types.FunctionType(rewritten.factory, ns, "__opus_factory")(self.rt)
        g.__defaults__, g.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
        if id(rewritten) not in self.info_seen:
            self.info_seen.add(id(rewritten))
            self.code_info.update(rewritten.infos)
        self.bound[fn] = g
        return g

    def read(self, holder, key, name, value, from_cell):
        """A global (``holder[key]``) or closure cell (``holder``, key None) read as ``value``."""
        kind = _kind(value)
        if kind is _CODE and not _user_code(value):
            return
        if kind is _MUTABLE:
            raise TraceError(_mutable_message(name, value, from_cell))
        self.guards.setdefault((id(holder), key), (holder, key, value, kind is _DATA))


# -- the namespace rewritten functions run with -----------------------------------------------

class _Namespace(dict):
    """Globals of a rewritten function in one trace. CPython reads the globals of a function
    whose globals are a dict subclass through ``__getitem__``; functions, lambdas and
    comprehensions made inside inherit it."""

    __slots__ = ("_state", "_module", "_cells", "_builtins")

    def __init__(self, state, fn):
        super().__init__()
        self._state = state
        self._module = fn.__globals__
        self._cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        b = fn.__globals__.get("__builtins__", __builtins__)
        self._builtins = b if isinstance(b, dict) else b.__dict__
        dict.__setitem__(self, "__builtins__", self._builtins)

    def __getitem__(self, name):
        cell = self._cells.get(name)
        if cell is not None:
            try:
                value = cell.cell_contents
            except ValueError:
                raise NameError(f"{name!r} of the enclosing function is used before it is "
                                "assigned") from None
            self._state.read(cell, None, name, value, True)
            return value
        module = self._module
        if name in module:
            value = module[name]
            self._state.read(module, name, name, value, False)
            return value
        return self._builtins[name]  # KeyError: Python reports the name as not defined


_DATA, _CODE, _MUTABLE, _OBJECT = "data", "code", "mutable", "object"

_KIND_OF_TYPE = {int: _DATA, float: _DATA, bool: _DATA, str: _DATA, bytes: _DATA,
                 complex: _DATA, type(None): _DATA, type(Ellipsis): _DATA,
                 list: _MUTABLE, dict: _MUTABLE, set: _MUTABLE, bytearray: _MUTABLE,
                 types.ModuleType: _CODE, types.FunctionType: _CODE,
                 types.BuiltinFunctionType: _CODE, types.MethodType: _CODE, type: _CODE}


def _kind(value):
    """data: compared by value; code: not guarded (but see _user_code); mutable: refused;
    object: by identity."""
    t = type(value)
    k = _KIND_OF_TYPE.get(t)
    if k is not None:
        return k
    if t is tuple or t is frozenset:
        kinds = {_kind(v) for v in value}
        return _MUTABLE if _MUTABLE in kinds else _DATA
    k = _kind_of_new_type(t, value)
    if len(_KIND_OF_TYPE) < 4096:
        _KIND_OF_TYPE[t] = k
    return k


def _kind_of_new_type(t, value):
    if isinstance(value, type) or callable(value):
        return _CODE  # classes, functions, dtypes, kernels, MMA atoms, partials
    if isinstance(value, (numbers.Number, enum.Enum)):
        return _DATA  # numpy scalars too
    if any(hasattr(t, a) for a in ("__array_interface__", "__cuda_array_interface__",
                                   "__dlpack__", "__array__", "__setitem__")):
        return _MUTABLE  # arrays, tensors, and other containers that can change
    return _OBJECT


def _user_code(value):
    """Code a kernel's result depends on and a user may rebind: their own functions (helpers,
    epilogues) and dtypes (``ACC = opus.f32``). Guarded by identity, so rebinding the global
    retraces; library functions, modules and classes are not guarded."""
    if type(value) is types.FunctionType:
        return _is_user_file(value.__code__.co_filename) or hasattr(value, _FUNC_ATTR)
    return isinstance(value, DType)


def _mutable_message(name, value, from_cell):
    what = "variable" if from_cell else "global"
    return (f"kernel code reads the {what} {name!r}, a mutable {type(value).__name__}: a change "
            f"to it after the kernel is compiled could not be seen. Use a tuple (or another "
            f"immutable value) or pass it as an opus.constexpr parameter")


def same_data(a, b):
    """Equal, and of the same types (2, 2.0 and True trace differently; so do 0.0 and -0.0,
    and namedtuples whose fields differ so)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(same_data, a, b))
    return bool(a == b) and negative_zero(a) == negative_zero(b)


def negative_zero(x) -> bool:
    """x is a float -0.0 (numpy's too): equal to 0.0, but 1.0 / x traces otherwise."""
    t = type(x)
    if t is not float:  # on the launch path: the ABC checks once per type
        floating = _FLOATING.get(t)
        if floating is None:
            floating = isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral)
            if len(_FLOATING) < 4096:
                _FLOATING[t] = floating
        if not floating:
            return False
    return x == 0 and math.copysign(1.0, x) < 0


_FLOATING = {}  # type -> is it a real, non-integral number type (negative_zero)


def guards_hold(guards) -> bool:
    """Do the globals and closure variables a trace read still hold what it saw?"""
    for holder, key, value, by_value in guards:
        try:
            now = holder[key] if key is not None else holder.cell_contents
        except (KeyError, ValueError):
            return False
        if now is not value and not (by_value and same_data(now, value)):
            return False
    return True


# -- which functions are helpers ----------------------------------------------------------------

_UNSEEN = object()
_ALREADY = "already rewritten"  # a function defined inside rewritten code
# id(code object) -> (that code object, kept alive so that its id stays its own; Rewritten,
# _ALREADY or None: call it as it is). Keyed by identity: code objects of the same text in two
# files compare equal (CPython's code equality leaves out the file name), but each has its own
# file, source and user/library status (and an id is cheaper to hash than a code object)
_CONVERSIONS = {}
_FUNC_ATTR = "__opus_func__"
_NOT_REWRITTEN = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE
                  | inspect.CO_ASYNC_GENERATOR)


def register_rewritten(rewritten: Rewritten):
    """Functions defined inside ``rewritten`` are rewritten already: calls run them as helpers."""
    for code, info in rewritten.infos.items():
        if info.top:
            _CONVERSIONS[id(code)] = (code, _ALREADY)


# Library code: opus itself, the standard library, and installed packages (found by the folder
# names installers use, which spares a fresh process sysconfig's ~1-2 ms import).
_LIBRARY_DIRS = tuple(os.path.realpath(d) + os.sep for d in (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(os.__file__)))
_PACKAGE_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


@functools.lru_cache(maxsize=1024)
def _is_user_file(filename):
    if filename.startswith("<"):
        return bool(linecache.getlines(filename))  # notebook cells are; exec'd strings are not
    path = os.path.realpath(filename)
    return not (path.startswith(_LIBRARY_DIRS) or any(d in path for d in _PACKAGE_DIRS))


def plain_code_info(code):
    """CodeInfo for the code of a user function called as it is (a lambda, a generator), so
    that an error inside it points at its line; None for library code."""
    if not _is_user_file(code.co_filename):
        return None
    lines = linecache.getlines(code.co_filename)
    return CodeInfo(code.co_name, "function", SourceSnapshot(code.co_filename,
                                                             code.co_firstlineno, lines), True)


def _conversion(fn):
    """How a call of the function ``fn`` runs (cached per code object: ``_known``)."""
    code = fn.__code__
    explicit = getattr(fn, _FUNC_ATTR, None)
    if explicit is None and (code.co_name == "<lambda>" or not _is_user_file(code.co_filename)):
        conv = None
    elif code.co_flags & _NOT_REWRITTEN or "__class__" in code.co_freevars:
        conv = None  # generators (compile-time iteration), coroutines, methods using super()
    else:
        source = explicit if explicit is not None else capture_source(fn, False)
        if explicit is None and not source.lines:
            conv = None  # its file is gone: called as it is
        else:
            conv = rewrite_function(fn, source, "helper")
            register_rewritten(conv)
    _CONVERSIONS[id(code)] = (code, conv)
    return conv


def _known(code):
    """The cached conversion of ``code``, or _UNSEEN."""
    entry = _CONVERSIONS.get(id(code))
    return _UNSEEN if entry is None else entry[1]


def call(f, /, *args, **kw):
    """``f(*args, **kw)`` in kernel code."""
    t = type(f)
    if t is types.FunctionType:
        conv = _known(f.__code__)
        if conv is _UNSEEN:
            conv = _conversion(f)
        if conv is not None:
            return _call_helper(f, conv, args, kw)
    elif t is types.MethodType and type(f.__func__) is types.FunctionType:
        fn = f.__func__
        conv = _known(fn.__code__)
        if conv is _UNSEEN:
            conv = _conversion(fn)
        if conv is not None:
            return _call_helper(fn, conv, (f.__self__,) + args, kw)
    elif t is functools.partial:
        return call(f.func, *f.args, *args, **{**f.keywords, **kw})
    elif getattr(t, "_opus_launch_only", False):
        raise TraceError(f"{f!r} cannot be launched from inside a kernel (kernels cannot launch "
                         "kernels); call a helper function instead (a plain Python function, "
                         "or one decorated with @opus.func)")
    try:
        return f(*args, **kw)
    except Exception:
        hint = _runtime_value_hint(f, args, kw)
        if hint is None:
            raise
        raise TraceError(hint) from None


def _call_helper(fn, conv, args, kw):
    state = ctx().frontend
    if conv is _ALREADY:
        g = fn
    else:
        g = state.bound.get(fn)
        if g is None:
            g = state.bind(fn, conv)
    state.frames.append(Frame("helper"))
    try:
        return g(*args, **kw)
    finally:
        state.frames.pop()


# -- run-time values given to Python's own functions --------------------------------------------

# builtins (and math names) whose run-time counterpart is not opus.<same name>
_OPUS_FOR = {"max": "opus.max", "min": "opus.min", "round": "opus.rint", "int": "opus.i32",
             "float": "opus.f32", "sum": "+ in a loop", "fabs": "abs(x)",
             "bool": "a comparison (x != 0): a run-time value has no compile-time truth value"}
_NUMERIC_MODULES = ("math", "cmath", "builtins", "numpy", "statistics")


def _has_value(x):
    if isinstance(x, Value):
        return True
    return isinstance(x, (tuple, list)) and any(isinstance(v, Value) for v in x)


def _runtime_value_hint(f, args, kw):
    """The message for Python's math given a run-time value, or None."""
    module = getattr(f, "__module__", None) or ""
    name = getattr(f, "__name__", repr(f))
    if module.split(".")[0] not in _NUMERIC_MODULES or (module == "builtins"
                                                        and name not in _OPUS_FOR):
        return None
    if not any(map(_has_value, args)) and not any(map(_has_value, kw.values())):
        return None
    alt = _OPUS_FOR.get(name)
    if alt is None:
        opus = sys.modules.get("opus")
        alt = f"opus.{name}" if opus is not None and hasattr(opus, name) else None
    use = (f"use {alt}" if alt else "opus has no run-time version of it; compute it from opus "
           "functions")
    shown = name if module == "builtins" else f"{module}.{name}"
    return (f"{shown}() was given a run-time value: Python's functions run while the kernel is "
            f"traced and cannot compute with run-time values; {use}")


# -- @opus.func -------------------------------------------------------------------------------

def func(fn):
    """Mark ``fn`` as a helper for kernels (``@opus.func``): a kernel calling it traces it with
    the kernel's control flow, as it does any plain Python function of yours; the mark also
    covers functions in installed packages, and reads the source now.

    :param fn: the helper, defined with ``def``
    :type fn: function
    :returns: ``fn`` unchanged, still callable from Python
    :rtype: function
    :targets: all targets
    """
    if type(fn) is not types.FunctionType or fn.__code__.co_name == "<lambda>":
        raise TypeError(f"@opus.func decorates a function defined with def, got {fn!r}")
    setattr(fn, _FUNC_ATTR, capture_source(fn))
    return fn
