// 2:4 sparse weights for the sparse tensor-core kernel (device/mma.cuh's SparseBlockGemm): the
// compressed values and the metadata, derived once from the weight's values when a kernel that
// reads them is loaded (GroupPlan::derived), in the order the kernel's copies and mma.sp's lanes
// take them.
//
// The weight is the contraction's B: element (k, n) of a K x N matrix, stored with k contiguous
// (N x K rows) or n contiguous (K x N rows), `ld` elements between rows, from `offset`. Along k,
// every group of 4 holds at most 2 non-zero values (+0 and -0 are zero); K is padded with zeros
// to `k_pad` (whole K tiles of the kernel).
//   values:   N x k_pad / 2 16-bit elements; row n holds, per group of 4, its two kept values in
//             k order (a group with fewer non-zeros keeps zeros at the lowest free indices).
//   metadata: ceil(N / 16) x (k_pad / 32 x 32) 16-bit elements: per 16 rows of W^T (C's n) and 32
//             of k, 16 32-bit words, word 2 g + q for lane 4 g + q (q = 0, 1) of mma.sp.m16n8k32
//             and of each warp of wgmma.sp.m64nNk32 with sparsity selector 0: k 16 q .. 16 q + 15
//             of the step for row g (low 16 bits) and row g + 8 (high 16 bits), 4 bits per group
//             of 4 (group c of the half at bits 4 c: the first kept index in the low 2 bits, the
//             second above it). Lanes with q = 2, 3 read the same words (the instructions ignore
//             them): 2 bits per kept value in memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cuda {

/// How the kernel reads the weight (see the file comment).
struct NmView {
  int64_t n = 0, k = 0;
  bool k_contiguous = true;
  int64_t ld = 0, offset = 0;
  int64_t k_pad = 0;  // a multiple of 32, at least k
  bool operator==(const NmView&) const = default;
};

struct NmCompressed {
  std::vector<uint16_t> values;    // n x k_pad / 2
  std::vector<uint16_t> metadata;  // ceil(n / 16) x (k_pad / 32 x 32)
};

/// Compresses the 16-bit elements `bits` (the weight's storage) read through `view`. Returns ""
/// or why it cannot (a group of 4 along k holding more than 2 non-zeros, named by its (k, n)).
std::string compress_2_4(const uint16_t* bits, int64_t elements, const NmView& view, NmCompressed& out);

/// The K x N weight the kernel multiplies, rebuilt from `c` the way the kernel's lanes read it
/// (row-major K x N, n contiguous): the inverse of compress_2_4 on 2:4 values.
std::vector<uint16_t> decompress_2_4(const NmCompressed& c, const NmView& view);

}  // namespace tessel::cuda
