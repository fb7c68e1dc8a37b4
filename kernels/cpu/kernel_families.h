// The CPU backend's kernel families (policy/kernel_families.h), in the order it prefers them:
//
//   microkernel  the group's contractions (GEMM, convolution) on the register-blocked FMA
//                micro-kernel (emit_contraction.cpp), its other nodes as vector loop nests
//   loops        every node as vector loop nests with correct tails (emit_group.cpp)
//
// Row reuse and streaming stores (row_reuse.h, streaming_stores.h) apply in both. A group records
// its family while the policy schedules; plan_cpu_group reads it, so a group recorded as `loops`
// keeps its contractions off the micro-kernel, and `microkernel` on a group without a
// contraction it takes is refused.
#pragma once

#include "policy/kernel_families.h"

namespace tessel::cpu {

class CpuKernelFamilies : public KernelFamilies {
 public:
  std::string_view backend() const override { return "cpu"; }
  std::vector<Family> families() const override;
  KernelChoice choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// The family name; `microkernel` needs a contraction the micro-kernel takes.
  std::optional<std::string> check(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
};

/// Whether the micro-kernel (emit_contraction.cpp) takes this node's pattern.
bool matches_contraction(const TeNode& node);

/// How many nodes of `group` the micro-kernel takes.
int microkernel_nodes(const OpGraph& graph, const ScheduledGroup& group);

}  // namespace tessel::cpu
