// choose_sparse_kinds (sparse_kinds.h).
#include "policy/sparse_kinds.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>

#include "policy/measure_cache.h"
#include "policy/tune.h"
#include "tilegraph/error.h"
#include "tilegraph/threads.h"
#include "tilegraph/tile_kind.h"

namespace tessel {
namespace {

std::string ms(double s) { return cat(std::round(s * 1e6) / 1e3, " ms"); }

// The kernel tile edge that covers dimension `dim` of input `input` of `node` (its one axis):
// block_k along a reduction axis, block_n along the last spatial axis, block_m along the one
// before; 0 when the parameters do not say.
int64_t tile_edge(const TeNode& node, int input, int dim, const std::map<std::string, int64_t>& params) {
  const AffineExpr& row = node.inputs()[input].map.result(dim);
  const int ns = node.num_spatial();
  for (int a = 0; a < node.num_axes(); ++a) {
    if (row.coeffs[a] == 0) continue;
    const char* name = a >= ns ? "block_k" : a == ns - 1 ? "block_n" : a == ns - 2 ? "block_m" : nullptr;
    if (!name) return 0;
    auto it = params.find(name);
    return it == params.end() ? 0 : it->second;
  }
  return 0;
}

}  // namespace

int choose_sparse_kinds(const OpGraph& graph, const HwSpec& spec, const CostModel& cost, const KernelFamilies* families,
                        Schedule& schedule, SparseKernels mode, const Policy::Tuning& tuning, const std::string& policy) {
  if (!families) return 0;
  // The non-zero maps of every sparse weight, computed in parallel up front: each needs the
  // weight's values (generated and pruned), which dominates the pass.
  std::vector<TensorId> sparse_weights;
  for (TensorId t : graph.weights())
    if (graph.tensor(t).sparsity && graph.tensor(t).sparsity->pattern == Sparsity::Pattern::block) sparse_weights.push_back(t);
  {
    std::atomic<size_t> next{0};
    const size_t workers = std::min<size_t>(sparse_weights.size(), std::max(1u, std::thread::hardware_concurrency()));
    run_on_threads(static_cast<int>(workers), [&](int) {
      for (size_t i = next++; i < sparse_weights.size(); i = next++) {
        try {
          graph.nonzero_map(sparse_weights[i]);
        } catch (...) {
          // Raised again, on this thread, where the map is asked for below.
        }
      }
    });
  }
  std::unique_ptr<MeasureCache> own_cache;
  int chosen = 0;
  for (ScheduleGroup& sg : schedule.groups) {
    NodeId cid = -1;
    for (NodeId n : sg.group.nodes)
      if (graph.node(n).num_reduction() > 0) cid = cid < 0 ? n : -2;
    if (cid < 0 || !sg.group.tiles.count(cid)) continue;
    const TeNode& node = graph.node(cid);
    for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
      const TensorId t = graph.node_inputs(cid)[i];
      const TensorInfo& info = graph.tensor(t);
      if (info.kind != TensorKind::weight || !info.sparsity) continue;
      const bool nm = info.sparsity->pattern == Sparsity::Pattern::nm;
      const NmSparseProps nm_props{.input = i, .n = info.sparsity->nm_n, .m = info.sparsity->nm_m};
      if (nm ? !check_nm_sparse(node, nm_props).empty()
             : !check_block_sparse(node, BlockSparseProps{.input = i, .block_m = 1, .block_n = 1}).empty())
        continue;
      const int rank = node.inputs()[i].type.rank();
      // Every sparse kernel the backend can emit, cheapest predicted first: for a block pattern
      // the kernels that walk blocks, with the weight's density at their tiles; for N:M the
      // tensor-core kernels, whose products the sparse tensor cores run (mma.sp for mma.sync's,
      // wgmma.sp for wgmma's; the backend refuses the parameters they cannot take).
      std::vector<GroupVariant> sparse;
      for (const KernelChoice& v : families->variants(graph, sg.group, spec)) {
        if ((v.params.count("split_k") && v.params.at("split_k") > 1) ||
            (nm ? v.family != "mma" && v.family != "wgmma" : v.family != "mma" && v.family != "wgmma" && v.family != "microkernel"))
          continue;
        GroupVariant c{sg.group, {}};
        c.group.kernel = v;
        c.group.kernel.rejected.clear();
        if (nm) {
          c.group.tiles.at(cid).kind = nm_props;
        } else {
          const int64_t rows = tile_edge(node, i, rank - 2, v.params), cols = tile_edge(node, i, rank - 1, v.params);
          if (rows <= 0 || cols <= 0 || rows % kNonzeroUnit != 0 || cols % kNonzeroUnit != 0) continue;
          const double density = graph.nonzero_map(t)->density(rows, cols);
          c.group.tiles.at(cid).kind = BlockSparseProps{.input = i, .block_m = rows, .block_n = cols, .density = density};
        }
        c.predicted = cost.estimate(graph, c.group, spec);
        if (std::isfinite(c.predicted.latency_s)) sparse.push_back(std::move(c));
      }
      std::stable_sort(sparse.begin(), sparse.end(),
                       [](const GroupVariant& a, const GroupVariant& b) { return a.predicted.latency_s < b.predicted.latency_s; });
      // The ones the backend can emit, best predicted first: as many as are compared or measured
      // (asking the backend emits the kernel, so only those are asked).
      const size_t wanted = tuning.measurer && tuning.k > 0 && mode == SparseKernels::cost
                                ? static_cast<size_t>(tuning.k) * kTuneCandidatesPerMeasured : 1;
      std::vector<GroupVariant> legal;
      std::string refused;  // why the cheapest candidate the backend refused cannot be emitted
      for (GroupVariant& c : sparse) {
        if (legal.size() >= wanted) break;
        if (const std::optional<std::string> why = families->check(graph, c.group, spec)) {
          if (refused.empty()) refused = *why;
        } else {
          legal.push_back(std::move(c));
        }
      }
      sparse = std::move(legal);
      const char* kind_name = nm ? "nm_sparse" : "block_sparse";
      if (sparse.empty()) {
        sg.kind_choice = cat("dense: no ", nm ? "N:M sparse" : "block-sparse", " kernel of '", info.name, "' can be emitted here",
                             refused.empty() ? cat(" (no candidate: the group's kernel family is '", sg.group.kernel.family,
                                                   "', and no family it offers takes the pattern)")
                                             : cat(" (the cheapest: ", refused, ")"));
        break;
      }
      const GroupVariant& best = sparse.front();
      const double dense_s = sg.predicted.latency_s, sparse_s = best.predicted.latency_s;
      std::string comparison;
      if (nm) {
        comparison = cat("'", info.name, "' is ", nm_props.n, ":", nm_props.m, " sparse: ", nm_props.n, ":", nm_props.m, " ",
                         best.group.kernel.family, " (sparse tensor cores) ", ms(sparse_s), " vs dense ", sg.group.kernel.family, " ",
                         ms(dense_s), " predicted");
      } else {
        const auto& props = std::get<BlockSparseProps>(best.group.tiles.at(cid).kind);
        // Where they would break even: the sparse kernel's time above its launch scales with the
        // density (the K tiles it walks).
        const double launch = best.predicted.term("launch");
        const double even = sparse_s > launch && props.density > 0
                                ? std::min(1.0, props.density * (dense_s - launch) / (sparse_s - launch)) : 1.0;
        comparison =
            cat("'", info.name, "' has density ", props.density, " at ", props.block_m, "x", props.block_n, " blocks: block-sparse ",
                best.group.kernel.family, " ", ms(sparse_s), " vs dense ", sg.group.kernel.family, " ", ms(dense_s),
                " predicted; they break even near density ", std::round(even * 1000) / 1000);
      }
      const double before = sg.predicted.latency_s;
      if (tuning.measurer && tuning.k > 0 && mode == SparseKernels::cost) {
        // Measured: the dense kernel first (the model's reference), then the sparse candidates.
        std::vector<GroupVariant> variants{GroupVariant{sg.group, sg.predicted}};
        variants.insert(variants.end(), sparse.begin(), sparse.end());
        MeasureCache* cache = tuning.cache;
        if (!cache) {
          if (!own_cache) own_cache = std::make_unique<MeasureCache>(default_measure_cache_dir());
          cache = own_cache.get();
        }
        ScheduleGroup out = sg;
        measure_top_k(PolicyContext{graph, spec, cost, families}, *tuning.measurer, *cache, policy, variants, tuning.k, out);
        const bool kept = !std::holds_alternative<DenseProps>(out.group.tiles.at(cid).kind);
        const std::string measured = out.measured_s ? cat(", kept ", kept ? (nm ? "N:M sparse " : "block-sparse ") : "dense ",
                                                          out.group.kernel.family, " measured ", ms(*out.measured_s))
                                                    : ", none could be measured";
        sg = std::move(out);
        sg.kind_choice = cat(kept ? kind_name : "dense", " (measured): ", comparison, measured);
        chosen += kept;
      } else {
        const bool take = mode == SparseKernels::block_sparse || (mode == SparseKernels::cost && sparse_s < dense_s);
        const char* forced = mode == SparseKernels::cost ? "" : " (forced by --sparse-kernels)";
        if (take) {
          sg.group = best.group;
          sg.predicted = best.predicted;
          sg.measured_s.reset();  // a tuned time was the dense kernel's
          ++chosen;
        }
        sg.kind_choice = cat(take ? kind_name : "dense", forced, ": ", comparison);
      }
      schedule.predicted_latency_s += sg.predicted.latency_s - before;
      break;  // one sparse operand per contraction
    }
  }
  return chosen;
}

}  // namespace tessel
