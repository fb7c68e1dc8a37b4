// Writing files the user names (tilegraph/files.h; issue: hostile inputs, class 8): a full
// disk, a directory or a missing folder is a UserError naming the path; nothing half-written is
// left behind; a device is written in place, never replaced.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "second\n");
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
