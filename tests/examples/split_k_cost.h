// Worked example (cost_model/README.md, "Adding a cost term"): a cost model that adds one named
// term to another model's prediction -- the partial sums a split-K kernel writes and reads back
// -- without editing CostBreakdown. The README quotes the code between the example markers;
// tests/examples/examples_test.cpp builds it and checks the term.
#pragma once

// example:begin
#include "cost_model/cost_model.h"
#include "tilegraph/dtype.h"

namespace tessel::examples {

/// `inner`'s prediction plus "split_k_partials": a group whose kernel family records split_k = s
/// > 1 writes s partial output tiles in f32 and reads them back to reduce them, 2 x s x outputs
/// x 4 bytes through device memory (the spec's outermost device level) at its bandwidth.
class SplitKPartialsCost : public CostModel {
 public:
  explicit SplitKPartialsCost(const CostModel& inner) : inner_(inner) {}
  std::string_view name() const override { return "split_k_partials"; }
  std::string_view description() const override { return "the inner model plus split-K's partial sums"; }
  CostBreakdown estimate(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override {
    CostBreakdown c = inner_.estimate(graph, group, spec);
    const auto split = group.kernel.params.find("split_k");
    if (split == group.kernel.params.end() || split->second <= 1) return c;
    const MemoryLevel* device = nullptr;
    for (const MemoryLevel& l : spec.memory_levels)
      if (l.scope != MemoryScope::host) device = &l;  // outermost last: device memory
    if (!device) return c;                            // a spec without device memory
    const double outputs = static_cast<double>(graph.node(group.nodes.back()).output().num_elements());
    const double bytes = 2.0 * static_cast<double>(split->second) * outputs * dtype_bytes(DType::f32);
    const double seconds = bytes / (device->bandwidth_gbps * 1e9);
    c.term_ref(name()) = seconds;  // a new named term: no field added to CostBreakdown
    c.latency_s += seconds;
    return c;
  }

 private:
  const CostModel& inner_;
};

}  // namespace tessel::examples
// example:end
