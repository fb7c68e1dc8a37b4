// Building blocks shared by the operator families: NumPy broadcasting, elementwise nodes,
// reductions, casts, reshapes and transposes, each producing one tensor-expression node.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tilegraph/ops/lower_context.h"

namespace tessel {

/// Normalizes a possibly negative axis into [0, rank); UserError naming `what` otherwise.
int normalize_axis(const LowerContext& ctx, int64_t axis, int rank, const char* what);

/// NumPy broadcast of several shapes; UserError naming both shapes on a mismatch.
std::vector<int64_t> broadcast_shapes(const LowerContext& ctx,
                                      const std::vector<std::vector<int64_t>>& shapes);

/// Spatial axes d0, d1, ... over `shape`.
std::vector<Axis> spatial_axes(const std::vector<int64_t>& shape, const std::string& prefix = "d");

/// An access reading `type` broadcast into the first `out_rank` axes of a `num_axes`-axis
/// domain (dimensions aligned from the right; a size-1 dimension reads index 0).
Access broadcast_access(const TensorType& type, int num_axes, const std::vector<int64_t>& out_shape);

using BodyFn = std::function<Expr(const std::vector<Expr>& inputs)>;

/// out = body(inputs...) with NumPy broadcasting over all inputs.
Value elementwise(LowerContext& ctx, const std::vector<Value>& inputs, const BodyFn& body,
                  const std::string& suffix = "");

/// Same dtype for all inputs, or a UserError listing them.
void require_same_dtype(const LowerContext& ctx, const std::vector<Value>& values);

/// Casts to `dtype` (returns `v` unchanged when it already has that dtype).
Value cast_value(LowerContext& ctx, const Value& v, DType dtype, const std::string& suffix = "cast");

/// Row-major reinterpretation with the same element count.
Value reshape_value(LowerContext& ctx, const Value& v, const std::vector<int64_t>& shape,
                    const std::string& suffix = "reshape");

/// out[i_perm...] = in[...]: output dim k is input dim perm[k].
Value transpose_value(LowerContext& ctx, const Value& v, const std::vector<int>& perm,
                      const std::string& suffix = "transpose");

/// Reduces over `axes` (normalized) of ins[0]: out = combine over axes of body(ins...).
/// Every other input either has ins[0]'s shape (read like it) or broadcasts against the
/// keepdims-shaped result (e.g. a row maximum). The result keeps reduced dims as size 1 when
/// `keepdims`. Reducing an empty dimension gives the combiner's identity.
Value reduce_values(LowerContext& ctx, const std::vector<Value>& ins, const std::vector<int>& axes,
                    bool keepdims, Combiner combiner, const BodyFn& body,
                    const std::string& suffix = "");
Value reduce_value(LowerContext& ctx, const Value& x, const std::vector<int>& axes, bool keepdims,
                   Combiner combiner, const std::function<Expr(Expr)>& body,
                   const std::string& suffix = "");

/// The identity of a combiner for values of `dtype`.
double combiner_identity(Combiner combiner, DType dtype);

/// A rank-0 constant.
HostTensor scalar_tensor(double value, DType dtype);

/// ONNX TensorProto.DataType code -> DType (UnsupportedError for codes Tessel lacks).
DType dtype_from_onnx(const LowerContext& ctx, int64_t code);

}  // namespace tessel
