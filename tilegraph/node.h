// The tensor-expression node: Tessel's unit of computation (DESIGN.md, "Core abstractions").
//
//   out[spatial axes] = combine over reduction axes of body(in0[map0(axes)], in1[map1(axes)], ...)
//
// A node has an iteration domain of named axes with static extents (spatial axes first, then
// reduction axes; a spatial extent may be 0, a reduction extent may not), one output, inputs read
// through affine maps (an out-of-range read yields the access's pad value), a scalar body, and
// -- when it has reduction axes -- a combiner with an init value. Pad and init values are Scalars
// (scalar.h) held as values of their dtype: exact integers for an integer dtype. The output holds
// one element per point of the spatial axes in row-major order; its shape may be any reshaping of
// that (same element count), which is how Reshape and grouped convolution stay affine. A gather
// access (embedding lookup) replaces one affine index with the value of another input: it is the
// only non-affine read and is marked as such.
//
// Nodes are immutable and built only through `make_node`, which runs the verifier.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tilegraph/affine_map.h"
#include "tilegraph/dtype.h"
#include "tilegraph/expr.h"
#include "tilegraph/scalar.h"

namespace tessel {

struct TensorType {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;

  int64_t num_elements() const;
  int rank() const { return static_cast<int>(shape.size()); }
  std::string print() const;  // "f32[2,128,768]"
  bool operator==(const TensorType&) const = default;
};

enum class AxisKind : uint8_t { spatial, reduction };

struct Axis {
  std::string name;
  int64_t extent = 1;
  AxisKind kind = AxisKind::spatial;
};

enum class Combiner : uint8_t { none, sum, prod, max, min };
std::string_view combiner_name(Combiner c);
/// `acc` combined with `v` (a NaN wins max and min; none: `v`). The interpreter's reductions and
/// the combining of partial results across devices use it, so both agree.
inline double combine_values(Combiner c, double acc, double v) {
  switch (c) {
    case Combiner::sum: return acc + v;
    case Combiner::prod: return acc * v;
    case Combiner::max: return (v > acc || v != v) ? v : acc;
    case Combiner::min: return (v < acc || v != v) ? v : acc;
    case Combiner::none: return v;
  }
  return v;
}
/// The same on exact integers: sum and prod wrap modulo 2^64, which narrowed to an integer dtype
/// afterwards (wrap_integer) is what wrapping at the dtype's width after every step gives.
inline int64_t combine_integers(Combiner c, int64_t acc, int64_t v) {
  switch (c) {
    case Combiner::sum: return static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
    case Combiner::prod: return static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
    case Combiner::max: return v > acc ? v : acc;
    case Combiner::min: return v < acc ? v : acc;
    case Combiner::none: return v;
  }
  return v;
}

/// How a node reads one input.
struct Access {
  TensorType type;     // the tensor read (shape and dtype)
  AffineMap map;       // domain -> tensor index; map.num_results() == type.rank()
  Scalar pad_value = 0.0;  // value of a read outside [0, shape); make_node rounds it to type.dtype
  /// Gather: if >= 0, the index along this dimension is the value of input `gather_index_input`
  /// (negative values count from the end) instead of map.result(gather_dim).
  int gather_dim = -1;
  int gather_index_input = -1;

  bool is_gather() const { return gather_dim >= 0; }
};

/// Everything needed to build a node; passed to make_node.
struct NodeSpec {
  std::string name;
  std::vector<Axis> axes;  // spatial axes first, then reduction axes
  std::vector<Access> inputs;
  Expr body;
  Combiner combiner = Combiner::none;
  Scalar init = 0.0;  // combiner identity; ignored without reduction axes; make_node rounds it to the body's dtype
  /// Output shape; empty means the extents of the spatial axes. Must match their element count.
  std::optional<std::vector<int64_t>> output_shape;
};

class TeNode {
 public:
  const std::string& name() const { return spec_.name; }
  const std::vector<Axis>& axes() const { return spec_.axes; }
  int num_axes() const { return static_cast<int>(spec_.axes.size()); }
  int num_spatial() const { return num_spatial_; }
  int num_reduction() const { return num_axes() - num_spatial_; }
  const std::vector<Access>& inputs() const { return spec_.inputs; }
  const Expr& body() const { return spec_.body; }
  Combiner combiner() const { return spec_.combiner; }
  const Scalar& init() const { return spec_.init; }
  const TensorType& output() const { return output_; }
  std::vector<int64_t> extents() const;
  std::vector<std::string> axis_names() const;

  /// Multiply-adds or elementwise operations per point, summed over the domain (for `inspect`).
  int64_t flops() const;

 private:
  friend std::shared_ptr<const TeNode> make_node(NodeSpec spec);
  TeNode() = default;
  NodeSpec spec_;
  int num_spatial_ = 0;
  TensorType output_;
};

using NodeRef = std::shared_ptr<const TeNode>;

/// Checks the invariants listed in this header; returns the first violation, or nullopt.
std::optional<std::string> verify_spec(const NodeSpec& spec);

/// Builds an immutable node. Raises InternalError if verify_spec fails (lowering must only build
/// valid nodes; bad user input is rejected before, with a UserError). Each pad value is rounded to
/// its access's dtype and the init to the body's (round_to), so an integer one is an exact integer.
NodeRef make_node(NodeSpec spec);

/// The node laying `parts` one after another along dimension `axis` (same rank and dtype, equal
/// outside `axis`, each non-empty along it): spatial axes d0, d1, ... over the joined shape, input k
/// read at an offset of the parts before it, the body selecting the part by the axis's value.
/// Lowering's Concat and the partitioner's join of overlapped pieces (tilegraph/spmd.cpp).
NodeSpec concat_spec(const std::vector<TensorType>& parts, int axis);

/// Stable multi-line text of a node (used by tests and `--dump`). Input names are the graph's
/// tensor names; pass an empty vector to print in0, in1, ...
std::string print_node(const TeNode& node, const std::vector<std::string>& input_names,
                       const std::string& output_name);

}  // namespace tessel
