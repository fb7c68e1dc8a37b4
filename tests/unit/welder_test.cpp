// The welder policy: which edges it fuses, at which memory level, and why it leaves the others in
// device memory -- on small graphs built here (GEMM epilogue, layernorm into a GEMM, softmax, a
// row too long for shared memory) and on every bundled model (never predicted slower than roller,
// deterministic).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "../model_builder.h"
#include "../schedule_util.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "policy/welder.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;
using tessel::testing::source_path;

namespace {


const HwSpec& h100() {
  static const HwSpec spec = load_hw_spec(source_path("hw_specs/nvidia-h100-sxm.json"));
  return spec;
}

// A model of single-output ops; `weights` are model weights with a seeded random init.
struct ModelBuilder {
  ModelDef m;
  void input(const std::string& name, DType t, std::vector<int64_t> shape) { m.inputs.push_back({name, {t, std::move(shape)}}); }
  void weight(const std::string& name, DType t, std::vector<int64_t> shape) {
    m.weights.push_back({name, {t, std::move(shape)}, RandomInit{RandomInit::Dist::uniform, -1.0, 1.0, m.weights.size() + 1}});
  }
  void op(const std::string& type, std::vector<std::string> in, const std::string& out,
          std::map<std::string, AttrValue> attrs = {}) {
    m.ops.push_back(OpDef{out, type, std::move(in), {out}, std::move(attrs), ""});
  }
  OpGraph lower(const std::string& output) {
    m.name = "test";
    m.outputs = {output};
    return lower_model(m);
  }
};

Schedule run_welder(const OpGraph& g, const HwSpec& spec) {
  const AnalyticCostModel cost;
  return WelderPolicy().schedule(PolicyContext{g, spec, cost});
}

std::string describe(const OpGraph& g, const Schedule& s) {
  std::string out;
  for (const ScheduleGroup& grp : s.groups) {
    out += "group:";
    for (NodeId n : grp.group.nodes) out += " " + g.node(n).name();
    for (const auto& [t, level] : grp.group.edge_levels) out += " [" + g.tensor(t).name + "@" + level + "]";
    out += "\n";
  }
  for (const UnfusedEdge& e : s.unfused)
    out += cat("unfused ", g.tensor(e.tensor).name, ": ", unfused_reason_name(e.reason), ": ", e.detail, "\n");
  return out;
}

bool same_mapping(const TileConfig& a, const TileConfig& b) {
  if (a.threads != b.threads || a.levels.size() != b.levels.size()) return false;
  for (size_t i = 0; i < a.levels.size(); ++i)
    if (a.levels[i].spatial != b.levels[i].spatial) return false;
  return true;
}

// The (single) group holding node n.
const ScheduleGroup& group_with(const OpGraph& g, const Schedule& s, NodeId n) {
  const std::vector<int> of = group_of_nodes(g, s);
  REQUIRE(of[n] >= 0);
  return s.groups[of[n]];
}

// Every schedule invariant a consumer of a Schedule relies on.
void check_well_formed(const OpGraph& g, const Schedule& s) {
  const std::vector<int> of = group_of_nodes(g, s);
  for (NodeId n = 0; n < g.num_nodes(); ++n) CHECK(of[n] >= 0);
  double total = 0;
  for (size_t i = 0; i < s.groups.size(); ++i) {
    const ScheduledGroup& grp = s.groups[i].group;
    total += s.groups[i].predicted.latency_s;
    CHECK(std::isfinite(s.groups[i].predicted.latency_s));
    for (NodeId n : grp.nodes) {
      REQUIRE(grp.tiles.count(n));
      CHECK_FALSE(check_tile_config(g.node(n), grp.tiles.at(n)));
      // Producers come in earlier groups or earlier in the same group.
      for (TensorId t : g.node_inputs(n)) {
        const NodeId p = g.producer(t);
        if (p < 0) continue;
        CHECK(of[p] <= static_cast<int>(i));
        if (of[p] == static_cast<int>(i)) CHECK(grp.edge_levels.count(t));
      }
    }
  }
  CHECK(s.predicted_latency_s == doctest::Approx(total));
  for (const UnfusedEdge& e : s.unfused) {
    CHECK(of[e.producer] != of[e.consumer]);
    CHECK_FALSE(e.detail.empty());
  }
}

}  // namespace

TEST_CASE("a GEMM + bias + GELU epilogue fuses into one kernel with the intermediates in registers") {
  ModelBuilder b;
  b.input("x", DType::f16, {4096, 768});
  b.weight("w", DType::f16, {768, 3072});
  b.weight("bias", DType::f16, {3072});
  b.op("MatMul", {"x", "w"}, "mm");
  b.op("Add", {"mm", "bias"}, "biased");
  b.op("Gelu", {"biased"}, "act");
  const OpGraph g = b.lower("act");
  const Schedule s = run_welder(g, h100());
  INFO(describe(g, s));
  check_well_formed(g, s);
  REQUIRE(s.groups.size() == 1);
  const ScheduledGroup& grp = s.groups[0].group;
  CHECK(grp.nodes.size() == static_cast<size_t>(g.num_nodes()));
  CHECK(grp.nodes.back() == g.producer(g.outputs()[0]));
  REQUIRE(grp.edge_levels.size() == 2);
  // Both intermediates stay in registers: the epilogue runs on the GEMM's thread mapping (each
  // thread applies bias and GELU to its own accumulator tile), and nothing is staged in shared
  // memory but the GEMM's operands.
  for (NodeId n : grp.nodes) CHECK(same_mapping(grp.tiles.at(n), grp.tiles.at(grp.nodes.front())));
  for (const auto& [t, level] : grp.edge_levels) {
    const std::string name = g.tensor(t).name;
    CHECK_MESSAGE(level == "registers", name);
  }
  CHECK(s.unfused.empty());
  CHECK(s.groups[0].predicted.tensor_cores);
  CHECK(s.policy == "welder");
}

TEST_CASE("layernorm feeding a GEMM: the row statistics fuse, the GEMM does not") {
  // LayerNorm lowers to row statistics (reductions over the hidden axis) and an elementwise
  // normalization; the GEMM reads the normalized rows along its reduction axis. The statistics
  // fuse into the normalization at smem (a reduction in between: another thread mapping). Fusing
  // the normalization into the GEMM needs whole normalized rows per GEMM tile, and the GEMM's
  // tiles along N would each recompute the same rows (check_grid's grid mismatch), so welder
  // widens the GEMM tile to all N = 3072 columns: then the accumulator and the weight slices are
  // 3072 wide, and even after halving the tile's rows the group needs about 344 KiB per block
  // (rows of x and of the normalized activations staged next to the GEMM's operands), over the
  // H100's 227 KiB. The expected choice is therefore: the edge stays in device memory, reason
  // capacity, with the numbers in the detail.
  ModelBuilder b;
  b.input("x", DType::f16, {4096, 768});
  b.weight("gamma", DType::f16, {768});
  b.weight("beta", DType::f16, {768});
  b.weight("w", DType::f16, {768, 3072});
  b.op("LayerNormalization", {"x", "gamma", "beta"}, "ln", {{"axis", int64_t{-1}}});
  b.op("MatMul", {"ln", "w"}, "mm");
  const OpGraph g = b.lower("mm");
  const Schedule s = run_welder(g, h100());
  INFO(describe(g, s));
  check_well_formed(g, s);
  REQUIRE(s.groups.size() == 2);
  const NodeId mm = g.producer(g.outputs()[0]);
  CHECK(group_with(g, s, mm).group.nodes.size() == 1);
  const ScheduledGroup& ln = s.groups[0].group;
  CHECK(ln.nodes.size() == static_cast<size_t>(g.num_nodes() - 1));
  bool smem = false;
  for (const auto& [t, level] : ln.edge_levels) smem |= level == "smem";
  CHECK(smem);
  REQUIRE(s.unfused.size() == 1);
  const UnfusedEdge& e = s.unfused[0];
  CHECK(e.consumer == mm);
  CHECK(e.reason == UnfusedReason::capacity);
  CHECK(e.detail.find("KiB") != std::string::npos);
}

TEST_CASE("an embedding lookup is tiled by the rows its indices name, not one element at a time") {
  // BERT's word embeddings: 1024 tokens read 1024 rows of a 30522 x 768 f16 table. Priced as
  // reading the whole table per tile, a lookup took one-element tiles (786432 blocks, predicted
  // 230 ms, measured 0.49 ms on an H200; 2026-11-29e call 1).
  testing::ModelBuilder b(DType::f16);
  const OpGraph g = b.graph(b.op("Gather", {b.weight("table", {30522, 768}, 1), b.input_i64("ids", {8, 128})}));
  const Schedule s = testing::schedule_with(g, testing::shipped_spec("nvidia-h100-sxm"), "welder");
  REQUIRE(s.groups.size() == 1);
  CHECK(s.groups[0].predicted.latency_s < 50e-6);
  CHECK(s.groups[0].predicted.blocks < 10000);
}

TEST_CASE("softmax fuses into one kernel with whole-row tiles") {
  ModelBuilder b;
  b.input("x", DType::f16, {4096, 1024});
  b.op("Softmax", {"x"}, "y", {{"axis", int64_t{-1}}});
  const OpGraph g = b.lower("y");
  const Schedule s = run_welder(g, h100());
  INFO(describe(g, s));
  check_well_formed(g, s);
  REQUIRE(s.groups.size() == 1);
  const ScheduledGroup& grp = s.groups[0].group;
  const NodeId sink = grp.nodes.back();
  const TeNode& node = g.node(sink);
  // The sink's tile covers the whole row (the softmax axis is the last spatial axis).
  CHECK(grp.tiles.at(sink).levels.front().spatial.back() >= node.axes()[node.num_spatial() - 1].extent);
  for (const auto& [t, level] : grp.edge_levels) CHECK(level == "smem");
  CHECK(s.unfused.empty());
}

TEST_CASE("a row too long for shared memory leaves the intermediate in device memory (capacity)") {
  // exp(x) summed over rows of 262144 f32 elements. The sum reads exp(x) along its reduction axis
  // (another thread mapping), so the edge could only be shared memory, and one block of the sum
  // needs the whole exp row, 1 MiB, over the H100's 227 KiB per block.
  ModelBuilder b;
  b.input("x", DType::f32, {64, 262144});
  b.op("Exp", {"x"}, "e");
  b.op("ReduceSum", {"e"}, "s", {{"axes", std::vector<int64_t>{-1}}});
  const OpGraph g = b.lower("s");
  const Schedule s = run_welder(g, h100());
  INFO(describe(g, s));
  check_well_formed(g, s);
  REQUIRE(s.groups.size() == 2);
  REQUIRE(s.unfused.size() == 1);
  CHECK(s.unfused[0].reason == UnfusedReason::capacity);
  CHECK(s.unfused[0].detail.find("shared memory per block, limit 227.0 KiB") != std::string::npos);
}

TEST_CASE("softmax over a long row: statistics in their own kernels, each edge's reason recorded") {
  // Softmax over 262144 f32 elements lowers to a row max, a row sum of exp(x - max) and the
  // normalization. The max feeds both other nodes (welder does not recompute it); fusing the sum
  // into the normalization fits (neither stages a whole row) but re-reads x, which the model
  // predicts slower than two kernels.
  ModelBuilder b;
  b.input("x", DType::f32, {64, 262144});
  b.op("Softmax", {"x"}, "y", {{"axis", int64_t{-1}}});
  const OpGraph g = b.lower("y");
  const Schedule s = run_welder(g, h100());
  INFO(describe(g, s));
  check_well_formed(g, s);
  CHECK(s.groups.size() == 3);
  REQUIRE(s.unfused.size() == 3);
  for (const UnfusedEdge& e : s.unfused) {
    CHECK((e.reason == UnfusedReason::policy || e.reason == UnfusedReason::cost));
    if (e.reason == UnfusedReason::cost) CHECK(e.detail.find(" fused vs ") != std::string::npos);
    if (e.reason == UnfusedReason::policy) CHECK(e.detail.find("no recomputation") != std::string::npos);
  }
}

TEST_CASE("welder is deterministic and never predicted slower than roller on the bundled models") {
  const AnalyticCostModel cost;
  const HwSpec cpu = load_hw_spec(source_path("hw_specs/x86-64-avx512-server.json"));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(source_path("experiments/models")))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);
  for (const std::string& file : files) {
    const OpGraph g = lower_model(load_model(file));
    for (const HwSpec* spec : {&h100(), &cpu}) {
      CAPTURE(file);
      CAPTURE(spec->name);
      const PolicyContext ctx{g, *spec, cost};
      const Schedule w = WelderPolicy().schedule(ctx);
      const Schedule r = RollerPolicy().schedule(ctx);
      check_well_formed(g, w);
      CHECK(w.predicted_latency_s <= r.predicted_latency_s * (1 + 1e-12));
      CHECK(w.groups.size() <= r.groups.size());
      const Schedule again = WelderPolicy().schedule(ctx);
      REQUIRE(again.groups.size() == w.groups.size());
      for (size_t i = 0; i < w.groups.size(); ++i) {
        CHECK(again.groups[i].group.nodes == w.groups[i].group.nodes);
        CHECK(again.groups[i].group.tiles == w.groups[i].group.tiles);
        CHECK(again.groups[i].group.edge_levels == w.groups[i].group.edge_levels);
        CHECK(again.groups[i].predicted.latency_s == w.groups[i].predicted.latency_s);
      }
      REQUIRE(again.unfused.size() == w.unfused.size());
      for (size_t i = 0; i < w.unfused.size(); ++i) {
        CHECK(again.unfused[i].tensor == w.unfused[i].tensor);
        CHECK(again.unfused[i].consumer == w.unfused[i].consumer);
        CHECK(again.unfused[i].detail == w.unfused[i].detail);
      }
    }
  }
}
