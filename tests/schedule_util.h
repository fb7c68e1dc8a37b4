// Helpers shared by the suites that schedule graphs: where the source tree is, the shipped hardware
// specs (each loaded once per process), and scheduling by policy name.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "cost_model/analytic_model.h"
#include "driver/compile.h"
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

/// The registered policy named `name`.
inline std::unique_ptr<Policy> policy_named(const std::string& name) {
  for (auto& p : policies())
    if (p->name() == name) return std::move(p);
  FAIL("no policy named ", name);
  return nullptr;
}

/// `g` scheduled for `spec` by the registered policy named `policy`, as the CLI schedules: through
/// compile() with the analytic cost model and the kernel families of the backend that targets
/// `spec` (every candidate priced as the family it would get, every group's family recorded).
inline Schedule schedule_as_cli(const OpGraph& g, const HwSpec& spec, const std::string& policy) {
  const std::unique_ptr<Policy> p = policy_named(policy);
  CompileRequest r;
  r.graph = &g;
  r.backend.clear();
  r.spec = spec;
  r.policy = p.get();
  r.last = Stage::schedule;
  return compile(r).schedule;
}

/// `g` compiled and loaded with `schedule` for `spec` by `backend` through compile(): the schedule
/// is replayed as the CLI replays a saved one (checked, families recorded where missing, priced).
inline Compilation compile_with(const OpGraph& g, const HwSpec& spec, const Schedule& schedule, const std::string& backend,
                               const CompileOptions& options = {}) {
  CompileRequest r;
  r.graph = &g;
  r.backend = backend;
  r.spec = spec;
  r.schedule = schedule;
  r.options = options;
  return compile(r);
}

/// `g` scheduled for `spec` by the registered policy named `policy` with the analytic cost model.
inline Schedule schedule_with(const OpGraph& g, const HwSpec& spec, const std::string& policy) {
  AnalyticCostModel cost;
  for (const auto& p : policies())
    if (p->name() == policy) return p->schedule(PolicyContext{g, spec, cost});
  FAIL("no policy named ", policy);
  return {};
}

/// The group of `s` holding the first node with a reduction (a contraction); fails the test when
/// there is none.
inline const ScheduleGroup& reducing_group(const OpGraph& g, const Schedule& s) {
  for (const ScheduleGroup& sg : s.groups)
    for (NodeId n : sg.group.nodes)
      if (g.node(n).num_reduction() > 0) return sg;
  FAIL("no group with a reduction");
  return s.groups.front();
}

}  // namespace tessel::testing
