// The list of built-in policies (STYLE.md habit 8: one registry function, no lookup by string
// elsewhere). Adding a policy: a class implementing Policy plus one line here.
#include "policy/policy.h"
#include "policy/roller.h"
#include "policy/welder.h"

namespace tessel {

std::vector<std::unique_ptr<Policy>> policies() {
  std::vector<std::unique_ptr<Policy>> out;
  out.push_back(std::make_unique<WelderPolicy>());  // the default
  out.push_back(std::make_unique<RollerPolicy>());
  // Z3Policy (policy/z3_policy.h) is not listed yet: it now proves traffic-optimal tiles in
  // seconds per operator (experiments/z3_gap), but with it the legality tests (every bundled model
  // and 518 ONNX models on 7 specs) take over 6 minutes and 2 of their checks failed; both need
  // work before it is listed. Its own tests exercise it.
  return out;
}

}  // namespace tessel
