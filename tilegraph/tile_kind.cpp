// The tile-kind registry and the dense, block_sparse and nm_sparse tile kinds (tile_kind.h).
#include "tilegraph/tile_kind.h"

#include <algorithm>
#include <cmath>

#include "tilegraph/error.h"

namespace tessel {
namespace {

const LevelTile& level_of(const TileQuery& q) {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  TESSEL_ASSERT(q.level >= 0 && q.level < static_cast<int>(q.config->levels.size()), "level index ",
                q.level, " of a config with ", q.config->levels.size(), " levels");
  return q.config->levels[q.level];
}

// Vector loads apply to an input whose innermost dimension walks the node's innermost spatial axis
// with unit stride (and no other axis of the tile moves it faster).
bool vectorizable(const TeNode& node, const Access& acc) {
  if (node.num_spatial() == 0 || acc.type.rank() == 0 || acc.is_gather()) return false;
  const AffineExpr& row = acc.map.result(acc.type.rank() - 1);
  return row.coeffs[node.num_spatial() - 1] == 1;
}

}  // namespace

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::none: return "none";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::shift: return "shift";
  }
  return "?";
}

std::string_view tile_kind_name(const TileKindProps& props) {
  struct Name {
    std::string_view operator()(const DenseProps&) const { return "dense"; }
    std::string_view operator()(const BlockSparseProps&) const { return "block_sparse"; }
    std::string_view operator()(const NmSparseProps&) const { return "nm_sparse"; }
    std::string_view operator()(const ShardedProps&) const { return "sharded"; }
  };
  return std::visit(Name{}, props);
}

int64_t TileKind::footprint_bytes(const TileQuery& q) const {
  return footprint(*q.node, level_of(q), q.params, q.config->kind).total_bytes;
}

int64_t TileKind::traffic_bytes(const TileQuery& q) const {
  return traffic(*q.node, level_of(q), q.params, q.config->kind).total_bytes;
}

TileFootprint DenseTileKind::footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                       const TileKindProps&) const {
  return tile_footprint(node, tile, params);
}

TileTraffic DenseTileKind::traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                   const TileKindProps&) const {
  return tile_traffic(node, tile, params);
}

int64_t DenseTileKind::effective_flops(const TileQuery& q) const {
  TESSEL_ASSERT(q.node, "TileQuery without node");
  return q.node->flops();
}

std::optional<std::string> DenseTileKind::check_legal(const TileQuery& q) const {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  if (!std::holds_alternative<DenseProps>(q.config->kind))
    return "tile kind 'dense' got the properties of another kind";
  if (q.level < 0 || q.level >= static_cast<int>(q.config->levels.size()))
    return cat("level index ", q.level, " but the config has ", q.config->levels.size(), " levels");
  return check_tile_config(*q.node, *q.config);
}

std::vector<LoadPlan> DenseTileKind::load_plans(const TileQuery& q) const {
  const LevelTile& lt = level_of(q);
  const TeNode& node = *q.node;
  const DomainTile step = representative_tile(node, lt, /*whole_reduction=*/false);
  std::vector<LoadPlan> plans;
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const Access& acc = node.inputs()[i];
    LoadPlan p;
    p.input = i;
    p.kind = LoadKind::dense_box;
    p.box = bounding_box(input_region(node, i, step));
    p.vector_width = vectorizable(node, acc) ? q.config->vector_width : 1;
    const int eb = q.params.element_bytes > 0 ? q.params.element_bytes : dtype_bytes(acc.type.dtype);
    p.data_bytes = num_elements(p.box) * eb;
    p.once_per_tile = true;
    for (const AffineExpr& row : acc.map.results())
      for (int a = node.num_spatial(); a < node.num_axes(); ++a)
        if (row.coeffs[a] != 0) p.once_per_tile = false;
    plans.push_back(std::move(p));
  }
  return plans;
}

StorePlan DenseTileKind::store_plan(const TileQuery& q) const {
  const LevelTile& lt = level_of(q);
  const TeNode& node = *q.node;
  const DomainTile step = representative_tile(node, lt, /*whole_reduction=*/false);
  StorePlan p;
  p.kind = StoreKind::dense_box;
  for (int a = 0; a < node.num_spatial(); ++a)
    p.box.dims.push_back(IndexSet::range(step.begin[a], step.begin[a] + step.extent[a]));
  p.vector_width = node.num_spatial() > 0 ? q.config->vector_width : 1;
  const int eb = q.params.element_bytes > 0 ? q.params.element_bytes : dtype_bytes(node.output().dtype);
  p.data_bytes = num_elements(p.box) * eb;
  return p;
}

// ---- block_sparse ----

namespace {

const BlockSparseProps& bsr(const TileKindProps& props) {
  const auto* p = std::get_if<BlockSparseProps>(&props);
  TESSEL_ASSERT(p, "tile kind 'block_sparse' got the properties of '", tile_kind_name(props), "'");
  return *p;
}

// Bytes of block indices a tile walks: one per non-zero block of the sparse input's region (the
// expected count: density x the blocks the region covers), plus a row pointer.
int64_t index_bytes_of(const Region& box, const BlockSparseProps& p) {
  const size_t r = box.dims.size();
  if (r < 2) return 0;
  const int64_t rows = box.dims[r - 2].count(), cols = box.dims[r - 1].count();
  const double blocks = static_cast<double>((rows + p.block_m - 1) / p.block_m) * static_cast<double>((cols + p.block_n - 1) / p.block_n);
  return static_cast<int64_t>(std::ceil(p.density * blocks)) * p.index_bytes + p.index_bytes;
}

// Why input `input` of `node` is not a plain matrix read for a sparse kind named `kind`: each of
// its last two dimensions must walk one axis of the node with unit coefficient and no offset.
// `reductions` counts the matrix dimensions that walk a reduction axis. "" when it is.
std::string check_matrix_read(const TeNode& node, int input, std::string_view kind, int& reductions) {
  reductions = 0;
  if (input < 0 || input >= static_cast<int>(node.inputs().size()))
    return cat(kind, " input ", input, " but '", node.name(), "' has ", node.inputs().size(), " inputs");
  const Access& acc = node.inputs()[input];
  const int rank = acc.type.rank();
  if (rank < 2 || acc.is_gather()) return cat("input ", input, " of '", node.name(), "' is not a matrix read");
  for (int d = rank - 2; d < rank; ++d) {
    const AffineExpr& row = acc.map.result(d);
    int axes = 0;
    for (int a = 0; a < node.num_axes(); ++a)
      if (row.coeffs[a] != 0) {
        ++axes;
        if (row.coeffs[a] != 1) axes += 2;
        reductions += a >= node.num_spatial();
      }
    if (axes != 1 || row.offset != 0)
      return cat("dimension ", d, " of input ", input, " of '", node.name(), "' is not read along one axis");
  }
  return "";
}

}  // namespace

std::string check_block_sparse(const TeNode& node, const BlockSparseProps& p) {
  int reductions = 0;
  if (std::string why = check_matrix_read(node, p.input, "block_sparse", reductions); !why.empty()) return why;
  if (reductions == 0) return cat("input ", p.input, " of '", node.name(), "' is not summed over: no block can be skipped");
  if (p.block_m <= 0 || p.block_n <= 0) return cat("block ", p.block_m, "x", p.block_n, " is not positive");
  if (!(p.density >= 0 && p.density <= 1)) return cat("density ", p.density, " is not in [0, 1]");
  if (p.index_bytes <= 0) return cat("index_bytes ", p.index_bytes, " is not positive");
  return "";
}

TileFootprint BlockSparseTileKind::footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                             const TileKindProps& props) const {
  const BlockSparseProps& p = bsr(props);
  TileFootprint f = tile_footprint(node, tile, params);
  // Capacity is the dense bound (any block of the tile may be non-zero) plus its indices.
  const DomainTile step = representative_tile(node, tile, /*whole_reduction=*/false);
  const int64_t idx = index_bytes_of(bounding_box(input_region(node, p.input, step)), BlockSparseProps{p.input, p.block_m, p.block_n, 1.0, p.index_bytes});
  f.input_bytes[p.input] += idx;
  f.total_bytes += idx;
  return f;
}

TileTraffic BlockSparseTileKind::traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                         const TileKindProps& props) const {
  const BlockSparseProps& p = bsr(props);
  TileTraffic t = tile_traffic(node, tile, params);
  // Every input read along the reduction is read only where the sparse operand's block is not
  // zero: the expected bytes are the dense ones times the density.
  int64_t total = t.output_bytes;
  for (size_t i = 0; i < t.input_bytes.size(); ++i) {
    if (!t.input_reused[i]) t.input_bytes[i] = static_cast<int64_t>(std::ceil(p.density * static_cast<double>(t.input_bytes[i])));
    total += t.input_bytes[i];
  }
  const DomainTile step = representative_tile(node, tile, /*whole_reduction=*/true);
  const int64_t idx = t.num_tiles * index_bytes_of(bounding_box(input_region(node, p.input, step)), p);
  t.input_bytes[p.input] += idx;
  t.total_bytes = total + idx;
  return t;
}

int64_t BlockSparseTileKind::effective_flops(const TileQuery& q) const {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  return static_cast<int64_t>(std::ceil(bsr(q.config->kind).density * static_cast<double>(q.node->flops())));
}

std::optional<std::string> BlockSparseTileKind::check_legal(const TileQuery& q) const {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  const auto* p = std::get_if<BlockSparseProps>(&q.config->kind);
  if (!p) return "tile kind 'block_sparse' got the properties of another kind";
  if (q.level < 0 || q.level >= static_cast<int>(q.config->levels.size()))
    return cat("level index ", q.level, " but the config has ", q.config->levels.size(), " levels");
  if (std::string why = check_block_sparse(*q.node, *p); !why.empty()) return why;
  return check_tile_config(*q.node, *q.config);
}

std::vector<LoadPlan> BlockSparseTileKind::load_plans(const TileQuery& q) const {
  static const DenseTileKind dense;
  std::vector<LoadPlan> plans = dense.load_plans(q);
  const BlockSparseProps& p = bsr(q.config->kind);
  LoadPlan& sparse = plans.at(p.input);
  sparse.kind = LoadKind::bsr_blocks;
  sparse.metadata_bytes = index_bytes_of(sparse.box, p);
  for (LoadPlan& l : plans)
    if (!l.once_per_tile) l.data_bytes = static_cast<int64_t>(std::ceil(p.density * static_cast<double>(l.data_bytes)));
  return plans;
}

StorePlan BlockSparseTileKind::store_plan(const TileQuery& q) const {
  static const DenseTileKind dense;
  return dense.store_plan(q);
}

// ---- nm_sparse ----

namespace {

const NmSparseProps& nm(const TileKindProps& props) {
  const auto* p = std::get_if<NmSparseProps>(&props);
  TESSEL_ASSERT(p, "tile kind 'nm_sparse' got the properties of '", tile_kind_name(props), "'");
  TESSEL_ASSERT(p->n >= 0 && p->m > 0 && p->metadata_bits >= 0, "nm_sparse ", p->n, ":", p->m, " with ", p->metadata_bits,
                " metadata bits");
  return *p;
}

// n / m of `amount` (bytes, values or FLOPs of the dense operand), rounded up.
int64_t kept(int64_t amount, const NmSparseProps& p) { return (amount * p.n + p.m - 1) / p.m; }

// Metadata of `elements` dense values of the sparse operand: metadata_bits per kept value.
int64_t metadata_bytes_of(int64_t elements, const NmSparseProps& p) { return (kept(elements, p) * p.metadata_bits + 7) / 8; }

// The axis of `node` that the matrix dimensions of input `input` sum over, or -1 when not exactly
// one of them walks a reduction axis.
int nm_reduction_axis(const TeNode& node, int input) {
  const Access& acc = node.inputs()[input];
  int found = -1, count = 0;
  for (int d = acc.type.rank() - 2; d < acc.type.rank(); ++d)
    for (int a = node.num_spatial(); a < node.num_axes(); ++a)
      if (acc.map.result(d).coeffs[a] != 0) found = a, ++count;
  return count == 1 ? found : -1;
}

}  // namespace

std::string check_nm_sparse(const TeNode& node, const NmSparseProps& p) {
  int reductions = 0;
  if (std::string why = check_matrix_read(node, p.input, "nm_sparse", reductions); !why.empty()) return why;
  if (reductions == 0) return cat("input ", p.input, " of '", node.name(), "' is not summed over: the N:M groups run along a reduction");
  if (reductions > 1)
    return cat("both matrix dimensions of input ", p.input, " of '", node.name(), "' are summed over: the N:M groups run along one");
  if (!(p.n > 0 && p.n < p.m)) return cat("nm_sparse ", p.n, ":", p.m, " needs 0 < n < m");
  if (p.metadata_bits <= 0) return cat("metadata_bits ", p.metadata_bits, " is not positive");
  return "";
}

TileFootprint NmSparseTileKind::footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                          const TileKindProps& props) const {
  const NmSparseProps& p = nm(props);
  TileFootprint f = tile_footprint(node, tile, params);
  // The sparse operand holds n / m of its values plus the metadata of the kept ones, per stage.
  const DomainTile step = representative_tile(node, tile, /*whole_reduction=*/false);
  const int64_t elements = num_elements(bounding_box(read_region(node, p.input, step)));
  const int64_t bytes = kept(f.input_bytes[p.input], p) + params.pipeline_stages * metadata_bytes_of(elements, p);
  f.total_bytes += bytes - f.input_bytes[p.input];
  f.input_bytes[p.input] = bytes;
  return f;
}

TileTraffic NmSparseTileKind::traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                      const TileKindProps& props) const {
  const NmSparseProps& p = nm(props);
  TileTraffic t = tile_traffic(node, tile, params);
  // The sparse operand moves n / m of its dense bytes plus the metadata of the kept values, at
  // every load (every reduction step; once per tile for an operand hoisted out of the reduction).
  // The other inputs and the output are dense.
  const bool reused = t.input_reused[p.input];
  const DomainTile box = representative_tile(node, tile, /*whole_reduction=*/reused);
  const int64_t loads = t.num_tiles * (reused ? 1 : t.reduction_steps);
  const int64_t meta = loads * metadata_bytes_of(num_elements(bounding_box(read_region(node, p.input, box))), p);
  const int64_t bytes = kept(t.input_bytes[p.input], p) + meta;
  t.total_bytes += bytes - t.input_bytes[p.input];
  t.input_bytes[p.input] = bytes;
  return t;
}

int64_t NmSparseTileKind::effective_flops(const TileQuery& q) const {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  return kept(q.node->flops(), nm(q.config->kind));
}

std::optional<std::string> NmSparseTileKind::check_legal(const TileQuery& q) const {
  TESSEL_ASSERT(q.node && q.config, "TileQuery without node or config");
  const auto* p = std::get_if<NmSparseProps>(&q.config->kind);
  if (!p) return "tile kind 'nm_sparse' got the properties of another kind";
  if (q.level < 0 || q.level >= static_cast<int>(q.config->levels.size()))
    return cat("level index ", q.level, " but the config has ", q.config->levels.size(), " levels");
  if (std::string why = check_nm_sparse(*q.node, *p); !why.empty()) return why;
  if (auto why = check_tile_config(*q.node, *q.config)) return why;
  // A group of m never straddles two reduction steps of the level asked about (check_tile asks
  // about the outermost, where the block's tile is). The kernel's own K step -- a tensor-core
  // family's block_k, not the policy's inner levels -- is the backend's check
  // (kernels/cuda/contraction_plan.cpp's plan_nm: multiples of 64).
  const int axis = nm_reduction_axis(*q.node, p->input);
  const int r = axis - q.node->num_spatial();
  const LevelTile& lt = q.config->levels[q.level];
  if (lt.reduction[r] % p->m != 0)
    return cat("reduction step ", lt.reduction[r], " of axis '", q.node->axes()[axis].name, "' at level '", lt.level,
               "' is not a multiple of m = ", p->m, " (the N:M groups would straddle steps)");
  return std::nullopt;
}

std::vector<LoadPlan> NmSparseTileKind::load_plans(const TileQuery& q) const {
  static const DenseTileKind dense;
  std::vector<LoadPlan> plans = dense.load_plans(q);
  const NmSparseProps& p = nm(q.config->kind);
  LoadPlan& sparse = plans.at(p.input);
  sparse.kind = LoadKind::nm_compressed;
  sparse.metadata_bytes = metadata_bytes_of(num_elements(sparse.box), p);
  sparse.data_bytes = kept(sparse.data_bytes, p);
  return plans;
}

StorePlan NmSparseTileKind::store_plan(const TileQuery& q) const {
  static const DenseTileKind dense;
  return dense.store_plan(q);
}

const std::vector<const TileKind*>& tile_kinds() {
  static const DenseTileKind dense;
  static const BlockSparseTileKind block_sparse;
  static const NmSparseTileKind nm_sparse;
  static const std::vector<const TileKind*> kinds = {&dense, &block_sparse, &nm_sparse};
  return kinds;
}

const TileKind* find_tile_kind(std::string_view name) {
  for (const TileKind* k : tile_kinds())
    if (k->name() == name) return k;
  return nullptr;
}

namespace {

std::string implemented_kinds() {
  std::string out;
  for (const TileKind* k : tile_kinds()) out += cat(out.empty() ? "" : ", ", k->name());
  return out;
}

}  // namespace

const TileKind& tile_kind_of(const TileKindProps& props) {
  if (const TileKind* k = find_tile_kind(tile_kind_name(props))) return *k;
  throw UserError("", "", cat("tile kind '", tile_kind_name(props), "' has no implementation yet (implemented: ",
                              implemented_kinds(), ")"));
}

std::optional<std::string> check_tile(const TeNode& node, const TileConfig& config) {
  const TileKind* kind = find_tile_kind(tile_kind_name(config.kind));
  if (!kind)
    return cat("tile kind '", tile_kind_name(config.kind), "' has no implementation yet (implemented: ",
               implemented_kinds(), ")");
  if (config.levels.empty()) return check_tile_config(node, config);
  return kind->check_legal(TileQuery{&node, &config, 0, {}});
}

std::optional<std::string> non_dense_plan(const TeNode& node, const TileConfig& config, const std::vector<LoadKind>& also) {
  const TileKind& kind = tile_kind_of(config);
  const TileQuery q{&node, &config, 0, {}};
  static constexpr const char* kLoads[] = {"dense_box", "bsr_blocks", "nm_compressed", "collective_then_box"};
  for (const LoadPlan& p : kind.load_plans(q))
    if (p.kind != LoadKind::dense_box && std::find(also.begin(), also.end(), p.kind) == also.end()) return cat(kind.name(), " ", kLoads[static_cast<int>(p.kind)]);
  if (kind.store_plan(q).kind != StoreKind::dense_box) return cat(kind.name(), " collective_then_box");
  return std::nullopt;
}

}  // namespace tessel
