// Schedule helpers.
#include "policy/schedule.h"

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

}  // namespace tessel
