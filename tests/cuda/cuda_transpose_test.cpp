// The tiled transpose of the CUDA backend (kernels/cuda/transpose_plan.h): which copies take it, how
// their axes merge into (a, b, batch), which copies stay with the vector kernel and why; its
// kernels compile with NVRTC, and on a GPU match the interpreter for NCHW <-> NHWC transposes,
// plain 2-D ones of odd sizes (partial tiles on both sides), 5-D permutations with a batch, and
// 1-, 2-, 4- and 8-byte dtypes.
#include <doctest/doctest.h>

#include "cuda_check.h"
#include "../model_builder.h"
#include "kernels/cuda/kernel_emitter.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Transpose(x, perm) of an input of `shape`.
OpGraph permute(DType dt, std::vector<int64_t> shape, std::vector<int64_t> perm) {
  ModelBuilder b(dt);
  return b.graph(b.op("Transpose", {b.input("x", std::move(shape))}, {{"perm", std::move(perm)}}));
}

std::vector<GraphCase> transpose_cases() {
  std::vector<GraphCase> out;
  auto add = [&](std::string name, OpGraph g) { out.push_back({std::move(name), std::move(g)}); };
  add("NCHW -> NHWC f16 2x48x9x7", permute(DType::f16, {2, 48, 9, 7}, {0, 2, 3, 1}));
  add("NHWC -> NCHW bf16 3x5x11x40", permute(DType::bf16, {3, 5, 11, 40}, {0, 3, 1, 2}));
  add("2-D f32 33x70 (partial tiles)", permute(DType::f32, {33, 70}, {1, 0}));
  add("5-D f16 2x3x4x5x34 -> (0, 4, 1, 3, 2)", permute(DType::f16, {2, 3, 4, 5, 34}, {0, 4, 1, 3, 2}));
  add("2-D f64 17x40", permute(DType::f64, {17, 40}, {1, 0}));
  add("2-D i8 64x96", permute(DType::i8, {64, 96}, {1, 0}));
  add("3-D i32 (heads) 6x37x40 -> (2, 0, 1)", permute(DType::i32, {6, 37, 40}, {2, 0, 1}));
  add("4-D f16 3x1x5x40 -> (3, 1, 0, 2) (merged across a unit dimension)", permute(DType::f16, {3, 1, 5, 40}, {3, 1, 0, 2}));
  return out;
}

cuda::GeneratedKernel welder_kernel(const OpGraph& g) { return last_kernel(g, "welder"); }

}  // namespace

TEST_CASE("cuda transpose: a permuting copy is a tiled transpose, its axes merged where contiguous on both sides") {
  // NCHW -> NHWC: H and W merge (adjacent in both); a = C (the output's contiguous axis), b = H W
  // (the input's), the batch N.
  const cuda::GeneratedKernel k = welder_kernel(permute(DType::f16, {2, 48, 9, 7}, {0, 2, 3, 1}));
  REQUIRE(k.path == "transpose");
  const cuda::TransposePlan& p = *k.transpose;
  CHECK(p.a.extent == 48);
  CHECK(p.a.in_stride == 63);
  CHECK(p.b.extent == 63);
  CHECK(p.b.out_stride == 48);
  REQUIRE(p.batch.size() == 1);
  CHECK(p.batch[0].extent == 2);
  CHECK(p.batch[0].in_stride == 48 * 63);
  CHECK(p.tiles_a == 2);
  CHECK(p.tiles_b == 2);
  CHECK(p.blocks == 8);
  CHECK(k.source.find("__shared__ unsigned short tsl_tile[32][33]") != std::string::npos);
  // 5-D: no axes merge; a = the input's axis 2 (extent 4), b = axis 4 (34), batch (2, 3, 5).
  const cuda::GeneratedKernel five = welder_kernel(permute(DType::f16, {2, 3, 4, 5, 34}, {0, 4, 1, 3, 2}));
  REQUIRE(five.path == "transpose");
  CHECK(five.transpose->a.extent == 4);
  CHECK(five.transpose->b.extent == 34);
  CHECK(five.transpose->batch.size() == 3);
  // [A, 1, B, C] -> [C, 1, A, B]: A and B merge across the input's dimension of size 1, so the
  // copy is one 2-D transpose of (A B) x C, no batch.
  const cuda::GeneratedKernel unit = welder_kernel(permute(DType::f16, {3, 1, 5, 40}, {3, 1, 0, 2}));
  REQUIRE(unit.path == "transpose");
  CHECK(unit.transpose->a.extent == 15);
  CHECK(unit.transpose->b.extent == 40);
  CHECK(unit.transpose->batch.empty());
}

TEST_CASE("cuda transpose: copies contiguous on both sides stay with the vector kernel, and say why") {
  // [a, b, c] -> [b, a, c]: the last axis is contiguous in the input too.
  const cuda::GeneratedKernel k = welder_kernel(permute(DType::f16, {4, 6, 64}, {1, 0, 2}));
  CHECK(k.path == "vector");
  CHECK(k.transpose_reason.find("the vector kernel copies it contiguously") != std::string::npos);
  // Not a copy: a transpose with an elementwise op fused stays with the vector kernel.
  ModelBuilder b(DType::f16);
  const OpGraph relu = b.graph(b.op("Relu", {b.op("Transpose", {b.input("x", {8, 64})}, {{"perm", std::vector<int64_t>{1, 0}}})}));
  const cuda::GeneratedKernel r = welder_kernel(relu);
  CHECK(r.path != "transpose");
  CHECK_FALSE(r.transpose_reason.empty());
  // An empty tensor launches no tiles.
  const cuda::GeneratedKernel empty = welder_kernel(permute(DType::f16, {0, 48, 9, 7}, {0, 2, 3, 1}));
  CHECK(empty.path != "transpose");
  CHECK(empty.transpose_reason == "the output is empty");
}

TEST_CASE("cuda transpose: kernels of every case compile with NVRTC for sm_90a (welder and roller)") {
  for (const GraphCase& c : transpose_cases())
    for (const std::string policy : {"welder", "roller"}) {
      INFO(c.name, " (", policy, ")");
      const Schedule s = schedule_with(c.graph, gpu_spec(), policy);
      int transposes = 0;
      for (int i = 0; i < static_cast<int>(s.groups.size()); ++i)
        transposes += emit_kernel(c.graph, s, i, gpu_spec()).path == "transpose";
      CHECK(transposes == 1);
      CHECK(nvrtc_compile_all(c.graph, s, gpu_spec()) >= 1);
    }
}

TEST_CASE("cuda transpose run: tiled transposes match the interpreter (NCHW <-> NHWC, partial tiles, 5-D, every width)") {
  check_cases_on_gpu(transpose_cases());
}
