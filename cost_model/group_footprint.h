// What a fused group occupies on chip: shared memory per block, registers per thread, threads per
// block, and bytes of tiles per cache level -- one definition, used by the cost model, by the
// policies' capacity checks and by check_schedule, so that they never disagree about what fits.
//
// On a GPU, a node's tile at the innermost level (registers) is per thread: its inputs and its
// output, except intermediates another node of the group already holds there. At a
// software-managed block-scoped level (shared memory) a node with a thread mapping stages only
//   - inputs from outside the group when the node reduces (a contraction or reduction re-reads
//     them across threads and reduction steps; staged(), below), with `pipeline_stages` copies;
//   - its output when the group keeps that intermediate at this level (an edge level);
// an elementwise node reads its inputs straight into registers and writes its output from there.
// A node without a thread mapping (one level, no threads) stages its whole tile, as does every
// level of a CPU (each cache level holds the tiles made for it).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cost_model/cost_model.h"

namespace tessel {

struct GroupFootprint {
  int64_t smem_bytes_per_block = 0;      // GPU: software-managed block/SM-scoped levels
  int64_t register_bytes_per_thread = 0;  // GPU: the innermost level
  int64_t threads_per_block = 1;          // GPU: the widest node's thread count (1 on a CPU)
  std::map<int, int64_t> level_bytes;     // other levels, by index in spec.memory_levels
};

GroupFootprint group_footprint(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec);

/// True if node `n` of `group` keeps the inputs it reads from outside the group in the level of
/// its outer tile (see the file comment): always on a CPU and for a node without a thread
/// mapping; on a GPU with a thread mapping, only when the node has reduction axes.
bool stages_inputs(const OpGraph& graph, const ScheduledGroup& group, NodeId n, const HwSpec& spec);

/// The level at which `group` keeps the intermediate `t` (its edge level), or "" when `t` is not
/// produced inside the group or has no edge level.
std::string edge_level_of(const OpGraph& graph, const ScheduledGroup& group, TensorId t);

}  // namespace tessel
