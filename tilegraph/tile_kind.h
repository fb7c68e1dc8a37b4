// Tile kinds: how a tile is stored and moved (DESIGN.md, "Tile kind"; STYLE.md habit 9). Every
// kind implements one capability interface -- footprint per memory level, traffic for the cost
// model, legality, and codegen hooks for loads and stores -- and keeps its properties in a named
// struct. `dense` is implemented; `block_sparse`, `nm_sparse` and `sharded` are expressible through
// the same interface (their property structs are here) and docs/tile-kinds.md says how each maps
// onto it.
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
#include "tilegraph/tile_propagation.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

/// Dense tiles: every element stored, boxes loaded and stored row by row. No properties.
struct DenseProps {
  bool operator==(const DenseProps&) const = default;
};

/// Block-sparse (BSR) operand: `input`'s 2-D matrix (its last two dimensions) is stored as dense
/// block_m x block_n blocks, a fraction `density` of them non-zero, with a row-pointer array and
/// one column index per stored block (`index_bytes` each). Legal only when the compute tile's
/// extents along the matrix dimensions are multiples of the block shape (blocks aligned to the
/// compute tile).
struct BlockSparseProps {
  int input = 1;
  int64_t block_m = 64;
  int64_t block_n = 64;
  double density = 1.0;  // fraction of non-zero blocks, in (0, 1]
  int index_bytes = 4;
  bool operator==(const BlockSparseProps&) const = default;
};

/// N:M structured sparsity (2:4 on sparse tensor cores): along the reduction dimension of `input`,
/// every group of m consecutive values holds at most n non-zeros; values are stored compressed
/// (n of every m) with `metadata_bits` bits of index per kept value (2 for 2:4). Legal only when
/// the reduction step is a multiple of m and the dtype is one the hardware supports.
struct NmSparseProps {
  int input = 1;
  int n = 2;
  int m = 4;
  int metadata_bits = 2;
  bool operator==(const NmSparseProps&) const = default;
};

/// Collective run at a group edge of a sharded tensor.
enum class Collective : uint8_t { none, all_gather, reduce_scatter, all_reduce, all_to_all };
std::string_view collective_name(Collective c);

/// A tile split over a device mesh. `mesh_shape` is the device mesh (e.g. {2} or {2, 4});
/// `input_sharding[i][d]` / `output_sharding[d]` give, per tensor dimension, the mesh axis it is
/// split over or -1 (replicated). Each device holds 1/(product of the split mesh axes) of the
/// tensor; a collective runs at the input edges (`at_inputs`, e.g. all-gather of a sharded
/// activation) and at the output edge (`at_output`, e.g. reduce-scatter of partial sums when a
/// reduction axis is sharded).
struct ShardedProps {
  std::vector<int64_t> mesh_shape;
  std::vector<std::vector<int>> input_sharding;
  std::vector<int> output_sharding;
  std::vector<Collective> at_inputs;  // per input
  Collective at_output = Collective::none;
  bool operator==(const ShardedProps&) const = default;
};

using TileKindProps = std::variant<DenseProps, BlockSparseProps, NmSparseProps, ShardedProps>;

/// Everything a tile-kind query looks at: one node, its tile config, which level of it, the
/// traffic parameters of that level and the kind's properties. Pointers are non-owning and must
/// outlive the call.
struct TileQuery {
  const TeNode* node = nullptr;
  const TileConfig* config = nullptr;
  int level = 0;  // index into config->levels
  TrafficParams params;
  TileKindProps props;
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

  /// Bytes resident at level `q.level` for one tile (values plus any metadata; per device for a
  /// sharded tile). Dense: tile_footprint(...).total_bytes.
  virtual int64_t footprint_bytes(const TileQuery& q) const = 0;

  /// Bytes moved into level `q.level` from the next level out over the whole operator (values,
  /// metadata, and the output written once). Dense: tile_traffic(...).total_bytes.
  virtual int64_t traffic_bytes(const TileQuery& q) const = 0;

  /// Bytes exchanged between devices by the collectives at the node's edges, per device (0 for
  /// single-device kinds). The cost model divides them by the interconnect bandwidth.
  virtual int64_t communication_bytes(const TileQuery& q) const = 0;

  /// Arithmetic work actually performed (FLOPs as TeNode::flops counts them), after skipping
  /// zero blocks or the pruned n-of-m values; per device for a sharded tile.
  virtual int64_t effective_flops(const TileQuery& q) const = 0;

  /// Legality beyond check_tile_config: the props hold this kind's struct, block / group
  /// alignment with the tile, supported dtypes. Returns the reason, or nullopt if legal.
  virtual std::optional<std::string> check_legal(const TileQuery& q) const = 0;

  /// Codegen hook: how each input tile is loaded into level `q.level` (one plan per input).
  virtual std::vector<LoadPlan> load_plans(const TileQuery& q) const = 0;

  /// Codegen hook: how the output tile is stored.
  virtual StorePlan store_plan(const TileQuery& q) const = 0;
};

/// Dense tiles; the only kind implemented so far. Requires DenseProps.
class DenseTileKind final : public TileKind {
 public:
  std::string_view name() const override { return "dense"; }
  int64_t footprint_bytes(const TileQuery& q) const override;
  int64_t traffic_bytes(const TileQuery& q) const override;
  int64_t communication_bytes(const TileQuery& q) const override { return 0; }
  int64_t effective_flops(const TileQuery& q) const override;
  std::optional<std::string> check_legal(const TileQuery& q) const override;
  std::vector<LoadPlan> load_plans(const TileQuery& q) const override;
  StorePlan store_plan(const TileQuery& q) const override;
};

/// Every built-in tile kind, in a fixed order (only "dense" now). STYLE.md habit 8: adding a kind
/// is a class plus one line here.
const std::vector<const TileKind*>& tile_kinds();

/// The built-in kind named `name`, or nullptr.
const TileKind* find_tile_kind(std::string_view name);

}  // namespace tessel
