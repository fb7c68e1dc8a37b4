// Element types of tensors and scalar expressions, and how values are rounded to them.
//
// Float and bool values are carried as doubles; integer values are carried as int64_t wherever they
// are computed or stored (host tensors of i64 hold int64_t, the interpreter's integer registers
// are int64_t), so every integer dtype is exact over its whole range. Integer arithmetic wraps like
// two's complement at the dtype's width (`wrap_integer`), as ONNX and the compiled kernels do.
// Converting a double to a dtype (`round_to`, a Cast from a float type): float types round to
// nearest even, i32/i8/u8 truncate toward zero and wrap, i64 truncates and saturates (NaN gives 0,
// like llvm.fptosi.sat in the CPU backend), bool maps non-zero to 1. The constants inside a node (an
// Expr's constants, its pad and init values) are Scalars (scalar.h), exact integers for an integer
// dtype.
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
