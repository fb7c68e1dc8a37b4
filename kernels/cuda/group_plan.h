// How one fused group of a Schedule becomes one CUDA kernel: the decisions the emitter
// (kernel_emitter.h) turns into code, made here so that they can be tested and printed without
// generating text.
//
// A block computes one tile of the group's sink (the sink's outermost tile, "smem" on GPUs) and
// loops over tiles when the grid is capped. Every other node of the group gets a role:
//   inlined  its value is recomputed where it is read (no storage). Chosen when its output stays
//            inside the group and every in-group read is one-to-one (each point of the reader
//            reads a distinct element: no broadcast, no stride, no gather), so nothing is computed
//            twice per reader -- elementwise chains, and a reduction feeding an elementwise
//            epilogue (the epilogue runs on the reduction's thread mapping: register-level
//            epilogue fusion). A node with reduction axes is inlined into one reader only.
//   staged   computed over the box of its domain that the block's tile needs (tile propagation
//            with bounding boxes, see tile_box below) into a per-block buffer, then a barrier.
//            Buffers share a pool by lifetime (first fit, largest first); the pool lives in
//            shared memory when it fits the spec's per-block limit, else in a per-block slice of
//            a global scratch buffer (and the grid is capped to the blocks that can be resident).
// A node whose output leaves the group (read by a later group or a graph output) is staged and
// also writes its box to device memory; overlapping boxes of neighbouring tiles write identical
// values.
//
// Reductions of a staged node or the sink use `lanes` threads per output point (a power of two:
// warp shuffles up to a warp, plus a shared-memory step across warps) when the box has fewer
// points than the block has threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/cost_model.h"
#include "kernels/cuda/nm_compress.h"

namespace tessel::cuda {

enum class NodeRole : uint8_t { sink, staged, inlined };
std::string_view node_role_name(NodeRole r);

struct NodePlan {
  NodeId node = -1;
  NodeRole role = NodeRole::staged;
  bool writes_global = false;   // output read by another group or a graph output
  bool reshaped = false;        // output_shape differs from the spatial extents
  int64_t capacity = 0;         // staged: elements of its largest box over all tiles
  int64_t pool_offset = 0;      // staged: bytes into the block's pool
  int first_step = 0, last_step = 0;  // staged: lifetime in group positions
  int lanes = 1;                // threads per output point of its reduction
};

/// One axis-aligned box of a node's spatial domain, bounds inclusive (empty when lo > hi).
struct TileBox {
  std::vector<int64_t> lo, hi;
  int64_t volume() const;
};

/// A TMA tensor map the runtime makes for a kernel (the wgmma paths, device/wgmma.cuh and
/// device/flash.cuh) and passes by value after the status word: `tensor` viewed as a rows x cols
/// row-major matrix of 16-bit elements, rows `ld` elements apart, copied in boxes of box_rows x
/// box_cols with 128-byte swizzling (swizzle_bytes), out-of-range elements read as zero. A batched view has
/// outer dimensions after the matrix's two (at most three: a map has five): batch_extents[i]
/// matrices batch_strides[i] elements apart, copied one matrix per box.
struct TensorMapParam {
  TensorId tensor = -1;
  int64_t rows = 0, cols = 0, ld = 0;
  int box_rows = 0, box_cols = 0;
  std::vector<int64_t> batch_extents, batch_strides;
  int64_t offset = 0;  // elements from the tensor's start to the map's origin
  // A box-tiled convolution's input (contraction_plan.h): the box's extent along each batch
  // dimension (empty: 1 each) and the element stride of every dimension, innermost first (empty:
  // 1 each; the box extent along a dimension is then the points read times its stride).
  std::vector<int> batch_box, element_strides;
  // A map over a derived buffer (GroupPlan::derived[derived]) instead of `tensor` (whose dtype the
  // values keep; metadata is read as unsigned 16-bit elements), and the swizzle span in bytes
  // (128, 64, or 0: none).
  int derived = -1;
  int swizzle_bytes = 128;
};

/// A buffer the runtime derives once from a weight's values when it loads the kernel, passed
/// after the status word (before the tensor maps) as `tsl_derived<i>`: the compressed values or
/// the metadata of a 2:4 sparse weight read through `view` (nm_compress.h).
struct DerivedBuffer {
  enum class Kind : uint8_t { nm_values, nm_metadata };
  Kind kind = Kind::nm_values;
  TensorId tensor = -1;
  NmView view;
};

struct GroupPlan {
  std::vector<NodePlan> nodes;        // the group's nodes, in its (topological) order; sink last
  std::vector<int64_t> sink_tile;     // block tile per sink spatial axis (clamped to the extent)
  std::vector<int64_t> grid;          // tiles per sink spatial axis
  int64_t num_tiles = 0;
  int threads = 0;                    // per block, a multiple of the warp width
  int warp = 0;                       // spec.compute.simd_width
  int64_t pool_bytes = 0;             // staged buffers of one block
  bool pool_in_smem = true;           // else a per-block slice of global scratch
  int64_t blocks = 0;                 // grid size of the launch
  int cluster_blocks = 1;             // blocks per thread-block cluster (compiled into the kernel)
  // The kernel walks its tiles by gridDim (a persistent grid): the runtime may launch fewer
  // blocks -- as many whole clusters as the device holds at once, where that is fewer.
  bool persistent_grid = false;
  int64_t reduce_scratch_bytes = 0;   // static shared memory for cross-warp reductions
  std::vector<TensorId> inputs;       // tensors read from device memory, in parameter order
  std::vector<TensorId> outputs;      // tensors written to device memory, in parameter order
  std::vector<DerivedBuffer> derived;       // parameters after the status word (2:4 sparse weights)
  std::vector<TensorMapParam> tensor_maps;  // parameters after those (wgmma path)

  /// Position of node n in `nodes`, or -1.
  int position(NodeId n) const;
  int64_t scratch_bytes() const { return pool_in_smem ? 0 : pool_bytes * blocks; }
  int64_t dynamic_smem_bytes() const { return pool_in_smem ? pool_bytes : 0; }
};

/// Plans group `group` of a schedule for `spec` (a GPU spec).
GroupPlan plan_group(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec);

/// The boxes every node of the group computes for the sink tile with linear index `tile`
/// (row-major over plan.grid), in group order. The kernel computes exactly these boxes on the
/// device (kernel_emitter.cpp emits the same arithmetic); the plan sizes buffers with them.
std::vector<TileBox> tile_boxes(const OpGraph& graph, const GroupPlan& plan, int64_t tile);

/// `generic` launched as `blocks` blocks of `threads` threads over a one-dimensional grid, every
/// node but the sink inlined (computed in registers where it is read), no pool and no reduction
/// scratch: the common part of the mma, row and vector kernels' plans, which then set what differs.
GroupPlan inlined_launch_plan(const GroupPlan& generic, int64_t blocks, int threads);

/// Multi-line text of the plan, for `--dump` and the emitted source's header comment.
std::string print_group_plan(const OpGraph& graph, const GroupPlan& plan);

}  // namespace tessel::cuda
