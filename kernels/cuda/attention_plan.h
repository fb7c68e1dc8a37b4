// The streamed attention path: planning the flash-style kernel (device/flash.cuh) of a streamed
// attention group (ScheduledGroup::stream_chunk, formed by the welder policy from an attention
// pattern, tilegraph/attention_pattern.h). kernel_emitter.cpp asks plan_attention for every
// streamed group; on success it emits the streamed kernel, otherwise the generic kernel (correct,
// and slow: it stages whole rows of scores) with the reason in the generated source's header.
//
// A streamed group qualifies when
//   * the spec's target can run the kernel for the pattern (group_footprint.h's
//     streamed_attention_unsupported: mma.sync m16n8k16 for the dtype, head dimensions);
//   * the schedule's geometry (streamed_attention) is the kernel's: 16 query rows per warp, the
//     block's rows a multiple of 16, the chunk a multiple of 16 keys;
//   * Q and K are read with the head dimension contiguous (Q stored M x D, K stored N x D) and V
//     with dv contiguous (N x DV), each a 2-D view per batch point with 16-byte aligned rows,
//     directly or through the in-group copies of the pattern (the mma path's operand rules);
//   * O's output is its domain (no reshape) and every extent fits 32-bit tile indices.
// On an sm_90a target whose spec lists the wgmma shapes it needs for the dtype (m64n128k16 or
// m64n64k16 for S, and O's pieces), the planner moves a qualifying group to the Hopper kernel
// (flash.cuh's WarpgroupAttention: TMA, wgmma, a producer warpgroup and two consumers of 64 rows,
// chunks of 128 keys, or 64 when two stages of 128 do not fit beside Q or dv is above 128); the
// schedule's geometry is the mma.sync kernel's, and `warpgroup_reason` says why a group stays
// there. It needs d and dv at most 256 (tiles of whole 64-column boxes), at least 64 queries,
// 16-byte aligned rows and batch strides (the tensor maps' rule), at most three batch axes with a
// nonzero stride per operand, and two stages in shared memory. Heads above 128 on the mma.sync
// kernel read Q's fragments from shared memory at each step (group_footprint.h).
// The score steps (scale, mask) run per score in registers through the generic value functions,
// rounding like the interpreter at each step; the softmax and P V are the kernel's own (f32, P
// rounded to the operand dtype for the tensor cores).
#pragma once

#include <optional>
#include <string>

#include "cost_model/group_footprint.h"
#include "kernels/cuda/contraction_plan.h"
#include "tilegraph/attention_pattern.h"

namespace tessel::cuda {

struct AttentionPlan {
  AttentionPattern pattern;
  StreamedAttention shape;            // rows, chunk, d, dv, threads, stages (from the schedule)
  DType dtype = DType::f16;
  std::vector<int> batch_axes;        // O's (and S's) spatial axes before m
  std::vector<int64_t> batch_extents;
  MmaOperand q, k, v;                 // q: A of S; k: B of S (N x D); v: B of O (N x DV)
  std::vector<NodeId> operand_nodes;  // in-group copies folded into the reads
  int64_t smem_bytes = 0;
  int64_t tiles_m = 0;                // blocks per batch point
  // The Hopper kernel (see above): its block rows, key chunk, stages and threads replace the
  // schedule's; q_batch, k_batch, v_batch: the positions in batch_axes of the operand's
  // tensor-map batch dimensions (its nonzero strides), in the map's order.
  bool warpgroup = false;
  std::string warpgroup_reason;       // why not, when it could have been considered
  int rows = 0, chunk = 0, stages = 0, threads = 0;
  std::vector<int> q_batch, k_batch, v_batch;
  // The head dimensions of the kernel's tiles (d and dv rounded up: the mma.sync kernel's
  // shape.d_tile and dv_tile, the Hopper kernel's whole 64-column boxes, dv 64 or 128).
  int64_t d_tile = 0, dv_tile = 0;
  // The key chunks each block of rows visits, when a constant mask excludes whole chunks
  // (attention_pattern.h's attention_key_ranges for the kernel's rows and chunk); the blocks then
  // run the rows with the most chunks first.
  std::optional<AttentionKeyRanges> key_ranges;
  // The keys of each block of rows split over a thread-block cluster of `splits` blocks (few
  // blocks, many keys: decoding), merged in rank 0 (device/flash.cuh's combine_cluster); the
  // mma.sync kernel only. 1: not split.
  int splits = 1;
  // Decoding's key split on the mma.sync kernel (device/flash.cuh's KSPLIT): `key_split` warps
  // share a block's 16 rows, a stage holds that many chunks (of `chunk` keys, 32 or 64 then), each
  // warp scores its own, and the warps' parts merge in shared memory at the end. Chosen when the
  // blocks of one warp are fewer than the SMs, or as the schedule recorded it. 1: not split.
  int key_split = 1;
  // Grouped-query attention packed into the rows: when K and V do not depend on the innermost
  // batch axis (G query heads share a key/value head) and Q's rows of those heads follow one
  // another (its stride there is M rows), the mma.sync kernel takes the G x M query rows of a
  // key/value head as one batch point, so the keys are read once for all G heads -- decoding
  // (M = 1) with 8 heads per group fills 8 rows of a block instead of 1 (fold = G; 1: none). The
  // axis is then gone from batch_axes, batch_extents and the operands' batch strides;
  // `fold_axis` is its position in O's domain.
  int fold = 1, fold_axis = -1;
  // The probabilities' exponent as (s - m) log2 e, not one fused multiply-add: when the logits
  // can reach 2^20 in magnitude (a mask of -1e30 or -3.4e38, or a mask given as an input), where
  // the fused form's rounding is not exact enough (device/flash.cuh's `probability`).
  bool exact_exponent = false;
  // Per spatial axis of O, the stride of its coordinate in the group's output: O's own row-major
  // layout, or where the pattern's output copies (the heads' merge) move it (attention_store_strides).
  std::vector<int64_t> store_strides;
  static constexpr double kFastExponentLimit = 1 << 20;
  int64_t queries() const { return shape.queries * fold; }  // rows per batch point
  int64_t batch() const { return shape.batch / fold; }      // batch points
  int64_t key_chunks() const { return key_ranges ? key_ranges->visited() : tiles_m * ((shape.keys + chunk - 1) / chunk); }
  int64_t plain_chunks() const { return key_ranges ? key_ranges->plain() : 0; }

  int64_t blocks() const { return batch() * tiles_m * splits; }
};

struct AttentionMatch {
  std::optional<AttentionPlan> plan;
  std::string reason;  // set when plan is not
};

/// Plans the streamed kernel of `group` (stream_chunk > 0), or says why it keeps the generic one.
AttentionMatch plan_attention(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec);

/// The GroupPlan the runtime launches: `generic`'s parameters, one block per tile of query rows.
GroupPlan attention_group_plan(const GroupPlan& generic, const AttentionPlan& plan);

/// One-line text of the plan, for the generated source's header and `--dump`.
std::string print_attention_plan(const OpGraph& graph, const AttentionPlan& plan);

}  // namespace tessel::cuda
