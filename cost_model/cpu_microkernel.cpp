#include "cost_model/cpu_microkernel.h"

#include <algorithm>

#include "tilegraph/dtype.h"

namespace tessel {

namespace {

bool depends(const Access& access, int axis) {
  for (const AffineExpr& row : access.map.results())
    if (row.coeffs[axis] != 0) return true;
  return false;
}

}  // namespace

std::optional<CpuContraction> match_cpu_contraction(const TeNode& node) {
  const DType dtype = node.body().dtype();
  if (node.combiner() != Combiner::sum || node.init() != 0 || node.num_reduction() == 0 || node.num_spatial() == 0) return std::nullopt;
  if ((dtype != DType::f32 && dtype != DType::f64) || node.output().dtype != dtype) return std::nullopt;
  CpuContraction c;
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
  const bool x_n = depends(node.inputs()[x.index()], c.n_axis), y_n = depends(node.inputs()[y.index()], c.n_axis);
  if (x_n == y_n) return std::nullopt;
  c.b = x_n ? x.index() : y.index();
  c.a = x_n ? y.index() : x.index();
  for (int ax = node.num_spatial() - 2; ax >= 0 && c.m_axis < 0; --ax)
    if (depends(node.inputs()[c.a], ax) && !depends(node.inputs()[c.b], ax)) c.m_axis = ax;
  return c;
}

CpuBlocking choose_cpu_blocking(int64_t registers, int64_t lanes, int64_t m_extent, int64_t n_extent, bool has_m) {
  CpuBlocking best;
  double best_ratio = 0;
  const int64_t max_nr = std::max<int64_t>(1, n_extent / lanes);
  for (int64_t nr = 1; nr <= max_nr && nr + 2 <= registers; ++nr) {
    int64_t mr = has_m ? (registers - 1 - nr) / nr : 1;
    mr = std::min(mr, std::max<int64_t>(1, m_extent));
    if (mr < 1) break;
    const double ratio = static_cast<double>(mr * nr) / static_cast<double>(mr + nr);
    if (ratio > best_ratio) {
      best_ratio = ratio;
      best = {static_cast<int>(mr), static_cast<int>(nr)};
    }
  }
  return best;
}

int64_t cpu_vector_registers(const HwSpec& spec) {
  const int64_t vector_bytes = spec.compute.simd_width * dtype_bytes(DType::f32);
  const int regs = spec.level_index("registers");
  if (vector_bytes <= 0 || regs < 0) return 0;
  return std::max<int64_t>(1, spec.memory_levels[regs].capacity_bytes / vector_bytes);
}

int64_t cpu_pack_budget(const HwSpec& spec) {
  int64_t budget = 0;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope == MemoryScope::core && l.cache && !l.cache->shared) budget = std::max(budget, l.capacity_bytes / 2);
  return budget;
}

bool cpu_packs_b(const CpuContraction& c, const CpuBlocking& blocking, int64_t m_extent, int64_t reduction_points,
                 int64_t lanes, int64_t value_bytes, int64_t pack_budget) {
  const int64_t panel_bytes = reduction_points * blocking.nr * lanes * value_bytes;
  return c.m_axis >= 0 && m_extent >= 2 * blocking.mr && panel_bytes <= pack_budget;
}

double cpu_b_operand_bytes(const TeNode& node, const LevelTile& task, const HwSpec& spec) {
  const std::optional<CpuContraction> c = match_cpu_contraction(node);
  const int64_t registers = cpu_vector_registers(spec);
  if (!c || registers <= 0 || static_cast<int>(task.spatial.size()) != node.num_spatial()) return 0;
  // The compute type: f32 and f64 nodes compute in their own type (the only ones matched).
  const int64_t value_bytes = dtype_bytes(node.body().dtype());
  const int64_t lanes = spec.compute.simd_width * dtype_bytes(DType::f32) / value_bytes;
  const auto box = [&](int axis) { return std::min(node.axes()[axis].extent, task.spatial[axis]); };
  const int64_t n_extent = box(c->n_axis), m_extent = c->m_axis >= 0 ? box(c->m_axis) : 1;
  if (lanes < 2 || n_extent < lanes) return 0;  // the generic nest takes it
  const CpuBlocking blocking = choose_cpu_blocking(registers, lanes, m_extent, n_extent, c->m_axis >= 0);
  int64_t reduction_points = 1;
  for (int r = node.num_spatial(); r < node.num_axes(); ++r) reduction_points *= node.axes()[r].extent;
  // Reads of B where it lives per element of a panel: one read and one write into the panel when
  // packed, else one read per MR-row block.
  const bool packed = cpu_packs_b(*c, blocking, m_extent, reduction_points, lanes, value_bytes, cpu_pack_budget(spec));
  const int64_t passes = packed ? 2 : (m_extent + blocking.mr - 1) / blocking.mr;
  // Per task: every point outside m (n counted in whole vectors) at every reduction point.
  double per_task = static_cast<double>(n_extent / lanes * lanes) * static_cast<double>(reduction_points);
  for (int axis = 0; axis < node.num_spatial(); ++axis)
    if (axis != c->m_axis && axis != c->n_axis) per_task *= static_cast<double>(box(axis));
  return static_cast<double>(passes) * per_task * static_cast<double>(value_bytes) * static_cast<double>(num_spatial_tiles(node, task));
}

}  // namespace tessel
