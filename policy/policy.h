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

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/schedule.h"

namespace tessel {

class KernelFamilies;  // policy/kernel_families.h

/// How a contraction reading a sparse weight gets its kernel (policy/sparse_kinds.h): the cheaper
/// of dense and block-sparse by the cost model, or always one of them (to measure both sides).
enum class SparseKernels : uint8_t { cost, dense, block_sparse };

struct PolicyContext {
  const OpGraph& graph;
  const HwSpec& spec;
  const CostModel& cost;  // run through schedule_with_families, it prices each group's kernel family
  /// The backend's kernel families, when scheduling for one (schedule_with_families sets it).
  const KernelFamilies* families = nullptr;
  SparseKernels sparse = SparseKernels::cost;
};

class Measurer;
class MeasureCache;

/// One option of a policy that can be set by name from the command line (`--policy-opt
/// NAME=VALUE`): its name, what it does, and its current value and setter, bound to the policy's
/// options (policy_options.h builds them).
struct PolicyOption {
  std::string name, description;
  std::function<std::string()> get;                     // the current value, as text
  std::function<std::string(const std::string&)> set;   // "" when set, else why not
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Schedule schedule(const PolicyContext& ctx) const = 0;
  /// Measured top-k (`--tune K`, tune.h): from now on measure the `k` best candidates of each group
  /// with `measurer` (not owned) through `cache` (not owned; null: a cache in
  /// default_measure_cache_dir()) and keep the fastest. False when this policy does not tune.
  virtual bool tune_with(Measurer* measurer, MeasureCache* cache, int k) {
    (void)measurer, (void)cache, (void)k;
    return false;
  }
  /// What tune_with set: the measurer (null when the policy does not measure), its cache and K.
  struct Tuning {
    Measurer* measurer = nullptr;
    MeasureCache* cache = nullptr;
    int k = 0;
  };
  virtual Tuning tuning() const { return {}; }
  /// The options `--policy-opt` sets, bound to this policy (valid while it lives); none by default.
  virtual std::vector<PolicyOption> options() { return {}; }
};

/// Sets `assignment` ("NAME=VALUE") on `policy`; returns "" when set, else a one-line reason (an
/// unknown name says the nearest and lists the policy's options).
std::string set_policy_option(Policy& policy, const std::string& assignment);

/// Optional measurement of candidates on a real device: a policy given one (`--tune K`) times
/// its K best candidates per group and keeps the fastest measured; results are cached by
/// MeasureCache. The built-in one compiles and times a group through a backend
/// (driver/measure.h: BackendMeasurer); tests give fakes.
class Measurer {
 public:
  virtual ~Measurer() = default;
  /// Seconds for one run of `group`, or nullopt when it cannot be measured.
  virtual std::optional<double> measure(const OpGraph& graph, const ScheduledGroup& group,
                                        const HwSpec& spec) = 0;
  /// Why the last measure() returned nullopt (the backend refused the group, its output did not
  /// match the interpreter); empty when it did not or the measurer does not say.
  virtual std::string last_failure() const { return {}; }
  /// What else sets its times besides the group and the chip, as text (a CPU measurer's thread
  /// count: "threads=2"); part of the measurement cache's key. Empty: nothing.
  virtual std::string context() const { return {}; }
};

/// Every policy with default options: the built-in ones, the default (welder) first, then the
/// registered ones in the order they were registered.
std::vector<std::unique_ptr<Policy>> policies();

/// Makes a fresh instance of a registered policy (its options at their defaults).
using PolicyFactory = std::function<std::unique_ptr<Policy>()>;
/// Adds a policy from outside the library (the Python package's `tessel.register_policy`) to
/// policies(), so every command finds it by `name`; registering a name again replaces its factory.
/// UserError when a built-in policy has the name. Thread-safe.
void register_policy(const std::string& name, PolicyFactory factory);
/// Removes a registered policy; false when none has the name.
bool unregister_policy(const std::string& name);

}  // namespace tessel
