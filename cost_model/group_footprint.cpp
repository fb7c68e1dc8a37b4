#include "cost_model/group_footprint.h"

#include <algorithm>

#include "tilegraph/tile_traffic.h"

namespace tessel {

namespace {

bool block_scoped(MemoryScope s) { return s == MemoryScope::block || s == MemoryScope::sm || s == MemoryScope::cluster; }

bool has_threads(const TileConfig& cfg) { return !cfg.threads.empty() && cfg.levels.size() >= 2; }

}  // namespace

std::string edge_level_of(const OpGraph& graph, const ScheduledGroup& group, TensorId t) {
  const NodeId p = graph.producer(t);
  if (p < 0 || std::find(group.nodes.begin(), group.nodes.end(), p) == group.nodes.end()) return "";
  auto it = group.edge_levels.find(t);
  return it == group.edge_levels.end() ? "" : it->second;
}

bool stages_inputs(const OpGraph& graph, const ScheduledGroup& group, NodeId n, const HwSpec& spec) {
  if (spec.kind != "gpu") return true;
  auto it = group.tiles.find(n);
  if (it == group.tiles.end() || !has_threads(it->second)) return true;
  return graph.node(n).num_reduction() > 0;
}

GroupFootprint group_footprint(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  const bool gpu = spec.kind == "gpu";
  GroupFootprint out;
  for (NodeId n : group.nodes) {
    auto found = group.tiles.find(n);
    if (found == group.tiles.end()) continue;
    const TileConfig& cfg = found->second;
    int64_t node_threads = 1;
    for (int64_t t : cfg.threads) node_threads *= t;
    if (gpu) out.threads_per_block = std::max(out.threads_per_block, node_threads);
    const std::vector<TensorId>& inputs = graph.node_inputs(n);
    const bool staged = stages_inputs(graph, group, n, spec);
    const std::string out_level = edge_level_of(graph, group, graph.node_output(n));
    for (const LevelTile& lt : cfg.levels) {
      const int li = spec.level_index(lt.level);
      if (li < 0) continue;  // check_schedule reports unknown levels
      const MemoryLevel& level = spec.memory_levels[li];
      const bool smem = gpu && li > 0 && level.software_managed && block_scoped(level.scope);
      const TileFootprint fp = tile_footprint(graph.node(n), lt, TrafficParams{1, 0, cfg.pipeline_stages});
      int64_t bytes = 0;
      for (size_t k = 0; k < fp.input_bytes.size(); ++k) {
        const std::string in_level = edge_level_of(graph, group, inputs[k]);
        if (in_level == lt.level) continue;  // the producer's output tile, counted there
        if (smem && in_level.empty() && !staged) continue;  // read straight into registers
        if (smem && !in_level.empty() && has_threads(cfg)) continue;  // from another level's edge
        bytes += fp.input_bytes[k];
      }
      if (!smem || !has_threads(cfg) || out_level == lt.level) bytes += fp.output_bytes;
      if (gpu && li == 0) out.register_bytes_per_thread += bytes;
      else if (smem) out.smem_bytes_per_block += bytes;
      else out.level_bytes[li] += bytes;
    }
  }
  return out;
}

}  // namespace tessel
