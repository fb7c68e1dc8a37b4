// check_schedule: an independent legality check of a Schedule against its graph and chip, written
// apart from the policies so that it can catch their bugs (tests run every policy's schedules
// through it; `tessel schedule` may run it before code generation).
//
// Rules (each broken rule is one problem line naming the group, node, level and numbers):
//   1. coverage: every node of the graph is in exactly one group; groups are non-empty and name
//      nodes of the graph;
//   2. dependences: a node's producer is in an earlier group or earlier in the same group (so
//      groups can run in order and each group's node list is topological);
//   3. tile configs: every node of a group has one, it passes check_tile_config, its levels are
//      levels of the spec listed outermost first, and `tiles` names no node outside the group;
//   4. capacity per group -- GPU: shared memory per block (footprints, with pipeline stages, of
//      the tiles at software-managed block/SM-scoped levels other than the innermost register
//      level, summed over the group) <= limits.smem_per_block_bytes; registers per thread
//      (register-level footprints / 4 bytes, summed) <= limits.max_registers_per_thread, and times
//      the threads <= limits.registers_per_sm; threads per block (the largest product of a node's
//      `threads`) <= limits.max_threads_per_block. CPU (and GPU hardware-managed caches): the summed
//      footprints at each level <= its capacity_bytes;
//   5. alignment: the outermost tile's innermost spatial extent is a multiple of device memory's
//      transaction_bytes / output element bytes, unless it covers the whole axis;
//   6. grid: a group of several nodes shares the sink's grid (check_grid);
//   7. edge levels: only for tensors produced and consumed inside the group, naming spec levels;
//   9. kernel families (when the backend's KernelFamilies are given): every group's recorded family
//      is one the backend can emit the group with, with the recorded parameters
//      (KernelFamilies::check);
//   8. a streamed attention group (stream_chunk > 0) is exactly one attention pattern ending at
//      its sink (group_footprint.h's streamed_attention), on a GPU spec; its capacity (rule 4) is
//      the streamed kernel's footprint, and rule 6 does not apply (its tiles are one chunk's).
#pragma once

#include <string>
#include <vector>

#include "policy/schedule.h"

namespace tessel {

class KernelFamilies;

/// The problems of `schedule` for `graph` on `spec`; empty when it is legal. With `families`, each
/// group's recorded kernel family is checked too (rule 9).
std::vector<std::string> check_schedule(const OpGraph& graph, const HwSpec& spec, const Schedule& schedule,
                                        const KernelFamilies* families = nullptr);

/// The per-group rules alone (tile configs, levels, edge levels, capacity, alignment, grid) for
/// one candidate group; policies drop candidates it rejects.
std::vector<std::string> check_group(const OpGraph& graph, const HwSpec& spec, const ScheduledGroup& group);

}  // namespace tessel
