// Contractions: MatMul (NumPy batching and broadcasting), Gemm, Conv (N-d, NCHW or NHWC, stride,
// padding, dilation, groups incl. depthwise) and ConvTranspose.
//
// Convolution is one reduction node: out[n, g, mg, o...] = sum over (c, k...) of
// X[n, g*Cg + c, s*o + d*k - pad] * W[g*Mg + mg, c, k...]; padding is the access's pad value 0, and
// the [N, G, Mg, O...] domain is reinterpreted as [N, M, O...]. ConvTranspose zero-inserts the
// input (a node whose output interleaves the input with zeros) and then convolves with stride 1,
// reading the inserted tensor at o + pad - d*k (a negative coefficient: the flipped kernel).
#include <algorithm>

#include "tilegraph/limits.h"
#include "tilegraph/ops/common.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

AffineExpr zero_row(int num_axes) { return AffineExpr{std::vector<int64_t>(num_axes, 0), 0}; }
AffineExpr axis_row(int num_axes, int axis) {
  AffineExpr r = zero_row(num_axes);
  r.coeffs[axis] = 1;
  return r;
}

// ---- MatMul and Gemm -------------------------------------------------------------------------

// out = A @ B with NumPy semantics; `scale` multiplies each product (Gemm's alpha).
Value matmul(LowerContext& ctx, const Value& a, const Value& b, bool trans_a, bool trans_b,
             double scale, const std::string& suffix) {
  if (a.rank() == 0 || b.rank() == 0) ctx.fail("MatMul operands must have rank >= 1");
  require_same_dtype(ctx, {a, b});
  if (a.dtype() == DType::boolean) ctx.fail("MatMul of bool tensors");
  const int ra = a.rank(), rb = b.rank();
  const int64_t K = ra == 1 ? a.shape()[0] : a.shape()[trans_a ? ra - 2 : ra - 1];
  const int64_t M = ra == 1 ? 1 : a.shape()[trans_a ? ra - 1 : ra - 2];
  const int64_t Kb = rb == 1 ? b.shape()[0] : b.shape()[trans_b ? rb - 1 : rb - 2];
  const int64_t N = rb == 1 ? 1 : b.shape()[trans_b ? rb - 2 : rb - 1];
  if (K != Kb)
    ctx.fail(cat("inner dimensions differ: A is ", a.type.print(), ", B is ", b.type.print(),
                 " (", K, " vs ", Kb, ")"));
  std::vector<int64_t> batch_a(a.shape().begin(), a.shape().end() - std::min(ra, 2));
  std::vector<int64_t> batch_b(b.shape().begin(), b.shape().end() - std::min(rb, 2));
  const std::vector<int64_t> batch = broadcast_shapes(ctx, {batch_a, batch_b});
  const int nb = static_cast<int>(batch.size());

  NodeSpec spec;
  spec.axes = spatial_axes(batch, "b");
  std::vector<int64_t> out_shape = batch;
  const int m_axis = ra >= 2 ? static_cast<int>(spec.axes.size()) : -1;
  if (ra >= 2) { spec.axes.push_back({"m", M, AxisKind::spatial}); out_shape.push_back(M); }
  const int n_axis = rb >= 2 ? static_cast<int>(spec.axes.size()) : -1;
  if (rb >= 2) { spec.axes.push_back({"n", N, AxisKind::spatial}); out_shape.push_back(N); }
  const int k_axis = static_cast<int>(spec.axes.size());
  spec.axes.push_back({"k", K, AxisKind::reduction});
  const int na = k_axis + 1;

  auto batch_rows = [&](const std::vector<int64_t>& own) {
    std::vector<AffineExpr> rows;
    const int lead = nb - static_cast<int>(own.size());
    for (size_t d = 0; d < own.size(); ++d)
      rows.push_back(own[d] == 1 && batch[lead + d] != 1 ? zero_row(na) : axis_row(na, lead + static_cast<int>(d)));
    return rows;
  };
  std::vector<AffineExpr> rows_a = batch_rows(batch_a);
  if (ra == 1) rows_a.push_back(axis_row(na, k_axis));
  else if (trans_a) { rows_a.push_back(axis_row(na, k_axis)); rows_a.push_back(axis_row(na, m_axis)); }
  else { rows_a.push_back(axis_row(na, m_axis)); rows_a.push_back(axis_row(na, k_axis)); }
  std::vector<AffineExpr> rows_b = batch_rows(batch_b);
  if (rb == 1) rows_b.push_back(axis_row(na, k_axis));
  else if (trans_b) { rows_b.push_back(axis_row(na, n_axis)); rows_b.push_back(axis_row(na, k_axis)); }
  else { rows_b.push_back(axis_row(na, k_axis)); rows_b.push_back(axis_row(na, n_axis)); }

  spec.inputs.push_back(Access{a.type, AffineMap(na, rows_a)});
  spec.inputs.push_back(Access{b.type, AffineMap(na, rows_b)});
  Expr prod = input(0, a.dtype()) * input(1, b.dtype());
  if (scale != 1.0) prod = prod * constant_like(scale, prod);
  spec.body = prod;
  spec.combiner = Combiner::sum;
  return ctx.emit(std::move(spec), {a, b}, suffix);
}

void lower_matmul(LowerContext& ctx) {
  // transB (Tessel's, not ONNX's): B is given as its transpose in its last two dimensions (the
  // normalize stage's MatMul of a transposed operand, tilegraph/normalize_views.h).
  const int64_t trans_b = ctx.attr_int("transB", 0);
  if (trans_b != 0 && trans_b != 1) ctx.fail(cat("attribute 'transB' is ", trans_b, ", not 0 or 1"));
  if (trans_b && ctx.input(1).rank() < 2) ctx.fail(cat("transB needs B of rank >= 2, got ", ctx.input(1).type.print()));
  ctx.set_output(0, matmul(ctx, ctx.input(0), ctx.input(1), false, trans_b != 0, 1.0, ""));
}

void lower_gemm(LowerContext& ctx) {
  const Value& a = ctx.input(0);
  const Value& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail(cat("Gemm needs rank-2 A and B, got ", a.type.print(), " and ", b.type.print()));
  const double alpha = ctx.attr_float("alpha", 1.0), beta = ctx.attr_float("beta", 1.0);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  if (!ctx.has_input(2) || beta == 0.0) {
    ctx.set_output(0, matmul(ctx, a, b, ta, tb, alpha, ""));
    return;
  }
  Value ab = matmul(ctx, a, b, ta, tb, alpha, "matmul");
  const Value& c = ctx.input(2);
  require_same_dtype(ctx, {ab, c});
  if (broadcast_shapes(ctx, {ab.shape(), c.shape()}) != ab.shape())
    ctx.fail(cat("C of shape ", c.type.print(), " does not broadcast to ", ab.type.print()));
  ctx.set_output(0, elementwise(ctx, {ab, c}, [&](const std::vector<Expr>& in) {
    return in[0] + (beta == 1.0 ? in[1] : in[1] * constant_like(beta, in[1]));
  }));
}

// ---- Convolution -----------------------------------------------------------------------------

struct ConvGeometry {
  int dims = 0;  // spatial dimensions
  std::vector<int64_t> in, kernel, out, stride, dilation, pad_begin, pad_end;
};

// Reads strides, dilations, pads/auto_pad; `transposed` applies ConvTranspose's output rule.
ConvGeometry conv_geometry(LowerContext& ctx, const std::vector<int64_t>& in,
                           const std::vector<int64_t>& kernel, bool transposed) {
  ConvGeometry g;
  g.dims = static_cast<int>(in.size());
  g.in = in;
  g.kernel = kernel;
  auto per_dim = [&](const char* name, int64_t dflt, size_t count) {
    std::vector<int64_t> v = ctx.attr_ints(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) ctx.fail(cat("attribute '", name, "' has ", v.size(), " values, expected ", count));
    // Bounded like a tensor's extent, so that a window's span, the padded input and the output
    // below are computed without overflow.
    for (int64_t x : v)
      if (x > kMaxTensorElements || x < -kMaxTensorElements)
        ctx.fail(cat("attribute '", name, "' has value ", x, ", beyond ", kMaxTensorElementsText));
    return v;
  };
  g.stride = per_dim("strides", 1, g.dims);
  g.dilation = per_dim("dilations", 1, g.dims);
  for (int i = 0; i < g.dims; ++i)
    if (g.stride[i] < 1 || g.dilation[i] < 1)
      ctx.fail(cat("strides and dilations must be >= 1, got stride ", g.stride[i], " dilation ", g.dilation[i]));
  if (auto ks = ctx.attr_ints_opt("kernel_shape"); ks && *ks != kernel)
    ctx.fail("attribute 'kernel_shape' does not match the weight's shape");
  std::vector<int64_t> pads = per_dim("pads", 0, 2 * g.dims);
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> output_padding = transposed ? per_dim("output_padding", 0, g.dims) : std::vector<int64_t>(g.dims, 0);
  const auto output_shape = transposed ? ctx.attr_ints_opt("output_shape") : std::nullopt;
  g.pad_begin.assign(pads.begin(), pads.begin() + g.dims);
  g.pad_end.assign(pads.begin() + g.dims, pads.end());
  for (int i = 0; i < g.dims; ++i) {
    const std::optional<int64_t> window = checked_mul(kernel[i] - 1, g.dilation[i]);
    if (!window || *window > kMaxTensorElements)
      ctx.fail(cat("kernel extent ", kernel[i], " with dilation ", g.dilation[i], " spans more than ", kMaxTensorElementsText));
    const int64_t span = *window + 1;
    if (transposed && (!checked_mul(g.stride[i], in[i]) || *checked_mul(g.stride[i], in[i]) > kMaxTensorElements))
      ctx.fail(cat("stride ", g.stride[i], " times input extent ", in[i], " is more than ", kMaxTensorElementsText));
    if (transposed) {
      int64_t out;
      if (output_shape) {
        if (static_cast<int>(output_shape->size()) != g.dims)
          ctx.fail("attribute 'output_shape' must list the spatial dimensions");
        out = (*output_shape)[i];
        // ONNX splits the total padding with floor division (a negative total adds rows at the end).
        const int64_t total = g.stride[i] * (in[i] - 1) + output_padding[i] + span - out;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        if (auto_pad == "SAME_UPPER") { g.pad_begin[i] = half; g.pad_end[i] = total - half; }
        else { g.pad_begin[i] = total - half; g.pad_end[i] = half; }
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        out = in[i] * g.stride[i];
        const int64_t total = std::max<int64_t>(0, g.stride[i] * (in[i] - 1) + output_padding[i] + span - out);
        if (auto_pad == "SAME_UPPER") { g.pad_begin[i] = total / 2; g.pad_end[i] = total - total / 2; }
        else { g.pad_begin[i] = total - total / 2; g.pad_end[i] = total / 2; }
      } else {
        if (auto_pad == "VALID") { g.pad_begin[i] = g.pad_end[i] = 0; }
        out = g.stride[i] * (in[i] - 1) + output_padding[i] + span - g.pad_begin[i] - g.pad_end[i];
      }
      g.out.push_back(out);
      continue;
    }
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in[i] + g.stride[i] - 1) / g.stride[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.stride[i] + span - in[i]);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pad_end[i] = total - g.pad_begin[i];
    } else if (auto_pad == "VALID") {
      g.pad_begin[i] = g.pad_end[i] = 0;
    } else if (auto_pad != "NOTSET") {
      ctx.fail(cat("attribute 'auto_pad' has unknown value \"", auto_pad, "\""));
    }
    const std::optional<int64_t> sum = checked_add(in[i], g.pad_begin[i]);
    const std::optional<int64_t> padded_or = sum ? checked_add(*sum, g.pad_end[i]) : std::nullopt;
    if (!padded_or || *padded_or > kMaxTensorElements)
      ctx.fail(cat("padding ", g.pad_begin[i], " + ", g.pad_end[i], " of input extent ", in[i], " in dimension ", i,
                   " is over ", kMaxTensorElementsText));
    const int64_t padded = *padded_or;
    if (padded < span)
      ctx.fail(cat("kernel extent ", span, " exceeds the padded input extent ", padded, " in dimension ", i));
    g.out.push_back((padded - span) / g.stride[i] + 1);
  }
  for (int64_t o : g.out)
    if (o < 1) ctx.fail(cat("the output would have extent ", o));
  return g;
}

struct ConvLayout {
  bool channels_last = false;
  // Weights [k..., Cg, M] (Tessel attribute weight_layout "HWIO", NHWC only): the output channels
  // innermost, so a depthwise convolution reads a vector of channels' weights per tap.
  bool weights_hwio = false;
  int channel_dim(int rank) const { return channels_last ? rank - 1 : 1; }
  int spatial_dim(int i) const { return channels_last ? 1 + i : 2 + i; }
  int weight_m_dim(int rank) const { return weights_hwio ? rank - 1 : 0; }
  int weight_c_dim(int rank) const { return weights_hwio ? rank - 2 : channels_last ? rank - 1 : 1; }
  int weight_k_dim(int i) const { return weights_hwio ? i : channels_last ? 1 + i : 2 + i; }
};

ConvLayout conv_layout(LowerContext& ctx) {
  const std::string layout = ctx.attr_string("layout", "NCHW");
  if (layout != "NCHW" && layout != "NHWC")
    ctx.fail(cat("attribute 'layout' must be \"NCHW\" or \"NHWC\", got \"", layout, "\""));
  const std::string weights = ctx.attr_string("weight_layout", layout == "NHWC" ? "OHWI" : "OIHW");
  if (weights != (layout == "NHWC" ? "OHWI" : "OIHW") && !(layout == "NHWC" && weights == "HWIO"))
    ctx.fail(cat("attribute 'weight_layout' must be ", layout == "NHWC" ? "\"OHWI\" or \"HWIO\"" : "\"OIHW\"",
                 " with layout ", layout, ", got \"", weights, "\""));
  return {layout == "NHWC", weights == "HWIO"};
}

// The reduction node of a (possibly grouped) convolution.
//   x_row(spatial i): the affine index into x's spatial dim i, given the axis positions.
// Weight layout: NCHW models use [M, Cg, k...]; NHWC models use [M, k..., Cg], or [k..., Cg, M]
// with weight_layout "HWIO".
Value conv_node(LowerContext& ctx, const Value& x, const Value& w, const ConvGeometry& g,
                const ConvLayout& layout, int64_t groups, int64_t M, bool transposed_read,
                const std::string& suffix) {
  const int rank = x.rank();
  const int64_t N = x.shape()[0];
  const int64_t C = x.shape()[layout.channel_dim(rank)];
  const int64_t Cg = C / groups, Mg = M / groups;
  NodeSpec spec;
  // Spatial axes: n, [g], mg, o... (NCHW) or n, o..., [g], mg (NHWC).
  auto add = [&](const std::string& name, int64_t extent, AxisKind kind) {
    spec.axes.push_back({name, extent, kind});
    return static_cast<int>(spec.axes.size()) - 1;
  };
  // A grouped convolution with one output (input) channel per group has no mg (c) axis: a
  // depthwise convolution's domain is its output's shape (n, g, o... or n, o..., g) and it sums
  // over its window alone, so kernels that vectorize along the channels see them as the last axis.
  const bool one_m = groups > 1 && Mg == 1 && !transposed_read, one_c = groups > 1 && Cg == 1 && !transposed_read;
  const int n_ax = add("n", N, AxisKind::spatial);
  int g_ax = -1, m_ax = -1;
  std::vector<int> o_ax(g.dims);
  if (!layout.channels_last) {
    if (groups > 1) g_ax = add("g", groups, AxisKind::spatial);
    if (!one_m) m_ax = add(groups > 1 ? "mg" : "m", Mg, AxisKind::spatial);
  }
  for (int i = 0; i < g.dims; ++i) o_ax[i] = add(cat("o", i), g.out[i], AxisKind::spatial);
  if (layout.channels_last) {
    if (groups > 1) g_ax = add("g", groups, AxisKind::spatial);
    if (!one_m) m_ax = add(groups > 1 ? "mg" : "m", Mg, AxisKind::spatial);
  }
  const int c_ax = one_c ? -1 : add("c", Cg, AxisKind::reduction);
  std::vector<int> k_ax(g.dims);
  for (int i = 0; i < g.dims; ++i) k_ax[i] = add(cat("k", i), g.kernel[i], AxisKind::reduction);
  const int na = static_cast<int>(spec.axes.size());

  // Input rows.
  std::vector<AffineExpr> xr(rank, zero_row(na));
  xr[0] = axis_row(na, n_ax);
  AffineExpr& xc = xr[layout.channel_dim(rank)];
  if (c_ax >= 0) xc.coeffs[c_ax] = 1;
  if (g_ax >= 0) xc.coeffs[g_ax] = Cg;
  for (int i = 0; i < g.dims; ++i) {
    AffineExpr& r = xr[layout.spatial_dim(i)];
    if (transposed_read) {  // stride-1 conv over the zero-inserted input, flipped kernel
      r.coeffs[o_ax[i]] = 1;
      r.coeffs[k_ax[i]] = -g.dilation[i];
      r.offset = g.pad_begin[i];
    } else {
      r.coeffs[o_ax[i]] = g.stride[i];
      r.coeffs[k_ax[i]] = g.dilation[i];
      r.offset = -g.pad_begin[i];
    }
  }
  // Weight rows.
  std::vector<AffineExpr> wr(w.rank(), zero_row(na));
  if (transposed_read) {  // ConvTranspose weight: [C, Mg, k...]
    wr[0].coeffs[c_ax] = 1;
    if (g_ax >= 0) wr[0].coeffs[g_ax] = Cg;
    wr[1] = axis_row(na, m_ax);
    for (int i = 0; i < g.dims; ++i) wr[2 + i] = axis_row(na, k_ax[i]);
  } else {
    AffineExpr& wm = wr[layout.weight_m_dim(w.rank())];
    if (m_ax >= 0) wm.coeffs[m_ax] = 1;
    if (g_ax >= 0) wm.coeffs[g_ax] = Mg;
    if (c_ax >= 0) wr[layout.weight_c_dim(w.rank())] = axis_row(na, c_ax);
    for (int i = 0; i < g.dims; ++i) wr[layout.weight_k_dim(i)] = axis_row(na, k_ax[i]);
  }
  spec.inputs.push_back(Access{x.type, AffineMap(na, xr)});
  spec.inputs.push_back(Access{w.type, AffineMap(na, wr)});
  spec.body = input(0, x.dtype()) * input(1, w.dtype());
  spec.combiner = Combiner::sum;
  std::vector<int64_t> out_shape(rank);
  out_shape[0] = N;
  out_shape[layout.channel_dim(rank)] = M;
  for (int i = 0; i < g.dims; ++i) out_shape[layout.spatial_dim(i)] = g.out[i];
  spec.output_shape = out_shape;
  return ctx.emit(std::move(spec), {x, w}, suffix);
}

Value add_channel_bias(LowerContext& ctx, const Value& y, const Value& bias, const ConvLayout& layout) {
  const int64_t M = y.shape()[layout.channel_dim(y.rank())];
  if (bias.rank() != 1 || bias.shape()[0] != M)
    ctx.fail(cat("bias must have shape [", M, "], got ", bias.type.print()));
  require_same_dtype(ctx, {y, bias});
  NodeSpec spec;
  spec.axes = spatial_axes(y.shape());
  spec.inputs.push_back(broadcast_access(y.type, y.rank(), y.shape()));
  spec.inputs.push_back(Access{bias.type, AffineMap::select_axes(y.rank(), {layout.channel_dim(y.rank())})});
  spec.body = input(0, y.dtype()) + input(1, bias.dtype());
  return ctx.emit(std::move(spec), {y, bias}, "");
}

void check_conv_operands(LowerContext& ctx, const Value& x, const Value& w) {
  if (x.rank() < 3) ctx.fail(cat("input must have rank >= 3, got ", x.type.print()));
  if (w.rank() != x.rank())
    ctx.fail(cat("weight rank ", w.rank(), " differs from input rank ", x.rank()));
  require_same_dtype(ctx, {x, w});
  if (!is_float(x.dtype())) ctx.unsupported(cat("convolution of ", dtype_name(x.dtype())));
}

void lower_conv(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& w = ctx.input(1);
  check_conv_operands(ctx, x, w);
  const ConvLayout layout = conv_layout(ctx);
  const int rank = x.rank();
  const int64_t groups = ctx.attr_int("group", 1);
  const int64_t C = x.shape()[layout.channel_dim(rank)];
  const int64_t M = w.shape()[layout.weight_m_dim(rank)];
  const int64_t Cg = w.shape()[layout.weight_c_dim(rank)];
  if (groups < 1 || C % groups != 0 || M % groups != 0 || Cg * groups != C)
    ctx.fail(cat("group ", groups, " does not fit ", C, " input channels and weight ", w.type.print()));
  std::vector<int64_t> in, kernel;
  for (int i = 0; i < rank - 2; ++i) {
    in.push_back(x.shape()[layout.spatial_dim(i)]);
    kernel.push_back(w.shape()[layout.weight_k_dim(i)]);
  }
  const ConvGeometry g = conv_geometry(ctx, in, kernel, false);
  const bool has_bias = ctx.has_input(2);
  Value y = conv_node(ctx, x, w, g, layout, groups, M, false, has_bias ? "conv" : "");
  if (has_bias) y = add_channel_bias(ctx, y, ctx.input(2), layout);
  ctx.set_output(0, y);
}

// Interleaves x's spatial dims with stride-1 zeros: xd[.., j, ..] = x[.., j/s, ..] if j % s == 0.
Value zero_insert(LowerContext& ctx, const Value& x, const std::vector<int64_t>& stride) {
  const int rank = x.rank();
  NodeSpec spec;
  std::vector<AffineExpr> rows;
  std::vector<int> r_axes;
  std::vector<int64_t> out_shape{x.shape()[0], x.shape()[1]};
  spec.axes.push_back({"n", x.shape()[0], AxisKind::spatial});
  spec.axes.push_back({"c", x.shape()[1], AxisKind::spatial});
  std::vector<int> i_axes;
  for (int i = 0; i < rank - 2; ++i) {
    i_axes.push_back(static_cast<int>(spec.axes.size()));
    spec.axes.push_back({cat("i", i), x.shape()[2 + i], AxisKind::spatial});
    r_axes.push_back(static_cast<int>(spec.axes.size()));
    spec.axes.push_back({cat("r", i), stride[i], AxisKind::spatial});
    out_shape.push_back(x.shape()[2 + i] * stride[i]);
  }
  const int na = static_cast<int>(spec.axes.size());
  std::vector<int> axes{0, 1};
  axes.insert(axes.end(), i_axes.begin(), i_axes.end());
  spec.inputs.push_back(Access{x.type, AffineMap::select_axes(na, axes)});
  Expr on_grid = constant(1, DType::boolean);
  for (int r : r_axes)
    on_grid = binary(ExprOp::logical_and, on_grid, binary(ExprOp::eq, axis_index(r), constant(0, DType::i64)));
  spec.body = select(on_grid, input(0, x.dtype()), constant(0, x.dtype()));
  spec.output_shape = out_shape;
  return ctx.emit(std::move(spec), {x}, "zero_insert");
}

void lower_conv_transpose(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const Value& w = ctx.input(1);
  check_conv_operands(ctx, x, w);
  if (ctx.attr_string("layout", "NCHW") != "NCHW") ctx.unsupported("ConvTranspose with layout NHWC");
  const int rank = x.rank();
  const int64_t groups = ctx.attr_int("group", 1);
  const int64_t C = x.shape()[1];
  if (groups < 1 || C % groups != 0 || w.shape()[0] != C)
    ctx.fail(cat("group ", groups, " does not fit ", C, " input channels and weight ", w.type.print()));
  const int64_t M = w.shape()[1] * groups;
  std::vector<int64_t> in, kernel;
  for (int i = 0; i < rank - 2; ++i) {
    in.push_back(x.shape()[2 + i]);
    kernel.push_back(w.shape()[2 + i]);
  }
  const ConvGeometry g = conv_geometry(ctx, in, kernel, true);
  const bool strided = std::any_of(g.stride.begin(), g.stride.end(), [](int64_t s) { return s > 1; });
  const Value xd = strided ? zero_insert(ctx, x, g.stride) : x;
  const bool has_bias = ctx.has_input(2);
  Value y = conv_node(ctx, xd, w, g, ConvLayout{}, groups, M, true, has_bias ? "conv" : "");
  if (has_bias) y = add_channel_bias(ctx, y, ctx.input(2), ConvLayout{});
  ctx.set_output(0, y);
}

}  // namespace

void register_contraction_ops(OpTable& t) {
  t["MatMul"] = lower_matmul;
  t["Gemm"] = lower_gemm;
  t["Conv"] = lower_conv;
  t["ConvTranspose"] = lower_conv_transpose;
}

}  // namespace tessel
