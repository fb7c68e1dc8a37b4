// Sparsity as a weight attribute (tilegraph/sparsity.h) and the block_sparse and nm_sparse tile
// kinds (tilegraph/tile_kind.h): magnitude pruning to a density and to N:M, the non-zero map at any
// tile shape, the N:M test, the model format's "sparsity" key (round trip and errors), and the
// kinds' numbers.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "../model_builder.h"
#include "../temp_dir.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/tile_kind.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

Sparsity nm(int n, int m, int axis) { return Sparsity{.pattern = Sparsity::Pattern::nm, .nm_n = n, .nm_m = m, .axis = axis}; }

}  // namespace

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
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "ell", "block": [2, 4]})"), doctest::Contains("/weights/0/sparsity/pattern"), UserError);
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

TEST_CASE("sparsity: N:M pruning keeps the n of largest magnitude in every group of m along the axis, ties the earlier") {
  // Rows r, columns c. Down each column (axis 0): [1 -3 2 .5] keeps -3 and 2; [2 2 2 2] the first
  // two (ties); [0 0 0 5] 5 and a zero; [-4 1 -1 4] the two of magnitude 4. Along each row (axis 1):
  // [1 2 0 -4] keeps 2, -4; [-3 2 0 1] -3, 2; [2 2 0 -1] both 2s; [.5 2 5 4] 5, 4.
  const HostTensor t(TensorType{DType::f32, {4, 4}}, {1, 2, 0, -4,
                                                      -3, 2, 0, 1,
                                                      2, 2, 0, -1,
                                                      0.5, 2, 5, 4});
  const std::vector<double> down = {0, 2, 0, -4,
                                    -3, 2, 0, 0,
                                    2, 0, 0, 0,
                                    0, 0, 5, 4};
  const std::vector<double> across = {0, 2, 0, -4,
                                      -3, 2, 0, 0,
                                      2, 2, 0, 0,
                                      0, 0, 5, 4};
  CHECK(apply_sparsity(t, nm(2, 4, 0)).values() == down);
  CHECK(apply_sparsity(t, nm(2, 4, -2)).values() == down);
  CHECK(apply_sparsity(t, nm(2, 4, 1)).values() == across);
  CHECK(apply_sparsity(t, nm(2, 4, -1)).values() == across);
  CHECK(apply_sparsity(t, nm(2, 4, 0)).dtype() == DType::f32);
  // 1:2 along the rows: each pair keeps its larger (the first on a tie).
  CHECK(apply_sparsity(t, nm(1, 2, 1)).values() == std::vector<double>{0, 2, 0, -4, -3, 0, 0, 1, 2, 0, 0, -1, 0, 2, 5, 0});
  // Two groups per row: the groups are the runs of m consecutive values, not a sliding window.
  const HostTensor row(TensorType{DType::f32, {1, 8}}, {1, 2, 3, 4, 8, 7, 6, 5});
  CHECK(apply_sparsity(row, nm(2, 4, 1)).values() == std::vector<double>{0, 0, 3, 4, 8, 7, 0, 0});
  // A batched [2, 4, 2] weight along dimension 1 (stride 2): every (batch, column) its own groups.
  // Batch 0: column 0 [1 4 2 3] keeps 4, 3; column 1 [-1 -1 -1 -1] the first two. Batch 1: column 0
  // [0 0 7 0] keeps 7 (and a zero); column 1 [5 6 7 8] keeps 7, 8.
  const HostTensor batched(TensorType{DType::f32, {2, 4, 2}}, {1, -1, 4, -1, 2, -1, 3, -1,
                                                               0, 5, 0, 6, 7, 7, 0, 8});
  CHECK(apply_sparsity(batched, nm(2, 4, 1)).values() == std::vector<double>{0, -1, 4, -1, 0, 0, 3, 0,
                                                                              0, 0, 0, 0, 7, 7, 0, 8});
  CHECK(apply_sparsity(batched, nm(2, 4, -2)).values() == apply_sparsity(batched, nm(2, 4, 1)).values());
  // 16-bit weights are pruned on their stored values: 1.0004 and 1.0003 round to 1 in f16 and bf16,
  // so all three tie and the first two are kept; in f32 the two larger are.
  const std::vector<double> close = {1.0004, 1.0, 0.5, 1.0003};
  for (DType dt : {DType::f16, DType::bf16}) {
    CAPTURE(dtype_name(dt));
    const HostTensor h = apply_sparsity(HostTensor(TensorType{dt, {1, 4}}, close), nm(2, 4, -1));
    CHECK(h.dtype() == dt);
    CHECK(h.values() == std::vector<double>{1, 1, 0, 0});
  }
  const HostTensor f = apply_sparsity(HostTensor(TensorType{DType::f32, {1, 4}}, close), nm(2, 4, -1));
  CHECK(f[0] != 0.0);
  CHECK(f[1] == 0.0);
  CHECK(f[2] == 0.0);
  CHECK(f[3] != 0.0);

  // The N:M test: the pruned values pass, the dense ones do not (the column [2 2 2 2]).
  CHECK(is_nm_sparse(apply_sparsity(t, nm(2, 4, 0)), 2, 4, 0));
  CHECK(is_nm_sparse(apply_sparsity(t, nm(2, 4, 1)), 2, 4, -1));
  CHECK_FALSE(is_nm_sparse(t, 2, 4, 0));
  CHECK_FALSE(is_nm_sparse(t, 2, 4, 1));                                // row [1 2 0 -4]
  CHECK_FALSE(is_nm_sparse(apply_sparsity(t, nm(2, 4, 0)), 1, 4, 0));   // column 0 keeps two
  CHECK(is_nm_sparse(apply_sparsity(t, nm(1, 2, 1)), 1, 2, 1));
  CHECK_FALSE(is_nm_sparse(apply_sparsity(t, nm(1, 2, 1)), 1, 2, 0));  // column 3 starts [-4 1]
  CHECK(is_nm_sparse(HostTensor(TensorType{DType::f32, {8, 4}}), 2, 4, 0));  // all zero
  CHECK_FALSE(is_nm_sparse(row, 2, 4, 0));    // extent 1 is not a multiple of 4
  CHECK_FALSE(is_nm_sparse(row, 2, 4, 2));    // no dimension 2
  CHECK_FALSE(is_nm_sparse(row, 4, 4, 1));    // not 0 < n < m
  CHECK_FALSE(is_nm_sparse(row, 3, 4, 1));    // [1 2 3 4] has four non-zeros
}

TEST_CASE("sparsity: a bad N:M attribute says what is wrong with which value") {
  CHECK(check_sparsity(nm(2, 4, 0), {8, 4}).empty());
  CHECK(check_sparsity(nm(2, 4, -2), {8, 6}).empty());
  CHECK(check_sparsity(nm(2, 4, -1), {3, 2, 8}).empty());
  CHECK(check_sparsity(nm(2, 2, 0), {8, 4}) == "N:M pattern 2:2 needs 0 < n < m");
  CHECK(check_sparsity(nm(0, 4, 0), {8, 4}) == "N:M pattern 0:4 needs 0 < n < m");
  CHECK(check_sparsity(nm(2, 4, 2), {8, 4}) == "axis 2 is not a dimension of a tensor of rank 2");
  CHECK(check_sparsity(nm(2, 4, -3), {8, 4}) == "axis -3 is not a dimension of a tensor of rank 2");
  CHECK(check_sparsity(nm(2, 4, -2), {8}) == "axis -2 is not a dimension of a tensor of rank 1");
  CHECK(check_sparsity(nm(2, 4, 1), {8, 6}) == "dimension 1 has extent 6, not a multiple of m = 4");
  CHECK(check_sparsity(nm(2, 4, -1), {8, 6}) == "dimension 1 has extent 6, not a multiple of m = 4");
  CHECK(print_sparsity(nm(2, 4, 0)) == "2:4 along dimension 0");
  CHECK(print_sparsity(nm(1, 8, -2)) == "1:8 along dimension -2");
  CHECK(print_sparsity(block(64, 32, 0.1)) == "block 64x32, pruned to density 0.1");
}

TEST_CASE("sparsity: an N:M attribute round-trips through the model format, a bad one is a UserError naming its key") {
  ModelBuilder b(DType::f16);
  const std::string w = b.sparse_weight("w", {64, 128}, 3, nm(2, 4, 0));
  const std::string v = b.sparse_weight("v", {128, 32}, 5, nm(1, 4, -2));
  const ModelDef model = b.model({b.op("MatMul", {b.op("MatMul", {b.input("x", {8, 64}), w}), v})});
  TempDir dir;
  const std::string path = dir.file("m.json");
  save_model_json(model, path);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  CHECK(text.str().find(R"("sparsity": {"pattern": "nm", "n": 2, "m": 4, "axis": 0})") != std::string::npos);
  CHECK(text.str().find(R"("sparsity": {"pattern": "nm", "n": 1, "m": 4, "axis": -2})") != std::string::npos);
  const ModelDef back = load_model_json(path);
  REQUIRE(back.weights.size() == 2);
  CHECK(back.weights[0].sparsity == std::optional<Sparsity>(nm(2, 4, 0)));
  CHECK(back.weights[1].sparsity == std::optional<Sparsity>(nm(1, 4, -2)));
  const OpGraph g = lower_model(back);
  auto weight_named = [&](const std::string& name) {
    for (TensorId t : g.weights())
      if (g.tensor(t).name == name) return g.weight_values(t);
    FAIL("no weight ", name);
    return HostTensor();
  };
  const HostTensor values = weight_named("w");
  CHECK(is_nm_sparse(values, 2, 4, 0));
  CHECK_FALSE(is_nm_sparse(values, 2, 4, 1));
  const std::vector<double> pruned = values.values();
  CHECK(std::count(pruned.begin(), pruned.end(), 0.0) == 64 * 128 / 2);
  CHECK(is_nm_sparse(weight_named("v"), 1, 4, 0));
  CHECK(g.print().find("sparsity 2:4 along dimension 0") != std::string::npos);

  auto load_with = [&](const std::string& sparsity, const std::string& dtype = "f16", const std::string& source =
                       R"("init": {"dist": "normal", "mean": 0, "std": 0.02, "seed": 1})") {
    const std::string text = cat(R"({"format": "tessel-model", "version": 1, "name": "m", "inputs": [{"name": "x", "dtype": "f16", "shape": [8, 64]}],
      "weights": [{"name": "w", "dtype": ")", dtype, R"(", "shape": [64, 128], )", source, R"(, "sparsity": )", sparsity, R"(}],
      "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]}], "outputs": ["y"]})");
    return load_model_json(dir.write("bad.json", text));
  };
  CHECK(load_with(R"({"pattern": "nm", "n": 2, "m": 4})").weights[0].sparsity == std::optional<Sparsity>(nm(2, 4, -2)));
  CHECK(load_with(R"({"pattern": "nm", "n": 2, "m": 4, "axis": -1})").weights[0].sparsity == std::optional<Sparsity>(nm(2, 4, -1)));
  auto error = [&](const std::string& sparsity) -> std::string {
    try {
      load_with(sparsity);
    } catch (const UserError& e) {
      return e.location() + ": " + e.message();
    }
    return "no error";
  };
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": 4, "block": [2, 4]})").starts_with("/weights/0/sparsity/block: unknown key \"block\""));
  CHECK(error(R"({"pattern": "nm", "n": 2})") == "/weights/0/sparsity: missing key \"m\"");
  CHECK(error(R"({"n": 2, "m": 4})") == "/weights/0/sparsity: missing key \"pattern\"");
  CHECK(error(R"({"pattern": "nm", "n": 4, "m": 4})") == "/weights/0/sparsity/n: n is 4, expected 0 < n < m = 4");
  CHECK(error(R"({"pattern": "nm", "n": 0, "m": 4})") == "/weights/0/sparsity/n: n is 0, expected 0 < n < m = 4");
  CHECK(error(R"({"pattern": "nm", "n": 1, "m": 1})") == "/weights/0/sparsity/m: m is 1, expected an integer of 2 or more");
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": "4"})") == "/weights/0/sparsity/m: expected an integer, got \"4\"");
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": 4, "axis": 2})") == "/weights/0/sparsity/axis: axis 2 is not a dimension of a weight of rank 2");
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": 4, "axis": -3})") == "/weights/0/sparsity/axis: axis -3 is not a dimension of a weight of rank 2");
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": 3, "axis": 0})") ==
        "/weights/0/sparsity/axis: dimension 0 has extent 64, not a multiple of m = 3");
  CHECK(error(R"({"pattern": "nm", "n": 2, "m": 3})") == "/weights/0/sparsity: dimension 0 has extent 64, not a multiple of m = 3");
  CHECK(error(R"({"pattern": "ell"})") == "/weights/0/sparsity/pattern: sparsity pattern \"ell\" is not supported (supported: \"block\", \"nm\")");
  std::string zeros = "\"data\": [0";
  for (int i = 1; i < 64 * 128; ++i) zeros += ", 0";
  CHECK_THROWS_WITH_AS(load_with(R"({"pattern": "nm", "n": 2, "m": 4})", "i32", zeros + "]"),
                       doctest::Contains("N:M sparsity applies to float weights; this one is i32"), UserError);
}

TEST_CASE("nm_sparse kind: n / m of the sparse operand's bytes and of the FLOPs plus its metadata, hand-computed") {
  // x [256, 512] @ w [512, 1024] in f16, 64 x 128 tiles with K steps of 32: 32 tiles of 16 steps.
  // Per step x's box is 64 x 32 (4096 bytes), w's 32 x 128 (8192 bytes); the output tile 64 x 128
  // (16384 bytes). 2:4 with 2 bits per kept value: w's 4096 values keep 2048, 512 bytes of metadata.
  ModelBuilder b(DType::f16);
  const OpGraph g = b.graph(b.op("MatMul", {b.input("x", {256, 512}), b.weight("w", {512, 1024}, 1)}));
  const TeNode& node = g.node(g.producer(g.outputs()[0]));
  TileConfig dense;
  dense.levels.push_back(LevelTile{"smem", {64, 128}, {32}});
  TileConfig sparse = dense;
  sparse.kind = NmSparseProps{1, 2, 4, 2};
  REQUIRE(!check_tile(node, sparse));
  const TileQuery qs{&node, &sparse, 0, {}};
  const TileKind& ks = tile_kind_of(sparse);
  CHECK(ks.name() == "nm_sparse");
  CHECK(find_tile_kind("nm_sparse") == &ks);

  const TileTraffic td = tile_kind_of(dense).traffic(node, dense.levels[0], {}, dense.kind);
  REQUIRE(td.input_bytes == std::vector<int64_t>{32 * 16 * 4096, 32 * 16 * 8192});
  const TileTraffic ts = ks.traffic(node, sparse.levels[0], {}, sparse.kind);
  CHECK(ts.input_bytes == std::vector<int64_t>{32 * 16 * 4096, 32 * 16 * (4096 + 512)});
  CHECK(ts.output_bytes == 32 * 16384);
  CHECK(ts.total_bytes == 32 * 16 * 4096 + 32 * 16 * (4096 + 512) + 32 * 16384);
  CHECK(ks.traffic_bytes(qs) == ts.total_bytes);

  const TileFootprint fs = ks.footprint(node, sparse.levels[0], {}, sparse.kind);
  CHECK(fs.input_bytes == std::vector<int64_t>{4096, 4096 + 512});
  CHECK(fs.total_bytes == 4096 + 4608 + 16384);
  CHECK(ks.footprint_bytes(qs) == fs.total_bytes);
  // Three stages in flight: three of each operand's step boxes, metadata included.
  CHECK(ks.footprint(node, sparse.levels[0], {.pipeline_stages = 3}, sparse.kind).input_bytes ==
        std::vector<int64_t>{3 * 4096, 3 * (4096 + 512)});
  // 1:8 with 3 bits: 4096 values keep 512, 1536 bits = 192 bytes; the operand 1024 bytes.
  CHECK(ks.footprint(node, sparse.levels[0], {}, NmSparseProps{1, 1, 8, 3}).input_bytes[1] == 1024 + 192);

  CHECK(node.flops() == int64_t{2} * 256 * 1024 * 512);
  CHECK(ks.effective_flops(qs) == int64_t{256} * 1024 * 512);
  CHECK(ks.communication_bytes(qs) == 0);
  const std::vector<LoadPlan> loads = ks.load_plans(qs);
  REQUIRE(loads.size() == 2);
  CHECK(loads[0].kind == LoadKind::dense_box);
  CHECK(loads[0].data_bytes == 4096);
  CHECK(loads[0].metadata_bytes == 0);
  CHECK(loads[1].kind == LoadKind::nm_compressed);
  CHECK(loads[1].data_bytes == 4096);
  CHECK(loads[1].metadata_bytes == 512);
  CHECK(ks.store_plan(qs).kind == StoreKind::dense_box);
  CHECK(ks.store_plan(qs).data_bytes == 16384);
  CHECK(non_dense_plan(node, sparse) == std::optional<std::string>("nm_sparse nm_compressed"));
  CHECK(!non_dense_plan(node, sparse, {LoadKind::nm_compressed}));
}

TEST_CASE("nm_sparse kind: legality names what is wrong") {
  ModelBuilder b(DType::f16);
  const OpGraph g = b.graph(b.op("MatMul", {b.input("x", {256, 512}), b.weight("w", {512, 1024}, 1)}));
  const TeNode& node = g.node(g.producer(g.outputs()[0]));
  TileConfig config;
  config.levels = {LevelTile{"smem", {64, 128}, {32}}, LevelTile{"registers", {4, 4}, {4}}};
  config.kind = NmSparseProps{1, 2, 4, 2};
  CHECK(!check_tile(node, config));
  // Either operand of a product is summed over; x's groups run along its columns.
  config.kind = NmSparseProps{0, 2, 4, 2};
  CHECK(!check_tile(node, config));

  // The reduction step of the level asked about (check_tile: the outermost) must be a multiple of
  // m; an inner level's step is not the kernel's (a tensor-core family has its own K step, which
  // the backend checks), so a step of 1 there is legal.
  TileConfig bad = config;
  bad.kind = NmSparseProps{1, 2, 4, 2};
  bad.levels[1].reduction = {1};
  CHECK(!check_tile(node, bad));
  const TileKind& nm_kind = *find_tile_kind("nm_sparse");
  const std::string why = nm_kind.check_legal(TileQuery{&node, &bad, 1, {}}).value_or("");
  CHECK(why.starts_with("reduction step 1 of axis '"));
  CHECK(why.ends_with("' at level 'registers' is not a multiple of m = 4 (the N:M groups would straddle steps)"));
  bad.levels = {LevelTile{"smem", {64, 128}, {6}}};
  CHECK(check_tile(node, bad).value_or("").find("reduction step 6 of axis '") == 0);
  bad.kind = NmSparseProps{1, 1, 2, 1};  // 6 is a multiple of 2
  CHECK(!check_tile(node, bad));

  bad = config;
  bad.kind = NmSparseProps{2, 2, 4, 2};
  CHECK(check_tile(node, bad).value_or("").find("nm_sparse input 2 but '") == 0);
  bad.kind = NmSparseProps{1, 4, 4, 2};
  CHECK(check_tile(node, bad) == std::optional<std::string>("nm_sparse 4:4 needs 0 < n < m"));
  bad.kind = NmSparseProps{1, 0, 4, 2};
  CHECK(check_tile(node, bad) == std::optional<std::string>("nm_sparse 0:4 needs 0 < n < m"));
  bad.kind = NmSparseProps{1, 2, 4, 0};
  CHECK(check_tile(node, bad) == std::optional<std::string>("metadata_bits 0 is not positive"));
  // check_tile_config's reasons come through the kind.
  bad.kind = NmSparseProps{1, 2, 4, 2};
  bad.levels[1].spatial = {4};
  CHECK(check_tile(node, bad) == check_tile_config(node, bad));
  CHECK(check_tile(node, bad).has_value());
  // Another kind's properties, or a level out of range: reasons, not exceptions.
  const TileKind& kind = *find_tile_kind("nm_sparse");
  TileConfig dense = config;
  dense.kind = DenseProps{};
  CHECK(kind.check_legal(TileQuery{&node, &dense, 0, {}}) == std::optional<std::string>("tile kind 'nm_sparse' got the properties of another kind"));
  CHECK(kind.check_legal(TileQuery{&node, &config, 2, {}}) == std::optional<std::string>("level index 2 but the config has 2 levels"));

  // An input that is not summed over: nothing to group along.
  ModelBuilder e(DType::f16);
  const OpGraph eg = e.graph(e.op("Add", {e.input("a", {64, 128}), e.weight("c", {64, 128}, 2)}));
  const TeNode& add = eg.node(eg.producer(eg.outputs()[0]));
  TileConfig elementwise;
  elementwise.levels = {LevelTile{"smem", {64, 128}, {}}};
  elementwise.kind = NmSparseProps{1, 2, 4, 2};
  CHECK(check_tile(add, elementwise).value_or("").ends_with("' is not summed over: the N:M groups run along a reduction"));
  CHECK(check_nm_sparse(add, NmSparseProps{1, 2, 4, 2}) == check_tile(add, elementwise).value_or(""));
}
