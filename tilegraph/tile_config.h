// Tile configurations: how one tensor-expression node is cut into tiles at each memory level
// (DESIGN.md, "Tile config"). Plain data, produced by the policies, read by tile propagation
// (tile_propagation.h), the traffic formulas (tile_traffic.h), the cost model and the code
// generators; saved and replayed through JSON (import/tile_config_json.h).
//
// A TileConfig lists one LevelTile per memory level, outermost first: on a GPU typically the block
// tile staged in shared memory ("smem"), then the thread tile held in registers ("registers"); on a
// CPU the L2, L1 and register tiles. Each LevelTile gives a tile extent per spatial axis of the node
// and a step per reduction axis (the slice of the reduction loop staged at that level at once).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilegraph/node.h"
#include "tilegraph/tile_kind_props.h"

namespace tessel {

/// The tile of one node at one memory level.
struct LevelTile {
  /// Memory level name from the HwSpec ("smem", "registers", "l2", "l1d", ...).
  std::string level;
  /// Tile extent per spatial axis of the node (node.num_spatial() entries, each >= 1).
  std::vector<int64_t> spatial;
  /// Step per reduction axis (node.num_reduction() entries, each >= 1).
  std::vector<int64_t> reduction;

  bool operator==(const LevelTile&) const = default;
};

struct TileConfig {
  /// Outermost first, e.g. the block tile (smem) then the thread tile (registers).
  std::vector<LevelTile> levels;
  /// Threads (or SIMD lanes x cores) along each spatial axis of the outermost tile; empty = not
  /// mapped yet (a policy that only sizes tiles may leave it empty).
  std::vector<int64_t> threads;
  /// Elements per vector load/store along the innermost spatial axis.
  int vector_width = 1;
  /// Input tiles in flight per block (multi-buffering of the reduction loop).
  int pipeline_stages = 1;
  /// Block rasterization (swizzle) group size for L2 reuse; 1 = plain row-major block order.
  int raster_group = 1;
  /// How the node's tiles are stored and moved: the tile kind and its properties (tile_kind.h;
  /// dense by default). Footprint, traffic, legality and the load/store plans go through it.
  TileKindProps kind;

  bool operator==(const TileConfig&) const = default;
};

/// Checks `config` against `node`; returns the first rule broken (naming the level, axis and
/// value), or nullopt if the config is valid. The rules:
///  1. at least one level; level names are non-empty and distinct;
///  2. every level has node.num_spatial() spatial extents and node.num_reduction() reduction
///     steps, all >= 1. A tile extent may exceed its axis extent (a policy may round tiles up to a
///     hardware-friendly size; the tile is then clamped to the axis and the rest masked off);
///  3. nesting: for every axis, the extent at level i+1 divides the extent at level i (inner
///     tiles partition outer tiles exactly; this is also why clamping is only at the outer edge);
///  4. threads is empty or has node.num_spatial() entries >= 1, and for each spatial axis
///     threads[a] * (extent of the second level, or 1 with a single level) divides the outermost
///     extent (every thread owns the same number of inner tiles);
///  5. vector_width >= 1 is a power of two dividing the innermost level's last spatial extent
///     (a node without spatial axes only allows 1);
///  6. pipeline_stages >= 1 and raster_group >= 1.
std::optional<std::string> check_tile_config(const TeNode& node, const TileConfig& config);

/// Number of tiles of `tile` over the node's spatial domain: prod_a ceil(extent_a / tile_a)
/// (1 for a node without spatial axes; 0 if an axis has extent 0).
int64_t num_spatial_tiles(const TeNode& node, const LevelTile& tile);

/// Steps of the reduction loop for one tile: prod_r ceil(extent_r / step_r) (1 without reduction
/// axes).
int64_t num_reduction_steps(const TeNode& node, const LevelTile& tile);

/// Stable one-line text, used by tests, `--dump` and error messages:
///   "smem 128x128|32, registers 8x8|1; threads 16x16; vector 4; stages 2; raster 8"
/// Each level is `name spatial|reduction`, extents joined by 'x'; an empty list prints as "-".
/// `threads` prints as "-" when empty; a kind other than dense is appended as "; kind NAME".
std::string print_tile_config(const TileConfig& config);

}  // namespace tessel
