// The choice between a dense and a sparse kernel for every contraction that reads a weight with a
// sparsity attribute (tilegraph/sparsity.h; the block_sparse and nm_sparse tile kinds,
// tile_kind.h). Runs on a finished schedule, after each group's kernel family is recorded
// (schedule_with_families): for each such group it prices, with the schedule's cost model, the
// recorded dense kernel and a sparse kernel for every parameter set of a family the backend
// offers (KernelFamilies::variants) -- for a block pattern those that can walk blocks (CUDA's
// wgmma and mma.sync without split K, the CPU's micro-kernel with block_k x block_n), each with
// the weight's measured density at the blocks that kernel skips; for an N:M pattern CUDA's
// mma.sync kernels, run on the sparse tensor cores -- and keeps the cheapest one the backend can
// emit. The group records the kind in its
// contraction's tile config and the comparison, with the density where the two would break even,
// in ScheduleGroup::kind_choice (explain prints it).
#pragma once

#include "policy/kernel_families.h"
#include "policy/schedule.h"

namespace tessel {

/// Chooses dense, block_sparse or nm_sparse for every group of `schedule` whose contraction reads a
/// weight with a sparsity attribute; returns how many groups became sparse. `families` supplies
/// the kernels (none: nothing changes, the kind stays dense).
/// `mode` other than cost forces the kind where a sparse kernel can be emitted (block_sparse forces
/// the weight's own pattern, block or N:M) (the
/// comparison is recorded either way). With `tuning`'s measurer (`--tune K`, mode cost), the
/// dense kernel and the sparse candidates are ranked by the model and the K best distinct
/// kernels measured (measure_top_k, keyed with `policy`); the fastest measured is kept.
int choose_sparse_kinds(const OpGraph& graph, const HwSpec& spec, const CostModel& cost, const KernelFamilies* families,
                        Schedule& schedule, SparseKernels mode = SparseKernels::cost, const Policy::Tuning& tuning = {},
                        const std::string& policy = "");

}  // namespace tessel
