// Scalar expressions: factories check dtypes; the printer is stable; scalar semantics.
#include <doctest/doctest.h>

#include <cmath>

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
