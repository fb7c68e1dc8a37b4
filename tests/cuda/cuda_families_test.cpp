// Kernel families as schedule data (policy/kernel_families.h, kernels/cuda/kernel_families.h):
// the policy records each group's family, JSON carries it, the emitter emits exactly it (a saved
// schedule replays to byte-identical kernel sources), a forced family is obeyed or refused with
// the reason, and the policy prices the family it records. No GPU needed.
#include <algorithm>

#include <doctest/doctest.h>

#include <set>

#include "../model_builder.h"
#include "cuda_check.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"
#include "policy/schedule_json.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/normalize.h"

namespace tessel::testing {
namespace {

/// f16 x[m,k] @ w[k,n] + bias, GELU: the tensor-core family on an H100.
OpGraph gemm_gelu(int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(DType::f16);
  const std::string y = b.op("MatMul", {b.input("x", {m, k}), b.weight("w", {k, n}, 3)});
  return b.graph(b.op("Gelu", {b.op("Add", {y, b.weight("bias", {n}, 4)})}));
}

/// LLaMA's SwiGLU: silu(x Wg) * (x Wu).
OpGraph swiglu(int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {m, k});
  const std::string gate = b.op("MatMul", {x, b.weight("wg", {k, n}, 5)});
  const std::string up = b.op("MatMul", {x, b.weight("wu", {k, n}, 6)});
  return b.graph(b.op("Mul", {b.op("Silu", {gate}), up}));
}

std::vector<std::pair<std::string, OpGraph>> graphs() {
  std::vector<std::pair<std::string, OpGraph>> out;
  for (const char* name : {"bert_base_layer", "llama_decoder_block", "resnet50_bottleneck", "vit_b_block"})
    out.emplace_back(name, lower_model(load_model(source_path(std::string("experiments/models/") + name + ".json"))));
  out.emplace_back("gemm_gelu f16", gemm_gelu(512, 768, 3072));
  out.emplace_back("swiglu f16", swiglu(512, 1024, 2816));
  return out;
}

}  // namespace

TEST_CASE("cuda families: every group records a family, JSON carries it, replay emits byte-identical kernels") {
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  std::set<std::string> names;
  for (const auto& f : families.families()) names.insert(f.name);
  for (const auto& entry : graphs()) {
    const auto& [name, g] = entry;
    for (const char* policy : {"welder", "roller"}) {
      CAPTURE(entry.first);
      CAPTURE(policy);
      const Schedule s = with_families(g, spec, policy);
      const Schedule replay = schedule_from_json(schedule_to_json(s, g), "replay.json", g);
      REQUIRE(replay.groups.size() == s.groups.size());
      for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
        const KernelChoice& k = s.groups[i].group.kernel;
        CHECK(names.count(k.family) == 1);
        CHECK(replay.groups[i].group.kernel.family == k.family);
        CHECK(replay.groups[i].group.kernel.params == k.params);
        CHECK(replay.groups[i].group.kernel.rejected == k.rejected);
        // The policy's prediction prices the recorded family.
        CHECK(AnalyticCostModel().estimate(g, s.groups[i].group, spec).latency_s ==
              doctest::Approx(s.groups[i].predicted.latency_s));
        const cuda::GeneratedKernel a = cuda::emit_group_kernel(g, s, i, spec);
        const cuda::GeneratedKernel b = cuda::emit_group_kernel(g, replay, i, spec);
        CHECK(a.path == k.family);  // what runs is what the schedule says
        CHECK(a.source == b.source);
      }
    }
  }
}

TEST_CASE("cuda families: a forced family is emitted as recorded, or refused with the reason") {
  const HwSpec& spec = gpu_spec();
  const OpGraph g = gemm_gelu(1024, 768, 3072);
  Schedule s = with_families(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  REQUIRE(s.groups[0].group.kernel.family == "wgmma");
  s.groups[0].group.kernel.params["stages"] = 6;
  // The generic kernel can emit any group: forced, it is what the emitter writes.
  Schedule generic = s;
  generic.groups[0].group.kernel = KernelChoice{"generic", {}, {}};
  CHECK(cuda::emit_group_kernel(g, generic, 0, spec).path == "generic");
  // mma.sync with the wgmma plan's parameters (6 stages; mma.sync takes up to 4): refused.
  Schedule mma = s;
  mma.groups[0].group.kernel.family = "mma";
  CHECK_THROWS_WITH_AS(cuda::emit_group_kernel(g, mma, 0, spec), doctest::Contains("cannot emit this group"), UserError);
  // A family that cannot run a contraction, and recorded parameters the family cannot emit.
  Schedule row = s;
  row.groups[0].group.kernel = KernelChoice{"row", {}, {}};
  CHECK_THROWS_WITH_AS(cuda::emit_group_kernel(g, row, 0, spec), doctest::Contains("'row' cannot emit"), UserError);
  Schedule params = s;
  params.groups[0].group.kernel.params["stages"] = 7;
  CHECK_THROWS_WITH_AS(cuda::emit_group_kernel(g, params, 0, spec), doctest::Contains("7 wgmma stages"), UserError);
  Schedule unknown = s;
  unknown.groups[0].group.kernel.family = "tpu";
  CHECK_THROWS_WITH_AS(cuda::emit_group_kernel(g, unknown, 0, spec), doctest::Contains("unknown CUDA kernel family"), UserError);
}

TEST_CASE("cuda families: the cost model prices the recorded family") {
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  const OpGraph g = gemm_gelu(1024, 768, 3072);
  Schedule s = with_families(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  ScheduledGroup generic = s.groups[0].group;
  generic.kernel = cuda::CudaKernelFamilies().choose(g, generic, spec);
  CHECK(generic.kernel.family == "wgmma");
  const CostBreakdown tc = cost.estimate(g, generic, spec);
  generic.kernel = KernelChoice{"generic", {{"instructions_per_point", 10}}, {}};
  const CostBreakdown simt = cost.estimate(g, generic, spec);
  CHECK(tc.tensor_cores);
  CHECK_FALSE(simt.tensor_cores);
  // One thread per output, ten instructions a domain point at the f32 SIMT rate: several times
  // slower than the recorded wgmma plan (128 tiles of 128x192: one wave on the H100's 132 SMs),
  // which is priced as that plan.
  CHECK(simt.latency_s > 4 * tc.latency_s);
  CHECK(tc.notes.front().find("priced as the recorded wgmma plan: block 128x192") != std::string::npos);
}

TEST_CASE("cuda families: a contraction's variants are the tuner's choices, each recorded one is emitted as recorded") {
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  const OpGraph g = gemm_gelu(1024, 768, 3072);
  const Schedule s = with_families(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  ScheduledGroup group = s.groups[0].group;
  const std::vector<KernelChoice> variants = families.variants(g, group, spec);
  REQUIRE(variants.size() > 20);
  // choose()'s first; the wgmma family is cost-ranked, so the policy recorded the variant of it
  // the model prices cheapest.
  CHECK(variants.front().family == group.kernel.family);
  REQUIRE(group.kernel.family == "wgmma");
  CHECK(std::any_of(variants.begin(), variants.end(),
                    [&](const KernelChoice& k) { return k.family == group.kernel.family && k.params == group.kernel.params; }));
  const double recorded = cost.estimate(g, group, spec).latency_s;
  std::set<std::string> keys, families_seen;
  std::set<double> predictions;
  for (const KernelChoice& k : variants) {
    CAPTURE(k.family);
    ScheduledGroup v = group;
    v.kernel = k;
    // Legal as recorded, emitted with exactly these parameters, a kernel of its own.
    CHECK_FALSE(families.check(g, v, spec));
    CHECK(keys.insert(families.kernel_key(g, v, spec)).second);
    families_seen.insert(k.family);
    predictions.insert(cost.estimate(g, v, spec).latency_s);
    if (k.family == group.kernel.family) CHECK(recorded <= cost.estimate(g, v, spec).latency_s);
  }
  CHECK(families_seen == std::set<std::string>{"mma", "wgmma"});
  CHECK(predictions.size() > 10);  // the model prices the block shapes and splits (not yet the K step)
  // A recorded parameter set the family cannot emit is refused with the reason.
  ScheduledGroup bad = group;
  bad.kernel = KernelChoice{"mma", {{"block_m", 96}, {"block_n", 128}, {"block_k", 32}, {"stages", 4}, {"split_k", 1}}, {}};
  const std::optional<std::string> why = families.check(g, bad, spec);
  REQUIRE(why);
  CHECK(why->find("no mma.sync warp layout for a recorded 96 x 128 block") != std::string::npos);
}

TEST_CASE("cuda families: the mma family's default competes with the wgmma variants") {
  // A GEMM of 8 tiles of 128 x 128 and one K tile: the wgmma kernel (one block per SM, its
  // epilogue and first stages' latency exposed) is what choose() prefers, and the mma family's own
  // plan -- listed second among the variants -- is priced against every wgmma variant.
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  const OpGraph g = gemm_gelu(256, 64, 1024);
  const Schedule s = with_families(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  const ScheduledGroup& group = s.groups[0].group;
  const std::vector<KernelChoice> variants = families.variants(g, group, spec);
  REQUIRE(variants.size() > 2);
  CHECK(variants[0].family == "wgmma");
  CHECK(variants[1].family == "mma");
  ScheduledGroup mma_default = group;
  mma_default.kernel = variants[1];
  CHECK_FALSE(families.check(g, mma_default, spec));
  const double recorded = cost.estimate(g, group, spec).latency_s;
  double best_wgmma = 1e9;
  for (const KernelChoice& k : variants) {
    if (k.family != "wgmma") continue;
    ScheduledGroup v = group;
    v.kernel = k;
    best_wgmma = std::min(best_wgmma, cost.estimate(g, v, spec).latency_s);
  }
  const double mma = cost.estimate(g, mma_default, spec).latency_s;
  CHECK(recorded == doctest::Approx(std::min(best_wgmma, mma)));
  // mma only when predicted kFamilySwitchFactor of the best wgmma variant's time or less (this
  // GEMM: 0.56), and then its default: its other variants are the tuner's to measure.
  CHECK(mma < kFamilySwitchFactor * best_wgmma);
  CHECK(group.kernel.family == "mma");
  CHECK(group.kernel.params == variants[1].params);
  // With K = 512 its 64-row wgmma blocks are priced within the margin: wgmma stays.
  CHECK(with_families(gemm_gelu(256, 512, 1024), spec, "welder").groups[0].group.kernel.family == "wgmma");
  // A GEMM of 192 tiles stays on wgmma: there its mma plan is not predicted that much faster.
  const OpGraph big = gemm_gelu(1024, 768, 3072);
  const Schedule big_schedule = with_families(big, spec, "welder");
  const ScheduledGroup& kept = big_schedule.groups[0].group;
  REQUIRE(kept.kernel.family == "wgmma");
  ScheduledGroup big_mma = kept;
  big_mma.kernel = families.variants(big, kept, spec)[1];
  REQUIRE(big_mma.kernel.family == "mma");
  CHECK(cost.estimate(big, big_mma, spec).latency_s >= kFamilySwitchFactor * cost.estimate(big, kept, spec).latency_s);
}

TEST_CASE("cuda families: an mma variant recorded where wgmma would run launches a block per tile") {
  // More tiles than SMs: the derived wgmma plan is persistent (a block per SM looping over tiles).
  // A recorded mma.sync variant replaces that plan and must launch one block per tile (per K
  // part) -- a persistent grid left over launched one wave and left the later tiles unwritten.
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  const OpGraph g = gemm_gelu(8192, 320, 960);
  const Schedule s = with_families(g, spec, "welder");
  REQUIRE(s.groups.size() == 1);
  // (The premise: the plan the backend derives for the group is a persistent wgmma one.)
  Schedule derived = s;
  derived.groups[0].group.kernel = cuda::CudaKernelFamilies().choose(g, s.groups[0].group, spec);
  const cuda::GeneratedKernel wg = cuda::emit_group_kernel(g, derived, 0, spec);
  REQUIRE(wg.contraction);
  REQUIRE(wg.contraction->warpgroup);
  REQUIRE(wg.contraction->persistent > 0);
  int checked = 0;
  for (const KernelChoice& k : families.variants(g, s.groups[0].group, spec)) {
    if (k.family != "mma") continue;
    CAPTURE(k.params);
    Schedule v = s;
    v.groups[0].group.kernel = k;
    const cuda::GeneratedKernel e = cuda::emit_group_kernel(g, v, 0, spec);
    REQUIRE(e.contraction);
    const cuda::ContractionPlan& c = *e.contraction;
    CHECK(c.persistent == 0);
    CHECK(e.plan.blocks == c.tiles() * c.split_k);
    CHECK(c.tiles() == (8192 + c.block_m - 1) / c.block_m * ((960 + c.block_n - 1) / c.block_n));
    ++checked;
  }
  CHECK(checked > 20);
}

TEST_CASE("cuda families: priced by family, welder keeps the SwiGLU GEMMs on tensor cores") {
  const HwSpec& spec = gpu_spec();
  const OpGraph g = swiglu(512, 1024, 2816);
  const Schedule s = with_families(g, spec, "welder");
  int tensor_core_groups = 0;
  for (const ScheduleGroup& sg : s.groups) {
    INFO("group ", g.node(sg.group.nodes.back()).name(), ": ", sg.group.kernel.family);
    CHECK(sg.group.kernel.family != "generic");
    tensor_core_groups += sg.group.kernel.family == "wgmma" || sg.group.kernel.family == "mma";
  }
  CHECK(tensor_core_groups == 2);
}

TEST_CASE("cuda families: a fused epilogue records its instructions, priced the same after either main loop") {
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  // The one tensor-core group of `g` under welder, with its family recorded.
  auto contraction_group = [&](const OpGraph& g) {
    const Schedule s = with_families(g, spec, "welder");
    for (const ScheduleGroup& sg : s.groups)
      if (sg.group.kernel.family == "wgmma" || sg.group.kernel.family == "mma") return sg.group;
    FAIL("no tensor-core group");
    return ScheduledGroup{};
  };
  auto instructions = [](const ScheduledGroup& group) {
    const auto it = group.kernel.params.find("epilogue_instructions");
    return it == group.kernel.params.end() ? int64_t{0} : it->second;
  };
  {
    // A bias: one add and its read from device memory (2); then a 16-bit sigmoid (ex2.approx and
    // rcp.approx with their scaling: 4), the sink's, so not rounded before it.
    ModelBuilder b(DType::f16);
    const std::string y = b.op("MatMul", {b.input("x", {1024, 512}), b.weight("w", {512, 1024}, 3)});
    const OpGraph bias = b.graph(b.op("Add", {y, b.weight("bias", {1024}, 4)}));
    CHECK(instructions(contraction_group(bias)) == 3);
    ModelBuilder c(DType::f16);
    const std::string z = c.op("MatMul", {c.input("x", {1024, 512}), c.weight("w", {512, 1024}, 3)});
    const OpGraph sig = c.graph(c.op("Sigmoid", {z}));
    CHECK(instructions(contraction_group(sig)) == 4);
    ModelBuilder d(DType::f16);
    const OpGraph plain = d.graph(d.op("MatMul", {d.input("x", {1024, 512}), d.weight("w", {512, 1024}, 3)}));
    CHECK(instructions(contraction_group(plain)) == 0);
  }
  // A GELU epilogue: the term is the same for the wgmma plan and the mma family's, outside both
  // efficiencies, and it is what the recorded instructions add.
  const OpGraph g = gemm_gelu(1024, 768, 3072);
  const ScheduledGroup group = contraction_group(g);
  REQUIRE(group.kernel.family == "wgmma");
  REQUIRE(instructions(group) > 0);
  const CostBreakdown priced = cost.estimate(g, group, spec);
  CHECK(priced.term("epilogue nodes") > 0);
  ScheduledGroup bare = group;
  bare.kernel.params.erase("epilogue_instructions");
  // (Relative: the term is a few microseconds, below doctest::Approx's default absolute margin.)
  const double added = priced.latency_s - cost.estimate(g, bare, spec).latency_s;
  CHECK(added == doctest::Approx(priced.term("epilogue nodes")).scale(0));
  ScheduledGroup mma = group;
  mma.kernel = families.variants(g, group, spec)[1];
  REQUIRE(mma.kernel.family == "mma");
  CHECK(instructions(mma) == instructions(group));
  CHECK(cost.estimate(g, mma, spec).term("epilogue nodes") > 0);
  // A full-size side input (the SwiGLU's other product) makes the wgmma kernel's slabs wait.
  const OpGraph gated = swiglu(1024, 1024, 2816);
  const Schedule s = with_families(gated, spec, "welder");
  bool waited = false;
  for (const ScheduleGroup& sg : s.groups)
    if (sg.group.kernel.family == "wgmma" && sg.group.nodes.size() > 1) waited |= cost.estimate(gated, sg.group, spec).term("epilogue waits") > 0;
  CHECK(waited);
}

TEST_CASE("cuda families: check_schedule asks the backend whether it can emit every recorded family") {
  const HwSpec& spec = gpu_spec();
  const OpGraph g = gemm_gelu(1024, 768, 3072);
  const Schedule s = with_families(g, spec, "welder");
  const cuda::CudaKernelFamilies families;
  REQUIRE(s.groups[0].group.kernel.family == "wgmma");
  CHECK(check_schedule(g, spec, s, &families).empty());
  Schedule mma = s;
  mma.groups[0].group.kernel.family = "mma";  // (with the wgmma plan's parameters)
  CHECK(check_schedule(g, spec, mma).empty());  // without the families, rule 9 is not asked
  const std::vector<std::string> problems = check_schedule(g, spec, mma, &families);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].rfind("group 0: kernel family 'mma' cannot emit this group: ", 0) == 0);
  Schedule tpu = s;
  tpu.groups[0].group.kernel.family = "tpu";
  REQUIRE(check_schedule(g, spec, tpu, &families).size() == 1);
  CHECK(check_schedule(g, spec, tpu, &families)[0].find("unknown cuda kernel family \"tpu\"") != std::string::npos);
  Schedule unrecorded = s;
  unrecorded.groups[0].group.kernel = {};
  CHECK(check_schedule(g, spec, unrecorded, &families).empty());  // the backend records its choice
}

TEST_CASE("cuda families: a long projection stays on the tensor cores, not fused into a LayerNorm's row kernel") {
  // The bundled BERT-base layer in f16 at batch 1 (128 tokens): the attention output projection,
  // 128 x 768 x 768, then its bias, the residual and LayerNorm. In a row kernel the projection
  // would run as 768-long serial dot products per element (400 us on an H100 with 12 layers'
  // worth of such kernels taking 4.8 of BERT's 5.1 ms, where apart they take tens of us): the
  // cost model prices that loop, and welder keeps every projection in a tensor-core group.
  ModelDef m = load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/bert_base_layer.json");
  for (ValueDecl& in : m.inputs)
    if (in.type.dtype == DType::f32) in.type.dtype = DType::f16;
  for (WeightDef& w : m.weights) {
    if (w.type.dtype != DType::f32) continue;
    w.type.dtype = DType::f16;
    if (auto* data = std::get_if<std::shared_ptr<const HostTensor>>(&w.source))
      *data = std::make_shared<const HostTensor>(w.type, (*data)->values());
  }
  // As compile() runs it: the normalize stage's view clean-ups first (MatMuls read W transposed).
  const OpGraph g = lower_model(normalize_model(m, lower_model(m), NormalizeOptions{}));
  const Schedule s = with_families(g, gpu_spec(), "welder");
  int row_kernels = 0;
  for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
    const cuda::GeneratedKernel k = emit_kernel(g, s, i, gpu_spec());
    if (k.path != "row") continue;
    ++row_kernels;
    for (NodeId n : s.groups[i].group.nodes)
      for (TensorId t : g.node_inputs(n)) {  // a projection reads a 768 x 768 weight
        INFO(g.node(n).name());
        CHECK_FALSE((g.tensor(t).kind == TensorKind::weight && g.tensor(t).type.shape == std::vector<int64_t>{768, 768}));
      }
  }
  CHECK(row_kernels >= 2);  // the two LayerNorms
}

}  // namespace tessel::testing
