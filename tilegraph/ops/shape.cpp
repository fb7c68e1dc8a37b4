// Data movement and shape operators: Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Expand,
// Concat, Split, Slice, Pad, Gather, GatherElements, Tile, Trilu, CumSum, OneHot, EyeLike, Range,
// DepthToSpace/SpaceToDepth, Einsum, and the import-time constants Shape, Size, Constant and
// ConstantOfShape.
//
// All but Gather/GatherElements/OneHot read through affine maps: slicing is a strided offset,
// padding an offset with a pad value, concatenation a select over offset reads, and Tile a
// domain [r0, d0, r1, d1, ...] reinterpreted as [r0*d0, r1*d1, ...].
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tilegraph/limits.h"
#include "tilegraph/ops/common.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

std::vector<int> identity_axes(int n) {
  std::vector<int> a(n);
  std::iota(a.begin(), a.end(), 0);
  return a;
}

// Integer list from input `i` (newer opsets) or attribute `name` (older ones).
std::optional<std::vector<int64_t>> ints_input_or_attr(LowerContext& ctx, int i, const char* name) {
  if (ctx.has_input(i)) return ctx.constant_ints(i, name);
  return ctx.attr_ints_opt(name);
}

// ---- Transpose and reshapes ------------------------------------------------------------------

void lower_transpose(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  std::vector<int64_t> raw = ctx.attr_ints("perm");
  std::vector<int> perm;
  if (raw.empty()) {
    for (int d = x.rank() - 1; d >= 0; --d) perm.push_back(d);
  } else {
    if (static_cast<int>(raw.size()) != x.rank())
      ctx.fail(cat("attribute 'perm' has ", raw.size(), " entries for a rank-", x.rank(), " input"));
    std::set<int> seen;
    for (int64_t p : raw) {
      const int a = normalize_axis(ctx, p, x.rank(), "perm entry");
      if (!seen.insert(a).second) ctx.fail(cat("attribute 'perm' repeats axis ", p));
      perm.push_back(a);
    }
  }
  ctx.set_output(0, transpose_value(ctx, x, perm, ""));
}

void lower_reshape(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  std::vector<int64_t> shape = ctx.has_input(1) ? ctx.constant_ints(1, "shape") : ctx.attr_ints("shape");
  const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
  int infer = -1;
  int64_t known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allow_zero) {
      if (d >= x.shape().size()) ctx.fail(cat("shape entry ", d, " is 0 but the input has rank ", x.rank()));
      shape[d] = x.shape()[d];
    }
    if (shape[d] == -1) {
      if (infer >= 0) ctx.fail("shape has more than one -1");
      infer = static_cast<int>(d);
    } else if (shape[d] < 0) {
      ctx.fail(cat("shape entry ", d, " is ", shape[d]));
    } else {
      known *= shape[d];
    }
  }
  const int64_t total = x.type.num_elements();
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      ctx.fail(cat("cannot reshape ", x.type.print(), " to a shape with ", known, " known elements"));
    shape[infer] = total / known;
  } else if (known != total) {
    ctx.fail(cat("cannot reshape ", x.type.print(), " (", total, " elements) to ", known, " elements"));
  }
  ctx.set_output(0, reshape_value(ctx, x, shape, ""));
}

void lower_flatten(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const int64_t raw = ctx.attr_int("axis", 1);
  const int64_t axis = raw < 0 ? raw + x.rank() : raw;
  if (axis < 0 || axis > x.rank()) ctx.fail(cat("axis ", raw, " is out of range for rank ", x.rank()));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.shape()[d];
  ctx.set_output(0, reshape_value(ctx, x, {outer, inner}, ""));
}

void lower_squeeze(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  auto raw = ints_input_or_attr(ctx, 1, "axes");
  std::set<int> axes;
  if (raw) {
    for (int64_t a : *raw) {
      const int n = normalize_axis(ctx, a, x.rank(), "axis");
      if (x.shape()[n] != 1) ctx.fail(cat("cannot squeeze axis ", a, " of extent ", x.shape()[n]));
      axes.insert(n);
    }
  } else {
    for (int d = 0; d < x.rank(); ++d)
      if (x.shape()[d] == 1) axes.insert(d);
  }
  std::vector<int64_t> shape;
  for (int d = 0; d < x.rank(); ++d)
    if (!axes.count(d)) shape.push_back(x.shape()[d]);
  ctx.set_output(0, reshape_value(ctx, x, shape, ""));
}

void lower_unsqueeze(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  auto raw = ints_input_or_attr(ctx, 1, "axes");
  if (!raw) ctx.fail("needs 'axes'");
  const int out_rank = x.rank() + static_cast<int>(raw->size());
  std::set<int> axes;
  for (int64_t a : *raw)
    if (!axes.insert(normalize_axis(ctx, a, out_rank, "axis")).second) ctx.fail(cat("axis ", a, " repeated"));
  std::vector<int64_t> shape;
  int src = 0;
  for (int d = 0; d < out_rank; ++d) shape.push_back(axes.count(d) ? 1 : x.shape()[src++]);
  ctx.set_output(0, reshape_value(ctx, x, shape, ""));
}

void lower_expand(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const std::vector<int64_t> shape = ctx.constant_ints(1, "shape");
  const std::vector<int64_t> out = broadcast_shapes(ctx, {x.shape(), shape});
  NodeSpec spec;
  spec.axes = spatial_axes(out);
  spec.inputs.push_back(broadcast_access(x.type, static_cast<int>(out.size()), out));
  spec.body = input(0, x.dtype());
  ctx.set_output(0, ctx.emit(std::move(spec), {x}));
}

void lower_depth_to_space(LowerContext& ctx, bool to_space) {
  const Value& x = ctx.input(0);
  if (x.rank() != 4) ctx.fail(cat("input must have rank 4, got ", x.type.print()));
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (b < 1) ctx.fail(cat("attribute 'blocksize' must be >= 1, got ", b));
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (to_space) {
    if (C % (b * b) != 0) ctx.fail(cat("channels ", C, " are not divisible by blocksize^2 = ", b * b));
    const bool crd = ctx.attr_string("mode", "DCR") == "CRD";
    Value v = crd ? reshape_value(ctx, x, {N, C / (b * b), b, b, H, W}, "split")
                  : reshape_value(ctx, x, {N, b, b, C / (b * b), H, W}, "split");
    v = crd ? transpose_value(ctx, v, {0, 1, 4, 2, 5, 3}) : transpose_value(ctx, v, {0, 3, 4, 1, 5, 2});
    ctx.set_output(0, reshape_value(ctx, v, {N, C / (b * b), H * b, W * b}, ""));
  } else {
    if (H % b != 0 || W % b != 0) ctx.fail(cat("spatial extents ", H, "x", W, " are not divisible by ", b));
    Value v = reshape_value(ctx, x, {N, C, H / b, b, W / b, b}, "split");
    v = transpose_value(ctx, v, {0, 3, 5, 1, 2, 4});
    ctx.set_output(0, reshape_value(ctx, v, {N, C * b * b, H / b, W / b}, ""));
  }
}
void lower_depth_to_space_op(LowerContext& ctx) { lower_depth_to_space(ctx, true); }
void lower_space_to_depth_op(LowerContext& ctx) { lower_depth_to_space(ctx, false); }

// ---- Concat, Split, Slice, Pad, Tile ---------------------------------------------------------

void lower_concat(LowerContext& ctx) {
  std::vector<Value> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) ins.push_back(ctx.input(i));
  if (ins.empty()) ctx.fail("needs at least one input");
  require_same_dtype(ctx, ins);
  const int rank = ins[0].rank();
  auto axis_attr = ctx.attr_int("axis");
  if (!axis_attr) ctx.fail("attribute 'axis' is required");
  const int axis = normalize_axis(ctx, *axis_attr, rank, "axis");
  std::vector<int64_t> out = ins[0].shape();
  out[axis] = 0;
  for (const Value& v : ins) {
    if (v.rank() != rank) ctx.fail(cat("inputs differ in rank: ", ins[0].type.print(), " vs ", v.type.print()));
    for (int d = 0; d < rank; ++d)
      if (d != axis && v.shape()[d] != ins[0].shape()[d])
        ctx.fail(cat("inputs differ outside axis ", axis, ": ", ins[0].type.print(), " vs ", v.type.print()));
    out[axis] += v.shape()[axis];
  }
  std::vector<Value> used;
  std::vector<TensorType> parts;
  for (const Value& v : ins)
    if (v.shape()[axis] != 0) {
      used.push_back(v);
      parts.push_back(v.type);
    }
  if (used.empty()) {  // every input is empty along the axis
    NodeSpec spec;
    spec.axes = spatial_axes(out);
    spec.body = constant(0, ins[0].dtype());
    ctx.set_output(0, ctx.emit(std::move(spec), {}));
    return;
  }
  ctx.set_output(0, ctx.emit(concat_spec(parts, axis), used));
}

// out = x[start + step * i] along each axis (other axes whole).
Value slice_value(LowerContext& ctx, const Value& x, const std::vector<int64_t>& start,
                  const std::vector<int64_t>& step, const std::vector<int64_t>& length,
                  const std::string& suffix) {
  const int rank = x.rank();
  NodeSpec spec;
  spec.axes = spatial_axes(length);
  std::vector<AffineExpr> rows;
  for (int d = 0; d < rank; ++d) {
    AffineExpr r{std::vector<int64_t>(rank, 0), start[d]};
    r.coeffs[d] = step[d];
    rows.push_back(r);
  }
  spec.inputs.push_back(Access{x.type, AffineMap(rank, rows)});
  spec.body = input(0, x.dtype());
  return ctx.emit(std::move(spec), {x}, suffix);
}

void lower_split(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank(), "axis");
  const int64_t extent = x.shape()[axis];
  const int outputs = ctx.num_outputs();
  if (outputs < 1) ctx.fail("needs at least one output");
  std::vector<int64_t> sizes;
  if (auto given = ints_input_or_attr(ctx, 1, "split"); given && !given->empty()) {
    sizes = *given;
    if (static_cast<int>(sizes.size()) != outputs)
      ctx.fail(cat("'split' has ", sizes.size(), " entries for ", outputs, " outputs"));
    for (int64_t s : sizes)
      if (s < 0) ctx.fail(cat("'split' has a negative size ", s));
    if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != extent)
      ctx.fail(cat("'split' sizes do not add up to the axis extent ", extent));
  } else {
    const int64_t parts = ctx.attr_int("num_outputs", outputs);
    if (parts != outputs) ctx.fail(cat("'num_outputs' is ", parts, " but the node has ", outputs, " outputs"));
    const int64_t chunk = (extent + parts - 1) / parts;
    for (int64_t i = 0, left = extent; i < parts; ++i, left -= chunk) sizes.push_back(std::min(chunk, std::max<int64_t>(left, 0)));
  }
  int64_t begin = 0;
  for (int i = 0; i < outputs; ++i) {
    std::vector<int64_t> start(x.rank(), 0), step(x.rank(), 1), length = x.shape();
    start[axis] = begin;
    length[axis] = sizes[i];
    if (ctx.has_output(i)) ctx.set_output(i, slice_value(ctx, x, start, step, length, cat("part", i)));
    begin += sizes[i];
  }
}

void lower_slice(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const int rank = x.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.has_input(1)) {
    starts = ctx.constant_ints(1, "starts");
    ends = ctx.constant_ints(2, "ends");
    if (ctx.has_input(3)) axes = ctx.constant_ints(3, "axes");
    if (ctx.has_input(4)) steps = ctx.constant_ints(4, "steps");
  } else {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  }
  if (starts.size() != ends.size()) ctx.fail(cat("starts has ", starts.size(), " entries, ends ", ends.size()));
  if (axes.empty()) {
    const std::vector<int> all = identity_axes(static_cast<int>(starts.size()));
    axes.assign(all.begin(), all.end());
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps must have the same length");
  std::vector<int64_t> start(rank, 0), step(rank, 1), length = x.shape();
  std::set<int> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int a = normalize_axis(ctx, axes[i], rank, "axis");
    if (!seen.insert(a).second) ctx.fail(cat("axis ", axes[i], " repeated"));
    const int64_t dim = x.shape()[a];
    const int64_t s = steps[i];
    if (s == 0) ctx.fail("a step is 0");
    auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); };
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b = b > INT64_MIN + dim ? b + dim : INT64_MIN;
    if (e < 0) e = e > INT64_MIN + dim ? e + dim : INT64_MIN;
    if (s > 0) { b = clamp(b, 0, dim); e = clamp(e, 0, dim); }
    else { b = clamp(b, -1, dim - 1); e = clamp(e, -1, dim - 1); }
    const int64_t n = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
    start[a] = b;
    step[a] = s;
    length[a] = n;
  }
  ctx.set_output(0, slice_value(ctx, x, start, step, length, ""));
}

// The one element of `t` as a constant: an integer tensor's value exactly (an i64 beyond 2^53
// has no exact double).
Scalar element_scalar(const HostTensor& t) { return is_integer(t.dtype()) ? Scalar::integer(t.as_int(0)) : Scalar(t[0]); }

void lower_pad(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const int rank = x.rank();
  const std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant") ctx.unsupported(cat("Pad mode \"", mode, "\" (only \"constant\")"));
  std::vector<int64_t> pads = ctx.has_input(1) ? ctx.constant_ints(1, "pads") : ctx.attr_ints("pads");
  Scalar value = ctx.attr_float("value", 0.0);
  if (ctx.has_input(2)) {
    const Value& v = ctx.input(2);
    if (!v.is_constant()) ctx.unsupported("a pad value computed at run time");
    if (v.type.num_elements() != 1) ctx.fail("constant_value must be a scalar");
    value = element_scalar(*v.constant);
  }
  std::vector<int> axes = identity_axes(rank);
  if (ctx.has_input(3)) {
    axes.clear();
    for (int64_t a : ctx.constant_ints(3, "axes")) axes.push_back(normalize_axis(ctx, a, rank, "axis"));
  }
  const int n = static_cast<int>(axes.size());
  if (static_cast<int>(pads.size()) != 2 * n)
    ctx.fail(cat("pads has ", pads.size(), " entries, expected ", 2 * n));
  std::vector<int64_t> begin(rank, 0), end(rank, 0), out = x.shape();
  for (int i = 0; i < n; ++i) {
    begin[axes[i]] = pads[i];
    end[axes[i]] = pads[n + i];
    out[axes[i]] += pads[i] + pads[n + i];
    if (out[axes[i]] < 0) ctx.fail(cat("pads remove more than the extent of axis ", axes[i]));
  }
  NodeSpec spec;
  spec.axes = spatial_axes(out);
  std::vector<AffineExpr> rows;
  for (int d = 0; d < rank; ++d) {
    AffineExpr r{std::vector<int64_t>(rank, 0), -begin[d]};
    r.coeffs[d] = 1;
    rows.push_back(r);
  }
  spec.inputs.push_back(Access{x.type, AffineMap(rank, rows), round_to(x.dtype(), value)});
  spec.body = input(0, x.dtype());
  ctx.set_output(0, ctx.emit(std::move(spec), {x}));
}

void lower_tile(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const std::vector<int64_t> repeats = ctx.constant_ints(1, "repeats");
  if (static_cast<int>(repeats.size()) != x.rank())
    ctx.fail(cat("repeats has ", repeats.size(), " entries for a rank-", x.rank(), " input"));
  NodeSpec spec;
  std::vector<int> read_axes;
  std::vector<int64_t> out;
  for (int d = 0; d < x.rank(); ++d) {
    if (repeats[d] < 0) ctx.fail(cat("repeats entry ", d, " is ", repeats[d]));
    spec.axes.push_back({cat("t", d), repeats[d], AxisKind::spatial});
    read_axes.push_back(static_cast<int>(spec.axes.size()));
    spec.axes.push_back({cat("d", d), x.shape()[d], AxisKind::spatial});
    const std::optional<int64_t> extent = checked_mul(repeats[d], x.shape()[d]);
    if (!extent || *extent > kMaxTensorElements)
      ctx.fail(cat("repeats entry ", d, " (", repeats[d], ") times the input's extent ", x.shape()[d], " is more than ",
                   kMaxTensorElementsText));
    out.push_back(*extent);
  }
  spec.inputs.push_back(Access{x.type, AffineMap::select_axes(static_cast<int>(spec.axes.size()), read_axes)});
  spec.body = input(0, x.dtype());
  spec.output_shape = out;
  ctx.set_output(0, ctx.emit(std::move(spec), {x}));
}

// ---- Gathers -----------------------------------------------------------------------------------

void lower_gather(LowerContext& ctx) {
  const Value& data = ctx.input(0);
  const Value& indices = ctx.input(1);
  if (!is_integer(indices.dtype())) ctx.fail(cat("indices must be integers, got ", dtype_name(indices.dtype())));
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), data.rank(), "axis");
  const int q = indices.rank();
  std::vector<int64_t> out;
  for (int d = 0; d < axis; ++d) out.push_back(data.shape()[d]);
  for (int64_t e : indices.shape()) out.push_back(e);
  for (int d = axis + 1; d < data.rank(); ++d) out.push_back(data.shape()[d]);
  const int na = static_cast<int>(out.size());
  NodeSpec spec;
  spec.axes = spatial_axes(out);
  if (indices.is_constant() && indices.type.num_elements() == 1 && !data.is_constant()) {
    // One index known at import (ONNX exports of x[0], qkv[1]): a copy at a fixed offset along
    // `axis`, an affine read that fuses and folds like a slice, not a data-dependent gather.
    const int64_t extent = data.shape()[axis];
    int64_t index = indices.constant->as_int(0);
    if (index < -extent || index >= extent) ctx.fail(cat("index ", index, " is out of range for axis ", axis, " of extent ", extent));
    if (index < 0) index += extent;
    std::vector<AffineExpr> rows;
    for (int d = 0; d < data.rank(); ++d) {
      AffineExpr e{std::vector<int64_t>(na, 0), 0};
      if (d < axis) e.coeffs[d] = 1;
      else if (d > axis) e.coeffs[d + q - 1] = 1;
      else e.offset = index;  // an index of rank 1 keeps its axis, of extent 1: read at 0
      rows.push_back(std::move(e));
    }
    spec.inputs.push_back(Access{data.type, AffineMap(na, std::move(rows))});
    spec.body = input(0, data.dtype());
    ctx.set_output(0, ctx.emit(std::move(spec), {data}));
    return;
  }
  std::vector<int> data_axes;
  for (int d = 0; d < data.rank(); ++d)
    data_axes.push_back(d < axis ? d : (d == axis ? -1 : d + q - 1));
  Access data_access{data.type, AffineMap::select_axes(na, data_axes)};
  data_access.gather_dim = axis;
  data_access.gather_index_input = 1;
  std::vector<int> index_axes;
  for (int i = 0; i < q; ++i) index_axes.push_back(axis + i);
  spec.inputs.push_back(data_access);
  spec.inputs.push_back(Access{indices.type, AffineMap::select_axes(na, index_axes)});
  spec.body = input(0, data.dtype());
  ctx.set_output(0, ctx.emit(std::move(spec), {data, indices}));
}

void lower_gather_elements(LowerContext& ctx) {
  const Value& data = ctx.input(0);
  const Value& indices = ctx.input(1);
  if (!is_integer(indices.dtype())) ctx.fail(cat("indices must be integers, got ", dtype_name(indices.dtype())));
  if (indices.rank() != data.rank()) ctx.fail("data and indices must have the same rank");
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", 0), data.rank(), "axis");
  const int r = data.rank();
  NodeSpec spec;
  spec.axes = spatial_axes(indices.shape());
  Access data_access{data.type, AffineMap::select_axes(r, identity_axes(r))};
  data_access.gather_dim = axis;
  data_access.gather_index_input = 1;
  spec.inputs.push_back(data_access);
  spec.inputs.push_back(Access{indices.type, AffineMap::select_axes(r, identity_axes(r))});
  spec.body = input(0, data.dtype());
  ctx.set_output(0, ctx.emit(std::move(spec), {data, indices}));
}

void lower_one_hot(LowerContext& ctx) {
  const Value& indices = ctx.input(0);
  const std::vector<double> depth_v = ctx.constant_floats(1, "depth");
  const Value& values = ctx.input(2);
  if (depth_v.size() != 1) ctx.fail("depth must be a scalar");
  if (values.type.num_elements() != 2) ctx.fail(cat("values must have 2 elements, got ", values.type.print()));
  const int64_t depth = saturating_int64(depth_v[0]);  // (a NaN or huge float depth is no UB here)
  const int out_rank = indices.rank() + 1;
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", -1), out_rank, "axis");
  std::vector<int64_t> out = indices.shape();
  out.insert(out.begin() + axis, depth);
  NodeSpec spec;
  spec.axes = spatial_axes(out);
  std::vector<int> idx_axes;
  for (int d = 0; d < out_rank; ++d)
    if (d != axis) idx_axes.push_back(d);
  spec.inputs.push_back(Access{indices.type, AffineMap::select_axes(out_rank, idx_axes)});
  Value flat = reshape_value(ctx, values, {2}, "values");
  // values[0] and values[1] are read through constant maps.
  for (int k = 0; k < 2; ++k) {
    AffineExpr row{std::vector<int64_t>(out_rank, 0), k};
    spec.inputs.push_back(Access{flat.type, AffineMap(out_rank, {row})});
  }
  Expr idx = cast(input(0, indices.dtype()), DType::i64);
  // Negative indices count from the end.
  idx = select(binary(ExprOp::lt, idx, constant(0, DType::i64)), idx + integer_constant(depth, DType::i64), idx);
  spec.body = select(binary(ExprOp::eq, idx, axis_index(axis)), input(2, flat.dtype()), input(1, flat.dtype()));
  ctx.set_output(0, ctx.emit(std::move(spec), {indices, flat, flat}));
}

// ---- Masks and sequences ---------------------------------------------------------------------

void lower_trilu(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail(cat("input must have rank >= 2, got ", x.type.print()));
  const bool upper = ctx.attr_int("upper", 1) != 0;
  int64_t k = 0;
  if (ctx.has_input(1)) {
    const auto kv = ctx.constant_ints(1, "k");
    if (kv.size() != 1) ctx.fail("k must be a scalar");
    k = kv[0];
  }
  const int i = x.rank() - 2, j = x.rank() - 1;
  ctx.set_output(0, elementwise(ctx, {x}, [&](const std::vector<Expr>& in) {
    Expr diff = axis_index(j) - axis_index(i);
    Expr keep = upper ? binary(ExprOp::ge, diff, integer_constant(k, DType::i64))
                      : binary(ExprOp::le, diff, integer_constant(k, DType::i64));
    return select(keep, in[0], constant(0, in[0].dtype()));
  }));
}

void lower_eye_like(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail(cat("input must have rank 2, got ", x.type.print()));
  const DType t = ctx.has_attr("dtype") ? dtype_from_onnx(ctx, ctx.attr_int("dtype", 1)) : x.dtype();
  const int64_t k = ctx.attr_int("k", 0);
  NodeSpec spec;
  spec.axes = spatial_axes(x.shape());
  spec.body = cast(binary(ExprOp::eq, axis_index(1) - axis_index(0), integer_constant(k, DType::i64)), t);
  ctx.set_output(0, ctx.emit(std::move(spec), {}));
}

void lower_cumsum(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const auto axis_v = ctx.constant_ints(1, "axis");
  if (axis_v.size() != 1) ctx.fail("axis must be a scalar");
  const int axis = normalize_axis(ctx, axis_v[0], x.rank(), "axis");
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0, reverse = ctx.attr_int("reverse", 0) != 0;
  NodeSpec spec;
  spec.axes = spatial_axes(x.shape());
  const int r = x.rank();
  spec.axes.push_back({"r", x.shape()[axis], AxisKind::reduction});
  std::vector<int> read = identity_axes(r);
  read[axis] = r;
  spec.inputs.push_back(Access{x.type, AffineMap::select_axes(r + 1, read)});
  const ExprOp cmp = reverse ? (exclusive ? ExprOp::gt : ExprOp::ge) : (exclusive ? ExprOp::lt : ExprOp::le);
  spec.body = select(binary(cmp, axis_index(r), axis_index(axis)), input(0, x.dtype()), constant(0, x.dtype()));
  spec.combiner = Combiner::sum;
  ctx.set_output(0, ctx.emit(std::move(spec), {x}));
}

void lower_range(LowerContext& ctx) {
  const Value& start = ctx.input(0);
  require_same_dtype(ctx, {start, ctx.input(1), ctx.input(2)});
  if (is_integer(start.dtype())) {
    // In integers: an i64 start or delta beyond 2^53 has no exact double. The count is
    // ceil((limit - start) / delta), the values wrap like the dtype.
    const int64_t s = ctx.constant_ints(0, "start").at(0), limit = ctx.constant_ints(1, "limit").at(0);
    const int64_t delta = ctx.constant_ints(2, "delta").at(0);
    if (delta == 0) ctx.fail("delta is 0");
    const __int128 span = static_cast<__int128>(limit) - s;
    const __int128 steps = span / delta + ((span % delta != 0 && (span < 0) == (delta < 0)) ? 1 : 0);
    if (steps > kMaxTensorElements)
      ctx.fail(cat("Range from ", s, " to ", limit, " by ", delta, " has more than ", kMaxTensorElementsText, " elements"));
    const int64_t n = static_cast<int64_t>(std::max<__int128>(0, steps));
    std::vector<int64_t> values;
    for (int64_t i = 0; i < n; ++i)
      values.push_back(static_cast<int64_t>(static_cast<uint64_t>(s) + static_cast<uint64_t>(i) * static_cast<uint64_t>(delta)));
    ctx.set_output(0, ctx.constant(HostTensor::from_integers(TensorType{start.dtype(), {n}}, std::move(values))));
    return;
  }
  const double s = ctx.constant_floats(0, "start").at(0);
  const double limit = ctx.constant_floats(1, "limit").at(0);
  const double delta = ctx.constant_floats(2, "delta").at(0);
  if (delta == 0) ctx.fail("delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - s) / delta)));
  std::vector<double> values;
  for (int64_t i = 0; i < n; ++i) values.push_back(round_to(start.dtype(), s + static_cast<double>(i) * delta));
  ctx.set_output(0, ctx.constant(HostTensor(TensorType{start.dtype(), {n}}, values)));
}

// ---- Einsum ----------------------------------------------------------------------------------

void lower_einsum(LowerContext& ctx) {
  std::string eq = ctx.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) ctx.unsupported("Einsum with an ellipsis");
  std::vector<Value> ins;
  for (int i = 0; i < ctx.num_inputs(); ++i) ins.push_back(ctx.input(i));
  require_same_dtype(ctx, ins);
  // ONNX's Einsum takes numeric tensors; a bool product summed is not one (found by fuzz_onnx).
  if (!ins.empty() && ins[0].dtype() == DType::boolean) ctx.unsupported("bool inputs are not supported by this operator");
  const size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    const size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != ins.size()) ctx.fail(cat("equation \"", eq, "\" has ", terms.size(), " operands, given ", ins.size()));
  std::map<char, int64_t> extent;
  std::map<char, int> count;
  for (size_t t = 0; t < terms.size(); ++t) {
    if (static_cast<int>(terms[t].size()) != ins[t].rank())
      ctx.fail(cat("operand ", t, " subscripts \"", terms[t], "\" do not match rank ", ins[t].rank()));
    for (size_t d = 0; d < terms[t].size(); ++d) {
      const char ch = terms[t][d];
      if (!std::isalpha(static_cast<unsigned char>(ch))) ctx.fail(cat("bad subscript '", ch, "' in \"", eq, "\""));
      const int64_t e = ins[t].shape()[d];
      if (extent.count(ch) && extent[ch] != e && extent[ch] != 1 && e != 1)
        ctx.fail(cat("subscript '", ch, "' has extents ", extent[ch], " and ", e));
      // Broadcasting: an extent of 1 gives way to the other (an empty dimension stays 0).
      if (!extent.count(ch) || extent[ch] == 1) extent[ch] = e;
      ++count[ch];
    }
  }
  std::string out;
  if (arrow != std::string::npos) out = eq.substr(arrow + 2);
  else
    for (auto [ch, n] : count)
      if (n == 1) out += ch;
  NodeSpec spec;
  std::map<char, int> axis_of;
  for (char ch : out) {
    if (!extent.count(ch)) ctx.fail(cat("output subscript '", ch, "' appears in no operand"));
    // (An output's subscripts name its axes: "bij,cjk->bii" would need one axis twice; found by
    // fuzz_onnx, where it reached the node's internal check.)
    if (axis_of.count(ch)) ctx.fail(cat("output subscript '", ch, "' repeated in \"", eq, "\""));
    axis_of[ch] = static_cast<int>(spec.axes.size());
    spec.axes.push_back({std::string(1, ch), extent[ch], AxisKind::spatial});
  }
  for (auto [ch, e] : extent)
    if (!axis_of.count(ch)) {
      axis_of[ch] = static_cast<int>(spec.axes.size());
      spec.axes.push_back({std::string(1, ch), e, AxisKind::reduction});
    }
  const int na = static_cast<int>(spec.axes.size());
  Expr body;
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<int> axes;
    for (size_t d = 0; d < terms[t].size(); ++d) {
      const char ch = terms[t][d];
      axes.push_back(ins[t].shape()[d] == 1 && extent[ch] != 1 ? -1 : axis_of[ch]);
    }
    spec.inputs.push_back(Access{ins[t].type, AffineMap::select_axes(na, axes)});
    Expr leaf = input(static_cast<int>(t), ins[t].dtype());
    body = body.valid() ? body * leaf : leaf;
  }
  spec.body = body;
  if (na > static_cast<int>(out.size())) spec.combiner = Combiner::sum;
  ctx.set_output(0, ctx.emit(std::move(spec), ins));
}

// ---- Import-time constants -------------------------------------------------------------------

void lower_shape(LowerContext& ctx) {
  const Value& x = ctx.input(0);
  const int rank = x.rank();
  int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<double> dims;
  for (int64_t d = start; d < end; ++d) dims.push_back(static_cast<double>(x.shape()[d]));
  const int64_t n = static_cast<int64_t>(dims.size());
  ctx.set_output(0, ctx.constant(HostTensor(TensorType{DType::i64, {n}}, dims)));
}

void lower_size(LowerContext& ctx) {
  ctx.set_output(0, ctx.constant(scalar_tensor(static_cast<double>(ctx.input(0).type.num_elements()), DType::i64)));
}

void lower_constant(LowerContext& ctx) {
  if (const HostTensor* t = ctx.attr_tensor("value")) {
    ctx.set_output(0, ctx.constant(*t));
  } else if (ctx.has_attr("value_float")) {
    ctx.set_output(0, ctx.constant(scalar_tensor(ctx.attr_float("value_float", 0), DType::f32)));
  } else if (ctx.has_attr("value_int")) {
    ctx.set_output(0, ctx.constant(HostTensor::from_integers(TensorType{DType::i64, {}}, std::vector<int64_t>{ctx.attr_int("value_int", 0)})));
  } else if (ctx.has_attr("value_floats")) {
    const auto v = ctx.attr_floats("value_floats");
    ctx.set_output(0, ctx.constant(HostTensor(TensorType{DType::f32, {static_cast<int64_t>(v.size())}}, v)));
  } else if (ctx.has_attr("value_ints")) {
    const auto v = ctx.attr_ints("value_ints");
    ctx.set_output(0, ctx.constant(HostTensor::from_integers(TensorType{DType::i64, {static_cast<int64_t>(v.size())}}, v)));
  } else {
    ctx.unsupported("Constant without a value, value_float(s) or value_int(s) attribute");
  }
}

void lower_constant_of_shape(LowerContext& ctx) {
  const std::vector<int64_t> shape = ctx.constant_ints(0, "shape");
  for (int64_t d : shape)
    if (d < 0) ctx.fail(cat("shape has a negative extent ", d));
  Scalar value;
  DType dtype = DType::f32;
  if (const HostTensor* t = ctx.attr_tensor("value")) {
    if (t->size() != 1) ctx.fail(cat("attribute 'value' must hold one element, holds ", t->size()));
    value = element_scalar(*t);
    dtype = t->dtype();
  }
  NodeSpec spec;
  spec.axes = spatial_axes(shape);
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0; })) {
    ctx.set_output(0, ctx.constant(HostTensor(TensorType{dtype, shape})));
    return;
  }
  spec.body = constant(value, dtype);
  ctx.set_output(0, ctx.emit(std::move(spec), {}));
}

}  // namespace

void register_shape_ops(OpTable& t) {
  t["Transpose"] = lower_transpose;
  t["Reshape"] = lower_reshape;
  t["Flatten"] = lower_flatten;
  t["Squeeze"] = lower_squeeze;
  t["Unsqueeze"] = lower_unsqueeze;
  t["Expand"] = lower_expand;
  t["DepthToSpace"] = lower_depth_to_space_op;
  t["SpaceToDepth"] = lower_space_to_depth_op;
  t["Concat"] = lower_concat;
  t["Split"] = lower_split;
  t["Slice"] = lower_slice;
  t["Pad"] = lower_pad;
  t["Tile"] = lower_tile;
  t["Gather"] = lower_gather;
  t["GatherElements"] = lower_gather_elements;
  t["OneHot"] = lower_one_hot;
  t["Trilu"] = lower_trilu;
  t["EyeLike"] = lower_eye_like;
  t["CumSum"] = lower_cumsum;
  t["Range"] = lower_range;
  t["Einsum"] = lower_einsum;
  t["Shape"] = lower_shape;
  t["Size"] = lower_size;
  t["Constant"] = lower_constant;
  t["ConstantOfShape"] = lower_constant_of_shape;
}

}  // namespace tessel
