"""The public API is opus.__all__, and every name in it is documented.

Each callable or class in ``opus.__all__`` has its own docstring with a ``:param p:`` and a
``:type p:`` line for every parameter of its signature, ``:returns:`` where it returns a value,
and a ``:targets:`` line saying which targets have it. Where availability differs between
targets, the ``:targets:`` line must name exactly the targets that lack it according to the
target table (opus.targets), which this test asks independently. docs/api.md is generated from
these docstrings (tools/gen_api_docs.py) and must be up to date.
"""
import ast
import importlib.util
import inspect
import pathlib
import re
import textwrap

import pytest

import opus
from opus import dtypes as dt
from opus.targets import get_target
from opus.targets.amd import AMD_ARCHS
from opus.targets.nvidia import NVIDIA_ARCHS

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARCHS = NVIDIA_ARCHS + AMD_ARCHS
TARGETS = [get_target(a) for a in ARCHS]
DTYPE_NAMES = [n for n in opus.__all__ if isinstance(getattr(opus, n, None), dt.DType)]
MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil",
        "trunc", "rint")


def _is_error(obj):
    return inspect.isclass(obj) and issubclass(obj, BaseException)


def own_doc(obj):
    """The docstring written for ``obj`` itself (not one inherited from a base class)."""
    if inspect.isclass(obj):
        return obj.__doc__  # every class has its own __doc__ (None where it has no docstring)
    if isinstance(obj, dt.DType):  # each dtype has its own; the class's does not count
        doc = obj.__doc__
        return None if doc == dt.DType.__doc__ else doc
    return obj.__doc__


def parameters(obj):
    """The parameter names a user passes: a function's, a class's constructor's, a callable
    object's, or the subscript of a subscriptable one (opus.Ptr[dtype])."""
    if _is_error(obj):
        return []  # exceptions are caught, not built, by users: their docs name attributes
    if callable(obj):
        sig = inspect.signature(obj)
    elif hasattr(type(obj), "__getitem__"):
        sig = inspect.signature(type(obj).__getitem__)
    else:
        return []
    return [p for p in sig.parameters if p != "self"]


def returns_value(obj):
    """Whether calling ``obj`` gives a value: a function with a valued return or a yield (read
    from its source), a dtype (a conversion). Classes give an instance and need no :returns:."""
    if isinstance(obj, dt.DType):
        return True
    if not inspect.isfunction(obj):
        return False
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    fn = tree.body[0]
    nodes = [n for stmt in fn.body for n in ast.walk(stmt)]
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) or
               (isinstance(n, ast.Return) and n.value is not None and
                not (isinstance(n.value, ast.Constant) and n.value.value is None))
               for n in nodes)


def field(doc, name):
    """The text of the ``:name:`` field of a docstring (None if it has none)."""
    m = re.search(rf"^\s*:{name}:(.*(?:\n(?!\s*:)(?!\s*$).*)*)", doc, re.M)
    return " ".join(m.group(1).split()) if m else None


def stated_missing(line):
    """The targets a ``:targets:`` line says lack the thing ('not on a, b' or 'no target')."""
    if "no target" in line:
        return set(ARCHS)
    m = re.search(r"not on ((?:[a-z]+_?\d+a?(?:, )?)+)", line)
    return set(m.group(1).split(", ")) if m else set()


def problems(name):
    """What is missing from the documentation of opus.<name> (an empty list: nothing)."""
    if not hasattr(opus, name):
        return [f"opus.__all__ names {name!r}, which opus does not have"]
    obj = getattr(opus, name)
    doc = own_doc(obj)
    if not doc or not doc.strip():
        return ["no docstring of its own"]
    found = []
    for p in parameters(obj):
        for kind in ("param", "type"):
            if not re.search(rf"^\s*:{kind} {p}:", doc, re.M):
                found.append(f"no ':{kind} {p}:' line")
    if returns_value(obj) and field(doc, "returns") is None:
        found.append("returns a value but has no ':returns:' line")
    if not _is_error(obj) and not field(doc, "targets"):
        found.append("no ':targets:' line (write 'all targets' when every target has it)")
    return found


# -- the list itself ---------------------------------------------------------------------------

def test_all_names_exist_and_are_unique():
    missing = [n for n in opus.__all__ if not hasattr(opus, n)]
    assert not missing, f"opus.__all__ names what opus does not have: {missing}"
    assert len(set(opus.__all__)) == len(opus.__all__), "opus.__all__ repeats a name"


def test_every_public_callable_is_in_all():
    """A new builtin imported into opus cannot skip the list (and so its documentation)."""
    public = {n for n in dir(opus) if not n.startswith("_")}
    callables = {n for n in public
                 if callable(getattr(opus, n)) or inspect.isclass(getattr(opus, n))}
    assert callables - set(opus.__all__) == set()


# -- every name documented -----------------------------------------------------------------------

@pytest.mark.parametrize("name", opus.__all__)
def test_documented(name):
    assert problems(name) == [], f"opus.{name}: " + "; ".join(problems(name))


def test_checker_catches_omissions():
    """The checks above fail on what they are meant to catch (hand-made offenders)."""
    def undocumented(x):
        return x

    def half(x, y):
        """Sum.

        :param x: a
        :type x: int
        :targets: all targets
        """
        return x + y

    def no_targets():
        """Nothing.

        :returns: nothing
        """
        return 1

    opus.__dict__.update(_t_undoc=undocumented, _t_half=half, _t_nt=no_targets)
    try:
        assert problems("_t_undoc") == ["no docstring of its own"]
        assert problems("_t_half") == ["no ':param y:' line", "no ':type y:' line",
                                       "returns a value but has no ':returns:' line"]
        assert problems("_t_nt") == ["no ':targets:' line (write 'all targets' when every "
                                     "target has it)"]
        assert problems("_t_absent") == ["opus.__all__ names '_t_absent', which opus does not "
                                         "have"]
    finally:
        for n in ("_t_undoc", "_t_half", "_t_nt"):
            del opus.__dict__[n]


# -- which targets have it: the target table is the source of truth -----------------------------

def _table_missing(name):
    """The archs that lack opus.<name> by the target table, for builtins whose availability
    differs between targets (None for one every target has)."""
    if name == "printf":
        return {t.name for t in TARGETS if not t.has_printf}
    if name in MATH:
        return {t.name for t in TARGETS if not t.has_math(name, dt.f64)}
    if name in DTYPE_NAMES:
        return {t.name for t in TARGETS if not t.has_dtype(getattr(opus, name))}
    if name == "copy_async":
        return {t.name for t in TARGETS if not t.cp_async_sizes}
    if name == "copy_async_lds":
        return {t.name for t in TARGETS if not t.lds_load_sizes}
    if name in ("s_waitcnt", "s_waitcnt_vmcnt", "s_waitcnt_lgkmcnt"):
        return {t.name for t in TARGETS if t.s_waitcnt_missing is not None}
    if name in SYNC_ROWS:  # targets/sync_atomics.py: named barriers, AMD hints, clocks
        return {t.name for t in TARGETS if _refuses(SYNC_ROWS[name], t)}
    if name in ("ldmatrix", "stmatrix", "ds_read_tr"):  # instruction rows of that family
        return {t.name for t in TARGETS
                if not any(getattr(i, "family", None) == name and i.available_on(t)
                           for i in t.instructions.values())}
    if name in ("mov_dpp", "upd_dpp", "dpp"):  # AMD DPP (lang/warp.py)
        return {t.name for t in TARGETS if t.dpp_missing is not None}
    if name == "permute":  # the forward lane permute, ds_permute_b32
        return {t.name for t in TARGETS if t.ds_permute_missing is not None}
    if name in TMA_NAMES:
        return {t.name for t in TARGETS if t.tma_missing is not None}
    if name in WGMMA_NAMES:  # the rows of the wgmma family (targets/nv_wgmma.py)
        return {t.name for t in TARGETS
                if not any(getattr(i, "kind", None) == "wgmma" and i.available_on(t)
                           for i in t.instructions.values())}
    return set()


def _refuses(check, target) -> bool:
    from opus.targets.base import UnsupportedOnTarget
    try:
        check(target)
    except UnsupportedOnTarget:
        return True
    return False


def _sync_rows():
    from opus.targets import sync_atomics as sa
    rows = {n: (lambda t, n=n: sa.require_named_barrier(t, n)) for n in ("barrier_sync",
                                                                        "barrier_arrive")}
    rows.update({n: (lambda t, n=n: sa.require_amd_hint(t, n)) for n in sa.HINTS})
    rows.update({n: (lambda t, n=n: sa.require_clock(t, n)) for n in sa.CLOCKS})
    return rows


SYNC_ROWS = _sync_rows()
WGMMA_NAMES = ("make_wgmma", "wgmma_fence", "wgmma_commit", "wgmma_wait", "setmaxnreg_inc",
               "setmaxnreg_dec")
TMA_NAMES = ("TensorMap", "TmaPipeline", "alloc_mbarriers", "tma_load", "tma_store", "tma_commit",
             "tma_wait", "fence_proxy_async", "fence_mbarrier_init")


@pytest.mark.parametrize("name", [n for n in opus.__all__ if not _is_error(getattr(opus, n))])
def test_targets_line_matches_table(name):
    line = field(own_doc(getattr(opus, name)) or "", "targets") or ""
    assert stated_missing(line) == _table_missing(name), f"opus.{name} :targets: {line!r}"
    if not _table_missing(name):
        assert "all targets" in line, f"opus.{name} :targets: {line!r}"


def test_f64_math_is_the_part_amd_lacks():
    """The math docstrings say the missing part is f64 (f32 math is everywhere)."""
    for fn in MATH:
        line = field(getattr(opus, fn).__doc__, "targets")
        if _table_missing(fn):
            assert line.startswith("all targets; f64 not on "), (fn, line)


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_dtype_doc(name):
    """Each dtype: its name, width, kind and, for the flavoured fp8/bf8 names, the type each
    target takes them to; for fp8 types, the targets that convert them in hardware."""
    d = getattr(opus, name)
    doc = own_doc(d)
    assert re.match(rf"opus\.\w+: {d.bits} bits?, ", doc), doc  # fp16 is f16: one doc
    assert f"opus.{name}:" in doc or f"opus.{name})" in doc or f"opus.{name}," in doc, doc
    if d.flavour is not None:
        means = {}
        for t in TARGETS:
            means.setdefault(t.resolve_dtype(d).name, []).append(t.name)
        for concrete, archs in means.items():
            assert f"{concrete} on {', '.join(archs)}" in doc, (concrete, doc)
    elif d.name.startswith("fp8"):
        hw = [t.name for t in TARGETS if d.name in t.hw_fp8]
        assert f"in hardware on {', '.join(hw)}" in doc, doc


@pytest.mark.parametrize("name", [n for n in DTYPE_NAMES if getattr(opus, n).host])
def test_dtype_doc_states_the_format(name):
    """The range or format a dtype's docstring states is its host twin's (numpy/ml_dtypes)."""
    import numpy as np
    import ml_dtypes
    d = getattr(opus, name)
    doc = own_doc(d)
    if d.kind in ("int", "uint") and d.bits >= 8:
        info = np.iinfo(d.np_dtype)
        assert f"integer, {info.min} .. {info.max}" in doc, doc
    elif d.kind in ("int", "uint"):
        info = ml_dtypes.iinfo(d.np_dtype)
        assert f"integer, {info.min} .. {info.max}" in doc, doc
    elif d.kind == "float":
        info = ml_dtypes.finfo(d.np_dtype)
        assert f"{info.nexp} exponent and {info.nmant} mantissa bits" in doc, doc
        stated = float(re.search(r"largest finite value ([0-9.]+(?:e\d+)?)", doc).group(1))
        assert stated == pytest.approx(float(info.max), rel=1e-4), doc


def test_dtype_class_keeps_its_own_doc():
    assert "scalar element type" in inspect.getdoc(opus.DType)


def test_set_target_names_every_target():
    doc = opus.set_target.__doc__
    assert all(a in doc for a in ARCHS), doc


# -- the generated reference ---------------------------------------------------------------------

def _generator():
    path = ROOT / "tools" / "gen_api_docs.py"
    spec = importlib.util.spec_from_file_location("gen_api_docs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_api_reference_is_up_to_date():
    """docs/api.md is what tools/gen_api_docs.py makes of the docstrings now."""
    text = (ROOT / "docs" / "api.md").read_text()
    assert text == _generator().render(), (
        "docs/api.md is stale: run .venv/bin/python tools/gen_api_docs.py")


def test_api_reference_places_every_name():
    """Every public name sits under exactly one banner of the reference."""
    placed = [n for _, names in _generator().SECTIONS for n in names]
    assert sorted(placed) == sorted(opus.__all__)
