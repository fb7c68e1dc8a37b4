// Block-sparse weights on the CUDA backend (tilegraph/sparsity.h, the block_sparse tile kind,
// policy/sparse_kinds.h, kernels/cuda/contraction_plan.h's step 8): the policy weighs a dense and
// a block-sparse kernel and records the cheaper with its reason; the sparse kernel walks only the
// non-zero K tiles of its panel, compiles with NVRTC (no GPU needed), replays from JSON, refuses
// a schedule whose blocks or density do not match the weight; and, on a GPU, matches the
// interpreter (odd shapes, K tails, transposed weights, fused epilogues, an all-zero panel).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "../model_builder.h"
#include "../schedule_util.h"
#include "cuda_check.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/kernel_families.h"
#include "policy/measure_cache.h"
#include "policy/schedule_json.h"
#include "../temp_dir.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

Schedule sparse_schedule(const OpGraph& g, const std::string& policy) {
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  for (const auto& p : policies())
    if (p->name() == policy) return schedule_with_families(*p, PolicyContext{g, gpu_spec(), cost}, &families);
  FAIL("no policy ", policy);
  return {};
}

const BlockSparseProps* sparse_kind(const OpGraph& g, const ScheduleGroup& sg) {
  for (const auto& [n, cfg] : sg.group.tiles)
    if (g.node(n).num_reduction() > 0) return std::get_if<BlockSparseProps>(&cfg.kind);
  return nullptr;
}

struct SparseCase {
  std::string name;
  OpGraph graph;
};

std::vector<SparseCase> cases() {
  std::vector<SparseCase> out;
  out.push_back({"2048x2048x2048 f16, 64x64 blocks at 10%", sparse_gemm(DType::f16, 2048, 2048, 2048, block(64, 64, 0.1))});
  out.push_back({"1000x1000x1000 f16 (tails), 32x32 blocks at 20%", sparse_gemm(DType::f16, 1000, 1000, 1000, block(32, 32, 0.2))});
  out.push_back({"Gemm transB bf16 1024x1536x768, 64x64 at 10%", sparse_gemm(DType::bf16, 1024, 1536, 768, block(64, 64, 0.1), true)});
  out.push_back({"bias + GELU epilogue, 512x4096x1024 f16, 128x128 at 5%",
                 sparse_gemm(DType::f16, 512, 4096, 1024, block(128, 128, 0.05), false, true)});
  // (A long K and 30% of the blocks: the multiplies outweigh each tile's epilogue, which the model
  // prices per tile on the wgmma kernel, so its 64 x 128 tiles beat mma.sync's 32 x 32.)
  out.push_back({"wgmma: 1024x4096x1024 f16, 128x128 blocks at 30%", sparse_gemm(DType::f16, 1024, 4096, 1024, block(128, 128, 0.3))});
  out.push_back({"one block left: 256x1024x512 f16, 256x256 blocks at 1%", sparse_gemm(DType::f16, 256, 1024, 512, block(256, 256, 0.01))});
  return out;
}

}  // namespace

TEST_CASE("cuda sparse: a sparse weight gets a block-sparse kernel when the model predicts it faster, and says why") {
  for (const std::string policy : {"welder", "roller"}) {
    INFO(policy);
    const OpGraph sparse = sparse_gemm(DType::f16, 2048, 2048, 2048, block(64, 64, 0.1));
    const Schedule s = sparse_schedule(sparse, policy);
    const ScheduleGroup& sg = reducing_group(sparse, s);
    const BlockSparseProps* props = sparse_kind(sparse, sg);
    REQUIRE(props != nullptr);
    INFO(sg.kind_choice);
    CHECK(sg.kind_choice.rfind("block_sparse: 'w' has density ", 0) == 0);
    CHECK(sg.kind_choice.find("break even near density") != std::string::npos);
    CHECK((sg.group.kernel.family == "mma" || sg.group.kernel.family == "wgmma"));
    // The recorded density is the weight's at the recorded blocks, which are the kernel's tiles.
    CHECK(props->density == doctest::Approx(sparse.nonzero_map(sparse.weights()[0])->density(props->block_m, props->block_n)));
    CHECK(props->density < 0.35);
    const cuda::GeneratedKernel k = emit_kernel(sparse, s, static_cast<int>(&sg - s.groups.data()), gpu_spec());
    // (The wgmma kernel walks the block's list, or each tile's on the persistent grid.)
    CHECK((sg.group.kernel.family == "mma" ? k.source.find("tsl::mma::ListCopy") != std::string::npos
                                           : k.source.find("_sparse_tiles + tsl_first_tile, tsl_ktiles);") != std::string::npos ||
                                                 k.source.find("tsl::wg::SparseLists{") != std::string::npos));
    CHECK(k.source.find("_sparse_tiles") != std::string::npos);
    CHECK(nvrtc_compile_all(sparse, s, gpu_spec()) >= 1);

    // The same weight with its pattern declared but every block kept: dense, and it says so.
    const OpGraph full = sparse_gemm(DType::f16, 2048, 2048, 2048, block(64, 64, 0));
    const Schedule d = sparse_schedule(full, policy);
    const ScheduleGroup& dg = reducing_group(full, d);
    CHECK(sparse_kind(full, dg) == nullptr);
    CHECK(dg.kind_choice.rfind("dense: 'w' has density 1 ", 0) == 0);
  }
}

TEST_CASE("cuda sparse: the cases cover both block-sparse kernels: mma.sync's ListCopy and wgmma's producer walking the list") {
  std::set<std::string> families, wgmma_forms;
  for (const SparseCase& c : cases()) {
    const Schedule s = sparse_schedule(c.graph, "welder");
    const ScheduleGroup& sg = reducing_group(c.graph, s);
    INFO(c.name, ": ", sg.kind_choice);
    REQUIRE(sparse_kind(c.graph, sg) != nullptr);
    families.insert(sg.group.kernel.family);
    const cuda::GeneratedKernel k = emit_kernel(c.graph, s, static_cast<int>(&sg - s.groups.data()), gpu_spec());
    if (sg.group.kernel.family == "wgmma") {
      CHECK(k.source.find("tsl::wg::WarpgroupGemm") != std::string::npos);
      // One block a tile walking its list, or the persistent grid walking each tile's panel list.
      const bool per_block = k.source.find("_sparse_tiles + tsl_first_tile, tsl_ktiles);") != std::string::npos;
      const bool persistent = k.source.find("tsl::wg::SparseLists{") != std::string::npos;
      CHECK(per_block != persistent);
      CHECK(persistent == (sg.group.kernel.params.count("persistent") && sg.group.kernel.params.at("persistent") == 1));
      wgmma_forms.insert(persistent ? "persistent" : "per block");
    } else {
      CHECK(k.source.find("tsl::mma::ListCopy") != std::string::npos);
    }
  }
  CHECK(families == std::set<std::string>{"mma", "wgmma"});
  CHECK(wgmma_forms == std::set<std::string>{"persistent", "per block"});
}

TEST_CASE("cuda sparse: every case's kernels compile with NVRTC, and replay from JSON to the same kernel") {
  for (const SparseCase& c : cases()) {
    INFO(c.name);
    const Schedule s = sparse_schedule(c.graph, "welder");
    CHECK(sparse_kind(c.graph, reducing_group(c.graph, s)) != nullptr);
    CHECK(nvrtc_compile_all(c.graph, s, gpu_spec()) >= 1);
    const Schedule back = schedule_from_json(schedule_to_json(s, c.graph), "replayed", c.graph);
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
      CHECK(emit_kernel(c.graph, back, i, gpu_spec()).source == emit_kernel(c.graph, s, i, gpu_spec()).source);
  }
}

TEST_CASE("cuda sparse: a schedule whose blocks or density do not match the weight is refused with the reason") {
  const OpGraph g = sparse_gemm(DType::f16, 1024, 1024, 1024, block(64, 64, 0.1));
  const Schedule s = sparse_schedule(g, "welder");
  const int gi = static_cast<int>(&reducing_group(g, s) - s.groups.data());
  for (const auto& [n, cfg] : s.groups[gi].group.tiles) {
    const auto* p = std::get_if<BlockSparseProps>(&cfg.kind);
    if (!p) continue;
    Schedule wrong_density = s, wrong_blocks = s;
    std::get<BlockSparseProps>(wrong_density.groups[gi].group.tiles.at(n).kind).density = p->density / 2;
    std::get<BlockSparseProps>(wrong_blocks.groups[gi].group.tiles.at(n).kind).block_m = p->block_m * 2;
    CHECK_THROWS_WITH_AS(emit_kernel(g, wrong_density, gi, gpu_spec()), doctest::Contains("is not its weight's"), UserError);
    CHECK_THROWS_WITH_AS(emit_kernel(g, wrong_blocks, gi, gpu_spec()), doctest::Contains("are not the kernel's"), UserError);
  }
}

TEST_CASE("cuda sparse run: block-sparse kernels match the interpreter (odd shapes, tails, transposed weights, epilogues)") {
  if (!gpu_available()) return;
  for (const SparseCase& c : cases()) {
    for (const std::string policy : {"welder", "roller"}) {
      INFO(c.name, " (", policy, ")");
      const Schedule s = sparse_schedule(c.graph, policy);
      REQUIRE(sparse_kind(c.graph, reducing_group(c.graph, s)) != nullptr);
      check_schedule_on_gpu(c.graph, gpu_spec(), s, {}, 11, policy);
    }
  }
}

TEST_CASE("cuda sparse: --sparse-kernels forces either kind and still records the comparison") {
  const OpGraph g = sparse_gemm(DType::f16, 1024, 1024, 1024, block(64, 64, 0.1));
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  const std::unique_ptr<Policy> welder = std::move(policies().front());
  for (const SparseKernels mode : {SparseKernels::dense, SparseKernels::block_sparse}) {
    const Schedule s = schedule_with_families(*welder, PolicyContext{g, gpu_spec(), cost, nullptr, mode}, &families);
    const ScheduleGroup& sg = reducing_group(g, s);
    INFO(sg.kind_choice);
    CHECK((sparse_kind(g, sg) != nullptr) == (mode == SparseKernels::block_sparse));
    CHECK(sg.kind_choice.find("(forced by --sparse-kernels)") != std::string::npos);
    CHECK(sg.kind_choice.find(" predicted; they break even near density ") != std::string::npos);
  }
  // A dense-favoured point forced sparse: full density, still emitted and compiled.
  const OpGraph full = sparse_gemm(DType::f16, 512, 512, 512, block(32, 32, 0));
  const Schedule forced = schedule_with_families(*welder, PolicyContext{full, gpu_spec(), cost, nullptr, SparseKernels::block_sparse}, &families);
  CHECK(sparse_kind(full, reducing_group(full, forced)) != nullptr);
  CHECK(nvrtc_compile_all(full, forced, gpu_spec()) >= 1);
}

namespace {

// Times dense kernels at 1 us and block-sparse ones at 5 us: the opposite of what the model
// predicts for a weight at 10% density.
class SparseSlowMeasurer : public Measurer {
 public:
  int calls = 0;
  std::optional<double> measure(const OpGraph&, const ScheduledGroup& group, const HwSpec&) override {
    ++calls;
    for (const auto& [n, cfg] : group.tiles)
      if (std::holds_alternative<BlockSparseProps>(cfg.kind)) return 5e-6;
    return 1e-6;
  }
};

}  // namespace

TEST_CASE("cuda sparse: with --tune, the dense and block-sparse kernels are measured and the faster measured is kept") {
  const OpGraph g = sparse_gemm(DType::f16, 1024, 1024, 1024, block(64, 64, 0.1));
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  TempDir dir;
  MeasureCache cache(dir.file("cache"));
  SparseSlowMeasurer slow;
  const std::unique_ptr<Policy> welder = std::move(policies().front());
  REQUIRE(welder->tune_with(&slow, &cache, 3));
  const Schedule s = schedule_with_families(*welder, PolicyContext{g, gpu_spec(), cost}, &families);
  const ScheduleGroup& sg = reducing_group(g, s);
  INFO(sg.kind_choice);
  CHECK(sparse_kind(g, sg) == nullptr);  // the model predicted sparse faster; the measurements say dense
  CHECK(sg.kind_choice.rfind("dense (measured): 'w' has density ", 0) == 0);
  CHECK(sg.kind_choice.find("kept dense") != std::string::npos);
  REQUIRE(sg.measured_s.has_value());
  CHECK(*sg.measured_s == doctest::Approx(1e-6));
  bool sparse_trial = false;
  for (const TuneTrial& t : sg.trials) sparse_trial |= t.tiles.find("kind block_sparse") != std::string::npos && t.measured_s == 5e-6;
  CHECK(sparse_trial);
  const int calls = slow.calls;
  // Measured once: a second schedule is answered from the cache.
  schedule_with_families(*welder, PolicyContext{g, gpu_spec(), cost}, &families);
  CHECK(slow.calls == calls);
}

TEST_CASE("cuda sparse: the model prices a block-sparse kernel with its family's block-sparse efficiency where the spec lists one") {
  // The H100 spec lists mma_block_sparse (fitted on the H200) and no wgmma_block_sparse.
  const HwSpec& spec = gpu_spec();
  REQUIRE(spec.compute.family_efficiency.count("mma_block_sparse") == 1);
  REQUIRE(spec.compute.family_efficiency.count("wgmma_block_sparse") == 0);
  const AnalyticCostModel cost;
  std::set<std::string> seen;
  for (const SparseCase& c : cases()) {
    const Schedule s = sparse_schedule(c.graph, "welder");
    const ScheduleGroup& sg = reducing_group(c.graph, s);
    INFO(c.name, ": ", sg.kind_choice);
    REQUIRE(sparse_kind(c.graph, sg) != nullptr);
    const CostBreakdown b = cost.estimate(c.graph, sg.group, spec);
    const std::string family = sg.group.kernel.family;
    const std::string priced = family == "mma" ? "the mma_block_sparse family reaches " : "the wgmma family reaches ";
    CHECK(std::any_of(b.notes.begin(), b.notes.end(), [&](const std::string& n) { return n.rfind(priced, 0) == 0; }));
    // The same group priced as dense: the plain family's efficiency.
    ScheduledGroup dense = sg.group;
    for (auto& [n, cfg] : dense.tiles) cfg.kind = DenseProps{};
    const CostBreakdown d = cost.estimate(c.graph, dense, spec);
    CHECK(std::none_of(d.notes.begin(), d.notes.end(), [](const std::string& n) { return n.find("_block_sparse family") != std::string::npos; }));
    seen.insert(family);
  }
  CHECK(seen.count("mma") == 1);
}
