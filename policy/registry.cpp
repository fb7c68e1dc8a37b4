// The list of built-in policies (STYLE.md habit 8: one registry function, no lookup by string
// elsewhere). Adding a policy: a class implementing Policy plus one line here.
#include "policy/policy.h"
#include "policy/roller.h"
#include "policy/welder.h"
#include "policy/z3_policy.h"

namespace tessel {

std::vector<std::unique_ptr<Policy>> policies() {
  std::vector<std::unique_ptr<Policy>> out;
  out.push_back(std::make_unique<WelderPolicy>());  // the default
  out.push_back(std::make_unique<RollerPolicy>());
  out.push_back(std::make_unique<Z3Policy>());
  return out;
}

}  // namespace tessel
