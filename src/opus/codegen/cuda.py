"""CUDA C++ dialect: headerless source for NVRTC (no #include; PTX inline asm where C++ has
no spelling without cuda_fp16.h & co)."""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from ..ir import scalar_of
from .cemit import CEmitter
from .fp8 import FP8_FORMATS, StorageConversions

__all__ = ["render_cuda", "CudaEmitter"]

_SPECIAL = {"thread_id": "threadIdx", "block_id": "blockIdx", "block_dim": "blockDim",
            "num_blocks": "gridDim"}


class CudaEmitter(StorageConversions, CEmitter):
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

    def f32_to_bits(self, f):
        return f"__float_as_uint({f})"

    # -- storage types: fp8 (OCP and FNUZ) and e8m0 -----------------------------------------
    # Where the target's table says the chip converts an fp8 encoding (Target.hw_fp8: OCP on
    # sm_89+), two lanes share one cvt (cvt.rn.satfinite.e4m3x2.f32 packs its first source in
    # the high byte; cvt.rn.f16x2.e4m3x2 unpacks the high byte to the high half). Everything
    # else is the exact bit arithmetic of codegen/fp8.py.
    def cast_storage(self, x, src, to, rounding, sat):
        if src.storage_only and to.name == "f16" and self.in_hardware(src):
            return f"(unsigned short){self._hw_decoder(src)}({x})"
        return super().cast_storage(x, src, to, rounding, sat)

    def render_cast(self, op, indent):
        """Lane pairs share one cvt where the hardware converts fp8 two at a time."""
        (a,) = op.operands
        src, to, rnd, sat = scalar_of(a.type), op.attrs["to"], op.attrs["rounding"], op.attrs["sat"]
        xs = self.lanes(a)
        enc = self.in_hardware(to) and rnd == "rn" and not src.storage_only
        dec = self.in_hardware(src) and not to.storage_only
        if len(xs) < 2 or not (enc or dec):
            return super().render_cast(op, indent)
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

    def hw_fp8_decode(self, x, d: DType):
        return self.to_f32(f"(unsigned short){self._hw_decoder(d)}({x})", dt.f16)

    def hw_fp8_encode(self, f, d: DType, sat):
        return f"(unsigned char){self._hw_encoder(d, sat)}({f}, 0.0f)"

    def _hw_encoder(self, d: DType, sat):
        """opus_f32x2_to_<d>(lo, hi): two lanes into one 16-bit word, lo in the low byte. The
        instruction saturates; NaN gets the canonical code and, without sat, |f| past the
        rounding limit the format's overflow code."""
        info = FP8_FORMATS[d.name]
        fix = f"opus_fix_{d.name}{'_sat' if sat else ''}"
        body = f"return f != f ? {info['nan']}u : b;"
        if not sat:
            cond, code = self.fp8_overflowed(d, sat, "fabsf(f)")
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

    def render_dyn_smem(self, op, indent):
        r = op.results[0]
        ct = self.scalar_ctype(op.attrs["dtype"])
        self.assign_lanes(r, [f"(({ct}*)(opus_dyn_smem + {op.attrs['offset']}))"], indent)

    def _linear_tid(self):
        if self.fn.attrs.get("block_size"):
            return "threadIdx.x"  # a fixed block size is one-dimensional
        return "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"

    def render_special(self, op, indent):
        w = op.attrs["which"]
        ws = self.target.warp_size
        if w == "lane_id":
            e = f"(int)({self._linear_tid()} & {ws - 1}u)"
        elif w == "warp_id":
            e = f"(int)({self._linear_tid()} >> {ws.bit_length() - 1})"
        elif w.startswith("grid_size."):  # threads in the grid: unsigned product, wraps
            e = f"(int)(gridDim.{w[-1]} * blockDim.{w[-1]})"
        else:
            k, a = w.split(".")
            e = f"(int){_SPECIAL[k]}.{a}"
        self.assign_lanes(op.results[0], [e], indent)

    def render_barrier(self, op, indent):
        self.line(indent, "__syncthreads();")


def render_cuda(fn, target) -> str:
    """Headerless CUDA C++ for a traced Function."""
    return CudaEmitter(fn, target).render()
