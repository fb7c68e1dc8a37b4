// The CPU backend on every bundled model (experiments/models/*.json), scheduled by welder and by
// roller for a CPU spec, against the interpreter.
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "cpu_check.h"
#include "tilegraph/import/load_model.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

std::string model_path(const std::string& name) { return std::string(TESSEL_SOURCE_DIR) + "/experiments/models/" + name + ".json"; }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void check_model(const std::string& name, const std::vector<std::string>& specs, const std::vector<std::string>& policies) {
  const OpGraph g = lower_model(load_model(model_path(name)));
  const std::vector<HostTensor> inputs = random_inputs(g, 11);
  for (const std::string& spec : specs)
    for (const std::string& policy : policies) {
      INFO(name, ": ", policy, " schedule for ", spec);
      const auto start = std::chrono::steady_clock::now();
      const CompiledCheck c = run_compiled(g, cpu_spec(spec), policy, inputs);
      MESSAGE(name, " (", policy, ", ", spec, "): ", c.kernels, " kernels, compile+run+interpret ", seconds_since(start), " s");
      CHECK_MESSAGE(c.ok, c.message);
    }
}

}  // namespace

TEST_CASE("cpu models: BERT-base layer") {
  check_model("bert_base_layer", {"x86-64-avx2-generic"}, {"welder", "roller"});
}

TEST_CASE("cpu models: the other bundled models") {
  for (const char* m : {"resnet50_bottleneck", "vit_b_block", "llama_decoder_block"})
    check_model(m, {"x86-64-avx2-generic"}, {"welder", "roller"});
}
TEST_CASE("cpu models: big" * doctest::skip()) {
  for (const char* m : {"bert_base_12_layers", "resnet50"})
    check_model(m, {"x86-64-avx2-generic"}, {"welder"});
}

// Performance sanity, not a benchmark (run with --no-skip): the BERT-base layer compiled vs the
// interpreter on this machine. Prints the times; asserts only correctness.
TEST_CASE("cpu perf sanity: BERT-base layer, compiled vs interpreter" * doctest::skip()) {
  const OpGraph g = lower_model(load_model(model_path("bert_base_layer")));
  const std::vector<HostTensor> inputs = random_inputs(g, 11);
  for (const std::string policy : {"welder", "roller"}) {
    const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
    const Schedule schedule = schedule_with(g, spec, policy);
    auto start = std::chrono::steady_clock::now();
    const std::unique_ptr<Executable> exe = find_backend("cpu")->compile(g, schedule, spec, CompileOptions{});
    const double compile_s = seconds_since(start);
    TimingOptions timing;
    timing.warmup = 2;
    timing.repeats = 5;
    timing.cold_cache = policy == "roller";  // the flushed-cache path once
    std::vector<double> t = exe->time(inputs, timing);
    std::sort(t.begin(), t.end());
    start = std::chrono::steady_clock::now();
    const std::vector<HostTensor> expected = interpret(g, inputs);
    const double interp_s = seconds_since(start);
    const CompareResult r = compare_tensors(exe->run(inputs)[0], expected[0]);
    CHECK_MESSAGE(r.ok, r.message);
    MESSAGE("bert_base_layer (", policy, ", ", spec.name, ", ", exe->launches_per_run(), " kernels): compile ", compile_s,
            " s (codegen ", exe->compile_stats().codegen_s, " s, LLVM ", exe->compile_stats().compile_s, " s); run median ",
            t[t.size() / 2] * 1e3, " ms; interpreter ", interp_s * 1e3, " ms; speedup ", interp_s / t[t.size() / 2], "x");
  }
}

TEST_CASE("cpu time: warm and flushed-cache timings, the flush outside the timed runs") {
  // Both ways give one positive time per timed run (the flush writes twice the spec's
  // last-level cache before each run, outside the timed window; no timing is asserted here).
  const OpGraph g = lower_model(load_model(model_path("bert_base_layer")));
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  REQUIRE(spec.last_level_cache_bytes() > 0);
  const std::unique_ptr<Executable> exe =
      find_backend("cpu")->compile(g, schedule_with(g, spec, "welder"), spec, CompileOptions{});
  TimingOptions timing;
  timing.warmup = 1;
  timing.repeats = 3;
  const std::vector<double> warm = exe->time(random_inputs(g, 3), timing);
  timing.cold_cache = true;
  const std::vector<double> cold = exe->time(random_inputs(g, 3), timing);
  REQUIRE(warm.size() == 3);
  REQUIRE(cold.size() == 3);
  for (double v : cold) CHECK(v > 0);
}
