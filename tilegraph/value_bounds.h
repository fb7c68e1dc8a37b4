// Value bounds: what a tensor's elements can be over a box of its indices, known at compile time.
//
// Interval arithmetic over the graph: a weight is scanned over the box (one given by random
// values is generated once, when it has at most kMaxScan elements); a node without
// reduction axes (and without a reshaped output) is bounded by evaluating its body over the box of
// its domain -- index arithmetic (axis_index) gives the range of the box, a comparison is known
// true or false where its operands' ranges do not overlap, a select with a known condition takes
// one side -- reading its inputs' bounds over the image of the box under each access map, plus the
// pad value where that image leaves the tensor. Model inputs, reductions and gathers are unknown
// (the whole line) unless the caller assumes a range for the tensor. Each value is rounded to its
// node's dtype like the interpreter (rounding to nearest is monotone, so bounds stay bounds).
//
// Used to find the keys an attention mask excludes (attention_pattern.h's key ranges): a causal
// mask built by Trilu of a constant, a constant mask tensor, or index comparisons bound to a large
// negative number above the diagonal, and so prove which key chunks a block of query rows can skip.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "tilegraph/op_graph.h"

namespace tessel {

/// A closed range [lo, hi] of doubles; +-infinity for an unbounded side. A boolean value is 0 or 1.
struct Interval {
  double lo = 0, hi = 0;
  static Interval all();
  static Interval point(double v) { return {v, v}; }
  bool known() const;  // a bounded range
};

/// A box of points: inclusive [lo[i], hi[i]] per dimension.
struct IndexBox {
  std::vector<int64_t> lo, hi;
  int64_t points() const;
};

class ValueBounds {
 public:
  explicit ValueBounds(const OpGraph& graph);
  ~ValueBounds();
  ValueBounds(const ValueBounds&) = delete;
  ValueBounds& operator=(const ValueBounds&) = delete;

  /// Every element of `t` is taken to lie in `range` (a reduction whose result the caller can
  /// bound, a model input with a known range).
  void assume(TensorId t, Interval range);
  /// Bounds of t's elements over `box` (of t's indices, inside its shape).
  Interval tensor(TensorId t, const IndexBox& box) const;
  /// Bounds of node n's body over `box` (of its spatial axes), rounded to its dtype; the whole
  /// line for a node with reduction axes.
  Interval node(NodeId n, const IndexBox& box) const;
  /// Bounds of what node n reads through its input k over `box` (of its domain): the tensor over
  /// the image of the box under the access map, and the pad value where the image leaves it.
  Interval input(NodeId n, int k, const IndexBox& box) const;

  /// Elements of a weight scanned per query at most (larger boxes of a weight are unknown).
  static constexpr int64_t kMaxScan = int64_t{1} << 22;

 private:
  const OpGraph& graph_;
  std::map<TensorId, Interval> assumed_;
  mutable std::map<TensorId, std::shared_ptr<const HostTensor>> data_;
};

}  // namespace tessel
