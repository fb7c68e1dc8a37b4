// Planning the streamed attention kernel (attention_plan.h).
#include "kernels/cuda/attention_plan.h"

#include <algorithm>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

// Facts of the instructions device/flash.cuh uses: a warp owns mma.sync's 16 rows; chunks are
// whole k16 steps of P V.
constexpr int64_t kRowsPerWarp = 16, kChunkStep = 16;

AttentionMatch fail(std::string reason) { return AttentionMatch{std::nullopt, std::move(reason)}; }

}  // namespace

AttentionMatch plan_attention(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  std::string why;
  const std::optional<StreamedAttention> shape = streamed_attention(graph, group, &why);
  if (!shape) return fail(why);
  AttentionPlan p;
  p.shape = *shape;
  p.pattern = *match_attention(graph, shape->out);
  if (std::optional<std::string> no = streamed_attention_unsupported(graph, p.pattern, spec)) return fail(*no);
  const TeNode& o = graph.node(p.pattern.out);
  const TeNode& s = graph.node(p.pattern.scores);
  p.dtype = o.output().dtype;
  const int ns = o.num_spatial();
  if (shape->rows % kRowsPerWarp != 0 || shape->threads != shape->rows / kRowsPerWarp * spec.compute.simd_width)
    return fail(cat("the schedule's block of ", shape->rows, " rows and ", shape->threads, " threads is not one warp per ",
                    kRowsPerWarp, " rows"));
  if (shape->chunk % kChunkStep != 0) return fail(cat("chunk ", shape->chunk, " is not a multiple of ", kChunkStep, " keys"));
  for (int64_t e : {shape->queries, shape->keys, shape->d, shape->dv})
    if (e >= (int64_t{1} << 31)) return fail("an extent does not fit 32-bit tile indices");
  if (shape->queries == 0 || shape->keys == 0) return fail("no queries or no keys");
  {
    std::vector<int64_t> e = o.extents();
    e.resize(ns);
    if (o.output().shape != e) return fail(cat("'", o.name(), "' reshapes its output"));
  }
  for (int a = 0; a < ns - 2; ++a) {
    p.batch_axes.push_back(a);
    p.batch_extents.push_back(o.axes()[a].extent);
  }
  // S[b.., m, n] = sum_d Q K: Q is A (reads m), K is B (reads n); which slot is which.
  int q_slot = 0;
  for (const AffineExpr& row : s.inputs()[0].map.results())
    if (row.coeffs[ns - 1] != 0) q_slot = 1;
  if (std::string r = contraction_operand(graph, group, generic, p.pattern.scores, q_slot, ns - 2, ns - 1, p.batch_axes, "Q",
                                          p.q, p.operand_nodes);
      !r.empty())
    return fail(r);
  if (std::string r = contraction_operand(graph, group, generic, p.pattern.scores, 1 - q_slot, ns - 1, ns - 2, p.batch_axes, "K",
                                          p.k, p.operand_nodes);
      !r.empty())
    return fail(r);
  if (std::string r = contraction_operand(graph, group, generic, p.pattern.out, 1 - p.pattern.probs_slot, ns - 1, ns - 2,
                                          p.batch_axes, "V", p.v, p.operand_nodes);
      !r.empty())
    return fail(r);
  if (!p.q.k_contiguous) return fail("Q is not stored with the head dimension contiguous");
  if (!p.k.k_contiguous) return fail("K is not stored with the head dimension contiguous (keys x d)");
  if (p.v.k_contiguous && shape->dv > 1) return fail("V is not stored with dv contiguous (keys x dv)");
  p.smem_bytes = shape->smem_bytes();
  p.tiles_m = (shape->queries + shape->rows - 1) / shape->rows;
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return fail(cat("needs ", p.smem_bytes, " bytes of shared memory per block, limit ", spec.limits.smem_per_block_bytes));
  return AttentionMatch{p, ""};
}

GroupPlan attention_group_plan(const GroupPlan& generic, const AttentionPlan& a) {
  GroupPlan plan = inlined_launch_plan(generic, a.blocks(), static_cast<int>(a.shape.threads));
  for (NodePlan& np : plan.nodes) np.writes_global = np.role == NodeRole::sink;
  const int ns = static_cast<int>(plan.sink_tile.size());
  plan.sink_tile[ns - 2] = a.shape.rows;
  plan.sink_tile[ns - 1] = a.shape.dv;
  plan.grid = a.batch_extents;
  plan.grid.push_back(a.tiles_m);
  plan.grid.push_back(1);
  plan.pool_bytes = a.smem_bytes;
  TESSEL_ASSERT(generic.outputs.size() == 1, "a streamed attention group writes only its sink");
  return plan;
}

std::string print_attention_plan(const OpGraph& graph, const AttentionPlan& a) {
  const StreamedAttention& s = a.shape;
  std::string steps;
  for (NodeId n : a.pattern.score_epilogue) steps += cat(steps.empty() ? "" : ", ", graph.node(n).name());
  return cat("streamed attention (flash, mma.sync m16n8k16 ", dtype_name(a.dtype), "): '", graph.node(a.pattern.out).name(), "' ",
             s.batch, " x ", s.queries, " queries x ", s.keys, " keys, d ", s.d, ", dv ", s.dv, "; score steps ",
             steps.empty() ? "none" : steps, "; ", print_mma_operand(graph, "Q", a.q), ", ", print_mma_operand(graph, "K", a.k),
             ", ", print_mma_operand(graph, "V", a.v), "; ", s.rows, " query rows per block (", s.threads, " threads), keys in chunks of ",
             s.chunk, ", ", s.stages, " stages, ", a.smem_bytes, " bytes of shared memory");
}

}  // namespace tessel::cuda
