// The z3 policy on small operators, where every admissible outer tile can be enumerated: z3's
// proven traffic equals the brute-force minimum over the tile space, its config is valid and
// fits, and two runs agree bit for bit.
#include <doctest/doctest.h>

#include <cmath>

#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "policy/z3_policy.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

HwSpec cpu_spec() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx512-server.json"); }
HwSpec gpu_spec() { return load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json"); }

OpGraph gemm(DType t, int64_t m, int64_t n, int64_t k) {
  const TensorType a{t, {m, k}}, b{t, {k, n}};
  return lower_model(single_op_model("MatMul", {HostTensor(a), HostTensor(b)}, {}, 1, {}));
}

OpGraph small_gemm() {
  const TensorType a{DType::f32, {64, 48}}, b{DType::f32, {48, 64}};
  return lower_model(single_op_model("MatMul", {HostTensor(a), HostTensor(b)}, {}, 1, {}));
}

OpGraph small_add() {
  const TensorType a{DType::f32, {40, 100}};
  return lower_model(single_op_model("Add", {HostTensor(a), HostTensor(a)}, {}, 1, {}));
}

int64_t brute_force_min(const TeNode& node, const TileSpace& space);

// z3's result for node 0 of `g` is proven, equals the brute-force minimum, and is admissible.
void check_against_brute_force(const OpGraph& g, const HwSpec& spec, const Z3Options& options) {
  const AnalyticCostModel cost;
  const TeNode& node = g.node(0);
  const TileSpace space = tile_space(node, spec, options);
  const Z3NodeResult r = solve_node_z3(g, 0, spec, cost, options);
  INFO(node.name(), " on ", spec.name, ": ", r.notes.empty() ? std::string() : r.notes.back());
  REQUIRE(r.solved);
  REQUIRE(r.proven_optimal);
  CHECK_FALSE(r.fallback);
  CHECK(r.encode_ms <= r.solve_ms);
  CHECK(r.traffic_bytes == brute_force_min(node, space));
  CHECK(r.traffic_bytes == tile_traffic(node, r.tiles.levels.front(), space.traffic).total_bytes);
  CHECK(space_admits(space, node, r.tiles.levels.front()));
  CHECK_FALSE(check_tile_config(node, r.tiles).has_value());
}

// The least tile_traffic over the product of the space's per-axis values that space_admits.
int64_t brute_force_min(const TeNode& node, const TileSpace& space) {
  const int ns = node.num_spatial(), na = node.num_axes();
  std::vector<size_t> pick(na, 0);
  int64_t best = -1;
  while (true) {
    LevelTile t{space.level, {}, {}};
    for (int a = 0; a < na; ++a) (a < ns ? t.spatial : t.reduction).push_back(space.values[a][pick[a]]);
    if (space_admits(space, node, t)) {
      const int64_t q = tile_traffic(node, t, space.traffic).total_bytes;
      if (best < 0 || q < best) best = q;
    }
    int a = 0;
    while (a < na && ++pick[a] == space.values[a].size()) pick[a++] = 0;
    if (a == na) return best;
  }
}

}  // namespace

TEST_CASE("z3 proves the brute-force minimum traffic on small operators (CPU spec)") {
  const HwSpec spec = cpu_spec();
  const AnalyticCostModel cost;
  Z3Options options;
  options.timeout_ms = 60000;
  for (const OpGraph& g : {small_add(), small_gemm()}) {
    const TeNode& node = g.node(0);
    const TileSpace space = tile_space(node, spec, options);
    CHECK(space.level == "l2");
    CHECK(space.capacity_bytes == spec.level("l2").capacity_bytes);
    // The innermost spatial axis: multiples of 16 f32 (64 B lines, 16 lanes) or the whole axis.
    CHECK(space.values[node.num_spatial() - 1].front() == 16);
    const Z3NodeResult r = solve_node_z3(g, 0, spec, cost, options);
    INFO(node.name(), ": ", r.notes.empty() ? std::string() : r.notes.back());
    REQUIRE(r.solved);
    REQUIRE(r.proven_optimal);
    CHECK_FALSE(r.fallback);
    CHECK(r.traffic_bytes == brute_force_min(node, space));
    CHECK(r.traffic_bytes == tile_traffic(node, r.tiles.levels.front(), space.traffic).total_bytes);
    CHECK_FALSE(check_tile_config(node, r.tiles).has_value());
    CHECK(space_admits(space, node, r.tiles.levels.front()));
    CHECK(tile_footprint(node, r.tiles.levels.front(), space.footprint).total_bytes <= space.capacity_bytes);
    // Determinism: the same inputs give the same config.
    CHECK(solve_node_z3(g, 0, spec, cost, options).tiles == r.tiles);
  }
}

TEST_CASE("the tile space: powers of two times the alignment, the whole axis, balanced extents") {
  const HwSpec spec = cpu_spec();
  Z3Options options;
  const OpGraph g = gemm(DType::f32, 1000, 1000, 1000);
  const TileSpace space = tile_space(g.node(0), spec, options);
  // Innermost spatial axis, alignment 16: 16..512, the whole axis, and ceil(1000 / n) rounded up
  // to 16 for n = 2..8 where the padding waste is at most 25% (n = 2, 3, 4, 5, 6, 7: 512, 336,
  // 256, 208, 176, 144; n = 8: 128).
  CHECK(space.values[1] == std::vector<int64_t>{16, 32, 64, 128, 144, 176, 208, 256, 336, 512, 1000});
  // A non-innermost axis (alignment 1): 1..512 and 1000, 334, 250, 200, 167, 143, 125.
  CHECK(space.values[0] == std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 125, 128, 143, 167, 200, 250, 256, 334,
                                                500, 512, 1000});
}

TEST_CASE("z3 proves the brute-force minimum on a medium GEMM and convolution (CPU and H100 specs)") {
  Z3Options options;
  options.timeout_ms = 60000;
  const TensorType x{DType::f32, {1, 32, 28, 28}}, w{DType::f32, {64, 32, 3, 3}};
  const OpGraph conv = lower_model(single_op_model(
      "Conv", {HostTensor(x), HostTensor(w)},
      {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{1, 1}}}, 1, {}));
  for (const HwSpec& spec : {cpu_spec(), gpu_spec()}) {
    check_against_brute_force(gemm(DType::f32, 1000, 1000, 1000), spec, options);
    check_against_brute_force(gemm(DType::f16, 127, 3000, 513), spec, options);
    check_against_brute_force(conv, spec, options);
  }
}

TEST_CASE("z3 policy: one group per node, notes say what was proven") {
  const OpGraph g = small_add();
  Z3Options options;
  options.timeout_ms = 60000;
  const AnalyticCostModel cost;
  const HwSpec spec = cpu_spec();
  const Schedule s = Z3Policy(options).schedule(PolicyContext{g, spec, cost});
  CHECK(s.policy == "z3");
  REQUIRE(s.groups.size() == 1);
  CHECK(std::isfinite(s.groups[0].predicted.latency_s));
  bool proven = false;
  for (const std::string& n : s.groups[0].predicted.notes) proven |= n.find("proven") != std::string::npos;
  CHECK(proven);
}
