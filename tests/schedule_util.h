// Helpers shared by the suites that schedule graphs: where the source tree is, the shipped hardware
// specs (each loaded once per process), and scheduling by policy name.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "cost_model/analytic_model.h"
#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"
#include "policy/kernel_families.h"
#include "policy/policy.h"

namespace tessel::testing {

/// The source tree: $TESSEL_SOURCE_DIR when set (a bundled test binary run from another checkout,
/// scripts/device_run), else the tree it was built from.
inline std::string repo_root() {
  if (const char* env = std::getenv("TESSEL_SOURCE_DIR"); env && *env) return env;
  return TESSEL_SOURCE_DIR;
}

/// `relative` inside the source tree.
inline std::string source_path(const std::string& relative) { return repo_root() + "/" + relative; }

/// The shipped spec hw_specs/<name>.json, loaded once.
inline const HwSpec& shipped_spec(const std::string& name) {
  static std::map<std::string, HwSpec> specs;
  auto it = specs.find(name);
  if (it == specs.end()) it = specs.emplace(name, load_hw_spec(source_path("hw_specs/" + name + ".json"))).first;
  return it->second;
}

/// `g` scheduled for `spec` by the registered policy named `policy` with the analytic cost model
/// and, as the CLI schedules, the kernel families of the backend that targets `spec`
/// (schedule_with_families): every candidate priced as the family it would get, every group's
/// family recorded.
inline Schedule schedule_as_cli(const OpGraph& g, const HwSpec& spec, const std::string& policy) {
  AnalyticCostModel cost;
  std::unique_ptr<KernelFamilies> families;
  for (const auto& b : backends())
    if (b->supports(spec)) families = b->kernel_families();
  for (const auto& p : policies())
    if (p->name() == policy) return schedule_with_families(*p, PolicyContext{g, spec, cost}, families.get());
  FAIL("no policy named ", policy);
  return {};
}

/// `g` scheduled for `spec` by the registered policy named `policy` with the analytic cost model.
inline Schedule schedule_with(const OpGraph& g, const HwSpec& spec, const std::string& policy) {
  AnalyticCostModel cost;
  for (const auto& p : policies())
    if (p->name() == policy) return p->schedule(PolicyContext{g, spec, cost});
  FAIL("no policy named ", policy);
  return {};
}

}  // namespace tessel::testing
