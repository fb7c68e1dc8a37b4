// Tile configs: validity rules and the text printer (tile_config.h).
#include "tilegraph/tile_config.h"

#include <set>

#include "tilegraph/error.h"

namespace tessel {
namespace {

std::string join_extents(const std::vector<int64_t>& v) {
  if (v.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "x" : "") + std::to_string(v[i]);
  return out;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::optional<std::string> check_tile_config(const TeNode& node, const TileConfig& config) {
  const int ns = node.num_spatial();
  const int nr = node.num_reduction();
  const std::vector<std::string> names = node.axis_names();
  if (config.levels.empty()) return "tile config has no levels";

  // 1-2: names, counts, extents.
  std::set<std::string> seen;
  for (const LevelTile& lt : config.levels) {
    if (lt.level.empty()) return "a level has an empty name";
    if (!seen.insert(lt.level).second) return cat("level '", lt.level, "' appears twice");
    if (static_cast<int>(lt.spatial.size()) != ns)
      return cat("level '", lt.level, "' has ", lt.spatial.size(), " spatial extents but node '",
                 node.name(), "' has ", ns, " spatial axes");
    if (static_cast<int>(lt.reduction.size()) != nr)
      return cat("level '", lt.level, "' has ", lt.reduction.size(), " reduction steps but node '",
                 node.name(), "' has ", nr, " reduction axes");
    for (int a = 0; a < ns + nr; ++a) {
      const int64_t v = a < ns ? lt.spatial[a] : lt.reduction[a - ns];
      if (v < 1)
        return cat("level '", lt.level, "': tile extent of axis '", names[a], "' is ", v,
                   " (must be >= 1)");
    }
  }

  // 3: nesting.
  for (size_t i = 0; i + 1 < config.levels.size(); ++i) {
    const LevelTile& outer = config.levels[i];
    const LevelTile& inner = config.levels[i + 1];
    for (int a = 0; a < ns + nr; ++a) {
      const int64_t o = a < ns ? outer.spatial[a] : outer.reduction[a - ns];
      const int64_t in = a < ns ? inner.spatial[a] : inner.reduction[a - ns];
      if (o % in != 0)
        return cat("axis '", names[a], "': tile ", in, " at level '", inner.level,
                   "' does not divide tile ", o, " at level '", outer.level, "'");
    }
  }

  // 4: thread mapping.
  if (!config.threads.empty()) {
    if (static_cast<int>(config.threads.size()) != ns)
      return cat("threads has ", config.threads.size(), " entries but node '", node.name(),
                 "' has ", ns, " spatial axes");
    for (int a = 0; a < ns; ++a) {
      const int64_t t = config.threads[a];
      if (t < 1) return cat("threads along axis '", names[a], "' is ", t, " (must be >= 1)");
      const int64_t per_thread = config.levels.size() > 1 ? config.levels[1].spatial[a] : 1;
      const int64_t outer = config.levels[0].spatial[a];
      if (outer % (t * per_thread) != 0)
        return cat("axis '", names[a], "': ", t, " threads x tile ", per_thread,
                   " do not divide the outermost tile ", outer);
    }
  }

  // 5: vector width.
  const int vw = config.vector_width;
  if (vw < 1 || (vw & (vw - 1)) != 0)
    return cat("vector_width ", vw, " is not a power of two >= 1");
  if (ns == 0) {
    if (vw != 1) return cat("vector_width ", vw, " on a node without spatial axes");
  } else {
    const int64_t innermost = config.levels.back().spatial[ns - 1];
    if (innermost % vw != 0)
      return cat("vector_width ", vw, " does not divide the innermost tile extent ", innermost,
                 " of axis '", names[ns - 1], "'");
  }

  // 6: scalars.
  if (config.pipeline_stages < 1)
    return cat("pipeline_stages is ", config.pipeline_stages, " (must be >= 1)");
  if (config.raster_group < 1) return cat("raster_group is ", config.raster_group, " (must be >= 1)");
  return std::nullopt;
}

int64_t num_spatial_tiles(const TeNode& node, const LevelTile& tile) {
  TESSEL_ASSERT(static_cast<int>(tile.spatial.size()) == node.num_spatial(), "level ", tile.level);
  int64_t n = 1;
  for (int a = 0; a < node.num_spatial(); ++a) {
    TESSEL_ASSERT(tile.spatial[a] >= 1, "tile extent ", tile.spatial[a]);
    n *= ceil_div(node.axes()[a].extent, tile.spatial[a]);
  }
  return n;
}

int64_t num_reduction_steps(const TeNode& node, const LevelTile& tile) {
  TESSEL_ASSERT(static_cast<int>(tile.reduction.size()) == node.num_reduction(), "level ",
                tile.level);
  int64_t n = 1;
  for (int r = 0; r < node.num_reduction(); ++r) {
    TESSEL_ASSERT(tile.reduction[r] >= 1, "reduction step ", tile.reduction[r]);
    n *= ceil_div(node.axes()[node.num_spatial() + r].extent, tile.reduction[r]);
  }
  return n;
}

std::string print_tile_config(const TileConfig& config) {
  std::string out;
  for (size_t i = 0; i < config.levels.size(); ++i) {
    const LevelTile& lt = config.levels[i];
    out += (i ? ", " : "") + lt.level + " " + join_extents(lt.spatial) + "|" +
           join_extents(lt.reduction);
  }
  if (config.levels.empty()) out = "-";
  out += "; threads " + join_extents(config.threads);
  out += cat("; vector ", config.vector_width, "; stages ", config.pipeline_stages, "; raster ",
             config.raster_group);
  if (!std::holds_alternative<DenseProps>(config.kind)) out += cat("; kind ", tile_kind_name(config.kind));
  return out;
}

}  // namespace tessel
