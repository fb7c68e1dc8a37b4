// DType names, sizes and rounding.
#include <doctest/doctest.h>

#include <cmath>

#include "tilegraph/dtype.h"

using namespace tessel;

TEST_CASE("dtype names round-trip and unknown names are rejected") {
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i8,
                  DType::u8, DType::boolean})
    CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK_FALSE(parse_dtype("float32").has_value());
  CHECK(dtype_bytes(DType::bf16) == 2);
  CHECK(dtype_bytes(DType::i64) == 8);
}

TEST_CASE("float rounding: f32, f16 and bf16 round to nearest even") {
  CHECK(round_to(DType::f32, 0.1) == static_cast<double>(0.1f));
  CHECK(round_to(DType::f16, 1.0 + 1.0 / 4096) == 1.0);           // below half an ulp (2^-10)
  CHECK(round_to(DType::f16, 1.0 + 3.0 / 2048) == 1.0 + 2.0 / 1024);  // tie rounds to even
  CHECK(round_to(DType::f16, 65520.0) == INFINITY);
  CHECK(round_to(DType::f16, 6e-8) == std::ldexp(1.0, -24));      // smallest subnormal
  CHECK(round_to(DType::bf16, 1.00390625) == 1.0);                // tie to even
  CHECK(std::isnan(round_to(DType::f16, NAN)));
  CHECK(half_bits_to_float(float_to_half_bits(-2.5f)) == -2.5f);
}

TEST_CASE("integer rounding truncates and wraps like two's complement") {
  CHECK(round_to(DType::i32, 2.9) == 2);
  CHECK(round_to(DType::i32, -2.9) == -2);
  CHECK(round_to(DType::i8, 130) == -126);
  CHECK(round_to(DType::u8, -1) == 255);
  CHECK(round_to(DType::i32, 2147483648.0) == -2147483648.0);
  CHECK(round_to(DType::boolean, 0.5) == 1);
  CHECK(round_to(DType::boolean, 0) == 0);
}
