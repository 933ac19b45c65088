// CUDA dialect on the host: what codegen/cuda.py's headerless source uses from CUDA, given its
// host meaning. Inline PTX `asm(...)` statements are rewritten by the runner into calls of the
// opus_ptx functions below (one per instruction, named after it: cvt.rn.f16.f32 ->
// opus_ptx::cvt_rn_f16_f32, results first), each written from the PTX ISA's definition of the
// instruction; an instruction without one here is "not host-executable" (README.md).
#pragma once
#include <limits>

#include "host.h"

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static  // one array per kernel, shared by the lanes of the running block
#define threadIdx (::opus_host.cur->tid)
#define blockIdx (::opus_host.bid)
#define blockDim (::opus_host.bdim)
#define gridDim (::opus_host.gdim)
#define __syncthreads() opus_host_syncthreads()

static inline unsigned __float_as_uint(float f) { return opus_host_float::bits(f); }
static inline float __uint_as_float(unsigned u) { return opus_host_float::from_bits(u); }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
// __popc / __popcll (POPC): the set bits of a 32 / 64-bit word
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
// __byte_perm(x, y, s) (PRMT): result byte n is byte (s >> 4n) & 7 of the 8 bytes y:x (x low)
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = (unsigned long long)y << 32 | x;
  unsigned r = 0;
  for (int n = 0; n < 4; n++) r |= (unsigned)(v >> (8 * ((s >> (4 * n)) & 7)) & 0xFFu) << (8 * n);
  return r;
}
// CUDA's approximate reciprocal square roots (2 ulp): the correctly rounded value is within it
static inline float rsqrtf(float x) { return (float)(1.0 / std::sqrt((double)x)); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
// CUDA's fminf/fmaxf are PTX min/max: a NaN operand yields the other, -0 < +0 (glibc's need
// not order zeros)
#define fminf(a, b) opus_host_float::min_num<float>(a, b)
#define fmaxf(a, b) opus_host_float::max_num<float>(a, b)
#define fmin(a, b) opus_host_float::min_num<double>(a, b)
#define fmax(a, b) opus_host_float::max_num<double>(a, b)

namespace opus_ptx {
namespace F = opus_host_float;

// cvt.f32.f16: exact
static inline void cvt_f32_f16(float& d, unsigned short a) { d = F::f16_to_f32(a); }
// cvt.{rn,rz}.{f16,bf16}.f32: IEEE rounding; NaN -> a NaN
static inline void cvt_rn_f16_f32(unsigned short& d, float a) { d = F::f32_to_f16(a, false); }
static inline void cvt_rz_f16_f32(unsigned short& d, float a) { d = F::f32_to_f16(a, true); }
static inline void cvt_rn_bf16_f32(unsigned short& d, float a) { d = F::f32_to_bf16(a, false); }
static inline void cvt_rz_bf16_f32(unsigned short& d, float a) { d = F::f32_to_bf16(a, true); }
// cvt.{rn,rz}.{f16x2,bf16x2}.f32 d, a, b: d.hi = cvt(a), d.lo = cvt(b) (PTX ISA, cvt)
static inline void cvt_rn_f16x2_f32(unsigned& d, float a, float b) {
  d = (unsigned)F::f32_to_f16(a, false) << 16 | F::f32_to_f16(b, false); }
static inline void cvt_rz_f16x2_f32(unsigned& d, float a, float b) {
  d = (unsigned)F::f32_to_f16(a, true) << 16 | F::f32_to_f16(b, true); }
static inline void cvt_rn_bf16x2_f32(unsigned& d, float a, float b) {
  d = (unsigned)F::f32_to_bf16(a, false) << 16 | F::f32_to_bf16(b, false); }
static inline void cvt_rz_bf16x2_f32(unsigned& d, float a, float b) {
  d = (unsigned)F::f32_to_bf16(a, true) << 16 | F::f32_to_bf16(b, true); }

// cvt.rzi.<int>.<float>: toward zero, saturating to the integer's range, NaN -> 0
template <class I, class T> static inline I rzi(T a) {
  if (a != a) return 0;
  long double t = std::trunc((long double)a);
  if (t <= (long double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  if (t >= (long double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)t;
}
static inline void cvt_rzi_s32_f32(int& d, float a) { d = rzi<int>(a); }
static inline void cvt_rzi_u32_f32(unsigned& d, float a) { d = rzi<unsigned>(a); }
static inline void cvt_rzi_s64_f32(long long& d, float a) { d = rzi<long long>(a); }
static inline void cvt_rzi_u64_f32(unsigned long long& d, float a) { d = rzi<unsigned long long>(a); }
static inline void cvt_rzi_s32_f64(int& d, double a) { d = rzi<int>(a); }
static inline void cvt_rzi_u32_f64(unsigned& d, double a) { d = rzi<unsigned>(a); }
static inline void cvt_rzi_s64_f64(long long& d, double a) { d = rzi<long long>(a); }
static inline void cvt_rzi_u64_f64(unsigned long long& d, double a) { d = rzi<unsigned long long>(a); }

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b: a into d[15:8], b into d[7:0]; RNE, NaN ->
// the canonical NaN 0x7F, beyond the largest finite value (inf included) -> +-max finite
static inline void cvt_rn_satfinite_e4m3x2_f32(unsigned short& d, float a, float b) {
  d = (unsigned short)(F::encode(a, F::E4M3, false, F::TO_MAX) << 8 | F::encode(b, F::E4M3, false, F::TO_MAX));
}
static inline void cvt_rn_satfinite_e5m2x2_f32(unsigned short& d, float a, float b) {
  d = (unsigned short)(F::encode(a, F::E5M2, false, F::TO_MAX) << 8 | F::encode(b, F::E5M2, false, F::TO_MAX));
}
// cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a: a[15:8] -> d[31:16], a[7:0] -> d[15:0], exact
static inline unsigned fp8x2_to_f16x2(unsigned short a, const F::Format& fmt) {
  unsigned lo = F::f32_to_f16(F::decode(a & 0xff, fmt), false);
  unsigned hi = F::f32_to_f16(F::decode(a >> 8, fmt), false);
  return hi << 16 | lo;
}
static inline void cvt_rn_f16x2_e4m3x2(unsigned& d, unsigned short a) { d = fp8x2_to_f16x2(a, F::E4M3); }
static inline void cvt_rn_f16x2_e5m2x2(unsigned& d, unsigned short a) { d = fp8x2_to_f16x2(a, F::E5M2); }

// ld.global.cs / st.global.cs (Cache.STREAMING; codegen/cuda.py _hinted): the hint only says
// where the line is cached, so the access is its bytes at p. The address must be aligned to
// the access's size (PTX ISA, ld/st: a misaligned one faults on the GPU): checked here, so a
// lane's access of the wrong width or address fails the launch. .u8/.u16 use 16-bit registers.
static inline const void* aligned(const void* p, unsigned n, const char* what) {
  if ((uintptr_t)p % n) opus_host_fail(what);
  return p;
}
static inline void ld_global_cs_u8(unsigned short& d, const void* p) { d = *(const unsigned char*)p; }
static inline void ld_global_cs_u16(unsigned short& d, const void* p) {
  memcpy(&d, aligned(p, 2, "misaligned ld.global.cs.u16"), 2); }
static inline void ld_global_cs_u32(unsigned& d, const void* p) {
  memcpy(&d, aligned(p, 4, "misaligned ld.global.cs.u32"), 4); }
static inline void ld_global_cs_v2_u32(unsigned& a, unsigned& b, const void* p) {
  const unsigned* w = (const unsigned*)aligned(p, 8, "misaligned ld.global.cs.v2.u32");
  a = w[0]; b = w[1]; }
static inline void ld_global_cs_v4_u32(unsigned& a, unsigned& b, unsigned& c, unsigned& d, const void* p) {
  const unsigned* w = (const unsigned*)aligned(p, 16, "misaligned ld.global.cs.v4.u32");
  a = w[0]; b = w[1]; c = w[2]; d = w[3]; }
static inline void st_global_cs_u8(void* p, unsigned short a) { *(unsigned char*)p = (unsigned char)a; }
static inline void st_global_cs_u16(void* p, unsigned short a) {
  memcpy((void*)aligned(p, 2, "misaligned st.global.cs.u16"), &a, 2); }
static inline void st_global_cs_u32(void* p, unsigned a) {
  memcpy((void*)aligned(p, 4, "misaligned st.global.cs.u32"), &a, 4); }
static inline void st_global_cs_v2_u32(void* p, unsigned a, unsigned b) {
  unsigned* w = (unsigned*)aligned(p, 8, "misaligned st.global.cs.v2.u32");
  w[0] = a; w[1] = b; }
static inline void st_global_cs_v4_u32(void* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  unsigned* w = (unsigned*)aligned(p, 16, "misaligned st.global.cs.v4.u32");
  w[0] = a; w[1] = b; w[2] = c; w[3] = d; }

}  // namespace opus_ptx

// warp intrinsics (readfirstlane's shuffle): an extension header, its kernels run as fibers
#include "warp_cuda.h"
