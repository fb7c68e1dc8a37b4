// Tile footprint and traffic (tile_traffic.h), hand-computed: a matmul tile, a convolution tile,
// transaction rounding of contiguous runs, and reuse across the reduction loop. Also the dense
// tile kind, which reports the same numbers through the TileKind interface.
#include <doctest/doctest.h>

#include "tests/test_util.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_traffic.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

// out[i, j] = sum_k A[i, k] * B[k, j] with A: [128, 64], B: [64, 96] (f32).
NodeRef matmul_node() {
  NodeSpec s;
  s.name = "mm";
  s.axes = {{"i", 128, AxisKind::spatial}, {"j", 96, AxisKind::spatial}, {"k", 64, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {128, 64}}, AffineMap::select_axes(3, {0, 2})},
              Access{TensorType{DType::f32, {64, 96}}, AffineMap::select_axes(3, {2, 1})}};
  s.body = input(0, DType::f32) * input(1, DType::f32);
  s.combiner = Combiner::sum;
  return make_node(s);
}

const LevelTile kMatmulTile{"smem", {32, 32}, {16}};

}  // namespace

TEST_CASE("matmul tile: footprint") {
  NodeRef mm = matmul_node();
  CHECK(num_spatial_tiles(*mm, kMatmulTile) == 4 * 3);
  CHECK(num_reduction_steps(*mm, kMatmulTile) == 4);
  // Representative tile: index (n-1)/2 along each axis = i [32,64), j [32,64), k [16,32).
  CHECK(representative_tile(*mm, kMatmulTile, false) == DomainTile{{32, 32, 16}, {32, 32, 16}});
  CHECK(representative_tile(*mm, kMatmulTile, true) == DomainTile{{32, 32, 0}, {32, 32, 64}});
  // A 32x16 + B 16x32 + C 32x32 floats.
  const TileFootprint f = tile_footprint(*mm, kMatmulTile, {});
  CHECK(f.input_bytes == std::vector<int64_t>{2048, 2048});
  CHECK(f.output_bytes == 4096);
  CHECK(f.total_bytes == 8192);
  // Double buffering doubles the input tiles, not the accumulator; fp16 halves everything.
  CHECK(tile_footprint(*mm, kMatmulTile, {.pipeline_stages = 2}).total_bytes == 12288);
  CHECK(tile_footprint(*mm, kMatmulTile, {.element_bytes = 2}).total_bytes == 4096);
}

TEST_CASE("matmul tile: traffic, with and without transaction rounding") {
  NodeRef mm = matmul_node();
  // No rounding: 12 tiles x 4 steps x 2048 bytes per input; C written once (12 x 4096).
  const TileTraffic q = tile_traffic(*mm, kMatmulTile, {});
  CHECK(q.num_tiles == 12);
  CHECK(q.reduction_steps == 4);
  CHECK(q.input_reused == std::vector<bool>{false, false});
  CHECK(q.input_bytes == std::vector<int64_t>{98304, 98304});
  CHECK(q.output_bytes == 49152);
  CHECK(q.total_bytes == 245760);
  // 128-byte transactions: A's runs are 16 floats = 64 bytes, rounded up to 128 (32 runs per step);
  // B's and C's runs are 32 floats = 128 bytes, already aligned.
  const TileTraffic t = tile_traffic(*mm, kMatmulTile, {.transaction_bytes = 128});
  CHECK(t.input_bytes == std::vector<int64_t>{12 * 4 * 32 * 128, 98304});
  CHECK(t.output_bytes == 49152);
}

TEST_CASE("transaction rounding merges runs across whole inner dimensions") {
  // A box covering whole rows of a [4, 8] tensor is one run.
  const Region rows{{IndexSet::range(1, 3), IndexSet::range(0, 8)}};
  CHECK(transaction_bytes_of(rows, {4, 8}, 4, 128) == 128);  // 64 bytes -> one transaction
  const Region cols{{IndexSet::range(1, 3), IndexSet::range(0, 5)}};
  CHECK(transaction_bytes_of(cols, {4, 8}, 4, 32) == 2 * 32);  // two runs of 20 bytes
  CHECK(transaction_bytes_of(cols, {4, 8}, 4, 1) == 40);
  CHECK(transaction_bytes_of(Region{{IndexSet{}, IndexSet{}}}, {4, 8}, 4, 32) == 0);
}

TEST_CASE("reuse across the reduction loop: an input independent of k is loaded once per tile") {
  // out[i] = sum_k x[i, k] * s[i] with x: [64, 128], s: [64]; tile i 16 | k 32.
  NodeSpec spec;
  spec.name = "rowdot";
  spec.axes = {{"i", 64, AxisKind::spatial}, {"k", 128, AxisKind::reduction}};
  spec.inputs = {Access{TensorType{DType::f32, {64, 128}}, AffineMap::select_axes(2, {0, 1})},
                 Access{TensorType{DType::f32, {64}}, AffineMap::select_axes(2, {0})}};
  spec.body = input(0, DType::f32) * input(1, DType::f32);
  spec.combiner = Combiner::sum;
  NodeRef n = make_node(spec);
  const LevelTile lt{"smem", {16}, {32}};
  const TileTraffic q = tile_traffic(*n, lt, {});
  CHECK(q.num_tiles == 4);
  CHECK(q.reduction_steps == 4);
  CHECK(q.input_reused == std::vector<bool>{false, true});
  CHECK(q.input_bytes[0] == 4 * 4 * 16 * 32 * 4);  // per step
  CHECK(q.input_bytes[1] == 4 * 16 * 4);           // once per tile, not 4 times
  CHECK(q.output_bytes == 4 * 16 * 4);
}

TEST_CASE("conv tile: halo clamped at the border, weights per channel step") {
  // x [1,2,8,8], w [4,2,3,3], pads 1: out [1,4,8,8]; tile n1 m4 o0 4 o1 4 | c 1, k0 3, k1 3.
  const OpGraph g = lower_model(single_op_model(
      "Conv", {random_f32({1, 2, 8, 8}, 1), random_f32({4, 2, 3, 3}, 2)},
      {{"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}}, 1, {1}));
  const TeNode& conv = g.node(0);
  const LevelTile lt{"smem", {1, 4, 4, 4}, {1, 3, 3}};
  // Representative tile: o0, o1 at tile 0 of 2, c = 0. Rows o0 + k0 - 1 for o0 in [0, 4) span
  // [-1, 5), clamped to [0, 5): 5x5 of the 6x6 halo tile (both tiles along an axis touch a
  // border, so every tile reads 5x5).
  const TileFootprint f = tile_footprint(conv, lt, {});
  CHECK(f.input_bytes == std::vector<int64_t>{5 * 5 * 4, 4 * 9 * 4});
  CHECK(f.output_bytes == 4 * 4 * 4 * 4);
  CHECK(f.total_bytes == 100 + 144 + 256);
  const TileTraffic q = tile_traffic(conv, lt, {});
  CHECK(q.num_tiles == 4);
  CHECK(q.reduction_steps == 2);
  CHECK(q.input_bytes == std::vector<int64_t>{4 * 2 * 100, 4 * 2 * 144});
  CHECK(q.output_bytes == 4 * 256);
  // 32-byte transactions: x has 5 runs of 5 floats (20 -> 32 bytes); w's box [4,1,3,3] has 4 runs
  // of 9 floats (36 -> 64 bytes); the output box has 16 runs of 4 floats (16 -> 32 bytes).
  const TileTraffic t = tile_traffic(conv, lt, {.transaction_bytes = 32});
  CHECK(t.input_bytes == std::vector<int64_t>{4 * 2 * 5 * 32, 4 * 2 * 4 * 64});
  CHECK(t.output_bytes == 4 * 16 * 32);
  CHECK(t.total_bytes == 1280 + 2048 + 2048);
}

TEST_CASE("the dense tile kind reports the same numbers through the TileKind interface") {
  NodeRef mm = matmul_node();
  TileConfig config;
  config.levels = {kMatmulTile, LevelTile{"registers", {4, 4}, {1}}};
  config.threads = {8, 8};
  config.vector_width = 4;
  const TileKind* dense = find_tile_kind("dense");
  REQUIRE(dense != nullptr);
  CHECK(tile_kinds().size() == 3);  // dense, block_sparse, nm_sparse (sparsity_test.cpp)
  CHECK(find_tile_kind("block_sparse") != nullptr);
  CHECK(find_tile_kind("nm_sparse") != nullptr);
  CHECK(find_tile_kind("sharded") == nullptr);
  TileQuery q{mm.get(), &config, 0, {.transaction_bytes = 128}};
  CHECK_FALSE(dense->check_legal(q).has_value());
  CHECK(dense->footprint_bytes(q) == 8192);
  CHECK(dense->traffic_bytes(q) == tile_traffic(*mm, kMatmulTile, q.params).total_bytes);
  CHECK(dense->communication_bytes(q) == 0);
  CHECK(dense->effective_flops(q) == mm->flops());
  const std::vector<LoadPlan> loads = dense->load_plans(q);
  REQUIRE(loads.size() == 2);
  CHECK(loads[0].kind == LoadKind::dense_box);
  CHECK(loads[0].vector_width == 1);  // A's innermost dimension follows k, not j
  CHECK(loads[1].vector_width == 4);
  CHECK(loads[1].data_bytes == 2048);
  CHECK_FALSE(loads[1].once_per_tile);
  const StorePlan store = dense->store_plan(q);
  CHECK(store.data_bytes == 4096);
  CHECK(store.vector_width == 4);
  CHECK(dense->traffic(*mm, kMatmulTile, q.params, config.kind).input_bytes ==
        tile_traffic(*mm, kMatmulTile, q.params).input_bytes);
  CHECK(&tile_kind_of(config) == dense);
  CHECK_FALSE(check_tile(*mm, config).has_value());
  CHECK_FALSE(non_dense_plan(*mm, config).has_value());
  // Another kind's properties, or a level index out of range, are reasons, not exceptions.
  TileConfig other = config;
  other.kind = NmSparseProps{};
  q.config = &other;
  CHECK(dense->check_legal(q).value_or("") == "tile kind 'dense' got the properties of another kind");
  q.config = &config;
  q.level = 2;
  CHECK(dense->check_legal(q).value_or("") == "level index 2 but the config has 2 levels");
  CHECK(collective_name(Collective::reduce_scatter) == "reduce_scatter");
}

TEST_CASE("a tile kind without an implementation is refused by every check, naming it") {
  NodeRef mm = matmul_node();
  TileConfig config;
  config.levels = {kMatmulTile};
  config.kind = ShardedProps{{2}, {{-1, 0}, {0, -1}}, {-1, -1}, {Collective::none, Collective::none}, Collective::all_reduce};
  CHECK(tile_kind_name(config.kind) == "sharded");
  CHECK(print_tile_config(config).ends_with("; kind sharded"));
  CHECK(check_tile(*mm, config).value_or("").find("tile kind 'sharded' has no implementation yet (implemented: dense, block_sparse, nm_sparse)") == 0);
  CHECK_THROWS_WITH_AS(tile_kind_of(config), doctest::Contains("'sharded' has no implementation"), UserError);
  CHECK_THROWS_AS(non_dense_plan(*mm, config), UserError);
  // A broken dense config is still reported through the kind (check_tile_config's reason).
  TileConfig bad;
  bad.levels = {LevelTile{"smem", {64}, {32}}};
  CHECK(check_tile(*mm, bad) == check_tile_config(*mm, bad));
  CHECK(check_tile(*mm, bad).has_value());
}
