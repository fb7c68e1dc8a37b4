// Recognizing and planning vector kernels (see vector_plan.h).
#include "kernels/cuda/vector_plan.h"

#include <algorithm>
#include <climits>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

VectorMatch fail(std::string reason) { return VectorMatch{std::nullopt, std::move(reason)}; }

bool is_identity(const AffineMap& map, int axes) {
  if (map.num_results() != axes) return false;
  for (int r = 0; r < axes; ++r) {
    const AffineExpr& row = map.result(r);
    if (row.offset != 0) return false;
    for (size_t a = 0; a < row.coeffs.size(); ++a)
      if (row.coeffs[a] != (static_cast<int>(a) == r ? 1 : 0)) return false;
  }
  return true;
}

}  // namespace

VectorMatch plan_vector(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  const int n = static_cast<int>(group.nodes.size());
  const TeNode& sink = graph.node(group.nodes.back());
  VectorPlan p;
  const int d = sink.num_spatial();
  p.extents = sink.extents();
  p.extents.resize(d);  // a window's reduction axes are not the sink's domain
  if (d == 0) return fail("the sink is a scalar");
  p.elements = 1;
  for (int64_t e : p.extents) p.elements *= e;
  if (p.elements == 0) return fail("the output is empty");
  // A reshaping sink is fine: its output holds the domain's values in row-major order, where the
  // kernel stores them (a reshaped node inside the group is not, unless it is a copy that only
  // splits dimensions, folded below: it is read through its shape).
  int min_bytes = dtype_bytes(sink.output().dtype);
  // In-group plain copies (a transpose, a fixed index, a reshape that only splits dimensions:
  // body in0 of one in-bounds input, same dtype, no write to device memory) are folded into their
  // readers' maps: their domains may differ from the sink's.
  std::vector<bool> folded(n, false);
  std::vector<int> index_of(n, -1);  // group position -> position in p.nodes
  for (int i = 0; i + 1 < n; ++i) {
    const TeNode& node = graph.node(group.nodes[i]);
    folded[i] = !generic.nodes[i].writes_global &&
                (!generic.nodes[i].reshaped || split_reshape_map(node.extents(), node.output().shape)) &&
                node.num_reduction() == 0 &&
                node.inputs().size() == 1 && !node.inputs()[0].is_gather() && node.body().op() == ExprOp::input &&
                node.body().index() == 0 && node.output().dtype == node.inputs()[0].type.dtype && reads_in_bounds(node, node.inputs()[0]);
  }
  for (int i = 0; i < n; ++i) {
    if (folded[i]) continue;
    const TeNode& node = graph.node(group.nodes[i]);
    const std::vector<int64_t> all = node.extents();
    if (std::vector<int64_t>(all.begin(), all.begin() + node.num_spatial()) != p.extents)
      return fail(cat("'", node.name(), "' has another domain than the sink"));
    if (node.num_reduction() != 0) {
      // A window: each output reduces a few points (a depthwise convolution, a pooling).
      if (node.combiner() == Combiner::none) return fail(cat("'", node.name(), "' reduces without a combiner"));
      int64_t points = 1;
      for (int a = node.num_spatial(); a < node.num_axes(); ++a) points *= all[a];
      if (points > kVectorMaxWindowPoints)
        return fail(cat("'", node.name(), "' reduces ", points, " points per output, more than a window (",
                        kVectorMaxWindowPoints, ")"));
      // Across positions, not along the innermost dimension of what it reads: a contraction over
      // channels (a GEMM, a 1x1 convolution) belongs to the tensor-core or generic families.
      for (const Access& acc : node.inputs()) {
        if (acc.map.num_results() == 0) continue;
        const AffineExpr& last = acc.map.result(acc.map.num_results() - 1);
        for (int a = node.num_spatial(); a < node.num_axes(); ++a)
          if (last.coeffs[a] != 0)
            return fail(cat("'", node.name(), "' reduces along the innermost dimension of an input (a contraction, not a window)"));
      }
    }
    if (i + 1 < n && generic.nodes[i].writes_global) return fail(cat("'", node.name(), "' also writes device memory"));
    if (i + 1 < n && generic.nodes[i].reshaped) return fail(cat("'", node.name(), "' reshapes its output inside the group"));
    index_of[i] = static_cast<int>(p.nodes.size());
    p.nodes.push_back(group.nodes[i]);
    std::vector<VectorRead> reads;
    const std::vector<TensorId>& ins = graph.node_inputs(group.nodes[i]);
    for (size_t k = 0; k < ins.size(); ++k) {
      const Access& acc = node.inputs()[k];
      if (acc.is_gather()) return fail(cat("'", node.name(), "' gathers"));
      VectorRead r;
      r.read.tensor = ins[k];
      r.read.map = acc.map;
      r.read.type = acc.type;
      r.read.pad = acc.pad_value;
      int pos = generic.position(graph.producer(ins[k]));
      if (pos >= 0 && folded[pos] && !reads_in_bounds(node, acc))
        return fail(cat("'", node.name(), "' reads the copy '", graph.node(group.nodes[pos]).name(), "' out of bounds"));
      while (pos >= 0 && folded[pos]) {  // through the copy: its source at the composed map
        const NodeId c = group.nodes[pos];
        const TeNode& copy = graph.node(c);
        const Access& src = copy.inputs()[0];
        r.read.tensor = graph.node_inputs(c)[0];
        // A splitting reshape is read at the domain point of the output point: one more affine step.
        const AffineMap inner = copy.output().shape == copy.extents()
                                    ? src.map
                                    : compose(src.map, *split_reshape_map(copy.extents(), copy.output().shape));
        r.read.map = compose(inner, r.read.map);
        r.read.type = src.type;
        r.read.pad = src.pad_value;
        pos = generic.position(graph.producer(r.read.tensor));
      }
      r.producer = pos >= 0 ? index_of[pos] : -1;
      if (pos >= 0 && node.num_reduction() != 0)
        return fail(cat("'", node.name(), "' reduces over '", graph.tensor(r.read.tensor).name,
                        "', which the group computes (a window reads device memory only)"));
      if (pos >= 0) {
        if (!is_identity(r.read.map, d))
          return fail(cat("'", node.name(), "' reads '", graph.tensor(r.read.tensor).name, "' at another point"));
      } else {
        min_bytes = std::min(min_bytes, dtype_bytes(r.read.type.dtype));
      }
      reads.push_back(r);
    }
    p.reads.push_back(std::move(reads));
  }
  // 16 bytes of the narrowest dtype read from or written to device memory, halved until it
  // divides the last axis.
  p.vec = std::max(1, kRowVectorBytes / std::max(1, min_bytes));
  while (p.vec > 1 && p.extents.back() % p.vec != 0) p.vec /= 2;
  if (p.vec < 2) return fail(cat("the last axis (", p.extents.back(), ") is not a multiple of two elements"));
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const TeNode& node = graph.node(p.nodes[i]);
    for (VectorRead& r : p.reads[i]) {
      if (r.producer >= 0) continue;
      if (node.num_reduction() == 0) r.vector = row_vector_access(node, r.read.map, r.read.type, d - 1, p.vec);
      else r.guarded = row_vector_access_guarded(node, r.read.map, r.read.type, d - 1, p.vec);
    }
  }
  const int warp = static_cast<int>(spec.compute.simd_width);
  p.threads = static_cast<int>(std::min<int64_t>(kVectorBlockThreads, spec.limits.max_threads_per_block));
  p.threads -= p.threads % warp;
  if (p.threads <= 0) return fail("no whole warp fits a block");
  const int64_t vectors = p.elements / p.vec;
  p.blocks = std::min<int64_t>((vectors + p.threads - 1) / p.threads, INT_MAX);
  return VectorMatch{p, ""};
}

GroupPlan vector_group_plan(const GroupPlan& generic, const VectorPlan& vp) {
  GroupPlan plan = inlined_launch_plan(generic, vp.blocks, vp.threads);
  plan.sink_tile.back() = vp.vec;
  return plan;
}

std::string print_vector_plan(const VectorPlan& p) {
  int vector_reads = 0, other_reads = 0;
  for (const std::vector<VectorRead>& rs : p.reads)
    for (const VectorRead& r : rs)
      if (r.producer < 0) (r.vector || r.guarded ? vector_reads : other_reads) += 1;
  return cat("vector kernel: ", p.elements, " elements, ", p.vec, " per thread and access; ", p.threads, " threads per block, ",
             p.blocks, " blocks (grid-stride); ", vector_reads, " vector reads, ", other_reads, " scalar reads of device memory");
}

}  // namespace tessel::cuda
