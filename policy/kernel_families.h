// Kernel families as schedule data (DESIGN.md, "Schedule"): a backend describes the kernels it
// can emit -- CUDA: flash, wgmma, mma, simt, gemv, row, transpose, vector, generic -- and chooses, for one fused group,
// the family and the parameters it will emit it with. The policy prices every candidate group as
// the family its backend would emit (FamilyPricedCost), every group of the finished schedule
// records its choice (KernelChoice in cost_model.h), saved schedules carry it in their JSON, and
// the backend emits the recorded family without choosing again. For a family whose variants the
// cost model ranks (Family::cost_ranked), the parameters recorded are those of the variant the
// cost model prices cheapest (priced_choice), not choose()'s defaults.
//
// The layers: this interface lives here, below the backends; a backend implements it
// (Backend::kernel_families(), kernels/backend.h) and whoever runs the pipeline hands it to the
// policy (schedule_with_families), as a Measurer is handed in.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace tessel {

class KernelFamilies {
 public:
  virtual ~KernelFamilies() = default;
  struct Family {
    std::string name;                 // as recorded in KernelChoice::family
    std::string description;          // one line
    std::vector<std::string> params;  // the names of its parameters
    // The policy records the variant (variants()) of this family the cost model prices cheapest,
    // not choose()'s parameters -- or another family's default priced well below it
    // (priced_choice): set where measurements back the model's ranking of them.
    bool cost_ranked = false;
  };
  /// The backend these families belong to ("cuda").
  virtual std::string_view backend() const = 0;
  /// Every family, in the order choose() prefers them.
  virtual std::vector<Family> families() const = 0;
  /// The family and parameters the backend emits `group` with: the first legal family in its
  /// order of preference, with the reasons each one before it was not legal. Deterministic; needs
  /// no device.
  virtual KernelChoice choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const = 0;
  /// Whether the backend can emit `group` as its recorded family (group.kernel) with the recorded
  /// parameters: the reason it cannot (naming the family), or nullopt. An empty family is legal (the backend records
  /// choose() before it emits). check_schedule asks it of every group of a replayed schedule. This
  /// base version knows only the family names; backends check the group too.
  virtual std::optional<std::string> check(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const;
  /// A text equal for two groups exactly when the backend emits the same kernel for them (the
  /// same code and launch), as the family choose() gives: tuning measures each kernel once, however
  /// many tilings lead to it. This base version: the family, its parameters and the group's tiles
  /// and edge levels (never equal for different tilings); backends that know better say so.
  virtual std::string kernel_key(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const;
  /// Every family and parameter set the backend can emit `group` with, choose()'s first: the
  /// choices a tuner ranks and measures (policy/tune.h), each one the group may record. This base
  /// version: choose()'s alone.
  virtual std::vector<KernelChoice> variants(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
    return {choose(graph, group, spec)};
  }
};

// A group leaves the family choose() prefers for another family's default only when the cost
// model predicts that one below this fraction of the time: the model's error between families is
// larger than its error within one. Fitted on an H200 running schedules for the H100 SXM spec
// (2026-11-29, experiments/family_ranking: 62 op-sweep contractions, each group's wgmma plan
// against the mma family's, both checked and timed in one run): the 16 whose mma group was
// predicted below 2/3 of the wgmma group's time all ran faster on mma.sync (1.06-2.07x: small-K
// convolutions, GEMMs of a few tiles); from 0.69 to 0.8 the measured ratio ranged from 0.44x
// (LLaMA's batched attention scores) to 1.05x, and above 0.8 mma lost on 24 of 26. A threshold,
// not a model: the nearest loss (0.69) is close.
inline constexpr double kFamilySwitchFactor = 2.0 / 3.0;

/// The family choose() gives `group`, with -- for a cost-ranked family -- the parameters of its
/// variant `cost` prices cheapest (ties: the earlier in variants(), choose()'s first), or another
/// family's default (its first in variants()) where that is priced below kFamilySwitchFactor of
/// it (the switch is then named in `rejected`); `priced`, when given, receives the chosen
/// variant's estimate.
KernelChoice priced_choice(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec, const KernelFamilies& families,
                           const CostModel& cost, CostBreakdown* priced = nullptr);

/// `inner`, with a group that records no family priced as the family (and variant) `families`
/// and priced_choice give it: what the policy compares is what the backend will emit.
class FamilyPricedCost : public CostModel {
 public:
  FamilyPricedCost(const CostModel& inner, const KernelFamilies& families) : inner_(inner), families_(families) {}
  std::string_view name() const override { return inner_.name(); }
  std::string_view description() const override { return inner_.description(); }
  CostBreakdown estimate(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;

 private:
  const CostModel& inner_;
  const KernelFamilies& families_;
};

/// Records the family of every group of `schedule` that has none (`families`' choice), without
/// pricing it again; returns how many it recorded. For a backend handed a schedule made without
/// its families (a saved schedule from before they were recorded, a caller that bypassed
/// schedule_with_families): what it emits is then still what the schedule says.
int record_missing_kernel_families(const OpGraph& graph, const HwSpec& spec, const KernelFamilies& families,
                                   Schedule& schedule);

/// Runs `policy` with every candidate priced as the family `families` would emit (when given),
/// then records each group's family and variant (priced_choice). Without families:
/// policy.schedule(ctx).
Schedule schedule_with_families(const Policy& policy, const PolicyContext& ctx, const KernelFamilies* families);

}  // namespace tessel
