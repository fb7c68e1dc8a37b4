// The CPU loop nests' lane reductions and the micro-kernel's match and register blocking (see cpu_loops.h).
#include "cost_model/cpu_loops.h"

#include <algorithm>
#include <cmath>

#include "tilegraph/dtype.h"

namespace tessel::cpu {

bool input_varies(const TeNode& node, int i, int axis) {
  const Access& acc = node.inputs()[i];
  for (int d = 0; d < acc.map.num_results(); ++d) {
    if (d == acc.gather_dim) {
      if (input_varies(node, acc.gather_index_input, axis)) return true;
      continue;
    }
    const AffineExpr& row = acc.map.result(d);
    if (axis < static_cast<int>(row.coeffs.size()) && row.coeffs[axis] != 0) return true;
  }
  return false;
}

bool contiguous_or_invariant(const TeNode& node, int i, int axis, int64_t max_stride) {
  const Access& acc = node.inputs()[i];
  if (!input_varies(node, i, axis)) return true;
  if (acc.gather_dim >= 0 || acc.map.num_results() == 0) return false;
  const int last = acc.map.num_results() - 1;
  for (int d = 0; d < last; ++d) {
    const AffineExpr& row = acc.map.result(d);
    if (axis < static_cast<int>(row.coeffs.size()) && row.coeffs[axis] != 0) return false;
  }
  const AffineExpr& row = acc.map.result(last);
  return axis < static_cast<int>(row.coeffs.size()) && row.coeffs[axis] >= 1 && row.coeffs[axis] <= max_stride;
}

bool lane_reduction_in_f64(const TeNode& node) {
  const Expr& e = node.body();
  return !(e.op() == ExprOp::mul && e.operands()[0].op() != ExprOp::constant && e.operands()[1].op() != ExprOp::constant);
}

LaneReduction lane_reduction_form(const TeNode& node, int lanes) {
  const int ns = node.num_spatial(), na = node.num_axes();
  // A float sum from zero: of products of two varying factors in runs of at most kRunTerms terms
  // in the compute type; of anything else (a mean's x * (1/n), whose terms must each reach the
  // f64 total as in reduce_point) in f64, of more than kRunTerms terms: shorter ones ran as fast
  // or faster in the generic nest (this project's VM, interleaved: a 37-term sum 0.90x, a 49-term
  // channels-last pool 0.97x; a 3136-term one 1.96x, experiments/op_sweep/runs/cpu-2026-11-29-op-sweep/
  // ab/lane_f64.txt): the array's f64 sums are loaded and stored at every term.
  const Expr& e = node.body();
  if (ns == 0 || na == ns || node.combiner() != Combiner::sum || node.init() != 0 || !is_float(e.dtype())) return LaneReduction::none;
  int64_t terms = 1;
  for (int a = ns; a < na; ++a) terms *= node.axes()[a].extent;
  const bool wide = lane_reduction_in_f64(node);
  if (wide ? terms <= kRunTerms : terms > kRunTerms) return LaneReduction::none;
  // The unrolled form (few terms in the compute type) also takes rows shorter than a vector (an
  // NCHW convolution over 14 x 14 pixels) and reads that step by a constant stride along the row
  // (a strided one's input); the array form wants a vector's lanes and unit steps.
  const bool unrolled = !wide && terms <= kUnrolledLaneTerms;
  if (node.axes()[ns - 1].extent < (unrolled ? std::min<int64_t>(lanes, kMinUnrolledLaneRow) : lanes)) return LaneReduction::none;
  bool walks = false;
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    if (!contiguous_or_invariant(node, i, ns - 1, unrolled ? kMaxLaneReadStride : 1)) return LaneReduction::none;
    walks |= input_varies(node, i, ns - 1);
  }
  if (!walks) return LaneReduction::none;
  return unrolled ? LaneReduction::unrolled : LaneReduction::array;
}

bool lane_rows_beat_microkernel(const TeNode& node, int m_axis, int lanes) {
  return m_axis < 0 && node.num_spatial() > 0 && lane_reduction_form(node, lanes) == LaneReduction::unrolled &&
         node.axes()[node.num_spatial() - 1].extent <= lanes;
}

std::optional<MicrokernelMatch> match_microkernel(const TeNode& node) {
  const DType dtype = node.body().dtype();
  if (node.combiner() != Combiner::sum || node.init() != 0 || node.num_reduction() == 0 || node.num_spatial() == 0) return std::nullopt;
  // Floats: f16 and bf16 compute in f32 like everything else on the CPU (emit_scalar.h's
  // compute_type): their products are exact in f32, B's panel is converted once when packed, and
  // the totals round once to the output dtype, as the interpreter's.
  if (!is_float(dtype) || node.output().dtype != dtype) return std::nullopt;
  MicrokernelMatch c;
  Expr product = node.body();
  if (product.op() == ExprOp::mul) {
    const Expr& l = product.operands()[0];
    const Expr& r = product.operands()[1];
    if (r.op() == ExprOp::constant && l.op() == ExprOp::mul) { c.scale = r.value(); product = l; }
    else if (l.op() == ExprOp::constant && r.op() == ExprOp::mul) { c.scale = l.value(); product = r; }
  }
  if (product.op() != ExprOp::mul) return std::nullopt;
  const Expr& x = product.operands()[0];
  const Expr& y = product.operands()[1];
  if (x.op() != ExprOp::input || y.op() != ExprOp::input || x.index() == y.index()) return std::nullopt;
  for (int i : {x.index(), y.index()})
    if (node.inputs()[i].is_gather() || node.inputs()[i].type.dtype != dtype) return std::nullopt;
  c.n_axis = node.num_spatial() - 1;
  const bool x_n = node.inputs()[x.index()].map.uses_axis(c.n_axis), y_n = node.inputs()[y.index()].map.uses_axis(c.n_axis);
  if (x_n == y_n) return std::nullopt;
  c.b = x_n ? x.index() : y.index();
  c.a = x_n ? y.index() : x.index();
  for (int ax = node.num_spatial() - 2; ax >= 0 && c.m_axis < 0; --ax)
    if (node.inputs()[c.a].map.uses_axis(ax) && !node.inputs()[c.b].map.uses_axis(ax)) c.m_axis = ax;
  // One row of A against a B walked across its rows (an NT product: decode attention's Q K^T,
  // K read along the keys): no row shares a vector of B, so no panel is packed and every vector
  // would be gathered lane by lane, each element used once. The generic nest's dot products read
  // B's rows as vectors instead (products_in_runs).
  const Access& b = node.inputs()[c.b];
  const int last = b.map.num_results() - 1;
  bool b_contiguous = last >= 0 && b.map.result(last).coeffs[static_cast<size_t>(c.n_axis)] == 1;
  for (int d = 0; d < last; ++d) b_contiguous &= b.map.result(d).coeffs[static_cast<size_t>(c.n_axis)] == 0;
  // (f32 only: products_in_runs, the generic nest's fast dot product, sums f32 bodies.)
  if (!b_contiguous && dtype == DType::f32 && (c.m_axis < 0 || node.axes()[c.m_axis].extent == 1)) return std::nullopt;
  return c;
}

int64_t vector_registers(const HwSpec& spec) {
  const int regs = spec.level_index("registers");
  if (regs < 0 || spec.compute.simd_width <= 0) return 0;
  return std::max<int64_t>(1, spec.memory_levels[regs].capacity_bytes / (spec.compute.simd_width * dtype_bytes(DType::f32)));
}

RegisterBlocking choose_register_blocking(int64_t registers, int64_t lanes, int64_t m_extent, int64_t n_extent, bool has_m,
                                          int64_t max_nr) {
  // The box's FMAs are m x vectors whatever the blocking: the best blocking takes the fewest loads.
  RegisterBlocking best;
  int64_t best_loads = -1;
  const int64_t vectors = std::max<int64_t>(1, (n_extent + lanes - 1) / lanes);  // the last one masked
  const int64_t m = has_m ? std::max<int64_t>(1, m_extent) : 1;
  for (int64_t nr = 1; nr <= vectors && nr + 2 <= registers && (max_nr <= 0 || nr <= max_nr); ++nr) {
    const int64_t max_mr = std::min(has_m ? (registers - 1 - nr) / nr : 1, m);
    for (int64_t mr = 1; mr <= max_mr; ++mr) {
      // Loads (B vectors and A broadcasts) of the box's rows at one reduction point, for a column
      // block of w vectors: full MR blocks, then single rows.
      auto loads = [&](int64_t w) { return m / mr * (mr + w) + m % mr * (1 + w); };
      const int64_t total = vectors / nr * loads(nr) + (vectors % nr > 0 ? loads(vectors % nr) : 0);
      if (best_loads < 0 || total < best_loads) {
        best_loads = total;
        best = {static_cast<int>(mr), static_cast<int>(nr)};
      }
    }
  }
  return best;
}

int64_t microkernel_run_terms(const TeNode& node) {
  int64_t terms = 1;
  for (int r = node.num_spatial(); r < node.num_axes(); ++r) terms = std::min(kRunTerms, terms * node.axes()[r].extent);
  return terms;
}

int64_t run_sliver_vectors(int64_t l1_bytes, int64_t vector_bytes, int64_t terms) {
  if (l1_bytes <= 0 || vector_bytes <= 0) return 0;
  return std::max<int64_t>(1, l1_bytes / (vector_bytes * std::max<int64_t>(1, terms)));
}

int64_t first_cache_bytes(const HwSpec& spec) {
  int64_t bytes = 0;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope == MemoryScope::core && l.cache && !l.cache->shared && (bytes == 0 || l.capacity_bytes < bytes)) bytes = l.capacity_bytes;
  return bytes;
}

int64_t compute_bound_rows(const HwSpec& spec) {
  const double peak = spec.peak_flops(DType::f32, false);
  if (peak <= 0 || spec.memory_levels.empty() || spec.memory_levels.back().bandwidth_gbps <= 0) return 0;
  const double balance = peak / (spec.memory_levels.back().bandwidth_gbps * 1e9);  // FLOP per byte
  return static_cast<int64_t>(std::ceil(balance * static_cast<double>(dtype_bytes(DType::f32)) / 2));
}

bool reads_padding(const TeNode& node, int k) {
  const Access& access = node.inputs()[static_cast<size_t>(k)];
  std::vector<int64_t> extents;
  for (const Axis& axis : node.axes()) extents.push_back(axis.extent);
  for (int d = 0; d < access.map.num_results(); ++d)
    if (access.map.result(d).min_over(extents) < 0 || access.map.result(d).max_over(extents) >= access.type.shape[static_cast<size_t>(d)])
      return true;
  return false;
}

int64_t microkernel_nr_limit(const TeNode& node, const MicrokernelMatch& match, int64_t l1_bytes, int64_t vector_bytes, int64_t bound_rows) {
  if (reads_padding(node, match.a)) return 0;
  return sliver_limit(match.m_axis >= 0 ? node.axes()[match.m_axis].extent : 1, bound_rows,
                      run_sliver_vectors(l1_bytes, vector_bytes, microkernel_run_terms(node)));
}

std::optional<RegisterBlocking> derived_register_blocking(const TeNode& node, const std::vector<int64_t>& box, const HwSpec& spec) {
  const std::optional<MicrokernelMatch> match = match_microkernel(node);
  const int64_t registers = vector_registers(spec);
  if (!match || registers <= 0 || static_cast<int>(box.size()) != node.num_spatial()) return std::nullopt;
  auto extent = [&](int a) { return std::min(box[a], node.axes()[a].extent); };
  const int lanes = vector_lanes(spec.compute.simd_width, node.body().dtype());
  const int64_t m = match->m_axis >= 0 ? extent(match->m_axis) : 1;
  const int64_t max_nr =
      microkernel_nr_limit(node, *match, first_cache_bytes(spec), spec.compute.simd_width * dtype_bytes(DType::f32), compute_bound_rows(spec));
  return choose_register_blocking(registers, lanes, m, extent(match->n_axis), match->m_axis >= 0, max_nr);
}

std::string blocking_param(const char* which, int i) { return std::string(which) + std::to_string(i); }

int64_t pack_bytes(const HwSpec& spec) {
  int64_t bytes = 0;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope == MemoryScope::core && l.cache && !l.cache->shared) bytes = std::max(bytes, l.capacity_bytes / 2);
  return bytes;
}

int64_t cache_line_bytes(const HwSpec& spec) {
  int64_t line = 0;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.cache) line = std::max(line, l.transaction_bytes);
  return line;
}

int64_t derived_prefetch_bytes(const TeNode& node, const MicrokernelMatch& match, const HwSpec& spec) {
  const Access& b = node.inputs()[static_cast<size_t>(match.b)];
  return prefetch_bytes_for(b.type.num_elements() * static_cast<int64_t>(dtype_bytes(b.type.dtype)), pack_bytes(spec), cache_line_bytes(spec));
}

std::optional<int64_t> recorded_prefetch_bytes(const KernelChoice& k, int i) {
  if (const auto it = k.params.find(blocking_param("pf", i)); it != k.params.end()) return it->second;
  return std::nullopt;
}

std::optional<RegisterBlocking> recorded_register_blocking(const KernelChoice& k, int i) {
  const auto mr = k.params.find(blocking_param("mr", i)), nr = k.params.find(blocking_param("nr", i));
  if (mr == k.params.end() || nr == k.params.end()) return std::nullopt;
  return RegisterBlocking{static_cast<int>(mr->second), static_cast<int>(nr->second)};
}

}  // namespace tessel::cpu
