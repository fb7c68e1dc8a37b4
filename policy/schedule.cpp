// Schedule helpers.
#include "policy/schedule.h"

#include <set>

namespace tessel {

std::string_view unfused_reason_name(UnfusedReason r) {
  switch (r) {
    case UnfusedReason::capacity: return "capacity";
    case UnfusedReason::grid: return "grid";
    case UnfusedReason::cost: return "cost";
    case UnfusedReason::policy: return "policy";
  }
  return "?";
}

std::vector<int> group_of_nodes(const OpGraph& graph, const Schedule& schedule) {
  std::vector<int> out(graph.num_nodes(), -1);
  for (size_t g = 0; g < schedule.groups.size(); ++g)
    for (NodeId n : schedule.groups[g].group.nodes)
      if (n >= 0 && n < graph.num_nodes()) out[n] = static_cast<int>(g);
  return out;
}

void record_edges_between_groups(const OpGraph& graph, Schedule& schedule, UnfusedReason reason, const std::string& detail) {
  const std::vector<int> group = group_of_nodes(graph, schedule);
  for (NodeId c : graph.topological_order()) {
    std::set<TensorId> seen;  // a node may read one tensor twice (x * x)
    for (TensorId t : graph.node_inputs(c)) {
      const NodeId p = graph.producer(t);
      if (p < 0 || group[p] == group[c] || !seen.insert(t).second) continue;
      schedule.unfused.push_back({t, p, c, reason, detail});
    }
  }
}

}  // namespace tessel
