"""fp8 format parameters the C renderers need (one table for CUDA and HIP).

max: largest finite value; ovf: smallest |x| that overflows under round-to-nearest-even
(ovf_incl: whether ovf itself does); ovf_bits / nan: the overflow and NaN codes, sign added
separately when signed_ovf (e4m3fn has no inf, so it overflows to NaN; the FNUZ types have one
NaN, 0x80, and no -0); kind: the AMD builtins' name for the format (fp8 = e4m3, bf8 = e5m2).
The language's conversion rules are in docs/language.md.
"""
from .. import dtypes as dt
from ..ir import scalar_of
from ..targets.base import SR_FORMATS
from .cemit import CodegenError

__all__ = ["FP8_FORMATS", "fp8_consts", "StorageConversions"]

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


def fp8_consts(d):
    """(mantissa bits, exponent bias, largest finite code) of fp8 type d."""
    import ml_dtypes  # only kernels that convert fp8 pay for the import
    fi = ml_dtypes.finfo(d.np_dtype)
    return fi.nmant, 1 - fi.minexp, int(fi.max.view("uint8"))


class StorageConversions:
    """Conversions of the storage types (fp8 OCP and FNUZ, e8m0) for a C dialect, mixed into
    its emitter: the chip's conversion instructions where the target's table says it has them
    (``Target.hw_fp8``; the dialect spells them in ``hw_fp8_decode``/``hw_fp8_encode``), else
    exact bit arithmetic with the interpreter's rules (interp/semantics.py), written once here
    for every dialect. Spelling hooks the dialect provides: ``bits_to_f32``, ``f32_to_bits``,
    ``float_fn`` (fabs, rint) and ``helper``.
    """

    def cast_storage(self, x, src, to, rounding, sat):
        if src.storage_only and to.storage_only:
            return self.encode_storage(self.decode_storage(x, src), to, rounding, sat)
        if src.storage_only:
            f = self.decode_storage(x, src)
            return f if to.name == "f32" else self.cast_expr(f, dt.f32, to, rounding, sat)
        f = x if src.name == "f32" else self.cast_expr(x, src, dt.f32, "rn", False)
        return self.encode_storage(f, to, rounding, sat)

    def render_cast(self, op, indent):
        """Lane pairs share one instruction where the target's table has a packed conversion
        (Target.packed_conversion); the dialect spells a pair in ``packed_pair``."""
        a = op.operands[0]
        src, to, rnd, sat = scalar_of(a.type), op.attrs["to"], op.attrs["rounding"], op.attrs["sat"]
        xs = self.lanes(a)
        pk = self.target.packed_conversion(src, to, rnd) if len(op.operands) == 1 else None
        if len(xs) < 2 or pk is None:
            return super().render_cast(op, indent)
        out = []
        for lo, hi in zip(xs[0::2], xs[1::2]):
            out += self.packed_pair(pk, lo, hi, src, to, rnd, sat, indent)
        if len(xs) % 2:
            out.append(self.cast_expr(xs[-1], src, to, rnd, sat))
        self.assign_lanes(op.results[0], out, indent)

    def in_hardware(self, d) -> bool:
        """Whether the chip converts ``d`` with its own instructions (the target's table)."""
        return d.name in self.target.hw_fp8

    def decode_storage(self, x, d):
        """Exact f32 value of a storage-type lane."""
        if d.name == "e8m0":
            return f"{self.e8m0_decoder()}({x})"
        self._internal_unless_fp8(d)
        if self.in_hardware(d):
            return self.hw_fp8_decode(x, d)
        return f"{self.sw_fp8_decoder(d)}({x})"

    def encode_storage(self, f, d, rounding, sat):
        """A storage-type lane from f32 lane f."""
        if d.name == "e8m0":
            return f"{self.e8m0_encoder(rounding, sat)}({f})"
        self._internal_unless_fp8(d)
        if rounding != "rn":
            raise CodegenError(f"internal: rounding {rounding!r} to {d.name} reached the "
                               f"{self.backend} renderer (tracing refuses it)")
        if self.in_hardware(d):
            return self.hw_fp8_encode(f, d, sat)
        return f"{self.sw_fp8_encoder(d, sat)}({f})"

    def _internal_unless_fp8(self, d):
        if d.name not in FP8_FORMATS:
            raise CodegenError(f"internal: conversion of {d.name} reached the {self.backend} "
                               f"renderer for {self.target.name} (tracing refuses it)")

    # -- the bit arithmetic ---------------------------------------------------------------------
    def _sign_of(self, f):
        return f"(({self.f32_to_bits(f)} >> 24) & 0x80u)"

    def fp8_overflowed(self, d, sat, a):
        """(C condition on the magnitude a of lane f, resulting code) for |f| too large for d
        after rounding."""
        info = FP8_FORMATS[d.name]
        if sat:
            code = f"({fp8_consts(d)[2]}u | {self._sign_of('f')})"
        elif info["signed_ovf"]:
            code = f"({info['ovf_bits']}u | {self._sign_of('f')})"
        else:
            code = f"{info['ovf_bits']}u"
        return f"{a} {'>=' if info['ovf_incl'] else '>'} {info['ovf']:.1f}f", code

    def fp8_fixup(self, d, sat):
        """opus_fix_<d>[_sat](f, b): the code b an instruction gave for lane f, with NaN given
        the canonical code and, without sat, |f| past the rounding limit the overflow code
        (the instructions saturate or are fed clamped values)."""
        info = FP8_FORMATS[d.name]
        n = f"opus_fix_{d.name}{'_sat' if sat else ''}"
        body = f"return f != f ? {info['nan']}u : b;"
        if not sat:
            cond, code = self.fp8_overflowed(d, sat, f"{self.float_fn('fabs', dt.f32)}(f)")
            body = f"return f != f ? {info['nan']}u : ({cond} ? {code} : b);"
        return self.helper(n, f"unsigned {n}(float f, unsigned b) {{ {body} }}")

    def sw_fp8_decoder(self, d):
        """opus_<d>_to_f32(b) in bit arithmetic, for any fp8 format."""
        info = FP8_FORMATS[d.name]
        m, bias, top = fp8_consts(d)
        n = f"opus_{d.name}_to_f32"
        nan = f"return {self.bits_to_f32('0x7FFFFFFFu')};"
        if not info["signed_ovf"]:  # FNUZ: 0x80 is the one NaN
            special = f"if (b == {info['nan']}u) {nan} "
        else:  # OCP: codes past the largest finite one are NaN, but e5m2's first is inf
            special = f"if (mag > {top}u) {nan} "
            if info["ovf_bits"] != info["nan"]:
                inf = self.bits_to_f32("(0x7F800000u | ((unsigned)(b & 0x80u) << 24))")
                special = f"if (mag == {info['ovf_bits']}u) return {inf}; " + special
        # the magnitude bits as an f32 bit pattern, scaled by 2^(127-bias): exact, subnormals too
        return self.helper(n, f"float {n}(unsigned char b) {{ unsigned mag = b & 0x7Fu; "
                              f"{special}float v = {self.bits_to_f32(f'(mag << {23 - m})')} * "
                              f"{float(2.0 ** (127 - bias)).hex()}f; "
                              "return (b & 0x80u) ? -v : v; }")

    def sw_fp8_encoder(self, d, sat):
        """opus_f32_to_<d>[_sat](f): round to nearest even in bit arithmetic, any fp8 format."""
        info = FP8_FORMATS[d.name]
        m, bias, _ = fp8_consts(d)
        n = f"opus_f32_to_{d.name}{'_sat' if sat else ''}"
        sh = 23 - m
        cond, code = self.fp8_overflowed(d, sat, "a")
        zero = "r | s" if info["signed_ovf"] else "r ? r | s : 0u"  # FNUZ has no -0
        fabs, rint = self.float_fn("fabs", dt.f32), self.float_fn("rint", dt.f32)
        body = (f"unsigned s = {self._sign_of('f')}; float a = {fabs}(f); "
                f"if (a != a) return (unsigned char){info['nan']}u; "
                f"if ({cond}) return (unsigned char){code}; "
                # subnormal codes count steps of 2^(1-bias-m); normals round the f32 bits (RNE)
                f"unsigned v = {self.f32_to_bits('a')}; unsigned r = a < {float(2.0 ** (1 - bias)).hex()}f ? "
                f"(unsigned){rint}(a * {float(2.0 ** (m + bias - 1)).hex()}f) : "
                f"((v + {(1 << (sh - 1)) - 1}u + ((v >> {sh}) & 1u)) >> {sh}) - {(127 - bias) << m}u; "
                f"return (unsigned char)({zero});")
        return self.helper(n, f"unsigned char {n}(float f) {{ {body} }}")

    # -- stochastic rounding (ir/ops.py cast 'sr') ------------------------------------------------
    def cast_sr_expr(self, x, bits, src, to, sat):
        """One lane rounded stochastically: the chip's instruction where the target's table has
        it (``Target.hw_sr``, spelled by the dialect's ``hw_sr``), else the exact grid value in
        bit arithmetic (``sr_grid``) converted with 'rn', which is exact on the grid and applies
        sat and the overflow rule."""
        f = x if src.name == "f32" else self.to_f32(x, src)
        if self.target.conversion(src, to, "sr", sat) == "hardware":
            return self.hw_sr(f, bits, to, sat)
        return self.cast_expr(f"{self.sr_grid(to)}({f}, {bits})", dt.f32, to, "rn", sat)

    def sr_grid(self, to):
        """opus_sr_grid_<to>(f, r): f32 f rounded stochastically to ``to``'s precision with the
        random word r, as the f32 holding the result (interp.semantics.stochastic_grid)."""
        m, emin = SR_FORMATS[to.name]
        n = f"opus_sr_grid_{to.name}"
        keep = (0xFFFFFFFF << (23 - m)) & 0xFFFFFFFF
        # below 2^emin: the 24-bit significand shifted to exponent emin (bits under it dropped),
        # the random bits added, the sum's top bits counting steps of 2^(emin-m); bf16's steps
        # are f32 subnormals, spelled by their bits
        small = (f"{self.bits_to_f32(f'q << {23 - m}')}" if emin == -126 else
                 f"(float)q * {float(2.0 ** (emin - m)).hex()}f")
        body = (f"unsigned u = {self.f32_to_bits('f')}; unsigned a = u & 0x7FFFFFFFu; "
                f"if (a == 0u || a >= 0x7F800000u) return f; r >>= {9 + m}; unsigned mag; "
                f"if (a >= {(emin + 127) << 23}u) mag = (a + r) & {hex(keep)}u; "
                f"else {{ unsigned e = a >> 23; unsigned sh = {emin + 127}u - (e ? e : 1u); "
                f"unsigned s = sh > 31u ? 0u : ((a & 0x7FFFFFu) | (e ? 0x800000u : 0u)) >> sh; "
                f"unsigned q = (s + r) >> {23 - m}; mag = {self.f32_to_bits(small)}; }} "
                f"return {self.bits_to_f32('mag | (u & 0x80000000u)')};")
        return self.helper(n, f"float {n}(float f, unsigned r) {{ {body} }}")

    def hw_sr(self, f, bits, to, sat):
        raise CodegenError(f"internal: the {self.backend} renderer has no stochastic-rounding "
                           f"instruction for {to.name} on {self.target.name}")

    def e8m0_decoder(self):
        """opus_e8m0_to_f32(b) = 2^(b-127); b = 0 is the f32 subnormal 2^-127, 0xFF is NaN."""
        bits = self.bits_to_f32("(b == 0xFFu ? 0x7FFFFFFFu : (b ? (unsigned)b << 23 : 0x400000u))")
        return self.helper("opus_e8m0_to_f32",
                           f"float opus_e8m0_to_f32(unsigned char b) {{ return {bits}; }}")

    def e8m0_encoder(self, rounding, sat):
        """opus_f32_to_e8m0_<rounding>[_sat](f); the rules are _to_e8m0's in interp/semantics.py."""
        n = f"opus_f32_to_e8m0_{rounding}{'_sat' if sat else ''}"
        if rounding == "rz":
            k = "u >> 23"
        else:  # nearest, ties up; below 2^-126 the midpoint with 2^-127 is the bit pattern 0x600000
            k = "u < 0x800000u ? (unsigned)(u >= 0x600000u) : (u + 0x400000u) >> 23"
        return self.helper(n, f"unsigned char {n}(float f) {{ unsigned u = {self.f32_to_bits('f')}; "
                              f"unsigned k = {k}; {'if (k == 255u) k = 254u; ' if sat else ''}"
                              "return (unsigned char)(u - 1u < 0x7F800000u ? k : 255u); }")
