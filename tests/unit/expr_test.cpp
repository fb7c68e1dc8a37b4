// Scalar expressions: factories check dtypes; the printer is stable; scalar semantics.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tilegraph/error.h"
#include "tilegraph/expr.h"

using namespace tessel;

TEST_CASE("factories type-check operands") {
  Expr a = input(0, DType::f32), b = input(1, DType::f32), i = input(2, DType::i32);
  CHECK((a + b).dtype() == DType::f32);
  CHECK(binary(ExprOp::lt, a, b).dtype() == DType::boolean);
  CHECK_THROWS_AS(a + i, InternalError);                      // mixed dtypes need a cast
  CHECK_THROWS_AS(unary(ExprOp::exp, i), InternalError);      // exp of an integer
  CHECK_THROWS_AS(select(a, a, b), InternalError);            // non-bool condition
  CHECK(cast(i, DType::f32).dtype() == DType::f32);
  CHECK(cast(a, DType::f32).get() == a.get());                // no-op cast is elided
}

TEST_CASE("printer is stable and names axes") {
  Expr e = select(binary(ExprOp::lt, axis_index(1), constant(3, DType::i64)),
                  input(0, DType::f32) * constant(0.5, DType::f32), constant(0, DType::f32));
  CHECK(print_expr(e, {"i", "j"}) == "select(lt(j, 3:i64), mul(in0, 0.5:f32), 0:f32)");
}

TEST_CASE("scalar semantics follow the dtype") {
  CHECK(apply_binary(ExprOp::div, 7, -2, DType::i32) == -3);   // truncation
  CHECK(apply_binary(ExprOp::div, 7, -2, DType::f32) == -3.5);
  CHECK(apply_binary(ExprOp::mod, -7, 3, DType::i32) == 2);    // sign of the divisor
  CHECK(apply_binary(ExprOp::fmod, -7, 3, DType::i32) == -1);  // sign of the dividend
  CHECK(std::isnan(apply_binary(ExprOp::max, NAN, 1, DType::f32)));
  CHECK(apply_unary(ExprOp::round, 2.5, DType::f32) == 2);     // half to even
  CHECK(apply_unary(ExprOp::sign, -3, DType::f32) == -1);
}

TEST_CASE("an integer constant is exact over the whole int64 range (Scalar)") {
  constexpr int64_t kTwoTo53 = int64_t{1} << 53;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
  // 2^53 + 1 has no double: a double constant rounded it to 2^53.
  const Expr big = integer_constant(kTwoTo53 + 1, DType::i64);
  CHECK(big.integer_value() == kTwoTo53 + 1);
  CHECK(big.value() == static_cast<double>(kTwoTo53));  // value() stays the nearest double
  CHECK(print_expr(big) == "9007199254740993:i64");
  CHECK(print_expr(integer_constant(kMin, DType::i64)) == "-9223372036854775808:i64");
  CHECK(integer_constant(300, DType::u8).integer_value() == 44);  // wrapped like the dtype
  CHECK(integer_constant(kTwoTo53 + 1, DType::i32).integer_value() == 1);
  CHECK_THROWS_AS(integer_constant(1, DType::f32), InternalError);
  CHECK_THROWS_AS((void)constant(1.5, DType::f32).integer_value(), InternalError);
  // A double given for an integer dtype converts as a Cast does: 2^63 saturates to INT64_MAX.
  CHECK(constant(9223372036854775808.0, DType::i64).integer_value() == kMax);
  CHECK(constant(-2.5, DType::i32).integer_value() == -2);
  // Equal constants are the same number; NaN equals NaN; an integer equals only its exact double.
  CHECK(Scalar::integer(kTwoTo53 + 1) != Scalar(static_cast<double>(kTwoTo53 + 1)));
  CHECK(Scalar::integer(kTwoTo53) == Scalar(static_cast<double>(kTwoTo53)));
  CHECK(Scalar(NAN) == Scalar(NAN));
  CHECK(round_to(DType::f32, Scalar::integer(kTwoTo53 + 1)) == Scalar(static_cast<double>(kTwoTo53)));
  CHECK(round_to(DType::boolean, Scalar::integer(kMin)) == Scalar(1.0));
  CHECK(Scalar(1e30).print() == "1e+30");
}
