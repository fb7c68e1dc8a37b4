// Bad schedule JSON: every class of problem must raise a UserError whose location is the JSON
// pointer of the bad value and whose message names the offending value. An InternalError (or any
// other exception) fails the test. Each case edits one spot of a small valid schedule (kValid).
#include <doctest/doctest.h>

#include <string>

#include "../test_util.h"
#include "policy/schedule_json.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

// x -> a: t = x + x -> b: y = relu(t); nodes and tensors named after the ops and tensors.
OpGraph chain() {
  ModelDef m;
  m.name = "chain";
  m.inputs.push_back({"x", TensorType{DType::f32, {64, 128}}});
  m.ops.push_back(OpDef{"a", "Add", {"x", "x"}, {"t"}, {}, ""});
  m.ops.push_back(OpDef{"b", "Relu", {"t"}, {"y"}, {}, ""});
  m.outputs = {"y"};
  return lower_model(m);
}

// The valid schedule, with node names NODE_A / NODE_B filled in from the lowered graph.
std::string valid(const OpGraph& g) {
  std::string text = R"({"format": "tessel-schedule", "policy": "roller", "cost_model": "analytic",
  "hw_spec": "toy", "hw_spec_hash": "00000000000000ff", "predicted_latency_s": 1e-5,
  "groups": [
    {"nodes": ["NODE_A"], "tiles": {"NODE_A": {"levels": [{"level": "smem", "spatial": [8, 128], "reduction": []}],
                                              "threads": [8, 128]}},
     "edge_levels": {},
     "predicted": {"latency_s": 5e-6, "bound": "dram", "blocks": 8, "memory": [{"level": "dram", "bytes": 65536, "seconds": 1e-6}],
                   "notes": ["n"], "tensor_cores": false}},
    {"nodes": ["NODE_B"], "tiles": {"NODE_B": {"levels": [{"level": "smem", "spatial": [8, 128]}]}}}],
  "unfused": [{"tensor": "TENSOR_T", "producer": "NODE_A", "consumer": "NODE_B", "reason": "policy", "detail": "d"}]})";
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  };
  replace_all("NODE_A", g.node(0).name());
  replace_all("NODE_B", g.node(1).name());
  replace_all("TENSOR_T", g.tensor(g.node_output(0)).name);
  return text;
}

std::string edit(const std::string& base, const std::string& from, const std::string& to) {
  const size_t at = base.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "test bug: '", from, "' is not in the schedule");
  return base.substr(0, at) + to + base.substr(at + from.size());
}

void expect_user_error(const OpGraph& g, const std::string& text, const std::string& pointer, const std::string& value) {
  CAPTURE(text);
  try {
    schedule_from_json(text, "bad.json", g);
    FAIL("no error for a bad schedule");
  } catch (const UserError& e) {
    CHECK(e.file() == "bad.json");
    CHECK(e.location() == pointer);
    CHECK_MESSAGE(std::string(e.what()).find(value) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("bad schedule JSON: the valid base parses") {
  const OpGraph g = chain();
  const Schedule s = schedule_from_json(valid(g), "ok.json", g);
  CHECK(s.groups.size() == 2);
  CHECK(s.unfused.size() == 1);
}

TEST_CASE("bad schedule JSON: malformed text") {
  const OpGraph g = chain();
  expect_user_error(g, valid(g).substr(0, 40), "", "malformed JSON");
  expect_user_error(g, "[1, 2]", "", "expected an object");
}

TEST_CASE("bad schedule JSON: unknown node and tensor names") {
  const OpGraph g = chain();
  const std::string a = g.node(0).name();
  const std::string base = valid(g);
  expect_user_error(g, edit(base, "\"nodes\": [\"" + a + "\"]", "\"nodes\": [\"nope\"]"), "/groups/0/nodes/0", "\"nope\"");
  expect_user_error(g, edit(base, "\"tiles\": {\"" + a + "\"", "\"tiles\": {\"ghost/1\""), "/groups/0/tiles/ghost~11",
                    "\"ghost/1\"");
  expect_user_error(g, edit(base, "\"producer\": \"" + a + "\"", "\"producer\": \"zz\""), "/unfused/0/producer", "\"zz\"");
  expect_user_error(g, edit(base, "\"tensor\": \"" + g.tensor(g.node_output(0)).name + "\"", "\"tensor\": \"w9\""),
                    "/unfused/0/tensor", "\"w9\"");
  expect_user_error(g, edit(base, "\"edge_levels\": {}", "\"edge_levels\": {\"q\": \"smem\"}"), "/groups/0/edge_levels/q",
                    "\"q\"");
  // An unfused edge must name all three (found by fuzz_schedule_json: a missing producer reached the
  // printer as node -1).
  expect_user_error(g, edit(base, "\"producer\": \"" + a + "\", ", ""), "/unfused/0", "\"producer\"");
  expect_user_error(g, edit(base, "\"tensor\": \"" + g.tensor(g.node_output(0)).name + "\", ", ""), "/unfused/0",
                    "\"tensor\"");
}

TEST_CASE("bad schedule JSON: unknown keys") {
  const OpGraph g = chain();
  const std::string base = valid(g);
  expect_user_error(g, edit(base, "\"policy\"", "\"polcy\""), "/polcy", "\"polcy\"");
  expect_user_error(g, edit(base, "\"edge_levels\"", "\"edges\""), "/groups/0/edges", "\"edges\"");
  expect_user_error(g, edit(base, "\"bound\"", "\"bond\""), "/groups/0/predicted/bond", "\"bond\"");
  expect_user_error(g, edit(base, "\"bytes\"", "\"byte\""), "/groups/0/predicted/memory/0/byte", "\"byte\"");
  expect_user_error(g, edit(base, "\"detail\"", "\"details\""), "/unfused/0/details", "\"details\"");
  // Inside a tile config: the tile-config reader's pointer, prefixed with the config's place.
  expect_user_error(g, edit(base, "\"threads\"", "\"thread\""), cat("/groups/0/tiles/", g.node(0).name(), "/thread"),
                    "\"thread\"");
}

TEST_CASE("bad schedule JSON: wrong types and values") {
  const OpGraph g = chain();
  const std::string base = valid(g);
  expect_user_error(g, edit(base, "\"policy\": \"roller\"", "\"policy\": 3"), "/policy", "3");
  expect_user_error(g, edit(base, "\"hw_spec_hash\": \"00000000000000ff\"", "\"hw_spec_hash\": 255"), "/hw_spec_hash", "255");
  expect_user_error(g, edit(base, "\"hw_spec_hash\": \"00000000000000ff\"", "\"hw_spec_hash\": \"xyz\""), "/hw_spec_hash",
                    "\"xyz\"");
  expect_user_error(g, edit(base, "\"predicted_latency_s\": 1e-5", "\"predicted_latency_s\": \"fast\""),
                    "/predicted_latency_s", "\"fast\"");
  expect_user_error(g, R"({"groups": {"a": 1}})", "/groups", "{\"a\":1}");
  expect_user_error(g, edit(base, "\"blocks\": 8", "\"blocks\": 8.5"), "/groups/0/predicted/blocks", "8.5");
  expect_user_error(g, edit(base, "\"tensor_cores\": false", "\"tensor_cores\": 0"), "/groups/0/predicted/tensor_cores", "0");
  expect_user_error(g, edit(base, "\"notes\": [\"n\"]", "\"notes\": [1]"), "/groups/0/predicted/notes/0", "1");
  expect_user_error(g, edit(base, "\"reason\": \"policy\"", "\"reason\": \"taste\""), "/unfused/0/reason", "\"taste\"");
  expect_user_error(g, edit(base, "\"format\": \"tessel-schedule\"", "\"format\": \"tessel-model\""), "/format",
                    "\"tessel-model\"");
  expect_user_error(g, edit(base, "\"spatial\": [8, 128], \"reduction\"", "\"spatial\": [8, 0], \"reduction\""),
                    cat("/groups/0/tiles/", g.node(0).name(), "/levels/0/spatial/1"), "0");
  expect_user_error(g, edit(base, "\"tiles\": {\"" + g.node(0).name() + "\": {", "\"tiles\": {\"" + g.node(0).name() + "\": 5, \"zz\": {"),
                    cat("/groups/0/tiles/", g.node(0).name()), "5");
}

TEST_CASE("bad schedule JSON: missing required keys") {
  const OpGraph g = chain();
  expect_user_error(g, R"({"policy": "roller"})", "", "\"groups\"");
  expect_user_error(g, R"({"groups": [{"tiles": {}}]})", "/groups/0", "\"nodes\"");
  expect_user_error(g, R"({"groups": [{"nodes": []}]})", "/groups/0", "\"tiles\"");
}

TEST_CASE("bad schedule JSON: a kernel family record that is not one") {
  const OpGraph g = chain();
  const std::string base = valid(g);
  const std::string at = "\"edge_levels\": {},";
  auto with = [&](const std::string& kernel) { return edit(base, at, at + " \"kernel\": " + kernel + ","); };
  schedule_from_json(with(R"({"family": "generic", "params": {"threads": 128}, "rejected": ["mma: f32"]})"), "ok.json", g);
  expect_user_error(g, with("\"wgmma\""), "/groups/0/kernel", "\"wgmma\"");
  expect_user_error(g, with(R"({"params": {}})"), "/groups/0/kernel", "missing key \"family\"");
  expect_user_error(g, with(R"({"family": ""})"), "/groups/0/kernel/family", "\"\"");
  expect_user_error(g, with(R"({"family": "mma", "params": {"stages": 2.5}})"), "/groups/0/kernel/params/stages", "2.5");
  expect_user_error(g, with(R"({"family": "mma", "params": [1]})"), "/groups/0/kernel/params", "[1]");
  expect_user_error(g, with(R"({"family": "mma", "rejected": [7]})"), "/groups/0/kernel/rejected/0", "7");
  expect_user_error(g, with(R"({"family": "mma", "tile": 1})"), "/groups/0/kernel/tile", "tile");
}
