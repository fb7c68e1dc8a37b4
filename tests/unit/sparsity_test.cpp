// Sparsity as a weight attribute (tilegraph/sparsity.h) and the block_sparse tile kind
// (tilegraph/tile_kind.h): magnitude pruning to a density, the non-zero map at any tile shape,
// the model format's "sparsity" key (round trip and errors), and the kind's numbers.
#include <doctest/doctest.h>

#include <algorithm>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/tile_kind.h"

using namespace tessel;
using namespace tessel::testing;

TEST_CASE("sparsity: pruning keeps the blocks of largest L1 norm, and the non-zero map sees them at every tile shape") {
  // 4 x 6 matrix of 2 x 2 blocks (2 x 3 blocks); block (r, c) holds the value 1 + r * 3 + c.
  std::vector<double> v(24);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) v[r * 6 + c] = 1 + (r / 2) * 3 + c / 2;
  const HostTensor t(TensorType{DType::f32, {4, 6}}, v);
  const HostTensor p = apply_sparsity(t, block(2, 2, 0.5));  // round(0.5 x 6) = 3 blocks: values 6, 5, 4
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) CHECK(p[r * 6 + c] == (v[r * 6 + c] >= 4 ? v[r * 6 + c] : 0.0));
  CHECK(apply_sparsity(t, block(2, 2, 0)).values() == t.values());  // no density: the data as given
  const HostTensor one = apply_sparsity(t, block(2, 2, 0.01));  // at least one block stays: the largest (6)
  const std::vector<double> one_values = one.values();
  CHECK(std::count(one_values.begin(), one_values.end(), 0.0) == 20);

  const NonzeroMap m = nonzero_map(p, 2);
  CHECK(m.density(2, 2) == doctest::Approx(0.5));
  CHECK(m.density(4, 2) == doctest::Approx(1.0));   // every 4-row tile holds a kept block
  CHECK(m.density(2, 6) == doctest::Approx(0.5));   // the top row panel is all zero
  CHECK(m.tiles(2, 6) == std::vector<uint8_t>{0, 1});
  CHECK(nonzero_map(HostTensor(TensorType{DType::f32, {16, 16}}), 8).density(8, 8) == 0.0);
}

TEST_CASE("sparsity: a weight's attribute round-trips through the model format, a bad one is a UserError naming its key") {
  ModelBuilder b(DType::f16);
  const std::string w = b.sparse_weight("w", {64, 128}, 3, block(16, 32, 0.25));
  const ModelDef model = b.model({b.op("MatMul", {b.input("x", {8, 64}), w})});
  TempDir dir;
  const std::string path = dir.file("m.json");
  save_model_json(model, path);
  const ModelDef back = load_model_json(path);
  REQUIRE(back.weights.size() == 1);
  REQUIRE(back.weights[0].sparsity.has_value());
  CHECK(*back.weights[0].sparsity == block(16, 32, 0.25));
  const OpGraph g = lower_model(back);
  const HostTensor values = g.weight_values(g.weights()[0]);
  const std::vector<double> pruned = values.values();
  CHECK(std::count(pruned.begin(), pruned.end(), 0.0) == 64 * 128 * 3 / 4);
  CHECK(g.nonzero_map(g.weights()[0])->density(16, 32) == doctest::Approx(0.25));
  CHECK(g.print().find("sparsity block 16x32, pruned to density 0.25") != std::string::npos);

  auto load_with = [&](const std::string& sparsity) {
    const std::string text = cat(R"({"format": "tessel-model", "version": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f16", "shape": [8, 64]}],
      "weights": [{"name": "w", "dtype": "f16", "shape": [64, 128], "init": {"dist": "normal", "mean": 0, "std": 0.02, "seed": 1},
                   "sparsity": )", sparsity, R"(}],
      "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]}], "outputs": ["y"]})");
    return load_model_json(dir.write("bad.json", text));
  };
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "nm", "block": [2, 4]})"), doctest::Contains("/weights/0/sparsity/pattern"), UserError);
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "block", "block": [128, 16]})"), doctest::Contains("larger than the 64x128 matrix"), UserError);
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "block", "block": [16, 16], "density": 1.5})"), doctest::Contains("/weights/0/sparsity/density"), UserError);
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "block", "block": [16]})"), doctest::Contains("/weights/0/sparsity/block"), UserError);
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "block", "block": [16, 16], "shape": 1})"), doctest::Contains("shape"), UserError);
}

TEST_CASE("block_sparse kind: traffic, FLOPs and loads scale with the density, legality names what is wrong") {
  ModelBuilder b(DType::f16);
  const OpGraph g = b.graph(b.op("MatMul", {b.input("x", {256, 512}), b.weight("w", {512, 1024}, 1)}));
  const NodeId n = g.producer(g.outputs()[0]);
  const TeNode& node = g.node(n);
  TileConfig dense;
  dense.levels.push_back(LevelTile{"smem", {64, 128}, {32}});
  TileConfig sparse = dense;
  sparse.kind = BlockSparseProps{1, 32, 128, 0.25, 4};
  REQUIRE(!check_tile(node, dense));
  REQUIRE(!check_tile(node, sparse));
  const TileQuery qd{&node, &dense, 0, {}}, qs{&node, &sparse, 0, {}};
  const TileKind& kd = tile_kind_of(dense);
  const TileKind& ks = tile_kind_of(sparse);
  CHECK(ks.name() == "block_sparse");
  CHECK(ks.effective_flops(qs) == kd.effective_flops(qd) / 4);
  const TileTraffic td = kd.traffic(node, dense.levels[0], {}, dense.kind), ts = ks.traffic(node, sparse.levels[0], {}, sparse.kind);
  for (int i = 0; i < 2; ++i) CHECK(ts.input_bytes[i] >= td.input_bytes[i] / 4);
  CHECK(ts.input_bytes[0] == td.input_bytes[0] / 4);
  CHECK(ts.input_bytes[1] < td.input_bytes[1] / 3);  // a quarter plus the block indices
  CHECK(ts.output_bytes == td.output_bytes);
  CHECK(ks.footprint_bytes(qs) > kd.footprint_bytes(qd));  // dense bound plus indices
  const std::vector<LoadPlan> loads = ks.load_plans(qs);
  CHECK(loads[1].kind == LoadKind::bsr_blocks);
  CHECK(loads[1].metadata_bytes > 0);
  CHECK(loads[0].kind == LoadKind::dense_box);
  CHECK(non_dense_plan(node, sparse) == std::optional<std::string>("block_sparse bsr_blocks"));
  CHECK(!non_dense_plan(node, sparse, {LoadKind::bsr_blocks}));

  TileConfig bad = sparse;
  std::get<BlockSparseProps>(bad.kind).input = 2;
  CHECK(check_tile(node, bad).value_or("").find("has 2 inputs") != std::string::npos);
  std::get<BlockSparseProps>(bad.kind) = BlockSparseProps{1, 32, 128, 1.5, 4};
  CHECK(check_tile(node, bad).value_or("").find("density 1.5") != std::string::npos);
}
