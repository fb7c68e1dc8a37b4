// The CUDA backend's kernel families (policy/kernel_families.h), in the order it prefers them:
//
//   flash    a streamed attention group (stream_chunk > 0) as one flash-style kernel (attention_plan.h)
//   wgmma    a contraction with an elementwise epilogue on Hopper's warpgroup MMA + TMA (contraction_plan.h)
//   mma      the same on mma.sync tensor-core instructions
//   row      a group that reduces and normalizes rows: softmax, layer norm (row_plan.h)
//   transpose  a permuting copy, tiled through shared memory (transpose_plan.h)
//   vector   an elementwise group, vectorized over the sink's domain (vector_plan.h)
//   generic  any group: one thread per output element, its reductions in a loop (group_plan.h)
//
// choose() asks each family's planner in that order and records the first that accepts the group,
// its parameters, and why each one before it declined. The emitter (kernel_emitter.h) builds the
// recorded family's kernel and no other.
#pragma once

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/contraction_plan.h"
#include "kernels/cuda/group_plan.h"
#include "kernels/cuda/row_plan.h"
#include "kernels/cuda/transpose_plan.h"
#include "kernels/cuda/vector_plan.h"
#include "policy/kernel_families.h"

namespace tessel::cuda {

class CudaKernelFamilies : public KernelFamilies {
 public:
  std::string_view backend() const override { return "cuda"; }
  std::vector<Family> families() const override;
  KernelChoice choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// The family name, then the emitter's own legality: the group emitted alone as its recorded
  /// family (emit_group_kernel), its refusal the reason.
  std::optional<std::string> check(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// choose()'s, then for a contraction where wgmma runs the mma family's own plan (its default:
  /// the first mma entry, which priced_choice weighs against wgmma), then every tensor-core
  /// parameterization (contraction_variants). Where that mma plan fails, no mma entry is listed.
  std::vector<KernelChoice> variants(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// The emitted kernel's code without comments and its launch (grid and block).
  std::string kernel_key(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
};

/// The recorded parameters of each family, from its plan.
std::map<std::string, int64_t> family_params(const AttentionPlan& plan);
std::map<std::string, int64_t> family_params(const ContractionPlan& plan);
std::map<std::string, int64_t> family_params(const RowPlan& plan);
std::map<std::string, int64_t> family_params(const TransposePlan& plan);
std::map<std::string, int64_t> family_params(const VectorPlan& plan);
/// The generic kernel's: its launch, and the instructions it issues per point of the iteration
/// domain of its largest node (generic_instructions_per_point), which the cost model prices.
std::map<std::string, int64_t> family_params(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& plan);

/// Instructions the generic kernel issues per point of `node`'s iteration domain: per input, one
/// load and an integer multiply-add per axis of its access map (the element offset), plus the
/// multiply-add that accumulates and the loop's increment, compare and branch. An estimate of the
/// code kernel_emitter.cpp writes for it, not a count of the compiled instructions.
int64_t generic_instructions_per_point(const TeNode& node);

}  // namespace tessel::cuda
