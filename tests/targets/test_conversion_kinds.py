"""How each target converts one type to another (``Target.conversion``), what it refuses and
the words it refuses with, by hand from the vendors' documents:

* PTX ISA, ``cvt``: the fp8 formats (e4m3, e5m2) convert in hardware from sm_89 on
  (``cvt.rn.satfinite.e4m3x2.f32``); stochastic rounding (``cvt.rs``) is sm_100a's, so on the
  targets here it is done in software.
* AMD CDNA3 ISA (gfx942): ``v_cvt_pk_fp8_f32`` / ``v_cvt_sr_fp8_f32`` and their bf8 forms convert
  the FNUZ encodings (fp8_e4m3fnuz, fp8_e5m2fnuz); CDNA4 (gfx950): the same instructions take
  the OCP encodings (fp8_e4m3, fp8_e5m2), and ``v_cvt_sr_bf16_f32`` / ``v_cvt_sr_f16_f32`` round
  stochastically into bf16 and f16.
* 'native' is the dialect's own arithmetic (f32 -> f16 and the like); 'software' is exact bit
  arithmetic (a storage type the chip does not convert, or stochastic rounding it lacks).
The targets are made here (not through get_target's cache), as the other refusal tests do."""
import pytest

import opus.dtypes as dt
from opus.targets.amd import AmdTarget
from opus.targets.base import UnsupportedOnTarget
from opus.targets.nvidia import NvidiaTarget

TARGETS = {name: (NvidiaTarget if name.startswith("sm") else AmdTarget)(name)
           for name in ("sm_80", "sm_89", "sm_90a", "gfx942", "gfx950")}

# (target, src, dst, rounding) -> the kind of conversion
KINDS = [
    ("sm_80", dt.f32, dt.f16, "rn", "native"),
    ("sm_80", dt.bf16, dt.f32, "rn", "native"),
    ("sm_80", dt.f32, dt.fp8_e4m3, "rn", "software"),       # fp8 cvt needs sm_89
    ("sm_80", dt.fp8_e5m2, dt.f16, "rn", "software"),
    ("sm_89", dt.f32, dt.fp8_e4m3, "rn", "hardware"),
    ("sm_89", dt.fp8_e5m2, dt.f16, "rn", "hardware"),
    ("sm_90a", dt.f32, dt.fp8, "rn", "hardware"),            # fp8 is e4m3 on NVIDIA
    ("sm_90a", dt.f32, dt.fp8_e4m3fnuz, "rn", "software"),   # AMD's encoding: no cvt for it
    ("sm_90a", dt.f32, dt.e8m0, "rz", "software"),
    ("sm_90a", dt.f32, dt.bf16, "sr", "software"),           # cvt.rs is sm_100a's
    ("sm_90a", dt.f16, dt.fp8_e4m3, "sr", "software"),
    ("sm_80", dt.f32, dt.f16, "rz", "native"),
    ("sm_80", dt.f32, dt.bf16, "truncate", "native"),
    ("gfx942", dt.f32, dt.fp8_e4m3fnuz, "rn", "hardware"),
    ("gfx942", dt.f32, dt.fp8, "rn", "hardware"),            # fp8 is the FNUZ e4m3 on CDNA3
    ("gfx942", dt.fp8_e5m2fnuz, dt.f32, "rn", "hardware"),
    ("gfx942", dt.f32, dt.fp8_e4m3, "rn", "software"),       # the OCP encoding: bit arithmetic
    ("gfx942", dt.f32, dt.fp8_e5m2fnuz, "sr", "hardware"),   # v_cvt_sr_bf8_f32
    ("gfx942", dt.f32, dt.bf16, "sr", "software"),
    ("gfx942", dt.bf16, dt.f16, "sr", "software"),
    ("gfx950", dt.f32, dt.fp8_e4m3, "rn", "hardware"),
    ("gfx950", dt.f32, dt.fp8_e4m3fnuz, "rn", "software"),
    ("gfx950", dt.f32, dt.bf16, "sr", "hardware"),           # v_cvt_sr_bf16_f32
    ("gfx950", dt.f32, dt.f16, "sr", "hardware"),            # v_cvt_sr_f16_f32
    ("gfx950", dt.f32, dt.fp8_e5m2, "sr", "hardware"),
    ("gfx950", dt.f32, dt.f16, "rn", "native"),
]


@pytest.mark.parametrize("target,src,dst,rounding,kind", KINDS,
                         ids=[f"{t}-{s.name}-{d.name}-{r}" for t, s, d, r, _ in KINDS])
def test_conversion_kind_by_hand(target, src, dst, rounding, kind):
    assert TARGETS[target].conversion(src, dst, rounding) == kind


def test_rounding_defaults_to_nearest_even():
    sm80, cdna4 = TARGETS["sm_80"], TARGETS["gfx950"]
    assert sm80.conversion(dt.f32, dt.f16) == "native"
    assert sm80.conversion(dt.f32, dt.fp8_e4m3) == "software"
    assert cdna4.conversion(dt.f32, dt.bf16) == "native"     # stochastic only when asked
    assert cdna4.conversion(dt.f32, dt.fp8_e4m3) == "hardware"


def test_a_cast_to_its_own_type_takes_any_rounding():
    """A value cast to its own type is itself: no rounding mode is refused for it."""
    assert TARGETS["sm_90a"].conversion(dt.fp8_e4m3, dt.fp8_e4m3, "sr") == "software"
    assert TARGETS["gfx950"].conversion(dt.fp8_e4m3, dt.fp8_e4m3, "sr") == "hardware"


def _refusal(fn, *args):
    with pytest.raises(UnsupportedOnTarget) as e:
        fn(*args)
    return str(e.value)


TF32_WHY = ("tf32 is the tensor cores' input format, not a register type: keep the values in "
            "f32 and ask make_mma(opus.tf32, opus.tf32, opus.f32, shape), whose operands are f32 "
            "registers")


@pytest.mark.parametrize("target", ["sm_80", "gfx942"])
def test_a_type_without_registers_is_refused_naming_it_the_chip_and_why(target):
    t = TARGETS[target]
    assert _refusal(t.require_dtype, dt.tf32) == (
        f"tf32 values are not available on {target}: {TF32_WHY}")
    assert _refusal(t.require_dtype, dt.tf32, "shared arrays") == (
        f"tf32 shared arrays are not available on {target}: {TF32_WHY}")
    for src, dst in ((dt.tf32, dt.f32), (dt.f32, dt.tf32)):
        assert _refusal(t.conversion, src, dst) == (
            f"tf32 values are not available on {target}: {TF32_WHY}")


def test_require_dtype_resolves_the_flavoured_names():
    assert TARGETS["sm_90a"].require_dtype(dt.fp8) is dt.fp8_e4m3
    assert TARGETS["sm_90a"].require_dtype(dt.bf8) is dt.fp8_e5m2
    assert TARGETS["gfx942"].require_dtype(dt.fp8) is dt.fp8_e4m3fnuz
    assert TARGETS["gfx942"].require_dtype(dt.bf8, "pointers") is dt.fp8_e5m2fnuz
    assert TARGETS["gfx950"].resolve_dtype(dt.fp8) is dt.fp8_e4m3
    assert TARGETS["gfx950"].resolve_dtype(dt.f16) is dt.f16


ROUNDING_REFUSALS = [
    (dt.f32, dt.f32, "rz", "rounding='rz' is available for conversions to f16, bf16, e8m0; "
                           "conversions to f32 round to nearest even"),
    (dt.f32, dt.fp8_e4m3, "rz", "rounding='rz' is available for conversions to f16, bf16, e8m0; "
                                "conversions to fp8_e4m3 round to nearest even"),
    (dt.f32, dt.f16, "truncate", "rounding='truncate' is available for conversions to bf16; "
                                 "conversions to f16 round to nearest even"),
    (dt.f32, dt.f16, "truncate_with_nan", "rounding='truncate_with_nan' is available for "
                                          "conversions to bf16; conversions to f16 round to "
                                          "nearest even"),
    (dt.f32, dt.f32, "sr", "rounding='sr' is available for conversions to f16, bf16, fp8_e4m3, "
                           "fp8_e5m2, fp8_e4m3fnuz, fp8_e5m2fnuz, fp6_e2m3, fp6_e3m2, fp4_e2m1; "
                           "conversions to f32 round to nearest even"),
    (dt.i32, dt.bf16, "sr", "rounding='sr' converts from f32, f16, bf16 (exact in f32); convert "
                            "the i32 value to f32 first"),
    (dt.fp8_e4m3, dt.f16, "sr", "rounding='sr' converts from f32, f16, bf16 (exact in f32); "
                                "convert the fp8_e4m3 value to f32 first"),
]


@pytest.mark.parametrize("target", ["sm_90a", "gfx950"])
@pytest.mark.parametrize("src,dst,rounding,message", ROUNDING_REFUSALS,
                         ids=[f"{s.name}-{d.name}-{r}" for s, d, r, _ in ROUNDING_REFUSALS])
def test_a_rounding_the_conversion_lacks_is_refused_with_what_has_it(target, src, dst, rounding,
                                                                      message):
    assert _refusal(TARGETS[target].conversion, src, dst, rounding) == message


def test_every_target_of_a_vendor_shares_the_vendors_tables():
    """The vendor's instruction tables are read once and kept by the vendor's class: every
    target of it (and every ask) gets the same ones."""
    a, b = NvidiaTarget("sm_80"), NvidiaTarget("sm_90a")
    assert a.instructions is b.instructions and a.mma_atoms is b.mma_atoms
    assert "nv.mma.m16n8k16.f16.f32" in a.instructions
    c = AmdTarget("gfx942")
    assert c.instructions is AmdTarget("gfx950").instructions
    assert "amd.mfma.f32.32x32x8.f16" in c.instructions
    assert ("f16", "f16", "f32", (32, 32, 8)) in c.mma_atoms
