// Sparsity as a tensor attribute (SparTA's idea; docs/sparsity.md): a weight may declare that its
// matrix -- its last two dimensions -- is block-sparse, with a block shape, and optionally a
// density to prune it to; or that it is N:M sparse (2:4: at most 2 non-zeros in every 4
// consecutive values along one dimension), pruned to that pattern. The attribute lives on the
// tensor (TensorInfo::sparsity, WeightDef's in the model), the zero blocks come from the values,
// and the policies ask for the fraction of non-zero blocks at the granularity a kernel would skip
// at (NonzeroMap::density) when they weigh a dense kernel against a block-sparse one (the
// block_sparse tile kind, tile_kind.h; nm_sparse for the N:M pattern).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

class HostTensor;

/// The sparsity pattern of a weight: block sparsity, or N:M structured sparsity.
struct Sparsity {
  enum class Pattern : uint8_t { block, nm };
  Pattern pattern = Pattern::block;
  // block: the block shape over the last two dimensions.
  int64_t block_rows = 0, block_cols = 0;
  // block: > 0: the values are pruned to this fraction of blocks (the largest by L1 norm are
  // kept) when they are materialized; 0: the values' own zero blocks are the pattern.
  double density = 0;
  // nm: at most nm_n non-zero values in every group of nm_m consecutive values along dimension
  // `axis` of the tensor (negative: counted from the end; -2, the rows of the matrix, is the
  // reduction dimension of a [K, N] weight). The values are always pruned to it when they are
  // materialized: per group the nm_n of largest magnitude are kept (values already N:M are
  // unchanged).
  int nm_n = 0, nm_m = 0;
  int axis = -2;
  bool operator==(const Sparsity&) const = default;
};

/// "block 64x64", "block 64x64, pruned to density 0.1" or "2:4 along dimension 0".
std::string print_sparsity(const Sparsity& s);

/// Why `s` cannot apply to a tensor of `shape` (block: rank 2 at least, positive blocks no larger
/// than the matrix, density in [0, 1]; nm: 0 < nm_n < nm_m, `axis` a dimension whose extent is a
/// multiple of nm_m), or "".
std::string check_sparsity(const Sparsity& s, const std::vector<int64_t>& shape);

/// `values` pruned as `s` says. nm: in every group of nm_m along the axis, the nm_n values of
/// largest magnitude are kept (ties keep the earlier), the others zeroed. block: pruned to
/// `s.density` (unchanged when it is 0): per matrix (every batch point of the
/// leading dimensions separately), the round(density x blocks) blocks of largest L1 norm are kept
/// (at least one), the others zeroed; ties keep the earlier block. Deterministic.
HostTensor apply_sparsity(HostTensor values, const Sparsity& s);

/// Which unit x unit cells of a tensor's matrix hold a non-zero value (over every batch point
/// of the leading dimensions: a cell is non-zero when it is in any of them). Kernels skip whole
/// tiles; every tile a kernel uses is a multiple of kNonzeroUnit on both axes, so one map answers
/// every tile shape a policy asks about.
struct NonzeroMap {
  int64_t rows = 0, cols = 0;        // the matrix
  int64_t unit = 1;
  int64_t cell_rows = 0, cell_cols = 0;
  std::vector<uint8_t> cells;        // row-major cell_rows x cell_cols, 1: some value non-zero

  /// Non-zero tiles of tile_rows x tile_cols (multiples of `unit`), row-major
  /// ceil(rows / tile_rows) x ceil(cols / tile_cols).
  std::vector<uint8_t> tiles(int64_t tile_rows, int64_t tile_cols) const;
  /// The fraction of those tiles that hold a non-zero value (1 for an empty matrix).
  double density(int64_t tile_rows, int64_t tile_cols) const;
};

/// The granularity of NonzeroMap: 8 rows and columns, one 16-byte vector of 16-bit elements (the
/// smallest copy the tensor-core kernels make; every tile edge of theirs is a multiple of it).
constexpr int64_t kNonzeroUnit = 8;

NonzeroMap nonzero_map(const HostTensor& values, int64_t unit = kNonzeroUnit);

/// Whether every group of `m` consecutive values along dimension `axis` of `values` (negative:
/// from the end) holds at most `n` non-zeros (`tessel sparsify --detect`'s N:M test). False when
/// the pattern cannot apply (not 0 < n < m, no such dimension, or its extent not a multiple of m).
bool is_nm_sparse(const HostTensor& values, int n, int m, int axis);

}  // namespace tessel
