"""Binding a launch's arguments (Kernel.bind) agrees with Python's own binding of the kernel's
signature (inspect.Signature.bind + apply_defaults), for every call shape, in any keyword
order, and fails with ArgumentError exactly where Python raises TypeError."""
import inspect
import itertools

import pytest

import opus


@opus.kernel
def many(x: opus.Ptr[opus.f32], n: opus.i32, scale: opus.f32 = 2.0, A: opus.constexpr = 4,
         B: opus.constexpr = (1, 2)):
    pass


@opus.kernel
def no_defaults(x: opus.Ptr[opus.f32], n: opus.i32, A: opus.constexpr):
    pass


def _python(k, args, kwargs):
    b = inspect.signature(k.fn).bind(*args, **kwargs)
    b.apply_defaults()
    return tuple(b.arguments.values())


def _shapes(k):
    names = [p.name for p in k.params]
    values = {n: f"v_{n}" for n in names}
    for npos in range(len(names) + 2):
        pos = tuple(values.get(n, "extra") for n in names[:npos]) + (("extra",) if npos > len(names) else ())
        for nkw in range(0, 3):
            for kw in itertools.permutations(names + ["nope"], nkw):
                yield pos, {n: f"kw_{n}" for n in kw}


@pytest.mark.parametrize("k", [many, no_defaults], ids=["many", "no_defaults"])
def test_bind_matches_python(k):
    checked = 0
    for args, kwargs in _shapes(k):
        for _ in range(2):  # the second time through the cached plan
            try:
                want = _python(k, args, kwargs)
            except TypeError:
                with pytest.raises(opus.ArgumentError):
                    k.bind(args, dict(kwargs))
                continue
            assert k.bind(args, dict(kwargs)) == want, (args, kwargs)
            checked += 1
    assert checked >= 8  # valid shapes were among them, not only errors


def test_bind_leaves_the_callers_kwargs_alone():
    kw = {"n": 3, "A": 8}
    assert many.bind(("x",), kw) == ("x", 3, 2.0, 8, (1, 2))
    assert kw == {"n": 3, "A": 8}


@opus.kernel
def one(x: opus.Ptr[opus.f32]):
    pass


@opus.kernel
def two(x: opus.Ptr[opus.f32], A: opus.constexpr = 3):
    pass


@pytest.mark.parametrize("k", [one, two], ids=["one", "two"])
def test_bind_of_one_and_two_parameters_gives_a_tuple(k):
    """The plan picks with one itemgetter, which returns a bare value for one index: a kernel
    of one parameter (or a call naming one) still binds to a tuple."""
    for _ in range(2):
        assert k.bind((), {"x": "v"}) == (("v",) if k is one else ("v", 3))
        assert k.bind(("v",), {}) == (("v",) if k is one else ("v", 3))
    assert two.bind((), {"A": 5, "x": "v"}) == ("v", 5)


def test_binding_errors_name_the_arguments():
    with pytest.raises(opus.ArgumentError) as e:
        many.bind((1, 2, 3, 4, 5, 6), {})
    assert str(e.value) == "kernel 'many' takes 5 arguments, got 6"
    with pytest.raises(opus.ArgumentError) as e:
        many.bind((1, 2), {"zz": 0, "x": 1, "n": 2})
    assert str(e.value) == "kernel 'many': unexpected or repeated argument(s) n, x, zz"
    with pytest.raises(opus.ArgumentError) as e:
        no_defaults.bind(("x",), {"A": 1})
    assert str(e.value) == "kernel 'no_defaults': missing argument for parameter 'n'"


def test_bind_of_kernels_defined_here_matches_python():
    """The same check on kernels made inside the test: their defaults' tails are computed
    while it runs (the module-level ones were made at import)."""
    @opus.kernel
    def fresh_defaults(x: opus.Ptr[opus.f32], n: opus.i32, s: opus.f32 = 1.0,
                       A: opus.constexpr = 2, B: opus.constexpr = 3):
        pass

    @opus.kernel
    def fresh_required(x: opus.Ptr[opus.f32], s: opus.f32 = 1.0, A: opus.constexpr = 2,
                       B: opus.constexpr = None):
        pass

    @opus.kernel
    def fresh_scalar_last(x: opus.Ptr[opus.f32], s: opus.f32 = 1.0, A: opus.constexpr = 4,
                          n: opus.i32 = 5):
        pass
    @opus.kernel
    def fresh_no_defaults(x: opus.Ptr[opus.f32], n: opus.i32, A: opus.constexpr):
        pass
    for k in (fresh_defaults, fresh_required, fresh_scalar_last, fresh_no_defaults):
        test_bind_matches_python(k)
    assert fresh_defaults.bind(("x", 1), {}) == ("x", 1, 1.0, 2, 3)
    with pytest.raises(opus.ArgumentError):
        fresh_defaults.bind(("x",), {})
