// What a fused group occupies on chip: shared memory per block, registers per thread, threads per
// block, and bytes of tiles per cache level -- one definition, used by the cost model, by the
// policies' capacity checks and by check_schedule, so that they never disagree about what fits.
//
// On a GPU, a node's tile at the innermost level (registers) is per thread: its inputs and its
// output, except intermediates another node of the group already holds there. At a
// software-managed block-scoped level (shared memory) a node with a thread mapping stages only
//   - inputs from outside the group when the node reduces (a contraction or reduction re-reads
//     them across threads and reduction steps; staged(), below), with `pipeline_stages` copies;
//   - its output when the group keeps that intermediate at this level (an edge level);
// an elementwise node reads its inputs straight into registers and writes its output from there.
// A node without a thread mapping (one level, no threads) stages its whole tile, as does every
// level of a CPU (each cache level holds the tiles made for it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cost_model/cost_model.h"

namespace tessel {

struct GroupFootprint {
  int64_t smem_bytes_per_block = 0;      // GPU: software-managed block/SM-scoped levels
  int64_t register_bytes_per_thread = 0;  // GPU: the innermost level
  int64_t threads_per_block = 1;          // GPU: the widest node's thread count (1 on a CPU)
  std::map<int, int64_t> level_bytes;     // other levels, by index in spec.memory_levels
};

/// For a streamed attention group (ScheduledGroup::stream_chunk) the footprint of the streamed
/// kernel (StreamedAttention below), not of the per-node tiles.
GroupFootprint group_footprint(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec);

/// The geometry of a streamed attention group, read from its schedule: a block owns `rows` query
/// rows of one batch point (the attention output O's block tile along m) with `threads` threads
/// (O's thread count) and streams the keys `chunk` at a time (stream_chunk) through `stages` shared-
/// memory buffers (O's pipeline_stages) of K and V. Q's tile sits in shared memory once,
/// then in registers for heads up to kStreamedQFragmentsMaxHead (a longer head's fragments are
/// read from shared memory at each step); the f32 accumulators of O (rows x dv) and of one chunk
/// of scores (rows x chunk) and Q's fragments are spread over the threads' registers.
constexpr int64_t kStreamedRowPadBytes = 16;
/// device/flash.cuh's kQFragmentsMaxHead (the emitted kernel asserts they agree).
constexpr int64_t kStreamedQFragmentsMaxHead = 128;

struct StreamedAttention {
  NodeId scores = -1, out = -1;
  int64_t rows = 0, chunk = 0, d = 0, dv = 0, threads = 0, stages = 0, elem_bytes = 0;
  int64_t queries = 0, keys = 0, batch = 1;  // m, n and the product of the batch extents
  // The head dimensions of the kernel's tiles (streamed_head_tile): d and dv rounded up, the
  // columns past them zero-filled.
  int64_t d_tile = 0, dv_tile = 0;
  // Shared-memory rows carry kStreamedRowPadBytes of padding (device/flash.cuh: ldmatrix without
  // bank conflicts).
  // The kernel's key split (kernels/cuda/attention_plan.h's key_split): that many warps hold each
  // row's O, scores and Q fragments, and a stage holds that many chunks. 1 in a schedule's geometry.
  int64_t key_split = 1;
  int64_t smem_bytes() const {
    const int64_t pad = elem_bytes > 0 ? kStreamedRowPadBytes / elem_bytes : 0;
    return (rows * (d_tile + pad) + stages * key_split * chunk * (d_tile + pad + dv_tile + pad)) * elem_bytes;
  }
  int64_t register_bytes_per_thread() const {
    const int64_t q = d_tile <= kStreamedQFragmentsMaxHead ? rows * d_tile * elem_bytes : 0;
    return threads > 0 ? key_split * (rows * (dv_tile + chunk) * 4 + q) / threads : 0;
  }
  int64_t blocks() const { return batch * ((queries + rows - 1) / rows); }
};

/// The geometry of `group`, or the reason it is not a well-formed streamed attention group (the
/// nodes are not exactly one attention pattern ending at the sink -- O, or one of O's output
/// copies, match_attention_to --, or O's tile does not give a block of query rows with the whole
/// of dv).
std::optional<StreamedAttention> streamed_attention(const OpGraph& graph, const ScheduledGroup& group, std::string* why = nullptr);

struct AttentionPattern;

/// Why the streamed kernel (kernels/cuda/device/flash.cuh) cannot run `pattern` on `spec`, or
/// nullopt when it can: a CUDA target with cp.async, ldmatrix and mma.sync m16n8k16 for the
/// dtype (sm_80+, listed in the spec, 32-lane warps); S, P, O and the operands all f16 or all
/// bf16; head dimensions d and dv whole 16-byte chunks up to kStreamedMaxHead (O's accumulators
/// live in registers, and Q's fragments up to kStreamedQFragmentsMaxHead; a head that is not a
/// power of two runs in a padded tile). The policy asks before it forms the group,
/// the CUDA planner again before it emits the kernel.
std::optional<std::string> streamed_attention_unsupported(const OpGraph& graph, const AttentionPattern& pattern,
                                                          const HwSpec& spec);
constexpr int64_t kStreamedMaxHead = 256;
/// The head dimension of the streamed kernel's tiles for a head of h elements: the power of two
/// >= h, at least 16 (mma.sync's k16 steps; device/mma.cuh's tile copies give each thread one
/// column of 16-byte chunks, so a tile row's chunks divide the block's threads).
int64_t streamed_head_tile(int64_t h);
/// A head's rows must be whole 16-byte chunks (the tile copies' and the tensor maps' unit).
constexpr int64_t kStreamedHeadAlignBytes = 16;

/// True if node `n` of `group` keeps the inputs it reads from outside the group in the level of
/// its outer tile (see the file comment): always on a CPU and for a node without a thread
/// mapping; on a GPU with a thread mapping, only when the node has reduction axes.
bool stages_inputs(const OpGraph& graph, const ScheduledGroup& group, NodeId n, const HwSpec& spec);

/// The level at which `group` keeps the intermediate `t` (its edge level), or "" when `t` is not
/// produced inside the group or has no edge level.
std::string edge_level_of(const OpGraph& graph, const ScheduledGroup& group, TensorId t);

}  // namespace tessel
