// measure_top_k (tune.h).
#include "policy/tune.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "policy/kernel_families.h"
#include "policy/measure_cache.h"
#include "tilegraph/error.h"

namespace tessel {

void measure_top_k(const PolicyContext& ctx, Measurer& measurer, MeasureCache& cache, const std::string& policy,
                   const std::vector<GroupVariant>& variants, int k, ScheduleGroup& out) {
  TESSEL_ASSERT(!variants.empty(), "measure_top_k: no variants");
  out.trials.clear();
  out.measured_s.reset();
  size_t best = 0;
  double best_s = std::numeric_limits<double>::infinity();
  const size_t n = std::min(variants.size(), static_cast<size_t>(std::max(k, 1)));
  for (size_t i = 0; i < n; ++i) {
    const GroupVariant& v = variants[i];
    TuneTrial trial;
    for (NodeId node : v.group.nodes)
      trial.tiles += cat(trial.tiles.empty() ? "" : "; ", ctx.graph.node(node).name(), ": ",
                         print_tile_config(v.group.tiles.at(node)));
    if (ctx.families) trial.family = ctx.families->choose(ctx.graph, v.group, ctx.spec).family;
    trial.predicted_s = v.predicted.latency_s;
    trial.measured_s = cache.measure(measurer, ctx.graph, v.group, ctx.spec, policy);
    if (!trial.measured_s) trial.failure = measurer.last_failure();
    if (trial.measured_s && *trial.measured_s < best_s) best_s = *trial.measured_s, best = i;
    out.trials.push_back(std::move(trial));
  }
  out.group = variants[best].group;
  out.predicted = variants[best].predicted;
  if (std::isfinite(best_s)) out.measured_s = best_s;
}

}  // namespace tessel
