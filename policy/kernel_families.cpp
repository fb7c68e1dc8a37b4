// Kernel families in the schedule (see kernel_families.h).
#include "policy/kernel_families.h"

#include <algorithm>

namespace tessel {

CostBreakdown FamilyPricedCost::estimate(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  if (!group.kernel.family.empty()) return inner_.estimate(graph, group, spec);
  ScheduledGroup chosen = group;
  chosen.kernel = families_.choose(graph, group, spec);
  return inner_.estimate(graph, chosen, spec);
}

int record_missing_kernel_families(const OpGraph& graph, const HwSpec& spec, const KernelFamilies& families,
                                   Schedule& schedule) {
  int recorded = 0;
  for (ScheduleGroup& g : schedule.groups) {
    if (!g.group.kernel.family.empty()) continue;
    g.group.kernel = families.choose(graph, g.group, spec);
    ++recorded;
  }
  return recorded;
}

void record_kernel_families(const OpGraph& graph, const HwSpec& spec, const CostModel& cost,
                            const KernelFamilies& families, Schedule& schedule) {
  double total = 0;
  for (ScheduleGroup& g : schedule.groups) {
    if (g.group.kernel.family.empty()) {
      g.group.kernel = families.choose(graph, g.group, spec);
      std::vector<std::string> notes = std::move(g.predicted.notes);
      g.predicted = cost.estimate(graph, g.group, spec);
      // The policy's own notes (why a node's tiles) stay; the model's are recomputed.
      for (std::string& n : notes)
        if (std::find(g.predicted.notes.begin(), g.predicted.notes.end(), n) == g.predicted.notes.end())
          g.predicted.notes.push_back(std::move(n));
    }
    total += g.predicted.latency_s;
  }
  schedule.predicted_latency_s = total;
}

Schedule schedule_with_families(const Policy& policy, const PolicyContext& ctx, const KernelFamilies* families) {
  if (!families) return policy.schedule(ctx);
  const FamilyPricedCost priced(ctx.cost, *families);
  PolicyContext with{ctx.graph, ctx.spec, priced, families};
  Schedule s = policy.schedule(with);
  record_kernel_families(ctx.graph, ctx.spec, ctx.cost, *families, s);
  return s;
}

}  // namespace tessel
