// Scalar expression factories, printing and scalar semantics.
#include "tilegraph/expr.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "tilegraph/error.h"

namespace tessel {

namespace {

constexpr std::string_view kOpNames[] = {
    "in", "const", "axis",
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "erf", "sigmoid", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "floor",
    "ceil", "round", "sign", "not", "isnan", "isinf",
    "add", "sub", "mul", "div", "mod", "fmod", "pow", "min", "max", "eq", "ne", "lt", "le", "gt",
    "ge", "and", "or", "xor",
    "select", "cast",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<int>(ExprOp::cast) + 1);

bool is_float_only_unary(ExprOp op) {
  switch (op) {
    case ExprOp::exp: case ExprOp::log: case ExprOp::sqrt: case ExprOp::rsqrt:
    case ExprOp::tanh: case ExprOp::erf: case ExprOp::sigmoid: case ExprOp::sin: case ExprOp::cos:
    case ExprOp::tan: case ExprOp::asin: case ExprOp::acos: case ExprOp::atan: case ExprOp::sinh:
    case ExprOp::cosh: case ExprOp::asinh: case ExprOp::acosh: case ExprOp::atanh:
    case ExprOp::floor: case ExprOp::ceil: case ExprOp::round:
      return true;
    default:
      return false;
  }
}

Expr make(ExprOp op, DType dtype, std::vector<Expr> operands, int index = -1, Scalar value = {}) {
  auto node = std::make_shared<ExprNode>();
  node->op = op;
  node->dtype = dtype;
  node->index = index;
  node->value = value;
  node->operands = std::move(operands);
  return Expr(std::move(node));
}

// The comparisons and logical operations, the same on doubles and on exact integers; nullopt for
// any other operation.
template <class T> std::optional<bool> compare(ExprOp op, T a, T b) {
  switch (op) {
    case ExprOp::eq: return a == b;
    case ExprOp::ne: return a != b;
    case ExprOp::lt: return a < b;
    case ExprOp::le: return a <= b;
    case ExprOp::gt: return a > b;
    case ExprOp::ge: return a >= b;
    case ExprOp::logical_and: return (a != 0) && (b != 0);
    case ExprOp::logical_or: return (a != 0) || (b != 0);
    case ExprOp::logical_xor: return (a != 0) != (b != 0);
    default: return std::nullopt;
  }
}

}  // namespace

ExprOp Expr::op() const { return node_->op; }
DType Expr::dtype() const { return node_->dtype; }
int Expr::index() const { return node_->index; }
double Expr::value() const { return node_->value.as_double(); }
int64_t Expr::integer_value() const {
  TESSEL_ASSERT(node_->op == ExprOp::constant && is_integer(node_->dtype), "integer_value of a ", expr_op_name(node_->op),
                " of dtype ", dtype_name(node_->dtype));
  return node_->value.as_int64();
}
const Scalar& Expr::scalar() const { return node_->value; }
const std::vector<Expr>& Expr::operands() const { return node_->operands; }

std::string_view expr_op_name(ExprOp op) { return kOpNames[static_cast<int>(op)]; }
bool reads_axis_index(const Expr& e) {
  if (e.op() == ExprOp::axis_index) return true;
  for (const Expr& o : e.operands())
    if (reads_axis_index(o)) return true;
  return false;
}

bool is_unary(ExprOp op) { return op >= ExprOp::neg && op <= ExprOp::isinf; }
bool is_binary(ExprOp op) { return op >= ExprOp::add && op <= ExprOp::logical_xor; }
bool is_comparison(ExprOp op) { return op >= ExprOp::eq && op <= ExprOp::ge; }

Expr input(int slot, DType dtype) {
  TESSEL_ASSERT(slot >= 0, "input slot ", slot);
  return make(ExprOp::input, dtype, {}, slot);
}

Expr constant(const Scalar& value, DType dtype) {
  return make(ExprOp::constant, dtype, {}, -1, round_to(dtype, value));
}

Expr constant(double value, DType dtype) { return constant(Scalar(value), dtype); }

Expr integer_constant(int64_t value, DType dtype) {
  TESSEL_ASSERT(is_integer(dtype), "integer_constant of dtype ", dtype_name(dtype));
  return constant(Scalar::integer(value), dtype);
}

Expr axis_index(int axis) {
  TESSEL_ASSERT(axis >= 0, "axis ", axis);
  return make(ExprOp::axis_index, DType::i64, {}, axis);
}

Expr unary(ExprOp op, Expr a) {
  TESSEL_ASSERT(is_unary(op), "not a unary op: ", expr_op_name(op));
  TESSEL_ASSERT(a.valid(), "null operand");
  DType out = a.dtype();
  if (op == ExprOp::logical_not) {
    TESSEL_ASSERT(a.dtype() == DType::boolean, "not needs bool, got ", dtype_name(a.dtype()));
  } else if (op == ExprOp::isnan || op == ExprOp::isinf) {
    TESSEL_ASSERT(is_float(a.dtype()), expr_op_name(op), " needs a float operand");
    out = DType::boolean;
  } else if (is_float_only_unary(op)) {
    TESSEL_ASSERT(is_float(a.dtype()), expr_op_name(op), " needs a float operand, got ",
                  dtype_name(a.dtype()));
  } else {
    TESSEL_ASSERT(a.dtype() != DType::boolean, expr_op_name(op), " on bool");
  }
  return make(op, out, {std::move(a)});
}

Expr binary(ExprOp op, Expr a, Expr b) {
  TESSEL_ASSERT(is_binary(op), "not a binary op: ", expr_op_name(op));
  TESSEL_ASSERT(a.valid() && b.valid(), "null operand");
  TESSEL_ASSERT(a.dtype() == b.dtype(), expr_op_name(op), " operands differ in dtype: ",
                dtype_name(a.dtype()), " vs ", dtype_name(b.dtype()));
  DType out = a.dtype();
  if (is_comparison(op)) {
    out = DType::boolean;
  } else if (op == ExprOp::logical_and || op == ExprOp::logical_or || op == ExprOp::logical_xor) {
    TESSEL_ASSERT(a.dtype() == DType::boolean, expr_op_name(op), " needs bool");
  } else if (op != ExprOp::min && op != ExprOp::max) {
    TESSEL_ASSERT(a.dtype() != DType::boolean, expr_op_name(op), " on bool");
  }
  return make(op, out, {std::move(a), std::move(b)});
}

Expr select(Expr cond, Expr if_true, Expr if_false) {
  TESSEL_ASSERT(cond.valid() && if_true.valid() && if_false.valid(), "null operand");
  TESSEL_ASSERT(cond.dtype() == DType::boolean, "select condition must be bool, got ",
                dtype_name(cond.dtype()));
  TESSEL_ASSERT(if_true.dtype() == if_false.dtype(), "select branches differ: ",
                dtype_name(if_true.dtype()), " vs ", dtype_name(if_false.dtype()));
  DType out = if_true.dtype();
  return make(ExprOp::select, out, {std::move(cond), std::move(if_true), std::move(if_false)});
}

Expr cast(Expr a, DType to) {
  TESSEL_ASSERT(a.valid(), "null operand");
  if (a.dtype() == to) return a;
  return make(ExprOp::cast, to, {std::move(a)});
}

Expr operator+(Expr a, Expr b) { return binary(ExprOp::add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(ExprOp::sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(ExprOp::mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(ExprOp::div, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return unary(ExprOp::neg, std::move(a)); }
Expr constant_like(double value, const Expr& like) { return constant(value, like.dtype()); }

std::string print_expr(const Expr& e, const std::vector<std::string>& axis_names) {
  switch (e.op()) {
    case ExprOp::input:
      return cat("in", e.index());
    case ExprOp::constant:
      return cat(e.scalar().print(), ":", dtype_name(e.dtype()));
    case ExprOp::axis_index:
      if (e.index() < static_cast<int>(axis_names.size())) return axis_names[e.index()];
      return cat("axis", e.index());
    case ExprOp::cast:
      return cat("cast<", dtype_name(e.dtype()), ">(", print_expr(e.operands()[0], axis_names), ")");
    default: {
      std::string out(expr_op_name(e.op()));
      out += "(";
      for (size_t i = 0; i < e.operands().size(); ++i) {
        if (i) out += ", ";
        out += print_expr(e.operands()[i], axis_names);
      }
      return out + ")";
    }
  }
}

double apply_unary(ExprOp op, double a, DType dtype) {
  switch (op) {
    case ExprOp::neg: return -a;
    case ExprOp::abs: return std::fabs(a);
    case ExprOp::exp: return std::exp(a);
    case ExprOp::log: return std::log(a);
    case ExprOp::sqrt: return std::sqrt(a);
    case ExprOp::rsqrt: return 1.0 / std::sqrt(a);
    case ExprOp::reciprocal: return is_integer(dtype) ? std::trunc(1.0 / a) : 1.0 / a;
    case ExprOp::tanh: return std::tanh(a);
    case ExprOp::erf: return std::erf(a);
    case ExprOp::sigmoid: return 1.0 / (1.0 + std::exp(-a));
    case ExprOp::sin: return std::sin(a);
    case ExprOp::cos: return std::cos(a);
    case ExprOp::tan: return std::tan(a);
    case ExprOp::asin: return std::asin(a);
    case ExprOp::acos: return std::acos(a);
    case ExprOp::atan: return std::atan(a);
    case ExprOp::sinh: return std::sinh(a);
    case ExprOp::cosh: return std::cosh(a);
    case ExprOp::asinh: return std::asinh(a);
    case ExprOp::acosh: return std::acosh(a);
    case ExprOp::atanh: return std::atanh(a);
    case ExprOp::floor: return std::floor(a);
    case ExprOp::ceil: return std::ceil(a);
    case ExprOp::round: return std::nearbyint(a);  // half to even (default rounding mode)
    case ExprOp::sign: return std::isnan(a) ? a : static_cast<double>((a > 0) - (a < 0));
    case ExprOp::logical_not: return a == 0 ? 1.0 : 0.0;
    case ExprOp::isnan: return std::isnan(a) ? 1.0 : 0.0;
    case ExprOp::isinf: return std::isinf(a) ? 1.0 : 0.0;
    default: break;
  }
  TESSEL_ASSERT(false, "apply_unary: ", expr_op_name(op));
}

double apply_binary(ExprOp op, double a, double b, DType dtype) {
  const bool integral = is_integer(dtype);
  switch (op) {
    case ExprOp::add: return a + b;
    case ExprOp::sub: return a - b;
    case ExprOp::mul: return a * b;
    case ExprOp::div:
      if (integral) return b == 0 ? 0.0 : std::trunc(a / b);
      return a / b;
    case ExprOp::mod: {  // result takes the sign of the divisor (Python / ONNX fmod=0)
      if (integral && b == 0) return 0.0;
      double r = std::fmod(a, b);
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case ExprOp::fmod:
      if (integral && b == 0) return 0.0;
      return std::fmod(a, b);
    case ExprOp::pow: return std::pow(a, b);
    case ExprOp::min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case ExprOp::max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    default: break;
  }
  if (const std::optional<bool> r = compare(op, a, b)) return *r;
  TESSEL_ASSERT(false, "apply_binary: ", expr_op_name(op));
}

int64_t apply_unary_integer(ExprOp op, int64_t a, DType dtype) {
  // Unsigned arithmetic wraps modulo 2^64 without overflow; wrap_integer then narrows to the dtype.
  const auto ua = static_cast<uint64_t>(a);
  switch (op) {
    case ExprOp::neg: return wrap_integer(dtype, static_cast<int64_t>(0 - ua));
    case ExprOp::abs: return wrap_integer(dtype, static_cast<int64_t>(a < 0 ? 0 - ua : ua));
    case ExprOp::sign: return (a > 0) - (a < 0);
    case ExprOp::reciprocal: return a == 1 ? 1 : (a == -1 ? -1 : 0);
    case ExprOp::floor: case ExprOp::ceil: case ExprOp::round: return a;
    case ExprOp::logical_not: return a == 0 ? 1 : 0;
    case ExprOp::isnan: case ExprOp::isinf: return 0;
    default: break;
  }
  return float_to_integer(dtype, apply_unary(op, static_cast<double>(a), dtype));
}

int64_t apply_binary_integer(ExprOp op, int64_t a, int64_t b, DType dtype) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case ExprOp::add: return wrap_integer(dtype, static_cast<int64_t>(ua + ub));
    case ExprOp::sub: return wrap_integer(dtype, static_cast<int64_t>(ua - ub));
    case ExprOp::mul: return wrap_integer(dtype, static_cast<int64_t>(ua * ub));
    case ExprOp::div:
      // x / -1 is negation, which wraps; C++'s INT64_MIN / -1 would overflow.
      if (b == 0) return 0;
      if (b == -1) return wrap_integer(dtype, static_cast<int64_t>(0 - ua));
      return wrap_integer(dtype, a / b);
    case ExprOp::mod: {  // the divisor's sign
      if (b == 0 || b == -1) return 0;
      int64_t r = a % b;
      if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
    case ExprOp::fmod:  // the dividend's sign
      if (b == 0 || b == -1) return 0;
      return a % b;
    case ExprOp::pow: return float_to_integer(dtype, std::pow(static_cast<double>(a), static_cast<double>(b)));
    case ExprOp::min: return std::min(a, b);
    case ExprOp::max: return std::max(a, b);
    default: break;
  }
  if (const std::optional<bool> r = compare(op, a, b)) return *r;
  TESSEL_ASSERT(false, "apply_binary_integer: ", expr_op_name(op));
}

}  // namespace tessel
