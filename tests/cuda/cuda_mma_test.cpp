// The tensor-core path of the CUDA backend (kernels/cuda/contraction_plan.h, device/mma.cuh):
// which groups take it and why the others keep the generic kernel; NVRTC compiles of its kernels
// for odd shapes (M, N, K of 1, 17, 129, 1000; K tails; edges of every tile), transposed
// operands, batches with broadcasting (also on the wgmma kernel), bf16, attention's Q K^T and P V, and epilogues (bias,
// GELU, residual, cast), NHWC convolutions as implicit GEMMs (padding, strides, dilation, 1x1),
// and K split over a thread-block cluster for tiles that leave SMs idle;
// and, on a GPU, their results against the interpreter under the welder and roller schedules.
// Without a GPU the run cases print [SKIP] and still compile every kernel.
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include <doctest/doctest.h>

#include "contraction_graphs.h"
#include "cuda_check.h"
#include "../model_builder.h"
#include "cost_model/analytic_model.h"
#include "kernels/cuda/contraction_plan.h"
#include "kernels/cuda/kernel_families.h"
#include "policy/kernel_families.h"
#include "tilegraph/lower.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// gelu(x W + bias): the FFN's first half.
OpGraph bias_gelu(DType dt, int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(dt);
  const std::string y = b.op("MatMul", {b.input("x", {m, k}), b.weight("w", {k, n}, 3)});
  return b.graph(b.op("Gelu", {b.op("Add", {y, b.weight("bias", {n}, 4)})}));
}

/// softmax(Q K^T * scale) V over [batch, heads, s, d] (the attention workload, unfused).
OpGraph attention(DType dt, int64_t batch, int64_t heads, int64_t sq, int64_t skv, int64_t d) {
  ModelBuilder b(dt);
  const std::string q = b.input("q", {batch, heads, sq, d});
  const std::string k = b.input("k", {batch, heads, skv, d});
  const std::string v = b.input("v", {batch, heads, skv, d});
  const std::string kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  const std::string scores = b.op("MatMul", {q, kt});
  const std::string scaled = b.op("Mul", {scores, b.weight("scale", {}, 5)});
  const std::string probs = b.op("Softmax", {scaled}, {{"axis", int64_t{-1}}});
  return b.graph(b.op("MatMul", {probs, v}));
}

/// Q K^T over [batch, heads, s, d], K read through a Transpose (attention's scores alone).
OpGraph scores(DType dt, int64_t batch, int64_t heads, int64_t sq, int64_t skv, int64_t d) {
  ModelBuilder b(dt);
  const std::string k = b.input("k", {batch, heads, skv, d});
  const std::string kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  return b.graph(b.op("MatMul", {b.input("q", {batch, heads, sq, d}), kt}));
}

/// relu(conv(x, w) * scale + shift) in NHWC with OHWI weights (folded batch norm): the implicit
/// GEMM of the tensor-core path.
/// With `groups` > 1, a grouped convolution: OHWI weights [M, k, k, C / groups], or HWIO ones
/// [k, k, C / groups, M] (the layout the normalize stage gives a converted one).
OpGraph conv_nhwc(DType dt, std::vector<int64_t> x, int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                  int64_t dilation, bool epilogue = true, int64_t groups = 1, bool hwio = false) {
  ModelBuilder b(dt);
  const int64_t c = x.back() / groups;
  const std::string in = b.input("x", std::move(x));
  const std::string w = hwio ? b.weight("w", {kernel, kernel, c, out_channels}, 9) : b.weight("w", {out_channels, kernel, kernel, c}, 9);
  std::map<std::string, AttrValue> attrs = {
      {"kernel_shape", std::vector<int64_t>{kernel, kernel}}, {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
      {"strides", std::vector<int64_t>{stride, stride}},     {"dilations", std::vector<int64_t>{dilation, dilation}},
      {"layout", std::string("NHWC")},                        {"group", groups}};
  if (hwio) attrs["weight_layout"] = std::string("HWIO");
  std::string y = b.op("Conv", {in, w}, attrs);
  if (epilogue) {
    y = b.op("Add", {b.op("Mul", {y, b.weight("scale", {out_channels}, 10)}), b.weight("shift", {out_channels}, 11)});
    y = b.op("Relu", {y});
  }
  return b.graph(y);
}

using MmaCase = GraphCase;

/// Graphs whose contraction groups take the tensor-core path (under both policies).
std::vector<MmaCase> mma_cases() {
  std::vector<MmaCase> out;
  auto add = [&](std::string name, OpGraph g) { out.push_back({std::move(name), std::move(g)}); };
  // Plain A[M, K] B[K, N]: K and N multiples of 8 (the rows' alignment), M anything.
  add("matmul 1x40x1000", matmul(DType::f16, 1, 40, 1000));
  add("matmul 17x1000x24", matmul(DType::f16, 17, 1000, 24));
  add("matmul 129x24x136", matmul(DType::f16, 129, 24, 136));
  add("matmul 1000x64x40", matmul(DType::f16, 1000, 64, 40));
  add("matmul K=1 17x1x17", matmul(DType::f16, 17, 1, 17));
  // B stored N x K (k contiguous, ldmatrix without .trans): N anything.
  add("gemm transB 17x40x17", gemm(DType::f16, 17, 40, 17, false, true));
  add("gemm transB 129x1000x1", gemm(DType::f16, 129, 1000, 1, false, true));
  add("gemm transB 1000x16x129", gemm(DType::f16, 1000, 16, 129, false, true));
  // A stored K x M (ldmatrix .trans for A): K anything.
  add("gemm transA 136x129x24", gemm(DType::f16, 136, 129, 24, true, false));
  add("gemm transA transB 24x1000x17", gemm(DType::f16, 24, 1000, 17, true, true));
  // bf16.
  add("bf16 matmul 129x1000x40", matmul(DType::bf16, 129, 1000, 40));
  add("bf16 gemm transA transB 40x17x1", gemm(DType::bf16, 40, 17, 1, true, true));
  // Batches, broadcast batch axes.
  add("batched 2x3 17x40x24", batched(DType::f16, {2, 3, 17, 40}, {2, 3, 40, 24}));
  add("batched broadcast B 2x3x33x16 @ 16x24", batched(DType::f16, {2, 3, 33, 16}, {16, 24}));
  add("batched broadcast 2x1 @ 1x3", batched(DType::bf16, {2, 1, 17, 32}, {1, 3, 32, 24}));
  // Epilogues.
  add("bias gelu 129x40x136", bias_gelu(DType::f16, 129, 40, 136));
  add("bf16 bias gelu 17x64x1000", bias_gelu(DType::bf16, 17, 64, 1000));
  add("residual cast f32 33x24x40", residual_cast(DType::f16, 33, 24, 40));
  // Attention: Q K^T through the Transpose (welder fuses it into the group), P V (roller; welder
  // fuses it with the softmax at this size). Head dimension 288 keeps the welder off the streamed
  // attention kernel (cuda_flash_test.cpp covers that one).
  add("attention 1x2 s129/520 d288", attention(DType::f16, 1, 2, 129, 520, 288));
  // Convolutions (NHWC) as implicit GEMMs: padding at every edge, strides, dilation, 1x1, odd
  // output channels, a K tail (9 x 8 channels = 72 is not a multiple of the 32-wide K step).
  add("conv 3x3 pad 1 2x14x14x64 -> 64, bn relu", conv_nhwc(DType::f16, {2, 14, 14, 64}, 64, 3, 1, 1, 1));
  add("conv 3x3 stride 2 2x15x13x32 -> 40", conv_nhwc(DType::f16, {2, 15, 13, 32}, 40, 3, 2, 1, 1, false));
  add("conv 1x1 2x7x7x64 -> 128, bn relu", conv_nhwc(DType::f16, {2, 7, 7, 64}, 128, 1, 1, 0, 1));
  add("conv 1x1 stride 2 2x9x9x64 -> 128, bn relu", conv_nhwc(DType::f16, {2, 9, 9, 64}, 128, 1, 2, 0, 1));
  add("conv 3x3 dilation 2 pad 2 1x9x11x16 -> 24", conv_nhwc(DType::f16, {1, 9, 11, 16}, 24, 3, 1, 2, 2));
  add("bf16 conv 3x3 1x5x6x8 -> 17, bn relu", conv_nhwc(DType::bf16, {1, 5, 6, 8}, 17, 3, 1, 1, 1));
  add("conv 5x5 pad 0 1x8x8x24 -> 8", conv_nhwc(DType::f16, {1, 8, 8, 24}, 8, 5, 1, 0, 1, false));
  // The Hopper kernel (wgmma, TMA; "bias gelu 129x40x136" and "gemm transB 1000x16x129" above take
  // it too): edges of M, N and K (200 = 3 x 64 + 8), B stored N x K in bf16, 128 x 256 tiles.
  add("wgmma matmul 300x200x264", matmul(DType::f16, 300, 200, 264));
  add("wgmma bf16 gemm transB 257x136x1000", gemm(DType::bf16, 257, 136, 1000, false, true));
  add("wgmma 128x256 tiles 1536x64x2816", matmul(DType::f16, 1536, 64, 2816));
  // More tiles than SMs: the persistent grid (288 and 576 tiles of 128 x 128 over 132 blocks;
  // edges of N and K).
  add("wgmma persistent 4096x136x1096", matmul(DType::f16, 4096, 136, 1096));
  add("wgmma persistent bf16 gemm transB 2300x64x4000", gemm(DType::bf16, 2300, 64, 4000, false, true));
  // K split over a cluster (the tiles leave SMs idle): decode-sized M with an epilogue, A and B
  // stored transposed (the K parts start at rows of the K x M / K x N views), a batch, bf16, and a
  // K whose 41 tiles do not divide into the parts (1304 = 40 x 32 + 24: a K tail in the last).
  // (Others above split too: "matmul 17x1000x24", "gemm transB 129x1000x1", "bf16 matmul 129x1000x40".)
  add("split K bias gelu 16x2048x256", bias_gelu(DType::f16, 16, 2048, 256));
  add("split K gemm transA transB 24x1304x40", gemm(DType::f16, 24, 1304, 40, true, true));
  add("split K batched 2x3 17x1000x24", batched(DType::f16, {2, 3, 17, 1000}, {2, 3, 1000, 24}));
  add("split K bf16 gemm transB 9x4096x136", gemm(DType::bf16, 9, 4096, 136, false, true));
  // Batched wgmma products (each operand's tensor map with its batch axes as outer dimensions):
  // edges of M, N and K per batch point with B stored K x N (as P V reads V); A broadcast over
  // the first axis (its map has one batch dimension, B's two); B stored N x K through a Transpose
  // (attention's Q K^T, bf16); more tiles than SMs (2 x 8 x 3 x 3 = 144: the persistent grid).
  add("wgmma batched 2x3 257x200x136", batched(DType::f16, {2, 3, 257, 200}, {2, 3, 200, 136}));
  add("wgmma batched broadcast A 1x3 @ 2x3 256x72x264", batched(DType::f16, {1, 3, 256, 72}, {2, 3, 72, 264}));
  add("wgmma bf16 scores 2x2 s300/264 d64", scores(DType::bf16, 2, 2, 300, 264, 64));
  add("wgmma persistent batched 2x8 384x64x384", batched(DType::f16, {2, 8, 384, 64}, {2, 8, 64, 384}));
  // Convolutions on the wgmma kernel, read in boxes of output points (contraction_plan.h): padding
  // at every edge with a folded batch norm; stride 2 over 96 channels (the second 64-channel chunk
  // half zeros) and 136 output channels (an N edge); a 1x1 over 7 x 7 images (a box spans two);
  // dilation 2 in bf16; C = 32 with more tiles than SMs (the persistent grid); a long K over two
  // tiles (K split over a cluster).
  add("wgmma conv 3x3 pad 1 2x14x14x64 -> 128, bn relu", conv_nhwc(DType::f16, {2, 14, 14, 64}, 128, 3, 1, 1, 1));
  add("wgmma conv 3x3 stride 2 4x15x13x96 -> 136", conv_nhwc(DType::f16, {4, 15, 13, 96}, 136, 3, 2, 1, 1, false));
  add("wgmma conv 1x1 4x7x7x256 -> 256", conv_nhwc(DType::f16, {4, 7, 7, 256}, 256, 1, 1, 0, 1, false));
  add("wgmma conv 1x1 stride 2 4x13x13x256 -> 256", conv_nhwc(DType::f16, {4, 13, 13, 256}, 256, 1, 2, 0, 1, false));
  add("wgmma bf16 conv 3x3 dilation 2 1x19x21x64 -> 128, bn relu", conv_nhwc(DType::bf16, {1, 19, 21, 64}, 128, 3, 1, 2, 2));
  add("wgmma persistent conv 3x3 16x40x40x32 -> 128", conv_nhwc(DType::f16, {16, 40, 40, 32}, 128, 3, 1, 1, 1, false));
  add("wgmma split conv 3x3 1x16x16x512 -> 128", conv_nhwc(DType::f16, {1, 16, 16, 512}, 128, 3, 1, 1, 1, false));
  // Grouped convolutions: an implicit GEMM per group (the group a batch axis of both operands):
  // 16 -> 16 channels per group (ResNeXt-50's third stage), 8 -> 16 with a stride, 8 -> 24 in
  // bf16 with HWIO weights, an odd output and a K tail (72 = 9 x 8).
  add("grouped conv 3x3 g4 2x9x11x64 -> 64, bn relu", conv_nhwc(DType::f16, {2, 9, 11, 64}, 64, 3, 1, 1, 1, true, 4));
  add("grouped conv 3x3 stride 2 g8 1x15x13x64 -> 128", conv_nhwc(DType::f16, {1, 15, 13, 64}, 128, 3, 2, 1, 1, false, 8, true));
  add("bf16 grouped conv 3x3 g2 HWIO 1x7x5x16 -> 48, bn relu", conv_nhwc(DType::bf16, {1, 7, 5, 16}, 48, 3, 1, 1, 1, true, 2, true));
  add("grouped conv 1x1 g32 1x7x7x1024 -> 1024", conv_nhwc(DType::f16, {1, 7, 7, 1024}, 1024, 1, 1, 0, 1, false, 32, true));
  // Rows that do not start 16-byte aligned, read in narrower pieces (MmaOperand::align): A's rows
  // 17 elements apart (16-bit loads through registers) and 36 apart (8-byte cp.async) with B's
  // 20 apart (8-byte); bf16 rows 18 and 30 apart (4-byte); an NCHW 1x1 convolution's form, the
  // weight broadcast over images of 7 x 7 pixels (B's rows 49 apart, its batch stride 1176);
  // B stored N x K 20 apart; batch strides of 3 x 17 elements.
  add("unaligned matmul 17x17x24", matmul(DType::f16, 17, 17, 24));
  add("unaligned matmul 33x36x20", matmul(DType::f16, 33, 36, 20));
  add("unaligned bf16 matmul 40x18x30", matmul(DType::bf16, 40, 18, 30));
  add("unaligned 1x1 conv form 144x24 @ 4x24x49", batched(DType::f16, {144, 24}, {4, 24, 49}));
  add("unaligned gemm transB 33x20x40", gemm(DType::f16, 33, 20, 40, false, true));
  add("unaligned batched 2x3x17 @ 2x17x9", batched(DType::f16, {2, 3, 17}, {2, 17, 9}));
  // Batch axes over which B is broadcast fold into m (a [batch, seq, hidden] projection): m = 3 x 50.
  add("folded batch 3x50x72 @ 72x136", batched(DType::f16, {3, 50, 72}, {72, 136}));
  add("folded batch 2x1x9x16 @ 16x24", batched(DType::bf16, {2, 1, 9, 16}, {16, 24}));
  return out;
}

int mma_kernels(const OpGraph& g, const Schedule& s, const HwSpec& spec) {
  int n = 0;
  for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
    const std::string path = emit_kernel(g, s, i, spec).path;
    n += path == "mma" || path == "wgmma" || path == "gemv";  // (a product of at most 8 rows takes gemv: cuda_gemv_test.cpp)
  }
  return n;
}

/// The kernel of the last group of roller's schedule with `family` recorded (no parameters: the
/// family's own plan), e.g. mma.sync for a product of few rows, which takes gemv by default.
cuda::GeneratedKernel recorded_kernel(const OpGraph& g, const std::string& family, const HwSpec& spec = gpu_spec()) {
  Schedule s = schedule_with(g, spec, "roller");
  REQUIRE(!s.groups.empty());
  s.groups.back().group.kernel = {family, {}, {}};
  return emit_kernel(g, s, static_cast<int>(s.groups.size()) - 1, spec);
}

/// The kernel of the last group of roller's schedule (one operator per group).
cuda::GeneratedKernel roller_kernel(const OpGraph& g) { return last_kernel(g, "roller"); }

}  // namespace

TEST_CASE("cuda mma: contraction groups take the tensor-core path, with the operand layouts read off the maps") {
  // (N = 120 is below the wgmma kernel's 128: mma.sync.)
  const cuda::GeneratedKernel plain = roller_kernel(matmul(DType::f16, 129, 24, 120));
  REQUIRE(plain.path == "mma");
  REQUIRE(plain.contraction);
  CHECK(plain.contraction->a.k_contiguous);
  CHECK(plain.contraction->a.ld == 24);
  CHECK_FALSE(plain.contraction->b.k_contiguous);
  CHECK(plain.contraction->b.ld == 120);
  CHECK(plain.contraction->m == 129);
  CHECK(plain.contraction->n == 120);
  CHECK(plain.contraction->k == 24);
  CHECK(plain.contraction->warpgroup_reason.find("below 128") != std::string::npos);
  CHECK(plain.source.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != std::string::npos);
  CHECK(plain.plan.dynamic_smem_bytes() == plain.contraction->smem_bytes);
  CHECK(plain.plan.threads == plain.contraction->threads(gpu_spec().compute.simd_width));

  const cuda::GeneratedKernel tt = roller_kernel(gemm(DType::bf16, 40, 17, 1, true, true));
  REQUIRE(tt.path == "mma");
  CHECK_FALSE(tt.contraction->a.k_contiguous);
  CHECK(tt.contraction->b.k_contiguous);
  CHECK(tt.contraction->dtype == DType::bf16);

  const cuda::GeneratedKernel b = roller_kernel(batched(DType::f16, {2, 1, 17, 32}, {1, 3, 32, 24}));
  REQUIRE(b.path == "mma");
  CHECK(b.contraction->batch == 6);
  CHECK(b.contraction->a.batch_strides == std::vector<int64_t>{17 * 32, 0});
  CHECK(b.contraction->b.batch_strides == std::vector<int64_t>{0, 32 * 24});

  // Welder fuses the epilogue (bias add, GELU) into the contraction's group: one mma kernel.
  const OpGraph ffn = bias_gelu(DType::f16, 256, 64, 256);
  const Schedule s = schedule_with(ffn, gpu_spec(), "welder");
  REQUIRE(s.groups.size() == 1);
  const cuda::GeneratedKernel k = emit_kernel(ffn, s, 0, gpu_spec());
  CHECK(k.path == "wgmma");  // 256 x 256 on the H100: the Hopper kernel
  CHECK(k.plan.outputs.size() == 1);

  // Attention (head dimension 288: more than the streamed kernel takes): the Transpose of K is folded into
  // the read of B (k contiguous).
  const OpGraph att = attention(DType::f16, 1, 2, 129, 520, 288);
  const Schedule sa = schedule_with(att, gpu_spec(), "welder");
  bool folded = false;
  for (int i = 0; i < static_cast<int>(sa.groups.size()); ++i) {
    const cuda::GeneratedKernel g = emit_kernel(att, sa, i, gpu_spec());
    if (g.contraction && !g.contraction->operand_nodes.empty()) {
      folded = true;
      CHECK(g.contraction->b.k_contiguous);
      CHECK(att.tensor(g.contraction->b.tensor).name == "k");
    }
  }
  CHECK(folded);
  // Without fusion both products run on the tensor cores, P V reading the softmax's output.
  CHECK(mma_kernels(att, schedule_with(att, gpu_spec(), "roller"), gpu_spec()) == 2);

  // An NHWC convolution is an implicit GEMM: m = (n, oh, ow), n = the output channel, k = (kh, kw,
  // c) in the weight's order; the input is gathered, zero outside (padding) along h and w only.
  const OpGraph cv = conv_nhwc(DType::f16, {2, 15, 13, 32}, 40, 3, 2, 1, 1, false);
  const cuda::GeneratedKernel ck = roller_kernel(cv);
  REQUIRE(ck.path == "mma");
  REQUIRE(ck.contraction->implicit);
  CHECK(ck.contraction->m == 2 * 8 * 7);
  CHECK(ck.contraction->n == 40);
  CHECK(ck.contraction->k == 3 * 3 * 32);
  CHECK(ck.contraction->k_extents == std::vector<int64_t>{3, 3, 32});
  CHECK(ck.contraction->b.k_contiguous);
  CHECK(ck.contraction->b.ld == 3 * 3 * 32);
  REQUIRE(ck.contraction->a_gather.size() == 4);
  CHECK_FALSE(ck.contraction->a_gather[0].check);
  CHECK(ck.contraction->a_gather[1].check);
  CHECK(ck.contraction->a_gather[1].m_coeff == 2);
  CHECK(ck.contraction->a_gather[1].offset == -1);
  CHECK(ck.contraction->a_gather[2].check);
  CHECK_FALSE(ck.contraction->a_gather[3].check);
  CHECK(ck.source.find("struct TslGatherA") != std::string::npos);
  // A 1 x 1 convolution with stride 1 and no padding is a matrix product: m = n x oh x ow folded,
  // the input's rows read as they are (no gather); with stride 2 it stays an implicit GEMM.
  const cuda::GeneratedKernel pw = roller_kernel(conv_nhwc(DType::f16, {2, 7, 9, 64}, 96, 1, 1, 0, 1, false));
  REQUIRE(pw.path == "mma");
  CHECK_FALSE(pw.contraction->implicit);
  CHECK(pw.contraction->m == 2 * 7 * 9);
  CHECK(pw.contraction->n == 96);
  CHECK(pw.contraction->k == 64);
  CHECK(pw.contraction->a.k_contiguous);
  CHECK(pw.contraction->a.ld == 64);
  CHECK(pw.contraction->b.k_contiguous);
  CHECK(pw.source.find("struct TslGatherA") == std::string::npos);
  const cuda::GeneratedKernel pw2 = roller_kernel(conv_nhwc(DType::f16, {2, 7, 9, 64}, 96, 1, 2, 0, 1, false));
  REQUIRE(pw2.path == "mma");
  CHECK(pw2.contraction->implicit);
  CHECK(pw2.contraction->m == 2 * 4 * 5);
  // Welder fuses the folded batch norm and the ReLU into the convolution's kernel.
  const OpGraph cbr = conv_nhwc(DType::f16, {2, 14, 14, 64}, 64, 3, 1, 1, 1);
  const Schedule scbr = schedule_with(cbr, gpu_spec(), "welder");
  REQUIRE(scbr.groups.size() == 1);
  CHECK(emit_kernel(cbr, scbr, 0, gpu_spec()).path == "mma");
}

TEST_CASE("cuda mma: a grouped convolution is an implicit GEMM per group, the group a batch axis of both operands") {
  // ResNeXt-50's 3x3 of the third stage at batch 2: 32 groups of 16 -> 16 channels, HWIO weights.
  const cuda::GeneratedKernel k = roller_kernel(conv_nhwc(DType::f16, {2, 14, 14, 512}, 512, 3, 1, 1, 1, false, 32, true));
  INFO(k.mma_reason);
  REQUIRE(k.path == "mma");
  const cuda::ContractionPlan& p = *k.contraction;
  CHECK(p.implicit);
  CHECK(p.batch == 32);
  CHECK(p.batch_extents == std::vector<int64_t>{32});
  CHECK(p.m == 2 * 14 * 14);
  CHECK(p.n == 16);
  CHECK(p.k == 3 * 3 * 16);
  // Group g's view: its 16 input channels of x, its 16 output columns of the weight.
  CHECK(p.a.batch_strides == std::vector<int64_t>{16});
  CHECK(p.b.batch_strides == std::vector<int64_t>{16});
  CHECK(!p.b.k_contiguous);
  CHECK(p.block_n == 16);  // no group computes another's zeros
  CHECK(p.tiles() == 32 * p.tiles_m);
  CHECK(!p.warpgroup);
  CHECK(p.warpgroup_reason.find("grouped convolution") != std::string::npos);
  CHECK(k.source.find("tsl_x3 * 16LL") != std::string::npos);  // the group's offset (axis 3: g)
  // OHWI weights: the group's rows of the weight, 9 x 16 apart.
  const cuda::GeneratedKernel o = roller_kernel(conv_nhwc(DType::f16, {2, 14, 14, 512}, 512, 3, 1, 1, 1, false, 32));
  REQUIRE(o.path == "mma");
  CHECK(o.contraction->b.k_contiguous);
  CHECK(o.contraction->b.batch_strides == std::vector<int64_t>{16 * 9 * 16});
  // 4 channels per group are not whole 16-byte chunks: the vector kernel's grouped windows.
  const cuda::GeneratedKernel four = roller_kernel(conv_nhwc(DType::f16, {2, 14, 14, 128}, 128, 3, 1, 1, 1, false, 32, true));
  CHECK(four.path != "mma");
  CHECK(four.mma_reason.find("not a multiple of 8") != std::string::npos);
  // 8 input channels but 4 output channels per group with HWIO weights: the group's columns start
  // 8 bytes apart, not 16-byte aligned.
  const cuda::GeneratedKernel narrow = roller_kernel(conv_nhwc(DType::f16, {1, 6, 6, 64}, 32, 3, 1, 1, 1, false, 8, true));
  CHECK(narrow.path != "mma");
  CHECK(narrow.mma_reason.find("group stride 4") != std::string::npos);
  // 8 output channels per group: half of every 16-wide tile would be zeros.
  const cuda::GeneratedKernel eight = roller_kernel(conv_nhwc(DType::f16, {2, 14, 14, 256}, 256, 3, 1, 1, 1, false, 32, true));
  CHECK(eight.path == "vector");
  CHECK(eight.mma_reason.find("8 output channels per group") != std::string::npos);
  // Without an epilogue (roller: one operator per group) the convolution is the sink and stores at
  // its own domain point; with one (welder: the folded batch norm and ReLU), the epilogue runs
  // over the output's domain.
  CHECK(!k.contraction->merged_n);
  const cuda::GeneratedKernel fused =
      last_kernel(conv_nhwc(DType::f16, {2, 14, 14, 512}, 512, 3, 1, 1, 1, true, 32, true), "welder");
  REQUIRE(fused.path == "mma");
  CHECK(fused.contraction->merged_n);
  CHECK(fused.source.find("tsl_batch = tsl_t % 32LL") != std::string::npos);  // groups fastest
}

TEST_CASE("cuda mma: kernel families follow the spec's gpu_features, never the arch name") {
  const OpGraph g = matmul(DType::f16, 256, 72, 264);
  // A hypothetical next generation with the H100's features keeps wgmma and TMA.
  HwSpec next = gpu_spec();
  next.name = "hypothetical-sm100";
  next.target.arch = "sm_100a";
  CHECK(emit_kernel(g, schedule_with(g, next, "roller"), 0, next).path == "wgmma");
  // The H100 with wgmma left out of its features: the mma.sync kernel, saying why.
  HwSpec no_wgmma = gpu_spec();
  no_wgmma.target.gpu_features = {"mma_sync", "cp_async", "ldmatrix", "tma"};
  const cuda::GeneratedKernel kept = emit_kernel(g, schedule_with(g, no_wgmma, "roller"), 0, no_wgmma);
  CHECK(kept.path == "mma");
  REQUIRE(kept.contraction);
  CHECK(kept.contraction->warpgroup_reason.find("lists no wgmma and TMA") != std::string::npos);
  // Without mma_sync no tensor-core kernel at all: the generic one.
  HwSpec no_mma = gpu_spec();
  no_mma.target.gpu_features = {"cp_async", "ldmatrix"};
  const std::string path = emit_kernel(g, schedule_with(g, no_mma, "roller"), 0, no_mma).path;
  CHECK(path != "mma");
  CHECK(path != "wgmma");
}

TEST_CASE("cuda mma: on sm_90a, plain products of at least 128 x 128 take the wgmma kernel with TMA tensor maps") {
  // A 256 x 72 (k contiguous), B 72 x 264 (n contiguous): 2 x 3 tiles of 128 x 128 do not fill
  // the H100's 132 SMs, so n is 128.
  const cuda::GeneratedKernel k = roller_kernel(matmul(DType::f16, 256, 72, 264));
  REQUIRE(k.path == "wgmma");
  REQUIRE(k.contraction);
  const cuda::ContractionPlan& c = *k.contraction;
  CHECK(c.warpgroup);
  CHECK(c.block_m == 128);
  CHECK(c.block_n == 128);
  CHECK(c.block_k == 64);
  CHECK(k.plan.threads == 3 * 4 * 32);
  CHECK(k.plan.dynamic_smem_bytes() == c.smem_bytes);
  CHECK(c.smem_bytes <= gpu_spec().limits.smem_per_block_bytes);
  CHECK(k.plan.blocks == 2 * 3);
  REQUIRE(k.plan.tensor_maps.size() == 2);
  const cuda::TensorMapParam& a = k.plan.tensor_maps[0];
  const cuda::TensorMapParam& b = k.plan.tensor_maps[1];
  CHECK((a.rows == 256 && a.cols == 72 && a.ld == 72 && a.box_rows == 128 && a.box_cols == 64));
  // B stored K x N: boxes of 64 k rows x 64 n columns.
  CHECK((b.rows == 72 && b.cols == 264 && b.ld == 264 && b.box_rows == 64 && b.box_cols == 64));
  CHECK(k.source.find("typedef tsl::wg::WarpgroupGemm<128, 128, 6, false, false, 72> TslGemm;") != std::string::npos);
  CHECK(k.source.find("const __grid_constant__ tsl::wg::TensorMap tsl_map1") != std::string::npos);
  CHECK(k.source.find("wgmma m64n128k16 f16, TMA") != std::string::npos);
  CHECK(c.persistent == 0);  // 6 tiles: one block each
  CHECK(k.source.find("tsl_gemm.run<8>(tsl_smem, &tsl_map0") != std::string::npos);

  // More tiles than SMs: a persistent grid of one block per SM looping over the tiles; a
  // schedule that records no `persistent` gets one block per tile.
  {
    const OpGraph pg = matmul(DType::f16, 4096, 136, 1096);
    Schedule ps = schedule_with(pg, gpu_spec(), "roller");
    const cuda::GeneratedKernel pk = emit_kernel(pg, ps, 0, gpu_spec());
    REQUIRE(pk.path == "wgmma");
    // 128-wide tiles: 32 x 9 in three waves of 128 columns on 132 SMs; 192 wide takes as long (32 x 6
    // in two waves of 192), so it is not taken (wgmma_mid_width_pays), nor 256 (two waves of 256).
    CHECK(pk.contraction->block_n == 128);
    CHECK(pk.contraction->tiles() == 32 * 9);
    CHECK(pk.contraction->persistent == gpu_spec().compute.units);
    CHECK(pk.plan.blocks == gpu_spec().compute.units);
    CHECK(pk.source.find("tsl_gemm.run_tiles<8>(") != std::string::npos);
    KernelChoice recorded{"wgmma", cuda::contraction_params(*pk.contraction), {}};
    REQUIRE(recorded.params.count("persistent"));
    CHECK(recorded.params.at("persistent") == 1);
    recorded.params.erase("persistent");
    ps.groups[0].group.kernel = recorded;
    const cuda::GeneratedKernel one = emit_kernel(pg, ps, 0, gpu_spec());
    CHECK(one.contraction->persistent == 0);
    CHECK(one.plan.blocks == 32 * 9);
    CHECK(one.source.find("tsl_gemm.run_tiles<") == std::string::npos);
  }

  // Enough tiles for the SMs: 128 x 256; B stored N x K (bf16) is one box of the block's n rows.
  const cuda::GeneratedKernel big = roller_kernel(gemm(DType::bf16, 2048, 64, 4096, false, true));
  REQUIRE(big.path == "wgmma");
  CHECK(big.contraction->block_n == 256);
  CHECK(big.contraction->stages == 4);
  CHECK((big.plan.tensor_maps[1].rows == 4096 && big.plan.tensor_maps[1].cols == 64 && big.plan.tensor_maps[1].box_rows == 256));
  CHECK(big.source.find("typedef tsl::wg::WarpgroupGemm<128, 256, 4, true, true, 64> TslGemm;") != std::string::npos);

  // A projection of [8, 128, 64] activations by a [64, 256] weight: the batch folds into m.
  const cuda::GeneratedKernel proj = roller_kernel(batched(DType::f16, {8, 128, 64}, {64, 256}));
  REQUIRE(proj.path == "wgmma");
  CHECK(proj.contraction->batch == 1);
  CHECK(proj.contraction->m == 8 * 128);
  CHECK(proj.contraction->m_axes == std::vector<int>{0, 1});
  CHECK(proj.contraction->batch_axes.empty());
  CHECK(proj.plan.tensor_maps[0].rows == 8 * 128);
  CHECK(proj.source.find("(batch folded into m)") != std::string::npos);

  // The epilogue reads C back from each consumer's slab 8 columns at a time where every row of the
  // output starts 16-byte aligned, else one column at a time (N = 129).
  CHECK(roller_kernel(gemm(DType::f16, 1000, 16, 129, false, true)).source.find("tsl_gemm.run<1>(") != std::string::npos);

  // A batched product: each operand's map takes the batch axes it is not broadcast over as outer
  // dimensions (A broadcast over axis 0 has one, B two), and every tile carries its batch point.
  {
    const cuda::GeneratedKernel bk = roller_kernel(batched(DType::f16, {1, 3, 256, 72}, {2, 3, 72, 264}));
    REQUIRE(bk.path == "wgmma");
    CHECK(bk.contraction->batch == 6);
    CHECK(bk.contraction->tiles() == 6 * 2 * 3);
    REQUIRE(bk.plan.tensor_maps.size() == 2);
    const cuda::TensorMapParam& ba = bk.plan.tensor_maps[0];
    const cuda::TensorMapParam& bb = bk.plan.tensor_maps[1];
    CHECK((ba.batch_extents == std::vector<int64_t>{3} && ba.batch_strides == std::vector<int64_t>{256 * 72}));
    CHECK((bb.batch_extents == std::vector<int64_t>{2, 3} && bb.batch_strides == std::vector<int64_t>{3 * 72 * 264, 72 * 264}));
    CHECK(bk.source.find("typedef tsl::wg::WarpgroupGemm<128, 128, 6, false, false, 72, 1, 1, 1, 2> TslGemm;") != std::string::npos);
    CHECK(bk.source.find("tsl_at.ba[0] = static_cast<int>(tsl_x1);") != std::string::npos);
    CHECK(bk.source.find("tsl_at.bb[1] = static_cast<int>(tsl_x1);") != std::string::npos);
  }

  // What keeps mma.sync, and says so: a decode-sized M, four strided batch axes (a tensor map has
  // five dimensions), A stored K x M, another target.
  auto kept = [](const cuda::GeneratedKernel& g) {
    CHECK(g.path == "mma");
    REQUIRE(g.contraction);
    CHECK(g.source.find("wgmma not used: " + g.contraction->warpgroup_reason) != std::string::npos);
    return g.contraction->warpgroup_reason;
  };
  CHECK(kept(roller_kernel(matmul(DType::f16, 16, 4096, 4096))).find("below 128") != std::string::npos);
  CHECK(kept(roller_kernel(batched(DType::f16, {2, 2, 2, 2, 256, 64}, {2, 2, 2, 2, 64, 256}))).find("4 batch axes with a stride") !=
        std::string::npos);
  CHECK(kept(roller_kernel(gemm(DType::f16, 256, 64, 256, true, false))).find("A is stored K x M") != std::string::npos);
  const OpGraph g = matmul(DType::f16, 256, 64, 256);
  const HwSpec& a100 = gpu_spec("nvidia-a100-sxm-80g");
  const Schedule s = schedule_with(g, a100, "roller");
  CHECK(kept(emit_kernel(g, s, 0, a100)).find("lists no wgmma and TMA") != std::string::npos);
  // Without the wgmma shapes in the spec the H100 keeps mma.sync too.
  HwSpec no_wgmma = gpu_spec();
  auto& shapes = no_wgmma.compute.tensor_core_shapes.at(DType::f16);
  shapes.erase(std::remove_if(shapes.begin(), shapes.end(), [](const MmaShape& m) { return m.m == 64; }), shapes.end());
  CHECK(kept(emit_kernel(g, schedule_with(g, no_wgmma, "roller"), 0, no_wgmma)).find("m64n256k16") != std::string::npos);
}

TEST_CASE("cuda mma: a decode GEMM's pipeline is deepened until its bytes in flight cover the loaded latency") {
  // LLaMA-70B's MLP down at M = 1: 128 tiles of 16 x 64 (not split: two parts would not fit the
  // SMs one each), each walking K = 28672. With 4 stages of 32 its blocks kept 1.6 MB requested and
  // streamed the weight at 2.2 TB/s on an H200. The spec's device memory (3.35 TB/s, 1.1 us loaded
  // latency) needs 3.7 MB in flight: K steps of 64 (8.3 KB a stage a block) through 5 stages.
  const HwSpec& spec = gpu_spec();
  const double bandwidth = spec.level("dram").bandwidth_gbps * 1e9;
  REQUIRE(spec.level("dram").loaded_latency_ns == doctest::Approx(1100));
  // (Recorded: one row takes the gemv family by default.)
  const cuda::GeneratedKernel dec = recorded_kernel(gemm(DType::f16, 1, 28672, 8192, false, false), "mma");
  REQUIRE(dec.path == "mma");
  const cuda::ContractionPlan& c = *dec.contraction;
  CHECK(c.tiles() == 128);
  CHECK(c.split_k == 1);
  CHECK(c.block_k == 64);
  CHECK(c.stages == 5);
  const double stage = (1.0 + 64.0) * 64 * 2;  // one row of A (M = 1), 64 columns of B, 64 deep
  CHECK(in_flight_rate(spec, 128 * 4 * stage) == doctest::Approx(bandwidth));  // 4 stages in flight: enough
  CHECK(in_flight_rate(spec, 128 * 3 * stage) < bandwidth);                    // 3 (4 stages): not
  CHECK(c.deepened.find("pipeline deepened to 5 stages of K 64") != std::string::npos);
  CHECK(dec.source.find("pipeline deepened to 5 stages of K 64") != std::string::npos);

  // The spec decides: without a loaded latency nothing limits the bytes in flight, and the plan
  // keeps 4 stages of 32.
  HwSpec no_latency = spec;
  for (MemoryLevel& l : no_latency.memory_levels) l.loaded_latency_ns = 0;
  CHECK(in_flight_rate(no_latency, 1.0) == doctest::Approx(bandwidth));
  const OpGraph g = gemm(DType::f16, 1, 28672, 8192, false, false);
  const cuda::GeneratedKernel flat = recorded_kernel(g, "mma", no_latency);
  REQUIRE(flat.contraction);
  CHECK(flat.contraction->stages == 4);
  CHECK(flat.contraction->block_k == 32);
  CHECK(flat.contraction->deepened.empty());

  // The model prices what the pipeline holds: the 5-stage plan below the 4-stage one of 32.
  const AnalyticCostModel cost;
  const Schedule priced = schedule_with(g, spec, "roller");
  ScheduledGroup deep = priced.groups[0].group, shallow = deep;
  deep.kernel = {"mma", cuda::contraction_params(c), {}};
  shallow.kernel = deep.kernel;
  shallow.kernel.params["block_k"] = 32;
  shallow.kernel.params["stages"] = 4;
  const CostBreakdown fast = cost.estimate(g, deep, spec), slow = cost.estimate(g, shallow, spec);
  CHECK(slow.latency_s > 1.3 * fast.latency_s);
  CHECK(std::any_of(slow.notes.begin(), slow.notes.end(), [](const std::string& n) { return n.find("Little's law") != std::string::npos; }));

  // Enough blocks in flight already: a 4096^3 GEMM's plan is not touched.
  const cuda::GeneratedKernel big = roller_kernel(gemm(DType::f16, 4096, 4096, 4096, false, false));
  REQUIRE(big.contraction);
  CHECK(big.contraction->deepened.empty());

  // A schedule recording the old plan (a schedule saved before, a tuner's variant) is emitted as
  // recorded, and its kernel does not claim the deepening.
  Schedule old_plan = priced;
  old_plan.groups[0].group.kernel = shallow.kernel;
  const cuda::GeneratedKernel replayed = emit_kernel(g, old_plan, 0, spec);
  REQUIRE(replayed.contraction);
  CHECK(replayed.contraction->stages == 4);
  CHECK(replayed.contraction->block_k == 32);
  CHECK(replayed.contraction->deepened.empty());
  CHECK(replayed.source.find("pipeline deepened") == std::string::npos);

  // An implicit GEMM (a convolution's gather) is neither deepened nor recorded deeper than 4
  // stages, nor listed so among the variants: that copier has not run deeper on a GPU.
  const OpGraph conv = conv_nhwc(DType::f16, {1, 14, 14, 64}, 64, 3, 1, 1, 1, false);
  const Schedule cs = schedule_with(conv, spec, "roller");
  const cuda::GeneratedKernel ck = emit_kernel(conv, cs, static_cast<int>(cs.groups.size()) - 1, spec);
  REQUIRE(ck.contraction);
  if (ck.path == "mma" && ck.contraction->implicit) {
    CHECK(ck.contraction->deepened.empty());
    CHECK(ck.contraction->stages <= 4);
    const cuda::CudaKernelFamilies families;
    ScheduledGroup deep_conv = cs.groups.back().group;
    deep_conv.kernel = {"mma", cuda::contraction_params(*ck.contraction), {}};
    for (const KernelChoice& v : families.variants(conv, deep_conv, spec))
      if (v.family == "mma" && v.params.at("split_k") == 1) CHECK(v.params.at("stages") <= 4);
    deep_conv.kernel.params["stages"] = 8;
    const std::optional<std::string> why = families.check(conv, deep_conv, spec);
    REQUIRE(why);
    CHECK(why->find("for an implicit GEMM") != std::string::npos);
  } else {
    FAIL("expected the 3x3 convolution on the mma.sync kernel as an implicit GEMM, got ", ck.path);
  }
}

TEST_CASE("cuda mma: K is split over a thread-block cluster when the tiles leave SMs idle") {
  // The decode GEMM (M = 16): 64 tiles of 16 x 64 for 132 SMs; K = 4096 is 64 tiles of 64 (a
  // split plan's K step), split in 2 parts: 128 blocks, one per SM (4 parts would be 256 blocks,
  // two parts on some SMs), through 8 stages.
  const cuda::GeneratedKernel dec = roller_kernel(gemm(DType::f16, 16, 4096, 4096, false, false));
  REQUIRE(dec.path == "mma");
  const cuda::ContractionPlan& c = *dec.contraction;
  CHECK(c.tiles() == 64);
  CHECK(c.split_k == 2);
  CHECK(c.block_k == 64);
  CHECK(c.stages == 8);
  CHECK(c.split_reason.empty());
  CHECK(dec.plan.blocks == 64 * 2);
  CHECK(dec.plan.num_tiles == 64);
  CHECK(dec.plan.cluster_blocks == 2);
  CHECK(c.smem_bytes >= int64_t{c.block_m} * c.block_n * 4);  // the f32 partial tile fits the pipeline's memory
  CHECK(c.smem_bytes <= gpu_spec().limits.smem_per_sm_bytes / 2);  // two blocks could share an SM
  CHECK(dec.source.find("__cluster_dims__(2, 1, 1)") != std::string::npos);
  CHECK(dec.source.find("tsl_gemm.reduce_cluster<2>(tsl_smem)") != std::string::npos);
  CHECK(dec.source.find("tsl_kt0 = tsl_part * 64 / 2") != std::string::npos);
  CHECK(dec.source.find("K's 64 tiles split in 2 parts over a cluster") != std::string::npos);
  // More tiles than half the SMs (16 x 6400: 100 tiles of 16 x 64): two parts would put two
  // blocks on some SMs, so K is not split, and the plan says why.
  const cuda::GeneratedKernel half = roller_kernel(gemm(DType::f16, 16, 4096, 6400, false, false));
  REQUIRE(half.contraction);
  CHECK(half.contraction->tiles() == 100);
  CHECK(half.contraction->split_k == 1);
  CHECK(half.contraction->split_reason.find("100 tiles in 2 parts exceed the 132 blocks the SMs run at once") != std::string::npos);

  // Fewer: a part has at least `stages` K tiles (K = 256: 8 tiles, 2 parts of 4).
  const cuda::GeneratedKernel shortk = roller_kernel(matmul(DType::f16, 16, 256, 128));
  REQUIRE(shortk.path == "mma");
  CHECK(shortk.contraction->split_k == 2);
  CHECK(shortk.plan.blocks == shortk.contraction->tiles() * 2);

  // Not split, and why: too short a K; tiles enough for the SMs; no clusters in the spec; an
  // implicit GEMM.
  const cuda::GeneratedKernel tiny = roller_kernel(matmul(DType::f16, 16, 64, 128));
  CHECK(tiny.contraction->split_k == 1);
  CHECK(tiny.contraction->split_reason.find("too few for two parts") != std::string::npos);
  CHECK(tiny.source.find("K not split: ") != std::string::npos);
  CHECK(tiny.source.find("__cluster_dims__") == std::string::npos);
  const cuda::GeneratedKernel wide = roller_kernel(matmul(DType::f16, 4096, 4096, 120));
  CHECK(wide.contraction->tiles() >= gpu_spec().compute.units);
  CHECK(wide.contraction->split_k == 1);
  CHECK(wide.contraction->split_reason.empty());
  const OpGraph g = gemm(DType::f16, 16, 4096, 4096, false, false);
  const HwSpec& a100 = gpu_spec("nvidia-a100-sxm-80g");
  const cuda::GeneratedKernel old = emit_kernel(g, schedule_with(g, a100, "roller"), 0, a100);
  CHECK(old.contraction->split_k == 1);
  CHECK(old.contraction->split_reason.find("no thread-block clusters") != std::string::npos);
  CHECK(old.plan.cluster_blocks == 1);
  const cuda::GeneratedKernel conv = roller_kernel(conv_nhwc(DType::f16, {1, 5, 6, 64}, 16, 3, 1, 1, 1, false));
  REQUIRE(conv.contraction);
  CHECK(conv.contraction->implicit);
  CHECK(conv.contraction->split_reason.find("implicit GEMM") != std::string::npos);
}

TEST_CASE("cuda mma: groups outside the path keep the generic kernel and say why") {
  auto reason = [](const OpGraph& g, const std::string& policy = "roller") {
    const cuda::GeneratedKernel k = last_kernel(g, policy);
    CHECK(k.path == "generic");
    CHECK(k.source.find("tiled contraction kernel not used: " + k.mma_reason) != std::string::npos);
    return k.mma_reason;
  };
  CHECK(reason(matmul(DType::i32, 16, 32, 16)).find("i32") != std::string::npos);
  {  // Softmax is not a contraction: it takes the row path (cuda_row_test.cpp), saying why not mma.
    const cuda::GeneratedKernel sm = last_kernel(op_graph("Softmax", {random_f32({7, 33}, 1)}, {{"axis", int64_t{-1}}}), "welder");
    CHECK(sm.path == "row");
    CHECK(sm.mma_reason.find("more than one reducing node") != std::string::npos);
  }
  // (An f32 channels-last convolution takes the simt family; this one is NCHW.)
  CHECK(reason(op_graph("Conv", {random_f32({1, 3, 9, 9}, 1), random_f32({4, 3, 3, 3}, 2)})).find("channels-last") != std::string::npos);
  {  // An NCHW convolution reads its input's channels strided: no 16-byte chunks along k.
    ModelBuilder b(DType::f16);
    const std::string y = b.op("Conv", {b.input("x", {1, 16, 9, 9}), b.weight("w", {8, 16, 3, 3}, 1)});
    CHECK(reason(b.graph(y)).find("is not channels-last") != std::string::npos);
  }
  // NHWC with 12 channels: a 16-byte chunk would straddle two pixels.
  CHECK(reason(conv_nhwc(DType::f16, {1, 6, 6, 12}, 8, 3, 1, 1, 1, false)).find("not a multiple of 8") != std::string::npos);
  // The spec decides: no m16n8k16 shape for f16 in the spec, no tensor-core path.
  HwSpec old = gpu_spec();
  old.compute.tensor_core_shapes.erase(DType::f16);
  const OpGraph g = matmul(DType::f16, 64, 64, 64);
  const Schedule s = schedule_with(g, old, "roller");
  CHECK(emit_kernel(g, s, 0, old).path == "generic");
}

/// f32 products (the simt family: the mma pipeline with fused multiply-adds on the CUDA cores):
/// odd sizes and unaligned rows, both operand layouts, batches, folded batch axes, epilogues, and
/// a 1x1 convolution planned as a product.
namespace {
std::vector<MmaCase> simt_cases() {
  std::vector<MmaCase> out;
  auto add = [&](std::string name, OpGraph g) { out.push_back({std::move(name), std::move(g)}); };
  add("f32 matmul 256x512x384", matmul(DType::f32, 256, 512, 384));
  add("f32 matmul odd 127x61x97", matmul(DType::f32, 127, 61, 97));
  add("f32 gemm transA 130x72x66", gemm(DType::f32, 130, 72, 66, true, false));
  add("f32 gemm transB 64x40x200", gemm(DType::f32, 64, 40, 200, false, true));
  add("f32 gemm transA transB 33x20x40", gemm(DType::f32, 33, 20, 40, true, true));
  add("f32 batched 3x70x48 @ 3x48x90", batched(DType::f32, {3, 70, 48}, {3, 48, 90}));
  add("f32 folded batch 2x50x72 @ 72x136", batched(DType::f32, {2, 50, 72}, {72, 136}));
  add("f32 bias gelu 96x128x200", bias_gelu(DType::f32, 96, 128, 200));
  add("f32 1x1 conv NHWC", conv_nhwc(DType::f32, {2, 7, 7, 24}, 40, 1, 1, 0, 1, false));
  add("f32 3x3 conv NHWC + epilogue", conv_nhwc(DType::f32, {2, 9, 9, 16}, 24, 3, 1, 1, 1, true));
  add("f32 3x3 conv stride 2", conv_nhwc(DType::f32, {1, 14, 14, 32}, 64, 3, 2, 1, 1, false));
  add("f32 3x3 conv dilation 2", conv_nhwc(DType::f32, {1, 11, 11, 8}, 8, 3, 1, 2, 2, false));
  add("f32 grouped 3x3 conv", conv_nhwc(DType::f32, {1, 8, 8, 64}, 64, 3, 1, 1, 1, false, 4));
  // Few rows: 16 x 128 and 32 x 64 warp tiles, K split over a cluster (a decoding step's tokens
  // against a Linear weight; odd rows read 4 bytes at a time).
  add("f32 decode 16x2048 @ (4096x2048)^T, K split", gemm(DType::f32, 16, 2048, 4096, false, true));
  add("f32 skinny 24x300 @ 300x200", gemm(DType::f32, 24, 300, 200, false, false));
  add("f32 odd 13x2999x130, K split", matmul(DType::f32, 13, 2999, 130));
  return out;
}
}  // namespace

TEST_CASE("cuda mma: f32 products take the simt family (CUDA cores), planned, recorded, priced and compiled") {
  const HwSpec& spec = gpu_spec();
  const AnalyticCostModel cost;
  for (const MmaCase& c : simt_cases()) {
    INFO(c.name);
    const Schedule s = with_families(c.graph, spec, "welder");
    int simt = 0;
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) {
      const ScheduledGroup& g = s.groups[i].group;
      if (g.kernel.family != "simt") continue;
      ++simt;
      const cuda::GeneratedKernel k = emit_kernel(c.graph, s, i, spec);
      CHECK(k.path == "simt");
      CHECK(k.source.find("typedef tsl::mma::SimtBlockGemm<") != std::string::npos);
      REQUIRE(k.contraction.has_value());
      CHECK(k.contraction->simt);
      // Warp tiles of the fewest rows that cover m (16, 32 or 64), 8 x 8 outputs a lane.
      const cuda::ContractionPlan& p = *k.contraction;
      const int64_t warp_rows = p.block_m / p.warps_m, warp_cols = p.block_n / p.warps_n;
      CHECK(warp_rows == (p.m <= 16 ? 16 : p.m <= 32 ? 32 : 64));
      CHECK(warp_rows * warp_cols == 64 * spec.compute.simd_width);
      // K is split where the tiles leave SMs idle and K is long enough (the decode-shaped cases).
      if (p.k >= 2048 && !p.implicit) {
        CHECK(p.tiles() < spec.compute.units);
        CHECK(p.split_k > 1);
        CHECK(k.source.find("reduce_cluster<") != std::string::npos);
      }
      // Priced at the f32 peak on the CUDA cores: no faster than the FLOPs at that peak.
      const CostBreakdown b = cost.estimate(c.graph, g, spec);
      CHECK_FALSE(b.tensor_cores);
      double flops = 0;
      for (NodeId n : g.nodes) flops += static_cast<double>(c.graph.node(n).flops());
      CHECK(b.latency_s >= flops / spec.peak_flops(DType::f32, false));
    }
    std::string families;  // (for a failure: each group's family and the reasons it did not take the others)
    for (const auto& sg : s.groups) {
      families += sg.group.kernel.family + " [";
      for (const std::string& why : sg.group.kernel.rejected) families += why + "; ";
      families += "] ";
    }
    INFO(families);
    CHECK(simt >= 1);
    CHECK(nvrtc_compile_all(c.graph, s, spec) >= 1);
  }
  // An NCHW f32 convolution (the normalize stage is not run here) keeps the generic kernel, and says why.
  const cuda::GeneratedKernel conv = last_kernel(op_graph("Conv", {random_f32({1, 3, 9, 9}, 1), random_f32({4, 3, 3, 3}, 2)}), "roller");
  CHECK(conv.path == "generic");
  CHECK(conv.mma_reason.find("channels-last") != std::string::npos);
}

TEST_CASE("cuda mma run: f32 products on the CUDA cores (simt) match the interpreter") { check_cases_on_gpu(simt_cases()); }

TEST_CASE("cuda mma run: the simt variants a tuner measures (warp tiles per block, k slices) are recorded, compile and match the interpreter") {
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  const bool gpu = !find_backend("cuda")->unavailable();
  const std::vector<MmaCase> cases = {{"f32 decode 16x2048 @ (1024x2048)^T", gemm(DType::f32, 16, 2048, 1024, false, true)},
                                      {"f32 odd 127x61x97", matmul(DType::f32, 127, 61, 97)},
                                      {"f32 3x3 conv NHWC + epilogue", conv_nhwc(DType::f32, {2, 9, 9, 16}, 24, 3, 1, 1, 1, true)}};
  for (const MmaCase& c : cases) {
    INFO(c.name);
    const Schedule s = schedule_with(c.graph, spec, "welder");
    const int gi = contraction_group(c.graph, s);
    const std::vector<KernelChoice> variants = families.variants(c.graph, s.groups[gi].group, spec);
    std::set<int64_t> slices, shapes;
    for (const KernelChoice& k : variants) {
      CHECK(k.family == "simt");
      const auto it = k.params.find("k_slices");
      slices.insert(it == k.params.end() ? 1 : it->second);
      Schedule v = s;
      v.groups[gi].group.kernel = k;
      // The recorded slices are the kernel's: the emitted SimtBlockGemm ends in them.
      const cuda::GeneratedKernel g = emit_kernel(c.graph, v, gi, spec);
      REQUIRE(g.contraction.has_value());
      CHECK(g.contraction->k_slices == (it == k.params.end() ? 1 : it->second));
      CHECK(g.contraction->warps_m == k.params.at("warps_m"));
      CHECK(g.contraction->warps_n == k.params.at("warps_n"));
      shapes.insert(k.params.at("warps_m") * 10 + k.params.at("warps_n"));
      CHECK(g.source.find(cat(", ", g.contraction->k_slices, ">")) != std::string::npos);
      if (gpu) check_schedule_on_gpu(c.graph, spec, v, {}, 11);
      else CHECK(nvrtc_compile_all(c.graph, v, spec) >= 1);
    }
    CHECK(slices == std::set<int64_t>{1, 2, 4});
    CHECK(shapes.size() >= 3);  // (1 or 2 warp tiles along m by 1, 2 or 4 along n, where the problem has them)
  }
}

TEST_CASE("cuda mma: rows that do not start 16-byte aligned are read in narrower pieces on mma.sync, recorded and priced") {
  const HwSpec& spec = gpu_spec();
  struct Want {
    OpGraph g;
    int64_t a_align, b_align;  // 8: not recorded
  };
  const std::vector<Want> wants = {{matmul(DType::f16, 17, 17, 24), 1, 8},
                                   {matmul(DType::f16, 33, 36, 20), 4, 4},
                                   {matmul(DType::bf16, 40, 18, 30), 2, 2},
                                   {batched(DType::f16, {144, 24}, {4, 24, 49}), 8, 1},
                                   {matmul(DType::f16, 64, 64, 64), 8, 8}};
  for (const Want& w : wants) {
    const Schedule s = with_families(w.g, spec, "roller");
    const ScheduledGroup& group = s.groups.back().group;
    INFO(group.kernel.family);
    REQUIRE(group.kernel.family == "mma");
    auto recorded = [&](const char* key) {
      auto it = group.kernel.params.find(key);
      return it == group.kernel.params.end() ? int64_t{8} : it->second;
    };
    CHECK(recorded("a_align") == w.a_align);
    CHECK(recorded("b_align") == w.b_align);
    const cuda::GeneratedKernel k = emit_kernel(w.g, s, static_cast<int>(s.groups.size()) - 1, spec);
    CHECK(k.path == "mma");
    if (w.a_align < 8 || w.b_align < 8) {
      CHECK(k.source.find(cat(w.a_align, ", ", w.b_align, ">")) != std::string::npos);
      // The narrow reads' issues are priced: a 16-byte-aligned twin predicts no more time.
      const AnalyticCostModel model;
      ScheduledGroup aligned = group;
      aligned.kernel.params.erase("a_align");
      aligned.kernel.params.erase("b_align");
      CHECK(model.estimate(w.g, aligned, spec).term("compute") < model.estimate(w.g, group, spec).term("compute"));
    }
  }
  // The wgmma kernel's tensor maps need 16-byte strides: B's rows 196 apart keep mma.sync; so does
  // A read from column 4 of rows 72 apart (a slice: rows aligned, their start not).
  const OpGraph g = batched(DType::f16, {256, 1024}, {32, 1024, 196});
  const Schedule s = with_families(g, spec, "welder");
  const cuda::GeneratedKernel k = emit_kernel(g, s, static_cast<int>(s.groups.size()) - 1, spec);
  CHECK(k.path == "mma");
  REQUIRE(k.contraction);
  CHECK(k.contraction->warpgroup_reason.find("16-byte aligned") != std::string::npos);
  ModelBuilder b(DType::f16);
  const std::string a = b.op("Slice", {b.input("x", {256, 72}), b.weight_i64("starts", {4}), b.weight_i64("ends", {68}), b.weight_i64("axes", {1})});
  const OpGraph sliced = b.graph(b.op("MatMul", {a, b.weight("w", {64, 256}, 3)}));
  const Schedule ss = with_families(sliced, spec, "welder");
  const cuda::GeneratedKernel sk = emit_kernel(sliced, ss, static_cast<int>(ss.groups.size()) - 1, spec);
  CHECK(sk.path == "mma");
  REQUIRE(sk.contraction);
  CHECK(sk.contraction->a.align == 4);
  CHECK(sk.contraction->warpgroup_reason.find("start are not multiples of 16 bytes") != std::string::npos);
  CHECK(nvrtc_compile_all(sliced, ss, spec) >= 1);
}

TEST_CASE("cuda mma: kernels of every case compile with NVRTC for sm_90a (welder and roller)") {
  const HwSpec& spec = gpu_spec();
  for (const MmaCase& c : mma_cases())
    for (const std::string policy : {"welder", "roller"}) {
      INFO(c.name, " (", policy, ")");
      const Schedule s = schedule_with(c.graph, spec, policy);
      CHECK(mma_kernels(c.graph, s, spec) >= 1);
      CHECK(nvrtc_compile_all(c.graph, s, spec) >= 1);
      if (c.name.rfind("split K", 0) == 0) {  // these cases are there to split
        bool split = false;
        for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) split |= emit_kernel(c.graph, s, i, spec).plan.cluster_blocks > 1;
        CHECK(split);
      }
    }
}

TEST_CASE("cuda mma run: the tensor-core variants a tuner measures compile and match the interpreter") {
  // Every recorded parameter set of the families is emitted as recorded (plan_contraction's step
  // 7). A sample of each graph's variants -- always an implicit GEMM whose 16 x 32 A tile has
  // fewer 16-byte chunks than the block has threads, whose surplus threads once zero-filled the
  // rows after the tile -- compiles with NVRTC here, and runs against the interpreter on a GPU.
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  const bool gpu = find_backend("cuda")->unavailable() == std::nullopt;
  const std::vector<MmaCase> cases = {{"matmul 200x256x392", matmul(DType::f16, 200, 256, 392)},
                                      {"conv 1x1 stride 2 NHWC 96 -> 160", conv_nhwc(DType::f16, {2, 27, 27, 96}, 160, 1, 2, 0, 1)}};
  int small_tiles = 0;
  for (const MmaCase& c : cases) {
    const Schedule s = schedule_with(c.graph, spec, "welder");
    const int gi = contraction_group(c.graph, s);
    const std::vector<KernelChoice> variants = families.variants(c.graph, s.groups[gi].group, spec);
    REQUIRE(variants.size() > 10);
    int tried = 0;
    for (size_t i = 0; i < variants.size(); ++i) {
      const KernelChoice& k = variants[i];
      const bool small_tile = k.params.at("implicit") && k.params.at("block_m") == 16 && k.params.at("block_k") == 32 &&
                              k.params.at("warps_n") == 4;
      small_tiles += small_tile ? 1 : 0;
      if (!small_tile && i % (gpu ? 10 : 16) != 0) continue;
      ++tried;
      Schedule v = s;
      v.groups[gi].group.kernel = k;
      std::string params;
      for (const auto& [name, value] : k.params) params += cat(" ", name, "=", value);
      INFO(c.name, ": ", k.family, params);
      if (!gpu) {
        CHECK(nvrtc_compile_all(c.graph, v, spec) >= 1);
        continue;
      }
      check_schedule_on_gpu(c.graph, spec, v, {}, 5);
    }
    CHECK(tried >= 3);
  }
  CHECK(small_tiles >= 1);  // (the conv's implicit GEMM has the 16 x 32 A tile among its variants)
}

namespace {

/// Welder's schedule of `g` with its contraction group's kernel replaced by the first wgmma
/// variant `pick` accepts; that group's index in `gi`. Fails the test when there is none.
Schedule with_wgmma_variant(const OpGraph& g, const std::function<bool(const KernelChoice&)>& pick, int& gi) {
  const cuda::CudaKernelFamilies families;
  Schedule s = schedule_with(g, gpu_spec(), "welder");
  gi = contraction_group(g, s);
  const std::vector<KernelChoice> variants = families.variants(g, s.groups[gi].group, gpu_spec());
  auto it = std::find_if(variants.begin(), variants.end(), [&](const KernelChoice& k) { return k.family == "wgmma" && pick(k); });
  REQUIRE(it != variants.end());
  s.groups[gi].group.kernel = *it;
  return s;
}

/// Runs `s` on the GPU when there is one (check_schedule_on_gpu).
void check_forced_on_gpu(const OpGraph& g, const Schedule& s) {
  if (find_backend("cuda")->unavailable()) return;
  check_schedule_on_gpu(g, gpu_spec(), s, {}, 7);
}

int64_t param_or(const KernelChoice& k, const char* name, int64_t fallback) {
  auto it = k.params.find(name);
  return it == k.params.end() ? fallback : it->second;
}

}  // namespace

TEST_CASE("cuda mma run: the ping-pong wgmma kernel (consumers on tiles of their own, taking turns) matches the interpreter") {
  // Welder's schedule with the wgmma group's recorded parameters changed to the ping-pong form:
  // 288 tiles over 132 blocks (two or three per block, so consumer 0 has a second turn; edges of N
  // and K), bf16 with B stored N x K and K = 64 (one K tile per tile: the turns come every stage
  // round), an epilogue with 153 tiles (most blocks have one tile and an idle consumer 1), and a
  // batched product (144 tiles: each consumer's tile has its own batch point).
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  const std::vector<MmaCase> cases = {{"matmul 4096x1096x136", matmul(DType::f16, 4096, 136, 1096)},
                                      {"bf16 gemm transB 2300x64x4000", gemm(DType::bf16, 2300, 64, 4000, false, true)},
                                      {"bias gelu 1100x200x2104", bias_gelu(DType::f16, 1100, 200, 2104)},
                                      {"batched 2x8 384x64x384", batched(DType::f16, {2, 8, 384, 64}, {2, 8, 64, 384})}};
  for (const MmaCase& c : cases) {
    INFO(c.name);
    int gi = -1;
    const Schedule s = with_wgmma_variant(c.graph, [](const KernelChoice& k) { return param_or(k, "pingpong", 0) == 1; }, gi);
    const cuda::GeneratedKernel k = emit_kernel(c.graph, s, gi, spec);
    REQUIRE(k.path == "wgmma");
    CHECK(k.contraction->pingpong);
    CHECK(k.contraction->block_n == 128);
    CHECK(k.plan.blocks == spec.compute.units);
    CHECK(k.source.find("tsl::wg::WarpgroupPingpong<") != std::string::npos);
    CHECK(nvrtc_compile_all(c.graph, s, spec) >= 1);
    // Ping-pong needs the persistent grid's 128-wide tiles: recorded otherwise, it is refused.
    ScheduledGroup g = s.groups[gi].group;
    g.kernel.params["block_n"] = 256;
    g.kernel.params["stages"] = 4;
    const std::optional<std::string> why = families.check(c.graph, g, spec);
    REQUIRE(why.has_value());
    INFO(*why);
    CHECK(why->find("ping-pong") != std::string::npos);
    check_forced_on_gpu(c.graph, s);
  }
}

TEST_CASE("cuda mma run: the wgmma kernel with B shared by a cluster of two blocks (TMA multicast) matches the interpreter") {
  // The persistent grid in clusters of two blocks computing consecutive m tiles of the same
  // columns, each copying half of every stage's B into both: B stored K x N (a box of 64 columns
  // each, 128-wide tiles), B stored N x K in bf16 (boxes of 128 of the 256 rows; 17 m tiles, so
  // the last cluster's second block is past M), and an epilogue (9 m tiles).
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  struct Forced {
    MmaCase c;
    int64_t block_n;
  };
  const std::vector<Forced> cases = {{{"matmul 4096x1096x136", matmul(DType::f16, 4096, 136, 1096)}, 128},
                                     {{"bf16 gemm transB 2100x64x4000", gemm(DType::bf16, 2100, 64, 4000, false, true)}, 256},
                                     {{"bias gelu 1100x200x2104", bias_gelu(DType::f16, 1100, 200, 2104)}, 128}};
  for (const Forced& f : cases) {
    INFO(f.c.name);
    int gi = -1;
    const Schedule s = with_wgmma_variant(
        f.c.graph, [&](const KernelChoice& k) { return param_or(k, "cluster_m", 1) == 2 && k.params.at("block_n") == f.block_n; }, gi);
    const cuda::GeneratedKernel k = emit_kernel(f.c.graph, s, gi, spec);
    REQUIRE(k.path == "wgmma");
    CHECK(k.contraction->cluster_m == 2);
    CHECK(k.plan.cluster_blocks == 2);
    CHECK(k.plan.blocks % 2 == 0);
    CHECK(k.source.find(cat("tsl::wg::WarpgroupGemm<128, ", f.block_n, ", ")) != std::string::npos);
    CHECK(k.source.find(", 1, 2> TslGemm;") != std::string::npos);
    if (k.contraction->b.k_contiguous) CHECK(k.plan.tensor_maps[1].box_rows == f.block_n / 2);
    CHECK(nvrtc_compile_all(f.c.graph, s, spec) >= 1);
    // Sharing B needs the persistent grid: recorded with one block per tile, it is refused.
    ScheduledGroup g = s.groups[gi].group;
    g.kernel.params.erase("persistent");
    const std::optional<std::string> why = families.check(f.c.graph, g, spec);
    REQUIRE(why.has_value());
    CHECK(why->find("B shared by a cluster") != std::string::npos);
    check_forced_on_gpu(f.c.graph, s);
  }
}

TEST_CASE("cuda mma run: the wgmma kernel's K split over a cluster matches the interpreter") {
  // Few tiles and a long K (ViT-L's FFN down projection at 197 tokens: 16 tiles of 128 x 128,
  // 64 K tiles): the default plan splits K in 4, the most the wgmma kernel takes; forced variants
  // split 2 and 4 ways with 256-wide tiles and B stored N x K in bf16 (K = 1000: a K tail in the
  // last part), and with an epilogue.
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  {
    const OpGraph g = matmul(DType::f16, 197, 4096, 1024);
    const Schedule s = schedule_with(g, spec, "roller");
    ScheduledGroup plain = s.groups[0].group;
    plain.kernel = {};
    const KernelChoice chosen = families.choose(g, plain, spec);
    REQUIRE(chosen.family == "wgmma");
    CHECK(chosen.params.at("split_k") == 4);
    CHECK(param_or(chosen, "persistent", 0) == 0);
  }
  struct Forced {
    MmaCase c;
    int64_t split, block_n;
  };
  const std::vector<Forced> cases = {{{"matmul 197x4096x1024", matmul(DType::f16, 197, 4096, 1024)}, 4, 128},
                                     {{"bf16 gemm transB 300x1000x520", gemm(DType::bf16, 300, 1000, 520, false, true)}, 2, 256},
                                     {{"bias gelu 129x2048x384", bias_gelu(DType::f16, 129, 2048, 384)}, 4, 128}};
  for (const Forced& f : cases) {
    INFO(f.c.name);
    int gi = -1;
    const Schedule s = with_wgmma_variant(
        f.c.graph, [&](const KernelChoice& k) { return k.params.at("split_k") == f.split && k.params.at("block_n") == f.block_n; }, gi);
    const cuda::GeneratedKernel k = emit_kernel(f.c.graph, s, gi, spec);
    REQUIRE(k.path == "wgmma");
    CHECK(k.contraction->split_k == f.split);
    CHECK(k.plan.cluster_blocks == f.split);
    CHECK(k.plan.blocks == k.contraction->tiles() * f.split);
    CHECK(k.source.find(cat("tsl::wg::WarpgroupGemm<128, ", f.block_n, ", ")) != std::string::npos);
    CHECK(nvrtc_compile_all(f.c.graph, s, spec) >= 1);
    // A split runs one cluster per tile: recorded with the persistent grid, it is refused.
    ScheduledGroup g = s.groups[gi].group;
    g.kernel.params["persistent"] = 1;
    const std::optional<std::string> why = families.check(f.c.graph, g, spec);
    REQUIRE(why.has_value());
    CHECK(why->find("one cluster per tile") != std::string::npos);
    check_forced_on_gpu(f.c.graph, s);
  }
}

TEST_CASE("cuda mma run: 192-wide wgmma tiles (m64n192k16) in every form match the interpreter") {
  // The third wgmma width (contraction_plan.cpp, kWgBlockNMid): each consumer's 64 x 192
  // accumulators, B in three 64-column boxes (stored K x N) or one 192-row box (N x K), the
  // epilogue through a whole slab and half of one. Recorded (a tuner may record any legal width;
  // the variants offer 192 only where it pays): the persistent grid with an N tail (1096 = 5 x 192
  // + 136), one block per tile with a bias and GELU, bf16 B stored N x K shared by a cluster
  // (96-row boxes), K split in 2 and 4 (12 and 6 column groups per rank), a batched product, rows
  // of C that do not start 16 bytes aligned (N = 1001: the epilogue's one-column reads), and a
  // box-tiled convolution to 384 channels.
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  struct Forced {
    MmaCase c;
    std::function<bool(const KernelChoice&)> pick;  // the variant whose form is kept, at width 192
  };
  auto any = [](const KernelChoice&) { return true; };
  const std::vector<Forced> cases = {
      {{"matmul 4096x136x1096 persistent", matmul(DType::f16, 4096, 136, 1096)},
       [](const KernelChoice& k) { return param_or(k, "persistent", 0) == 1 && param_or(k, "cluster_m", 1) == 1 && param_or(k, "pingpong", 0) == 0; }},
      {{"bias gelu 1100x200x2104 one block a tile", bias_gelu(DType::f16, 1100, 200, 2104)},
       [](const KernelChoice& k) { return param_or(k, "persistent", 0) == 0 && k.params.at("split_k") == 1; }},
      {{"bf16 gemm transB 2100x64x4000 cluster", gemm(DType::bf16, 2100, 64, 4000, false, true)},
       [](const KernelChoice& k) { return param_or(k, "cluster_m", 1) == 2; }},
      {{"bf16 gemm transB 300x1000x520 split 2", gemm(DType::bf16, 300, 1000, 520, false, true)},
       [](const KernelChoice& k) { return k.params.at("split_k") == 2; }},
      {{"bias gelu 129x2048x384 split 4", bias_gelu(DType::f16, 129, 2048, 384)},
       [](const KernelChoice& k) { return k.params.at("split_k") == 4; }},
      {{"batched 2x8 384x64x384", batched(DType::f16, {2, 8, 384, 64}, {2, 8, 64, 384})}, any},
      {{"gemm transB 1000x128x1001 unaligned rows", gemm(DType::f16, 1000, 128, 1001, false, true)}, any},
      {{"conv 3x3 NHWC 64 -> 384", conv_nhwc(DType::f16, {8, 14, 14, 64}, 384, 3, 1, 1, 1)}, any}};
  for (const Forced& f : cases) {
    INFO(f.c.name);
    int gi = -1;
    Schedule s = with_wgmma_variant(f.c.graph, [&](const KernelChoice& k) { return param_or(k, "pingpong", 0) == 0 && f.pick(k); }, gi);
    KernelChoice& kc = s.groups[gi].group.kernel;
    kc.params["block_n"] = 192;
    kc.params["stages"] = std::min<int64_t>(kc.params.at("stages"), 4);
    REQUIRE_FALSE(families.check(f.c.graph, s.groups[gi].group, spec));
    const cuda::GeneratedKernel k = emit_kernel(f.c.graph, s, gi, spec);
    REQUIRE(k.path == "wgmma");
    CHECK(k.contraction->block_n == 192);
    CHECK(k.source.find("tsl::wg::WarpgroupGemm<128, 192, ") != std::string::npos);
    CHECK(k.contraction->smem_bytes <= spec.limits.smem_per_block_bytes);
    CHECK(nvrtc_compile_all(f.c.graph, s, spec) >= 1);
    check_forced_on_gpu(f.c.graph, s);
  }
  // Recorded 192-wide forms that cannot be emitted are refused with the reason: the variant `pick`
  // finds, at block_n 192 and `stages`, gives a check whose text holds `why`.
  auto refused = [&](const OpGraph& g, const std::function<bool(const KernelChoice&)>& pick, int64_t stages, const std::string& why) {
    int gi = -1;
    Schedule s = with_wgmma_variant(g, pick, gi);
    s.groups[gi].group.kernel.params["block_n"] = 192;
    s.groups[gi].group.kernel.params["stages"] = stages;
    const std::optional<std::string> reason = families.check(g, s.groups[gi].group, spec);
    INFO(why);
    REQUIRE(reason.has_value());
    CHECK(reason->find(why) != std::string::npos);
    return s.groups[gi].group;
  };
  // Five stages of 128 + 192 rows and the two slabs exceed the shared memory a block may take.
  refused(matmul(DType::f16, 4096, 136, 1096), [](const KernelChoice& k) { return param_or(k, "pingpong", 0) == 0; }, 5, "5 wgmma stages");
  // A split parks 96 KB of partial sums in the stages: two stages (80 KB) are refused as a user's
  // record, not left to the device code's static_assert; three are taken.
  {
    const OpGraph g = bias_gelu(DType::f16, 129, 2048, 384);
    ScheduledGroup two = refused(g, [](const KernelChoice& k) { return k.params.at("split_k") == 2; }, 2, "bytes of partial sums");
    two.kernel.params["stages"] = 3;
    CHECK_FALSE(families.check(g, two, spec));
  }
  // B stored K x N is three 64-column boxes a tile: two blocks of a cluster cannot copy half each.
  refused(matmul(DType::f16, 4096, 136, 1096), [](const KernelChoice& k) { return param_or(k, "cluster_m", 1) == 2; }, 4,
          "whole 64-column boxes");
  // Where it pays, the planner takes it: BERT's FFN at 1024 tokens is 128 tiles of 192, one wave on
  // 132 SMs (192 of 128 take two). Not offered where the waves tie (4096 x 1096: 384 columns of time
  // either way), nor where one wave of 128-wide tiles covers N (129 x 384, which the planner
  // splits), nor without the spec's m64n192k16.
  const OpGraph ffn = bias_gelu(DType::f16, 1024, 768, 3072);
  CHECK(emit_kernel(ffn, schedule_with(ffn, spec, "roller"), 0, spec).contraction->block_n == 192);
  for (const OpGraph& g : {matmul(DType::f16, 4096, 136, 1096), bias_gelu(DType::f16, 129, 2048, 384)}) {
    const Schedule s = schedule_with(g, spec, "welder");
    for (const ScheduleGroup& sg : s.groups) {
      if (sg.group.kernel.family != "wgmma") continue;
      for (const KernelChoice& k : families.variants(g, sg.group, spec))
        CHECK_FALSE((k.family == "wgmma" && k.params.at("block_n") == 192));
    }
  }
  HwSpec two = spec;
  for (DType t : {DType::f16, DType::bf16}) {
    auto& shapes = two.compute.tensor_core_shapes[t];
    shapes.erase(std::remove_if(shapes.begin(), shapes.end(), [](const MmaShape& m) { return m.m == 64 && m.n == 192; }), shapes.end());
  }
  CHECK(emit_kernel(ffn, schedule_with(ffn, two, "roller"), 0, two).contraction->block_n != 192);
}

TEST_CASE("cuda mma run: 64-row wgmma blocks (one consumer warpgroup) in every form match the interpreter") {
  // GEMMs whose 128 x 128 tiles are fewer than the SMs get 64-row blocks among their variants, one
  // block a tile in one wave: 64 to 256 wide, K split in 2 and 4, batched, rows of C that do not
  // start 16 bytes aligned, bf16 with B stored N x K or K x N, and a box-tiled convolution (boxes
  // of 64 output points). Recorded by hand (the variants do not offer them: they ran slower), the
  // persistent grid and a cluster sharing B.
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  struct Forced {
    MmaCase c;
    int64_t block_n;
    std::function<bool(const KernelChoice&)> pick;  // among the 64-row variants
    std::map<std::string, int64_t> edits;           // then recorded so
  };
  auto width = [](int64_t bn) { return [bn](const KernelChoice& k) { return k.params.at("block_n") == bn && k.params.at("split_k") == 1; }; };
  const std::vector<Forced> cases = {
      {{"matmul 512x768x768 64x64", matmul(DType::f16, 512, 768, 768)}, 64, width(64), {}},
      {{"bias gelu 1100x264x1000 64x128 persistent", bias_gelu(DType::f16, 1100, 264, 1000)}, 128, width(256),
       {{"block_n", 128}, {"persistent", 1}}},
      {{"matmul 1100x200x1000 64x128 cluster", matmul(DType::f16, 1100, 200, 1000)}, 128, width(256),
       {{"block_n", 128}, {"persistent", 1}, {"cluster_m", 2}}},
      {{"bias gelu 200x520x1000 64x128 split 2", bias_gelu(DType::f16, 200, 520, 1000)}, 128,
       [](const KernelChoice& k) { return k.params.at("block_n") == 128 && k.params.at("split_k") == 2; }, {}},
      {{"bf16 gemm transB 300x520x1000 64x256 split 4", gemm(DType::bf16, 300, 520, 1000, false, true)}, 256,
       [](const KernelChoice& k) { return k.params.at("block_n") == 256 && k.params.at("split_k") == 4; }, {}},
      {{"bf16 gemm 130x1096x136 64x64 split 4", gemm(DType::bf16, 130, 1096, 136, false, false)}, 64,
       [](const KernelChoice& k) { return k.params.at("block_n") == 64 && k.params.at("split_k") == 4; }, {}},
      {{"bias gelu 200x520x1000 64x192 (not offered)", bias_gelu(DType::f16, 200, 520, 1000)}, 192, width(128), {{"block_n", 192}}},
      {{"batched 2x4 200x64x384", batched(DType::f16, {2, 4, 200, 64}, {2, 4, 64, 384})}, 128, width(128), {}},
      {{"gemm transB 300x128x1001 unaligned rows", gemm(DType::f16, 300, 128, 1001, false, true)}, 64, width(64), {}},
      {{"conv 3x3 NHWC 64 -> 256", conv_nhwc(DType::f16, {2, 14, 14, 64}, 256, 3, 1, 1, 1)}, 128, width(128), {}}};
  for (const Forced& f : cases) {
    INFO(f.c.name);
    int gi = -1;
    Schedule s = with_wgmma_variant(f.c.graph, [&](const KernelChoice& k) { return k.params.at("block_m") == 64 && f.pick(k); }, gi);
    for (const auto& [key, value] : f.edits) s.groups[gi].group.kernel.params[key] = value;
    REQUIRE_FALSE(families.check(f.c.graph, s.groups[gi].group, spec));
    CHECK(s.groups[gi].group.kernel.params.at("warpgroups") == 2);
    const cuda::GeneratedKernel k = emit_kernel(f.c.graph, s, gi, spec);
    REQUIRE(k.path == "wgmma");
    CHECK(k.contraction->block_m == 64);
    CHECK(k.contraction->block_n == f.block_n);
    // The form asked for is the form planned.
    const KernelChoice& kc = s.groups[gi].group.kernel;
    CHECK((k.contraction->persistent > 0) == (param_or(kc, "persistent", 0) == 1));
    CHECK(k.contraction->cluster_m == param_or(kc, "cluster_m", 1));
    CHECK(k.contraction->split_k == kc.params.at("split_k"));
    // A split K passes its sums pair by pair from the fragments: its side inputs (the bias) are
    // prefetched a pair at a time.
    if (k.contraction->split_k > 1 && f.c.name.find("bias") != std::string::npos)
      CHECK(k.source.find("struct TslRuns { unsigned r[1]; }") != std::string::npos);
    if (f.edits.count("persistent")) CHECK(k.contraction->persistent > 0);
    if (f.edits.count("cluster_m")) CHECK(k.contraction->cluster_m == 2);
    CHECK(k.plan.threads == 256);
    CHECK(k.source.find(cat("tsl::wg::WarpgroupGemm<64, ", f.block_n, ", ")) != std::string::npos);
    // (Up to 128 wide, two blocks per SM: 128 registers a thread hold the 64 accumulators.)
    CHECK(k.source.find(cat("__launch_bounds__(256, ", f.block_n <= 128 ? 2 : 1, ")")) != std::string::npos);
    CHECK(nvrtc_compile_all(f.c.graph, s, spec) >= 1);
    check_forced_on_gpu(f.c.graph, s);
  }
  // Where the planner offers them, and where not: BERT's attention output at 512 tokens (24 tiles
  // of 128 x 128 on 132 SMs) is priced cheapest in 64-row blocks; a GEMM of more 128 x 128 tiles
  // than SMs is offered none.
  const OpGraph attn_out = gemm(DType::f16, 512, 768, 768, false, false);
  {
    const AnalyticCostModel cost;
    for (const auto& p : policies())
      if (p->name() == "welder") {
        const Schedule priced = schedule_with_families(*p, PolicyContext{attn_out, spec, cost}, &families);
        CHECK(emit_kernel(attn_out, priced, 0, spec).contraction->block_m == 64);
      }
  }
  {
    const OpGraph big = matmul(DType::f16, 2048, 256, 2048);
    const Schedule s = schedule_with(big, spec, "welder");
    for (const KernelChoice& k : families.variants(big, s.groups[0].group, spec))
      CHECK_FALSE((k.family == "wgmma" && k.params.at("block_m") == 64));
  }
  // The 64-row variants run one block a tile in one wave of the blocks the SMs hold at once: two
  // of 64 x 64 or 64 x 128 an SM where two fit its shared memory with the driver's reservation,
  // else one (a split: one). GPT-2's attention output at 1024 tokens is offered 192 blocks of
  // 64 x 64 at up to 5 stages (two an SM), not at 6 (one an SM: two waves).
  {
    const OpGraph g = gemm(DType::f16, 1024, 768, 768, false, false);
    const Schedule s = schedule_with(g, spec, "welder");
    const int64_t reserved = spec.limits.smem_per_sm_bytes - spec.limits.smem_per_block_bytes;
    int offered = 0, narrow = 0;
    for (const KernelChoice& k : families.variants(g, s.groups[0].group, spec)) {
      if (k.family != "wgmma" || k.params.at("block_m") != 64) continue;
      ++offered;
      const int64_t bn = k.params.at("block_n"), split = k.params.at("split_k"), stages = k.params.at("stages");
      INFO(bn, " wide, split ", split, ", ", stages, " stages");
      CHECK(param_or(k, "persistent", 0) == 0);
      const bool two = split == 1 && bn <= 128 && 2 * (cuda::wgmma_smem_bytes(64, bn, stages) + reserved) <= spec.limits.smem_per_sm_bytes;
      CHECK(16 * ((768 + bn - 1) / bn) * split <= (two ? 2 : 1) * spec.compute.units);
      if (bn == 64 && split == 1) {
        ++narrow;
        CHECK(stages <= 5);
      }
    }
    CHECK(offered > 0);
    CHECK(narrow > 0);
  }
  // Recorded forms that cannot be emitted are refused with the reason.
  int gi = -1;
  Schedule s = with_wgmma_variant(attn_out, [](const KernelChoice& k) { return k.params.at("block_m") == 64; }, gi);
  auto refused = [&](std::map<std::string, int64_t> edits, const std::string& why) {
    ScheduledGroup g = s.groups[gi].group;
    for (const auto& [key, value] : edits) g.kernel.params[key] = value;
    const std::optional<std::string> reason = families.check(attn_out, g, spec);
    INFO(why);
    REQUIRE(reason.has_value());
    CHECK(reason->find(why) != std::string::npos);
  };
  refused({{"block_m", 32}}, "a wgmma block is 64 or 128 rows");
  refused({{"block_m", 128}, {"block_n", 64}, {"warpgroups", 3}}, "a wgmma block is 64 or 128 rows by 256, 192, 128 (");
  // Ping-pong is a 128-row kernel: refused at 64 rows where the grid would be persistent (144
  // tiles of 64 x 128 on 132 SMs; 72 of 128 x 128).
  {
    const OpGraph many = bias_gelu(DType::f16, 1100, 264, 1000);
    int gm = -1;
    Schedule sm = with_wgmma_variant(many, [](const KernelChoice& k) { return k.params.at("block_m") == 64; }, gm);
    ScheduledGroup g = sm.groups[gm].group;
    g.kernel.params["block_n"] = 128;
    g.kernel.params["persistent"] = 1;
    ScheduledGroup pp = g;
    pp.kernel.params["pingpong"] = 1;
    CHECK_FALSE(families.check(many, g, spec));  // (the persistent 64-row form itself is emitted)
    const std::optional<std::string> reason = families.check(many, pp, spec);
    REQUIRE(reason.has_value());
    CHECK(reason->find("a ping-pong wgmma kernel has 128 x 128 tiles") != std::string::npos);
  }
}

TEST_CASE("cuda mma run: tensor-core kernels match the interpreter (odd shapes, transposes, batches, bf16, epilogues, attention)") {
  check_cases_on_gpu(mma_cases());
}

TEST_CASE("cuda mma run: box-tiled convolutions on the wgmma kernel (plans, recorded boxes, forms) match the interpreter") {
  const HwSpec& spec = gpu_spec();
  const cuda::CudaKernelFamilies families;
  // 32 x 7 x 7 outputs (ResNet-50's last stage) in boxes of 16 images x 1 row x 8 columns: 14 m
  // tiles (boxes of 2 x 8 x 8 would take 16; 13 of 128 flat rows cannot be read as boxes); stride
  // 2 steps the input's map.
  const OpGraph g = conv_nhwc(DType::f16, {32, 14, 14, 64}, 256, 3, 2, 1, 1, false);
  const cuda::GeneratedKernel k = roller_kernel(g);
  REQUIRE(k.path == "wgmma");
  REQUIRE(k.contraction);
  const cuda::ContractionPlan& c = *k.contraction;
  CHECK(c.conv_box);
  CHECK(c.box_tiles == std::vector<int64_t>{16, 1, 8});
  CHECK(c.tiles_m == 14);
  CHECK(c.taps == 9);
  CHECK(c.k_chunks == 1);
  CHECK(c.k_tiles() == 9);
  CHECK(k.source.find("struct TslConvCoords") != std::string::npos);
  CHECK(k.source.find("struct TslGatherA") == std::string::npos);
  REQUIRE(k.plan.tensor_maps.size() == 2);
  const cuda::TensorMapParam& a = k.plan.tensor_maps[0];
  CHECK(a.cols == 64);
  CHECK(a.rows == 14);
  CHECK(a.box_rows == 16);  // 8 points 2 apart
  CHECK(a.element_strides == std::vector<int>{1, 2, 2, 1});
  CHECK(a.batch_box == std::vector<int>{2, 16});  // 1 row (stride 2), 16 images
  CHECK(k.plan.tensor_maps[1].rows == 9);  // B: (channels, taps, n), one tap's 64 channels of block_n rows
  CHECK(k.plan.tensor_maps[1].batch_box == std::vector<int>{c.block_n});
  ScheduledGroup plain = schedule_with(g, spec, "roller").groups.back().group;
  plain.kernel = {};
  const KernelChoice chosen = families.choose(g, plain, spec);
  CHECK(chosen.family == "wgmma");
  CHECK(chosen.params.at("box0") == 16);
  CHECK(chosen.params.at("box1") == 1);
  CHECK(chosen.params.at("k_tiles") == 9);
  CHECK(nvrtc_compile_all(g, schedule_with(g, spec, "roller"), spec) >= 1);

  // A recorded box replaces the derived one; one of the wrong size or past a map's box is refused.
  int gi = -1;
  Schedule s = with_wgmma_variant(g, [](const KernelChoice&) { return true; }, gi);
  s.groups[gi].group.kernel.params["box0"] = 1;
  s.groups[gi].group.kernel.params["box1"] = 8;
  s.groups[gi].group.kernel.params["box2"] = 16;
  const cuda::GeneratedKernel rk = emit_kernel(g, s, gi, spec);
  REQUIRE(rk.contraction);
  CHECK(rk.contraction->box_tiles == std::vector<int64_t>{1, 8, 16});
  CHECK(rk.contraction->tiles_m == 32);  // 32 images x 1 x 1
  check_forced_on_gpu(g, s);
  ScheduledGroup bad = s.groups[gi].group;
  bad.kernel.params["box2"] = 8;
  std::optional<std::string> why = families.check(g, bad, spec);
  REQUIRE(why.has_value());
  CHECK(why->find("64 output points") != std::string::npos);
  bad.kernel.params["box1"] = 3;  // powers of two only
  why = families.check(g, bad, spec);
  REQUIRE(why.has_value());
  CHECK(why->find("a recorded box") != std::string::npos);
  bad.kernel.params["box1"] = int64_t{1} << 62;  // refused without overflowing (UBSan checks)
  why = families.check(g, bad, spec);
  REQUIRE(why.has_value());
  CHECK(why->find("a recorded box") != std::string::npos);
  // The cost model reads recorded boxes and K tiles clamped to the extents, whatever they say.
  bad.kernel.params["k_tiles"] = int64_t{1} << 62;
  const CostBreakdown priced = AnalyticCostModel().estimate(g, bad, spec);
  CHECK(std::isfinite(priced.latency_s));
  CHECK(priced.latency_s > 0);

  // The persistent, ping-pong and split forms take the convolution's stages too.
  const OpGraph big = conv_nhwc(DType::bf16, {16, 40, 40, 64}, 128, 3, 1, 1, 1);
  for (const char* form : {"pingpong", "persistent"}) {
    INFO(form);
    const Schedule f = with_wgmma_variant(big, [&](const KernelChoice& v) { return param_or(v, form, 0) == 1; }, gi);
    const cuda::GeneratedKernel fk = emit_kernel(big, f, gi, spec);
    REQUIRE(fk.contraction);
    CHECK(fk.contraction->conv_box);
    CHECK(fk.contraction->persistent > 0);
    CHECK(nvrtc_compile_all(big, f, spec) >= 1);
    check_forced_on_gpu(big, f);
  }
  const OpGraph deep = conv_nhwc(DType::f16, {1, 16, 16, 512}, 128, 3, 1, 1, 1, false);
  const Schedule sp = with_wgmma_variant(deep, [](const KernelChoice& v) { return v.params.at("split_k") == 4; }, gi);
  CHECK(emit_kernel(deep, sp, gi, spec).contraction->split_k == 4);
  CHECK(nvrtc_compile_all(deep, sp, spec) >= 1);
  check_forced_on_gpu(deep, sp);
  // B is never shared by a cluster for a convolution.
  ScheduledGroup shared =
      with_wgmma_variant(big, [](const KernelChoice& v) { return param_or(v, "persistent", 0) == 1; }, gi).groups[gi].group;
  shared.kernel.params["cluster_m"] = 2;
  why = families.check(big, shared, spec);
  REQUIRE(why.has_value());
  CHECK(why->find("B shared by a cluster") != std::string::npos);
}

TEST_CASE("cuda mma run: the wgmma epilogue loads its runs' side inputs before the slab's round trip, and matches the interpreter") {
  // x W + bias + residual over a [batch, seq, hidden] projection (m folded from batch and seq):
  // welder's one kernel prefetches the bias and the residual along each run of 8 columns. A
  // residual read transposed (its offset does not grow by one along n) or broadcast along n (the
  // same element for the whole run) is read where it is used, as before.
  struct Case {
    std::string name;
    OpGraph graph;
    int runs;  // side inputs prefetched
  };
  auto projection = [](DType dt, const std::string& residual_form) {
    ModelBuilder b(dt);
    const std::string y = b.op("MatMul", {b.input("x", {2, 300, 256}), b.weight("w", {256, 384}, 3)});
    const std::string biased = b.op("Add", {y, b.weight("bias", {384}, 4)});
    std::string r;
    if (residual_form == "rows") r = b.input("residual", {2, 300, 384});
    if (residual_form == "transposed")
      r = b.op("Transpose", {b.input("residual", {2, 384, 300})}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
    if (residual_form == "broadcast") r = b.input("residual", {2, 300, 1});
    return b.graph(b.op("Add", {biased, r}));
  };
  // The residual read twice (added, then multiplying the sum): one load serves both reads.
  auto twice = [] {
    ModelBuilder b(DType::f16);
    const std::string y = b.op("MatMul", {b.input("x", {300, 256}), b.weight("w", {256, 384}, 3)});
    const std::string r = b.input("residual", {300, 384});
    return b.graph(b.op("Mul", {b.op("Add", {y, r}), r}));
  };
  const std::vector<Case> cases = {{"f16 residual read by two nodes", twice(), 1},
                                   {"f16 bias and residual", projection(DType::f16, "rows"), 2},
                                   {"bf16 bias and residual", projection(DType::bf16, "rows"), 2},
                                   {"f16 bias, transposed residual", projection(DType::f16, "transposed"), 1},
                                   {"f16 bias, residual broadcast along n", projection(DType::f16, "broadcast"), 1}};
  for (const Case& c : cases) {
    INFO(c.name);
    const cuda::GeneratedKernel k = last_kernel(c.graph, "welder");
    REQUIRE(k.path == "wgmma");
    CHECK(k.source.find(cat("struct TslRuns { uint4 r[", c.runs, "]; }")) != std::string::npos);
    CHECK(k.source.find("tsl::wg::prefetching<TslRuns>(tsl_prefetch, ") != std::string::npos);
    CHECK(nvrtc_compile_all(c.graph, schedule_with(c.graph, gpu_spec(), "welder"), gpu_spec()) >= 1);
  }
  check_cases_on_gpu(cases);
}
