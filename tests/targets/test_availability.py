"""One availability table per target, asked while tracing: for every dtype, conversion and math
function on every target, a kernel either traces and compiles, or is refused at trace time
with the table's error, the same in the interpreter running as that target."""
import numpy as np
import pytest

import opus
from opus import f32
from opus.dtypes import ALL_DTYPES
from opus.targets import get_target
from opus.targets.amd import AMD_ARCHS
from opus.targets.nvidia import NVIDIA_ARCHS

ARCHS = NVIDIA_ARCHS + AMD_ARCHS
FLOATS = (opus.f16, opus.bf16, opus.f32, opus.f64)
MATH = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "floor", "ceil",
        "trunc", "rint")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("OPUS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "availability-cache"))


def _interp_error(kernel, arch, *args):
    """The error of launching ``kernel`` in the interpreter as ``arch``."""
    with opus.set_target(arch, interpret=True):
        with pytest.raises(opus.TraceError) as info:
            kernel[1, 1](*args)
    return str(info.value)


# -- dtypes and conversions ---------------------------------------------------------------------

def _round_trip(d):
    """Loads a d, converts it to f32, f16 and i32 and back, stores the results as d (sub-byte
    types in whole bytes: vectors of d.pack_elems, ir/ops.py)."""
    p = d.pack_elems

    @opus.kernel
    def k(x: opus.Ptr[d], y: opus.Ptr[f32]):
        v = opus.load(x, 0, vec=p)[0] if p > 1 else x[0]
        y[0] = opus.cast(v, f32)
        opus.store(x, opus.cast(y[1], d), p, vec=p)
        opus.store(x, opus.cast(opus.cast(v, opus.f16), d), 2 * p, vec=p)
        if not d.is_bool:
            opus.store(x, opus.cast(opus.cast(v, opus.i32), d), 3 * p, vec=p)
    return k


def test_the_table_gives_every_dtype_a_register_form_everywhere():
    for arch in ARCHS:
        t = get_target(arch)
        assert [d.name for d in ALL_DTYPES if not t.has_dtype(d)] == []


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("d", ALL_DTYPES, ids=lambda d: d.name)
def test_every_dtype_traces_and_compiles_or_is_refused_alike(arch, d, request):
    target, k = get_target(arch), _round_trip(d)
    if target.has_dtype(d):
        spec = k.specialize(target=arch)
        if arch.startswith("gfx"):   # traced above; compiling needs clang
            request.getfixturevalue("requires_amd_compiler")
        assert spec.compiled.binary
        return
    why = f"{d.name} pointers are not available on {arch}"
    with pytest.raises(opus.TraceError, match=why) as info:
        k.specialize(target=arch)
    x = np.zeros(4, d.np_dtype)
    assert _interp_error(k, arch, x, np.zeros(2, np.float32)) == str(info.value)


@pytest.mark.parametrize("arch", ARCHS)
def test_fp8_conversions_are_hardware_where_the_chip_has_them(arch):
    t = get_target(arch)
    hw = {"sm_89": "ocp", "sm_90": "ocp", "sm_90a": "ocp", "gfx942": "fnuz", "gfx950": "ocp"}
    for d in (opus.fp8_e4m3, opus.fp8_e5m2, opus.fp8_e4m3fnuz, opus.fp8_e5m2fnuz, opus.e8m0):
        flavour = "fnuz" if d.name.endswith("fnuz") else "ocp" if d.name != "e8m0" else None
        expect = "hardware" if flavour is not None and hw.get(arch) == flavour else "software"
        assert t.conversion(f32, d) == expect and t.conversion(d, f32) == expect
    assert t.conversion(opus.i32, f32) == "native"


# -- math ---------------------------------------------------------------------------------------

def _math_kernel(d, fns):
    @opus.kernel
    def k(x: opus.Ptr[d]):
        v = x[0]
        for i, fn in enumerate(fns):
            x[i + 1] = getattr(opus, fn)(v)
    return k


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("d", FLOATS, ids=lambda d: d.name)
def test_every_math_function_traces_and_compiles_or_is_refused_alike(arch, d, request):
    target = get_target(arch)
    have = [fn for fn in MATH if target.has_math(fn, d)]
    spec = _math_kernel(d, tuple(have)).specialize(target=arch)
    if arch.startswith("gfx"):   # traced above; compiling needs clang
        request.getfixturevalue("requires_amd_compiler")
    assert spec.compiled.binary
    for fn in MATH:
        if fn in have:
            continue
        k = _math_kernel(d, (fn,))
        with pytest.raises(opus.TraceError, match=f"opus.{fn} on f64 is not available on {arch}") as info:
            k.specialize(target=arch)
        assert _interp_error(k, arch, np.zeros(2, d.np_dtype)) == str(info.value)


def test_f64_math_is_missing_only_on_amd():
    for arch in NVIDIA_ARCHS:
        assert all(get_target(arch).has_math(fn, opus.f64) for fn in MATH)
    for arch in AMD_ARCHS:
        missing = {fn for fn in MATH if not get_target(arch).has_math(fn, opus.f64)}
        assert missing == {"exp", "exp2", "log", "log2", "sin", "cos", "tanh"}
        assert all(get_target(arch).has_math(fn, d) for fn in MATH for d in FLOATS[:3])
