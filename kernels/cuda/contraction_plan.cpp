// Recognizing contraction groups and planning their tensor-core kernel (see contraction_plan.h).
//
// plan_contraction:
//   1. the target: mma.sync m16n8k16 for the dtype, 32-lane warps;
//   2. the contraction C: one reducing node, sum of in_i * in_j over one axis, f16/bf16;
//   3. the operands: follow in-group copies back to device memory, composing the affine reads,
//      then the 2-D row-major view per batch point and its alignment;
//   4. the epilogue: every other node elementwise over C's domain, inlined, reading in-group
//      values at the same point;
//   5. the tiling: the schedule's block tile when the warp layout fits it, else a default sized
//      to the problem; the pipeline depth that fits shared memory.
#include "kernels/cuda/contraction_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <set>

#include "cost_model/analytic_model.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"

namespace tessel::cuda {

namespace {

// Facts of the instructions the mma path uses (device/mma.cuh), not of a chip.
constexpr int kMmaLanes = 32;          // mma.sync / ldmatrix fragments are defined over 32 lanes
constexpr MmaShape kMmaShape{16, 8, 16};
constexpr int kPadElems = 8;           // shared-memory row padding (device/mma.cuh)

// Software choices of the mma path (documented in kernels/cuda/README.md).
// Measured on an H100 (4096^3 f16): 128x256 and 256x128 blocks of 8 warps of 64x64 ran in 0.35 and
// 0.37 ms, 128x128 blocks of 4 warps (two blocks per SM) in 0.46 ms (their operand traffic from L2
// is a third higher).
constexpr int kDefaultBlockM = 128, kDefaultBlockN = 256;  // block tile when the schedule's is not taken
constexpr int kBlockK = 32;            // K step per pipeline stage
constexpr int kMaxBlockK = 64;         // the largest K step taken from a schedule
constexpr int kMaxStages = 4;          // deepest cp.async pipeline
// The f32 kernel on the CUDA cores (device/mma.cuh's SimtBlockGemm): a lane computes
// kSimtLaneTile x kSimtLaneTile outputs, a warp's lanes are 2, 4 or 8 along m (kSimtLanesM: warp
// tiles of 16 x 128, 32 x 64 or 64 x 32), blocks of 1 or 2 warp tiles along each axis, K steps of
// kSimtBlockK.
constexpr int kSimtMaxWarpsPerAxis = 2, kSimtBlockK = 16;
// The largest blocks a recorded plan or a tuner's variant may take: 2 x 4 warp tiles.
constexpr int kSimtMaxWarpsM = 2, kSimtMaxWarpsN = 4;
constexpr int kSimtLanesM[] = {2, 4, 8};
// Its k slices (SimtBlockGemm's KSLICES): where single-warp tiles leave a warp scheduler of an SM
// (cost_model's simt_issue_slots) without a warp, each stage's K is dealt out to 2 or 4 sets of
// the block's warps, kSimtSliceGroups groups of 4 k steps each per stage, when K gives every
// slice at least kSimtBlockK steps.
constexpr int kSimtSlices[] = {2, 4};
constexpr int kSimtSliceGroups = 2;
// Registers a lane of it needs at least: its 8 x 8 accumulators and 4 k steps of its 8 + 8
// operand values. Blocks whose threads would get fewer are not planned (measured: 2 x 4 warp
// tiles in 4 k slices, 1024 threads of 64 registers, ran 2.2-7.6x slower than the same tiles in
// one slice, 3.4-17x slower than the best form).
constexpr int64_t kSimtLaneRegisters = kSimtLaneTile * kSimtLaneTile + 4 * 2 * kSimtLaneTile;
constexpr int kSimtChunkFloats = 4;  // a 16-byte copy: whole reads (MmaOperand::align)
// The gemv family (device/gemv.cuh): blocks of kGemvWarps warps; where B is stored N x K a warp
// owns kGemvCols columns (A's loads serve each); each lane requests kGemvUnroll vectors of B (of
// each of its columns) before it multiplies. The forms a recorded plan or a tuner's variant may
// take: 4 or 8 warps, 1, 2 or 4 columns, 2, 4 or 8 vectors, K split in up to the cluster's blocks.
// A K split's parts walk at least kGemvMinSteps steps of the main loop each. Where the blocks keep
// too few bytes in flight, the planner splits K, then takes kGemvDeepUnroll vectors a lane, then
// kGemvWideWarps warps a block.
constexpr int kGemvWarps = 8, kGemvCols = 2, kGemvUnroll = 4, kGemvDeepUnroll = 8, kGemvWideWarps = 16;
constexpr int kGemvWarpChoices[] = {4, 8, 16}, kGemvColChoices[] = {1, 2, 4}, kGemvUnrollChoices[] = {2, 4, 8};
// The rows up to which a product takes the gemv family by default, by operand width. Measured on
// an H200 (experiments/gemv/runs/h200-2026-12-01, the op sweep's decode GEMMs): 16-bit products
// of 4 and 8 rows ran at 0.53-0.64x the best baseline on it against 0.69-0.88x on mma.sync's
// 16-row tiles, of one row at 0.96-1.09x against 0.50-0.98x; f32 products of 1 and 8 rows 2.4x
// and 2.0x faster than on the simt family's 16-row warp tiles.
constexpr int64_t kGemvDefaultRows16 = 1, kGemvDefaultRowsF32 = kGemvMaxRows;
constexpr int64_t kGemvMinSteps = 2;
constexpr int kVectorBytes = 16;  // the widest load of a lane (ld.global.v4.u32)
// How far a block_sparse kind's recorded density may be from the weight's (both are the same
// count ratio; a schedule's JSON keeps doubles to 17 digits).
constexpr double kDensityTolerance = 1e-9;
// Deepest cp.async pipeline of a plan whose K is split (split_k), and of any recorded plan: a
// skinny product streaming its weight needs bytes in flight, not a second block per SM (the
// cost model's Little's-law limit, cost_model/analytic_model.cpp, prices the depth).
constexpr int kMaxSplitStages = 8;
constexpr int kWarpTile = 64;          // largest warp tile edge (64 x 64: 128 f32 accumulators)
constexpr int kMinWarps = 4, kMaxWarps = 8;
constexpr int kRasterGroup = 8;        // block rows per rasterization group (Triton's GROUP_M)

// Software choices of the wgmma path: two consumer warpgroups (a 128-row block tile; 64-row blocks
// of one, wgmma_lone_consumer_pays, below); n 256, 192 or
// 128, whichever takes the least time in waves of tiles over the SMs; up to kWgMaxStages stages
// (contraction_plan.h has the instruction facts and the setmaxnreg split).
constexpr int kWgBlockNWide = 256, kWgBlockN = 128;  // the two wgmma n the spec must list
// A third width, where the spec lists m64n192k16: 1024 x 3072 (BERT's FFN at batch 8) is 128 tiles
// of 192, one wave on 132 SMs, where 192 tiles of 128 take two (2 x 128 columns of time per SM
// against 192) and 96 of 256 one of 256.
constexpr int kWgBlockNMid = 192;
// A fourth, for 64-row blocks only (one consumer, wgmma_lone_consumer_pays), where the spec lists
// m64n64k16: a GEMM of few tiles in the 64 x 64 tiles cuBLAS takes there.
constexpr int kWgBlockNNarrow = 64;
// 64-row blocks walk at most this many K tiles each (after a split). Measured on an H200
// (experiments/notebook/h200-2026-11-29g, one wave of blocks each): with 8 to 18 K tiles a block
// they ran 1.1-1.6x the 128-row plans they replaced (BERT's attention output at 512 tokens 1.45x,
// batch-1 BERT's QKV and FFN 1.31-1.49x); with 22 and 32 (LLaMA's MLP down and a 2048 x 2048
// projection at 128 tokens, against 128-row tiles split 4 ways) 0.72x and 0.94x: twice the operand
// panels for the same blocks, which the cost model does not price high enough. One gain is lost so
// (Stable Diffusion's 1280-channel 3x3 convolution at 8 x 8, 45 K tiles a block, 1.27x).
constexpr int64_t kWgLoneMaxKTiles = 20;
// A K split of 64-row blocks takes at most this share of the SMs. Its clusters of split_k blocks
// must all be resident at once, and the spec has no fact of how many clusters fit the chip's GPCs:
// on the H200, 64-row blocks split 4 ways ran 1.3-1.5x the 128-row plans at 64 and 96 blocks
// (16 and 24 clusters) and 0.76x at 128 (32 clusters; a 2048 x 2048 projection at 128 tokens),
// as if in two waves (experiments/notebook/h200-2026-11-29g).
constexpr double kWgLoneSplitShare = 0.75;
constexpr int kWgMaxStages = 6;
constexpr int kWgMinSplitTiles = 4;  // K tiles per part at least, when the wgmma kernel splits K
// Parts of a wgmma K split at most: 8 parts ran 1.1-2x slower than 4 on every GEMM measured
// (H100, 2026-11-27c, experiments/wgmma_variants).
constexpr int kWgMaxSplit = 4;
// Facts of the driver's tiled tensor maps (cuTensorMapEncodeTiled): at most five dimensions (the
// matrix's two and three batch axes), extents up to 2^32, strides below 2^40 bytes (of 16-bit
// elements here).
constexpr int kMaxMapBatchDims = 3;
constexpr int64_t kMaxMapExtent = int64_t{1} << 32, kMaxMapStrideElems = (int64_t{1} << 40) / 2;
// A box spans at most 256 elements along a dimension, stepping at most 8 apart (element strides).
constexpr int64_t kMaxBoxExtent = 256, kMaxElementStride = 8;

ContractionMatch fail(std::string reason) { return ContractionMatch{std::nullopt, std::move(reason)}; }

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int64_t ceil_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

bool in_group(const ScheduledGroup& group, NodeId n) {
  return n >= 0 && std::find(group.nodes.begin(), group.nodes.end(), n) != group.nodes.end();
}

bool is_plain_input(const Expr& e, int slot) { return e.op() == ExprOp::input && e.index() == slot; }

// The instructions the emitter's code for `e` issues per value (emitter.cpp's emit_expr and
// device/prelude.cuh), roughly: one per plain arithmetic, comparison or selection; a 16-bit
// expression's exp, sigmoid and erf are their approximations (ex2.approx, rcp.approx: 2, 4 and
// 12; the erf one where the expression adds it to 1, as a GELU does), f32 and f64 ones the
// accurate library functions (a division's fast path and check, an expf's range reduction; an
// rsqrt is a square root and a division). Leaves cost nothing: reads are counted by the caller.
// A subexpression shared in the expression's DAG is computed once (emit_expr's memo): `seen`.
int64_t expr_instructions(const Expr& e, bool half, std::set<const ExprNode*>& seen) {
  if (!seen.insert(e.get()).second) return 0;
  int64_t n = 0;
  for (const Expr& o : e.operands()) n += expr_instructions(o, half, seen);
  switch (e.op()) {
    case ExprOp::input: case ExprOp::constant: case ExprOp::axis_index: return n;
    case ExprOp::exp: return n + (half ? 2 : 10);
    case ExprOp::sigmoid: return n + (half ? 4 : 20);
    case ExprOp::erf: return n + (half ? 12 : 25);
    case ExprOp::sqrt: case ExprOp::log: case ExprOp::div: case ExprOp::reciprocal: return n + 10;
    case ExprOp::rsqrt: case ExprOp::tanh: case ExprOp::mod: case ExprOp::fmod: return n + 20;
    case ExprOp::pow: return n + 40;
    case ExprOp::sin: case ExprOp::cos: case ExprOp::tan: case ExprOp::asin: case ExprOp::acos: case ExprOp::atan:
    case ExprOp::sinh: case ExprOp::cosh: case ExprOp::asinh: case ExprOp::acosh: case ExprOp::atanh: return n + 25;
    default: return n + 1;
  }
}

/// An operand traced back to device memory: the tensor and its read over C's axes.
struct Traced {
  TensorId tensor = -1;
  AffineMap map;
  std::vector<NodeId> via;  // in-group copies passed through
  // Non-empty: `map` indexes `tensor`'s buffer viewed with this row-major shape -- the output of
  // an in-group Reshape of the whole tensor, whose elements lie in the same order.
  std::vector<int64_t> view;
};

/// Whether `node` copies its one input whole, in order, into a reshaped output: each domain point
/// reads the input at that point (an identity map over the input's own shape), so its output
/// holds the input's elements in the same row-major order.
bool is_reshape_of_whole_input(const TeNode& node) {
  if (node.num_reduction() != 0 || node.inputs().size() != 1) return false;
  const Access& acc = node.inputs()[0];
  if (acc.is_gather() || acc.type.shape != node.extents() || acc.map.num_results() != node.num_spatial()) return false;
  for (int r = 0; r < acc.map.num_results(); ++r) {
    const AffineExpr& e = acc.map.result(r);
    if (e.offset != 0) return false;
    for (int a = 0; a < node.num_axes(); ++a)
      if (e.coeffs[a] != (a == r ? 1 : 0)) return false;
  }
  return true;
}

/// Follows input `slot` of C back through in-group copy nodes (body `in0`, same dtype, read only
/// by the node we came from) to a tensor that lives in device memory. A copy that reshapes is
/// passed only where it is a Reshape of a whole tensor in device memory: the operand is that
/// tensor's buffer viewed with the Reshape's shape (Traced::view).
std::optional<Traced> trace_operand(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic,
                                    NodeId c, int slot, std::string& why) {
  Traced t;
  t.tensor = graph.node_inputs(c)[slot];
  t.map = graph.node(c).inputs()[slot].map;
  NodeId reader = c;
  for (NodeId p = graph.producer(t.tensor); in_group(group, p); p = graph.producer(t.tensor)) {
    const TeNode& node = graph.node(p);
    const int pos = generic.position(p);
    const std::vector<NodeId> readers = graph.consumers(t.tensor);
    if (generic.nodes[pos].reshaped && is_plain_input(node.body(), 0) && node.output().dtype == node.inputs()[0].type.dtype &&
        !generic.nodes[pos].writes_global && readers.size() == 1 && readers[0] == reader && is_reshape_of_whole_input(node) &&
        !in_group(group, graph.producer(graph.node_inputs(p)[0]))) {
      t.view = node.output().shape;
      t.via.push_back(p);
      t.tensor = graph.node_inputs(p)[0];
      break;
    }
    if (node.num_reduction() != 0 || node.inputs().size() != 1 || node.inputs()[0].is_gather() ||
        !is_plain_input(node.body(), 0) || node.output().dtype != node.inputs()[0].type.dtype ||
        generic.nodes[pos].reshaped || generic.nodes[pos].writes_global || readers.size() != 1 || readers[0] != reader) {
      why = cat("operand ", slot, " of '", graph.node(c).name(), "' is computed in the group by '", node.name(),
                "', which is not a plain copy read only by it");
      return std::nullopt;
    }
    const Access& acc = node.inputs()[0];
    for (int r = 0; r < acc.type.rank(); ++r)
      if (acc.map.result(r).min_over(node.extents()) < 0 || acc.map.result(r).max_over(node.extents()) >= acc.type.shape[r]) {
        why = cat("the copy '", node.name(), "' reads outside its input (padding)");
        return std::nullopt;
      }
    t.map = compose(acc.map, t.map);
    t.via.push_back(p);
    reader = p;
    t.tensor = graph.node_inputs(p)[0];
  }
  return t;
}

/// The 2-D view of a traced operand: `own` is m (for A) or n (for B), `other` the axis it must not
/// read. Empty reason on success.
std::string operand_view(const OpGraph& graph, const TeNode& c, const Traced& t, int own, int other, int k_axis,
                         const std::vector<int>& batch_axes, const char* which, MmaOperand& out) {
  const TensorInfo& info = graph.tensor(t.tensor);
  const std::vector<int64_t>& shape = t.view.empty() ? info.type.shape : t.view;
  const std::vector<int64_t> tstrides = row_major_strides(shape);
  std::vector<int64_t> stride(c.num_axes(), 0);
  std::vector<bool> read(c.num_axes(), false);
  int64_t offset = 0;
  for (int r = 0; r < t.map.num_results(); ++r) {
    const AffineExpr& row = t.map.result(r);
    int axis = -1;
    for (int a = 0; a < c.num_axes(); ++a) {
      // (A reduction axis of extent 1 other than k -- a 1 x 1 convolution's taps -- is always 0.)
      if (row.coeffs[a] == 0 || (a != k_axis && c.axes()[a].kind == AxisKind::reduction && c.axes()[a].extent == 1)) continue;
      if (row.coeffs[a] != 1 || axis >= 0) return cat(which, " ('", info.name, "') is not read through a permutation of axes");
      axis = a;
    }
    if (row.offset < 0 || row.max_over(c.extents()) >= shape[r])
      return cat(which, " ('", info.name, "') is read outside its bounds");
    offset += row.offset * tstrides[r];  // a fixed index (a slice, one of packed Q, K, V)
    if (axis < 0) continue;  // broadcast dimension (index 0) or a fixed index
    if (read[axis]) return cat(which, " ('", info.name, "') reads axis '", c.axes()[axis].name, "' twice");
    read[axis] = true;
    stride[axis] = tstrides[r];
  }
  const int64_t own_extent = c.axes()[own].extent, k_extent = c.axes()[k_axis].extent;
  if (read[other]) return cat(which, " ('", info.name, "') depends on both m and n");
  if (!read[k_axis] && k_extent > 1) return cat(which, " ('", info.name, "') does not depend on k");
  if (!read[own] && own_extent > 1) return cat(which, " ('", info.name, "') is broadcast along ", c.axes()[own].name);
  // Elements per read: the largest power of two up to a 16-byte chunk dividing every distance
  // between rows the view starts (MmaOperand::align).
  auto gran = [](int64_t s, int64_t extent) {
    int g = kChunkElems;
    while (extent > 1 && g > 1 && s % g != 0) g /= 2;
    return g;
  };
  int align = gran(offset, 2);
  for (int b : batch_axes) align = std::min(align, gran(stride[b], c.axes()[b].extent));
  out.tensor = t.tensor;
  out.offset = offset;
  for (int b : batch_axes) out.batch_strides.push_back(stride[b]);
  // k contiguous where it can be read whole chunks at a time, else whichever axis is contiguous.
  const bool k_rows = stride[k_axis] == 1 || k_extent == 1, own_rows = stride[own] == 1 || own_extent == 1;
  const int k_gran = std::min(align, gran(stride[own], own_extent)), own_gran = std::min(align, gran(stride[k_axis], k_extent));
  if (k_rows && (k_gran == kChunkElems || !own_rows || k_gran >= own_gran)) {
    out.k_contiguous = true;
    out.ld = std::max<int64_t>(stride[own], 1);
    out.align = k_gran;
    return "";
  }
  if (own_rows) {
    out.k_contiguous = false;
    out.ld = std::max<int64_t>(stride[k_axis], 1);
    out.align = own_gran;
    return "";
  }
  return cat(which, " ('", info.name, "') has neither k nor ", c.axes()[own].name, " contiguous (strides ", stride[k_axis], " and ",
             stride[own], ")");
}

bool reads_axis(const Traced& t, int axis) { return t.map.uses_axis(axis); }

/// The operands of a contraction over one reduction axis: batch axes, then m and n, each operand a
/// 2-D row-major view per batch point. An empty string on success, else the reason.
std::string plan_matmul(const OpGraph& graph, const TeNode& c, Traced t0, Traced t1, ContractionPlan& p) {
  const int ns = c.num_spatial();
  p.m_axis = ns - 2;
  p.n_axis = ns - 1;
  const int k_axis = ns;
  for (int a = 0; a < ns - 2; ++a) {
    p.batch_axes.push_back(a);
    p.batch_extents.push_back(c.axes()[a].extent);
    p.batch *= c.axes()[a].extent;
  }
  p.m = c.axes()[p.m_axis].extent;
  p.n = c.axes()[p.n_axis].extent;
  p.k = c.axes()[k_axis].extent;
  if (p.m >= (int64_t{1} << 31) || p.n >= (int64_t{1} << 31) || p.k >= (int64_t{1} << 31))
    return "an extent does not fit 32-bit tile indices";

  // Which operand is A (reads m), which B (reads n).
  if (reads_axis(t0, p.n_axis) && !reads_axis(t0, p.m_axis)) std::swap(t0, t1);
  if (std::string r = operand_view(graph, c, t0, p.m_axis, p.n_axis, k_axis, p.batch_axes, "A", p.a); !r.empty()) return r;
  if (std::string r = operand_view(graph, c, t1, p.n_axis, p.m_axis, k_axis, p.batch_axes, "B", p.b); !r.empty()) return r;
  for (const Traced* t : {&t0, &t1}) p.operand_nodes.insert(p.operand_nodes.end(), t->via.begin(), t->via.end());

  // Batch axes over which B is broadcast and A's rows simply continue (the projections of
  // [batch, seq, hidden] activations) fold into m: one (batch x m) x k x n product, m flattening
  // the batch axes and m row-major (the sink's order too), so its tiles span the batch.
  bool fold = p.batch > 1 && p.a.k_contiguous;
  int64_t next = p.m * p.a.ld;  // A's stride for the innermost batch axis if its rows continue
  for (int i = static_cast<int>(p.batch_axes.size()) - 1; fold && i >= 0; --i) {
    if (p.batch_extents[i] == 1) continue;
    fold = p.b.batch_strides[i] == 0 && p.a.batch_strides[i] == next;
    next *= p.batch_extents[i];
  }
  if (fold && p.m * p.batch < (int64_t{1} << 31)) {
    p.m_axes = p.batch_axes;
    p.m_axes.push_back(p.m_axis);
    p.m_extents = p.batch_extents;
    p.m_extents.push_back(p.m);
    p.m *= p.batch;
    p.batch = 1;
    p.batch_axes.clear();
    p.batch_extents.clear();
    p.a.batch_strides.clear();
    p.b.batch_strides.clear();
  }
  return "";
}

/// The implicit GEMM of a channels-last convolution (contraction_plan.h's file comment): fills
/// p's implicit fields, m, n, k and the operands; an empty string on success, else the reason.
std::string plan_implicit(const OpGraph& graph, const TeNode& c, const Traced& t0, const Traced& t1, ContractionPlan& p) {
  const int ns = c.num_spatial(), na = c.num_axes();
  const std::vector<int64_t> ext = c.extents();
  const int n_axis = ns - 1;
  const std::string n_name = c.axes()[n_axis].name;
  // B (the weight) reads one spatial axis, the output channel, which must be the last (channels
  // last); A reads the others.
  auto spatial_reads = [&](const Traced& t) {
    std::vector<int> axes;
    for (int a = 0; a < ns; ++a)
      if (ext[a] > 1 && reads_axis(t, a)) axes.push_back(a);
    return axes;
  };
  if (!t0.view.empty() || !t1.view.empty()) return cat("an operand of '", c.name(), "' is read through a Reshape (the gather reads whole tensors)");
  const Traced* ta = &t0;
  const Traced* tb = &t1;
  if (spatial_reads(t0).size() == 1 && spatial_reads(t1).size() != 1) std::swap(ta, tb);
  if (const std::vector<int> b_axes = spatial_reads(*tb); b_axes.size() == 1 && b_axes[0] != n_axis)
    return cat("'", c.name(), "' is not channels-last: its output channel axis '", c.axes()[b_axes[0]].name,
               "' is not its last axis (NCHW convolutions keep the generic kernel)");
  if (!reads_axis(*tb, n_axis))
    return cat("'", c.name(), "' is not channels-last: neither operand reads its last axis '", n_name, "' alone");
  if (reads_axis(*ta, n_axis)) return cat("both operands of '", c.name(), "' depend on its last axis '", n_name, "'");
  // A grouped convolution: the other spatial axes B (the weight) reads -- the group g -- are batch
  // axes, read by both operands: per group, an implicit GEMM of the group's channels, each
  // operand's view offset by the group (its batch stride).
  for (const int a : spatial_reads(*tb)) {
    if (a == n_axis) continue;
    if (!reads_axis(*ta, a))
      return cat("B ('", graph.tensor(tb->tensor).name, "') depends on the spatial axis '", c.axes()[a].name, "' and A does not");
    p.batch_axes.push_back(a);
    p.batch_extents.push_back(ext[a]);
    p.batch *= ext[a];
  }
  auto batch_index = [&](int a) {
    return static_cast<int>(std::find(p.batch_axes.begin(), p.batch_axes.end(), a) - p.batch_axes.begin());
  };
  auto is_batch = [&](int a) { return batch_index(a) < static_cast<int>(p.batch_axes.size()); };
  p.a.batch_strides.assign(p.batch_axes.size(), 0);
  p.b.batch_strides.assign(p.batch_axes.size(), 0);

  // B: a permutation of the last spatial axis and the reduction axes.
  const TensorInfo& bi = graph.tensor(tb->tensor);
  const std::vector<int64_t> bts = row_major_strides(bi.type.shape);
  std::vector<int64_t> bstride(na, 0);
  for (int r = 0; r < tb->map.num_results(); ++r) {
    const AffineExpr& row = tb->map.result(r);
    int axis = -1;
    for (int a = 0; a < na; ++a) {
      if (row.coeffs[a] == 0 || ext[a] == 1) continue;
      if (is_batch(a)) {  // the group's offset, e.g. Mg g + mg along the output channels
        if (row.coeffs[a] < 0) return cat("B ('", bi.name, "') is read backwards along '", c.axes()[a].name, "'");
        p.b.batch_strides[batch_index(a)] += row.coeffs[a] * bts[r];
        continue;
      }
      if (row.coeffs[a] != 1 || axis >= 0 || row.offset != 0)
        return cat("B ('", bi.name, "') is not read through a permutation of axes");
      axis = a;
    }
    if (axis >= 0 && p.batch > 1 && (row.min_over(ext) < 0 || row.max_over(ext) >= bi.type.shape[r]))
      return cat("B ('", bi.name, "') is read past its end");
    if (axis < 0 && row.offset != 0) return cat("B ('", bi.name, "') is read at the fixed index ", row.offset, " of dimension ", r);
    if (axis < 0) continue;
    if (axis < ns && axis != n_axis)
      return cat("B ('", bi.name, "') depends on the spatial axis '", c.axes()[axis].name, "' (a grouped convolution?)");
    if (ext[axis] > bi.type.shape[r]) return cat("B ('", bi.name, "') is read past its end");
    bstride[axis] = bts[r];
  }
  // k: the reduction axes of extent > 1 (the others are always 0), by decreasing stride in B.
  for (int a = ns; a < na; ++a) {
    if (ext[a] == 0) return cat("'", c.name(), "' sums over the empty axis '", c.axes()[a].name, "'");
    if (ext[a] > 1) p.k_axes.push_back(a);
  }
  if (p.k_axes.empty()) return cat("'", c.name(), "' sums over a single element");
  std::stable_sort(p.k_axes.begin(), p.k_axes.end(), [&](int x, int y) { return bstride[x] > bstride[y]; });
  for (int a : p.k_axes) {
    p.k_extents.push_back(ext[a]);
    if (bstride[a] == 0) return cat("B ('", bi.name, "') does not depend on the reduction axis '", c.axes()[a].name, "'");
  }
  const int kin = p.k_axes.back();
  const int64_t inner = bstride[kin];
  if (ext[kin] % kChunkElems != 0)
    return cat("'", c.name(), "' has ", ext[kin], " channels along '", c.axes()[kin].name, "', not a multiple of ",
               kChunkElems, " (16-byte chunks of one pixel)");
  for (size_t i = 0; i + 1 < p.k_axes.size(); ++i)
    if (bstride[p.k_axes[i]] != bstride[p.k_axes[i + 1]] * ext[p.k_axes[i + 1]])
      return cat("B ('", bi.name, "') does not store the reduction axes as one row-major k");
  const int64_t nstride = bstride[n_axis];
  if (inner == 1 && (ext[n_axis] == 1 || nstride % kChunkElems == 0)) {
    p.b.k_contiguous = true;
    p.b.ld = std::max<int64_t>(nstride, 1);
  } else if ((nstride == 1 || ext[n_axis] == 1) && inner % kChunkElems == 0) {
    p.b.k_contiguous = false;
    p.b.ld = inner;
  } else {
    return cat("B ('", bi.name, "') has neither k nor '", n_name, "' contiguous with 16-byte aligned rows");
  }
  p.b.tensor = tb->tensor;

  // A: every dimension one output axis and one reduction axis at most, k's innermost axis alone
  // on the contiguous dimension, whole 16-byte chunks of it.
  const TensorInfo& ai = graph.tensor(ta->tensor);
  const std::vector<int64_t> ats = row_major_strides(ai.type.shape);
  bool inner_found = false;
  for (int r = 0; r < ta->map.num_results(); ++r) {
    const AffineExpr& row = ta->map.result(r);
    GatherDim g;
    g.offset = row.offset;
    g.extent = ai.type.shape[r];
    g.stride = ats[r];
    bool grouped = false;
    for (int a = 0; a < na; ++a) {
      if (row.coeffs[a] == 0 || ext[a] == 1) continue;
      if (is_batch(a)) {  // the group's channels, e.g. Cg g + c: the view's offset
        if (row.coeffs[a] < 0) return cat("A ('", ai.name, "') is read backwards along '", c.axes()[a].name, "'");
        p.a.batch_strides[batch_index(a)] += row.coeffs[a] * ats[r];
        grouped = true;
        continue;
      }
      if (a < ns) {
        if (g.m_axis >= 0) return cat("A ('", ai.name, "') dimension ", r, " mixes two output axes");
        g.m_axis = a;
        g.m_coeff = row.coeffs[a];
      } else {
        if (g.k_axis >= 0) return cat("A ('", ai.name, "') dimension ", r, " mixes two reduction axes");
        g.k_axis = a;
        g.k_coeff = row.coeffs[a];
      }
    }
    g.check = row.min_over(ext) < 0 || row.max_over(ext) >= g.extent;
    // (A dimension offset by the group is bounds-checked without it: it must stay inside.)
    if (grouped && g.check) return cat("A ('", ai.name, "') dimension ", r, " reads past its edge along a group");
    if (g.k_axis == kin) {
      if (g.stride != 1 || g.k_coeff != 1 || g.m_axis >= 0 || g.offset != 0 || g.check)
        return cat("A ('", ai.name, "') is not channels-last: the innermost reduction axis '", c.axes()[kin].name,
                   "' is not read alone along its contiguous dimension (NCHW convolutions keep the generic kernel)");
      inner_found = true;
    } else if (g.stride % kChunkElems != 0 && (g.m_axis >= 0 || g.k_axis >= 0 || g.offset != 0)) {
      return cat("A ('", ai.name, "') dimension ", r, " has stride ", g.stride, ", not a multiple of ", kChunkElems,
                 " elements (16-byte aligned chunks)");
    }
    p.a_gather.push_back(g);
  }
  if (!inner_found)
    return cat("A ('", ai.name, "') does not read the innermost reduction axis '", c.axes()[kin].name, "'");
  p.a.tensor = ta->tensor;
  p.a.k_contiguous = true;
  p.a.ld = 0;

  for (size_t b = 0; b < p.batch_axes.size(); ++b)
    for (const MmaOperand* o : {&p.a, &p.b})
      if (o->batch_strides[b] % kChunkElems != 0)
        return cat(o == &p.a ? "A" : "B", " has group stride ", o->batch_strides[b], " along '", c.axes()[p.batch_axes[b]].name,
                   "', not a multiple of ", kChunkElems, " elements (16-byte aligned chunks)");
  p.implicit = true;
  p.n_axis = n_axis;
  p.m = p.k = 1;
  for (int a = 0; a < n_axis; ++a) {
    if (is_batch(a)) continue;
    p.m_axis = a;
    p.m_axes.push_back(a);
    p.m_extents.push_back(ext[a]);
    p.m *= ext[a];
  }
  if (p.m_axes.empty()) return cat("'", c.name(), "' has no output axis besides its groups and '", n_name, "'");
  for (int64_t e : p.k_extents) p.k *= e;
  p.n = ext[n_axis];
  // A group's output channels must fill an n-fragment pair: with 8 (ResNeXt-50's second stage)
  // half of every tile's products are zeros, and the implicit GEMM lost to the vector kernel's
  // grouped window (an H200, 2026-11-28: 0.080 ms against torch.compile's 0.038).
  if (p.batch > 1 && p.n < 2 * kMmaShape.n)
    return cat("'", c.name(), "' has ", p.n, " output channels per group, fewer than an n-fragment pair (", 2 * kMmaShape.n, ")");
  for (const Traced* t : {ta, tb}) p.operand_nodes.insert(p.operand_nodes.end(), t->via.begin(), t->via.end());
  return "";
}

/// Warps for a block tile: warp tiles up to kWarpTile square, halved until there are kMinWarps;
/// 0 when the tile cannot be split into kMinWarps..kMaxWarps whole warp tiles.
bool warp_layout(int bm, int bn, int& warps_m, int& warps_n) {
  int wm = std::min(bm, kWarpTile), wn = std::min(bn, kWarpTile);
  while ((bm / wm) * (bn / wn) < kMinWarps) {
    if (wn >= wm && wn > 2 * kMmaShape.n) wn /= 2;      // an n-fragment pair (ldmatrix.x4) is the least
    else if (wm > kMmaShape.m) wm /= 2;
    else break;
  }
  warps_m = bm / wm;
  warps_n = bn / wn;
  const int warps = warps_m * warps_n;
  return wm % kMmaShape.m == 0 && wn % (2 * kMmaShape.n) == 0 && warps >= 1 && warps <= kMaxWarps;
}

}  // namespace

bool wgmma_listed(const HwSpec& spec, DType dt, int n) {
  auto it = spec.compute.tensor_core_shapes.find(dt);
  if (it == spec.compute.tensor_core_shapes.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [&](const MmaShape& s) { return s.m == kWgInstM && s.n == n && s.k == kMmaShape.k; });
}

std::string warpgroup_block(const HwSpec& spec, int& threads, int consumers) {
  TESSEL_ASSERT(consumers == 1 || consumers == kWgConsumers, "a wgmma block has 1 or ", kWgConsumers, " consumers, not ", consumers);
  threads = (consumers + 1) * kWarpgroupWarps * spec.compute.simd_width;
  if (threads > spec.limits.max_threads_per_block) return "too many threads per block";
  // (A block of one consumer moves no registers.)
  if (consumers > 1 && spec.limits.registers_per_sm < (kWgProducerRegs + consumers * kWgConsumerRegs) * threads / (consumers + 1))
    return "too few registers per SM for the warpgroups' setmaxnreg budget";
  return "";
}

namespace {

/// The box-tiled form of implicit GEMM `p` on the wgmma kernel (contraction_plan.h's file
/// comment): the output points per tile along each of p.m_axes (`box`, product `rows`) with the
/// fewest tiles (`tiles_m`); returns why the convolution cannot be read in boxes, or "".
std::string plan_conv_box(const ContractionPlan& p, int64_t rows, std::vector<int64_t>& box, int64_t& tiles_m) {
  const int dims = static_cast<int>(p.a_gather.size());
  if (dims < 2 || dims > 2 + kMaxMapBatchDims)
    return cat("the input has ", dims, " dimensions (a tensor map of it takes 2 to ", 2 + kMaxMapBatchDims, ")");
  if (p.m_axes.size() > 4) return cat(p.m_axes.size(), " output axes before the channel (a tile records at most 4)");
  const GatherDim& channels = p.a_gather.back();
  if (channels.k_axis != p.k_axes.back() || channels.stride != 1 || channels.m_axis >= 0)
    return "the input's channels are not its innermost dimension";
  // Each output axis of extent > 1 is read by one input dimension, in the output's order, at most
  // kMaxElementStride points apart.
  std::vector<int64_t> coeff(p.m_axes.size(), 1);
  std::vector<int> readers(p.m_axes.size(), 0);
  int last = -1;
  for (int d = 0; d + 1 < dims; ++d) {
    const GatherDim& g = p.a_gather[d];
    if (g.stride % kChunkElems != 0 || g.stride >= kMaxMapStrideElems || g.extent > kMaxMapExtent)
      return cat("input dimension ", d, " (extent ", g.extent, ", stride ", g.stride, ") is beyond a tensor map's limits");
    if (g.m_axis < 0) continue;
    const int i = static_cast<int>(std::find(p.m_axes.begin(), p.m_axes.end(), g.m_axis) - p.m_axes.begin());
    if (i >= static_cast<int>(p.m_axes.size()) || i <= last) return "the input's dimensions read the output axes out of order";
    if (g.m_coeff < 1 || g.m_coeff > kMaxElementStride)
      return cat("input dimension ", d, " steps ", g.m_coeff, " points per output point (a tensor map's element stride is 1..",
                 kMaxElementStride, ")");
    last = i;
    coeff[i] = g.m_coeff;
    ++readers[i];
  }
  std::vector<size_t> axes;  // the output axes the box spans
  for (size_t i = 0; i < p.m_axes.size(); ++i)
    if (p.m_extents[i] > 1) {
      if (readers[i] != 1) return cat("output axis ", p.m_axes[i], " is not read by one input dimension");
      axes.push_back(i);
    }
  // Powers of two with product `rows`: the fewest tiles, then the widest innermost extents.
  std::vector<int64_t> cur(p.m_axes.size(), 1);
  box.clear();
  tiles_m = -1;
  auto pick = [&](auto&& self, size_t j, int64_t left) -> void {
    if (j == axes.size()) {
      if (left != 1) return;
      int64_t tiles = 1;
      for (size_t i : axes) tiles *= ceil_div(p.m_extents[i], cur[i]);
      if (tiles_m < 0 || tiles < tiles_m ||
          (tiles == tiles_m && std::lexicographical_compare(box.rbegin(), box.rend(), cur.rbegin(), cur.rend())))
        box = cur, tiles_m = tiles;
      return;
    }
    const size_t i = axes[j];
    for (int64_t t = 1; t <= left && t * coeff[i] <= kMaxBoxExtent; t *= 2) {
      cur[i] = t;
      self(self, j + 1, left / t);
    }
    cur[i] = 1;
  };
  pick(pick, 0, rows);
  if (tiles_m < 0) return cat("no box of ", rows, " output points fits a tensor map's box (", kMaxBoxExtent, " elements a dimension)");
  return "";
}

/// The wgmma block widths the spec allows for `dt` in blocks of `block_m` rows, widest first: 256
/// and 128 (use_warpgroups requires both), 192 where the spec lists m64n192k16, and 64 where it
/// lists m64n64k16 for 64-row blocks, and for 128-row ones of a product reading a block-sparse
/// weight (ContractionPlan::block_weight).
std::vector<int> wgmma_block_widths(const HwSpec& spec, DType dt, int64_t block_m, bool block_weight = false) {
  std::vector<int> out{kWgBlockNWide};
  if (wgmma_listed(spec, dt, kWgBlockNMid)) out.push_back(kWgBlockNMid);
  out.push_back(kWgBlockN);
  if ((block_m == kWgInstM || block_weight) && wgmma_listed(spec, dt, kWgBlockNNarrow)) out.push_back(kWgBlockNNarrow);
  return out;
}

/// Whether 64-row wgmma blocks (one consumer) are worth offering for `p`: where tiles of 128 x 128,
/// the smallest of the two-consumer blocks, are fewer than the SMs, so that some SMs idle (BERT's
/// attention output at 512 tokens: 24 tiles on 132 SMs; cuBLAS runs 96 of 64 x 64 there).
bool wgmma_lone_consumer_pays(const ContractionPlan& p, const HwSpec& spec) {
  return p.batch * ceil_div(p.m, int64_t{kWgConsumers} * kWgInstM) * ceil_div(p.n, kWgBlockN) < spec.compute.units;
}

/// How many blocks of wgmma plan `p` an SM holds at once: two of one consumer up to
/// kWgPairedMaxBlockN wide (launched for two per SM) where two fit its shared memory, each with the
/// driver's reservation (the spec's per-SM less its per-block shared memory); else one.
int64_t wgmma_blocks_per_sm(const ContractionPlan& p, const HwSpec& spec) {
  if (!p.warpgroup || p.pingpong || p.block_m != kWgInstM || p.block_n > kWgPairedMaxBlockN) return 1;
  const int64_t reserved = std::max<int64_t>(spec.limits.smem_per_sm_bytes - spec.limits.smem_per_block_bytes, 0);
  return std::clamp<int64_t>(spec.limits.smem_per_sm_bytes / std::max<int64_t>(p.smem_bytes + reserved, 1), 1, kWgPairedBlocks);
}

/// Whether 192-wide wgmma tiles are worth offering for `p`: where the spec lists m64n192k16 and
/// their tiles take strictly less time in waves over the SMs than 128- and 256-wide ones (a wave
/// counting as its tiles' width). Measured on an H200 (experiments/notebook/h200-2026-11-29f, 76
/// contractions A/B): where 192 takes fewer waves it ran 1.07-1.57x faster (BERT's FFN at 1024
/// tokens 1.31x); where the waves tie, or K is split over a cluster, it ran 0.59-1.20x (GPT-2 XL's
/// QKV at 2048 tokens 0.91x, LLaMA-70B's MLP down 0.90x, a K split 4 ways 0.59x), which the cost
/// model does not rank reliably; so those are not offered (nor split: the caller's rule).
bool wgmma_mid_width_pays(const ContractionPlan& p, const HwSpec& spec) {
  if (!wgmma_listed(spec, p.dtype, kWgBlockNMid)) return false;
  const int64_t rows = p.batch * p.tiles_m;
  auto waves = [&](int64_t bn) { return ceil_div(rows * ceil_div(p.n, bn), spec.compute.units) * bn; };
  return waves(kWgBlockNMid) < std::min(waves(kWgBlockN), waves(kWgBlockNWide));
}

/// Moves plan `p` (planned for mma.sync) to the wgmma kernel when the target and the problem
/// allow it (contraction_plan.h's file comment); returns why not, or "" when it did.
std::string use_warpgroups(ContractionPlan& p, const HwSpec& spec, int schedule_raster) {
  if (!spec.target.has_gpu_feature("wgmma") || !spec.target.has_gpu_feature("tma"))
    return cat("spec '", spec.name, "' lists no wgmma and TMA (target.gpu_features)");
  if (!wgmma_listed(spec, p.dtype, kWgBlockNWide) || !wgmma_listed(spec, p.dtype, kWgBlockN))
    return cat("the spec lists no wgmma shapes m64n", kWgBlockNWide, "k16 and m64n", kWgBlockN, "k16 for ", dtype_name(p.dtype));
  if (p.implicit && p.batch > 1) return "a grouped convolution's implicit GEMM (one per group) runs on mma.sync";
  const int64_t bm = kWgConsumers * kWgInstM;
  std::vector<int64_t> box;
  int64_t tiles_m = ceil_div(p.m, bm);
  if (p.implicit)
    if (std::string why = plan_conv_box(p, bm, box, tiles_m); !why.empty()) return "an implicit GEMM read in boxes: " + why;
  // A batched product: each operand's tensor map takes the batch axes it is not broadcast over as
  // outer dimensions (a map has at most five; extents and strides within its limits).
  for (const MmaOperand* o : {&p.a, &p.b}) {
    int dims = 0;
    for (size_t b = 0; b < p.batch_axes.size(); ++b)
      if (o->batch_strides[b] != 0) {
        ++dims;
        if (p.batch_extents[b] > kMaxMapExtent || o->batch_strides[b] >= kMaxMapStrideElems)
          return cat("batch axis ", p.batch_axes[b], " (extent ", p.batch_extents[b], ", stride ", o->batch_strides[b],
                     ") is beyond a tensor map's limits");
      }
    if (dims > kMaxMapBatchDims)
      return cat(o == &p.a ? "A" : "B", " has ", dims, " batch axes with a stride (a tensor map takes ", kMaxMapBatchDims, ")");
  }
  if (!p.a.k_contiguous) return "A is stored K x M";
  if (p.m < bm || p.n < kWgBlockN) return cat("M or N is below ", bm, " (most of a 64-row wgmma tile would be padding)");
  for (const MmaOperand* o : {&p.a, &p.b}) {
    if (p.implicit && o == &p.a) continue;  // (read in boxes: plan_conv_box checked its dimensions)
    const int64_t cols = o->k_contiguous ? (p.implicit ? p.k_extents.back() : p.k) : (o == &p.a ? p.m : p.n);
    if (o->ld % kChunkElems != 0 || o->ld < cols) return cat("a tensor map needs rows 16-byte aligned, not ", o->ld, " elements apart");
    if (o->align < kChunkElems)
      return cat(o == &p.a ? "A" : "B", "'s batch strides or start are not multiples of 16 bytes (a tensor map's)");
  }
  int threads = 0;
  if (std::string no = warpgroup_block(spec, threads); !no.empty()) return no;
  // The block width whose tiles take the least time in waves over the SMs, a wave of tiles counting
  // as their width (ties: the wider of 256 and 128, fewer loads of A per product); 192 only where
  // it takes strictly less and K is not split (wgmma_mid_width_pays). 1576 x 3072 (ViT-B at batch
  // 8): 156 tiles of 256 are 2 waves on 132 SMs (cost 512), 208 of 192 are 2 (384), 312 of 128 are
  // 3 (384).
  auto waves = [&](int64_t bn) { return ceil_div(p.batch * tiles_m * ceil_div(p.n, bn), spec.compute.units) * bn; };
  const int wide_or_narrow = waves(kWgBlockN) < waves(kWgBlockNWide) ? kWgBlockN : kWgBlockNWide;
  const bool mid = wgmma_listed(spec, p.dtype, kWgBlockNMid) && waves(kWgBlockNMid) < waves(wide_or_narrow);  // (wgmma_mid_width_pays)
  auto plan_with = [&](int bn) -> std::string {
    auto smem = [&](int stages) { return wgmma_smem_bytes(bm, bn, stages); };
    int stages = kWgMaxStages;
    while (stages >= 2 && smem(stages) > spec.limits.smem_per_block_bytes) --stages;
    if (stages < 2) return "two pipeline stages do not fit in shared memory";
    p.warpgroup = true;
    p.warpgroups = kWgConsumers + 1;
    p.block_m = static_cast<int>(bm);
    p.block_n = bn;
    p.block_k = kWgRowElems;
    p.stages = stages;
    p.tile_from_schedule = false;
    p.tiles_m = tiles_m;
    p.tiles_n = ceil_div(p.n, bn);
    if (p.implicit) {
      p.conv_box = true;
      p.box_tiles = box;
      p.k_chunks = ceil_div(p.k_extents.back(), kWgRowElems);
      p.taps = p.k / p.k_extents.back();
    }
    p.raster_group = static_cast<int>(std::min<int64_t>(p.tiles_m, schedule_raster > 1 ? schedule_raster : kRasterGroup));
    p.smem_bytes = smem(stages);
    p.persistent = p.tiles() > spec.compute.units ? spec.compute.units : 0;
    // Fewer tiles than SMs and a long K: K split over a cluster, as the mma path does (the partial
    // sums park in the stages' memory, device/wgmma.cuh's run).
    p.split_k = std::min(reduction_split(p.tiles(), p.k_tiles(), kWgMinSplitTiles, spec), kWgMaxSplit);
    return "";
  };
  // (A split comes with fewer tiles than half the SMs, where 192's waves do not win over 128's;
  // the check keeps the rule should the planner's split rule change.)
  const ContractionPlan before = p;
  if (mid) {
    if (std::string why = plan_with(kWgBlockNMid); why.empty() && p.split_k == 1) return "";
    p = before;
  }
  return plan_with(wide_or_narrow);
}

int64_t stage_bytes(const ContractionPlan& p) {
  // Rows of block_k (k contiguous) or block_m / block_n elements, each padded by kPadElems 16-bit
  // elements (device/mma.cuh: BlockGemm, and SimtBlockGemm's f32 rows seen as 16-bit pairs).
  const int64_t e = dtype_bytes(p.dtype);
  const int64_t a = p.a.k_contiguous ? int64_t{p.block_m} * (p.block_k * e + kPadElems * 2) : int64_t{p.block_k} * (p.block_m * e + kPadElems * 2);
  const int64_t b = p.b.k_contiguous ? int64_t{p.block_n} * (p.block_k * e + kPadElems * 2) : int64_t{p.block_k} * (p.block_n * e + kPadElems * 2);
  return a + b;
}

/// Splits the K loop of an mma.sync plan over a cluster when its tiles leave SMs idle
/// (contraction_plan.h's file comment); returns why not, or "" when it did. `budget`: the shared
/// memory the pipeline may take (plan_contraction's step 5).
///
/// A split plan streams long parts of K through few blocks, one or two per SM: it is bound by
/// the latency of its copies, not by the tensor cores. It takes the longest K step
/// (kMaxBlockK) whenever K splits with it, and a pipeline up to kMaxSplitStages
/// deep within the budget and the part's length. (H100, ncu, M = 16, K = N = 4096 in 2 parts,
/// L2 warm: K step 32 through 4 stages in 4 parts 15.5 us; step 32 through 6 / 8 / 12 stages in
/// 2 parts 14.0 / 13.7 / 13.8 us; step 64 through 6 / 8 stages 13.0 / 13.1 us.)
// Step 8 of plan_contraction: the K tiles each panel of a block-sparse operand walks (see
// ContractionPlan::sparse_*).
std::string plan_sparse(const OpGraph& graph, NodeId cid, const BlockSparseProps& props, ContractionPlan& p) {
  const TeNode& c = graph.node(cid);
  if (std::string why = check_block_sparse(c, props); !why.empty()) return why;
  if (p.implicit) return "a block-sparse convolution (implicit GEMM) is not supported";
  if (p.split_k > 1) return "a block-sparse K loop walks the whole K (the recorded plan splits it)";
  const TensorId t = graph.node_inputs(cid)[props.input];
  const bool is_a = t == p.a.tensor, is_b = t == p.b.tensor;
  if (!is_a && !is_b) return cat("the block-sparse input '", graph.tensor(t).name, "' is read through an in-group copy");
  const TensorInfo& info = graph.tensor(t);
  if (info.kind != TensorKind::weight || !info.sparsity)
    return cat("the block-sparse input '", info.name, "' is not a weight with a sparsity attribute: its zero blocks are unknown at compile time");
  const MmaOperand& o = is_a ? p.a : p.b;
  if (is_a && p.flat_m()) return "a block-sparse A with batch axes folded into m is not supported";
  for (int64_t s : o.batch_strides)
    if (s != 0) return cat("the block-sparse weight '", info.name, "' differs per batch point");
  const std::vector<int64_t>& shape = info.type.shape;
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (o.offset != 0 || o.ld != cols || info.type.num_elements() != rows * cols)
    return cat("the block-sparse weight '", info.name, "' is not read as its own matrix");
  // The kernel's tile of the weight: its K step along k, the block's m or n along the other.
  const int64_t own = is_a ? p.block_m : p.block_n;
  const int64_t tile_rows = o.k_contiguous ? own : p.block_k, tile_cols = o.k_contiguous ? p.block_k : own;
  if (props.block_m != tile_rows || props.block_n != tile_cols)
    return cat("block_sparse blocks ", props.block_m, "x", props.block_n, " of '", info.name, "' are not the kernel's ", tile_rows, "x",
               tile_cols, " tiles of it");
  const std::shared_ptr<const NonzeroMap> map = graph.nonzero_map(t);
  const std::vector<uint8_t> nz = map->tiles(tile_rows, tile_cols);
  const int64_t tr = ceil_div(rows, tile_rows), tc = ceil_div(cols, tile_cols);
  const int64_t panels = o.k_contiguous ? tr : tc, ktiles = o.k_contiguous ? tc : tr;
  if (panels != (is_a ? p.tiles_m : p.tiles_n) || ktiles != ceil_div(p.k, p.block_k))
    return cat("the block-sparse weight '", info.name, "' does not match the kernel's tiles");
  // The block-sparse K loop runs one tile per block, or on the wgmma kernel's persistent grid,
  // cooperative (not ping-pong) and with no cluster sharing B.
  if (p.warpgroup && (p.pingpong || p.cluster_m > 1))
    return cat("the block-sparse K loop runs on the cooperative wgmma kernel, not ", p.pingpong ? "ping-pong" : "a cluster sharing B");
  if (!p.warpgroup) p.persistent = 0;
  p.sparse_operand = is_a ? 0 : 1;
  p.sparse_ptr.assign(1, 0);
  p.sparse_tiles.clear();
  for (int64_t q = 0; q < panels; ++q) {
    for (int64_t kt = 0; kt < ktiles; ++kt)
      if (nz[o.k_contiguous ? q * tc + kt : kt * tc + q]) p.sparse_tiles.push_back(static_cast<int>(kt));
    p.sparse_ptr.push_back(static_cast<int>(p.sparse_tiles.size()));
  }
  p.sparse_density = panels * ktiles > 0 ? static_cast<double>(p.sparse_tiles.size()) / static_cast<double>(panels * ktiles) : 1.0;
  if (std::abs(p.sparse_density - props.density) > kDensityTolerance)
    return cat("block_sparse density ", props.density, " of '", info.name, "' is not its weight's ", p.sparse_density, " at ", tile_rows,
               "x", tile_cols, " tiles");
  return "";
}

// Shared memory of one stage of the 2:4 kernel (device/mma.cuh's SparseBlockGemm::kStageBytes):
// X's tile, W's compressed tile (half the K step) and its metadata (32 16-bit elements per 16
// rows of W^T and 32 of k), each row padded.
constexpr int kSpInstK = 32, kSpMetaElems = 32;
int64_t nm_stage_bytes(const ContractionPlan& p) {
  const int64_t x = p.a.k_contiguous ? int64_t{p.block_m} * (p.block_k + kPadElems) : int64_t{p.block_k} * (p.block_m + kPadElems);
  const int64_t w = int64_t{p.block_n} * (p.block_k / 2 + kPadElems);
  const int64_t e = int64_t{p.block_n} / kMmaShape.m * (p.block_k / kSpInstK * kSpMetaElems + kPadElems);
  return (x + w + e) * dtype_bytes(p.dtype);
}

// One stage of the 2:4 wgmma kernel (device/wgmma.cuh's SparseWarpgroupGemm::kStageBytes): X's
// rows (128 bytes: a K tile of 64), W's compressed rows (64 bytes: half of it) and each 16 rows'
// metadata (two k32 steps of 16 words).
int64_t wgmma_sparse_stage_bytes(const ContractionPlan& p) {
  return int64_t{p.block_m} * kWgRowBytes + int64_t{p.block_n} * kWgRowBytes / 2 +
         int64_t{p.block_n} / kMmaShape.m * (p.block_k / kSpInstK) * (kSpMetaElems / 2) * 4;
}

// Step 8 of plan_contraction for a 2:4 sparse B (ContractionPlan::nm_sparse).
std::string plan_nm(const OpGraph& graph, NodeId cid, const NmSparseProps& props, const HwSpec& spec, ContractionPlan& p) {
  const TeNode& c = graph.node(cid);
  if (std::string why = check_nm_sparse(c, props); !why.empty()) return why;
  if (props.m != 4 || props.n > 2) return cat(props.n, ":", props.m, " sparsity does not run on 2:4 sparse tensor cores");
  if (!spec.target.has_gpu_feature("mma_sparse"))
    return cat("spec '", spec.name, "' lists no mma_sparse (target.gpu_features): no sparse tensor cores");
  if (p.implicit) return "a 2:4 sparse convolution (implicit GEMM) is not supported";
  if (p.split_k > 1) return "the 2:4 kernel's K loop is not split";
  const TensorId t = graph.node_inputs(cid)[props.input];
  const TensorInfo& info = graph.tensor(t);
  if (t != p.b.tensor)
    return cat("the 2:4 input '", info.name, "' is not B read directly (mma.sp's sparse operand is the weight B, transposed)");
  if (info.kind != TensorKind::weight || !info.sparsity || info.sparsity->pattern != Sparsity::Pattern::nm)
    return cat("the 2:4 input '", info.name, "' is not a weight with an N:M sparsity attribute");
  const int rank = info.type.rank();
  const int axis = info.sparsity->axis < 0 ? info.sparsity->axis + rank : info.sparsity->axis;
  if (axis != (p.b.k_contiguous ? rank - 1 : rank - 2))
    return cat("the 2:4 groups of '", info.name, "' run along dimension ", axis, ", not along the contraction's k");
  if (info.sparsity->nm_m != props.m || info.sparsity->nm_n != props.n)
    return cat("nm_sparse ", props.n, ":", props.m, " is not the weight's ", info.sparsity->nm_n, ":", info.sparsity->nm_m);
  for (int64_t s : p.b.batch_strides)
    if (s != 0) return cat("the 2:4 weight '", info.name, "' differs per batch point");
  if (p.block_k % (2 * kSpInstK) != 0) return cat("the 2:4 kernel steps K by multiples of ", 2 * kSpInstK, ", not ", p.block_k);
  if (p.warpgroup) {
    // wgmma.mma_async.sp: two consumers of 64 rows of W^T (C's n: 128) against the rows of X (C's
    // m, wgmma's n). The recorded wgmma tile, transposed: its block_n (128, 192 or 256) rows of X
    // by its block_m (128) rows of W^T, the same area.
    if (p.block_m != kWgConsumers * kWgInstM)
      return cat("the 2:4 wgmma kernel's blocks are ", kWgConsumers * kWgInstM, " rows of W^T (two consumers), not ", p.block_m);
    if (p.block_n != kWgBlockN && p.block_n != kWgBlockNMid && p.block_n != kWgBlockNWide)
      return cat("the 2:4 wgmma kernel takes ", kWgBlockN, ", ", kWgBlockNMid, " or ", kWgBlockNWide, " rows of X, not ", p.block_n);
    // (It runs one tile per block: a recorded persistent grid or ping-pong is not taken.)
    if (p.cluster_m > 1) return "the 2:4 wgmma kernel shares no operand over a cluster";
    p.nm_recorded = contraction_params(p);
    p.pingpong = false;
    if (!p.a.k_contiguous || p.a.align < kChunkElems)
      return cat("the 2:4 wgmma kernel reads X with k contiguous and 16-byte aligned rows");
    if (!p.a.batch_strides.empty())
      for (int64_t s : p.a.batch_strides)
        if (s != 0) return "the 2:4 wgmma kernel reads one X (a batched product runs on mma.sp)";
    std::swap(p.block_m, p.block_n);
    // One block per SM (the launch bound): as many stages as its shared memory holds, each with
    // its two mbarriers, after the consumers' epilogue slabs and the alignment slack.
    const int64_t stage = wgmma_sparse_stage_bytes(p) + 2 * kWgMbarrierBytes, fixed = kWgConsumers * kWgEpiSlabBytes + kWgAtomBytes;
    p.stages = static_cast<int>((spec.limits.smem_per_block_bytes - fixed) / stage);
    if (p.stages < 2) return cat("the 2:4 wgmma kernel's two stages need ", 2 * stage + fixed, " bytes of shared memory, the spec allows ",
                                 spec.limits.smem_per_block_bytes);
    p.warpgroup = false;
    p.nm_wgmma = true;
    p.warps_m = kWgConsumers + 1;  // the producer warpgroup and two consumers
    p.warps_n = kWarpgroupWarps;
    p.tiles_m = ceil_div(p.m, p.block_m);
    p.tiles_n = ceil_div(p.n, p.block_n);
  } else if (p.block_n / p.warps_n % kMmaShape.m != 0 || p.block_m / p.warps_m % (2 * kMmaShape.n) != 0) {
    return cat("the 2:4 kernel's warp tiles are multiples of ", kMmaShape.m, " along m and n, not ", p.block_m / p.warps_m, "x",
               p.block_n / p.warps_n);
  }
  // The wgmma.sp kernel is persistent: a block per SM (or per tile, where they are fewer) walks
  // the tiles, its producer loading the next tile's stages while the consumers store one.
  // Two blocks of a cluster share X where the tiles have two columns to share it over.
  if (p.nm_wgmma && spec.limits.max_cluster_blocks >= kWgSparseCluster && p.tiles_n >= kWgSparseCluster) p.cluster_n = kWgSparseCluster;
  p.persistent = p.nm_wgmma ? std::min<int64_t>(p.batch * p.tiles_m * ceil_div(p.tiles_n, p.cluster_n), spec.compute.units / p.cluster_n) * p.cluster_n : 0;
  p.nm_sparse = true;
  p.nm_view = NmView{p.n, p.k, p.b.k_contiguous, p.b.ld, p.b.offset, ceil_div(p.k, p.block_k) * p.block_k};
  // (The wgmma.sp kernel's stages -- X's 128-byte rows, W's 64-byte rows, the metadata -- and
  // its epilogue slabs, aligned to a swizzle atom.)
  p.smem_bytes = p.nm_wgmma ? p.stages * (wgmma_sparse_stage_bytes(p) + 2 * kWgMbarrierBytes) + kWgConsumers * kWgEpiSlabBytes + kWgAtomBytes
                            : p.stages * nm_stage_bytes(p);
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return cat("the 2:4 pipeline needs ", p.smem_bytes, " bytes of shared memory, the spec allows ", spec.limits.smem_per_block_bytes);
  return "";
}

std::string split_k(ContractionPlan& p, const HwSpec& spec, int64_t budget, int max_block_k, int64_t per_sm) {
  if (p.tiles() >= spec.compute.units) return "";
  if (spec.limits.max_cluster_blocks < 2) return cat("spec '", spec.name, "' has no thread-block clusters");
  if (p.implicit) return "an implicit GEMM's gather starts at k = 0";
  const int64_t reduce_bytes = int64_t{p.block_m} * p.block_n * 4;  // device/mma.cuh's kReduceBytes: the f32 tile
  if (reduce_bytes > spec.limits.smem_per_block_bytes) return "the partial sums do not fit shared memory";
  int split = 1;
  int block_k = p.block_k;
  for (int bk : {max_block_k, p.block_k}) {
    split = reduction_split(p.tiles(), ceil_div(p.k, bk), p.stages, spec, per_sm);
    block_k = bk;
    if (split > 1) break;
  }
  const int64_t ktiles = ceil_div(p.k, block_k);
  if (split == 1) {
    if (2 * p.tiles() > spec.compute.units * per_sm)
      return cat(p.tiles(), " tiles in 2 parts exceed the ", spec.compute.units * per_sm, " blocks the SMs run at once");
    return cat("K has ", ktiles, " tiles of ", block_k, ", too few for two parts of ", p.stages);
  }
  ContractionPlan q = p;
  q.block_k = block_k;
  q.split_k = split;
  q.stages = static_cast<int>(std::clamp<int64_t>(ktiles / split, 2, kMaxSplitStages));
  while (q.stages > 2 && q.stages * stage_bytes(q) > budget) --q.stages;
  q.smem_bytes = std::max(q.stages * stage_bytes(q), reduce_bytes);
  if (q.smem_bytes > spec.limits.smem_per_block_bytes) return "the partial sums do not fit shared memory";
  p = q;
  return "";
}

/// Deepens the pipeline of an mma.sync plan whose resident blocks keep too few bytes in flight
/// to stream from device memory at its bandwidth (the cost model's in_flight_rate, Little's law):
/// a skinny product's few narrow blocks, each walking a long K. Takes the K step of kMaxBlockK
/// where the tile is the planner's own (half the barriers per byte),
/// and the fewest stages up to kMaxSplitStages that reach the bandwidth, or the deepest that fits
/// a block's shared memory.
/// Returns what it did, or "".
std::string deepen_stream(ContractionPlan& p, const HwSpec& spec) {
  // (Not an implicit GEMM: its gather copier has not run deeper than kMaxStages on a GPU. Nor
  // operands read in narrower pieces than 16 bytes: such copies are not all asynchronous, so
  // stages add fewer bytes in flight than counted.)
  if (p.implicit || p.a.align < kChunkElems || p.b.align < kChunkElems) return "";
  const double bandwidth = in_flight_rate(spec, std::numeric_limits<double>::infinity());
  const LimitSpec& lim = spec.limits;
  auto rate = [&](const ContractionPlan& q) {
    int64_t per_sm = std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / std::max(q.threads(kMmaLanes), 1));
    per_sm = std::min<int64_t>(per_sm, lim.smem_per_sm_bytes / std::max<int64_t>(q.smem_bytes, 1));
    return in_flight_rate(spec, pipeline_bytes_in_flight(spec, {q.blocks(), per_sm, q.stages, ceil_div(q.k, int64_t{q.block_k}),
                                                                std::min<int64_t>(q.block_m, q.m), std::min<int64_t>(q.block_n, q.n),
                                                                q.block_k, dtype_bytes(q.dtype)}));
  };
  const double before = rate(p);
  if (before >= bandwidth) return "";
  ContractionPlan best = p;
  double best_rate = before;
  for (int bk : {kMaxBlockK, p.block_k}) {
    if (bk != p.block_k && p.tile_from_schedule) continue;
    // (From the plan's own depth -- fewer stages of a longer step were not measured -- or as many
    // as a short K has steps of this one.)
    const int first = bk == p.block_k ? p.stages : static_cast<int>(std::min<int64_t>(p.stages, std::max<int64_t>(ceil_div(p.k, bk), 2)));
    for (int stages = first; stages <= kMaxSplitStages && best_rate < bandwidth; ++stages) {
      ContractionPlan q = p;
      q.block_k = bk;
      q.stages = stages;
      q.smem_bytes = stages * stage_bytes(q);
      if (q.smem_bytes > lim.smem_per_block_bytes || ceil_div(q.k, bk) < stages) break;
      if (const double r = rate(q); r > best_rate * (1 + 1e-9)) best = q, best_rate = r;
    }
  }
  if (best.stages == p.stages && best.block_k == p.block_k) return "";
  const std::string what = cat("pipeline deepened to ", best.stages, " stages of K ", best.block_k, ": ", before * 1e-9, " GB/s in flight -> ",
                               best_rate * 1e-9, " GB/s");
  p = best;
  return what;
}

/// The parameters a schedule recorded for a tensor-core family (KernelChoice) applied to the
/// derived plan `p`: what the policy chose (tuning among contraction_variants) is what is emitted.
/// Returns why the recorded parameters cannot be emitted, or "".
std::string apply_recorded(ContractionPlan& p, const KernelChoice& k, const HwSpec& spec) {
  auto param = [&](const char* name) {
    auto it = k.params.find(name);
    return it == k.params.end() ? int64_t{-1} : it->second;
  };
  const int64_t bm = param("block_m"), bn = param("block_n"), bk = param("block_k"), stages = param("stages");
  const int64_t split = std::max<int64_t>(param("split_k"), 1), raster = std::max<int64_t>(param("raster_group"), 1);
  if (k.family == "wgmma") {
    if (!p.warpgroup) return cat("family wgmma recorded, but ", p.warpgroup_reason);
    const std::vector<int> widths = wgmma_block_widths(spec, p.dtype, bm, p.block_weight);
    if ((bm != kWgInstM && bm != kWgConsumers * kWgInstM) || std::find(widths.begin(), widths.end(), bn) == widths.end() ||
        bk != kWgRowElems) {
      std::string listed;
      for (int w : widths) listed += cat(listed.empty() ? "" : ", ", w);
      return cat("a wgmma block is ", kWgInstM, " or ", kWgConsumers * kWgInstM, " rows by ", listed,
                 " (the widths the spec lists wgmma shapes for) by ", kWgRowElems, "; recorded ", bm, " x ", bn, " x ", bk);
    }
    if (bm != p.block_m) {
      // Rows per block other than the derived plan's: one consumer warpgroup per 64 rows, the m
      // tiles (a convolution's boxes) planned again.
      const int consumers = static_cast<int>(bm / kWgInstM);
      int threads = 0;
      if (std::string no = warpgroup_block(spec, threads, consumers); !no.empty()) return cat("a ", bm, "-row wgmma block: ", no);
      p.block_m = static_cast<int>(bm);
      p.warpgroups = consumers + 1;
      p.tiles_m = ceil_div(p.m, bm);
      if (p.conv_box) {
        std::vector<int64_t> box;
        int64_t tiles_m = p.tiles_m;
        if (std::string why = plan_conv_box(p, bm, box, tiles_m); !why.empty()) return cat("a ", bm, "-row wgmma block read in boxes: ", why);
        p.box_tiles = box;
        p.tiles_m = tiles_m;
      }
    }
    if (split > 1 && (!is_pow2(split) || split > std::min<int64_t>(spec.limits.max_cluster_blocks, kWgMaxSplit) ||
                      p.k_tiles() < split))
      return cat("a wgmma K split in ", split, " parts: a power of two up to ", std::min<int64_t>(spec.limits.max_cluster_blocks, kWgMaxSplit),
                 " cluster blocks, with a K tile per part at least");
    const int64_t smem = wgmma_smem_bytes(bm, bn, stages);
    if (stages < 2 || stages > kWgMaxStages || smem > spec.limits.smem_per_block_bytes)
      return cat(stages, " wgmma stages (2..", kWgMaxStages, " that fit ", spec.limits.smem_per_block_bytes, " bytes)");
    // A split parks each rank's f32 partial sums in its stages' memory (device/wgmma.cuh's
    // kReduceBytes: every consumer thread's bn / 2 accumulators).
    if (const int64_t partials = bm / kWgInstM * kWarpgroupWarps * spec.compute.simd_width * (bn / 2) * 4;
        split > 1 && partials > stages * (bm + bn) * kWgRowBytes)
      return cat("a wgmma K split parks ", partials, " bytes of partial sums in its stages' ", stages * (bm + bn) * kWgRowBytes,
                 " bytes: more stages (recorded ", stages, ")");
    if (p.conv_box) {
      // A recorded box (box<a>: output points per tile along output axis a) replaces the derived one.
      std::vector<int64_t> box = p.box_tiles;
      for (size_t i = 0; i < box.size(); ++i)
        if (const int64_t t = param(cat("box", p.m_axes[i]).c_str()); t > 0) box[i] = t;
      if (box != p.box_tiles) {
        int64_t points = 1, tiles_m = 1;
        for (size_t i = 0; i < box.size(); ++i) {
          int64_t coeff = 1;
          for (const GatherDim& g : p.a_gather)
            if (g.m_axis == p.m_axes[i]) coeff = g.m_coeff;
          if (!is_pow2(box[i]) || box[i] > kMaxBoxExtent / coeff || (p.m_extents[i] == 1 && box[i] != 1))
            return cat("a recorded box of ", box[i], " points along axis ", p.m_axes[i], " (powers of two, at most ", kMaxBoxExtent,
                       " elements of the input, 1 along a unit axis)");
          points *= box[i];
          tiles_m *= ceil_div(p.m_extents[i], box[i]);
        }
        if (points != bm) return cat("a recorded box of ", points, " output points (a wgmma block has ", bm, " rows)");
        p.box_tiles = box;
        p.tiles_m = tiles_m;
      }
    }
    p.block_n = static_cast<int>(bn);
    p.stages = static_cast<int>(stages);
    p.smem_bytes = smem;
    p.tiles_n = ceil_div(p.n, bn);
    p.raster_group = static_cast<int>(std::min<int64_t>(p.tiles_m, raster));
    const int64_t persistent = param("persistent"), pingpong = param("pingpong"), cluster = std::max<int64_t>(param("cluster_m"), 1);
    if (persistent > 1) return cat("a recorded persistent flag is 0 or 1, not ", persistent);
    if (pingpong > 1) return cat("a recorded pingpong flag is 0 or 1, not ", pingpong);
    if (split > 1 && (persistent == 1 || pingpong == 1)) return "a wgmma K split runs one cluster per tile (not persistent, not ping-pong)";
    p.split_k = static_cast<int>(split);
    p.persistent = persistent == 1 && p.tiles() > spec.compute.units ? spec.compute.units : 0;
    p.pingpong = pingpong == 1;
    if (p.pingpong && (bn != kWgBlockN || bm != kWgConsumers * kWgInstM || p.persistent == 0))
      return cat("a ping-pong wgmma kernel has ", kWgConsumers * kWgInstM, " x ", kWgBlockN, " tiles on a persistent grid (more tiles than the ",
                 spec.compute.units, " SMs); recorded ", bm, " x ", bn, ", ", p.tiles(), " tiles, persistent ", persistent);
    p.cluster_m = 1;
    if (cluster > 1) {
      // Two blocks per cluster walk tiles of 2 block_m rows: the persistent grid in pairs, more
      // such tiles than the pairs of SMs.
      const int64_t pairs = spec.compute.units / 2;
      if (cluster != 2 || spec.limits.max_cluster_blocks < 2 || persistent != 1 || p.pingpong || split > 1 || p.tiles_m < 2 || p.batch > 1 ||
          p.conv_box || (!p.b.k_contiguous && bn / kWgRowElems % 2 != 0) ||
          ceil_div(p.tiles_m, 2) * p.tiles_n <= pairs)
        return cat("B shared by a cluster (cluster_m ", cluster, "): 2 blocks of the persistent grid, not ping-pong, split, batched or "
                   "a convolution, whole 64-column boxes of a B stored K x N per block, more tiles of 2 x ", bm, " rows than the ", pairs,
                   " pairs of SMs; recorded block_n ", bn, ", persistent ", persistent, ", ",
                   p.tiles_m, " x ", p.tiles_n, " tiles");
      p.cluster_m = 2;
      p.persistent = 2 * pairs;
    }
    return "";
  }
  // mma.sync, also where wgmma could run (the schedule chose mma).
  ContractionPlan q = p;
  int wm = 0, wn = 0;
  if (bm <= 0 || bn <= 0 || bm > 1024 || bn > 1024 || !is_pow2(bm) || !is_pow2(bn) ||
      !warp_layout(static_cast<int>(bm), static_cast<int>(bn), wm, wn))
    return cat("no mma.sync warp layout for a recorded ", bm, " x ", bn, " block");
  if (bk != kBlockK && bk != kMaxBlockK) return cat("an mma.sync K step is ", kBlockK, " or ", kMaxBlockK, ", recorded ", bk);
  q.warpgroup = false;
  q.warpgroups = 0;
  // (Nor the wgmma kernel's grid: one block per tile -- a persistent grid left here launched one
  // wave of blocks and left every later tile unwritten.)
  q.persistent = 0;
  q.pingpong = false;
  q.cluster_m = 1;
  q.conv_box = false;
  q.box_tiles.clear();
  q.k_chunks = q.taps = 0;
  q.warpgroup_reason = p.warpgroup ? "the schedule records mma" : p.warpgroup_reason;
  q.block_m = static_cast<int>(bm);
  q.block_n = static_cast<int>(bn);
  q.block_k = static_cast<int>(bk);
  q.warps_m = wm;
  q.warps_n = wn;
  q.tile_from_schedule = false;
  q.tiles_m = ceil_div(q.m, bm);
  q.tiles_n = ceil_div(q.n, bn);
  q.raster_group = static_cast<int>(std::min<int64_t>(q.tiles_m, raster));
  q.split_k = static_cast<int>(split);
  q.split_reason.clear();
  q.deepened.clear();
  if (split > 1) {
    if (p.implicit) return "an implicit GEMM's gather starts at k = 0 (its K is not split)";
    if (!is_pow2(split) || split > spec.limits.max_cluster_blocks)
      return cat("K split in ", split, " parts: a power of two up to the cluster's ", spec.limits.max_cluster_blocks, " blocks");
    if (ceil_div(q.k, bk) < split) return cat("K has fewer than ", split, " tiles of ", bk);
  }
  // (An implicit GEMM's gather copier has not run deeper than kMaxStages on a GPU; split plans of
  // 8 stages have, and so have plain products deepened by deepen_stream.)
  const int max_stages = p.implicit ? kMaxStages : kMaxSplitStages;
  if (stages < 2 || stages > max_stages) return cat(stages, " mma.sync stages (2..", max_stages, p.implicit ? " for an implicit GEMM" : "", ")");
  q.stages = static_cast<int>(stages);
  q.smem_bytes = std::max(q.stages * stage_bytes(q), split > 1 ? int64_t{q.block_m} * q.block_n * 4 : int64_t{0});
  if (q.smem_bytes > spec.limits.smem_per_block_bytes)
    return cat("the pipeline needs ", q.smem_bytes, " bytes of shared memory, the spec allows ", spec.limits.smem_per_block_bytes);
  if (q.threads(kMmaLanes) > spec.limits.max_threads_per_block) return "too many threads per block";
  p = q;
  return "";
}

}  // namespace

std::map<std::string, int64_t> contraction_params(const ContractionPlan& p) {
  if (p.nm_wgmma) return p.nm_recorded;
  if (p.gemv) {
    std::map<std::string, int64_t> out{{"block_m", p.block_m}, {"block_n", p.block_n}, {"block_k", p.block_k}, {"warps", p.warps_m}, {"unroll", p.gemv_unroll},
                                       {"vec", p.gemv_vec}, {"split_k", p.split_k}};
    if (p.b.k_contiguous) out["cols"] = p.gemv_cols;
    if (p.epilogue_instructions > 0) out["epilogue_instructions"] = p.epilogue_instructions;
    return out;
  }
  std::map<std::string, int64_t> out{{"block_m", p.block_m}, {"block_n", p.block_n}, {"block_k", p.block_k},
                                     {"stages", p.stages}, {"split_k", p.split_k}, {"raster_group", p.raster_group},
                                     {"implicit", p.implicit}};
  if (p.warpgroup) {
    out["warpgroups"] = p.warpgroups;
    if (p.persistent > 0) out["persistent"] = 1;
    if (p.pingpong) out["pingpong"] = 1;
    if (p.cluster_m > 1) out["cluster_m"] = p.cluster_m;
    if (p.conv_box) {
      for (size_t i = 0; i < p.box_tiles.size(); ++i) out[cat("box", p.m_axes[i])] = p.box_tiles[i];
      out["k_tiles"] = p.k_tiles();
    }
  } else {
    out["warps_m"] = p.warps_m;
    out["warps_n"] = p.warps_n;
    // (Recorded below 16-byte reads only, so that schedules saved before narrower reads existed
    // still match.)
    if (p.a.align < kChunkElems) out["a_align"] = p.a.align;
    if (p.b.align < kChunkElems) out["b_align"] = p.b.align;
    if (p.k_slices > 1) out["k_slices"] = p.k_slices;
  }
  // (Recorded when there is an epilogue, so that schedules saved before it still match.)
  if (p.epilogue_instructions > 0) out["epilogue_instructions"] = p.epilogue_instructions;
  return out;
}

/// The f32 kernel's form a recorded plan or a variant fixes (plan_simt): warps 0 for the derived ones.
struct SimtForm {
  int warps_m = 0, warps_n = 0, k_slices = 0;
};
ContractionMatch plan_simt(int raster_group, const HwSpec& spec, ContractionPlan& p, SimtForm form = {});

/// The gemv form a recorded plan or a variant fixes (plan_gemv): 0 for the derived ones.
struct GemvForm {
  int warps = 0, cols = 0, unroll = 0, split = 0;
};

/// Step 5 for a product of at most kGemvMaxRows rows (the gemv family, device/gemv.cuh): B's
/// vectors as wide as its rows allow up to 16 bytes; kGemvWarps warps a block, kGemvCols columns a
/// warp where B is stored N x K, kGemvUnroll vectors requested a lane; K split over a cluster into
/// the fewest parts (powers of two) whose blocks keep the bytes in flight that device memory needs
/// to stream at its bandwidth (the cost model's in_flight_rate, Little's law), each part at least
/// kGemvMinSteps steps. `form` with values > 0 fixes them instead.
ContractionMatch plan_gemv(const HwSpec& spec, ContractionPlan& p, GemvForm form);

/// Whether a product that the gemv family can take takes it by default (plan_contraction's step
/// 5'): at most kGemvDefaultRows16 or kGemvDefaultRowsF32 rows; B read 16 bytes at a time (its
/// narrower vectors ran 0.68-0.84x the tiled plans: experiments/gemv); and a lane's warp busy:
/// B stored N x K with at least a warp's vectors along K (attention's scores of a 128-wide head
/// keep their tiles), B stored K x N at least a warp's vectors wide.
bool gemv_default(const ContractionPlan& p) {
  const int64_t elem = dtype_bytes(p.dtype), whole = kVectorBytes / elem;
  if (p.m > (p.dtype == DType::f32 ? kGemvDefaultRowsF32 : kGemvDefaultRows16) || p.implicit) return false;
  if (p.b.align < whole) return false;
  return (p.b.k_contiguous ? p.k : p.n) >= kMmaLanes * whole;
}

ContractionMatch plan_gemv(const HwSpec& spec, ContractionPlan& p, GemvForm form) {
  if (p.m > kGemvMaxRows) return fail(cat("m = ", p.m, " is more rows than the gemv family's ", kGemvMaxRows));
  if (p.implicit) return fail("an implicit GEMM (a convolution) is not a few-row product");
  const int64_t elem = dtype_bytes(p.dtype);
  const int whole = static_cast<int>(kVectorBytes / elem);
  p.gemv = true;
  p.simt = false;
  p.gemv_vec = std::min(p.b.align, whole);
  p.warps_m = form.warps > 0 ? form.warps : kGemvWarps;
  p.warps_n = 1;
  p.k_slices = 1;
  p.gemv_cols = p.b.k_contiguous ? (form.cols > 0 ? form.cols : kGemvCols) : 1;
  p.gemv_unroll = form.unroll > 0 ? form.unroll : kGemvUnroll;
  if (std::find(std::begin(kGemvWarpChoices), std::end(kGemvWarpChoices), p.warps_m) == std::end(kGemvWarpChoices) ||
      std::find(std::begin(kGemvColChoices), std::end(kGemvColChoices), p.gemv_cols) == std::end(kGemvColChoices) ||
      std::find(std::begin(kGemvUnrollChoices), std::end(kGemvUnrollChoices), p.gemv_unroll) == std::end(kGemvUnrollChoices))
    return fail(cat("the gemv family's blocks are 4, 8 or 16 warps, 1, 2 or 4 columns a warp, 2, 4 or 8 vectors a lane, not ", p.warps_m,
                    ", ", p.gemv_cols, ", ", p.gemv_unroll));
  p.block_m = static_cast<int>(p.m);
  p.block_n = p.b.k_contiguous ? p.warps_m * p.gemv_cols : kMmaLanes * p.gemv_vec;
  p.block_k = p.b.k_contiguous ? kMmaLanes * p.gemv_vec * p.gemv_unroll : p.warps_m * p.gemv_unroll;
  p.stages = 0;
  p.tiles_m = 1;
  p.tiles_n = ceil_div(p.n, p.block_n);
  p.raster_group = 1;
  p.smem_bytes = (p.b.k_contiguous ? 1 : p.warps_m) * p.m * p.block_n * 4;
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return fail(cat("the gemv block's sums need ", p.smem_bytes, " bytes of shared memory, the spec allows ", spec.limits.smem_per_block_bytes));
  const LimitSpec& lim = spec.limits;
  // The rate device memory streams B at for plan q with its K in `split` parts (Little's law over
  // the bytes its resident blocks keep requested).
  auto rate = [&](const ContractionPlan& q, int split) {
    const int64_t threads = q.threads(kMmaLanes);
    const int64_t per_sm =
        std::max<int64_t>(1, std::min({lim.max_blocks_per_sm, lim.max_threads_per_sm / threads, lim.smem_per_sm_bytes / q.smem_bytes}));
    return in_flight_rate(spec, gemv_bytes_in_flight(spec, {q.tiles() * split, per_sm, threads, int64_t{q.gemv_unroll} * q.gemv_cols,
                                                            q.gemv_vec * elem}));
  };
  const int64_t steps = ceil_div(p.k, int64_t{p.block_k});
  const double bandwidth = in_flight_rate(spec, std::numeric_limits<double>::infinity());
  p.split_k = 1;
  if (form.split > 0) {
    if (form.split > 1 && (form.split > lim.max_cluster_blocks || !is_pow2(form.split)))
      return fail(cat("a K split of ", form.split, " is not a power of two up to the spec's ", lim.max_cluster_blocks, "-block clusters"));
    p.split_k = form.split;
  } else {
    while (2 * p.split_k <= lim.max_cluster_blocks && rate(p, p.split_k) < bandwidth && steps >= 2 * p.split_k * kGemvMinSteps)
      p.split_k *= 2;
  }
  // Still short of the bytes in flight (few tiles, a long K): deeper requests, then wider blocks,
  // where the form is not fixed and K has the steps for the split.
  if (form.warps == 0 && form.unroll == 0)
    for (const auto& [warps, unroll] : {std::pair{p.warps_m, kGemvDeepUnroll}, std::pair{kGemvWideWarps, kGemvDeepUnroll}}) {
      if (rate(p, p.split_k) >= bandwidth) break;
      ContractionPlan q = p;
      if (!plan_gemv(spec, q, {warps, p.gemv_cols, unroll, p.split_k}).plan || ceil_div(q.k, int64_t{q.block_k}) < q.split_k * kGemvMinSteps ||
          rate(q, q.split_k) <= rate(p, p.split_k) * (1 + 1e-9))
        break;
      p = q;
    }
  if (p.split_k == 1 && rate(p, 1) < bandwidth)
    p.split_reason = lim.max_cluster_blocks < 2 ? cat("spec '", spec.name, "' has no thread-block clusters")
                                                : cat("K has ", ceil_div(p.k, int64_t{p.block_k}), " steps of ", p.block_k,
                                                      ", too few for two parts of ", kGemvMinSteps);
  if (p.blocks() >= (int64_t{1} << 31)) return fail(cat(p.blocks(), " blocks do not fit one launch"));
  p.warpgroup_reason = cat(p.m, p.m == 1 ? " row" : " rows", ": a few-row product (the gemv family)");
  return ContractionMatch{p, ""};
}

std::vector<KernelChoice> contraction_variants(const ContractionPlan& p, const HwSpec& spec) {
  std::vector<KernelChoice> out;
  if (p.gemv) {
    // Its forms: warps x columns (B stored N x K) x vectors x K splits.
    std::vector<int> splits{1};
    for (int s = 2; s <= spec.limits.max_cluster_blocks; s *= 2) splits.push_back(s);
    for (int w : kGemvWarpChoices)
      for (int c : kGemvColChoices)
        for (int u : kGemvUnrollChoices)
          for (int s : splits) {
            if (!p.b.k_contiguous && c != 1) continue;
            ContractionPlan q = p;
            if (!plan_gemv(spec, q, {w, c, u, s}).plan || ceil_div(q.k, int64_t{q.block_k}) < s) continue;
            KernelChoice k{"gemv", contraction_params(q), {}};
            if (std::none_of(out.begin(), out.end(), [&](const KernelChoice& o) { return o.params == k.params; })) out.push_back(std::move(k));
          }
    return out;
  }
  if (p.simt) {
    // The f32 kernel's forms: its block's warp tiles and k slices (plan_simt derives the rest).
    for (int wm = 1; wm <= kSimtMaxWarpsM; ++wm)
      for (int wn = 1; wn <= kSimtMaxWarpsN; wn *= 2)
        for (int slices : {1, kSimtSlices[0], kSimtSlices[1]}) {
          ContractionPlan q = p;
          if (!plan_simt(p.raster_group, spec, q, {wm, wn, slices}).plan) continue;
          KernelChoice k{"simt", contraction_params(q), {}};
          if (k.params != contraction_params(p)) out.push_back(std::move(k));
        }
    return out;
  }
  // A 2:4 plan's form is derived from the recorded family's parameters (plan_nm): the variants are
  // the dense group's (choose_sparse_kinds sets the kind on each), none of its own.
  if (p.nm_sparse) return out;
  // The variant `params` of `family` as apply_recorded plans it, where `keep` (if any) takes the plan.
  auto add = [&](const std::string& family, std::map<std::string, int64_t> params,
                 const std::function<bool(const ContractionPlan&)>& keep = nullptr) {
    ContractionPlan q = p;
    KernelChoice k{family, params, {}};
    if (!apply_recorded(q, k, spec).empty() || (keep && !keep(q))) return;
    KernelChoice recorded{family, contraction_params(q), {}};
    for (const KernelChoice& o : out)
      if (o.family == recorded.family && o.params == recorded.params) return;
    out.push_back(std::move(recorded));
  };
  const int64_t raster = p.raster_group;
  std::vector<int64_t> rows{int64_t{kWgConsumers} * kWgInstM};
  if (p.warpgroup && wgmma_lone_consumer_pays(p, spec)) rows.push_back(kWgInstM);
  if (p.warpgroup)
    for (int64_t bm : rows)
      for (int64_t bn : wgmma_block_widths(spec, p.dtype, bm, p.block_weight))
        for (int64_t stages = kWgMaxStages; stages >= 3; --stages)
          for (int64_t persistent : {1, 0})
            for (int64_t pingpong : {0, 1})
              for (int64_t split : {1, 2, 4})
                for (int64_t cluster : {1, 2}) {
                  // 192-wide tiles only where wgmma_mid_width_pays; a cluster sharing B on the
                  // persistent grid.
                  if ((bn == kWgBlockNMid && (split > 1 || !wgmma_mid_width_pays(p, spec))) ||
                      (cluster > 1 && (persistent == 0 || pingpong == 1 || split > 1)))
                    continue;
                  add("wgmma",
                      {{"block_m", bm}, {"block_n", bn}, {"block_k", kWgRowElems}, {"stages", stages}, {"split_k", split},
                       {"raster_group", raster}, {"implicit", p.implicit}, {"persistent", persistent}, {"pingpong", pingpong},
                       {"cluster_m", cluster}},
                      [&](const ContractionPlan& q) {
                        // A K split only where its blocks fit the SMs in one wave (tiles that leave
                        // SMs idle). 64-row blocks likewise, one block a tile, a short K loop each
                        // (kWgLoneMaxKTiles): on an H200 their persistent grid (a lone consumer per
                        // SM walking two tiles or more) ran 0.54-0.93x the 128-row blocks it
                        // replaced (experiments/notebook/h200-2026-11-29g).
                        // (One wave: as many blocks as the SMs hold at once; 64-row blocks up to
                        // 128 wide two an SM, one block a tile: on an H200 BERT's Q projection at
                        // 1024 tokens ran 192 blocks of 64 x 64 1.23x its 48 of 128 x 128,
                        // experiments/notebook/h200-2026-11-29h.)
                        const int64_t resident = q.split_k == 1 ? wgmma_blocks_per_sm(q, spec) : 1;
                        const bool one_wave = q.persistent == 0 && q.tiles() * q.split_k <= resident * spec.compute.units;
                        const bool short_k = ceil_div(q.k_tiles(), int64_t{q.split_k}) <= kWgLoneMaxKTiles;
                        const bool clusters_fit =
                            q.split_k == 1 || static_cast<double>(q.tiles() * q.split_k) <= kWgLoneSplitShare * static_cast<double>(spec.compute.units);
                        return (split == 1 || (one_wave && pingpong == 0)) &&
                               (bm != kWgInstM || (one_wave && short_k && clusters_fit && q.cluster_m == 1));
                      });
                }
  for (int64_t bm : {256, 128, 64, 32, 16})
    for (int64_t bn : {256, 128, 64, 32, 16})
      for (int64_t bk : {int64_t{kBlockK}, int64_t{kMaxBlockK}})
        for (int64_t split : {1, 2, 4})
          for (int64_t stages : {int64_t{kMaxStages}, int64_t{3}, int64_t{kMaxSplitStages}}) {
            // (A split part streams a long K alone: 3 stages are never its best. An implicit GEMM
            // takes at most kMaxStages: apply_recorded.)
            if ((split > 1 && stages == 3) || (p.implicit && stages > kMaxStages)) continue;
            add("mma", {{"block_m", bm}, {"block_n", bn}, {"block_k", bk}, {"stages", stages}, {"split_k", split},
                        {"raster_group", raster}, {"implicit", p.implicit}});
          }
  return out;
}

/// Step 5 for an f32 product (the simt form, device/mma.cuh's SimtBlockGemm): warp tiles of the
/// fewest rows that cover m (16, 32 or 64); blocks of 1 or 2 of them along each axis, shrunk
/// where twice the problem and, when both operands are read 16 bytes at a time, while the grid
/// leaves an SM's warp schedulers without a warp each (down to one warp tile); k slices for
/// single-warp tiles that still do (kSimtSlices); K steps of kSimtBlockK (sliced: kSimtSliceGroups
/// groups of 4 per slice), as many stages as fit half an SM's shared memory up to kMaxStages;
/// where the tiles leave SMs idle, K split over a cluster as the mma kernel splits it (split_k),
/// with as many blocks per SM as fit. The rule was chosen by measuring every form on an H200
/// (experiments/f32_simt/runs/h200-2026-12-01). `form` with warps > 0 fixes the block's warps
/// and k slices instead (a recorded plan's, a tuner's variant: contraction_variants lists 1 or 2
/// warp tiles along m by 1, 2 or 4 along n, each with 1, 2 and 4 k slices).
ContractionMatch plan_simt(int raster_group, const HwSpec& spec, ContractionPlan& p, SimtForm form) {
  p.split_k = 1;
  const int slices = form.k_slices;
  int lanes_m = kSimtLanesM[std::size(kSimtLanesM) - 1];
  for (int l : kSimtLanesM)
    if (int64_t{l} * kSimtLaneTile >= p.m) {
      lanes_m = l;
      break;
    }
  const int warp_rows = lanes_m * kSimtLaneTile, warp_cols = spec.compute.simd_width / lanes_m * kSimtLaneTile;
  int wm = kSimtMaxWarpsPerAxis, wn = kSimtMaxWarpsPerAxis;
  auto blocks = [&] { return p.batch * ceil_div(p.m, int64_t{wm} * warp_rows) * ceil_div(p.n, int64_t{wn} * warp_cols); };
  if (form.warps_m > 0 || form.warps_n > 0) {
    if (form.warps_m < 1 || form.warps_m > kSimtMaxWarpsM || form.warps_n < 1 || form.warps_n > kSimtMaxWarpsN)
      return fail(cat("the f32 kernel's blocks are 1 to ", kSimtMaxWarpsM, " by 1 to ", kSimtMaxWarpsN, " warp tiles, not ", form.warps_m,
                      " x ", form.warps_n));
    wm = form.warps_m;
    wn = form.warps_n;
  }
  // (An axis shrinks while its block is at least twice the problem; then, where both operands are
  // read 16 bytes at a time, both while the grid leaves an SM's schedulers without a warp each.
  // An operand read in narrower pieces keeps the blocks: their copies cost fewer issues per
  // multiply-add, and the K split fills the SMs instead.)
  const bool whole_reads = p.a.align >= kSimtChunkFloats && p.b.align >= kSimtChunkFloats;
  const double slots = static_cast<double>(spec.compute.units) * simt_issue_slots(spec);
  for (; form.warps_m == 0;) {
    const bool m_wide = wm > 1 && int64_t{wm} * warp_rows >= 2 * p.m, n_wide = wn > 1 && int64_t{wn} * warp_cols >= 2 * p.n;
    if (m_wide) --wm;
    else if (n_wide) --wn;
    else if (wm * wn > 1 && whole_reads && static_cast<double>(blocks() * wm * wn) < slots) (wn >= wm && wn > 1 ? wn : wm) -= 1;
    else break;
  }
  p.warps_m = wm;
  p.warps_n = wn;
  p.block_m = wm * warp_rows;
  p.block_n = wn * warp_cols;
  p.k_slices = 1;
  if (slices > 0) {
    if (slices != 1 && std::find(std::begin(kSimtSlices), std::end(kSimtSlices), slices) == std::end(kSimtSlices))
      return fail(cat("the f32 kernel's k slices are 1, 2 or 4, not ", slices));
    p.k_slices = slices;
  } else {
    // (Single-warp blocks only, while their warps leave a scheduler without one: measured,
    // slices lose to a block's own warps, and to more warps than that -- experiments/f32_simt.)
    for (int s : kSimtSlices) {
      if (wm * wn > 1 || static_cast<double>(blocks() * p.k_slices) >= slots || p.k < int64_t{s} * kSimtBlockK) break;
      p.k_slices = s;
    }
  }
  const int64_t threads_cap = std::min<int64_t>(spec.limits.max_threads_per_block, spec.limits.registers_per_sm / kSimtLaneRegisters);
  if (int64_t{wm} * wn * p.k_slices * spec.compute.simd_width > threads_cap)
    return fail(cat(wm * wn * p.k_slices, " warps a block leave fewer than ", kSimtLaneRegisters, " registers a thread"));
  p.block_k = std::max(kSimtBlockK, 4 * kSimtSliceGroups * p.k_slices);
  p.tiles_m = ceil_div(p.m, p.block_m);
  p.tiles_n = ceil_div(p.n, p.block_n);
  p.raster_group = static_cast<int>(std::min<int64_t>(p.tiles_m, raster_group > 1 ? raster_group : kRasterGroup));
  const int64_t ktiles = ceil_div(p.k, p.block_k);
  const int64_t half_sm = std::min(spec.limits.smem_per_block_bytes, spec.limits.smem_per_sm_bytes / 2);
  // (The k slices' sums meet in the stages' memory after the main loop: device/mma.cuh.)
  const int64_t slice_bytes = int64_t{p.k_slices - 1} * p.block_m * p.block_n * 4;
  p.stages = static_cast<int>(std::clamp<int64_t>(ktiles, 2, kMaxStages));
  while (p.stages > 2 && p.stages * stage_bytes(p) > half_sm) --p.stages;
  p.smem_bytes = std::max(p.stages * stage_bytes(p), slice_bytes);
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return fail(cat("the pipeline needs ", p.smem_bytes, " bytes of shared memory, the spec allows ", spec.limits.smem_per_block_bytes));
  const int64_t threads = p.threads(kMmaLanes);
  if (threads > spec.limits.max_threads_per_block) return fail("too many threads per block");
  const LimitSpec& lim = spec.limits;
  const int64_t per_sm =
      std::max<int64_t>(1, std::min({lim.max_blocks_per_sm, lim.max_threads_per_sm / threads, lim.smem_per_sm_bytes / p.smem_bytes}));
  p.split_reason = split_k(p, spec, half_sm, p.block_k, per_sm);
  p.smem_bytes = std::max(p.smem_bytes, slice_bytes);
  if (p.blocks() >= (int64_t{1} << 31)) return fail(cat(p.blocks(), " blocks do not fit one launch"));
  p.warpgroup_reason = "f32 operands (no tensor cores)";
  return ContractionMatch{p, ""};
}

ContractionMatch plan_contraction(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic,
                                  const HwSpec& spec, bool warpgroups, bool few_rows) {
  // 2 (first: most groups are not contractions, and the reason should say so). The contraction.
  NodeId cid = -1;
  for (NodeId n : group.nodes)
    if (graph.node(n).num_reduction() > 0) {
      if (cid >= 0) return fail("the group has more than one reducing node");
      cid = n;
    }
  if (cid < 0) return fail("the group has no reducing node");
  const TeNode& c = graph.node(cid);
  const int ns = c.num_spatial();
  if (c.combiner() != Combiner::sum || c.inputs().size() != 2 || ns < 2)
    return fail(cat("'", c.name(), "' is not a sum of products of two inputs with m and n axes"));
  const Expr& body = c.body();
  if (body.op() != ExprOp::mul || !((is_plain_input(body.operands()[0], 0) && is_plain_input(body.operands()[1], 1)) ||
                                    (is_plain_input(body.operands()[0], 1) && is_plain_input(body.operands()[1], 0))))
    return fail(cat("the body of '", c.name(), "' is not in0 * in1: ", print_expr(body)));
  const DType dt = c.output().dtype;
  // f32: the same pipeline with fused multiply-adds on the CUDA cores (the simt form).
  const bool simt = dt == DType::f32;
  if (dt != DType::f16 && dt != DType::bf16 && !simt)
    return fail(cat("'", c.name(), "' is ", dtype_name(dt), " (the tiled kernels take f16, bf16 (tensor cores) and f32 (CUDA cores))"));
  for (const Access& acc : c.inputs())
    if (acc.type.dtype != dt || acc.is_gather()) return fail(cat("the operands of '", c.name(), "' are not both ", dtype_name(dt)));
  const int cpos = generic.position(cid);
  for (int a = 0; a < ns; ++a)
    if (c.axes()[a].extent == 0) return fail("the output is empty");

  // 1. The target.
  if (simt) {
    if (!spec.target.has_gpu_feature("cp_async"))
      return fail(cat("spec '", spec.name, "' lists no cp_async (target.gpu_features): the f32 kernel's pipeline needs it"));
  } else {
    for (const char* feature : {"mma_sync", "cp_async", "ldmatrix"})
      if (!spec.target.has_gpu_feature(feature))
        return fail(cat("spec '", spec.name, "' lists no ", feature, " (target.gpu_features): the mma kernel needs mma_sync, cp_async and ldmatrix"));
  }
  if (spec.compute.simd_width != kMmaLanes) return fail(cat("warp width ", spec.compute.simd_width, " is not mma.sync's ", kMmaLanes));
  auto shapes = spec.compute.tensor_core_shapes.find(dt);
  if (!simt && (shapes == spec.compute.tensor_core_shapes.end() ||
                std::find(shapes->second.begin(), shapes->second.end(), kMmaShape) == shapes->second.end()))
    return fail(cat("spec '", spec.name, "' lists no m16n8k16 tensor-core shape for ", dtype_name(dt)));

  ContractionPlan p;
  p.node = cid;
  p.dtype = dt;
  p.simt = simt;
  std::string why;
  std::optional<Traced> t0 = trace_operand(graph, group, generic, cid, 0, why);
  if (!t0) return fail(why);
  std::optional<Traced> t1 = trace_operand(graph, group, generic, cid, 1, why);
  if (!t1) return fail(why);
  // A convolution whose taps are all single (1 x 1, reduction axes of extent 1 after its channels)
  // is first tried as a matrix product: with stride 1 and no padding its input rows continue, and
  // its (batch, rows, columns) points fold into one m of 2-D tiles, which the box-tiled implicit
  // GEMM reads in 4-D boxes (1.1x slower on an H200: experiments/conv_as_gemm).
  bool single_taps = c.num_reduction() > 1;
  for (int a = ns + 1; single_taps && a < c.num_axes(); ++a) single_taps = c.axes()[a].extent == 1;
  std::string as_matmul;
  if (c.num_reduction() == 1 || single_taps) {
    // 3. One reduction axis: a (batched) matrix product of 2-D operand views.
    as_matmul = plan_matmul(graph, c, *t0, *t1, p);
    if (!as_matmul.empty() && !single_taps) return fail(as_matmul);
  }
  if (c.num_reduction() > 1 && (!single_taps || !as_matmul.empty())) {
    // 3'. Several reduction axes: a convolution, as an implicit GEMM.
    p = ContractionPlan{};
    p.node = cid;
    p.dtype = dt;
    p.simt = simt;
    if (std::string r = plan_implicit(graph, c, *t0, *t1, p); !r.empty())
      return fail(as_matmul.empty() ? r : cat(r, " (nor as a matrix product: ", as_matmul, ")"));
    if (p.m >= (int64_t{1} << 31) || p.n >= (int64_t{1} << 31) || p.k >= (int64_t{1} << 31))
      return fail("an extent does not fit 32-bit tile indices");
  }

  // A reshaped output: only a grouped convolution's, whose last dimension merges the groups with
  // the group's output channels (its epilogue runs over the output's domain).
  if (generic.nodes[cpos].reshaped) {
    const std::vector<int64_t>& shape = c.output().shape;
    bool merged = p.implicit && !p.batch_axes.empty() && static_cast<int>(shape.size()) == p.batch_axes.front() + 1;
    for (size_t b = 0; merged && b < p.batch_axes.size(); ++b) merged = p.batch_axes[b] == p.batch_axes.front() + static_cast<int>(b);
    merged = merged && p.batch_axes.back() + 1 == p.n_axis && shape.back() == p.batch * p.n;
    for (int a = 0; merged && a < p.batch_axes.front(); ++a) merged = shape[a] == c.axes()[a].extent;
    if (!merged) return fail(cat("'", c.name(), "' reshapes its output"));
    // (As the sink, C stores at its own domain point's row-major offset, which the reshape keeps;
    // an epilogue after it runs over the output's domain.)
    p.merged_n = cpos != static_cast<int>(group.nodes.size()) - 1;
  }
  // The epilogue's domain: C's, or with merged_n the output's.
  std::vector<int64_t> epilogue_extents = c.extents();
  epilogue_extents.resize(ns);
  if (p.merged_n) epilogue_extents = c.output().shape;
  const int ens = static_cast<int>(epilogue_extents.size());

  // 4. The epilogue: every other node.
  auto is_operand_node = [&](NodeId n) { return std::find(p.operand_nodes.begin(), p.operand_nodes.end(), n) != p.operand_nodes.end(); };
  if (cpos != static_cast<int>(group.nodes.size()) - 1 && generic.nodes[cpos].role != NodeRole::inlined)
    return fail(cat("'", c.name(), "' is read by more than its epilogue (the generic plan stages it)"));
  for (int i = 0; i < static_cast<int>(group.nodes.size()); ++i) {
    const NodeId id = group.nodes[i];
    if (id == cid || is_operand_node(id)) continue;
    const TeNode& node = graph.node(id);
    const NodePlan& np = generic.nodes[i];
    // A reshaped sink (Reshape to attention heads) stores at the row-major offset of its domain
    // point, which a reshape keeps: still elementwise. A reshaped node read in the group is not.
    const bool is_sink = i == static_cast<int>(group.nodes.size()) - 1;
    if (np.role == NodeRole::staged || node.num_reduction() != 0 || (np.reshaped && !is_sink) || node.num_spatial() != ens)
      return fail(cat("'", node.name(), "' is not an elementwise epilogue over the contraction's domain"));
    for (int a = 0; a < ens; ++a)
      if (node.axes()[a].extent != epilogue_extents[a])
        return fail(cat("'", node.name(), "' has a different domain than '", c.name(), "'"));
    if (p.merged_n && np.reshaped) return fail(cat("'", node.name(), "' reshapes the grouped convolution's output"));
    const std::vector<TensorId>& ins = graph.node_inputs(id);
    for (size_t k = 0; k < ins.size(); ++k) {
      const NodeId prod = graph.producer(ins[k]);
      if (!in_group(group, prod)) continue;
      if (is_operand_node(prod)) return fail(cat("'", node.name(), "' reads an operand of '", c.name(), "'"));
      const Access& acc = node.inputs()[k];
      bool identity = !acc.is_gather() && acc.map.num_results() == ens;
      for (int r = 0; identity && r < ens; ++r) {
        const AffineExpr& row = acc.map.result(r);
        identity = row.offset == 0;
        for (int a = 0; identity && a < node.num_axes(); ++a) identity = row.coeffs[a] == (a == r ? 1 : 0);
      }
      if (!identity) return fail(cat("'", node.name(), "' reads '", graph.node(prod).name(), "' at another point"));
    }
  }
  // The epilogue's instructions per output beyond a plain store (ContractionPlan::
  // epilogue_instructions): each node's body, 2 per value read from a tensor in device memory
  // (the run's element extracted and widened), 2 per 16-bit value rounded before the sink.
  for (int i = 0; i < static_cast<int>(group.nodes.size()); ++i) {
    const NodeId id = group.nodes[i];
    if (id == cid || is_operand_node(id)) continue;
    const TeNode& node = graph.node(id);
    const bool half = dtype_bytes(node.output().dtype) == 2 && is_float(node.output().dtype);
    std::set<const ExprNode*> seen;
    p.epilogue_instructions += expr_instructions(node.body(), half, seen);
    for (TensorId t : graph.node_inputs(id))
      if (!in_group(group, graph.producer(t))) p.epilogue_instructions += 2;
    if (half && i != static_cast<int>(group.nodes.size()) - 1) p.epilogue_instructions += 2;
  }

  // (A block-sparse weight among the operands widens the wgmma family's choice of tiles.)
  for (const MmaOperand* o : {&p.a, &p.b}) {
    const TensorInfo& info = graph.tensor(o->tensor);
    if (info.kind == TensorKind::weight && info.sparsity && info.sparsity->pattern == Sparsity::Pattern::block) p.block_weight = true;
  }

  // 5. Tiling. The schedule's block tile when the warp layout splits it into kMaxWarps warp
  //    tiles of kWarpTile x kWarpTile (the shape measured fastest, kernels/cuda/README.md) and it
  //    is no larger than the problem; else kDefaultBlockM x kDefaultBlockN, shrunk to the problem
  //    and until the grid covers the SMs (down to warp tiles of kMmaShape.m x 2 kMmaShape.n).
  auto cfg = group.tiles.find(cid);
  if (cfg == group.tiles.end()) cfg = group.tiles.find(group.nodes.back());
  // 5'. A product of at most kGemvMaxRows rows of dense operands: the gemv family (its form
  //     recorded, or derived), unless a tiled family is recorded or asked for (few_rows false).
  const KernelChoice& recorded_family = group.kernel;
  const bool dense = cfg == group.tiles.end() || std::holds_alternative<DenseProps>(cfg->second.kind);
  if (recorded_family.family == "gemv" ||
      (few_rows && recorded_family.family.empty() && dense && gemv_default(p))) {
    if (!dense) return fail(cat("'", c.name(), "' has a sparse tile kind (the gemv family reads dense operands only)"));
    GemvForm form;
    if (recorded_family.family == "gemv") {
      auto param = [&](const char* name) {
        const auto it = recorded_family.params.find(name);
        return static_cast<int>(it == recorded_family.params.end() ? 0 : it->second);
      };
      form = {param("warps"), param("cols"), param("unroll"), param("split_k")};
    }
    return plan_gemv(spec, p, form);
  }
  if (simt) {
    if (cfg != group.tiles.end() && !std::holds_alternative<DenseProps>(cfg->second.kind))
      return fail(cat("'", c.name(), "' has a sparse tile kind (the f32 kernel reads dense operands only)"));
    // (A recorded plan's warps and k slices are taken: no k_slices, 1.)
    const KernelChoice& recorded = group.kernel;
    SimtForm form;
    if (recorded.family == "simt" && recorded.params.count("block_m")) {
      auto param = [&](const char* name, int64_t fallback) {
        const auto it = recorded.params.find(name);
        return static_cast<int>(it == recorded.params.end() ? fallback : it->second);
      };
      form = {param("warps_m", 0), param("warps_n", 0), param("k_slices", 1)};
    }
    return plan_simt(cfg != group.tiles.end() ? cfg->second.raster_group : 1, spec, p, form);
  }
  bool from_schedule = false;
  int bm = 0, bn = 0;
  // (A flattened m -- an implicit GEMM, folded batch axes -- spans several axes of the schedule's
  // tile: the default is used.)
  if (!p.flat_m() && cfg != group.tiles.end() && !cfg->second.levels.empty()) {
    const std::vector<int64_t>& tile = cfg->second.levels.front().spatial;
    if (static_cast<int>(tile.size()) == ns) {
      const int64_t tm = tile[p.m_axis], tn = tile[p.n_axis];
      int wm = 0, wn = 0;
      if (is_pow2(tm) && is_pow2(tn) && tm <= kMaxWarps * kWarpTile && tn <= kMaxWarps * kWarpTile &&
          warp_layout(static_cast<int>(tm), static_cast<int>(tn), wm, wn) && wm * wn == kMaxWarps &&
          tm / wm == kWarpTile && tn / wn == kWarpTile && tm < 2 * ceil_pow2(p.m) && tn < 2 * ceil_pow2(p.n)) {
        bm = static_cast<int>(tm);
        bn = static_cast<int>(tn);
        from_schedule = true;
      }
    }
  }
  if (!from_schedule) {
    bm = static_cast<int>(std::clamp<int64_t>(ceil_pow2(p.m), kMmaShape.m, kDefaultBlockM));
    // (A grouped convolution's n is the group's output channels, often 8-32: its tile is as
    // narrow as an n-fragment pair, so that no group computes another's zeros.)
    const int64_t least_n = p.implicit && p.batch > 1 ? 2 * kMmaShape.n : 4 * kMmaShape.n;
    bn = static_cast<int>(std::clamp<int64_t>(ceil_pow2(p.n), least_n, kDefaultBlockN));
    auto blocks = [&] { return p.batch * ceil_div(p.m, bm) * ceil_div(p.n, bn); };
    while (blocks() < spec.compute.units && (bm > 2 * kMmaShape.m || bn > 8 * kMmaShape.n)) {
      if (bn >= bm && bn > 8 * kMmaShape.n) bn /= 2;
      else bm /= 2;
    }
  }
  if (!warp_layout(bm, bn, p.warps_m, p.warps_n)) return fail(cat("no warp layout for a ", bm, "x", bn, " block tile"));
  p.block_m = bm;
  p.block_n = bn;
  // With the schedule's tile, its K step when the pipeline takes it (whole pairs of k16 steps,
  // up to kMaxBlockK); else kBlockK.
  const std::vector<int64_t> steps = cfg != group.tiles.end() && !cfg->second.levels.empty()
                                         ? cfg->second.levels.front().reduction : std::vector<int64_t>{};
  p.block_k = from_schedule && steps.size() == 1 && (steps[0] == kBlockK || steps[0] == kMaxBlockK) ? static_cast<int>(steps[0])
                                                                                                      : kBlockK;
  p.tile_from_schedule = from_schedule;
  p.tiles_m = ceil_div(p.m, bm);
  p.tiles_n = ceil_div(p.n, bn);
  p.raster_group = static_cast<int>(std::min<int64_t>(
      p.tiles_m, cfg != group.tiles.end() && cfg->second.raster_group > 1 ? cfg->second.raster_group : kRasterGroup));
  // As many stages as fit in half an SM's shared memory (two blocks resident, so that one
  // block's barrier stalls leave the other's warps issuing), up to kMaxStages and no more than
  // the K loop has tiles; when not even two fit there, in one block's limit.
  const int64_t ktiles = ceil_div(p.k, p.block_k);
  const int64_t half_sm = std::min(spec.limits.smem_per_block_bytes, spec.limits.smem_per_sm_bytes / 2);
  const int64_t budget = 2 * stage_bytes(p) <= half_sm ? half_sm : spec.limits.smem_per_block_bytes;
  p.stages = static_cast<int>(std::clamp<int64_t>(ktiles, 2, kMaxStages));
  while (p.stages > 2 && p.stages * stage_bytes(p) > budget) --p.stages;
  p.smem_bytes = p.stages * stage_bytes(p);
  if (p.smem_bytes > spec.limits.smem_per_block_bytes)
    return fail(cat("the pipeline needs ", p.smem_bytes, " bytes of shared memory, the spec allows ", spec.limits.smem_per_block_bytes));
  if (p.threads(kMmaLanes) > spec.limits.max_threads_per_block) return fail("too many threads per block");
  if (p.blocks() >= (int64_t{1} << 31)) return fail(cat(p.blocks(), " blocks do not fit one launch"));
  // 6. Hopper: the wgmma kernel when it applies; else K split over clusters when the tiles leave
  //    SMs idle. (A block-sparse K loop walks the whole K.)
  const BlockSparseProps* sparse = cfg != group.tiles.end() ? std::get_if<BlockSparseProps>(&cfg->second.kind) : nullptr;
  const NmSparseProps* nm = cfg != group.tiles.end() ? std::get_if<NmSparseProps>(&cfg->second.kind) : nullptr;
  p.warpgroup_reason = warpgroups ? use_warpgroups(p, spec, cfg != group.tiles.end() ? cfg->second.raster_group : 1)
                                  : "the mma family's default (asked for without warpgroups)";
  if (sparse) p.split_reason = "the block-sparse K loop is not split";
  else if (nm) p.split_reason = "the 2:4 K loop is not split";
  else if (!p.warpgroup) p.split_reason = split_k(p, spec, budget, kMaxBlockK, 1);
  if (!p.warpgroup && p.split_k == 1) p.deepened = deepen_stream(p, spec);
  // 7. Parameters the schedule recorded for a tensor-core family (chosen among
  //    contraction_variants, e.g. by tuning) replace the derived ones.
  const KernelChoice& recorded = group.kernel;
  if ((recorded.family == "mma" || recorded.family == "wgmma") && recorded.params.count("block_m") &&
      contraction_params(p) != recorded.params) {
    if (std::string why = apply_recorded(p, recorded, spec); !why.empty()) return fail(why);
  }
  if (p.blocks() >= (int64_t{1} << 31)) return fail(cat(p.blocks(), " blocks do not fit one launch"));
  // 8. The block-sparse K loop.
  if (sparse)
    if (std::string why = plan_sparse(graph, cid, *sparse, p); !why.empty()) return fail(why);
  if (nm)
    if (std::string why = plan_nm(graph, cid, *nm, spec, p); !why.empty()) return fail(why);
  return ContractionMatch{p, ""};
}

GroupPlan mma_group_plan(const GroupPlan& generic, const ContractionPlan& c) {
  GroupPlan plan = inlined_launch_plan(generic, c.blocks(), c.threads(generic.warp));
  for (NodePlan& np : plan.nodes) np.writes_global = np.role == NodeRole::sink;
  plan.num_tiles = c.tiles();
  plan.cluster_blocks = c.split_k * c.cluster_m * c.cluster_n;
  plan.persistent_grid = c.persistent > 0;
  plan.sink_tile[c.m_axis] = c.block_m;
  plan.sink_tile[c.merged_n ? plan.sink_tile.size() - 1 : c.n_axis] = c.block_n;
  plan.grid = c.batch_extents;
  plan.grid.push_back(c.tiles_m);
  plan.grid.push_back(c.tiles_n);
  plan.pool_bytes = c.smem_bytes;
  TESSEL_ASSERT(generic.outputs.size() == 1, "an mma group writes only its sink");
  if (c.nm_sparse) {
    plan.derived.push_back({DerivedBuffer::Kind::nm_values, c.b.tensor, c.nm_view});
    plan.derived.push_back({DerivedBuffer::Kind::nm_metadata, c.b.tensor, c.nm_view});
  }
  if (c.nm_wgmma) {
    // The 2:4 wgmma kernel (device/wgmma.cuh's SparseWarpgroupGemm): X's block_m x 64 boxes (the
    // dense kernel's A), W's compressed values (n rows of k_pad / 2, boxes of the block's 128
    // rows x 32: 64-byte rows, 64-byte swizzle) and the metadata (ceil(n / 16) rows of k_pad
    // 16-bit elements, boxes of the block's 8 x 64: one K tile, unswizzled) from the derived buffers.
    const int64_t kc = c.nm_view.k_pad / 2, meta_rows = ceil_div(c.n, kMmaShape.m), meta_cols = c.nm_view.k_pad / kSpInstK * kSpMetaElems;
    // (A cluster's blocks copy block_m / cluster_n rows of X each, for both.)
    plan.tensor_maps.push_back(
        TensorMapParam{c.a.tensor, c.m, c.k, c.a.ld, c.block_m / c.cluster_n, kWgRowElems, {}, {}, c.a.offset, {}, {}, -1, kWgRowBytes});
    plan.tensor_maps.push_back(TensorMapParam{c.b.tensor, c.n, kc, kc, c.block_n, kWgRowElems / 2, {}, {}, 0, {}, {}, 0, kWgRowBytes / 2});
    plan.tensor_maps.push_back(TensorMapParam{c.b.tensor, meta_rows, meta_cols, meta_cols, c.block_n / kMmaShape.m,
                                              c.block_k / kSpInstK * kSpMetaElems, {}, {}, 0, {}, {}, 1, 0});
  }
  if (c.warpgroup) {
    // A: rows m, k contiguous, one box of the block's rows per stage; B: rows n (k contiguous)
    // in one box of the block's columns, or rows k in boxes of 64 columns (device/wgmma.cuh).
    // A batched product's maps have the batch axes the operand is not broadcast over as outer
    // dimensions, in C's order (the kernel's TileAt coordinates, emit_mma.cpp).
    auto map = [&](const MmaOperand& o, int64_t rows, int64_t cols, int box_rows) {
      TensorMapParam m{o.tensor, rows, cols, o.ld, box_rows, kWgRowElems, {}, {}, o.offset, {}, {}};
      for (size_t b = 0; b < c.batch_axes.size(); ++b)
        if (o.batch_strides[b] != 0) {
          m.batch_extents.push_back(c.batch_extents[b]);
          m.batch_strides.push_back(o.batch_strides[b]);
        }
      return m;
    };
    if (c.conv_box) {
      // A box-tiled convolution (contraction_plan.h): A's map is the input's dimensions innermost
      // first, boxes of 64 channels and, along a dimension reading output axis a, box<a> points
      // m_coeff apart (its element stride); B's has the taps as its outer dimension, so a box of
      // 64 channels of one tap reads zeros past the channels.
      const int dims = static_cast<int>(c.a_gather.size());
      auto points = [&](const GatherDim& g) -> int64_t {
        for (size_t i = 0; i < c.m_axes.size(); ++i)
          if (g.m_axis >= 0 && c.m_axes[i] == g.m_axis) return c.box_tiles[i];
        return 1;
      };
      auto step = [](const GatherDim& g) { return static_cast<int>(g.m_axis >= 0 ? g.m_coeff : 1); };
      const GatherDim& ch = c.a_gather[dims - 1];
      const GatherDim& d1 = c.a_gather[dims - 2];
      TensorMapParam a{c.a.tensor, d1.extent, ch.extent, d1.stride, static_cast<int>(points(d1) * step(d1)), kWgRowElems,
                       {}, {}, 0, {}, {}};
      a.element_strides = {1, step(d1)};
      for (int d = dims - 3; d >= 0; --d) {
        const GatherDim& g = c.a_gather[d];
        a.batch_extents.push_back(g.extent);
        a.batch_strides.push_back(g.stride);
        a.batch_box.push_back(static_cast<int>(points(g) * step(g)));
        a.element_strides.push_back(step(g));
      }
      plan.tensor_maps.push_back(a);
      // (Dimensions in increasing strides: (channels, taps, n) when k is contiguous, boxes of one tap
      // and block_n rows; else (n, channels, taps), boxes of 64 x 64.)
      const int64_t channels = c.k_extents.back();
      if (c.b.k_contiguous) {
        TensorMapParam b{c.b.tensor, c.taps, channels, channels, 1, kWgRowElems, {c.n}, {c.b.ld}, 0, {}, {}};
        b.batch_box = {c.block_n};
        plan.tensor_maps.push_back(b);
      } else {
        plan.tensor_maps.push_back(
            TensorMapParam{c.b.tensor, channels, c.n, c.b.ld, kWgRowElems, kWgRowElems, {c.taps}, {channels * c.b.ld}, 0, {}, {}});
      }
      return plan;
    }
    plan.tensor_maps.push_back(map(c.a, c.m, c.k, c.block_m));
    // (A cluster sharing B copies block_n / cluster_m rows of it per block.)
    if (c.b.k_contiguous) plan.tensor_maps.push_back(map(c.b, c.n, c.k, c.block_n / c.cluster_m));
    else plan.tensor_maps.push_back(map(c.b, c.k, c.n, kWgRowElems));
  }
  return plan;
}

std::string print_mma_operand(const OpGraph& graph, const char* name, const MmaOperand& o) {
  std::string s = cat(name, " = ", graph.tensor(o.tensor).name, " (", o.k_contiguous ? "k contiguous" : "k strided", ", ld ", o.ld);
  if (!o.batch_strides.empty()) {
    s += ", batch strides ";
    for (size_t i = 0; i < o.batch_strides.size(); ++i) s += cat(i ? "x" : "", o.batch_strides[i]);
  }
  if (o.offset != 0) s += cat(", from element ", o.offset);
  if (o.align < kChunkElems) s += cat(", read ", o.align, " elements at a time");
  return s + ")";
}

std::string contraction_operand(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, NodeId c, int slot,
                                int own, int other, const std::vector<int>& batch_axes, const char* which, MmaOperand& out,
                                std::vector<NodeId>& via) {
  std::string why;
  const std::optional<Traced> t = trace_operand(graph, group, generic, c, slot, why);
  if (!t) return why;
  const TeNode& node = graph.node(c);
  if (std::string r = operand_view(graph, node, *t, own, other, node.num_spatial(), batch_axes, which, out); !r.empty()) return r;
  // (The attention kernels copy whole 16-byte chunks: device/flash.cuh's TileCopy, tensor maps.)
  if (out.align < kChunkElems)
    return cat(which, " ('", graph.tensor(out.tensor).name, "') has rows, batch strides or a start that are not multiples of ",
               kChunkElems, " elements (16-byte chunks)");
  via.insert(via.end(), t->via.begin(), t->via.end());
  return "";
}

std::string print_contraction_plan(const OpGraph& graph, const ContractionPlan& p) {
  const TeNode& cn = graph.node(p.node);
  auto operand = [&](const char* name, const MmaOperand& o) {
    if (p.implicit && &o == &p.a) {
      std::string s = cat(name, " = ", graph.tensor(o.tensor).name, " gathered [");
      for (size_t i = 0; i < p.a_gather.size(); ++i) {
        const GatherDim& g = p.a_gather[i];
        std::string e;
        if (g.m_axis >= 0) e += cat(g.m_coeff == 1 ? "" : cat(g.m_coeff, "*"), cn.axes()[g.m_axis].name);
        if (g.k_axis >= 0) e += cat(e.empty() ? "" : " + ", g.k_coeff == 1 ? "" : cat(g.k_coeff, "*"), cn.axes()[g.k_axis].name);
        if (g.offset != 0 || e.empty()) e += e.empty() ? cat(g.offset) : cat(g.offset < 0 ? " - " : " + ", std::abs(g.offset));
        s += cat(i ? ", " : "", e, g.check ? "?" : "");
      }
      return s + "] (? : zero outside)";
    }
    return print_mma_operand(graph, name, o);
  };
  auto axes = [&](const std::vector<int>& list) {
    std::string s = "(";
    for (size_t i = 0; i < list.size(); ++i) s += cat(i ? "," : "", cn.axes()[list[i]].name);
    return s + ")";
  };
  const std::string shape = p.implicit ? cat("implicit GEMM m", axes(p.m_axes), " ", p.m, " x n ", p.n, " x k", axes(p.k_axes), " ", p.k)
                   : p.flat_m() ? cat("m", axes(p.m_axes), " ", p.m, " x ", p.n, " x ", p.k, " (batch folded into m)")
                                       : cat(p.batch, " x ", p.m, "x", p.n, "x", p.k);
  std::string boxes;
  if (p.conv_box) {
    boxes = "; read in boxes of ";
    for (size_t i = 0; i < p.box_tiles.size(); ++i) boxes += cat(i ? "x" : "", p.box_tiles[i]);
    boxes += cat(" output points ", axes(p.m_axes), ", ", p.tiles_m, " m tiles, K tiles ", p.taps, " taps x ", p.k_chunks, " chunks of ",
                 p.block_k, " channels");
  }
  if (p.warpgroup)
    return cat("tensor cores (wgmma m64n", p.block_n, "k16 ", dtype_name(p.dtype), ", TMA): '", cn.name(), "' ", shape, boxes, "; ",
               operand("A", p.a), ", ", operand("B", p.b), "; block ", p.block_m, "x", p.block_n, "x", p.block_k, ", ",
               p.warpgroups, " warpgroups (1 producer), ", p.stages, " stages, ", p.smem_bytes,
               " bytes of shared memory, raster group ", p.raster_group,
               p.persistent > 0 ? cat("; persistent grid of ", p.persistent, p.pingpong ? ", consumers in ping-pong" : "",
                                      p.cluster_m > 1 ? cat(", clusters of ", p.cluster_m, " sharing B") : std::string())
                                : std::string(),
               p.split_k > 1 ? cat("; K's ", p.k_tiles(), " tiles split in ", p.split_k, " parts over a cluster") : std::string());
  if (p.gemv)
    return cat("CUDA cores, few rows (fused multiply-adds, ", dtype_name(p.dtype), "): '", cn.name(), "' ", shape, "; ", operand("A", p.a), ", ",
               operand("B", p.b), "; blocks of ", p.block_n, " columns, ", p.warps_m, " warps",
               p.b.k_contiguous ? cat(" of ", p.gemv_cols, " columns each, lanes along k") : std::string(" splitting K, lanes along n"),
               "; each lane requests ", p.gemv_unroll * p.gemv_cols, " vectors of ", p.gemv_vec, " elements of B before multiplying; ", p.smem_bytes,
               " bytes of shared memory for the sums",
               p.split_k > 1 ? cat("; K's ", ceil_div(p.k, p.block_k), " steps of ", p.block_k, " split in ", p.split_k, " parts over a cluster")
                             : std::string(),
               p.split_reason.empty() ? "" : cat("; K not split: ", p.split_reason));
  return cat(p.nm_wgmma    ? cat("sparse tensor cores (wgmma.sp m64n", p.block_m, "k32 ")
             : p.nm_sparse ? std::string("sparse tensor cores (mma.sp m16n8k32 ")
             : p.simt      ? std::string("CUDA cores (fused multiply-adds, ")
                           : std::string("tensor cores (mma.sync m16n8k16 "),
             dtype_name(p.dtype), "): '",
             cn.name(), "' ", shape, "; ", operand("A", p.a), ", ", operand("B", p.b),
             p.nm_sparse ? cat(" 2:4 sparse, read compressed (", p.nm_view.k_pad / 2, " values and ", p.nm_view.k_pad / kSpInstK,
                               " metadata steps per row)") : std::string(), "; block ", p.block_m, "x",
             p.block_n, "x", p.block_k, p.tile_from_schedule ? " (the schedule's)" : " (default)", ", warps ", p.warps_m, "x",
             p.warps_n, ", ", p.stages, " stages, ", p.smem_bytes, " bytes of shared memory, raster group ", p.raster_group,
             p.split_k > 1 ? cat("; K's ", ceil_div(p.k, p.block_k), " tiles split in ", p.split_k, " parts over a cluster") : std::string(),
             p.sparse_operand >= 0 ? cat("; block-sparse ", p.sparse_operand == 0 ? "A" : "B", ": ", p.sparse_tiles.size(), " of ",
                                         (p.sparse_ptr.size() - 1) * ceil_div(p.k, p.block_k), " K tiles walked (density ",
                                         p.sparse_density, ")") : std::string(),
             p.split_reason.empty() ? "" : cat("; K not split: ", p.split_reason),
             p.deepened.empty() ? "" : cat("; ", p.deepened),
             p.warpgroup_reason.empty() ? "" : cat("; wgmma not used: ", p.warpgroup_reason));
}

}  // namespace tessel::cuda
