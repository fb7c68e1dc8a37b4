// Measured top-k (Roller's top-10 mode, `--tune K`): a policy that has chosen a group's fusion
// ranks the group's candidate tilings with the cost model, measures the K best on the device
// (Measurer, through MeasureCache so that nothing is measured twice), and keeps the fastest
// measured. The cost model still decides what is fused; measurement only picks among the tilings
// of each fused group. Roller and welder tune through measure_top_k.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "policy/policy.h"
#include "policy/schedule.h"

namespace tessel {

class MeasureCache;

/// Tilings ranked per measured candidate: many tilings emit the same kernel (a family may choose
/// its own block shape), so tuning K kernels ranks this many times K tilings to find K distinct
/// ones.
inline constexpr int kTuneCandidatesPerMeasured = 4;

/// A candidate tiling of one group and the cost model's prediction for it.
struct GroupVariant {
  ScheduledGroup group;
  CostBreakdown predicted;
};

/// Measures the first `k` distinct kernels of `variants` (ordered best predicted first; the first
/// is the cost model's choice; variants that emit the same kernel as an earlier one, by
/// `ctx.families`' kernel_key, are skipped) with `measurer` through `cache`, keyed with `policy`
/// (measure_cache.h), and records each in `out.trials`. Sets `out` to the fastest measured variant (its group, predicted
/// cost and measured_s); when none could be measured, to the first, unmeasured. The kernel family
/// of each trial is `ctx.families`' choice when the context has families.
void measure_top_k(const PolicyContext& ctx, Measurer& measurer, MeasureCache& cache, const std::string& policy,
                   const std::vector<GroupVariant>& variants, int k, ScheduleGroup& out);

}  // namespace tessel
