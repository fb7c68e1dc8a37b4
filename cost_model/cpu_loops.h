// How the CPU backend's loop nests evaluate a reduction node: what the emitter
// (kernels/cpu/emit_group.cpp) takes and the cost model prices, in one place. A lane reduction
// vectorizes the node's innermost spatial axis and walks its reduction per vector of outputs: an
// NHWC depthwise convolution's channels, an NCHW one's pixels along a row, a channels-last pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/cost_model.h"
#include "hw_specs/hw_spec.h"
#include "tilegraph/node.h"

namespace tessel::cpu {

/// The contraction micro-kernel's run: at least this many reduction terms accumulate in f32
/// registers before the partial sums are added to the f64 totals; the rounding error is about
/// sqrt(256) ulps of a partial sum, ~1e-6 relative in f32. 256 rather than 128: the BERT FFN GEMM
/// (K = 768) took 0.95x its time in 4 interleaved pairs, the 1024^3 GEMM 0.99x; 512 changed
/// neither (experiments/cpu_suite/runs/cpu-2026-11-25e/).
inline constexpr int64_t kRunTerms = 256;

/// How far ahead the micro-kernel prefetches B where it reads B from its tensor
/// (kernels/cpu/emit_contraction.cpp): the piece this many bytes of its stream ahead, i.e.
/// 4096 / (the piece's bytes) reduction points. On the Sapphire Rapids VM, against no prefetch
/// (two rounds): LLaMA-7B's down projection at M = 32 26.7-29.0 -> 17.6-18.2 ms and
/// at M = 4 9.5-10.8 -> 6.5-6.6 ms, GPT-2's at M = 64 5.9-6.2 -> 5.2-5.3 ms; the M = 1 GEMVs and
/// GPT-2's lm_head at M = 8 0.98-1.08x their time. 16 KiB ahead gained less on the first two and
/// slowed the GEMVs 1.1-1.2x (experiments/cpu_suite/runs/cpu-2026-12-01/prefetch.txt).
inline constexpr int64_t kPrefetchAheadBytes = 4096;

/// A lane reduction of at most this many terms in the compute type (a 3x3 to 7x7 depthwise
/// convolution's taps) is instead written out term by term inside its innermost spatial loop, the
/// sum an SSA value (registers, no array): the same terms in the same order, a product's as fused
/// multiply-adds (one rounding each).
inline constexpr int64_t kUnrolledLaneTerms = 64;
/// The unrolled form takes rows of at least this many points (a 7-pixel NCHW row: the vectorizer's
/// narrower epilogue or scalar taps in f32, still ahead of the generic nest's f64 sum per point),
/// and reads stepping along the row by up to this many elements (a stride-2 convolution's input:
/// the vectorizer loads whole vectors and shuffles the lanes out).
inline constexpr int64_t kMinUnrolledLaneRow = 4, kMaxLaneReadStride = 2;

/// The form a lane reduction takes (KernelEmitter::emit_lane_reduction):
/// - unrolled: few terms in the compute type, written out term by term inside the innermost
///   spatial loop, the sum in registers;
/// - array: sums of a chunk of kLaneReductionVectors vectors of outputs kept in an array across
///   the reduction loops.
enum class LaneReduction : uint8_t { none, unrolled, array };

/// How the emitter evaluates `node`, when it takes the generic nest, as a lane reduction: a float
/// sum from zero with spatial axes, whose every read walks the innermost spatial axis
/// contiguously (unrolled: or by a stride up to kMaxLaneReadStride) or not at all, one of them
/// walking it -- an NHWC depthwise convolution with HWIO weights, an NCHW one along its rows, a
/// channels-last pool -- and whose innermost axis holds at least a vector of `lanes` (unrolled:
/// kMinUnrolledLaneRow points, or the vector if narrower; a GEMM's single output column, DLRM's N = 1, keeps its dot
/// products). A sum of products of two varying factors has at most kRunTerms terms, summed in the
/// compute type (the micro-kernel's error argument); any other sum (a mean's x * (1/n)) has more
/// than kRunTerms terms, summed in f64 (lane_reduction_in_f64).
LaneReduction lane_reduction_form(const TeNode& node, int lanes);
inline bool lane_reduction_fits(const TeNode& node, int lanes) { return lane_reduction_form(node, lanes) != LaneReduction::none; }
/// Whether a lane reduction of `node` sums in f64 (above): its body is not a product of two
/// varying factors.
bool lane_reduction_in_f64(const TeNode& node);

/// The vector lanes the CPU backend computes `dtype` in, for a spec of `simd_width` f32 lanes: f16
/// and bf16 compute in f32, f64 in half as many lanes.
inline int vector_lanes(int64_t simd_width, DType dtype) {
  const int64_t bytes = std::max<int64_t>(dtype_bytes(DType::f32), dtype_bytes(dtype));
  return static_cast<int>(std::max<int64_t>(1, simd_width * dtype_bytes(DType::f32) / bytes));
}

/// Whether a contraction the micro-kernel takes runs faster as the loop nest's lane reduction:
/// no row shares its B vectors (no m axis: an NCHW depthwise convolution, whose input moves with
/// every output axis), its terms fit the unrolled form, and its rows fit in one vector (`lanes`).
/// The micro-kernel, blocking one row at a time, ran a 5x5 and a 3x3 depthwise over 14 x 14 pixels
/// 2.1x and 1.8x slower than the lane reduction's masked vectors (EfficientNet-B0, MobileNetV2);
/// over rows of 28 (a grouped 3x3, stride 2) 1.09x faster, rows of 56 4x faster, rows of 112 as
/// fast (this project's 2-core AVX-512 VM, 2026-11-30, interleaved).
bool lane_rows_beat_microkernel(const TeNode& node, int m_axis, int lanes);

/// Whether input `i` of `node` reads a different element when `axis` moves.
bool input_varies(const TeNode& node, int i, int axis);
/// Whether input `i` of `node` reads consecutive elements as `axis` moves (its last dimension
/// walks `axis` with coefficient 1, or up to `max_stride`, no other dimension moves with it) or the
/// same element.
bool contiguous_or_invariant(const TeNode& node, int i, int axis, int64_t max_stride = 1);

/// A node the contraction micro-kernel takes (kernels/cpu/emit_contraction.cpp): a float sum from
/// zero of in_a x in_b (times a constant `scale`), A broadcast along the innermost spatial axis n,
/// B read along it; m is the nearest spatial axis A reads along and B does not (-1: none). An NT
/// product of one row (no m axis) whose B is not contiguous along n is not taken (its dot products
/// run in the loop nest). Here so that the cost model prices the blocking the emitter takes.
struct MicrokernelMatch {
  int a = -1, b = -1;   // inputs: A is broadcast along n, B is read along n
  int n_axis = -1;      // innermost spatial axis
  int m_axis = -1;      // a spatial axis A reads along and B does not; -1 if none
  std::optional<double> scale;
};
std::optional<MicrokernelMatch> match_microkernel(const TeNode& node);

/// The SIMD registers of one core: the spec's `registers` level capacity over its vector bytes
/// (simd_width f32 lanes); 0 when the spec has no registers level or no SIMD width. What the
/// micro-kernel is blocked for (the CPU backend's codegen_params), and what the model prices.
int64_t vector_registers(const HwSpec& spec);

/// MR rows (the m axis) x NR vectors (the n axis) of accumulators.
struct RegisterBlocking {
  int mr = 1, nr = 1;
};
/// The micro-kernel's blocking for a task box of `m_extent` rows (1 when the contraction has no m
/// axis, `has_m` false) and `n_extent` columns, with `registers` vector registers of `lanes`
/// lanes. It maximizes the FMAs per load (a B vector or an A broadcast) over the whole box at one
/// reduction point: the box's rows in full MR blocks, then MR = 1 blocks; its columns in
/// ceil(n / lanes) vectors (the last one masked), in full NR blocks, then one block of the vectors
/// left. Under MR * NR + NR + 1 <= registers (one register holds the broadcast); NR is at most the
/// box's vectors, MR at most its rows, and at most `max_nr` when that is positive (the B vectors
/// of one run the first cache holds: run_sliver_vectors). Ties keep the smaller NR, then the
/// smaller MR.
RegisterBlocking choose_register_blocking(int64_t registers, int64_t lanes, int64_t m_extent, int64_t n_extent, bool has_m,
                                          int64_t max_nr = 0);

/// The reduction terms of one micro-kernel run of `node`: kRunTerms, or all of them when fewer (the emitter may round a run up to whole axes).
int64_t microkernel_run_terms(const TeNode& node);
/// The most B vectors whose run (run_terms points of each, `vector_bytes` a point) fit `l1_bytes`
/// (the smallest private per-core cache: first_cache_bytes), at least 1; 0 (no limit) without a
/// cache. Every MR-row block of a column block re-reads the run's B sliver: one that overflows
/// L1 streams it from L2 for every block. On the 2-core Sapphire Rapids VM (48 KiB L1d) the
/// suite's conv_bn_relu ran 1.04-1.18 ms at 6 x 4 (a 252-point run of 4 vectors: 63 KiB) and
/// 0.91-0.93 ms at 8 x 2, 0.93-0.94 at 8 x 3 (experiments/cpu_suite/runs/cpu-2026-12-01/blocking.txt).
int64_t run_sliver_vectors(int64_t l1_bytes, int64_t vector_bytes, int64_t terms);
/// The smallest private per-core cache of `spec` in bytes (its L1 data cache), 0 when none.
int64_t first_cache_bytes(const HwSpec& spec);
/// The rows of A from which a contraction's box reuses each B element enough to be compute-bound
/// rather than bound by streaming B from memory: the machine balance (f32 peak FLOP/s over the
/// outermost level's bytes/s) x 4 bytes / 2 FLOPs a row, rounded up (20 on the Sapphire Rapids
/// VM's probe); 0 when the spec lacks either. Below it NR is not limited to the L1d: a skinny
/// GEMM streams B from memory once, and wide column blocks read it in longer contiguous pieces
/// (GPT-2's lm_head at M = 8 ran 2.2x slower at 8 x 3 than at 4 x 6, LLaMA's M = 1 projections
/// 1.3-1.5x slower at 1 x 3 than at 1 x 15: `ab_skinny.csv` beside blocking.txt).
int64_t compute_bound_rows(const HwSpec& spec);
/// The NR limit for a contraction whose m axis has `m_extent` rows in all (1 without one; the
/// node's, not a task box's, so that a policy does not dodge the limit by cutting the rows): 0
/// (none) below `bound_rows` (compute_bound_rows), else run_sliver_vectors.
inline int64_t sliver_limit(int64_t m_extent, int64_t bound_rows, int64_t sliver_vectors) {
  return bound_rows > 0 && m_extent >= bound_rows ? sliver_vectors : 0;
}
/// Whether input `k` of `node` reads outside its tensor somewhere in the node's domain (a padded
/// convolution's input): every such read is guarded.
bool reads_padding(const TeNode& node, int k);
/// The micro-kernel's NR limit for contraction `match` of `node` (choose_register_blocking's
/// `max_nr`; 0: none): sliver_limit, except that an A read through padding (an NHWC
/// convolution's input) is not limited: every column block guards A's broadcasts again, which
/// cost more than a sliver from L2 (ResNet-50's NHWC 3x3 over 64 channels: 1.31-1.36 ms at 6 x 4 in
/// one column block, 1.76-2.10 ms at NR = 2 or 3: nhwc_blocking.txt beside blocking.txt).
int64_t microkernel_nr_limit(const TeNode& node, const MicrokernelMatch& match, int64_t l1_bytes, int64_t vector_bytes, int64_t bound_rows);

/// The blocking choose_register_blocking gives contraction `node` over the box `box` (the
/// node's outermost tile, clamped to its axes; a microkernel group's task box) with `spec`'s
/// vector registers; nullopt when the micro-kernel does not take the node or the spec has no
/// vector registers.
std::optional<RegisterBlocking> derived_register_blocking(const TeNode& node, const std::vector<int64_t>& box, const HwSpec& spec);

/// A microkernel kernel choice records the blocking of each contraction it runs on the
/// micro-kernel -- the i-th node of the group (in its node order) that match_microkernel takes --
/// as the parameters "mr<i>" (rows) and "nr<i>" (vectors): a decision of the schedule, which the
/// emitter follows and the model prices. The parameter's name.
std::string blocking_param(const char* which, int i);
/// The blocking `k` records for its i-th contraction (both "mr<i>" and "nr<i>"), or nullopt: a
/// schedule from before blockings were recorded, which the emitter and the model derive.
std::optional<RegisterBlocking> recorded_register_blocking(const KernelChoice& k, int i);

/// The largest packed operand panel, in bytes: half the largest private per-core cache (0: the
/// spec has none). The micro-kernel packs B panels up to this (the CPU backend's codegen_params).
int64_t pack_bytes(const HwSpec& spec);
/// The cache line: the largest transaction size of the spec's cache levels (0: no cache).
int64_t cache_line_bytes(const HwSpec& spec);

/// How far ahead the micro-kernel prefetches contraction `node`'s B (input match.b) where it reads
/// B from its tensor (kernels/cpu/emit_contraction.cpp; not through padding, lane by lane or a
/// sparse walk): kPrefetchAheadBytes when B is larger than twice pack_bytes and the spec's caches
/// have lines, else 0 (a smaller B stays in the private caches from task to task, where the
/// prefetches only cost: ResNet-50's NHWC 3x3 over 128 channels ran 1.11x slower with them). A
/// decision of the schedule like the blocking: choose() records it as "pf<i>"
/// (blocking_param("pf", i)) where it is not 0, a tuner's variant records 0 to switch it off; the
/// emitter follows what is recorded and derives it where nothing is (0 for a schedule recorded
/// since, the same distance as before for one saved earlier).
int64_t derived_prefetch_bytes(const TeNode& node, const MicrokernelMatch& match, const HwSpec& spec);
/// The same rule from B's bytes, the spec's pack_bytes and its largest cache line (0: no cache).
inline int64_t prefetch_bytes_for(int64_t b_bytes, int64_t pack, int64_t line_bytes) {
  return line_bytes > 0 && b_bytes > 2 * pack ? kPrefetchAheadBytes : 0;
}
/// The distance `k` records for its i-th contraction ("pf<i>"), or nullopt.
std::optional<int64_t> recorded_prefetch_bytes(const KernelChoice& k, int i);

}  // namespace tessel::cpu
