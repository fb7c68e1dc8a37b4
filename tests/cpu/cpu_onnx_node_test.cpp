// The ONNX backend node tests (Debian's libonnx-testdata) that Tessel lowers and the policies
// schedule, run through the compiled CPU path (welder schedules for the AVX2 spec and roller
// schedules for the AVX-512 spec, JIT for this host) and compared with the interpreter on each test's own input data. Prints the counts:
// passed, failed (listed with their first mismatch), skipped (not lowered: unsupported operator,
// attribute or dtype, or inputs the lowering cannot bind).
#include <algorithm>
#include <filesystem>

#include "../onnx_node_data.h"
#include "cpu_check.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"

using namespace tessel;
using namespace tessel::testing;
namespace fs = std::filesystem;

namespace {


}  // namespace

// One test case per (policy, spec), so ctest runs and times them apart.
static void check_onnx_compiled(const std::string& policy_name, const std::string& spec_file) {
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::exists(root)) {
    MESSAGE("[SKIP] no ONNX node tests at ", root.string());
    return;
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  const std::pair<std::string, std::string> runs[] = {{policy_name, spec_file}};
  int passed = 0, skipped = 0;
  std::vector<std::string> failures;
  for (const fs::path& dir : dirs) {
    std::optional<NodeTest> t;
    try {
      t = load_node_test(dir);
    } catch (const UserError&) {
      t.reset();
    }
    if (!t || t->graph.num_nodes() == 0) {
      ++skipped;
      continue;
    }
    bool ok = true;
    for (const auto& [policy, spec_name] : runs) {
      const HwSpec& spec = cpu_spec(spec_name);
      const std::string name = cat(dir.filename().string(), " (", policy, ", ", spec_name, ")");
      try {
        std::optional<std::string> interpreter_error;
        try {
          (void)interpret(t->graph, t->inputs);
        } catch (const UserError& e) {
          interpreter_error = e.what();
        }
        if (interpreter_error) {
          // Bad data (e.g. a gather index out of range): the compiled path must refuse it too.
          bool refused = false;
          try {
            (void)run_compiled(t->graph, spec, policy, t->inputs);
          } catch (const UserError&) {
            refused = true;
          }
          if (!refused) {
            ok = false;
            failures.push_back(cat(name, ": the interpreter raised '", *interpreter_error, "', compiled code did not"));
          }
          continue;
        }
        const CompiledCheck c = run_compiled(t->graph, spec, policy, t->inputs);
        if (!c.ok) {
          ok = false;
          failures.push_back(cat(name, ": ", c.message));
        }
      } catch (const std::exception& e) {
        ok = false;
        failures.push_back(cat(name, ": threw ", e.what()));
      }
    }
    if (ok) ++passed;
  }
  std::string listed;
  for (const std::string& f : failures) listed += "\n  " + f;
  MESSAGE("ONNX node tests through the compiled CPU path (", policy_name, ", ", spec_file, "): ", passed, " passed, ",
          failures.size(),
          " failed runs, ", skipped, " skipped (not lowered)", listed);
  CHECK(failures.empty());
  CHECK(passed >= 300);
}

TEST_CASE("cpu onnx node tests: compiled CPU code matches the interpreter (welder, AVX2 spec)") {
  check_onnx_compiled("welder", "x86-64-avx2-generic");
}

TEST_CASE("cpu onnx node tests: compiled CPU code matches the interpreter (roller, AVX-512 spec)") {
  check_onnx_compiled("roller", "x86-64-avx512-server");
}
