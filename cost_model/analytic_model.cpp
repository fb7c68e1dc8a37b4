// The analytic cost model (see analytic_model.h and docs/cost-model.md for the formulas).
//
// Steps:
//   1. Compute: FLOPs of every node over the peak of the units that run it.
//   2. Parallelism: blocks, blocks resident per SM/core (limits from the spec), waves, occupancy;
//      wave quantization stretches the compute time.
//   3. Memory: per LevelTile of every node, the traffic from the level outward (tile_traffic.h);
//      inputs from outside the group come from device memory through the last-level cache, whose
//      reuse across the blocks of a wave decides how much of that traffic reaches DRAM;
//      intermediates live at their edge level.
//   4. Latency = launch overhead + the largest of the compute and per-level times.
#include "cost_model/analytic_model.h"
#include "cost_model/cpu_loops.h"

#include "cost_model/group_footprint.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "tilegraph/attention_pattern.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

namespace {

bool is_contraction(const TeNode& node) {
  if (node.combiner() != Combiner::sum || node.num_reduction() == 0) return false;
  const Expr& b = node.body();
  if (b.op() != ExprOp::mul) return false;
  auto leaf = [](const Expr& e) {
    return e.op() == ExprOp::input || (e.op() == ExprOp::cast && e.operands()[0].op() == ExprOp::input);
  };
  return leaf(b.operands()[0]) && leaf(b.operands()[1]);
}

DType input_dtype(const TeNode& node) {
  return node.inputs().empty() ? node.output().dtype : node.inputs()[0].type.dtype;
}

// The level the outermost tiles load from: the outermost level that is not host memory.
int device_level_index(const HwSpec& spec) {
  for (int i = static_cast<int>(spec.memory_levels.size()) - 1; i >= 0; --i)
    if (spec.memory_levels[i].scope != MemoryScope::host) return i;
  TESSEL_ASSERT(false, "hardware spec '", spec.name, "' has no device memory level");
}

// The shared hardware cache just inside device memory (L2 on GPUs, L3 on CPUs), or -1.
int last_level_cache_index(const HwSpec& spec, int device) {
  const int i = device - 1;
  if (i < 0) return -1;
  const MemoryLevel& l = spec.memory_levels[i];
  return l.cache && l.cache->shared ? i : -1;
}

// The per-SM level a window's repeated reads come through: a cached SM-scoped level where the spec
// has one (an L1), else the SM's software-managed level after the registers (shared memory: the
// same array as L1 on the GPUs the shipped specs describe); -1 when neither exists.
int sm_cache_index(const HwSpec& spec) {
  for (int i = 0; i < static_cast<int>(spec.memory_levels.size()); ++i)
    if (spec.memory_levels[i].scope == MemoryScope::sm && spec.memory_levels[i].cache) return i;
  for (int i = 1; i < static_cast<int>(spec.memory_levels.size()); ++i)
    if (spec.memory_levels[i].scope == MemoryScope::sm && spec.memory_levels[i].software_managed) return i;
  return -1;
}

bool is_gpu(const HwSpec& spec) { return spec.kind == "gpu"; }

// The fraction of the roofline the group's kernel family reaches (HwSpec's family_efficiency;
// 1 when the spec does not say), noted in the breakdown when it is not 1.
// An mma or wgmma group whose contraction is 2:4 sparse runs a sparse tensor-core kernel
// (kernels/cuda/device/mma.cuh's SparseBlockGemm, wgmma.cuh's SparseWarpgroupGemm), fitted on its
// own as "mma_sparse" or "wgmma_sparse" where the spec lists it.
// A block-sparse one (the block_sparse kind: its K loop walks a list of tiles) likewise as
// "mma_block_sparse" or "wgmma_block_sparse".
double family_efficiency(const HwSpec& spec, const ScheduledGroup& group, CostBreakdown& out) {
  std::string family = group.kernel.family;
  if (family == "mma" || family == "wgmma")
    for (const auto& [n, cfg] : group.tiles) {
      if (std::holds_alternative<NmSparseProps>(cfg.kind) && spec.compute.family_efficiency.count(family + "_sparse")) family += "_sparse";
      else if (std::holds_alternative<BlockSparseProps>(cfg.kind) && spec.compute.family_efficiency.count(family + "_block_sparse"))
        family += "_block_sparse";
    }
  auto it = spec.compute.family_efficiency.find(family);
  if (it == spec.compute.family_efficiency.end()) return 1;
  out.notes.push_back(cat("the ", family, " family reaches ", it->second, " of the roofline on ", spec.name,
                          " (measured: the spec's family_efficiency)"));
  return it->second;
}

// Issue slots per element of an operand whose rows start at odd elements (a_align or b_align 1):
// device/mma.cuh's TileCopy loads each 16-bit element and packs it into a 32-bit word.
constexpr double kOddRowIssuesPerElement = 2;
// The widest global read of the tiled contraction kernels' copies: a 16-byte cp.async chunk.
constexpr int64_t kWholeReadBytes = 16;
// Registers a tensor-core kernel's thread holds besides its f32 accumulators: operand fragments,
// addresses and loop state (an estimate of the code device/mma.cuh and wgmma.cuh compile to).
constexpr int64_t kContractionBaseRegisters = 40;
// Elements of one row a tensor-core kernel's thread holds side by side in its accumulator fragment
// (mma.sync's and wgmma's c0, c1), which its epilogue reads a side input by. (H100, 2026-11-26,
// same machine: fusing a residual add into a 1x1 convolution's epilogue made the ResNet block
// 0.114 -> 0.147 ms, the SwiGLU product into the up projection 2.05 -> 2.17 ms.)
constexpr int64_t kEpilogueElementsPerAccess = 2;
// Issue slots per output element of a wgmma kernel's epilogue, at one SM's SIMT instruction rate
// (the f32 peak over 2, over the SMs): rounding the accumulators into the consumer's slab, reading
// them back along rows, the epilogue's value functions and side reads, the stores, and the slab's
// barriers, with the few warps of a warpgroup issuing them (device/wgmma.cuh's store_slab).
// Fitted, with the constants below, on 16 GEMMs of the op sweep in 3 forms each (cooperative
// 128- and 256-wide tiles, ping-pong; H100 SXM, 2026-11-27d, experiments/wgmma_variants): the
// model's pick is the fastest form for 12 of the 16, 1.02x the fastest in geomean (the constants
// of the earlier epilogue, stored from the fragments: 4 of 16, 1.09x).
constexpr double kWgEpilogueIssuesPerOutput = 48;
// What an epilogue's nodes add to a tensor-core kernel beyond a plain store, in issue slots of the
// SIMT units (the f32 peak over 2): kEpilogueIssuesPerInstruction per instruction the CUDA backend
// counts in the code it emits (the family parameter `epilogue_instructions`: exp and reciprocal
// approximations, 16-bit conversions, arithmetic), and for the wgmma kernel
// kWgStreamedReadIssues per element of a full-size side input (the other half of a gated
// product, a residual), whose loads each slab waits for. Fitted on two epilogues, H200,
// 2026-11-30 (experiments/epilogue_fusion/runs/h200-2026-11-30, ncu kernel times): BERT's
// bias + GELU (4096 x 768 x 3072; 18 instructions beyond the bias) costs what the GELU's own
// vector kernel costs, and LLaMA's SwiGLU in the up projection (4096 x 4096 x 11008; 14
// instructions, the gate read in full) 0.088 ms over the plain GEMM.
constexpr double kEpilogueIssuesPerInstruction = 1.6;
constexpr double kWgStreamedReadIssues = 42;
// A ping-pong consumer stores its 128 x 128 tile alone, two 64-row slabs in turn, where the
// cooperative form's two consumers store one each: its epilogue takes this many times the
// cooperative one's (fitted with the rest).
constexpr double kWgPingpongEpilogueFactor = 3;
// The 128 x 256 cooperative form ran at this fraction of the rate the model gives it relative to
// the 128 x 128 form (fitted with the rest; 11 of the 16 GEMMs ran faster with 128-wide tiles,
// whose operand panels the model prices 1.3x the 256-wide ones' through the L2; the cause of the
// difference was not profiled).
constexpr double kWgWideTileEfficiency = 0.9;
constexpr int64_t kWgWideTileBlockN = 256;  // the wide form's block_n (kernels/cuda/contraction_plan.cpp)
// A 64-row wgmma block has one consumer warpgroup (kernels/cuda/contraction_plan.h). Alone on an
// SM its main loop runs at this fraction of the rate of the two-consumer block's (one warpgroup
// waiting on its own wgmmas and barriers, where two overlap), and its epilogue, issued by half
// the warps, takes as long as a 128-row tile's.
constexpr double kWgLoneConsumerEfficiency = 0.75;
constexpr int64_t kWgTwoConsumerBlockM = 128;  // the two-consumer block's block_m
constexpr int64_t kWgPairedMaxBlockN = 128;    // a one-consumer block wider than this runs one per SM
constexpr int64_t kWgPairedBlocks = 2;         // a narrower one at most this many (its launch bound)
// The wgmma kernel's shared memory besides its stages (kernels/cuda/contraction_plan.h): an
// epilogue slab of 64 rows of 128 16-bit values per consumer (one per 64 block rows), two 8-byte
// mbarriers a stage, one 1024-byte swizzle atom of alignment slack.
constexpr int64_t kWgInstM = 64, kWgEpiSlabBytes = 64 * 128 * 2, kWgMbarrierBytes = 8, kWgAtomBytes = 1024;
// A wgmma K split: each block's two cluster barriers and the reduce-scatter of the partial sums
// through distributed shared memory, (S - 1) / S of a tile's f32 sums read per block at this
// rate (fitted with the rest, on 9 GEMMs split 1, 2, 4 and 8 ways).
constexpr double kWgSplitBarrierSeconds = 4e-6;
// The 2:4 wgmma kernel (kernels/cuda/contraction_plan.h's nm_wgmma, device/wgmma.cuh's
// SparseWarpgroupGemm) runs the recorded tile transposed -- block_n rows of A by block_m columns
// of B -- and, where the spec has clusters and B has at least two such column tiles, the blocks of
// a cluster of this many read each A panel once between them (TMA multicast).
constexpr int64_t kWgSparseCluster = 2;
constexpr double kWgSplitReduceBytesPerSecond = 25.6e9;

// Multiply-adds' time per accumulator that the CPU micro-kernel's block-sparse walk spends at each
// block it multiplies: the block table's check and the K loop's restart. Fitted on this project's
// 2-core VM (AVX-512; experiments/sparse/runs/cpu-2026-11-29-sparse-b, interleaved): at walked
// densities of 0.5-0.9, sparse over dense time was about density x (1 + 10 / block_k) (per point
// 2-15); without it the model picked the sparse kernel where it ran 0.89-0.90x of dense.
constexpr double kCpuSparseBlockRestartFmas = 10;

// Instructions per point of a row kernel's serial reduction: the multiply-add, the load of each
// of its two operands and the loop's step (an estimate of the row path's code, emit_row.cpp).
constexpr double kRowDotInstructionsPerPoint = 4;

// The unit a contiguous run is rounded up to when data moves out of `source`: a banked level
// feeding per-thread (inner) tiles is accessed one bank word at a time; otherwise the level's
// transaction (sector, cache line).
int64_t access_granularity(const MemoryLevel& source, bool to_inner_tile) {
  if (to_inner_tile && source.banks > 0 && source.bank_width_bytes > 0) return source.bank_width_bytes;
  return std::max<int64_t>(source.transaction_bytes, 1);
}

int64_t bytes_of(const TensorType& t) { return t.num_elements() * dtype_bytes(t.dtype); }

}  // namespace

bool uses_tensor_cores(const TeNode& node, const LevelTile& tile, const HwSpec& spec, std::string* reason) {
  auto no = [&](const std::string& why) {
    if (reason) *reason = why;
    return false;
  };
  if (!is_contraction(node)) return no("not a sum of products");
  const DType dt = input_dtype(node);
  // The matrix units' f32 mode is TF32 (10-bit mantissa): not the f32 arithmetic the node asks for.
  if (dt == DType::f32) return no("the tensor cores' f32 mode is TF32, less precise than f32");
  auto peak = spec.compute.tensor_peak_tflops.find(dt);
  if (peak == spec.compute.tensor_peak_tflops.end() || peak->second <= 0)
    return no(cat("no tensor-core peak for ", dtype_name(dt), " in ", spec.name));
  auto shapes = spec.compute.tensor_core_shapes.find(dt);
  if (shapes == spec.compute.tensor_core_shapes.end() || shapes->second.empty())
    return no(cat("no tensor-core instruction shape for ", dtype_name(dt)));
  const int ns = node.num_spatial();
  const int64_t n = ns >= 1 ? tile.spatial[ns - 1] : 1;
  const int64_t m = ns >= 2 ? tile.spatial[ns - 2] : 1;
  const int64_t k = tile.reduction.back();
  for (const MmaShape& s : shapes->second)
    if (m % s.m == 0 && n % s.n == 0 && k % s.k == 0) return true;
  const MmaShape& s = shapes->second.front();
  return no(cat("tile ", m, "x", n, "x", k, " is not a multiple of an instruction shape such as ", s.m, "x",
                s.n, "x", s.k));
}

int reduction_split(int64_t tiles, int64_t k_steps, int64_t min_steps, const HwSpec& spec, int64_t per_unit) {
  const int64_t slots = spec.compute.units * std::max<int64_t>(per_unit, 1);
  if (!is_gpu(spec) || tiles >= slots || spec.limits.max_cluster_blocks < 2) return 1;
  // One wave: no unit gets more parts than it runs at once, so each part is a slot's whole share.
  int split = 1;
  while (2 * split <= spec.limits.max_cluster_blocks && tiles * 2 * split <= slots &&
         k_steps / (2 * split) >= std::max<int64_t>(min_steps, 1))
    split *= 2;
  return split;
}

double simt_issue_slots(const HwSpec& spec) {
  const double lanes_per_clock = spec.peak_flops(DType::f32, false) / 2.0 /
                                 (static_cast<double>(spec.compute.units) * spec.compute.clock_ghz * 1e9);
  return spec.compute.clock_ghz > 0 && spec.compute.simd_width > 0 ? std::max(1.0, lanes_per_clock / spec.compute.simd_width) : 1.0;
}

double in_flight_rate(const HwSpec& spec, double bytes_in_flight) {
  const MemoryLevel& level = spec.memory_levels[device_level_index(spec)];
  const double bandwidth = level.bandwidth_gbps * 1e9;
  return level.loaded_latency_ns > 0 ? std::min(bandwidth, bytes_in_flight / (level.loaded_latency_ns * 1e-9)) : bandwidth;
}

double pipeline_bytes_in_flight(const HwSpec& spec, const OperandPipeline& p) {
  const double resident = static_cast<double>(std::min(p.blocks, std::max<int64_t>(p.per_unit, 1) * spec.compute.units));
  const double tile = static_cast<double>((p.rows_a + p.cols_b) * p.block_k * p.element_bytes);
  return resident * static_cast<double>(std::clamp<int64_t>(p.stages - 1, 1, std::max<int64_t>(p.k_tiles, 1))) * tile;
}

double gemv_bytes_in_flight(const HwSpec& spec, const GemvStream& s) {
  const double resident = static_cast<double>(std::min(s.blocks, std::max<int64_t>(s.per_unit, 1) * spec.compute.units));
  return resident * static_cast<double>(s.threads * s.vectors * s.vector_bytes);
}

namespace {

// The slowest of `compute_s` and each level's bytes over its bandwidth (scaled by the `active`
// fraction of the units): sets out.bound and out.memory, returns that time.
double bound_time(const std::vector<std::pair<const MemoryLevel*, double>>& levels, double compute_s, double active,
                  CostBreakdown& out) {
  out.bound = "compute";
  double worst = compute_s;
  for (const auto& [level, bytes] : levels) {
    const double seconds = bytes / (level->bandwidth_gbps * 1e9 * active);
    out.memory.push_back({level->name, bytes, seconds});
    if (seconds > worst) worst = seconds, out.bound = level->name;
  }
  return worst;
}

// The streamed attention kernel as recorded (estimate_streamed): SIMT issue slots per score for the
// softmax (scale, mask, maximum, exponent, sum, conversion to the P operand and the kernel's
// bookkeeping, not overlapped with the tensor cores), and the serial chain of a block: cycles per
// wave of blocks (prologue, Q's tile, the epilogue) and per chunk of keys a block walks (its
// copies' latency and its dependent steps; what bounds a one-warp decode block). Fitted by
// experiments/cost_model_fidelity/attention_fit.py --fit on the 72 attention instances of the op
// sweep measured on an H200 (experiments/notebook/h200-2026-11-29c, call 1), with the H200 spec:
// predicted / measured geomean 1.03, RMS of its log 0.256, 41 of 72 within 25%, Spearman 0.970
// (the tensor-core-only price before: geomean 0.59, RMS 0.70, 8 of 72 within 25%, Spearman 0.950).
// Fitted on half of the source models, the other half's RMS was 0.277.
constexpr double kFlashIssuesPerScore = 8;
constexpr double kFlashBlockCycles = 5940;  // 3 us at 1.98 GHz
constexpr double kFlashChunkCycles = 3960;

// A streamed attention group (group_footprint.h's StreamedAttention): the two contractions on the
// tensor cores and the softmax's per-score work on the SIMT units; each block reads its Q tile
// once and every key and value of its batch point (through the last-level cache, which keeps a
// batch point's K and V for the blocks sharing it), and reads each side input of the score steps
// (a mask) once per score; device memory sees every input once and the output once.
CostBreakdown estimate_streamed(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec, const StreamedAttention& a) {
  CostBreakdown out;
  double compute_s = 0;  // the "compute" term
  const int device = device_level_index(spec);
  const int llc = last_level_cache_index(spec, device);
  const MemoryLevel& dram = spec.memory_levels[device];
  const DType dt = graph.node(a.scores).inputs()[0].type.dtype;
  double tc_peak = spec.peak_flops(dt, true), simt_peak = spec.peak_flops(DType::f32, false);
  TESSEL_ASSERT(simt_peak > 0, "hardware spec '", spec.name, "' has no f32 peak");
  out.tensor_cores = tc_peak > 0;
  if (tc_peak <= 0) tc_peak = simt_peak;
  auto in_group = [&](NodeId n) { return std::find(group.nodes.begin(), group.nodes.end(), n) != group.nodes.end(); };
  // The share of (query block, key chunk) pairs the kernel visits: a constant mask can exclude
  // whole chunks (attention_pattern.h's key ranges); and the tensor-core work of the padded head
  // tiles (a head of 40 in tiles of 64).
  // The visited pairs' share of them that are plain (attention_pattern.h: the steps reading a
  // side input are identities there, and the kernel scores them without those reads).
  double visited = 1, plain = 0;
  std::vector<NodeId> plain_steps;
  const std::optional<AttentionPattern> pattern = match_attention(graph, a.out);
  TESSEL_ASSERT(pattern.has_value(), "a streamed group's sink is an attention pattern");
  if (const std::optional<AttentionKeyRanges> r = attention_key_ranges(graph, *pattern, a.rows, a.chunk)) {
    const int64_t pairs = static_cast<int64_t>(r->first.size()) * r->chunks;
    visited = static_cast<double>(r->visited()) / static_cast<double>(pairs);
    if (r->skipped() > 0)
      out.notes.push_back(cat("the mask excludes ", r->skipped(), " of ", pairs, " (query block, key chunk) pairs per batch point: not visited"));
    if (r->plain() > 0 && r->visited() > 0) {
      plain = static_cast<double>(r->plain()) / static_cast<double>(r->visited());
      plain_steps = r->plain_steps;
      out.notes.push_back(cat(r->plain(), " of the ", r->visited(), " visited pairs per batch point are read without the mask"));
    }
  }
  double side_bytes = 0, compulsory = 0;
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    const double flops = static_cast<double>(node.flops()) * visited;
    out.flops += flops;
    const double padded = n == a.scores ? static_cast<double>(a.d_tile) / static_cast<double>(a.d)
                          : n == a.out  ? static_cast<double>(a.dv_tile) / static_cast<double>(a.dv)
                                        : 1.0;
    compute_s += flops * padded / (n == a.scores || n == a.out ? tc_peak : simt_peak);
    for (size_t k = 0; k < node.inputs().size(); ++k) {
      const TensorId t = graph.node_inputs(n)[k];
      const NodeId p = graph.producer(t);
      if (p >= 0 && in_group(p)) continue;
      compulsory += static_cast<double>(bytes_of(node.inputs()[k].type));
      // Side inputs of the score steps are read once per score (Q, K and V are below).
      if (n != a.scores && n != a.out && node.inputs()[k].type.num_elements() > 1) {
        const bool skipped_where_plain = std::find(plain_steps.begin(), plain_steps.end(), n) != plain_steps.end();
        side_bytes += static_cast<double>(a.batch * a.queries * a.keys * dtype_bytes(node.inputs()[k].type.dtype)) * visited *
                      (skipped_where_plain ? 1 - plain : 1);
      }
    }
  }
  const LimitSpec& lim = spec.limits;
  const std::map<std::string, int64_t>& kp = group.kernel.params;
  if (group.kernel.family == "flash" && kp.count("rows") && kp.count("chunk") && kp.count("threads") && kp.count("key_chunks")) {
    // The kernel the planner recorded (kernels/cuda/attention_plan.h): its block rows (16 for a
    // one-warp decode block, 128 for the Hopper kernel), chunk, threads, key split over a cluster
    // and query heads folded into the rows. Per block, the scores it computes (padded rows
    // included) on the tensor cores and kFlashIssuesPerScore SIMT issue slots each for the
    // softmax, in turn (not overlapped), and a serial chain of kFlashChunkCycles per chunk on
    // top of kFlashBlockCycles per wave of blocks (fitted: the file comment at the constants).
    const int64_t rows = std::max<int64_t>(1, kp.at("rows")), chunk = std::max<int64_t>(1, kp.at("chunk"));
    const int64_t threads = std::max<int64_t>(1, kp.at("threads"));
    const int64_t fold = kp.count("fold") ? std::max<int64_t>(1, kp.at("fold")) : 1;
    const int64_t splits = kp.count("splits") ? std::max<int64_t>(1, kp.at("splits")) : 1;
    const int64_t key_split = kp.count("key_split") ? std::max<int64_t>(1, kp.at("key_split")) : 1;
    const int64_t d_tile = kp.count("d_tile") ? kp.at("d_tile") : a.d_tile, dv_tile = kp.count("dv_tile") ? kp.at("dv_tile") : a.dv_tile;
    const int64_t points = std::max<int64_t>(1, a.batch / fold);  // batch points (key/value heads)
    const int64_t tiles_m = std::max<int64_t>(1, (a.queries * fold + rows - 1) / rows);
    const int64_t key_chunks = kp.at("key_chunks");  // visited (query block, key chunk) pairs per point
    const double scores = static_cast<double>(points) * static_cast<double>(key_chunks) * static_cast<double>(rows * chunk);
    const double tc_s = scores * 2.0 * static_cast<double>(d_tile + dv_tile) / tc_peak;
    const double softmax_s = scores * kFlashIssuesPerScore / (simt_peak / 2);
    StreamedAttention k = a;
    k.rows = rows, k.chunk = chunk, k.threads = threads, k.d_tile = d_tile, k.dv_tile = dv_tile;
    if (kp.count("stages")) k.stages = kp.at("stages");
    k.key_split = key_split;
    int64_t per_sm = std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / threads);
    if (k.smem_bytes() > 0) per_sm = std::min(per_sm, lim.smem_per_sm_bytes / k.smem_bytes());
    per_sm = std::max<int64_t>(per_sm, 1);
    out.blocks = points * tiles_m * splits;
    out.blocks_per_unit = per_sm;
    out.occupancy = static_cast<double>(per_sm * threads) / static_cast<double>(lim.max_threads_per_sm);
    const int64_t concurrent = per_sm * spec.compute.units;
    out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(concurrent));
    const double quantized = out.waves * static_cast<double>(concurrent) / static_cast<double>(std::max<int64_t>(out.blocks, 1));
    compute_s = (tc_s + softmax_s) * quantized;
    const double active =
        std::min(1.0, static_cast<double>(std::min(out.blocks, concurrent)) / static_cast<double>(spec.compute.units));
    const double written = static_cast<double>(bytes_of(graph.tensor(graph.node_output(a.out)).type));
    const double streamed = static_cast<double>(points * tiles_m) *
                                (static_cast<double>(splits * rows * a.d) +
                                 static_cast<double>(key_chunks) / static_cast<double>(tiles_m) * static_cast<double>(chunk * (a.d + a.dv))) *
                                static_cast<double>(a.elem_bytes) +
                            side_bytes + written;
    std::vector<std::pair<const MemoryLevel*, double>> levels{{&dram, compulsory + written}};
    if (llc >= 0) levels.push_back({&spec.memory_levels[llc], streamed});
    double worst = bound_time(levels, compute_s, active, out);
    // K and V stream from device memory at most at the rate the blocks' rings keep in flight
    // (in_flight_rate, Little's law; a stage holds a chunk of K's d_tile and V's dv_tile columns).
    const int64_t block_chunks = std::max<int64_t>(1, key_chunks / (tiles_m * splits * key_split));
    const double in_flight =
        pipeline_bytes_in_flight(spec, {out.blocks, per_sm, k.stages, block_chunks, d_tile, dv_tile, chunk * key_split, a.elem_bytes});
    const double rate = in_flight_rate(spec, in_flight);
    if (const double stream_s = compulsory / rate; stream_s > worst) {
      worst = stream_s;
      out.bound = dram.name;
      out.notes.push_back(cat(static_cast<int64_t>(in_flight), " B of keys and values in flight: ", dram.name, " streams them at ",
                              rate * 1e-9, " GB/s (Little's law, ", dram.loaded_latency_ns, " ns loaded latency)"));
    }
    // (A key split's warps walk a block's chunks side by side: its chain is the steps of a stage.)
    const double cycle_s = 1e-9 / spec.compute.clock_ghz;
    const double chain_s =
        out.waves *
        (kFlashBlockCycles + static_cast<double>(key_chunks) / static_cast<double>(tiles_m * splits * key_split) * kFlashChunkCycles) *
        cycle_s;
    out.term_ref("chain") = chain_s;
    if (chain_s > worst) worst = chain_s, out.bound = "latency";
    out.notes.push_back(cat("streamed attention as recorded: ", rows, " query rows per block, chunks of ", chunk, " keys, ", threads,
                            " threads", key_split > 1 ? cat(" (", key_split, " warps on their own chunks of a stage)") : std::string(),
                            splits > 1 ? cat(", keys split over clusters of ", splits) : std::string(),
                            fold > 1 ? cat(", ", fold, " query heads per key/value head in the rows") : std::string()));
    const double launch_s = spec.compute.launch_overhead_us * 1e-6;
    out.term_ref("compute") = compute_s;
    out.term_ref("launch") = launch_s;
    out.latency_s = launch_s + worst / family_efficiency(spec, group, out);
    return out;
  }
  const int64_t regs = (a.register_bytes_per_thread() + 3) / 4;
  int64_t per_sm = std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / std::max<int64_t>(a.threads, 1));
  if (a.smem_bytes() > 0) per_sm = std::min(per_sm, lim.smem_per_sm_bytes / a.smem_bytes());
  if (regs > 0) per_sm = std::min(per_sm, lim.registers_per_sm / (regs * a.threads));
  // Few blocks and many keys: the kernel splits the keys over a cluster (flash-decoding), as a
  // contraction splits K, filling the units' block slots.
  const int split = reduction_split(a.blocks(), (a.keys + a.chunk - 1) / a.chunk, 2, spec, std::max<int64_t>(per_sm, 1));
  if (split > 1) out.notes.push_back(cat("the keys split over clusters of ", split, " blocks"));
  out.blocks = a.blocks() * split;
  out.blocks_per_unit = std::max<int64_t>(per_sm, 1);
  out.occupancy = static_cast<double>(out.blocks_per_unit * a.threads) / static_cast<double>(lim.max_threads_per_sm);
  const int64_t concurrent = out.blocks_per_unit * spec.compute.units;
  out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(concurrent));
  if (out.blocks > 0) compute_s *= out.waves * static_cast<double>(concurrent) / static_cast<double>(out.blocks);
  const double active =
      std::min(1.0, static_cast<double>(std::min(out.blocks, concurrent)) / static_cast<double>(spec.compute.units));
  const double written = static_cast<double>(bytes_of(graph.tensor(graph.node_output(a.out)).type));
  const double streamed =
      static_cast<double>(a.blocks()) * (static_cast<double>(split * a.rows * a.d) + visited * static_cast<double>(a.keys * (a.d + a.dv))) *
      static_cast<double>(a.elem_bytes);
  std::vector<std::pair<const MemoryLevel*, double>> levels{{&dram, compulsory + written}};
  if (llc >= 0) levels.push_back({&spec.memory_levels[llc], streamed + side_bytes + written});
  const double worst = bound_time(levels, compute_s, active, out);
  out.notes.push_back(cat("streamed attention: ", a.rows, " query rows per block, keys in chunks of ", a.chunk,
                          ", scores and probabilities in registers"));
  const double launch_s = spec.compute.launch_overhead_us * 1e-6;
  out.term_ref("compute") = compute_s;
  out.term_ref("launch") = launch_s;
  out.latency_s = launch_s + worst / family_efficiency(spec, group, out);
  return out;
}

// A group emitted by the vector family with its plan recorded (KernelChoice params vec, threads,
// blocks; kernels/cuda/vector_plan.h): every thread computes `vec` consecutive elements of the
// sink, holding the group's values in registers, so the schedule's tiles do not apply (the same
// for the transpose family, a copy through shared-memory tiles read and written whole):
//   - compute: every node's FLOPs on the SIMT units (f32 arithmetic), and the recorded
//     `recomputed_flops` of the nodes the kernel recomputes where they are read (an upper bound:
//     each at every point of the sink, their own domains' FLOPs counted too);
//   - device memory: every input once, the outputs once;
//   - a window's taps come through L1 (the same array as shared memory: priced at its level):
//     each read of a window node moves its element once per domain point (reduction points
//     included), except a read that does not move along the node's last spatial axis -- a grouped
//     window's input, shared by the vector's elements -- once per `vec` points.
CostBreakdown estimate_vector_plan(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  CostBreakdown out;
  const int device = device_level_index(spec);
  const MemoryLevel& dram = spec.memory_levels[device];
  const double simt_peak = spec.peak_flops(DType::f32, false);
  TESSEL_ASSERT(simt_peak > 0, "hardware spec '", spec.name, "' has no f32 peak");
  const int64_t vec = group.kernel.params.count("vec") ? std::max<int64_t>(1, group.kernel.params.at("vec")) : 1;
  const int64_t threads = std::max<int64_t>(1, group.kernel.params.at("threads"));
  // Nodes recomputed where they are read (the kernel's recorded FLOPs for them, at every point of
  // the sink) on the SIMT units, on top of every node's own FLOPs below.
  const double recomputed =
      group.kernel.params.count("recomputed_flops") ? static_cast<double>(std::max<int64_t>(0, group.kernel.params.at("recomputed_flops"))) : 0;
  auto in_group = [&](NodeId n) { return std::find(group.nodes.begin(), group.nodes.end(), n) != group.nodes.end(); };
  double compute_s = recomputed / simt_peak, compulsory = 0, written = 0, window_bytes = 0;
  out.flops += recomputed;
  std::set<TensorId> read;  // device memory sees each tensor once, however many nodes read it
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    out.flops += static_cast<double>(node.flops());
    compute_s += static_cast<double>(node.flops()) / simt_peak;
    double points = 1;
    for (const auto& axis : node.axes()) points *= static_cast<double>(axis.extent);
    for (size_t k = 0; k < node.inputs().size(); ++k) {
      const TensorId t = graph.node_inputs(n)[k];
      const NodeId p = graph.producer(t);
      if (p >= 0 && in_group(p)) continue;
      if (read.insert(t).second) compulsory += static_cast<double>(bytes_of(node.inputs()[k].type));
      if (node.num_reduction() == 0 || node.num_spatial() == 0) continue;
      const bool shared = !node.inputs()[k].map.uses_axis(node.num_spatial() - 1);
      window_bytes += points * dtype_bytes(node.inputs()[k].type.dtype) / (shared ? static_cast<double>(vec) : 1.0);
    }
    const TensorId result = graph.node_output(n);
    bool leaves = n == group.nodes.back();
    for (TensorId o : graph.outputs()) leaves |= o == result;
    for (NodeId c : graph.consumers(result)) leaves |= !in_group(c);
    if (leaves) written += static_cast<double>(bytes_of(graph.tensor(result).type));
  }
  const LimitSpec& lim = spec.limits;
  out.blocks = group.kernel.params.count("blocks") ? group.kernel.params.at("blocks") : 1;
  out.blocks_per_unit = std::max<int64_t>(1, std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / threads));
  out.occupancy = static_cast<double>(out.blocks_per_unit * threads) / static_cast<double>(lim.max_threads_per_sm);
  const int64_t concurrent = out.blocks_per_unit * spec.compute.units;
  out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(concurrent));
  const double active =
      std::min(1.0, static_cast<double>(std::min(out.blocks, concurrent)) / static_cast<double>(spec.compute.units));
  compute_s /= active;
  std::vector<std::pair<const MemoryLevel*, double>> levels{{&dram, compulsory + written}};
  if (const int l1 = sm_cache_index(spec); l1 >= 0 && window_bytes > 0) levels.push_back({&spec.memory_levels[l1], window_bytes});
  const double worst = bound_time(levels, compute_s, active, out);
  out.notes.push_back(group.kernel.family == "transpose"
                          ? std::string("tiled transpose: input and output once, each along its contiguous axis; priced as the recorded plan")
                          : cat("vector kernel: ", vec, " elements per thread, values in registers; priced as the recorded plan"));
  const double launch_s = spec.compute.launch_overhead_us * 1e-6;
  out.term_ref("compute") = compute_s;
  out.term_ref("launch") = launch_s;
  out.latency_s = launch_s + worst / family_efficiency(spec, group, out);
  return out;
}

// The slowest of `compute_s` and the levels' times: sets out.bound and out.memory (the levels in
// the spec's order), returns that time.
double slowest_level(const HwSpec& spec, double compute_s, const std::vector<LevelCost>& levels, CostBreakdown& out) {
  out.bound = "compute";
  double worst = compute_s;
  for (const MemoryLevel& level : spec.memory_levels)
    for (const LevelCost& l : levels)
      if (l.level == level.name) {
        out.memory.push_back(l);
        if (l.seconds > worst) worst = l.seconds, out.bound = l.level;
      }
  return worst;
}

// A recorded kernel parameter, or `fallback` where it is absent or not positive.
int64_t positive_param(const std::map<std::string, int64_t>& params, const char* name, int64_t fallback) {
  const auto it = params.find(name);
  return it == params.end() || it->second <= 0 ? fallback : it->second;
}

// A contraction group emitted by a tiled family whose plan is recorded (mma, wgmma, or simt -- f32
// on the CUDA cores, priced at the f32 peak; KernelChoice params block_m, block_n, block_k,
// stages, split_k, and warpgroups or warps_m x warps_n): the
// kernel's own block tile, not the schedule's, decides the grid, the waves, the occupancy and the
// traffic, so they are priced from the plan (kernels/cuda/contraction_plan.h):
//   - tiles = batch x ceil(m / block_m) x ceil(n / block_n), each split in split_k parts over K;
//   - compute: the busiest SM's blocks (ceil(blocks / SMs): blocks spread over the SMs first)
//     times a block's padded FLOPs, over one SM's share of the tensor peak;
//   - every block reads its block_m x K and K x block_n operand panels through the last-level
//     cache; DRAM sees each operand once while a wave's panels fit the cache, the epilogue's side
//     inputs once, the output once;
//   - occupancy from the pipeline's shared memory (stages x (block_m + block_n) x block_k) and the
//     accumulators' registers.
// The epilogue's elementwise work runs on the SIMT units.
CostBreakdown estimate_contraction_plan(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec, NodeId c) {
  const std::map<std::string, int64_t>& p = group.kernel.params;
  auto param = [&](const char* name, int64_t fallback) { return positive_param(p, name, fallback); };
  const TeNode& node = graph.node(c);
  const int ns = node.num_spatial();
  const bool implicit = param("implicit", 0) > 0;
  const int64_t bm = param("block_m", 128), bn = param("block_n", 128), bk = param("block_k", 32);
  const int64_t stages = param("stages", 2), split = param("split_k", 1);
  // (The simt family's k slices: each slice's warps hold the whole tile's accumulators.)
  const int64_t k_slices = param("k_slices", 1);
  const int64_t threads = p.count("warpgroups") ? param("warpgroups", 1) * 4 * spec.compute.simd_width
                                                : param("warps_m", 1) * param("warps_n", 1) * k_slices * spec.compute.simd_width;
  const auto extent = [&](int a) { return node.axes()[a].extent; };
  int64_t n = ns >= 1 ? extent(ns - 1) : 1, m = 1, batch = 1, k = 1;
  // Batch axes that B is broadcast over fold into m (the kernels' batch folding: a [batch, seq,
  // hidden] projection is one product of batch x seq rows, contraction_plan.h).
  bool fold = node.inputs().size() >= 2;
  for (int a = 0; fold && a + 2 < ns; ++a) fold = !node.inputs()[1].map.uses_axis(a);
  // (An implicit GEMM's output axes both operands read -- a grouped convolution's groups -- are
  // batch axes: one product per group.)
  for (int a = 0; a + 1 < ns; ++a) {
    const bool grouped = implicit && node.inputs().size() >= 2 && node.inputs()[0].map.uses_axis(a) && node.inputs()[1].map.uses_axis(a);
    ((implicit && !grouped) || (!implicit && (fold || a == ns - 2)) ? m : batch) *= extent(a);
  }
  for (int r = 0; r < node.num_reduction(); ++r) k *= extent(ns + r);
  const DType dt = input_dtype(node);
  const int64_t in_bytes = dtype_bytes(dt);
  // A box-tiled convolution on the wgmma kernel (kernels/cuda/contraction_plan.h) records its box
  // (box<a>: output points per tile along output axis a) and its K tiles (taps x 64-channel
  // chunks): its tiles cover the box grid, padded at each output edge, and K to whole chunks.
  int64_t tiles_m = (m + bm - 1) / bm;
  bool boxed = false;
  for (int a = 0; a + 1 < ns; ++a)
    if (p.count(cat("box", a))) boxed = true;
  if (boxed) {
    tiles_m = 1;
    for (int a = 0; a + 1 < ns; ++a) {
      const int64_t t = std::min(param(cat("box", a).c_str(), 1), std::max<int64_t>(extent(a), 1));
      tiles_m *= (extent(a) + t - 1) / t;
    }
  }
  const int64_t k_tiles = std::min(param("k_tiles", 0), std::max<int64_t>(k, 1));  // (a recorded value is at most K)
  const int64_t tiles = batch * tiles_m * ((n + bn - 1) / bn);

  CostBreakdown out;
  // The simt family (f32) runs the same pipeline with fused multiply-adds on the CUDA cores.
  const bool simt_family = group.kernel.family == "simt";
  out.tensor_cores = !simt_family;
  out.blocks = tiles * split;
  const int64_t units = spec.compute.units;
  const LimitSpec& lim = spec.limits;
  int64_t smem = stages * (bm + bn) * bk * in_bytes;
  // The wgmma kernel's shared memory also holds an epilogue slab per consumer, two mbarriers a
  // stage and a swizzle atom of alignment slack (kernels/cuda/contraction_plan.h,
  // wgmma_smem_bytes), and the driver reserves the spec's per-SM less its per-block shared memory
  // for each block: 64 x 64 blocks of 6 stages fit one an SM, not two.
  if (group.kernel.family == "wgmma")
    smem += bm / kWgInstM * kWgEpiSlabBytes + stages * 2 * kWgMbarrierBytes + kWgAtomBytes +
            std::max<int64_t>(lim.smem_per_sm_bytes - lim.smem_per_block_bytes, 0);
  // Accumulators in f32 spread over the threads, plus operand fragments and addresses.
  const int64_t regs = std::min<int64_t>(lim.max_registers_per_thread, bm * bn * k_slices / std::max<int64_t>(threads, 1) + kContractionBaseRegisters);
  int64_t per_sm = std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / std::max<int64_t>(threads, 1));
  if (smem > 0) per_sm = std::min(per_sm, lim.smem_per_sm_bytes / smem);
  if (regs > 0) per_sm = std::min(per_sm, lim.registers_per_sm / (regs * threads));
  // (A 64-row wgmma block wider than kWgPairedMaxBlockN is launched for one block per SM, a
  // narrower one for at most two: its launch bound gives each thread 128 registers.)
  if (group.kernel.family == "wgmma" && bm < kWgTwoConsumerBlockM) per_sm = std::min<int64_t>(per_sm, bn > kWgPairedMaxBlockN ? 1 : kWgPairedBlocks);
  out.blocks_per_unit = std::max<int64_t>(per_sm, 1);
  out.occupancy = static_cast<double>(out.blocks_per_unit * threads) / static_cast<double>(lim.max_threads_per_sm);
  out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(out.blocks_per_unit * units));

  // Compute: the busiest SM's share of the padded block FLOPs at one SM's share of the peak.
  const double peak = simt_family ? spec.peak_flops(DType::f32, false) : spec.peak_flops(dt, true);
  TESSEL_ASSERT(peak > 0, "hardware spec '", spec.name, "' has no ", simt_family ? "f32" : "tensor-core", " peak for ", dtype_name(dt));
  const int64_t k_part = k_tiles > 0 ? (k_tiles + split - 1) / split * bk : (k + split - 1) / split;
  const double block_flops = 2.0 * static_cast<double>(bm * bn) * static_cast<double>((k_part + bk - 1) / bk * bk);
  const double per_unit_blocks = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(units));
  // A block-sparse operand (the block_sparse tile kind): each tile walks only the K tiles whose
  // block of the sparse operand holds a non-zero, a fraction `density` of them on average.
  double density = 1;
  int sparse_input = -1;
  // A 2:4 sparse operand (the nm_sparse tile kind): the sparse tensor cores multiply n of every m
  // values of it (twice the dense rate for 2:4), and it is read compressed: n / m of its values
  // plus metadata_bits per kept value.
  double nm_work = 1, nm_bytes = 1;
  int nm_input = -1;
  if (auto cfg = group.tiles.find(c); cfg != group.tiles.end()) {
    if (const auto* bsr = std::get_if<BlockSparseProps>(&cfg->second.kind)) {
      density = bsr->density;
      sparse_input = bsr->input;
    }
    if (const auto* nm = std::get_if<NmSparseProps>(&cfg->second.kind); nm && nm->m > 0) {
      nm_input = nm->input;
      nm_work = static_cast<double>(nm->n) / static_cast<double>(nm->m);
      nm_bytes = nm_work * (1.0 + static_cast<double>(nm->metadata_bits) / (8.0 * static_cast<double>(in_bytes)));
    }
  }
  double compute_s = per_unit_blocks * density * nm_work * block_flops / (peak / static_cast<double>(units));
  // On the CUDA cores a warp issues one instruction a clock: an SM with fewer warps resident than
  // its schedulers (simt_issue_slots) reaches that share of its peak.
  if (simt_family) {
    const double warps = std::min(per_unit_blocks, static_cast<double>(out.blocks_per_unit)) *
                         static_cast<double>(threads) / static_cast<double>(spec.compute.simd_width);
    const double slots = simt_issue_slots(spec);
    if (warps < slots) {
      compute_s *= slots / std::max(warps, 1.0);
      out.notes.push_back(cat(warps, " warps an SM issue from ", slots, " schedulers"));
    }
  }
  out.flops = density * nm_work * static_cast<double>(node.flops());
  // An operand whose rows do not start 16-byte aligned is read in narrower pieces (a_align,
  // b_align: elements per read, device/mma.cuh's TileCopy): one issue per read, and where rows
  // start at odd elements a load and a packing step per element; on the SIMT issue slots, at an
  // SM's share of the f32 FMA rate, serial with the block's mma.sync issues.
  const double simt_issue = spec.peak_flops(DType::f32, false) / 2 / static_cast<double>(units);
  // (align counts elements of the operand's dtype: kWholeReadBytes of them need no narrower read;
  // the simt family's single f32 element is a 4-byte cp.async, not the 16-bit load-and-pack path.)
  const int64_t whole_read = kWholeReadBytes / in_bytes;
  for (const auto& [key, rows] : {std::pair<const char*, int64_t>{"a_align", bm}, {"b_align", bn}}) {
    const int64_t align = param(key, 0);
    if (align <= 0 || align >= whole_read || simt_issue <= 0) continue;
    const double elements = static_cast<double>(rows) * static_cast<double>((k_part + bk - 1) / bk * bk);
    const double issues = align == 1 && !simt_family ? kOddRowIssuesPerElement * elements : elements / static_cast<double>(align);
    compute_s += per_unit_blocks * density * issues / simt_issue;
    out.notes.push_back(cat(key[0] == 'a' ? "A" : "B", " is read ", align, " elements at a time (rows not 16-byte aligned)"));
  }
  // The epilogue on the SIMT units; its side inputs read once.
  const double simt = spec.peak_flops(DType::f32, false);
  double side_bytes = 0;
  auto in_group = [&](NodeId x) { return std::find(group.nodes.begin(), group.nodes.end(), x) != group.nodes.end(); };
  // A side input as large as the output (a residual, the other half of a gated product) is read
  // the way the accumulators lie: kEpilogueElementsPerAccess elements of a row per access, each
  // access a whole transaction of the device level (a bias vector is reread from cache).
  const int device_level = device_level_index(spec);
  const int64_t out_elements = graph.node(group.nodes.back()).output().num_elements();
  const int64_t transaction = std::max<int64_t>(spec.memory_levels[device_level].transaction_bytes, 1);
  double epilogue_reads = 0;  // what those accesses move
  double streamed_elements = 0;  // elements of the full-size side inputs
  std::set<TensorId> streamed;
  // (The wgmma kernel reads them along rows from its epilogue slab: whole transactions.)
  const bool row_epilogue = group.kernel.family == "wgmma";
  // In-group copies that only feed the contraction's operands (a Transpose, a Reshape of a whole
  // tensor) are read through by the operand views (kernels/cuda/contraction_plan.cpp's
  // trace_operand): no work and no side input of their own; the operand's bytes are counted once
  // below.
  std::set<NodeId> operand_copies;
  {
    std::vector<NodeId> todo;
    for (TensorId t : graph.node_inputs(c)) todo.push_back(graph.producer(t));
    while (!todo.empty()) {
      const NodeId x = todo.back();
      todo.pop_back();
      if (x < 0 || !in_group(x) || operand_copies.count(x)) continue;
      const TeNode& e = graph.node(x);
      if (e.num_reduction() != 0 || e.inputs().size() != 1 || e.inputs()[0].is_gather() || e.body().op() != ExprOp::input) continue;
      const std::vector<NodeId> readers = graph.consumers(graph.node_output(x));
      if (readers.size() != 1) continue;
      operand_copies.insert(x);
      todo.push_back(graph.producer(graph.node_inputs(x)[0]));
    }
  }
  for (NodeId x : group.nodes) {
    if (x == c || operand_copies.count(x)) continue;
    const TeNode& e = graph.node(x);
    out.flops += static_cast<double>(e.flops());
    if (simt > 0) compute_s += static_cast<double>(e.flops()) / simt;
    for (size_t i = 0; i < e.inputs().size(); ++i) {
      const NodeId prod = graph.producer(graph.node_inputs(x)[i]);
      if (prod >= 0 && in_group(prod)) continue;
      const TensorType& t = e.inputs()[i].type;
      side_bytes += static_cast<double>(bytes_of(t));
      // (A tensor read by several nodes is loaded once: emit_mma.cpp's shared slots.)
      if (t.num_elements() >= out_elements && streamed.insert(graph.node_inputs(x)[i]).second)
        streamed_elements += static_cast<double>(t.num_elements());
      if (!row_epilogue && t.num_elements() >= out_elements) {
        const int64_t access = kEpilogueElementsPerAccess * dtype_bytes(t.dtype);
        epilogue_reads += static_cast<double>(bytes_of(t)) * static_cast<double>(std::max<int64_t>(transaction / access, 1) - 1);
      }
    }
  }
  if (epilogue_reads > 0)
    out.notes.push_back(cat("the epilogue reads its full-size side inputs ", kEpilogueElementsPerAccess,
                            " elements per access: ", static_cast<int64_t>(epilogue_reads), " B more than once each"));
  // DRAM reads the sparse operand's non-zero blocks only; the dense one is needed by some tile
  // almost everywhere.
  const double a_scale = nm_input == 0 ? nm_bytes : 1.0, b_scale = nm_input == 1 ? nm_bytes : 1.0;
  const double a_bytes = static_cast<double>(bytes_of(node.inputs()[0].type)) * (sparse_input == 0 ? density : 1.0) * a_scale;
  const double b_bytes = static_cast<double>(bytes_of(node.inputs()[1].type)) * (sparse_input == 1 ? density : 1.0) * b_scale;
  const double written = static_cast<double>(bytes_of(graph.node(group.nodes.back()).output()));
  // Operand panels through the cache: each tile reads block_m x K of A and K x block_n of B; the
  // split parts add their f32 partial sums through the cluster. The 2:4 wgmma kernel's tile is
  // the recorded one transposed, its A panels shared by a cluster where B has the column tiles
  // (kWgSparseCluster). (A dense wgmma cluster sharing B, cluster_m, reads half the B panels; it
  // ran 1.5-2.8x slower than the unshared kernels until its releases became CTA-scope arrives,
  // and then 0.98-1.02x them (H200, experiments/sparse/runs/h200-2026-12-01-nm-tma/
  // call7_dense_cluster): the model does not credit that sharing, so it never ranks it first;
  // --tune can still measure it.)
  const bool nm_wgmma = nm_input >= 0 && group.kernel.family == "wgmma";
  const int64_t panel_a = nm_wgmma ? bn : bm, panel_b = nm_wgmma ? bm : bn;
  const double a_share =
      nm_wgmma && spec.limits.max_cluster_blocks >= kWgSparseCluster && (n + panel_b - 1) / panel_b >= kWgSparseCluster ? 1.0 / kWgSparseCluster : 1.0;
  if (a_share < 1) out.notes.push_back(cat("the 2:4 kernel's clusters of ", kWgSparseCluster, " blocks read each A panel once"));
  const double panels = density * static_cast<double>(tiles) *
                        (static_cast<double>(panel_a) * a_scale * a_share + static_cast<double>(panel_b) * b_scale) * static_cast<double>(k) *
                        static_cast<double>(in_bytes);
  const double partials = split > 1 ? static_cast<double>(tiles * (split - 1) * bm * bn * 4) : 0;
  const int device = device_level_index(spec);
  const int llc = last_level_cache_index(spec, device);
  const MemoryLevel& dram = spec.memory_levels[device];
  double dram_bytes = a_bytes + b_bytes + side_bytes + epilogue_reads + written;
  const double active = std::min(1.0, static_cast<double>(out.blocks) / static_cast<double>(units));
  std::vector<LevelCost> levels;
  if (llc >= 0) {
    const MemoryLevel& cache = spec.memory_levels[llc];
    // A wave's working set: the distinct panels of its concurrent tiles. Tiles are rasterized in
    // groups of raster_group block rows, column by column, so a wave of W tiles spans about
    // min(raster, W) block rows and W / raster block columns, and its tiles share those panels.
    const int64_t tiles_n = (n + bn - 1) / bn;
    const int64_t wave = std::max<int64_t>(std::min(out.blocks, out.blocks_per_unit * units) / std::max<int64_t>(split, 1), 1);
    const int64_t raster = std::clamp<int64_t>(param("raster_group", 1), 1, tiles_m);
    int64_t rows = std::min(raster, wave), cols = std::min(tiles_n, (wave + rows - 1) / rows);
    if (wave > raster * tiles_n) rows = std::min(tiles_m, (wave + tiles_n - 1) / tiles_n), cols = tiles_n;
    const double wave_set = std::min(a_bytes + b_bytes, density * (static_cast<double>(rows * bm) * a_scale + static_cast<double>(cols * bn) * b_scale) *
                                                            static_cast<double>(k) * static_cast<double>(in_bytes));
    const double hit = wave_set > 0 ? std::min(1.0, static_cast<double>(cache.chip_capacity_bytes()) / wave_set) : 1.0;
    dram_bytes += (panels - (a_bytes + b_bytes)) * std::max(0.0, 1.0 - hit);
    const double l2_bytes = panels + partials + side_bytes + epilogue_reads + written;
    levels.push_back({cache.name, l2_bytes, l2_bytes / (cache.bandwidth_gbps * 1e9 * active)});
  }
  // Bytes in flight (Little's law, mma.sync's cp.async pipeline): each resident block keeps up
  // to stages - 1 K tiles of its operands requested (no more than its part of K has; rows of A past
  // M are not read), so the operands stream from device memory at most at those bytes per loaded
  // latency. A skinny product whose blocks each hold a shallow pipeline streams its weight well
  // below the bandwidth; deeper pipelines or more blocks (a K split) lift it. (The wgmma kernel's
  // deep TMA ring is priced with its first stages' latency instead, below.)
  double dram_s = dram_bytes / (dram.bandwidth_gbps * 1e9 * active);
  if (group.kernel.family == "mma" || simt_family) {
    const double in_flight = pipeline_bytes_in_flight(
        spec, {out.blocks, out.blocks_per_unit, stages, (k + split * bk - 1) / (split * bk), std::min(bm, m), std::min(bn, n), bk, in_bytes});
    const double rate = in_flight_rate(spec, in_flight);
    const double operands_s = std::min(a_bytes + b_bytes, dram_bytes) / rate;
    if (operands_s > dram_s) {
      dram_s = operands_s;
      out.notes.push_back(cat(static_cast<int64_t>(in_flight), " B of operands in flight: ", dram.name, " streams them at ", rate * 1e-9,
                              " GB/s (Little's law, ", dram.loaded_latency_ns, " ns loaded latency)"));
    }
  }
  levels.push_back({dram.name, dram_bytes, dram_s});
  double worst = slowest_level(spec, compute_s, levels, out);
  out.notes.push_back(cat("priced as the recorded ", group.kernel.family, " plan: block ", bm, "x", bn, "x", bk, ", ", stages,
                          " stages", split > 1 ? cat(", K split in ", split) : std::string(), ", ", tiles, " tiles"));
  if (sparse_input >= 0)
    out.notes.push_back(cat("block-sparse input ", sparse_input, ": ", density, " of its K tiles non-zero, the others skipped"));
  if (nm_input >= 0)
    out.notes.push_back(cat("N:M sparse input ", nm_input, ": ", nm_work, " of its products on the sparse tensor cores, read compressed (",
                            nm_bytes, " of its bytes)"));
  out.term_ref("compute") = compute_s;
  out.term_ref("launch") = spec.compute.launch_overhead_us * 1e-6;
  // The wgmma kernel (one block per SM, device/wgmma.cuh) runs its epilogue after each tile's
  // multiplies: the cooperative form (both consumer warpgroups on one tile) exposes every tile's
  // epilogue; the ping-pong form (a tile per consumer, taking turns) hides it behind the other
  // consumer's multiplies, exposing only what exceeds them and the last one. Each block also
  // waits a device-memory latency for its first stage: once on a persistent grid, per tile
  // otherwise.
  double exposed = 0;
  // Issue slots of one SM's SIMT units per second (the f32 peak over 2): what the epilogues cost.
  const double unit_issue = simt / 2 / static_cast<double>(units);
  if (group.kernel.family == "wgmma") {
    const double unit_peak = peak / static_cast<double>(units);
    TESSEL_ASSERT(unit_issue > 0, "hardware spec '", spec.name, "' has no f32 peak");
    const double t_main = density * nm_work * block_flops / unit_peak;
    // (A K split stores 1 / split of the tile per block: the ranks reduce-scatter the sums.)
    const double t_epilogue = static_cast<double>(std::max(bm, kWgTwoConsumerBlockM) * bn) * kWgEpilogueIssuesPerOutput / unit_issue /
                              static_cast<double>(split);
    // (The 2:4 wgmma kernel runs one tile per block, whatever the recorded wgmma plan says.)
    const bool pingpong = nm_input < 0 && param("pingpong", 0) > 0, persistent = nm_input < 0 && param("persistent", 0) > 0;
    const double t_turn = kWgPingpongEpilogueFactor * t_epilogue;
    exposed = pingpong ? t_turn + per_unit_blocks * std::max(0.0, t_turn - t_main) : per_unit_blocks * t_epilogue;
    const double fill = spec.memory_levels[device].latency_ns * 1e-9 * (persistent ? 1.0 : per_unit_blocks);
    const double reduce = split > 1 ? per_unit_blocks * (kWgSplitBarrierSeconds + static_cast<double>(bm * bn * 4) *
                                                                                       static_cast<double>(split - 1) /
                                                                                       static_cast<double>(split) /
                                                                                       kWgSplitReduceBytesPerSecond)
                                    : 0.0;
    out.term_ref("epilogue") = exposed;
    out.term_ref("fill") = fill;
    if (split > 1) out.term_ref("split reduction") = reduce;
    exposed += fill + reduce;
    out.notes.push_back(cat(pingpong ? "ping-pong consumers: " : "cooperative consumers: ", "epilogue ", t_epilogue * 1e6,
                            " us per tile (", kWgEpilogueIssuesPerOutput, " issue slots per output), ", exposed * 1e6,
                            " us exposed with the first stages' latency"));
  }
  // The epilogue's nodes beyond a plain store (kEpilogueIssuesPerInstruction): the same time for
  // both families, added outside their efficiencies, so that they compare on their main loops
  // (policy/kernel_families.cpp leaves this term out of its family switch); and the wgmma
  // kernel's waits for its full-size side inputs (kWgStreamedReadIssues). Both run after the
  // multiplies, exposed.
  // Over the busiest SM's blocks at its issue rate (a grid of fewer tiles than SMs leaves the
  // others idle); the ping-pong form's overlap of one consumer's epilogue with the other's
  // multiplies is not credited here.
  const double instructions = static_cast<double>(param("epilogue_instructions", 0));
  const double busiest = std::min(1.0, per_unit_blocks * static_cast<double>(bm * bn) / static_cast<double>(split) /
                                           static_cast<double>(std::max<int64_t>(out_elements, 1)));  // the busiest SM's share of the outputs
  const double t_nodes = unit_issue > 0 ? static_cast<double>(out_elements) * busiest * kEpilogueIssuesPerInstruction * instructions / unit_issue : 0.0;
  const double t_waits = unit_issue > 0 && group.kernel.family == "wgmma"
                             ? streamed_elements * busiest * kWgStreamedReadIssues / unit_issue : 0.0;
  if (t_nodes > 0) out.term_ref("epilogue nodes") = t_nodes;
  if (t_waits > 0) {
    out.term_ref("epilogue waits") = t_waits;
    exposed += t_waits;
  }
  if (t_nodes > 0 || t_waits > 0)
    out.notes.push_back(cat("epilogue: ", instructions, " instructions per output beyond a plain store (", t_nodes * 1e6, " us)",
                            t_waits > 0 ? cat(", ", static_cast<int64_t>(streamed_elements), " elements of full-size side inputs waited for (",
                                              t_waits * 1e6, " us)")
                                        : std::string()));
  double efficiency = family_efficiency(spec, group, out);
  if (group.kernel.family == "wgmma" && bn >= kWgWideTileBlockN) {
    efficiency *= kWgWideTileEfficiency;
    out.notes.push_back(cat(bm, " x ", bn, " tiles: ", kWgWideTileEfficiency, " of the rate of 128-wide ones (measured)"));
  }
  // A one-consumer block alone on its SM (the busiest SM's blocks one after another, or too little
  // shared memory for two at once).
  if (group.kernel.family == "wgmma" && bm < kWgTwoConsumerBlockM && std::min<double>(out.blocks_per_unit, per_unit_blocks) < 2) {
    efficiency *= kWgLoneConsumerEfficiency;
    out.notes.push_back(cat(bm, "-row tiles: one consumer warpgroup alone on an SM, ", kWgLoneConsumerEfficiency,
                            " of the two-consumer rate"));
  }
  out.latency_s = out.term("launch") + (worst + exposed) / efficiency + t_nodes;
  return out;
}

// A product of a few rows emitted by the gemv family (kernels/cuda/contraction_plan.h,
// device/gemv.cuh; KernelChoice params block_m (the rows), block_n, warps, unroll, vec, split_k,
// and cols where B is stored N x K):
//   - tiles = batch x ceil(n / block_n), each split in split_k parts over K, blocks of warps x 32
//     threads, resident per SM as threads and the sums' shared memory allow;
//   - device memory: the operands once (B dominates), the epilogue's side inputs, the output; the
//     operands no faster than the bytes the blocks keep requested allow (each lane's unroll x
//     cols vectors of vec elements: Little's law, in_flight_rate);
//   - the last-level cache: B once, A once per tile, the split's partial sums;
//   - issue slots on the CUDA cores, per element of B: a fused multiply-add per row, a widening
//     of a 16-bit element, and A's loads (a row's value per vector of B), at the f32 rate (the f32
//     peak over 2) of the SMs the blocks occupy;
//   - the epilogue's nodes on the CUDA cores, and the launch.
CostBreakdown estimate_gemv_plan(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec, NodeId c) {
  const std::map<std::string, int64_t>& p = group.kernel.params;
  auto param = [&](const char* name, int64_t fallback) { return positive_param(p, name, fallback); };
  const TeNode& node = graph.node(c);
  const int ns = node.num_spatial();
  const int64_t n = node.axes()[ns - 1].extent, rows = param("block_m", 1), bn = param("block_n", 1);
  int64_t points = 1, k = 1;
  for (int a = 0; a < ns; ++a) points *= node.axes()[a].extent;
  for (int r = 0; r < node.num_reduction(); ++r) k *= node.axes()[ns + r].extent;
  const int64_t batch = std::max<int64_t>(points / std::max<int64_t>(n * rows, 1), 1);
  const int64_t warps = param("warps", 1), unroll = param("unroll", 1), vec = param("vec", 1), split = param("split_k", 1);
  const bool k_rows = p.count("cols") > 0;  // B stored N x K
  const int64_t cols = k_rows ? param("cols", 1) : 1;
  const int64_t threads = warps * spec.compute.simd_width;
  const DType dt = input_dtype(node);
  const int64_t in_bytes = dtype_bytes(dt);
  const LimitSpec& lim = spec.limits;
  const int64_t units = spec.compute.units;
  CostBreakdown out;
  out.tensor_cores = false;
  const int64_t tiles = batch * ((n + bn - 1) / bn);
  out.blocks = tiles * split;
  const int64_t smem = (k_rows ? 1 : warps) * rows * bn * 4;
  int64_t per_sm = std::min<int64_t>(lim.max_blocks_per_sm, lim.max_threads_per_sm / std::max<int64_t>(threads, 1));
  if (smem > 0) per_sm = std::min(per_sm, lim.smem_per_sm_bytes / smem);
  out.blocks_per_unit = std::max<int64_t>(per_sm, 1);
  out.occupancy = static_cast<double>(out.blocks_per_unit * threads) / static_cast<double>(lim.max_threads_per_sm);
  out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(out.blocks_per_unit * units));
  const double active = std::min(1.0, static_cast<double>(out.blocks) / static_cast<double>(units));
  out.flops = static_cast<double>(node.flops());

  // The epilogue: its nodes' work and side inputs (read once).
  auto in_group = [&](NodeId x) { return std::find(group.nodes.begin(), group.nodes.end(), x) != group.nodes.end(); };
  const double simt = spec.peak_flops(DType::f32, false);
  TESSEL_ASSERT(simt > 0, "hardware spec '", spec.name, "' has no f32 peak");
  double side_bytes = 0, epilogue_s = 0;
  for (NodeId x : group.nodes) {
    if (x == c) continue;
    const TeNode& e = graph.node(x);
    // (In-group copies feeding the operands are read through: no work of their own.)
    if (e.num_reduction() == 0 && e.inputs().size() == 1 && !e.inputs()[0].is_gather() && e.body().op() == ExprOp::input &&
        graph.consumers(graph.node_output(x)).size() == 1 && graph.node(graph.consumers(graph.node_output(x))[0]).num_reduction() > 0)
      continue;
    out.flops += static_cast<double>(e.flops());
    epilogue_s += static_cast<double>(e.flops()) / simt;
    for (size_t i = 0; i < e.inputs().size(); ++i) {
      const NodeId prod = graph.producer(graph.node_inputs(x)[i]);
      if (prod < 0 || !in_group(prod)) side_bytes += static_cast<double>(bytes_of(e.inputs()[i].type));
    }
  }
  const double a_bytes = static_cast<double>(bytes_of(node.inputs()[0].type)), b_bytes = static_cast<double>(bytes_of(node.inputs()[1].type));
  const double operands = a_bytes + b_bytes;
  const double written = static_cast<double>(bytes_of(graph.node(group.nodes.back()).output()));
  const int device = device_level_index(spec);
  const MemoryLevel& dram = spec.memory_levels[device];
  const double dram_bytes = operands + side_bytes + written;
  double dram_s = dram_bytes / (dram.bandwidth_gbps * 1e9 * active);
  const double in_flight = gemv_bytes_in_flight(spec, {out.blocks, out.blocks_per_unit, threads, unroll * cols, vec * in_bytes});
  const double rate = in_flight_rate(spec, in_flight);
  if (operands / rate > dram_s) {
    dram_s = operands / rate;
    out.notes.push_back(cat(static_cast<int64_t>(in_flight), " B of B in flight: ", dram.name, " streams it at ", rate * 1e-9,
                            " GB/s (Little's law, ", dram.loaded_latency_ns, " ns loaded latency)"));
  }
  std::vector<LevelCost> levels;
  const int llc = last_level_cache_index(spec, device);
  if (llc >= 0) {
    const MemoryLevel& cache = spec.memory_levels[llc];
    const double partials = static_cast<double>(tiles * (split - 1) * rows * bn * 4);
    const double l2_bytes = b_bytes + static_cast<double>(tiles) * a_bytes / static_cast<double>(std::max<int64_t>(batch, 1)) + partials +
                            side_bytes + written;
    levels.push_back({cache.name, l2_bytes, l2_bytes / (cache.bandwidth_gbps * 1e9 * active)});
  }
  levels.push_back({dram.name, dram_bytes, dram_s});
  // Issue slots per element of B: rows multiply-adds, a widening (16-bit), A's row values per vector.
  const double b_elements = static_cast<double>(batch) * static_cast<double>(n) * static_cast<double>(k);  // read by the lanes
  const double issues = static_cast<double>(rows) * (1.0 + 1.0 / static_cast<double>(vec)) + (in_bytes < dtype_bytes(DType::f32) ? 1.0 : 0.0);
  const double compute_s = b_elements * issues / (simt / 2) / active;
  double worst = slowest_level(spec, compute_s, levels, out);
  out.notes.push_back(cat("priced as the recorded gemv plan: ", rows, " rows, blocks of ", bn, " columns, ", warps, " warps, ", unroll * cols,
                          " vectors of ", vec, " a lane", split > 1 ? cat(", K split in ", split) : std::string(), ", ", tiles, " tiles"));
  out.term_ref("compute") = compute_s;
  out.term_ref("launch") = spec.compute.launch_overhead_us * 1e-6;
  if (epilogue_s > 0) out.term_ref("epilogue nodes") = epilogue_s;
  out.latency_s = out.term("launch") + worst / family_efficiency(spec, group, out) + epilogue_s;
  return out;
}

// `cfg` with its register tile replaced by the CPU micro-kernel's blocking of `node` over its task
// box (the outermost tile): MR points of the m axis by NR vectors of the n axis, one reduction
// point at a time -- the blocking the group's kernel choice records for the node (`recorded`,
// cpu::blocking_param), else the one the emitter derives; nullopt when the micro-kernel does not
// take the node or the tile has no register level below another.
std::optional<TileConfig> microkernel_register_tile(const TeNode& node, const TileConfig& cfg, const HwSpec& spec,
                                                    std::optional<cpu::RegisterBlocking> recorded) {
  const std::optional<cpu::MicrokernelMatch> match = cpu::match_microkernel(node);
  if (!match || cfg.levels.size() < 2 || cfg.levels.back().level != "registers") return std::nullopt;
  const int ns = node.num_spatial();
  const LevelTile& box = cfg.levels.front();
  const std::optional<cpu::RegisterBlocking> derived = cpu::derived_register_blocking(node, box.spatial, spec);
  if (!derived) return std::nullopt;
  const cpu::RegisterBlocking b = recorded.value_or(*derived);
  auto extent = [&](int a) { return std::min(box.spatial[a], node.axes()[a].extent); };
  const int lanes = cpu::vector_lanes(spec.compute.simd_width, node.body().dtype());
  const int64_t m_box = match->m_axis >= 0 ? extent(match->m_axis) : 1;
  const int64_t n_box = extent(match->n_axis);
  TileConfig out = cfg;
  LevelTile& reg = out.levels.back();
  reg.spatial.assign(static_cast<size_t>(ns), 1);
  if (match->m_axis >= 0) reg.spatial[match->m_axis] = std::min<int64_t>(b.mr, m_box);
  reg.spatial[match->n_axis] = std::min<int64_t>(int64_t{b.nr} * lanes, n_box);
  reg.reduction.assign(static_cast<size_t>(node.num_reduction()), 1);
  return out;
}

}  // namespace

CostBreakdown AnalyticCostModel::estimate(const OpGraph& graph, const ScheduledGroup& group,
                                          const HwSpec& spec) const {
  TESSEL_ASSERT(!group.nodes.empty(), "empty group");
  if (group.stream_chunk > 0) {
    std::string why;
    const std::optional<StreamedAttention> a = streamed_attention(graph, group, &why);
    TESSEL_ASSERT(a.has_value(), "streamed group: ", why);
    return estimate_streamed(graph, group, spec, *a);
  }
  // A tensor-core family with its plan recorded: priced as that plan.
  if (is_gpu(spec) && (group.kernel.family == "mma" || group.kernel.family == "wgmma" || group.kernel.family == "simt") &&
      group.kernel.params.count("block_m") && group.kernel.params.count("block_n")) {
    NodeId c = -1;
    for (NodeId n : group.nodes)
      if (is_contraction(graph.node(n)) && (c < 0 || graph.node(n).flops() > graph.node(c).flops())) c = n;
    if (c >= 0 && graph.node(c).num_spatial() >= 1) return estimate_contraction_plan(graph, group, spec, c);
  }
  // The gemv family with its plan recorded: priced as that plan.
  if (is_gpu(spec) && group.kernel.family == "gemv" && group.kernel.params.count("block_n")) {
    NodeId c = -1;
    for (NodeId n : group.nodes)
      if (is_contraction(graph.node(n)) && (c < 0 || graph.node(n).flops() > graph.node(c).flops())) c = n;
    if (c >= 0 && graph.node(c).num_spatial() >= 1 && graph.node(c).inputs().size() >= 2) return estimate_gemv_plan(graph, group, spec, c);
  }
  // A vector family with its plan recorded: priced as that plan.
  if (is_gpu(spec) && ((group.kernel.family == "vector" && group.kernel.params.count("vec")) || group.kernel.family == "transpose") &&
      group.kernel.params.count("threads"))
    return estimate_vector_plan(graph, group, spec);
  CostBreakdown out;
  double compute_s = 0;  // the "compute" term
  const int device = device_level_index(spec);
  const int llc = last_level_cache_index(spec, device);
  const MemoryLevel& dram = spec.memory_levels[device];
  const NodeId sink = group.nodes.back();
  auto config = [&](NodeId n) -> const TileConfig& {
    auto it = group.tiles.find(n);
    TESSEL_ASSERT(it != group.tiles.end() && !it->second.levels.empty(), "no tile config for node ", n);
    return it->second;
  };
  auto in_group = [&](NodeId n) { return std::find(group.nodes.begin(), group.nodes.end(), n) != group.nodes.end(); };
  // Whether a tensor is read or written by a node outside the group (or is a graph output).
  auto leaves_group = [&](TensorId t) {
    for (TensorId o : graph.outputs())
      if (o == t) return true;
    for (NodeId c : graph.consumers(t))
      if (!in_group(c)) return true;
    return false;
  };
  // The level of an intermediate produced and consumed inside the group; without an entry, the
  // innermost level (the producer's registers).
  auto edge_level = [&](TensorId t) -> const std::string& {
    auto edge = group.edge_levels.find(t);
    return edge == group.edge_levels.end() ? spec.memory_levels.front().name : edge->second;
  };

  // Step 1: compute. The group's kernel family, when recorded (KernelChoice), says which code
  // runs: only the tensor-core families use tensor cores, and the generic family (one thread
  // per output element) issues the instructions its backend counts per point of each node's
  // iteration domain, at the SIMT units' instruction rate (the f32 FMA peak over 2).
  const std::string& family = group.kernel.family;
  const bool tc_family = family.empty() || family == "mma" || family == "wgmma";
  const auto per_point = group.kernel.params.find("instructions_per_point");
  const bool generic = family == "generic" && per_point != group.kernel.params.end();
  // The row family (kernels/cuda/row_plan.h) runs a row node's reduction as a serial loop per
  // output element -- a multiply-add and the loads of its operands per point of the domain, at
  // the SIMT instruction rate -- over its own blocks of rows_per_block rows, whatever the
  // schedule's tile says. (Measured on an H100: BERT-base's attention output projection, 128 x
  // 768 x 768, fused with its LayerNorm into a row kernel of 32 blocks took 400 us, where the
  // flop count at the f32 peak said 2 us.)
  const auto rows_per_block = group.kernel.params.find("rows_per_block");
  const bool row_family = family == "row" && rows_per_block != group.kernel.params.end() && rows_per_block->second > 0;
  double walk = 1;  // the CPU block-sparse walk's stretch of the loop (below)
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    std::string why;
    const bool tc = tc_family && uses_tensor_cores(node, config(n).levels.front(), spec, &why);
    if (!tc_family) why = cat("the group's kernel family '", family, "' has no tensor-core path");
    if (is_contraction(node) && !tc && !spec.compute.tensor_peak_tflops.empty())
      out.notes.push_back(cat("node '", node.name(), "' on SIMT units: ", why));
    out.tensor_cores |= tc;
    double peak = spec.peak_flops(input_dtype(node), tc);
    if (peak <= 0) {
      peak = spec.peak_flops(DType::f32, false);
      out.notes.push_back(cat("no peak for ", dtype_name(input_dtype(node)), "; using the f32 peak"));
    }
    TESSEL_ASSERT(peak > 0, "hardware spec '", spec.name, "' has no f32 peak");
    // The work the tile kind performs (a sparse kind skips its zeros).
    const TileConfig& cfg = config(n);
    const double flops = static_cast<double>(tile_kind_of(cfg).effective_flops(TileQuery{&node, &cfg, 0, {}}));
    out.flops += flops;
    if (generic) {
      // The points the kernel computes: each block evaluates the node over its tile (a producer
      // staged for a window over the tile with its halo), so a halo larger than the tile costs
      // what it recomputes; never fewer than the node's own points.
      double points = 1, tile_points = 1;
      for (const auto& axis : node.axes()) points *= static_cast<double>(axis.extent);
      const LevelTile& outer = cfg.levels.front();
      for (int a = 0; a < node.num_axes(); ++a)
        tile_points *= static_cast<double>(a < node.num_spatial() && a < static_cast<int>(outer.spatial.size())
                                               ? outer.spatial[a] : node.axes()[a].extent);
      const double blocks = static_cast<double>(num_spatial_tiles(graph.node(sink), config(sink).levels.front()));
      points = std::max(points, blocks * tile_points);
      const double instructions_per_s = spec.peak_flops(DType::f32, false) / 2;
      TESSEL_ASSERT(instructions_per_s > 0, "hardware spec '", spec.name, "' has no f32 peak");
      compute_s += points * static_cast<double>(per_point->second) / instructions_per_s;
    } else if (row_family && node.num_reduction() > 0 && node.inputs().size() >= 2) {
      double points = 1;
      for (const auto& axis : node.axes()) points *= static_cast<double>(axis.extent);
      const double instructions_per_s = spec.peak_flops(DType::f32, false) / 2;
      TESSEL_ASSERT(instructions_per_s > 0, "hardware spec '", spec.name, "' has no f32 peak");
      compute_s += points * kRowDotInstructionsPerPoint / instructions_per_s;
      out.notes.push_back(cat("row kernel: '", node.name(), "' reduces serially, ", kRowDotInstructionsPerPoint,
                              " instructions per domain point at the SIMT instruction rate"));
    } else {
      compute_s += flops / peak;
    }
    // The CPU micro-kernel's block-sparse walk (kernels/cpu/README.md) restarts its K loop at
    // every block it multiplies, after a check of the block table: about
    // kCpuSparseBlockRestartFmas multiply-adds' time per accumulator per block of block_k, which
    // stretches the loop whatever bounds it.
    const auto block_k = group.kernel.params.find("block_k");
    if (!is_gpu(spec) && family == "microkernel" && block_k != group.kernel.params.end() && block_k->second > 0 &&
        std::holds_alternative<BlockSparseProps>(cfg.kind)) {
      walk = std::max(walk, 1 + kCpuSparseBlockRestartFmas / static_cast<double>(block_k->second));
      out.notes.push_back(cat("block-sparse walk of '", node.name(), "': blocks of ", block_k->second, " reduction points, ", walk,
                              "x the loop's time"));
    }
  }
  if (generic)
    out.notes.push_back(cat("generic kernel: ", per_point->second, " instructions per domain point at the SIMT instruction rate"));

  // Step 2: parallelism. Footprints per block at block/SM-scoped levels and per thread at
  // thread-scoped levels.
  const TileConfig& sink_cfg = config(sink);
  out.blocks = num_spatial_tiles(graph.node(sink), sink_cfg.levels.front());
  if (row_family) {
    // The row kernel's own blocks: rows_per_block rows of the sink's last axis each, or a
    // cluster of `splits` blocks per row.
    const TeNode& sn = graph.node(sink);
    int64_t rows = 1;
    for (int a = 0; a + 1 < sn.num_spatial(); ++a) rows *= sn.axes()[a].extent;
    out.blocks = (rows + rows_per_block->second - 1) / rows_per_block->second;
    // A streamed row split over a cluster of blocks (row_plan.h's `splits`).
    const auto splits = group.kernel.params.find("splits");
    if (splits != group.kernel.params.end() && splits->second > 1) out.blocks *= splits->second;
  }
  // A tensor-core contraction whose tiles leave units idle splits its reduction over a cluster
  // (reduction_split): more blocks, each reading its part of the reduction.
  int split = 1;
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    const LevelTile& lt = config(n).levels.front();
    if (!tc_family || node.num_reduction() != 1 || lt.reduction.size() != 1 || lt.reduction[0] <= 0 ||
        !uses_tensor_cores(node, lt, spec, nullptr))
      continue;
    const int64_t extent = node.axes()[node.num_spatial()].extent;
    split = reduction_split(out.blocks, (extent + lt.reduction[0] - 1) / lt.reduction[0], config(n).pipeline_stages, spec);
    if (split > 1) out.notes.push_back(cat("'", node.name(), "' splits its reduction in ", split, " parts over a cluster"));
  }
  out.blocks *= split;
  // What the group occupies (group_footprint.h: the same accounting as the policies and
  // check_schedule).
  const GroupFootprint footprint = group_footprint(graph, group, spec);
  const int64_t threads = is_gpu(spec) ? std::max<int64_t>(footprint.threads_per_block, spec.compute.simd_width) : 1;
  const int64_t block_bytes = footprint.smem_bytes_per_block, thread_bytes = footprint.register_bytes_per_thread;
  const int64_t units = spec.compute.units;
  out.blocks_per_unit = 1;
  out.occupancy = 1;
  if (is_gpu(spec)) {
    const LimitSpec& lim = spec.limits;
    const int64_t regs_per_thread = (thread_bytes + 3) / 4;  // 32-bit registers holding the thread tiles
    if (block_bytes > lim.smem_per_block_bytes || threads > lim.max_threads_per_block ||
        regs_per_thread > lim.max_registers_per_thread) {
      out.notes.push_back(cat("does not fit: ", block_bytes, " B shared memory per block (limit ",
                              lim.smem_per_block_bytes, "), ", threads, " threads (limit ", lim.max_threads_per_block,
                              "), ", regs_per_thread, " registers per thread (limit ", lim.max_registers_per_thread, ")"));
      out.latency_s = std::numeric_limits<double>::infinity();
      out.bound = "capacity";
      return out;
    }
    int64_t per_sm = lim.max_blocks_per_sm;
    if (block_bytes > 0) per_sm = std::min(per_sm, lim.smem_per_sm_bytes / block_bytes);
    per_sm = std::min(per_sm, lim.max_threads_per_sm / threads);
    if (regs_per_thread > 0) per_sm = std::min(per_sm, lim.registers_per_sm / (regs_per_thread * threads));
    out.blocks_per_unit = std::max<int64_t>(per_sm, 1);
    out.occupancy = static_cast<double>(out.blocks_per_unit * threads) / static_cast<double>(lim.max_threads_per_sm);
  }
  const int64_t concurrent = out.blocks_per_unit * units;
  out.waves = std::ceil(static_cast<double>(out.blocks) / static_cast<double>(concurrent));
  // The generic kernel's dependent chains: a thread sums a node's reduction one step after
  // another, each step a load from the last-level cache at least, and computes its share of the
  // node's tile in turn (a staged tile of 16 points in a block of 800 threads: 16 threads each
  // walk the whole reduction while the others wait). A wave of blocks takes at least its
  // threads' chains, however few instructions they issue (measured on an H200, 2026-11-28: an SE
  // block's excite fused with its 48-wide 1x1 convolution, 2304 blocks of 800 threads, ran 0.134
  // ms where the instruction count said 0.012).
  double chain_s = 0;
  if (generic && is_gpu(spec) && llc >= 0) {
    double steps = 0;
    for (NodeId n : group.nodes) {
      const TeNode& node = graph.node(n);
      if (node.num_reduction() == 0) continue;
      const LevelTile& lt = config(n).levels.front();
      double spatial = 1, reduction = 1;
      for (int a = 0; a < node.num_axes(); ++a)
        (a < node.num_spatial() ? spatial : reduction) *=
            static_cast<double>(a < node.num_spatial() && a < static_cast<int>(lt.spatial.size()) ? std::min(lt.spatial[a], node.axes()[a].extent)
                                                                                                  : node.axes()[a].extent);
      steps += std::ceil(spatial / static_cast<double>(threads)) * reduction;
    }
    chain_s = out.waves * steps * spec.memory_levels[llc].latency_ns * 1e-9;
  }
  // The last wave leaves units idle: compute stretches by waves x concurrent / blocks.
  const double quantization = out.blocks > 0 ? out.waves * static_cast<double>(concurrent) / static_cast<double>(out.blocks) : 1;
  compute_s *= quantization;
  // Fewer busy units than the chip has draw proportionally less bandwidth.
  const double active = std::min(1.0, static_cast<double>(std::min(out.blocks, concurrent)) / static_cast<double>(units));
  // A CPU with fewer tasks than two per thread: the threads with one task fewer idle through the
  // last one, whose memory traffic then sets the time too (LLaMA-7B's decode QKV in 3 tasks on 2
  // threads ran 1.27x slower than in 6). With more tasks the pool balances them as threads free
  // up, and the compute term's quantization is all: quantizing the memory terms there as well
  // made the policy prefer one task per thread, measured 0.85-0.89x on several GEMMs and
  // convolutions (experiments/op_sweep/runs/cpu-2026-11-30-nchw/ab/ab_waves_not_adopted.csv).
  const double cpu_waves = !is_gpu(spec) && out.blocks < 2 * concurrent ? quantization : 1.0;

  // Step 3: memory traffic per level.
  std::map<std::string, double> bytes;  // level name -> bytes moved out of it
  double tile_bytes = 0, compulsory = 0, wave_set_per_block = 0, written = 0;
  int contraction = 0;  // the micro-kernel's contractions so far (cpu::blocking_param's i)
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    // The CPU micro-kernel blocks its registers itself (MR x NR vectors over the task box,
    // choose_register_blocking): its loads from the level above registers are that blocking's,
    // whatever register tile the schedule holds.
    std::optional<TileConfig> blocked;
    if (!is_gpu(spec) && family == "microkernel" && cpu::match_microkernel(node)) {
      blocked = microkernel_register_tile(node, config(n), spec, cpu::recorded_register_blocking(group.kernel, contraction));
      ++contraction;
    }
    const TileConfig& cfg = blocked ? *blocked : config(n);
    for (size_t i = 0; i < cfg.levels.size(); ++i) {
      const LevelTile& lt = cfg.levels[i];
      const MemoryLevel& source = i == 0 ? dram : spec.level(cfg.levels[i - 1].level);
      const TrafficParams params{access_granularity(source, i > 0), 0, cfg.pipeline_stages};
      const TileTraffic t = tile_kind_of(cfg).traffic(node, lt, params, cfg.kind);
      if (i > 0) {
        // Inner tiles load from the outer tile's level what that level holds (group_footprint.h):
        // staged inputs and intermediates kept there; register edges are already in the thread,
        // and unstaged inputs come straight from device memory (priced at the outer level).
        const bool staged = stages_inputs(graph, group, n, spec);
        double moved = 0;
        for (size_t k = 0; k < node.inputs().size(); ++k) {
          const std::string level = edge_level_of(graph, group, graph.node_inputs(n)[k]);
          if (level.empty() ? staged : level == source.name) moved += static_cast<double>(t.input_bytes[k]);
        }
        // A GPU thread writes its output tile from registers unless an edge keeps it at `source`.
        const bool mapped = is_gpu(spec) && !cfg.threads.empty();
        const std::string out_level = edge_level_of(graph, group, graph.node_output(n));
        if (out_level.empty() ? !mapped : out_level == source.name)
          moved += static_cast<double>(t.output_bytes);
        bytes[source.name] += moved;
        continue;
      }
      for (size_t k = 0; k < node.inputs().size(); ++k) {
        const TensorId tensor = graph.node_inputs(n)[k];
        const NodeId producer = graph.producer(tensor);
        if (producer >= 0 && in_group(producer)) {
          // Read from the edge's level; with an inner tile, that read is the inner tile's load.
          const std::string& level = edge_level(tensor);
          if (spec.level(level).scope != MemoryScope::thread && cfg.levels.size() == 1)
            bytes[level] += static_cast<double>(t.input_bytes[k]);
          continue;
        }
        tile_bytes += static_cast<double>(t.input_bytes[k]);
        // (A gather reads the rows its indices name, not the whole table: read_region.)
        compulsory += node.inputs()[k].is_gather()
                          ? static_cast<double>(num_elements(bounding_box(read_region(node, static_cast<int>(k), DomainTile::whole(node)))) *
                                                dtype_bytes(node.inputs()[k].type.dtype))
                          : static_cast<double>(bytes_of(node.inputs()[k].type));
        // What one block reads of this input over its whole reduction loop.
        const DomainTile whole = representative_tile(node, lt, /*whole_reduction=*/true);
        wave_set_per_block += static_cast<double>(num_elements(bounding_box(read_region(node, static_cast<int>(k), whole))) *
                                                  dtype_bytes(node.inputs()[k].type.dtype)) / split;
      }
      const TensorId result = graph.node_output(n);
      if (n == sink || leaves_group(result)) {
        written += static_cast<double>(t.output_bytes);
      } else {
        const std::string& level = edge_level(result);
        if (spec.level(level).scope != MemoryScope::thread) bytes[level] += static_cast<double>(t.output_bytes);
      }
    }
  }
  // Last-level cache: blocks of one wave share what they read; if a wave's working set fits, each
  // input byte comes from DRAM once (compulsory traffic), otherwise the excess spills.
  double dram_bytes = tile_bytes;
  if (llc >= 0) {
    const MemoryLevel& cache = spec.memory_levels[llc];
    const double wave_set = std::min(compulsory, wave_set_per_block * static_cast<double>(concurrent));
    const double hit = wave_set > 0 ? std::min(1.0, static_cast<double>(cache.chip_capacity_bytes()) / wave_set) : 1.0;
    dram_bytes = std::min(tile_bytes, compulsory + (tile_bytes - compulsory) * (1.0 - hit));
    bytes[cache.name] += tile_bytes + written;
    if (tile_bytes > compulsory)
      out.notes.push_back(cat(cache.name, " serves ", static_cast<int64_t>(tile_bytes - dram_bytes),
                              " B of re-reads across blocks (", static_cast<int>(hit * 100), "% of a wave's working set fits)"));
  }
  bytes[dram.name] += dram_bytes + written;

  // CPU contraction panels (kernels/cpu/README.md, "B is packed"): a task first brings the
  // panel of the operand read along the output's innermost axis -- the part of it the task's tile
  // reads over the whole reduction -- from the level the tasks load from (a CPU spec's L3: its
  // DRAM is host memory) into its private caches (packed,
  // or read in place by its first row block), before the FMA loop that the levels above price. The
  // FMAs do not overlap it, so it adds to the latency. A task tile with more rows (an NCHW conv's
  // more output channels) moves each panel for more of them. A block-sparse panel (the
  // micro-kernel's walk, kernels/cpu/README.md) brings its non-zero blocks' rows only: the density
  // of them.
  double panel_bytes = 0;
  if (!is_gpu(spec)) {
    for (NodeId n : group.nodes) {
      const TeNode& node = graph.node(n);
      if (!is_contraction(node) || node.num_spatial() == 0) continue;
      const LevelTile& lt = config(n).levels.front();
      const DomainTile whole = representative_tile(node, lt, /*whole_reduction=*/true);
      const double tiles = static_cast<double>(num_spatial_tiles(node, lt));
      const auto* sparse = std::get_if<BlockSparseProps>(&config(n).kind);
      for (size_t k = 0; k < node.inputs().size(); ++k) {
        const NodeId producer = graph.producer(graph.node_inputs(n)[k]);
        if ((producer >= 0 && in_group(producer)) || !node.inputs()[k].map.uses_axis(node.num_spatial() - 1)) continue;
        const double walked = sparse && sparse->input == static_cast<int>(k) ? sparse->density : 1.0;
        panel_bytes += walked * tiles *
                       static_cast<double>(num_elements(bounding_box(read_region(node, static_cast<int>(k), whole))) *
                                           dtype_bytes(node.inputs()[k].type.dtype));
      }
    }
  }
  double panel_s = 0;
  if (panel_bytes > 0) panel_s = panel_bytes / (dram.bandwidth_gbps * 1e9 * active) * cpu_waves;

  // CPU loop nests: a node evaluated by loops (every node but the contractions of a group that
  // does not record the `loops` family) starts its innermost loop once per row of its task box -- once per point of the
  // box's other spatial axes, and once per output point of a reduction, whose reduction loop is
  // innermost -- and each start costs the spec's compute.row_start_cycles that the streaming does
  // not hide (a spec without it: not charged, and explain says so). A cube of
  // 16 x 16 x 16 elements starts 256 loops of one vector; rows of 112 elements start 16 times fewer.
  double row_starts = 0;
  if (!is_gpu(spec) && spec.compute.clock_ghz > 0 && spec.compute.row_start_cycles > 0) {
    for (NodeId n : group.nodes) {
      const TeNode& node = graph.node(n);
      const int ns = node.num_spatial();
      if (ns == 0 || (group.kernel.family != "loops" && is_contraction(node))) continue;  // the micro-kernel's, priced above
      double points = 1;
      for (int a = 0; a < ns; ++a) points *= static_cast<double>(node.axes()[a].extent);
      if (points <= 0) continue;
      const LevelTile& lt = config(n).levels.front();
      // A lane reduction (cpu_loops.h: a depthwise convolution, a pool) walks its reduction per
      // vector of a row, so it starts a loop per row as an elementwise node does.
      const bool lane = cpu::lane_reduction_fits(node, cpu::vector_lanes(spec.compute.simd_width, node.body().dtype()));
      const int64_t inner =
          node.num_reduction() > 0 && !lane ? 1 : std::min(node.axes()[ns - 1].extent, std::max<int64_t>(1, lt.spatial[ns - 1]));
      row_starts += points / static_cast<double>(inner);
    }
  }
  double row_s = 0;
  if (row_starts > 0 && units > 0 && active > 0)
    row_s = row_starts * spec.compute.row_start_cycles / (spec.compute.clock_ghz * 1e9 * static_cast<double>(units) * active);
  if (!is_gpu(spec) && spec.compute.row_start_cycles <= 0)
    out.notes.push_back(cat("spec '", spec.name, "' gives no compute.row_start_cycles: loop row starts not priced"));

  // Step 4: latency. Levels in the spec's order, registers outward.
  out.bound = "compute";
  double worst = compute_s;
  if (chain_s > worst) {
    worst = chain_s;
    out.bound = "latency";
  }
  if (chain_s > 0) out.term_ref("chain") = chain_s;
  for (const MemoryLevel& level : spec.memory_levels) {
    auto it = bytes.find(level.name);
    if (it == bytes.end() || it->second <= 0) continue;
    const double seconds = it->second / (level.bandwidth_gbps * 1e9 * active) * cpu_waves;
    out.memory.push_back({level.name, it->second, seconds});
    if (seconds > worst) {
      worst = seconds;
      out.bound = level.name;
    }
  }
  const double launch_s = spec.compute.launch_overhead_us * 1e-6;
  out.term_ref("compute") = compute_s;
  out.term_ref("launch") = launch_s;
  if (panel_s > 0) out.term_ref("panel") = panel_s;
  if (row_s > 0) out.term_ref("rows") = row_s;
  out.latency_s = launch_s + walk * worst / family_efficiency(spec, group, out) + panel_s + row_s;
  return out;
}

}  // namespace tessel
