// Group planning for the CPU backend (group_plan.h).
#include "kernels/cpu/group_plan.h"

#include "kernels/cpu/kernel_families.h"
#include "kernels/tile_plans.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/emit_scalar.h"
#include "kernels/cpu/row_reuse.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_propagation.h"

namespace tessel {

int CpuGroupPlan::position(NodeId node) const {
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k] == node) return static_cast<int>(k);
  return -1;
}

const CpuRowReuse* CpuGroupPlan::reuse_stored_by(int position) const {
  for (const CpuRowReuse& r : reuses)
    if (r.source == position) return &r;
  return nullptr;
}

namespace {

// CpuGroupPlan::sparse: the recorded blocks checked against the kind and the weight, the weight's
// non-zero blocks counted along each block row.
std::optional<CpuSparseSkip> plan_sparse_skip(const OpGraph& graph, const ScheduledGroup& sg, int group) {
  const cpu::SparseWalk walk = cpu::sparse_walk(graph, sg);
  const std::string where = walk.node >= 0 ? cat("/groups/", group, "/tiles/", graph.node(walk.node).name(), "/kind")
                                           : cat("/groups/", group, "/kernel/params");
  if (!walk.problem.empty()) throw UserError("schedule", where, walk.problem);
  if (walk.node < 0) return std::nullopt;
  const BlockSparseProps* props = walk.props;
  const NodeId node = walk.node;
  const TeNode& tn = graph.node(node);
  const TensorId weight = graph.node_inputs(node)[props->input];
  const std::shared_ptr<const NonzeroMap> map = graph.nonzero_map(weight);
  TESSEL_ASSERT(map != nullptr, "sparse weight '", graph.tensor(weight).name, "' has no non-zero map");
  const double density = map->density(props->block_m, props->block_n);
  if (std::abs(density - props->density) > 1e-9)
    throw UserError("schedule", where, cat("block_sparse density ", props->density, " is not the weight's: '", graph.tensor(weight).name,
                                           "' has ", density, " of its ", props->block_m, "x", props->block_n, " blocks non-zero"));
  CpuSparseSkip skip;
  skip.position = static_cast<int>(std::find(sg.nodes.begin(), sg.nodes.end(), node) - sg.nodes.begin());
  skip.input = props->input;
  skip.block_k = walk.block_k;
  skip.block_n = walk.block_n;
  const int64_t k = tn.axes()[tn.num_spatial()].extent, n = tn.axes()[tn.num_spatial() - 1].extent;
  skip.blocks_k = (k + skip.block_k - 1) / skip.block_k;
  skip.blocks_n = (n + skip.block_n - 1) / skip.block_n;
  const std::vector<uint8_t> tiles = map->tiles(props->block_m, props->block_n);  // the weight's rows x cols
  const int64_t tile_cols = (map->cols + props->block_n - 1) / props->block_n;
  skip.nonzero_before.assign(static_cast<size_t>(skip.blocks_k * (skip.blocks_n + 1)), 0);
  for (int64_t kb = 0; kb < skip.blocks_k; ++kb)
    for (int64_t nb = 0; nb < skip.blocks_n; ++nb) {
      const uint8_t nz = walk.k_rows ? tiles[static_cast<size_t>(kb * tile_cols + nb)] : tiles[static_cast<size_t>(nb * tile_cols + kb)];
      const size_t at = static_cast<size_t>(kb * (skip.blocks_n + 1) + nb);
      skip.nonzero_before[at + 1] = skip.nonzero_before[at] + (nz ? 1 : 0);
    }
  return skip;
}

}  // namespace

CpuGroupPlan plan_cpu_group(const OpGraph& graph, const Schedule& schedule, const BufferPlan& buffers, int group,
                            int64_t alignment, int64_t reuse_budget_bytes, int64_t streaming_bytes) {
  const ScheduledGroup& sg = schedule.groups.at(group).group;
  TESSEL_ASSERT(!sg.nodes.empty(), "group ", group, " is empty");
  CpuGroupPlan plan;
  plan.group = group;
  plan.nodes = sg.nodes;
  const std::string& family = sg.kernel.family;
  // The tile kinds' load/store plans: block-sparse operands on the micro-kernel only.
  require_emittable_tiles(graph, sg, group, "cpu", family == "microkernel" ? std::vector<LoadKind>{LoadKind::bsr_blocks}
                                                                           : std::vector<LoadKind>{});
  const std::string where = cat("/groups/", group, "/kernel/family");
  if (family == "loops") {
    plan.microkernel = false;
  } else if (family == "microkernel") {
    if (cpu::microkernel_nodes(graph, sg) == 0)
      throw UserError("schedule", where, "kernel family 'microkernel' cannot emit this group: no node is a contraction it takes");
  } else if (!family.empty()) {
    throw UserError("schedule", where, cat("unknown CPU kernel family '", family, "' (microkernel, loops)"));
  }
  plan.sparse = plan_sparse_skip(graph, sg, group);
  int contraction = 0;
  for (NodeId n : plan.nodes) {
    const std::optional<cpu::MicrokernelMatch> match = plan.microkernel ? cpu::match_microkernel(graph.node(n)) : std::nullopt;
    plan.blocking.push_back(match ? cpu::recorded_register_blocking(sg.kernel, contraction) : std::nullopt);
    plan.prefetch_bytes.push_back(match ? cpu::recorded_prefetch_bytes(sg.kernel, contraction) : std::nullopt);
    contraction += match ? 1 : 0;
  }
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

  // 2b. Inlined nodes (CpuNodeBuffer::inlined).
  for (size_t k = 0; k + 1 < plan.nodes.size(); ++k) {
    CpuNodeBuffer& b = plan.buffers[k];
    const TeNode& node = graph.node(plan.nodes[k]);
    if (!b.in_scratch || node.num_reduction() > 0) continue;
    std::vector<int64_t> domain;
    for (int a = 0; a < node.num_spatial(); ++a) domain.push_back(node.axes()[a].extent);
    if (domain != graph.tensor(b.tensor).type.shape) continue;  // a reshaping output
    bool ok = true;
    for (const Access& in : node.inputs()) ok &= in.gather_dim < 0;
    int readers = 0;  // in-group reads of the node's output
    for (NodeId c : graph.consumers(b.tensor)) {
      if (plan.position(c) < 0) continue;
      const TeNode& consumer = graph.node(c);
      const std::vector<TensorId>& reads = graph.node_inputs(c);
      for (size_t i = 0; i < reads.size() && ok; ++i) {
        if (reads[i] != b.tensor) continue;
        ++readers;
        const Access& acc = consumer.inputs()[i];
        if (acc.gather_dim >= 0) {
          ok = false;
          break;
        }
        // Each result one axis with coefficient 1; every axis of the consumer longer than 1 used.
        std::vector<bool> used(consumer.num_axes(), false);
        for (int d = 0; d < acc.map.num_results() && ok; ++d) {
          const AffineExpr& row = acc.map.result(d);
          int axis = -1;
          for (size_t a = 0; a < row.coeffs.size(); ++a) {
            if (row.coeffs[a] == 0) continue;
            if (row.coeffs[a] != 1 || axis >= 0) ok = false;
            axis = static_cast<int>(a);
          }
          if (axis < 0 || used[axis]) ok = false;
          else used[axis] = true;
        }
        for (int a = 0; a < consumer.num_axes() && ok; ++a) ok = used[a] || consumer.axes()[a].extent == 1;
      }
    }
    // Inlined, every reader evaluates the body again: worth it for a few adds and multiplies (a
    // scratch store and load cost as much), not for a transcendental or a division, which is
    // stored once instead.
    b.inlined = ok && (readers <= 1 || !has_costly_op(node.body()));
  }

  // 2c. Streamed outputs (streaming_stores.h): the group's memory traffic counts every tensor it
  //     reads from memory (not produced in the group, or produced into the arena) and every arena
  //     output, once each. An output a later node of the group reads stays cached for it.
  if (streaming_bytes > 0) {
    std::vector<TensorId> moved;
    for (size_t k = 0; k < plan.nodes.size(); ++k) {
      for (TensorId t : graph.node_inputs(plan.nodes[k])) {
        const int p = graph.tensor(t).producer >= 0 ? plan.position(graph.tensor(t).producer) : -1;
        if (p < 0 || !plan.buffers[p].in_scratch) moved.push_back(t);
      }
      if (!plan.buffers[k].in_scratch) moved.push_back(plan.buffers[k].tensor);
    }
    std::sort(moved.begin(), moved.end());
    moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
    int64_t traffic_bytes = 0;
    for (TensorId t : moved) traffic_bytes += graph.tensor(t).type.num_elements() * dtype_bytes(graph.tensor(t).type.dtype);
    if (traffic_bytes >= streaming_bytes)
      for (size_t k = 0; k < plan.nodes.size(); ++k) {
        CpuNodeBuffer& b = plan.buffers[k];
        if (b.in_scratch) continue;
        bool read_in_group = false;
        for (NodeId c : graph.consumers(b.tensor)) read_in_group |= plan.position(c) >= 0;
        b.streamed = !read_in_group;
      }
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

  // 4. Row reuse (row_reuse.h): needs the inlining decisions (an inlined node has no loop to load
  //    in) and every task's box (the buffer spans the source's largest box).
  plan_row_reuse(graph, plan, reuse_budget_bytes);

  // 5. Scratch offsets: node outputs, then row-reuse buffers.
  auto place = [&](int64_t bytes) {
    const int64_t offset = plan.scratch_bytes;
    plan.scratch_bytes += (bytes + alignment - 1) / alignment * alignment;
    return offset;
  };
  for (CpuNodeBuffer& b : plan.buffers) {
    if (!b.in_scratch || b.inlined) continue;
    int64_t elements = 1;
    for (int64_t e : b.scratch_extents) elements *= e;
    b.scratch_offset_bytes = place(elements * dtype_bytes(graph.tensor(b.tensor).type.dtype));
  }
  for (CpuRowReuse& r : plan.reuses) {
    int64_t elements = 1;
    for (int64_t e : r.extents) elements *= e;
    r.scratch_offset_bytes = place(elements * cpu::compute_bytes(r.value.dtype()));
  }
  return plan;
}

}  // namespace tessel
