// The tensor-core ("mma") path for contraction groups: recognizing a group whose kernel can run
// its contraction on the tensor cores, and planning that kernel (tiling, operand layouts, launch).
// kernel_emitter.cpp asks plan_contraction for every group after plan_group; on success it emits
// the mma kernel (device/mma.cuh's BlockGemm plus the group's epilogue), otherwise the generic
// kernel, and the reason is written into the generated source's header.
//
// A group qualifies when
//   * its one reducing node C is a contraction C[b..., m, n] = sum_k A(b.., m, k) * B(b.., k, n):
//     a sum over one reduction axis k of the product of two inputs, f16 or bf16 operands and
//     output (accumulated in f32, rounded to the output dtype), m and n the last two spatial
//     axes (MatMul, Gemm without alpha, batched MatMul of attention);
//   * each operand is read from device memory (a kernel input), directly or through in-group
//     copies (a Transpose: body `in0`, no reshape) that are folded into the read, and its access
//     is a permutation of axes with broadcasting: every index is one axis of C (or 0); then per
//     batch point the operand is a 2-D row-major view whose contiguous index is k or m (n); the
//     row distance (leading dimension) and the batch strides are multiples of 8 elements, so
//     every row starts 16-byte aligned for cp.async;
//   * every other node is an elementwise epilogue the generic plan already inlines (bias, GELU,
//     residual add, scaling, cast): no reduction, C's spatial domain, in-group reads one-to-one
//     on the same point; their value functions run per accumulator element in registers; the
//     sink may reshape its output (Reshape to attention heads: same row-major order);
//   * the spec's target has mma.sync m16n8k16 for the dtype (tensor_core_shapes, an sm_80+ arch)
//     and 32-lane warps (the width mma.sync's fragments are defined over).
//
// A convolution (several reduction axes, or reads with strides, sums of axes and padding) runs as
// an implicit GEMM when it is channels-last: m is every spatial axis but the last, flattened
// row-major (n, oh, ow), n the last spatial axis (the output channel), k the reduction axes
// flattened in the order of B's memory (kh, kw, c); B (the weight) must then be a plain 2-D view
// with k or n contiguous, and A (the input) is gathered: each of its dimensions is read at
// coeff_m * x[m axis] + coeff_k * x[k axis] + offset (strides, dilation, padding), with k's
// innermost axis alone on A's contiguous dimension and its extent a multiple of 8, so every
// 16-byte chunk is 8 channels of one input pixel; chunks outside the input are zero-filled
// (padding). NHWC Conv with OHWI or HWIO weights qualifies; NCHW does not. A grouped one runs an
// implicit GEMM per group: the group axis g (read by both operands: A's channels Cg g + c, B's
// output columns Mg g + mg) is a batch axis, each operand's view offset by its stride per group
// (a multiple of 8 elements: Cg and the weight's group stride 16-byte aligned), n the group's Mg
// output channels (block_n down to 16 so that no group computes another's zeros), on mma.sync
// (not wgmma: n is too narrow); the output's channel dimension merges g and mg, and an epilogue
// over the output's domain reads the point (m, g Mg + n) (merged_n). Fewer than 8 channels per
// group (ResNeXt-50's first stage: 4) keep the vector kernel's grouped windows.
// Everything else keeps the generic kernel unchanged.
//
// When the block tiles do not fill the SMs (a decode GEMM: M = 16 rows of tokens) and the spec
// has thread-block clusters (limits.max_cluster_blocks), the mma.sync kernel splits K: split_k
// blocks of one cluster compute the same tile over consecutive parts of K, and rank 0 adds the
// others' partial sums through distributed shared memory before the epilogue (device/mma.cuh's
// reduce_cluster). split_k is the cost model's reduction_split (the largest power of two whose
// blocks still fit the SMs one each, at most the cluster size, with every part at least `stages`
// K tiles long), so the model prices the kernel that runs. A split plan is bound by the latency
// of its copies: it takes a 64-wide K step when K splits with it and up to 8 stages. An implicit
// GEMM keeps one block per tile (its gather copier starts at k = 0). The wgmma kernel splits the
// same way (its parts at least 4 K tiles of 64; device/wgmma.cuh's run parks ranks 1..'s sums in
// their stages' memory), never on its persistent grid.
//
// On an sm_90a target the implicit GEMM runs on the wgmma kernel too, as a box-tiled convolution
// (`conv_box`): a block's 128 rows of m are a box of output points -- t_a consecutive points along
// each output axis a (powers of two, product 128: e.g. 2 images x 8 rows x 8 columns of a 7 x 7
// output) -- so for one tap (kh, kw) and one chunk of 64 channels the input it reads is a box of
// A's tensor too: t_a points along each input dimension, m_coeff_a apart (the stride: the tensor
// map's element stride, at most 8), starting at m_coeff * origin + k_coeff * tap + offset (the
// dilation and the padding: the copy engine zero-fills coordinates outside the tensor, negative
// ones included). The K loop walks taps x ceil(C / 64) chunks (channels past C read as zeros from
// both operands: B's map has the taps as an outer dimension), the producer computes each stage's
// coordinates (device/wgmma.cuh's COORDS hook), and the epilogue maps a row of the box back to its
// output point, skipping those past an output's edge. The box's shape is the one with the fewest
// tiles (ties: wider along the innermost axis); it is recorded as the family parameters box<a>
// (and k_tiles) so the cost model prices the padded tiles. Needs every output axis read by one
// input dimension alone, in the same order, strides of at most 8, and A's channels innermost.
//
// On an sm_90a target whose spec lists wgmma's m64n256k16 and m64n128k16 for the dtype, a product
// (or a box-tiled implicit GEMM) with A stored M x K, M and N at least 128 and 16-byte aligned rows runs on the
// Hopper kernel instead (device/wgmma.cuh: TMA copies, wgmma, a producer warpgroup and two
// consumers); the others keep mma.sync and the plan says why. Where its 128-row tiles leave SMs
// idle, the variants also offer 64-row blocks of one consumer (64 to 256 wide), which the cost
// model weighs against the 128-row ones and a K split. A batched product (attention's
// Q K^T and P V outside a fused attention) gives each operand's tensor map the batch axes it is
// not broadcast over as outer dimensions (at most three), so the copy engine zero-fills each batch
// point's edges; its tiles are the batch points' tiles in turn.
//
// A contraction whose tile kind is block_sparse (the policy chose it for a weight with a sparsity
// attribute, tilegraph/sparsity.h) runs on mma.sync with its K loop over the non-zero tiles of the
// weight only (ContractionPlan::sparse_*): the weight must be A or B itself (no in-group copy),
// broadcast over any batch axes, a plain product (not an implicit GEMM), and the kind's blocks
// must be the kernel's tiles along the weight's two dimensions, its density theirs.
//
// A contraction whose tile kind is nm_sparse (a weight B with a 2:4 sparsity attribute along k)
// runs on the sparse tensor cores (ContractionPlan::nm_sparse): the spec must list mma_sparse,
// the weight must be B itself (no in-group copy), broadcast over any batch axes, a plain product,
// f16 or bf16, the K step a multiple of 64 and the warp tiles multiples of 16 along m and n. Where
// the recorded family is wgmma (a block of 128 rows by 128, 192 or 256 columns, run transposed;
// no split or cluster; a recorded persistent grid or ping-pong is not taken: one tile per block),
// X stored M x K with 16-byte aligned rows and one X for every batch point, it runs on
// wgmma.mma_async.sp instead (nm_wgmma), fed by the tensor copy engine.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/group_plan.h"

namespace tessel::cuda {

/// The outputs a lane of the f32 kernel computes along m and along n (device/mma.cuh's
/// kSimtLaneRows and kSimtLaneCols).
constexpr int kSimtLaneTile = 8;
/// wgmma is issued by a warpgroup: 4 consecutive warps (a fact of the PTX instruction).
constexpr int kWarpgroupWarps = 4;
/// Facts of the wgmma kernels' instructions (device/wgmma.cuh, device/flash.cuh): wgmma's m64 x
/// k16 per warpgroup; a tile row of 64 16-bit elements is the 128-byte span of the copy engine's
/// and the descriptors' swizzle, whose pattern repeats every 1024 bytes (the alignment of every
/// tile); an mbarrier is 8 bytes.
constexpr int kWgInstM = 64, kWgRowElems = 64, kWgRowBytes = 128, kWgAtomBytes = 1024;
constexpr int kWgMbarrierBytes = 8;
/// Software choices shared by the wgmma kernels: one producer warpgroup and two consumers; the
/// producer gives registers to the consumers with setmaxnreg (device/wgmma.cuh's kProducerRegs
/// and kConsumerRegs). The GEMM kernel's 64-row blocks have one consumer and move no registers;
/// up to kWgPairedMaxBlockN wide (64 accumulators a thread) they are launched for two blocks per
/// SM (128 registers a thread), wider for one.
constexpr int kWgConsumers = 2;
constexpr int kWgProducerRegs = 40, kWgConsumerRegs = 232;
constexpr int kWgPairedMaxBlockN = 128;
constexpr int kWgPairedBlocks = 2;  // the launch bound's blocks per SM of those
/// The 2:4 wgmma kernel (device/wgmma.cuh's SparseWarpgroupGemm::kBlocksPerSm) is launched for one
/// block per SM, as many stages as its shared memory holds.
constexpr int kWgSparseBlocksPerSm = 1;
/// Its blocks per cluster where the spec has clusters (SparseWarpgroupGemm's CLUSTER): two, sharing X.
constexpr int kWgSparseCluster = 2;
/// The GEMM kernel's epilogue slab per consumer: 64 rows of 128 16-bit values (device/wgmma.cuh's
/// kEpiSlabBytes), after the stages.
constexpr int kWgEpiSlabBytes = kWgInstM * 128 * 2;
/// Shared memory of the wgmma GEMM kernel with `stages` stages of block_m + block_n rows
/// (device/wgmma.cuh's kSmemBytes, which the emitted kernel asserts equal): the stages, each
/// consumer's epilogue slab (a consumer per 64 rows), two mbarriers per stage, slack to align the
/// stages to a swizzle atom.
constexpr int64_t wgmma_smem_bytes(int64_t block_m, int64_t block_n, int64_t stages) {
  return stages * ((block_m + block_n) * kWgRowBytes + 2 * kWgMbarrierBytes) + block_m / kWgInstM * kWgEpiSlabBytes + kWgAtomBytes;
}
/// A 16-byte copy of 16-bit elements (cp.async's chunk; a tensor map's stride unit).
constexpr int kChunkElems = 8;

/// Whether the spec lists wgmma's m64 n k16 shape for `dt`.
bool wgmma_listed(const HwSpec& spec, DType dt, int n);
/// Why the spec's limits do not allow a wgmma kernel's block (a producer and `consumers`
/// consumer warpgroups, setmaxnreg's split), or "" with its threads in `threads`.
std::string warpgroup_block(const HwSpec& spec, int& threads, int consumers = kWgConsumers);

/// How one operand of the contraction is read: per batch point a 2-D row-major view of `tensor`,
/// element (r, c) at tensor[batch offset + r * ld + c] (device/mma.cuh).
struct MmaOperand {
  TensorId tensor = -1;                // in device memory: one of the kernel's inputs
  bool k_contiguous = true;            // c is the k index (A stored M x K, B stored N x K); else r is
  int64_t ld = 0;                      // elements between rows
  std::vector<int64_t> batch_strides;  // elements per step of each batch axis (0: broadcast)
  int64_t offset = 0;                  // elements before the view's first one
  // Elements per global read (device/mma.cuh's TileCopy GRAN): kChunkElems (16-byte cp.async)
  // where the rows, the batch strides and the offset are multiples of 16 bytes, else the largest
  // of 4, 2, 1 dividing them all. Only the mma.sync kernel reads a view below kChunkElems; the
  // wgmma kernel's tensor maps need 16-byte strides.
  int align = kChunkElems;
};

/// One dimension of the gathered A of an implicit GEMM: index = m_coeff * x[m_axis] +
/// k_coeff * x[k_axis] + offset (axes of C; -1: no such term), tensor elements `stride` apart.
struct GatherDim {
  int m_axis = -1;
  int64_t m_coeff = 0;
  int k_axis = -1;
  int64_t k_coeff = 0;
  int64_t offset = 0;
  int64_t extent = 0;   // the tensor's extent along this dimension
  int64_t stride = 0;   // elements per index step
  bool check = false;   // the index can leave [0, extent) (padding): such chunks are zero-filled
};

struct ContractionPlan {
  NodeId node = -1;                    // C
  DType dtype = DType::f16;            // of both operands and of C
  std::vector<int> batch_axes;         // C's spatial axes before m and n
  std::vector<int64_t> batch_extents;  // their extents
  int m_axis = 0, n_axis = 0;          // C's last two spatial axes
  int64_t m = 0, n = 0, k = 0;         // extents
  int64_t batch = 1;                   // product of the batch extents
  MmaOperand a, b;
  std::vector<NodeId> operand_nodes;   // in-group copies folded into the operand reads
  // Implicit GEMM (a convolution, see the file comment): m flattens m_axes, k flattens k_axes
  // (row-major, each list in that order), A is gathered through a_gather (one entry per dimension
  // of A's tensor; a.ld is unused), and n_axis is the last spatial axis. A grouped convolution's
  // groups are batch axes (read by both operands: each group's view is offset by its stride);
  // they sit just before n, and the output's last dimension merges them with n (merged_n: the
  // epilogue's domain is the output's, its last axis the batch point times n plus n).
  bool implicit = false;
  bool merged_n = false;
  // m_axes is also set for a product whose batch axes fold into m (B broadcast over them, A's
  // rows continuing across them): m flattens batch axes and m, and batch is 1.
  std::vector<int> m_axes, k_axes;
  std::vector<int64_t> m_extents, k_extents;
  std::vector<GatherDim> a_gather;
  // The wgmma form of the implicit GEMM (file comment): box_tiles[i] output points of m_axes[i]
  // per tile (product block_m), k_chunks chunks of 64 channels per tap, `taps` taps (the product
  // of the k extents but the innermost); the K loop has taps x k_chunks tiles.
  bool conv_box = false;
  std::vector<int64_t> box_tiles;
  int64_t k_chunks = 0, taps = 0;
  // Tiling: a block computes block_m x block_n of one batch point with warps_m x warps_n warps,
  // stepping K by block_k through `stages` shared-memory buffers.
  int block_m = 0, block_n = 0, block_k = 0;
  int warps_m = 0, warps_n = 0;
  int stages = 0;
  bool tile_from_schedule = false;     // block_m x block_n is the schedule's block tile
  int64_t tiles_m = 0, tiles_n = 0;    // per batch point
  int raster_group = 1;                // block rows per rasterization group (L2 reuse)
  int64_t smem_bytes = 0;              // dynamic shared memory of the pipeline
  // Split K (see the file comment): split_k blocks per tile, a cluster; rank r sums K tiles
  // [r * T / split_k, (r + 1) * T / split_k) of the T = ceil(k / block_k). split_reason says why
  // K is not split when the tiles leave SMs idle.
  int split_k = 1;
  std::string split_reason;
  // What deepened the pipeline of a plan whose blocks kept too few bytes in flight (Little's
  // law, contraction_plan.cpp's deepen_stream), or "".
  std::string deepened;
  // The Hopper kernel (device/wgmma.cuh) instead of mma.sync: `warpgroups` warpgroups of
  // kWarpgroupWarps warps (one producer, the rest consumers of 64 rows each), operands copied by
  // the tensor copy engine through two tensor maps (GroupPlan::tensor_maps); warps_m and warps_n
  // are then unused. `warpgroup_reason` says why a plan for an sm_90a target keeps mma.sync.
  bool warpgroup = false;
  int warpgroups = 0;
  std::string warpgroup_reason;
  // A persistent wgmma kernel: `persistent` blocks (one per SM), each looping over tiles
  // blockIdx.x, blockIdx.x + gridDim.x, ..., so that the next tile's first stages load while a
  // tile is stored (device/wgmma.cuh, run_tiles); 0: one block per tile. Taken when the tiles
  // outnumber the SMs; a block-sparse K loop walks each tile's panel list on it.
  int64_t persistent = 0;
  // The ping-pong form of the persistent kernel (device/wgmma.cuh, WarpgroupPingpong): each
  // consumer warpgroup computes whole block_m x 128 tiles of its own, the two taking turns on the
  // tensor cores so that one's epilogue overlaps the other's multiplies. Needs block_n = 128 and
  // the persistent grid.
  bool pingpong = false;
  // Blocks of a thread-block cluster that share B on the persistent grid (1 or 2; the family
  // parameter `cluster_m`): the cluster's blocks compute consecutive m tiles of the same columns
  // and each copies its share of the stage's B into both blocks' shared memory (TMA multicast),
  // so the operand panels read through the L2 per tile are block_m + block_n / cluster_m rows.
  int cluster_m = 1;
  // The instructions the epilogue's nodes add per output to a plain store (contraction_plan.cpp's
  // estimate of the code the emitter writes): the wgmma kernel's few consumer warps run the
  // epilogue after each tile's multiplies, so a heavy one (a SwiGLU's exp and reciprocal) costs
  // time the cost model prices from this (the family parameter `epilogue_instructions`).
  int64_t epilogue_instructions = 0;
  // A block-sparse operand (the contraction's tile kind is block_sparse, tile_kind.h): operand
  // `sparse_operand` (0: A, 1: B, -1: none) is a weight whose zero block_k x block_n (B) or
  // block_m x block_k (A) tiles are skipped. The tile in panel q (its n tile for B, m tile for A)
  // walks the K tiles sparse_tiles[sparse_ptr[q] .. sparse_ptr[q + 1]), ascending; built from the
  // weight's values, so the kernel is specific to them. Runs on mma.sync or wgmma (cooperative,
  // persistent or one block a tile), K not split.
  int sparse_operand = -1;
  // An operand is a weight with a block-sparsity attribute (whatever the tile kind): the wgmma
  // family then also offers 128 x 64 tiles (two consumers of 64 x 64), whose 64-wide panels keep
  // the density of 64-column blocks, and a block-sparse K loop runs on the persistent grid.
  bool block_weight = false;
  double sparse_density = 1;
  std::vector<int> sparse_ptr, sparse_tiles;
  // A 2:4 sparse B (the contraction's tile kind is nm_sparse): the weight is read compressed --
  // its kept values and their indices, derived from its values when the kernel is loaded
  // (GroupPlan::derived, nm_compress.h, through `nm_view`) -- and multiplied on the sparse tensor
  // cores (device/mma.cuh's SparseBlockGemm, mma.sp): C^T = W^T X^T, mma's m along C's n.
  // Runs on mma.sync's pipeline, K steps of 64, K not split, one tile per block. nm_wgmma: where
  // the recorded plan is the wgmma kernel, on wgmma.mma_async.sp instead (device/wgmma.cuh's
  // SparseWarpgroupGemm: a producer warpgroup copying with the tensor copy engine, two consumer
  // warpgroups of 64 rows of W^T -- block_n 128 -- against block_m = 128, 192 or 256 rows of X,
  // wgmma's N: the recorded tile transposed); warpgroup is then false and warps_m x warps_n are
  // its 12 warps.
  bool nm_sparse = false;
  bool nm_wgmma = false;
  // nm_wgmma: blocks per thread-block cluster along n (2: neighbouring column tiles of the same
  // rows, sharing X's tile by multicast; 1 where the spec has no clusters or n is one tile).
  int cluster_n = 1;
  // f32 operands: the same cp.async pipeline and epilogue with fused multiply-adds on the CUDA
  // cores (device/mma.cuh's SimtBlockGemm; the family "simt"): lanes of kSimtLaneTile x
  // kSimtLaneTile outputs, warp tiles of 16 x 128, 32 x 64 or 64 x 32 (the fewest rows that
  // cover m; simt_lanes_m), K steps of 16, K split over a cluster as for mma.sync where the tiles
  // leave SMs idle, no sparse kinds; convolutions as the implicit GEMM (16-byte chunks of 4
  // channels, the same channel and stride conditions as the 16-bit one). k_slices: the block's
  // warps come in that many sets, each summing its share of every stage's K (SimtBlockGemm's
  // KSLICES), when the tiles alone leave the SMs' schedulers short of warps.
  bool simt = false;
  int k_slices = 1;
  // A product of a few rows (the family "gemv", device/gemv.cuh's Gemv): no tiles of m, no
  // shared-memory stages; B streams from device memory into registers, each lane requesting
  // gemv_unroll vectors of gemv_vec elements (16 bytes where B's rows allow) before it multiplies.
  // B stored K x N: a block's warps_m warps split its part of K row by row over 32 lanes x gemv_vec
  // columns (block_n); B stored N x K: each warp owns gemv_cols columns (block_n = warps_m x
  // gemv_cols), its lanes along k. block_m is m; block_k is one step of the main loop (the split's
  // unit); K split over a cluster (split_k) where the blocks alone keep too few bytes in flight.
  bool gemv = false;
  int gemv_cols = 1, gemv_unroll = 1, gemv_vec = 1;
  NmView nm_view;
  // nm_wgmma: the recorded wgmma parameters the kernel was chosen by (contraction_params reports
  // them: the schedule records the family's parameters, the 2:4 form is derived from them).
  std::map<std::string, int64_t> nm_recorded;

  bool flat_m() const { return !m_axes.empty(); }
  int threads(int warp) const { return warpgroup ? warpgroups * kWarpgroupWarps * warp : warps_m * warps_n * k_slices * warp; }
  int64_t tiles() const { return batch * tiles_m * tiles_n; }
  /// K tiles of the main loop: of the flattened k, or the box-tiled convolution's taps x chunks.
  int64_t k_tiles() const { return conv_box ? taps * k_chunks : (k + block_k - 1) / std::max(block_k, 1); }
  int64_t blocks() const { return persistent > 0 ? persistent : tiles() * split_k; }
  /// The simt kernel's lanes along m in a warp (SimtBlockGemm's LANES_M).
  int simt_lanes_m() const { return block_m / std::max(warps_m, 1) / kSimtLaneTile; }
};

/// The largest m the gemv family takes (device/gemv.cuh: a lane holds m x gemv_vec or m x gemv_cols
/// sums).
constexpr int64_t kGemvMaxRows = 8;

/// A plan for the tensor-core kernel, or why the group keeps the generic kernel.
struct ContractionMatch {
  std::optional<ContractionPlan> plan;
  std::string reason;  // set when plan is not
};

/// The plan's parameters as a KernelChoice of family "wgmma" or "mma" records them.
std::map<std::string, int64_t> contraction_params(const ContractionPlan& plan);

/// Every parameterization of the tensor-core families the contraction planned as `plan` can be
/// emitted with, as KernelChoices (the family and its parameters, none repeated): wgmma blocks
/// 128 x 256 and 128 x 128 at 3..6 stages where wgmma runs (and 128 x 192 where it pays:
/// contraction_plan.cpp, wgmma_mid_width_pays); mma.sync blocks 16..256 x 16..256
/// with K steps of 32 or 64, 3, 4 or 8 stages (an implicit GEMM 3 or 4), or K split in 2 or 4
/// parts over a cluster (4 or 8 stages). A group recording one of them (KernelChoice) is planned with it (plan_contraction's
/// step 7): the tuner's search space (policy/tune.h).
std::vector<KernelChoice> contraction_variants(const ContractionPlan& plan, const HwSpec& spec);

/// Checks the conditions of the file comment for `group` and plans the mma kernel. `generic` is
/// plan_group's plan of the same group (its roles say which nodes the generic kernel inlines).
/// With `warpgroups` false the plan stays on mma.sync where wgmma would apply (the mma family's
/// own default, which the policy prices against the wgmma variants: kernel_families.cpp).
/// With `few_rows` false a product of at most kGemvMaxRows rows keeps the tiled families (the
/// gemv family's alternative, kernel_families.cpp's variants).
ContractionMatch plan_contraction(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic,
                                  const HwSpec& spec, bool warpgroups = true, bool few_rows = true);

/// The GroupPlan the runtime launches for the mma kernel: `generic`'s nodes and parameters, with
/// the mma kernel's grid, block size and shared memory. Operand copies and C (unless it is the
/// sink) are inlined; only the sink writes device memory.
GroupPlan mma_group_plan(const GroupPlan& generic, const ContractionPlan& plan);

/// Input `slot` of contraction `c` (one reduction axis, spatial axes batch.., m, n) as the mma
/// path reads it: traced back through in-group copies to device memory (the copies passed are
/// appended to `via`), then viewed as a 2-D row-major matrix per batch point with 16-byte aligned
/// rows. `own` is m (A) or n (B) and `other` the axis it must not read; `which` names it in the
/// reason. An empty string on success, else why not. (The streamed attention planner's operands.)
std::string contraction_operand(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, NodeId c, int slot,
                                int own, int other, const std::vector<int>& batch_axes, const char* which, MmaOperand& out,
                                std::vector<NodeId>& via);

/// One-line text of an operand ("A = q (k contiguous, ld 128, batch strides 1x2)").
std::string print_mma_operand(const OpGraph& graph, const char* which, const MmaOperand& op);

/// One-line text of the plan, for the generated source's header and `--dump`.
std::string print_contraction_plan(const OpGraph& graph, const ContractionPlan& plan);

}  // namespace tessel::cuda
