// The CUDA backend's kernel families (see kernel_families.h).
#include "kernels/cuda/kernel_families.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/kernel_emitter.h"
#include "tilegraph/error.h"

namespace tessel::cuda {

std::vector<KernelFamilies::Family> CudaKernelFamilies::families() const {
  return {
      {"flash", "a streamed attention group as one flash-style kernel (online softmax over key chunks)",
       {"rows", "chunk", "stages", "threads", "warpgroup", "d_tile", "dv_tile", "key_chunks", "plain_chunks", "splits", "fold", "exact_exponent"}},
      {"wgmma", "contraction + elementwise epilogue on warpgroup MMA with TMA loads",
       {"block_m", "block_n", "block_k", "warpgroups", "stages", "split_k", "raster_group", "implicit", "persistent", "pingpong", "cluster_m", "epilogue_instructions",
        "box0", "box1", "box2", "box3", "k_tiles"},
       true},
      {"mma", "contraction + elementwise epilogue on mma.sync tensor-core instructions",
       {"block_m", "block_n", "block_k", "warps_m", "warps_n", "stages", "split_k", "raster_group", "implicit", "a_align", "b_align",
        "epilogue_instructions"}},
      {"simt", "f32 contraction + elementwise epilogue: the mma family's pipeline with fused multiply-adds on the CUDA cores",
       {"block_m", "block_n", "block_k", "warps_m", "warps_n", "k_slices", "stages", "split_k", "raster_group", "implicit", "a_align",
        "b_align", "epilogue_instructions"}},
      {"gemv", "a product of a few rows (decoding): B streamed into registers, many loads in flight, fused multiply-adds on the CUDA cores",
       {"block_m", "block_n", "block_k", "warps", "cols", "unroll", "vec", "split_k", "epilogue_instructions"}},
      {"row", "rows reduced and normalized in registers, or streamed in passes when too long (softmax, layer norm)",
       {"vec", "lanes", "chunks", "rows_per_block", "threads", "streamed", "passes", "shifted", "online", "splits"}},
      {"transpose", "a permuting copy through shared-memory tiles, read and written along each side's contiguous axis",
       {"tile", "threads", "blocks"}},
      {"vector", "an elementwise group, vector loads and stores over the sink's domain", {"vec", "threads", "blocks"}},
      {"generic", "any group: one thread per output element, reductions in a loop",
       {"threads", "blocks", "instructions_per_point"}},
  };
}

std::map<std::string, int64_t> family_params(const AttentionPlan& p) {
  return {{"rows", p.rows},       {"chunk", p.chunk},      {"stages", p.stages},          {"threads", p.threads},
          {"warpgroup", p.warpgroup}, {"d_tile", p.d_tile}, {"dv_tile", p.dv_tile}, {"key_chunks", p.key_chunks()},
          {"plain_chunks", p.plain_chunks()}, {"splits", p.splits}, {"fold", p.fold}, {"exact_exponent", p.exact_exponent},
          {"key_split", p.key_split}};
}

std::map<std::string, int64_t> family_params(const ContractionPlan& p) { return contraction_params(p); }

std::map<std::string, int64_t> family_params(const RowPlan& p) {
  std::map<std::string, int64_t> out = {{"vec", p.vec},         {"lanes", p.lanes},       {"chunks", p.chunks},
                                        {"rows_per_block", p.rows_per_block},
                                        {"threads", p.threads}, {"streamed", p.streamed}, {"passes", p.passes}};
  // Recorded when they are not the default (off, off, 1), so that schedules saved before these
  // forms existed still match the plans they describe.
  if (p.shifted) out["shifted"] = 1;
  if (p.online_max >= 0) out["online"] = 1;
  if (p.splits > 1) out["splits"] = p.splits;
  return out;
}

std::map<std::string, int64_t> family_params(const TransposePlan& p) {
  return {{"tile", p.tile}, {"threads", p.threads()}, {"blocks", p.blocks}};
}

std::map<std::string, int64_t> family_params(const VectorPlan& p) {
  std::map<std::string, int64_t> out{{"vec", p.vec}, {"threads", p.threads}, {"blocks", p.blocks}};
  // (Recorded when there are any, so that schedules saved before recomputation still match.)
  if (p.recomputed_flops > 0) out["recomputed_flops"] = static_cast<int64_t>(std::llround(p.recomputed_flops));
  if (p.slices > 1) {
    out["slices"] = p.slices;
    out["lanes"] = p.lanes;
    if (p.parts > 1) out["parts"] = p.parts;
  }
  return out;
}

int64_t generic_instructions_per_point(const TeNode& node) {
  int64_t n = 3;  // the accumulating multiply-add, the loop's increment and its compare-and-branch
  for (const Access& in : node.inputs()) n += 1 + in.map.num_results();
  return n;
}

std::map<std::string, int64_t> family_params(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& plan) {
  NodeId largest = group.nodes.back();
  for (NodeId n : group.nodes)
    if (graph.node(n).flops() > graph.node(largest).flops()) largest = n;
  return {{"threads", plan.threads}, {"blocks", plan.blocks},
          {"instructions_per_point", generic_instructions_per_point(graph.node(largest))}};
}

KernelChoice CudaKernelFamilies::choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  KernelChoice k;
  const GroupPlan generic = plan_group(graph, group, spec);
  if (group.stream_chunk > 0) {
    const AttentionMatch a = plan_attention(graph, group, generic, spec);
    if (a.plan) {
      k.family = "flash";
      k.params = family_params(*a.plan);
      return k;
    }
    k.rejected.push_back("flash: " + a.reason);
  }
  const ContractionMatch m = plan_contraction(graph, group, generic, spec);
  if (m.plan) {
    const bool wg = m.plan->warpgroup || m.plan->nm_wgmma;  // (a 2:4 weight's wgmma form is wgmma.sp)
    if (!wg && !m.plan->warpgroup_reason.empty()) k.rejected.push_back("wgmma: " + m.plan->warpgroup_reason);
    k.family = m.plan->gemv ? "gemv" : wg ? "wgmma" : m.plan->simt ? "simt" : "mma";
    k.params = family_params(*m.plan);
    return k;
  }
  k.rejected.push_back("mma: " + m.reason);
  // The rest in order: the first whose planner matches, each other's reason recorded.
  auto take = [&](const char* family, const auto& match) {
    if (match.plan) {
      k.family = family;
      k.params = family_params(*match.plan);
      return true;
    }
    k.rejected.push_back(cat(family, ": ", match.reason));
    return false;
  };
  if (take("row", plan_rows(graph, group, generic, spec)) || take("transpose", plan_transpose(graph, group, generic, spec)) ||
      take("vector", plan_vector(graph, group, generic, spec)))
    return k;
  k.family = "generic";
  k.params = family_params(graph, group, generic);
  return k;
}

std::optional<std::string> CudaKernelFamilies::check(const OpGraph& graph, const ScheduledGroup& group,
                                                     const HwSpec& spec) const {
  if (auto why = KernelFamilies::check(graph, group, spec)) return why;
  if (group.kernel.family.empty()) return std::nullopt;
  Schedule alone;
  alone.groups.emplace_back().group = group;
  try {
    emit_group_kernel(graph, alone, 0, spec);
  } catch (const UserError& e) {
    return e.message();
  }
  return std::nullopt;
}

std::vector<KernelChoice> CudaKernelFamilies::variants(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  ScheduledGroup g = group;
  g.kernel = {};
  std::vector<KernelChoice> out{choose(graph, g, spec)};
  const std::string family = out.front().family;
  if (family != "mma" && family != "wgmma" && family != "simt" && family != "gemv") return out;
  const GroupPlan generic = plan_group(graph, g, spec);
  ContractionMatch m = plan_contraction(graph, g, generic, spec);
  if (!m.plan) return out;
  auto add = [&](KernelChoice k) {
    if (std::none_of(out.begin(), out.end(), [&](const KernelChoice& o) { return o.family == k.family && o.params == k.params; }))
      out.push_back(std::move(k));
  };
  const bool gemv_first = m.plan->gemv;
  if (gemv_first) {
    // A few-row product: the gemv family's forms, then the tiled families' plans of it (their
    // default first, then their variants, as below).
    for (KernelChoice& k : contraction_variants(*m.plan, spec)) add(std::move(k));
    m = plan_contraction(graph, g, generic, spec, true, false);
    if (!m.plan) return out;
    const bool wg = m.plan->warpgroup || m.plan->nm_wgmma;
    add({wg ? "wgmma" : m.plan->simt ? "simt" : "mma", family_params(*m.plan), {}});
  }
  // Second, where wgmma applies: the mma family's own default (the first mma choice listed).
  // (Where it fails -- a block-sparse group whose tiles mma.sync cannot walk -- no mma variant is
  // listed, so that none is taken for the default.)
  bool simt = !m.plan->warpgroup;
  if (m.plan->warpgroup)
    if (const ContractionMatch d = plan_contraction(graph, g, generic, spec, false, false); d.plan) {
      add({"mma", family_params(*d.plan), {}});
      simt = true;
    }
  for (KernelChoice& k : contraction_variants(*m.plan, spec))
    if (simt || k.family != "mma") add(std::move(k));
  // A product of few rows that keeps a tiled family by default: the gemv family's forms after them
  // (listed first above where gemv is the default).
  if (!gemv_first && m.plan->m <= kGemvMaxRows && !m.plan->implicit) {
    ScheduledGroup as_gemv = g;
    as_gemv.kernel = {"gemv", {}, {}};
    if (const ContractionMatch v = plan_contraction(graph, as_gemv, generic, spec); v.plan)
      for (KernelChoice& k : contraction_variants(*v.plan, spec)) add(std::move(k));
  }
  return out;
}

std::string CudaKernelFamilies::kernel_key(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const {
  Schedule alone;
  ScheduledGroup& g = alone.groups.emplace_back().group;
  g = group;
  if (g.kernel.family.empty()) g.kernel = choose(graph, group, spec);
  const GeneratedKernel k = emit_group_kernel(graph, alone, 0, spec);
  std::string key = k.canonical + "\n// grid";
  for (int64_t d : k.plan.grid) key += cat(" ", d);
  return key + cat(" blocks ", k.plan.blocks, " threads ", k.plan.threads, " smem ", k.plan.pool_bytes, " cluster ", k.plan.cluster_blocks);
}

}  // namespace tessel::cuda
