// Compiled execution from the command line: `tessel run --device D` and `tessel compile`. Both go
// through the Backend interface (kernels/backend.h) and never name a backend's internals.
//
// The hardware spec is --hw SPEC, or else the machine's own: `tessel hw probe`'s quick probe of
// the host CPU for --device cpu, of CUDA device 0 for --device cuda.
#include "cli/device_commands.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/backend.h"
#include "cli/cli_common.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/sampled_reference.h"

namespace tessel {

namespace {

// Milliseconds to 1 us above 1 ms, to 10 ns below (a kernel of a few microseconds; never in
// exponent form, which the experiments' parsers do not read).
std::string format_ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, seconds >= 1e-3 ? "%.3f ms" : "%.5f ms", seconds * 1e3);
  return buf;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// How the times were taken, in words (the report's "timing"/"method").
std::string timing_method(const Backend& backend, const TimingOptions& timing) {
  std::string method = backend.name() == "cuda"
                           ? (timing.graph ? "CUDA-graph replays between events" : "launches between events")
                           : "wall time";
  return method + (timing.cold_cache ? ", cache flushed before each" : ", cache warm");
}

}  // namespace

void require_runnable(const std::string& device) {
  const std::unique_ptr<Backend> backend = find_backend(device);
  if (auto why = backend->unavailable())
    throw UserError("command line", "--device", cat("'", backend->name(), "' cannot run here: ", *why));
}

std::vector<HostTensor> run_compiled(const Compilation& compiled, const std::vector<HostTensor>& inputs,
                                     const CompiledRunRequest& request, int* mismatches) {
  const Backend& backend = *compiled.backend;
  const HwSpec& spec = compiled.spec;
  const OpGraph& graph = compiled.graph;
  const Schedule& schedule = compiled.schedule;
  Executable* exe = compiled.executable.get();
  if (!exe) throw InternalError("run_compiled: the compilation was not loaded");
  const double compile_s = compiled.record(Stage::load).seconds;
  auto start = Clock::now();
  const CompileStats& cs = exe->compile_stats();
  std::cout << "compiled for " << spec.name << " (" << backend.name() << ") in " << format_ms(compile_s) << ": "
            << cs.kernels << " kernels; codegen " << format_ms(cs.codegen_s) << ", compile " << format_ms(cs.compile_s)
            << " (" << cs.cache_hits << " cached); peak memory "
            << human(static_cast<double>(exe->peak_memory_bytes()), "B") << "\n";

  std::vector<HostTensor> outputs = exe->run(inputs);
  std::cout << "ran in " << format_ms(seconds_since(start)) << " (first run, with transfers)\n";
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << "  output " << i << " '" << graph.tensor(graph.outputs()[i]).name << "': " << describe(outputs[i]) << "\n";

  *mismatches = 0;
  std::vector<std::tuple<std::string, bool, double>> checks;  // per output: name, ok, relative L2 error
  std::string check_mode;  // "whole" or "sampled: N elements per output ..."
  if (request.check) {
    InterpretOptions io;
    io.threads = request.interpreter_threads;
    start = Clock::now();
    std::vector<HostTensor> computed;
    std::vector<HostTensor>& expected = request.reference ? *request.reference : computed;
    const bool reused = !expected.empty();
    // Large graphs are checked on a sample of every output (sampled_reference.h); the rest whole.
    std::vector<std::vector<int64_t>> sample_index(outputs.size());
    // The reference is the model as imported (before the normalize rewrites), interpreted.
    const OpGraph& reference = compiled.reference.num_nodes() > 0 ? compiled.reference : graph;
    const double flops = graph_flops(reference);
    check_mode = "whole";
    if (!reused && !request.reference && !request.check_whole && flops > kWholeCheckMaxFlops) {
      SampleOptions so;
      so.seed = request.sample_seed;
      SampledReference sampled = interpret_sample(reference, inputs, so);
      if (sampled.ok && !outputs.empty()) {
        for (size_t i = 0; i < outputs.size(); ++i) {
          sample_index[i] = std::move(sampled.outputs[i].flat_index);
          expected.push_back(std::move(sampled.outputs[i].expected));
        }
        check_mode = cat("sampled: ", sample_index.front().size(), " elements of each output in ", so.boxes,
                         " boxes (", flops / 1e9, " GFLOP is over the whole check's ", kWholeCheckMaxFlops / 1e9, ")");
      } else {
        std::cout << "check: the whole graph (" << flops / 1e9 << " GFLOP) is interpreted, since it cannot be sampled: "
                  << sampled.reason << "\n";
      }
    }
    if (!reused && expected.empty()) expected = interpret(reference, inputs, io);
    const double interp_s = seconds_since(start);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const HostTensor actual = sample_index[i].empty() ? outputs[i] : gather_elements(outputs[i], sample_index[i]);
      const CompareResult r = compare_compiled(actual, expected[i], computed_precision(graph, graph.outputs()[i]));
      const std::string name = graph.tensor(graph.outputs()[i]).name;
      checks.emplace_back(name, r.ok, r.rel_l2_error);
      if (!r.ok) {
        ++*mismatches;
        std::cout << "MISMATCH output " << i << " '" << name << "' vs the interpreter: " << r.message << "\n";
      } else {
        std::cout << "check: output " << i << " '" << name << "' matches the interpreter (relative L2 error "
                  << r.rel_l2_error << ", max abs error " << r.max_abs_error << ")\n";
      }
    }
    if (!reused) std::cout << "  (interpreter: " << format_ms(interp_s) << ", " << check_mode << ")\n";
  }

  // Timed only after the check (when asked for): numbers of wrong code are not reported.
  std::vector<double> times;
  if (const int repeats = request.time_repeats; repeats > 0 && *mismatches == 0) {
    TimingOptions timing = request.timing;
    timing.warmup = std::min(repeats, 10);
    timing.repeats = repeats;
    {
      const FileLock lock(request.time_lock, "--time-lock");
      times = exe->time(inputs, timing);
    }
    if (request.median_s) *request.median_s = median(times);
    std::cout << "timed " << repeats << " runs (" << timing_method(backend, timing) << "): median "
              << format_ms(median(times)) << ", min " << format_ms(*std::min_element(times.begin(), times.end())) << " ("
              << exe->launches_per_run() << " launches per run; predicted " << format_ms(schedule.predicted_latency_s)
              << ")\n";
  }

  if (!request.report_path.empty()) {
    nlohmann::ordered_json r;
    r["backend"] = std::string(backend.name());
    r["hw_spec"] = spec.name;
    r["policy"] = schedule.policy;
    r["kernels"] = cs.kernels;
    r["launches_per_run"] = exe->launches_per_run();
    r["kernel_templates"] = cs.kernel_templates;
    r["schedule_s"] = compiled.record(Stage::schedule).seconds;
    r["compile_s"] = compile_s;
    r["codegen_s"] = cs.codegen_s;
    r["toolchain_s"] = cs.compile_s;
    r["cache_hits"] = cs.cache_hits;
    r["peak_memory_bytes"] = exe->peak_memory_bytes();
    r["predicted_s"] = schedule.predicted_latency_s;
    r["times_s"] = times;
    r["median_s"] = times.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(median(times));
    r["timing"] = {{"method", timing_method(backend, request.timing)},
                   {"graph", backend.name() == "cuda" && request.timing.graph},
                   {"cache", request.timing.cold_cache ? "cold" : "warm"}};
    r["checked"] = request.check;
    if (request.check) r["check_mode"] = check_mode;
    r["outputs"] = nlohmann::ordered_json::array();
    for (const auto& [name, ok, rel_l2] : checks) r["outputs"].push_back({{"name", name}, {"ok", ok}, {"rel_l2_error", rel_l2}});
    write_file_atomically(request.report_path, r.dump(1) + "\n");
  }
  return outputs;
}

}  // namespace tessel
