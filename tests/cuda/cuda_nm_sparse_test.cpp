// 2:4 sparse weights on the CUDA backend (the nm_sparse tile kind; kernels/cuda/nm_compress.h,
// device/mma.cuh's SparseBlockGemm, contraction_plan.h's nm_sparse plan): the compressed values
// and metadata in the order mma.sp's lanes take them, the policy's choice with its reason, the
// kernel compiling with NVRTC (no GPU needed) for every layout the plan accepts, the refusals, and
// on a GPU the kernels against the interpreter (odd shapes, K tails, transposed weights, bf16,
// fused epilogues).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "../model_builder.h"
#include "cuda_check.h"
#include "kernels/cuda/kernel_families.h"
#include "kernels/cuda/nm_compress.h"
#include "kernels/packed_tensor.h"
#include "policy/kernel_families.h"
#include "policy/schedule_json.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

Sparsity two_four(int axis) {
  Sparsity s;
  s.pattern = Sparsity::Pattern::nm;
  s.nm_n = 2;
  s.nm_m = 4;
  s.axis = axis;
  return s;
}

/// x[m, k] @ w with w 2:4 sparse along k ([k, n], or [n, k] through Gemm's transB); optionally
/// + bias and GELU.
OpGraph nm_gemm(DType dt, int64_t m, int64_t k, int64_t n, bool trans_b = false, bool epilogue = false) {
  return sparse_gemm(dt, m, k, n, two_four(trans_b ? 1 : 0), trans_b, epilogue);
}

const NmSparseProps* nm_kind(const OpGraph& g, const ScheduleGroup& sg) {
  for (const auto& [n, cfg] : sg.group.tiles)
    if (g.node(n).num_reduction() > 0) return std::get_if<NmSparseProps>(&cfg.kind);
  return nullptr;
}

Schedule schedule(const OpGraph& g, const HwSpec& spec, SparseKernels mode = SparseKernels::cost, const std::string& policy = "welder") {
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  for (const auto& p : policies())
    if (p->name() == policy) return schedule_with_families(*p, PolicyContext{g, spec, cost, nullptr, mode}, &families);
  FAIL("no policy ", policy);
  return {};
}

/// The H100 spec without the fitted efficiency of the 2:4 wgmma kernel (whose fit makes the forced
/// choice mma.sp's almost everywhere): the wgmma-sized cases then take wgmma.sp and the others
/// mma.sp, so each case keeps the kernel it is meant to cover (NmCase::family).
const HwSpec& nm_test_spec() {
  static const HwSpec spec = [] {
    HwSpec s = gpu_spec();
    s.compute.family_efficiency.erase("wgmma_sparse");
    return s;
  }();
  return spec;
}

struct NmCase {
  std::string name;
  OpGraph graph;
  std::string family;  // the family the forced 2:4 kernel takes (nm_test_spec): "wgmma" (wgmma.sp) or "mma" (mma.sp)
};

std::vector<NmCase> cases() {
  std::vector<NmCase> out;
  out.push_back({"2048x2048x2048 f16", nm_gemm(DType::f16, 2048, 2048, 2048), "wgmma"});
  out.push_back({"4096x320x4000 f16 (many tiles, an n tail)", nm_gemm(DType::f16, 4096, 320, 4000), "mma"});
  out.push_back({"1000x1000x1000 f16 (tails along m, n and k)", nm_gemm(DType::f16, 1000, 1000, 1000), "wgmma"});
  out.push_back({"Gemm transB bf16 1024x1536x768", nm_gemm(DType::bf16, 1024, 1536, 768, true), "wgmma"});
  out.push_back({"bias + GELU epilogue, 512x4096x1024 f16", nm_gemm(DType::f16, 512, 4096, 1024, false, true), "wgmma"});
  out.push_back({"odd n, 300x200x97 f16", nm_gemm(DType::f16, 300, 200, 97), "mma"});
  // The wgmma.sp kernel's clusters: five column tiles (the last cluster's second block past n)
  // and one (no cluster).
  out.push_back({"five column tiles, 4001x2048x640 f16", nm_gemm(DType::f16, 4001, 2048, 640), "wgmma"});
  out.push_back({"one column tile, 16384x2048x128 f16", nm_gemm(DType::f16, 16384, 2048, 128), "wgmma"});
  {  // X stored K x M: read through the folded Transpose, k strided
    ModelBuilder b(DType::f16);
    const std::string xt = b.op("Transpose", {b.input("xt", {256, 192})}, {{"perm", std::vector<int64_t>{1, 0}}});
    out.push_back({"X stored K x M, 192x256x320 f16", b.graph(b.op("MatMul", {xt, b.sparse_weight("w", {256, 320}, 7, two_four(0))})), "mma"});
  }
  {  // a batched X and one weight for every batch point
    ModelBuilder b(DType::f16);
    out.push_back({"batched 3x64x256 @ 256x192 f16",
                   b.graph(b.op("MatMul", {b.input("x", {3, 64, 256}), b.sparse_weight("w", {256, 192}, 7, two_four(0))})), "mma"});
  }
  return out;
}

// A K x N 2:4 weight (along k) of random 16-bit values, stored k-contiguous or not.
std::vector<uint16_t> random_two_four(int64_t k, int64_t n, bool k_contiguous, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint16_t> bits(static_cast<size_t>(k * n), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t g = 0; g * 4 < k; ++g) {
      const int keep = static_cast<int>(rng() % 3);  // 0, 1 or 2 non-zeros
      int used = 0;
      for (int i = 0; i < 4 && g * 4 + i < k; ++i) {
        if (used == keep || rng() % 2) continue;
        ++used;
        const int64_t kk = g * 4 + i;
        bits[static_cast<size_t>(k_contiguous ? j * k + kk : kk * n + j)] = static_cast<uint16_t>(0x3c00u + rng() % 0x3ffu + 1);
      }
    }
  return bits;
}

}  // namespace

TEST_CASE("cuda nm sparse: compressed values and metadata decompress to the weight, for both layouts and tails") {
  for (const bool k_contiguous : {true, false})
    for (const std::pair<int64_t, int64_t>& kn : std::vector<std::pair<int64_t, int64_t>>{{64, 16}, {100, 37}, {32, 8}, {200, 130}}) {
      const int64_t k = kn.first, n = kn.second;  // (not a structured binding: INFO captures them)
      INFO("k ", k, " n ", n, (k_contiguous ? " k contiguous" : " n contiguous"));
      const std::vector<uint16_t> bits = random_two_four(k, n, k_contiguous, static_cast<uint64_t>(k * 1000 + n));
      const cuda::NmView view{n, k, k_contiguous, k_contiguous ? k : n, 0, (k + 63) / 64 * 64};
      cuda::NmCompressed c;
      REQUIRE(cuda::compress_2_4(bits.data(), static_cast<int64_t>(bits.size()), view, c) == "");
      CHECK(c.values.size() == static_cast<size_t>(n * view.k_pad / 2));
      CHECK(c.metadata.size() == static_cast<size_t>((n + 15) / 16 * view.k_pad / 32 * 32));  // 2 bits per kept value
      const std::vector<uint16_t> dense = cuda::decompress_2_4(c, view);
      bool same = true;
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < n; ++j)
          same &= dense[static_cast<size_t>(kk * n + j)] == bits[static_cast<size_t>(k_contiguous ? j * k + kk : kk * n + j)];
      CHECK(same);
    }
}

TEST_CASE("cuda nm sparse: the metadata words follow mma.sp's lanes (hand-computed), and three non-zeros in a group are refused") {
  // W^T row 0 keeps k 1 and 3 of its first group; row 8 keeps k 16 and 18 (group 4, the second
  // half of the first k32 step); row 3 keeps only k 34 (step 1, group 0: indices 0 and 2).
  const int64_t k = 64, n = 16;
  std::vector<uint16_t> bits(static_cast<size_t>(k * n), 0);  // [n][k], k contiguous
  auto set = [&](int64_t row, int64_t kk, uint16_t v) { bits[static_cast<size_t>(row * k + kk)] = v; };
  set(0, 1, 0x3c00);
  set(0, 3, 0x4000);
  set(8, 16, 0x4200);
  set(8, 18, 0x4400);
  set(3, 34, 0x4500);
  const cuda::NmView view{n, k, true, k, 0, 64};
  cuda::NmCompressed c;
  REQUIRE(cuda::compress_2_4(bits.data(), static_cast<int64_t>(bits.size()), view, c) == "");
  // The word lane 4 g + q (q = 0, 1) supplies: word 2 g + q of the step's 16.
  auto word = [&](int64_t step, int lane) {
    const int64_t w = 2 * (lane / 4) + lane % 4;
    return static_cast<uint32_t>(c.metadata[static_cast<size_t>(step * 32 + 2 * w)]) |
           (static_cast<uint32_t>(c.metadata[static_cast<size_t>(step * 32 + 2 * w + 1)]) << 16);
  };
  REQUIRE(c.metadata.size() == 2 * 32);  // one row of 16, two steps, 16 words each
  // Lane 0 (g 0, q 0): row 0's groups 0..3 in the low half (group 0: 1 | 3 << 2 = 0xd; the empty
  // groups 0 | 1 << 2 = 0x4), row 8's in the high half (all empty).
  CHECK(word(0, 0) == ((0x4444u << 16) | 0x444du));
  // Lane 1 (g 0, q 1): k 16..31 -- row 8's group 4 keeps 0 and 2 (0 | 2 << 2 = 0x8).
  CHECK(word(0, 1) == ((0x4448u << 16) | 0x4444u));
  // Lane 12 (g 3, q 0) of step 1: row 3's group 8 keeps 2 and the lowest free index 0: 0 | 2 << 2.
  CHECK(word(1, 12) == ((0x4444u << 16) | 0x4448u));
  // Row 0's values: its first group's two kept values in k order.
  CHECK(c.values[0] == 0x3c00);
  CHECK(c.values[1] == 0x4000);
  set(0, 2, 0x3c00);
  const std::string why = cuda::compress_2_4(bits.data(), static_cast<int64_t>(bits.size()), view, c);
  CHECK(why.find("more than 2 non-zeros in the group of 4 at k 0, n 0") != std::string::npos);
}

TEST_CASE("cuda nm sparse: forced 2:4 kernels emit mma.sp or wgmma.sp with the derived buffers and compile with NVRTC") {
  std::set<std::string> kernels;
  for (const NmCase& c : cases()) {
    INFO(c.name);
    const Schedule s = schedule(c.graph, nm_test_spec(), SparseKernels::block_sparse);
    const ScheduleGroup& sg = reducing_group(c.graph, s);
    INFO(sg.kind_choice);
    REQUIRE(nm_kind(c.graph, sg) != nullptr);
    CHECK(sg.kind_choice.find("nm_sparse (forced by --sparse-kernels): 'w' is 2:4 sparse") == 0);
    const cuda::GeneratedKernel k = emit_kernel(c.graph, s, static_cast<int>(&sg - s.groups.data()), nm_test_spec());
    // mma.sync's family runs mma.sp, wgmma's wgmma.sp; each case takes the family it is meant to cover.
    CHECK(sg.group.kernel.family == c.family);
    const bool wg = sg.group.kernel.family == "wgmma";
    CHECK(k.source.find(wg ? "tsl::wg::SparseWarpgroupGemm<" : "tsl::mma::SparseBlockGemm<") != std::string::npos);
    if (wg) {
      // Fed by the tensor copy engine: X, then W's values and metadata from the derived buffers;
      // two blocks of a cluster share X where there are two column tiles of 128.
      REQUIRE(k.plan.tensor_maps.size() == 3);
      CHECK(k.plan.tensor_maps[0].derived == -1);
      CHECK(k.plan.tensor_maps[1].derived == 0);
      CHECK(k.plan.tensor_maps[1].swizzle_bytes == 64);
      CHECK(k.plan.tensor_maps[2].derived == 1);
      CHECK(k.plan.cluster_blocks == (k.plan.grid.back() >= 2 ? 2 : 1));
      CHECK(k.plan.threads == 384);
    }
    kernels.insert(sg.group.kernel.family);
    CHECK(k.source.find("tsl_derived1") != std::string::npos);
    REQUIRE(k.plan.derived.size() == 2);
    CHECK(k.plan.derived[0].kind == cuda::DerivedBuffer::Kind::nm_values);
    CHECK(k.plan.derived[1].kind == cuda::DerivedBuffer::Kind::nm_metadata);
    CHECK(k.plan.derived[0].view.k_pad % 64 == 0);
    CHECK(nvrtc_compile_all(c.graph, s, nm_test_spec()) >= 1);
    // Replayed from JSON to the same kernel.
    const Schedule back = schedule_from_json(schedule_to_json(s, c.graph), "replayed", c.graph);
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
      CHECK(emit_kernel(c.graph, back, i, nm_test_spec()).source == emit_kernel(c.graph, s, i, nm_test_spec()).source);
  }
  // The cases cover both kernels.
  CHECK(kernels == std::set<std::string>{"mma", "wgmma"});
}

TEST_CASE("cuda nm sparse: the model weighs 2:4 against dense and says why, and without sparse tensor cores it stays dense") {
  // On an A100 both kernels are mma.sync: the sparse one does half the products and reads about
  // half the weight, so the model takes it for a large product.
  const OpGraph g = nm_gemm(DType::f16, 4096, 4096, 4096);
  const Schedule s = schedule(g, gpu_spec("nvidia-a100-sxm-80g"));
  const ScheduleGroup& sg = reducing_group(g, s);
  INFO(sg.kind_choice);
  CHECK(nm_kind(g, sg) != nullptr);
  CHECK(sg.kind_choice.find("nm_sparse: 'w' is 2:4 sparse: 2:4 mma (sparse tensor cores) ") == 0);
  CHECK(sg.kind_choice.find(" predicted") != std::string::npos);

  // A spec without mma_sparse: the 2:4 plan is refused by name, and the policy keeps dense.
  HwSpec plain = gpu_spec("nvidia-a100-sxm-80g");
  std::erase(plain.target.gpu_features, std::string("mma_sparse"));
  const Schedule d = schedule(g, plain);
  const ScheduleGroup& dg = reducing_group(g, d);
  INFO(dg.kind_choice);
  CHECK(nm_kind(g, dg) == nullptr);
  CHECK(dg.kind_choice ==
        "dense: no N:M sparse kernel of 'w' can be emitted here (the cheapest: kernel family 'mma' cannot emit this group: spec "
        "'nvidia-a100-sxm-80g' lists no mma_sparse (target.gpu_features): no sparse tensor cores)");
  Schedule forced = s;
  CHECK_THROWS_WITH_AS(emit_kernel(g, forced, static_cast<int>(&sg - s.groups.data()), plain), doctest::Contains("lists no mma_sparse"),
                       UserError);
}

TEST_CASE("cuda nm sparse: a 2:4 pattern along the weight's other dimension is not run on the sparse tensor cores") {
  // w [k, n] with its groups along n: mma.sp needs them along k.
  const OpGraph g = sparse_gemm(DType::f16, 512, 512, 512, two_four(1));
  const Schedule s = schedule(g, gpu_spec(), SparseKernels::block_sparse);
  const ScheduleGroup& sg = reducing_group(g, s);
  INFO(sg.kind_choice);
  CHECK(nm_kind(g, sg) == nullptr);
  CHECK(sg.kind_choice.find("dense: no N:M sparse kernel of 'w' can be emitted here (the cheapest: ") == 0);
  CHECK(sg.kind_choice.find("the 2:4 groups of 'w' run along dimension 1, not along the contraction's k") != std::string::npos);
}

TEST_CASE("cuda nm sparse run: 2:4 kernels match the interpreter (odd shapes, tails, transposed weights, bf16, epilogues)") {
  if (!gpu_available()) return;
  for (const NmCase& c : cases()) {
    INFO(c.name);
    const Schedule s = schedule(c.graph, nm_test_spec(), SparseKernels::block_sparse);
    REQUIRE(nm_kind(c.graph, reducing_group(c.graph, s)) != nullptr);
    CHECK(reducing_group(c.graph, s).group.kernel.family == c.family);
    check_schedule_on_gpu(c.graph, nm_test_spec(), s);
  }
}

TEST_CASE("cuda nm sparse: the model prices the 2:4 wgmma kernel's transposed tile and its clusters' shared X panels") {
  // LLaMA-7B's 4096 x 4096 projection at 4096 tokens: the 2:4 kernel runs the recorded 128 x 256
  // tile as 256 rows of X by 128 of W^T, two blocks of a cluster reading each X panel once.
  const OpGraph g = nm_gemm(DType::f16, 4096, 4096, 4096);
  const Schedule s = schedule(g, gpu_spec("nvidia-h200"), SparseKernels::block_sparse);
  const ScheduleGroup& sg = reducing_group(g, s);
  REQUIRE(nm_kind(g, sg) != nullptr);
  REQUIRE(sg.group.kernel.family == "wgmma");
  const AnalyticCostModel cost;
  const CostBreakdown clustered = cost.estimate(g, sg.group, gpu_spec("nvidia-h200"));
  INFO(clustered.bound);
  CHECK(std::any_of(clustered.notes.begin(), clustered.notes.end(),
                    [](const std::string& n) { return n == "the 2:4 kernel's clusters of 2 blocks read each A panel once"; }));
  // Without clusters each block reads its X panel: more L2 bytes, never a faster prediction.
  HwSpec single = gpu_spec("nvidia-h200");
  single.limits.max_cluster_blocks = 1;
  const CostBreakdown alone = cost.estimate(g, sg.group, single);
  CHECK(std::none_of(alone.notes.begin(), alone.notes.end(), [](const std::string& n) { return n.find("clusters of 2") != std::string::npos; }));
  CHECK(alone.latency_s > clustered.latency_s);
}
