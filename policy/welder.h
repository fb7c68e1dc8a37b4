// The welder policy (Welder, OSDI'23): graph connecting. Start from roller's best single-operator
// schedule (one group per node), then visit every producer -> consumer edge in topological order
// and try to merge the producer's group into the consumer's group with the intermediate tensor at
// each on-chip memory level the spec lets software manage ("registers" for elementwise-compatible
// tiles, "smem" for anything needing another thread mapping or a reduction in between). A merge
// is kept only when the cost model predicts the fused kernel faster than the two kernels apart.
//
// For one candidate merge: take a sink tile (the sink's top roller candidates, and those of the
// group's heaviest node when it shares the sink's spatial domain), check that the whole group
// shares the sink's grid (check_grid; when it does not, try the tile widened to a whole axis --
// e.g. a whole softmax row -- before giving up), propagate the tile through the group
// (propagate_group) to get every node's tile, price the group, and keep the fastest. Every edge
// left in device memory is recorded with its reason (capacity, grid, cost or policy) and the
// numbers behind it.
#pragma once

#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy/roller.h"

namespace tessel {

struct WelderOptions {
  /// Memory levels tried for an intermediate inside a group, innermost first. Only levels the
  /// spec marks software-managed are used -- and, on a CPU, the private per-core caches, where the
  /// backend stages an intermediate in a per-thread scratch buffer that fits the cache; a level
  /// the spec lacks is skipped. "registers" is tried only for elementwise-compatible edges
  /// (every in-group consumer reads the tensor through an identity map of its spatial axes and
  /// both nodes get the same thread mapping).
  std::vector<std::string> edge_levels = {"registers", "smem", "l1d", "l2"};
  /// Largest number of nodes in one fused group (bounds compile time and kernel size).
  int max_group_nodes = 32;
  /// Sink tiles tried per merge: this many of the sink's roller candidates, and as many of the
  /// heaviest node's when it has the sink's spatial extents (a GEMM under its epilogue).
  int sink_candidates = 4;
  /// Options for the single-node candidates (roller_candidates). With `roller.measurer` set, the
  /// finished schedule is tuned: each group keeps its fusion and edge levels, and the `roller.tune`
  /// best of its tilings by the cost model are measured, the fastest kept (tune.h).
  RollerOptions roller;
};

class WelderPolicy : public Policy {
 public:
  explicit WelderPolicy(WelderOptions options = {}) : options_(std::move(options)) {}
  std::string_view name() const override { return "welder"; }
  std::string_view description() const override {
    return "graph connecting: fuse producer-consumer edges at registers or shared memory when the "
           "cost model prefers it, starting from roller's tiles";
  }
  Schedule schedule(const PolicyContext& ctx) const override;
  /// Tunes every finished group's tiling (roller.measurer, roller.tune).
  bool tune_with(Measurer* measurer, MeasureCache* cache, int k) override {
    options_.roller.measurer = measurer;
    options_.roller.measure_cache = cache;
    options_.roller.tune = k;
    return true;
  }
  Tuning tuning() const override { return {options_.roller.measurer, options_.roller.measure_cache, options_.roller.tune}; }
  std::vector<PolicyOption> options() override;

 private:
  WelderOptions options_;
};

}  // namespace tessel
