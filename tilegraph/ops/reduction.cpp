// Reductions: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp, ArgMax/ArgMin,
// Softmax/LogSoftmax/Hardmax, and pooling (MaxPool, AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool).
//
// Multi-stage operators become several nodes: Softmax is a row max, a row sum of exp(x - max) and
// an elementwise normalization; ArgMax is a row max followed by the smallest index attaining it;
// AveragePool divides a window sum by a window count that depends only on the output position.
#include <algorithm>
#include <limits>
#include <numeric>

#include "tilegraph/ops/common.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

Expr c(double v, const Expr& like) { return constant_like(v, like); }

// Axes of a Reduce* op: the `axes` input (opset 13+ for ReduceSum, 18+ for the others) or attribute.
// Returns nullopt for "no reduction" (noop_with_empty_axes with empty axes).
std::optional<std::vector<int>> reduce_axes(LowerContext& ctx, const Value& x) {
  std::vector<int64_t> raw;
  if (ctx.has_input(1)) raw = ctx.constant_ints(1, "axes");
  else raw = ctx.attr_ints("axes");
  if (raw.empty()) {
    if (ctx.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    std::vector<int> all(x.rank());
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  std::vector<int> axes;
  for (int64_t a : raw) {
    const int n = normalize_axis(ctx, a, x.rank(), "axis");
    if (std::find(axes.begin(), axes.end(), n) != axes.end()) ctx.fail(cat("axis ", a, " repeated"));
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

int64_t count_over(const Value& x, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int a : axes) n *= x.shape()[a];
  return n;
}

enum class ReduceKind { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

void lower_reduce(LowerContext& ctx, ReduceKind kind) {
  const Value& x = ctx.input(0);
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const auto axes = reduce_axes(ctx, x);
  if (!axes) {
    ctx.set_output(0, x);
    return;
  }
  if (x.dtype() == DType::boolean) ctx.unsupported("reduction of bool");
  const bool floating = is_float(x.dtype());
  if (!floating && kind != ReduceKind::sum && kind != ReduceKind::max && kind != ReduceKind::min &&
      kind != ReduceKind::prod && kind != ReduceKind::sum_square && kind != ReduceKind::l1)
    ctx.unsupported(cat("this reduction of ", dtype_name(x.dtype())));
  const double n = static_cast<double>(count_over(x, *axes));
  auto reduce = [&](Combiner comb, const std::function<Expr(Expr)>& body, const std::string& suffix = "") {
    return reduce_value(ctx, x, *axes, keepdims, comb, body, suffix);
  };
  auto finish = [&](const Value& v, const std::function<Expr(Expr)>& f) {
    return elementwise(ctx, {v}, [&](const std::vector<Expr>& in) { return f(in[0]); });
  };
  switch (kind) {
    case ReduceKind::sum: ctx.set_output(0, reduce(Combiner::sum, [](Expr e) { return e; })); break;
    case ReduceKind::max: ctx.set_output(0, reduce(Combiner::max, [](Expr e) { return e; })); break;
    case ReduceKind::min: ctx.set_output(0, reduce(Combiner::min, [](Expr e) { return e; })); break;
    case ReduceKind::prod: ctx.set_output(0, reduce(Combiner::prod, [](Expr e) { return e; })); break;
    case ReduceKind::mean:
      if (n == 0) {
        // The mean of no values is 0 / 0 (ONNX's reference: NaN), not the empty sum's 0.
        Value s = reduce(Combiner::sum, [](Expr e) { return e; }, "sum");
        ctx.set_output(0, finish(s, [](Expr e) { return e * c(std::numeric_limits<double>::quiet_NaN(), e); }));
        break;
      }
      ctx.set_output(0, reduce(Combiner::sum, [&](Expr e) { return e * c(1.0 / n, e); }));
      break;
    case ReduceKind::sum_square: ctx.set_output(0, reduce(Combiner::sum, [](Expr e) { return e * e; })); break;
    case ReduceKind::l1:
      ctx.set_output(0, reduce(Combiner::sum, [](Expr e) { return unary(ExprOp::abs, e); }));
      break;
    case ReduceKind::l2: {
      Value s = reduce(Combiner::sum, [](Expr e) { return e * e; }, "sumsq");
      ctx.set_output(0, finish(s, [](Expr e) { return unary(ExprOp::sqrt, e); }));
      break;
    }
    case ReduceKind::log_sum: {
      Value s = reduce(Combiner::sum, [](Expr e) { return e; }, "sum");
      ctx.set_output(0, finish(s, [](Expr e) { return unary(ExprOp::log, e); }));
      break;
    }
    case ReduceKind::log_sum_exp: {
      // Stable: m + log(sum(exp(x - m))).
      Value m = reduce_value(ctx, x, *axes, true, Combiner::max, [](Expr e) { return e; }, "max");
      Value s = reduce_values(ctx, {x, m}, *axes, true, Combiner::sum, [](const std::vector<Expr>& in) {
        return unary(ExprOp::exp, in[0] - in[1]);
      }, "sumexp");
      Value y = elementwise(ctx, {m, s}, [](const std::vector<Expr>& in) {
        return in[0] + unary(ExprOp::log, in[1]);
      }, keepdims ? "" : "keep");
      if (!keepdims) {
        std::vector<int64_t> shape;
        for (int d = 0; d < x.rank(); ++d)
          if (!std::binary_search(axes->begin(), axes->end(), d)) shape.push_back(x.shape()[d]);
        y = reshape_value(ctx, y, shape, "");
      }
      ctx.set_output(0, y);
      break;
    }
  }
}

template <ReduceKind K>
void lower_reduce_op(LowerContext& ctx) {
  lower_reduce(ctx, K);
}

// ---- ArgMax / ArgMin -------------------------------------------------------------------------

void lower_arg(LowerContext& ctx, bool is_max) {
  const Value& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail("needs rank >= 1");
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank(), "axis");
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  if (x.dtype() == DType::boolean) ctx.unsupported("ArgMax/ArgMin of bool");
  Value best = reduce_value(ctx, x, {axis}, true, is_max ? Combiner::max : Combiner::min,
                            [](Expr e) { return e; }, is_max ? "max" : "min");
  // The first (or last) index whose value equals the extreme.
  const int reduction_axis = x.rank();  // reduce_values puts the single reduction axis last
  const double none = last ? -1.0 : static_cast<double>(x.shape()[axis]);
  ctx.set_output(0, reduce_values(ctx, {x, best}, {axis}, keepdims, last ? Combiner::max : Combiner::min,
                                  [&](const std::vector<Expr>& in) {
                                    return select(binary(ExprOp::eq, in[0], in[1]), axis_index(reduction_axis),
                                                  constant(none, DType::i64));
                                  }));
}

void lower_argmax(LowerContext& ctx) { lower_arg(ctx, true); }
void lower_argmin(LowerContext& ctx) { lower_arg(ctx, false); }

// ---- Softmax family --------------------------------------------------------------------------

enum class SoftmaxKind { softmax, log_softmax, hardmax };

void lower_softmax_kind(LowerContext& ctx, SoftmaxKind kind) {
  Value x = ctx.input(0);
  if (!is_float(x.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(x.dtype())));
  const bool legacy = ctx.opset() > 0 && ctx.opset() < 13;
  if (!legacy && x.rank() == 0) ctx.fail("input must have rank >= 1, got a scalar");
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", legacy ? 1 : -1), std::max(x.rank(), 1), "axis");
  const std::vector<int64_t> original = x.shape();
  std::vector<int> axes{axis};
  if (legacy) {  // opset < 13: the input is coerced to 2-D at `axis`
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.shape()[d];
    x = reshape_value(ctx, x, {outer, inner}, "flatten");
    axes = {1};
  }
  Value m = reduce_value(ctx, x, axes, true, Combiner::max, [](Expr e) { return e; }, "max");
  Value y;
  if (kind == SoftmaxKind::hardmax) {
    // 1 at the first maximum of each row.
    const int r = x.rank();
    Value first = reduce_values(ctx, {x, m}, axes, true, Combiner::min, [&](const std::vector<Expr>& in) {
      return select(binary(ExprOp::eq, in[0], in[1]), axis_index(r), integer_constant(x.shape()[axes[0]], DType::i64));
    }, "argmax");
    NodeSpec spec;
    spec.axes = spatial_axes(x.shape());
    spec.inputs.push_back(broadcast_access(first.type, x.rank(), x.shape()));
    spec.body = cast(binary(ExprOp::eq, axis_index(axes[0]), input(0, DType::i64)), x.dtype());
    y = ctx.emit(std::move(spec), {first}, legacy ? "onehot" : "");
  } else {
    Value s = reduce_values(ctx, {x, m}, axes, true, Combiner::sum, [](const std::vector<Expr>& in) {
      return unary(ExprOp::exp, in[0] - in[1]);
    }, "sumexp");
    y = elementwise(ctx, {x, m, s}, [&](const std::vector<Expr>& in) {
      if (kind == SoftmaxKind::log_softmax) return in[0] - in[1] - unary(ExprOp::log, in[2]);
      return unary(ExprOp::exp, in[0] - in[1]) / in[2];
    }, legacy ? "normalize" : "");
  }
  if (legacy) y = reshape_value(ctx, y, original, "");
  ctx.set_output(0, y);
}

void lower_softmax(LowerContext& ctx) { lower_softmax_kind(ctx, SoftmaxKind::softmax); }
void lower_log_softmax(LowerContext& ctx) { lower_softmax_kind(ctx, SoftmaxKind::log_softmax); }
void lower_hardmax(LowerContext& ctx) { lower_softmax_kind(ctx, SoftmaxKind::hardmax); }

// ---- Pooling ---------------------------------------------------------------------------------

struct PoolGeometry {
  int dims = 0;
  bool channels_last = false;  // attribute layout "NHWC": x is [N, spatial..., C] (a Tessel extension, as for Conv)
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
};

PoolGeometry pool_geometry(LowerContext& ctx, const Value& x) {
  PoolGeometry g;
  g.dims = x.rank() - 2;
  if (g.dims < 1) ctx.fail(cat("input must have rank >= 3, got ", x.type.print()));
  const std::string layout = ctx.attr_string("layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    ctx.fail(cat("attribute 'layout' must be \"NCHW\" or \"NHWC\", got \"", layout, "\""));
  g.channels_last = layout == "NHWC";
  for (int i = 0; i < g.dims; ++i) g.in.push_back(x.shape()[(g.channels_last ? 1 : 2) + i]);
  g.kernel = ctx.attr_ints("kernel_shape");
  if (static_cast<int>(g.kernel.size()) != g.dims)
    ctx.fail(cat("attribute 'kernel_shape' must have ", g.dims, " values, got ", g.kernel.size()));
  auto per_dim = [&](const char* name, int64_t dflt, size_t count) {
    std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) ctx.fail(cat("attribute '", name, "' has ", v.size(), " values, expected ", count));
    return v;
  };
  g.stride = per_dim("strides", 1, g.dims);
  g.dilation = per_dim("dilations", 1, g.dims);
  const std::vector<int64_t> pads = per_dim("pads", 0, 2 * g.dims);
  g.pad_begin.assign(pads.begin(), pads.begin() + g.dims);
  g.pad_end.assign(pads.begin() + g.dims, pads.end());
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  for (int i = 0; i < g.dims; ++i) {
    if (g.kernel[i] < 1 || g.stride[i] < 1 || g.dilation[i] < 1)
      ctx.fail(cat("kernel, strides and dilations must be >= 1 (dimension ", i, ")"));
    const int64_t span = (g.kernel[i] - 1) * g.dilation[i] + 1;
    int64_t out;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (g.in[i] + g.stride[i] - 1) / g.stride[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[i] + span - g.in[i]);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else {
      if (auto_pad == "VALID") g.pad_begin[i] = g.pad_end[i] = 0;
      else if (auto_pad != "NOTSET") ctx.fail(cat("attribute 'auto_pad' has unknown value \"", auto_pad, "\""));
      const int64_t room = g.in[i] + g.pad_begin[i] + g.pad_end[i] - span;
      if (room < 0) ctx.fail(cat("kernel extent ", span, " exceeds the padded input in dimension ", i));
      out = (ceil_mode ? (room + g.stride[i] - 1) / g.stride[i] : room / g.stride[i]) + 1;
      // A window must start inside the input or its leading padding.
      if (ceil_mode && (out - 1) * g.stride[i] >= g.in[i] + g.pad_begin[i]) --out;
    }
    g.out.push_back(out);
  }
  return g;
}

// Node over (n, c, o... | k...) -- (n, o..., c | k...) in NHWC -- reading x at
// stride*o + dilation*k - pad_begin.
NodeSpec pool_spec(const Value& x, const PoolGeometry& g, double pad_value) {
  NodeSpec spec;
  const int channel = g.channels_last ? 1 + g.dims : 1;  // the axis (and x dimension) of c
  const int first_o = g.channels_last ? 1 : 2;
  spec.axes.push_back({"n", x.shape()[0], AxisKind::spatial});
  if (!g.channels_last) spec.axes.push_back({"c", x.shape()[channel], AxisKind::spatial});
  for (int i = 0; i < g.dims; ++i) spec.axes.push_back({cat("o", i), g.out[i], AxisKind::spatial});
  if (g.channels_last) spec.axes.push_back({"c", x.shape()[channel], AxisKind::spatial});
  for (int i = 0; i < g.dims; ++i) spec.axes.push_back({cat("k", i), g.kernel[i], AxisKind::reduction});
  const int na = static_cast<int>(spec.axes.size());
  std::vector<AffineExpr> rows(x.rank(), AffineExpr{std::vector<int64_t>(na, 0), 0});
  rows[0].coeffs[0] = 1;
  rows[channel].coeffs[channel] = 1;
  for (int i = 0; i < g.dims; ++i) {
    AffineExpr& r = rows[first_o + i];
    r.offset = -g.pad_begin[i];
    r.coeffs[first_o + i] = g.stride[i];
    r.coeffs[2 + g.dims + i] = g.dilation[i];
  }
  spec.inputs.push_back(Access{x.type, AffineMap(na, rows), pad_value});
  return spec;
}

void lower_max_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (ctx.has_output(1)) ctx.unsupported("MaxPool's Indices output");
  if (x.dtype() == DType::boolean) ctx.fail("MaxPool of bool");
  const PoolGeometry g = pool_geometry(ctx, x);
  NodeSpec spec = pool_spec(x, g, dtype_lowest(x.dtype()));
  spec.body = input(0, x.dtype());
  spec.combiner = Combiner::max;
  spec.init = dtype_lowest(x.dtype());
  ctx.set_output(0, ctx.emit(std::move(spec), {x}));
}

// Number of window positions that count for averaging, per output position: positions inside
// [lo, hi) along every dimension, where [lo, hi) is the input (or the padded input).
Value window_count(LowerContext& ctx, const PoolGeometry& g, bool include_pad, DType dtype) {
  NodeSpec spec;
  for (int i = 0; i < g.dims; ++i) spec.axes.push_back({cat("o", i), g.out[i], AxisKind::spatial});
  for (int i = 0; i < g.dims; ++i) spec.axes.push_back({cat("k", i), g.kernel[i], AxisKind::reduction});
  Expr inside = constant(1, DType::boolean);
  for (int i = 0; i < g.dims; ++i) {
    Expr pos = axis_index(i) * integer_constant(g.stride[i], DType::i64) +
               axis_index(g.dims + i) * integer_constant(g.dilation[i], DType::i64) -
               integer_constant(g.pad_begin[i], DType::i64);
    const int64_t lo = include_pad ? -g.pad_begin[i] : 0;
    const int64_t hi = include_pad ? g.in[i] + g.pad_end[i] : g.in[i];
    inside = binary(ExprOp::logical_and, inside, binary(ExprOp::ge, pos, integer_constant(lo, DType::i64)));
    inside = binary(ExprOp::logical_and, inside, binary(ExprOp::lt, pos, integer_constant(hi, DType::i64)));
  }
  spec.body = select(inside, constant(1, dtype), constant(0, dtype));
  spec.combiner = Combiner::sum;
  return ctx.emit(std::move(spec), {}, "count");
}

void lower_average_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (!is_float(x.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(x.dtype())));
  const PoolGeometry g = pool_geometry(ctx, x);
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  NodeSpec spec = pool_spec(x, g, 0.0);
  spec.body = input(0, x.dtype());
  spec.combiner = Combiner::sum;
  Value sum = ctx.emit(std::move(spec), {x}, "sum");
  Value count = window_count(ctx, g, include_pad, x.dtype());
  if (g.channels_last) {  // [o...] -> [o..., 1], to broadcast over the channels of [n, o..., c]
    std::vector<int64_t> shape = count.shape();
    shape.push_back(1);
    count = reshape_value(ctx, count, shape, "");
  }
  ctx.set_output(0, elementwise(ctx, {sum, count}, [](const std::vector<Expr>& in) { return in[0] / in[1]; }));
}

void lower_lp_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (!is_float(x.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(x.dtype())));
  const double p = static_cast<double>(ctx.attr_int("p", 2));
  const PoolGeometry g = pool_geometry(ctx, x);
  NodeSpec spec = pool_spec(x, g, 0.0);
  Expr v = input(0, x.dtype());
  spec.body = binary(ExprOp::pow, unary(ExprOp::abs, v), constant(p, x.dtype()));
  spec.combiner = Combiner::sum;
  Value sum = ctx.emit(std::move(spec), {x}, "sum");
  ctx.set_output(0, elementwise(ctx, {sum}, [&](const std::vector<Expr>& in) {
    return binary(ExprOp::pow, in[0], c(1.0 / p, in[0]));
  }));
}

std::vector<int> spatial_dims(LowerContext& ctx, const Value& x) {
  if (x.rank() < 3) ctx.fail(cat("input must have rank >= 3, got ", x.type.print()));
  std::vector<int> axes;
  for (int d = 2; d < x.rank(); ++d) axes.push_back(d);
  return axes;
}

void lower_global_average_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (!is_float(x.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(x.dtype())));
  const auto axes = spatial_dims(ctx, x);
  const double n = static_cast<double>(count_over(x, axes));
  ctx.set_output(0, reduce_value(ctx, x, axes, true, Combiner::sum, [&](Expr e) { return e * c(1.0 / n, e); }));
}

void lower_global_max_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (x.dtype() == DType::boolean) ctx.fail("GlobalMaxPool of bool");
  ctx.set_output(0, reduce_value(ctx, x, spatial_dims(ctx, x), true, Combiner::max, [](Expr e) { return e; }));
}

void lower_global_lp_pool(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (!is_float(x.dtype())) ctx.fail(cat("needs a floating-point input, got ", dtype_name(x.dtype())));
  const double p = static_cast<double>(ctx.attr_int("p", 2));
  Value s = reduce_value(ctx, x, spatial_dims(ctx, x), true, Combiner::sum, [&](Expr e) {
    return binary(ExprOp::pow, unary(ExprOp::abs, e), c(p, e));
  }, "sum");
  ctx.set_output(0, elementwise(ctx, {s}, [&](const std::vector<Expr>& in) {
    return binary(ExprOp::pow, in[0], c(1.0 / p, in[0]));
  }));
}

}  // namespace

void register_reduction_ops(OpTable& t) {
  t["ReduceSum"] = lower_reduce_op<ReduceKind::sum>;
  t["ReduceMean"] = lower_reduce_op<ReduceKind::mean>;
  t["ReduceMax"] = lower_reduce_op<ReduceKind::max>;
  t["ReduceMin"] = lower_reduce_op<ReduceKind::min>;
  t["ReduceProd"] = lower_reduce_op<ReduceKind::prod>;
  t["ReduceSumSquare"] = lower_reduce_op<ReduceKind::sum_square>;
  t["ReduceL1"] = lower_reduce_op<ReduceKind::l1>;
  t["ReduceL2"] = lower_reduce_op<ReduceKind::l2>;
  t["ReduceLogSum"] = lower_reduce_op<ReduceKind::log_sum>;
  t["ReduceLogSumExp"] = lower_reduce_op<ReduceKind::log_sum_exp>;
  t["ArgMax"] = lower_argmax;
  t["ArgMin"] = lower_argmin;
  t["Softmax"] = lower_softmax;
  t["LogSoftmax"] = lower_log_softmax;
  t["Hardmax"] = lower_hardmax;
  t["MaxPool"] = lower_max_pool;
  t["AveragePool"] = lower_average_pool;
  t["LpPool"] = lower_lp_pool;
  t["GlobalAveragePool"] = lower_global_average_pool;
  t["GlobalMaxPool"] = lower_global_max_pool;
  t["GlobalLpPool"] = lower_global_lp_pool;
}

}  // namespace tessel
