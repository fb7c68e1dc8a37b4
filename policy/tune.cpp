// measure_top_k (tune.h).
#include "policy/tune.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "policy/kernel_families.h"
#include "policy/measure_cache.h"
#include "tilegraph/error.h"

namespace tessel {

void measure_top_k(const PolicyContext& ctx, Measurer& measurer, MeasureCache& cache, const std::string& policy,
                   const std::vector<GroupVariant>& variants, int k, ScheduleGroup& out) {
  TESSEL_ASSERT(!variants.empty(), "measure_top_k: no variants");
  out.trials.clear();
  out.measured_s.reset();
  // The policy's own tiling with every other family and parameter set its backend can emit it
  // with (KernelFamilies::variants), priced, ranked among the other tilings.
  std::vector<GroupVariant> ranked = variants;
  if (ctx.families) {
    const std::vector<KernelChoice> choices = ctx.families->variants(ctx.graph, variants.front().group, ctx.spec);
    for (size_t c = 1; c < choices.size(); ++c) {
      GroupVariant v{variants.front().group, {}};
      v.group.kernel = choices[c];
      v.predicted = ctx.cost.estimate(ctx.graph, v.group, ctx.spec);
      if (std::isfinite(v.predicted.latency_s)) ranked.push_back(std::move(v));
    }
    std::stable_sort(ranked.begin() + 1, ranked.end(), [](const GroupVariant& a, const GroupVariant& b) {
      return a.predicted.latency_s < b.predicted.latency_s;
    });
  }
  size_t best = 0;
  double best_s = std::numeric_limits<double>::infinity();
  // Tilings that emit the same kernel are one candidate (KernelFamilies::kernel_key): the first,
  // best predicted, stands for them.
  std::set<std::string> kernels;
  for (size_t i = 0; i < ranked.size() && out.trials.size() < static_cast<size_t>(std::max(k, 1)); ++i) {
    // A tiling without a recorded family is measured as the family and variant its prediction
    // priced (priced_choice), which the group keeps if it wins -- not as choose()'s default.
    if (ctx.families && ranked[i].group.kernel.family.empty())
      ranked[i].group.kernel = priced_choice(ctx.graph, ranked[i].group, ctx.spec, *ctx.families, ctx.cost);
    const GroupVariant& v = ranked[i];
    TuneTrial trial;
    for (NodeId node : v.group.nodes)
      trial.tiles += cat(trial.tiles.empty() ? "" : "; ", ctx.graph.node(node).name(), ": ",
                         print_tile_config(v.group.tiles.at(node)));
    std::string key = trial.tiles;
    for (const auto& [t, level] : v.group.edge_levels) key += cat("; t", t, "@", level);
    if (ctx.families) {
      const KernelChoice& choice = v.group.kernel;
      trial.family = choice.family;
      for (const auto& [name, value] : choice.params) trial.params += cat(trial.params.empty() ? "" : " ", name, "=", value);
      try {
        key = ctx.families->kernel_key(ctx.graph, v.group, ctx.spec);
      } catch (const UserError&) {
        // Not emittable: measuring it says why; it stays a candidate of its own.
      }
    }
    if (!kernels.insert(key).second) continue;
    trial.predicted_s = v.predicted.latency_s;
    trial.measured_s = cache.measure(measurer, ctx.graph, v.group, ctx.spec, policy);
    if (!trial.measured_s) trial.failure = measurer.last_failure();
    if (trial.measured_s && *trial.measured_s < best_s) best_s = *trial.measured_s, best = i;
    out.trials.push_back(std::move(trial));
  }
  out.group = ranked[best].group;
  out.predicted = ranked[best].predicted;
  if (std::isfinite(best_s)) out.measured_s = best_s;
}

}  // namespace tessel
