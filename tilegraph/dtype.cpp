// DType names, sizes and rounding rules.
#include "tilegraph/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "tilegraph/error.h"

namespace tessel {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  int bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f64, "f64", 8}, {DType::f32, "f32", 4}, {DType::f16, "f16", 2},
    {DType::bf16, "bf16", 2}, {DType::i64, "i64", 8}, {DType::i32, "i32", 4},
    {DType::i8, "i8", 1},   {DType::u8, "u8", 1},   {DType::boolean, "bool", 1},
};

// 2^63 as a double: the first double above the int64 range (INT64_MAX itself rounds up to it).
constexpr double kTwoToThe63 = 9223372036854775808.0;

double wrap_double(double v, int bits, bool is_signed_type) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (bits == 64) {
    // A double beyond the int64 range has no two's-complement value to wrap; a Cast saturates
    // (llvm.fptosi.sat in the CPU backend).
    return t < -kTwoToThe63 ? -kTwoToThe63 : (t >= kTwoToThe63 ? kTwoToThe63 : t);
  }
  const double range = std::ldexp(1.0, bits);
  double m = std::fmod(t, range);
  if (m < 0) m += range;
  if (is_signed_type && m >= range / 2) m -= range;
  return m;
}
}  // namespace

std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kDTypes)
    if (info.name == name) return info.type;
  return std::nullopt;
}

int dtype_bytes(DType t) { return kDTypes[static_cast<int>(t)].bytes; }

bool is_float(DType t) {
  return t == DType::f64 || t == DType::f32 || t == DType::f16 || t == DType::bf16;
}
bool is_integer(DType t) {
  return t == DType::i64 || t == DType::i32 || t == DType::i8 || t == DType::u8;
}
bool is_signed(DType t) { return is_float(t) || (is_integer(t) && t != DType::u8); }

double round_to(DType t, double v) {
  switch (t) {
    case DType::f64: return v;
    case DType::f32: return static_cast<double>(static_cast<float>(v));
    case DType::f16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
    case DType::i64: return wrap_double(v, 64, true);
    case DType::i32: return wrap_double(v, 32, true);
    case DType::i8: return wrap_double(v, 8, true);
    case DType::u8: return wrap_double(v, 8, false);
    case DType::boolean: return v != 0 ? 1.0 : 0.0;  // NaN != 0, so NaN is true
  }
  TESSEL_ASSERT(false, "unknown dtype");
}

int64_t saturating_int64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= kTwoToThe63) return INT64_MAX;
  if (v <= -kTwoToThe63) return INT64_MIN;
  return static_cast<int64_t>(v);
}

int64_t wrap_integer(DType t, int64_t v) {
  // Narrowing conversions of integers are modular since C++20.
  switch (t) {
    case DType::i64: return v;
    case DType::i32: return static_cast<int32_t>(v);
    case DType::i8: return static_cast<int8_t>(v);
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::boolean: return v != 0 ? 1 : 0;
    default: break;
  }
  TESSEL_ASSERT(false, "wrap_integer to ", dtype_name(t));
}

double integer_to_float(DType t, int64_t v) {
  switch (t) {
    case DType::f64: return static_cast<double>(v);
    case DType::f32: return static_cast<double>(static_cast<float>(v));
    case DType::f16: case DType::bf16: return round_to(t, static_cast<double>(static_cast<float>(v)));
    default: break;
  }
  TESSEL_ASSERT(false, "integer_to_float to ", dtype_name(t));
}

int64_t float_to_integer(DType t, double v) { return saturating_int64(round_to(t, v)); }

double dtype_lowest(DType t) {
  switch (t) {
    case DType::i64: return -9223372036854775808.0;
    case DType::i32: return -2147483648.0;
    case DType::i8: return -128;
    case DType::u8: case DType::boolean: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

double dtype_highest(DType t) {
  switch (t) {
    case DType::i64: return 9223372036854775807.0;
    case DType::i32: return 2147483647.0;
    case DType::i8: return 127;
    case DType::u8: return 255;
    case DType::boolean: return 1;
    default: return std::numeric_limits<double>::infinity();
  }
}

uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    // Use float arithmetic: scale so the half subnormal unit (2^-24) becomes 1 and round.
    float a;
    std::memcpy(&a, &abs, 4);
    const float scaled = a * 16777216.0f;  // 2^24
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t exp = ((abs >> 23) - 127 + 15) << 10;
  const uint32_t mant = abs & 0x7fffffu;
  uint32_t h = exp | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -out : out;
  }
  uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                         : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  std::memcpy(&out, &x, 4);
  return out;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // nan
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  const uint32_t x = static_cast<uint32_t>(h) << 16;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

}  // namespace tessel
