// The `tessel` binary: every subcommand has --help; bad input gives one error line naming the
// place and exit status 2; `run --expect` exits 1 on a mismatch; convert round-trips an ONNX model.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../cli_run.h"

namespace fs = std::filesystem;

namespace {

using Result = cli_testing::Result;

Result tessel(const std::string& args) { return cli_testing::run(args); }

const std::string kModels = std::string(TESSEL_SOURCE_DIR) + "/experiments/models/";
const std::string kSpecs = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/";
const std::string kNodeTests = "/usr/share/libonnx-testdata/data/node/";

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("tessel_cli_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE("cli: --help on every subcommand") {
  for (const char* cmd : {"inspect", "run", "convert", "compile", "schedule", "explain", "sparsify", "shard"}) {
    CAPTURE(cmd);
    const Result r = tessel(std::string(cmd) + " --help");
    CHECK(r.status == 0);
    CHECK(r.output.find(std::string("usage: tessel ") + cmd) != std::string::npos);
  }
  CHECK(tessel("--help").status == 0);
}

TEST_CASE("cli: bad input exits 2 with one line naming the place and the value") {
  struct Case { std::string args, expect; };
  const fs::path dir = temp_dir("bad");
  {
    std::ofstream(dir / "broken.json") << R"({"format": "tessel-model", "version": 1, "inputs": [], "outputs": [], "ops": [)";
    std::ofstream(dir / "badkey.json")
        << R"({"format": "tessel-model", "version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}],)"
        << R"( "outputs": ["y"], "ops": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"], "atrs": {}}]})";
    std::ofstream(dir / "model.txt") << "hello";
  }
  std::vector<Case> cases = {
      {"frobnicate", "unknown command 'frobnicate'"},
      {"inspect " + (dir / "nope.json").string(), "nope.json: no such model file"},
      {"inspect " + dir.string(), "is a directory, not a model file"},

      {"inspect " + (dir / "broken.json").string(), "broken.json"},
      {"inspect " + (dir / "badkey.json").string(), "/ops/0/atrs"},
      {"inspect " + (dir / "model.txt").string(), "unknown model extension \".txt\""},
      {"inspect " + kModels + "bert_base_layer.json --bogus", "unknown option '--bogus'"},
      {"compile " + kModels + "bert_base_layer.json --polcy welder",
       "unknown option '--polcy' for 'tessel compile' (did you mean --policy? see tessel compile --help)"},
      {"schedule " + kModels + "bert_base_layer.json --hw nvidia-h100-sxm --policy weldr",
       "unknown policy \"weldr\" (did you mean welder? known: "},
      {"run " + kModels + "bert_base_layer.json --interp --device cpu", "takes --interp or --device cpu|cuda, not both"},
      {"run " + kModels + "bert_base_layer.json --interp --shape nosuch=2x3", "the model has no input named 'nosuch'"},
      {"schedule " + kModels + "bert_base_layer.json --hw nvidia-h100-sxn -o " + (dir / "s.json").string(),
       "no spec file or shipped spec named 'nvidia-h100-sxn' (did you mean nvidia-h100-sxm?"},
      {"run " + kModels + "bert_base_layer.json --device tpu", "unknown device 'tpu'"},
      {"schedule " + kModels + "bert_base_layer.json --hw nvidia-h100-sxm --policy-opt max_grup_nodes=2",
       "--policy-opt: policy welder has no option \"max_grup_nodes\" (did you mean max_group_nodes?"},
      {"explain " + kModels + "bert_base_layer.json --hw nvidia-h100-sxm --policy roller --policy-opt top_k=0",
       "policy roller option top_k expects an integer from 1"},
      {"run " + kModels + "bert_base_layer.json --interp --seed abc", "expects an integer, got \"abc\""},
      {"run " + kModels + "bert_base_layer.json --interp --inputs " + (dir / "none").string(), "not a directory"},
      // The backends' inputs: devices and specs of the wrong kind, code formats, counts.
      {"run " + kModels + "bert_base_layer.json --device cpu --hw " + kSpecs + "nvidia-h100-sxm.json", "a 'gpu' spec"},
      {"run " + kModels + "bert_base_layer.json --device cuda --hw " + kSpecs + "x86-64-avx2-generic.json", "a 'cpu' spec"},
      {"run " + kModels + "bert_base_layer.json --device cpu --threads -3", "option --threads expects an integer from 0"},
      {"run " + kModels + "bert_base_layer.json --device cpu --time -1", "option --time expects an integer from 0"},
      {"compile " + kModels + "bert_base_layer.json --hw " + kSpecs + "x86-64-avx2-generic.json --emit pdf -o " + (dir / "code").string(),
       "the cpu backend emits llvm, obj, not 'pdf'"},
      {"compile " + kModels + "bert_base_layer.json --hw " + kSpecs + "x86-64-avx2-generic.json --emit llvm", "needs -o DIR"},
      {"compile " + kModels + "bert_base_layer.json --hw " + kSpecs + "x86-64-avx2-generic.json --dump foo",
       "--dump: the cpu backend dumps ir, llvm, obj, not 'foo'"},
      {"compile " + kModels + "bert_base_layer.json --device cuda --hw " + kSpecs + "nvidia-h100-sxm.json --emit llvm -o " +
           (dir / "code").string(),
       "not 'llvm'"},
  };
  // The backends' emitted files go through the same checked writes: a manifest that cannot be
  // written (a folder in its place) is an error, not a silent exit 0.
  for (const char* backend : {"cpu", "cuda"}) {
    const fs::path out = dir / (std::string("emit_") + backend);
    fs::create_directories(out / "manifest.json");
    cases.push_back({"compile " + kModels + "resnet50_bottleneck.json --hw " + kSpecs +
                         (std::string(backend) == "cpu" ? "x86-64-avx2-generic.json --emit llvm" : "nvidia-h100-sxm.json --emit cuda") +
                         " -o " + out.string(),
                     "manifest.json: is a directory, not a file"});
  }
  // Files the user names for output: a full disk (/dev/full) is an error, not a truncated file.
  if (fs::is_character_file("/dev/full"))
    cases.push_back({"schedule " + kModels + "bert_base_layer.json --hw " + kSpecs + "x86-64-avx2-generic.json -o /dev/full",
                     "/dev/full: cannot write"});
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Result r = tessel(c.args);
    CHECK(r.status == 2);
    CHECK(r.output.find(c.expect) != std::string::npos);
    CHECK(r.output.find("internal error") == std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("cli: run --expect against ONNX test data passes, and a perturbed reference fails with 1") {
  const std::string test = kNodeTests + "test_softmax_axis_1";
  REQUIRE(fs::exists(test));
  const std::string data = test + "/test_data_set_0";
  Result r = tessel("run " + test + "/model.onnx --interp --inputs " + data + " --expect " + data);
  CHECK(r.status == 0);
  CHECK(r.output.find("match") != std::string::npos);

  // Write our outputs, then compare against a directory whose reference is a different model's.
  const fs::path out = temp_dir("expect");
  r = tessel("run " + test + "/model.onnx --interp --inputs " + data + " --outputs " + out.string());
  CHECK(r.status == 0);
  CHECK(fs::exists(out / "output_0.pb"));
  const std::string other = kNodeTests + "test_softmax_axis_0/test_data_set_0";
  r = tessel("run " + test + "/model.onnx --interp --inputs " + data + " --expect " + other);
  CHECK(r.status == 1);
  CHECK(r.output.find("MISMATCH output 0") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("cli: convert an ONNX model to JSON, and the JSON runs to the same outputs") {
  const std::string test = kNodeTests + "test_conv_with_strides_padding";
  REQUIRE(fs::exists(test));
  const fs::path dir = temp_dir("convert");
  const std::string json = (dir / "conv.json").string();
  Result r = tessel("convert " + test + "/model.onnx -o " + json);
  CHECK(r.status == 0);
  r = tessel("run " + json + " --interp --inputs " + test + "/test_data_set_0 --expect " + test + "/test_data_set_0");
  CHECK(r.status == 0);
  fs::remove_all(dir);
}

TEST_CASE("cli: inspect --dump prints the IR, compile reports every stage") {
  Result r = tessel("inspect " + kModels + "resnet50_bottleneck.json --dump");
  CHECK(r.status == 0);
  CHECK(r.output.find("reduce sum init 0 node") != std::string::npos);
  CHECK(r.output.find("FLOP") != std::string::npos);
  r = tessel("compile " + kModels + "bert_base_layer.json");
  CHECK(r.status == 0);
  for (const char* stage : {"[1/5 import]", "[2/5 normalize]", "[3/5 schedule]", "[4/5 emit]", "[5/5 run]"})
    CHECK(r.output.find(stage) != std::string::npos);
}

TEST_CASE("cli: schedule saves JSON, explain replays it, a bad policy exits 2, no --hw probes this machine") {
  const std::string model = kModels + "bert_base_layer.json";
  const std::string spec = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json";
  const fs::path dir = temp_dir("schedule");
  const std::string json = (dir / "s.json").string();
  Result r = tessel("schedule " + model + " --hw " + spec + " -o " + json);
  REQUIRE(r.status == 0);
  const Result fresh = tessel("explain " + model + " --hw " + spec);
  const Result replay = tessel("explain " + model + " --hw " + spec + " --schedule " + json);
  CHECK(fresh.status == 0);
  CHECK(replay.status == 0);
  CHECK(fresh.output == replay.output);  // the saved schedule replays to the same explanation
  // A shipped spec by its name is the spec of its file.
  CHECK(tessel("explain " + model + " --hw nvidia-h100-sxm").output == fresh.output);
  // `convert` without -o writes the JSON model to standard output.
  const Result converted = tessel("convert " + kModels + "resnet50_bottleneck.json");
  CHECK(converted.status == 0);
  CHECK(converted.output.rfind("{", 0) == 0);
  CHECK(converted.output.find("\"tessel-model\"") != std::string::npos);
  // `run` with neither --interp nor --device compiles for this host.
  const Result host = tessel("run " + kModels + "resnet50_bottleneck.json --check");
  CHECK(host.status == 0);
  CHECK(host.output.find("compiled for host-cpu") != std::string::npos);
  // ... and with a GPU spec, for its backend (CUDA: refused here without a GPU, not "--device cpu").
  const Result gpu_spec_run = tessel("run " + kModels + "resnet50_bottleneck.json --hw nvidia-h100-sxm");
  CHECK(gpu_spec_run.output.find("--device cpu") == std::string::npos);
  CHECK(gpu_spec_run.output.find("a 'gpu' spec") == std::string::npos);
  CHECK(fresh.output.find("not fused") != std::string::npos);
  CHECK(fresh.output.find("totals:") != std::string::npos);
  CHECK(fresh.output.find("  family    simt") != std::string::npos);  // the f32 layer's CUDA families
  {  // a saved family the backend does not have, and one that cannot emit its group
    std::ifstream in(json);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string simt = "\"family\": \"simt\"";
    const size_t at = text.find(simt);
    REQUIRE(at != std::string::npos);
    const std::string unknown = (dir / "unknown.json").string(), wrong = (dir / "wrong.json").string();
    std::ofstream(unknown) << text.substr(0, at) << "\"family\": \"tpu\"" << text.substr(at + simt.size());
    std::ofstream(wrong) << text.substr(0, at) << "\"family\": \"wgmma\"" << text.substr(at + simt.size());
    r = tessel("explain " + model + " --hw " + spec + " --schedule " + unknown);
    CHECK(r.status == 2);
    CHECK(r.output.find(unknown) != std::string::npos);
    CHECK(r.output.find("/groups/0/kernel/family") != std::string::npos);
    CHECK(r.output.find("unknown cuda kernel family \"tpu\"") != std::string::npos);
    r = tessel("compile " + model + " --device cuda --hw " + spec + " --schedule " + wrong + " --emit cuda -o " +
               (dir / "code").string());
    CHECK(r.status == 2);
    CHECK(r.output.find("kernel family 'wgmma' cannot emit this group") != std::string::npos);
    CHECK(r.output.find("internal error") == std::string::npos);
  }
  // Without --device, compile takes the backend of the --emit format, else of the --hw spec.
  r = tessel("compile " + model + " --hw " + spec + " --emit cuda -o " + (dir / "guessed").string());
  CHECK(r.status == 0);
  CHECK(fs::exists(dir / "guessed" / "manifest.json"));
  // --emit ptx: NVRTC's PTX of each kernel for the spec's virtual architecture (no GPU needed).
  r = tessel("compile " + model + " --hw " + spec + " --emit ptx -o " + (dir / "ptx").string());
  CHECK(r.status == 0);
  {
    std::ifstream in(dir / "ptx" / "manifest.json");
    const std::string manifest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(manifest.find("\"code\": \"ptx for compute_90a\"") != std::string::npos);
    int ptx_files = 0;
    for (const auto& e : fs::directory_iterator(dir / "ptx"))
      if (e.path().extension() == ".ptx") {
        ++ptx_files;
        std::ifstream f(e.path());
        const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CHECK(text.find(".target sm_90a") != std::string::npos);
        CHECK(text.find(".entry ") != std::string::npos);
        CHECK(manifest.find(e.path().filename().string()) != std::string::npos);
      }
    CHECK(ptx_files >= 1);
  }
  // --policy-opt sets the policy's options: one node per group, so as many kernels as nodes.
  r = tessel("explain " + model + " --hw " + spec + " --policy-opt max_group_nodes=1,sink_candidates=2");
  CHECK(r.status == 0);
  {
    const size_t at = r.output.find("): ");
    REQUIRE(at != std::string::npos);
    int nodes = -1, kernels = -2;
    CHECK(std::sscanf(r.output.c_str() + at + 3, "%d nodes in %d kernels", &nodes, &kernels) == 2);
    CHECK(nodes == kernels);
  }
  r = tessel("compile " + model + " --hw " + spec);
  CHECK(r.status == 0);
  CHECK(r.output.find("[3/5 schedule]") != std::string::npos);
  CHECK(r.output.find("--device cpu needs another kind") == std::string::npos);
  r = tessel("explain " + model + " --hw " + spec + " --format dot");
  CHECK(r.output.find("subgraph cluster_0") != std::string::npos);
  r = tessel("explain " + model + " --hw " + spec + " --format html -o " + (dir / "e.html").string());
  CHECK(r.status == 0);
  std::ifstream html(dir / "e.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  CHECK(page.find("<svg") != std::string::npos);
  CHECK(page.find("Edges not fused") != std::string::npos);

  r = tessel("schedule " + model + " --hw " + spec + " --policy magic");
  CHECK(r.status == 2);
  CHECK(r.output.find("unknown policy \"magic\" (known: welder, roller, z3)") != std::string::npos);
  // Without --hw, schedule and explain probe this machine, as run does (--device picks which).
  r = tessel("schedule " + model + " -o " + (dir / "probed.json").string());
  CHECK(r.status == 0);
  CHECK(r.output.find("no --hw: scheduled for this machine, probed as 'host-cpu'") != std::string::npos);
  CHECK(fs::exists(dir / "probed.json"));
  r = tessel("explain " + model);
  CHECK(r.status == 0);
  CHECK(r.output.find("on host-cpu") != std::string::npos);
  r = tessel("schedule " + model + " --hw " + spec + " --device cpu");
  CHECK(r.status == 2);
  CHECK(r.output.find("--device: takes the machine to probe when there is no --hw") != std::string::npos);
  r = tessel("explain " + model + " --hw " + spec + " --format pdf");
  CHECK(r.status == 2);
  fs::remove_all(dir);
}

TEST_CASE("cli: compile --run checks the compiled CPU code, times it, and compares with the unfused baseline") {
  const std::string spec = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx2-generic.json";
  const Result r = tessel("compile " + kModels + "resnet50_bottleneck.json --hw " + spec + " --run --time 2");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("matches the interpreter") != std::string::npos);
  CHECK(r.output.find("MISMATCH") == std::string::npos);
  CHECK(r.output.find("vs unfused (roller,") != std::string::npos);
  const Result quiet = tessel("compile " + kModels + "resnet50_bottleneck.json --hw " + spec + " --run --time 2 --no-baseline");
  CHECK(quiet.status == 0);
  CHECK(quiet.output.find("vs unfused") == std::string::npos);
}

TEST_CASE("cli: run --time-lock times only while holding the lock, a lock file it cannot open exits 2") {
  const fs::path dir = temp_dir("lock");
  std::ofstream(dir / "relu.json")
      << R"({"format": "tessel-model", "version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [64]}],)"
      << R"( "outputs": ["y"], "ops": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"], "attrs": {}}]})";
  const std::string spec = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx2-generic.json";
  const std::string run = "run " + (dir / "relu.json").string() + " --device cpu --hw " + spec + " --no-cache --time 3";
  const fs::path lock_file = dir / "gpu.lock";
  const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  std::atomic<bool> finished{false};
  Result r;
  std::thread runner([&] {
    r = tessel(run + " --time-lock " + lock_file.string());
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK_FALSE(finished.load());  // waiting for the lock this test holds
  ::close(fd);                   // releases it
  runner.join();
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("timed 3 runs") != std::string::npos);
  const Result bad = tessel(run + " --time-lock " + (dir / "no" / "such" / "dir" / "lock").string());
  CHECK(bad.status == 2);
  CHECK(bad.output.find("cannot open the lock file") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: hw show --json prints the spec resolved, its extends merged, as Tessel reads it") {
  // The H200 spec extends the H100's and overrides only device memory: the JSON has every level,
  // the H200's bandwidth, no "extends", and reads back as the same spec.
  const std::string h200 = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h200.json";
  const Result r = tessel("hw show " + h200 + " --json");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("\"extends\"") == std::string::npos);
  CHECK(r.output.find("\"smem\"") != std::string::npos);
  CHECK(r.output.find("4800") != std::string::npos);
  CHECK(r.output.find("\"name\": \"nvidia-h200\"") != std::string::npos);
  const fs::path dir = temp_dir("hw_json");
  const std::string resolved = (dir / "resolved.json").string();
  std::ofstream(resolved) << r.output;
  const Result table = tessel("hw show " + resolved);
  CHECK(table.status == 0);
  CHECK(table.output == tessel("hw show " + h200).output);
  fs::remove_all(dir);
}

TEST_CASE("cli: hw calibrate fits family efficiencies from kernels measured here, schedule --tune records its trials") {
  const fs::path dir = temp_dir("calibrate");
  std::ofstream(dir / "mlp.json")
      << R"({"format": "tessel-model", "version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [64, 96]}],)"
      << R"( "weights": [{"name": "w", "dtype": "f32", "shape": [96, 80], "init": {"dist": "normal", "mean": 0.0, "std": 0.1, "seed": 1}}],)"
      << R"( "outputs": ["y"], "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["h"], "attrs": {}},)"
      << R"( {"name": "r", "op": "Relu", "inputs": ["h"], "outputs": ["y"], "attrs": {}}]})";
  const std::string spec = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/x86-64-avx2-generic.json";
  const std::string cache = (dir / "cache").string();
  const Result r = tessel("hw calibrate " + (dir / "mlp.json").string() + " --hw " + spec + " --tune 3 --cache " + cache + " -o " +
                          (dir / "calibrated.json").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  // The written spec validates (a fraction in (0, 1] per family) and shows the fitted family.
  const Result shown = tessel("hw show " + (dir / "calibrated.json").string());
  INFO(shown.output);
  CHECK(shown.status == 0);
  CHECK(shown.output.find("measured fraction of the roofline per kernel family:") != std::string::npos);
  CHECK(shown.output.find("microkernel") != std::string::npos);
  std::ifstream written(dir / "calibrated.json");
  std::stringstream spec_text;
  spec_text << written.rdbuf();
  CHECK(spec_text.str().find("fitted by tessel hw calibrate") != std::string::npos);
  std::ifstream residuals(dir / "calibrated.json.residuals.json");
  std::stringstream text;
  text << residuals.rdbuf();
  CHECK(text.str().find("\"microkernel\"") != std::string::npos);
  // The tuned schedule carries each group's trials, measured; a second tuning measures nothing new.
  const Result s = tessel("schedule " + (dir / "mlp.json").string() + " --hw " + spec + " --tune 3 --cache " + cache + " -o " +
                          (dir / "tuned.json").string());
  INFO(s.output);
  CHECK(s.status == 0);
  CHECK(s.output.find("0 timed now") != std::string::npos);
  std::ifstream tuned(dir / "tuned.json");
  std::stringstream json;
  json << tuned.rdbuf();
  CHECK(json.str().find("\"trials\"") != std::string::npos);
  CHECK(json.str().find("\"measured_s\"") != std::string::npos);
  // z3 does not tune; a device that is not here is named.
  const Result z3 = tessel("schedule " + (dir / "mlp.json").string() + " --hw " + spec + " --tune 2 --policy z3");
  CHECK(z3.status == 2);
  CHECK(z3.output.find("does not measure candidates") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: sparsify prunes linear weights choosing blocks, detect marks them again, explain shows the kernel's choice") {
  const fs::path dir = temp_dir("sparsify");
  const std::string model = (dir / "mm.json").string(), pruned = (dir / "pruned.json").string();
  std::ofstream(model) << R"({"format": "tessel-model", "version": 1, "name": "mm", "inputs": [{"name": "x", "dtype": "f16", "shape": [1024, 512]}],
    "weights": [{"name": "w", "dtype": "f16", "shape": [512, 1024], "init": {"dist": "normal", "std": 0.02, "seed": 3}}],
    "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["y"]}], "outputs": ["y"]})";
  const std::string h100 = kSpecs + "nvidia-h100-sxm.json";
  Result r = tessel("sparsify " + model + " --hw " + h100 + " --density 0.1 --blocks 32x32,64x64 -o " + pruned);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("<- kept") != std::string::npos);
  CHECK(r.output.find("block_sparse") != std::string::npos);
  std::stringstream text;
  text << std::ifstream(pruned).rdbuf();
  CHECK(text.str().find(R"("sparsity": {"pattern": "block", "block": [)") != std::string::npos);
  r = tessel("explain " + pruned + " --hw " + h100);
  CHECK(r.output.find("kind      block_sparse: 'w' has density ") != std::string::npos);
  r = tessel("explain " + pruned + " --hw " + h100 + " --sparse-kernels dense");
  CHECK(r.output.find("kind      dense (forced by --sparse-kernels): 'w'") != std::string::npos);
  CHECK(tessel("explain " + pruned + " --hw " + h100 + " --sparse-kernels sometimes").output.find("--sparse-kernels: unknown choice") !=
        std::string::npos);
  // The pruned values' zero blocks are found again by --detect; the marked model keeps them as data
  // and runs to the same outputs as the pruned one.
  const std::string marked = (dir / "marked.json").string();
  r = tessel("sparsify " + pruned + " --detect --blocks 16x16,128x128 -o " + marked);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("marked 1 of 1 linear weights") != std::string::npos);
  const Result a = tessel("run " + pruned + " --interp"), b = tessel("run " + marked + " --interp");
  CHECK(a.status == 0);
  REQUIRE(a.output.find("'y':") != std::string::npos);
  CHECK(a.output.substr(a.output.find("'y':")) == b.output.substr(b.output.find("'y':")));
  // Bad input: exit 2, one line.
  CHECK(tessel("sparsify " + model + " --hw " + h100 + " -o " + pruned).output.find("exactly one of --density D") != std::string::npos);
  CHECK(tessel("sparsify " + model + " --hw " + h100 + " --density 0 -o " + pruned).status == 2);
  CHECK(tessel("sparsify " + model + " --hw " + h100 + " --density 0.1 --blocks 64by64 -o " + pruned).output.find("ROWSxCOLS") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("cli: sparsify --pattern nm marks linear weights 2:4 along their reduction dimension, detect finds them again") {
  const fs::path dir = temp_dir("sparsify_nm");
  // MatMul's w is [K, N] (groups along dimension 0), Gemm's g with transB is [N, K] (dimension 1).
  const std::string model = (dir / "mlp.json").string(), nm = (dir / "nm.json").string();
  std::ofstream(model) << R"({"format": "tessel-model", "version": 1, "name": "mlp", "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 32]}],
    "weights": [{"name": "w", "dtype": "f32", "shape": [32, 16], "init": {"dist": "normal", "std": 0.02, "seed": 3}},
                {"name": "g", "dtype": "f32", "shape": [8, 16], "init": {"dist": "normal", "std": 0.02, "seed": 4}}],
    "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["h"]},
            {"name": "gemm", "op": "Gemm", "inputs": ["h", "g"], "outputs": ["y"], "attrs": {"transB": 1}}], "outputs": ["y"]})";
  Result r = tessel("sparsify " + model + " --pattern nm -o " + nm);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("2:4 along dimension 0") != std::string::npos);
  CHECK(r.output.find("2:4 along dimension 1") != std::string::npos);
  CHECK(r.output.find("pruned 2 of 2 linear weights to 2:4") != std::string::npos);
  CHECK(r.output.find("proxy for accuracy") != std::string::npos);
  std::stringstream text;
  text << std::ifstream(nm).rdbuf();
  CHECK(text.str().find(R"("sparsity": {"pattern": "nm", "n": 2, "m": 4, "axis": 0})") != std::string::npos);
  CHECK(text.str().find(R"("sparsity": {"pattern": "nm", "n": 2, "m": 4, "axis": 1})") != std::string::npos);
  // 1:8 along dimension 1 of g (16 columns) and 0 of w (32 rows).
  r = tessel("sparsify " + model + " --pattern nm --n 1 --m 8 -o " + nm);
  CHECK(r.output.find("1:8 along dimension 1") != std::string::npos);
  // The dense model is neither block-sparse nor 2:4; the pruned one is 2:4 again, attributes unchanged.
  const std::string marked = (dir / "marked.json").string();
  r = tessel("sparsify " + model + " --detect -o " + marked);
  CHECK(r.status == 0);
  CHECK(r.output.find("marked 0 of 2 linear weights") != std::string::npos);
  CHECK(r.output.find("below --min-zero, not 2:4") != std::string::npos);
  tessel("sparsify " + model + " --pattern nm -o " + nm);
  r = tessel("sparsify " + nm + " --detect -o " + marked);
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("marked 2 of 2 linear weights") != std::string::npos);
  std::stringstream again;
  again << std::ifstream(marked).rdbuf();
  CHECK(again.str() == text.str());
  const Result a = tessel("run " + nm + " --interp"), b = tessel("run " + marked + " --interp");
  CHECK(a.status == 0);
  REQUIRE(a.output.find("'y':") != std::string::npos);
  CHECK(a.output.substr(a.output.find("'y':")) == b.output.substr(b.output.find("'y':")));
  // Block-pruning the 2:4 model keeps the 2:4 pruning: the values are written out (the random init
  // of w, seed 3, would regenerate the unpruned weight).
  const std::string blocks = (dir / "blocks.json").string();
  r = tessel("sparsify " + nm + " --hw x86-64-avx512-server --density 0.5 --blocks 8x8 -o " + blocks);
  INFO(r.output);
  CHECK(r.status == 0);
  std::stringstream pruned;
  pruned << std::ifstream(blocks).rdbuf();
  CHECK(pruned.str().find(R"("pattern": "block")") != std::string::npos);
  CHECK(pruned.str().find(R"("seed": 3)") == std::string::npos);
  // Bad input: exit 2, one line.
  r = tessel("sparsify " + model + " --pattern nm --density 0.5 -o " + nm);
  CHECK(r.status == 2);
  CHECK(r.output.find("applies to the block pattern") != std::string::npos);
  CHECK(tessel("sparsify " + model + " --pattern diagonal -o " + nm).output.find("expected block or nm") != std::string::npos);
  CHECK(tessel("sparsify " + model + " --pattern nm --n 4 -o " + nm).output.find("--n expects an integer from 1 to 3, got 4") !=
        std::string::npos);
  CHECK(tessel("sparsify " + model + " --pattern nm --detect -o " + nm).status == 2);
  fs::remove_all(dir);
}

TEST_CASE("cli: shard prints a plan with its collectives, run --mesh on thread ranks matches the interpreter, bad meshes exit 2") {
  const std::string small = std::string(TESSEL_SOURCE_DIR) + "/tests/distributed/llama_block_small.json";
  const std::string pins = " --shard \"attn_q_w=S1 attn_k_w=S1 attn_v_w=S1 attn_o_w=S0 mlp_gate_w=S1 mlp_up_w=S1 mlp_down_w=S0\"";
  Result r = tessel("shard " + small + " --hw " + kSpecs + "nvidia-dgx-h100.json --mesh 4" + pins);
  CHECK(r.status == 0);
  CHECK(r.output.find("collective ") != std::string::npos);
  CHECK(r.output.find("scheduled: predicted") != std::string::npos);
  // z3's bound on the search (no enumeration): proved on one mesh axis, the search's plan at or above it.
  r = tessel("shard " + small + " --hw " + kSpecs + "nvidia-dgx-h100.json --mesh 4 --exhaustive 0 --no-schedule --z3-bound 60000");
  CHECK(r.status == 0);
  CHECK(r.output.find("z3 bound: no plan under ") != std::string::npos);
  CHECK(r.output.find("(proved, ") != std::string::npos);
  CHECK(r.output.find("% above it") != std::string::npos);
  r = tessel("run " + small + " --mesh 2 --interp --check --hw " + kSpecs + "x86-64-avx512-cluster-16.json" + pins);
  CHECK(r.status == 0);
  CHECK(r.output.find("matches the single-device interpreter") != std::string::npos);
  // CPU ranks timed: the slowest rank's median over the steps, after the checked run.
  r = tessel("run " + small + " --mesh 2 --device cpu --check --time 3 --hw " + kSpecs + "x86-64-avx512-cluster-16.json" + pins);
  CHECK(r.status == 0);
  CHECK(r.output.find("matches the single-device interpreter") != std::string::npos);
  CHECK(r.output.find("ms per step (median of 3 steps") != std::string::npos);
  CHECK(r.output.find("ranks as threads of this process, cpu kernels") != std::string::npos);
  r = tessel("run " + small + " --mesh 2 --interp --schedule " + small + pins);
  CHECK(r.status == 2);
  CHECK(r.output.find("--schedules DIR replays those --save-schedules DIR saved") != std::string::npos);
  for (const std::string& bad : {"shard " + small + " --hw " + kSpecs + "x86-64-avx512-server.json --mesh 2",
                                 "shard " + small + " --hw " + kSpecs + "nvidia-dgx-h100.json --mesh 0",
                                 "shard " + small + " --hw " + kSpecs + "nvidia-dgx-h100.json --mesh 999999999x999999999x999999999",
                                 "shard " + small + " --hw " + kSpecs + "nvidia-dgx-h100.json --mesh 2 --shard nothing=S0",
                                 "run " + small + " --interp --mesh 4096"}) {
    CAPTURE(bad);
    r = tessel(bad);
    CHECK(r.status == 2);
    CHECK(r.output.find("tessel: error: ") == 0);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE("cli: explain --profile shows each kernel's measured time, and --compare puts policies side by side") {
  const std::string model = std::string(TESSEL_SOURCE_DIR) + "/tests/distributed/bert_layer_small.json";
  const fs::path dir = temp_dir("profile");
  const std::string spec = (dir / "host.json").string();
  REQUIRE(tessel("hw probe --quick -o " + spec).status == 0);
  const Result plain = tessel("explain " + model + " --hw " + spec);
  REQUIRE(plain.status == 0);
  CHECK(plain.output.find("tiles: per node, per memory level") != std::string::npos);  // the notation's legend
  CHECK(plain.output.find("  work      ") != std::string::npos);
  CHECK(plain.output.find("FLOP/B") != std::string::npos);
  CHECK(plain.output.find("profiled") == std::string::npos);
  const Result profiled = tessel("explain " + model + " --hw " + spec + " --profile 3");
  REQUIRE(profiled.status == 0);
  int kernels = 0, rows = 0;
  for (size_t at = 0; (at = profiled.output.find("\nkernel ", at)) != std::string::npos; ++at) ++kernels;
  for (size_t at = 0; (at = profiled.output.find("  profiled  ", at)) != std::string::npos; ++at) ++rows;
  CHECK(kernels > 1);
  CHECK(rows == kernels);
  CHECK(profiled.output.find("profiled: the kernels took") != std::string::npos);
  const Result html = tessel("explain " + model + " --hw " + spec + " --profile 2 --format html");
  CHECK(html.status == 0);
  CHECK(html.output.find("<th>profiled</th>") != std::string::npos);
  CHECK(html.output.find("<h2>Roofline</h2>") != std::string::npos);
  CHECK(html.output.find("stroke=\"#d95f02\"") != std::string::npos);  // a measured point
  const Result compare = tessel("explain " + model + " --hw " + spec + " --compare welder,roller");
  REQUIRE(compare.status == 0);
  CHECK(compare.output.find("welder") != std::string::npos);
  CHECK(compare.output.find("roller") != std::string::npos);
  const Result bad = tessel("explain " + model + " --hw " + spec + " --compare welder,rolle");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("did you mean roller") != std::string::npos);
  // A GPU spec on a machine without a GPU: refused before anything is scheduled.
  const Result no_gpu = tessel("explain " + model + " --hw nvidia-h100-sxm --profile 3");
  CHECK((no_gpu.status == 2 || no_gpu.output.find("profiled") != std::string::npos));
  fs::remove_all(dir);
}
