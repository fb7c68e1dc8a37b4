// The CPU backend's kernel families (see kernel_families.h).
#include "kernels/cpu/kernel_families.h"

namespace tessel::cpu {

std::vector<KernelFamilies::Family> CpuKernelFamilies::families() const {
  return {{"microkernel", "contractions on the register-blocked FMA micro-kernel, other nodes as vector loops", {"contractions"}},
          {"loops", "every node as vector loop nests", {}}};
}

int microkernel_nodes(const OpGraph& graph, const ScheduledGroup& group) {
  int n = 0;
  for (NodeId id : group.nodes) n += matches_contraction(graph.node(id));
  return n;
}

KernelChoice CpuKernelFamilies::choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec&) const {
  KernelChoice k;
  if (const int n = microkernel_nodes(graph, group); n > 0) {
    k.family = "microkernel";
    k.params = {{"contractions", n}};
    return k;
  }
  k.rejected.push_back("microkernel: no node is a contraction the micro-kernel takes");
  k.family = "loops";
  return k;
}

std::optional<std::string> CpuKernelFamilies::check(const OpGraph& graph, const ScheduledGroup& group,
                                                    const HwSpec& spec) const {
  if (auto why = KernelFamilies::check(graph, group, spec)) return why;
  if (group.kernel.family == "microkernel" && microkernel_nodes(graph, group) == 0)
    return "kernel family 'microkernel' cannot emit this group: no node is a contraction the micro-kernel takes";
  return std::nullopt;
}

}  // namespace tessel::cpu
