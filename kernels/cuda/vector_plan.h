// The vector path: groups of elementwise nodes (bias, activation, residual and scaling chains,
// casts) become a kernel in which every thread computes `vec` consecutive elements of the sink,
// 16 bytes of its narrowest dtype: reads of device memory that walk the last axis contiguously are
// vector loads (the row kernel's row_load), the others scalar reads with the generic bounds and
// pad rules, and the sink is stored a vector at a time. The generic kernel would instead give each
// thread one element and recompute its tile's boxes per block.
//
// A group qualifies when
//   * no node reduces but over a window (at most kVectorMaxWindowPoints points per output, none
//     along the innermost dimension of a tensor it reads: a depthwise convolution, a pooling --
//     not a GEMM or a convolution over channels -- unless it pools one input whose last index
//     slides along it, a position and a tap: an NCHW pooling's `s w + k`, read a row's span at a
//     time where its chunks align -- VectorRead::span --, else a scalar per element) or a grouped
//     window (below), reading device
//     memory only (so its window needs no in-group values at other points); no node but the sink
//     reshapes its output (the sink stores at its domain point's row-major offset, which a
//     reshape keeps) except a grouped window's split of the channels, and only the sink writes
//     device memory;
//   * every node's spatial domain is the sink's (same extents; a grouped window's splits the last
//     axis), or the sink's up to axes of extent 1 (a global pooling's [N, 1, 1, C] before a sink
//     [N, C, 1, 1] or [N, C]: the other axes in the same order), and every read of an
//     in-group node is at the reader's own point (the identity map up to those axes: 0 along them),
//     so one point indexes every node -- except in-group plain copies (a transpose, a fixed index,
//     a reshape that only splits dimensions: body in0 of one in-bounds input, same dtype, read in
//     bounds), which are folded into their readers' maps and never computed (the copies before an
//     attention's Q and K scaling);
//     Other nodes that compute an elementwise value (no reduction, no write of device memory, no
//     reshape) whose domain is not the sink's, or that a node reads at another point, or copies
//     read out of bounds, are *recomputed*: evaluated where a read asks for them, at the read's
//     point, their own reads scalar reads of device memory (through folded copies) or recomputed
//     too, the pad value where the point is outside their domain (a rotary embedding's
//     rotate_half: Concat(Neg(x[..., 64:]), x[..., :64]) is x at d + 64 negated, or x at d - 64).
//     Where every index of such a read that moves with the vector is its last, with step 1 and
//     otherwise whole vectors (row_vector_aligned), a vector lies wholly inside or outside each
//     domain and tensor: the reads of device memory are guarded 16-byte vector loads at the
//     vector's first element (VectorInline::vector). Recomputation stops at reads a warp would
//     scatter (neither the vector's elements nor the warp's lanes walk them contiguously: a
//     transposed read) and at values that compute and would be evaluated at more than
//     kVectorMaxRecomputes points per point of their domain (a broadcast gate);
//   * no read is a gather;
//   * the last axis is a multiple of a vector width of at least two elements, which also divides
//     a grouped window's Mg and aligns its element reads.
// A grouped convolution (channels-last, groups > 1 with more than one input channel per group) is
// a *grouped window*: its domain is (n, o..., g, mg) and its output the channels m = g Mg + mg,
// so its domain splits the sink's last axis in two (allowed for a window whose output is the
// row-major merge of its domain; `vec` divides Mg, so a vector's elements share their group), and
// besides its taps it sums one reduction axis c, the group's input channels, along the innermost
// dimension of its input: x at g Cg + c, whole blocks of c's extent (every other term of that
// index a multiple of it: an NCHW convolution's w o + k is not). It sums over two or more inputs
// with a sum; each read is a channel read (its last index walks c: x, and OHWI weights [M, kh,
// kw, Cg]) or an element read (its last index walks the node's last axis: HWIO weights [kh, kw,
// Cg, M], as the normalize stage lays them out). It is accumulated tap by tap, c a vector of up to
// 16 bytes at a time: the input's vector shared by the elements (guarded at the padded border),
// OHWI weights one channel vector per element (its row of w), HWIO weights one element vector per
// channel. A contraction over channels that involves no group (a GEMM, a dense convolution: no
// channel read's last index depends on a spatial axis) stays with the tensor-core or generic
// families.
// A window of one input over more points than kVectorMaxWindowPoints (a global average pool over
// 56 x 56 pixels in channels-last, an SE block's squeeze), or of at least 2 kVectorMinSlices points
// when the vectors make fewer blocks than SMs, is *sliced* (a grouped window never is): `slices` threads of a block share each
// vector, each summing every slices-th tap (the taps flattened), and the first of them combines
// their accumulators through shared memory and computes the rest of the group; a block holds
// `lanes` vectors (consecutive channels: its loads of one tap are contiguous), lanes x slices
// threads, and loops over blocks of vectors with a block-uniform bound (the combine's barriers).
// When that leaves fewer blocks than SMs (a batch-1 SE squeeze: 4 vectors of 8 channels over
// 112 x 112 taps) and the spec has thread-block clusters, blocks take the most threads and a
// cluster of `parts` blocks shares each group of vectors, block r summing the taps' runs r, r +
// parts, ...; the cluster's rank 0 adds the others' sums from their shared memory (distributed
// shared memory), in rank order.
// Reads of device memory may be any affine map; those that walk the last axis contiguously
// (row_plan.h's row_vector_access: the last index is the last axis, no other index depends on it,
// the tensor's last dimension a multiple of the width, never out of bounds) are vector loads. A
// window's reads are loaded in its reduction loop, before the per-element values: a vector load
// where the last index is the last axis even when the others leave the tensor (guarded: the pad
// value instead; row_vector_access_guarded), else one scalar read per element.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/row_plan.h"

namespace tessel::cuda {

/// A window's read loaded as a span of its last dimension per step of the outer taps (an NCHW
/// pooling sliding along W: file comment): `chunks` aligned chunks of `chunk` elements from
/// `front` elements before `stride` x the vector's first element; element e at inner tap k is
/// register lead + stride e + dilation k. chunks == 0: not a span read.
struct VectorSpan {
  int64_t front = 0, lead = 0, stride = 0, dilation = 0, chunk = 0, chunks = 0;
};

struct VectorRead {
  int producer = -1;      // position of the in-group producer, or -1: device memory
  RowRead read;           // the tensor, its map over the node's axes, type and pad
  bool vector = false;    // a vector load along the last axis
  bool guarded = false;   // in a window's loop: a vector load along the last axis, the pad value
                          // where another index leaves the tensor
  VectorSpan span;        // in an unsliced window's loop: a span per step of the outer taps
  int inlined = -1;       // an in-group node recomputed at the read's point: its VectorPlan::inlined
};

/// A node of the group computed where a read asks for its value instead of a vector of the sink's
/// domain (file comment: recomputed reads). Its reads are over its own axes: device memory
/// (through folded copies) or another recomputed node.
struct VectorInline {
  NodeId node = -1;
  std::vector<VectorRead> reads;  // one per input; producer is always -1
  AffineMap at;                   // the point read, over the axes of the node whose read starts
                                  // the recomputation (its root, a node of VectorPlan::nodes)
  bool vector = false;            // evaluated a vector at a time (file comment)
};

struct VectorPlan {
  std::vector<NodeId> nodes;                    // group order; the sink last
  std::vector<VectorInline> inlined;            // recomputed where read (a read's `inlined`); a
                                                // node's inputs before it
  std::vector<std::vector<VectorRead>> reads;   // per node, one per input
  std::vector<int64_t> extents;                 // the sink's domain
  int64_t elements = 0;                         // their product
  int vec = 1;                                  // elements per thread and access
  int threads = 0;                              // per block
  int64_t blocks = 0;                           // grid (a grid-stride loop covers the rest)
  // Per node (in `nodes` order), for grouped windows (file comment):
  std::vector<int64_t> split;       // 0, or Mg: the node's domain splits the sink's last axis m into
                                    // (g, mg), m = g Mg + mg; `vec` divides Mg
  std::vector<int> channel_axis;    // -1, or the reduction axis summed along every input's last index
  std::vector<int> channel_vec;     // that axis's elements per vector load
  // Per node: for each spatial axis, the sink's axis it walks, or -1 for an axis of extent 1 the
  // sink does not have (the identity when the domains are equal; a grouped window's g is the
  // sink's last and its mg -1, both recomputed from the split by the emitter).
  std::vector<std::vector<int>> axis_of;
  std::vector<int> vector_axis;     // the node's axis along the sink's last (a vector's elements)
  int slices = 1;                   // threads per vector sharing a window's taps (file comment)
  int lanes = 0;                    // vectors per block when sliced (threads = lanes x slices)
  int parts = 1;                    // blocks of a cluster sharing them too (file comment)
  int acc_bytes = 8;                // bytes of a window's accumulator (f16, bf16: float; else 8)
  double recomputed_flops = 0;      // the recomputed nodes' FLOPs at every point of the sink
                                    // (each evaluated once per element of each read: an upper bound)
  /// Shared memory of a sliced window's combine: an accumulator per thread and element.
  int64_t combine_bytes() const { return slices > 1 ? static_cast<int64_t>(threads) * vec * acc_bytes : 0; }
};

struct VectorMatch {
  std::optional<VectorPlan> plan;
  std::string reason;  // set when plan is not
};

/// Design choice: a span read holds at most this many elements (registers of the thread).
inline constexpr int64_t kVectorMaxSpanElements = 64;

/// Design choice: the most recomputed reads a plan holds (each is emitted where it is read: a
/// value read by several nodes, or at several points, is computed each time).
inline constexpr int kVectorMaxInlined = 16;
/// Design choice: a recomputed value that computes (not a copy) is evaluated at most this many
/// times per point of its domain (the sink's points over its own). A rotary embedding's halves
/// are read at 2; an SE gate's sigmoid at every pixel of its channel (784 for a 28 x 28 map) ran
/// 1.14x slower recomputed than in a kernel of its own (H200, 2026-11-29d call 2).
inline constexpr double kVectorMaxRecomputes = 2;

/// Design choice, not a hardware fact: threads per block (capped by the spec's limit).
inline constexpr int kVectorBlockThreads = 256;
/// Design choice: the most points a node may reduce per output in the vector kernel (a 16x16
/// window); longer reductions leave one thread too much serial work and take another family.
inline constexpr int64_t kVectorMaxWindowPoints = 256;
/// Design choice: a sliced window's threads (vector_plan.h): at least this many vectors per block
/// (a tap's loads of 4 x 16 contiguous bytes per warp), at most a block over this many slices, and
/// blocks for about this many waves of the SMs before vectors per block grow past the least.
inline constexpr int kVectorMinLanes = 4;
inline constexpr int kVectorMinSlices = 8;
inline constexpr int kVectorSliceWaves = 2;
/// Design choice: a sliced window's tap loop is unrolled this many times (loads in flight).
inline constexpr int kVectorSliceUnroll = 4;
/// CUDA's limit on a kernel's static shared memory (more takes dynamic shared memory and an
/// opt-in): a sliced window's combine stays within it.
inline constexpr int64_t kStaticSmemBytes = 48 * 1024;
/// Design choice: a grouped window's channel loop is unrolled whole up to this many vector steps
/// (a ResNeXt group of 4 to 32 halves: 1 to 4), by this many beyond.
inline constexpr int kVectorChannelUnroll = 8;

/// Checks the conditions of the file comment for `group` and plans the vector kernel.
VectorMatch plan_vector(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec);

/// The GroupPlan the runtime launches: `generic`'s nodes and parameters with the vector kernel's
/// grid and block size, no pool.
GroupPlan vector_group_plan(const GroupPlan& generic, const VectorPlan& plan);

/// One-line text of the plan, for the generated source's header and `--dump`.
std::string print_vector_plan(const VectorPlan& plan);

}  // namespace tessel::cuda
