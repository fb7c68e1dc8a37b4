// Planning the streamed attention kernel (attention_plan.h).
#include "kernels/cuda/attention_plan.h"

#include <algorithm>
#include <utility>

#include "cost_model/analytic_model.h"
#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

// Facts of the instructions device/flash.cuh uses: a warp owns mma.sync's 16 rows; chunks are
// whole k16 steps of P V.
constexpr int64_t kRowsPerWarp = 16, kChunkStep = 16;

AttentionMatch fail(std::string reason) { return AttentionMatch{std::nullopt, std::move(reason)}; }

/// Packs the query heads that share a key/value head into the rows of a batch point
/// (AttentionPlan::fold): the innermost batch axis, when K and V have stride 0 along it, Q's
/// stride there is its M rows, the block has rows to spare (M < rows) and no score step reads a
/// side input that depends on it. Returns whether it did.
bool fold_query_groups(const OpGraph& graph, AttentionPlan& p) {
  if (p.warpgroup || p.batch_axes.empty() || p.shape.queries >= p.rows) return false;
  const size_t b = p.batch_axes.size() - 1;
  const int axis = p.batch_axes[b];
  const int64_t g = p.batch_extents[b];
  if (g <= 1 || p.k.batch_strides[b] != 0 || p.v.batch_strides[b] != 0 || p.q.batch_strides[b] != p.shape.queries * p.q.ld)
    return false;
  for (NodeId n : p.pattern.score_epilogue) {
    const TeNode& node = graph.node(n);
    for (size_t k = 0; k < node.inputs().size(); ++k) {
      const NodeId producer = graph.producer(graph.node_inputs(n)[k]);
      const bool chain = producer == p.pattern.scores ||
                         std::find(p.pattern.score_epilogue.begin(), p.pattern.score_epilogue.end(), producer) !=
                             p.pattern.score_epilogue.end();
      if (chain) continue;
      const Access& acc = node.inputs()[k];
      if (acc.is_gather()) return false;
      for (const AffineExpr& row : acc.map.results())
        if (axis < static_cast<int>(row.coeffs.size()) && row.coeffs[axis] != 0) return false;
    }
  }
  p.fold = static_cast<int>(g);
  p.fold_axis = axis;
  p.batch_axes.pop_back();
  p.batch_extents.pop_back();
  for (MmaOperand* op : {&p.q, &p.k, &p.v}) op->batch_strides.pop_back();
  p.tiles_m = (p.queries() + p.rows - 1) / p.rows;
  return true;
}

// The Hopper kernel's software choices (device/flash.cuh's WarpgroupAttention): chunks of 128
// keys (S is one m64n128 wgmma per k step), or of 64 when two stages of 128 do not fit beside Q
// or dv is above 128, up to kWgMaxStages stages of K and V; O's accumulators in m64n128 pieces and
// a last m64n64 one, up to kWgMaxHead columns (128 per thread at 256: with a 64-key chunk's
// scores and probabilities, within the consumers' setmaxnreg budget).
constexpr int kWgChunks[] = {128, 64};
// O's accumulator pieces: m64n128 (two 64-column boxes), and m64n64 (one) for an odd last box;
// a dv above one piece takes the smaller chunk (its registers).
constexpr int64_t kWgOPiece = 2 * kWgRowElems, kWgOLastPiece = kWgRowElems, kWgPiecesChunk = 64;
constexpr int kWgMaxStages = 4;
constexpr int64_t kWgMaxHead = 256;
constexpr int kTensorMapDims = 5;  // the copy engine's largest tensor rank
// Deepest ring of K and V chunks of the mma.sync kernel a recorded plan may ask for.
constexpr int kMaxStages = 8;

/// Moves plan `p` (planned for the mma.sync kernel) to the Hopper kernel when the target and the
/// problem allow it (attention_plan.h); returns why not, or "" when it did.
std::string use_warpgroups(AttentionPlan& p, const HwSpec& spec) {
  const StreamedAttention& sh = p.shape;
  if (!spec.target.has_gpu_feature("wgmma") || !spec.target.has_gpu_feature("tma"))
    return cat("spec '", spec.name, "' lists no wgmma and TMA (target.gpu_features)");
  // Tiles of whole 64-column boxes; O's accumulators are m64n128 pieces and a last m64n64.
  const int64_t d_tile = (sh.d + kWgRowElems - 1) / kWgRowElems * kWgRowElems;
  const int64_t dv_tile = (sh.dv + kWgRowElems - 1) / kWgRowElems * kWgRowElems;
  if (sh.d > kWgMaxHead || sh.dv > kWgMaxHead) return cat("a head of ", std::max(sh.d, sh.dv), " is more than ", kWgMaxHead);
  for (int64_t n : {dv_tile >= kWgOPiece ? kWgOPiece : 0, dv_tile % kWgOPiece != 0 ? kWgOLastPiece : 0})
    if (n > 0 && !wgmma_listed(spec, p.dtype, static_cast<int>(n))) return cat("the spec lists no wgmma m64n", n, "k16 for ", dtype_name(p.dtype));
  if (sh.queries < kWgInstM) return cat(sh.queries, " queries fill less than one 64-row wgmma tile");
  struct Op {
    const MmaOperand* view;
    std::vector<int>* dims;
    const char* name;
  };
  for (const Op& op : {Op{&p.q, &p.q_batch, "Q"}, Op{&p.k, &p.k_batch, "K"}, Op{&p.v, &p.v_batch, "V"}}) {
    if (op.view->ld % kChunkElems != 0) return cat(op.name, "'s rows are ", op.view->ld, " elements apart, not 16-byte aligned");
    op.dims->clear();
    for (size_t b = 0; b < p.batch_axes.size(); ++b) {
      const int64_t stride = op.view->batch_strides[b];
      if (stride == 0 || p.batch_extents[b] == 1) continue;
      if (stride % kChunkElems != 0) return cat(op.name, "'s batch stride ", stride, " is not 16-byte aligned");
      op.dims->push_back(static_cast<int>(b));
    }
    if (static_cast<int>(op.dims->size()) + 2 > kTensorMapDims)
      return cat(op.name, " has ", op.dims->size(), " batch axes with a stride; a tensor map holds ", kTensorMapDims - 2);
  }
  int threads = 0;
  if (std::string no = warpgroup_block(spec, threads); !no.empty()) return no;
  // Q's tile, the stages of K and V (rows of 128 bytes), alignment slack, the barriers (Q's, and
  // three per stage): device/flash.cuh's kSmemBytes, which the emitted kernel asserts equal.
  const int64_t rows = kWgConsumers * kWgInstM;
  auto smem = [&](int chunk, int stages) {
    return rows * d_tile * 2 + stages * chunk * (d_tile + dv_tile) * 2 + kWgAtomBytes + (1 + 3 * stages) * kWgMbarrierBytes;
  };
  int chunk = 0, stages = 0;
  for (int c : kWgChunks) {
    // O in pieces (dv above 128: 128 registers per thread at 256) leaves room for a 64-key chunk's
    // scores and probabilities only, within the consumers' setmaxnreg budget.
    if (!wgmma_listed(spec, p.dtype, c) || (dv_tile > kWgOPiece && c > kWgPiecesChunk)) continue;
    int st = kWgMaxStages;
    while (st >= 2 && smem(c, st) > spec.limits.smem_per_block_bytes) --st;
    if (st >= 2) {
      chunk = c, stages = st;
      break;
    }
  }
  if (chunk == 0) return "two stages of K and V in chunks of 128 or 64 keys (listed wgmma shapes) do not fit in shared memory";
  p.warpgroup = true;
  p.rows = static_cast<int>(rows);
  p.chunk = chunk;
  p.stages = stages;
  p.threads = threads;
  p.smem_bytes = smem(chunk, stages);
  p.tiles_m = (sh.queries + rows - 1) / rows;
  p.d_tile = d_tile;
  p.dv_tile = dv_tile;
  return "";
}

// Decoding's key split (device/flash.cuh's KSPLIT): 4 warps of 32-key chunks (2 where 4 do not
// fit), in as many stages up to kKeySplitStages as fit. Taken where the one-warp plan leaves half
// the SMs or more without a block even after its cluster split, and each block walks at least
// kKeySplitMinChunks chunks -- measured on an H200 (experiments/op_sweep/runs/h200-2026-11-30/
// decode_attention): LLaMA-70B decoding at 32768 keys, 64 one-warp blocks of 64 chunks, 0.080 ->
// 0.061 ms; at 4096 keys (8 chunks a block) and with 256 one-warp blocks (LLaMA-7B) the split
// lost, up to 1.5x; with 128 blocks (Gemma-7B, LLaMA-70B at batch 16) it changed nothing.
constexpr int kKeySplitParts[] = {4, 2};
constexpr int kKeySplitChunk = 32, kKeySplitStages = 3;
constexpr int64_t kKeySplitMinChunks = 32;

/// The key split over a cluster of the plan's blocks (flash-decoding: fewer blocks than the SMs'
/// block slots), each part at least two chunks a warp (the cost model's reduction_split, as a
/// contraction splits K); 1 where the parts' merge would not fit the stages' shared memory.
int cluster_split(const AttentionPlan& p, const HwSpec& spec) {
  const int64_t chunks = (p.shape.keys + p.chunk - 1) / p.chunk;
  const int64_t combine_bytes = (p.dv_tile / 2 + 4) * p.threads * 4;  // flash.cuh's kCombineBytes
  const LimitSpec& lim = spec.limits;
  const int64_t per_sm = std::max<int64_t>(
      1, std::min({lim.max_blocks_per_sm, lim.max_threads_per_sm / p.threads, lim.smem_per_sm_bytes / p.smem_bytes}));
  const int split = reduction_split(p.batch() * p.tiles_m, chunks, 2 * p.key_split, spec, per_sm);
  return combine_bytes <= p.smem_bytes ? split : 1;
}

/// The mma.sync kernel's geometry with `parts` warps per 16 rows (key_split) over chunks of `chunk`
/// keys in `stages` stages; why it cannot run, or "".
std::string set_ring(AttentionPlan& p, int stages, int parts, int chunk, const HwSpec& spec) {
  if (stages < 2 || stages > kMaxStages) return cat(stages, " stages are not in [2, ", kMaxStages, "]");
  if (parts < 1 || (parts > 1 && p.rows != kRowsPerWarp))
    return cat("a key split of ", parts, " needs blocks of one warp's ", kRowsPerWarp, " rows (the block has ", p.rows, ")");
  if (chunk <= 0 || chunk % kChunkStep != 0) return cat("chunk ", chunk, " is not a multiple of ", kChunkStep, " keys");
  StreamedAttention k = p.shape;
  k.stages = stages;
  k.key_split = parts;
  k.chunk = chunk;
  k.threads = p.rows / kRowsPerWarp * spec.compute.simd_width * parts;
  if (k.threads > spec.limits.max_threads_per_block) return cat(k.threads, " threads exceed a block's ", spec.limits.max_threads_per_block);
  if (k.smem_bytes() > spec.limits.smem_per_block_bytes)
    return cat(stages, " stages of ", parts, " x ", chunk, " keys need ", k.smem_bytes(), " bytes of shared memory, limit ",
               spec.limits.smem_per_block_bytes);
  p.stages = stages;
  p.key_split = parts;
  p.chunk = chunk;
  p.threads = static_cast<int>(k.threads);
  p.smem_bytes = k.smem_bytes();
  return "";
}

/// The mma.sync kernel's ring and key split: as the schedule recorded them (KernelChoice params
/// "stages", "key_split" and "chunk": a plan saved before, a tuner's variant), else the schedule's
/// ring and, where the rule at kKeySplitParts holds, the key split. Returns why the recorded ones
/// cannot run, or "".
std::string ring_and_split(AttentionPlan& p, const KernelChoice& k, const HwSpec& spec) {
  if (k.family == "flash" && k.params.count("rows")) {
    auto param = [&](const char* name, int64_t fallback) {
      const auto it = k.params.find(name);
      return static_cast<int>(it == k.params.end() ? fallback : it->second);
    };
    const std::string why = set_ring(p, param("stages", p.stages), param("key_split", 1), param("chunk", p.chunk), spec);
    return why.empty() ? why : "the recorded flash plan: " + why;
  }
  if (p.rows != kRowsPerWarp) return "";
  const int split = cluster_split(p, spec);
  const int64_t chunks = (p.shape.keys + p.chunk - 1) / p.chunk;
  if (2 * p.blocks() * split > spec.compute.units || chunks / split < kKeySplitMinChunks) return "";
  for (int parts : kKeySplitParts)
    for (int stages = kKeySplitStages; stages >= 2; --stages)
      if (set_ring(p, stages, parts, kKeySplitChunk, spec).empty()) return "";
  return "";
}

}  // namespace

AttentionMatch plan_attention(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  std::string why;
  const std::optional<StreamedAttention> shape = streamed_attention(graph, group, &why);
  if (!shape) return fail(why);
  AttentionPlan p;
  p.shape = *shape;
  p.pattern = *match_attention_to(graph, group.nodes.back());
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
  p.store_strides = attention_store_strides(graph, p.pattern);
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
  p.rows = static_cast<int>(shape->rows);
  p.chunk = static_cast<int>(shape->chunk);
  p.stages = static_cast<int>(shape->stages);
  p.threads = static_cast<int>(shape->threads);
  p.d_tile = shape->d_tile;
  p.dv_tile = shape->dv_tile;
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return fail(cat("needs ", p.smem_bytes, " bytes of shared memory per block, limit ", spec.limits.smem_per_block_bytes));
  p.warpgroup_reason = use_warpgroups(p, spec);
  p.exact_exponent = !(attention_logit_bound(graph, p.pattern) < AttentionPlan::kFastExponentLimit);
  const bool folded = fold_query_groups(graph, p);
  if (!p.warpgroup)
    if (std::string why = ring_and_split(p, group.kernel, spec); !why.empty()) return fail(why);
  if (folded) {
    // A block holds rows of all M queries (of several heads): the keys any of them sees.
    if (const std::optional<AttentionKeyRanges> all = attention_key_ranges(graph, p.pattern, shape->queries, p.chunk)) {
      AttentionKeyRanges r = *all;
      r.rows = p.rows;
      r.first.assign(p.tiles_m, all->first[0]);
      r.end.assign(p.tiles_m, all->end[0]);
      r.plain_first.assign(p.tiles_m, all->plain_first[0]);
      r.plain_end.assign(p.tiles_m, all->plain_end[0]);
      p.key_ranges = r;
    }
  } else {
    p.key_ranges = attention_key_ranges(graph, p.pattern, p.rows, p.chunk);
  }
  if (!p.warpgroup) {
    p.splits = cluster_split(p, spec);
  }
  return AttentionMatch{p, ""};
}

GroupPlan attention_group_plan(const GroupPlan& generic, const AttentionPlan& a) {
  GroupPlan plan = inlined_launch_plan(generic, a.blocks(), a.threads);
  for (NodePlan& np : plan.nodes) np.writes_global = np.role == NodeRole::sink;
  // (O's block: the sink's tile where O is the sink; output copies keep the generic plan's.)
  const int ns = static_cast<int>(plan.sink_tile.size());
  if (a.pattern.output_copies.empty()) {
    plan.sink_tile[ns - 2] = a.rows;
    plan.sink_tile[ns - 1] = a.shape.dv;
  }
  plan.grid = a.batch_extents;
  plan.grid.push_back(a.tiles_m);
  plan.grid.push_back(a.splits);
  plan.cluster_blocks = a.splits;
  plan.pool_bytes = a.smem_bytes;
  TESSEL_ASSERT(generic.outputs.size() == 1, "a streamed attention group writes only its sink");
  if (a.warpgroup) {
    // Q in boxes of the block's rows, K and V in boxes of one chunk's rows; 64 columns each
    // (device/flash.cuh's WarpgroupAttention); the batch axes with a stride as outer dimensions.
    const StreamedAttention& s = a.shape;
    auto map = [&](const MmaOperand& op, const std::vector<int>& dims, int64_t rows, int64_t cols, int box_rows) {
      TensorMapParam m{op.tensor, rows, cols, op.ld, box_rows, kWgRowElems, {}, {}, op.offset, {}, {}};
      for (int b : dims) {
        m.batch_extents.push_back(a.batch_extents[b]);
        m.batch_strides.push_back(op.batch_strides[b]);
      }
      return m;
    };
    plan.tensor_maps.push_back(map(a.q, a.q_batch, s.queries, s.d, a.rows));
    plan.tensor_maps.push_back(map(a.k, a.k_batch, s.keys, s.d, a.chunk));
    plan.tensor_maps.push_back(map(a.v, a.v_batch, s.keys, s.dv, a.chunk));
  }
  return plan;
}

std::string print_attention_plan(const OpGraph& graph, const AttentionPlan& a) {
  const StreamedAttention& s = a.shape;
  std::string steps;
  for (NodeId n : a.pattern.score_epilogue) steps += cat(steps.empty() ? "" : ", ", graph.node(n).name());
  // O's wgmma: one m64n<dv_tile> up to 128 columns, else m64n128 pieces and a last m64n64.
  const std::string o_shapes = a.dv_tile <= kWgOPiece ? cat("m64n", a.dv_tile, "k16")
                                                      : cat(a.dv_tile / kWgOPiece, " x m64n", kWgOPiece, "k16",
                                                            a.dv_tile % kWgOPiece ? cat(" + m64n", kWgOLastPiece, "k16") : "");
  const std::string how = a.warpgroup ? cat("wgmma m64n", a.chunk, "k16 and ", o_shapes, " ", dtype_name(a.dtype), ", TMA")
                                      : cat("mma.sync m16n8k16 ", dtype_name(a.dtype),
                                            a.d_tile > kStreamedQFragmentsMaxHead ? ", Q's fragments read from shared memory" : "");
  return cat("streamed attention (flash, ", how, "): '", graph.node(a.pattern.out).name(), "' ", s.batch, " x ", s.queries,
             " queries x ", s.keys, " keys, d ", s.d, ", dv ", s.dv, "; score steps ", steps.empty() ? "none" : steps, "; ",
             print_mma_operand(graph, "Q", a.q), ", ", print_mma_operand(graph, "K", a.k), ", ", print_mma_operand(graph, "V", a.v),
             "; ", a.rows, " query rows per block (", a.threads, " threads", a.warpgroup ? ": a producer and two consumer warpgroups" : "",
             "), keys in chunks of ", a.chunk,
             a.key_ranges && a.key_ranges->skipped() > 0
                 ? cat(" (", a.key_ranges->visited(), " of ", a.tiles_m * a.key_ranges->chunks,
                       " per batch point: the mask excludes the others)")
                 : std::string(),
             a.d_tile != s.d || a.dv_tile != s.dv
                 ? cat(", head tiles d ", a.d_tile, ", dv ", a.dv_tile)
                 : std::string(),
             a.splits > 1 ? cat(", the keys split over a cluster of ", a.splits, " blocks") : std::string(),
             a.exact_exponent ? ", exponents as (s - m) log2 e (logits may reach 2^20)" : "",
             a.fold > 1 ? cat(", the ", a.fold, " query heads sharing a key/value head packed into the rows (", a.queries(),
                              " per batch point)")
                        : std::string(),
             a.key_split > 1 ? cat(", ", a.key_split, " warps sharing the rows, each on its own chunks of a stage") : std::string(),
             ", ", a.stages, " stages, ", a.smem_bytes, " bytes of shared memory",
             a.warpgroup_reason.empty() ? "" : cat("; wgmma not used: ", a.warpgroup_reason));
}

}  // namespace tessel::cuda
