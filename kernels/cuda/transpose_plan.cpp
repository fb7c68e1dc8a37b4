// Recognizing and planning tiled transposes (see transpose_plan.h).
#include "kernels/cuda/transpose_plan.h"

#include <climits>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

TransposeMatch fail(std::string reason) { return TransposeMatch{std::nullopt, std::move(reason)}; }

}  // namespace

TransposeMatch plan_transpose(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  (void)generic;
  if (group.nodes.size() != 1) return fail("the group has more than one node");
  const NodeId id = group.nodes.front();
  const TeNode& node = graph.node(id);
  if (node.num_reduction() != 0) return fail("the node reduces");
  if (node.inputs().size() != 1 || node.body().op() != ExprOp::input || node.body().index() != 0)
    return fail("the node is not a copy of one input");
  const Access& acc = node.inputs()[0];
  if (acc.is_gather()) return fail("the copy gathers");
  if (acc.type.dtype != node.output().dtype) return fail("the copy converts its dtype");
  const int d = node.num_spatial(), rank = acc.map.num_results();
  if (d < 2) return fail("the copy has fewer than two axes");
  const std::vector<int64_t> extents = node.extents();
  for (int64_t e : extents)
    if (e == 0) return fail("the output is empty");
  // in_dim[a]: the input dimension axis a walks.
  std::vector<int> in_dim(d, -1);
  for (int q = 0; q < rank; ++q) {
    const AffineExpr& row = acc.map.result(q);
    if (row.offset != 0) return fail("the copy reads at an offset");
    int axis = -1;
    for (int a = 0; a < d; ++a) {
      if (row.coeffs[a] == 0) continue;
      if (row.coeffs[a] != 1 || axis >= 0) return fail("an index of the input is not one axis");
      axis = a;
    }
    if (axis < 0) {
      if (acc.type.shape[q] != 1) return fail("the copy reads a fixed index");
      continue;
    }
    if (in_dim[axis] >= 0) return fail("an axis is read twice");
    if (acc.type.shape[q] != extents[axis]) return fail("the copy reads part of its input");
    in_dim[axis] = q;
  }
  for (int a = 0; a < d; ++a)
    if (in_dim[a] < 0 && extents[a] != 1) return fail("an axis does not walk the input");
  // The input's row-major strides.
  std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1);
  for (int q = rank - 2; q >= 0; --q) in_strides[q] = in_strides[q + 1] * acc.type.shape[q + 1];
  // The merged axes, innermost first (axes of extent 1 dropped). An axis merges into the merged
  // axis inside it when it steps over that one's whole extent in the input too (its input stride
  // is the inner one's times its extent; in the output it always does, the axes being adjacent
  // there): then (outer, inner) is one axis of both layouts, whatever dimensions of size 1 the
  // input has between them.
  int64_t out_stride = 1;
  std::vector<TransposeAxis> rev;
  for (int a = d - 1; a >= 0; --a) {
    if (extents[a] == 1) continue;
    const int q = in_dim[a];
    if (!rev.empty() && rev.back().in_stride * rev.back().extent == in_strides[q]) rev.back().extent *= extents[a];
    else rev.push_back({extents[a], in_strides[q], out_stride});
    out_stride *= extents[a];
  }
  if (rev.size() < 2) return fail("the copy is contiguous (one merged axis)");
  TransposePlan p;
  p.node = id;
  p.input = graph.node_inputs(id)[0];
  int b = -1;
  for (size_t i = 0; i < rev.size(); ++i)
    if (rev[i].in_stride == 1) b = static_cast<int>(i);
  if (b < 0) return fail("no axis walks the input's last dimension");
  if (b == 0) return fail("the output's last axis is the input's too (the vector kernel copies it contiguously)");
  p.a = rev[0];
  p.b = rev[static_cast<size_t>(b)];
  for (int i = static_cast<int>(rev.size()) - 1; i >= 1; --i)
    if (i != b) p.batch.push_back(rev[static_cast<size_t>(i)]);
  p.tile = kTransposeTile;
  p.rows_per_thread = kTransposeRowsPerThread;
  if (p.threads() > spec.limits.max_threads_per_block) return fail("the tile's threads exceed the block limit");
  p.tiles_a = (p.a.extent + p.tile - 1) / p.tile;
  p.tiles_b = (p.b.extent + p.tile - 1) / p.tile;
  int64_t points = 1;
  for (const TransposeAxis& t : p.batch) points *= t.extent;
  p.blocks = p.tiles_a * p.tiles_b * points;
  if (p.blocks > INT_MAX) return fail("more blocks than a grid holds");
  return TransposeMatch{p, ""};
}

GroupPlan transpose_group_plan(const GroupPlan& generic, const TransposePlan& plan) {
  return inlined_launch_plan(generic, plan.blocks, plan.threads());
}

std::string print_transpose_plan(const TransposePlan& p) {
  std::string batch;
  for (const TransposeAxis& t : p.batch) batch += cat(batch.empty() ? "" : " x ", t.extent);
  return cat("tiled transpose: ", p.a.extent, " (contiguous out) x ", p.b.extent, " (contiguous in)",
             batch.empty() ? "" : cat(", batch ", batch), "; tiles of ", p.tile, " x ", p.tile, ", ", p.threads(),
             " threads, ", p.blocks, " blocks");
}

}  // namespace tessel::cuda
