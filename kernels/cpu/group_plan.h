// Group planning for the CPU backend: everything about one fused group of a Schedule that the IR
// emitter and the runtime need, decided before any IR exists (plain data, no LLVM).
//
// A group runs as a parallel loop over *tasks*: one task per tile of the sink's outermost tile
// level (the L2 tile of a CPU schedule), in row-major order of the sink's tile grid. A task
// evaluates every node of the group, producers first, over the domain box that tile propagation
// (tile_propagation.h, propagate_group) says the sink's tile needs. Boxes differ from task to task
// (halos and tiles are clamped at the borders), so they are precomputed here into one table of
// (begin, extent) pairs per task, node and spatial axis, which the generated code reads.
//
// Each node's output goes either to the arena (it leaves the group, or the schedule put it in
// device memory: kernels/buffer_plan.h) and is addressed as the whole tensor, or to the calling
// thread's scratch buffer, addressed relative to the task's box of that node: a row-major array
// of the largest box any task needs.
//
// Row reuse (row_reuse.h): a value a reduction's body computes and a later elementwise node of the
// group would compute again at the same points is stored once per task in a scratch array.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cost_model/cpu_loops.h"
#include "kernels/buffer_plan.h"

namespace tessel {

/// Where one node of a group writes its output.
struct CpuNodeBuffer {
  NodeId node = -1;
  TensorId tensor = -1;
  bool in_scratch = false;          // else the arena (or, never for a node, an input/weight buffer)
  /// Never stored: an elementwise node whose output stays in the group and whose every in-group
  /// read is injective (each consumer point reads a distinct element, at most once per access), so
  /// its consumers evaluate its body where they read it, at no extra arithmetic. No scratch.
  bool inlined = false;
  /// An arena output stored with non-temporal stores (streaming_stores.h): the group moves at
  /// least the largest cache's worth of data and no node of the group reads this output.
  bool streamed = false;
  int64_t scratch_offset_bytes = 0;  // into the thread's scratch buffer (a multiple of the alignment)
  /// The scratch array's extents: per spatial axis of the node, the largest box extent of any
  /// task. Empty for arena outputs.
  std::vector<int64_t> scratch_extents;
};

/// An elementwise node that loads a row-reuse value instead of evaluating it.
struct CpuRowReader {
  int position = -1;  // in the group
  Expr value;         // the subexpression of its body that the buffer holds
  /// The reader's axes -> the source's axes (spatial, then reduction): where the value of the
  /// reader's point is stored.
  AffineMap point;
};

/// A value stored by a reduction node for every point of its task box (row_reuse.h).
struct CpuRowReuse {
  int source = -1;  // the reduction node's position in the group
  Expr value;       // the subexpression of its body that is stored
  /// The buffer's extents: per spatial axis of the source, its largest box extent of any task;
  /// then its reduction extents. Row-major, in the compute type of value.dtype(), box-relative
  /// along the spatial axes.
  std::vector<int64_t> extents;
  int64_t scratch_offset_bytes = 0;
  std::vector<CpuRowReader> readers;
};

/// A contraction whose block-sparse weight (the block_sparse tile kind) the micro-kernel walks
/// block by block (kernel_families.h, sparse_contraction): along its one reduction axis k in
/// blocks of block_k, along its column axis n in blocks of block_n, skipping the blocks of the
/// weight that hold only zeros.
struct CpuSparseSkip {
  int position = -1;  // the node's position in the group
  int input = -1;     // the weight's position among its inputs (the micro-kernel's B)
  int64_t block_k = 0, block_n = 0;
  int64_t blocks_k = 0, blocks_n = 0;  // ceil(K / block_k), ceil(N / block_n)
  /// Row-major blocks_k x (blocks_n + 1): entry [kb][nb] counts the non-zero blocks of block row kb
  /// before block column nb, so the blocks of row kb in columns [a, b] hold a non-zero exactly when
  /// [kb][b + 1] - [kb][a] > 0.
  std::vector<int32_t> nonzero_before;
};

struct CpuGroupPlan {
  int group = 0;                       // index in the schedule
  std::vector<NodeId> nodes;           // topological, sink last
  std::vector<CpuNodeBuffer> buffers;  // one per node, same order
  /// Per node, the reduction step of each reduction axis at the level just inside the task's (the
  /// L1 tile of a CPU schedule; the task level's own when the config has one level).
  std::vector<std::vector<int64_t>> reduction_steps;
  std::vector<int64_t> sink_tile;      // outermost tile extent per spatial axis of the sink
  int64_t num_tasks = 0;
  /// boxes[task * box_stride + box_offset[k] + 2 * a] = begin, [.. + 1] = extent of spatial axis
  /// a of node k for that task.
  std::vector<int64_t> boxes;
  std::vector<int64_t> box_offset;     // per node, in int64 entries
  int64_t box_stride = 0;
  int64_t scratch_bytes = 0;           // per thread
  std::vector<CpuRowReuse> reuses;     // at most one per source node
  /// The group's recorded kernel family is `microkernel` (kernel_families.h): contractions the
  /// micro-kernel takes run on it; false (`loops`): every node runs as loop nests.
  bool microkernel = true;
  /// The contraction walking a block-sparse weight, when the group has one (at most one).
  std::optional<CpuSparseSkip> sparse;
  /// Per node (same order), the micro-kernel blocking the schedule records for it (the kernel
  /// choice's mr<i> / nr<i>, cost_model/cpu_loops.h's blocking_param), or nullopt: not a
  /// contraction on the micro-kernel, or a schedule that records none (the emitter derives it).
  std::vector<std::optional<cpu::RegisterBlocking>> blocking;
  /// Per node (same order), how far ahead the micro-kernel prefetches its B in bytes as the
  /// schedule records it (the kernel choice's pf<i>; 0: no prefetch), or nullopt: not a
  /// contraction on the micro-kernel, or none recorded (the emitter derives it,
  /// cost_model/cpu_loops.h's prefetch_bytes_for).
  std::vector<std::optional<int64_t>> prefetch_bytes;

  /// Position of `node` in `nodes`, or -1.
  int position(NodeId node) const;
  /// The row reuse stored by the node at `position`, or null.
  const CpuRowReuse* reuse_stored_by(int position) const;
};

/// Plans group `group` of `schedule`, of the kernel family it records (UserError for a family the
/// CPU backend does not have, `microkernel` on a group without a contraction it takes, or a
/// block_sparse tile kind it cannot walk: CpuKernelFamilies::check's reasons, or a recorded
/// density that is not the weight's at the recorded blocks); scratch arrays start at multiples of `alignment` bytes (the
/// caller passes the spec's cache-line size). A row-reuse buffer may take up to
/// `reuse_budget_bytes` of scratch per thread (the caller derives it from the spec's private
/// caches, CodegenParams::reuse_bytes; 0 turns row reuse off). Arena outputs stream
/// (CpuNodeBuffer::streamed) when the group's memory traffic is at least `streaming_bytes`
/// (CodegenParams::streaming_bytes; 0 turns streaming off). Raises InternalError when tile
/// propagation fails for one of the sink's tiles (the schedule checker accepts only groups where
/// it succeeds).
CpuGroupPlan plan_cpu_group(const OpGraph& graph, const Schedule& schedule, const BufferPlan& buffers, int group,
                            int64_t alignment, int64_t reuse_budget_bytes, int64_t streaming_bytes);

namespace cpu {
/// Whether `node` is an f32 sum of products of two factors, neither a constant (a dot product; a
/// mean's `x * (1/n)` is not): its generic nest accumulates runs of kRunTerms f32 terms, as the
/// micro-kernel does (kernel_emitter.h, run_terms).
bool products_in_runs(const TeNode& node);
}  // namespace cpu

}  // namespace tessel
