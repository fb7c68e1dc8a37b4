// The transpose path: a group that is one permuting copy whose output's innermost axis is not the
// input's (an NCHW tensor written NHWC at a model's boundary, the NHWC result written back as
// NCHW) becomes a tiled transpose: each block reads a tile of `tile` x `tile` elements along the
// input's contiguous axis into shared memory and writes it along the output's, so both sides of
// device memory are read and written in whole rows of the tile. The vector kernel would read one
// of them an element per thread, tensor-wide strides apart (about 0.8 TB/s for the NCHW inputs of
// the op sweep's convolutions on an H100, a quarter of its bandwidth).
//
// A group qualifies when it is one node without reduction axes, of body `in0`, reading one
// tensor of device memory of its own dtype by a permutation: every index of the input is one axis
// of the node with coefficient 1 and offset 0 (or 0 where the input's dimension is 1), every axis
// is read once, and the input's dimension is the axis's extent. Axes adjacent in the output and in
// the input (H and W of an NCHW <-> NHWC transpose) are merged; after that, the output's last axis
// `a` must differ from the axis `b` that walks the input's last dimension (else the copy is
// contiguous on both sides and the vector kernel takes it); the other merged axes are a batch.
// The output may reshape (the sink stores at its domain point's row-major offset).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/group_plan.h"

namespace tessel::cuda {

/// One merged axis of the copy: its extent and its element strides in the input and the output.
struct TransposeAxis {
  int64_t extent = 1;
  int64_t in_stride = 0;
  int64_t out_stride = 0;
};

struct TransposePlan {
  NodeId node = -1;
  TensorId input = -1;
  TransposeAxis a;                    // the output's contiguous axis (out_stride 1)
  TransposeAxis b;                    // the input's contiguous axis (in_stride 1)
  std::vector<TransposeAxis> batch;   // the others, outermost first
  int tile = 32;                      // elements per tile side
  int rows_per_thread = 4;            // a block of tile x (tile / rows_per_thread) threads
  int64_t tiles_a = 0, tiles_b = 0;   // tiles along a and b
  int64_t blocks = 0;                 // tiles_a x tiles_b x the batch's points
  int threads() const { return tile * (tile / rows_per_thread); }
};

struct TransposeMatch {
  std::optional<TransposePlan> plan;
  std::string reason;  // set when plan is not
};

/// Design choices, not hardware facts: a tile of 32 x 32 elements, 8 rows of 32 threads (each
/// thread moving 4 elements per side): a warp reads or writes 32 consecutive elements.
inline constexpr int kTransposeTile = 32;
inline constexpr int kTransposeRowsPerThread = 4;

/// Checks the conditions of the file comment for `group` and plans the tiled transpose.
TransposeMatch plan_transpose(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec);

/// The GroupPlan the runtime launches: `generic`'s nodes and parameters with the transpose's grid
/// and block size (its tile is static shared memory).
GroupPlan transpose_group_plan(const GroupPlan& generic, const TransposePlan& plan);

/// One-line text of the plan, for the generated source's header.
std::string print_transpose_plan(const TransposePlan& plan);

}  // namespace tessel::cuda
