// Differential testing (issue 7): seeded random graphs (random_graph.h) are lowered, scheduled by
// every registered policy for a CPU and a GPU spec as the CLI schedules (with the kernel families of
// the spec's backend: schedule_as_cli), checked by check_schedule, and -- for every
// backend that supports the spec and can run here -- compiled, run and compared with the
// interpreter (compare_compiled). A failing graph is minimized and saved as a reproducer under
// tests/regressions/<name>/ (model.json, schedule.json, case.json), which the regression test
// below then runs forever.
//
// Every graph is scheduled by every policy and checked, and every policy's schedule is compiled
// by the CPU backend at LLVM's O0 (TESSEL_DIFF_QUICK) and run: O0 compiles a random graph in
// ~50 ms and runs the emitted IR as written, so this checks the emitter's semantics on every graph.
// Optimized code costs ~0.1-0.3 s of LLVM's O3 (or NVRTC) per kernel, so by default a graph is
// compiled at O3 (and by NVRTC where a GPU runs the test) on every TESSEL_DIFF_RUN_EVERY-th seed
// only, with one policy per compiled graph, rotating through the policies; TESSEL_DIFF_RUN=all
// compiles those graphs with every policy. The O3 runs catch what only the optimizer exposes
// (poison from wrong nsw/nuw flags, alignment or aliasing promises). z3 solves an SMT problem per
// operator (~1-5 s per random graph), so it schedules every TESSEL_DIFF_Z3_EVERY-th graph only.
//
//   TESSEL_DIFF_GRAPHS=N      graphs per run (default 500)
//   TESSEL_DIFF_SEED=S        first seed (default 1)
//   TESSEL_DIFF_RUN=rotate|all  which policies' schedules are compiled and run (default rotate)
//   TESSEL_DIFF_RUN_EVERY=K   compile optimized and run every K-th graph (default 8; 1 = all)
//   TESSEL_DIFF_QUICK=L       the LLVM level of the every-graph CPU runs (default 0; 3 or more: none)
//   TESSEL_DIFF_DUMP=DIR      also write every graph's model as DIR/seed_<S>.json
//   TESSEL_DIFF_Z3_EVERY=K    z3 on every K-th graph (default 20; 1 = all)
//   TESSEL_DIFF_SECONDS=T     stop starting new graphs after T seconds (default: no limit); the
//                             summary says how many ran
//   TESSEL_DIFF_SAVE=DIR      where reproducers go (default: the source tree's tests/regressions)
//   TESSEL_DIFF_SPECS=A,B     spec files under hw_specs/ (default: the AVX2 CPU and the H100; the GPU
//                             machine's script runs the H100 alone)
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../cuda/cuda_check.h"
#include "../schedule_util.h"
#include "../test_util.h"
#include "kernels/backend.h"
#include "policy/check_schedule.h"
#include "policy/policy.h"
#include "policy/schedule_json.h"
#include "random_graph.h"
#include "tilegraph/compare.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/interpreter.h"

using namespace tessel;
using tessel::testing::source_path;
namespace fs = std::filesystem;

namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : dflt;
}


// TESSEL_DIFF_SPECS (comma-separated files under hw_specs/) or a CPU and a GPU spec.
const std::vector<std::string>& spec_files() {
  static const std::vector<std::string> files = [] {
    std::vector<std::string> out;
    const char* env = std::getenv("TESSEL_DIFF_SPECS");
    std::stringstream list(env && *env ? env : "x86-64-avx2-generic.json,nvidia-h100-sxm.json");
    for (std::string item; std::getline(list, item, ',');)
      if (!item.empty()) out.push_back(item);
    return out;
  }();
  return files;
}

std::vector<HostTensor> random_inputs(const OpGraph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    out.push_back(materialize_random(g.tensor(g.inputs()[i]).type,
                                     RandomInit{RandomInit::Dist::uniform, -2.0, 2.0, seed * 7919 + i}));
  return out;
}

// What went wrong with one (model, policy, spec, backend), or "" when nothing did.
struct Case {
  std::string policy, spec_file, backend;  // backend "" = schedule legality only
  int opt_level = 3;                       // CompileOptions::opt_level (the CPU backend's LLVM level)
};


// One graph under test: lowered once, its inputs drawn once, the interpreter run at most once.
struct Subject {
  OpGraph graph;
  std::vector<HostTensor> inputs;
  std::optional<std::vector<HostTensor>> expected;
  int opt_level = 3;  // the CPU backend's LLVM level (CompileOptions::opt_level)
  uint64_t seed = 0;
  const std::vector<HostTensor>& reference() {
    if (!expected) expected = interpret(graph, inputs);
    return *expected;
  }
};

// Where the time goes (the summary message prints it).
struct Phases {
  double schedule = 0, check = 0, compile = 0, run = 0, interpret = 0;
  double slowest_compile = 0;  // one compile, with its seed
  uint64_t slowest_seed = 0;
};
Phases phases;

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What went wrong with `schedule` on `backend` ("" = legality only), or "" when nothing did.
std::string check_schedule_run(Subject& subject, const HwSpec& spec, const Schedule& s, const std::string& backend_name) {
  const OpGraph& g = subject.graph;
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> problems = check_schedule(g, spec, s);
  phases.check += since(t0);
  if (!problems.empty()) return "illegal schedule: " + problems.front();
  if (backend_name.empty()) return "";
  std::vector<HostTensor> actual;
  try {
    t0 = std::chrono::steady_clock::now();
    CompileOptions options;
    options.opt_level = subject.opt_level;
    const Compilation compiled = testing::compile_with(g, spec, s, backend_name, options);
    Executable* exe = compiled.executable.get();
    const double compile_s = since(t0);
    phases.compile += compile_s;
    if (compile_s > phases.slowest_compile) phases.slowest_compile = compile_s, phases.slowest_seed = subject.seed;
    t0 = std::chrono::steady_clock::now();
    actual = exe->run(subject.inputs);
    phases.run += since(t0);
  } catch (const std::exception& e) {
    return cat("compile/run threw: ", e.what());
  }
  t0 = std::chrono::steady_clock::now();
  const std::vector<HostTensor>& expected = subject.reference();
  phases.interpret += since(t0);
  if (actual.size() != expected.size()) return cat(actual.size(), " outputs, expected ", expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const CompareResult r = compare_compiled(actual[i], expected[i], computed_precision(g, g.outputs()[i]));
    if (!r.ok) return cat("output '", g.tensor(g.outputs()[i]).name, "': ", r.message);
  }
  return "";
}

// A spec by its file name under hw_specs/ (the form TESSEL_DIFF_SPECS and case.json use).
const HwSpec& spec_named(const std::string& file) { return testing::shipped_spec(fs::path(file).stem().string()); }

// The whole case from the model: lower, schedule, check, compile, run, compare.
std::string check_case(const ModelDef& model, const Case& c, uint64_t seed, Schedule* schedule_out = nullptr) {
  Subject subject;
  try {
    subject.graph = lower_model(model);
  } catch (const UserError& e) {
    return cat("lowering failed: ", std::string(e.what()));
  }
  subject.inputs = random_inputs(subject.graph, seed);
  const HwSpec& spec = spec_named(c.spec_file);
  const Schedule s = testing::schedule_as_cli(subject.graph, spec, c.policy);
  if (schedule_out) *schedule_out = s;
  subject.opt_level = c.opt_level;
  return check_schedule_run(subject, spec, s, c.backend);
}

// Ops of `m` needed for its outputs (and the inputs and weights they read).
ModelDef without_dead_ops(ModelDef m) {
  std::set<std::string> needed(m.outputs.begin(), m.outputs.end());
  std::vector<OpDef> kept;
  for (auto it = m.ops.rbegin(); it != m.ops.rend(); ++it) {
    bool useful = false;
    for (const std::string& o : it->outputs) useful |= needed.count(o) > 0;
    if (!useful) continue;
    for (const std::string& in : it->inputs) needed.insert(in);
    kept.insert(kept.begin(), *it);
  }
  m.ops = kept;
  std::erase_if(m.inputs, [&](const ValueDecl& d) { return !needed.count(d.name); });
  std::erase_if(m.weights, [&](const WeightDef& w) { return !needed.count(w.name); });
  return m;
}

// Greedy minimization while `fails` holds: one output at a time, then cut the graph at each
// intermediate (it becomes a model input of its lowered type) and drop what is dead.
ModelDef minimize(ModelDef m, const std::function<bool(const ModelDef&)>& fails) {
  for (const std::string& out : std::vector<std::string>(m.outputs)) {
    ModelDef one = m;
    one.outputs = {out};
    one = without_dead_ops(one);
    if (fails(one)) {
      m = one;
      break;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    const OpGraph g = lower_model(m);
    for (const OpDef& op : m.ops) {
      for (const std::string& in : op.inputs) {
        const bool produced = std::any_of(m.ops.begin(), m.ops.end(), [&](const OpDef& o) {
          return std::find(o.outputs.begin(), o.outputs.end(), in) != o.outputs.end();
        });
        const auto t = g.find_tensor(in);
        if (!produced || !t) continue;
        ModelDef cut = m;
        std::erase_if(cut.ops, [&](const OpDef& o) { return std::find(o.outputs.begin(), o.outputs.end(), in) != o.outputs.end(); });
        cut.inputs.push_back({in, g.tensor(*t).type});
        cut = without_dead_ops(cut);
        if (fails(cut)) {
          m = cut;
          changed = true;
          break;
        }
      }
      if (changed) break;
    }
  }
  return m;
}

void save_reproducer(const ModelDef& model, const Case& c, uint64_t seed, const std::string& error) {
  const fs::path root = std::getenv("TESSEL_DIFF_SAVE") ? fs::path(std::getenv("TESSEL_DIFF_SAVE"))
                                                        : fs::path(source_path("tests/regressions"));
  const fs::path dir = root / cat(model.name, "_", c.policy, "_", fs::path(c.spec_file).stem().string(), "_",
                                  c.backend.empty() ? "schedule" : c.backend, c.opt_level == 3 ? "" : cat("_O", c.opt_level));
  fs::create_directories(dir);
  save_model_json(model, (dir / "model.json").string());
  Schedule s;
  check_case(model, c, seed, &s);
  std::ofstream(dir / "schedule.json") << schedule_to_json(s, lower_model(model));
  nlohmann::ordered_json info = {{"seed", seed}, {"policy", c.policy}, {"hw_spec", c.spec_file},
                                 {"backend", c.backend}, {"opt_level", c.opt_level}, {"error", error}};
  std::ofstream(dir / "case.json") << info.dump(1) << "\n";
  MESSAGE("saved a reproducer in ", dir.string());
}

}  // namespace

TEST_CASE("differential: random graphs, every policy and backend, against the interpreter") {
  const int64_t graphs = env_int("TESSEL_DIFF_GRAPHS", 500);
  const uint64_t first = static_cast<uint64_t>(env_int("TESSEL_DIFF_SEED", 1));
  const int64_t z3_every = std::max<int64_t>(1, env_int("TESSEL_DIFF_Z3_EVERY", 20));
  const int64_t run_every = std::max<int64_t>(1, env_int("TESSEL_DIFF_RUN_EVERY", 8));
  const double time_limit = static_cast<double>(env_int("TESSEL_DIFF_SECONDS", 0));
  const bool run_all = std::getenv("TESSEL_DIFF_RUN") && std::string(std::getenv("TESSEL_DIFF_RUN")) == "all";
  const int quick_level = static_cast<int>(env_int("TESSEL_DIFF_QUICK", 0));
  std::vector<std::string> policy_names;
  for (const auto& p : policies()) policy_names.push_back(std::string(p->name()));
  int64_t lowered = 0, schedules = 0, runs = 0, shared_runs = 0, failures = 0;
  std::map<std::string, int64_t> runs_by_backend;
  std::map<std::string, double> seconds_by_policy;
  const auto start = std::chrono::steady_clock::now();
  int64_t tried = 0;
  for (uint64_t seed = first; seed < first + static_cast<uint64_t>(graphs); ++seed) {
    if (time_limit > 0 && since(start) > time_limit) break;
    ++tried;
    const ModelDef model = random_model(seed);
    CAPTURE(seed);
    Subject subject;
    try {
      subject.graph = lower_model(model);
    } catch (const UserError& e) {
      FAIL_CHECK("the generator made a model Tessel rejects (seed ", seed, "): ", std::string(e.what()));
      continue;
    }
    subject.inputs = random_inputs(subject.graph, seed);
    subject.seed = seed;
    if (const char* dump = std::getenv("TESSEL_DIFF_DUMP")) {
      fs::create_directories(dump);
      save_model_json(model, (fs::path(dump) / cat("seed_", seed, ".json")).string());
    }
    ++lowered;
    for (const std::string& spec_file : spec_files()) {
      const HwSpec& spec = spec_named(spec_file);
      std::vector<std::string> backends_here = {""};
      for (const auto& b : backends())
        if (b->supports(spec) && !b->unavailable()) backends_here.push_back(std::string(b->name()));
      // Policies often agree; a schedule already compiled and run for this graph is not run again.
      std::set<std::string> schedules_run;
      for (const std::string& policy : policy_names) {
        const uint64_t index = seed - first;
        const bool z3_here = index % static_cast<uint64_t>(z3_every) == 0;
        if (policy == "z3" && !z3_here) continue;
        // Compiled with this policy? Every run_every-th graph; all policies, or the next in turn
        // among those that scheduled it.
        bool compile_here = index % static_cast<uint64_t>(run_every) == 0;
        if (compile_here && !run_all) {
          std::vector<std::string> eligible;
          for (const std::string& p : policy_names)
            if (p != "z3" || z3_here) eligible.push_back(p);
          compile_here = eligible[(index / static_cast<uint64_t>(run_every)) % eligible.size()] == policy;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const Schedule s = testing::schedule_as_cli(subject.graph, spec, policy);
        phases.schedule += since(t0);
        Schedule plan = s;  // what code generation sees: groups, tiles, edge levels
        plan.policy.clear();
        plan.unfused.clear();
        plan.predicted_latency_s = 0;
        for (ScheduleGroup& sg : plan.groups) sg.predicted = {};
        const std::string key = schedule_to_json(plan, subject.graph);
        // (backend, LLVM level): legality alone; the quick level on every graph where the backend
        // has one; the full level on the graphs picked above.
        std::vector<std::pair<std::string, int>> runs_here;
        for (const std::string& backend : backends_here) {
          if (backend.empty()) {
            runs_here.emplace_back(backend, 3);
            continue;
          }
          if (backend == "cpu" && quick_level >= 0 && quick_level < 3) runs_here.emplace_back(backend, quick_level);
          if (compile_here) runs_here.emplace_back(backend, 3);
        }
        for (const auto& [backend, level] : runs_here) {
          const Case c{policy, spec_file, backend, level};
          if (!backend.empty() && !schedules_run.insert(cat(backend, " O", level, "\n", key)).second) {
            ++shared_runs;
            continue;
          }
          subject.opt_level = level;
          const std::string error = check_schedule_run(subject, spec, s, backend);
          if (backend.empty()) ++schedules;
          else ++runs, ++runs_by_backend[cat(backend, " O", level)];
          if (error.empty()) continue;
          ++failures;
          FAIL_CHECK("seed ", seed, ", ", policy, " on ", spec_file, backend.empty() ? "" : cat(", ", backend, " O", level), ": ",
                     error);
          const ModelDef small = minimize(model, [&](const ModelDef& m) { return !check_case(m, c, seed).empty(); });
          save_reproducer(small, c, seed, check_case(small, c, seed));
        }
        seconds_by_policy[policy] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string per_backend, per_policy;
  for (const auto& [p, t] : seconds_by_policy) per_policy += cat(" ", p, " ", t, " s;");
  for (const auto& [b, n] : runs_by_backend) per_backend += cat(" ", b, ": ", n);
  MESSAGE(tried, " random graphs (seeds ", first, "..", first + tried - 1, "): ", lowered, " lowered, ", schedules,
          " schedules checked, ", runs, " compiled runs compared (", per_backend.empty() ? " no backend can run here" : per_backend,
          "; ", shared_runs, " schedules identical to another policy's not run again), ", failures, " failures, ", seconds,
          " s (per policy, schedule + check + runs:", per_policy, " ); phases: schedule ", phases.schedule, " s, check ",
          phases.check, " s, compile ", phases.compile, " s, run ", phases.run, " s, interpret ", phases.interpret,
          " s; slowest compile ", phases.slowest_compile, " s (seed ", phases.slowest_seed, ")");
}

TEST_CASE("regressions: every saved reproducer under tests/regressions passes") {
  const fs::path root = source_path("tests/regressions");
  int count = 0;
  if (fs::exists(root))
    for (const auto& e : fs::directory_iterator(root)) {
      if (!fs::exists(e.path() / "case.json")) continue;
      std::ifstream in(e.path() / "case.json");
      const nlohmann::json info = nlohmann::json::parse(in);
      const Case c{info.at("policy"), info.at("hw_spec"), info.at("backend"), info.value("opt_level", 3)};
      const std::string backend = c.backend;
      if (!backend.empty()) {
        const auto b = find_backend(backend);
        if (b->unavailable()) {
          if (backend == "cuda") {
            // No GPU: still generate and NVRTC-compile every kernel (catches rejected code).
            const OpGraph g = lower_model(load_model((e.path() / "model.json").string()));
            const HwSpec& spec = spec_named(c.spec_file);
            CAPTURE(e.path().string());
            CHECK(testing::nvrtc_compile_all(g, testing::schedule_with(g, spec, c.policy), spec) >= 1);
            MESSAGE("[SKIP] ", e.path().filename().string(), ": no GPU, kernels compiled with NVRTC only");
          } else {
            MESSAGE("[SKIP] ", e.path().filename().string(), ": backend ", backend, " cannot run here");
          }
          continue;
        }
      }
      CAPTURE(e.path().string());
      const ModelDef model = load_model((e.path() / "model.json").string());
      CHECK(check_case(model, c, info.at("seed").get<uint64_t>()) == "");
      // The saved schedule replays and is legal too.
      const OpGraph g = lower_model(model);
      std::ifstream sj(e.path() / "schedule.json");
      std::stringstream text;
      text << sj.rdbuf();
      const Schedule s = schedule_from_json(text.str(), (e.path() / "schedule.json").string(), g);
      CHECK(check_schedule(g, spec_named(c.spec_file), s).empty());
      ++count;
    }
  MESSAGE(count, " reproducers");
}

TEST_CASE("differential: the generator gives some MatMul and Gemm weights a block-sparse pattern, leaving the other graphs as they were") {
  int sparse = 0, graphs = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const ModelDef m = random_model(seed);
    bool any = false;
    for (const WeightDef& w : m.weights)
      if (w.sparsity) {
        any = true;
        CHECK(check_sparsity(*w.sparsity, w.type.shape).empty());
        CHECK((w.sparsity->density == 0.25 || w.sparsity->density == 0.5));
      }
    sparse += any;
    ++graphs;
  }
  MESSAGE(sparse, " of ", graphs, " random graphs have a sparse weight");
  CHECK(sparse > 0);
}
