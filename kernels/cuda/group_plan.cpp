// Planning one fused group as one kernel (see group_plan.h).
#include "kernels/cuda/group_plan.h"

#include <algorithm>
#include <limits>
#include <set>

#include "cost_model/group_footprint.h"
#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

bool contains(const std::vector<NodeId>& v, NodeId n) { return std::find(v.begin(), v.end(), n) != v.end(); }

/// True if the output of `n` is read outside the group or is a graph output.
bool leaves_group(const OpGraph& graph, const ScheduledGroup& group, NodeId n) {
  const TensorId t = graph.node_output(n);
  const auto& outs = graph.outputs();
  if (std::find(outs.begin(), outs.end(), t) != outs.end()) return true;
  for (NodeId c : graph.consumers(t))
    if (!contains(group.nodes, c)) return true;
  return false;
}

/// One-to-one read: every row of the map is +-1 times one axis plus an offset, and every axis of
/// the reader appears in exactly one row. Then distinct points of the reader read distinct
/// elements, and inlining the producer computes nothing twice.
bool one_to_one(const TeNode& reader, const Access& access) {
  if (access.is_gather()) return false;
  std::vector<int> seen(reader.num_axes(), 0);
  for (const AffineExpr& row : access.map.results()) {
    int axes_in_row = 0;
    for (int a = 0; a < reader.num_axes(); ++a) {
      const int64_t c = row.coeffs[a];
      if (c == 0) continue;
      if (c != 1 && c != -1) return false;
      ++axes_in_row;
      ++seen[a];
    }
    if (axes_in_row > 1) return false;
  }
  for (int s : seen)
    if (s != 1) return false;
  return true;
}

bool is_reshaped(const TeNode& node) {
  std::vector<int64_t> spatial;
  for (int a = 0; a < node.num_spatial(); ++a) spatial.push_back(node.axes()[a].extent);
  return node.output().shape != spatial;
}

int64_t floor_pow2(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

// Box arithmetic shared with the emitted code (kernel_emitter.cpp emits the same steps).

/// Per output dim of `access`, the bounding interval of the indices read over the domain box
/// (spatial lo/hi of `box`, reduction axes whole), clamped to the tensor; false if empty.
bool access_box(const TeNode& reader, const Access& access, const TileBox& box, std::vector<int64_t>& lo,
                std::vector<int64_t>& hi) {
  const int rank = access.type.rank();
  lo.assign(rank, 0);
  hi.assign(rank, 0);
  for (int r = 0; r < rank; ++r) {
    if (r == access.gather_dim) {
      lo[r] = 0;
      hi[r] = access.type.shape[r] - 1;
    } else {
      const AffineExpr& row = access.map.result(r);
      int64_t l = row.offset, h = row.offset;
      for (int a = 0; a < reader.num_axes(); ++a) {
        const int64_t c = row.coeffs[a];
        if (c == 0) continue;
        const int64_t alo = a < reader.num_spatial() ? box.lo[a] : 0;
        const int64_t ahi = a < reader.num_spatial() ? box.hi[a] : reader.axes()[a].extent - 1;
        l += std::min(c * alo, c * ahi);
        h += std::max(c * alo, c * ahi);
      }
      lo[r] = std::max<int64_t>(l, 0);
      hi[r] = std::min<int64_t>(h, access.type.shape[r] - 1);
    }
    if (lo[r] > hi[r]) return false;
  }
  return true;
}

/// The smallest box of the spatial domain holding the elements of the output box [olo, ohi] of
/// a node whose output is a reshape of its domain. When the two shapes are the same but for
/// dimensions of size 1 (a domain [n, h, w, c, 1] written as [n, h, w, c]),
/// the box maps dimension by dimension; otherwise the row-major linear range between the two
/// corners, enclosed. The device's tsl::enclose_box (device/box.cuh) computes the same box.
void enclose(const TeNode& node, const std::vector<int64_t>& olo, const std::vector<int64_t>& ohi, TileBox& box) {
  const std::vector<int64_t>& oshape = node.output().shape;
  {
    const int ns = node.num_spatial(), nr = static_cast<int>(oshape.size());
    std::vector<int64_t> lo(ns, 0), hi(ns, 0);
    int i = 0, a = 0;
    bool same = true;
    while (true) {
      while (i < nr && oshape[i] == 1) ++i;
      while (a < ns && node.axes()[a].extent == 1) ++a;
      if (i == nr || a == ns) {
        same = i == nr && a == ns;
        break;
      }
      if (oshape[i] != node.axes()[a].extent) {
        same = false;
        break;
      }
      lo[a] = olo[i];
      hi[a] = ohi[i];
      ++i;
      ++a;
    }
    if (same) {
      for (int d = 0; d < ns; ++d) box.lo[d] = lo[d], box.hi[d] = hi[d];
      return;
    }
  }
  int64_t llo = 0, lhi = 0;
  for (size_t r = 0; r < oshape.size(); ++r) {
    llo = llo * oshape[r] + olo[r];
    lhi = lhi * oshape[r] + ohi[r];
  }
  const int ns = node.num_spatial();
  std::vector<int64_t> dlo(ns), dhi(ns);
  for (int a = ns - 1; a >= 0; --a) {
    const int64_t e = node.axes()[a].extent;
    dlo[a] = llo % e;
    llo /= e;
    dhi[a] = lhi % e;
    lhi /= e;
  }
  bool differ = false;
  for (int a = 0; a < ns; ++a) {
    if (differ) {
      box.lo[a] = 0;
      box.hi[a] = node.axes()[a].extent - 1;
    } else {
      box.lo[a] = dlo[a];
      box.hi[a] = dhi[a];
      differ = dlo[a] != dhi[a];
    }
  }
}

}  // namespace

std::string_view node_role_name(NodeRole r) {
  switch (r) {
    case NodeRole::sink: return "sink";
    case NodeRole::staged: return "staged";
    case NodeRole::inlined: return "inlined";
  }
  return "?";
}

int64_t TileBox::volume() const {
  int64_t v = 1;
  for (size_t a = 0; a < lo.size(); ++a) v *= std::max<int64_t>(0, hi[a] - lo[a] + 1);
  return v;
}

int GroupPlan::position(NodeId n) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].node == n) return static_cast<int>(i);
  return -1;
}

std::vector<TileBox> tile_boxes(const OpGraph& graph, const GroupPlan& plan, int64_t tile) {
  const int n = static_cast<int>(plan.nodes.size());
  std::vector<TileBox> boxes(n);
  std::vector<bool> needed(n, false);
  std::vector<std::vector<int64_t>> olo(n), ohi(n);
  // The sink's tile.
  {
    const TeNode& sink = graph.node(plan.nodes.back().node);
    const int ns = sink.num_spatial();
    TileBox& b = boxes.back();
    b.lo.assign(ns, 0);
    b.hi.assign(ns, 0);
    int64_t t = tile;
    for (int a = ns - 1; a >= 0; --a) {
      const int64_t c = t % plan.grid[a];
      t /= plan.grid[a];
      b.lo[a] = c * plan.sink_tile[a];
      b.hi[a] = std::min(b.lo[a] + plan.sink_tile[a], sink.axes()[a].extent) - 1;
    }
  }
  std::vector<int64_t> lo, hi;
  for (int i = n - 1; i >= 0; --i) {
    const TeNode& node = graph.node(plan.nodes[i].node);
    TileBox& box = boxes[i];
    if (i != n - 1) {
      const int ns = node.num_spatial();
      box.lo.assign(ns, 0);
      box.hi.assign(ns, -1);
      if (!needed[i]) continue;  // nothing of it is read for this tile (then it is not computed)
      if (plan.nodes[i].reshaped) enclose(node, olo[i], ohi[i], box);
      else box.lo = olo[i], box.hi = ohi[i];
    }
    if (box.volume() == 0) continue;
    const std::vector<TensorId>& ins = graph.node_inputs(plan.nodes[i].node);
    for (size_t k = 0; k < ins.size(); ++k) {
      const int j = plan.position(graph.producer(ins[k]));
      if (j < 0) continue;
      if (!access_box(node, node.inputs()[k], box, lo, hi)) continue;
      if (!needed[j]) {
        needed[j] = true;
        olo[j] = lo;
        ohi[j] = hi;
      } else {
        for (size_t r = 0; r < lo.size(); ++r) {
          olo[j][r] = std::min(olo[j][r], lo[r]);
          ohi[j][r] = std::max(ohi[j][r], hi[r]);
        }
      }
    }
  }
  return boxes;
}

namespace {
// A reduction this long in a group of few outputs is shared by a block's threads (plan_group's
// step 1): below it one thread's loop is as fast as a shared-memory step.
constexpr int64_t kSharedSumMinPoints = 1024;

int64_t reduction_points(const TeNode& node) {
  int64_t r = 1;
  for (int a = node.num_spatial(); a < node.num_axes(); ++a) r *= node.axes()[a].extent;
  return r;
}
}  // namespace

GroupPlan plan_group(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  TESSEL_ASSERT(!group.nodes.empty(), "empty group");
  TESSEL_ASSERT(spec.kind == "gpu", "plan_group needs a GPU spec, got '", spec.kind, "'");
  GroupPlan plan;
  plan.warp = static_cast<int>(spec.compute.simd_width);
  TESSEL_ASSERT(plan.warp >= 1 && plan.warp <= 32 && (plan.warp & (plan.warp - 1)) == 0,
                "warp width ", plan.warp, " of spec '", spec.name, "' is not a power of two up to 32");
  const int n = static_cast<int>(group.nodes.size());
  const NodeId sink_id = group.nodes.back();
  const TeNode& sink = graph.node(sink_id);

  // 1. Roles. Readers come after producers, so deciding from the last node backwards sees every
  //    reader's role first.
  plan.nodes.resize(n);
  for (int i = 0; i < n; ++i) {
    NodePlan& p = plan.nodes[i];
    p.node = group.nodes[i];
    p.reshaped = is_reshaped(graph.node(p.node));
    p.writes_global = i == n - 1 || leaves_group(graph, group, p.node);
  }
  plan.nodes.back().role = NodeRole::sink;
  // Few outputs in all (no more than the SMs): the block's threads go to the reductions.
  const bool tiny_output = sink.output().num_elements() <= spec.compute.units;
  bool wide_block = tiny_output && sink.num_reduction() > 0 && reduction_points(sink) >= kSharedSumMinPoints;
  for (int i = n - 2; i >= 0; --i) {
    NodePlan& p = plan.nodes[i];
    const TeNode& node = graph.node(p.node);
    const TensorId out = graph.node_output(p.node);
    int reads = 0;
    bool all_one_to_one = true;
    for (NodeId c : graph.consumers(out)) {
      if (!contains(group.nodes, c)) continue;
      const std::vector<TensorId>& ins = graph.node_inputs(c);
      for (size_t k = 0; k < ins.size(); ++k) {
        if (ins[k] != out) continue;
        ++reads;
        all_one_to_one &= one_to_one(graph.node(c), graph.node(c).inputs()[k]);
      }
    }
    // A long reduction in a group of few outputs (a whole tensor summed to one value) is staged,
    // so that its sum is shared by the lanes of a whole block (step 6) instead of one thread's
    // loop.
    const bool shared_sum = node.num_reduction() > 0 && tiny_output && reduction_points(node) >= kSharedSumMinPoints;
    const bool inline_ok =
        !p.writes_global && reads >= 1 && all_one_to_one && (node.num_reduction() == 0 || reads == 1) && !shared_sum;
    p.role = inline_ok ? NodeRole::inlined : NodeRole::staged;
    wide_block |= p.role != NodeRole::inlined && node.num_reduction() > 0 && tiny_output &&
                  reduction_points(node) >= kSharedSumMinPoints;
  }

  // 2. The grid of sink tiles and the block size.
  auto tile_it = group.tiles.find(sink_id);
  TESSEL_ASSERT(tile_it != group.tiles.end() && !tile_it->second.levels.empty(), "sink '", sink.name(),
                "' has no tile config");
  const std::vector<int64_t>& block_tile = tile_it->second.levels.front().spatial;
  TESSEL_ASSERT(static_cast<int>(block_tile.size()) == sink.num_spatial(), "sink tile rank");
  plan.num_tiles = 1;
  for (int a = 0; a < sink.num_spatial(); ++a) {
    const int64_t e = sink.axes()[a].extent;
    const int64_t t = std::max<int64_t>(1, std::min(block_tile[a], e));
    plan.sink_tile.push_back(t);
    plan.grid.push_back(e == 0 ? 0 : (e + t - 1) / t);
    plan.num_tiles *= plan.grid.back();
  }
  const GroupFootprint fp = group_footprint(graph, group, spec);
  int64_t threads = std::max<int64_t>(fp.threads_per_block, plan.warp);
  threads = (threads + plan.warp - 1) / plan.warp * plan.warp;
  if (wide_block) threads = spec.limits.max_threads_per_block;  // lanes for the shared sums (step 6)
  threads = std::min<int64_t>(threads, spec.limits.max_threads_per_block / plan.warp * plan.warp);
  plan.threads = static_cast<int>(threads);

  // 3. Buffer sizes: the largest box of every staged node over all tiles. When every other node
  //    is inlined only the sink's box is used (its threads' index type, its reduction lanes), and
  //    tile 0's is the largest (only the last tile of an axis is clipped): one tile's boxes
  //    instead of every tile's (an elementwise chain over 2^26 elements has 65536 tiles: 40 ms).
  const bool only_sink = std::all_of(plan.nodes.begin(), plan.nodes.end() - 1,
                                     [](const NodePlan& p) { return p.role == NodeRole::inlined; });
  const int64_t sized_tiles = only_sink ? std::min<int64_t>(plan.num_tiles, 1) : plan.num_tiles;
  for (int64_t t = 0; t < sized_tiles; ++t) {
    const std::vector<TileBox> boxes = tile_boxes(graph, plan, t);
    for (int i = 0; i < n; ++i) plan.nodes[i].capacity = std::max(plan.nodes[i].capacity, boxes[i].volume());
  }

  // 4. Lifetimes: a staged buffer lives from its node to the last staged node or sink that reads
  //    it, directly or through inlined nodes.
  std::vector<int> reader_step(n, -1);  // for inlined nodes: the step that evaluates them
  for (int i = n - 1; i >= 0; --i) {
    NodePlan& p = plan.nodes[i];
    const int step = p.role == NodeRole::inlined ? reader_step[i] : i;
    p.first_step = i;
    for (int j = 0; j < i; ++j) {
      const TensorId tj = graph.node_output(plan.nodes[j].node);
      const std::vector<TensorId>& ins = graph.node_inputs(p.node);
      if (std::find(ins.begin(), ins.end(), tj) == ins.end()) continue;
      reader_step[j] = std::max(reader_step[j], step);
    }
  }
  for (int i = 0; i < n; ++i) {
    NodePlan& p = plan.nodes[i];
    p.last_step = std::max(i, reader_step[i]);
  }

  // 5. Pool: first fit, largest first, over lifetimes (like plan_buffers).
  constexpr int64_t kAlign = 16;  // the widest element a buffer holds, and 16-byte vector access
  std::vector<int> order;
  for (int i = 0; i < n; ++i)
    if (plan.nodes[i].role == NodeRole::staged) order.push_back(i);
  auto bytes_of = [&](int i) {
    const int64_t b = plan.nodes[i].capacity * dtype_bytes(graph.node(plan.nodes[i].node).output().dtype);
    return (b + kAlign - 1) / kAlign * kAlign;
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bytes_of(a) > bytes_of(b); });
  std::vector<int> placed;
  for (int i : order) {
    NodePlan& p = plan.nodes[i];
    const int64_t size = bytes_of(i);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int j : placed) {
      const NodePlan& q = plan.nodes[j];
      if (q.first_step <= p.last_step && p.first_step <= q.last_step) busy.emplace_back(q.pool_offset, q.pool_offset + bytes_of(j));
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto [b, e] : busy) {
      if (offset + size <= b) break;
      offset = std::max(offset, e);
    }
    p.pool_offset = offset;
    plan.pool_bytes = std::max(plan.pool_bytes, offset + size);
    placed.push_back(i);
  }

  // 6. Reduction lanes: spread a node's reduction over several threads per output point when
  //    its box has fewer points than the block has threads.
  bool cross_warp = false;
  for (int i = 0; i < n; ++i) {
    NodePlan& p = plan.nodes[i];
    const TeNode& node = graph.node(p.node);
    if (p.role == NodeRole::inlined || node.num_reduction() == 0) continue;
    int64_t r = 1;
    for (int a = node.num_spatial(); a < node.num_axes(); ++a) r *= node.axes()[a].extent;
    const int64_t points = std::max<int64_t>(1, p.capacity);
    const int64_t lanes = std::min({floor_pow2(std::max<int64_t>(1, plan.threads / points)), floor_pow2(r),
                                    floor_pow2(plan.threads)});
    p.lanes = static_cast<int>(lanes);
    // Segments wider than a warp meet in shared memory: each must be whole within the block.
    while (p.lanes > plan.warp && plan.threads % p.lanes != 0) p.lanes /= 2;
    cross_warp |= p.lanes > plan.warp;
  }
  if (cross_warp) plan.reduce_scratch_bytes = static_cast<int64_t>(plan.threads / plan.warp) * 8;

  // 7. Where the pool lives, and the launch size.
  plan.pool_in_smem = plan.pool_bytes + plan.reduce_scratch_bytes <= spec.limits.smem_per_block_bytes;
  plan.blocks = plan.num_tiles;
  if (!plan.pool_in_smem) {
    const int64_t per_sm = std::max<int64_t>(1, spec.limits.max_threads_per_sm / plan.threads);
    plan.blocks = std::min(plan.num_tiles, spec.compute.units * per_sm);
  }

  // 8. Parameters: tensors read from and written to device memory.
  std::set<TensorId> seen;
  for (const NodePlan& p : plan.nodes)
    for (TensorId t : graph.node_inputs(p.node)) {
      const int j = plan.position(graph.producer(t));
      if (j >= 0 || seen.count(t)) continue;
      seen.insert(t);
      plan.inputs.push_back(t);
    }
  for (const NodePlan& p : plan.nodes)
    if (p.writes_global) plan.outputs.push_back(graph.node_output(p.node));
  return plan;
}

GroupPlan inlined_launch_plan(const GroupPlan& generic, int64_t blocks, int threads) {
  GroupPlan plan = generic;
  for (NodePlan& np : plan.nodes) {
    if (np.role != NodeRole::sink) np.role = NodeRole::inlined;
    np.capacity = 0;
    np.pool_offset = 0;
    np.lanes = 1;
    np.first_step = np.last_step = 0;
  }
  plan.sink_tile.assign(generic.sink_tile.size(), 1);
  plan.grid = {blocks};
  plan.num_tiles = blocks;
  plan.blocks = blocks;
  plan.threads = threads;
  plan.pool_bytes = 0;
  plan.pool_in_smem = true;
  plan.reduce_scratch_bytes = 0;
  return plan;
}

std::string print_group_plan(const OpGraph& graph, const GroupPlan& plan) {
  std::string out = cat("grid ", plan.num_tiles, " tiles (");
  for (size_t a = 0; a < plan.grid.size(); ++a) out += cat(a ? "x" : "", plan.grid[a]);
  out += cat(") of ");
  for (size_t a = 0; a < plan.sink_tile.size(); ++a) out += cat(a ? "x" : "", plan.sink_tile[a]);
  out += cat("; ", plan.blocks, " blocks of ", plan.threads, " threads",
             plan.cluster_blocks > 1 ? cat(" in clusters of ", plan.cluster_blocks) : std::string(), "; pool ",
             plan.pool_bytes, " bytes in ",
             plan.pool_in_smem ? "shared memory" : "global scratch", "\n");
  for (const NodePlan& p : plan.nodes) {
    out += cat("  ", graph.node(p.node).name(), ": ", node_role_name(p.role));
    if (p.role == NodeRole::staged) out += cat(", ", p.capacity, " elements at byte ", p.pool_offset, ", steps ", p.first_step, "..", p.last_step);
    if (p.lanes > 1) out += cat(", ", p.lanes, " lanes per point");
    if (p.writes_global) out += ", writes device memory";
    out += "\n";
  }
  return out;
}

}  // namespace tessel::cuda
