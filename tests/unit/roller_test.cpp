// The roller policy: hardware-aligned tiles (tensor-core shapes, transactions), machine-filling
// grids for small operators, legal configs for odd shapes, candidates ranked by the cost model,
// determinism, one group per node with every edge recorded as unfused; and the measurement cache
// that a policy with a Measurer goes through.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "hw_specs/hw_spec.h"
#include "policy/check_schedule.h"
#include "policy/measure_cache.h"
#include "policy/roller.h"
#include "policy/schedule_json.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

HwSpec spec_named(const std::string& name) { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/" + name + ".json"); }

// A model with one operator whose inputs are all model inputs (no data is allocated).
OpGraph one_op(const std::string& op, const std::vector<TensorType>& inputs, std::map<std::string, AttrValue> attrs = {}) {
  ModelDef m;
  m.name = op;
  OpDef d;
  d.name = "op";
  d.op_type = op;
  d.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    m.inputs.push_back({cat("in", i), inputs[i]});
    d.inputs.push_back(cat("in", i));
  }
  d.outputs = {"out"};
  m.outputs = {"out"};
  m.ops.push_back(d);
  return lower_model(m);
}

OpGraph load_graph(const std::string& model) {
  return lower_model(load_model(std::string(TESSEL_SOURCE_DIR) + "/experiments/models/" + model + ".json"));
}

Schedule roller_schedule(const OpGraph& g, const HwSpec& spec, RollerOptions options = {}) {
  AnalyticCostModel cost;
  return RollerPolicy(options).schedule(PolicyContext{g, spec, cost});
}

// Every node of a one-operator graph has a non-empty candidate list whose configs are valid.
void check_candidates(const OpGraph& g, const HwSpec& spec) {
  AnalyticCostModel cost;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const std::vector<TileCandidate> c = roller_candidates(g, n, spec, cost);
    INFO(spec.name, " node ", g.node(n).name());
    REQUIRE_FALSE(c.empty());
    for (const TileCandidate& t : c) CHECK_FALSE(check_tile_config(g.node(n), t.tiles));
  }
}

}  // namespace

TEST_CASE("roller: a 4096^2 f16 GEMM on H100 gets tensor-core- and transaction-aligned block tiles") {
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  const TensorType a{DType::f16, {4096, 4096}};
  const OpGraph g = one_op("MatMul", {a, a});
  REQUIRE(g.num_nodes() == 1);
  AnalyticCostModel cost;
  const std::vector<TileCandidate> c = roller_candidates(g, 0, spec, cost);
  REQUIRE_FALSE(c.empty());
  const int64_t transaction_elems = spec.level("dram").transaction_bytes / dtype_bytes(DType::f16);
  for (const TileCandidate& t : c) {
    const LevelTile& block = t.tiles.levels.front();
    INFO(print_tile_config(t.tiles));
    CHECK(block.level == "smem");
    bool some_shape = false;
    for (const MmaShape& s : spec.compute.tensor_core_shapes.at(DType::f16))
      some_shape |= block.spatial[0] % s.m == 0 && block.spatial[1] % s.n == 0 && block.reduction[0] % s.k == 0;
    CHECK(some_shape);
    CHECK(block.spatial[1] % transaction_elems == 0);
    CHECK(t.predicted.tensor_cores);
    CHECK(t.predicted.blocks >= spec.compute.units);
    // Threads: a multiple of the warp, within the block limit.
    int64_t threads = 1;
    for (int64_t x : t.tiles.threads) threads *= x;
    CHECK(threads % spec.compute.simd_width == 0);
    CHECK(threads <= spec.limits.max_threads_per_block);
    REQUIRE(t.tiles.levels.size() == 2);
    CHECK(t.tiles.levels[1].level == "registers");
  }
}

TEST_CASE("roller: candidates are ranked by the cost model, best first") {
  AnalyticCostModel cost;
  for (const char* name : {"nvidia-h100-sxm", "nvidia-v100-sxm2", "x86-64-avx2-generic"}) {
    const HwSpec spec = spec_named(name);
    const TensorType a{DType::f32, {512, 768}}, b{DType::f32, {768, 3072}};
    const OpGraph g = one_op("MatMul", {a, b});
    const std::vector<TileCandidate> c = roller_candidates(g, 0, spec, cost);
    INFO(name);
    REQUIRE(c.size() >= 2);
    CHECK(c.size() <= static_cast<size_t>(RollerOptions{}.top_k));
    for (size_t i = 0; i < c.size(); ++i) {
      ScheduledGroup group;
      group.nodes = {0};
      group.tiles[0] = c[i].tiles;
      CHECK(cost.estimate(g, group, spec).latency_s == c[i].predicted.latency_s);
      if (i > 0) CHECK(c[i - 1].predicted.latency_s <= c[i].predicted.latency_s);
    }
  }
}

TEST_CASE("roller: CPU register tiles of a contraction grow along the rows that share the streamed operand") {
  // The micro-kernel's rows are the axis that the operand read along the innermost axis does not
  // depend on: a matmul's rows, an NCHW convolution's output channels (not its image rows).
  AnalyticCostModel cost;
  for (const char* name : {"x86-64-avx2-generic", "x86-64-avx512-server"}) {
    const HwSpec spec = spec_named(name);
    INFO(name);
    const OpGraph conv = one_op("Conv", {TensorType{DType::f32, {1, 64, 56, 56}}, TensorType{DType::f32, {64, 64, 3, 3}}},
                                {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    const OpGraph matmul = one_op("MatMul", {TensorType{DType::f32, {512, 768}}, TensorType{DType::f32, {768, 768}}});
    for (auto [g, row] : {std::pair{&conv, 1}, std::pair{&matmul, 0}}) {
      NodeId n = 0;
      while (g->node(n).num_reduction() == 0) ++n;
      const int ns = g->node(n).num_spatial();
      const std::vector<TileCandidate> c = roller_candidates(*g, n, spec, cost);
      REQUIRE_FALSE(c.empty());
      for (const TileCandidate& t : c) {
        INFO(print_tile_config(t.tiles));
        const LevelTile& reg = t.tiles.levels.back();
        const LevelTile& outer = t.tiles.levels[t.tiles.levels.size() - 2];
        REQUIRE(reg.level == "registers");
        for (int a = 0; a + 1 < ns; ++a)
          if (a != row) CHECK(reg.spatial[a] == 1);
        if (outer.spatial[row] > 1) CHECK(reg.spatial[row] > 1);
      }
    }
  }
}

TEST_CASE("roller: small operators fill the machine when the domain allows") {
  AnalyticCostModel cost;
  for (const char* name : {"nvidia-h100-sxm", "nvidia-a100-sxm-80g", "x86-64-avx512-server"}) {
    const HwSpec spec = spec_named(name);
    INFO(name);
    const TensorType x{DType::f32, {64, 1024}};
    for (const OpGraph& g : {one_op("Add", {x, x}), one_op("Softmax", {x}, {{"axis", int64_t{-1}}}),
                             one_op("MatMul", {TensorType{DType::f16, {256, 256}}, TensorType{DType::f16, {256, 256}}})}) {
      for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const TeNode& node = g.node(n);
        int64_t points = 1;
        for (int a = 0; a < node.num_spatial(); ++a) points *= node.axes()[a].extent;
        const std::vector<TileCandidate> c = roller_candidates(g, n, spec, cost);
        REQUIRE_FALSE(c.empty());
        INFO(node.name(), " ", print_tile_config(c.front().tiles));
        if (points >= spec.compute.units) CHECK(c.front().predicted.blocks >= spec.compute.units);
      }
    }
  }
}

TEST_CASE("roller: odd shapes (extent 1, primes, empty axes, no spatial axes) still get legal configs") {
  for (const char* name : {"nvidia-h100-sxm", "nvidia-v100-sxm2", "x86-64-avx2-generic"}) {
    const HwSpec spec = spec_named(name);
    check_candidates(one_op("Add", {TensorType{DType::f32, {1, 1}}, TensorType{DType::f32, {1, 1}}}), spec);
    check_candidates(one_op("Relu", {TensorType{DType::f32, {7, 13, 1009}}}), spec);
    check_candidates(one_op("Relu", {TensorType{DType::f32, {0, 5}}}), spec);
    check_candidates(one_op("MatMul", {TensorType{DType::f16, {3, 17}}, TensorType{DType::f16, {17, 5}}}), spec);
    check_candidates(one_op("ReduceSum", {TensorType{DType::f32, {31, 97}}}, {{"keepdims", int64_t{0}}}), spec);
    check_candidates(one_op("Relu", {TensorType{DType::f32, {}}}), spec);
  }
}

TEST_CASE("roller: one group per node, every edge unfused by policy, deterministic") {
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  const OpGraph g = load_graph("bert_base_layer");
  const Schedule s = roller_schedule(g, spec);
  CHECK(s.policy == "roller");
  CHECK(s.hw_spec == spec.name);
  CHECK(s.hw_spec_hash == hw_spec_hash(spec));
  REQUIRE(s.groups.size() == static_cast<size_t>(g.num_nodes()));
  double sum = 0;
  for (const ScheduleGroup& sg : s.groups) {
    CHECK(sg.group.nodes.size() == 1);
    sum += sg.predicted.latency_s;
  }
  CHECK(s.predicted_latency_s == doctest::Approx(sum));
  size_t edges = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    std::set<TensorId> inputs;
    for (TensorId t : g.node_inputs(n))
      if (g.producer(t) >= 0) inputs.insert(t);
    edges += inputs.size();
  }
  CHECK(s.unfused.size() == edges);
  for (const UnfusedEdge& e : s.unfused) {
    CHECK(e.reason == UnfusedReason::policy);
    CHECK(g.producer(e.tensor) == e.producer);
  }
  CHECK(check_schedule(g, spec, s).empty());
  CHECK(schedule_to_json(roller_schedule(g, spec), g) == schedule_to_json(s, g));
}

TEST_CASE("roller: 12-layer BERT schedule time (reported, not asserted)") {
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  const OpGraph g = load_graph("bert_base_12_layers");
  const auto start = std::chrono::steady_clock::now();
  const Schedule s = roller_schedule(g, spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("roller scheduled ", g.num_nodes(), " nodes of bert_base_12_layers on ", spec.name, " in ", seconds, " s");
  CHECK(s.groups.size() == static_cast<size_t>(g.num_nodes()));
}

namespace {

// Pretends to time a group: deterministic seconds from its config, counting calls.
class FakeMeasurer : public Measurer {
 public:
  int calls = 0;
  std::string context_text;  // what context() says
  std::string context() const override { return context_text; }
  std::optional<double> measure(const OpGraph&, const ScheduledGroup& group, const HwSpec&) override {
    ++calls;
    // Prefers the smallest outermost tile: the opposite of what the cost model tends to pick.
    int64_t points = 1;
    for (int64_t e : group.tiles.begin()->second.levels.front().spatial) points *= e;
    return 1e-6 * static_cast<double>(points);
  }
};

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / cat("tessel-", name, "-", ::getpid());
  std::filesystem::remove_all(dir);
  return dir.string();
}

}  // namespace

TEST_CASE("measure cache: a policy with a measurer keeps the fastest measured candidate, a second run measures nothing") {
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  const TensorType a{DType::f16, {1024, 1024}};
  const OpGraph g = one_op("MatMul", {a, a});
  const std::string dir = temp_dir("measure");
  FakeMeasurer fake;
  MeasureCache cache(dir);
  RollerOptions options;
  options.measurer = &fake;
  options.measure_cache = &cache;
  const Schedule s = roller_schedule(g, spec, options);
  CHECK(fake.calls > 1);
  AnalyticCostModel cost;
  const std::vector<TileCandidate> c = roller_candidates(g, 0, spec, cost);
  int64_t smallest = INT64_MAX;
  for (const TileCandidate& t : c) {
    int64_t points = 1;
    for (int64_t e : t.tiles.levels.front().spatial) points *= e;
    smallest = std::min(smallest, points);
  }
  int64_t chosen = 1;
  for (int64_t e : s.groups[0].group.tiles.at(0).levels.front().spatial) chosen *= e;
  CHECK(chosen == smallest);
  CHECK(check_schedule(g, spec, s).empty());

  // Reopened from disk: every measurement is a hit.
  const int first = fake.calls;
  MeasureCache reopened(dir);
  CHECK(reopened.size() == cache.size());
  CHECK_FALSE(reopened.corrupt());
  options.measure_cache = &reopened;
  const Schedule again = roller_schedule(g, spec, options);
  CHECK(fake.calls == first);
  CHECK(schedule_to_json(again, g) == schedule_to_json(s, g));
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);
  // A measurer timing in another context (a mesh rank's share of the threads) measures again.
  fake.context_text = "threads=1";
  roller_schedule(g, spec, options);
  CHECK(fake.calls > first);
  std::filesystem::remove_all(dir);
}

TEST_CASE("measure cache: keys separate specs, policies, versions and threads, a corrupt file is ignored and rebuilt") {
  const std::string dir = temp_dir("corrupt");
  {
    MeasureCache cache(dir);
    cache.store(MeasureKey{1, 2, "roller", kTesselVersion, ""}, 1.5e-5);
    cache.store(MeasureKey{1, 3, "roller", kTesselVersion, ""}, 2.5e-5);
    cache.store(MeasureKey{1, 2, "roller top_k=1", kTesselVersion, ""}, 3.5e-5);
    cache.store(MeasureKey{1, 2, "roller", "0.0.9", ""}, 4.5e-5);
    cache.store(MeasureKey{1, 2, "roller", kTesselVersion, "threads=1"}, 5.5e-5);
  }
  MeasureCache cache(dir);
  CHECK(cache.size() == 5);
  CHECK(cache.lookup(MeasureKey{1, 2, "roller", kTesselVersion, ""}) == 1.5e-5);
  CHECK(cache.lookup(MeasureKey{1, 3, "roller", kTesselVersion, ""}) == 2.5e-5);
  CHECK(cache.lookup(MeasureKey{1, 2, "roller top_k=1", kTesselVersion, ""}) == 3.5e-5);
  CHECK(cache.lookup(MeasureKey{1, 2, "roller", "0.0.9", ""}) == 4.5e-5);
  CHECK_FALSE(cache.lookup(MeasureKey{2, 2, "roller", kTesselVersion, ""}));
  // A rank of a mesh timing with its share of the host's threads keeps its own entries.
  CHECK(cache.lookup(MeasureKey{1, 2, "roller", kTesselVersion, "threads=1"}) == 5.5e-5);
  CHECK_FALSE(cache.lookup(MeasureKey{1, 2, "roller", kTesselVersion, "threads=2"}));

  std::ofstream(cache.file(), std::ios::trunc) << "{\"format\": \"tessel-measurements\", \"entries\": [{\"group\": 7";
  MeasureCache corrupt(dir);
  CHECK(corrupt.corrupt());
  CHECK(corrupt.size() == 0);
  corrupt.store(MeasureKey{5, 6, "roller", kTesselVersion, ""}, 1e-3);
  MeasureCache rebuilt(dir);
  CHECK_FALSE(rebuilt.corrupt());
  CHECK(rebuilt.size() == 1);
  CHECK(rebuilt.lookup(MeasureKey{5, 6, "roller", kTesselVersion, ""}) == 1e-3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("measure cache: the group hash ignores node names, not tiles") {
  const TensorType a{DType::f16, {256, 256}};
  const OpGraph g1 = one_op("MatMul", {a, a});
  const OpGraph g2 = one_op("MatMul", {a, a});
  const HwSpec spec = spec_named("nvidia-h100-sxm");
  AnalyticCostModel cost;
  const std::vector<TileCandidate> c = roller_candidates(g1, 0, spec, cost);
  REQUIRE(c.size() >= 2);
  ScheduledGroup x, y;
  x.nodes = y.nodes = {0};
  x.tiles = {{0, c[0].tiles}};
  y.tiles = {{0, c[1].tiles}};
  CHECK(group_canonical_hash(g1, x) == group_canonical_hash(g2, x));
  CHECK(group_canonical_hash(g1, x) != group_canonical_hash(g1, y));
}
