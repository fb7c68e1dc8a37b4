// Sharding a node over a mesh (tilegraph/sharding.h), layout conversions, pieces of tensors, and
// what the cost model charges for each collective (cost_model/collective_cost.h).
#include <doctest/doctest.h>

#include "cost_model/collective_cost.h"
#include "hw_specs/hw_spec.h"
#include "../model_builder.h"
#include "tilegraph/spmd.h"

using namespace tessel;
using tessel::testing::ModelBuilder;

namespace {

/// The one MatMul node of x[m,k] @ w[k,n].
OpGraph matmul_graph(int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {m, k});
  const std::string w = b.weight("w", {k, n}, 1);
  return b.graph(b.op("MatMul", {x, w}));
}

const TeNode& only_node(const OpGraph& g) {
  REQUIRE(g.num_nodes() >= 1);
  return g.node(g.num_nodes() - 1);
}

int axis_named(const TeNode& node, int kind_index) {
  // MatMul's domain: spatial (m, n), reduction (k).
  (void)node;
  return kind_index;
}

}  // namespace

TEST_CASE("sharding: a mesh's coordinates, groups and parsing") {
  const Mesh mesh = parse_mesh("dp=2,tp=4", "test");
  CHECK(mesh.devices() == 8);
  CHECK(mesh.axis_names == std::vector<std::string>{"dp", "tp"});
  CHECK(mesh.coords(6) == std::vector<int64_t>{1, 2});
  CHECK(mesh.device_at({1, 2}) == 6);
  CHECK(mesh.group(6, 1) == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(mesh.group(6, 0) == std::vector<int64_t>{2, 6});
  CHECK(parse_mesh("2x2", "t").shape == std::vector<int64_t>{2, 2});
  CHECK_THROWS_AS(parse_mesh("2xx2", "t"), UserError);
  CHECK_THROWS_AS(parse_mesh("0", "t"), UserError);
  CHECK_THROWS_AS(parse_mesh("a=2,a=2", "t"), UserError);
}

TEST_CASE("sharding: a MatMul split along each of its axes") {
  const OpGraph g = matmul_graph(8, 12, 16);
  const TeNode& mm = only_node(g);
  REQUIRE(mm.num_spatial() == 2);
  REQUIRE(mm.num_reduction() == 1);
  const Mesh mesh = parse_mesh("4", "t");
  auto layouts = [&](int axis) { return std::get<ShardedNode>(shard_node(mm, NodeSharding{{axis}}, mesh)); };
  // Rows: x sharded along its rows, w whole, output rows.
  ShardedNode rows = layouts(axis_named(mm, 0));
  CHECK(rows.inputs[0][0] == AxisLayout::sharded(0));
  CHECK(rows.inputs[1][0] == AxisLayout::replicated());
  CHECK(rows.output[0] == AxisLayout::sharded(0));
  // Columns: w sharded along its columns.
  ShardedNode cols = layouts(1);
  CHECK(cols.inputs[0][0] == AxisLayout::replicated());
  CHECK(cols.inputs[1][0] == AxisLayout::sharded(1));
  CHECK(cols.output[0] == AxisLayout::sharded(1));
  // The reduction: both operands sharded along k, the output partial sums.
  ShardedNode red = layouts(2);
  CHECK(red.inputs[0][0] == AxisLayout::sharded(1));
  CHECK(red.inputs[1][0] == AxisLayout::sharded(0));
  CHECK(red.output[0] == AxisLayout::partial_of(Combiner::sum));
  // The local node: the split axis shortened, the shapes divided.
  const NodeRef local = local_node(mm, NodeSharding{{2}}, mesh);
  CHECK(local->extents() == std::vector<int64_t>{8, 16, 3});
  CHECK(local->inputs()[0].type.shape == std::vector<int64_t>{8, 3});
  // 12 rows do not divide into 8.
  CHECK(std::holds_alternative<std::string>(shard_node(mm, NodeSharding{{0}}, parse_mesh("16", "t"))));
}

TEST_CASE("sharding: windows, offsets and reshapes across a split axis are refused, reshapes along it pass") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {1, 4, 8, 8});
  const std::string w = b.weight("w", {4, 4, 3, 3}, 2);
  const OpGraph conv = b.graph(b.op("Conv", {x, w}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  const TeNode& c = only_node(conv);
  const Mesh mesh = parse_mesh("2", "t");
  // Output rows read input rows through a window: not splittable; output channels are.
  int oh = -1, oc = -1;
  for (int a = 0; a < c.num_axes(); ++a) {
    if (c.axes()[a].extent == 8 && oh < 0 && a >= 2) oh = a;
    if (c.axes()[a].extent == 4 && a < c.num_spatial() && oc < 0) oc = a;
  }
  REQUIRE(oh >= 0);
  REQUIRE(oc >= 0);
  CHECK(std::holds_alternative<std::string>(shard_node(c, NodeSharding{{oh}}, mesh)));
  CHECK(std::holds_alternative<ShardedNode>(shard_node(c, NodeSharding{{oc}}, mesh)));

  // [2, 12] reshaped to [2, 3, 4]: a split of the 12 into 3 pieces is a split of the 3 heads;
  // into 2 pieces it would cut a head in half (6 = 1.5 x 4) and is refused.
  ModelBuilder r(DType::f32);
  const std::string y = r.input("y", {2, 12});
  const OpGraph reshape = r.graph(r.op("Reshape", {y, r.weight_i64("s", {2, 3, 4})}));
  const TeNode& rs = only_node(reshape);
  int wide = -1;
  for (int a = 0; a < rs.num_axes(); ++a)
    if (rs.axes()[a].extent == 12) wide = a;
  if (wide >= 0) {
    auto three = shard_node(rs, NodeSharding{{wide}}, parse_mesh("3", "t"));
    REQUIRE(std::holds_alternative<ShardedNode>(three));
    CHECK(std::get<ShardedNode>(three).output[0] == AxisLayout::sharded(1));
    CHECK(std::holds_alternative<std::string>(shard_node(rs, NodeSharding{{wide}}, parse_mesh("2", "t"))));
  }
}

TEST_CASE("sharding: conversions between layouts name the collective") {
  const TensorLayout R{AxisLayout::replicated()}, S0{AxisLayout::sharded(0)}, S1{AxisLayout::sharded(1)},
      P{AxisLayout::partial_of(Combiner::sum)};
  auto one = [](const TensorLayout& a, const TensorLayout& b) {
    auto s = conversion_steps(a, b);
    REQUIRE(s);
    REQUIRE(s->size() == 1);
    return s->front();
  };
  CHECK(conversion_steps(S0, S0)->empty());
  CHECK(one(S0, R).collective == Collective::all_gather);
  CHECK(one(P, R).collective == Collective::all_reduce);
  CHECK(one(P, S1).collective == Collective::reduce_scatter);
  CHECK(one(P, S1).dim == 1);
  CHECK(one(S0, S1).collective == Collective::all_to_all);
  CHECK(one(R, S1).kind == LayoutStep::Kind::slice);
  CHECK_FALSE(conversion_steps(R, P));
  // Two mesh axes: the reduction first, the slice last.
  auto two = conversion_steps({P[0], R[0]}, {R[0], S0[0]});
  REQUIRE(two);
  REQUIRE(two->size() == 2);
  CHECK((*two)[0].collective == Collective::all_reduce);
  CHECK((*two)[1].kind == LayoutStep::Kind::slice);
}

TEST_CASE("sharding: pieces of a tensor put back together give the tensor") {
  const Mesh mesh = parse_mesh("2x3", "t");
  std::vector<double> v(4 * 6 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  const HostTensor whole(TensorType{DType::f32, {4, 6, 2}}, v);
  for (const TensorLayout& layout : {TensorLayout{AxisLayout::sharded(0), AxisLayout::sharded(1)},
                                     TensorLayout{AxisLayout::replicated(), AxisLayout::sharded(1)},
                                     TensorLayout{AxisLayout::sharded(1), AxisLayout::replicated()}}) {
    std::vector<HostTensor> pieces;
    for (int64_t d = 0; d < mesh.devices(); ++d) pieces.push_back(take_piece(whole, layout, mesh, d));
    CHECK(pieces[0].shape() == local_shape(whole.shape(), layout, mesh));
    CHECK(assemble(pieces, whole.shape(), layout, mesh).values() == whole.values());
  }
  // Device 4 (coordinates 1, 1) of [S0, S1] holds rows 2..3, columns 2..3.
  const HostTensor p = take_piece(whole, {AxisLayout::sharded(0), AxisLayout::sharded(1)}, mesh, 4);
  CHECK(p[0] == whole[(2 * 6 + 2) * 2]);
  // Partial sums add up.
  const TensorLayout partial{AxisLayout::partial_of(Combiner::sum), AxisLayout::replicated()};
  std::vector<HostTensor> parts(mesh.devices(), whole);
  CHECK(assemble(parts, whole.shape(), partial, mesh)[5] == 2 * whole[5]);
}

TEST_CASE("sharding: collective costs follow the ring volumes at the spec's level") {
  HwSpec spec = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-cluster-1024.json");
  REQUIRE(spec.interconnect.levels.size() == 2);
  const Mesh mesh = parse_mesh("dp=16,tp=8", "t");
  const TensorType t{DType::f16, {1024, 8192}};  // 16 MiB
  const double bytes = 1024.0 * 8192 * 2;
  LayoutStep ar;
  ar.collective = Collective::all_reduce;
  ar.op = Combiner::sum;
  ar.mesh_axis = 1;  // tp: 8 consecutive devices, inside one NVSwitch box
  const TensorLayout partial{AxisLayout::replicated(), AxisLayout::partial_of(Combiner::sum)};
  const CollectiveCost in_box = collective_cost(spec, mesh, ar, t, partial);
  CHECK(in_box.level == "nvswitch");
  CHECK(in_box.bytes_per_device == doctest::Approx(2.0 * 7 / 8 * bytes));
  CHECK(in_box.steps == 14);
  CHECK(in_box.seconds == doctest::Approx(14 * 10e-6 + 2.0 * 7 / 8 * bytes / 360e9));
  ar.mesh_axis = 0;  // dp: devices 8 apart, across boxes
  const TensorLayout partial_dp{AxisLayout::partial_of(Combiner::sum), AxisLayout::replicated()};
  const CollectiveCost across = collective_cost(spec, mesh, ar, t, partial_dp);
  CHECK(across.level == "infiniband");
  CHECK(across.seconds > in_box.seconds);
  // An all-gather of a piece sharded 8 ways receives the 7 other pieces.
  LayoutStep ag;
  ag.collective = Collective::all_gather;
  ag.dim = 1;
  ag.mesh_axis = 1;
  const CollectiveCost gather = collective_cost(spec, mesh, ag, t, {AxisLayout::replicated(), AxisLayout::sharded(1)});
  CHECK(gather.bytes_per_device == doctest::Approx(7.0 / 8 * bytes));
  // A slice moves nothing; a spec without an interconnect cannot price a mesh.
  LayoutStep slice;
  slice.kind = LayoutStep::Kind::slice;
  CHECK(collective_cost(spec, mesh, slice, t, partial).seconds == 0);
  HwSpec lone = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx512-server.json");
  CHECK(check_mesh(lone, mesh).has_value());
}

TEST_CASE("sharding: interconnect levels are read strictly") {
  const std::string base = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json";
  auto spec_with = [&](const std::string& levels, int devices) {
    return std::string("{\"extends\": \"") + base + "\", \"name\": \"t\", \"interconnect\": {\"devices\": " +
           std::to_string(devices) + ", \"levels\": " + levels + "}}";
  };
  const HwSpec ok = parse_hw_spec(spec_with(R"([{"name": "a", "devices": 4, "bandwidth_gbps": 10, "latency_us": 1},
                                                {"name": "b", "devices": 8, "bandwidth_gbps": 1, "latency_us": 5}])", 8), "t.json");
  CHECK(ok.interconnect.levels.size() == 2);
  CHECK(parse_hw_spec(write_hw_spec(ok), "t.json") == ok);
  // Not a multiple of the level inside; not spanning the system; a missing key.
  CHECK_THROWS_AS(parse_hw_spec(spec_with(R"([{"name": "a", "devices": 3, "bandwidth_gbps": 10, "latency_us": 1},
                                              {"name": "b", "devices": 8, "bandwidth_gbps": 1, "latency_us": 5}])", 8), "t.json"),
                  UserError);
  CHECK_THROWS_AS(parse_hw_spec(spec_with(R"([{"name": "a", "devices": 4, "bandwidth_gbps": 10, "latency_us": 1}])", 8), "t.json"),
                  UserError);
  CHECK_THROWS_AS(parse_hw_spec(spec_with(R"([{"name": "a", "devices": 8, "latency_us": 1}])", 8), "t.json"), UserError);
}

TEST_CASE("sharding: a level's measured pair for one collective replaces the ring's") {
  const std::string base = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json";
  auto spec_with = [&](const std::string& collectives) {
    return std::string("{\"extends\": \"") + base +
           "\", \"name\": \"t\", \"interconnect\": {\"devices\": 2, \"levels\": [{\"name\": \"nvlink\", \"devices\": 2, "
           "\"bandwidth_gbps\": 100, \"latency_us\": 10, \"collectives\": " + collectives + "}]}}";
  };
  const HwSpec spec = parse_hw_spec(spec_with(R"({"all_reduce": {"bandwidth_gbps": 200, "latency_us": 5}})"), "t.json");
  CHECK(parse_hw_spec(write_hw_spec(spec), "t.json") == spec);
  const Mesh mesh = parse_mesh("2", "t");
  const TensorType t{DType::f16, {1024, 1024}};  // 2 MiB
  const double bytes = 1024.0 * 1024 * 2;
  LayoutStep ar;
  ar.collective = Collective::all_reduce;
  ar.op = Combiner::sum;
  CHECK(collective_cost(spec, mesh, ar, t, {AxisLayout::partial_of(Combiner::sum)}).seconds ==
        doctest::Approx(2 * 5e-6 + bytes / 200e9));
  LayoutStep ag;  // not listed: the level's pair
  ag.collective = Collective::all_gather;
  ag.dim = 0;
  CHECK(collective_cost(spec, mesh, ag, t, {AxisLayout::sharded(0)}).seconds == doctest::Approx(10e-6 + bytes / 2 / 100e9));
  CHECK_THROWS_WITH_AS(parse_hw_spec(spec_with(R"({"broadcast": {"bandwidth_gbps": 1, "latency_us": 1}})"), "t.json"),
                       doctest::Contains("broadcast"), UserError);
  CHECK_THROWS_AS(parse_hw_spec(spec_with(R"({"all_reduce": {"bandwidth_gbps": 0, "latency_us": 1}})"), "t.json"), UserError);
}
