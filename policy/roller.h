// The roller policy (Roller, OSDI'22): one operator per group. For each node, build
// hardware-aligned tile candidates (rTiles), scale them up along the axis with the best data-reuse
// score until a capacity limit, scale out (shrink) small operators so the grid fills the machine,
// and keep the top-k by the cost model.
#pragma once

#include <algorithm>

#include "policy/policy.h"
#include "policy/tune.h"

namespace tessel {

class MeasureCache;

/// The most outer-tile shapes RollerOptions::exhaustive enumerates for one node.
inline constexpr double kMaxExhaustiveShapes = 20000;

struct RollerOptions {
  /// Candidates priced by the cost model per node (the rest are pruned by the reuse heuristic).
  int top_k = 8;
  /// Largest fraction of a tile that may fall outside the domain (padding waste) when rounding
  /// tile extents up to hardware-aligned sizes.
  double max_padding_waste = 0.25;
  /// Optional device measurement (not owned; null = cost model only): the `tune` best candidates
  /// of each group are measured and the fastest kept (policy/tune.h; `--tune K`).
  Measurer* measurer = nullptr;
  /// Candidates measured per group with a measurer; 0: all top_k. Welder's groups are tuned with
  /// this many of their candidate tilings (welder.h).
  int tune = 0;
  /// Every combination of the axes' hardware-aligned extents is a candidate outer tile (while
  /// there are at most kMaxExhaustiveShapes), each priced, the top_k kept by the cost model;
  /// otherwise (the default) the shapes along Roller's scale-up path, the top_k by data reuse
  /// priced. Tuning enumerates exhaustively: it measures the cost model's ranking of them all.
  bool exhaustive = false;
  /// Where measurements are cached (not owned). Null with a measurer: a MeasureCache in
  /// default_measure_cache_dir() (measure_cache.h). Unused without a measurer.
  MeasureCache* measure_cache = nullptr;
};

/// The ranked tile candidates for one node on its own (best first, at most options.top_k), each
/// with its predicted cost; a node no candidate fits gets an empty list. Used by roller directly
/// and by welder and z3 for a group's sink.
struct TileCandidate {
  TileConfig tiles;
  CostBreakdown predicted;
};
std::vector<TileCandidate> roller_candidates(const OpGraph& graph, NodeId node, const HwSpec& spec,
                                             const CostModel& cost, const RollerOptions& options = {});

class RollerPolicy : public Policy {
 public:
  explicit RollerPolicy(RollerOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "roller"; }
  std::string_view description() const override {
    return "one operator per kernel; hardware-aligned tiles scaled up by data reuse, top-k by cost";
  }
  Schedule schedule(const PolicyContext& ctx) const override;
  /// Measures the top max(top_k, k) candidates of every node.
  bool tune_with(Measurer* measurer, MeasureCache* cache, int k) override {
    options_.measurer = measurer;
    options_.measure_cache = cache;
    options_.tune = k;
    options_.top_k = std::max(options_.top_k, kTuneCandidatesPerMeasured * k);
    options_.exhaustive = true;
    return true;
  }
  Tuning tuning() const override { return {options_.measurer, options_.measure_cache, options_.tune}; }
  std::vector<PolicyOption> options() override;

 private:
  RollerOptions options_;
};

}  // namespace tessel
