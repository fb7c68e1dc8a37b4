// Tile propagation (DESIGN.md, "Tile propagation"): which elements of each input a tile of a node
// reads, and -- backwards through a fused group -- which region of its output every producer must
// compute so that the group's sink can compute one of its tiles. It is the one analysis that owns
// tile shapes across producer-consumer edges; the policies, the traffic formulas (tile_traffic.h)
// and the cost model call it directly.
//
// Regions are exact per tensor dimension: a dimension's index is `sum_a c_a * axis_a + offset`, so
// over a box of the domain it takes the values of a sumset of arithmetic progressions, which we
// keep as a sorted list of disjoint intervals (a stride-2 read touches every other element, a
// dilated kernel leaves holes, a convolution tile has a halo). Reads outside [0, shape) yield the
// access's pad value and touch no memory, so regions are clamped to the tensor.
//
// Example: conv2d with stride 2, padding 1, kernel 3: x row index = 2*oh + kh - 1. The tile
// oh in [0, 4), kh in [0, 3) reads rows {-1..7} clamped to [0, 8): the IndexSet [0, 8).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilegraph/op_graph.h"

namespace tessel {

/// Half-open interval of indices [begin, end); non-empty inside an IndexSet.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const Interval&) const = default;
};

/// An exact set of indices along one tensor dimension. Invariant: intervals are non-empty, sorted,
/// and separated by at least one missing index (adjacent intervals are merged), so two equal sets
/// have equal representations.
struct IndexSet {
  std::vector<Interval> intervals;

  /// [begin, end) (empty if end <= begin).
  static IndexSet range(int64_t begin, int64_t end);
  /// Builds the canonical set from any list of intervals (unsorted, overlapping, empty ones ok).
  static IndexSet from_intervals(std::vector<Interval> intervals);

  bool empty() const { return intervals.empty(); }
  /// Smallest index; the set must not be empty (InternalError).
  int64_t lo() const;
  /// One past the largest index; the set must not be empty (InternalError).
  int64_t hi() const;
  /// Number of indices in the set.
  int64_t count() const;
  bool contains(int64_t index) const;
  /// The set restricted to [begin, end).
  IndexSet clamp(int64_t begin, int64_t end) const;
  /// "[0,8)" or "{[0,1) [2,3) [4,5)}" for several intervals, "{}" when empty.
  std::string print() const;
  bool operator==(const IndexSet&) const = default;
};

/// Union of two sets (exact).
IndexSet unite(const IndexSet& a, const IndexSet& b);

/// A region of a tensor: the product of one IndexSet per tensor dimension.
///
/// Exactness: input_region gives exactly the set of in-range elements a tile reads when each
/// tensor dimension's affine row uses axes that no other row of the same access uses (true for
/// every access Tessel's operator library builds except a diagonal-style read). When two rows
/// share an axis, e.g. x[i, i], the region is the product of the per-dimension sets, a superset
/// (the tile i in [0, 4) reads 4 diagonal elements; the region holds the 4x4 box).
///
/// Canonical form: if any dimension is empty the region is empty and then every dimension is
/// empty, so equal sets compare equal. A rank-0 tensor's region has no dimensions and always holds
/// its one element (it cannot express "empty"; see input_region).
struct Region {
  std::vector<IndexSet> dims;

  int rank() const { return static_cast<int>(dims.size()); }
  /// True if the region holds no element.
  bool empty() const;
  /// "[0,4) x {[0,1) [2,3)}"; "scalar" for rank 0, "empty" when empty.
  std::string print() const;
  bool operator==(const Region&) const = default;
};

/// Number of elements: the product of the per-dimension counts (1 for a rank-0 region).
int64_t num_elements(const Region& region);

/// The smallest box (one interval per dimension) containing the region.
Region bounding_box(const Region& region);

/// Per-dimension union. The union of two products is over-approximated by the product of the
/// unions: {0}x{0} u {1}x{1} gives {0,1}x{0,1}. Exact when the two regions differ in at most one
/// dimension (e.g. two tiles of a row) or one contains the other. Ranks must match.
Region unite(const Region& a, const Region& b);

/// The region of `shape` holding every element.
Region full_region(const std::vector<int64_t>& shape);

/// A box of a node's iteration domain, over ALL axes (spatial then reduction).
struct DomainTile {
  std::vector<int64_t> begin;
  std::vector<int64_t> extent;

  /// The whole domain of `node`.
  static DomainTile whole(const TeNode& node);
  /// True if any extent is 0 (the tile has no points).
  bool empty() const;
  /// "[0:64, 0:64 | 0:32]" (begin:end per axis, '|' before the reduction axes when `num_spatial`
  /// is given, i.e. >= 0).
  std::string print(int num_spatial = -1) const;
  bool operator==(const DomainTile&) const = default;
};

/// The exact set of in-range elements of input `input` that `node` reads over `tile`: per tensor
/// dimension, the sumset of {c_a * t : t in [begin_a, begin_a + extent_a)} over the axes plus the
/// offset, intersected with [0, shape). An empty tile reads nothing. A gather access's gathered
/// dimension is its full extent (the index is data, so every row may be read; DESIGN.md). A
/// rank-0 input's region is its one element (also for an empty tile, conservatively).
Region input_region(const TeNode& node, int input, const DomainTile& tile);

/// What `tile` reads of input `input`, for traffic and footprints: input_region, except that a
/// gather access's gathered dimension counts at most as many rows as the tile reads index values
/// (an embedding lookup of 8 tokens reads 8 rows of the table, not all of them). The count stands
/// in as the first rows of that dimension: the region is for sizes, not for addresses.
Region read_region(const TeNode& node, int input, const DomainTile& tile);

/// Marker for tile_for_output's `reduction_step`: the whole reduction axis in one step.
inline constexpr int64_t kWholeAxis = -1;

/// The domain tile computing the output box `out_begin`, `out_extent` (one entry per SPATIAL axis)
/// with the first `reduction_step[r]` iterations of each reduction axis -- one step of the
/// reduction loop, which is the unit a tile's inputs are staged in. `reduction_step` is empty, or
/// kWholeAxis per entry, for the whole reduction. Spatial and reduction extents are clamped to the
/// domain (a tile rounded up past the border is masked off).
DomainTile tile_for_output(const TeNode& node, const std::vector<int64_t>& out_begin,
                           const std::vector<int64_t>& out_extent,
                           const std::vector<int64_t>& reduction_step = {});

/// What one node of a fused group computes for one tile of the group's sink.
struct NodeTile {
  NodeId node = -1;
  /// The elements of the node's output tensor (in its output_shape coordinates) that consumers
  /// inside the group read: the union over those consumers (Region union semantics). For the sink,
  /// the elements of its tile.
  Region output;
  /// The domain tile the node evaluates. For the sink: the tile passed in. For a producer: the
  /// smallest spatial box covering `output` (a strided consumer makes it compute the whole box)
  /// and the whole reduction (intermediate values must be final).
  DomainTile tile;
  /// Per node input, the region `tile` reads (input_region).
  std::vector<Region> inputs;
  /// Human-readable remarks, e.g. a reinterpreted output computed over an enclosing box.
  std::vector<std::string> notes;
};

/// Result of propagate_group: on success `nodes` holds one entry per group node in topological
/// order (the sink last); on failure `reason` says why and `nodes` is empty.
struct GroupPropagation {
  bool ok = false;
  std::string reason;
  std::vector<NodeTile> nodes;

  /// The entry of node `n`, or nullptr if `n` is not in the group.
  const NodeTile* find(NodeId n) const;
};

/// Propagates `sink_tile` (a domain tile of `sink`) backwards through the fused `group`: each
/// producer in the group must compute the union of what its in-group consumers read (a producer
/// feeding two consumers takes the union). Tensors produced outside the group are the group's
/// inputs and are not followed.
///
/// Output reinterpretation (a node whose output_shape differs from its spatial extents, e.g.
/// Reshape): the required output region is mapped to the node's spatial domain through the
/// row-major linear index. If it is not a box there (e.g. rows 0..1 of a [4,6] view of a [24]
/// domain are one box [0,12); but column 0 of a [4,6] view of a [2,12] domain is not), the node
/// computes the smallest enclosing box and a note says so, with the extra elements.
///
/// Fails (ok = false, with the reason) when: the group is empty, a node id is not in the graph or
/// appears twice, the sink is not in the group, the tile does not fit the sink's domain, or a
/// group node has no path to the sink inside the group.
GroupPropagation propagate_group(const OpGraph& graph, const std::vector<NodeId>& group,
                                 NodeId sink, const DomainTile& sink_tile);

/// Result of check_grid.
struct GridCheck {
  bool ok = false;
  std::string reason;  // why the group cannot share the sink's grid (empty when ok)
  std::vector<int64_t> grid;  // tiles along each spatial axis of the sink
  int64_t num_tiles = 0;      // product of grid
};

/// Checks that every node of `group` agrees with the grid of tiles the sink's spatial tile
/// `sink_tile_extent` (one entry per spatial axis of the sink; the reduction is whole) induces:
///  1. propagation of the sink's tiles succeeds (see propagate_group);
///  2. distinct sink tiles map to distinct tiles of every node: if two neighbouring sink tiles
///     along an axis need the same tile of a node, that node would be recomputed by every tile
///     along the axis. Example: softmax's row max feeding an elementwise node tiled along the
///     reduced axis -- legal only when the tile covers the whole row;
///  3. a node whose output is also used outside the group (or is a graph output) is computed
///     completely: the propagation of the whole sink domain covers its whole output.
/// Returns the grid even when the check fails.
GridCheck check_grid(const OpGraph& graph, const std::vector<NodeId>& group, NodeId sink,
                     const std::vector<int64_t>& sink_tile_extent);

}  // namespace tessel
