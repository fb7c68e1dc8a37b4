// TileConfig (tilegraph/tile_config.h) as JSON, so tile configs can be saved, diffed and replayed
// (STYLE.md habit 7). Lives in tessel_import because it uses nlohmann_json.
//
// Format (keys in this order when written; on reading every key but "levels" is optional and
// takes the TileConfig default, and unknown keys are rejected):
//   {"levels": [{"level": "smem", "spatial": [128, 128], "reduction": [32]},
//               {"level": "registers", "spatial": [8, 8], "reduction": [1]}],
//    "threads": [16, 16], "vector_width": 4, "pipeline_stages": 2, "raster_group": 8,
//    "kind": {"name": "dense"}}
// "kind" is the tile kind and its properties (tilegraph/tile_kind_props.h): {"name": "dense"};
// {"name": "block_sparse", "input", "block_m", "block_n", "density", "index_bytes"};
// {"name": "nm_sparse", "input", "n", "m", "metadata_bits"}; {"name": "sharded", "mesh_shape",
// "input_sharding", "output_sharding", "at_inputs", "at_output"} (collectives by name). Missing
// properties take the struct's defaults; a kind without an implementation reads, and every check
// then refuses it (tilegraph/tile_kind.h, check_tile).
// Reading checks JSON syntax and types (integers >= 1 for extents and the scalar fields, a
// non-empty string for "level"); it does not check the config against a node (check_tile_config
// does).
#pragma once

#include <string>

#include "tilegraph/tile_config.h"

namespace tessel {

/// JSON text of `config` (stable: fixed key order, one line).
std::string tile_config_to_json(const TileConfig& config);

/// Parses a tile config; raises UserError with `file`, a JSON pointer ("/levels/1/spatial/0") and
/// the offending value for bad input.
TileConfig tile_config_from_json(const std::string& text, const std::string& file);

}  // namespace tessel
