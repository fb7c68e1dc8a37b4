// Shared lowering building blocks (see common.h).
#include "tilegraph/ops/common.h"

#include <algorithm>

namespace tessel {

int normalize_axis(const LowerContext& ctx, int64_t axis, int rank, const char* what) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.fail(cat(what, " ", axis, " is out of range for rank ", rank));
  return static_cast<int>(a);
}

std::vector<int64_t> broadcast_shapes(const LowerContext& ctx,
                                      const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const auto& t : shapes) list += TensorType{DType::f32, t}.print().substr(3) + " ";
      ctx.fail(cat("shapes cannot be broadcast together: ", list));
    }
  }
  return out;
}

std::vector<Axis> spatial_axes(const std::vector<int64_t>& shape, const std::string& prefix) {
  std::vector<Axis> axes;
  for (size_t i = 0; i < shape.size(); ++i) axes.push_back({cat(prefix, i), shape[i], AxisKind::spatial});
  return axes;
}

Access broadcast_access(const TensorType& type, int num_axes, const std::vector<int64_t>& out_shape) {
  const int out_rank = static_cast<int>(out_shape.size());
  const int lead = out_rank - type.rank();
  std::vector<int> axes;
  for (int d = 0; d < type.rank(); ++d) {
    const bool broadcast = type.shape[d] == 1 && out_shape[lead + d] != 1;
    axes.push_back(broadcast ? -1 : lead + d);
  }
  return Access{type, AffineMap::select_axes(num_axes, axes)};
}

void require_same_dtype(const LowerContext& ctx, const std::vector<Value>& values) {
  for (const Value& v : values)
    if (v.dtype() != values[0].dtype()) {
      std::string list;
      for (const Value& w : values) list += cat(list.empty() ? "" : ", ", dtype_name(w.dtype()));
      ctx.fail(cat("inputs must have the same dtype, got ", list));
    }
}

Value elementwise(LowerContext& ctx, const std::vector<Value>& inputs, const BodyFn& body,
                  const std::string& suffix) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Value& v : inputs) shapes.push_back(v.shape());
  const std::vector<int64_t> out_shape = broadcast_shapes(ctx, shapes);
  NodeSpec spec;
  spec.axes = spatial_axes(out_shape);
  std::vector<Expr> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    spec.inputs.push_back(broadcast_access(inputs[i].type, static_cast<int>(out_shape.size()), out_shape));
    leaves.push_back(input(static_cast<int>(i), inputs[i].dtype()));
  }
  spec.body = body(leaves);
  return ctx.emit(std::move(spec), inputs, suffix);
}

Value cast_value(LowerContext& ctx, const Value& v, DType dtype, const std::string& suffix) {
  if (v.dtype() == dtype) return v;
  return elementwise(ctx, {v}, [&](const std::vector<Expr>& in) { return cast(in[0], dtype); }, suffix);
}

Value reshape_value(LowerContext& ctx, const Value& v, const std::vector<int64_t>& shape,
                    const std::string& suffix) {
  if (v.shape() == shape) return v;
  NodeSpec spec;
  spec.axes = spatial_axes(v.shape());
  spec.inputs.push_back(Access{v.type, AffineMap::select_axes(v.rank(), [&] {
                                 std::vector<int> a(v.rank());
                                 for (int i = 0; i < v.rank(); ++i) a[i] = i;
                                 return a;
                               }())});
  spec.body = input(0, v.dtype());
  spec.output_shape = shape;
  return ctx.emit(std::move(spec), {v}, suffix);
}

Value transpose_value(LowerContext& ctx, const Value& v, const std::vector<int>& perm,
                      const std::string& suffix) {
  std::vector<int64_t> out_shape;
  for (int p : perm) out_shape.push_back(v.shape()[p]);
  // Input dim perm[k] is read at output axis k.
  std::vector<int> axes(v.rank());
  for (int k = 0; k < v.rank(); ++k) axes[perm[k]] = k;
  NodeSpec spec;
  spec.axes = spatial_axes(out_shape);
  spec.inputs.push_back(Access{v.type, AffineMap::select_axes(v.rank(), axes)});
  spec.body = input(0, v.dtype());
  return ctx.emit(std::move(spec), {v}, suffix);
}

double combiner_identity(Combiner combiner, DType dtype) {
  switch (combiner) {
    case Combiner::sum: return 0;
    case Combiner::prod: return 1;
    case Combiner::max: return dtype_lowest(dtype);
    case Combiner::min: return dtype_highest(dtype);
    case Combiner::none: return 0;
  }
  return 0;
}

Value reduce_values(LowerContext& ctx, const std::vector<Value>& ins, const std::vector<int>& axes,
                    bool keepdims, Combiner combiner, const BodyFn& body, const std::string& suffix) {
  const Value& x = ins[0];
  const int rank = x.rank();
  std::vector<bool> reduced(rank, false);
  for (int a : axes) {
    TESSEL_ASSERT(a >= 0 && a < rank, "reduction axis ", a, " out of range for rank ", rank);
    reduced[a] = true;
  }
  std::vector<int64_t> kept_shape, out_shape;
  bool empty = false;
  for (int d = 0; d < rank; ++d) {
    kept_shape.push_back(reduced[d] ? 1 : x.shape()[d]);
    if (!reduced[d] || keepdims) out_shape.push_back(kept_shape.back());
    empty |= reduced[d] && x.shape()[d] == 0;
  }
  std::vector<Expr> leaves;
  for (size_t i = 0; i < ins.size(); ++i) leaves.push_back(input(static_cast<int>(i), ins[i].dtype()));
  const DType body_dtype = body(leaves).dtype();
  const double init = combiner_identity(combiner, body_dtype);
  NodeSpec spec;
  spec.axes = spatial_axes(kept_shape);
  spec.output_shape = out_shape;
  if (empty || axes.empty()) {
    if (empty) {  // reducing an empty set gives the identity everywhere
      spec.body = constant(init, body_dtype);
      return ctx.emit(std::move(spec), {}, suffix);
    }
  }
  std::vector<int> full_axes(rank);
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      full_axes[d] = static_cast<int>(spec.axes.size());
      spec.axes.push_back({cat("r", d), x.shape()[d], AxisKind::reduction});
    } else {
      full_axes[d] = d;
    }
  }
  const int na = static_cast<int>(spec.axes.size());
  for (const Value& v : ins) {
    if (v.shape() == x.shape()) {
      spec.inputs.push_back(Access{v.type, AffineMap::select_axes(na, full_axes)});
    } else {
      if (broadcast_shapes(ctx, {v.shape(), kept_shape}) != kept_shape)
        ctx.fail(cat("cannot read ", v.type.print(), " against a reduction of ", x.type.print()));
      spec.inputs.push_back(broadcast_access(v.type, na, kept_shape));
    }
  }
  spec.body = body(leaves);
  spec.combiner = axes.empty() ? Combiner::none : combiner;
  spec.init = init;
  return ctx.emit(std::move(spec), ins, suffix);
}

Value reduce_value(LowerContext& ctx, const Value& x, const std::vector<int>& axes, bool keepdims,
                   Combiner combiner, const std::function<Expr(Expr)>& body,
                   const std::string& suffix) {
  return reduce_values(ctx, {x}, axes, keepdims, combiner,
                       [&](const std::vector<Expr>& in) { return body(in[0]); }, suffix);
}

HostTensor scalar_tensor(double value, DType dtype) {
  return HostTensor(TensorType{dtype, {}}, {value});
}

DType dtype_from_onnx(const LowerContext& ctx, int64_t code) {
  switch (code) {
    case 1: return DType::f32;
    case 2: return DType::u8;
    case 3: return DType::i8;
    case 6: return DType::i32;
    case 7: return DType::i64;
    case 9: return DType::boolean;
    case 10: return DType::f16;
    case 11: return DType::f64;
    case 16: return DType::bf16;
    default: ctx.unsupported(cat("element type code ", code, " is not supported"));
  }
}

}  // namespace tessel
