// The list of built-in policies (STYLE.md habit 8: one registry function, no lookup by string
// elsewhere). Adding a built-in policy: a class implementing Policy plus one line here; a policy
// from outside the library (the Python package's) is added at run time with register_policy.
#include <mutex>
#include <utility>

#include "policy/policy.h"
#include "policy/roller.h"
#include "policy/welder.h"
#include "policy/z3_policy.h"
#include "tilegraph/error.h"

namespace tessel {
namespace {

struct Registered {
  std::mutex mutex;
  std::vector<std::pair<std::string, PolicyFactory>> factories;
};

Registered& registered() {
  static Registered r;
  return r;
}

}  // namespace

std::vector<std::unique_ptr<Policy>> policies() {
  std::vector<std::unique_ptr<Policy>> out;
  out.push_back(std::make_unique<WelderPolicy>());  // the default
  out.push_back(std::make_unique<RollerPolicy>());
  out.push_back(std::make_unique<Z3Policy>());
  std::vector<PolicyFactory> factories;  // called outside the lock: a factory may take other locks
  {
    Registered& r = registered();
    std::lock_guard lock(r.mutex);
    for (const auto& entry : r.factories) factories.push_back(entry.second);
  }
  for (const PolicyFactory& factory : factories) out.push_back(factory());
  return out;
}

void register_policy(const std::string& name, PolicyFactory factory) {
  {
    Registered& r = registered();
    std::lock_guard lock(r.mutex);
    for (auto& [known, f] : r.factories)
      if (known == name) {
        f = std::move(factory);
        return;
      }
  }
  for (const auto& p : policies())
    if (p->name() == name) throw UserError("register_policy", name, "a built-in policy has this name");
  Registered& r = registered();
  std::lock_guard lock(r.mutex);
  r.factories.emplace_back(name, std::move(factory));
}

bool unregister_policy(const std::string& name) {
  Registered& r = registered();
  std::lock_guard lock(r.mutex);
  for (auto it = r.factories.begin(); it != r.factories.end(); ++it)
    if (it->first == name) {
      r.factories.erase(it);
      return true;
    }
  return false;
}

}  // namespace tessel
