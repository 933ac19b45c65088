// Exact float conversions of the host shim, written from the formats' definitions (IEEE 754
// binary16, bfloat16, OCP fp8 E4M3/E5M2, AMD FNUZ fp8) in integer arithmetic, so that no
// host compiler's _Float16/__bf16 support (or lack of it) enters the result. Checked against
// numpy/ml_dtypes by tests/hostexec/test_shim.py.
#pragma once
#include <cstdint>
#include <cstring>

namespace opus_host_float {

static inline uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// A binary format of `mant` fraction bits and exponent `bias`; `max_mag` is its largest finite
// magnitude code; `ieee_inf`: the all-ones exponent is inf/NaN (f16, e5m2); `fnuz`: one NaN
// (0x80), no -0 (AMD's FNUZ fp8).
struct Format { int mant, bias; uint32_t max_mag; bool ieee_inf, fnuz; uint32_t nan; };

static const Format F16 = {10, 15, 0x7bff, true, false, 0x7e00};
static const Format E4M3 = {3, 7, 0x7e, false, false, 0x7f};
static const Format E5M2 = {2, 15, 0x7b, true, false, 0x7f};
static const Format E4M3FNUZ = {3, 8, 0x7f, false, true, 0x80};
static const Format E5M2FNUZ = {2, 16, 0x7f, false, true, 0x80};

enum Overflow { TO_INF, TO_MAX, TO_NAN };

// |f| (finite, f32) rounded to the format: the magnitude code, or max_mag + 1 when it overflows.
// rz: toward zero, else to nearest, ties to even.
static inline uint32_t round_mag(uint32_t a, const Format& F, bool rz) {
  if (a == 0) return 0;
  int e = (int)(a >> 23);
  uint64_t m = a & 0x7fffff;
  if (e == 0) e = 1; else m |= 0x800000;    // value = m * 2^(e - 150)
  int emin = 1 - F.bias;                       // the format's smallest normal exponent
  // the exponent of the value's leading bit
  int lead = e - 127; for (uint64_t t = m; t < 0x800000; t <<= 1) lead--;
  int q = (lead > emin ? lead : emin) - F.mant;  // the format's quantum 2^q at this magnitude
  int shift = q - (e - 150);                    // bits of m below the quantum
  uint64_t r;
  if (shift <= 0) r = m << -shift;
  else if (shift > 40) r = 0;  // far below half a quantum
  else {
    r = m >> shift;
    uint64_t rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (!rz && (rem > half || (rem == half && (r & 1)))) r++;
  }
  if (r == 0) return 0;
  if (r >= (2ull << F.mant)) { r >>= 1; q++; }  // rounded up to the next binade
  if (r < (1ull << F.mant)) return (uint32_t)r;  // subnormal (q is the smallest quantum)
  int64_t field = (int64_t)q + F.mant + F.bias;
  uint64_t code = ((uint64_t)field << F.mant) | (r - (1ull << F.mant));
  return code > F.max_mag ? F.max_mag + 1 : (uint32_t)code;
}

// f32 -> the format's code. NaN -> the format's NaN code; an overflow as `ovf` says.
static inline uint32_t encode(float f, const Format& F, bool rz, Overflow ovf) {
  uint32_t u = bits(f), a = u & 0x7fffffff;
  uint32_t sign = (u >> 31) << (F.mant == 10 ? 15 : 7);
  if (a > 0x7f800000) return F.nan;
  uint32_t mag = a == 0x7f800000 ? F.max_mag + 1 : round_mag(a, F, rz);
  if (mag > F.max_mag) {
    // TO_MAX (saturation) takes inf too; otherwise inf stays inf where the format has one, and
    // IEEE rounding toward zero never rounds a finite value to inf
    Overflow o = ovf;
    if (ovf != TO_MAX && F.ieee_inf) o = (a != 0x7f800000 && rz) ? TO_MAX : TO_INF;
    if (o == TO_NAN) return F.fnuz ? F.nan : (sign | F.nan);
    mag = o == TO_MAX ? F.max_mag : F.max_mag + 1;  // max_mag + 1 is inf where ieee_inf
  }
  if (F.fnuz && mag == 0) return 0;  // no -0
  return sign | mag;
}

// The format's code -> its exact f32 value.
static inline float decode(uint32_t code, const Format& F) {
  int width = F.mant == 10 ? 16 : 8;
  int ebits = width - 1 - F.mant;
  uint32_t sign = (code >> (width - 1)) & 1, mag = code & ((1u << (width - 1)) - 1);
  uint32_t field = mag >> F.mant, frac = mag & ((1u << F.mant) - 1);
  uint32_t s32 = sign << 31;
  if (F.fnuz && code == 0x80) return from_bits(0x7fc00000);
  if (!F.fnuz && F.ieee_inf && field == (1u << ebits) - 1)
    return from_bits(s32 | 0x7f800000 | (frac ? 0x400000 | (frac << (23 - F.mant)) : 0));
  if (!F.fnuz && !F.ieee_inf && mag == F.nan) return from_bits(s32 | 0x7fc00000);
  if (field == 0) {  // subnormal: frac * 2^(1 - bias - mant), exact in f32
    float v = (float)frac;
    for (int i = 0; i < F.bias - 1 + F.mant; i++) v *= 0.5f;
    return sign ? -v : v;
  }
  return from_bits(s32 | ((field - F.bias + 127) << 23) | (frac << (23 - F.mant)));
}

// bfloat16: the upper half of f32; RNE rounds the lower half (NaN: quiet, sign kept)
static inline uint16_t f32_to_bf16(float f, bool rz) {
  uint32_t u = bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  if (rz) return (uint16_t)(u >> 16);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static inline float bf16_to_f32(uint16_t h) { return from_bits((uint32_t)h << 16); }
static inline uint16_t f32_to_f16(float f, bool rz) { return (uint16_t)encode(f, F16, rz, TO_INF); }
static inline float f16_to_f32(uint16_t h) { return decode(h, F16); }

// IEEE 754-2019 minimumNumber/maximumNumber: a NaN operand yields the other, -0 < +0 (PTX
// min/max.f32/f64; the language's rule, ir/ops.py).
template <class T> static inline T min_num(T a, T b) {
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) return __builtin_signbit(a) ? a : b;
  return a < b ? a : b;
}
template <class T> static inline T max_num(T a, T b) {
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) return __builtin_signbit(a) ? b : a;
  return a > b ? a : b;
}

}  // namespace opus_host_float
