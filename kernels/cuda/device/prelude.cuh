// Tessel device prelude: scalar types, dtype conversions and the exact scalar semantics of the
// IR (tilegraph/expr.h, tilegraph/dtype.h) on the device. Every generated kernel starts with this
// file. It includes no header at all -- NVRTC's built-in math functions are enough -- so compiled
// programs need no CUDA include directory at run time (a bundled `tessel` works on a machine that
// has only the driver and libnvrtc).
//
// Storage types (what tensors hold in device memory, as kernels/packed_tensor.h packs them):
//   f64 double, f32 float, f16 and bf16 16-bit patterns (unsigned short), i64 long long,
//   i32 int, i8 signed char, u8 unsigned char, bool unsigned char 0/1.
// Compute types (what a body computes in): f64 double; f32, f16, bf16 float (f16/bf16 values are
// rounded only where the IR rounds: on store and on casts); integers long long, wrapped to their
// dtype after every operation like the interpreter; bool bool.
#pragma once

namespace tsl {

typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;

// ---- special values ----------------------------------------------------------------------------
__device__ __forceinline__ float inf_f32() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ double inf_f64() { return __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double nan_f64() { return __longlong_as_double(0x7ff8000000000000LL); }

// ---- f16 / bf16 (round to nearest even, as tilegraph/dtype.cpp) --------------------------------
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  float f;
  asm("{.reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t;}" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __int_as_float(static_cast<int>(h) << 16); }
// sm_80 and newer convert in one instruction (round to nearest even, subnormals kept, a NaN stays
// a NaN); older targets round the bits by hand, the same way.
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const u32 x = static_cast<u32>(__float_as_int(f));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((x >> 16) | 0x40u);  // NaN
  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}
__device__ __forceinline__ float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }
__device__ __forceinline__ float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---- integers: wrap like two's complement (dtype.cpp's round_to) -------------------------------
__device__ __forceinline__ i64 wrap_i32(i64 v) { return static_cast<int>(static_cast<u32>(static_cast<u64>(v))); }
__device__ __forceinline__ i64 wrap_i8(i64 v) { return static_cast<signed char>(static_cast<unsigned char>(static_cast<u64>(v))); }
__device__ __forceinline__ i64 wrap_u8(i64 v) { return static_cast<unsigned char>(static_cast<u64>(v)); }
__device__ __forceinline__ i64 wrap_i64(i64 v) { return v; }

// A double to an integer of `bits` bits: NaN gives 0, truncate toward zero, wrap (64 bits
// saturate), as dtype.cpp's wrap_integer.
__device__ __forceinline__ i64 double_to_int(double v, int bits, bool is_signed) {
  if (v != v) return 0;
  const double t = trunc(v);
  if (bits == 64) {
    if (t <= -9223372036854775808.0) return static_cast<i64>(0x8000000000000000ULL);
    if (t >= 9223372036854775807.0) return 0x7fffffffffffffffLL;
    return static_cast<i64>(t);
  }
  const double range = bits == 32 ? 4294967296.0 : 256.0;
  double m = fmod(t, range);
  if (m < 0) m += range;
  if (is_signed && m >= range / 2) m -= range;
  return static_cast<i64>(m);
}

// ---- float math, overloaded on the compute type ------------------------------------------------
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_erf(float x) { return erff(x); }
__device__ __forceinline__ double m_erf(double x) { return erf(x); }
__device__ __forceinline__ float m_sin(float x) { return sinf(x); }
__device__ __forceinline__ double m_sin(double x) { return sin(x); }
__device__ __forceinline__ float m_cos(float x) { return cosf(x); }
__device__ __forceinline__ double m_cos(double x) { return cos(x); }
__device__ __forceinline__ float m_tan(float x) { return tanf(x); }
__device__ __forceinline__ double m_tan(double x) { return tan(x); }
__device__ __forceinline__ float m_asin(float x) { return asinf(x); }
__device__ __forceinline__ double m_asin(double x) { return asin(x); }
__device__ __forceinline__ float m_acos(float x) { return acosf(x); }
__device__ __forceinline__ double m_acos(double x) { return acos(x); }
__device__ __forceinline__ float m_atan(float x) { return atanf(x); }
__device__ __forceinline__ double m_atan(double x) { return atan(x); }
__device__ __forceinline__ float m_sinh(float x) { return sinhf(x); }
__device__ __forceinline__ double m_sinh(double x) { return sinh(x); }
__device__ __forceinline__ float m_cosh(float x) { return coshf(x); }
__device__ __forceinline__ double m_cosh(double x) { return cosh(x); }
__device__ __forceinline__ float m_asinh(float x) { return asinhf(x); }
__device__ __forceinline__ double m_asinh(double x) { return asinh(x); }
__device__ __forceinline__ float m_acosh(float x) { return acoshf(x); }
__device__ __forceinline__ double m_acosh(double x) { return acosh(x); }
__device__ __forceinline__ float m_atanh(float x) { return atanhf(x); }
__device__ __forceinline__ double m_atanh(double x) { return atanh(x); }
__device__ __forceinline__ float m_floor(float x) { return floorf(x); }
__device__ __forceinline__ double m_floor(double x) { return floor(x); }
__device__ __forceinline__ float m_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double m_ceil(double x) { return ceil(x); }
__device__ __forceinline__ float m_round(float x) { return rintf(x); }  // half to even
__device__ __forceinline__ double m_round(double x) { return rint(x); }
__device__ __forceinline__ float m_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double m_fmod(double a, double b) { return fmod(a, b); }
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }
__device__ __forceinline__ i64 m_abs(i64 x) { return x < 0 ? -x : x; }

template <class T> __device__ __forceinline__ bool m_isnan(T x) { return x != x; }
template <class T> __device__ __forceinline__ bool m_isinf(T x) { return x - x != x - x && x == x; }
template <class T> __device__ __forceinline__ T m_sign(T x) {
  return x != x ? x : static_cast<T>((x > T(0)) - (x < T(0)));
}
template <class T> __device__ __forceinline__ T m_sigmoid(T x) { return T(1) / (T(1) + m_exp(-x)); }
// For expressions of f16/bf16 type (computed in f32, rounded to 11 or 8 significant bits when
// stored): exp as one ex2.approx (relative error about 2^-22, plus 2^-24 |x log2 e| from the
// scaling, both far below that rounding; -inf gives 0, +inf and overflow inf, NaN NaN). The
// emitter uses it only there; f32 and f64 keep the accurate functions above.
__device__ __forceinline__ float m_exp_h(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}
// The sigmoid for the same expressions: 1 / (1 + exp(-x)) with rcp.approx (relative error about
// 2^-23, far below that rounding; -inf gives 0, +inf 1, NaN NaN). An IEEE division compiles to
// a fast path, a check and a call to a slow path: about ten more instructions per value, which a
// GEMM epilogue run by its few consumer warps pays in full (measured on an H200: LLaMA's SwiGLU in
// the up projection's epilogue, 0.85 ms against 0.60 ms for the plain GEMM).
__device__ __forceinline__ float m_sigmoid_h(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(1.0f + m_exp_h(-x)));
  return y;
}
// erf where an f16/bf16 expression adds it to 1 (the erf GELU's 1 + erf(x / sqrt 2)): Abramowitz
// and Stegun 7.1.26 with rcp.approx and ex2.approx, absolute error below 6e-7 over every f16
// argument (measured in f32), far below the expression's rounding to 11 or 8 significant bits
// (half an ulp of 1 is 4.9e-4 in f16) except where 1 + erf cancels (arguments below about -2):
// over every f16 input in [-10, 10] an f16 GELU is at most 2.2 ulps from the exact value, 1.6
// with erff. Its relative error near 0 is larger than erff's, so an erf used otherwise keeps
// m_erf. NaN gives NaN, +-inf +-1.
__device__ __forceinline__ float m_erf_h(float x) {
  const float a = fabsf(x);
  float t;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.3275911f, a, 1.0f)));
  float p = fmaf(1.061405429f, t, -1.453152027f);
  p = fmaf(p, t, 1.421413741f);
  p = fmaf(p, t, -0.284496736f);
  p = fmaf(p, t, 0.254829592f);
  return copysignf(1.0f - p * t * m_exp_h(-a * a), x);
}
// min/max propagate NaN (apply_binary).
template <class T> __device__ __forceinline__ T m_max(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a > b ? a : b); }
template <class T> __device__ __forceinline__ T m_min(T a, T b) { return (a != a || b != b) ? (a != a ? a : b) : (a < b ? a : b); }
// `mod` takes the divisor's sign (Python); integer division and modulo by zero give 0.
template <class T> __device__ __forceinline__ T m_mod(T a, T b) {
  T r = m_fmod(a, b);
  if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
  return r;
}
__device__ __forceinline__ i64 i_div(i64 a, i64 b) { return b == 0 ? 0 : (b == -1 ? static_cast<i64>(0ULL - static_cast<u64>(a)) : a / b); }
__device__ __forceinline__ i64 i_fmod(i64 a, i64 b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ i64 i_mod(i64 a, i64 b) {
  if (b == 0 || b == -1) return 0;
  i64 r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
__device__ __forceinline__ i64 i_add(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) + static_cast<u64>(b)); }
__device__ __forceinline__ i64 i_sub(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) - static_cast<u64>(b)); }
__device__ __forceinline__ i64 i_mul(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) * static_cast<u64>(b)); }
__device__ __forceinline__ i64 i_neg(i64 a) { return static_cast<i64>(0ULL - static_cast<u64>(a)); }

// ---- reduction combiners (the interpreter's `combine`: max/min let a NaN win) -------------------
template <class T> __device__ __forceinline__ T c_sum(T acc, T v) { return acc + v; }
template <class T> __device__ __forceinline__ T c_prod(T acc, T v) { return acc * v; }
template <class T> __device__ __forceinline__ T c_max(T acc, T v) { return (v > acc || v != v) ? v : acc; }
template <class T> __device__ __forceinline__ T c_min(T acc, T v) { return (v < acc || v != v) ? v : acc; }
__device__ __forceinline__ i64 c_sum(i64 acc, i64 v) { return i_add(acc, v); }
__device__ __forceinline__ i64 c_prod(i64 acc, i64 v) { return i_mul(acc, v); }

// Flags a kernel raises in the status word (checked by the runtime after every run).
enum StatusFlag : u32 { kGatherOutOfRange = 1u };
__device__ __forceinline__ void raise_status(u32* status, u32 flag) { atomicOr(status, flag); }

}  // namespace tsl
