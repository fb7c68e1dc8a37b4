// The cost model interface: predict how long a scheduled group of nodes takes on a chip, with a
// breakdown a person can check against a profiler (DESIGN.md, "Cost model").
//
// A ScheduledGroup is what a policy proposes: nodes fused into one kernel, a TileConfig per node,
// and the memory level where each intermediate inside the group lives. Tensors entering or
// leaving the group live in device memory. The model returns a latency and where it comes from:
// per-level memory time, compute time, which bound wins, waves, occupancy, launch overhead.
//
// Extending: a new model is a class implementing CostModel plus one line in `cost_models()`
// (registry.cpp). Every hardware number a model uses comes from the HwSpec it is given.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "tilegraph/op_graph.h"
#include "tilegraph/tile_config.h"

namespace tessel {

/// The kernel family a backend emits a group with, and its parameters: chosen while the policy
/// schedules, by the backend's KernelFamilies (policy/kernel_families.h), recorded in the
/// Schedule, priced by the cost model and emitted as recorded. Empty `family`: none chosen yet
/// (a schedule made without a backend, or saved before families were recorded).
struct KernelChoice {
  std::string family;                     // the backend's name for it: "wgmma", "row", "generic", ...
  std::map<std::string, int64_t> params;  // the family's parameters by name (tile shape, stages, split-K, ...)
  std::vector<std::string> rejected;      // the families preferred to it, each "name: why not"
};

/// One fused group, as a policy proposes it.
struct ScheduledGroup {
  std::vector<NodeId> nodes;             // topological order; the last one is the sink
  std::map<NodeId, TileConfig> tiles;    // one per node; level names are the HwSpec's
  /// Memory level of each intermediate tensor produced and consumed inside the group
  /// ("registers", "smem", ...). Tensors crossing the group boundary are in device memory.
  std::map<TensorId, std::string> edge_levels;
  /// Nonzero for a streamed (flash-style) attention group (tilegraph/attention_pattern.h): the
  /// group is exactly one attention pattern, its sink O, and the keys are streamed this many at a
  /// time through the kernel, the softmax rescaled online, so that the scores and probabilities
  /// exist one chunk at a time in registers. The per-node tiles then describe one chunk; the cost
  /// model, the footprint and check_schedule price and check the streamed kernel, not the tiles.
  int64_t stream_chunk = 0;
  KernelChoice kernel;  // the family that emits this group (empty until a backend chooses)
};

/// Time spent moving bytes out of one memory level (to the level inward).
struct LevelCost {
  std::string level;
  double bytes = 0;
  double seconds = 0;
};

/// One named part of a prediction, in seconds: what one term of a model contributed ("compute",
/// "launch", "panel", or a term a new model or policy adds). Terms are a list, so a new term needs
/// no new field here; how they combine into latency_s is the model's (docs/cost-model.md).
struct CostTerm {
  std::string name;
  double seconds = 0;
  bool operator==(const CostTerm&) const = default;
};

struct CostBreakdown {
  double latency_s = 0;          // the prediction
  /// Named time terms, in the order the model added them (AnalyticCostModel: "compute" -- time on
  /// the arithmetic units, overlapping the memory levels -- "launch" and, on CPUs, "panel", both
  /// added). The memory levels' times are in `memory`.
  std::vector<CostTerm> terms;
  double flops = 0;
  bool tensor_cores = false;     // the contraction runs on matrix units
  std::vector<LevelCost> memory;  // per memory level the group reads from
  std::string bound;             // "compute", or the name of the level whose time wins
  int64_t blocks = 0;            // tiles of the sink's outermost level (thread blocks, CPU tasks)
  int64_t blocks_per_unit = 0;   // resident at once per SM / core
  double waves = 0;              // ceil(blocks / (blocks_per_unit x units))
  double occupancy = 0;          // resident threads per SM / the maximum (1 on CPUs)
  std::vector<std::string> notes;  // modelling decisions worth reading (e.g. why not tensor cores)

  /// The seconds of the term named `name`; 0 when the model did not add it.
  double term(std::string_view name) const;
  /// The term named `name`, added (at 0 s) if absent.
  double& term_ref(std::string_view name);
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  /// Estimates `group` of `graph` on `spec`. The group must be legal (tile configs valid for
  /// their nodes, levels present in the spec); an InternalError otherwise.
  virtual CostBreakdown estimate(const OpGraph& graph, const ScheduledGroup& group,
                                 const HwSpec& spec) const = 0;
};

/// Every built-in cost model; the first is the default.
std::vector<std::unique_ptr<CostModel>> cost_models();

}  // namespace tessel
