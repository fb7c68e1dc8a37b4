// Schedule JSON (schedule_json.h): the written form (names, key order, hex hash, tile configs in
// the tile-config format), exact round trips including non-finite numbers, every field.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "../test_util.h"
#include "policy/schedule_json.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

// x -> a = x + x -> b = relu(a), names known.
OpGraph chain() {
  ModelDef m;
  m.name = "chain";
  m.inputs.push_back({"x", TensorType{DType::f32, {64, 128}}});
  m.ops.push_back(OpDef{"a", "Add", {"x", "x"}, {"t"}, {}, ""});
  m.ops.push_back(OpDef{"b", "Relu", {"t"}, {"y"}, {}, ""});
  m.outputs = {"y"};
  return lower_model(m);
}

Schedule sample(const OpGraph& g) {
  Schedule s;
  s.policy = "welder";
  s.cost_model = "analytic";
  s.hw_spec = "toy";
  s.hw_spec_hash = 0xfedcba9876543210ull;
  ScheduleGroup sg;
  sg.group.nodes = {0, 1};
  TileConfig c;
  c.levels = {LevelTile{"smem", {16, 128}, {}}, LevelTile{"registers", {1, 4}, {}}};
  c.threads = {16, 32};
  c.vector_width = 4;
  c.pipeline_stages = 2;
  c.raster_group = 8;
  sg.group.tiles[0] = c;
  sg.group.tiles[1] = c;
  sg.group.edge_levels[g.node_output(0)] = "registers";
  sg.group.kernel = KernelChoice{"mma", {{"block_m", 64}, {"stages", 3}}, {"flash: not streamed", "wgmma: \"no\""}};
  sg.predicted.latency_s = 1.0 / 3.0 * 1e-5;
  sg.predicted.terms = {CostTerm{"compute", 0.1 + 0.2}, CostTerm{"launch", 3e-6}, CostTerm{"a policy's own term", 1e-9}};
  sg.predicted.flops = 16384;
  sg.predicted.tensor_cores = true;
  sg.predicted.memory = {LevelCost{"l2", 98304, 1e-8 / 7}, LevelCost{"dram", 65536, 2.5e-8}};
  sg.predicted.bound = "dram";
  sg.predicted.blocks = 4;
  sg.predicted.blocks_per_unit = 3;
  sg.predicted.waves = 1;
  sg.predicted.occupancy = 0.375;
  sg.predicted.notes = {"a note with \"quotes\" and a / slash"};
  s.groups.push_back(sg);
  s.unfused.push_back({g.node_output(0), 0, 1, UnfusedReason::cost, "fused is 2% slower"});
  s.predicted_latency_s = sg.predicted.latency_s;
  return s;
}

void check_equal(const Schedule& a, const Schedule& b) {
  CHECK(a.policy == b.policy);
  CHECK(a.cost_model == b.cost_model);
  CHECK(a.hw_spec == b.hw_spec);
  CHECK(a.hw_spec_hash == b.hw_spec_hash);
  CHECK(a.predicted_latency_s == b.predicted_latency_s);
  REQUIRE(a.groups.size() == b.groups.size());
  for (size_t i = 0; i < a.groups.size(); ++i) {
    const ScheduleGroup &x = a.groups[i], &y = b.groups[i];
    CHECK(x.group.nodes == y.group.nodes);
    CHECK(x.group.tiles == y.group.tiles);
    CHECK(x.group.edge_levels == y.group.edge_levels);
    CHECK(x.group.kernel.family == y.group.kernel.family);
    CHECK(x.group.kernel.params == y.group.kernel.params);
    CHECK(x.group.kernel.rejected == y.group.kernel.rejected);
    CHECK(x.predicted.latency_s == y.predicted.latency_s);
    CHECK(x.predicted.terms == y.predicted.terms);
    CHECK(x.predicted.flops == y.predicted.flops);
    CHECK(x.predicted.tensor_cores == y.predicted.tensor_cores);
    REQUIRE(x.predicted.memory.size() == y.predicted.memory.size());
    for (size_t k = 0; k < x.predicted.memory.size(); ++k) {
      CHECK(x.predicted.memory[k].level == y.predicted.memory[k].level);
      CHECK(x.predicted.memory[k].bytes == y.predicted.memory[k].bytes);
      CHECK(x.predicted.memory[k].seconds == y.predicted.memory[k].seconds);
    }
    CHECK(x.predicted.bound == y.predicted.bound);
    CHECK(x.predicted.blocks == y.predicted.blocks);
    CHECK(x.predicted.blocks_per_unit == y.predicted.blocks_per_unit);
    CHECK(x.predicted.waves == y.predicted.waves);
    CHECK(x.predicted.occupancy == y.predicted.occupancy);
    CHECK(x.predicted.notes == y.predicted.notes);
  }
  REQUIRE(a.unfused.size() == b.unfused.size());
  for (size_t i = 0; i < a.unfused.size(); ++i) {
    CHECK(a.unfused[i].tensor == b.unfused[i].tensor);
    CHECK(a.unfused[i].producer == b.unfused[i].producer);
    CHECK(a.unfused[i].consumer == b.unfused[i].consumer);
    CHECK(a.unfused[i].reason == b.unfused[i].reason);
    CHECK(a.unfused[i].detail == b.unfused[i].detail);
  }
}

}  // namespace

TEST_CASE("schedule JSON: names, key order, hash and tile configs in the written form") {
  const OpGraph g = chain();
  const std::string text = schedule_to_json(sample(g), g);
  CHECK(text.find("\"format\": \"tessel-schedule\"") < text.find("\"policy\": \"welder\""));
  CHECK(text.find("\"hw_spec_hash\": \"fedcba9876543210\"") != std::string::npos);
  CHECK(text.find("\"nodes\": [") != std::string::npos);
  CHECK(text.find("\"" + g.node(0).name() + "\"") != std::string::npos);
  CHECK(text.find("\"" + g.tensor(g.node_output(0)).name + "\": \"registers\"") != std::string::npos);
  CHECK(text.find("\"reason\": \"cost\"") != std::string::npos);
  CHECK(text.find("\"raster_group\": 8") != std::string::npos);
}

TEST_CASE("schedule JSON: exact round trip of every field") {
  const OpGraph g = chain();
  const Schedule s = sample(g);
  const std::string text = schedule_to_json(s, g);
  const Schedule back = schedule_from_json(text, "s.json", g);
  check_equal(s, back);
  CHECK(schedule_to_json(back, g) == text);
}

TEST_CASE("schedule JSON: infinite and NaN predictions survive as strings") {
  const OpGraph g = chain();
  Schedule s = sample(g);
  s.groups[0].predicted.latency_s = std::numeric_limits<double>::infinity();
  s.groups[0].predicted.bound = "capacity";
  s.groups[0].predicted.occupancy = std::numeric_limits<double>::quiet_NaN();
  s.predicted_latency_s = std::numeric_limits<double>::infinity();
  const std::string text = schedule_to_json(s, g);
  CHECK(text.find("\"latency_s\": \"inf\"") != std::string::npos);
  const Schedule back = schedule_from_json(text, "s.json", g);
  CHECK(std::isinf(back.groups[0].predicted.latency_s));
  CHECK(std::isnan(back.groups[0].predicted.occupancy));
  CHECK(std::isinf(back.predicted_latency_s));
  CHECK(schedule_to_json(back, g) == text);
}

TEST_CASE("schedule JSON: optional keys take the defaults") {
  const OpGraph g = chain();
  const std::string a = g.node(0).name(), b = g.node(1).name();
  const Schedule s = schedule_from_json(
      cat(R"({"groups": [{"nodes": [")", a, R"("], "tiles": {")", a, R"(": {"levels": [{"level": "smem", "spatial": [8, 8]}]}}},
                         {"nodes": [")", b, R"("], "tiles": {")", b, R"(": {"levels": [{"level": "smem", "spatial": [8, 8]}]}}}]})"),
      "s.json", g);
  REQUIRE(s.groups.size() == 2);
  CHECK(s.policy.empty());
  CHECK(s.hw_spec_hash == 0);
  CHECK(s.groups[1].group.nodes == std::vector<NodeId>{1});
  CHECK(s.groups[0].group.tiles.at(0).levels[0].spatial == std::vector<int64_t>{8, 8});
  CHECK(s.groups[0].group.edge_levels.empty());
  CHECK(s.unfused.empty());
}

TEST_CASE("schedule JSON: cost terms are a named list, a schedule saved before reads its old keys as terms") {
  const OpGraph g = chain();
  const std::string a = g.node(0).name(), b = g.node(1).name();
  const std::string tiles_a = cat(R"("tiles": {")", a, R"(": {"levels": [{"level": "smem", "spatial": [8, 8]}]}})");
  const std::string tiles_b = cat(R"("tiles": {")", b, R"(": {"levels": [{"level": "smem", "spatial": [8, 8]}]}})");
  const auto with_predicted = [&](const std::string& predicted) {
    return cat(R"({"groups": [{"nodes": [")", a, R"("], )", tiles_a, R"(, "predicted": )", predicted, R"(},
                              {"nodes": [")", b, R"("], )", tiles_b, "}]}");
  };
  const Schedule old = schedule_from_json(with_predicted(R"({"compute_s": 2e-6, "launch_s": 3e-6, "panel_s": 1e-7})"), "old.json", g);
  const CostBreakdown& p = old.groups[0].predicted;
  CHECK(p.term("compute") == 2e-6);
  CHECK(p.term("launch") == 3e-6);
  CHECK(p.term("panel") == 1e-7);
  CHECK(p.term("absent") == 0);
  const Schedule listed =
      schedule_from_json(with_predicted(R"({"terms": [{"name": "compute", "seconds": 2e-6}, {"name": "sync", "seconds": 1e-6}]})"),
                         "new.json", g);
  CHECK(listed.groups[0].predicted.terms == std::vector<CostTerm>{{"compute", 2e-6}, {"sync", 1e-6}});
  try {
    schedule_from_json(with_predicted(R"({"terms": [{"name": "compute"}, {"name": "compute"}]})"), "twice.json", g);
    FAIL("a repeated term was accepted");
  } catch (const UserError& e) {
    CHECK(e.location() == "/groups/0/predicted/terms/1/name");
    CHECK(e.message() == "term \"compute\" appears twice");
  }
}
