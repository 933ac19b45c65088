"""fp8 format parameters the C renderers need (one table for CUDA and HIP).

max: largest finite value; ovf: smallest |x| that overflows under round-to-nearest-even
(ovf_incl: whether ovf itself does); ovf_bits / nan: the overflow and NaN codes, sign added
separately when signed_ovf (e4m3fn has no inf, so it overflows to NaN; the FNUZ types have one
NaN, 0x80, and no -0); kind: the AMD builtins' name for the format (fp8 = e4m3, bf8 = e5m2).
The language's conversion rules are in docs/language.md.
"""

FP8_FORMATS = {
    "fp8_e4m3fnuz": dict(max=240.0, ovf=248.0, ovf_incl=True, ovf_bits=0x80, nan=0x80,
                         signed_ovf=False, kind="fp8"),
    "fp8_e5m2fnuz": dict(max=57344.0, ovf=61440.0, ovf_incl=True, ovf_bits=0x80, nan=0x80,
                         signed_ovf=False, kind="bf8"),
    "fp8_e4m3": dict(max=448.0, ovf=464.0, ovf_incl=False, ovf_bits=0x7F, nan=0x7F,
                     signed_ovf=True, kind="fp8"),
    "fp8_e5m2": dict(max=57344.0, ovf=61440.0, ovf_incl=True, ovf_bits=0x7C, nan=0x7F,
                     signed_ovf=True, kind="bf8"),
}
