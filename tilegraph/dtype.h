// Element types of tensors and scalar expressions, and how values are rounded to them.
//
// Throughout the IR and the reference interpreter a scalar value is carried as a double; storing a
// value into a tensor of dtype T rounds it to T (`round_to`): float types round to nearest even,
// integer types truncate toward zero and wrap like two's-complement, bool maps non-zero to 1.
// int64 values are exact only up to 2^53 in this representation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, i8, u8, boolean };

/// Stable short name used by the printer and the JSON format: "f32", "i64", "bool", ...
std::string_view dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);

int dtype_bytes(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // signed or unsigned integer, not bool
bool is_signed(DType t);

/// Rounds (and wraps, for integers) `v` to a value representable in `t`.
double round_to(DType t, double v);

/// A double as an int64: truncated toward zero, saturated at the int64 range, NaN as 0 (a Cast of
/// a float to i64).
int64_t saturating_int64(double v);
/// An exact integer wrapped to integer dtype `t` like two's complement (i32: the low 32 bits, sign
/// extended; u8: the low 8 bits); bool gives 1 for non-zero. `t` must be an integer type or bool.
int64_t wrap_integer(DType t, int64_t v);
/// An exact integer converted to float dtype `t` and rounded once to it, as a compiled sitofp does
/// (f16 and bf16 go through f32 first, as the backends do); the result as a double.
double integer_to_float(DType t, int64_t v);
/// A double converted to integer dtype `t` (round_to's rule) as an exact integer.
int64_t float_to_integer(DType t, double v);

/// Smallest and largest finite-or-infinite values (used as max/min reduction inits).
double dtype_lowest(DType t);
double dtype_highest(DType t);

/// IEEE half and bfloat16 conversions, round to nearest even.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t h);

}  // namespace tessel
