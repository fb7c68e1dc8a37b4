// Normalizations: LayerNormalization, RMSNormalization, BatchNormalization (inference),
// InstanceNormalization, MeanVarianceNormalization, LpNormalization.
//
// Statistics are reduction nodes that keep the reduced dimensions (mean, then the variance
// reading x and the mean), and the normalization itself is one elementwise node.
#include <algorithm>

#include "tilegraph/ops/common.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

Expr c(double v, const Expr& like) { return constant_like(v, like); }

void require_float(LowerContext& ctx, const Value& v) {
  if (!is_float(v.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(v.dtype())));
}

// mean and variance over `axes`, keeping them as size-1 dims.
std::pair<Value, Value> moments(LowerContext& ctx, const Value& x, const std::vector<int>& axes) {
  double n = 1;
  for (int a : axes) n *= static_cast<double>(x.shape()[a]);
  Value mean = reduce_value(ctx, x, axes, true, Combiner::sum, [&](Expr e) { return e * c(1.0 / n, e); }, "mean");
  Value var = reduce_values(ctx, {x, mean}, axes, true, Combiner::sum, [&](const std::vector<Expr>& in) {
    Expr d = in[0] - in[1];
    return d * d * c(1.0 / n, d);
  }, "var");
  return {mean, var};
}

std::vector<int> axes_from(int first, int rank) {
  std::vector<int> axes;
  for (int d = first; d < rank; ++d) axes.push_back(d);
  return axes;
}

void lower_layer_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& scale = ctx.input(1);
  require_float(ctx, x);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank(), "axis");
  const double eps = ctx.attr_float("epsilon", 1e-5);
  const auto axes = axes_from(axis, x.rank());
  auto [mean, var] = moments(ctx, x, axes);
  std::vector<Value> ins{x, mean, var, scale};
  if (ctx.has_input(2)) ins.push_back(ctx.input(2));
  require_same_dtype(ctx, {x, scale});
  if (ctx.has_input(2)) require_same_dtype(ctx, {x, ctx.input(2)});
  if (broadcast_shapes(ctx, {scale.shape(), x.shape()}) != x.shape())
    ctx.fail(cat("scale ", scale.type.print(), " does not broadcast to ", x.type.print()));
  ctx.set_output(0, elementwise(ctx, ins, [&](const std::vector<Expr>& in) {
    Expr y = (in[0] - in[1]) * unary(ExprOp::rsqrt, in[2] + c(eps, in[2])) * in[3];
    return in.size() > 4 ? y + in[4] : y;
  }));
  if (ctx.has_output(1)) ctx.set_output(1, mean);
  if (ctx.has_output(2))
    ctx.set_output(2, elementwise(ctx, {var}, [&](const std::vector<Expr>& in) {
      return unary(ExprOp::rsqrt, in[0] + c(eps, in[0]));
    }, "inv_std"));
}

void lower_rms_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& scale = ctx.input(1);
  require_float(ctx, x);
  require_same_dtype(ctx, {x, scale});
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank(), "axis");
  const double eps = ctx.attr_float("epsilon", 1e-5);
  const auto axes = axes_from(axis, x.rank());
  double n = 1;
  for (int a : axes) n *= static_cast<double>(x.shape()[a]);
  Value ms = reduce_value(ctx, x, axes, true, Combiner::sum, [&](Expr e) { return e * e * c(1.0 / n, e); },
                          "mean_square");
  ctx.set_output(0, elementwise(ctx, {x, ms, scale}, [&](const std::vector<Expr>& in) {
    return in[0] * unary(ExprOp::rsqrt, in[1] + c(eps, in[1])) * in[2];
  }));
}

// Reads a per-channel vector [C] at dimension 1 of an N-d tensor.
Access channel_access(const Value& v, int rank) {
  return Access{v.type, AffineMap::select_axes(rank, {1})};
}

void lower_batch_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  require_float(ctx, x);
  if (ctx.attr_int("training_mode", 0) != 0) ctx.unsupported("BatchNormalization in training mode");
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.unsupported("BatchNormalization's running statistics outputs");
  if (x.rank() < 2) ctx.fail(cat("input must have rank >= 2, got ", x.type.print()));
  const double eps = ctx.attr_float("epsilon", 1e-5);
  const int64_t C = x.shape()[1];
  std::vector<Value> ins{x};
  for (int i = 1; i <= 4; ++i) {
    const Value& v = ctx.input(i);
    if (v.rank() != 1 || v.shape()[0] != C)
      ctx.fail(cat("input ", i, " must have shape [", C, "], got ", v.type.print()));
    ins.push_back(v);
  }
  require_same_dtype(ctx, ins);
  NodeSpec spec;
  spec.axes = spatial_axes(x.shape());
  spec.inputs.push_back(broadcast_access(x.type, x.rank(), x.shape()));
  for (int i = 1; i <= 4; ++i) spec.inputs.push_back(channel_access(ins[i], x.rank()));
  const DType t = x.dtype();
  // y = (x - mean) / sqrt(var + eps) * scale + bias
  spec.body = (input(0, t) - input(3, t)) * unary(ExprOp::rsqrt, input(4, t) + constant(eps, t)) * input(1, t) +
              input(2, t);
  ctx.set_output(0, ctx.emit(std::move(spec), ins));
}

void lower_instance_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& scale = ctx.input(1);
  const Value& bias = ctx.input(2);
  require_float(ctx, x);
  if (x.rank() < 3) ctx.fail(cat("input must have rank >= 3, got ", x.type.print()));
  require_same_dtype(ctx, {x, scale, bias});
  const int64_t C = x.shape()[1];
  for (int i = 1; i <= 2; ++i) {
    const Value& v = ctx.input(i);
    if (v.rank() != 1 || v.shape()[0] != C)
      ctx.fail(cat("input ", i, " must have shape [", C, "], got ", v.type.print()));
  }
  const double eps = ctx.attr_float("epsilon", 1e-5);
  auto [mean, var] = moments(ctx, x, axes_from(2, x.rank()));
  NodeSpec spec;
  spec.axes = spatial_axes(x.shape());
  spec.inputs.push_back(broadcast_access(x.type, x.rank(), x.shape()));
  spec.inputs.push_back(broadcast_access(mean.type, x.rank(), x.shape()));
  spec.inputs.push_back(broadcast_access(var.type, x.rank(), x.shape()));
  spec.inputs.push_back(channel_access(scale, x.rank()));
  spec.inputs.push_back(channel_access(bias, x.rank()));
  const DType t = x.dtype();
  spec.body = (input(0, t) - input(1, t)) * unary(ExprOp::rsqrt, input(2, t) + constant(eps, t)) * input(3, t) +
              input(4, t);
  ctx.set_output(0, ctx.emit(std::move(spec), {x, mean, var, scale, bias}));
}

void lower_mean_variance_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  require_float(ctx, x);
  std::vector<int> axes;
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) axes.push_back(normalize_axis(ctx, a, x.rank(), "axis"));
  std::sort(axes.begin(), axes.end());
  auto [mean, var] = moments(ctx, x, axes);
  ctx.set_output(0, elementwise(ctx, {x, mean, var}, [](const std::vector<Expr>& in) {
    return (in[0] - in[1]) / (unary(ExprOp::sqrt, in[2]) + c(1e-9, in[2]));
  }));
}

void lower_lp_norm(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  require_float(ctx, x);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank(), "axis");
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail(cat("attribute 'p' must be 1 or 2, got ", p));
  Value norm = reduce_value(ctx, x, {axis}, true, Combiner::sum, [&](Expr e) {
    return p == 1 ? unary(ExprOp::abs, e) : e * e;
  }, "norm");
  ctx.set_output(0, elementwise(ctx, {x, norm}, [&](const std::vector<Expr>& in) {
    Expr n = p == 1 ? in[1] : unary(ExprOp::sqrt, in[1]);
    return in[0] / n;
  }));
}

}  // namespace

void register_normalization_ops(OpTable& t) {
  t["LayerNormalization"] = lower_layer_norm;
  t["RMSNormalization"] = lower_rms_norm;
  t["BatchNormalization"] = lower_batch_norm;
  t["InstanceNormalization"] = lower_instance_norm;
  t["MeanVarianceNormalization"] = lower_mean_variance_norm;
  t["LpNormalization"] = lower_lp_norm;
}

}  // namespace tessel
