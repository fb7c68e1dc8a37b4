// Block-sparse weights on the CPU backend (kernels/cpu/kernel_families.h's sparse_contraction,
// group_plan.h's CpuSparseSkip, emit_contraction.cpp's sparse walk): the policy weighs the dense
// micro-kernel against the micro-kernel walking only the weight's non-zero blocks and records the
// cheaper with its reason; the sparse kernel matches the interpreter (odd shapes and tails, a
// transposed weight, f16, a fused epilogue, a batched weight, one row, an empty block row); its
// IR carries the block table; tampered schedules are refused; a weight the walk cannot take stays
// dense and says why.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"
#include "kernels/cpu/kernel_families.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"

namespace tessel::testing {

namespace {


Schedule cpu_schedule(const OpGraph& g, const HwSpec& spec, const std::string& policy, SparseKernels mode = SparseKernels::cost) {
  const AnalyticCostModel cost;
  const cpu::CpuKernelFamilies families;
  for (const auto& p : policies())
    if (p->name() == policy) return schedule_with_families(*p, PolicyContext{g, spec, cost, nullptr, mode}, &families);
  FAIL("no policy ", policy);
  return {};
}


/// The group holding the contraction.
ScheduleGroup& contraction_group(const OpGraph& g, Schedule& s) {
  for (ScheduleGroup& sg : s.groups)
    for (NodeId n : sg.group.nodes)
      if (g.node(n).num_reduction() > 0) return sg;
  FAIL("no contraction group");
  return s.groups.front();
}

BlockSparseProps* sparse_kind(const OpGraph& g, ScheduleGroup& sg) {
  for (auto& [n, cfg] : sg.group.tiles)
    if (g.node(n).num_reduction() > 0) return std::get_if<BlockSparseProps>(&cfg.kind);
  return nullptr;
}

}  // namespace

TEST_CASE("cpu sparse: a sparse weight gets the micro-kernel's block walk when the model predicts it faster, and it matches") {
  struct Case {
    std::string name;
    OpGraph graph;
  };
  std::vector<Case> cases;
  cases.push_back({"256x512x512 f32, 32x32 blocks at 10%", sparse_gemm(DType::f32, 256, 512, 512, block(32, 32, 0.1))});
  cases.push_back({"odd 97x300x200 f32 (K and N tails), 16x16 at 20%", sparse_gemm(DType::f32, 97, 300, 200, block(16, 16, 0.2))});
  cases.push_back({"Gemm transB 128x384x256 f32, 64x64 at 10%", sparse_gemm(DType::f32, 128, 384, 256, block(64, 64, 0.1), true)});
  cases.push_back({"f16 with bias + GELU, 64x512x384, 32x32 at 10%", sparse_gemm(DType::f16, 64, 512, 384, block(32, 32, 0.1), false, true)});
  cases.push_back({"one row: 1x1024x512 f32, 64x64 at 5%", sparse_gemm(DType::f32, 1, 1024, 512, block(64, 64, 0.05))});
  {  // a batched weight: the walk skips the blocks that are zero in every batch
    ModelBuilder b(DType::f32);
    const std::string y = b.op("MatMul", {b.input("x", {3, 64, 256}), b.sparse_weight("w", {3, 256, 128}, 5, block(32, 32, 0.1))});
    cases.push_back({"batched 3x64x256x128, 32x32 at 10%", b.graph(y)});
  }
  for (const std::string spec_name : {"x86-64-avx2-generic", "x86-64-avx512-server"})
    for (const std::string policy : {"welder", "roller"})
      for (Case& c : cases) {
        INFO(c.name, ", ", policy, " for ", spec_name);
        const HwSpec& spec = cpu_spec(spec_name);
        Schedule s = cpu_schedule(c.graph, spec, policy);
        ScheduleGroup& sg = contraction_group(c.graph, s);
        INFO(sg.kind_choice);
        const BlockSparseProps* props = sparse_kind(c.graph, sg);
        REQUIRE(props != nullptr);
        CHECK(sg.kind_choice.rfind("block_sparse: 'w' has density ", 0) == 0);
        CHECK(sg.group.kernel.family == "microkernel");
        CHECK(sg.group.kernel.params.count("block_k") == 1);
        CHECK(props->density == doctest::Approx(c.graph.nonzero_map(c.graph.weights()[0])->density(props->block_m, props->block_n)));
        CHECK(props->density < 0.6);
        CHECK(check_schedule(c.graph, spec, s, nullptr).empty());
        const CompiledCheck run = run_compiled(c.graph, spec, s, random_inputs(c.graph, 3));
        CHECK_MESSAGE(run.ok, run.message);
      }
}

TEST_CASE("cpu sparse: forced either way both match, with a block row with no non-zero and a fully dense pattern") {
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  // Density 0.01 of 64 x 64 blocks over 512 x 256: one block kept, so whole column blocks and runs
  // have nothing to walk (their outputs are zero).
  const OpGraph nearly_empty = sparse_gemm(DType::f32, 80, 512, 256, block(64, 64, 0.01));
  // The pattern declared, no density: every block holds a value, so dense wins -- forced sparse
  // walks every block.
  const OpGraph full = sparse_gemm(DType::f32, 72, 200, 136, block(16, 16, 0));
  for (const OpGraph* g : {&nearly_empty, &full})
    for (const SparseKernels mode : {SparseKernels::dense, SparseKernels::block_sparse, SparseKernels::cost}) {
      Schedule s = cpu_schedule(*g, spec, "welder", mode);
      ScheduleGroup& sg = contraction_group(*g, s);
      INFO(sg.kind_choice);
      if (mode == SparseKernels::dense) CHECK(sparse_kind(*g, sg) == nullptr);
      if (mode == SparseKernels::block_sparse) CHECK(sparse_kind(*g, sg) != nullptr);
      if (mode == SparseKernels::cost) CHECK((sparse_kind(*g, sg) != nullptr) == (g == &nearly_empty));
      const CompiledCheck run = run_compiled(*g, spec, s, random_inputs(*g, 9));
      CHECK_MESSAGE(run.ok, run.message);
    }
}

TEST_CASE("cpu sparse: tasks whose columns start inside a block column walk every block they cover") {
  // The sink's task tile narrowed to 40 columns (not a multiple of the column blocks): column
  // blocks start mid-block and straddle two block columns, and each checks both.
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  const OpGraph g = sparse_gemm(DType::f32, 96, 256, 320, block(32, 32, 0.15));
  Schedule s = cpu_schedule(g, spec, "welder", SparseKernels::block_sparse);
  ScheduleGroup& sg = contraction_group(g, s);
  REQUIRE(sparse_kind(g, sg) != nullptr);
  for (auto& [n, cfg] : sg.group.tiles) {
    std::vector<int64_t>& tile = cfg.levels.front().spatial;
    tile.back() = 40;
    for (size_t l = 1; l < cfg.levels.size(); ++l) cfg.levels[l].spatial.back() = std::min<int64_t>(cfg.levels[l].spatial.back(), 40);
  }
  const CompiledCheck run = run_compiled(g, spec, s, random_inputs(g, 5), true);
  CHECK_MESSAGE(run.ok, run.message);
}

TEST_CASE("cpu sparse: the emitted IR walks a table of non-zero blocks, and tampered schedules are refused") {
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  const OpGraph g = sparse_gemm(DType::f32, 128, 256, 256, block(32, 32, 0.1));
  Schedule s = cpu_schedule(g, spec, "welder");
  ScheduleGroup& sg = contraction_group(g, s);
  REQUIRE(sparse_kind(g, sg) != nullptr);
  const int index = static_cast<int>(&sg - s.groups.data());
  {
    TempDir dir;
    find_backend("cpu")->emit(g, s, spec, "llvm", dir.path.string());
    std::stringstream ll;
    ll << std::ifstream(dir.file(cat("tessel_group_", index, ".ll"))).rdbuf();
    CHECK(ll.str().find(cat("@tessel_group_", index, "_nonzero_blocks = internal constant")) != std::string::npos);
  }
  const std::vector<HostTensor> inputs = random_inputs(g, 1);
  auto refused = [&](Schedule bad, const std::string& why) {
    INFO(why);
    CHECK_THROWS_WITH_AS(run_compiled(g, spec, bad, inputs, true), doctest::Contains(why.c_str()), UserError);
  };
  {  // a density that is not the weight's
    Schedule bad = s;
    sparse_kind(g, contraction_group(g, bad))->density = 0.5;
    refused(bad, "is not the weight's");
  }
  {  // blocks that are not the recorded ones
    Schedule bad = s;
    contraction_group(g, bad).group.kernel.params["block_k"] = 16;
    refused(bad, "but the block_sparse tiles are");
  }
  {  // block parameters without the kind
    Schedule bad = s;
    ScheduleGroup& b = contraction_group(g, bad);
    for (auto& [n, cfg] : b.group.tiles) cfg.kind = DenseProps{};
    CHECK(!check_schedule(g, spec, bad, find_backend("cpu")->kernel_families().get()).empty());
  }
  {  // blocks larger than the matrix (the table would have none)
    Schedule bad = s;
    ScheduleGroup& b = contraction_group(g, bad);
    sparse_kind(g, b)->block_m = int64_t{1} << 60;
    b.group.kernel.params["block_k"] = int64_t{1} << 60;
    refused(bad, "larger than the 256 x 256 it multiplies");
  }
  {  // the loop nests have no block walk
    Schedule bad = s;
    contraction_group(g, bad).group.kernel = KernelChoice{"loops", {}, {}};
    refused(bad, "no code generation for block_sparse bsr_blocks tiles");
  }
}

TEST_CASE("cpu sparse: a 2:4 weight runs dense on the CPU (its pruned values), matches, and says why") {
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  Sparsity nm;
  nm.pattern = Sparsity::Pattern::nm;
  nm.nm_n = 2;
  nm.nm_m = 4;
  for (const bool trans_b : {false, true}) {
    nm.axis = trans_b ? 1 : 0;
    const OpGraph g = sparse_gemm(DType::f32, 72, 256, 136, nm, trans_b, true);
    Schedule s = cpu_schedule(g, spec, "welder", SparseKernels::block_sparse);
    ScheduleGroup& sg = contraction_group(g, s);
    INFO(sg.kind_choice);
    for (const auto& [n, cfg] : sg.group.tiles) CHECK(std::holds_alternative<DenseProps>(cfg.kind));
    CHECK(sg.kind_choice.rfind("dense: no N:M sparse kernel of 'w' can be emitted here", 0) == 0);
    // The micro-kernel's register-blocking variants are still offered (the walk does not claim the weight).
    CHECK(cpu::sparse_contraction(g, sg.group) == std::nullopt);
    CHECK(sg.group.kernel.family == "microkernel");
    const CompiledCheck run = run_compiled(g, spec, s, random_inputs(g, 3));
    CHECK_MESSAGE(run.ok, run.message);
  }
}

TEST_CASE("cpu sparse: a sparse weight the walk cannot take stays dense, and says so") {
  // The weight on the left: the operand broadcast along the columns, not B.
  ModelBuilder b(DType::f32);
  const OpGraph g = b.graph(b.op("MatMul", {b.sparse_weight("w", {128, 256}, 3, block(32, 32, 0.1)), b.input("x", {256, 96})}));
  Schedule s = cpu_schedule(g, cpu_spec("x86-64-avx512-server"), "welder");
  ScheduleGroup& sg = contraction_group(g, s);
  CHECK(sparse_kind(g, sg) == nullptr);
  CHECK(sg.kind_choice.rfind("dense: no block-sparse kernel of 'w' can be emitted here", 0) == 0);
  std::string why;
  CHECK(!cpu::sparse_contraction(g, sg.group, &why));
  CHECK(why.find("the operand broadcast along the columns, not B") != std::string::npos);
}

}  // namespace tessel::testing
