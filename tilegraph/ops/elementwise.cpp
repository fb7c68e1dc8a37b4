// Elementwise operators: unary math, binary arithmetic and comparisons with NumPy broadcasting,
// activations, Where, Clip, Cast. Each lowers to a single node whose body is the scalar formula.
#include <cmath>

#include "tilegraph/ops/common.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

// ---- Helpers ---------------------------------------------------------------------------------

Expr c(double v, const Expr& like) { return constant_like(v, like); }

void require_float(LowerContext& ctx, const Value& v) {
  if (!is_float(v.dtype()))
    ctx.unsupported(cat("needs a floating-point input, got ", dtype_name(v.dtype())));
}

// `float_only` false admits integers; bool is still refused (`allow_bool`: only Not takes it).
void unary_op(LowerContext& ctx, const std::function<Expr(LowerContext&, Expr)>& f, bool float_only = true,
              bool allow_bool = false) {
  const Value& x = ctx.input(0);
  if (float_only) require_float(ctx, x);
  if (!allow_bool && x.dtype() == DType::boolean) ctx.unsupported("bool inputs are not supported by this operator");
  ctx.set_output(0, elementwise(ctx, {x}, [&](const std::vector<Expr>& in) { return f(ctx, in[0]); }));
}

void binary_op(LowerContext& ctx, ExprOp op) {
  const Value& a = ctx.input(0);
  const Value& b = ctx.input(1);
  require_same_dtype(ctx, {a, b});
  if ((op == ExprOp::logical_and || op == ExprOp::logical_or || op == ExprOp::logical_xor) &&
      a.dtype() != DType::boolean)
    ctx.fail(cat("needs bool inputs, got ", dtype_name(a.dtype())));
  if (!(op == ExprOp::logical_and || op == ExprOp::logical_or || op == ExprOp::logical_xor ||
        op == ExprOp::eq) && a.dtype() == DType::boolean)
    ctx.unsupported("bool inputs are not supported by this operator");
  ctx.set_output(0, elementwise(ctx, {a, b}, [&](const std::vector<Expr>& in) {
    return binary(op, in[0], in[1]);
  }));
}

// Variadic Sum/Mean/Max/Min with broadcasting.
void variadic_op(LowerContext& ctx, ExprOp op, bool mean) {
  std::vector<Value> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) ins.push_back(ctx.input(i));
  if (ins.empty()) ctx.fail("needs at least one input");
  require_same_dtype(ctx, ins);
  if (ins[0].dtype() == DType::boolean) ctx.unsupported("bool inputs are not supported by this operator");
  ctx.set_output(0, elementwise(ctx, ins, [&](const std::vector<Expr>& in) {
    Expr acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) acc = binary(op, acc, in[i]);
    if (mean) acc = acc / c(static_cast<double>(in.size()), acc);
    return acc;
  }));
}

template <ExprOp Op>
void lower_unary_math(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(Op, x); });
}

template <ExprOp Op>
void lower_binary(LowerContext& ctx) {
  binary_op(ctx, Op);
}

// ---- Unary -----------------------------------------------------------------------------------

void lower_abs(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return is_signed(x.dtype()) ? unary(ExprOp::abs, x) : x; }, false);
}
void lower_neg(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(ExprOp::neg, x); }, false);
}
void lower_sign(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(ExprOp::sign, x); }, false);
}
void lower_reciprocal(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return c(1, x) / x; });
}
void lower_not(LowerContext& ctx) {
  if (ctx.input(0).dtype() != DType::boolean) ctx.fail("Not needs a bool input");
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(ExprOp::logical_not, x); }, false, true);
}
void lower_isnan(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(ExprOp::isnan, x); });
}
void lower_isinf(LowerContext& ctx) {
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  unary_op(ctx, [&](LowerContext&, Expr x) {
    Expr inf = unary(ExprOp::isinf, x);
    if (neg && pos) return inf;
    Expr side = neg ? binary(ExprOp::lt, x, c(0, x)) : binary(ExprOp::gt, x, c(0, x));
    if (!neg && !pos) return binary(ExprOp::logical_and, inf, binary(ExprOp::ne, x, x));
    return binary(ExprOp::logical_and, inf, side);
  });
}

// ---- Activations -----------------------------------------------------------------------------

Expr relu(Expr x) { return binary(ExprOp::max, x, c(0, x)); }
Expr softplus(Expr x) { return unary(ExprOp::log, unary(ExprOp::exp, x) + c(1, x)); }

void lower_relu(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return relu(x); }, false);
}
void lower_leaky_relu(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.01);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    return select(binary(ExprOp::lt, x, c(0, x)), x * c(alpha, x), x);
  });
}
void lower_prelu(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& slope = ctx.input(1);
  require_same_dtype(ctx, {x, slope});
  if (x.dtype() == DType::boolean) ctx.unsupported("bool inputs are not supported by this operator");
  ctx.set_output(0, elementwise(ctx, {x, slope}, [](const std::vector<Expr>& in) {
    return select(binary(ExprOp::lt, in[0], c(0, in[0])), in[0] * in[1], in[0]);
  }));
}
void lower_elu(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    return select(binary(ExprOp::lt, x, c(0, x)), c(alpha, x) * (unary(ExprOp::exp, x) - c(1, x)), x);
  });
}
void lower_celu(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    Expr neg = c(alpha, x) * (unary(ExprOp::exp, x / c(alpha, x)) - c(1, x));
    return relu(x) + binary(ExprOp::min, c(0, x), neg);
  });
}
void lower_selu(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.67326319217681884765625);
  const double gamma = ctx.attr_float("gamma", 1.05070102214813232421875);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    Expr neg = c(alpha, x) * (unary(ExprOp::exp, x) - c(1, x));
    return c(gamma, x) * select(binary(ExprOp::gt, x, c(0, x)), x, neg);
  });
}
void lower_sigmoid(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return unary(ExprOp::sigmoid, x); });
}
void lower_hard_sigmoid(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 0.2), beta = ctx.attr_float("beta", 0.5);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    return binary(ExprOp::max, c(0, x), binary(ExprOp::min, c(1, x), x * c(alpha, x) + c(beta, x)));
  });
}
void lower_hard_swish(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) {
    return x * binary(ExprOp::max, c(0, x), binary(ExprOp::min, c(1, x), x / c(6, x) + c(0.5, x)));
  });
}
void lower_softplus(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return softplus(x); });
}
void lower_softsign(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return x / (c(1, x) + unary(ExprOp::abs, x)); });
}
void lower_gelu(LowerContext& ctx) {
  const std::string approximate = ctx.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    ctx.fail(cat("attribute 'approximate' must be \"none\" or \"tanh\", got \"", approximate, "\""));
  unary_op(ctx, [&](LowerContext&, Expr x) {
    if (approximate == "tanh") {
      Expr inner = c(std::sqrt(2.0 / M_PI), x) * (x + c(0.044715, x) * x * x * x);
      return c(0.5, x) * x * (c(1, x) + unary(ExprOp::tanh, inner));
    }
    return c(0.5, x) * x * (c(1, x) + unary(ExprOp::erf, x * c(M_SQRT1_2, x)));
  });
}
void lower_silu(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return x * unary(ExprOp::sigmoid, x); });
}
void lower_mish(LowerContext& ctx) {
  unary_op(ctx, [](LowerContext&, Expr x) { return x * unary(ExprOp::tanh, softplus(x)); });
}
void lower_thresholded_relu(LowerContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0);
  unary_op(ctx, [&](LowerContext&, Expr x) { return select(binary(ExprOp::gt, x, c(alpha, x)), x, c(0, x)); });
}
void lower_shrink(LowerContext& ctx) {
  const double bias = ctx.attr_float("bias", 0.0), lambd = ctx.attr_float("lambd", 0.5);
  unary_op(ctx, [&](LowerContext&, Expr x) {
    return select(binary(ExprOp::lt, x, c(-lambd, x)), x + c(bias, x),
                  select(binary(ExprOp::gt, x, c(lambd, x)), x - c(bias, x), c(0, x)));
  }, false);
}

// ---- Binary and n-ary ------------------------------------------------------------------------

void lower_pow(LowerContext& ctx) {
  const Value& base = ctx.input(0);
  Value exponent = ctx.input(1);
  if (!is_float(base.dtype())) ctx.unsupported(cat("integer Pow (base ", dtype_name(base.dtype()), ")"));
  exponent = cast_value(ctx, exponent, base.dtype(), "exponent");
  ctx.set_output(0, elementwise(ctx, {base, exponent}, [](const std::vector<Expr>& in) {
    return binary(ExprOp::pow, in[0], in[1]);
  }));
}
void lower_mod(LowerContext& ctx) {
  const bool fmod = ctx.attr_int("fmod", 0) != 0;
  if (!fmod && is_float(ctx.input(0).dtype())) ctx.fail("Mod of floats requires fmod=1");
  binary_op(ctx, fmod ? ExprOp::fmod : ExprOp::mod);
}
void lower_greater_equal(LowerContext& ctx) { binary_op(ctx, ExprOp::ge); }
void lower_less_equal(LowerContext& ctx) { binary_op(ctx, ExprOp::le); }
void lower_sum(LowerContext& ctx) { variadic_op(ctx, ExprOp::add, false); }
void lower_mean(LowerContext& ctx) { variadic_op(ctx, ExprOp::add, true); }
void lower_max(LowerContext& ctx) { variadic_op(ctx, ExprOp::max, false); }
void lower_min(LowerContext& ctx) { variadic_op(ctx, ExprOp::min, false); }

void lower_where(LowerContext& ctx) {
  const Value& cond = ctx.input(0);
  const Value& x = ctx.input(1);
  const Value& y = ctx.input(2);
  if (cond.dtype() != DType::boolean) ctx.fail(cat("condition must be bool, got ", dtype_name(cond.dtype())));
  require_same_dtype(ctx, {x, y});
  ctx.set_output(0, elementwise(ctx, {cond, x, y}, [](const std::vector<Expr>& in) {
    return select(in[0], in[1], in[2]);
  }));
}

void lower_clip(LowerContext& ctx) {
  Value x = ctx.input(0);
  if (x.dtype() == DType::boolean) ctx.fail("Clip of bool");
  std::vector<Value> ins{x};
  int lo = -1, hi = -1;
  double lo_attr = dtype_lowest(x.dtype()), hi_attr = dtype_highest(x.dtype());
  if (ctx.opset() > 0 && ctx.opset() < 11) {
    lo_attr = ctx.attr_float("min", lo_attr);
    hi_attr = ctx.attr_float("max", hi_attr);
  } else {
    if (ctx.has_input(1)) { lo = static_cast<int>(ins.size()); ins.push_back(ctx.input(1)); }
    if (ctx.has_input(2)) { hi = static_cast<int>(ins.size()); ins.push_back(ctx.input(2)); }
    require_same_dtype(ctx, ins);
  }
  ctx.set_output(0, elementwise(ctx, ins, [&](const std::vector<Expr>& in) {
    Expr lo_e = lo >= 0 ? in[lo] : c(lo_attr, in[0]);
    Expr hi_e = hi >= 0 ? in[hi] : c(hi_attr, in[0]);
    // min(max(x, lo), hi) without NaN-propagation from the bounds.
    Expr v = select(binary(ExprOp::lt, in[0], lo_e), lo_e, in[0]);
    return select(binary(ExprOp::gt, v, hi_e), hi_e, v);
  }));
}

void lower_cast(LowerContext& ctx) {
  DType to;
  if (ctx.has_attr("to") && std::holds_alternative<std::string>(ctx.op().attrs.at("to"))) {
    const std::string name = ctx.attr_string("to", "");
    auto t = parse_dtype(name);
    if (!t) ctx.fail(cat("attribute 'to' names an unknown dtype \"", name, "\""));
    to = *t;
  } else {
    auto code = ctx.attr_int("to");
    if (!code) ctx.fail("attribute 'to' is required");
    to = dtype_from_onnx(ctx, *code);
  }
  ctx.set_output(0, cast_value(ctx, ctx.input(0), to, ""));
}

void lower_cast_like(LowerContext& ctx) {
  ctx.set_output(0, cast_value(ctx, ctx.input(0), ctx.input(1).dtype(), ""));
}

void lower_identity(LowerContext& ctx) { ctx.set_output(0, ctx.input(0)); }

void lower_dropout(LowerContext& ctx) {
  // Inference: the identity; the optional mask output is all true.
  if (ctx.has_input(2)) {
    const Value& training = ctx.input(2);
    if (!training.is_constant() || training.constant->as_int(0) != 0)
      ctx.unsupported("Dropout in training mode");
  }
  const Value& x = ctx.input(0);
  ctx.set_output(0, x);
  if (ctx.has_output(1)) {
    NodeSpec spec;
    spec.axes = spatial_axes(x.shape());
    spec.body = constant(1, DType::boolean);
    ctx.set_output(1, ctx.emit(std::move(spec), {}, "mask"));
  }
}

}  // namespace

void register_elementwise_ops(OpTable& t) {
  t["Abs"] = lower_abs;
  t["Neg"] = lower_neg;
  t["Sign"] = lower_sign;
  t["Exp"] = lower_unary_math<ExprOp::exp>;
  t["Log"] = lower_unary_math<ExprOp::log>;
  t["Sqrt"] = lower_unary_math<ExprOp::sqrt>;
  t["Reciprocal"] = lower_reciprocal;
  t["Erf"] = lower_unary_math<ExprOp::erf>;
  t["Floor"] = lower_unary_math<ExprOp::floor>;
  t["Ceil"] = lower_unary_math<ExprOp::ceil>;
  t["Round"] = lower_unary_math<ExprOp::round>;
  t["Sin"] = lower_unary_math<ExprOp::sin>;
  t["Cos"] = lower_unary_math<ExprOp::cos>;
  t["Tan"] = lower_unary_math<ExprOp::tan>;
  t["Asin"] = lower_unary_math<ExprOp::asin>;
  t["Acos"] = lower_unary_math<ExprOp::acos>;
  t["Atan"] = lower_unary_math<ExprOp::atan>;
  t["Sinh"] = lower_unary_math<ExprOp::sinh>;
  t["Cosh"] = lower_unary_math<ExprOp::cosh>;
  t["Asinh"] = lower_unary_math<ExprOp::asinh>;
  t["Acosh"] = lower_unary_math<ExprOp::acosh>;
  t["Atanh"] = lower_unary_math<ExprOp::atanh>;
  t["Tanh"] = lower_unary_math<ExprOp::tanh>;
  t["Not"] = lower_not;
  t["IsNaN"] = lower_isnan;
  t["IsInf"] = lower_isinf;
  t["Relu"] = lower_relu;
  t["LeakyRelu"] = lower_leaky_relu;
  t["PRelu"] = lower_prelu;
  t["Elu"] = lower_elu;
  t["Celu"] = lower_celu;
  t["Selu"] = lower_selu;
  t["Sigmoid"] = lower_sigmoid;
  t["HardSigmoid"] = lower_hard_sigmoid;
  t["HardSwish"] = lower_hard_swish;
  t["Softplus"] = lower_softplus;
  t["Softsign"] = lower_softsign;
  t["Gelu"] = lower_gelu;
  t["Silu"] = lower_silu;  // Tessel extension: x * sigmoid(x)
  t["Mish"] = lower_mish;
  t["ThresholdedRelu"] = lower_thresholded_relu;
  t["Shrink"] = lower_shrink;
  t["Add"] = lower_binary<ExprOp::add>;
  t["Sub"] = lower_binary<ExprOp::sub>;
  t["Mul"] = lower_binary<ExprOp::mul>;
  t["Div"] = lower_binary<ExprOp::div>;
  t["Pow"] = lower_pow;
  t["Mod"] = lower_mod;
  t["Equal"] = lower_binary<ExprOp::eq>;
  t["Greater"] = lower_binary<ExprOp::gt>;
  t["Less"] = lower_binary<ExprOp::lt>;
  t["GreaterOrEqual"] = lower_greater_equal;
  t["LessOrEqual"] = lower_less_equal;
  t["And"] = lower_binary<ExprOp::logical_and>;
  t["Or"] = lower_binary<ExprOp::logical_or>;
  t["Xor"] = lower_binary<ExprOp::logical_xor>;
  t["Sum"] = lower_sum;
  t["Mean"] = lower_mean;
  t["Max"] = lower_max;
  t["Min"] = lower_min;
  t["Where"] = lower_where;
  t["Clip"] = lower_clip;
  t["Cast"] = lower_cast;
  t["CastLike"] = lower_cast_like;
  t["Identity"] = lower_identity;
  t["Dropout"] = lower_dropout;
}

}  // namespace tessel
