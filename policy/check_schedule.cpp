// check_schedule (check_schedule.h). Deliberately shares no code with the policies: it recomputes
// every quantity from the graph, the spec and the tile footprint formulas (tile_traffic.h).
#include "policy/check_schedule.h"

#include "policy/kernel_families.h"

#include "cost_model/group_footprint.h"

#include <algorithm>
#include <map>
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

namespace {

// LimitSpec counts 32-bit registers.
constexpr int64_t kRegisterBytes = 4;

int device_level(const HwSpec& spec) {
  for (int i = static_cast<int>(spec.memory_levels.size()) - 1; i >= 0; --i)
    if (spec.memory_levels[i].scope != MemoryScope::host) return i;
  return static_cast<int>(spec.memory_levels.size()) - 1;
}


std::string node_label(const OpGraph& graph, NodeId n) { return cat("node '", graph.node(n).name(), "'"); }

void check_group(const OpGraph& graph, const HwSpec& spec, const ScheduleGroup& sg, size_t index,
                 std::vector<std::string>& problems) {
  const ScheduledGroup& group = sg.group;
  const std::string where = cat("group ", index);
  auto problem = [&](const std::string& what) { problems.push_back(cat(where, ": ", what)); };
  const bool gpu = spec.kind == "gpu";
  std::set<NodeId> members(group.nodes.begin(), group.nodes.end());

  // Rule 3: tile configs.
  for (const auto& [n, cfg] : group.tiles)
    if (!members.count(n)) problem(cat("tile config for node ", n, " which is not in the group"));
  bool configs_ok = true;
  for (NodeId n : group.nodes) {
    auto it = group.tiles.find(n);
    if (it == group.tiles.end()) {
      problem(cat(node_label(graph, n), " has no tile config"));
      configs_ok = false;
      continue;
    }
    const TileConfig& cfg = it->second;
    if (std::optional<std::string> bad = check_tile(graph.node(n), cfg)) {
      problem(cat(node_label(graph, n), ": ", *bad, " (", print_tile_config(cfg), ")"));
      configs_ok = false;
      continue;
    }
    int previous = static_cast<int>(spec.memory_levels.size());
    for (const LevelTile& lt : cfg.levels) {
      const int li = spec.level_index(lt.level);
      if (li < 0) {
        problem(cat(node_label(graph, n), ": level '", lt.level, "' is not a memory level of ", spec.name));
        configs_ok = false;
      } else if (li >= previous) {
        problem(cat(node_label(graph, n), ": level '", lt.level, "' is not inside the level before it"));
        configs_ok = false;
      } else {
        previous = li;
      }
    }
  }

  // Rule 7: edge levels.
  for (const auto& [t, level] : group.edge_levels) {
    if (t < 0 || t >= graph.num_tensors()) {
      problem(cat("edge level for unknown tensor ", t));
      continue;
    }
    const std::string tname = cat("tensor '", graph.tensor(t).name, "'");
    const NodeId p = graph.producer(t);
    bool consumed = false;
    for (NodeId c : graph.consumers(t)) consumed |= members.count(c) > 0;
    if (p < 0 || !members.count(p) || !consumed)
      problem(cat("edge level '", level, "' for ", tname, ", which is not produced and consumed inside the group"));
    if (spec.level_index(level) < 0) problem(cat(tname, " at level '", level, "', not a memory level of ", spec.name));
  }
  if (!configs_ok || group.nodes.empty()) return;

  // Rule 8: a streamed attention group is exactly one attention pattern, on a GPU.
  if (group.stream_chunk > 0) {
    std::string why;
    if (!gpu) problem(cat("streams attention (stream_chunk ", group.stream_chunk, "), which only GPU kernels do; ", spec.name,
                          " is a ", spec.kind));
    if (!streamed_attention(graph, group, &why)) {
      problem(cat("stream_chunk ", group.stream_chunk, " but ", why));
      return;
    }
  }

  // Rule 4: capacity.
  // What the group occupies: group_footprint (cost_model/group_footprint.h) is the one
  // definition of what each node keeps at each level, shared with the cost model and policies.
  const GroupFootprint fp = group_footprint(graph, group, spec);
  const int64_t smem_bytes = fp.smem_bytes_per_block, register_bytes = fp.register_bytes_per_thread;
  const int64_t threads = fp.threads_per_block;
  const std::map<int, int64_t>& level_bytes = fp.level_bytes;
  if (gpu) {
    const LimitSpec& lim = spec.limits;
    if (smem_bytes > lim.smem_per_block_bytes)
      problem(cat("needs ", smem_bytes, " B of shared memory per block, limit ", lim.smem_per_block_bytes));
    const int64_t regs = (register_bytes + kRegisterBytes - 1) / kRegisterBytes;
    if (regs > lim.max_registers_per_thread)
      problem(cat("needs ", regs, " registers per thread for its register tiles, limit ", lim.max_registers_per_thread));
    else if (regs * threads > lim.registers_per_sm)
      problem(cat("needs ", regs, " registers x ", threads, " threads per block, more than the ", lim.registers_per_sm,
                  " registers of an SM"));
    if (threads > lim.max_threads_per_block)
      problem(cat("needs ", threads, " threads per block, limit ", lim.max_threads_per_block));
  }
  for (const auto& [li, bytes] : level_bytes) {
    const MemoryLevel& level = spec.memory_levels[li];
    if (level.scope == MemoryScope::host || li == device_level(spec)) continue;
    if (bytes > level.capacity_bytes)
      problem(cat("tiles at level '", level.name, "' need ", bytes, " B, capacity ", level.capacity_bytes, " B"));
  }

  // Rule 5: alignment of the outermost tile's innermost extent.
  const int64_t transaction = spec.memory_levels[device_level(spec)].transaction_bytes;
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    if (node.num_spatial() == 0) continue;
    const LevelTile& outer = group.tiles.at(n).levels.front();
    const int64_t unit = std::max<int64_t>(1, transaction / dtype_bytes(node.output().dtype));
    const int64_t tile = outer.spatial.back();
    const int64_t extent = node.axes()[node.num_spatial() - 1].extent;
    if (tile < extent && tile % unit != 0)
      problem(cat(node_label(graph, n), ": innermost tile extent ", tile, " at level '", outer.level,
                  "' is not a multiple of ", unit, " elements (", transaction, " B transactions) and does not cover the axis (",
                  extent, ")"));
  }

  // Rule 6: one grid for the whole group (a streamed group's tiles are one chunk's).
  if (group.nodes.size() > 1 && group.stream_chunk == 0) {
    const NodeId sink = group.nodes.back();
    const GridCheck grid = check_grid(graph, group.nodes, sink, group.tiles.at(sink).levels.front().spatial);
    if (!grid.ok) problem(cat("nodes do not share the grid of ", node_label(graph, sink), ": ", grid.reason));
  }
}

}  // namespace

std::vector<std::string> check_group(const OpGraph& graph, const HwSpec& spec, const ScheduledGroup& group) {
  std::vector<std::string> problems;
  ScheduleGroup alone;
  alone.group = group;
  check_group(graph, spec, alone, 0, problems);
  return problems;
}

std::vector<std::string> check_schedule(const OpGraph& graph, const HwSpec& spec, const Schedule& schedule,
                                        const KernelFamilies* families) {
  std::vector<std::string> problems;
  // Rule 1: coverage.
  std::vector<int> group_of(graph.num_nodes(), -1);
  std::vector<int> position(graph.num_nodes(), -1);  // index inside its group
  bool ids_ok = true;
  for (size_t g = 0; g < schedule.groups.size(); ++g) {
    const std::vector<NodeId>& nodes = schedule.groups[g].group.nodes;
    if (nodes.empty()) problems.push_back(cat("group ", g, " has no nodes"));
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeId n = nodes[i];
      if (n < 0 || n >= graph.num_nodes()) {
        problems.push_back(cat("group ", g, " names node ", n, ", but the graph has ", graph.num_nodes(), " nodes"));
        ids_ok = false;
        continue;
      }
      if (group_of[n] >= 0) {
        problems.push_back(cat(node_label(graph, n), " is in group ", group_of[n], " and in group ", g));
        continue;
      }
      group_of[n] = static_cast<int>(g);
      position[n] = static_cast<int>(i);
    }
  }
  for (NodeId n = 0; n < graph.num_nodes(); ++n)
    if (group_of[n] < 0) problems.push_back(cat(node_label(graph, n), " is in no group"));
  if (!ids_ok) return problems;

  // Rule 2: dependences.
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    if (group_of[n] < 0) continue;
    for (TensorId t : graph.node_inputs(n)) {
      const NodeId p = graph.producer(t);
      if (p < 0 || group_of[p] < 0) continue;
      if (group_of[p] > group_of[n] || (group_of[p] == group_of[n] && position[p] > position[n]))
        problems.push_back(cat(node_label(graph, n), " (group ", group_of[n], ") reads tensor '", graph.tensor(t).name,
                               "' before its producer ", node_label(graph, p), " (group ", group_of[p], ") computes it"));
    }
  }

  const size_t before = problems.size();
  for (size_t g = 0; g < schedule.groups.size(); ++g)
    check_group(graph, spec, schedule.groups[g], g, problems);
  // Rule 9: kernel families, asked only of groups whose other rules hold.
  if (families && problems.size() == before)
    for (size_t g = 0; g < schedule.groups.size(); ++g)
      if (const auto why = families->check(graph, schedule.groups[g].group, spec))
        problems.push_back(cat("group ", g, ": ", *why));
  return problems;
}

}  // namespace tessel
