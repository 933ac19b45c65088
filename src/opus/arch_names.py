"""Arch names ('sm_90a', 'gfx942'): the one parser every layer uses (a plain module, like
``dtypes`` and ``errors``: the targets and the runtime's NVRTC driver both read arch names, and
the runtime sits below the targets, so the parser lives under neither).

    parse_arch("sm_90a")  -> Arch("nvidia", 9, 0, "a")    compute capability 9.0, arch-specific
    parse_arch("sm_100")  -> Arch("nvidia", 10, 0, "")    the last digit is the minor version
    parse_arch("gfx942")  -> Arch("amd", 9, 4, "2")       major, minor, stepping (hex digits)
    parse_arch("gfx90a")  -> Arch("amd", 9, 0, "a")
    parse_arch("gfx1100") -> Arch("amd", 11, 0, "0")

Parsing only reads the name: whether opus supports a chip is the targets' question
(``opus.targets.get_target``), whether NVRTC knows it is NVRTC's.
"""
from __future__ import annotations

import re

from .errors import OpusError

__all__ = ["Arch", "ArchNameError", "parse_arch"]

# NVIDIA: sm_<major><minor>[a|f]; 'a' is the arch-specific variant (sm_90a: wgmma), 'f' the
# family-specific one (CUDA 12.9+). AMD: gfx<major><minor><stepping>, minor and stepping one hex
# digit each, the major 6..19 (the name's length decides how many digits: gfx942, gfx1100).
_NVIDIA = re.compile(r"sm_([1-9][0-9]?)([0-9])([af]?)")
_AMD = re.compile(r"gfx([6-9]|1[0-9])([0-9a-f])([0-9a-f])")
_FORMS = "'sm_<major><minor>[a|f]' such as 'sm_90a', or 'gfx<major><minor><stepping>' such as 'gfx942'"


class ArchNameError(OpusError, ValueError):
    """A string that is not an arch name."""


class Arch(tuple):
    """A parsed arch name: the tuple (vendor, major, minor, suffix). ``suffix``: NVIDIA's variant
    letter ('', 'a' or 'f'); for AMD the stepping digit ('2' of gfx942, 'a' of gfx90a).
    (A plain tuple subclass: typing.NamedTuple would cost ``import opus`` ~1 ms for typing.)"""
    __slots__ = ()

    def __new__(cls, vendor: str, major: int, minor: int, suffix: str):
        return tuple.__new__(cls, (vendor, major, minor, suffix))

    vendor = property(lambda self: self[0])
    major = property(lambda self: self[1])
    minor = property(lambda self: self[2])
    suffix = property(lambda self: self[3])

    def __repr__(self):
        return f"Arch(vendor={self[0]!r}, major={self[1]!r}, minor={self[2]!r}, suffix={self[3]!r})"

    @property
    def name(self) -> str:
        if self.vendor == "nvidia":
            return f"sm_{self.major}{self.minor}{self.suffix}"
        return f"gfx{self.major}{self.minor:x}{self.suffix}"

    @property
    def capability(self) -> tuple:
        """(major, minor): NVIDIA's compute capability, AMD's gfx version without stepping."""
        return self.major, self.minor

    @property
    def virtual(self) -> str:
        """NVIDIA's virtual arch of the same features (PTX's target): 'compute_90a'."""
        if self.vendor != "nvidia":
            raise ValueError(f"{self.name} has no NVIDIA virtual arch")
        return f"compute_{self.major}{self.minor}{self.suffix}"

    def describe(self) -> str:
        if self.vendor == "nvidia":
            return f"NVIDIA compute capability {self.major}.{self.minor}{self.suffix}"
        return f"AMD gfx{self.major}{self.minor:x}{self.suffix}"


def parse_arch(name) -> Arch:
    """The Arch a name stands for; ArchNameError (a ValueError) saying what is wrong otherwise."""
    if not isinstance(name, str):
        raise ArchNameError(f"an arch name is a string such as 'sm_90a' or 'gfx942', got {name!r} "
                            f"({type(name).__name__})")
    m = _NVIDIA.fullmatch(name)
    if m:
        return Arch("nvidia", int(m.group(1)), int(m.group(2)), m.group(3))
    m = _AMD.fullmatch(name)
    if m:
        return Arch("amd", int(m.group(1)), int(m.group(2), 16), m.group(3))
    raise ArchNameError(f"{name!r} is not an arch name: expected {_FORMS}{_hint(name)}")


def _hint(name) -> str:
    """Why a near miss failed: the usual slips, said in words."""
    low = name.strip().lower()
    if low != name and (_NVIDIA.fullmatch(low) or _AMD.fullmatch(low)):
        return f" (arch names are lowercase: did you mean {low!r}?)"
    m = re.fullmatch(r"sm_([0-9]+)(.*)", name)
    if m and len(m.group(1)) < 2:
        return f" ({name!r} has one digit; the compute capability needs two: major and minor, as in 'sm_90')"
    if m and m.group(2):
        return f" (the suffix {m.group(2)!r} is none of 'a' (arch-specific) and 'f' (family))"
    if name in ("sm_", "gfx"):
        return " (the version digits are missing)"
    return ""
