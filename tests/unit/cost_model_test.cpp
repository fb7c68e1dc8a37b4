// The cost models: hand-computed predictions for a memory-bound and a compute-bound group on a toy
// GPU spec (numbers chosen so the arithmetic is easy to follow), the same cases on two shipped
// specs, monotonicity (more bandwidth or more peak never predicts slower), capacity rejection.
#include <doctest/doctest.h>
#include <memory>
#include <set>

#include <algorithm>
#include <cmath>
#include <limits>

#include "../model_builder.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "cost_model/roofline_model.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

MemoryLevel level(const std::string& name, MemoryScope scope, int64_t capacity, int64_t instances,
                  double gbps, int64_t transaction, bool cache = false) {
  MemoryLevel l;
  l.name = name;
  l.scope = scope;
  l.capacity_bytes = capacity;
  l.instances = instances;
  l.bandwidth_gbps = gbps;
  l.transaction_bytes = transaction;
  l.software_managed = !cache && scope != MemoryScope::device;
  if (cache) l.cache = CacheSpec{16, true};
  return l;
}

// 10 SMs; f32 SIMT 10 TFLOP/s; f16 tensor cores 100 TFLOP/s with 16x8x16 instructions;
// smem 100 TB/s, L2 8 MB at 2 TB/s, DRAM 1 TB/s; 2 us launch.
HwSpec toy_gpu() {
  HwSpec s;
  s.name = "toy";
  s.kind = "gpu";
  s.memory_levels = {level("registers", MemoryScope::thread, 1024, 20480, 1e6, 4),
                     level("smem", MemoryScope::sm, 100 * 1024, 10, 100000, 4),
                     level("l2", MemoryScope::device, 8 << 20, 1, 2000, 32, true),
                     level("dram", MemoryScope::device, int64_t{1} << 30, 1, 1000, 32)};
  s.compute.units = 10;
  s.compute.simd_width = 32;
  s.compute.clock_ghz = 1;
  s.compute.simt_peak_tflops = {{DType::f32, 10}, {DType::f16, 10}};
  s.compute.tensor_peak_tflops = {{DType::f16, 100}};
  s.compute.tensor_core_shapes = {{DType::f16, {MmaShape{16, 8, 16}}}};
  s.compute.launch_overhead_us = 2;
  s.limits = LimitSpec{1024, 2048, 16, 65536, 255, 100 * 1024, 100 * 1024, 0};
  return s;
}

ScheduledGroup single(TileConfig cfg) {
  ScheduledGroup g;
  g.nodes = {0};
  g.tiles[0] = std::move(cfg);
  return g;
}

OpGraph add_graph() {
  return lower_model(single_op_model("Add", {random_f32({1024, 1024}, 1), random_f32({1024, 1024}, 2)}, {}, 1, {}));
}

OpGraph matmul_graph(DType t) {
  const TensorType a{t, {1024, 1024}};
  return lower_model(single_op_model("MatMul", {HostTensor(a), HostTensor(a)}, {}, 1, {}));
}

TileConfig add_tiles() {
  TileConfig c;
  c.levels = {LevelTile{"smem", {8, 1024}, {}}};
  c.threads = {1, 256};
  return c;
}

TileConfig gemm_tiles() {
  TileConfig c;
  c.levels = {LevelTile{"smem", {128, 128}, {32}}, LevelTile{"registers", {8, 8}, {1}}};
  c.threads = {16, 16};
  c.pipeline_stages = 2;
  return c;
}

}  // namespace

TEST_CASE("memory-bound: a 1024x1024 f32 add on the toy GPU, by hand") {
  const OpGraph g = add_graph();
  const CostBreakdown c = AnalyticCostModel().estimate(g, single(add_tiles()), toy_gpu());
  // Block tile 8x1024: 128 blocks; smem per block 3 x 32 KiB = 96 KiB -> 1 block per SM.
  CHECK(c.blocks == 128);
  CHECK(c.blocks_per_unit == 1);
  CHECK(c.waves == 13);
  CHECK(c.occupancy == doctest::Approx(256.0 / 2048));
  // Each input read once (4 MiB each), output written once (4 MiB); the wave's working set
  // (10 blocks x 64 KiB) fits in L2, so DRAM sees 12 MiB.
  const double dram = 12.0 * (1 << 20);
  REQUIRE(c.memory.size() == 2);  // L2 and DRAM: a single-level tile has no inner traffic
  CHECK(c.memory.back().level == "dram");
  CHECK(c.memory.back().bytes == dram);
  CHECK(c.memory.back().seconds == doctest::Approx(dram / 1e12));
  CHECK(c.flops == 1024.0 * 1024);
  CHECK(c.term("compute") == doctest::Approx(1024.0 * 1024 / 1e13 * (13 * 10) / 128));
  CHECK(c.bound == "dram");
  CHECK(c.latency_s == doctest::Approx(2e-6 + dram / 1e12));
  CHECK_FALSE(c.tensor_cores);
}

TEST_CASE("a recorded tensor-core plan is priced as that plan, by hand, a family's measured efficiency divides its bound") {
  const OpGraph g = matmul_graph(DType::f16);
  ScheduledGroup group = single(gemm_tiles());
  group.kernel = KernelChoice{"mma", {{"block_m", 256}, {"block_n", 128}, {"block_k", 32}, {"stages", 3}, {"split_k", 1},
                                      {"warps_m", 4}, {"warps_n", 2}, {"implicit", 0}}, {}};
  const HwSpec spec = toy_gpu();
  const CostBreakdown c = AnalyticCostModel().estimate(g, group, spec);
  // 4 x 8 = 32 tiles of 256 x 128 on 10 SMs: the busiest SM runs 4 of them, each 2 x 256 x 128 x 1024
  // FLOPs at a tenth of 100 TFLOP/s -- not the schedule's 128 x 128 tiles.
  CHECK(c.blocks == 32);
  CHECK(c.term("compute") == doctest::Approx(4 * 2.0 * 256 * 128 * 1024 / 1e13));
  CHECK(c.tensor_cores);
  CHECK(c.bound == "compute");
  CHECK(c.latency_s == doctest::Approx(2e-6 + c.term("compute")));
  // Shared memory 3 x (256 + 128) x 32 x 2 B = 72 KiB: one block per SM.
  CHECK(c.blocks_per_unit == 1);
  // A measured efficiency of 0.5 for the family doubles the bound time, nothing else.
  HwSpec measured = spec;
  measured.compute.family_efficiency = {{"mma", 0.5}, {"vector", 0.25}};
  const CostBreakdown half = AnalyticCostModel().estimate(g, group, measured);
  CHECK(half.latency_s == doctest::Approx(2e-6 + 2 * c.term("compute")));
  CHECK(half.notes.back().find("reaches 0.5 of the roofline") != std::string::npos);
}

TEST_CASE("a recorded vector or transpose kernel is priced as that kernel, by hand: each tensor once, a window's taps in L1") {
  const HwSpec spec = toy_gpu();
  // x + x over 1024 x 1024 f32: device memory reads x once (4 MiB) and writes 4 MiB, whatever
  // the schedule's tiles; 1 MFLOP on the SIMT units; 256-thread blocks, 8 per SM.
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1024, 1024});
  const OpGraph twice = b.graph(b.op("Add", {x, x}));
  ScheduledGroup group = single(add_tiles());
  group.kernel = KernelChoice{"vector", {{"vec", 4}, {"threads", 256}, {"blocks", 1024}}, {}};
  const CostBreakdown c = AnalyticCostModel().estimate(twice, group, spec);
  const double dram = 8.0 * (1 << 20);
  REQUIRE(c.memory.size() == 1);
  CHECK(c.memory[0].level == "dram");
  CHECK(c.memory[0].bytes == dram);
  CHECK(c.term("compute") == doctest::Approx(1024.0 * 1024 / 1e13));
  CHECK(c.blocks == 1024);
  CHECK(c.blocks_per_unit == 8);
  CHECK(c.bound == "dram");
  CHECK(c.latency_s == doctest::Approx(2e-6 + dram / 1e12));
  // The transpose family: the same accounting, no vector width.
  group.kernel = KernelChoice{"transpose", {{"tile", 32}, {"threads", 256}, {"blocks", 1024}}, {}};
  CHECK(AnalyticCostModel().estimate(twice, group, spec).latency_s == doctest::Approx(c.latency_s));
  // A 3x3 depthwise window over 1 x 8 x 8 x 64 (NHWC, HWIO weights): each of its 36864 points
  // reads an element of x and one of w through L1 (the toy's smem level).
  ModelBuilder d(DType::f32);
  const OpGraph dw = d.graph(d.op("Conv", {d.input("x", {1, 8, 8, 64}), d.weight("w", {3, 3, 1, 64}, 3)},
                                  {{"layout", std::string("NHWC")}, {"weight_layout", std::string("HWIO")}, {"group", int64_t{64}},
                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  ScheduledGroup window;
  window.nodes = {0};
  window.kernel = KernelChoice{"vector", {{"vec", 4}, {"threads", 256}, {"blocks", 4}}, {}};
  const CostBreakdown w = AnalyticCostModel().estimate(dw, window, spec);
  REQUIRE(w.memory.size() == 2);
  CHECK(w.memory[1].level == "smem");
  CHECK(w.memory[1].bytes == 36864.0 * 4 * 2);
  // Four blocks keep 4 of the 10 SMs busy: every term at 0.4 of the chip.
  CHECK(w.term("compute") == doctest::Approx(2.0 * 36864 / 1e13 / 0.4));
}

TEST_CASE("compute-bound: a 1024^3 f16 GEMM on the toy GPU's tensor cores, by hand") {
  const OpGraph g = matmul_graph(DType::f16);
  const CostBreakdown c = AnalyticCostModel().estimate(g, single(gemm_tiles()), toy_gpu());
  CHECK(c.tensor_cores);
  const double flops = 2.0 * 1024 * 1024 * 1024;
  CHECK(c.flops == flops);
  // 64 blocks of 128x128; smem per block: 2 stages x (8 KiB + 8 KiB) = 32 KiB (the accumulator
  // lives in the threads' registers) -> 3 blocks per SM in 100 KiB, 30 at a time, 3 waves.
  CHECK(c.blocks == 64);
  CHECK(c.blocks_per_unit == 3);
  CHECK(c.waves == 3);
  const double compute = flops / 1e14 * (3.0 * 30 / 64);
  CHECK(c.term("compute") == doctest::Approx(compute));
  // L2: every block reads 32 steps x (8 KiB of A + 8 KiB of B): 64 x 32 x 16 KiB = 32 MiB, plus
  // 2 MiB written. The working set (4 MiB of inputs) fits in 8 MiB, so DRAM sees 4 + 2 MiB.
  double l2_bytes = 0, dram_bytes = 0;
  for (const LevelCost& l : c.memory) {
    if (l.level == "l2") l2_bytes = l.bytes;
    if (l.level == "dram") dram_bytes = l.bytes;
  }
  CHECK(l2_bytes == 34.0 * (1 << 20));
  CHECK(dram_bytes == 6.0 * (1 << 20));
  CHECK(c.bound == "compute");
  CHECK(c.latency_s == doctest::Approx(2e-6 + compute));

  // A tile that is not a multiple of the 16x8x16 instruction shape runs on SIMT units.
  TileConfig odd = gemm_tiles();
  odd.levels = {LevelTile{"smem", {120, 128}, {32}}, LevelTile{"registers", {8, 8}, {1}}};
  odd.threads = {15, 16};
  const CostBreakdown s = AnalyticCostModel().estimate(g, single(odd), toy_gpu());
  CHECK_FALSE(s.tensor_cores);
  CHECK(s.term("compute") > c.term("compute") * 5);
  REQUIRE_FALSE(s.notes.empty());
  CHECK(s.notes[0].find("120x128x32") != std::string::npos);
}

TEST_CASE("the roofline floor is below the analytic prediction") {
  const OpGraph g = matmul_graph(DType::f16);
  const CostBreakdown floor = RooflineCostModel().estimate(g, single(gemm_tiles()), toy_gpu());
  CHECK(floor.latency_s == doctest::Approx(2.0 * 1024 * 1024 * 1024 / 1e14));
  CHECK(floor.latency_s <= AnalyticCostModel().estimate(g, single(gemm_tiles()), toy_gpu()).latency_s);
  const OpGraph add = add_graph();
  CHECK(RooflineCostModel().estimate(add, single(add_tiles()), toy_gpu()).latency_s ==
        doctest::Approx(12.0 * (1 << 20) / 1e12));
}

TEST_CASE("more bandwidth or more peak never predicts slower") {
  const OpGraph add = add_graph(), mm = matmul_graph(DType::f16);
  for (const auto& [graph, tiles] : {std::pair<const OpGraph*, TileConfig>{&add, add_tiles()}, {&mm, gemm_tiles()}}) {
    const HwSpec base = toy_gpu();
    const double t0 = AnalyticCostModel().estimate(*graph, single(tiles), base).latency_s;
    for (size_t i = 0; i < base.memory_levels.size(); ++i)
      for (double factor : {1.5, 4.0}) {
        HwSpec faster = base;
        faster.memory_levels[i].bandwidth_gbps *= factor;
        CHECK(AnalyticCostModel().estimate(*graph, single(tiles), faster).latency_s <= t0);
      }
    HwSpec more_flops = base;
    for (auto& [dt, v] : more_flops.compute.tensor_peak_tflops) v *= 2;
    for (auto& [dt, v] : more_flops.compute.simt_peak_tflops) v *= 2;
    CHECK(AnalyticCostModel().estimate(*graph, single(tiles), more_flops).latency_s <= t0);
    HwSpec bigger_l2 = base;
    bigger_l2.memory_levels[2].capacity_bytes *= 4;
    CHECK(AnalyticCostModel().estimate(*graph, single(tiles), bigger_l2).latency_s <= t0);
  }
}

TEST_CASE("a block that does not fit is rejected with the limit named") {
  TileConfig huge = gemm_tiles();
  huge.levels = {LevelTile{"smem", {256, 256}, {64}}, LevelTile{"registers", {8, 8}, {1}}};
  huge.threads = {32, 32};
  const CostBreakdown c = AnalyticCostModel().estimate(matmul_graph(DType::f16), single(huge), toy_gpu());
  CHECK(std::isinf(c.latency_s));
  CHECK(c.bound == "capacity");
  REQUIRE_FALSE(c.notes.empty());
  CHECK(c.notes.back().find("shared memory per block") != std::string::npos);
}

TEST_CASE("shipped specs: the same GEMM is faster on an H100 than on an A100") {
  const std::string dir = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/";
  const HwSpec h100 = load_hw_spec(dir + "nvidia-h100-sxm.json");
  const HwSpec a100 = load_hw_spec(dir + "nvidia-a100-sxm-80g.json");
  const TensorType t{DType::f16, {4096, 4096}};
  const OpGraph g = lower_model(single_op_model("MatMul", {HostTensor(t), HostTensor(t)}, {}, 1, {}));
  const CostBreakdown h = AnalyticCostModel().estimate(g, single(gemm_tiles()), h100);
  const CostBreakdown a = AnalyticCostModel().estimate(g, single(gemm_tiles()), a100);
  CHECK(h.tensor_cores);
  CHECK(a.tensor_cores);
  CHECK(h.latency_s < a.latency_s);
  // Above the roofline floor. An 8x8 thread tile re-reads 16 elements of shared memory per 64
  // multiply-adds: on the H100 that, not the tensor cores, is the bound.
  const double floor = RooflineCostModel().estimate(g, single(gemm_tiles()), h100).latency_s;
  CHECK(h.latency_s >= floor);
  CHECK(h.bound == "smem");
  // The add is DRAM-bound on both, and takes about bytes / bandwidth.
  const OpGraph add = add_graph();
  for (const HwSpec* spec : {&h100, &a100}) {
    const CostBreakdown c = AnalyticCostModel().estimate(add, single(add_tiles()), *spec);
    std::string device;
    for (const MemoryLevel& l : spec->memory_levels)
      if (l.scope != MemoryScope::host) device = l.name;
    CHECK(c.bound == device);
  }
  // The registry: the analytic model first (the default), every entry named once and described,
  // and each one prices the add (read off the registry: adding a model needs no edit here).
  const std::vector<std::unique_ptr<CostModel>> models = cost_models();
  REQUIRE_FALSE(models.empty());
  CHECK(models.front()->name() == "analytic");
  std::set<std::string> names;
  for (const auto& m : models) {
    CAPTURE(m->name());
    CHECK(names.insert(std::string(m->name())).second);
    CHECK_FALSE(m->description().empty());
    const double t = m->estimate(add, single(add_tiles()), h100).latency_s;
    CHECK((std::isfinite(t) && t > 0));
  }
}

TEST_CASE("hand-computed on two shipped specs: a memory-bound add and a compute-bound f32 GEMM") {
  const std::string dir = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/";
  for (const char* file : {"nvidia-h100-sxm.json", "nvidia-a100-sxm-80g.json"}) {
    CAPTURE(file);
    const HwSpec spec = load_hw_spec(dir + file);
    const double units = static_cast<double>(spec.compute.units);
    const double launch = spec.compute.launch_overhead_us * 1e-6;

    // Add of two 1024x1024 f32 tensors, 8x1024 block tiles: 128 blocks, fewer than the SMs, so
    // only 128/units of the DRAM bandwidth is drawn; 12 MiB moved (two reads, one write).
    const CostBreakdown add = AnalyticCostModel().estimate(add_graph(), single(add_tiles()), spec);
    const double dram_time = 12.0 * (1 << 20) / (spec.level("dram").bandwidth_gbps * 1e9 * std::min(1.0, 128 / units));
    CHECK(add.bound == "dram");
    CHECK(add.latency_s == doctest::Approx(launch + dram_time));

    // 4096^3 f32 GEMM, 128x128x32 block tiles (2 stages of inputs: 64 KiB of shared memory per
    // block), 8x16 thread tiles on 16x8 threads: per thread 2 stages x (8 + 16) input elements and
    // a 128-element accumulator = 176 registers x 128 threads = 22528 per block, so the register
    // file allows 2 blocks per SM (both specs: 65536 registers). f32 stays on the SIMT units:
    // compute = FLOPs / f32 peak x wave quantization.
    const TensorType t{DType::f32, {4096, 4096}};
    const OpGraph gemm = lower_model(single_op_model("MatMul", {HostTensor(t), HostTensor(t)}, {}, 1, {}));
    TileConfig tiles;
    tiles.levels = {LevelTile{"smem", {128, 128}, {32}}, LevelTile{"registers", {8, 16}, {1}}};
    tiles.threads = {16, 8};
    tiles.pipeline_stages = 2;
    const CostBreakdown c = AnalyticCostModel().estimate(gemm, single(tiles), spec);
    CHECK_FALSE(c.tensor_cores);
    CHECK(c.blocks == 1024);
    const int64_t per_sm = std::min<int64_t>(spec.limits.smem_per_sm_bytes / (64 * 1024), spec.limits.registers_per_sm / (176 * 128));
    CHECK(per_sm == 2);
    CHECK(c.blocks_per_unit == per_sm);
    const double waves = std::ceil(1024 / (units * 2));
    const double compute = 2.0 * 4096 * 4096 * 4096 / (spec.compute.simt_peak_tflops.at(DType::f32) * 1e12) *
                           (waves * units * 2 / 1024);
    CHECK(c.waves == waves);
    CHECK(c.term("compute") == doctest::Approx(compute));
    CHECK(c.bound == "compute");
    CHECK(c.latency_s == doctest::Approx(launch + compute));
  }
}

TEST_CASE("a tensor-core contraction with too few tiles splits its reduction over a cluster") {
  HwSpec gpu = toy_gpu();
  // Without clusters (the toy spec's limits), never.
  CHECK(reduction_split(2, 128, 2, gpu) == 1);
  gpu.limits.max_cluster_blocks = 8;
  // The most parts that still give each of the 10 units at most one block: 2 tiles in 4 parts
  // (8 blocks; 8 parts would be 16); 3 tiles in 2 (6 blocks); 1 tile in 8 (the cluster's
  // limit); 6 tiles not at all (12 blocks); enough tiles: none.
  CHECK(reduction_split(2, 128, 2, gpu) == 4);
  CHECK(reduction_split(3, 128, 2, gpu) == 2);
  CHECK(reduction_split(1, 128, 2, gpu) == 8);
  CHECK(reduction_split(6, 128, 2, gpu) == 1);
  CHECK(reduction_split(10, 128, 2, gpu) == 1);
  // The H100's decode GEMM: 64 tiles for 132 SMs in 2 parts (128 blocks), not 4 (256).
  HwSpec h100 = gpu;
  h100.compute.units = 132;
  CHECK(reduction_split(64, 128, 4, h100) == 2);
  // Every part keeps min_steps steps: 16 steps of which parts of 4 at least -> 4 parts.
  CHECK(reduction_split(1, 16, 4, gpu) == 4);
  CHECK(reduction_split(2, 7, 4, gpu) == 1);
  // At most the cluster.
  gpu.limits.max_cluster_blocks = 2;
  CHECK(reduction_split(1, 128, 2, gpu) == 2);
  // A CPU never splits.
  HwSpec cpu = gpu;
  cpu.kind = "cpu";
  CHECK(reduction_split(1, 128, 2, cpu) == 1);

  // The model prices the split: a 16 x 1024 x 1024 f16 product in 16x256 tiles is 4 blocks on 10
  // units, split in 2 with clusters: twice the blocks, more of the chip's bandwidth, a note.
  const TensorType a{DType::f16, {16, 1024}}, b{DType::f16, {1024, 1024}};
  const OpGraph g = lower_model(single_op_model("MatMul", {HostTensor(a), HostTensor(b)}, {}, 1, {}));
  TileConfig t;
  t.levels = {LevelTile{"smem", {16, 256}, {32}}, LevelTile{"registers", {2, 16}, {1}}};
  t.threads = {8, 16};
  t.pipeline_stages = 2;
  const CostBreakdown plain = AnalyticCostModel().estimate(g, single(t), toy_gpu());
  HwSpec clustered = toy_gpu();
  clustered.limits.max_cluster_blocks = 8;  // 4 parts would be 16 blocks for 10 units
  const CostBreakdown split = AnalyticCostModel().estimate(g, single(t), clustered);
  CHECK(plain.blocks == 4);
  CHECK(split.blocks == 8);
  CHECK(split.latency_s < plain.latency_s);
  bool noted = false;
  for (const std::string& n : split.notes) noted |= n.find("splits its reduction in 2 parts") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("CPU: a loop nest's row starts add to the latency, by hand: long rows start fewer") {
  const HwSpec cpu = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx2-generic.json");
  REQUIRE(cpu.compute.clock_ghz > 0);
  REQUIRE(cpu.compute.row_start_cycles > 0);  // the spec's fact (hw_specs/README.md)
  const OpGraph add = add_graph();  // 1024 x 1024 elementwise: one loop per row of a task's box
  auto tiles = [](int64_t rows, int64_t cols) {
    TileConfig c;
    c.levels = {LevelTile{"l2", {rows, cols}, {}}};
    return c;
  };
  double previous = std::numeric_limits<double>::infinity();
  for (int64_t cols : {16, 64, 256, 1024}) {
    CAPTURE(cols);
    const int64_t rows = 16384 / cols;  // the same 16384 elements per task
    const CostBreakdown c = AnalyticCostModel().estimate(add, single(tiles(rows, cols)), cpu);
    const double tasks = (1024.0 / static_cast<double>(rows)) * (1024.0 / static_cast<double>(cols));
    const double active = std::min(1.0, tasks / static_cast<double>(cpu.compute.units));
    const double starts = 1024.0 * 1024.0 / static_cast<double>(cols);
    CHECK(c.term("rows") == doctest::Approx(starts * cpu.compute.row_start_cycles /
                                            (cpu.compute.clock_ghz * 1e9 * static_cast<double>(cpu.compute.units) * active)));
    double worst = c.term("compute");
    for (const LevelCost& l : c.memory) worst = std::max(worst, l.seconds);
    CHECK(c.latency_s == doctest::Approx(c.term("launch") + worst + c.term("rows")));
    CHECK(c.latency_s < previous);
    previous = c.latency_s;
  }
  // A contraction priced as the micro-kernel's (no family, or `microkernel`) starts none; as
  // loops it does.
  TileConfig mm;
  mm.levels = {LevelTile{"l2", {64, 64}, {16}}};
  CHECK(AnalyticCostModel().estimate(matmul_graph(DType::f32), single(mm), cpu).term("rows") == 0);
  ScheduledGroup loops = single(mm);
  loops.kernel.family = "loops";
  CHECK(AnalyticCostModel().estimate(matmul_graph(DType::f32), loops, cpu).term("rows") > 0);
  // GPUs: none.
  CHECK(AnalyticCostModel().estimate(add, single(add_tiles()), toy_gpu()).term("rows") == 0);
  // A CPU spec without compute.row_start_cycles: not charged, and the estimate says so; twice the
  // cycles, twice the term.
  HwSpec unknown = cpu, twice = cpu;
  unknown.compute.row_start_cycles = 0;
  twice.compute.row_start_cycles = 2 * cpu.compute.row_start_cycles;
  const CostBreakdown none = AnalyticCostModel().estimate(add, single(tiles(16, 1024)), unknown);
  CHECK(none.term("rows") == 0);
  CHECK(std::any_of(none.notes.begin(), none.notes.end(),
                    [](const std::string& n) { return n.find("gives no compute.row_start_cycles") != std::string::npos; }));
  CHECK(AnalyticCostModel().estimate(add, single(tiles(16, 1024)), twice).term("rows") ==
        doctest::Approx(2 * AnalyticCostModel().estimate(add, single(tiles(16, 1024)), cpu).term("rows")));
}

TEST_CASE("CPU: a contraction's panels add to the latency, by hand, taller task tiles move fewer") {
  const std::string dir = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/";
  const HwSpec cpu = load_hw_spec(dir + "x86-64-avx2-generic.json");
  const OpGraph gemm = matmul_graph(DType::f32);  // 1024^3: y[i, j] = sum_k x[i, k] w[k, j]
  auto tiles = [](int64_t rows, int64_t cols) {
    TileConfig c;
    c.levels = {LevelTile{"l2", {rows, cols}, {16}}, LevelTile{"registers", {8, 8}, {1}}};
    return c;
  };
  // w is read along j, the output's innermost axis: each task brings its 1024 x cols panel of w
  // (4 KiB per column) from the level the tasks load from; x (not read along j) brings none.
  const MemoryLevel& from = cpu.memory_levels[cpu.memory_levels.size() - 2];  // the L3: DRAM is host memory
  REQUIRE(from.scope != MemoryScope::host);
  double previous = std::numeric_limits<double>::infinity();
  for (int64_t rows : {64, 128, 256, 512}) {
    CAPTURE(rows);
    const CostBreakdown c = AnalyticCostModel().estimate(gemm, single(tiles(rows, 128)), cpu);
    const double tasks = (1024.0 / static_cast<double>(rows)) * (1024.0 / 128);
    const double active = std::min(1.0, tasks / static_cast<double>(cpu.compute.units));
    CHECK(c.term("panel") == doctest::Approx(tasks * 1024 * 128 * 4 / (from.bandwidth_gbps * 1e9 * active)));
    double worst = c.term("compute");
    for (const LevelCost& l : c.memory) worst = std::max(worst, l.seconds);
    CHECK(c.latency_s == doctest::Approx(c.term("launch") + worst + c.term("panel")));
    CHECK(c.term("panel") < previous);
    previous = c.term("panel");
  }
  // GPUs stage operands through shared memory in the pipelined loop the levels price: no panels.
  const CostBreakdown g = AnalyticCostModel().estimate(matmul_graph(DType::f16), single(gemm_tiles()), toy_gpu());
  CHECK(g.term("panel") == 0);
}
