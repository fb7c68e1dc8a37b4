// Tile configs: the validity rules, the stable printer, and the JSON round trip with UserErrors
// carrying JSON pointers.
#include <doctest/doctest.h>

#include "tilegraph/error.h"
#include "tilegraph/import/tile_config_json.h"
#include "tilegraph/tile_config.h"

using namespace tessel;

namespace {

// out[i, j] = sum_k A[i, k] * B[k, j] (100 x 64, k 48).
NodeRef matmul_node() {
  NodeSpec s;
  s.name = "mm";
  s.axes = {{"i", 100, AxisKind::spatial}, {"j", 64, AxisKind::spatial}, {"k", 48, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {100, 48}}, AffineMap::select_axes(3, {0, 2})},
              Access{TensorType{DType::f32, {48, 64}}, AffineMap::select_axes(3, {2, 1})}};
  s.body = input(0, DType::f32) * input(1, DType::f32);
  s.combiner = Combiner::sum;
  return make_node(s);
}

TileConfig good_config() {
  TileConfig c;
  c.levels = {LevelTile{"smem", {64, 32}, {16}}, LevelTile{"registers", {4, 4}, {1}}};
  c.threads = {16, 8};
  c.vector_width = 4;
  c.pipeline_stages = 2;
  c.raster_group = 8;
  return c;
}

TileConfig one_level(LevelTile lt) {
  TileConfig c;
  c.levels = {std::move(lt)};
  return c;
}

std::string problem(const TileConfig& c) { return check_tile_config(*matmul_node(), c).value_or(""); }

}  // namespace

TEST_CASE("a valid config, its printer and counts") {
  const TileConfig c = good_config();
  CHECK_FALSE(check_tile_config(*matmul_node(), c).has_value());
  CHECK(print_tile_config(c) == "smem 64x32|16, registers 4x4|1; threads 16x8; vector 4; stages 2; raster 8");
  // A tile larger than the axis (64 over i = 100 leaves a partial tile) is fine.
  CHECK(num_spatial_tiles(*matmul_node(), c.levels[0]) == 2 * 2);
  CHECK(num_reduction_steps(*matmul_node(), c.levels[0]) == 3);
  TileConfig bare;
  bare.levels = {LevelTile{"l2", {256, 256}, {48}}};
  CHECK_FALSE(check_tile_config(*matmul_node(), bare).has_value());
  CHECK(print_tile_config(bare) == "l2 256x256|48; threads -; vector 1; stages 1; raster 1");
  CHECK(good_config() == c);
  bare.levels[0].level = "l1d";
  CHECK_FALSE(bare == one_level(LevelTile{"l2", {256, 256}, {48}}));
}

TEST_CASE("invalid configs name the rule, level, axis and value") {
  CHECK(problem(TileConfig{}) == "tile config has no levels");
  TileConfig c = good_config();
  c.levels[1].spatial = {4};
  CHECK(problem(c) == "level 'registers' has 1 spatial extents but node 'mm' has 2 spatial axes");
  c = good_config();
  c.levels[0].reduction = {};
  CHECK(problem(c) == "level 'smem' has 0 reduction steps but node 'mm' has 1 reduction axes");
  c = good_config();
  c.levels[0].spatial[1] = 0;
  CHECK(problem(c) == "level 'smem': tile extent of axis 'j' is 0 (must be >= 1)");
  c = good_config();
  c.levels[1].level = "smem";
  CHECK(problem(c) == "level 'smem' appears twice");
  c = good_config();
  c.levels[1].reduction = {3};
  CHECK(problem(c) == "axis 'k': tile 3 at level 'registers' does not divide tile 16 at level 'smem'");
  c = good_config();
  c.threads = {16, 16};
  CHECK(problem(c) == "axis 'j': 16 threads x tile 4 do not divide the outermost tile 32");
  c = good_config();
  c.threads = {16};
  CHECK(problem(c) == "threads has 1 entries but node 'mm' has 2 spatial axes");
  c = good_config();
  c.vector_width = 3;
  CHECK(problem(c) == "vector_width 3 is not a power of two >= 1");
  c.vector_width = 8;
  CHECK(problem(c) == "vector_width 8 does not divide the innermost tile extent 4 of axis 'j'");
  c = good_config();
  c.pipeline_stages = 0;
  CHECK(problem(c) == "pipeline_stages is 0 (must be >= 1)");
  c = good_config();
  c.raster_group = -1;
  CHECK(problem(c) == "raster_group is -1 (must be >= 1)");
}

TEST_CASE("JSON round trip") {
  const TileConfig c = good_config();
  const std::string text = tile_config_to_json(c);
  CHECK(text ==
        R"({"levels":[{"level":"smem","spatial":[64,32],"reduction":[16]},)"
        R"({"level":"registers","spatial":[4,4],"reduction":[1]}],)"
        R"("threads":[16,8],"vector_width":4,"pipeline_stages":2,"raster_group":8,"kind":{"name":"dense"}})");
  CHECK(tile_config_from_json(text, "c.json") == c);
  // Every kind's properties round-trip, whether or not the kind is implemented yet.
  for (const TileKindProps& kind :
       {TileKindProps{BlockSparseProps{1, 32, 16, 0.375, 2}}, TileKindProps{NmSparseProps{1, 2, 4, 2}},
        TileKindProps{ShardedProps{{2, 4}, {{-1, 0}, {0, 1}}, {-1, 1}, {Collective::none, Collective::all_gather},
                                   Collective::reduce_scatter}}}) {
    TileConfig k = c;
    k.kind = kind;
    CAPTURE(tile_kind_name(kind));
    CHECK(tile_config_from_json(tile_config_to_json(k), "k.json") == k);
  }
  // Optional keys take their defaults.
  const TileConfig d = tile_config_from_json(R"({"levels": [{"level": "l2", "spatial": [8]}]})", "d.json");
  CHECK(d == one_level(LevelTile{"l2", {8}, {}}));
}

TEST_CASE("bad tile config JSON raises UserError with a JSON pointer") {
  auto location = [](const std::string& text) -> std::string {
    try {
      tile_config_from_json(text, "bad.json");
    } catch (const UserError& e) {
      CHECK(e.file() == "bad.json");
      return e.location() + ": " + e.message();
    }
    return "no error";
  };
  CHECK(location("{").rfind(": malformed JSON: ", 0) == 0);
  CHECK(location("[]") == ": expected an object, got a list []");
  CHECK(location("{}") == ": missing key \"levels\"");
  CHECK(location(R"({"levels": []})") == "/levels: expected a non-empty list of levels, got a list []");
  CHECK(location(R"({"levels": [{"level": "smem", "spatial": [4], "tile": 1}]})") ==
        "/levels/0/tile: unknown key \"tile\"");
  CHECK(location(R"({"levels": [{"level": "smem", "spatial": [4, -2]}]})") ==
        "/levels/0/spatial/1: expected an integer >= 1, got -2");
  CHECK(location(R"({"levels": [{"level": "", "spatial": [4]}]})") ==
        "/levels/0/level: expected a non-empty level name, got \"\"");
  CHECK(location(R"({"levels": [{"level": "smem"}]})") == "/levels/0: missing key \"spatial\"");
  CHECK(location(R"({"levels": [{"level": "smem", "spatial": [4]}], "vector_width": "4"})") ==
        "/vector_width: expected an integer >= 1, got \"4\"");
  CHECK(location(R"({"levels": [{"level": "smem", "spatial": [4.5]}]})") ==
        "/levels/0/spatial/0: expected an integer >= 1, got 4.5");
  const std::string lv = R"({"levels": [{"level": "smem", "spatial": [4]}], "kind": )";
  CHECK(location(lv + R"("dense"})").rfind("/kind: expected an object with a \"name\"", 0) == 0);
  CHECK(location(lv + R"({"name": "ell"}})") == "/kind/name: unknown tile kind \"ell\" (dense, block_sparse, nm_sparse, sharded)");
  CHECK(location(lv + R"({"name": "dense", "input": 1}})") == "/kind/input: unknown key \"input\"");
  CHECK(location(lv + R"({"name": "block_sparse", "density": 1.5}})") == "/kind/density: expected a fraction in (0, 1], got 1.5");
  CHECK(location(lv + R"({"name": "nm_sparse", "n": 5, "m": 4}})") == "/kind/n: n is 5, more than m = 4");
  CHECK(location(lv + R"({"name": "sharded", "mesh_shape": [2], "output_sharding": [1]}})") ==
        "/kind/output_sharding/0: expected a mesh axis in [-1, 1), got 1");
  CHECK(location(lv + R"({"name": "sharded", "at_output": "gather"}})").rfind("/kind/at_output: expected a collective", 0) == 0);
}

TEST_CASE("tile config JSON: a repeated key is a UserError naming the key") {
  try {
    tile_config_from_json(R"({"levels": [], "levels": []})", "t.json");
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("t.json") != std::string::npos);
    CHECK(std::string(e.what()).find("duplicate key \"levels\"") != std::string::npos);
  }
}
