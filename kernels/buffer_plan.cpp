#include "kernels/buffer_plan.h"

#include <algorithm>

#include "tilegraph/error.h"

namespace tessel {

const BufferSlot* BufferPlan::find(TensorId t) const {
  auto it = std::lower_bound(slots.begin(), slots.end(), t, [](const BufferSlot& s, TensorId id) { return s.tensor < id; });
  return it != slots.end() && it->tensor == t ? &*it : nullptr;
}

BufferPlan plan_buffers(const OpGraph& graph, const Schedule& schedule, int64_t alignment) {
  TESSEL_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0, "alignment ", alignment, " is not a power of two");
  const std::vector<int> group_of = group_of_nodes(graph, schedule);
  const int num_groups = static_cast<int>(schedule.groups.size());
  BufferPlan plan;
  plan.alignment = alignment;
  std::vector<bool> is_output(graph.num_tensors(), false);
  for (TensorId t : graph.outputs()) is_output[t] = true;
  for (TensorId t = 0; t < graph.num_tensors(); ++t) {
    const NodeId p = graph.producer(t);
    if (p < 0) continue;  // inputs and weights have buffers of their own
    TESSEL_ASSERT(group_of[p] >= 0, "node '", graph.node(p).name(), "' is in no group of the schedule");
    BufferSlot s;
    s.tensor = t;
    s.first_group = s.last_group = group_of[p];
    bool crosses = is_output[t];
    for (NodeId c : graph.consumers(t)) {
      TESSEL_ASSERT(group_of[c] >= group_of[p], "group order: '", graph.node(c).name(), "' before its producer");
      if (group_of[c] != group_of[p]) crosses = true;
      s.last_group = std::max(s.last_group, group_of[c]);
    }
    if (is_output[t]) s.last_group = num_groups;
    // An intermediate that stays inside its group and has an edge level never reaches memory.
    const ScheduledGroup& grp = schedule.groups[group_of[p]].group;
    if (!crosses && grp.edge_levels.count(t)) continue;
    const TensorType& type = graph.tensor(t).type;
    s.bytes = type.num_elements() * dtype_bytes(type.dtype);
    plan.slots.push_back(s);
  }
  // First fit, largest first, among slots whose lifetimes overlap.
  std::vector<size_t> order(plan.slots.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return plan.slots[a].bytes > plan.slots[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    BufferSlot& s = plan.slots[i];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of overlapping placed slots
    for (size_t j : placed) {
      const BufferSlot& o = plan.slots[j];
      if (o.first_group <= s.last_group && s.first_group <= o.last_group) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + s.bytes <= begin) break;
      offset = std::max(offset, (end + alignment - 1) / alignment * alignment);
    }
    s.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + s.bytes);
    plan.unshared_bytes += (s.bytes + alignment - 1) / alignment * alignment;
    placed.push_back(i);
  }
  return plan;
}

int64_t arena_alignment(const HwSpec& spec, int64_t minimum) {
  int64_t a = std::max<int64_t>(1, minimum);
  for (const MemoryLevel& l : spec.memory_levels) a = std::max(a, l.transaction_bytes);
  int64_t pow2 = 1;
  while (pow2 < a) pow2 *= 2;
  return pow2;
}

}  // namespace tessel
