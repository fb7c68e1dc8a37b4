// The choice between a dense and a block-sparse kernel for every contraction that reads a weight
// with a sparsity attribute (tilegraph/sparsity.h; the block_sparse tile kind, tile_kind.h). Runs
// on a finished schedule, after each group's kernel family is recorded (schedule_with_families):
// for each such group it prices, with the schedule's cost model, the recorded dense kernel and a
// block-sparse kernel for every parameter set of a family that can walk blocks which the backend
// offers (KernelFamilies::variants: CUDA's wgmma and mma.sync without split K, the CPU's
// micro-kernel with block_k x block_n), each with the weight's measured density at the blocks
// that kernel skips, and keeps the cheapest one the backend can emit. The group records the kind in its
// contraction's tile config and the comparison, with the density where the two would break even,
// in ScheduleGroup::kind_choice (explain prints it).
#pragma once

#include "policy/kernel_families.h"
#include "policy/schedule.h"

namespace tessel {

/// Chooses dense or block_sparse for every group of `schedule` whose contraction reads a weight
/// with a sparsity attribute; returns how many groups became block-sparse. `families` supplies
/// the kernels (none: nothing changes, the kind stays dense).
/// `mode` other than cost forces the kind where a block-sparse kernel can be emitted (the
/// comparison is recorded either way). With `tuning`'s measurer (`--tune K`, mode cost), the
/// dense kernel and the block-sparse candidates are ranked by the model and the K best distinct
/// kernels measured (measure_top_k, keyed with `policy`); the fastest measured is kept.
int choose_sparse_kinds(const OpGraph& graph, const HwSpec& spec, const CostModel& cost, const KernelFamilies* families,
                        Schedule& schedule, SparseKernels mode = SparseKernels::cost, const Policy::Tuning& tuning = {},
                        const std::string& policy = "");

}  // namespace tessel
