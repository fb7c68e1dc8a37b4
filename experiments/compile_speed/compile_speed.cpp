// Compile-speed benchmark (BENCHMARKS.md, "Compile speed"): how long each built-in policy takes to
// schedule each bundled model -- including the 12-layer BERT-base encoder and the full ResNet-50 --
// for one hardware spec, without measurement on a device. Import and lowering are timed apart.
// Policies run as the CLI runs them: the schedule stage of compile() (driver/compile.h,
// schedule_graph) with the kernel families of the backend that targets the spec (each candidate
// priced as the family it would get).
//
//   compile_speed [--spec hw_specs/nvidia-h100-sxm.json] [Google Benchmark flags]
//   (run.sh runs it and writes results/ as JSON)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cost_model/cost_model.h"
#include "driver/compile.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/lower.h"

namespace fs = std::filesystem;
using namespace tessel;

int main(int argc, char** argv) {
  std::string spec_path = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json";
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--spec") && i + 1 < argc) spec_path = argv[++i];
    else rest.push_back(argv[i]);
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());

  static const HwSpec spec = load_hw_spec(spec_path);
  static const auto cost = std::move(cost_models().front());
  static const std::unique_ptr<KernelFamilies> families = families_for(spec);
  std::vector<std::string> models;
  for (const auto& e : fs::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/experiments/models"))
    if (e.path().extension() == ".json") models.push_back(e.path().string());
  std::sort(models.begin(), models.end());

  static std::vector<std::unique_ptr<OpGraph>> graphs;  // lowered once, outside the timed region
  for (const std::string& path : models) {
    const std::string name = fs::path(path).stem().string();
    benchmark::RegisterBenchmark(("import_and_lower/" + name).c_str(), [path](benchmark::State& state) {
      for (auto _ : state) benchmark::DoNotOptimize(lower_model(load_model(path)));
    })->Unit(benchmark::kMillisecond);
    graphs.push_back(std::make_unique<OpGraph>(lower_model(load_model(path))));
    const OpGraph* graph = graphs.back().get();
    for (const auto& policy : policies()) {
      const std::string policy_name(policy->name());
      benchmark::RegisterBenchmark(("schedule/" + policy_name + "/" + name).c_str(),
                                   [graph, policy_name](benchmark::State& state) {
                                     std::unique_ptr<Policy> p;
                                     for (auto& q : policies())
                                       if (q->name() == policy_name) p = std::move(q);
                                     Schedule s;
                                     for (auto _ : state) {
                                       s = schedule_graph(*graph, spec, *p, *cost, families.get());
                                       benchmark::DoNotOptimize(s);
                                     }
                                     state.counters["nodes"] = graph->num_nodes();
                                     state.counters["kernels"] = static_cast<double>(s.groups.size());
                                     state.counters["predicted_ms"] = s.predicted_latency_s * 1e3;
                                   })
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.5);
    }
  }
  // Reading a long model (issue 29, class 4): a chain of N Relu ops in the JSON format, parsed
  // (the strict reader) and lowered; Google Benchmark fits the growth (`_BigO`, `_RMS`). The
  // reader was quadratic in the number of objects of a list until 2026-11-27.
  benchmark::RegisterBenchmark("read_and_lower_chain", [](benchmark::State& state) {
    const int64_t n = state.range(0);
    std::string text = R"({"format": "tessel-model", "version": 1, "name": "chain", "opset": 17,
      "inputs": [{"name": "t0", "dtype": "f32", "shape": [4]}], "outputs": ["t)" + std::to_string(n) + R"("], "ops": [)";
    for (int64_t i = 0; i < n; ++i)
      text += (i ? ", " : "") + std::string(R"({"name": "o)") + std::to_string(i) + R"(", "op": "Relu", "inputs": ["t)" +
              std::to_string(i) + R"("], "outputs": ["t)" + std::to_string(i + 1) + R"("]})";
    text += "]}";
    for (auto _ : state) benchmark::DoNotOptimize(lower_model(parse_model_json(text, "chain.json")));
    state.SetComplexityN(n);
  })
      ->RangeMultiplier(2)
      ->Range(25000, 200000)
      ->Unit(benchmark::kMillisecond)
      ->Complexity();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
