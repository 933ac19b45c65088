"""CUDA C++ dialect: headerless source for NVRTC (no #include; PTX inline asm where C++ has
no spelling without cuda_fp16.h & co)."""
from __future__ import annotations

from ..ir import PointerType
from .cemit import CEmitter, CodegenError

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
        return self.helper("opus_h2f", f"{self.device_fn_prefix()} float opus_h2f(unsigned short h) "
                                       '{ float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }')

    def helper_b2f(self):
        return self.helper("opus_b2f", f"{self.device_fn_prefix()} float opus_b2f(unsigned short h) "
                                       "{ return __uint_as_float((unsigned)h << 16); }")

    def helper_f2h(self, rounding):
        n = f"opus_f2h_{rounding}"
        return self.helper(n, f"{self.device_fn_prefix()} unsigned short {n}(float f) "
                              f'{{ unsigned short h; asm("cvt.{rounding}.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }}')

    def helper_f2b(self, rounding):
        n = f"opus_f2b_{rounding}"
        return self.helper(n, f"{self.device_fn_prefix()} unsigned short {n}(float f) "
                              f'{{ unsigned short h; asm("cvt.{rounding}.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }}')

    def float_to_int(self, f, src, to):
        """cvt.rzi: toward zero, saturating, NaN -> 0 (a C cast is undefined out of range)."""
        ptx_to = {"i32": ("s32", "r"), "u32": ("u32", "r"), "i64": ("s64", "l"), "u64": ("u64", "l")}[to.name]
        ptx_from = ("f64", "d") if src.name == "f64" else ("f32", "f")
        ct, ft = self.scalar_ctype(to), ("double" if src.name == "f64" else "float")
        n = f"opus_cvt_{ptx_to[0]}_{ptx_from[0]}"
        self.helper(n, f"{self.device_fn_prefix()} {ct} {n}({ft} x) {{ {ct} r; "
                       f'asm("cvt.rzi.{ptx_to[0]}.{ptx_from[0]} %0, %1;" : "={ptx_to[1]}"(r) : "{ptx_from[1]}"(x)); return r; }}')
        return f"{n}({f})"

    def shared_decl(self, ct, name, count, align):
        return f"__shared__ __align__({align}) {ct} {name}[{count}];"

    def signature(self):
        params = ", ".join(f"{self.ctype(p.type)} {self.fresh(p.value, 'p_' + p.name + '_')}"
                           for p in self.fn.params)
        bs = self.fn.attrs.get("block_size")
        lb = f"__launch_bounds__({bs}) " if bs else ""
        return f'extern "C" __global__ void {lb}{self.fn.name}({params})'

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
