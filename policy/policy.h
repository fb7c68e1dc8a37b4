// Policies: turn (OpGraph, HwSpec, CostModel) into a Schedule (schedule.h). Each built-in policy
// is a class with a typed options struct; `policies()` lists them all (registry.cpp).
//
//   roller  one operator per group; hardware-aligned tiles scaled up by data reuse, top-k by cost
//   welder  graph connecting: try each edge at each memory level, keep what the cost model prefers
//   z3      exact tile sizes for a group under divisibility, alignment and capacity constraints
//
// Policies are deterministic: the same graph, spec, cost model and options give the same schedule,
// bit for bit. Rejected candidates are values carrying a reason, never exceptions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/schedule.h"

namespace tessel {

class KernelFamilies;  // policy/kernel_families.h

struct PolicyContext {
  const OpGraph& graph;
  const HwSpec& spec;
  const CostModel& cost;  // run through schedule_with_families, it prices each group's kernel family
  /// The backend's kernel families, when scheduling for one (schedule_with_families sets it).
  const KernelFamilies* families = nullptr;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Schedule schedule(const PolicyContext& ctx) const = 0;
};

/// Optional measurement of candidates on a real device (a hook: code generation does not exist
/// yet, so no built-in measurer). A policy given one times its top-k candidates and keeps the
/// fastest measured; results are cached by MeasureCache.
class Measurer {
 public:
  virtual ~Measurer() = default;
  /// Seconds for one run of `group`, or nullopt when it cannot be measured.
  virtual std::optional<double> measure(const OpGraph& graph, const ScheduledGroup& group,
                                        const HwSpec& spec) = 0;
};

/// Every built-in policy with default options, the default (welder) first.
std::vector<std::unique_ptr<Policy>> policies();

}  // namespace tessel
