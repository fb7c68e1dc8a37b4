// The roofline floor (see roofline_model.h).
#include "cost_model/roofline_model.h"

#include <algorithm>
#include <set>

#include "tilegraph/error.h"

namespace tessel {

CostBreakdown RooflineCostModel::estimate(const OpGraph& graph, const ScheduledGroup& group,
                                          const HwSpec& spec) const {
  TESSEL_ASSERT(!group.nodes.empty(), "empty group");
  CostBreakdown out;
  const std::set<NodeId> members(group.nodes.begin(), group.nodes.end());
  // Compulsory traffic: every tensor entering the group read once, every tensor leaving written once.
  std::set<TensorId> read, written;
  for (NodeId n : group.nodes) {
    const TeNode& node = graph.node(n);
    // The best peak the dtype has on this chip: a floor ignores tile shapes.
    const DType dt = node.inputs().empty() ? node.output().dtype : node.inputs()[0].type.dtype;
    double peak = std::max(spec.peak_flops(dt, true), spec.peak_flops(dt, false));
    if (peak <= 0) peak = spec.peak_flops(DType::f32, false);
    TESSEL_ASSERT(peak > 0, "hardware spec '", spec.name, "' has no f32 peak");
    out.flops += static_cast<double>(node.flops());
    out.term_ref("compute") += static_cast<double>(node.flops()) / peak;
    for (TensorId t : graph.node_inputs(n))
      if (graph.producer(t) < 0 || !members.count(graph.producer(t))) read.insert(t);
    const TensorId result = graph.node_output(n);
    bool leaves = n == group.nodes.back();
    for (TensorId o : graph.outputs()) leaves |= o == result;
    for (NodeId c : graph.consumers(result)) leaves |= !members.count(c);
    if (leaves) written.insert(result);
  }
  double bytes = 0;
  for (TensorId t : read) bytes += static_cast<double>(graph.tensor(t).type.num_elements() * dtype_bytes(graph.tensor(t).type.dtype));
  for (TensorId t : written) bytes += static_cast<double>(graph.tensor(t).type.num_elements() * dtype_bytes(graph.tensor(t).type.dtype));
  const MemoryLevel* device = nullptr;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope != MemoryScope::host) device = &l;
  TESSEL_ASSERT(device != nullptr, "hardware spec '", spec.name, "' has no device memory level");
  const double seconds = bytes / (device->bandwidth_gbps * 1e9);
  out.memory.push_back({device->name, bytes, seconds});
  out.bound = seconds > out.term("compute") ? device->name : "compute";
  out.latency_s = std::max(seconds, out.term("compute"));
  return out;
}

}  // namespace tessel
