"""CUDA C++ dialect: headerless source for NVRTC (no #include; PTX inline asm where C++ has
no spelling without cuda_fp16.h & co)."""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import scalar_of
from .cemit import CEmitter, CodegenError
from .fp8 import FP8_FORMATS

__all__ = ["render_cuda", "CudaEmitter"]

_SPECIAL = {"thread_id": "threadIdx", "block_id": "blockIdx", "block_dim": "blockDim",
            "grid_dim": "gridDim"}


class CudaEmitter(CEmitter):
    backend = "cuda"

    def device_fn_prefix(self):
        return "static __device__ __forceinline__"

    def bits_to_f32(self, bits):
        return f"__uint_as_float({bits})"

    def bits_to_f64(self, bits):
        return f"__longlong_as_double((long long){bits})"

    def helper_h2f(self):
        return self.helper("opus_h2f", f"float opus_h2f(unsigned short h) "
                                       '{ float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }')

    def helper_b2f(self):
        return self.helper("opus_b2f", f"float opus_b2f(unsigned short h) "
                                       "{ return __uint_as_float((unsigned)h << 16); }")

    def helper_f2h(self, rounding):
        n = f"opus_f2h_{rounding}"
        return self.helper(n, f"unsigned short {n}(float f) "
                              f'{{ unsigned short h; asm("cvt.{rounding}.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }}')

    def helper_f2b(self, rounding):
        n = f"opus_f2b_{rounding}"
        return self.helper(n, f"unsigned short {n}(float f) "
                              f'{{ unsigned short h; asm("cvt.{rounding}.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }}')

    def float_to_int(self, f, src, to):
        """cvt.rzi: toward zero, saturating (a C cast is undefined out of range); NaN -> 0 by a
        compare, since cvt gives the most negative integer (0x80..0) for NaN on sm_90."""
        ptx_to = {"i32": ("s32", "r"), "u32": ("u32", "r"), "i64": ("s64", "l"), "u64": ("u64", "l")}[to.name]
        ptx_from = ("f64", "d") if src.name == "f64" else ("f32", "f")
        ct, ft = self.scalar_ctype(to), ("double" if src.name == "f64" else "float")
        n = f"opus_cvt_{ptx_to[0]}_{ptx_from[0]}"
        self.helper(n, f"{ct} {n}({ft} x) {{ {ct} r; "
                       f'asm("cvt.rzi.{ptx_to[0]}.{ptx_from[0]} %0, %1;" : "={ptx_to[1]}"(r) : "{ptx_from[1]}"(x)); '
                       f"return x != x ? ({ct})0 : r; }}")
        return f"{n}({f})"

    # -- storage types: fp8 (OCP and FNUZ) and e8m0 -----------------------------------------
    # sm_89+ converts OCP fp8 in hardware, two lanes per cvt (cvt.rn.satfinite.e4m3x2.f32 packs
    # its first source in the high byte; cvt.rn.f16x2.e4m3x2 unpacks the high byte to the high
    # half). Everything else is exact bit arithmetic with the interpreter's semantics.
    def _hw_fp8(self, d: DType):
        return d.name in ("fp8_e4m3", "fp8_e5m2") and self.target.sm >= 89

    def cast_storage(self, x, src, to, rounding, sat):
        if src.storage_only and to.storage_only:
            return self._encode(self._decode(x, src), to, rounding, sat)
        if src.storage_only:
            if to.name == "f16" and self._hw_fp8(src):
                return f"(unsigned short){self._hw_decoder(src)}({x})"
            return self.cast_expr(self._decode(x, src), dt.f32, to, rounding, sat)
        f = x if src.name == "f32" else self.cast_expr(x, src, dt.f32, "rn", False)
        return self._encode(f, to, rounding, sat)

    def op_cast(self, op, indent):
        """Lane pairs share one cvt where the hardware converts fp8 two at a time."""
        (a,) = op.operands
        src, to, rnd, sat = scalar_of(a.type), op.attrs["to"], op.attrs["rounding"], op.attrs["sat"]
        if any(d.storage_only and d.bits < 8 for d in (src, to)):
            raise CodegenError(f"conversion {src.name} -> {to.name} is not supported by the cuda backend "
                               f"({self.target.name}): 4-bit types have no register or memory "
                               "representation on CUDA yet")
        xs = self.lanes(a)
        enc = self._hw_fp8(to) and rnd == "rn" and not src.storage_only
        dec = self._hw_fp8(src) and not to.storage_only
        if len(xs) < 2 or not (enc or dec):
            return super().op_cast(op, indent)
        out = []
        for lo, hi in zip(xs[0::2], xs[1::2]):
            t = self.fresh(prefix="pk")
            if enc:
                lo, hi = (self.cast_expr(v, src, dt.f32, "rn", False) for v in (lo, hi))
                self.line(indent, f"unsigned short {t} = {self._hw_encoder(to, sat)}({lo}, {hi});")
                out += [f"(unsigned char){t}", f"(unsigned char)({t} >> 8)"]
            else:
                self.line(indent, f"unsigned {t} = {self._hw_decoder(src)}((unsigned short)({lo} | ({hi} << 8)));")
                halves = [f"(unsigned short){t}", f"(unsigned short)({t} >> 16)"]
                out += halves if to.name == "f16" else \
                    [self.cast_expr(self.to_f32(h, dt.f16), dt.f32, to, rnd, sat) for h in halves]
        if len(xs) % 2:
            out.append(self.cast_expr(xs[-1], src, to, rnd, sat))
        self.assign_lanes(op.results[0], out, indent)

    def _decode(self, x, d: DType):
        """Exact f32 value of a storage-type lane."""
        if self._hw_fp8(d):
            return self.to_f32(f"(unsigned short){self._hw_decoder(d)}({x})", dt.f16)
        if d.name == "e8m0":  # 2^(b-127); b = 0 is the f32 subnormal 2^-127
            n = self.helper("opus_e8m0_to_f32", f"float opus_e8m0_to_f32(unsigned char b) "
                                                "{ return __uint_as_float(b == 0xFFu ? 0x7FFFFFFFu : "
                                                "(b ? (unsigned)b << 23 : 0x400000u)); }")
            return f"{n}({x})"
        return f"{self._sw_decoder(d)}({x})"

    def _encode(self, f, d: DType, rounding, sat):
        """A storage-type lane from f32 lane f (see interp/semantics.py for the rules)."""
        if d.name == "e8m0":
            return f"{self._e8m0_encoder(rounding, sat)}({f})"
        if rounding != "rn":
            raise CodegenError(f"rounding {rounding!r} for conversions to {d.name} on {self.target.name}: "
                               "fp8 conversions round to nearest even")
        if self._hw_fp8(d):
            return f"(unsigned char){self._hw_encoder(d, sat)}({f}, 0.0f)"
        return f"{self._sw_encoder(d, sat)}({f})"

    def _fp8_consts(self, d: DType):
        """(mantissa bits, exponent bias, largest finite code) of fp8 type d."""
        import ml_dtypes  # only kernels that convert fp8 pay for the import
        fi = ml_dtypes.finfo(d.np_dtype)
        return fi.nmant, 1 - fi.minexp, int(fi.max.view("uint8"))

    def _overflowed(self, d, sat, a="fabsf(f)"):
        """(C condition on |f|, resulting code) for |f| too large for d after rounding."""
        info = FP8_FORMATS[d.name]
        sign = "((__float_as_uint(f) >> 24) & 0x80u)"
        if sat:
            code = f"({self._fp8_consts(d)[2]}u | {sign})"
        else:
            code = f"({info['ovf_bits']}u | {sign})" if info["signed_ovf"] else f"{info['ovf_bits']}u"
        return f"{a} {'>=' if info['ovf_incl'] else '>'} {info['ovf']:.1f}f", code

    def _hw_encoder(self, d: DType, sat):
        """opus_f32x2_to_<d>(lo, hi): two lanes into one 16-bit word, lo in the low byte. The
        instruction saturates; NaN gets the canonical code and, without sat, |f| past the
        rounding limit the format's overflow code."""
        info = FP8_FORMATS[d.name]
        fix = f"opus_fix_{d.name}{'_sat' if sat else ''}"
        body = f"return f != f ? {info['nan']}u : b;"
        if not sat:
            cond, code = self._overflowed(d, sat)
            body = f"return f != f ? {info['nan']}u : ({cond} ? {code} : b);"
        self.helper(fix, f"unsigned {fix}(float f, unsigned b) {{ {body} }}")
        n = f"opus_f32x2_to_{d.name}{'_sat' if sat else ''}"
        kind = d.name.split("_")[1] + "x2"
        return self.helper(n, f"unsigned short {n}(float lo, float hi) {{ unsigned short r; "
                              f'asm("cvt.rn.satfinite.{kind}.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo)); '
                              f"return (unsigned short)({fix}(lo, r & 0xFFu) | ({fix}(hi, r >> 8) << 8)); }}")

    def _hw_decoder(self, d: DType):
        """opus_<d>x2_to_f16x2(w): the two bytes of w as two f16 (low byte -> low half), exact."""
        n = f"opus_{d.name}x2_to_f16x2"
        kind = d.name.split("_")[1] + "x2"
        return self.helper(n, f"unsigned {n}(unsigned short w) {{ unsigned r; "
                              f'asm("cvt.rn.f16x2.{kind} %0, %1;" : "=r"(r) : "h"(w)); return r; }}')

    def _sw_decoder(self, d: DType):
        """opus_<d>_to_f32(b) in bit arithmetic, for any fp8 format (sm_80/86; FNUZ)."""
        info = FP8_FORMATS[d.name]
        m, bias, top = self._fp8_consts(d)
        n = f"opus_{d.name}_to_f32"
        nan = "return __uint_as_float(0x7FFFFFFFu);"
        if not info["signed_ovf"]:  # FNUZ: 0x80 is the one NaN
            special = f"if (b == {info['nan']}u) {nan} "
        else:  # OCP: codes past the largest finite one are NaN, but e5m2's first is inf
            special = f"if (mag > {top}u) {nan} "
            if info["ovf_bits"] != info["nan"]:
                special = (f"if (mag == {info['ovf_bits']}u) "
                           "return __uint_as_float(0x7F800000u | ((unsigned)(b & 0x80u) << 24)); " + special)
        # the magnitude bits as an f32 bit pattern, scaled by 2^(127-bias): exact, subnormals too
        return self.helper(n, f"float {n}(unsigned char b) {{ unsigned mag = b & 0x7Fu; "
                              f"{special}float v = __uint_as_float(mag << {23 - m}) * {float(2.0 ** (127 - bias)).hex()}f; "
                              "return (b & 0x80u) ? -v : v; }")

    def _sw_encoder(self, d: DType, sat):
        """opus_f32_to_<d>[_sat](f): round to nearest even in bit arithmetic, any fp8 format."""
        info = FP8_FORMATS[d.name]
        m, bias, _ = self._fp8_consts(d)
        n = f"opus_f32_to_{d.name}{'_sat' if sat else ''}"
        sh = 23 - m
        cond, code = self._overflowed(d, sat, "a")
        zero = "r | s" if info["signed_ovf"] else "r ? r | s : 0u"  # FNUZ has no -0
        body = (f"unsigned s = (__float_as_uint(f) >> 24) & 0x80u; float a = fabsf(f); "
                f"if (a != a) return (unsigned char){info['nan']}u; "
                f"if ({cond}) return (unsigned char){code}; "
                # subnormal codes count steps of 2^(1-bias-m); normals round the f32 bits (RNE)
                f"unsigned v = __float_as_uint(a); unsigned r = a < {float(2.0 ** (1 - bias)).hex()}f ? "
                f"(unsigned)rintf(a * {float(2.0 ** (m + bias - 1)).hex()}f) : "
                f"((v + {(1 << (sh - 1)) - 1}u + ((v >> {sh}) & 1u)) >> {sh}) - {(127 - bias) << m}u; "
                f"return (unsigned char)({zero});")
        return self.helper(n, f"unsigned char {n}(float f) {{ {body} }}")

    def _e8m0_encoder(self, rounding, sat):
        """opus_f32_to_e8m0_<rounding>[_sat](f); the rules are _to_e8m0's in interp/semantics.py."""
        n = f"opus_f32_to_e8m0_{rounding}{'_sat' if sat else ''}"
        if rounding == "rz":
            k = "u >> 23"
        else:  # nearest, ties up; below 2^-126 the midpoint with 2^-127 is the bit pattern 0x600000
            k = "u < 0x800000u ? (unsigned)(u >= 0x600000u) : (u + 0x400000u) >> 23"
        return self.helper(n, f"unsigned char {n}(float f) {{ unsigned u = __float_as_uint(f); "
                              f"unsigned k = {k}; {'if (k == 255u) k = 254u; ' if sat else ''}"
                              "return (unsigned char)(u - 1u < 0x7F800000u ? k : 255u); }")

    def shared_decl(self, ct, name, count, align):
        return f"__shared__ __align__({align}) {ct} {name}[{count}];"

    def signature(self):
        bs = self.fn.attrs.get("block_size")
        lb = f"__launch_bounds__({bs}) " if bs else ""
        return f'extern "C" __global__ void {lb}{self.symbol}({self.params_decl()})'

    def kernel_top(self):
        out = super().kernel_top()
        if self.fn.attrs.get("dyn_smem"):
            out.insert(0, "  extern __shared__ __align__(16) unsigned char opus_dyn_smem[];")
        return out

    def op_dyn_smem(self, op, indent):
        r = op.results[0]
        ct = self.scalar_ctype(op.attrs["dtype"])
        self.assign_lanes(r, [f"(({ct}*)(opus_dyn_smem + {op.attrs['offset']}))"], indent)

    def _linear_tid(self):
        if self.fn.attrs.get("block_size"):
            return "threadIdx.x"  # a fixed block size is one-dimensional
        return "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"

    def op_special(self, op, indent):
        w = op.attrs["which"]
        if w == "lane_id":
            e = f"(int)({self._linear_tid()} & 31u)"
        elif w == "warp_id":
            e = f"(int)({self._linear_tid()} >> 5)"
        else:
            k, a = w.split(".")
            e = f"(int){_SPECIAL[k]}.{a}"
        self.assign_lanes(op.results[0], [e], indent)

    def op_barrier(self, op, indent):
        self.line(indent, "__syncthreads();")


def render_cuda(fn, target) -> str:
    """Headerless CUDA C++ for a traced Function."""
    return CudaEmitter(fn, target).render()
