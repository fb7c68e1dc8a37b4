// A fused Reshape's scratch array read through the linear index (kernels/cpu, TensorView::
// linear_box): where every axis of the producer's box has extent 1 or the domain's row-major
// stride in the scratch array, the read is the linear index minus the box begin's, with no
// division by the domain's extents (GroupNorm as PyTorch exports it: 7-11x faster on the CPU
// op sweep's two GroupNorms). Checked against the interpreter on odd shapes, groups whose
// channels a task's box straddles, both specs and policies, f32 and f16; and in the emitted IR,
// which divides by no domain extent once the box is linear.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "cpu_check.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// GroupNorm as torch.onnx writes it: Reshape to [N, G, C/G*H*W], InstanceNormalization with
/// scale 1 and bias 0, Reshape back, per-channel scale and bias, then SiLU.
OpGraph group_norm(DType dt, int64_t n, int64_t c, int64_t g, int64_t h, int64_t w) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", {n, c, h, w});
  std::string y = b.op("Reshape", {x, b.weight_i64("grouped", {n, g, -1})});
  y = b.op("InstanceNormalization", {y, b.weight("one", {g}, 1, 1.0, 1.0 + 1e-9), b.weight("zero", {g}, 2, 0.0, 1e-9)},
           {{"epsilon", 1e-5}});
  y = b.op("Reshape", {y, b.weight_i64("back", {n, c, h, w})});
  y = b.op("Add", {b.op("Mul", {y, b.weight("gamma", {c, 1, 1}, 3, 0.5, 1.5)}), b.weight("beta", {c, 1, 1}, 4)});
  return b.graph(b.op("Mul", {y, b.op("Sigmoid", {y})}));
}

std::string emitted_ir(const OpGraph& g, const HwSpec& spec) { return tessel::testing::emitted_ir(g, schedule_with(g, spec, "welder"), spec); }

}  // namespace

TEST_CASE("cpu reshape view: GroupNorm at odd shapes against the interpreter") {
  // (n, c, groups, h, w): 10 channels per group (a vector-wide box straddles groups), 3 per group,
  // one group, a group per channel, odd spatial extents.
  const std::vector<std::vector<int64_t>> shapes = {{1, 30, 3, 7, 9}, {2, 12, 4, 5, 5}, {1, 8, 1, 3, 11}, {2, 6, 6, 4, 4},
                                                    {1, 40, 4, 16, 16}};
  for (DType t : {DType::f32, DType::f16})
    for (const auto& s : shapes) {
      CAPTURE(dtype_name(t));
      INFO("n, c, groups, h, w = ", s[0], ", ", s[1], ", ", s[2], ", ", s[3], ", ", s[4]);
      check_compiled(group_norm(t, s[0], s[1], s[2], s[3], s[4]));
    }
}

TEST_CASE("cpu reshape view: a linear box is addressed without dividing by the domain's extents") {
  // SD's GroupNorm (320 channels in 32 groups, 64 x 64): welder fuses both Reshapes with the
  // normalization; every read of their scratch arrays is linear, so the group's kernel has no
  // division at all (it had 30 before: 7.6 -> 1.1 ms on a 2-core VM).
  const OpGraph g = group_norm(DType::f32, 1, 320, 32, 64, 64);
  // Both Reshapes fused with the normalization (their outputs in scratch, read through the linear
  // index), else the IR below would have no division to lose.
  const Schedule s = schedule_with(g, cpu_spec("x86-64-avx512-server"), "welder");
  size_t largest = 0;  // the reshapes, the statistics, the normalization and the affine: 6 nodes at least
  for (const ScheduleGroup& sg : s.groups) largest = std::max(largest, sg.group.nodes.size());
  CHECK(largest >= 6);
  const std::string ir = emitted_ir(g, cpu_spec("x86-64-avx512-server"));
  CHECK(ir.find("udiv") == std::string::npos);
  CHECK(ir.find("urem") == std::string::npos);
}
