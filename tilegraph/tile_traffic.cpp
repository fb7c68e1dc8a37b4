// Footprint and traffic formulas of one node's tiles at one memory level (tile_traffic.h).
#include "tilegraph/tile_traffic.h"

#include <algorithm>

#include "tilegraph/error.h"

namespace tessel {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int element_bytes(const TrafficParams& params, DType t) {
  return params.element_bytes > 0 ? params.element_bytes : dtype_bytes(t);
}

// True if the access's index does not depend on any reduction axis.
bool independent_of_reduction(const TeNode& node, const Access& acc) {
  for (const AffineExpr& row : acc.map.results())
    for (int a = node.num_spatial(); a < node.num_axes(); ++a)
      if (row.coeffs[a] != 0) return false;
  return true;
}

// The output tile as a box in the node's spatial coordinates.
Region spatial_box(const TeNode& node, const DomainTile& t) {
  Region r;
  for (int a = 0; a < node.num_spatial(); ++a)
    r.dims.push_back(IndexSet::range(t.begin[a], t.begin[a] + t.extent[a]));
  return r;
}

std::vector<int64_t> spatial_extents(const TeNode& node) {
  std::vector<int64_t> e;
  for (int a = 0; a < node.num_spatial(); ++a) e.push_back(node.axes()[a].extent);
  return e;
}

void check_counts(const TeNode& node, const LevelTile& tile) {
  TESSEL_ASSERT(static_cast<int>(tile.spatial.size()) == node.num_spatial() &&
                    static_cast<int>(tile.reduction.size()) == node.num_reduction(),
                "level '", tile.level, "' has ", tile.spatial.size(), "+", tile.reduction.size(),
                " extents for node '", node.name(), "' with ", node.num_spatial(), "+",
                node.num_reduction(), " axes");
}

}  // namespace

DomainTile representative_tile(const TeNode& node, const LevelTile& tile, bool whole_reduction) {
  check_counts(node, tile);
  DomainTile t;
  for (int a = 0; a < node.num_axes(); ++a) {
    const int64_t extent = node.axes()[a].extent;
    const bool spatial = a < node.num_spatial();
    if (!spatial && whole_reduction) {
      t.begin.push_back(0);
      t.extent.push_back(extent);
      continue;
    }
    const int64_t size = spatial ? tile.spatial[a] : tile.reduction[a - node.num_spatial()];
    TESSEL_ASSERT(size >= 1, "tile extent ", size, " at level '", tile.level, "'");
    const int64_t n = ceil_div(extent, size);
    const int64_t begin = n > 0 ? (n - 1) / 2 * size : 0;
    t.begin.push_back(begin);
    t.extent.push_back(std::min(size, extent - begin));
  }
  return t;
}

int64_t transaction_bytes_of(const Region& region, const std::vector<int64_t>& shape,
                             int element_bytes, int64_t transaction_bytes) {
  TESSEL_ASSERT(transaction_bytes >= 1, "transaction_bytes ", transaction_bytes);
  TESSEL_ASSERT(region.rank() == static_cast<int>(shape.size()), "region of rank ", region.rank(),
                " for a tensor of rank ", shape.size());
  if (region.empty()) return 0;
  const Region box = bounding_box(region);
  const int rank = box.rank();
  int64_t run = 1, runs = 1;
  if (rank > 0) {
    // A run grows outwards while the box covers whole inner dimensions.
    int d = rank - 1;
    run = box.dims[d].count();
    while (d > 0 && box.dims[d].count() == shape[d]) run *= box.dims[--d].count();
    for (int k = 0; k < d; ++k) runs *= box.dims[k].count();
  }
  return runs * ceil_div(run * element_bytes, transaction_bytes) * transaction_bytes;
}

TileFootprint tile_footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params) {
  const DomainTile step = representative_tile(node, tile, /*whole_reduction=*/false);
  TileFootprint f;
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const Access& acc = node.inputs()[i];
    const int64_t elems = num_elements(bounding_box(read_region(node, i, step)));
    f.input_bytes.push_back(params.pipeline_stages * elems * element_bytes(params, acc.type.dtype));
    f.total_bytes += f.input_bytes.back();
  }
  f.output_bytes = num_elements(spatial_box(node, step)) * element_bytes(params, node.output().dtype);
  f.total_bytes += f.output_bytes;
  return f;
}

TileTraffic tile_traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params) {
  const DomainTile step = representative_tile(node, tile, /*whole_reduction=*/false);
  const DomainTile whole = representative_tile(node, tile, /*whole_reduction=*/true);
  TileTraffic q;
  q.num_tiles = num_spatial_tiles(node, tile);
  q.reduction_steps = num_reduction_steps(node, tile);
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const Access& acc = node.inputs()[i];
    const int eb = element_bytes(params, acc.type.dtype);
    const bool reused = independent_of_reduction(node, acc);
    const int64_t per_tile =
        reused ? transaction_bytes_of(read_region(node, i, whole), acc.type.shape, eb,
                                      params.transaction_bytes)
               : q.reduction_steps * transaction_bytes_of(read_region(node, i, step),
                                                          acc.type.shape, eb, params.transaction_bytes);
    q.input_reused.push_back(reused);
    q.input_bytes.push_back(q.num_tiles * per_tile);
    q.total_bytes += q.input_bytes.back();
  }
  q.output_bytes = q.num_tiles * transaction_bytes_of(spatial_box(node, step), spatial_extents(node),
                                                      element_bytes(params, node.output().dtype),
                                                      params.transaction_bytes);
  q.total_bytes += q.output_bytes;
  return q;
}

}  // namespace tessel
