// require_emittable_tiles (tile_plans.h).
#include "kernels/tile_plans.h"

#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"

namespace tessel {

void require_emittable_tiles(const OpGraph& graph, const ScheduledGroup& group, int index, std::string_view backend,
                             const std::vector<LoadKind>& also) {
  for (const auto& [n, cfg] : group.tiles) {
    const std::string where = cat("/groups/", index, "/tiles/", graph.node(n).name(), "/kind");
    if (!find_tile_kind(tile_kind_name(cfg.kind)))
      throw UserError("schedule", where, cat("tile kind '", tile_kind_name(cfg.kind), "' has no implementation yet"));
    if (cfg.levels.empty()) continue;  // check_schedule reports it
    if (const auto plan = non_dense_plan(graph.node(n), cfg, also))
      throw UserError("schedule", where, cat("the ", backend, " backend has no code generation for ", *plan, " tiles"));
  }
}

}  // namespace tessel
