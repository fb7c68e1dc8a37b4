// What the backends ask the tile kinds (tilegraph/tile_kind.h) before emitting a group: each
// node's kind says how its input tiles are loaded and its output tile stored (LoadPlan,
// StorePlan). Both backends generate code for dense boxes; a kind whose plans need other loads
// (BSR blocks, compressed N:M values, collectives) is refused here until its codegen hooks exist.
#pragma once

#include <string_view>

#include "cost_model/cost_model.h"
#include "tilegraph/op_graph.h"
#include "tilegraph/tile_kind.h"

namespace tessel {

/// UserError naming the group (`/groups/<index>/tiles/<node>`), the kind and the plan when a node
/// of `group` is tiled by a kind that is not implemented or whose load or store plans are neither
/// dense boxes nor one of `also` (what the backend's kernel for this group can load: the CUDA
/// mma kernel walks BSR blocks), which `backend` cannot emit.
void require_emittable_tiles(const OpGraph& graph, const ScheduledGroup& group, int index, std::string_view backend,
                             const std::vector<LoadKind>& also = {});

}  // namespace tessel
