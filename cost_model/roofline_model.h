// The roofline floor: max(FLOPs / peak, compulsory device-memory bytes / device bandwidth), with
// no tiling, occupancy or launch effects. It is the lower bound BENCHMARKS.md reports next to every
// measurement, and a baseline for the analytic model.
#pragma once

#include "cost_model/cost_model.h"

namespace tessel {

class RooflineCostModel : public CostModel {
 public:
  std::string_view name() const override { return "roofline"; }
  std::string_view description() const override {
    return "max(FLOPs / peak, compulsory bytes / device bandwidth): a lower bound";
  }
  CostBreakdown estimate(const OpGraph& graph, const ScheduledGroup& group,
                         const HwSpec& spec) const override;
};

}  // namespace tessel
