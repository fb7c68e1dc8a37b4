// The CPU micro-kernel's rules (cost_model/cpu_microkernel.h), shared by the emitter and the
// analytic model: which nodes it takes, its register blocking, when it packs B, and the bytes
// the model charges for reading B where it lives.
#include <doctest/doctest.h>

#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "cost_model/cpu_microkernel.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

// The CPU suite's convolution: x [1, 64, 56, 56], w [64, 64, 3, 3], pads 1, NCHW.
OpGraph suite_conv() {
  return lower_model(single_op_model("Conv", {random_f32({1, 64, 56, 56}, 1), random_f32({64, 64, 3, 3}, 2)},
                                     {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}, 1, {1}));
}

HwSpec avx2() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx2-generic.json"); }

}  // namespace

TEST_CASE("cpu micro-kernel: blocking maximizes multiply-adds per load within the registers") {
  // 16 registers of 8 lanes: MR*NR + NR + 1 <= 16; 4 x 3 gives 12 / 7 per load (6 x 2: 12 / 8).
  CHECK(choose_cpu_blocking(16, 8, 64, 56, true).mr == 4);
  CHECK(choose_cpu_blocking(16, 8, 64, 56, true).nr == 3);
  // No wider than the columns: 16 columns are two vectors at most (6 x 2).
  CHECK(choose_cpu_blocking(16, 8, 64, 16, true).nr == 2);
  CHECK(choose_cpu_blocking(16, 8, 64, 16, true).mr == 6);
  // No taller than the rows, and one row without an m axis.
  CHECK(choose_cpu_blocking(16, 8, 2, 56, true).mr == 2);
  CHECK(choose_cpu_blocking(16, 8, 64, 56, false).mr == 1);
  // The AVX2 spec: 512 B of registers / 32 B = 16; half the 512 KiB private L2 is the pack budget.
  const HwSpec spec = avx2();
  CHECK(cpu_vector_registers(spec) == 16);
  CHECK(cpu_pack_budget(spec) == 256 * 1024);
}

TEST_CASE("cpu micro-kernel: a convolution's A is the weight, B the input, m the output channel") {
  const OpGraph g = suite_conv();
  const TeNode& conv = g.node(0);
  const std::optional<CpuContraction> c = match_cpu_contraction(conv);
  REQUIRE(c);
  CHECK(c->n_axis == 3);  // output column
  CHECK(c->m_axis == 1);  // output channel: the weight reads along it, the input does not
  CHECK(conv.inputs()[c->a].type.shape == std::vector<int64_t>{64, 64, 3, 3});
  CHECK(conv.inputs()[c->b].type.shape == std::vector<int64_t>{1, 64, 56, 56});
  // Packing: 576 reduction points x 3 vectors x 8 lanes x 4 B = 55296 B per panel fits 256 KiB,
  // and needs two 4-row blocks per panel.
  CHECK(cpu_packs_b(*c, {4, 3}, 8, 576, 8, 4, 256 * 1024));
  CHECK_FALSE(cpu_packs_b(*c, {4, 3}, 4, 576, 8, 4, 256 * 1024));
  CHECK_FALSE(cpu_packs_b(*c, {4, 3}, 64, 576, 8, 4, 55295));
  // An elementwise node is not a contraction.
  const OpGraph relu = lower_model(single_op_model("Relu", {random_f32({4, 16}, 3)}, {}, 1, {}));
  CHECK_FALSE(match_cpu_contraction(relu.node(0)));
}

TEST_CASE("cpu micro-kernel: B's reads where it lives, by hand, and the model's ranking") {
  const OpGraph g = suite_conv();
  const TeNode& conv = g.node(0);
  const HwSpec spec = avx2();
  // 64 channels x 1 row x 56 columns per task (56 tasks): packed, so each of the 56 columns (7
  // vectors) at each of 576 reduction points is read once and written once into the panel.
  CHECK(cpu_b_operand_bytes(conv, LevelTile{"l2", {1, 64, 1, 56}, {1, 1, 3}}, spec) == 2.0 * 56 * 576 * 4 * 56);
  // 8 channels x 4 rows (112 tasks): still packed (two 4-row blocks), but per task 4 rows.
  CHECK(cpu_b_operand_bytes(conv, LevelTile{"l2", {1, 8, 4, 56}, {1, 1, 3}}, spec) == 2.0 * 4 * 56 * 576 * 4 * 112);
  // 4 channels x 8 rows (112 tasks): one 4-row block, not packed: read once per block.
  CHECK(cpu_b_operand_bytes(conv, LevelTile{"l2", {1, 4, 8, 56}, {1, 1, 3}}, spec) == 1.0 * 8 * 56 * 576 * 4 * 112);
  // Fewer than 8 columns: the generic nest, not the micro-kernel.
  CHECK(cpu_b_operand_bytes(conv, LevelTile{"l2", {1, 64, 1, 4}, {1, 1, 3}}, spec) == 0);

  // The model now tells the tiles apart: the 64-channel tasks are predicted faster than the
  // 8-channel ones welder chose before the packing was priced (measured on the 2-core VM, two
  // threads: 1.78 against 2.07 ms, kernels/cpu/README.md).
  auto predict = [&](std::vector<int64_t> task, std::vector<int64_t> l1) {
    ScheduledGroup group;
    group.nodes = {0};
    TileConfig cfg;
    cfg.levels = {LevelTile{"l2", task, {1, 1, 3}}, LevelTile{"l1d", l1, {1, 1, 1}}, LevelTile{"registers", {1, 4, 1, 8}, {1, 1, 1}}};
    group.tiles[0] = cfg;
    return AnalyticCostModel().estimate(g, group, spec).latency_s;
  };
  CHECK(predict({1, 64, 1, 56}, {1, 16, 1, 56}) < predict({1, 8, 4, 56}, {1, 8, 4, 56}));
}
