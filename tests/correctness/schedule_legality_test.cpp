// Schedule legality: roller schedules of every bundled model on every shipped hardware spec, and
// of a few hundred ONNX backend node-test models on a GPU and a CPU spec, pass the independent
// checker (check_schedule.h); the checker catches hand-broken schedules with messages naming the
// numbers; schedules round-trip through JSON.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "../onnx_node_data.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "hw_specs/hw_spec.h"
#include "policy/check_schedule.h"
#include "policy/policy.h"
#include "policy/roller.h"
#include "policy/schedule_json.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"

using namespace tessel;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Every shipped spec of a distinct chip: a multi-device system (nvidia-dgx-h100.json, ...) differs
// from its chip's spec only in the interconnect, which scheduling one device does not read.
std::vector<HwSpec> shipped_specs() {
  std::vector<HwSpec> specs;
  for (const fs::path& p : files_in(fs::path(TESSEL_SOURCE_DIR) / "hw_specs", ".json")) {
    HwSpec spec = load_hw_spec(p.string());
    const bool same_chip = std::any_of(specs.begin(), specs.end(), [&](const HwSpec& s) {
      return s.kind == spec.kind && s.memory_levels == spec.memory_levels && s.compute == spec.compute &&
             s.limits == spec.limits && s.target == spec.target;
    });
    if (!same_chip) specs.push_back(std::move(spec));
  }
  return specs;
}

HwSpec spec_named(const std::string& name) {
  return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/" + name + ".json");
}

// The specs model number `index` is scheduled on: every shipped spec for a fast policy; for z3, which
// solves an SMT problem per operator, `per_model` of them in turn (model i on specs i*k .. i*k+k-1,
// modulo their count), so every model and every spec is still covered at a fraction of the time.
std::vector<const HwSpec*> specs_for(const std::vector<HwSpec>& specs, const std::string& policy_name, size_t index,
                                     size_t per_model) {
  std::vector<const HwSpec*> out;
  if (policy_name != "z3" || per_model >= specs.size()) {
    for (const HwSpec& s : specs) out.push_back(&s);
    return out;
  }
  for (size_t j = 0; j < per_model; ++j) out.push_back(&specs[(index * per_model + j) % specs.size()]);
  return out;
}

Schedule roller(const OpGraph& g, const HwSpec& spec) {
  AnalyticCostModel cost;
  return RollerPolicy().schedule(PolicyContext{g, spec, cost});
}

std::string joined(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += p + "\n";
  return out;
}

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

// An ONNX node test lowered with the shapes of its first data set (onnx_node_data.h); nullopt when
// Tessel does not support it.
std::optional<OpGraph> lower_node_test(const fs::path& dir) {
  std::optional<testing::NodeTest> t = testing::load_node_test(dir);
  if (!t) return std::nullopt;
  return std::move(t->graph);
}

}  // namespace

TEST_CASE("schedule legality: roller on every bundled model and every shipped spec") {
  const std::vector<HwSpec> specs = shipped_specs();
  REQUIRE(specs.size() >= 7);
  for (const fs::path& model : files_in(fs::path(TESSEL_SOURCE_DIR) / "experiments" / "models", ".json")) {
    const OpGraph g = lower_model(load_model(model.string()));
    for (const HwSpec& spec : specs) {
      INFO(model.filename().string(), " on ", spec.name);
      const Schedule s = roller(g, spec);
      const std::vector<std::string> problems = check_schedule(g, spec, s);
      CHECK_MESSAGE(problems.empty(), joined(problems));
      CHECK(std::isfinite(s.predicted_latency_s));
    }
  }
}

// Every ONNX node-test model Tessel lowers, scheduled by `policy_name` on every shipped spec (z3: on
// one spec per model, in turn; specs_for). One test case per policy, so ctest runs (and times out)
// them apart: z3 solves one SMT problem per operator.
static void check_onnx_legality(const std::string& policy_name) {
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) {
    MESSAGE("[SKIP] no ONNX node tests at ", root.string());
    return;
  }
  const std::vector<HwSpec> specs = shipped_specs();
  AnalyticCostModel cost;
  std::unique_ptr<Policy> policy;
  for (auto& p : policies())
    if (p->name() == policy_name) policy = std::move(p);
  REQUIRE(policy);
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  int scheduled = 0, skipped = 0, pairs = 0;
  std::set<std::string> specs_seen;
  for (const fs::path& dir : tests) {
    std::optional<OpGraph> g;
    try {
      g = lower_node_test(dir);
    } catch (const UserError&) {
      g.reset();
    }
    if (!g || g->num_nodes() == 0) {
      ++skipped;
      continue;
    }
    for (const HwSpec* spec : specs_for(specs, policy_name, static_cast<size_t>(scheduled), 1)) {
      INFO(policy_name, ": ", dir.filename().string(), " on ", spec->name);
      const Schedule s = policy->schedule(PolicyContext{*g, *spec, cost});
      const std::vector<std::string> problems = check_schedule(*g, *spec, s);
      CHECK_MESSAGE(problems.empty(), joined(problems));
      ++pairs;
      specs_seen.insert(spec->name);
    }
    ++scheduled;
  }
  MESSAGE(policy_name, ": scheduled ", scheduled, " ONNX node-test models, ", pairs, " (model, spec) pairs on ",
          specs_seen.size(), " specs; skipped ", skipped);
  CHECK(scheduled >= 300);
  CHECK(specs_seen.size() == specs.size());
}

// The three shipped policies have cases of their own (ctest runs them in parallel); a policy
// registered later is checked by the last case, read off the registry, so adding one needs no
// edit here.
const std::vector<std::string> kPoliciesWithOwnCase = {"welder", "roller", "z3"};

TEST_CASE("schedule legality: welder on ONNX node-test models, every shipped spec") { check_onnx_legality("welder"); }
TEST_CASE("schedule legality: roller on ONNX node-test models, every shipped spec") { check_onnx_legality("roller"); }
TEST_CASE("schedule legality: z3 on ONNX node-test models, one shipped spec each, in turn") { check_onnx_legality("z3"); }
TEST_CASE("schedule legality: every other registered policy on ONNX node-test models") {
  for (const auto& p : policies()) {
    const std::string name(p->name());
    if (std::find(kPoliciesWithOwnCase.begin(), kPoliciesWithOwnCase.end(), name) == kPoliciesWithOwnCase.end())
      check_onnx_legality(name);
  }
}

TEST_CASE("check_schedule catches hand-broken schedules") {
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  const OpGraph g = lower_model(load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/bert_base_layer.json"));
  const Schedule good = roller(g, spec);
  REQUIRE(check_schedule(g, spec, good).empty());
  // The first GEMM's group.
  size_t gemm = 0;
  while (g.node(good.groups[gemm].group.nodes[0]).num_reduction() == 0 ||
         g.node(good.groups[gemm].group.nodes[0]).num_spatial() < 2)
    ++gemm;
  const NodeId gemm_node = good.groups[gemm].group.nodes[0];

  SUBCASE("over shared-memory capacity") {
    Schedule s = good;
    TileConfig& cfg = s.groups[gemm].group.tiles[gemm_node];
    for (int64_t& e : cfg.levels.front().spatial) e *= 64;
    for (int64_t& e : cfg.levels.front().reduction) e *= 64;  // staged inputs grow with the step
    for (int64_t& e : cfg.threads) e *= 64;
    const std::vector<std::string> p = check_schedule(g, spec, s);
    INFO(joined(p));
    CHECK(mentions(p, "shared memory per block, limit 232448"));
    CHECK(mentions(p, "threads per block, limit 1024"));
  }
  SUBCASE("a missing node") {
    Schedule s = good;
    const NodeId dropped = s.groups.back().group.nodes[0];
    s.groups.pop_back();
    const std::vector<std::string> p = check_schedule(g, spec, s);
    CHECK(mentions(p, cat("node '", g.node(dropped).name(), "' is in no group")));
  }
  SUBCASE("a node twice") {
    Schedule s = good;
    s.groups.push_back(s.groups.front());
    CHECK(mentions(check_schedule(g, spec, s), "is in group 0 and in group"));
  }
  SUBCASE("a level the spec does not have") {
    Schedule s = good;
    s.groups[gemm].group.tiles[gemm_node].levels.front().level = "l1d";
    const std::vector<std::string> p = check_schedule(g, spec, s);
    CHECK(mentions(p, "level 'l1d' is not a memory level of nvidia-h100-sxm"));
  }
  SUBCASE("levels out of order") {
    Schedule s = good;
    std::swap(s.groups[gemm].group.tiles[gemm_node].levels[0].level, s.groups[gemm].group.tiles[gemm_node].levels[1].level);
    CHECK(mentions(check_schedule(g, spec, s), "is not inside the level before it"));
  }
  SUBCASE("an invalid tile config") {
    Schedule s = good;
    s.groups[gemm].group.tiles[gemm_node].levels.front().spatial.pop_back();
    CHECK_FALSE(check_schedule(g, spec, s).empty());
  }
  SUBCASE("groups out of dependence order") {
    Schedule s = good;
    std::reverse(s.groups.begin(), s.groups.end());
    CHECK(mentions(check_schedule(g, spec, s), "before its producer"));
  }
  SUBCASE("an unaligned innermost tile") {
    Schedule s = good;
    TileConfig& cfg = s.groups[gemm].group.tiles[gemm_node];
    cfg.levels = {cfg.levels.front()};
    cfg.levels.front().spatial.back() = 3;
    cfg.threads.assign(cfg.levels.front().spatial.begin(), cfg.levels.front().spatial.end());
    cfg.pipeline_stages = 1;
    const std::vector<std::string> p = check_schedule(g, spec, s);
    INFO(joined(p));
    CHECK(mentions(p, "innermost tile extent 3"));
  }
  SUBCASE("an edge level outside any group") {
    Schedule s = good;
    const TensorId t = g.node_output(s.groups[0].group.nodes[0]);
    s.groups[0].group.edge_levels[t] = "smem";
    CHECK(mentions(check_schedule(g, spec, s), "not produced and consumed inside the group"));
  }
  SUBCASE("a fused group whose nodes need different grids") {
    // Softmax's row max with the elementwise node after it, tiled along the reduced axis.
    Schedule s = good;
    NodeId max_node = -1;
    for (NodeId n = 0; n < g.num_nodes(); ++n)
      if (g.node(n).name().find("probs.max") != std::string::npos) max_node = n;
    REQUIRE(max_node >= 0);
    NodeId next = -1;  // the elementwise consumer (not the sum of exponentials)
    for (NodeId c : g.consumers(g.node_output(max_node)))
      if (g.node(c).num_reduction() == 0) next = c;
    REQUIRE(next >= 0);
    const std::vector<int> group_of = group_of_nodes(g, s);
    ScheduleGroup& target = s.groups[group_of[next]];
    const ScheduleGroup moved = s.groups[group_of[max_node]];
    target.group.nodes.insert(target.group.nodes.begin(), max_node);
    target.group.tiles[max_node] = moved.group.tiles.at(max_node);
    s.groups.erase(s.groups.begin() + group_of[max_node]);
    const std::vector<std::string> p = check_schedule(g, spec, s);
    INFO(joined(p));
    CHECK(mentions(p, "do not share the grid"));
  }
}

TEST_CASE("schedule JSON round trip: roller schedules of bundled models on a GPU and a CPU") {
  for (const char* name : {"nvidia-h100-sxm", "x86-64-avx512-server"}) {
    const HwSpec spec = spec_named(name);
    for (const char* model : {"bert_base_layer", "resnet50_bottleneck", "llama_decoder_block"}) {
      const OpGraph g = lower_model(load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/" + model + ".json"));
      const Schedule s = roller(g, spec);
      const std::string text = schedule_to_json(s, g);
      const Schedule back = schedule_from_json(text, "x.json", g);
      INFO(model, " on ", name);
      CHECK(schedule_to_json(back, g) == text);
      REQUIRE(back.groups.size() == s.groups.size());
      CHECK(back.predicted_latency_s == s.predicted_latency_s);
      CHECK(back.hw_spec_hash == s.hw_spec_hash);
      for (size_t i = 0; i < s.groups.size(); ++i) {
        CHECK(back.groups[i].group.nodes == s.groups[i].group.nodes);
        CHECK(back.groups[i].group.tiles == s.groups[i].group.tiles);
        CHECK(back.groups[i].predicted.latency_s == s.groups[i].predicted.latency_s);
        CHECK(back.groups[i].predicted.notes == s.groups[i].predicted.notes);
      }
      CHECK(check_schedule(g, spec, back).empty());
    }
  }
}

static void check_bundled_legality(const std::string& policy_name) {
  const std::vector<HwSpec> specs = shipped_specs();
  AnalyticCostModel cost;
  for (const auto& policy : policies()) {
    if (policy->name() != policy_name) continue;
    std::set<std::string> specs_seen;
    size_t index = 0;
    for (const fs::path& model : files_in(fs::path(TESSEL_SOURCE_DIR) / "experiments" / "models", ".json")) {
      const OpGraph g = lower_model(load_model(model.string()));
      for (const HwSpec* spec : specs_for(specs, policy_name, index++, 2)) {
        INFO(policy->name(), ": ", model.filename().string(), " on ", spec->name);
        const Schedule s = policy->schedule(PolicyContext{g, *spec, cost});
        const std::vector<std::string> problems = check_schedule(g, *spec, s);
        CHECK_MESSAGE(problems.empty(), joined(problems));
        CHECK(std::isfinite(s.predicted_latency_s));
        specs_seen.insert(spec->name);
      }
    }
    CHECK(specs_seen.size() == specs.size());
  }
}

// roller: the first test case of this file.
TEST_CASE("schedule legality: welder on every bundled model and every shipped spec") { check_bundled_legality("welder"); }
TEST_CASE("schedule legality: z3 on every bundled model, two shipped specs each, in turn") { check_bundled_legality("z3"); }
