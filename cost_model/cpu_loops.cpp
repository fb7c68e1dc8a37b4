// The CPU loop nests' lane reductions (see cpu_loops.h).
#include "cost_model/cpu_loops.h"

#include <algorithm>

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

}  // namespace tessel::cpu
