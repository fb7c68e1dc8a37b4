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

/// How many parts a contraction's reduction loop of `k_steps` steps is split in when its `tiles`
/// blocks leave a GPU's units idle: the largest power of two whose tiles x parts blocks still fit
/// the units one each (no unit runs two parts), no more than the spec's thread-block cluster (the
/// parts of a tile add their partial sums through the cluster's shared memory), every part at
/// least `min_steps` steps long. 1: not split (more tiles than half the units, no clusters, too
/// short a reduction). The CUDA backend's tensor-core kernel splits so
/// (kernels/cuda/contraction_plan.h) and the model prices it so. (Measured on an H100 with ncu,
/// M = 16, K = N = 4096 in 64 tiles, L2 warm: 2 parts, 128 blocks, 13.0-13.7 us; 4 parts, 256
/// blocks, 15.5 us; 8 parts 20.3 us: more parts than one wave add partial sums and cluster
/// placement without shortening the busiest SM's work.)
/// `per_unit`: blocks that run on one unit at once (a streamed attention kernel's small blocks of
/// one warp leave room for several; its parts then fill the units' slots, not the units).
int reduction_split(int64_t tiles, int64_t k_steps, int64_t min_steps, const HwSpec& spec, int64_t per_unit = 1);

/// Warp instructions a GPU unit issues per clock on its CUDA cores (its warp schedulers): the
/// spec's f32 peak over units x clock x 2 (a fused multiply-add) x simd_width; 1 where the spec
/// gives no clock. A kernel with fewer warps resident on a unit than this reaches that fraction of
/// the unit's f32 peak at most.
double simt_issue_slots(const HwSpec& spec);

/// Little's law: the bytes per second the spec's device memory delivers to kernels that keep
/// `bytes_in_flight` requested across the chip: its bandwidth, or less, bytes in flight over its
/// loaded latency (MemoryLevel::loaded_latency_ns, when the spec gives one). A skinny product
/// whose blocks each hold a shallow pipeline streams its weight below the bandwidth.
double in_flight_rate(const HwSpec& spec, double bytes_in_flight);

/// A cp.async pipeline streaming a contraction's operands (the mma.sync kernel): `blocks` blocks
/// of which `per_unit` run on one unit at once, each keeping up to stages - 1 K tiles requested
/// (no more than the `k_tiles` of its part of K) of `rows_a` rows of A and `cols_b` columns of B,
/// `block_k` deep, `element_bytes` each (rows of A past M are not read: pass min(block_m, M)).
struct OperandPipeline {
  int64_t blocks = 0, per_unit = 1, stages = 2, k_tiles = 1, rows_a = 0, cols_b = 0, block_k = 0, element_bytes = 0;
};
/// The bytes such a pipeline keeps in flight across the chip.
double pipeline_bytes_in_flight(const HwSpec& spec, const OperandPipeline& p);

/// The gemv family's stream of B (kernels/cuda/contraction_plan.h, device/gemv.cuh): `blocks`
/// blocks of `threads` threads, `per_unit` of them resident on a unit at once, each thread
/// requesting `vectors` loads of `vector_bytes` before it multiplies.
struct GemvStream {
  int64_t blocks = 0, per_unit = 1, threads = 0, vectors = 1, vector_bytes = 0;
};
/// The bytes such a stream keeps in flight across the chip.
double gemv_bytes_in_flight(const HwSpec& spec, const GemvStream& s);

}  // namespace tessel
