// The default analytic cost model (docs/cost-model.md gives every formula): per memory level,
// the traffic the group's tiles cause divided by that level's bandwidth; FLOPs over the peak of
// the units that can run them (tensor cores only when the dtype and tile shape allow); wave
// quantization over SMs or cores; occupancy from shared memory, registers and threads; L2 (or
// last-level cache) reuse across the blocks of a wave; launch overhead.
#pragma once

#include "cost_model/cost_model.h"

namespace tessel {

class AnalyticCostModel : public CostModel {
 public:
  std::string_view name() const override { return "analytic"; }
  std::string_view description() const override {
    return "per-level traffic / bandwidth vs FLOPs / peak, waves, occupancy, L2 reuse, launch";
  }
  CostBreakdown estimate(const OpGraph& graph, const ScheduledGroup& group,
                         const HwSpec& spec) const override;
};

/// Pieces of the analytic model, exposed for tests and for policies that rank candidates.
/// Whether `node` with outermost tile `tile` can run on the spec's tensor cores: a sum of
/// products of two inputs, a dtype with a tensor-core peak other than f32 (whose tensor-core mode
/// is TF32, less precise than the f32 the node asks for), and tile extents (the last two
/// spatial axes and the last reduction step) that are multiples of one MMA shape. The reason is
/// set when it cannot.
bool uses_tensor_cores(const TeNode& node, const LevelTile& tile, const HwSpec& spec, std::string* reason);

}  // namespace tessel
