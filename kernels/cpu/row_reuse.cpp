// Row reuse for the CPU backend (row_reuse.h): matching a reduction's subexpression with an
// elementwise node's, solving the point map between them, and sizing the buffer.
#include "kernels/cpu/row_reuse.h"

#include <algorithm>
#include <optional>

#include "kernels/cpu/emit_scalar.h"

namespace tessel {

bool has_costly_op(const Expr& e) {
  switch (e.op()) {
    case ExprOp::exp: case ExprOp::log: case ExprOp::sqrt: case ExprOp::rsqrt: case ExprOp::reciprocal:
    case ExprOp::tanh: case ExprOp::erf: case ExprOp::sigmoid: case ExprOp::sin: case ExprOp::cos:
    case ExprOp::tan: case ExprOp::asin: case ExprOp::acos: case ExprOp::atan: case ExprOp::sinh:
    case ExprOp::cosh: case ExprOp::asinh: case ExprOp::acosh: case ExprOp::atanh: case ExprOp::div:
    case ExprOp::mod: case ExprOp::fmod: case ExprOp::pow:
      return true;
    default:
      break;
  }
  for (const Expr& o : e.operands())
    if (has_costly_op(o)) return true;
  return false;
}

namespace {

/// Every subexpression of `e`, in pre-order (the whole expression first).
void subexpressions(const Expr& e, std::vector<Expr>& out) {
  out.push_back(e);
  for (const Expr& o : e.operands()) subexpressions(o, out);
}

bool has_axis_index(const Expr& e) {
  if (e.op() == ExprOp::axis_index) return true;
  for (const Expr& o : e.operands())
    if (has_axis_index(o)) return true;
  return false;
}

/// One node's side of a match: its body's input slots read these tensors through these accesses.
struct Side {
  const TeNode* node = nullptr;
  const std::vector<TensorId>* tensors = nullptr;
};

/// Whether `a` (in the source's body) and `b` (in the reader's) are the same computation on the
/// same tensors; collects the input slot pairs whose maps are still to be checked.
bool same_computation(const Expr& a, const Side& sa, const Expr& b, const Side& sb, std::vector<std::pair<int, int>>& leaves) {
  if (a.op() != b.op() || a.dtype() != b.dtype() || a.operands().size() != b.operands().size()) return false;
  switch (a.op()) {
    case ExprOp::input: {
      const Access& x = sa.node->inputs()[a.index()];
      const Access& y = sb.node->inputs()[b.index()];
      if ((*sa.tensors)[a.index()] != (*sb.tensors)[b.index()] || x.is_gather() || y.is_gather()) return false;
      if (x.pad_value != y.pad_value) return false;  // exact, and a NaN pad equals a NaN pad
      leaves.emplace_back(a.index(), b.index());
      return true;
    }
    case ExprOp::constant:
      return a.scalar() == b.scalar();  // exact, and NaN equals NaN
    case ExprOp::axis_index:
      return false;
    default:
      for (size_t i = 0; i < a.operands().size(); ++i)
        if (!same_computation(a.operands()[i], sa, b.operands()[i], sb, leaves)) return false;
      return true;
  }
}

bool within(const AffineExpr& row, const std::vector<int64_t>& domain, int64_t extent) {
  return row.min_over(domain) >= 0 && row.max_over(domain) < extent;
}

/// phi: the reader's axes -> the source's axes, such that every leaf pair reads the same element,
/// or nullopt. `spatial` is the reader's map onto the source's output (= its spatial domain).
std::optional<AffineMap> solve_point_map(const TeNode& source, const TeNode& reader, const AffineMap& spatial,
                                         const std::vector<std::pair<int, int>>& leaves) {
  const int ns = source.num_spatial(), na = source.num_axes(), nr = reader.num_axes();
  const std::vector<int64_t> reader_domain = reader.extents();
  std::vector<AffineExpr> rows(spatial.results().begin(), spatial.results().end());
  for (int a = ns; a < na; ++a) {
    // A leaf row of the source's map with coefficient 1 on axis a and on no other reduction axis:
    // then a = (the reader's row) - (the row's spatial terms and offset, through phi).
    std::optional<AffineExpr> solved;
    for (const auto& [i, j] : leaves) {
      const AffineMap& ms = source.inputs()[i].map;
      for (int d = 0; d < ms.num_results() && !solved; ++d) {
        const AffineExpr& row = ms.result(d);
        bool ok = row.coeffs[a] == 1;
        for (int r = ns; r < na && ok; ++r) ok = r == a || row.coeffs[r] == 0;
        if (!ok) continue;
        AffineExpr e = reader.inputs()[j].map.result(d);
        e.offset -= row.offset;
        for (int s = 0; s < ns; ++s)
          for (int q = 0; q < nr; ++q) e.coeffs[q] -= row.coeffs[s] * rows[s].coeffs[q];
        for (int s = 0; s < ns; ++s) e.offset -= row.coeffs[s] * rows[s].offset;
        solved = e;
      }
      if (solved) break;
    }
    if (!solved) return std::nullopt;
    rows.push_back(*solved);
  }
  for (int a = 0; a < na; ++a)
    if (!within(rows[a], reader_domain, source.axes()[a].extent)) return std::nullopt;
  AffineMap phi(nr, std::move(rows));
  for (const auto& [i, j] : leaves)
    if (!(compose(source.inputs()[i].map, phi) == reader.inputs()[j].map)) return std::nullopt;
  return phi;
}

/// The reader's map onto the source's output, when the reader reads it in range and the output
/// is the source's spatial domain (no reshape).
std::optional<AffineMap> spatial_map(const OpGraph& graph, NodeId source, NodeId reader) {
  const TeNode& s = graph.node(source);
  const TensorId out = graph.node_output(source);
  std::vector<int64_t> domain;
  for (int a = 0; a < s.num_spatial(); ++a) domain.push_back(s.axes()[a].extent);
  if (graph.tensor(out).type.shape != domain) return std::nullopt;
  const TeNode& r = graph.node(reader);
  const std::vector<TensorId>& reads = graph.node_inputs(reader);
  for (size_t i = 0; i < reads.size(); ++i) {
    if (reads[i] != out || r.inputs()[i].is_gather()) continue;
    const AffineMap& m = r.inputs()[i].map;
    bool ok = true;
    for (int d = 0; d < m.num_results() && ok; ++d) ok = within(m.result(d), r.extents(), domain[d]);
    if (ok) return m;
  }
  return std::nullopt;
}

/// The largest box extent of node `k` of `plan` over all tasks, per spatial axis.
std::vector<int64_t> largest_box(const CpuGroupPlan& plan, int k, int num_spatial) {
  std::vector<int64_t> largest(num_spatial, 0);
  for (int64_t task = 0; task < plan.num_tasks; ++task)
    for (int a = 0; a < num_spatial; ++a)
      largest[a] = std::max(largest[a], plan.boxes[task * plan.box_stride + plan.box_offset[k] + 2 * a + 1]);
  return largest;
}

}  // namespace

void plan_row_reuse(const OpGraph& graph, CpuGroupPlan& plan, int64_t budget_bytes) {
  if (budget_bytes <= 0) return;
  const int n = static_cast<int>(plan.nodes.size());
  std::vector<bool> reading(n, false);  // already loads from a buffer
  for (int i = 0; i < n; ++i) {
    const TeNode& source = graph.node(plan.nodes[i]);
    if (source.num_reduction() == 0) continue;
    // 1. The buffer's size; values are stored in their compute type.
    CpuRowReuse reuse;
    reuse.source = i;
    reuse.extents = largest_box(plan, i, source.num_spatial());
    for (int a = source.num_spatial(); a < source.num_axes(); ++a) reuse.extents.push_back(source.axes()[a].extent);
    int64_t elements = 1;
    for (int64_t e : reuse.extents) elements *= e;
    const Side ss{&source, &graph.node_inputs(plan.nodes[i])};
    std::vector<Expr> candidates;
    subexpressions(source.body(), candidates);
    // 2. Readers, in group order; the first fixes the stored subexpression.
    for (int j = i + 1; j < n; ++j) {
      const TeNode& reader = graph.node(plan.nodes[j]);
      if (reading[j] || reader.num_reduction() > 0 || plan.buffers[j].inlined) continue;
      const std::optional<AffineMap> spatial = spatial_map(graph, plan.nodes[i], plan.nodes[j]);
      if (!spatial) continue;
      const Side sr{&reader, &graph.node_inputs(plan.nodes[j])};
      std::vector<Expr> targets;
      subexpressions(reader.body(), targets);
      for (const Expr& s : candidates) {
        if (reuse.value.valid() && s.get() != reuse.value.get()) continue;
        if (!is_float(s.dtype()) || !has_costly_op(s) || has_axis_index(s)) continue;
        if (elements * cpu::compute_bytes(s.dtype()) > budget_bytes) continue;
        std::optional<CpuRowReader> found;
        for (const Expr& t : targets) {
          std::vector<std::pair<int, int>> leaves;
          if (!same_computation(s, ss, t, sr, leaves)) continue;
          if (std::optional<AffineMap> phi = solve_point_map(source, reader, *spatial, leaves)) {
            found = CpuRowReader{j, t, *phi};
            break;
          }
        }
        if (!found) continue;
        reuse.value = s;
        reuse.readers.push_back(std::move(*found));
        reading[j] = true;
        break;
      }
    }
    if (!reuse.readers.empty()) plan.reuses.push_back(std::move(reuse));
  }
}

}  // namespace tessel
