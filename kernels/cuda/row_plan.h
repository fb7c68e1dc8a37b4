// The row path: groups that normalize or reduce along the last axis of their output (softmax,
// layer norm, RMS norm, and their elementwise prologues and epilogues) become a kernel that keeps
// each row in registers: it reads every input row once with 16-byte vector loads, reduces with
// warp shuffles (and one shared-memory step when a row spans several warps), and writes the output
// row once with vector stores. The generic kernel would instead stage the reductions and read the
// row again for every node that needs it, one scalar at a time.
//
// Let the sink's domain be (b_0, ..., b_{d-2}, n): rows are the points of the b axes, N the extent
// of n. A group qualifies when
//   * the sink has no reduction axis and N > 0;
//   * at least one node reduces a row, and every node is
//       - a row node: the sink's domain (its output shape equal to the domain unless it is the
//         sink), possibly with reduction axes of its own, summed serially per element (attention's
//         scores Q K^T, fused with their softmax), or
//       - a per-row node: the sink's b axes, optionally followed by one spatial axis of extent 1
//         (keepdims), with at most one reduction axis, of extent N (the mean, variance, max or
//         sum of exp of a row), or
//       - a copy folded into its readers: body `in0` of one in-bounds input from device memory or
//         from another copy, same dtype, read only in the group, either without a reshape
//         (attention's transposes of Q and K: its readers read device memory through the composed
//         map) or reshaping its whole source read in order (GroupNorm's [B, C, H, W] as
//         [B, G, C/G H W]: a view, its readers read the source at the same flat offsets);
//   * every read of an in-group node is at the reader's own point: a row node reads row nodes at
//     (b, n) and per-row nodes at (b) (or (b, 0)); a per-row reduction reads row nodes at (b, r)
//     with r its reduction axis, which plays the part of n;
//   * no read is a gather.
// The sink may also be a per-row reduction itself (a row's max or sum: ReduceMax over the last
// axis, with or without keepdims) of floats that reads one input along that axis by its last index
// (not a contraction, not a window) and at least a warp's width of it; the rows are then its spatial
// axes (less a keepdims axis of extent 1) and N the extent of its reduction axis. A sink reducing
// several axes (a global average pool over H and W in NCHW, a ReduceMean over the last two axes) is
// a row of their product N when each read that uses them walks them as its tensor's last
// dimensions, whole and in order (so a row is contiguous): the read is taken as one of the tensor
// viewed with those dimensions merged, along the first reduction axis; its group holds nothing but
// the sink and folded copies, its body reads no axis index, and the rows drop one keepdims axis
// per reduction axis.
//
// A row of N elements is held in registers when it fits: at most kMaxElementsPerThread per thread
// with up to the spec's max_threads_per_block threads per row. A longer row (a vocabulary softmax:
// 50257 columns) is *streamed*: one block (kRowStreamThreads) per row walks it in chunks once per pass -- one pass per
// per-row reduction and one per row node that leaves the group -- and recomputes the row nodes a
// pass needs from device memory instead of keeping them; the re-reads of a row (100 KB for 50257
// halves) come from L2. A row node with reduction axes of its own is not recomputed that way (the
// row stays on the generic kernel, with the reason).
// Reads of device memory may be any affine map; those that walk a row contiguously (the last
// index is n, no other index depends on n, the tensor's last dimension a multiple of the vector
// width, never out of bounds) are vector loads, and so are those of a row node's serial reduction
// that walk its last reduction axis contiguously. A streamed row whose length is not whole
// vectors (a vocabulary of 50257) is *shifted*: each row starts row * N elements into its
// tensors, so its vectors start at the first aligned column h = -row N mod vec; the columns before
// h and after the last whole vector (fewer than 2 vec) take a lane each, one element at a time.
// Then the reads of tensors laid out as the rows themselves ([b.., N], read at (b.., n):
// row_shifted_access) and the stored row nodes are vector accesses; other reads are scalar.
// A streamed softmax's statistics take one pass, not two (*online*, as FlashAttention's softmax):
// when a per-row maximum of one read of device memory is followed by the per-row sum of
// exp(that read - the maximum), both are kept per thread as the row is walked, the sum rescaled
// by exp(old - new) whenever the maximum moves (once per vector), and the threads' sums are
// rescaled to the row's maximum before they are added.
// Streamed rows fewer than the SMs (a decoding step's vocabulary softmax: 8 rows) are *split*:
// each row is walked by a thread-block cluster of `splits` blocks (a power of two up to the
// spec's cluster size and the SMs per row), block k taking every splits-th group of `lanes`
// vectors; a per-row reduction combines over the block, then over the cluster through
// distributed shared memory (each block adds the parts in rank order), and stored rows are
// written by the block that computed them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/group_plan.h"

namespace tessel::cuda {

enum class RowKind : uint8_t { row, per_row, copy };

/// Where one input of a node comes from: another node of the group (`producer`, its position in
/// RowPlan::nodes) or device memory (`tensor`, possibly through folded copies), read at `map`
/// over the reading node's axes.
struct RowRead {
  int producer = -1;  // -1: device memory
  TensorId tensor = -1;
  AffineMap map;
  TensorType type;    // of the tensor read
  Scalar pad = 0.0;   // value of an out-of-bounds read
};

struct RowNode {
  NodeId node = -1;
  RowKind kind = RowKind::row;
  bool writes_global = false;  // read by another group or a graph output
  std::vector<RowRead> reads;  // one per input; a copy's one read is its source in device memory
};

struct RowPlan {
  std::vector<RowNode> nodes;         // the group's nodes, in group order; the sink last
  std::vector<int64_t> row_extents;   // extents of the b axes (empty: one row)
  int64_t rows = 1;                   // their product
  int64_t n = 0;                      // row length
  int vec = 1;                        // elements per vector access (N is a multiple)
  int lanes = 1;                      // threads per row, a power of two
  int chunks = 1;                     // vector accesses per thread per row: ceil(N / (vec lanes))
  int rows_per_block = 1;
  int threads = 0;                    // lanes * rows_per_block
  int64_t blocks = 0;
  bool streamed = false;              // the row walked once per pass, not held (file comment)
  bool shifted = false;               // streamed, N not whole vectors: vectors from column h (file comment)
  // Streamed: the positions in `nodes` of a row maximum and the sum of exponentials computed in
  // its pass (online, file comment); -1: none.
  int online_max = -1, online_sum = -1;
  int splits = 1;                     // streamed: blocks (one cluster) per row (file comment)
  int passes = 1;                     // walks of the row: per-row reductions and stored row nodes

  /// Whether the sink is a per-row node (a row's reduction), not a row node.
  bool per_row_sink() const { return !nodes.empty() && nodes.back().kind == RowKind::per_row; }

  int elements_per_thread() const { return vec * chunks; }
};

struct RowMatch {
  std::optional<RowPlan> plan;
  std::string reason;  // set when plan is not
};

/// The most elements of one row a thread holds per row node (registers).
inline constexpr int kMaxElementsPerThread = 32;
/// The widest access one thread makes to device memory: PTX ld/st.global.v4.b32 (an ISA limit of
/// every CUDA target, like the mma path's 16-byte cp.async).
inline constexpr int kRowVectorBytes = 16;
/// Design choices, not hardware facts: threads per block when rows are short (several rows per
/// block), and vector accesses per thread and row (enough loads in flight, few registers).
inline constexpr int kRowBlockThreads = 256;
inline constexpr int kRowAccessesPerThread = 2;
/// A row of scalar accesses of at most this many per lane of one warp is given one warp.
inline constexpr int kRowWarpAccesses = 8;
/// A streamed row's chunk loop is unrolled this many times (loads of several chunks in flight).
/// 8 (a whole vocabulary row's pass of 7 chunks at once) measured the same as 4 on the 22
/// streamed rows of the op sweep (1.006x; experiments/notebook/h200-2026-11-29c call 4).
inline constexpr int kRowStreamUnroll = 4;
/// Design choice: threads per row of a streamed row that is not split over a cluster (capped by
/// the spec's block limit). 512 rather than a whole block of 1024: several rows per SM overlap one
/// row's reductions with another's streaming. On the 22 streamed rows of the op sweep (H200,
/// 2026-11-29d call 2) 512 ran 1.15-1.23x faster than 1024 on the rows that fill the SMs
/// (vocabulary softmax and log-softmax over 1024-2048 rows), the same on the few rows split over
/// clusters; 256 was 1.05-1.30x faster than 1024 there but 0.85x on Whisper's 256 rows.
inline constexpr int kRowStreamThreads = 512;

/// The axis of `node` that walks a row: n for a row node, the reduction axis of a per-row
/// reduction; -1 for a per-row node without one.
int row_column_axis(const TeNode& node, RowKind kind);

/// Whether reading `type` at `map` from `reader`'s axes walks the tensor contiguously along
/// `axis`, in bounds, in vectors of `vec` elements that start aligned (the file comment's rule).
bool row_vector_access(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis, int vec);

/// Whether reading `type` at `map` from `reader`'s axes reads the rows themselves: `type` is
/// [row_extents.., n], read at the reader's row axes and `axis` (so element (b.., c) is row
/// b's column c, at row * n + c: a shifted row's vector access, file comment).
bool row_shifted_access(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis,
                        const std::vector<int64_t>& row_extents, int64_t n);

/// row_vector_access where the indices other than the last may leave the tensor (the kernel
/// guards the vector load and fills the pad value instead): a window read of a convolution or a
/// pooling along its channels, or a grouped convolution's weights `[kh, kw, Cg, M]` along the
/// output channels of a group (`g Mg + mg`: other terms in whole vectors). The last index must
/// stay inside.
bool row_vector_access_guarded(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis, int vec);

/// The alignment part of row_vector_access_guarded, any index free to leave `shape`: the last
/// index walks `axis` with step 1 and is otherwise whole vectors of `vec` (so a vector of `axis`
/// lies wholly inside or wholly outside the last dimension, a multiple of `vec`), no other index
/// depends on `axis`.
bool row_vector_aligned(const TeNode& reader, const AffineMap& map, const std::vector<int64_t>& shape, int axis, int vec);

/// A reshape that only splits dimensions (and adds or drops dimensions of size 1) read at a point
/// of its output `shape`: the point of its domain `domain` (the input's shape) as an affine map
/// over the output's coordinates -- so a copy that reshapes this way can be folded into its
/// readers like a transpose. nullopt when the reshape merges dimensions (not affine that way).
std::optional<AffineMap> split_reshape_map(const std::vector<int64_t>& domain, const std::vector<int64_t>& shape);

/// Whether `reader` reads `acc` only inside the tensor over its whole domain (no padding): the
/// condition for folding an in-group copy into its reader's map (row and vector kernels).
bool reads_in_bounds(const TeNode& reader, const Access& acc);

/// Whether `map` (over `node`'s axes) reads a different element as one of its reduction axes moves:
/// a row node's reads of a row, loaded before its serial reduction, must not.
bool reads_along_reduction(const TeNode& node, const AffineMap& map);

/// Checks the conditions of the file comment for `group` and plans the row kernel.
RowMatch plan_rows(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec);

/// The GroupPlan the runtime launches for the row kernel: `generic`'s nodes and parameters with the
/// row kernel's grid and block size, no pool.
GroupPlan row_group_plan(const GroupPlan& generic, const RowPlan& plan);

/// One-line text of the plan, for the generated source's header and `--dump`.
std::string print_row_plan(const RowPlan& plan);

}  // namespace tessel::cuda
