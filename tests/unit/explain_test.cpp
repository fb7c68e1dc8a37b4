// Schedule explanations on a hand-built schedule: MatMul -> Add (bias) fused at registers, then a
// Relu in its own kernel because of a (stated) capacity reason. Text, dot and HTML name the
// groups, levels, reasons and totals.
#include <doctest/doctest.h>

#include "../test_util.h"
#include "cost_model/cost_model.h"
#include "policy/explain.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

struct Fixture {
  OpGraph graph;
  HwSpec spec;
  Schedule schedule;
};

Fixture make() {
  ModelDef m;
  m.name = "mlp";
  m.inputs.push_back({"x", TensorType{DType::f16, {256, 256}}});
  m.weights.push_back({"w", TensorType{DType::f16, {256, 256}}, RandomInit{}});
  m.weights.push_back({"b", TensorType{DType::f16, {256}}, RandomInit{}});
  m.ops.push_back({"mm", "MatMul", {"x", "w"}, {"h"}, {}, ""});
  m.ops.push_back({"bias", "Add", {"h", "b"}, {"hb"}, {}, ""});
  m.ops.push_back({"act", "Relu", {"hb"}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  Fixture f{lower_model(m), load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json"), {}};
  const auto cost = std::move(cost_models().front());
  TileConfig mm_tiles, ew_tiles;
  mm_tiles.levels = {LevelTile{"smem", {64, 64}, {32}}};
  ew_tiles.levels = {LevelTile{"smem", {64, 64}, {}}};
  ScheduleGroup g0, g1;
  g0.group.nodes = {0, 1};
  g0.group.tiles = {{0, mm_tiles}, {1, ew_tiles}};
  g0.group.edge_levels[f.graph.node_output(0)] = "registers";
  g0.predicted = cost->estimate(f.graph, g0.group, f.spec);
  g1.group.nodes = {2};
  g1.group.tiles = {{2, ew_tiles}};
  g1.predicted = cost->estimate(f.graph, g1.group, f.spec);
  f.schedule.policy = "hand";
  f.schedule.cost_model = "analytic";
  f.schedule.hw_spec = f.spec.name;
  f.schedule.groups = {g0, g1};
  f.schedule.unfused.push_back({f.graph.node_output(1), 1, 2, UnfusedReason::capacity, "needs 300 KiB, limit 227 KiB"});
  f.schedule.predicted_latency_s = g0.predicted.latency_s + g1.predicted.latency_s;
  return f;
}

}  // namespace

TEST_CASE("explain: totals compare with every node on its own") {
  const Fixture f = make();
  const auto cost = std::move(cost_models().front());
  const Explanation e = explain_totals(f.graph, f.schedule, f.spec, *cost);
  CHECK(e.nodes == 3);
  CHECK(e.kernels == 2);
  CHECK(e.predicted_s == f.schedule.predicted_latency_s);
  // Fusing the bias removes one write and one read of the 256x256 f16 intermediate.
  CHECK(e.unfused_device_bytes - e.device_bytes == doctest::Approx(2.0 * 256 * 256 * 2).epsilon(0.05));
  CHECK(e.unfused_predicted_s > e.predicted_s);
}

TEST_CASE("explain: text, dot and html name groups, levels and reasons") {
  const Fixture f = make();
  const auto cost = std::move(cost_models().front());
  const Explanation e = explain_totals(f.graph, f.schedule, f.spec, *cost);
  const std::string text = explain_text(f.graph, f.schedule, e);
  CHECK(text.find("3 nodes in 2 kernels") != std::string::npos);
  CHECK(text.find("kernel 0: mm, bias") != std::string::npos);
  CHECK(text.find("h @ registers") != std::string::npos);
  CHECK(text.find("bias -> act (hb): capacity: needs 300 KiB, limit 227 KiB") != std::string::npos);
  CHECK(text.find("totals: 2 kernels (3 unfused)") != std::string::npos);

  const std::string dot = explain_dot(f.graph, f.schedule);
  CHECK(dot.find("subgraph cluster_0") != std::string::npos);
  CHECK(dot.find("n0 -> n1 [color=\"#1b9e77\"") != std::string::npos);  // registers
  CHECK(dot.find("n1 -> n2") != std::string::npos);
  CHECK(dot.find("label=\"capacity\"") != std::string::npos);

  const std::string html = explain_html(f.graph, f.schedule, e, "<?xml?><svg>picture</svg>");
  CHECK(html.find("<svg>picture</svg>") != std::string::npos);
  CHECK(html.find("<?xml") == std::string::npos);
  CHECK(html.find("needs 300 KiB, limit 227 KiB") != std::string::npos);
  CHECK(html.find("</html>") != std::string::npos);
}
