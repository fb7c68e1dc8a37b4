// Footprint and traffic of one node's tiles at one memory level: the data-movement half of the
// analytic cost model (cost_model/ divides these bytes by the level's bandwidth; DESIGN.md, "Cost
// model"). Built on tile propagation (tile_propagation.h); hardware facts (transaction size) come
// in through TrafficParams, so this file does not depend on hw_specs/.
//
// Both functions take the LevelTile of the level in question. The tile is evaluated at a
// representative position: along every axis the tile with index (n - 1) / 2 of the n tiles (or
// reduction steps) -- a full interior tile whenever the axis has at least 3 tiles, the first tile
// when it has 1 or 2 -- so a convolution's halo is counted as in the interior of the image.
//
// Formulas (E = element bytes of the tensor, T = params.transaction_bytes):
//   region bytes     B(R)   = elements of bounding_box(R) x E
//   rounded bytes    Bt(R)  = runs(R) x ceil(run_bytes(R) / T) x T, where a run is a maximal
//                             contiguous row-major stretch of the box: the innermost box extent,
//                             times the next ones while the box covers the whole inner dimension
//   footprint        F      = stages x sum_i B(R_i(step tile)) + B(output tile)
//                             (R_i(step tile): region of input i read by one reduction step of the
//                             tile; stages = params.pipeline_stages; the output tile is the
//                             accumulator, spatial extents x output element bytes)
//   input traffic    Q_i    = tiles x Bt(R_i(whole-reduction tile))   if input i's map does not
//                                                                      use any reduction axis
//                           = tiles x steps x Bt(R_i(step tile))        otherwise
//   output traffic   Q_out  = tiles x Bt(output tile in the node's spatial coordinates)
//   total traffic    Q      = sum_i Q_i + Q_out
// where tiles = num_spatial_tiles and steps = num_reduction_steps (tile_config.h). An input whose
// region does not depend on the reduction axes is loaded once per tile, not once per step
// ("reuse across the reduction loop"). Run alignment to T is not modelled (a run is assumed to
// start on a transaction boundary). A gather access counts the full gathered dimension.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilegraph/node.h"
#include "tilegraph/tile_config.h"
#include "tilegraph/tile_propagation.h"

namespace tessel {

/// Hardware and accounting parameters; the caller takes them from the HwSpec memory level the
/// data comes from.
struct TrafficParams {
  /// Transaction (sector, cache line) size in bytes of the level the data is moved from; each
  /// contiguous run is rounded up to a multiple of it. 1 = no rounding.
  int64_t transaction_bytes = 1;
  /// Element size used for every tensor; 0 = each tensor's own dtype size.
  int element_bytes = 0;
  /// Multiplier for input tiles in the footprint (multi-buffering); usually
  /// TileConfig::pipeline_stages.
  int pipeline_stages = 1;
};

/// Bytes resident at the level for one tile (formula F above).
struct TileFootprint {
  std::vector<int64_t> input_bytes;  // per input: stages x B(R_i(step tile))
  int64_t output_bytes = 0;          // B(output tile)
  int64_t total_bytes = 0;           // sum of the above
};

/// Bytes moved from the next level out over the whole operator (formulas Q above).
struct TileTraffic {
  int64_t num_tiles = 0;                 // spatial tiles over the domain
  int64_t reduction_steps = 1;           // reduction steps per tile
  std::vector<bool> input_reused;        // per input: loaded once per tile (no reduction axis)
  std::vector<int64_t> input_bytes;      // per input: Q_i
  int64_t output_bytes = 0;              // Q_out
  int64_t total_bytes = 0;               // Q
};

/// The representative domain tile of `tile` (see the file comment) with one reduction step, or
/// the whole reduction when `whole_reduction`.
DomainTile representative_tile(const TeNode& node, const LevelTile& tile, bool whole_reduction);

/// Rounded bytes Bt(R) of a region of a tensor of `shape` (formula above).
int64_t transaction_bytes_of(const Region& region, const std::vector<int64_t>& shape,
                             int element_bytes, int64_t transaction_bytes);

/// Footprint of one tile of `node` at the level of `tile`. `tile` must have the node's axis
/// counts (check_tile_config; InternalError otherwise).
TileFootprint tile_footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params);

/// Traffic of all tiles of `node` at the level of `tile` from the next level out.
TileTraffic tile_traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params);

}  // namespace tessel
