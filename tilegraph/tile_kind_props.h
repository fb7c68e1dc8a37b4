// The properties of each tile kind (tile_kind.h): plain data, part of every TileConfig (its `kind`)
// and of its JSON (import/tile_config_json.h). Which kinds have an implementation is the
// registry's business (tile_kinds()); a config may name a kind that has none, and every check
// (check_tile, tile_kind_of) then refuses it with the kind's name.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

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
  double density = 1.0;  // fraction of non-zero blocks, in [0, 1]
  int index_bytes = 4;   // the kernels' block lists hold 32-bit ints
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
/// `shift`: Mercury's ring rotation -- every member sends its block to the next member of the group
/// and receives the previous one's (docs/distributed.md, "Overlap").
enum class Collective : uint8_t { none, all_gather, reduce_scatter, all_reduce, all_to_all, shift };
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

/// The name of the kind whose properties `props` holds: "dense", "block_sparse", "nm_sparse",
/// "sharded".
std::string_view tile_kind_name(const TileKindProps& props);

}  // namespace tessel
