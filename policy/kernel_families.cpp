// Kernel families in the schedule (see kernel_families.h).
#include "policy/kernel_families.h"

#include <algorithm>

#include "policy/sparse_kinds.h"

#include "tilegraph/error.h"

namespace tessel {

KernelChoice priced_choice(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec, const KernelFamilies& families,
                           const CostModel& cost, CostBreakdown* priced) {
  ScheduledGroup g = group;
  g.kernel = families.choose(graph, group, spec);
  const std::vector<KernelFamilies::Family> all = families.families();
  const auto family = std::find_if(all.begin(), all.end(), [&](const KernelFamilies::Family& f) { return f.name == g.kernel.family; });
  const bool ranked = family != all.end() && family->cost_ranked;
  if (!ranked && !priced) return g.kernel;
  CostBreakdown best = cost.estimate(graph, g, spec);
  KernelChoice out = g.kernel;
  if (ranked) {
    const std::vector<std::string> rejected = out.rejected;
    const KernelChoice chosen = out;
    const std::vector<KernelChoice> variants = families.variants(graph, group, spec);
    // The chosen family's variants: the cheapest.
    for (const KernelChoice& v : variants) {
      if (v.family != chosen.family || v.params == chosen.params) continue;
      g.kernel = v;
      CostBreakdown c = cost.estimate(graph, g, spec);
      if (c.latency_s < best.latency_s) best = std::move(c), out = v;
    }
    // Another family's default (the first of it variants() lists: the mma family's own plan where
    // wgmma runs) only when predicted kFamilySwitchFactor of that time or less, both without the
    // epilogue's nodes (a cost model's "epilogue nodes" term: the same code after either main
    // loop).
    auto main_loop = [](const CostBreakdown& c) { return c.latency_s - c.term("epilogue nodes"); };
    const double best_in_family = main_loop(best);
    std::vector<std::string> seen{chosen.family};
    std::vector<std::string> declined = rejected;
    for (const KernelChoice& v : variants) {
      if (std::find(seen.begin(), seen.end(), v.family) != seen.end()) continue;
      seen.push_back(v.family);
      g.kernel = v;
      CostBreakdown c = cost.estimate(graph, g, spec);
      if (main_loop(c) < kFamilySwitchFactor * best_in_family && c.latency_s < best.latency_s) {
        declined = rejected;
        declined.push_back(cat(chosen.family, ": its best variant priced ", best_in_family * 1e3, " ms, ", v.family, "'s plan ",
                               main_loop(c) * 1e3, " ms (below ", kFamilySwitchFactor, " of it: switched)"));
        best = std::move(c), out = v;
      }
    }
    out.rejected = declined;
  }
  if (priced) *priced = std::move(best);
  return out;
}

CostBreakdown FamilyPricedCost::estimate(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  if (!group.kernel.family.empty()) return inner_.estimate(graph, group, spec);
  CostBreakdown out;
  priced_choice(graph, group, spec, families_, inner_, &out);
  return out;
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
  // Each group's prediction already prices its family and variant (the policy priced it through
  // `priced`, which chose them as priced_choice does here).
  for (ScheduleGroup& g : s.groups)
    if (g.group.kernel.family.empty()) g.group.kernel = priced_choice(ctx.graph, g.group, ctx.spec, *families, ctx.cost);
  choose_sparse_kinds(ctx.graph, ctx.spec, ctx.cost, families, s, ctx.sparse, policy.tuning(), std::string(policy.name()));
  return s;
}

}  // namespace tessel
