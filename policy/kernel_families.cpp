// Kernel families in the schedule (see kernel_families.h).
#include "policy/kernel_families.h"

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

Schedule schedule_with_families(const Policy& policy, const PolicyContext& ctx, const KernelFamilies* families) {
  if (!families) return policy.schedule(ctx);
  const FamilyPricedCost priced(ctx.cost, *families);
  PolicyContext with{ctx.graph, ctx.spec, priced, families};
  Schedule s = policy.schedule(with);
  // Each group's prediction already prices its family (the policy priced it through `priced`).
  record_missing_kernel_families(ctx.graph, ctx.spec, *families, s);
  return s;
}

}  // namespace tessel
