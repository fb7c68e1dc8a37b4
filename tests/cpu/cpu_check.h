// Shared by the CPU backend's tests: schedule a graph with a named policy for a CPU spec, compile
// it with the cpu backend (JIT for this host, whatever spec scheduled it), run it, and compare
// every output with the reference interpreter through compare_tensors (compare.h: the only place
// tolerances live).
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../schedule_util.h"
#include "../temp_dir.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"
#include "policy/policy.h"

namespace tessel::testing {

inline const HwSpec& cpu_spec(const std::string& name) { return shipped_spec(name); }

/// Deterministic inputs: floats uniform in [-1, 1), integers and bools small non-negative values.
inline std::vector<HostTensor> random_inputs(const OpGraph& g, uint64_t seed) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const TensorType& type = g.tensor(g.inputs()[i]).type;
    const bool fp = is_float(type.dtype);
    in.push_back(materialize_random(type, RandomInit{RandomInit::Dist::uniform, fp ? -1.0 : 0.0, fp ? 1.0 : 4.0, seed + i}));
  }
  return in;
}

struct CompiledCheck {
  bool ok = true;
  std::string message;  // the first mismatch, naming the output
  int kernels = 0;
};

/// Compiles `g` with `schedule` for `spec` (compile(), which replays the schedule as the CLI does:
/// checked against the spec first), runs it on `inputs` and compares every output with the
/// interpreter. `backend_only`: hands the schedule to the cpu backend directly, unchecked -- for
/// tests that edit tiles or shrink a spec's caches to reach a backend path on purpose.
inline CompiledCheck run_compiled(const OpGraph& g, const HwSpec& spec, const Schedule& schedule,
                                  const std::vector<HostTensor>& inputs, bool backend_only = false) {
  CompileOptions options;
  options.threads = 2;
  std::unique_ptr<Executable> direct;
  Compilation compiled;
  if (backend_only) direct = find_backend("cpu")->compile(g, schedule, spec, options);
  else compiled = compile_with(g, spec, schedule, "cpu", options);
  Executable* exe = backend_only ? direct.get() : compiled.executable.get();
  const std::vector<HostTensor> got = exe->run(inputs);
  const std::vector<HostTensor> expected = interpret(g, inputs);
  CompiledCheck check;
  check.kernels = exe->compile_stats().kernels;
  for (size_t o = 0; o < expected.size(); ++o) {
    const CompareResult r = compare_tensors(got[o], expected[o]);
    if (!r.ok && check.ok) {
      check.ok = false;
      check.message = cat("output ", o, " ('", g.tensor(g.outputs()[o]).name, "'): ", r.message);
    }
  }
  return check;
}

/// The same with `g` scheduled for `spec` by `policy`.
inline CompiledCheck run_compiled(const OpGraph& g, const HwSpec& spec, const std::string& policy,
                                  const std::vector<HostTensor>& inputs) {
  return run_compiled(g, spec, schedule_with(g, spec, policy), inputs);
}

/// The IR the CPU backend emits for `schedule` of `g` (unoptimized, every group's in turn).
inline std::string emitted_ir(const OpGraph& g, const Schedule& schedule, const HwSpec& spec) {
  TempDir dir;
  find_backend("cpu")->emit(g, schedule, spec, "llvm", dir.path.string());
  std::string all;
  for (size_t k = 0; k < schedule.groups.size(); ++k) {
    std::ifstream in(dir.file(cat("tessel_group_", k, ".ll")));
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  return all;
}

/// run_compiled with both built-in policies (welder and roller) on the AVX2 and AVX-512 specs.
inline void check_compiled(const OpGraph& g, std::vector<HostTensor> inputs = {}, uint64_t seed = 7) {
  if (inputs.empty()) inputs = random_inputs(g, seed);
  for (const std::string spec : {"x86-64-avx2-generic", "x86-64-avx512-server"})
    for (const std::string policy : {"welder", "roller"}) {
      INFO(policy, " schedule for ", spec);
      const CompiledCheck c = run_compiled(g, cpu_spec(spec), policy, inputs);
      CHECK_MESSAGE(c.ok, c.message);
    }
}

/// Lowers a single-operator model (test_util.h) whose inputs are all graph inputs except
/// `constant_inputs`, and checks it compiled against the interpreter.
inline void check_op(const std::string& op_type, const std::vector<HostTensor>& inputs,
                     std::map<std::string, AttrValue> attrs = {}, int num_outputs = 1,
                     const std::set<int>& constant_inputs = {}) {
  const OpGraph g = lower_model(single_op_model(op_type, inputs, std::move(attrs), num_outputs, constant_inputs));
  std::vector<HostTensor> model_inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!constant_inputs.count(static_cast<int>(i))) model_inputs.push_back(inputs[i]);
  INFO(op_type);
  check_compiled(g, model_inputs);
}

}  // namespace tessel::testing
