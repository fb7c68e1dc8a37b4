#include "cost_model/group_footprint.h"

#include <algorithm>
#include <cstdlib>

#include "tilegraph/attention_pattern.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"
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

std::optional<StreamedAttention> streamed_attention(const OpGraph& graph, const ScheduledGroup& group, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<StreamedAttention> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (group.nodes.empty()) return fail("empty group");
  const NodeId sink = group.nodes.back();
  std::string reason;
  const std::optional<AttentionPattern> p = match_attention_to(graph, sink, &reason);
  if (!p) return fail(cat("not an attention pattern: ", reason));
  std::vector<NodeId> want = p->nodes(graph), have = group.nodes;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  if (want != have) return fail("the group's nodes are not exactly the attention pattern ending at its sink");
  // (O's tile is the kernel's block, also where output copies follow it.)
  auto it = group.tiles.find(p->out);
  if (it == group.tiles.end() || it->second.levels.empty()) return fail("no tile config for the attention output");
  const TileConfig& cfg = it->second;
  const TeNode& o = graph.node(p->out);
  const TeNode& s = graph.node(p->scores);
  const int ns = o.num_spatial();
  const std::vector<int64_t>& tile = cfg.levels.front().spatial;
  StreamedAttention a;
  a.scores = p->scores;
  a.out = p->out;
  a.rows = tile[ns - 2];
  a.chunk = group.stream_chunk;
  a.d = s.axes()[s.num_spatial()].extent;
  a.dv = o.axes()[ns - 1].extent;
  a.d_tile = streamed_head_tile(a.d);
  a.dv_tile = streamed_head_tile(a.dv);
  a.threads = 1;
  for (int64_t t : cfg.threads) a.threads *= t;
  a.stages = cfg.pipeline_stages;
  a.elem_bytes = dtype_bytes(s.inputs()[0].type.dtype);
  a.queries = o.axes()[ns - 2].extent;
  a.keys = o.axes()[ns].extent;
  for (int i = 0; i < ns - 2; ++i) {
    if (tile[i] != 1) return fail(cat("the attention output's block tile spans ", tile[i], " points of batch axis ", i, " (1 is streamed)"));
    a.batch *= o.axes()[i].extent;
  }
  if (tile[ns - 1] < a.dv) return fail(cat("the attention output's block tile covers ", tile[ns - 1], " of the ", a.dv, " output columns"));
  if (a.chunk <= 0 || a.rows <= 0 || a.stages < 1) return fail("empty chunk, rows or stages");
  return a;
}

std::optional<std::string> streamed_attention_unsupported(const OpGraph& graph, const AttentionPattern& p, const HwSpec& spec) {
  // Facts of the instructions the streamed kernel uses (device/flash.cuh), not of a chip.
  constexpr int kLanes = 32;
  constexpr MmaShape kShape{16, 8, 16};
  if (spec.kind != "gpu" || spec.target.backend != "cuda") return cat(spec.name, " is not a CUDA GPU");
  for (const char* feature : {"mma_sync", "cp_async", "ldmatrix"})
    if (!spec.target.has_gpu_feature(feature))
      return cat("spec '", spec.name, "' lists no ", feature, " (target.gpu_features): the streamed kernel needs mma_sync, cp_async and ldmatrix");
  if (spec.compute.simd_width != kLanes) return cat("warp width ", spec.compute.simd_width, " is not mma.sync's ", kLanes);
  const TeNode& s = graph.node(p.scores);
  const TeNode& o = graph.node(p.out);
  const DType dt = o.output().dtype;
  if (dt != DType::f16 && dt != DType::bf16) return cat("'", o.name(), "' is ", dtype_name(dt), " (the streamed kernel takes f16 and bf16)");
  for (const TeNode* n : {&s, &o, &graph.node(p.probs)})
    if (n->output().dtype != dt) return cat("'", n->name(), "' is ", dtype_name(n->output().dtype), ", not ", dtype_name(dt));
  for (const TeNode* n : {&s, &o})
    for (const Access& a : n->inputs())
      if (a.type.dtype != dt) return cat("an operand of '", n->name(), "' is ", dtype_name(a.type.dtype), ", not ", dtype_name(dt));
  auto shapes = spec.compute.tensor_core_shapes.find(dt);
  if (shapes == spec.compute.tensor_core_shapes.end() ||
      std::find(shapes->second.begin(), shapes->second.end(), kShape) == shapes->second.end())
    return cat("spec '", spec.name, "' lists no m16n8k16 tensor-core shape for ", dtype_name(dt));
  const int64_t d = s.axes()[s.num_spatial()].extent, dv = o.axes()[o.num_spatial() - 1].extent;
  for (int64_t h : {d, dv})
    if (h <= 0 || h * dtype_bytes(dt) % kStreamedHeadAlignBytes != 0 || h > kStreamedMaxHead)
      return cat("head dimension ", h, " is not a multiple of ", kStreamedHeadAlignBytes / dtype_bytes(dt), " up to ", kStreamedMaxHead);
  return std::nullopt;
}

int64_t streamed_head_tile(int64_t h) {
  int64_t t = 16;
  while (t < h) t *= 2;
  return t;
}

GroupFootprint group_footprint(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  const bool gpu = spec.kind == "gpu";
  GroupFootprint out;
  if (group.stream_chunk > 0) {
    if (const std::optional<StreamedAttention> a = streamed_attention(graph, group)) {
      out.smem_bytes_per_block = a->smem_bytes();
      out.register_bytes_per_thread = a->register_bytes_per_thread();
      out.threads_per_block = a->threads;
    }
    return out;  // check_schedule reports a malformed streamed group
  }
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
      const TileFootprint fp = tile_kind_of(cfg).footprint(graph.node(n), lt, TrafficParams{1, 0, cfg.pipeline_stages}, cfg.kind);
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
