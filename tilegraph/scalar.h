// Scalar: one constant of a node -- a body's `constant` leaf (expr.h), an access's pad value or a
// reduction's init (node.h) -- held exactly.
//
// An integer constant is an int64, so every value of every integer dtype is exact (an i64 beyond
// 2^53 has no exact double); a float or bool constant is a double. `round_to(dtype, scalar)` gives
// the form a node stores: integer dtypes hold an exact integer wrapped to the dtype, float and bool
// dtypes a double rounded to it. Consumers that handle integers (the interpreter, the code
// generators, the printer) read `as_int64()`; float consumers read `as_double()`.
#pragma once

#include <cstdint>
#include <string>

#include "tilegraph/dtype.h"

namespace tessel {

class Scalar {
 public:
  /// The double 0.
  Scalar() = default;
  /// A float or bool value, or an integer one given as a double (exact up to 2^53). Implicit, so
  /// that a pad value or an init written as a number (`Access{type, map, 0}`, `spec.init = 1`)
  /// reads as before.
  Scalar(double v) : real_(v) {}  // NOLINT(google-explicit-constructor)
  /// An exact integer.
  static Scalar integer(int64_t v);

  /// Whether the value is held as an exact integer (else as a double).
  bool is_integer() const { return is_integer_; }
  /// The value as a double: an integer beyond 2^53 rounds to the nearest double.
  double as_double() const;
  /// The value as an exact integer: an integer as held; a double truncated toward zero and
  /// saturated to the int64 range, NaN as 0 (saturating_int64, a Cast's rule).
  int64_t as_int64() const;
  /// Stable text: an integer in decimal ("9007199254740993"), a double in its shortest form that
  /// reads back exactly ("0.5", "1e+30", "nan", "-inf").
  std::string print() const;

  /// Whether both are the same number: an integer equals a double only when the double is exactly
  /// that integer; NaN equals NaN, so two constants that print alike are equal.
  bool operator==(const Scalar& other) const;

 private:
  double real_ = 0;
  int64_t integer_ = 0;
  bool is_integer_ = false;
};

/// `v` as a constant of dtype `t`: for an integer dtype an exact integer (an integer wrapped to
/// `t` like two's complement, a double converted as a Cast does: float_to_integer); for a float or
/// bool dtype a double rounded to `t` (an integer converted once, integer_to_float; bool: 0 or 1).
Scalar round_to(DType t, const Scalar& v);

}  // namespace tessel
