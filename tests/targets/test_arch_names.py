"""Arch names: one parser (opus.arch_names) for the targets and NVRTC. Known names map to
targets, well-formed unknown ones are 'not supported yet', malformed ones say what is wrong."""
from types import SimpleNamespace

import pytest

from opus.arch_names import Arch, ArchNameError, parse_arch
from opus.targets import ArchNotSupported, get_target
from opus.targets.base import OnlyOn, Since


@pytest.mark.parametrize("name,want", [
    ("sm_80", ("nvidia", 8, 0, "")), ("sm_86", ("nvidia", 8, 6, "")),
    ("sm_89", ("nvidia", 8, 9, "")), ("sm_90", ("nvidia", 9, 0, "")),
    ("sm_90a", ("nvidia", 9, 0, "a")), ("sm_100", ("nvidia", 10, 0, "")),
    ("sm_100a", ("nvidia", 10, 0, "a")), ("sm_120a", ("nvidia", 12, 0, "a")),
    ("sm_100f", ("nvidia", 10, 0, "f")),
    ("gfx942", ("amd", 9, 4, "2")), ("gfx950", ("amd", 9, 5, "0")),
    ("gfx90a", ("amd", 9, 0, "a")), ("gfx1100", ("amd", 11, 0, "0")),
])
def test_parse(name, want):
    a = parse_arch(name)
    assert a == Arch(*want) and a.name == name


def test_virtual_arch_keeps_the_suffix():
    assert parse_arch("sm_90a").virtual == "compute_90a"
    assert parse_arch("sm_100").virtual == "compute_100"


@pytest.mark.parametrize("name,needles", [
    ("sm_9", ["'sm_9'", "one digit", "major and minor"]),
    ("sm_", ["'sm_'", "digits are missing"]),
    ("SM_90", ["'SM_90'", "lowercase", "did you mean 'sm_90'"]),
    ("gfx", ["'gfx'", "digits are missing"]),
    ("sm_90b", ["'sm_90b'", "suffix 'b'"]),
    ("sm_080", ["'sm_080'", "not an arch name"]),
    ("gfx9420", ["'gfx9420'", "not an arch name"]),
    ("", ["''", "not an arch name"]),
    (90, ["90", "int", "string"]),
])
def test_malformed_names(name, needles):
    with pytest.raises(ArchNameError) as e:
        parse_arch(name)
    for n in needles:
        assert n.lower() in str(e.value).lower()
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("name", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "gfx942", "gfx950"])
def test_known_names_map_to_targets(name):
    t = get_target(name)
    assert t.name == name and t.arch == parse_arch(name)
    assert t.vendor == parse_arch(name).vendor


@pytest.mark.parametrize("name,what", [("sm_100", "compute capability 10.0"),
                                       ("sm_100a", "compute capability 10.0a"),
                                       ("sm_120a", "compute capability 12.0a"),
                                       ("gfx90a", "AMD gfx90a"), ("gfx1100", "AMD gfx1100")])
def test_well_formed_unknown_names_are_not_supported_yet(name, what):
    with pytest.raises(ArchNotSupported) as e:
        get_target(name)
    msg = str(e.value)
    assert f"'{name}'" in msg and what in msg and "not supported yet" in msg
    assert "sm_90a" in msg and "gfx942" in msg  # the known ones are listed


@pytest.mark.parametrize("name", ["sm_9", "sm_", "SM_90", "gfx", "sm_90b"])
def test_malformed_names_as_targets(name):
    with pytest.raises(ArchNameError, match="not an arch name") as e:
        get_target(name)
    assert "unknown target" in str(e.value) and "sm_90a" in str(e.value)


def _chip(name):
    return SimpleNamespace(name=name, arch=parse_arch(name))


def test_since_compares_capabilities_not_name_prefixes():
    """sm_100a is capability 10.0, after 8.0: a family-wide sm_80 instruction is there (reading
    the name's first two digits would call it sm 10)."""
    since80 = Since("sm_80")
    assert since80(_chip("sm_100a")) and since80(_chip("sm_120a")) and since80(_chip("sm_86"))
    assert not since80(_chip("gfx942"))
    assert not Since("sm_89")(_chip("sm_86")) and Since("sm_89")(_chip("sm_90a"))


def test_only_on_refuses_misspelt_names():
    assert OnlyOn("gfx950")(_chip("gfx950")) and not OnlyOn("gfx950")(_chip("gfx942"))
    with pytest.raises(ArchNameError, match="'GFX950'"):
        OnlyOn("GFX950")


def test_fp8_conversion_in_hardware_follows_the_capability():
    assert get_target("sm_89").hw_fp8 and get_target("sm_90a").hw_fp8
    assert not get_target("sm_86").hw_fp8


@pytest.mark.parametrize("arch,exc,needle", [("gfx942", ValueError, "NVIDIA"),
                                             ("sm_9", ArchNameError, "one digit"),
                                             ("sm_90b", ArchNameError, "suffix 'b'")])
def test_nvrtc_reads_arch_names_with_the_same_parser(arch, exc, needle):
    from opus.runtime import nvrtc
    with pytest.raises(exc, match=needle):
        nvrtc.compile_cuda("__global__ void k() {}", arch=arch)


def test_nvrtc_ptx_for_an_arch_specific_name():
    from opus.runtime import nvrtc
    try:
        nvrtc.nvrtc_version()
    except Exception as e:  # pragma: no cover - no NVRTC on this machine
        pytest.skip(str(e))
    r = nvrtc.compile_cuda('extern "C" __global__ void k(int *x) { x[0] = 1; }', arch="sm_90a",
                           want_ptx=True)
    assert ".target sm_90a" in r.ptx
