// tessel run --mesh with --inputs, --outputs and --expect (docs/distributed.md): the mesh's outputs
// from given inputs match the single-device interpreter's from the same files and differ from other
// inputs'; inputs of other shapes than the lowered graph's are a one-line UserError, exit 2.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

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

}  // namespace tessel::testing
