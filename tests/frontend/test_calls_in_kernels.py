"""How kernel code calls things (frontend/calls.py) and the inspection and key errors of
frontend/kernel.py, each against an answer worked out by hand: which functions are rewritten as
helpers (user code, @opus.func even in an installed package, not generators or methods using
super()), partials with positional arguments, a kernel called from a kernel, the snapshot
@opus.func takes, negative zero on every float type, and the words of the refusals."""
import functools
import importlib
import linecache
import sys

import numpy as np
import pytest

import opus
from opus import f32, Ptr
from opus.frontend import calls
from opus.frontend.calls import negative_zero, plain_code_info
from opus.targets import get_target

HELPER = '''import opus


@opus.func
def bump(v):
    if v > 0.0:
        v = v + 1.0
    return v
'''


def _module(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text)
    sys.path.insert(0, str(folder))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(name), path
    finally:
        sys.path.remove(str(folder))


def _apply(helper, x):
    @opus.kernel
    def k(a: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()
        out[t] = helper(a[t])
    out = np.zeros(len(x), np.float32)
    k[1, len(x)](x, out)
    return out


def test_opus_func_marks_a_helper_in_an_installed_package(tmp_path):
    """Library code is called as it is, but @opus.func rewrites it: its run-time `if` works."""
    mod, _ = _module(tmp_path / "site-packages", "opus_mark_pkg", HELPER)
    x = np.array([-2.0, 3.0], np.float32)
    np.testing.assert_array_equal(_apply(mod.bump, x), [-2.0, 4.0])


def test_opus_func_keeps_the_source_it_read_when_decorated(tmp_path):
    """The helper's file edited afterwards (+ 1.0 to + 10.0): the kernel traces the text read
    at decoration, which is the code Python runs for it too."""
    text = HELPER.replace("bump", "bump_edited")
    mod, path = _module(tmp_path, "opus_mark_edit", text)
    old = mod.bump_edited
    path.write_text(text.replace("v + 1.0", "v + 10.0"))
    linecache.checkcache(str(path))
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.reload(mod)   # the new text is now the file's, and the new bump's
    finally:
        sys.path.remove(str(tmp_path))
    x = np.array([-2.0, 3.0], np.float32)
    np.testing.assert_array_equal(_apply(old, x), [-2.0, 4.0])
    assert old(3.0) == 4.0
    np.testing.assert_array_equal(_apply(mod.bump_edited, x), [-2.0, 13.0])


def test_a_helper_whose_file_is_gone_is_called_as_it_is(tmp_path):
    mod, path = _module(tmp_path, "opus_gone_helper", "def twice(v):\n    return v * 2.0\n")
    path.unlink()
    linecache.clearcache()
    x = np.array([1.5, -4.0], np.float32)
    np.testing.assert_array_equal(_apply(mod.twice, x), [3.0, -8.0])


def _squares(n):
    for i in range(n):
        yield i * i


class Base:
    def scale(self, v):
        return v * 3.0


class Derived(Base):
    def scale(self, v):
        return super().scale(v) + 1.0


def test_generators_and_methods_using_super_are_called_as_they_are():
    """A generator iterates at compile time; a method calling super() keeps its class cell
    (neither can be rewritten)."""
    @opus.kernel
    def k(a: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()
        acc = a[t]
        for s in _squares(4):      # 0 + 1 + 4 + 9
            acc = acc + f32(s)
        out[t] = Derived().scale(acc)
    x = np.array([1.0, -2.0], np.float32)
    out = np.zeros(2, np.float32)
    k[1, 2](x, out)
    np.testing.assert_array_equal(out, (x + 14.0) * 3.0 + 1.0)


def _affine(a, b, v):
    return a * v + b


def test_partials_pass_their_positional_and_keyword_arguments():
    first = functools.partial(_affine, 2.0)            # a = 2
    both = functools.partial(_affine, 3.0, b=-1.0)     # a = 3, b = -1

    @opus.kernel
    def k(x: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()
        out[t] = first(0.5, x[t]) + both(v=x[t])
    x = np.array([1.0, 2.0], np.float32)
    out = np.zeros(2, np.float32)
    k[1, 2](x, out)
    np.testing.assert_array_equal(out, (2.0 * x + 0.5) + (3.0 * x - 1.0))


@opus.kernel
def _inner(a: Ptr[f32]):
    a[0] = 1.0


def test_a_kernel_called_from_a_kernel_is_refused_with_what_to_do():
    @opus.kernel
    def outer(a: Ptr[f32]):
        _inner(a)
    with pytest.raises(opus.TraceError) as e:
        outer[1, 1](np.zeros(1, np.float32))
    assert ("<opus.kernel _inner> cannot be launched from inside a kernel (kernels cannot "
            "launch kernels); call a helper function instead (a plain Python function, or one "
            "decorated with @opus.func)") in str(e.value)


def test_negative_zero_on_every_float_type(monkeypatch):
    monkeypatch.setattr(calls, "_FLOATING", {})   # the per-type memo, empty
    assert not negative_zero(np.int32(0)) and not negative_zero(0) and not negative_zero(False)
    for neg in (-0.0, np.float32(-0.0), np.float64(-0.0), np.float16(-0.0)):
        assert negative_zero(neg), type(neg)
    for other in (0.0, np.float32(0.0), -1.0, np.float16(-2.0), -0j, complex(0.0, -0.0), "0"):
        assert not negative_zero(other), other
    assert not negative_zero(np.int32(0))          # again, now memoized


def test_code_info_of_a_user_function_called_as_it_is():
    fn = lambda v: v   # noqa: E731
    info = plain_code_info(fn.__code__)
    assert (info.name, info.kind, info.top) == ("<lambda>", "function", True)
    assert info.source.filename == __file__
    assert info.source.first_line == fn.__code__.co_firstlineno
    assert "fn = lambda v: v" in "".join(info.source.lines)
    assert plain_code_info(functools.reduce.__code__ if hasattr(functools.reduce, "__code__")
                           else importlib.import_module.__code__) is None   # library code


@opus.kernel
def _three(out: Ptr[f32], A: opus.constexpr, B: opus.constexpr = 2, C: opus.constexpr = 1):
    out[0] = f32(A + B + C)


def test_unhashable_constexprs_are_named():
    with pytest.raises(opus.ArgumentError) as e:
        with opus.set_target("sm_80", interpret=True):
            _three[1, 1](np.zeros(1, np.float32), [1], 2, {3: 4})
    assert str(e.value) == ("kernel '_three': constexpr parameter(s) A, C must be hashable "
                            "(ints, floats, tuples, dtypes, ...)")


def test_inspection_errors_name_the_constexprs():
    with pytest.raises(opus.ArgumentError) as e:
        _three.source(target="sm_80")
    assert str(e.value) == "kernel '_three': give constexpr A=... to inspect it"
    with pytest.raises(opus.ArgumentError) as e:
        _three.source(target="sm_80", A=1, Z=2, Y=3)
    assert str(e.value) == "kernel '_three': unknown constexpr(s) Y, Z"


def test_specialize_for_a_target_object_or_the_current_one():
    with opus.set_target("sm_90a", interpret=True):
        assert _three.specialize(get_target("sm_80"), A=1).target.name == "sm_80"
        assert _three.specialize("gfx942", A=1).target.name == "gfx942"
        assert _three.specialize(A=1).target.name == "sm_90a"


# The same helper text in two files: the code objects compare equal (CPython's code equality
# leaves out the file name), but each is its own function, with its own file and globals.
TWIN = '''SCALE = {scale}


def twin(v, big):
    if big:
        v = v * SCALE
    if v > 0.0:
        v = v + 1.0
    return v
'''
_TWIN_SCALE_LINE = 6   # `v = v * SCALE` in TWIN


def _twins(tmp_path, tag, scale_a, scale_b, folder_a="a"):
    a, path_a = _module(tmp_path / folder_a, f"opus_twin_{tag}_a", TWIN.format(scale=scale_a))
    b, path_b = _module(tmp_path / "b", f"opus_twin_{tag}_b", TWIN.format(scale=scale_b))
    assert a.twin.__code__ == b.twin.__code__   # what made them share one rewrite
    return a, path_a, b, path_b


def _apply_big(helper, x):
    @opus.kernel
    def k(a: Ptr[f32], out: Ptr[f32]):
        t = opus.thread_id_x()
        out[t] = helper(a[t], True)
    out = np.zeros(len(x), np.float32)
    k[1, len(x)](x, out)
    return out


def test_twin_helpers_in_two_files_each_read_their_globals_and_name_their_file(tmp_path):
    a, _, b, path_b = _twins(tmp_path, "files", "2.0", "3.0")
    _, _, c, path_c = _twins(tmp_path, "list", "2.0", "[3.0]")
    x = np.array([-1.0, 2.0], np.float32)
    np.testing.assert_array_equal(_apply_big(a.twin, x), [-2.0, 5.0])   # v * 2 (+ 1 if > 0)
    np.testing.assert_array_equal(_apply_big(b.twin, x), [-3.0, 7.0])   # v * 3 (+ 1 if > 0)
    with pytest.raises(opus.TraceError) as e:   # c's SCALE is a list: refused at c's line
        _apply_big(c.twin, x)
    assert str(e.value).startswith(f"{path_c}:{_TWIN_SCALE_LINE} (kernel 'k'): kernel code "
                                   "reads the global 'SCALE', a mutable list")


def test_a_user_helper_is_rewritten_after_its_library_twin_was_called_as_it_is(tmp_path):
    lib, _, user, _ = _twins(tmp_path, "lib", "2.0", "2.0", folder_a="site-packages")
    x = np.array([-1.0, 2.0], np.float32)
    with pytest.raises(opus.TraceError, match="no compile-time truth value"):
        _apply_big(lib.twin, x)   # library code runs as it is: its run-time `if` cannot
    np.testing.assert_array_equal(_apply_big(user.twin, x), [-2.0, 5.0])

