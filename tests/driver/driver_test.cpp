// compile() (driver/compile.h): the pipeline as one call. Each stage runs when asked and is timed,
// its result can be dumped, a saved schedule replays to byte-identical code (every bundled model
// and every GPU-suite workload, for the H100 spec; the bundled blocks for a CPU spec), a loaded
// compilation runs correctly, and bad requests are UserErrors.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../model_builder.h"
#include "../schedule_util.h"
#include "../temp_dir.h"
#include "../test_util.h"
#include "driver/compile.h"
#include "driver/measure.h"
#include "hw_specs/probe.h"
#include "kernels/kernel_cache.h"
#include "policy/measure_cache.h"
#include "policy/welder.h"
#include "policy/schedule_json.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/compare.h"
#include "tilegraph/interpreter.h"

namespace tessel::testing {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Every file `compile` emitted, by file name.
std::map<std::string, std::string> emitted_files(const Compilation& c) {
  std::map<std::string, std::string> out;
  for (const std::string& f : c.emitted) out[fs::path(f).filename().string()] = read_file(f);
  return out;
}

/// `model_path` compiled for `spec` through emit in `format`, then replayed from the schedule's
/// JSON: the two emits must be the same files, byte for byte.
void check_replay_identical(const std::string& model_path, const HwSpec& spec, const std::string& format) {
  const TempDir dir;
  CompileRequest r;
  r.model_path = model_path;
  r.backend.clear();
  r.spec = spec;
  r.emit_format = format;
  r.emit_dir = dir.file("code");
  r.last = Stage::emit;
  const Compilation first = compile(r);
  for (const ScheduleGroup& g : first.schedule.groups) CHECK(!g.group.kernel.family.empty());
  const auto a = emitted_files(first);
  fs::remove_all(dir.file("code"));  // the replay writes the same directory (the manifest names it)
  CompileRequest replay = r;
  replay.schedule_json = first.dump(Stage::schedule);
  replay.schedule_source = "saved.json";
  const Compilation second = compile(replay);
  const auto b = emitted_files(second);
  REQUIRE(a.size() == b.size());
  CHECK(a.size() >= 2);  // the manifest and at least one kernel (groups with equal code share one)
  for (const auto& entry : a) {
    const auto& [name, text] = entry;
    CAPTURE(entry.first);
    REQUIRE(b.count(name) == 1);
    CHECK(b.at(name) == text);
  }
}

OpGraph small_mlp() {
  ModelBuilder b(DType::f32);
  const std::string h = b.op("Relu", {b.op("MatMul", {b.input("x", {8, 32}), b.weight("w1", {32, 48}, 1)})});
  return b.graph(b.op("Softmax", {b.op("MatMul", {h, b.weight("w2", {48, 16}, 2)})}));
}

}  // namespace

TEST_CASE("driver: each stage runs when asked, is timed and can be dumped") {
  CompileRequest r;
  r.model_path = source_path("experiments/models/bert_base_layer.json");
  r.backend.clear();
  r.spec = shipped_spec("nvidia-h100-sxm");
  r.last = Stage::schedule;
  const Compilation c = compile(r);
  for (Stage s : {Stage::import, Stage::normalize, Stage::schedule}) {
    CAPTURE(stage_name(s));
    CHECK(c.record(s).ran);
    CHECK(c.record(s).seconds >= 0);
  }
  CHECK(!c.record(Stage::emit).ran);
  CHECK(!c.record(Stage::load).ran);
  CHECK(c.backend->name() == "cuda");
  CHECK(c.model->name == "bert_base_layer");
  CHECK(c.dump(Stage::import).find("MatMul") != std::string::npos);
  CHECK(c.dump(Stage::normalize) == c.graph.print());
  // The schedule dump is the schedule's JSON: it reads back to the same groups.
  const Schedule back = schedule_from_json(c.dump(Stage::schedule), "dump.json", c.graph);
  CHECK(back.groups.size() == c.schedule.groups.size());
  CHECK_THROWS_WITH_AS(c.dump(Stage::load), doctest::Contains("did not run"), UserError);
  CHECK(stage_named("emit") == Stage::emit);
  CHECK_THROWS_WITH_AS(stage_named("link"), doctest::Contains("known: import, normalize, schedule, emit, load"), UserError);
}

TEST_CASE("driver: a loaded compilation runs and matches the interpreter") {
  const OpGraph g = small_mlp();
  CompileRequest r;
  r.graph = &g;
  r.backend = "cpu";
  r.spec = shipped_spec("x86-64-avx2-generic");
  r.options.threads = 2;
  const Compilation c = compile(r);
  CHECK(!c.record(Stage::import).ran);
  CHECK(!c.record(Stage::normalize).ran);
  CHECK(c.record(Stage::load).ran);
  REQUIRE(c.executable);
  CHECK(c.dump(Stage::load).find("kernels") != std::string::npos);
  const std::vector<HostTensor> in = {random_f32({8, 32}, 3)};
  const std::vector<HostTensor> got = c.executable->run(in);
  const std::vector<HostTensor> want = interpret(g, in);
  REQUIRE(got.size() == 1);
  const CompareResult cmp = compare_tensors(got[0], want[0]);
  CHECK_MESSAGE(cmp.ok, cmp.message);
}

TEST_CASE("driver: --tune on the CPU: every group's top candidates are compiled, checked and timed, the fastest is kept") {
  const OpGraph g = small_mlp();
  const HwSpec spec = shipped_spec("x86-64-avx2-generic");
  const testing::TempDir dir;
  MeasureOptions mo;
  mo.compile.threads = 2;
  mo.compile.opt_level = 1;
  mo.compile.cache_dir = dir.path.string();
  mo.timing.repeats = 5;
  BackendMeasurer measurer("cpu", mo);
  MeasureCache cache(dir.path.string());
  WelderPolicy welder;
  REQUIRE(welder.tune_with(&measurer, &cache, 3));
  CompileRequest r;
  r.graph = &g;
  r.backend = "cpu";
  r.spec = spec;
  r.policy = &welder;
  r.options = mo.compile;
  const Compilation c = compile(r);
  int tuned = 0;
  for (const ScheduleGroup& sg : c.schedule.groups) {
    if (sg.trials.empty()) continue;
    ++tuned;
    CHECK(sg.trials.size() <= 3);
    REQUIRE(sg.measured_s);
    double fastest = 1e9;
    for (const TuneTrial& t : sg.trials) {
      CAPTURE(t.tiles);
      CHECK_MESSAGE(t.measured_s, t.failure);
      CHECK(t.predicted_s > 0);
      CHECK(!t.family.empty());
      if (t.measured_s) fastest = std::min(fastest, *t.measured_s);
    }
    CHECK(*sg.measured_s == fastest);
    // The policy's own choice first, then the other candidates in the cost model's order.
    for (size_t i = 2; i < sg.trials.size(); ++i) CHECK(sg.trials[i - 1].predicted_s <= sg.trials[i].predicted_s);
  }
  CHECK(tuned == static_cast<int>(c.schedule.groups.size()));
  CHECK(measurer.candidates() > 0);
  // The tuned schedule runs and matches the interpreter.
  const std::vector<HostTensor> in = {random_f32({8, 32}, 3)};
  const CompareResult cmp = compare_tensors(c.executable->run(in)[0], interpret(g, in)[0]);
  CHECK_MESSAGE(cmp.ok, cmp.message);
  // A second tuning measures nothing: every candidate's time is in the cache.
  const int measured = measurer.candidates();
  const Compilation again = compile(r);
  CHECK(measurer.candidates() == measured);
  CHECK(schedule_to_json(again.schedule, g) == schedule_to_json(c.schedule, g));

  // A candidate the backend cannot emit is not timed, and the measurer says why.
  ScheduledGroup bad = c.schedule.groups.front().group;
  bad.kernel.family = "no-such-family";
  CHECK_FALSE(measurer.measure(g, bad, spec));
  CHECK(measurer.last_failure().find("no-such-family") != std::string::npos);
}

TEST_CASE("driver: a saved schedule replays to byte-identical kernels (bundled models, GPU suite)") {
  const HwSpec& gpu = shipped_spec("nvidia-h100-sxm");
  for (const char* name : {"bert_base_layer", "bert_base_12_layers", "llama_decoder_block", "resnet50_bottleneck",
                                  "resnet50", "vit_b_block"}) {
    CAPTURE(name);
    check_replay_identical(source_path(std::string("experiments/models/") + name + ".json"), gpu, "cuda");
  }
  for (const char* name : {"bert_base_layer", "resnet50_bottleneck"}) {
    CAPTURE(name);
    check_replay_identical(source_path(std::string("experiments/models/") + name + ".json"), shipped_spec("x86-64-avx2-generic"), "llvm");
  }
  // The GPU suite's workloads, written by the suite's own generator (Python standard library only).
  const TempDir suite;
  const std::string cmd = "python3 '" + source_path("experiments/workloads/workloads.py") + "' --suite gpu --out '" +
                          suite.path.string() + "' > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  int workloads = 0;
  for (const auto& e : fs::directory_iterator(suite.path)) {
    if (e.path().extension() != ".json") continue;
    CAPTURE(e.path().filename().string());
    check_replay_identical(e.path().string(), gpu, "cuda");
    ++workloads;
  }
  CHECK(workloads >= 14);
}

TEST_CASE("driver: a tile kind without an implementation is refused by the checker and the backends") {
  const OpGraph g = small_mlp();
  const HwSpec& spec = shipped_spec("x86-64-avx2-generic");
  Schedule s = schedule_as_cli(g, spec, "welder");
  REQUIRE(!s.groups.empty());
  auto& [node, cfg] = *s.groups[0].group.tiles.begin();
  cfg.kind = ShardedProps{};
  CompileRequest r;
  r.graph = &g;
  r.spec = spec;
  r.schedule = s;
  r.schedule_source = "sparse.json";
  r.last = Stage::schedule;
  CHECK_THROWS_WITH_AS(compile(r), doctest::Contains("tile kind 'sharded' has no implementation yet"), UserError);
  // Handed to a backend directly (no checker in between), the backend refuses it, naming the group.
  const std::string name = g.node(node).name();
  for (const char* backend : {"cpu", "cuda"}) {
    CAPTURE(backend);
    const HwSpec& target = std::string(backend) == "cpu" ? spec : shipped_spec("nvidia-h100-sxm");
    Schedule t = schedule_as_cli(g, target, "welder");
    t.groups[0].group.tiles.begin()->second.kind = BlockSparseProps{};
    const TempDir dir;
    CHECK_THROWS_WITH_AS(find_backend(backend)->emit(g, t, target, backend == std::string("cpu") ? "llvm" : "cuda", dir.file("x")),
                         doctest::Contains("/groups/0/tiles/"), UserError);
  }
}

TEST_CASE("driver: bad requests are user errors") {
  const OpGraph g = small_mlp();
  CompileRequest none;
  CHECK_THROWS_WITH_AS(compile(none), doctest::Contains("exactly one of"), UserError);
  CompileRequest two;
  two.graph = &g;
  two.model_path = "x.json";
  CHECK_THROWS_WITH_AS(compile(two), doctest::Contains("(2 given)"), UserError);
  CompileRequest wrong_kind;
  wrong_kind.graph = &g;
  wrong_kind.backend = "cpu";
  wrong_kind.spec = shipped_spec("nvidia-h100-sxm");
  wrong_kind.last = Stage::schedule;
  CHECK_THROWS_WITH_AS(compile(wrong_kind), doctest::Contains("backend needs another kind"), UserError);
  CompileRequest no_dir;
  no_dir.graph = &g;
  no_dir.spec = shipped_spec("x86-64-avx2-generic");
  no_dir.emit_format = "llvm";
  no_dir.last = Stage::emit;
  CHECK_THROWS_WITH_AS(compile(no_dir), doctest::Contains("needs a directory"), UserError);
  CompileRequest bad_json;
  bad_json.graph = &g;
  bad_json.spec = shipped_spec("x86-64-avx2-generic");
  bad_json.schedule_json = "{";
  bad_json.schedule_source = "broken.json";
  bad_json.last = Stage::schedule;
  CHECK_THROWS_WITH_AS(compile(bad_json), doctest::Contains("broken.json"), UserError);
}

TEST_CASE("driver: the machine's probe is kept per machine identity and reused, not measured again") {
  // Without --hw every run probes the machine; a quick probe's measured numbers vary, and a spec
  // that differs from run to run gives other schedules and no kernel-cache hits. The first probe
  // is kept in the cache directory under the machine's identity, and the next run reads it back.
  const std::string identity = probe_identity("cpu");
  REQUIRE_FALSE(identity.empty());
  CHECK(identity == probe_identity("cpu"));
  CHECK(probe_identity("tpu").empty());
  TempDir dir;
  // $TESSEL_CACHE_DIR points at `dir` for this test only, restored however it ends.
  struct EnvGuard {
    std::optional<std::string> saved;
    EnvGuard() {
      if (const char* v = std::getenv("TESSEL_CACHE_DIR")) saved = v;
    }
    ~EnvGuard() {
      if (saved) ::setenv("TESSEL_CACHE_DIR", saved->c_str(), 1);
      else ::unsetenv("TESSEL_CACHE_DIR");
    }
  } guard;
  ::setenv("TESSEL_CACHE_DIR", dir.path.c_str(), 1);
  const std::unique_ptr<Backend> backend = find_backend("cpu");
  REQUIRE(backend);
  const Backend& cpu = *backend;
  const HwSpec first = machine_spec(cpu);
  std::vector<std::filesystem::path> kept;
  for (const auto& e : std::filesystem::directory_iterator(dir.path))
    if (e.path().extension() == ".spec") kept.push_back(e.path());
  REQUIRE(kept.size() == 1);
  // The kept spec is what the next run uses: edit it (through the cache, so that its checksum
  // holds) and the edit comes back.
  HwSpec edited = first;
  edited.description = "kept probe, edited by the test";
  const KernelCache cache(dir.path.string(), "spec");
  REQUIRE(cache.store(kept[0].stem().string(), write_hw_spec(edited)));
  const HwSpec second = machine_spec(cpu);
  CHECK(second.description == "kept probe, edited by the test");
  CHECK(write_hw_spec(second) == write_hw_spec(edited));
  // Without the cache (--no-cache) nothing kept is read: a new probe.
  CompileOptions uncached;
  uncached.use_cache = false;
  CHECK(machine_spec(cpu, uncached).description != "kept probe, edited by the test");
  // Another cache directory (--cache DIR) keeps its own.
  TempDir other;
  CompileOptions elsewhere;
  elsewhere.cache_dir = other.path.string();
  CHECK(machine_spec(cpu, elsewhere).description != "kept probe, edited by the test");
  int kept_there = 0;
  for (const auto& e : std::filesystem::directory_iterator(other.path)) kept_there += e.path().extension() == ".spec";
  CHECK(kept_there == 1);
}

}  // namespace tessel::testing
