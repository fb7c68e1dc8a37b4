// ONNX backend node tests: every test of Debian's libonnx-testdata (data/node/<test>/model.onnx
// with test_data_set_N/input_K.pb and output_K.pb) run through the whole front end --
// import_onnx, lower_model, interpret -- and compared with the expected outputs by
// compare_tensors (compare.h, the one place tolerances live).
//
//   onnx_node_tests <data_dir> [--min-pass N] [--filter SUBSTR] [--verbose]
//                   [--timeout-s S] [--no-fork] [--known FILE]
//
// A test passes when every output of every data set matches. It is skipped when import, the test
// data or lowering raise UnsupportedError (Tessel does not support it yet), and failed on any
// other error or a mismatch. Tessel needs shape-determining inputs (Reshape's shape, reduction
// axes, TopK's k...) at import; when lowering says such an input is computed at run time, the test
// is retried with its integer inputs bound to the test data at import (LowerOptions::
// constant_inputs) and, if it then matches, counted apart as "passed with inputs bound".
// Tests listed in known_mismatches.txt (beside this file; `--known FILE`) whose outputs differ are
// counted as "known mismatch" with the listed reason; a listed test that matches fails the run.
//
// Each test runs in a child process with a time limit, so a crash, an
// abort or a hang in one test is reported as that test's failure and the run goes on
// (--no-fork runs in-process, for a debugger).
//
// Output: one line per failure, the most frequent reasons for skipping (per operator for
// "unsupported operator(s): ..."), then the totals. Exit status 1 if any test failed or fewer than
// --min-pass passed; 2 for a bad command line.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/lower.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

struct Options {
  fs::path data_dir;
  int min_pass = 0;
  std::string filter;  // run only tests whose name contains this
  bool verbose = false;
  int timeout_s = 60;  // per test, including every data set
  bool isolate = true;  // run each test in a child process
  fs::path known = fs::path(TESSEL_ONNX_KNOWN_MISMATCHES);
};

enum class Outcome : char { passed = 'P', passed_bound = 'B', failed = 'F', skipped = 'S' };

struct TestResult {
  Outcome outcome = Outcome::passed;
  std::string message;  // why it failed or was skipped
  std::string reason;   // for skips: UnsupportedError::message(), which the histogram groups
};

TestResult failed(std::string message) { return {Outcome::failed, std::move(message), ""}; }

// ---------------------------------------------------------------------------------------------
// Running one test

/// `dir/<prefix>0<suffix>`, `dir/<prefix>1<suffix>`, ... up to the first that does not exist.
std::vector<fs::path> numbered_paths(const fs::path& dir, const std::string& prefix,
                                     const std::string& suffix) {
  std::vector<fs::path> paths;
  for (int k = 0;; ++k) {
    fs::path p = dir / cat(prefix, k, suffix);
    if (!fs::exists(p)) return paths;
    paths.push_back(std::move(p));
  }
}

std::vector<HostTensor> read_tensors(const std::vector<fs::path>& paths) {
  std::vector<HostTensor> tensors;
  for (const fs::path& p : paths) tensors.push_back(read_tensor_file(p.string()));
  return tensors;
}

/// An error's text without the model's path (the test name already says which model).
std::string describe(const std::exception& e) {
  if (const auto* user = dynamic_cast<const UserError*>(&e)) {
    const fs::path file(user->file());
    std::string out = file.filename() == "model.onnx" || file.empty()
                          ? "" : cat(file.parent_path().filename().string(), "/",
                                     file.filename().string(), ": ");
    if (!user->location().empty()) out += user->location() + ": ";
    return out + user->message();
  }
  return e.what();
}

/// The interpreter's inputs: graph inputs in graph order, each found by name among the model's
/// inputs, which the test data gives by position.
std::vector<HostTensor> graph_inputs(const OpGraph& graph, const ModelDef& model,
                                     const std::vector<HostTensor>& data) {
  std::vector<HostTensor> inputs;
  for (TensorId t : graph.inputs()) {
    const std::string& name = graph.tensor(t).name;
    const auto it = std::find_if(model.inputs.begin(), model.inputs.end(),
                                 [&](const ValueDecl& d) { return d.name == name; });
    if (it == model.inputs.end())
      throw std::runtime_error(cat("graph input '", name, "' is not a model input"));
    inputs.push_back(data[it - model.inputs.begin()]);
  }
  return inputs;
}

/// Index into `actual` (the graph's outputs) of the model output `k`, found by name.
size_t graph_output_index(const OpGraph& graph, const ModelDef& model, size_t k) {
  const std::vector<TensorId>& outs = graph.outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (graph.tensor(outs[i]).name == model.outputs[k]) return i;
  return k;  // renamed by lowering: fall back to the position
}

/// Runs one data set; returns an empty optional when every output matches.
std::optional<std::string> run_data_set(const ModelDef& model, const fs::path& set_dir,
                                        std::string& phase, bool bind_integer_inputs) {
  phase = "read test data";
  const std::vector<HostTensor> data = read_tensors(numbered_paths(set_dir, "input_", ".pb"));
  const std::vector<HostTensor> expected = read_tensors(numbered_paths(set_dir, "output_", ".pb"));
  if (data.size() != model.inputs.size())
    return cat(set_dir.filename().string(), " has ", data.size(), " input files for ",
               model.inputs.size(), " model inputs");
  if (expected.size() != model.outputs.size())
    return cat(set_dir.filename().string(), " has ", expected.size(), " output files for ",
               model.outputs.size(), " model outputs");

  phase = "lower";
  LowerOptions options;
  for (size_t k = 0; k < data.size(); ++k) {
    options.input_shapes[model.inputs[k].name] = data[k].shape();
    if (bind_integer_inputs && is_integer(data[k].dtype())) options.constant_inputs[model.inputs[k].name] = data[k];
  }
  const OpGraph graph = lower_model(model, options);

  phase = "interpret";
  const std::vector<HostTensor> actual = interpret(graph, graph_inputs(graph, model, data));
  if (actual.size() != expected.size())
    return cat("the lowered graph has ", actual.size(), " outputs, expected ", expected.size());

  phase = "compare";
  for (size_t k = 0; k < expected.size(); ++k) {
    const CompareResult result =
        compare_tensors(actual[graph_output_index(graph, model, k)], expected[k]);
    if (!result.ok)
      return cat(set_dir.filename().string(), " output ", k, " '", model.outputs[k],
                 "': ", result.message);
  }
  return std::nullopt;
}

/// Import, then every data set. UnsupportedError before interpretation is a skip.
TestResult run_test(const fs::path& test_dir) {
  std::string phase = "import";
  bool bind = false;
  for (;;) {
    try {
      const ModelDef model = import_onnx((test_dir / "model.onnx").string());
      const std::vector<fs::path> sets = numbered_paths(test_dir, "test_data_set_", "");
      if (sets.empty()) return failed("no test_data_set_0 directory");
      for (const fs::path& set : sets)
        if (std::optional<std::string> mismatch = run_data_set(model, set, phase, bind))
          return failed(*mismatch);
      return {bind ? Outcome::passed_bound : Outcome::passed, "", ""};
    } catch (const UnsupportedError& e) {
      const bool runtime_shape = e.message().find("must be known at import") != std::string::npos;
      if (phase == "lower" && runtime_shape && !bind) {
        bind = true;  // retry with the integer inputs bound at import
        continue;
      }
      if (phase == "import" || phase == "read test data" || phase == "lower")
        return {Outcome::skipped, describe(e), e.message()};
      return failed(cat(phase, ": ", describe(e)));
    } catch (const std::exception& e) {
      return failed(cat(phase, ": ", describe(e)));
    } catch (...) {
      return failed(cat(phase, ": unknown exception"));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Isolation: one child process per test

std::string serialize(const TestResult& r) {
  return cat(static_cast<char>(r.outcome), r.reason, '\0', r.message);
}

std::optional<TestResult> deserialize(const std::string& bytes) {
  const size_t split = bytes.find('\0');
  if (bytes.empty() || split == std::string::npos) return std::nullopt;
  const char outcome = bytes[0];
  if (outcome != 'P' && outcome != 'B' && outcome != 'F' && outcome != 'S') return std::nullopt;
  return TestResult{static_cast<Outcome>(outcome), bytes.substr(split + 1),
                    bytes.substr(1, split - 1)};
}

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

/// Everything the child writes to `fd` until it closes it; nullopt if `timeout_s` passes first.
std::optional<std::string> read_until_eof(int fd, int timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  std::string bytes;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return bytes;
    bytes.append(buffer, static_cast<size_t>(n));
  }
}

TestResult run_isolated(const fs::path& test_dir, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return failed(cat("pipe: ", std::strerror(errno)));
  std::fflush(nullptr);  // so the child does not inherit unflushed output
  const pid_t pid = fork();
  if (pid < 0) return failed(cat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    close(fds[0]);
    write_all(fds[1], serialize(run_test(test_dir)));
    _exit(0);
  }
  close(fds[1]);
  const std::optional<std::string> bytes = read_until_eof(fds[0], timeout_s);
  close(fds[0]);
  if (!bytes) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!bytes) return failed(cat("timed out after ", timeout_s, " s"));
  if (WIFSIGNALED(status))
    return failed(cat("crashed with signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")"));
  if (std::optional<TestResult> result = deserialize(*bytes)) return *result;
  return failed(cat("the test process exited with status ", WEXITSTATUS(status),
                    " without a result"));
}

// ---------------------------------------------------------------------------------------------
// Summary

/// The histogram keys of one skip: each operator of "unsupported operator(s): A (1 op: 'x'), B
/// (2 ops, first 'y')" (or of a plain "A, B" list), otherwise the whole message.
std::vector<std::string> skip_reasons(const std::string& reason) {
  const std::string prefix = "unsupported operator(s): ";
  if (!reason.starts_with(prefix)) return {reason};
  static const std::regex item(R"(([A-Za-z_][\w.]*)(?: \((?:[^()']|'[^']*')*\))?(?:, |$))");
  std::vector<std::string> ops;
  const std::string list = reason.substr(prefix.size());
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item); it != std::sregex_iterator();
       ++it)
    ops.push_back(cat("operator ", (*it)[1].str()));
  if (ops.empty()) return {reason};
  return ops;
}

void print_skip_histogram(const std::map<std::string, int>& counts, int skipped) {
  constexpr size_t kMaxReasonsShown = 25;
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::cout << "most frequent reasons for skipping (of " << skipped << " skipped tests):\n";
  for (size_t i = 0; i < sorted.size() && i < kMaxReasonsShown; ++i)
    std::printf("  %5d  %s\n", sorted[i].second, sorted[i].first.c_str());
  if (sorted.size() > kMaxReasonsShown)
    std::cout << "  ... and " << sorted.size() - kMaxReasonsShown << " more\n";
}

// ---------------------------------------------------------------------------------------------
// Command line

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "onnx_node_tests: " << problem << "\n"
            << "usage: onnx_node_tests <data_dir> [--min-pass N] [--filter SUBSTR] [--verbose]"
               " [--timeout-s S] [--no-fork] [--known FILE]\n";
  std::exit(2);
}

int parse_count(const std::string& flag, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < 0 || value > INT32_MAX)
    usage(cat(flag, " needs a non-negative integer, got '", text, "'"));
  return static_cast<int>(value);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(cat(arg, " needs a value"));
      return argv[++i];
    };
    if (arg == "--min-pass") options.min_pass = parse_count(arg, value());
    else if (arg == "--filter") options.filter = value();
    else if (arg == "--timeout-s") options.timeout_s = parse_count(arg, value());
    else if (arg == "--verbose") options.verbose = true;
    else if (arg == "--no-fork") options.isolate = false;
    else if (arg == "--known") options.known = value();
    else if (arg.starts_with("--")) usage(cat("unknown option '", arg, "'"));
    else if (options.data_dir.empty()) options.data_dir = arg;
    else usage(cat("unexpected argument '", arg, "'"));
  }
  if (options.data_dir.empty()) usage("missing <data_dir>");
  if (!fs::is_directory(options.data_dir))
    usage(cat("data directory '", options.data_dir.string(), "' does not exist (install "
              "libonnx-testdata)"));
  return options;
}

std::vector<fs::path> test_dirs(const Options& options) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(options.data_dir))
    if (entry.is_directory() &&
        entry.path().filename().string().find(options.filter) != std::string::npos)
      dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

/// Test name -> reason, from the known-mismatch list.
std::map<std::string, std::string> read_known_mismatches(const fs::path& path) {
  std::map<std::string, std::string> known;
  std::ifstream in(path);
  if (!in) return known;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t bar = line.find(" | ");
    known[line.substr(0, bar)] = bar == std::string::npos ? "" : line.substr(bar + 3);
  }
  return known;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::map<std::string, std::string> known = read_known_mismatches(options.known);
  int passed = 0, passed_bound = 0, failed_count = 0, skipped = 0, known_count = 0;
  std::map<std::string, int> skip_counts;
  for (const fs::path& dir : test_dirs(options)) {
    const std::string name = dir.filename().string();
    TestResult r = options.isolate ? run_isolated(dir, options.timeout_s) : run_test(dir);
    if (auto k = known.find(name); k != known.end()) {
      if (r.outcome == Outcome::failed) {
        ++known_count;
        std::cout << "KNOWN MISMATCH " << name << ": " << k->second << "\n";
        continue;
      }
      if (r.outcome != Outcome::skipped)
        r = failed(cat("listed in ", options.known.filename().string(), " but matches now: remove it"));
    }
    switch (r.outcome) {
      case Outcome::passed:
        ++passed;
        if (options.verbose) std::cout << "PASS " << name << "\n";
        break;
      case Outcome::passed_bound:
        ++passed_bound;
        if (options.verbose) std::cout << "PASS (inputs bound at import) " << name << "\n";
        break;
      case Outcome::failed:
        ++failed_count;
        std::cout << "FAIL " << name << ": " << r.message << "\n";
        break;
      case Outcome::skipped:
        ++skipped;
        for (const std::string& reason : skip_reasons(r.reason)) ++skip_counts[reason];
        if (options.verbose) std::cout << "SKIP " << name << ": " << r.message << "\n";
        break;
    }
    std::cout.flush();
  }
  const int ran = passed + passed_bound + failed_count + skipped + known_count;
  if (skipped > 0) print_skip_histogram(skip_counts, skipped);
  std::cout << "onnx node tests: " << ran << " ran, " << passed << " passed, " << passed_bound
            << " passed with shape inputs bound at import, " << failed_count << " failed, " << known_count
            << " known mismatches, " << skipped << " skipped (unsupported)\n"
            << passed + passed_bound << " passed, " << failed_count << " failed, " << skipped << " skipped\n";
  if (passed < options.min_pass)
    std::cout << "fewer than --min-pass " << options.min_pass << " tests passed\n";
  return failed_count > 0 || passed < options.min_pass ? 1 : 0;
}
