// HIP dialect on the host: the __builtin_amdgcn_* builtins and clang types that
// codegen/hip.py's headerless source uses, each given its meaning from the AMD CDNA3/CDNA4 ISA
// (README.md lists them). A builtin is shimmed when a shim header #defines it; the runner
// refuses source that calls any other __builtin_amdgcn_* as "not host-executable".
#pragma once
#include "host.h"

#ifndef OPUS_HOST_GFX
#error "the runner defines OPUS_HOST_GFX (942 or 950)"
#endif

// -- work-item and work-group ids ----------------------------------------------------------
#define __builtin_amdgcn_workitem_id_x() (::opus_host.cur->tid.x)
#define __builtin_amdgcn_workitem_id_y() (::opus_host.cur->tid.y)
#define __builtin_amdgcn_workitem_id_z() (::opus_host.cur->tid.z)
#define __builtin_amdgcn_workgroup_id_x() (::opus_host.bid.x)
#define __builtin_amdgcn_workgroup_id_y() (::opus_host.bid.y)
#define __builtin_amdgcn_workgroup_id_z() (::opus_host.bid.z)
#define __builtin_amdgcn_workgroup_size_x() ((unsigned short)::opus_host.bdim.x)
#define __builtin_amdgcn_workgroup_size_y() ((unsigned short)::opus_host.bdim.y)
#define __builtin_amdgcn_workgroup_size_z() ((unsigned short)::opus_host.bdim.z)
// the dispatch's grid size counts work-items
#define __builtin_amdgcn_grid_size_x() (::opus_host.gdim.x * ::opus_host.bdim.x)
#define __builtin_amdgcn_grid_size_y() (::opus_host.gdim.y * ::opus_host.bdim.y)
#define __builtin_amdgcn_grid_size_z() (::opus_host.gdim.z * ::opus_host.bdim.z)
// clang's elementwise min (codegen/hip.py clamps scalar buffer offsets with it: s_min_u32)
#if !defined(__clang__)
#define __builtin_elementwise_min(a, b) ((a) < (b) ? (a) : (b))
#define __builtin_elementwise_max(a, b) ((a) > (b) ? (a) : (b))  // the integer med3 helpers (v_med3_i32/u32)
#endif
// the implicit kernel arguments (code object v5) begin with hidden_block_count_{x,y,z}: the
// grid in blocks, three u32 (the shim's gdim has that layout)
#define __builtin_amdgcn_implicitarg_ptr() ((const void*)&::opus_host.gdim)
// v_mbcnt_{lo,hi}_u32_b32: acc + the set bits of mask (lanes 0-31 / 32-63) below this lane
static inline unsigned opus_host_mbcnt(unsigned mask, unsigned acc, unsigned first) {
  unsigned lane = opus_host_lane();
  unsigned below = lane <= first ? 0 : lane - first;
  unsigned m = below >= 32 ? mask : mask & ((1u << below) - 1);
  return acc + (unsigned)__builtin_popcount(m);
}
#define __builtin_amdgcn_mbcnt_lo(mask, acc) opus_host_mbcnt(mask, acc, 0)
#define __builtin_amdgcn_mbcnt_hi(mask, acc) opus_host_mbcnt(mask, acc, 32)
// v_readfirstlane_b32: the codegen applies it to wave-uniform values only (warp_id), where
// every lane's value is the first lane's
#define __builtin_amdgcn_readfirstlane(x) (x)
// s_barrier with the release/acquire fences HIP's __syncthreads adds: on one OS thread the
// fences have nothing to order
#define __builtin_amdgcn_s_barrier() opus_host_syncthreads()
#define __builtin_amdgcn_fence(order, scope) ((void)0)
// s_waitcnt and the scheduler's hints: a host lane's accesses complete when issued, in
// program order, so there is nothing to wait for or to order
#define __builtin_amdgcn_s_waitcnt(imm) ((void)(imm))
#define __builtin_amdgcn_sched_barrier(mask) ((void)(mask))
#define __builtin_amdgcn_sched_group_barrier(mask, size, syncid) ((void)0)

// -- math ----------------------------------------------------------------------------------
// v_rsq_f32 (1 ulp): the correctly rounded value is within it
#define __builtin_amdgcn_rsqf(x) ((float)(1.0 / std::sqrt((double)(x))))
// v_min/max_f32/f64 (IEEE mode): a NaN operand yields the other, -0 < +0 (the language's rule)
#define __builtin_fminf(a, b) opus_host_float::min_num<float>(a, b)
#define __builtin_fmaxf(a, b) opus_host_float::max_num<float>(a, b)
#define __builtin_fmin(a, b) opus_host_float::min_num<double>(a, b)
#define __builtin_fmax(a, b) opus_host_float::max_num<double>(a, b)
// v_med3_f32 (CDNA3 ISA): with a NaN operand min3 of the operands, whose IEEE-mode min skips
// NaNs (NaN only when all three are); else the median. __builtin_canonicalizef quiets a
// signaling NaN: the host's floats compare the same either way
static inline float opus_host_fmed3(float a, float b, float c) {
  namespace F = opus_host_float;
  if (a != a || b != b || c != c) return F::min_num<float>(F::min_num<float>(a, b), c);
  return F::max_num<float>(F::min_num<float>(a, b), F::min_num<float>(F::max_num<float>(a, b), c));
}
#define __builtin_amdgcn_fmed3f(a, b, c) opus_host_fmed3(a, b, c)
#define __builtin_canonicalizef(x) (x)

// -- inline GCN instructions: the runner rewrites __asm__("v_op %0, %1, %2" : "=v"(r) :
// "v"(a), "v"(b)) into opus_gcn::v_op(r, a, b) (nan="fast" min/max, codegen/hip.py)
namespace opus_gcn {
namespace F = opus_host_float;

// a NaN whose quiet bit (the mantissa's top bit) is clear
static inline bool signaling(float x) { uint32_t u; memcpy(&u, &x, 4); return x != x && !(u & 0x400000u); }
static inline bool signaling(double x) { uint64_t u; memcpy(&u, &x, 8); return x != x && !(u & 0x8000000000000ull); }
// v_min/v_max_f32/f64 in IEEE mode (IEEE 754-2008 minNum/maxNum): a signaling NaN operand gives
// a quiet NaN, a quiet one yields the other operand, -0 < +0
template <class T> static inline T ieee_mode(T a, T b, T (*number)(T, T)) {
  return signaling(a) || signaling(b) ? (T)__builtin_nan("") : number(a, b);
}
static inline void v_min_f32(float& r, float a, float b) { r = ieee_mode<float>(a, b, F::min_num<float>); }
static inline void v_max_f32(float& r, float a, float b) { r = ieee_mode<float>(a, b, F::max_num<float>); }
static inline void v_min_f64(double& r, double a, double b) { r = ieee_mode<double>(a, b, F::min_num<double>); }
static inline void v_max_f64(double& r, double a, double b) { r = ieee_mode<double>(a, b, F::max_num<double>); }
}  // namespace opus_gcn

// -- 16-bit float types: clang's _Float16 and __bf16, with exact conversions --------------
// (v_cvt_f16_f32 and v_cvt_pk_bf16_f32 round to nearest even; NaN stays NaN)
struct opus_host_f16 {
  unsigned short bits;
  opus_host_f16() = default;
  opus_host_f16(float f) : bits(opus_host_float::f32_to_f16(f, false)) {}
  operator float() const { return opus_host_float::f16_to_f32(bits); }
};
struct opus_host_bf16 {
  unsigned short bits;
  opus_host_bf16() = default;
  opus_host_bf16(float f) : bits(opus_host_float::f32_to_bf16(f, false)) {}
  operator float() const { return opus_host_float::bf16_to_f32(bits); }
};
#define _Float16 opus_host_f16
#define __bf16 opus_host_bf16

// -- raw buffer resources (bounded global accesses) ------------------------------------------
// A raw buffer (stride 0): every access of up to 4 bytes, and each dword of a wider one, is
// range-checked on its own: it is in range when its whole byte range lies below num_records
// (offsets unsigned, no wrap-around). Out-of-range loads read 0; out-of-range stores are
// dropped (CDNA3 ISA, "Buffer range checking"; LLVM AMDGPUUsage, "buffer OOB mode").
struct opus_host_rsrc { unsigned char* base; unsigned num_records; };
#define __amdgpu_buffer_rsrc_t opus_host_rsrc
static inline opus_host_rsrc opus_host_make_rsrc(void* base, short stride, int num_records, int flags) {
  if (stride != 0) opus_host_fail("make_buffer_rsrc: only raw buffers (stride 0) are shimmed");
  (void)flags;  // the descriptor's format dword: nothing the shim models depends on it
  return {(unsigned char*)base, (unsigned)num_records};
}
#define __builtin_amdgcn_make_buffer_rsrc(p, stride, num, flags) opus_host_make_rsrc(p, stride, num, flags)

typedef unsigned opus_host_u32x2 __attribute__((vector_size(8)));
typedef unsigned opus_host_u32x4 __attribute__((vector_size(16)));

static inline bool opus_host_in_range(const opus_host_rsrc& r, int voffset, int soffset, int aux,
                                      unsigned at, unsigned width) {
  if (aux != 0) opus_host_fail("buffer access with cache-policy bits: not shimmed");
  unsigned long long off = (unsigned long long)(unsigned)voffset + (unsigned)soffset + at;
  return off + width <= r.num_records;
}
template <class T> static inline T opus_host_buffer_load(opus_host_rsrc r, int voffset, int soffset, int aux) {
  unsigned char out[sizeof(T)];
  for (unsigned at = 0; at < sizeof(T); at += 4) {
    unsigned w = sizeof(T) < 4 ? sizeof(T) : 4;
    if (opus_host_in_range(r, voffset, soffset, aux, at, w))
      memcpy(out + at, r.base + (unsigned)voffset + (unsigned)soffset + at, w);
    else
      memset(out + at, 0, w);
  }
  T v; memcpy(&v, out, sizeof(T));
  return v;
}
template <class T> static inline void opus_host_buffer_store(T v, opus_host_rsrc r, int voffset, int soffset, int aux) {
  unsigned char in[sizeof(T)];
  memcpy(in, &v, sizeof(T));
  for (unsigned at = 0; at < sizeof(T); at += 4) {
    unsigned w = sizeof(T) < 4 ? sizeof(T) : 4;
    if (opus_host_in_range(r, voffset, soffset, aux, at, w))
      memcpy(r.base + (unsigned)voffset + (unsigned)soffset + at, in + at, w);
  }
}
#define __builtin_amdgcn_raw_buffer_load_b8(r, v, s, a) opus_host_buffer_load<unsigned char>(r, v, s, a)
#define __builtin_amdgcn_raw_buffer_load_b16(r, v, s, a) opus_host_buffer_load<unsigned short>(r, v, s, a)
#define __builtin_amdgcn_raw_buffer_load_b32(r, v, s, a) opus_host_buffer_load<unsigned>(r, v, s, a)
#define __builtin_amdgcn_raw_buffer_load_b64(r, v, s, a) opus_host_buffer_load<opus_host_u32x2>(r, v, s, a)
#define __builtin_amdgcn_raw_buffer_load_b128(r, v, s, a) opus_host_buffer_load<opus_host_u32x4>(r, v, s, a)
#define __builtin_amdgcn_raw_buffer_store_b8(x, r, v, s, a) opus_host_buffer_store<unsigned char>(x, r, v, s, a)
#define __builtin_amdgcn_raw_buffer_store_b16(x, r, v, s, a) opus_host_buffer_store<unsigned short>(x, r, v, s, a)
#define __builtin_amdgcn_raw_buffer_store_b32(x, r, v, s, a) opus_host_buffer_store<unsigned>(x, r, v, s, a)
#define __builtin_amdgcn_raw_buffer_store_b64(x, r, v, s, a) opus_host_buffer_store<opus_host_u32x2>(x, r, v, s, a)
#define __builtin_amdgcn_raw_buffer_store_b128(x, r, v, s, a) opus_host_buffer_store<opus_host_u32x4>(x, r, v, s, a)

// -- fp8 conversion instructions of the chip's flavour (gfx942: FNUZ, gfx950: OCP) ----------
#if OPUS_HOST_GFX == 942
#define OPUS_HOST_FP8 opus_host_float::E4M3FNUZ
#define OPUS_HOST_BF8 opus_host_float::E5M2FNUZ
#else
#define OPUS_HOST_FP8 opus_host_float::E4M3
#define OPUS_HOST_BF8 opus_host_float::E5M2
#endif
// v_cvt_f32_{fp8,bf8}: byte `sel` of src, exact
#define __builtin_amdgcn_cvt_f32_fp8(src, sel) opus_host_float::decode(((unsigned)(src) >> (8 * (sel))) & 0xff, OPUS_HOST_FP8)
#define __builtin_amdgcn_cvt_f32_bf8(src, sel) opus_host_float::decode(((unsigned)(src) >> (8 * (sel))) & 0xff, OPUS_HOST_BF8)
// v_cvt_pk_f32_{fp8,bf8}: bytes 0 and 1 (word_sel: 2 and 3) of src as two f32, exact
typedef float opus_host_f32x2 __attribute__((vector_size(8)));
static inline opus_host_f32x2 opus_host_cvt_pk_f32(int src, bool word_sel, const opus_host_float::Format& f) {
  unsigned w = (unsigned)src >> (word_sel ? 16 : 0);
  opus_host_f32x2 r = {opus_host_float::decode(w & 0xff, f), opus_host_float::decode((w >> 8) & 0xff, f)};
  return r;
}
#define __builtin_amdgcn_cvt_pk_f32_fp8(src, sel) opus_host_cvt_pk_f32(src, sel, OPUS_HOST_FP8)
#define __builtin_amdgcn_cvt_pk_f32_bf8(src, sel) opus_host_cvt_pk_f32(src, sel, OPUS_HOST_BF8)
// v_cvt_pk_{fp8,bf8}_f32 a, b: RNE into bytes 0 and 1 (word_sel: 2 and 3) of `old`. The
// codegen handles NaN and clamps before it: values that overflow the format are outside the
// shim's contract and give the format's NaN (e5m2: inf) code, so a lost clamp shows as a difference.
static inline int opus_host_cvt_pk(float a, float b, int old, bool word_sel, const opus_host_float::Format& f) {
  unsigned pk = opus_host_float::encode(a, f, false, opus_host_float::TO_NAN) |
                opus_host_float::encode(b, f, false, opus_host_float::TO_NAN) << 8;
  unsigned o = (unsigned)old;
  return (int)(word_sel ? (o & 0xffffu) | pk << 16 : (o & 0xffff0000u) | pk);
}
// gfx950's scaled fp4 conversions, from AMD's definition (HIP amd_hip_ocp_host.hpp from_float /
// to_float, the host model of these instructions; the scale operand's exponent field E gives
// the scale 2^(E-127)): v_cvt_scalef32_pk_fp4_f32 old, a, b, scale, sel: a / scale and
// b / scale rounded to nearest even into OCP e2m1 (a the low nibble) in byte `sel` of `old`,
// finite overflow and infinities +-6, NaN +-6 with its sign; v_cvt_scalef32_pk_f32_fp4 src,
// scale, sel: the two codes of byte `sel` (low nibble first) times the scale, exact.
static const opus_host_float::Format OPUS_HOST_E2M1 = {1, 1, 0x7, false, false, 0x7};
static inline float opus_host_scale(float s) {
  return std::ldexp(1.0f, (int)((opus_host_float::bits(s) >> 23) & 0xff) - 127);
}
static inline unsigned opus_host_e2m1_code(float f, float scale) {
  uint32_t u = opus_host_float::bits(f), sign = (u >> 31) << 3, a = u & 0x7fffffff;
  if (a >= 0x7f800000) return sign | 7;                                   // NaN and inf
  uint32_t mag = opus_host_float::round_mag(opus_host_float::bits(std::fabs(f) / opus_host_scale(scale)),
                                             OPUS_HOST_E2M1, false);
  return sign | (mag > 7 ? 7 : mag);
}
static inline float opus_host_e2m1_value(unsigned c, float scale) {
  unsigned e = (c >> 1) & 3, m = c & 1;
  float v = e ? (1.0f + 0.5f * m) * std::ldexp(1.0f, (int)e - 1) : 0.5f * m;
  return ((c & 8) ? -v : v) * opus_host_scale(scale);
}
static inline unsigned opus_host_cvt_scalef32_pk_fp4(unsigned old, float a, float b, float scale, int sel) {
  unsigned byte = opus_host_e2m1_code(a, scale) | opus_host_e2m1_code(b, scale) << 4;
  return (old & ~(0xffu << (8 * sel))) | byte << (8 * sel);
}
static inline opus_host_f32x2 opus_host_cvt_scalef32_pk_f32_fp4(unsigned src, float scale, int sel) {
  unsigned byte = (src >> (8 * sel)) & 0xff;
  opus_host_f32x2 r = {opus_host_e2m1_value(byte & 15, scale), opus_host_e2m1_value(byte >> 4, scale)};
  return r;
}
#define __builtin_amdgcn_cvt_scalef32_pk_fp4_f32(old, a, b, s, sel) opus_host_cvt_scalef32_pk_fp4(old, a, b, s, sel)
#define __builtin_amdgcn_cvt_scalef32_pk_f32_fp4(src, s, sel) opus_host_cvt_scalef32_pk_f32_fp4(src, s, sel)
#define __builtin_amdgcn_cvt_pk_fp8_f32(a, b, old, sel) opus_host_cvt_pk(a, b, old, sel, OPUS_HOST_FP8)
#define __builtin_amdgcn_cvt_pk_bf8_f32(a, b, old, sel) opus_host_cvt_pk(a, b, old, sel, OPUS_HOST_BF8)

// Stochastic rounding: v_cvt_sr_{fp8,bf8}_f32 f, r, old, sel (the chip's flavour) and gfx950's
// v_cvt_sr_{bf16,f16}_f32 old, f, r, sel, as AMD's host model of these instructions defines them
// (HIP amd_hip_ocp_host.hpp, from_float_sr): below the format's smallest normal exponent the
// 24-bit significand is first shifted to that exponent (the bits under it dropped); r >> (9 +
// m) is added just below the m kept fraction bits and the rest dropped, a carry raising the
// exponent. Zeros and infinities keep their sign, a NaN gives the format's quiet NaN. The codegen
// handles NaN, overflow and sat before the fp8 forms and clamps their input to +-max: a result
// past max is outside the shim's contract there and gives the NaN code, so a lost clamp shows
// (the 16-bit forms overflow to infinity, IEEE's rule).
static const opus_host_float::Format OPUS_HOST_BF16 = {7, 127, 0x7f7f, true, false, 0x7fc0};
static inline uint32_t opus_host_sr_code(float f, unsigned r, const opus_host_float::Format& F, bool wide) {
  uint32_t u = opus_host_float::bits(f), a = u & 0x7fffffff, sign = (u >> 31) << (wide ? 15 : 7);
  if (a > 0x7f800000) return F.fnuz ? F.nan : (sign | F.nan);
  uint32_t code = F.max_mag + 1;                                       // infinities
  if (a < 0x7f800000) {
    int e = (int)(a >> 23), emin = 128 - F.bias;   // biased f32 exponents: |f|, F's smallest normal
    uint64_t s = (a & 0x7fffff) | (e ? 0x800000u : 0u);                // |f| = s * 2^(max(e,1) - 150)
    int at = e > emin ? e : emin, drop = at - (e ? e : 1);
    s = drop >= 32 ? 0 : s >> drop;                                    // |f| ~ s * 2^(at - 150)
    uint64_t q = (s + (r >> (9 + F.mant))) >> (23 - F.mant);           // steps of 2^(at-127-m)
    uint64_t c = ((uint64_t)(at - 128 + F.bias) << F.mant) + q;        // a carry moves the field
    code = c > F.max_mag ? F.max_mag + 1 : (uint32_t)c;
  }
  if (code > F.max_mag) return wide ? sign | F.max_mag + 1 : (F.fnuz ? F.nan : (sign | F.nan));
  return F.fnuz && code == 0 ? 0 : sign | code;
}
typedef unsigned short opus_host_u16x2 __attribute__((vector_size(4)));
static inline int opus_host_cvt_sr_fp8(float f, int r, int old, int sel, const opus_host_float::Format& F) {
  unsigned b = opus_host_sr_code(f, (unsigned)r, F, false);
  return (int)(((unsigned)old & ~(0xffu << (8 * sel))) | b << (8 * sel));
}
static inline opus_host_u16x2 opus_host_cvt_sr_16(opus_host_u16x2 old, float f, unsigned r, bool sel,
                                                  const opus_host_float::Format& F) {
  old[sel ? 1 : 0] = (unsigned short)opus_host_sr_code(f, r, F, true);
  return old;
}
#define __builtin_amdgcn_cvt_sr_fp8_f32(f, r, old, sel) opus_host_cvt_sr_fp8(f, r, old, sel, OPUS_HOST_FP8)
#define __builtin_amdgcn_cvt_sr_bf8_f32(f, r, old, sel) opus_host_cvt_sr_fp8(f, r, old, sel, OPUS_HOST_BF8)
#define __builtin_amdgcn_cvt_sr_f16_f32(old, f, r, sel) opus_host_cvt_sr_16(old, f, r, sel, opus_host_float::F16)
#define __builtin_amdgcn_cvt_sr_bf16_f32(old, f, r, sel) opus_host_cvt_sr_16(old, f, r, sel, OPUS_HOST_BF16)

// Extension headers of other shims (tests/hostexec/README.md, "Cross-lane builtins"): the
// MFMA builtins live in their own file on top of this one.
#if __has_include("mfma.h")
#include "mfma.h"
#endif
#include "warp_hip.h"
