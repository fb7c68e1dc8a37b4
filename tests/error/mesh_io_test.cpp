// tessel run --mesh with --inputs, --outputs, --expect and --report (docs/distributed.md): the
// mesh's outputs from given inputs match the single-device interpreter's from the same files and
// differ from other inputs'; inputs of other shapes than the lowered graph's are a one-line
// UserError, exit 2; the report holds the plan, its prediction, the step times and every rank's
// checks; --tune on CPU ranks measures each rank's segments (taking turns), then reuses the
// measurements; --save-schedules writes each segment's schedule and --schedules replays them (a
// missing or tampered one is a UserError naming its file).
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli_run.h"
#include "../temp_dir.h"
#include "tilegraph/error.h"
#include "tilegraph/host_tensor.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/lower.h"

namespace tessel::testing {
namespace {

namespace fs = std::filesystem;

const std::string kSmall = std::string(TESSEL_SOURCE_DIR) + "/tests/distributed/llama_block_small.json";
const std::string kPins =
    " --shard \"attn_q_w=S1 attn_k_w=S1 attn_v_w=S1 attn_o_w=S0 mlp_gate_w=S1 mlp_up_w=S1 mlp_down_w=S0\"";

/// input_<i>.npy in `dir` for every input of the small LLaMA block: sin(phase + 0.37 k), or with
/// the second dimension halved.
void write_inputs(const fs::path& dir, double phase, bool halved = false) {
  fs::create_directories(dir);
  const OpGraph g = lower_model(load_model(kSmall));
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    TensorType t = g.tensor(g.inputs()[i]).type;
    if (halved) t.shape[1] /= 2;
    std::vector<double> v(static_cast<size_t>(t.num_elements()));
    for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(phase + 0.37 * static_cast<double>(k));
    write_tensor_file((dir / cat("input_", i, ".npy")).string(), HostTensor(t, v));
  }
}

}  // namespace

TEST_CASE("cli: run --mesh reads --inputs, writes --outputs and compares --expect as one device does") {
  TempDir dir;
  write_inputs(dir.path / "x", 0.0);
  write_inputs(dir.path / "y", 1.0);
  write_inputs(dir.path / "half", 0.0, true);
  const std::string x = (dir.path / "x").string(), y = (dir.path / "y").string();
  const std::string one_x = dir.file("one_x"), one_y = dir.file("one_y"), two = dir.file("two");
  REQUIRE(cli_testing::run("run " + kSmall + " --interp --inputs " + x + " --outputs " + one_x).status == 0);
  REQUIRE(cli_testing::run("run " + kSmall + " --interp --inputs " + y + " --outputs " + one_y).status == 0);
  cli_testing::Result r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --inputs " + x + " --outputs " + two +
                                           " --expect " + one_x + kPins);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("outputs match " + one_x) != std::string::npos);
  const HostTensor mesh = read_tensor_file(two + "/output_0.npy"), single = read_tensor_file(one_x + "/output_0.npy");
  CHECK(mesh.type() == single.type());
  r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --inputs " + x + " --expect " + one_y + kPins);
  CHECK(r.status == 1);
  CHECK(r.output.find("MISMATCH output 0") != std::string::npos);
  r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --inputs " + (dir.path / "half").string() + kPins);
  CHECK(r.status == 2);
  CHECK(r.output.find("tessel: error: ") == 0);
  CHECK(r.output.find("expected f32[1,16,64], given f32[1,8,64] (the graph over the mesh") != std::string::npos);
}

TEST_CASE("cli: run --mesh --report writes the plan, its prediction, the step times and every rank's checks") {
  TempDir dir;
  const std::string report = dir.file("mesh.json");
  cli_testing::Result r = cli_testing::run("run " + kSmall + " --mesh 2 --device cpu --check --time 3 --report " + report + kPins);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("wrote " + report) != std::string::npos);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(report));
  CHECK(j["mesh"] == "2 (m0)");
  CHECK(j["devices"] == 2);
  CHECK(j["ranks"] == "threads of this process");
  CHECK(j["backend"] == "cpu");
  CHECK(j["plan"].size() > 2);
  CHECK(j["predicted"]["total_s"].get<double>() > 0);
  CHECK(j["predicted"]["communication_s"].get<double>() > 0);  // the pinned plan all-reduces
  CHECK(j["times_s"].size() == 3);
  CHECK(j["median_s"].get<double>() > 0);
  CHECK(j["timing"]["per_step"] == "the slowest rank's");
  CHECK(j["checked"] == true);
  CHECK(j["check_mode"] == "whole");
  // Every output of every rank, each matching.
  const OpGraph g = lower_model(load_model(kSmall));
  REQUIRE(j["outputs"].size() == 2 * g.outputs().size());
  for (const auto& o : j["outputs"]) CHECK(o["ok"] == true);
  // Without --check or --time: the plan and prediction, no times, no checks.
  r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --report " + report + kPins);
  REQUIRE(r.status == 0);
  j = nlohmann::json::parse(std::ifstream(report));
  CHECK(j["backend"] == "interpreter");
  CHECK(j["checked"] == false);
  CHECK(j["outputs"].empty());
  CHECK_FALSE(j.contains("times_s"));
  // --tune needs kernels to measure, on CPU ranks (one --schedule is refused: cli_test).
  r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --tune 2" + kPins);
  CHECK(r.status == 2);
  CHECK(r.output.find("--tune measures compiled kernels: give --device cpu") != std::string::npos);
  r = cli_testing::run("run " + kSmall + " --mesh 2 --device cuda --tune 2" + kPins);
  CHECK(r.status == 2);
  CHECK(r.output.find("--tune with --mesh measures CPU ranks only yet") != std::string::npos);
}

TEST_CASE("cli: run --mesh --device cpu --tune measures every rank's segments, then reuses the measurements") {
  const TempDir tmp;
  const std::string cache = tmp.file("cache"), host = tmp.file("host.json");
  // One spec file for both runs (measurements are cached per spec; two probes differ slightly).
  REQUIRE(cli_testing::run("hw probe --quick -o " + host).status == 0);
  const std::string cmd = "run " + kSmall + " --mesh 2 --device cpu --hw " + host + " --tune 2 --check --cache " + cache + kPins;
  auto r = cli_testing::run(cmd);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("(matches the single-device interpreter)") != std::string::npos);
  REQUIRE(r.output.find("tuned every rank's segments: ") != std::string::npos);
  CHECK(r.output.find("tuned every rank's segments: 0 candidates") == std::string::npos);
  // The same run again: every candidate from the measurement cache.
  r = cli_testing::run(cmd);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("tuned every rank's segments: 0 candidates measured now") != std::string::npos);
  CHECK(r.output.find("(matches the single-device interpreter)") != std::string::npos);
}

TEST_CASE("cli: run --mesh --device cpu --save-schedules writes each segment's schedule, --schedules replays them") {
  const TempDir tmp;
  const std::string saved = tmp.file("schedules"), host = tmp.file("host.json");
  REQUIRE(cli_testing::run("hw probe --quick -o " + host).status == 0);
  const std::string base = "run " + kSmall + " --mesh 2 --device cpu --hw " + host + " --check" + kPins;
  auto r = cli_testing::run(base + " --save-schedules " + saved);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("(matches the single-device interpreter)") != std::string::npos);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(saved)) files.push_back(e.path());
  REQUIRE_FALSE(files.empty());
  for (const fs::path& f : files) {
    CHECK(f.filename().string().rfind("segment-", 0) == 0);
    std::ifstream in(f);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j.contains("groups"));
  }
  // Replayed: the same results, checked again.
  r = cli_testing::run(base + " --schedules " + saved);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("(matches the single-device interpreter)") != std::string::npos);
  // A segment without its file (another plan, model or mesh): the missing file named, exit 2.
  fs::remove(files.front());
  r = cli_testing::run(base + " --schedules " + saved);
  CHECK(r.status == 2);
  CHECK(r.output.find(files.front().filename().string()) != std::string::npos);
  CHECK(r.output.find("no saved schedule for this segment") != std::string::npos);
  // A tampered schedule is read and checked as one --schedule is: refused (exit 2), not run.
  std::ofstream(files.front(), std::ios::trunc) << "{\"format\": \"tessel-schedule\", \"groups\": 7}";
  r = cli_testing::run(base + " --schedules " + saved);
  CHECK(r.status == 2);
  CHECK(r.output.find(files.front().filename().string()) != std::string::npos);
  // Refused: interpreted ranks (nothing compiled), GPU ranks, tuning a replay, and without --mesh.
  r = cli_testing::run("run " + kSmall + " --mesh 2 --interp --schedules " + saved + kPins);
  CHECK(r.status == 2);
  CHECK(r.output.find("segment schedules are for compiled ranks") != std::string::npos);
  r = cli_testing::run("run " + kSmall + " --mesh 2 --device cuda --save-schedules " + saved + kPins);
  CHECK(r.status == 2);
  CHECK(r.output.find("segment schedules are for CPU ranks only yet") != std::string::npos);
  r = cli_testing::run(base + " --schedules " + saved + " --tune 2");
  CHECK(r.status == 2);
  CHECK(r.output.find("replayed --schedules are not tuned") != std::string::npos);
  r = cli_testing::run("run " + kSmall + " --device cpu --schedules " + saved);
  CHECK(r.status == 2);
  CHECK(r.output.find("segment schedules are for --mesh") != std::string::npos);
}

}  // namespace tessel::testing
