// Shared by the CUDA backend's tests (kernels/cuda/): scheduling a graph for a GPU spec, compiling
// every generated kernel with NVRTC (no GPU needed), and -- where a GPU is present -- running the
// compiled model and comparing every output with the reference interpreter through
// compare_compiled (compare.h: the only place tolerances live).
//
// Paths: the repository root is $TESSEL_SOURCE_DIR when set (the bundled test binary on the GPU
// machine runs from another checkout), else the source directory this binary was built from.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../schedule_util.h"
#include "../test_util.h"
#include "cost_model/analytic_model.h"
#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"
#include "kernels/cuda/kernel_emitter.h"
#include "kernels/cuda/kernel_families.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "policy/kernel_families.h"
#include "policy/policy.h"
#include "tilegraph/import/load_model.h"

namespace tessel::testing {

inline const HwSpec& gpu_spec(const std::string& name = "nvidia-h100-sxm") { return shipped_spec(name); }

/// The kernel of group `i`, as the backend emits it: a group that records no kernel family (the
/// tests schedule with the policies alone, and edit tiles) gets CudaKernelFamilies' choice first.
inline cuda::GeneratedKernel emit_kernel(const OpGraph& g, const Schedule& schedule, int i, const HwSpec& spec) {
  Schedule recorded = schedule;
  record_missing_kernel_families(g, spec, cuda::CudaKernelFamilies(), recorded);
  return cuda::emit_group_kernel(g, recorded, i, spec);
}

/// Emits every group kernel of `schedule` and compiles each distinct one with NVRTC; returns the
/// number compiled. Every rejection fails the test with NVRTC's log.
inline int nvrtc_compile_all(const OpGraph& g, const Schedule& schedule, const HwSpec& spec) {
  const std::vector<std::string> options = cuda::nvrtc_options(cuda::cuda_arch(spec));
  std::set<std::string> done;
  for (int i = 0; i < static_cast<int>(schedule.groups.size()); ++i) {
    const cuda::GeneratedKernel k = emit_kernel(g, schedule, i, spec);
    if (!done.insert(k.name).second) continue;
    const cuda::NvrtcResult r = cuda::nvrtc_compile(k.source, k.name, options);
    INFO("group ", i, " (", g.node(schedule.groups[i].group.nodes.back()).name(), "), kernel ", k.name, ":\n", r.log);
    CHECK(r.ok);
    if (!r.ok) MESSAGE(k.source);
  }
  return static_cast<int>(done.size());
}

/// `policy`'s schedule of `g` with each group's CUDA kernel family chosen and recorded, as
/// compile() does (the cost model then prices the recorded kernels).
inline Schedule with_families(const OpGraph& g, const HwSpec& spec, const std::string& policy) {
  const AnalyticCostModel cost;
  const cuda::CudaKernelFamilies families;
  for (const auto& p : policies())
    if (p->name() == policy) return schedule_with_families(*p, PolicyContext{g, spec, cost}, &families);
  FAIL("no policy ", policy);
  return {};
}

/// The kernel of the last group of `g`'s schedule under `policy` (the one writing the output).
inline cuda::GeneratedKernel last_kernel(const OpGraph& g, const std::string& policy) {
  const Schedule s = schedule_with(g, gpu_spec(), policy);
  REQUIRE(!s.groups.empty());
  return emit_kernel(g, s, static_cast<int>(s.groups.size()) - 1, gpu_spec());
}

/// Why GPU tests cannot run here, or nullopt. Prints "[SKIP] no CUDA device" once per test case.
inline bool gpu_available() {
  const std::unique_ptr<Backend> cuda = find_backend("cuda");
  if (auto why = cuda->unavailable()) {
    MESSAGE("[SKIP] ", *why);
    return false;
  }
  return true;
}

/// Deterministic inputs: floats uniform in [-1, 1), integers small non-negative values, bools 0/1.
inline std::vector<HostTensor> gpu_test_inputs(const OpGraph& g, uint64_t seed) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const TensorType& type = g.tensor(g.inputs()[i]).type;
    const bool fp = is_float(type.dtype);
    const double hi = type.dtype == DType::boolean ? 2.0 : 4.0;
    in.push_back(materialize_random(type, RandomInit{RandomInit::Dist::uniform, fp ? -1.0 : 0.0, fp ? 1.0 : hi, seed + i}));
  }
  return in;
}

/// Compiles `g` for `spec` as `schedule` says, runs it and checks every output against the
/// interpreter (compare_compiled). Call only when gpu_available().
inline void check_schedule_on_gpu(const OpGraph& g, const HwSpec& spec, const Schedule& schedule, std::vector<HostTensor> inputs = {},
                                  uint64_t seed = 11, const std::string& policy = "given") {
  if (inputs.empty()) inputs = gpu_test_inputs(g, seed);
  const Compilation compiled = compile_with(g, spec, schedule, "cuda");
  Executable* exe = compiled.executable.get();
  const std::vector<HostTensor> got = exe->run(inputs);
  const std::vector<HostTensor> expected = interpret(g, inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    const CompareResult r = compare_compiled(got[o], expected[o], computed_precision(g, g.outputs()[o]));
    INFO(policy, " schedule, output ", o, " '", g.tensor(g.outputs()[o]).name, "': ", r.message);
    CHECK(r.ok);
  }
}

/// The same for `policy`'s schedule of `g`.
inline void check_on_gpu_with(const OpGraph& g, const std::string& policy, const HwSpec& spec, std::vector<HostTensor> inputs = {},
                              uint64_t seed = 11) {
  check_schedule_on_gpu(g, spec, schedule_with(g, spec, policy), std::move(inputs), seed, policy);
}

inline void check_on_gpu(const OpGraph& g, const std::string& policy, std::vector<HostTensor> inputs = {}, uint64_t seed = 11,
                         const std::string& spec_name = "nvidia-h100-sxm") {
  check_on_gpu_with(g, policy, gpu_spec(spec_name), std::move(inputs), seed);
}

/// A named test graph.
struct GraphCase {
  std::string name;
  OpGraph graph;
};

/// Every case (anything with `name` and `graph`) compiled under welder and roller and checked on
/// the GPU (check_on_gpu); SKIP without a GPU, where the compile-only cases cover the kernels.
template <class Case>
void check_cases_on_gpu(const std::vector<Case>& cases) {
  if (!gpu_available()) {
    MESSAGE("[SKIP] no CUDA device: the compile-only case above compiled these kernels");
    return;
  }
  for (const Case& c : cases)
    for (const std::string policy : {"welder", "roller"}) {
      INFO(c.name, " (", policy, ")");
      check_on_gpu(c.graph, policy);
    }
}

/// A single-operator graph (test_util.h's single_op_model); the model inputs are `inputs` minus
/// `constant_inputs`, returned through `model_inputs`.
inline OpGraph op_graph(const std::string& op_type, const std::vector<HostTensor>& inputs,
                        std::map<std::string, AttrValue> attrs = {}, const std::set<int>& constant_inputs = {},
                        std::vector<HostTensor>* model_inputs = nullptr, int num_outputs = 1) {
  if (model_inputs)
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!constant_inputs.count(static_cast<int>(i))) model_inputs->push_back(inputs[i]);
  return lower_model(single_op_model(op_type, inputs, std::move(attrs), num_outputs, constant_inputs));
}

inline std::vector<std::string> bundled_models() {
  return {"bert_base_layer", "bert_base_12_layers", "llama_decoder_block", "resnet50_bottleneck", "resnet50", "vit_b_block"};
}

inline OpGraph bundled_model(const std::string& name) {
  return lower_model(load_model(repo_root() + "/experiments/models/" + name + ".json"));
}

}  // namespace tessel::testing
