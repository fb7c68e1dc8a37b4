// Reading files the user names (tilegraph/files.h, read_regular_file; issue: hostile inputs,
// class 5): a FIFO, a device such as /dev/zero, or a file larger than its kind allows, given as a
// hardware spec, a spec's `extends` target, a model (JSON or ONNX) or an input tensor, is a
// UserError naming the file -- never a hang (a FIFO with no writer) or a read that never ends.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "../temp_dir.h"
#include "hw_specs/hw_spec.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"

using namespace tessel;
namespace fs = std::filesystem;

namespace {

void check_refused(const std::function<void()>& read, const std::string& file, const std::string& text) {
  try {
    read();
    FAIL("no UserError for ", file);
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find(text) != std::string::npos);
    CHECK(std::string(e.what()).find(file) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("bounded reads: FIFOs, devices and oversized files are refused by every reader") {
  tessel::testing::TempDir dir;
  const std::string fifo = (dir.path / "pipe").string();
  const std::string fifo_npy = (dir.path / "pipe.npy").string();  // a tensor file is read by its extension
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(fifo_npy.c_str(), 0600) == 0);
  // A FIFO with no writer: opened without blocking, then refused (before, each read hung).
  for (const auto& entry : std::vector<std::pair<std::string, std::function<void()>>>{
           {"spec", [&] { load_hw_spec(fifo); }},
           {"model json", [&] { load_model_json(fifo); }},
           {"onnx", [&] { import_onnx(fifo); }},
           {"tensor", [&] { read_tensor_file(fifo_npy); }}}) {
    CAPTURE(entry.first);
    check_refused(entry.second, entry.first == "tensor" ? fifo_npy : fifo, "not a regular file");
  }
  // A device that never ends.
  if (fs::exists("/dev/zero")) check_refused([] { load_hw_spec("/dev/zero"); }, "/dev/zero", "not a regular file");
  // A spec whose `extends` names the FIFO: the error is in the extending spec, naming the target.
  const std::string child = (dir.path / "child.json").string();
  std::ofstream(child) << R"({"extends": ")" << fifo << R"("})";
  check_refused([&] { load_hw_spec(child); }, child, "not a regular file");
  // A spec larger than a spec can be (16 MiB).
  const std::string big = (dir.path / "big.json").string();
  {
    std::ofstream out(big, std::ios::binary);
    out << std::string(static_cast<size_t>(kMaxSpecFileBytes + 1), ' ');
  }
  check_refused([&] { load_hw_spec(big); }, big, "more than the");
  // A directory and a missing file say so.
  check_refused([&] { load_hw_spec(dir.path.string()); }, dir.path.string(), "is a directory");
  check_refused([&] { load_hw_spec((dir.path / "absent.json").string()); }, "absent.json", "file not found");
}
