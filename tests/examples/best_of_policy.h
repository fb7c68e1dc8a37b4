// Worked example (policy/README.md, "Adding a policy"): a policy that runs every other built-in
// policy and keeps the schedule the cost model predicts fastest. The README quotes the code
// between the example markers; tests/examples/examples_test.cpp builds it, registers nothing
// globally, and checks what it promises.
#pragma once

// example:begin
#include <limits>
#include <memory>
#include <string>

#include "policy/policy.h"

namespace tessel::examples {

class BestOfPolicy : public Policy {
 public:
  std::string_view name() const override { return "best_of"; }
  std::string_view description() const override {
    return "every built-in policy; the schedule with the least predicted latency";
  }
  Schedule schedule(const PolicyContext& ctx) const override {
    Schedule best;
    best.predicted_latency_s = std::numeric_limits<double>::infinity();
    for (const std::unique_ptr<Policy>& p : policies()) {
      // ctx.cost already prices each candidate as its backend's kernel family when the
      // pipeline runs this policy through schedule_with_families (driver/compile.h).
      Schedule s = p->schedule(ctx);
      if (s.predicted_latency_s < best.predicted_latency_s) best = std::move(s);
    }
    best.policy = std::string(name()) + ":" + best.policy;
    return best;
  }
};

}  // namespace tessel::examples
// example:end
