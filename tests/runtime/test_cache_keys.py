"""Cache keys are injective: two different things never share a key, however their strings are
cut. Checked on make_key (the disk cache's keys) with adversarial parts, on the keys the
builders pass it, and on the kernel's specialization keys (constexpr values, globals) end to
end: distinct specializations must trace, render and cache separately."""
import collections
import itertools
import os

import numpy as np
import pytest

import opus
from opus.runtime import build as build_mod
from opus.runtime import cache as cache_mod
from opus.runtime.cache import make_key
from opus.targets import get_target


def _bin_files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".bin"))


# -- make_key ---------------------------------------------------------------------------------------

# Pairs that a key built by joining, concatenating or str()-ing its parts would merge.
COLLIDING_UNDER_NAIVE_KEYS = [
    (("a", "bsc"), ("asb", "c")),        # "s" as a separator
    (("ab", "c"), ("a", "bc")),          # plain concatenation
    (("a:b",), ("a", "b")),              # ":" as a separator
    (("a", ""), ("a",)),                 # an empty part
    (("", "a"), ("a",)),
    (("a", "b"), (("a", "b"),)),         # nesting
    ((("a",), "b"), ("a", ("b",))),
    (("T2:s1:as1:b",), (("a", "b"),)),   # a string spelling another part's encoding
    (("s1:a",), ("a",)),
    (("1",), (1,)),                      # types: str(), repr() of values
    ((1,), (1.0,)),
    ((1,), (True,)),
    ((0.0,), (-0.0,)),
    (("None",), (None,)),
    (("a",), (b"a",)),
    (("é",), ("e\u0301",)),              # same letters, other code points
    (("\x00",), ("",)),
    (({"a": 1},), ([("a", 1)],)),        # a dict is not the list of its items
    (({1: "x"},), ({"1": "x"},)),        # dict keys keep their types
]


@pytest.mark.parametrize("x,y", COLLIDING_UNDER_NAIVE_KEYS, ids=repr)
def test_adversarial_pairs_get_distinct_keys(x, y):
    assert make_key(*x) != make_key(*y)


def test_every_cut_of_short_strings_gets_its_own_key():
    """Every tuple of 1..3 strings over a small alphabet of letters and separator-like
    characters, 5 characters in all at most: each its own key (repr is injective on them, so
    equal keys would be a collision)."""
    alphabet = ("a", "s", ":", "1", "T")
    words = [""] + ["".join(w) for n in range(1, 4) for w in itertools.product(alphabet, repeat=n)]
    parts = {p for n in (1, 2, 3) for p in itertools.product(words, repeat=n)
             if sum(map(len, p)) <= 5}
    keys = {make_key(*p) for p in parts}
    assert len(parts) > 5000 and len(keys) == len(parts)


def test_mixed_types_and_nesting_get_their_own_keys():
    atoms = ["1", 1, 1.0, True, None, "None", b"1", (), "", b"", ("1",), (1,), -0.0, 0.0]
    parts = [p for n in (1, 2) for p in itertools.product(atoms, repeat=n)]
    keys = {make_key(*p) for p in parts}
    assert len(keys) == len({repr(p) for p in parts}) == len(parts)


def test_dict_keys_do_not_depend_on_insertion_order():
    assert make_key({"a": 1, "b": (2, "c")}) == make_key({"b": (2, "c"), "a": 1})


# -- what the builders key on -------------------------------------------------------------------------

@pytest.fixture
def recorded_keys(monkeypatch):
    """The parts of every make_key call the builders make (the calls go through)."""
    calls = []

    def recording(*parts):
        calls.append(parts)
        return make_key(*parts)
    monkeypatch.setattr(cache_mod, "make_key", recording)
    return calls


def test_cuda_build_keys_each_thing_that_shapes_the_binary_as_its_own_part(recorded_keys,
                                                                           cache_root):
    from opus.runtime import nvrtc
    src = reciprocal.specialize(target="sm_90a", S=2.0).source
    build_mod.build(src, get_target("sm_90a"))
    (parts,) = recorded_keys
    for part in (src, "sm_90a", nvrtc.compiler_identity(),
                 nvrtc.options_for("sm_90a", build_mod.OPTIONS), build_mod.OPUS_BUILD_VERSION):
        assert part in parts, (part, parts)
    assert any(isinstance(p, tuple) and "--fmad=false" in p for p in parts)  # NVRTC's defaults


def test_a_changed_default_nvrtc_option_is_a_cache_miss(cache_root, monkeypatch):
    # an opus update that changes a default option (here --fmad) must not be served the CUBIN
    # built with the old one from an existing cache
    from opus.runtime import nvrtc
    src = reciprocal.specialize(target="sm_90a", S=3.0).source
    first = build_mod.build(src, get_target("sm_90a"))
    assert build_mod.build(src, get_target("sm_90a")).cached
    old = nvrtc._default_options
    monkeypatch.setattr(nvrtc, "_default_options",
                        lambda arch: [o if o != "--fmad=false" else "--fmad=true" for o in old(arch)])
    again = build_mod.build(src, get_target("sm_90a"))
    assert not again.cached and first.binary is not again.binary


def test_hip_build_keys_each_thing_that_shapes_the_binary_as_its_own_part(recorded_keys,
                                                                          cache_root):
    from opus.runtime import amd_build
    try:
        comp = amd_build.hip_compiler()
    except opus.OpusRuntimeError as e:
        pytest.skip(f"no HIP compiler: {e}")
    src = reciprocal.specialize(target="gfx942", S=2.0).source
    amd_build.build_amd(src, get_target("gfx942"))
    assert any(src in p and "gfx942" in p and "hsaco" in p and comp.version in p
               and amd_build.FLAGS in p and amd_build.AMD_BUILD_VERSION in p
               for p in recorded_keys), recorded_keys


# -- specialization keys, end to end ------------------------------------------------------------------

@pytest.fixture(autouse=True)
def _interpret():
    with opus.set_target("sm_90a", interpret=True):
        yield


@opus.kernel
def name_lengths(out: opus.Ptr[opus.i32], NAMES: opus.constexpr):
    acc = opus.i32(0) + opus.thread_id_x()
    for s in NAMES:  # compile-time: the lengths 1, 3 give 13; 3, 1 give 31
        acc = acc * 10 + len(s)
    out[0] = acc


@opus.kernel
def reciprocal(out: opus.Ptr[opus.f32], S: opus.constexpr):
    out[0] = opus.f32(opus.thread_id_x() + 1) / S  # at run time: 1 / S


Cfg = collections.namedtuple("Cfg", "div pad")


def _divide(x, d):
    """An int divisor: floor division of i32; a float one: true division in f32."""
    if isinstance(d, int):
        return opus.f32(x // d)
    return opus.f32(x) / d


@opus.kernel
def divide_by_field(out: opus.Ptr[opus.f32], C: opus.constexpr):
    out[0] = _divide(opus.thread_id_x() + 7, C.div)


def _run(kernel, dtype, *constexprs):
    out = np.full(1, -1, dtype)
    kernel[1, 1](out, *constexprs)
    return out[0]


def test_constexpr_string_tuples_cut_differently_are_two_specializations(cache_root):
    assert _run(name_lengths, np.int32, ("a", "bsc")) == 13
    assert _run(name_lengths, np.int32, ("asb", "c")) == 31
    assert len(_bin_files(cache_root)) == 2  # OPUS_INTERPRET_COMPILE compiled each (conftest)


def test_negative_zero_constexpr_is_its_own_specialization(cache_root):
    assert _run(reciprocal, np.float32, 0.0) == np.inf
    assert _run(reciprocal, np.float32, -0.0) == -np.inf
    assert _run(reciprocal, np.float32, (-0.0,)[0]) == -np.inf
    assert len(_bin_files(cache_root)) == 2
    assert reciprocal.source(S=0.0) != reciprocal.source(S=-0.0)


def test_namedtuple_constexpr_fields_keep_their_types(cache_root):
    assert _run(divide_by_field, np.float32, Cfg(2, 0)) == 3.0     # 7 // 2
    assert _run(divide_by_field, np.float32, Cfg(2.0, 0)) == 3.5   # 7 / 2.0
    assert _run(divide_by_field, np.float32, Cfg(2, 0)) == 3.0
    assert len(_bin_files(cache_root)) == 2


SCALE = 0.0
CFG = Cfg(2, 0)


@opus.kernel
def reads_globals(out: opus.Ptr[opus.f32]):
    x = opus.f32(opus.thread_id_x() + 1) / SCALE
    y = _divide(opus.thread_id_x() + 7, CFG.div)
    out[0] = x
    out[1] = y


@pytest.fixture
def restore_globals():
    saved = SCALE, CFG
    yield
    globals().update(SCALE=saved[0], CFG=saved[1])


def test_globals_equal_in_value_but_not_in_kind_retrace(restore_globals):
    global SCALE, CFG
    out = np.zeros(2, np.float32)
    launch = reads_globals[1, 1]
    launch(out)
    assert out.tolist() == [np.inf, 3.0]
    SCALE = -0.0
    launch(out)
    assert out.tolist() == [-np.inf, 3.0]
    CFG = Cfg(2.0, 0)
    launch(out)
    assert out.tolist() == [-np.inf, 3.5]
