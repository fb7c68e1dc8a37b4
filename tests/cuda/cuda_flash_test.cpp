// Streamed attention (tilegraph/attention_pattern.h, the welder's step 2b, kernels/cuda/
// attention_plan.h, device/flash.cuh): which graphs match the pattern and why the others do not;
// the streamed group in the schedule (check_schedule, JSON round trip, the cost model's price);
// specs and shapes the kernel cannot take; which of the two kernels (Hopper's wgmma + TMA one,
// the mma.sync one) a case gets and why; NVRTC compiles of every case with both; and, on a GPU,
// the results of both against the interpreter (the mma.sync kernel through an H100 spec without
// wgmma shapes): query and key tails (not multiples of the 128-row block or the 64/128-key
// chunk), keys fewer than a chunk, bf16, d 32 / 64 / 128 / 160 / 256 (64-key chunks and O in pieces on
// the Hopper kernel, Q from shared memory on the mma.sync one), dv != d, an additive mask read from
// device memory, score steps evaluated two scores at a time in packed f16x2 / bf16x2 registers
// (scale and shift by scalars) or one at a time (a mask, a division), heads transposed out of [batch, seq, heads, d] (strided rows, tensor maps with
// non-nested batch strides), Q, K and V at fixed offsets of one packed tensor. Without a GPU the run case prints [SKIP] and the compile-only case
// still compiles every kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <tuple>

#include "cuda_check.h"
#include "../model_builder.h"
#include "cost_model/analytic_model.h"
#include "cost_model/group_footprint.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/kernel_families.h"
#include "policy/check_schedule.h"
#include "policy/schedule_json.h"
#include "tilegraph/attention_pattern.h"
#include "tilegraph/normalize.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

struct Attn {
  DType dt = DType::f16;
  int64_t batch = 1, heads = 2, sq = 129, skv = 520, d = 64, dv = 64;
  bool mask = false;           // + mask[sq, skv] (an input) after the scaling
  bool seq_major = false;      // Q, K, V given as [batch, seq, heads, d] and transposed to heads
  bool probs_output = false;   // P is also a graph output (no streaming)
  bool shift = false;          // + shift (a one-element weight) after the scaling
  bool divide = false;         // divided by the scale instead of multiplied
  bool packed = false;         // Q, K, V: Gathers of fixed indices 0, 1, 2 of one [3, batch, seq, heads, d] input
  int64_t groups = 1;           // grouped-query: q [batch, heads, groups, sq, d] against k, v [batch, heads, 1, skv, d]
  bool causal = false;         // + Trilu(ConstantOfShape([sq, skv], -6e4 or -1e30), k = skv - sq + 1): query i sees keys
                               //   up to skv - sq + i (folded into a weight up to 2^20 elements, nodes above)
  int merge = 0;               // O's heads merged (1: Transpose to [batch, sq, heads.., dv], Reshape to [batch, sq,
                               //   heads.. x dv]); 2: O transposed with dv no longer last (not stored through)
};

OpGraph attention(const Attn& a) {
  ModelBuilder b(a.dt);
  const std::string packed = a.packed ? b.input("qkv", {3, a.batch, a.sq, a.heads, a.d}) : "";
  auto operand = [&](const char* name, int64_t s, int64_t d) {
    if (a.packed) {  // the kernels read each from its offset in the packed tensor (Q's is 0)
      const int64_t index = std::string(name) == "q" ? 0 : std::string(name) == "k" ? 1 : 2;
      const std::string h = b.op("Gather", {packed, b.weight_i64(cat("index_", name), {index}, true)}, {{"axis", int64_t{0}}});
      return b.op("Transpose", {h}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    }
    if (a.groups > 1) return b.input(name, {a.batch, a.heads, std::string(name) == "q" ? a.groups : 1, s, d});
    if (!a.seq_major) return b.input(name, {a.batch, a.heads, s, d});
    return b.op("Transpose", {b.input(name, {a.batch, s, a.heads, d})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  };
  const std::string q = operand("q", a.sq, a.d), k = operand("k", a.skv, a.d), v = operand("v", a.skv, a.dv);
  const std::string kt = b.op("Transpose", {k}, {{"perm", a.groups > 1 ? std::vector<int64_t>{0, 1, 2, 4, 3} : std::vector<int64_t>{0, 1, 3, 2}}});
  // (A causal case's scale is 1/8: with a random one up to 1 the -6e4 fill could not be proved to
  // exclude keys, attention_pattern.h.)
  const std::string scale = a.causal ? b.weight("scale", {}, 5, 0.125, 0.125) : b.weight("scale", {}, 5);
  std::string x = b.op(a.divide ? "Div" : "Mul", {b.op("MatMul", {q, kt}), scale});
  if (a.shift) x = b.op("Add", {x, b.weight("shift", {}, 6)});
  if (a.mask) x = b.op("Add", {x, b.input("mask", {a.sq, a.skv})});
  if (a.causal) {
    const HostTensor fill(TensorType{a.dt, {1}}, std::vector<double>{a.dt == DType::f16 ? -6e4 : -1e30});
    const std::string full = b.op("ConstantOfShape", {b.weight_i64("mask_shape", {a.sq, a.skv})}, {{"value", fill}});
    x = b.op("Add", {x, b.op("Trilu", {full, b.weight_i64("mask_k", {a.skv - a.sq + 1}, true)}, {{"upper", int64_t{1}}})});
  }
  const std::string probs = b.op("Softmax", {x}, {{"axis", int64_t{-1}}});
  std::string out = b.op("MatMul", {probs, v});
  if (a.merge == 1) {
    const std::vector<int64_t> perm = a.groups > 1 ? std::vector<int64_t>{0, 3, 1, 2, 4} : std::vector<int64_t>{0, 2, 1, 3};
    out = b.op("Transpose", {out}, {{"perm", perm}});
    out = b.op("Reshape", {out, b.weight_i64("merged", {a.batch, a.sq, a.heads * a.groups * a.dv})});
  }
  if (a.merge == 2)
    out = b.op("Transpose", {out}, {{"perm", a.groups > 1 ? std::vector<int64_t>{0, 1, 2, 4, 3} : std::vector<int64_t>{0, 1, 3, 2}}});
  if (a.probs_output) return b.graph(std::vector<std::string>{out, probs});
  return b.graph(out);
}

using FlashCase = GraphCase;

std::vector<FlashCase> flash_cases() {
  std::vector<FlashCase> out;
  auto add = [&](std::string name, const Attn& a) { out.push_back({std::move(name), attention(a)}); };
  add("f16 1x2 s129/520 d64", Attn{});
  add("bf16 2x3 s200/77 d128", Attn{DType::bf16, 2, 3, 200, 77, 128, 128});
  add("f16 1x1 s16/16 d32", Attn{DType::f16, 1, 1, 16, 16, 32, 32});
  add("f16 dv 128 != d 64, s70/300", Attn{DType::f16, 1, 2, 70, 300, 64, 128});
  add("f16 additive mask 1x2 s130/130 d64", Attn{DType::f16, 1, 2, 130, 130, 64, 64, true});
  add("f16 seq-major heads 2x4 s257/257 d128 + mask", Attn{DType::f16, 2, 4, 257, 257, 128, 128, true, true});
  add("bf16 seq-major 1x3 s64/384 d64", Attn{DType::bf16, 1, 3, 64, 384, 64, 64, false, true});
  add("f16 scaled and shifted by scalars 1x2 s100/333 d64", Attn{.sq = 100, .skv = 333, .shift = true});
  add("bf16 scaled and shifted by scalars 1x2 s96/130 d64", Attn{.dt = DType::bf16, .sq = 96, .skv = 130, .shift = true});
  add("f16 divided by the scale 1x2 s64/200 d64", Attn{.sq = 64, .skv = 200, .divide = true});
  add("f16 packed Q, K, V at offsets of one tensor 2x3 s197/197 d64", Attn{.batch = 2, .heads = 3, .sq = 197, .skv = 197, .packed = true});
  add("bf16 packed Q, K, V 1x2 s80/80 d128", Attn{.dt = DType::bf16, .sq = 80, .skv = 80, .d = 128, .dv = 128, .packed = true});
  add("f16 causal (a folded mask) 2x2 s300/300 d64", Attn{.batch = 2, .sq = 300, .skv = 300, .causal = true});
  add("bf16 causal (mask nodes) 1x2 s1100/1100 d128", Attn{.dt = DType::bf16, .sq = 1100, .skv = 1100, .d = 128, .dv = 128, .causal = true});
  add("f16 causal chunk of 70 queries after 450 cached keys 1x2 d64", Attn{.sq = 70, .skv = 520, .causal = true});
  add("f16 head 40 1x2 s200/200", Attn{.sq = 200, .skv = 200, .d = 40, .dv = 40});
  add("bf16 head 80 1x2 s150/90", Attn{.dt = DType::bf16, .sq = 150, .skv = 90, .d = 80, .dv = 80});
  add("f16 head 8, dv 24, 1x2 s64/64", Attn{.sq = 64, .skv = 64, .d = 8, .dv = 24});
  add("f16 decode: 1 query, 2000 keys, 2x3 heads (keys split over a cluster)", Attn{.batch = 2, .heads = 3, .sq = 1, .skv = 2000});
  add("bf16 grouped-query decode: 2x2 key/value heads of 8 query heads, 1 query, 700 keys d128",
      Attn{.dt = DType::bf16, .batch = 2, .heads = 2, .sq = 1, .skv = 700, .d = 128, .dv = 128, .groups = 8});
  add("f16 grouped-query causal chunk: 1x2 key/value heads of 4, 5 queries after 300 keys",
      Attn{.sq = 5, .skv = 305, .groups = 4, .causal = true});
  // O stored through the heads' merge (a Transpose and a Reshape after it, no kernel of their own):
  // on both kernels, with a key split, and with query heads folded into a block's rows.
  add("f16 heads merged after O 2x3 s197/197 d64", Attn{.batch = 2, .heads = 3, .sq = 197, .skv = 197, .merge = 1});
  add("bf16 seq-major heads merged 1x3 s64/384 d64", Attn{.dt = DType::bf16, .heads = 3, .sq = 64, .skv = 384, .seq_major = true, .merge = 1});
  add("f16 head 40 merged 1x2 s100/100", Attn{.sq = 100, .skv = 100, .d = 40, .dv = 40, .merge = 1});
  add("f16 decode merged: 1 query, 2000 keys, 2x3 heads", Attn{.batch = 2, .heads = 3, .sq = 1, .skv = 2000, .merge = 1});
  add("f16 grouped-query causal chunk merged: 1x2 key/value heads of 4, 5 queries after 300 keys",
      Attn{.sq = 5, .skv = 305, .groups = 4, .causal = true, .merge = 1});
  // Heads above 128: the Hopper kernel's 64-key chunks and O in m64n128 / m64n64 pieces, the
  // mma.sync kernel's Q fragments from shared memory.
  add("bf16 head 256 (Gemma) 1x2 s200/333", Attn{.dt = DType::bf16, .sq = 200, .skv = 333, .d = 256, .dv = 256});
  add("f16 head 160 (SD) 1x2 s129/150", Attn{.sq = 129, .skv = 150, .d = 160, .dv = 160});
  add("f16 d 256, dv 192 causal 1x2 s300/300", Attn{.sq = 300, .skv = 300, .d = 256, .dv = 192, .causal = true});
  add("f16 head 256 decode: 1 query, 1500 keys, 1x2 heads", Attn{.sq = 1, .skv = 1500, .d = 256, .dv = 256});
  add("bf16 long-context grouped-query decode: 2 key/value heads of 4, 1 query, 20000 keys d128 (keys split over 4 warps)",
      Attn{.dt = DType::bf16, .heads = 2, .sq = 1, .skv = 20000, .d = 128, .dv = 128, .groups = 4});
  // Whole stages of 4 x 32 keys (32896 = 257 x 128), the cluster's parts starting off a stage
  // (1028 chunks over 8: rank 7 from chunk 899): the last stage's rows past N are not read.
  add("bf16 grouped-query decode split over warps, whole stages: 4 key/value heads of 8, 1 query, 32896 keys d128",
      Attn{.dt = DType::bf16, .heads = 4, .sq = 1, .skv = 32896, .d = 128, .dv = 128, .groups = 8});
  // One-warp blocks at least as many as the SMs: no key split (fewer: a split over warps).
  add("f16 decode of 4x40 heads: 1 query, 300 keys (one warp a block)", Attn{.batch = 4, .heads = 40, .sq = 1, .skv = 300});
  return out;
}

// Whether the Hopper kernel should take attention `a` on the H100 spec (attention_plan.h).
bool hopper_kernel(const Attn& a) { return a.d <= 256 && a.dv <= 256 && a.sq >= 64; }

// The H100 spec without its wgmma shapes: the planner keeps the mma.sync kernel (which runs on
// the H100 too).
HwSpec mma_sync_spec() {
  HwSpec s = gpu_spec();
  for (auto& [dt, shapes] : s.compute.tensor_core_shapes)
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(), [](const MmaShape& m) { return m.m == 64; }), shapes.end());
  return s;
}

// The one streamed group of `g` as welder schedules it for `spec` (with the recorded kernel
// families), and its kernel, which must be the flash one.
struct FlashKernel {
  Schedule schedule;
  int group = -1;
  cuda::GeneratedKernel kernel;
};
FlashKernel flash_kernel(const OpGraph& g, const HwSpec& spec) {
  FlashKernel f;
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  for (const auto& policy : policies())
    if (policy->name() == std::string("welder")) f.schedule = schedule_with_families(*policy, PolicyContext{g, spec, cost}, &families);
  int streamed = 0;
  for (int i = 0; i < static_cast<int>(f.schedule.groups.size()); ++i)
    if (f.schedule.groups[i].group.stream_chunk > 0) f.group = i, ++streamed;
  REQUIRE(streamed == 1);
  f.kernel = emit_kernel(g, f.schedule, f.group, spec);
  REQUIRE(f.kernel.path == "flash");
  return f;
}

int streamed_groups(const Schedule& s) {
  int n = 0;
  for (const ScheduleGroup& g : s.groups) n += g.group.stream_chunk > 0;
  return n;
}

}  // namespace

TEST_CASE("cuda flash: attention pattern: the unfused graph matches, with its steps, copies and softmax nodes") {
  const OpGraph g = attention(Attn{.mask = true, .seq_major = true});
  const NodeId out = g.producer(g.outputs()[0]);
  std::string why;
  const std::optional<AttentionPattern> p = match_attention(g, out, &why);
  REQUIRE_MESSAGE(p.has_value(), why);
  CHECK(p->out == out);
  CHECK(p->score_epilogue.size() == 2);  // scale, mask
  CHECK(g.node(p->scores).num_reduction() == 1);
  CHECK(g.node(p->max).combiner() == Combiner::max);
  CHECK(g.node(p->sum).combiner() == Combiner::sum);
  CHECK(p->operand_copies.size() == 4);  // q, k (heads, then K^T) and v transposes: kt folds with k's
  CHECK(p->nodes(g).back() == out);
  CHECK(p->nodes(g).size() == 4 + 1 + 2 + 3 + 1);

  // The heads' merge after O: a Transpose and a Reshape the kernel stores through (O's batch, head,
  // query and dv coordinates at strides s x h x dv, dv, h x dv and 1 of the merged tensor); the
  // pattern matches at O and at each copy.
  {
    const Attn merged{.batch = 2, .heads = 3, .sq = 5, .skv = 7, .d = 16, .dv = 8, .merge = 1};
    const OpGraph gm = attention(merged);
    const NodeId last = gm.producer(gm.outputs()[0]);
    const std::optional<AttentionPattern> at_last = match_attention(gm, last, &why);
    REQUIRE_MESSAGE(at_last.has_value(), why);
    REQUIRE(at_last->output_copies.size() == 2);
    CHECK(at_last->sink() == last);
    CHECK(at_last->nodes(gm).back() == last);
    CHECK(attention_store_strides(gm, *at_last) == std::vector<int64_t>{5 * 3 * 8, 8, 3 * 8, 1});
    const std::optional<AttentionPattern> at_o = match_attention(gm, at_last->out, &why);
    REQUIRE(at_o.has_value());
    CHECK(at_o->sink() == last);
    // At the first copy: the copies up to it (a group ending there stores through it alone).
    const std::optional<AttentionPattern> at_first = match_attention(gm, at_last->output_copies[0], &why);
    REQUIRE(at_first.has_value());
    CHECK(at_first->output_copies == std::vector<NodeId>{at_last->output_copies[0]});
    CHECK(attention_store_strides(gm, *at_first) == std::vector<int64_t>{5 * 3 * 8, 8, 3 * 8, 1});
    // A transpose that moves dv off the innermost axis is not stored through: O ends the pattern.
    const OpGraph moved = attention(Attn{.merge = 2});
    const NodeId transpose = moved.producer(moved.outputs()[0]);
    const NodeId o = moved.producer(moved.node_inputs(transpose)[0]);
    const std::optional<AttentionPattern> plain = match_attention(moved, o, &why);
    REQUIRE(plain.has_value());
    CHECK(plain->output_copies.empty());
    CHECK(attention_store_strides(moved, *plain) == std::vector<int64_t>{2 * 129 * 64, 129 * 64, 64, 1});
    CHECK_FALSE(match_attention(moved, transpose, &why).has_value());
  }

  // P read outside the chain: no match, and the reason names it.
  const OpGraph leaked = attention(Attn{.probs_output = true});
  CHECK_FALSE(match_attention(leaked, leaked.producer(leaked.outputs()[0]), &why).has_value());
  CHECK(why.find("softmax output read only by") != std::string::npos);
  // A plain product is not attention.
  ModelBuilder b(DType::f16);
  const OpGraph mm = b.graph(b.op("MatMul", {b.input("a", {16, 32}), b.input("b", {32, 16})}));
  CHECK_FALSE(match_attention(mm, mm.producer(mm.outputs()[0]), &why).has_value());
}

TEST_CASE("cuda flash: welder forms one legal streamed group, priced, saved and reloaded") {
  const HwSpec& spec = gpu_spec();
  for (const FlashCase& c : flash_cases()) {
    INFO(c.name);
    const Schedule s = schedule_with(c.graph, spec, "welder");
    REQUIRE(streamed_groups(s) == 1);
    CHECK(check_schedule(c.graph, spec, s).empty());
    const ScheduleGroup* sg = nullptr;
    for (const ScheduleGroup& g : s.groups)
      if (g.group.stream_chunk > 0) sg = &g;
    CHECK(sg->predicted.latency_s > 0);
    CHECK(sg->predicted.tensor_cores);
    const std::optional<StreamedAttention> shape = streamed_attention(c.graph, sg->group);
    REQUIRE(shape.has_value());
    CHECK(group_footprint(c.graph, sg->group, spec).smem_bytes_per_block == shape->smem_bytes());
    // JSON round trip keeps the chunk.
    const Schedule back = schedule_from_json(schedule_to_json(s, c.graph), "test.json", c.graph);
    CHECK(streamed_groups(back) == 1);
    CHECK(check_schedule(c.graph, spec, back).empty());
    // The kernel: the streamed path for every case.
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
      if (s.groups[i].group.stream_chunk > 0) {
        const cuda::GeneratedKernel k = emit_kernel(c.graph, s, i, spec);
        CHECK(k.path == "flash");
        CHECK(k.source.find("streamed attention (flash") != std::string::npos);
        // The scale is one element: loaded once, not per score.
        CHECK(k.source.find("scale, the same element at every point") != std::string::npos);
        // The heads' merge is the kernel's store: one kernel for the whole graph.
        if (c.name.find("merged") != std::string::npos) {
          CHECK(k.source.find("O stored through its output copies") != std::string::npos);
          CHECK(s.groups.size() == 1);
        }
      }
  }
  // Roller never streams.
  CHECK(streamed_groups(schedule_with(flash_cases()[0].graph, spec, "roller")) == 0);
}

TEST_CASE("cuda flash: the cost model prices the kernel the planner recorded") {
  const HwSpec& spec = gpu_spec();
  auto streamed = [](const Schedule& s) {
    for (const ScheduleGroup& g : s.groups)
      if (g.group.stream_chunk > 0) return g;
    FAIL("no streamed group");
    return s.groups.front();
  };
  // Prefill on the Hopper kernel: blocks of 128 rows, chunks of 128 keys; the softmax's issue
  // slots come on top of the tensor cores' time, and a block's chain is priced.
  const OpGraph pre = attention(Attn{.batch = 2, .heads = 4, .sq = 1000, .skv = 1000});
  const ScheduleGroup g = streamed(with_families(pre, spec, "welder"));
  REQUIRE(g.group.kernel.family == "flash");
  const std::map<std::string, int64_t>& kp = g.group.kernel.params;
  REQUIRE(kp.at("warpgroup") == 1);
  CHECK(g.predicted.blocks == 2 * 4 * ((1000 + kp.at("rows") - 1) / kp.at("rows")) * kp.at("splits"));
  const double scores = 2.0 * 4 * kp.at("key_chunks") * kp.at("rows") * kp.at("chunk");
  const double tensor_s = scores * 2 * (kp.at("d_tile") + kp.at("dv_tile")) / spec.peak_flops(DType::f16, true);
  // (The softmax's issue slots about double it: the tensor-core price alone is tensor_s.)
  CHECK(g.predicted.term("compute") > 1.5 * tensor_s);
  CHECK(g.predicted.term("chain") > 0);
  // Decoding with grouped-query heads: 8 query heads share a key/value head, folded into one
  // warp's 16 rows: the blocks are the key/value heads (times the key split), not the query heads.
  const OpGraph dec = attention(Attn{.heads = 4, .sq = 1, .skv = 4096, .d = 128, .dv = 128, .groups = 8});
  const ScheduleGroup gd = streamed(with_families(dec, spec, "welder"));
  const std::map<std::string, int64_t>& kd = gd.group.kernel.params;
  REQUIRE(kd.at("fold") == 8);
  CHECK(kd.at("rows") == 16);
  CHECK(gd.predicted.blocks == 4 * kd.at("splits"));
  // A block walking many chunks is bound by its chain.
  CHECK(gd.predicted.bound == "latency");
  // Without the recorded kernel, the schedule's geometry is priced (the query heads' blocks).
  ScheduledGroup bare = gd.group;
  bare.kernel.params.clear();
  const CostBreakdown b = cost_models().front()->estimate(dec, bare, spec);
  CHECK(b.blocks != gd.predicted.blocks);
  CHECK(b.term("chain") == 0);
}

TEST_CASE("cuda flash: decoding's few one-warp blocks split their keys over four warps, unless the schedule recorded otherwise") {
  // LLaMA-70B-shaped decoding, 8 key/value heads of 8 query heads, 32768 keys, d 128: 8 blocks of
  // one warp (the query heads folded into its rows), 64 after the cluster split, fewer than the
  // SMs, each walking 64 chunks. Four warps share the rows, a stage holds four chunks of 32 keys
  // (one each), three stages, and the keys still split over clusters of 8: 64 blocks of 128
  // threads, each warp walking 32 of the 1024 chunks of 32 keys.
  const HwSpec& spec = gpu_spec();
  const OpGraph g = attention(Attn{.dt = DType::bf16, .heads = 8, .sq = 1, .skv = 32768, .d = 128, .dv = 128, .groups = 8});
  const FlashKernel f = flash_kernel(g, spec);
  const cuda::AttentionPlan& a = *f.kernel.attention;
  REQUIRE_FALSE(a.warpgroup);
  CHECK(a.fold == 8);
  CHECK(a.rows == 16);
  CHECK(a.key_split == 4);
  CHECK(a.chunk == 32);
  CHECK(a.threads == 128);
  CHECK(a.stages == 3);
  CHECK(a.splits == 8);
  CHECK(a.blocks() == 64);
  CHECK(a.smem_bytes == (16 * 136 + 3 * 4 * 32 * (136 + 136)) * 2);
  CHECK(f.kernel.source.find("4 warps sharing the rows") != std::string::npos);
  const std::map<std::string, int64_t>& kp = f.schedule.groups[f.group].group.kernel.params;
  CHECK(kp.at("key_split") == 4);
  CHECK(kp.at("chunk") == 32);
  // The model prices the warps' side-by-side chains: a quarter of the steps of one warp's.
  ScheduledGroup one_warp = f.schedule.groups[f.group].group;
  one_warp.kernel.params["key_split"] = 1;
  one_warp.kernel.params["chunk"] = 64;
  one_warp.kernel.params["threads"] = 32;
  one_warp.kernel.params["key_chunks"] = 512;
  one_warp.kernel.params["splits"] = 8;
  const CostBreakdown split = cost_models().front()->estimate(g, f.schedule.groups[f.group].group, spec);
  const CostBreakdown alone = cost_models().front()->estimate(g, one_warp, spec);
  CHECK(alone.term("chain") > 1.9 * split.term("chain"));

  // A schedule recording another plan (saved before the split existed, or a tuner's variant) is
  // emitted as recorded: one warp of 64-key chunks, or two warps of 64 in three stages (recorded
  // by hand: the choices only, the rest the plan's own).
  Schedule before = f.schedule;
  before.groups[f.group].group.kernel.params = one_warp.kernel.params;
  before.groups[f.group].group.kernel.params.erase("key_split");  // (saved before it was recorded)
  const cuda::GeneratedKernel replayed = emit_kernel(g, before, f.group, spec);
  REQUIRE(replayed.attention);
  CHECK(replayed.attention->key_split == 1);
  CHECK(replayed.attention->chunk == 64);
  CHECK(replayed.attention->threads == 32);
  CHECK(replayed.source.find("warps sharing the rows") == std::string::npos);
  Schedule two = f.schedule;
  two.groups[f.group].group.kernel.params = {{"rows", 16}, {"key_split", 2}, {"chunk", 64}, {"stages", 3}};
  const cuda::GeneratedKernel two_warps = emit_kernel(g, two, f.group, spec);
  REQUIRE(two_warps.attention);
  CHECK(two_warps.attention->key_split == 2);
  CHECK(two_warps.attention->stages == 3);
  CHECK(two_warps.attention->threads == 64);
  // What cannot run is refused with the reason.
  Schedule deep = f.schedule;
  deep.groups[f.group].group.kernel.params = {{"rows", 16}, {"stages", 9}};
  CHECK_THROWS_WITH_AS(emit_kernel(g, deep, f.group, spec), doctest::Contains("9 stages are not in [2, 8]"), UserError);
  Schedule big = f.schedule;
  big.groups[f.group].group.kernel.params = {{"rows", 16}, {"key_split", 4}, {"chunk", 64}};
  CHECK_THROWS_WITH_AS(emit_kernel(g, big, f.group, spec), doctest::Contains("2 stages of 4 x 64 keys need 282880 bytes"), UserError);

  // A head of 256: four warps' stages do not fit, two of 32 keys in three stages do.
  const cuda::AttentionPlan gemma =
      *flash_kernel(attention(Attn{.heads = 4, .sq = 1, .skv = 32768, .d = 256, .dv = 256}), spec).kernel.attention;
  CHECK(gemma.splits * gemma.batch() <= 66);
  CHECK(gemma.key_split == 2);
  CHECK(gemma.chunk == 32);
  CHECK(gemma.stages == 3);
  // The whole-stages case of flash_cases: the row checks stay on (flash.cuh's CopyK and CopyV).
  const cuda::GeneratedKernel whole =
      flash_kernel(attention(Attn{.dt = DType::bf16, .heads = 4, .sq = 1, .skv = 32896, .d = 128, .dv = 128, .groups = 8}), spec).kernel;
  CHECK(whole.attention->key_split == 4);
  CHECK(whole.attention->splits == 8);
  // flash_cases' long-context decode (run on the GPU there): 2 blocks, 16 after the cluster split.
  CHECK(flash_kernel(attention(Attn{.dt = DType::bf16, .heads = 2, .sq = 1, .skv = 20000, .d = 128, .dv = 128, .groups = 4}), spec)
            .kernel.attention->key_split == 4);
  // Not split: a block walking few chunks (4096 keys: 8 each after the cluster split), one-warp
  // blocks filling more than half the SMs (Gemma-7B's 128 heads at batch 8; 16 sequences of 32
  // heads), prefill's blocks of 128 rows.
  CHECK(flash_kernel(attention(Attn{.batch = 8, .heads = 16, .sq = 1, .skv = 8192, .d = 256, .dv = 256}), spec).kernel.attention->key_split ==
        1);
  CHECK(flash_kernel(attention(Attn{.dt = DType::bf16, .heads = 8, .sq = 1, .skv = 4096, .d = 128, .dv = 128, .groups = 8}), spec)
            .kernel.attention->key_split == 1);
  CHECK(flash_kernel(attention(Attn{.batch = 16, .heads = 32, .sq = 1, .skv = 4096, .d = 128, .dv = 128}), spec).kernel.attention->key_split ==
        1);
  CHECK(flash_kernel(attention(Attn{.batch = 4, .heads = 8, .sq = 2048, .skv = 2048}), mma_sync_spec()).kernel.attention->key_split == 1);
}

TEST_CASE("cuda flash run: recorded key splits and rings of a decode match the interpreter") {
  if (!gpu_available()) {
    MESSAGE("[SKIP] no CUDA device: the case above planned these kernels");
    return;
  }
  // 3 key/value heads of 4 query heads, 1 query, 2100 keys (not whole chunks): each plan the
  // planner can record for the one-warp kernel, with and without the cluster split.
  const HwSpec& spec = gpu_spec();
  const OpGraph g = attention(Attn{.heads = 3, .sq = 1, .skv = 2100, .d = 128, .dv = 128, .groups = 4});
  const FlashKernel f = flash_kernel(g, spec);
  const std::vector<std::tuple<int, int, int>> plans = {{1, 64, 2}, {1, 64, 4}, {2, 64, 2}, {2, 32, 3}, {4, 32, 2}, {4, 16, 4}};
  for (const std::tuple<int, int, int>& plan : plans) {
    // (Named copies: clang 14 does not let INFO's lambda capture structured bindings.)
    const int parts = std::get<0>(plan), chunk = std::get<1>(plan), stages = std::get<2>(plan);
    INFO("key split ", parts, ", chunks of ", chunk, ", ", stages, " stages");
    Schedule s = f.schedule;
    s.groups[f.group].group.kernel.params = {{"rows", 16}, {"key_split", parts}, {"chunk", chunk}, {"stages", stages}};
    const cuda::GeneratedKernel k = emit_kernel(g, s, f.group, spec);
    REQUIRE(k.attention);
    CHECK(k.attention->key_split == parts);
    check_schedule_on_gpu(g, spec, s);
  }
}

TEST_CASE("cuda flash: shapes, graphs and specs the kernel cannot take keep the unfused kernels") {
  const HwSpec& spec = gpu_spec();
  // Head dimension 44 (rows not whole 16-byte chunks) or 288 (more than 256), P read outside, a
  // spec without m16n8k16.
  CHECK(streamed_groups(schedule_with(attention(Attn{.d = 44, .dv = 44}), spec, "welder")) == 0);
  CHECK(streamed_groups(schedule_with(attention(Attn{.d = 288, .dv = 288}), spec, "welder")) == 0);
  CHECK(streamed_groups(schedule_with(attention(Attn{.probs_output = true}), spec, "welder")) == 0);
  HwSpec no_mma = spec;
  no_mma.compute.tensor_core_shapes.clear();
  const OpGraph g = attention(Attn{});
  const std::optional<AttentionPattern> p = match_attention(g, g.producer(g.outputs()[0]));
  REQUIRE(p.has_value());
  const std::optional<std::string> why = streamed_attention_unsupported(g, *p, no_mma);
  REQUIRE(why.has_value());
  CHECK(why->find("m16n8k16") != std::string::npos);
  CHECK(streamed_groups(schedule_with(g, no_mma, "welder")) == 0);
  CHECK_FALSE(streamed_attention_unsupported(g, *p, spec).has_value());
  // check_schedule rejects a chunk on a group that is not an attention pattern.
  Schedule s = schedule_with(g, spec, "roller");
  s.groups.back().group.stream_chunk = 64;
  const std::vector<std::string> problems = check_schedule(g, spec, s);
  REQUIRE_FALSE(problems.empty());
  CHECK(problems.front().find("stream_chunk 64") != std::string::npos);
}

TEST_CASE("cuda flash: the Hopper kernel where the spec and the shape allow it, mma.sync otherwise, with the reason") {
  const std::vector<Attn> shapes = {Attn{},
                                    Attn{DType::bf16, 2, 3, 200, 77, 128, 128},
                                    Attn{DType::f16, 1, 1, 16, 16, 32, 32},
                                    Attn{DType::f16, 1, 2, 40, 300, 64, 64},
                                    Attn{DType::f16, 2, 4, 257, 257, 128, 128, true, true},
                                    Attn{DType::bf16, 1, 2, 200, 333, 256, 256},
                                    Attn{DType::f16, 1, 2, 129, 150, 160, 160},
                                    Attn{DType::f16, 1, 2, 129, 150, 128, 256}};
  const HwSpec no_wgmma = mma_sync_spec();
  for (const Attn& a : shapes) {
    const OpGraph g = attention(a);
    INFO("d ", a.d, ", ", a.sq, " queries");
    for (const HwSpec* spec : {&gpu_spec(), &no_wgmma}) {
      const Schedule s = schedule_with(g, *spec, "welder");
      for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
        if (s.groups[i].group.stream_chunk == 0) continue;
        const cuda::GeneratedKernel k = emit_kernel(g, s, i, *spec);
        CHECK(k.path == "flash");
        const bool hopper = spec == &gpu_spec() && hopper_kernel(a);
        CHECK((k.source.find("WarpgroupAttention<") != std::string::npos) == hopper);
        CHECK((k.source.find("(flash, wgmma m64n") != std::string::npos) == hopper);
        // Heads above 128: 64-key chunks and O in pieces on the Hopper kernel (two stages of 128
        // keys do not fit beside Q), Q's fragments from shared memory on the mma.sync one.
        // (dv above 128 with d 128: 64-key chunks too, for the registers.)
        if (hopper && (a.d > 128 || a.dv > 128)) CHECK(k.source.find("wgmma m64n64k16 and ") != std::string::npos);
        if (hopper && a.dv == 256) CHECK(k.source.find("2 x m64n128k16 ") != std::string::npos);
        if (hopper && a.dv == 160) CHECK(k.source.find("1 x m64n128k16 + m64n64k16") != std::string::npos);
        CHECK((k.source.find("Q's fragments read from shared memory") != std::string::npos) == (!hopper && a.d > 128));
        if (!hopper) CHECK(k.source.find("wgmma not used: ") != std::string::npos);
        if (spec == &no_wgmma) CHECK(k.source.find("the spec lists no wgmma m64n") != std::string::npos);
        if (hopper) CHECK(k.source.find("a producer and two consumer warpgroups") != std::string::npos);
      }
    }
  }
  // Q, K and V at fixed offsets of one packed tensor: both kernels read them in place (K and V
  // start 1 and 2 times B * S * H * d elements in).
  const Attn packed{.batch = 2, .heads = 3, .sq = 197, .skv = 197, .packed = true};
  const OpGraph pg = attention(packed);
  for (const HwSpec* spec : {&gpu_spec(), &no_wgmma}) {
    const Schedule ps = schedule_with(pg, *spec, "welder");
    int flash = 0;
    for (int i = 0; i < static_cast<int>(ps.groups.size()); ++i) {
      const cuda::GeneratedKernel k = emit_kernel(pg, ps, i, *spec);
      if (k.path != "flash") continue;
      ++flash;
      CHECK(k.source.find(cat("from element ", 2 * 197 * 3 * 64)) != std::string::npos);
      CHECK(k.source.find(cat("from element ", 2 * 2 * 197 * 3 * 64)) != std::string::npos);
    }
    CHECK(flash == 1);
  }
  // Too few queries or a head dimension off the 64-element rows: the reason names it.
  const OpGraph few = attention(Attn{DType::f16, 1, 2, 40, 300, 64, 64});
  const Schedule s = schedule_with(few, gpu_spec(), "welder");
  bool seen = false;
  for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
    if (s.groups[i].group.stream_chunk > 0) {
      seen = true;
      CHECK(emit_kernel(few, s, i, gpu_spec()).source.find("40 queries fill less than one 64-row wgmma tile") !=
            std::string::npos);
    }
  CHECK(seen);
}

TEST_CASE("cuda flash: a causal mask's excluded key chunks are not visited, heads off powers of two run in padded tiles") {
  const HwSpec no_wgmma = mma_sync_spec();
  // 300 queries and keys: the Hopper kernel's 3 blocks of 128 rows visit 1, 2 and 3 of 3 chunks
  // of 128 keys; the mma.sync kernel's 2, 4 and 5 of 5 chunks of 64.
  const OpGraph g = attention(Attn{.batch = 2, .sq = 300, .skv = 300, .causal = true});
  for (const HwSpec* spec : {&gpu_spec(), &no_wgmma}) {
    const FlashKernel f = flash_kernel(g, *spec);
    const std::string& src = f.kernel.source;
    CHECK(src.find("__device__ const int tsl_key_chunks[15]") != std::string::npos);
    const char* visits = spec == &no_wgmma ? "(11 of 15 per batch point" : "(6 of 9 per batch point";
    CHECK(src.find(visits) != std::string::npos);
    // Logits within +-(60000 + 65504 / 8): the fused exponent.
    CHECK(src.find("exponents as (s - m) log2 e") == std::string::npos);
    // Below the diagonal the mask's step is an identity: those chunks are scored packed, without it.
    CHECK(src.find("auto tsl_score2p = [&]") != std::string::npos);
    CHECK(src.find(": an identity here") != std::string::npos);
    // The cost model prices the chunks visited, and the mask read only off the plain ones.
    const CostBreakdown cost = AnalyticCostModel().estimate(g, f.schedule.groups[f.group].group, *spec);
    bool noted = false, plain = false;
    for (const std::string& n : cost.notes) {
      noted |= n.find("pairs per batch point: not visited") != std::string::npos;
      plain |= n.find("read without the mask") != std::string::npos;
    }
    CHECK(noted);
    CHECK(plain);
    CHECK(f.schedule.groups[f.group].group.kernel.params.at("plain_chunks") == (spec == &no_wgmma ? 6 : 3));
  }
  // Decoding: one query per head, few blocks -- the keys split over a cluster; grouped-query
  // heads packed into the rows of one block per key/value head.
  struct Decode {
    Attn a;
    const char* expect;
  };
  for (const Decode& d : {Decode{Attn{.batch = 2, .heads = 3, .sq = 1, .skv = 2000}, "the keys split over a cluster of 8 blocks"},
                          Decode{Attn{.dt = DType::bf16, .batch = 2, .heads = 2, .sq = 1, .skv = 700, .d = 128, .dv = 128, .groups = 8},
                                 "the 8 query heads sharing a key/value head packed into the rows (8 per batch point)"}}) {
    const std::string src = flash_kernel(attention(d.a), gpu_spec()).kernel.source;
    INFO(src.substr(0, 3000));
    CHECK(src.find(d.expect) != std::string::npos);
    CHECK(src.find("the keys split over a cluster of") != std::string::npos);
    CHECK(src.find("__cluster_dims__(") != std::string::npos);
  }
  // bf16 with a -1e30 fill or a mask given as an input: logits beyond 2^20, the exact exponent
  // (f16 logits never are: a finite f16 is at most 65504).
  for (const Attn& a : {Attn{.dt = DType::bf16, .sq = 300, .skv = 300, .causal = true}, Attn{.dt = DType::bf16, .mask = true}})
    CHECK(flash_kernel(attention(a), no_wgmma).kernel.source.find("exponents as (s - m) log2 e") != std::string::npos);
  // Heads of 40: tiles of 64 columns, zero-filled past 40; the columns past 40 are not stored.
  const OpGraph h = attention(Attn{.sq = 200, .skv = 200, .d = 40, .dv = 40});
  for (const HwSpec* spec : {&gpu_spec(), &no_wgmma}) {
    const std::string src = flash_kernel(h, *spec).kernel.source;
    CHECK(src.find("head tiles d 64, dv 64") != std::string::npos);
    CHECK(src.find("if (tsl_dn >= 40) return;") != std::string::npos);
    CHECK(src.find(spec == &no_wgmma ? "StreamedAttention<128, 64, 64, 64," : "WarpgroupAttention<64, 64,") != std::string::npos);
  }
}

TEST_CASE("cuda flash: score steps of scalar products and sums run two scores at a time in packed registers") {
  struct Expect {
    Attn a;
    std::string packed;  // what the kernel's source says: the packed dtype, or why scores go one at a time
  };
  const std::vector<Expect> cases = {
      {Attn{}, "scores two at a time, in packed f16x2 registers"},
      {Attn{.dt = DType::bf16}, "scores two at a time, in packed bf16x2 registers"},
      {Attn{.shift = true}, "scores two at a time, in packed f16x2 registers"},
      {Attn{.mask = true}, "reads 'mask' per point"},
      {Attn{.divide = true}, "is not one product, sum or difference: div("},
  };
  const HwSpec no_wgmma = mma_sync_spec();
  for (const Expect& e : cases) {
    const OpGraph g = attention(e.a);
    for (const HwSpec* spec : {&gpu_spec(), &no_wgmma}) {
      const Schedule s = schedule_with(g, *spec, "welder");
      int seen = 0;
      for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
        if (s.groups[i].group.stream_chunk == 0) continue;
        ++seen;
        const std::string src = emit_kernel(g, s, i, *spec).source;
        INFO(e.packed, src.substr(src.find("auto tsl_score = ")));
        CHECK(src.find(e.packed) != std::string::npos);
        const bool packed = e.packed.find("packed") != std::string::npos;
        CHECK((src.find("tsl_h = tsl::flash::") != std::string::npos) == packed);
        // One packed instruction per step: scale, then shift.
        const std::string dt = e.a.dt == DType::bf16 ? "true" : "false";
        if (packed) CHECK(src.find("tsl_h = tsl::flash::mul2<" + dt + ">(tsl_h, ") != std::string::npos);
        CHECK((src.find("tsl_h = tsl::flash::add2<" + dt + ">(tsl_h, ") != std::string::npos) == (packed && e.a.shift));
        // Either way the kernel scores pairs through tsl_score2.
        CHECK(src.find("auto tsl_score2 = ") != std::string::npos);
      }
      CHECK(seen == 1);
    }
  }
}

TEST_CASE("cuda flash: kernels of every case compile with NVRTC for sm_90a, with and without wgmma") {
  const HwSpec no_wgmma = mma_sync_spec();
  for (const FlashCase& c : flash_cases()) {
    INFO(c.name);
    for (const HwSpec* spec : {&gpu_spec(), &no_wgmma})
      CHECK(nvrtc_compile_all(c.graph, schedule_with(c.graph, *spec, "welder"), *spec) >= 1);
  }
}

TEST_CASE("cuda flash run: timm's unbound Q, K and V, views of the packed projection after the normalize stage") {
  // The Split that unbinds them is a Gather per piece (normalize_views.h, rewrite 0): the streamed
  // attention kernel reads each from the projection's output at its offset.
  const ModelDef m = timm_attention(DType::f16, 2, 197, 6, 64);
  NormalizeReport report;
  const OpGraph g = lower_model(normalize_model(m, lower_model(m), NormalizeOptions{}, &report));
  REQUIRE(report.splits_as_picks == 1);
  const Schedule s = with_families(g, gpu_spec(), "welder");
  int flash = 0;
  for (const ScheduleGroup& group : s.groups) flash += group.group.kernel.family == "flash";
  CHECK(flash == 1);
  CHECK(nvrtc_compile_all(g, s, gpu_spec()) >= 1);
  if (!gpu_available()) {
    MESSAGE("[SKIP] no CUDA device: the kernels were compiled above");
    return;
  }
  check_schedule_on_gpu(g, gpu_spec(), s);
}

TEST_CASE("cuda flash run: both flash kernels match the interpreter") {
  if (!gpu_available()) {
    MESSAGE("[SKIP] no CUDA device: the compile-only case above compiled these kernels");
    return;
  }
  const HwSpec no_wgmma = mma_sync_spec();
  for (const FlashCase& c : flash_cases()) {
    INFO(c.name, " (Hopper spec)");
    check_on_gpu(c.graph, "welder");
  }
  for (const FlashCase& c : flash_cases()) {
    INFO(c.name, " (mma.sync: the spec without wgmma)");
    check_on_gpu_with(c.graph, "welder", no_wgmma);
  }
}

TEST_CASE("cuda flash run: a schedule whose streamed group ends at O (the heads' merge in kernels of its own) still replays") {
  // Saved before output copies joined the pattern: the streamed group ends at O and the merge's
  // Transpose and Reshape run as roller schedules them. The group is still a streamed attention
  // group (match_attention_to), its kernel stores O as it is, and the whole matches the
  // interpreter.
  const HwSpec& spec = gpu_spec();
  const OpGraph g = attention(Attn{.batch = 2, .heads = 3, .sq = 40, .skv = 70, .merge = 1});
  Schedule s = schedule_with(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  const std::optional<AttentionPattern> p = match_attention(g, g.producer(g.outputs()[0]));
  REQUIRE(p.has_value());
  REQUIRE(p->output_copies.size() == 2);
  ScheduledGroup& sg = s.groups[0].group;
  for (NodeId c : p->output_copies) {
    sg.nodes.erase(std::find(sg.nodes.begin(), sg.nodes.end(), c));
    sg.tiles.erase(c);
    sg.edge_levels.erase(g.node_output(c));
  }
  sg.edge_levels.erase(g.node_output(p->out));
  sg.kernel = {};
  const Schedule rolled = schedule_with(g, spec, "roller");
  for (const ScheduleGroup& rg : rolled.groups)
    if (std::find(p->output_copies.begin(), p->output_copies.end(), rg.group.nodes.back()) != p->output_copies.end())
      s.groups.push_back(rg);
  REQUIRE(s.groups.size() == 3);
  CHECK(check_schedule(g, spec, s).empty());
  const std::optional<AttentionPattern> at_o = match_attention_to(g, p->out);
  REQUIRE(at_o.has_value());
  CHECK(at_o->output_copies.empty());
  const cuda::GeneratedKernel k = emit_kernel(g, s, 0, spec);
  CHECK(k.path == "flash");
  CHECK(k.source.find("O stored through its output copies") == std::string::npos);
  CHECK(nvrtc_compile_all(g, s, spec) >= 2);
  if (gpu_available()) check_schedule_on_gpu(g, spec, s);
  else MESSAGE("[SKIP] no CUDA device: the kernels were compiled above");
}
