// The CPU backend's kernel families (see kernel_families.h).
#include "kernels/cpu/kernel_families.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "cost_model/cpu_loops.h"

#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"

namespace tessel::cpu {

namespace {

// The blocks the micro-kernel's sparse walk is offered at along k, larger first (equal densities
// keep the larger: fewer checks). Multiples of kNonzeroUnit, so the weight's non-zero map answers
// each.
constexpr int64_t kSparseBlockK[] = {64, 32, 16, 8};

// i of a parameter named "mr<i>", "nr<i>" or "pf<i>" (blocking_param), or nullopt for any other
// name (or an i too large for an int).
std::optional<int> blocking_index(const std::string& name) {
  if (name.size() < 3 || (name.rfind("mr", 0) != 0 && name.rfind("nr", 0) != 0 && name.rfind("pf", 0) != 0)) return std::nullopt;
  int i = 0;
  const char* end = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(name.data() + 2, end, i);
  if (ec != std::errc() || ptr != end) return name.size() > 2 && std::all_of(name.begin() + 2, name.end(), [](char c) { return c >= '0' && c <= '9'; })
                                                  ? std::optional<int>(std::numeric_limits<int>::max())
                                                  : std::nullopt;
  return i;
}

int64_t param_or(const KernelChoice& k, const char* name, int64_t fallback) {
  auto it = k.params.find(name);
  return it == k.params.end() ? fallback : it->second;
}

}  // namespace

std::vector<KernelFamilies::Family> CpuKernelFamilies::families() const {
  return {{"microkernel", "contractions on the register-blocked FMA micro-kernel, other nodes as vector loops",
           {"contractions", "mr<i>", "nr<i>", "pf<i>", "block_k", "block_n"}},
          {"loops", "every node as vector loop nests", {}}};
}

int microkernel_nodes(const OpGraph& graph, const ScheduledGroup& group) {
  int n = 0;
  for (NodeId id : group.nodes) n += matches_contraction(graph.node(id));
  return n;
}

std::optional<SparseContraction> sparse_contraction(const OpGraph& graph, const ScheduledGroup& group, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<SparseContraction> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const TensorId t = graph.node_inputs(n)[i];
      const TensorInfo& info = graph.tensor(t);
      // (An N:M weight runs dense on the CPU: its pruned values.)
      if (info.kind != TensorKind::weight || !info.sparsity || info.sparsity->pattern != Sparsity::Pattern::block ||
          node.num_reduction() == 0)
        continue;
      const std::string name = cat("'", info.name, "' of '", node.name(), "'");
      if (!matches_contraction(node)) return fail(cat(name, ": the micro-kernel does not take the node"));
      if (node.num_reduction() != 1) return fail(cat(name, ": the node has ", node.num_reduction(), " reduction axes, not one"));
      const int ns = node.num_spatial(), n_axis = ns - 1, k_axis = ns;
      const Access& access = node.inputs()[i];
      if (!access.map.uses_axis(n_axis)) return fail(cat(name, ": the weight is the operand broadcast along the columns, not B"));
      const int rank = access.type.rank();
      // Each of the weight's last two dimensions: exactly one axis, coefficient 1, no offset.
      auto axis_of = [&](int dim) {
        const AffineExpr& row = access.map.result(dim);
        int axis = -1;
        for (int a = 0; a < node.num_axes(); ++a) {
          if (row.coeffs[a] == 0) continue;
          if (row.coeffs[a] != 1 || axis >= 0) return -1;
          axis = a;
        }
        return row.offset == 0 ? axis : -1;
      };
      const int rows = axis_of(rank - 2), cols = axis_of(rank - 1);
      if (!((rows == k_axis && cols == n_axis) || (rows == n_axis && cols == k_axis)))
        return fail(cat(name, ": the weight's last two dimensions are not read as the reduction and column axes"));
      // Read as its own matrix: the block table indexes the weight's blocks by k and n.
      const std::vector<int64_t>& shape = access.type.shape;
      if (shape[rank - 2] != node.axes()[rows].extent || shape[rank - 1] != node.axes()[cols].extent)
        return fail(cat(name, ": the weight's matrix ", shape[rank - 2], "x", shape[rank - 1], " is not read whole as the node's ",
                        node.axes()[rows].extent, "x", node.axes()[cols].extent));
      return SparseContraction{n, static_cast<int>(i), rows == k_axis};
    }
  }
  return fail("no contraction of the group reads a sparse weight");
}

KernelChoice CpuKernelFamilies::choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  KernelChoice k;
  // Contractions whose rows the lane reduction runs faster (cpu_loops.h) leave the group to the
  // loop nests when they are all it would take.
  int lane_rows = 0;
  for (NodeId id : group.nodes) {
    const TeNode& node = graph.node(id);
    lane_rows += matches_contraction(node) &&
                 lane_rows_beat_microkernel(node, microkernel_m_axis(node), vector_lanes(spec.compute.simd_width, node.body().dtype()));
  }
  const int n = microkernel_nodes(graph, group);
  if (n > 0 && lane_rows < n) {
    k.family = "microkernel";
    k.params = {{"contractions", n}};
    // Each contraction's register blocking over its task box (the node's outermost tile).
    int i = 0;
    for (NodeId id : group.nodes) {
      const TeNode& node = graph.node(id);
      if (!matches_contraction(node)) continue;
      auto cfg = group.tiles.find(id);
      if (cfg != group.tiles.end() && !cfg->second.levels.empty())
        if (const std::optional<RegisterBlocking> b = derived_register_blocking(node, cfg->second.levels.front().spatial, spec)) {
          k.params[blocking_param("mr", i)] = b->mr;
          k.params[blocking_param("nr", i)] = b->nr;
        }
      if (const int64_t pf = derived_prefetch_bytes(node, *match_microkernel(node), spec); pf > 0) k.params[blocking_param("pf", i)] = pf;
      ++i;
    }
    return k;
  }
  k.rejected.push_back(n == 0 ? "microkernel: no node is a contraction the micro-kernel takes"
                              : "microkernel: its contractions' rows fit in a vector and share no B vector "
                                "(no m axis): the loop nest's lane reduction runs them");
  k.family = "loops";
  return k;
}

std::vector<KernelChoice> CpuKernelFamilies::variants(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  std::vector<KernelChoice> out{choose(graph, group, spec)};
  if (out.front().family != "microkernel") return out;
  const std::optional<SparseContraction> sc = sparse_contraction(graph, group);
  if (!sc) {
    // For the tuner: the first contraction's neighbouring register blockings (one row or one vector
    // more or fewer, a quarter fewer vectors for more rows), each within the registers. The model
    // prices them all by their loads, so the derived one stays first; measured on this project's
    // 2-core VM they ran 0.95-1.22x its time (docs/cost-model.md, "Measured top-k").
    const std::optional<RegisterBlocking> derived = recorded_register_blocking(out.front(), 0);
    if (!derived) return out;
    // (And the derived blocking without B's prefetch, where it has one.)
    if (recorded_prefetch_bytes(out.front(), 0).value_or(0) > 0) {
      KernelChoice v = out.front();
      v.params[blocking_param("pf", 0)] = 0;
      out.push_back(std::move(v));
    }
    const int mr = derived->mr, nr = derived->nr;
    // (Blocks larger than the first contraction's box clamp to a blocking already listed.)
    int64_t m_box = 1, vectors = 1;
    for (NodeId id : group.nodes) {
      const TeNode& node = graph.node(id);
      const std::optional<MicrokernelMatch> match = match_microkernel(node);
      auto cfg = group.tiles.find(id);
      if (!match || cfg == group.tiles.end() || cfg->second.levels.empty()) continue;
      const std::vector<int64_t>& box = cfg->second.levels.front().spatial;
      auto extent = [&](int a) { return std::min(box[a], node.axes()[a].extent); };
      m_box = match->m_axis >= 0 ? extent(match->m_axis) : 1;
      const int64_t lanes = vector_lanes(spec.compute.simd_width, node.body().dtype());
      vectors = (extent(match->n_axis) + lanes - 1) / lanes;
      break;
    }
    const std::pair<int, int> moves[] = {{mr - 1, nr}, {mr + 1, nr}, {mr, nr - 1}, {mr, nr + 1}, {mr + 2, nr - 1}, {mr - 2, nr + 1}};
    for (const auto& [m, n] : moves) {
      if (m < 1 || n < 1 || m > m_box || n > vectors) continue;
      KernelChoice v = out.front();
      v.params[blocking_param("mr", 0)] = m;
      v.params[blocking_param("nr", 0)] = n;
      ScheduledGroup probe = group;
      probe.kernel = v;
      if (!check(graph, probe, spec)) out.push_back(std::move(v));
    }
    return out;
  }
  const TeNode& node = graph.node(sc->node);
  auto cfg = group.tiles.find(sc->node);
  if (cfg == group.tiles.end() || cfg->second.levels.empty()) return out;
  const std::vector<int64_t>& tile = cfg->second.levels.front().spatial;
  const int ns = node.num_spatial();
  if (static_cast<int>(tile.size()) != ns) return out;
  // The dense register blocking over the task box (the m axis: the nearest spatial axis the other
  // operand reads; its box, or 1).
  const int64_t n_box = std::min(tile[ns - 1], node.axes()[ns - 1].extent);
  const int m_axis = microkernel_m_axis(node);
  const int64_t m_box = m_axis >= 0 ? std::min(tile[m_axis], node.axes()[m_axis].extent) : 1;
  const int64_t width = microkernel_columns(node, m_box, n_box, spec);
  if (width <= 0 || width % kNonzeroUnit != 0) return out;
  const int64_t k_extent = node.axes()[ns].extent;
  for (int64_t bn : {width, 2 * width}) {
    if (bn > std::max(n_box, width)) continue;  // wider than a task's columns: no more skipping
    for (int64_t bk : kSparseBlockK) {
      if (bk > k_extent && bk != kSparseBlockK[std::size(kSparseBlockK) - 1]) continue;
      KernelChoice v = out.front();
      v.params["block_k"] = bk;
      v.params["block_n"] = bn;
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::optional<std::string> CpuKernelFamilies::check(const OpGraph& graph, const ScheduledGroup& group,
                                                    const HwSpec& spec) const {
  if (auto why = KernelFamilies::check(graph, group, spec)) return why;
  const KernelChoice& k = group.kernel;
  if (k.family == "microkernel" && microkernel_nodes(graph, group) == 0)
    return "kernel family 'microkernel' cannot emit this group: no node is a contraction the micro-kernel takes";
  if (k.family == "microkernel") {
    // Recorded blockings: of contractions the group has, each within the vector registers (MR x NR
    // accumulators, NR B vectors and the broadcast), one row where there is no m axis.
    const int64_t registers = vector_registers(spec);
    int i = 0;
    for (NodeId id : group.nodes) {
      const TeNode& node = graph.node(id);
      const std::optional<MicrokernelMatch> match = match_microkernel(node);
      if (!match) continue;
      const bool has_mr = k.params.count(blocking_param("mr", i)) > 0, has_nr = k.params.count(blocking_param("nr", i)) > 0;
      if (has_mr != has_nr)
        return cat("kernel family 'microkernel' records ", blocking_param(has_mr ? "mr" : "nr", i), " without ", blocking_param(has_mr ? "nr" : "mr", i));
      // (Each of MR and NR within the vector registers, before either is narrowed to an int.)
      for (const char* which : {"mr", "nr"})
        if (auto it = k.params.find(blocking_param(which, i)); it != k.params.end() && (it->second < 1 || it->second > registers))
          return cat("kernel family 'microkernel': ", it->first, " = ", it->second, " of '", node.name(), "' is not in 1..", registers,
                     " (the vector registers of '", spec.name, "')");
      if (const std::optional<int64_t> pf = recorded_prefetch_bytes(k, i); pf && *pf < 0)
        return cat("kernel family 'microkernel': ", blocking_param("pf", i), " = ", *pf, " of '", node.name(),
                   "' is negative (B's prefetch distance in bytes; 0: none)");
      if (const std::optional<RegisterBlocking> b = recorded_register_blocking(k, i)) {
        const std::string what = cat("kernel family 'microkernel': the blocking ", blocking_param("mr", i), " = ", b->mr, ", ",
                                     blocking_param("nr", i), " = ", b->nr, " of '", node.name(), "'");
        if (b->mr < 1 || b->nr < 1) return cat(what, " is not at least 1 x 1");
        if (match->m_axis < 0 && b->mr != 1) return cat(what, " blocks rows of a contraction without an m axis");
        // (choose_register_blocking's bound: with rows, MR x NR accumulators, NR B vectors and the
        // broadcast; one row streams its B vectors through one register.)
        const int64_t needed = match->m_axis >= 0 ? int64_t{b->mr} * b->nr + b->nr + 1 : int64_t{b->nr} + 2;
        if (needed > registers)
          return cat(what, " needs ", needed, " vector registers, more than the ", registers, " of '", spec.name, "'");
      }
      ++i;
    }
    for (const auto& [name, value] : k.params)
      if (const std::optional<int> at = blocking_index(name); at && *at >= i)
        return cat("kernel family 'microkernel' records ", name, " but the group has ", i, " contraction(s) on the micro-kernel");
  }
  if (k.family != "microkernel")
    for (const auto& [name, value] : k.params)
      if (blocking_index(name)) return cat("kernel family '", k.family, "' records ", name, ", which only the micro-kernel uses");
  if (std::string why = sparse_walk(graph, group).problem; !why.empty()) return why;
  return std::nullopt;
}

SparseWalk sparse_walk(const OpGraph& graph, const ScheduledGroup& group) {
  SparseWalk w;
  const KernelChoice& k = group.kernel;
  for (const auto& [n, cfg] : group.tiles)
    if (const auto* p = std::get_if<BlockSparseProps>(&cfg.kind)) w.props = p, w.node = n;
  const bool blocks = k.params.count("block_k") || k.params.count("block_n");
  auto fail = [&](std::string why) {
    w.problem = std::move(why);
    return w;
  };
  if (!w.props && !blocks) return w;
  if (!w.props) return fail(cat("kernel family '", k.family, "' records block_k/block_n, which only a block_sparse tile kind uses"));
  if (k.family != "microkernel")
    return fail(cat("kernel family '", k.family, "' has no block-sparse code generation (the micro-kernel walks block_sparse tiles)"));
  std::string why;
  const std::optional<SparseContraction> sc = sparse_contraction(graph, group, &why);
  if (!sc) return fail(cat("kernel family 'microkernel' cannot walk the block_sparse tiles: ", why));
  if (sc->node != w.node || sc->input != w.props->input)
    return fail(cat("kernel family 'microkernel' walks block-sparse input ", sc->input, " of '", graph.node(sc->node).name(),
                    "', not input ", w.props->input, " of '", graph.node(w.node).name(), "'"));
  // The kind's blocks are over the weight's (rows, cols); the walk's along (k, n).
  w.k_rows = sc->k_rows;
  w.block_k = sc->k_rows ? w.props->block_m : w.props->block_n;
  w.block_n = sc->k_rows ? w.props->block_n : w.props->block_m;
  const int64_t bk = param_or(k, "block_k", 0), bn = param_or(k, "block_n", 0);
  if (bk != w.block_k || bn != w.block_n)
    return fail(cat("kernel family 'microkernel' records blocks of ", bk, " x ", bn, " (k x n) but the block_sparse tiles are ",
                    w.block_k, " x ", w.block_n));
  if (bk <= 0 || bn <= 0 || bk % kNonzeroUnit != 0 || bn % kNonzeroUnit != 0)
    return fail(cat("kernel family 'microkernel' walks blocks whose edges are multiples of ", kNonzeroUnit, ", not ", bk, " x ", bn));
  // No larger than the axes (rounded up to the unit): the block table has a block at least.
  const TeNode& node = graph.node(sc->node);
  const int ns = node.num_spatial();
  const int64_t k_axis = node.axes()[ns].extent, n_axis = node.axes()[ns - 1].extent;
  auto rounded = [](int64_t e) { return (e + kNonzeroUnit - 1) / kNonzeroUnit * kNonzeroUnit; };
  if (bk > rounded(k_axis) || bn > rounded(n_axis))
    return fail(cat("kernel family 'microkernel' walks blocks of ", bk, " x ", bn, " (k x n), larger than the ", k_axis, " x ", n_axis,
                    " it multiplies"));
  return w;
}

}  // namespace tessel::cpu
