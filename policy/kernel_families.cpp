// Kernel families in the schedule (see kernel_families.h).
#include "policy/kernel_families.h"

#include "policy/sparse_kinds.h"

#include "tilegraph/error.h"

namespace tessel {

CostBreakdown FamilyPricedCost::estimate(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  if (!group.kernel.family.empty()) return inner_.estimate(graph, group, spec);
  ScheduledGroup chosen = group;
  chosen.kernel = families_.choose(graph, group, spec);
  return inner_.estimate(graph, chosen, spec);
}

std::optional<std::string> KernelFamilies::check(const OpGraph&, const ScheduledGroup& group, const HwSpec&) const {
  const std::string& family = group.kernel.family;
  if (family.empty()) return std::nullopt;
  std::string known;
  for (const Family& f : families()) {
    if (f.name == family) return std::nullopt;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  return cat("unknown ", backend(), " kernel family \"", family, "\" (known: ", known, ")");
}

std::string KernelFamilies::kernel_key(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  const KernelChoice k = group.kernel.family.empty() ? choose(graph, group, spec) : group.kernel;
  std::string key = k.family;
  for (const auto& [name, value] : k.params) key += cat(" ", name, "=", value);
  for (const auto& [node, cfg] : group.tiles) key += cat("; ", node, ": ", print_tile_config(cfg));
  for (const auto& [tensor, level] : group.edge_levels) key += cat("; t", tensor, "@", level);
  return key;
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
  PolicyContext with{ctx.graph, ctx.spec, priced, families, ctx.sparse};
  Schedule s = policy.schedule(with);
  // Each group's prediction already prices its family (the policy priced it through `priced`).
  record_missing_kernel_families(ctx.graph, ctx.spec, *families, s);
  choose_sparse_kinds(ctx.graph, ctx.spec, ctx.cost, families, s, ctx.sparse, policy.tuning(), std::string(policy.name()));
  return s;
}

}  // namespace tessel
