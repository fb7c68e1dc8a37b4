// Tensors and nodes spread over a device mesh (docs/distributed.md; DESIGN.md, "Tile kind":
// `sharded`).
//
// A mesh is a grid of devices (`{2}`, `{2, 4}`); device `rank` sits at the row-major coordinates
// of its number. Along each mesh axis a tensor is in one of three layouts:
//   replicate     every device of the axis holds the whole tensor (in the other axes' layouts)
//   shard(d)      dimension d is cut into equal contiguous pieces, piece i on the axis's device i
//   partial(op)   every device holds a partial result; combining them with op gives the tensor
// A node is sharded by naming, per mesh axis, the loop axis of its iteration domain that is split
// (or none: every device of that mesh axis computes the whole node). What that implies follows
// from the node's affine accesses alone -- the same propagation as tiles use (tile_propagation.h):
// an input dimension read exactly by the split axis must be sharded the same way, an input that
// does not depend on it is replicated, the output is sharded along the split axis when it is a
// spatial axis and partial when it is a reduction axis. Where the layout a producer made differs
// from the one a consumer needs, a conversion runs (conversion_steps): an all-gather, an
// all-reduce, a reduce-scatter, an all-to-all, or a local slice that needs no communication.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tilegraph/node.h"
#include "tilegraph/tile_kind_props.h"

namespace tessel {

/// A grid of devices. `axis_names` default to "m0", "m1", ...
struct Mesh {
  std::vector<int64_t> shape;
  std::vector<std::string> axis_names;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t devices() const;
  /// The coordinates of device `device` (row-major), and back.
  std::vector<int64_t> coords(int64_t device) const;
  int64_t device_at(const std::vector<int64_t>& coords) const;
  /// The devices that differ from `device` only along `axis`, in axis order (`device` among them).
  std::vector<int64_t> group(int64_t device, int axis) const;
  /// Distance in device numbers between neighbours along `axis` (row-major stride).
  int64_t stride(int axis) const;
  std::string print() const;  // "2x4 (dp, tp)"
  bool operator==(const Mesh&) const = default;
};

/// "2", "2x4", or "dp=2,tp=4" (named axes); UserError naming `what` otherwise.
Mesh parse_mesh(const std::string& text, const std::string& what);

/// The layout of a tensor along one mesh axis.
struct AxisLayout {
  enum class Kind : uint8_t { replicate, shard, partial };
  Kind kind = Kind::replicate;
  int dim = -1;                     // shard: the tensor dimension cut
  Combiner op = Combiner::none;     // partial: how the pieces combine

  static AxisLayout replicated() { return {}; }
  static AxisLayout sharded(int dim) { return {Kind::shard, dim, Combiner::none}; }
  static AxisLayout partial_of(Combiner op) { return {Kind::partial, -1, op}; }
  bool operator==(const AxisLayout&) const = default;
};

/// One AxisLayout per mesh axis.
using TensorLayout = std::vector<AxisLayout>;

/// "R", "S(1)", "P(sum)" per mesh axis, joined: "[S(0), R]".
std::string print_layout(const TensorLayout& layout);
/// Every device replicates.
TensorLayout replicated_layout(const Mesh& mesh);
/// The shape each device holds of a tensor of `shape` in `layout` (sharded dimensions divided).
std::vector<int64_t> local_shape(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh);
/// Whether `layout` can hold a tensor of `shape` on `mesh`: sharded dimensions exist and divide
/// evenly, no dimension is sharded by two mesh axes. The reason otherwise.
std::optional<std::string> check_layout(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh);
/// The element offsets of device `device`'s piece of a tensor of `shape` in `layout`.
std::vector<int64_t> local_origin(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh,
                                  int64_t device);

/// Per mesh axis, the loop axis of a node's domain that is split over it, or -1.
struct NodeSharding {
  std::vector<int> split;
  bool operator==(const NodeSharding&) const = default;
};

/// What sharding a node implies: the layout each input must be in and the layout of the output.
struct ShardedNode {
  std::vector<TensorLayout> inputs;
  TensorLayout output;
};

/// The layouts `sharding` implies for `node`, or why it cannot be split that way (a split axis
/// that does not divide evenly, an input read through a window or an offset along it, a gather
/// along it, an output reshaped across it, a reduction whose combiner has no collective).
std::variant<ShardedNode, std::string> shard_node(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh);

/// The node every device runs for `node` split as `sharding` (legal per shard_node): the split
/// axes shortened, the output shape divided likewise.
NodeRef local_node(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh);

/// One step turning a tensor from one layout into another along one mesh axis.
struct LayoutStep {
  enum class Kind : uint8_t { collective, slice };
  Kind kind = Kind::collective;
  int mesh_axis = 0;
  Collective collective = Collective::none;  // collective: which
  Combiner op = Combiner::none;              // all_reduce / reduce_scatter: the combiner
  int dim = -1;        // all_gather: the dimension gathered; reduce_scatter, slice: the one cut
  int to_dim = -1;     // all_to_all: gathered along `dim`, cut along `to_dim`
  bool operator==(const LayoutStep&) const = default;
};

/// The steps that turn a tensor in layout `from` into layout `to` (empty when equal), one mesh
/// axis after another; nullopt when no step can (nothing produces a partial layout).
std::optional<std::vector<LayoutStep>> conversion_steps(const TensorLayout& from, const TensorLayout& to);

/// The layout `layout` is in after `step`.
TensorLayout after_step(const TensorLayout& layout, const LayoutStep& step);

/// Of the layouts a tensor is held in, the one that reaches `to` with the fewest collectives (the
/// first on ties) and its steps; nullopt when none does. What the partitioner runs and the plan
/// search prices.
struct Conversion {
  size_t from = 0;  // index into the held layouts
  std::vector<LayoutStep> steps;
};
std::optional<Conversion> cheapest_conversion(const std::vector<TensorLayout>& held, const TensorLayout& to);

/// "all_gather(m0, dim 1)", "slice(m1, dim 0)", ...
std::string print_step(const LayoutStep& step, const Mesh& mesh);

}  // namespace tessel
