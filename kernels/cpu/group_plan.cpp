// Group planning for the CPU backend (group_plan.h).
#include "kernels/cpu/group_plan.h"

#include <algorithm>

#include "tilegraph/error.h"
#include "tilegraph/tile_propagation.h"

namespace tessel {

int CpuGroupPlan::position(NodeId node) const {
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k] == node) return static_cast<int>(k);
  return -1;
}

CpuGroupPlan plan_cpu_group(const OpGraph& graph, const Schedule& schedule, const BufferPlan& buffers, int group,
                            int64_t alignment) {
  const ScheduledGroup& sg = schedule.groups.at(group).group;
  TESSEL_ASSERT(!sg.nodes.empty(), "group ", group, " is empty");
  CpuGroupPlan plan;
  plan.group = group;
  plan.nodes = sg.nodes;
  const NodeId sink = sg.nodes.back();
  const TeNode& sink_node = graph.node(sink);
  const int ns = sink_node.num_spatial();

  // 1. The task grid: tiles of the sink's outermost level (a tile may exceed its axis; it is then
  //    clamped, see tile_config.h).
  auto tile_it = sg.tiles.find(sink);
  TESSEL_ASSERT(tile_it != sg.tiles.end() && !tile_it->second.levels.empty(), "group ", group,
                ": the sink '", sink_node.name(), "' has no tile config");
  plan.sink_tile = tile_it->second.levels.front().spatial;
  TESSEL_ASSERT(static_cast<int>(plan.sink_tile.size()) == ns, "sink tile of '", sink_node.name(), "'");
  std::vector<int64_t> grid(ns);
  plan.num_tasks = 1;
  for (int a = 0; a < ns; ++a) {
    const int64_t extent = sink_node.axes()[a].extent;
    grid[a] = (extent + plan.sink_tile[a] - 1) / plan.sink_tile[a];
    plan.num_tasks *= grid[a];
  }

  // 2. The box table layout and the output placement of every node.
  for (NodeId n : plan.nodes) {
    plan.box_offset.push_back(plan.box_stride);
    plan.box_stride += 2 * graph.node(n).num_spatial();
    CpuNodeBuffer b;
    b.node = n;
    b.tensor = graph.node_output(n);
    b.in_scratch = n != sink && buffers.find(b.tensor) == nullptr;
    if (b.in_scratch) b.scratch_extents.assign(graph.node(n).num_spatial(), 0);
    plan.buffers.push_back(std::move(b));
    auto cfg = sg.tiles.find(n);
    std::vector<int64_t> steps(graph.node(n).num_reduction(), kWholeAxis);
    if (cfg != sg.tiles.end() && !cfg->second.levels.empty()) {
      const std::vector<LevelTile>& levels = cfg->second.levels;
      steps = levels[std::min<size_t>(1, levels.size() - 1)].reduction;
    }
    for (size_t r = 0; r < steps.size(); ++r)
      if (steps[r] <= 0) steps[r] = graph.node(n).axes()[graph.node(n).num_spatial() + r].extent;
    plan.reduction_steps.push_back(std::move(steps));
  }

  // 3. Propagate every task's sink tile through the group.
  plan.boxes.assign(static_cast<size_t>(plan.num_tasks * plan.box_stride), 0);
  std::vector<int64_t> begin(ns), extent(ns);
  for (int64_t task = 0; task < plan.num_tasks; ++task) {
    int64_t rest = task;
    for (int a = ns - 1; a >= 0; --a) {
      begin[a] = (rest % grid[a]) * plan.sink_tile[a];
      extent[a] = plan.sink_tile[a];
      rest /= grid[a];
    }
    const DomainTile tile = tile_for_output(sink_node, begin, extent);
    const GroupPropagation prop = propagate_group(graph, plan.nodes, sink, tile);
    TESSEL_ASSERT(prop.ok, "group ", group, ": tile propagation of ", tile.print(ns), " failed: ", prop.reason);
    int64_t* row = plan.boxes.data() + task * plan.box_stride;
    for (size_t k = 0; k < plan.nodes.size(); ++k) {
      const NodeTile* nt = prop.find(plan.nodes[k]);
      TESSEL_ASSERT(nt, "group ", group, ": no tile for node '", graph.node(plan.nodes[k]).name(), "'");
      CpuNodeBuffer& b = plan.buffers[k];
      for (int a = 0; a < graph.node(plan.nodes[k]).num_spatial(); ++a) {
        row[plan.box_offset[k] + 2 * a] = nt->tile.begin[a];
        row[plan.box_offset[k] + 2 * a + 1] = nt->tile.extent[a];
        if (b.in_scratch) b.scratch_extents[a] = std::max(b.scratch_extents[a], nt->tile.extent[a]);
      }
    }
  }

  // 4. Scratch offsets.
  for (CpuNodeBuffer& b : plan.buffers) {
    if (!b.in_scratch) continue;
    int64_t elements = 1;
    for (int64_t e : b.scratch_extents) elements *= e;
    b.scratch_offset_bytes = plan.scratch_bytes;
    const int64_t bytes = elements * dtype_bytes(graph.tensor(b.tensor).type.dtype);
    plan.scratch_bytes += (bytes + alignment - 1) / alignment * alignment;
  }
  return plan;
}

}  // namespace tessel
