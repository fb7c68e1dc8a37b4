// The gemv family of the CUDA backend (kernels/cuda/contraction_plan.h, device/gemv.cuh): products
// of at most kGemvMaxRows rows (a decoding step's tokens) take it in f32, f16 and bf16, with B
// stored K x N or N x K, A stored M x K or K x M, odd and unaligned sizes (vectors narrower than 16
// bytes, tails of K and N), batches, folded batch axes, epilogues, and K split over a cluster;
// its forms are variants a tuner measures, next to the tiled families' plans of the same product.
// NVRTC compiles every kernel without a GPU; on a GPU every case runs against the interpreter.
#include <algorithm>
#include <set>

#include <doctest/doctest.h>

#include "contraction_graphs.h"
#include "cuda_check.h"
#include "../model_builder.h"
#include "cost_model/analytic_model.h"
#include "kernels/cuda/contraction_plan.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/kernel_families.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// gelu(x W^T + bias).
OpGraph bias_gelu(DType dt, int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(dt);
  const std::string y = b.op("Gemm", {b.input("x", {m, k}), b.weight("w", {n, k}, 3)}, {{"transB", int64_t{1}}});
  return b.graph(b.op("Gelu", {b.op("Add", {y, b.weight("bias", {n}, 4)})}));
}

std::vector<GraphCase> gemv_cases() {
  std::vector<GraphCase> out;
  auto add = [&](std::string name, OpGraph g) { out.push_back({std::move(name), std::move(g)}); };
  add("f32 1x4096 @ 4096x2048 (B K x N), K split", matmul(DType::f32, 1, 4096, 2048));
  add("f32 1x2048 @ (1024x2048)^T (B N x K)", gemm(DType::f32, 1, 2048, 1024, false, true));
  add("f16 1x4096 @ (2048x4096)^T, K split", gemm(DType::f16, 1, 4096, 2048, false, true));
  add("bf16 4x1000 @ 1000x999 (rows read 2 bytes at a time)", matmul(DType::bf16, 4, 1000, 999));
  add("f16 3x1001 @ (130x1001)^T (odd K)", gemm(DType::f16, 3, 1001, 130, false, true));
  add("f32 transA 2x300 (A K x M) @ 300x200", gemm(DType::f32, 2, 300, 200, true, false));
  add("f32 8x333 @ (77x333)^T (8 rows, odd)", gemm(DType::f32, 8, 333, 77, false, true));
  add("f16 batched 3x2x64 @ 3x64x100", batched(DType::f16, {3, 2, 64}, {3, 64, 100}));
  add("f32 folded batch 2x3x72 @ 72x136", batched(DType::f32, {2, 3, 72}, {72, 136}));
  add("f16 bias gelu 8x512 @ (384x512)^T", bias_gelu(DType::f16, 8, 512, 384));
  add("f16 residual cast 5x256 @ 256x130", residual_cast(DType::f16, 5, 256, 130));
  return out;
}

/// welder's schedule of `g` with its contraction group recording the gemv family (its own plan:
/// no parameters), as a tuner or a user may record it where it is not the default.
Schedule with_gemv(const OpGraph& g, const HwSpec& spec) {
  Schedule s = with_families(g, spec, "welder");
  s.groups[contraction_group(g, s)].group.kernel = {"gemv", {}, {}};
  return s;
}

}  // namespace

TEST_CASE("cuda gemv: products of at most 8 rows can take the gemv family, planned, recorded, priced and compiled") {
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  const double bandwidth = spec.level("dram").bandwidth_gbps * 1e9;
  for (const GraphCase& c : gemv_cases()) {
    INFO(c.name);
    Schedule s = with_gemv(c.graph, spec);
    const int gi = contraction_group(c.graph, s);
    const cuda::GeneratedKernel k = emit_kernel(c.graph, s, gi, spec);
    s.groups[gi].group.kernel.params = cuda::family_params(*k.contraction);  // (as compile() records it)
    const ScheduledGroup& g = s.groups[gi].group;
    CHECK(k.path == "gemv");
    CHECK(k.source.find("typedef tsl::gemv::Gemv<") != std::string::npos);
    REQUIRE(k.contraction.has_value());
    const cuda::ContractionPlan& p = *k.contraction;
    CHECK(p.gemv);
    CHECK(p.m <= cuda::kGemvMaxRows);
    CHECK(p.block_m == p.m);  // every row in one block
    CHECK(g.kernel.params.at("block_m") == p.m);
    // 16-byte vectors of B where its rows allow.
    const int64_t elem = dtype_bytes(p.dtype);
    if (p.b.align * elem >= 16) CHECK(p.gemv_vec * elem == 16);
    else CHECK(p.gemv_vec == p.b.align);
    // Priced no faster than reading B from device memory at its bandwidth, on the CUDA cores.
    const CostBreakdown b = cost.estimate(c.graph, g, spec);
    CHECK_FALSE(b.tensor_cores);
    const TensorType& bt = c.graph.tensor(p.b.tensor).type;
    CHECK(b.latency_s >= static_cast<double>(bt.num_elements() * dtype_bytes(bt.dtype)) / bandwidth);
    CHECK(nvrtc_compile_all(c.graph, s, spec) >= 1);
  }
}

TEST_CASE("cuda gemv: the default takes one row of 16-bit operands and up to 8 of f32, read 16 bytes at a time, lanes busy") {
  const HwSpec& spec = gpu_spec();
  auto family = [&](const OpGraph& g) {
    const Schedule s = with_families(g, spec, "welder");
    return s.groups[contraction_group(g, s)].group.kernel.family;
  };
  CHECK(family(matmul(DType::f16, 1, 4096, 2048)) == "gemv");
  CHECK(family(gemm(DType::bf16, 1, 4096, 2048, false, true)) == "gemv");
  CHECK(family(gemm(DType::f32, 8, 2048, 1000, false, true)) == "gemv");
  CHECK(family(matmul(DType::f32, 3, 512, 256)) == "gemv");
  CHECK(family(matmul(DType::f16, 4, 4096, 2048)) != "gemv");             // more 16-bit rows: mma.sync's tiles
  CHECK(family(matmul(DType::f16, 1, 768, 50257)) != "gemv");             // B's rows not 16-byte aligned
  CHECK(family(gemm(DType::f16, 1, 128, 4096, false, true)) != "gemv");   // K of fewer vectors than a warp's lanes
  CHECK(family(matmul(DType::f16, 1, 4096, 128)) != "gemv");              // N narrower than a warp's vectors
  CHECK(family(gemm(DType::f32, 9, 2048, 1000, false, true)) == "simt");  // more rows than the family takes
}

TEST_CASE("cuda gemv: K is split over a cluster where the blocks keep too few bytes in flight, and a spec without clusters says why not") {
  const OpGraph g = matmul(DType::f32, 1, 4096, 2048);
  const cuda::GeneratedKernel split = emit_kernel(g, with_families(g, gpu_spec(), "welder"), 0, gpu_spec());
  REQUIRE(split.contraction.has_value());
  CHECK(split.contraction->split_k > 1);
  CHECK(split.plan.cluster_blocks == split.contraction->split_k);
  CHECK(split.source.find("reduce_cluster<") != std::string::npos);
  HwSpec old = gpu_spec();
  old.limits.max_cluster_blocks = 1;
  const cuda::GeneratedKernel whole = emit_kernel(g, with_families(g, old, "welder"), 0, old);
  REQUIRE(whole.contraction.has_value());
  CHECK(whole.contraction->gemv);
  CHECK(whole.contraction->split_k == 1);
  CHECK(whole.contraction->split_reason.find("no thread-block clusters") != std::string::npos);
  CHECK(whole.plan.cluster_blocks == 1);
}

TEST_CASE("cuda gemv: more rows keep the tiled families, and a recorded gemv there is refused, naming the family") {
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  for (const auto& want : {std::pair{DType::f32, "simt"}, std::pair{DType::f16, "mma"}}) {
    const DType dt = want.first;  // (named copies: INFO's lambda cannot capture a structured binding before C++20)
    const std::string tiled = want.second;
    const OpGraph g = gemm(dt, cuda::kGemvMaxRows + 1, 512, 256, false, true);
    Schedule s = with_families(g, spec, "welder");
    const int gi = contraction_group(g, s);
    INFO(dtype_name(dt));
    CHECK(s.groups[gi].group.kernel.family == tiled);
    ScheduledGroup forced = s.groups[gi].group;
    forced.kernel = {"gemv", {{"block_m", 9}, {"block_n", 16}, {"block_k", 512}, {"warps", 8}, {"cols", 2}, {"unroll", 4}, {"vec", 4}, {"split_k", 1}}, {}};
    const std::optional<std::string> why = families.check(g, forced, spec);
    REQUIRE(why.has_value());
    CHECK(why->find("gemv") != std::string::npos);
  }
}

TEST_CASE("cuda gemv run: the gemv forms and the tiled families' plans a tuner measures are recorded, compile and match the interpreter") {
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  const bool gpu = !find_backend("cuda")->unavailable();
  const std::vector<GraphCase> cases = {{"f32 1x1024 @ (512x1024)^T", gemm(DType::f32, 1, 1024, 512, false, true)},
                                        {"f16 4x1000 @ 1000x999", matmul(DType::f16, 4, 1000, 999)}};
  for (const GraphCase& c : cases) {
    INFO(c.name);
    const Schedule s = schedule_with(c.graph, spec, "welder");
    const int gi = contraction_group(c.graph, s);
    const std::vector<KernelChoice> variants = families.variants(c.graph, s.groups[gi].group, spec);
    REQUIRE_FALSE(variants.empty());
    // (The default first: gemv for one row, mma.sync's plan for four 16-bit ones.)
    CHECK((variants.front().family == "gemv") == (c.graph.node(s.groups[gi].group.nodes.back()).axes()[0].extent == 1));
    std::set<std::string> kinds;
    std::set<int64_t> splits, unrolls;
    int run = 0;
    for (const KernelChoice& k : variants) {
      // (Of the tiled families, their first plan: cuda_mma_test.cpp covers their forms.)
      if (k.family != "gemv" && !kinds.insert(k.family).second) continue;
      kinds.insert(k.family);
      if (k.family == "gemv") {
        splits.insert(k.params.at("split_k"));
        unrolls.insert(k.params.at("unroll"));
      }
      Schedule v = s;
      v.groups[gi].group.kernel = k;
      const cuda::GeneratedKernel g = emit_kernel(c.graph, v, gi, spec);
      REQUIRE(g.contraction.has_value());
      CHECK(g.contraction->gemv == (k.family == "gemv"));
      if (k.family == "gemv") {
        CHECK(g.contraction->warps_m == k.params.at("warps"));
        CHECK(g.contraction->gemv_unroll == k.params.at("unroll"));
        CHECK(g.contraction->split_k == k.params.at("split_k"));
      }
      // (Every form is compiled; on a GPU a sample of them, the tiled ones and the first gemv forms, runs.)
      if (gpu && (k.family != "gemv" || run++ < 12)) check_schedule_on_gpu(c.graph, spec, v, {}, 11);
      else CHECK(nvrtc_compile_all(c.graph, v, spec) >= 1);
    }
    CHECK(kinds.size() >= 2);  // the gemv forms and a tiled family's plans
    CHECK(unrolls == std::set<int64_t>{2, 4, 8});
    CHECK(splits.size() >= 2);
  }
}

TEST_CASE("cuda gemv run: few-row products on the CUDA cores match the interpreter") {
  if (!gpu_available()) return;
  const HwSpec& spec = gpu_spec();
  for (const GraphCase& c : gemv_cases()) {
    INFO(c.name);
    check_schedule_on_gpu(c.graph, spec, with_gemv(c.graph, spec), {}, 11);
  }
  // And the defaults of both policies.
  check_cases_on_gpu(std::vector<GraphCase>{{"f16 1x4096 @ 4096x2048", matmul(DType::f16, 1, 4096, 2048)},
                                            {"f32 8x2048 @ (1000x2048)^T", gemm(DType::f32, 8, 2048, 1000, false, true)}});
}
