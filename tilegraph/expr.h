// Scalar expressions: the body of a tensor-expression node.
//
// An Expr is an immutable tree evaluated once per point of a node's iteration domain. Leaves read
// the node's k-th input at that point (`input`), a constant, or the value of an iteration axis
// (`axis_index`, for iota-like ops such as ArgMax or Concat). Every Expr has a dtype; factories
// check operand dtypes (binary arithmetic needs equal dtypes, comparisons give bool, `select` needs
// a bool condition) and raise InternalError on a mismatch, since lowering must insert casts. A
// constant is a Scalar (scalar.h): an integer dtype's constant is an exact int64, whatever its size.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tilegraph/dtype.h"
#include "tilegraph/scalar.h"

namespace tessel {

enum class ExprOp : uint8_t {
  // Leaves.
  input, constant, axis_index,
  // Unary.
  neg, abs, exp, log, sqrt, rsqrt, reciprocal, tanh, erf, sigmoid, sin, cos, tan, asin, acos,
  atan, sinh, cosh, asinh, acosh, atanh, floor, ceil, round, sign, logical_not, isnan, isinf,
  // Binary.
  add, sub, mul, div, mod, fmod, pow, min, max, eq, ne, lt, le, gt, ge, logical_and, logical_or,
  logical_xor,
  // Ternary and conversion.
  select, cast,
};

std::string_view expr_op_name(ExprOp op);
bool is_unary(ExprOp op);
bool is_binary(ExprOp op);
bool is_comparison(ExprOp op);

struct ExprNode;

class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  bool valid() const { return node_ != nullptr; }
  ExprOp op() const;
  DType dtype() const;
  /// Input slot (for `input`) or axis position (for `axis_index`).
  int index() const;
  /// Value of a `constant` as a double (an i64 constant beyond 2^53 rounds: code that handles
  /// integer dtypes reads integer_value or scalar).
  double value() const;
  /// Exact value of a `constant` of integer dtype.
  int64_t integer_value() const;
  /// Value of a `constant`, as held: an exact integer for an integer dtype, else a double.
  const Scalar& scalar() const;
  const std::vector<Expr>& operands() const;
  const ExprNode* get() const { return node_.get(); }

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  ExprOp op;
  DType dtype;
  int index = -1;
  Scalar value;  // a constant's value, rounded to `dtype` (round_to)
  std::vector<Expr> operands;
};

// Factories (validating).
Expr input(int slot, DType dtype);
/// A constant of `dtype`, rounded to it (round_to: an integer dtype's value is an exact integer).
Expr constant(const Scalar& value, DType dtype);
Expr constant(double value, DType dtype);
/// An exact integer constant of integer dtype `dtype` (wrapped to it).
Expr integer_constant(int64_t value, DType dtype);
Expr axis_index(int axis);  // dtype i64
Expr unary(ExprOp op, Expr a);
Expr binary(ExprOp op, Expr a, Expr b);
Expr select(Expr cond, Expr if_true, Expr if_false);
Expr cast(Expr a, DType to);  // no-op when the dtype already matches

// Shorthands for lowering code.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator-(Expr a);
/// A constant of the same dtype as `like`.
Expr constant_like(double value, const Expr& like);

/// Whether `e` reads an axis's index (ExprOp::axis_index) anywhere: an iota-like body, whose value
/// depends on the point itself and not only on what it reads.
bool reads_axis_index(const Expr& e);

/// Stable one-line text: `add(in0, mul(in1, 2:f32))`.
std::string print_expr(const Expr& e, const std::vector<std::string>& axis_names = {});

/// Evaluates a unary/binary op on doubles with the semantics of `dtype` (integer division
/// truncates, `mod` takes the divisor's sign, comparisons return 0/1). Shared by the interpreter
/// and constant folding so both agree.
double apply_unary(ExprOp op, double a, DType dtype);
double apply_binary(ExprOp op, double a, double b, DType dtype);

/// The same on exact integers of integer dtype `dtype` (values already wrapped to it), with the
/// CPU backend's semantics (kernels/cpu/emit_scalar.cpp): add, sub, mul and neg wrap like two's
/// complement at the dtype's width; div truncates toward zero; a division or remainder by 0 gives
/// 0; x / -1 is -x wrapped (INT64_MIN / -1 = INT64_MIN) and x % -1 is 0; abs(INT64_MIN) is
/// INT64_MIN; pow is computed in double and converted back like a Cast. A comparison gives 0 or 1
/// (its bool result); ops without an integer form (exp, sqrt, ...) go through apply_unary in
/// double and convert back like a Cast.
int64_t apply_unary_integer(ExprOp op, int64_t a, DType dtype);
int64_t apply_binary_integer(ExprOp op, int64_t a, int64_t b, DType dtype);

}  // namespace tessel
