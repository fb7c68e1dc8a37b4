// Writing files the user names (tilegraph/files.h; issue: hostile inputs, class 8): a full
// disk, a directory or a missing folder is a UserError naming the path; nothing half-written is
// left behind; a device is written in place, never replaced.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../cli_run.h"
#include "../temp_dir.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"

using namespace tessel;
namespace fs = std::filesystem;

TEST_CASE("file write: all or nothing, every failure a UserError naming the path") {
  tessel::testing::TempDir dir;
  const std::string path = (dir.path / "out.json").string();
  write_file_atomically(path, "first\n");
  write_file_atomically(path, "second\n");
  CHECK(tessel::testing::read_text(path) == "second\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary file left

  // A full disk (/dev/full: every write fails with ENOSPC), once reported as written.
  if (fs::exists("/dev/full")) {
    try {
      write_file_atomically("/dev/full", std::string(1 << 16, 'x'));
      FAIL("no error on a full device");
    } catch (const UserError& e) {
      CHECK(e.file() == "/dev/full");
      CHECK(std::string(e.what()).find("No space left on device") != std::string::npos);
    }
    CHECK(fs::is_character_file("/dev/full"));  // written in place, not replaced
  }
  CHECK_THROWS_AS(write_file_atomically(dir.path.string(), "x"), UserError);                    // a directory
  CHECK_THROWS_AS(write_file_atomically((dir.path / "no" / "such.json").string(), "x"), UserError);  // no folder
}

TEST_CASE("file write: --outputs onto a file or an unwritable place exits 2 with one line naming it (class 7)") {
  // std::filesystem errors escaped the CLI once and ended it with exit 134.
  tessel::testing::TempDir dir;
  const std::string model = dir.file("relu.json");
  std::ofstream(model) << R"({"format": "tessel-model", "version": 1, "inputs": [{"name": "x", "dtype": "f32", "shape": [4]}],
    "outputs": ["y"], "ops": [{"name": "r", "op": "Relu", "inputs": ["x"], "outputs": ["y"]}]})";
  const std::string file = dir.file("taken");
  std::ofstream(file) << "a file, not a folder";
  for (const std::string& where : {file, file + "/sub", std::string("/proc/tessel_no_such_place/out")}) {
    CAPTURE(where);
    const cli_testing::Result r = cli_testing::run("run " + model + " --interp --outputs " + where);
    CHECK(r.status == 2);
    CHECK(r.output.find("tessel: error: ") != std::string::npos);
    CHECK(r.output.find(where.substr(0, where.rfind('/'))) != std::string::npos);
    // (Summaries of the interpreted run may come first; the error is the last line, and one line.)
    const size_t at = r.output.rfind("tessel: error: ");
    REQUIRE(at != std::string::npos);
    const std::string last = r.output.substr(at);
    CHECK(std::count(last.begin(), last.end(), '\n') <= 1);
  }
}
