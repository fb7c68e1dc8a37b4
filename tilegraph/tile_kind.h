// Tile kinds: how a tile is stored and moved (DESIGN.md, "Tile kind"; STYLE.md habit 9). Every
// kind implements one capability interface -- footprint per memory level, traffic for the cost
// model, legality, and codegen hooks for loads and stores -- and keeps its properties in a named
// struct. `dense`, `block_sparse` and `nm_sparse` are implemented; `sharded` is expressible
// through the same interface (its property struct is in tile_kind_props.h) and docs/tile-kinds.md
// says how each maps onto it.
//
// Which operand a kind applies to: a kind describes the tiles of one node; properties name the
// input they change (a sparse weight) or the tensor dimensions they split (a sharded tensor).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tilegraph/node.h"
#include "tilegraph/tile_config.h"
#include "tilegraph/tile_kind_props.h"
#include "tilegraph/tile_propagation.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {


/// Everything a tile-kind query looks at: one node, its tile config (whose `kind` holds the kind's
/// properties), which level of it and the traffic parameters of that level. Pointers are
/// non-owning and must outlive the call.
struct TileQuery {
  const TeNode* node = nullptr;
  const TileConfig* config = nullptr;
  int level = 0;  // index into config->levels
  TrafficParams params;
};

/// How a tile of one input is brought into the level (a codegen hook).
enum class LoadKind : uint8_t {
  dense_box,         // rows of a box, vectorized along the innermost dimension
  bsr_blocks,        // iterate the non-zero blocks of a BSR row panel, load each dense block
  nm_compressed,     // load compressed values plus metadata for sparse tensor-core instructions
  collective_then_box,  // run `collective` across the mesh, then load the local box
};

struct LoadPlan {
  int input = 0;
  LoadKind kind = LoadKind::dense_box;
  Region box;                 // bounding box of the region loaded per reduction step
  int vector_width = 1;       // elements per vector load along the innermost dimension
  int64_t data_bytes = 0;     // value bytes per reduction step
  int64_t metadata_bytes = 0; // index / metadata bytes per reduction step (sparse kinds)
  bool once_per_tile = false; // region does not depend on the reduction axes (hoisted out)
  Collective collective = Collective::none;
};

/// How the output tile is written back (a codegen hook).
enum class StoreKind : uint8_t { dense_box, collective_then_box };

struct StorePlan {
  StoreKind kind = StoreKind::dense_box;
  Region box;                  // output tile in the node's spatial coordinates
  int vector_width = 1;
  int64_t data_bytes = 0;
  Collective collective = Collective::none;
};

/// The capability interface. Implementations are stateless; one instance per kind lives in the
/// registry (tile_kinds()).
class TileKind {
 public:
  virtual ~TileKind() = default;

  /// Stable name used in schedules and JSON: "dense", "block_sparse", "nm_sparse", "sharded".
  virtual std::string_view name() const = 0;

  /// Bytes resident at one level for one tile `tile` of `node` (values plus any metadata, per input
  /// and for the output; per device for a sharded tile). Dense: tile_footprint(). The structured
  /// form is what the cost model and the policies price per input; candidate tiles a policy has
  /// not put in a config yet are asked about with the kind's properties directly.
  virtual TileFootprint footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                                  const TileKindProps& props) const = 0;

  /// Bytes moved into the level of `tile` from the next level out over the whole operator (values,
  /// metadata, and the output written once), per input and output. Dense: tile_traffic().
  virtual TileTraffic traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                              const TileKindProps& props) const = 0;

  /// footprint(...).total_bytes and traffic(...).total_bytes at level `q.level` of `q.config`.
  int64_t footprint_bytes(const TileQuery& q) const;
  int64_t traffic_bytes(const TileQuery& q) const;

  /// Bytes exchanged between devices by the collectives at the node's edges, per device (0 for
  /// single-device kinds). The cost model divides them by the interconnect bandwidth.
  virtual int64_t communication_bytes(const TileQuery& q) const = 0;

  /// Arithmetic work actually performed (FLOPs as TeNode::flops counts them), after skipping
  /// zero blocks or the pruned n-of-m values; per device for a sharded tile.
  virtual int64_t effective_flops(const TileQuery& q) const = 0;

  /// Legality of the whole config, check_tile_config included: the config's `kind` holds this
  /// kind's struct, block / group alignment with the tile at level `q.level`, supported dtypes.
  /// Returns the reason, or nullopt if legal.
  virtual std::optional<std::string> check_legal(const TileQuery& q) const = 0;

  /// Codegen hook: how each input tile is loaded into level `q.level` (one plan per input).
  virtual std::vector<LoadPlan> load_plans(const TileQuery& q) const = 0;

  /// Codegen hook: how the output tile is stored.
  virtual StorePlan store_plan(const TileQuery& q) const = 0;
};

/// Dense tiles. Requires DenseProps.
class DenseTileKind final : public TileKind {
 public:
  std::string_view name() const override { return "dense"; }
  TileFootprint footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                          const TileKindProps& props) const override;
  TileTraffic traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                      const TileKindProps& props) const override;
  int64_t communication_bytes(const TileQuery& q) const override { return 0; }
  int64_t effective_flops(const TileQuery& q) const override;
  std::optional<std::string> check_legal(const TileQuery& q) const override;
  std::vector<LoadPlan> load_plans(const TileQuery& q) const override;
  StorePlan store_plan(const TileQuery& q) const override;
};

/// Block-sparse operand (BSR, BlockSparseProps): the compute tile walks only the non-zero
/// blocks of input `input` along the reduction; a zero block also skips the matching loads of
/// the other operands. Sizes are the dense ones (any block may be non-zero) plus the block
/// indices; traffic and FLOPs are the dense ones scaled by the density. Whether the blocks match
/// the kernel's tile is the backend's check: it knows the tile it emits (kernels/cuda's
/// contraction plan).
class BlockSparseTileKind final : public TileKind {
 public:
  std::string_view name() const override { return "block_sparse"; }
  TileFootprint footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                          const TileKindProps& props) const override;
  TileTraffic traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                      const TileKindProps& props) const override;
  int64_t communication_bytes(const TileQuery& q) const override { return 0; }
  int64_t effective_flops(const TileQuery& q) const override;
  std::optional<std::string> check_legal(const TileQuery& q) const override;
  std::vector<LoadPlan> load_plans(const TileQuery& q) const override;
  StorePlan store_plan(const TileQuery& q) const override;
};

/// N:M structured sparse operand (NmSparseProps; 2:4 on sparse tensor cores): input `input` is
/// stored compressed -- n of every m values along the reduction, plus `metadata_bits` of index per
/// kept value -- and the tensor cores multiply only the kept values. Footprint and traffic of the
/// operand are n / m of the dense ones plus the metadata; effective FLOPs n / m of the dense ones
/// (what the sparse instructions execute). Which instruction shapes and dtypes exist is the
/// backend's check (kernels/cuda's contraction plan).
class NmSparseTileKind final : public TileKind {
 public:
  std::string_view name() const override { return "nm_sparse"; }
  TileFootprint footprint(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                          const TileKindProps& props) const override;
  TileTraffic traffic(const TeNode& node, const LevelTile& tile, const TrafficParams& params,
                      const TileKindProps& props) const override;
  int64_t communication_bytes(const TileQuery& q) const override { return 0; }
  int64_t effective_flops(const TileQuery& q) const override;
  std::optional<std::string> check_legal(const TileQuery& q) const override;
  std::vector<LoadPlan> load_plans(const TileQuery& q) const override;
  StorePlan store_plan(const TileQuery& q) const override;
};

/// Why `props` cannot describe input `props.input` of `node` as N:M sparse: the input must be a
/// plain matrix read (its last two dimensions each one axis of the node with unit coefficient),
/// exactly one of them a reduction axis (the groups run along it), 0 < n < m, metadata_bits > 0.
/// "" when it can.
std::string check_nm_sparse(const TeNode& node, const NmSparseProps& props);

/// Why `props` cannot describe input `props.input` of `node`: the input must be a plain matrix
/// read (its last two dimensions each one axis of the node, at least one of them a reduction
/// axis), blocks positive, density in [0, 1]. "" when it can.
std::string check_block_sparse(const TeNode& node, const BlockSparseProps& props);

/// Every built-in tile kind, in a fixed order. STYLE.md habit 8: adding a kind
/// is a class plus one line here.
const std::vector<const TileKind*>& tile_kinds();

/// The built-in kind named `name`, or nullptr.
const TileKind* find_tile_kind(std::string_view name);

/// The implementation of the kind whose properties `props` holds (of `config.kind`); UserError
/// naming the kind when it has none yet.
const TileKind& tile_kind_of(const TileKindProps& props);
inline const TileKind& tile_kind_of(const TileConfig& config) { return tile_kind_of(config.kind); }

/// Whether `config` is legal for `node` through its kind: the kind is implemented and its
/// check_legal (check_tile_config included) passes at the outermost level, where block and group
/// alignment bind. The one legality check of a tile config that policies, the schedule checker
/// and the backends call. Returns the reason, or nullopt if legal.
std::optional<std::string> check_tile(const TeNode& node, const TileConfig& config);

/// The first load or store plan of `config`'s kind at level 0 that is neither a dense box nor
/// one of `also`, as "<kind> <plan>" ("block_sparse bsr_blocks"), or nullopt: what a backend
/// without code generation for other plans refuses.
std::optional<std::string> non_dense_plan(const TeNode& node, const TileConfig& config, const std::vector<LoadKind>& also = {});

}  // namespace tessel
