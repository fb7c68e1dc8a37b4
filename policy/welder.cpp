// The welder policy (welder.h): greedy graph connecting over roller's single-node schedule.
//
// Steps of WelderPolicy::schedule:
//   1. Roller candidates for every node, cached per node signature (the node's text without its
//      name: the twelve layers of a BERT share one set of candidates per operator).
//   2. One group per node with its best candidate.
//   3. Every producer -> consumer edge in topological order (producer first, then consumer): try
//      to merge the producer's group into the consumer's group (price_merge), keep the merge if
//      the fused group is predicted faster than the two apart, else remember why not.
//   2b. Every attention pattern (tilegraph/attention_pattern.h) the spec's GPU can stream becomes
//      one streamed group (ScheduledGroup::stream_chunk: the flash-style kernel) when the cost
//      model predicts it faster than its nodes apart; such a group is sealed (step 3 merges
//      nothing into it: its kernel is a fixed template).
//   3b. With a measurer (RollerOptions::measurer, `--tune K`): each group's tilings ranked by the
//      cost model and the K best measured; the fastest measured is kept (Welder::tune, tune.h).
//   4. Groups in a dependence-respecting order; every edge still crossing groups is recorded as
//      unfused with its reason.
//
// Pricing a merge is memoized on the merged group's structure (node signatures, in-group edges
// and their levels, which outputs leave the group), so repeated layers are priced once.
#include "policy/welder.h"

#include "cost_model/group_footprint.h"

#include "policy/check_schedule.h"
#include "policy/measure_cache.h"
#include "policy/policy_options.h"
#include "policy/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include "tilegraph/attention_pattern.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_propagation.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Halvings of a sink tile tried after a capacity failure (a policy choice: 3 halvings reach an
// eighth of the tile, past which the roller candidates of the nodes apart are better anyway).
constexpr int kMaxShrinks = 3;
// The streamed attention kernel's shape (a policy choice, kernels/cuda/README.md): 128 query rows
// per block, 16 per warp (mma.sync's m16), keys in chunks of 64, K and V double buffered.
constexpr int64_t kStreamRows = 128, kStreamRowsPerWarp = 16, kStreamChunk = 64;
constexpr int kStreamStages = 2;

std::string format_us(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f us", seconds * 1e6);
  return buf;
}

std::string format_kib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buf;
}

std::string join_extents(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "x" : "") + std::to_string(v[i]);
  return out.empty() ? "-" : out;
}

// The node's text without its name: equal signatures mean equal candidates and equal costs.
std::string node_signature(const TeNode& node) {
  std::string text = print_node(node, {}, "");
  const std::string marker = cat("node \"", node.name(), "\"");
  if (auto at = text.find(marker); at != std::string::npos) text.erase(at, marker.size());
  return text;
}

// True if `consumer` reads input `k` element for element along its own spatial axes (no
// broadcast, transpose, stride, halo or reduction): the same thread can keep the element in a
// register from producer to consumer.
bool reads_identity(const TeNode& consumer, int k) {
  const Access& in = consumer.inputs()[k];
  if (in.is_gather() || in.map.num_results() != consumer.num_spatial()) return false;
  for (int r = 0; r < in.map.num_results(); ++r) {
    const AffineExpr& e = in.map.result(r);
    if (e.offset != 0) return false;
    for (int a = 0; a < consumer.num_axes(); ++a)
      if (e.coeffs[a] != (a == r ? 1 : 0)) return false;
    if (in.type.shape[r] != consumer.axes()[r].extent) return false;
  }
  return true;
}

// The producer's output is its spatial domain unchanged (no reshape reinterpretation).
bool output_is_domain(const TeNode& node) {
  const std::vector<int64_t>& shape = node.output().shape;
  if (static_cast<int>(shape.size()) != node.num_spatial()) return false;
  for (int a = 0; a < node.num_spatial(); ++a)
    if (shape[a] != node.axes()[a].extent) return false;
  return true;
}

bool same_thread_mapping(const TileConfig& a, const TileConfig& b) {
  if (a.threads != b.threads || a.levels.size() != b.levels.size()) return false;
  for (size_t i = 0; i < a.levels.size(); ++i)
    if (a.levels[i].spatial != b.levels[i].spatial || a.levels[i].level != b.levels[i].level) return false;
  return true;
}

// A group of the schedule being built.
struct Group {
  std::vector<NodeId> nodes;  // topological order, sink last
  ScheduledGroup scheduled;
  CostBreakdown predicted;
  bool alive = true;
  bool sealed = false;  // a streamed attention group (step 2b)
  std::optional<double> measured_s;  // step 3b (tuning)
  std::vector<TuneTrial> trials;
};

// What pricing one proposed group gave, by node position in the group (so that it can be reused
// for a structurally identical group elsewhere in the graph).
struct MergeResult {
  bool ok = false;
  std::vector<TileConfig> tiles;          // per position
  std::vector<std::string> edge_levels;   // per in-group tensor, in tensor_order
  CostBreakdown predicted;
  UnfusedReason reason = UnfusedReason::grid;
  std::string detail;                      // names as in `names`
  std::vector<std::string> names;          // node and output tensor names it was computed with
};

class Welder {
 public:
  Welder(const PolicyContext& ctx, const WelderOptions& options) : ctx_(ctx), options_(options) {
    const OpGraph& g = ctx_.graph;
    topo_ = g.topological_order();
    pos_.assign(g.num_nodes(), -1);
    for (size_t i = 0; i < topo_.size(); ++i) pos_[topo_[i]] = static_cast<int>(i);
    sig_.resize(g.num_nodes());
    std::map<std::string, int> ids;
    for (NodeId n = 0; n < g.num_nodes(); ++n) sig_[n] = ids.emplace(node_signature(g.node(n)), ids.size()).first->second;
    candidates_.resize(ids.size());
    has_candidates_.assign(ids.size(), false);
    register_level_ = ctx_.spec.memory_levels.empty() ? "" : ctx_.spec.memory_levels.front().name;
    for (const std::string& l : options_.edge_levels) {
      const int i = ctx_.spec.level_index(l);
      if (i < 0) continue;
      const MemoryLevel& level = ctx_.spec.memory_levels[i];
      // On a CPU an intermediate staged in a per-thread scratch buffer stays in the core's
      // private cache it fits in: such a level counts as managed by the code.
      const bool private_cache = ctx_.spec.kind == "cpu" && level.scope == MemoryScope::core && level.cache && !level.cache->shared;
      if (level.software_managed || private_cache) levels_.push_back(l);
    }
  }

  Schedule run();

 private:
  const std::vector<TileCandidate>& candidates(NodeId n);
  TileConfig fallback_config(NodeId n) const;
  std::optional<std::string> precheck(const Group& p, const Group& c, NodeId producer, NodeId consumer) const;
  std::optional<ScheduledGroup> streamed_group(const AttentionPattern& p) const;
  std::string structure_key(const std::vector<NodeId>& nodes, const std::map<TensorId, std::string>& levels,
                            const std::set<TensorId>& fresh) const;
  // With `scan`: every legal priced tiling is also appended to scan->variants, the sink tiles
  // drawn from the tuning candidates (tune_candidates) up to scan->sink_tiles of each.
  struct TuneScan {
    int sink_tiles = 0;
    std::vector<GroupVariant>* variants = nullptr;
  };
  MergeResult price(const std::vector<NodeId>& nodes, const std::map<TensorId, std::string>& base_levels,
                    const std::set<TensorId>& fresh, const TuneScan* scan = nullptr) const;
  const std::vector<TileCandidate>& tune_candidates(NodeId n) const;
  void tune(Group& group) const;
  std::optional<TileConfig> derive_config(NodeId n, const std::vector<int64_t>& extent, const TileConfig& sink_cfg,
                                          const TileConfig* own_template) const;
  std::optional<std::string> over_capacity(const ScheduledGroup& g) const;
  std::vector<TensorId> tensor_order(const std::vector<NodeId>& nodes) const;
  bool leaves(NodeId n, const std::vector<NodeId>& nodes) const;

  const PolicyContext& ctx_;
  const WelderOptions& options_;
  std::vector<NodeId> topo_;
  std::vector<int> pos_;
  std::vector<int> sig_;
  mutable std::vector<std::vector<TileCandidate>> candidates_;
  mutable std::vector<bool> has_candidates_;
  mutable std::map<int, std::vector<TileCandidate>> tune_candidates_;  // by signature (tuning only)
  std::string register_level_;
  std::vector<std::string> levels_;  // options_.edge_levels the spec has and software manages
  mutable std::unordered_map<std::string, MergeResult> memo_;
  MeasureCache* tune_cache_ = nullptr;  // step 3b, with a measurer
};

const std::vector<TileCandidate>& Welder::candidates(NodeId n) {
  const int s = sig_[n];
  if (!has_candidates_[s]) {
    candidates_[s] = roller_candidates(ctx_.graph, n, ctx_.spec, ctx_.cost, options_.roller);
    has_candidates_[s] = true;
  }
  return candidates_[s];
}

// A node no roller candidate fits: one level, unit tiles, unmapped threads (priced as it is).
TileConfig Welder::fallback_config(NodeId n) const {
  const TeNode& node = ctx_.graph.node(n);
  std::string level = register_level_;
  for (const MemoryLevel& l : ctx_.spec.memory_levels)
    if (l.software_managed) level = l.name;
  TileConfig c;
  c.levels = {LevelTile{level, std::vector<int64_t>(node.num_spatial(), 1), std::vector<int64_t>(node.num_reduction(), 1)}};
  return c;
}

// In-group tensors of `nodes` (produced and consumed inside), ordered by producer position.
std::vector<TensorId> Welder::tensor_order(const std::vector<NodeId>& nodes) const {
  std::vector<TensorId> out;
  for (NodeId n : nodes) {
    const TensorId t = ctx_.graph.node_output(n);
    for (NodeId c : ctx_.graph.consumers(t))
      if (std::find(nodes.begin(), nodes.end(), c) != nodes.end()) {
        out.push_back(t);
        break;
      }
  }
  return out;
}

// Whether node n's output is needed outside the group (a graph output or read by another group).
bool Welder::leaves(NodeId n, const std::vector<NodeId>& nodes) const {
  const TensorId t = ctx_.graph.node_output(n);
  for (TensorId o : ctx_.graph.outputs())
    if (o == t) return true;
  for (NodeId c : ctx_.graph.consumers(t))
    if (std::find(nodes.begin(), nodes.end(), c) == nodes.end()) return true;
  return false;
}

// Conditions checked before pricing; the reason (a `policy` detail) when the merge is not tried.
std::optional<std::string> Welder::precheck(const Group& p, const Group& c, NodeId producer, NodeId consumer) const {
  const OpGraph& g = ctx_.graph;
  const size_t size = p.nodes.size() + c.nodes.size();
  if (static_cast<int>(size) > options_.max_group_nodes)
    return cat("the fused group would have ", size, " nodes, limit ", options_.max_group_nodes, " (WelderOptions::max_group_nodes)");
  auto in = [](const Group& gr, NodeId n) { return std::find(gr.nodes.begin(), gr.nodes.end(), n) != gr.nodes.end(); };
  if (p.sealed || c.sealed)
    return cat("'", g.node(p.sealed ? producer : consumer).name(),
               "' is in a streamed attention group, a fixed kernel template that nothing else joins");
  const TensorId t = g.node_output(producer);
  for (NodeId other : g.consumers(t))
    if (!in(p, other) && !in(c, other))
      return cat("'", g.tensor(t).name, "' also feeds '", g.node(other).name(), "' outside the group of '",
                 g.node(consumer).name(), "'; welder fuses a producer only with all of its consumers (no recomputation)");
  // A path P -> X -> C through another group would make the merged group and X depend on each
  // other. Search forward from P's outputs outside P and C, up to C's last node.
  int limit = -1;
  for (NodeId n : c.nodes) limit = std::max(limit, pos_[n]);
  std::vector<bool> seen(g.num_nodes(), false);
  std::vector<NodeId> stack;
  for (NodeId n : p.nodes)
    for (NodeId x : g.consumers(g.node_output(n)))
      if (!in(p, x) && !in(c, x) && !seen[x]) seen[x] = true, stack.push_back(x);
  while (!stack.empty()) {
    const NodeId x = stack.back();
    stack.pop_back();
    if (pos_[x] > limit) continue;
    for (NodeId y : g.consumers(g.node_output(x))) {
      if (in(c, y))
        return cat("fusing would create a cycle: '", g.node(x).name(), "' (another group) depends on the producer's group and feeds '",
                   g.node(y).name(), "'");
      if (!seen[y]) seen[y] = true, stack.push_back(y);
    }
  }
  return std::nullopt;
}

// Structure of a proposed group, independent of node ids: per node its signature, where each
// input comes from (a position in the group or outside) and at which level, and whether its output
// leaves the group. Two groups with equal keys price identically.
std::string Welder::structure_key(const std::vector<NodeId>& nodes, const std::map<TensorId, std::string>& levels,
                                  const std::set<TensorId>& fresh) const {
  const OpGraph& g = ctx_.graph;
  std::string key;
  for (NodeId n : nodes) {
    key += cat(sig_[n], "(");
    for (TensorId t : g.node_inputs(n)) {
      const NodeId p = g.producer(t);
      auto it = std::find(nodes.begin(), nodes.end(), p);
      if (p < 0 || it == nodes.end()) {
        key += "x,";
      } else {
        auto l = levels.find(t);
        key += cat(it - nodes.begin(), fresh.count(t) ? "*" : (l == levels.end() ? "?" : l->second), ",");
      }
    }
    key += leaves(n, nodes) ? ")o;" : ");";
  }
  return key;
}

// The first capacity limit of the spec the group's tiles break, with the numbers, or nullopt.
// The same accounting as the cost model and check_schedule: on a GPU the innermost level's tiles
// are per-thread registers and the other software-managed block/SM-scoped levels' tiles are shared
// memory per block; on a CPU every level's tiles must fit that level.
std::optional<std::string> Welder::over_capacity(const ScheduledGroup& g) const {
  const HwSpec& spec = ctx_.spec;
  const bool gpu = spec.kind == "gpu";
  const GroupFootprint fp = group_footprint(ctx_.graph, g, spec);
  const int64_t register_bytes = fp.register_bytes_per_thread, smem_bytes = fp.smem_bytes_per_block;
  const std::map<int, int64_t>& level_bytes = fp.level_bytes;
  if (gpu) {
    const LimitSpec& lim = spec.limits;
    if (smem_bytes > lim.smem_per_block_bytes)
      return cat("needs ", format_kib(smem_bytes), " shared memory per block, limit ", format_kib(lim.smem_per_block_bytes));
    // The kernel's block has as many threads as its widest node needs.
    const int64_t threads = std::max<int64_t>(fp.threads_per_block, spec.compute.simd_width);
    const int64_t regs = (register_bytes + 3) / 4;  // 32-bit registers
    if (regs > lim.max_registers_per_thread)
      return cat("needs ", regs, " registers per thread for its register tiles, limit ", lim.max_registers_per_thread);
    if (regs * threads > lim.registers_per_sm)
      return cat("needs ", regs, " registers x ", threads, " threads per block, more than the ", lim.registers_per_sm, " of an SM");
    if (threads > lim.max_threads_per_block)
      return cat("needs ", threads, " threads per block, limit ", lim.max_threads_per_block);
  }
  int device = static_cast<int>(spec.memory_levels.size()) - 1;
  while (device > 0 && spec.memory_levels[device].scope == MemoryScope::host) --device;
  for (const auto& [li, bytes] : level_bytes) {
    const MemoryLevel& level = spec.memory_levels[li];
    if (level.scope == MemoryScope::host || li >= device) continue;
    if (bytes > level.capacity_bytes)
      return cat("needs ", format_kib(bytes), " of tiles at level '", level.name, "', capacity ", format_kib(level.capacity_bytes));
  }
  return std::nullopt;
}

// The tile config of a non-sink node computing the spatial box `extent` per sink tile. Reuses a
// config with that exact outer extent when there is one (the node's own candidate, or the sink's
// when the shapes agree, so an elementwise chain keeps one thread mapping); otherwise spreads the
// sink's threads over the box, innermost axis first, and gives each thread the rest.
std::optional<TileConfig> Welder::derive_config(NodeId n, const std::vector<int64_t>& extent, const TileConfig& sink_cfg,
                                                const TileConfig* own_template) const {
  const TeNode& node = ctx_.graph.node(n);
  const int ns = node.num_spatial(), nr = node.num_reduction();
  const std::vector<TileCandidate>& own = candidates_[sig_[n]];
  // Outer reduction steps: the node's own best candidate's (its staging of the reduction loop).
  std::vector<int64_t> steps(nr, 1);
  if (!own.empty()) steps = own.front().tiles.levels.front().reduction;
  auto valid = [&](TileConfig& c) -> bool {
    if (!check_tile(node, c)) return true;
    c.vector_width = 1;
    return !check_tile(node, c);
  };
  std::vector<const TileConfig*> templates;
  if (own_template) templates.push_back(own_template);
  templates.push_back(&sink_cfg);
  for (const TileCandidate& c : own) templates.push_back(&c.tiles);
  for (const TileConfig* t : templates) {
    if (t->levels.empty() || t->levels.front().spatial != extent) continue;
    TileConfig c = *t;
    const bool own_steps = static_cast<int>(c.levels.front().reduction.size()) == nr && t != &sink_cfg;
    if (!own_steps)
      for (size_t i = 0; i < c.levels.size(); ++i) c.levels[i].reduction = i == 0 ? steps : std::vector<int64_t>(nr, 1);
    if (valid(c)) return c;
  }
  TileConfig c;
  c.pipeline_stages = own.empty() ? 1 : own.front().tiles.pipeline_stages;
  c.levels.push_back(LevelTile{sink_cfg.levels.front().level, extent, steps});
  if (!sink_cfg.threads.empty() && ns > 0) {
    int64_t remaining = std::accumulate(sink_cfg.threads.begin(), sink_cfg.threads.end(), int64_t{1}, std::multiplies<>());
    c.threads.assign(ns, 1);
    for (int a = ns - 1; a >= 0; --a) {
      c.threads[a] = std::gcd(extent[a], remaining);
      remaining /= c.threads[a];
    }
    if (sink_cfg.levels.size() >= 2) {
      std::vector<int64_t> inner(ns);
      for (int a = 0; a < ns; ++a) inner[a] = extent[a] / c.threads[a];
      c.levels.push_back(LevelTile{sink_cfg.levels.back().level, inner, std::vector<int64_t>(nr, 1)});
    }
  }
  if (valid(c)) return c;
  c.levels.resize(1);
  c.threads.clear();
  if (valid(c)) return c;
  return std::nullopt;
}

// The streamed group of attention pattern `p` (step 2b): per node a tile of one chunk -- O a
// block of kStreamRows query rows by the whole dv, the scores' nodes kStreamRows x kStreamChunk,
// the row max and sum kStreamRows x 1 over a chunk, the operand copies and the output copies (O's
// store, in the layout they give it) a chunk of their domain --
// threads one warp per kStreamRowsPerWarp rows; scores, softmax values and probabilities in
// registers, the copied operands in the next level out. Fewer queries than kStreamRows (decoding:
// 1 to 16) take a block of their own count rounded up to whole warps, not 128 rows of which most
// would be computed for nothing. Nullopt when the spec lacks the levels.
std::optional<ScheduledGroup> Welder::streamed_group(const AttentionPattern& p) const {
  const OpGraph& g = ctx_.graph;
  const int64_t warp = ctx_.spec.compute.simd_width;
  if (levels_.size() < 2 || warp <= 0) return std::nullopt;
  const std::string& regs = register_level_;
  const std::string& block = levels_[1];
  const TeNode& o = g.node(p.out);
  const int64_t queries = o.axes()[o.num_spatial() - 2].extent;
  const int64_t block_rows = std::min(kStreamRows, (queries + kStreamRowsPerWarp - 1) / kStreamRowsPerWarp * kStreamRowsPerWarp);
  const int64_t warps = block_rows / kStreamRowsPerWarp;
  ScheduledGroup sg;
  sg.nodes = p.nodes(g);
  sg.stream_chunk = kStreamChunk;
  // A config over (batch.., rows, cols | reduction): `rows` split over the warps, `cols` over a
  // warp's lanes when it can be, else one lane column.
  auto config = [&](const TeNode& node, int64_t rows, int64_t cols, int64_t reduction) {
    const int ns = node.num_spatial();
    TileConfig c;
    LevelTile outer{block, std::vector<int64_t>(ns, 1), std::vector<int64_t>(node.num_reduction(), reduction)};
    outer.spatial[ns - 2] = rows;
    outer.spatial[ns - 1] = cols;
    c.threads.assign(ns, 1);
    int64_t lanes = cols % warp == 0 ? warp : 1, row_threads = rows % warps == 0 ? warps : 1;
    // The sink's block is the kernel's warps x lanes even when dv is not whole warps of columns
    // (a head of 40: 8 columns by 32 rows of threads).
    if (cols > 1 && lanes == 1 && rows % (warps * warp / std::gcd(cols, warp)) == 0) {
      lanes = std::gcd(cols, warp);
      row_threads = warps * warp / lanes;
    }
    c.threads[ns - 2] = row_threads;
    c.threads[ns - 1] = lanes;
    LevelTile inner{regs, std::vector<int64_t>(ns, 1), std::vector<int64_t>(node.num_reduction(), reduction)};
    inner.spatial[ns - 2] = rows / c.threads[ns - 2];
    inner.spatial[ns - 1] = cols / lanes;
    c.levels = {outer, inner};
    c.pipeline_stages = kStreamStages;
    return c;
  };
  const int64_t dv = o.axes()[o.num_spatial() - 1].extent;
  for (NodeId n : sg.nodes) {
    const TeNode& node = g.node(n);
    const int ns = node.num_spatial();
    if (n == p.out) {
      sg.tiles[n] = config(node, block_rows, dv, kStreamChunk);
    } else if (n == p.max || n == p.sum) {
      sg.tiles[n] = config(node, block_rows, 1, kStreamChunk);
    } else if (std::find(p.operand_copies.begin(), p.operand_copies.end(), n) != p.operand_copies.end() ||
               std::find(p.output_copies.begin(), p.output_copies.end(), n) != p.output_copies.end()) {
      // (An output copy is the kernel's store of O: a chunk of its domain likewise.)
      TileConfig c;
      LevelTile outer{block, std::vector<int64_t>(ns, 1), {}};
      for (int a = std::max(0, ns - 2); a < ns; ++a) outer.spatial[a] = std::min(node.axes()[a].extent, kStreamChunk);
      c.levels = {outer};
      sg.tiles[n] = c;
    } else {
      const int64_t d = node.num_reduction() ? node.axes()[ns].extent : 1;
      sg.tiles[n] = config(node, block_rows, kStreamChunk, d);
    }
    if (n == p.sink()) continue;
    const bool copy = std::find(p.operand_copies.begin(), p.operand_copies.end(), n) != p.operand_copies.end();
    sg.edge_levels[g.node_output(n)] = copy ? block : regs;  // (O and its output copies: the registers it is stored from)
  }
  return sg;
}

// Prices the group `nodes` (topological, sink last) with the tensors `fresh` newly inside it,
// trying each edge level and sink tile; the fastest legal one, or why none is.
MergeResult Welder::price(const std::vector<NodeId>& nodes, const std::map<TensorId, std::string>& base_levels,
                          const std::set<TensorId>& fresh, const TuneScan* scan) const {
  const OpGraph& g = ctx_.graph;
  const NodeId sink = nodes.back();
  const TeNode& sink_node = g.node(sink);
  const int ns = sink_node.num_spatial();
  const std::vector<TensorId> internal = tensor_order(nodes);

  MergeResult best;
  best.predicted.latency_s = kInfinity;
  for (NodeId n : nodes) best.names.push_back(g.node(n).name()), best.names.push_back(g.tensor(g.node_output(n)).name);
  std::string grid_reason, capacity_reason, mapping_reason;
  int64_t least_volume = -1;

  // Sink tiles: the sink's candidates, then those of the heaviest node sharing its spatial extents.
  struct SinkTile {
    TileConfig config;
    NodeId source;  // node whose candidate it is
    const TileConfig* source_config;
  };
  std::vector<SinkTile> sink_tiles;
  auto add_tiles = [&](NodeId from) {
    const std::vector<TileCandidate>& cands = scan ? tune_candidates(from) : candidates_[sig_[from]];
    const int limit = scan ? scan->sink_tiles : options_.sink_candidates;
    for (size_t i = 0; i < cands.size() && static_cast<int>(i) < limit; ++i) {
      TileConfig c = cands[i].tiles;
      if (from != sink)
        for (size_t l = 0; l < c.levels.size(); ++l) c.levels[l].reduction.assign(sink_node.num_reduction(), 1);
      if (check_tile(sink_node, c)) continue;
      bool dup = false;
      for (const SinkTile& s : sink_tiles) dup |= s.config == c;
      if (!dup) sink_tiles.push_back({c, from, &cands[i].tiles});
    }
  };
  add_tiles(sink);
  NodeId heaviest = sink;
  for (NodeId n : nodes)
    if (g.node(n).flops() > g.node(heaviest).flops()) heaviest = n;
  if (heaviest != sink) {
    std::vector<int64_t> a = g.node(heaviest).extents(), b = sink_node.extents();
    a.resize(g.node(heaviest).num_spatial());
    b.resize(ns);
    if (a == b) add_tiles(heaviest);
  }

  // Step 1: the grid of each sink tile (independent of the edge levels). When the group does not
  // share the tile's grid, try the tile widened to a whole axis (the last axis first): a
  // reduction feeding a consumer tiled along the reduced axis needs the whole axis per tile.
  struct Tiling {
    TileConfig sink_cfg;
    NodeId source;
    const TileConfig* source_config;
    int shrinks = 0;  // halvings applied after a capacity failure
  };
  std::vector<Tiling> tilings;
  for (const SinkTile& st : sink_tiles) {
    const std::vector<int64_t>& s = st.config.levels.front().spatial;
    GridCheck check = check_grid(g, nodes, sink, s);
    TileConfig cfg = st.config;
    if (!check.ok) {
      if (grid_reason.empty()) grid_reason = cat("sink tile ", join_extents(s), ": ", check.reason);
      bool found = false;
      for (int a = ns - 1; a >= 0 && !found; --a) {
        const int64_t extent = sink_node.axes()[a].extent;
        if (s[a] >= extent) continue;
        TileConfig wide = st.config;
        const int64_t unit = (wide.threads.empty() ? 1 : wide.threads[a]) *
                             (wide.levels.size() >= 2 ? wide.levels[1].spatial[a] : 1);
        wide.levels.front().spatial[a] = (extent + unit - 1) / unit * unit;
        if (check_tile(sink_node, wide)) continue;
        GridCheck retry = check_grid(g, nodes, sink, wide.levels.front().spatial);
        if (retry.ok) cfg = wide, found = true;
      }
      if (!found) continue;
    }
    bool dup = false;
    for (const Tiling& t : tilings) dup |= t.sink_cfg == cfg;
    if (!dup) tilings.push_back({cfg, st.source, st.source_config});
  }

  // A tiling over capacity is retried at half its largest axis that is not whole (the per-node
  // tiles of a fused group add up: a GEMM tile that fits alone may not fit with its epilogue).
  // Inner levels must keep dividing: halving an outer extent also halves the inner extents.
  auto shrink = [&](const Tiling& t) -> std::optional<Tiling> {
    if (t.shrinks >= kMaxShrinks) return std::nullopt;
    Tiling out = t;
    ++out.shrinks;
    TileConfig& c = out.sink_cfg;
    std::vector<int64_t>& outer = c.levels.front().spatial;
    // First choice: the same block tile on twice the threads, each with half the thread tile
    // along its largest even axis (keeps a GEMM's block tile and its tensor-core shape).
    if (c.levels.size() >= 2 && !c.threads.empty()) {
      std::vector<int64_t>& inner = c.levels.back().spatial;
      const int64_t threads = std::accumulate(c.threads.begin(), c.threads.end(), int64_t{1}, std::multiplies<>());
      int widest = -1;
      for (int a = 0; a < ns; ++a)
        if (inner[a] % 2 == 0 && (widest < 0 || inner[a] > inner[widest])) widest = a;
      if (widest >= 0 && c.levels.size() == 2 && threads * 2 <= ctx_.spec.limits.max_threads_per_block) {
        TileConfig more = c;
        more.levels.back().spatial[widest] /= 2;
        more.threads[widest] *= 2;
        if (!check_tile(sink_node, more) || (more.vector_width = 1, !check_tile(sink_node, more))) {
          c = more;
          return out;
        }
      }
    }
    int axis = -1;
    for (int a = 0; a < ns; ++a)
      if (outer[a] > 1 && outer[a] < sink_node.axes()[a].extent && (axis < 0 || outer[a] > outer[axis])) axis = a;
    if (axis < 0 || outer[axis] % 2 != 0) return std::nullopt;
    // Halve the inner tiles along the axis too (registers add up across the group like shared
    // memory does), keeping the thread mapping where the extents allow.
    outer[axis] /= 2;
    for (size_t l = 1; l < c.levels.size(); ++l) {
      int64_t& e = c.levels[l].spatial[axis];
      e = std::min(e % 2 == 0 ? e / 2 : e, outer[axis]);
    }
    const int64_t inner = c.levels.size() >= 2 ? c.levels.back().spatial[axis] : 1;
    if (!c.threads.empty()) {
      while (c.threads[axis] > 1 && outer[axis] % (c.threads[axis] * inner) != 0) c.threads[axis] /= 2;
    }
    if (check_tile(sink_node, c) && (c.vector_width = 1, check_tile(sink_node, c))) return std::nullopt;
    if (!check_grid(g, nodes, sink, outer).ok) return std::nullopt;
    return out;
  };

  // Step 2: per edge level and tiling, every node's config from the propagated tile, then price.
  std::vector<std::string> tried_levels;
  for (const std::string& level : levels_) {
    const bool registers = level == register_level_;
    if (registers) {
      bool identity = true;
      for (TensorId t : fresh) {
        identity &= output_is_domain(g.node(g.producer(t)));
        for (NodeId c : nodes)
          for (size_t k = 0; k < g.node_inputs(c).size(); ++k)
            if (g.node_inputs(c)[k] == t) identity &= reads_identity(g.node(c), static_cast<int>(k));
      }
      if (!identity) continue;
    }
    tried_levels.push_back(level);
    std::vector<Tiling> work = tilings;
    for (size_t w = 0; w < work.size(); ++w) {
      const Tiling tiling = work[w];
      ScheduledGroup sg;
      sg.nodes = nodes;
      sg.tiles[sink] = tiling.sink_cfg;
      const GroupPropagation prop =
          propagate_group(g, nodes, sink, representative_tile(sink_node, tiling.sink_cfg.levels.front(), true));
      if (!prop.ok) {
        if (grid_reason.empty()) grid_reason = prop.reason;
        continue;
      }
      bool ok = true;
      for (NodeId n : nodes) {
        if (n == sink) continue;
        const NodeTile* nt = prop.find(n);
        std::vector<int64_t> extent(nt->tile.extent.begin(), nt->tile.extent.begin() + g.node(n).num_spatial());
        auto cfg = derive_config(n, extent, tiling.sink_cfg, n == tiling.source ? tiling.source_config : nullptr);
        if (!cfg) {
          ok = false;
          if (mapping_reason.empty())
            mapping_reason = cat("no valid tile config for '", g.node(n).name(), "' computing ", join_extents(extent), " per tile");
          break;
        }
        sg.tiles[n] = *cfg;
      }
      if (!ok) continue;
      // Edge levels: fresh tensors at `level`; earlier register edges whose two ends no longer
      // share a thread mapping move to the next level out.
      for (TensorId t : internal) {
        auto it = base_levels.find(t);
        std::string l = fresh.count(t) || it == base_levels.end() ? level : it->second;
        if (l == register_level_) {
          const NodeId p = g.producer(t);
          bool same = true;
          for (NodeId c : g.consumers(t))
            if (sg.tiles.count(c)) same &= same_thread_mapping(sg.tiles[p], sg.tiles[c]);
          if (!same) {
            if (fresh.count(t) || levels_.size() < 2) {
              ok = false;
              if (mapping_reason.empty())
                mapping_reason = cat("'", g.tensor(t).name, "' at ", l, " needs producer and consumer on one thread mapping; the sink tile ",
                                     join_extents(tiling.sink_cfg.levels.front().spatial), " gives them different ones");
              break;
            }
            l = levels_[1];
          }
        }
        sg.edge_levels[t] = l;
      }
      if (!ok) continue;
      // Over a limit of the spec (or infinite for the cost model): try a smaller sink tile.
      std::optional<std::string> over = over_capacity(sg);
      if (!over) {  // the checker's per-group rules (alignment among them) are the last word
        const std::vector<std::string> problems = check_group(g, ctx_.spec, sg);
        if (!problems.empty()) over = problems.front();
      }
      CostBreakdown cost;
      if (!over) {
        cost = ctx_.cost.estimate(g, sg, ctx_.spec);
        if (!std::isfinite(cost.latency_s)) over = cost.notes.empty() ? "over a capacity limit" : cost.notes.back();
      }
      if (over) {
        if (auto smaller = shrink(tiling)) work.push_back(*smaller);
        // Report the candidate that came closest: the smallest sink tile tried.
        int64_t volume = 1;
        for (int64_t e : tiling.sink_cfg.levels.front().spatial) volume *= e;
        if (least_volume < 0 || volume < least_volume) {
          least_volume = volume;
          capacity_reason = cat("fused group (intermediate at ", level, ", sink tile ",
                                join_extents(tiling.sink_cfg.levels.front().spatial), ") ", *over);
        }
        continue;
      }
      if (scan) scan->variants->push_back({sg, cost});
      if (cost.latency_s < best.predicted.latency_s) {
        best.ok = true;
        best.predicted = cost;
        best.tiles.clear();
        for (NodeId n : nodes) best.tiles.push_back(sg.tiles[n]);
        best.edge_levels.clear();
        for (TensorId t : internal) best.edge_levels.push_back(sg.edge_levels[t]);
      }
    }
  }
  if (best.ok) return best;
  if (tried_levels.empty()) {
    best.reason = UnfusedReason::grid;
    best.detail = cat("a consumer reads the intermediate through a non-identity map (another thread mapping) and ",
                      ctx_.spec.name, " has no software-managed level for it other than ", register_level_);
  } else if (!capacity_reason.empty()) {
    best.reason = UnfusedReason::capacity;
    best.detail = capacity_reason;
  } else {
    best.reason = UnfusedReason::grid;
    best.detail = !grid_reason.empty() ? grid_reason + "; widening the tile to a whole axis did not help"
                                       : !mapping_reason.empty() ? mapping_reason : "no sink tile candidate";
  }
  return best;
}

// A node's candidates for tuning: roller's, with as many kept as the tuning measures.
const std::vector<TileCandidate>& Welder::tune_candidates(NodeId n) const {
  auto it = tune_candidates_.find(sig_[n]);
  if (it == tune_candidates_.end()) {
    RollerOptions wide = options_.roller;
    wide.top_k = std::max(wide.top_k, kTuneCandidatesPerMeasured * wide.tune);
    wide.exhaustive = true;
    it = tune_candidates_.emplace(sig_[n], roller_candidates(ctx_.graph, n, ctx_.spec, ctx_.cost, wide)).first;
  }
  return it->second;
}

// Measured top-k for one finished group (tune.h): its fusion and edge levels stay; its tilings
// -- every sink tile of the tuning candidates, propagated through the group -- are ranked by the
// cost model and the options' `tune` best measured. The group's own tiling stays the first.
void Welder::tune(Group& group) const {
  const RollerOptions& ro = options_.roller;
  std::vector<GroupVariant> variants;
  const TuneScan scan{kTuneCandidatesPerMeasured * std::max(ro.tune, 1), &variants};
  price(group.nodes, group.scheduled.edge_levels, {}, &scan);
  std::stable_sort(variants.begin(), variants.end(), [](const GroupVariant& a, const GroupVariant& b) {
    return a.predicted.latency_s < b.predicted.latency_s;
  });
  // Each edge level priced the same tilings again (no tensor is fresh): keep one of each.
  std::vector<GroupVariant> unique{{group.scheduled, group.predicted}};
  for (GroupVariant& v : variants) {
    bool dup = false;
    for (const GroupVariant& u : unique) dup |= u.group.tiles == v.group.tiles && u.group.edge_levels == v.group.edge_levels;
    if (!dup) unique.push_back(std::move(v));
  }
  ScheduleGroup out;
  measure_top_k(ctx_, *ro.measurer, *tune_cache_, "tune", unique, std::max(ro.tune, 1), out);
  group.scheduled = out.group;
  group.predicted = out.predicted;
  group.measured_s = out.measured_s;
  group.trials = std::move(out.trials);
}

Schedule Welder::run() {
  const OpGraph& g = ctx_.graph;
  Schedule out;
  out.policy = "welder";
  out.cost_model = std::string(ctx_.cost.name());
  out.hw_spec = ctx_.spec.name;
  out.hw_spec_hash = hw_spec_hash(ctx_.spec);

  // Steps 1-2: one group per node with its best roller candidate.
  std::vector<Group> groups;
  std::vector<int> group_of(g.num_nodes(), -1);
  for (NodeId n : topo_) {
    Group gr;
    gr.nodes = {n};
    gr.scheduled.nodes = {n};
    const std::vector<TileCandidate>& cands = candidates(n);
    if (!cands.empty()) {
      gr.scheduled.tiles[n] = cands.front().tiles;
      gr.predicted = cands.front().predicted;
    } else {
      gr.scheduled.tiles[n] = fallback_config(n);
      gr.predicted = ctx_.cost.estimate(g, gr.scheduled, ctx_.spec);
    }
    group_of[n] = static_cast<int>(groups.size());
    groups.push_back(std::move(gr));
  }

  // Step 2b: streamed attention groups.
  for (NodeId o : topo_) {
    const std::optional<AttentionPattern> pattern = match_attention(g, o);
    if (!pattern || streamed_attention_unsupported(g, *pattern, ctx_.spec)) continue;
    std::optional<ScheduledGroup> sg = streamed_group(*pattern);
    if (!sg) continue;
    bool alone = true;
    double apart = 0;
    for (NodeId n : sg->nodes) {
      alone &= groups[group_of[n]].nodes.size() == 1 && !groups[group_of[n]].sealed;
      apart += groups[group_of[n]].predicted.latency_s;
    }
    if (!alone || !check_group(g, ctx_.spec, *sg).empty()) continue;
    const CostBreakdown cost = ctx_.cost.estimate(g, *sg, ctx_.spec);
    if (!(cost.latency_s < apart)) continue;
    Group merged;
    merged.nodes = sg->nodes;
    merged.scheduled = *sg;
    merged.predicted = cost;
    merged.sealed = true;
    const int target = group_of[o];
    for (NodeId n : sg->nodes) {
      if (group_of[n] != target) groups[group_of[n]].alive = false;
      group_of[n] = target;
    }
    groups[target] = std::move(merged);
  }

  // Step 3: edges in topological order of the producer, then of the consumer. A merge can
  // unblock an edge visited before it (a producer whose consumers have since come together, as a
  // softmax's row max feeding both the row sum and the normalization), so passes repeat until
  // one merges nothing; a repeated pricing is a memo hit.
  std::map<std::pair<NodeId, NodeId>, std::pair<UnfusedReason, std::string>> why;
  for (bool merged_any = true; merged_any;) {
  merged_any = false;
  for (NodeId p : topo_) {
    std::vector<NodeId> consumers = g.consumers(g.node_output(p));
    std::sort(consumers.begin(), consumers.end(), [&](NodeId a, NodeId b) { return pos_[a] < pos_[b]; });
    for (NodeId c : consumers) {
      const int gp = group_of[p], gc = group_of[c];
      if (gp == gc) continue;
      Group& P = groups[gp];
      Group& C = groups[gc];
      if (auto reason = precheck(P, C, p, c)) {
        why[{p, c}] = {UnfusedReason::policy, *reason};
        continue;
      }
      std::vector<NodeId> nodes = P.nodes;
      nodes.insert(nodes.end(), C.nodes.begin(), C.nodes.end());
      const NodeId sink = C.nodes.back();
      std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) {
        if ((a == sink) != (b == sink)) return b == sink;
        return pos_[a] < pos_[b];
      });
      std::map<TensorId, std::string> base = P.scheduled.edge_levels;
      base.insert(C.scheduled.edge_levels.begin(), C.scheduled.edge_levels.end());
      std::set<TensorId> fresh;
      for (TensorId t : tensor_order(nodes))
        if (!base.count(t)) fresh.insert(t);

      const std::string key = structure_key(nodes, base, fresh);
      auto hit = memo_.find(key);
      if (hit == memo_.end()) hit = memo_.emplace(key, price(nodes, base, fresh)).first;
      const MergeResult& r = hit->second;
      const double apart = P.predicted.latency_s + C.predicted.latency_s;
      if (!r.ok || !(r.predicted.latency_s < apart)) {
        std::string detail = r.ok ? cat("predicted ", format_us(r.predicted.latency_s), " fused vs ", format_us(apart), " apart (",
                                        format_us(P.predicted.latency_s), " + ", format_us(C.predicted.latency_s), ")")
                                  : r.detail;
        // A memoized result may come from a structurally equal group elsewhere: use our names.
        if (!r.ok) {
          std::vector<std::string> names;
          for (NodeId n : nodes) names.push_back(g.node(n).name()), names.push_back(g.tensor(g.node_output(n)).name);
          for (size_t i = 0; i < names.size(); ++i) {
            const std::string from = "'" + r.names[i] + "'", to = "'" + names[i] + "'";
            for (size_t at = detail.find(from); from != to && at != std::string::npos; at = detail.find(from, at + to.size()))
              detail.replace(at, from.size(), to);
          }
        }
        why[{p, c}] = {r.ok ? UnfusedReason::cost : r.reason, detail};
        continue;
      }
      Group merged;
      merged.nodes = nodes;
      merged.scheduled.nodes = nodes;
      for (size_t i = 0; i < nodes.size(); ++i) merged.scheduled.tiles[nodes[i]] = r.tiles[i];
      const std::vector<TensorId> internal = tensor_order(nodes);
      for (size_t i = 0; i < internal.size(); ++i) merged.scheduled.edge_levels[internal[i]] = r.edge_levels[i];
      merged.predicted = r.predicted;
      P.alive = false;
      for (NodeId n : P.nodes) group_of[n] = gc;
      C = std::move(merged);
      merged_any = true;
    }
  }
  }

  // Step 3b: with a measurer, measured top-k for every group but the streamed ones (their
  // kernel is a fixed template).
  std::unique_ptr<MeasureCache> owned_cache;
  if (options_.roller.measurer) {
    tune_cache_ = options_.roller.measure_cache;
    if (!tune_cache_) tune_cache_ = (owned_cache = std::make_unique<MeasureCache>(default_measure_cache_dir())).get();
    for (Group& gr : groups)
      if (gr.alive && !gr.sealed) tune(gr);
  }

  // Step 4: groups in dependence order (Kahn's algorithm over the group graph; ties go to the
  // group whose first node comes first in topological order).
  std::vector<int> first(groups.size(), 0), indegree(groups.size(), 0);
  std::vector<std::set<int>> succ(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    if (!groups[i].alive) continue;
    first[i] = pos_[groups[i].nodes.front()];
    for (NodeId n : groups[i].nodes) first[i] = std::min(first[i], pos_[n]);
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (NodeId c : g.consumers(g.node_output(n)))
      if (group_of[n] != group_of[c] && succ[group_of[n]].insert(group_of[c]).second) ++indegree[group_of[c]];
  std::set<std::pair<int, int>> ready;
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].alive && indegree[i] == 0) ready.insert({first[i], static_cast<int>(i)});
  while (!ready.empty()) {
    const int i = ready.begin()->second;
    ready.erase(ready.begin());
    out.groups.push_back({groups[i].scheduled, groups[i].predicted, groups[i].measured_s, groups[i].trials});
    out.predicted_latency_s += groups[i].predicted.latency_s;
    for (int j : succ[i])
      if (--indegree[j] == 0) ready.insert({first[j], j});
  }
  size_t alive = 0;
  for (const Group& gr : groups) alive += gr.alive;
  TESSEL_ASSERT(out.groups.size() == alive, "welder: the fused groups depend on each other in a cycle");

  // Every edge that still crosses groups, with why it was not fused.
  for (NodeId c : topo_) {
    std::set<TensorId> seen;
    for (TensorId t : g.node_inputs(c)) {
      const NodeId p = g.producer(t);
      if (p < 0 || !seen.insert(t).second || group_of[p] == group_of[c]) continue;
      UnfusedEdge e{t, p, c, UnfusedReason::policy, "not visited"};
      if (auto it = why.find({p, c}); it != why.end()) e.reason = it->second.first, e.detail = it->second.second;
      out.unfused.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace

Schedule WelderPolicy::schedule(const PolicyContext& ctx) const { return Welder(ctx, options_).run(); }

std::vector<PolicyOption> WelderPolicy::options() {
  return {words_option("edge_levels", "memory levels tried for an intermediate inside a group, innermost first",
                       options_.edge_levels, {"registers", "smem", "l1d", "l2"}),
          int_option("max_group_nodes", "largest number of nodes in one fused group", options_.max_group_nodes, 1, 1 << 16),
          int_option("sink_candidates", "sink tiles tried per merge", options_.sink_candidates, 1, 1 << 10),
          int_option("top_k", "candidate tilings priced by the cost model per node (roller's)", options_.roller.top_k, 1, 1 << 10),
          real_option("max_padding_waste", "largest fraction of a tile outside the domain (roller's)",
                      options_.roller.max_padding_waste, 0.0, 0.99)};
}

}  // namespace tessel
