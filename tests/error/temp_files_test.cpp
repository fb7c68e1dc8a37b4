// Temporary files Tessel makes for itself (issue: hostile inputs, class 9): `explain --format html`
// hands Graphviz its graph in a file and `compile --dump` writes into a folder. Both were
// /tmp/tessel_<what>_<pid>, predictable and opened through any link planted there, so another local
// user could make Tessel overwrite a file it may write. Now each is new, private to this user and
// named unpredictably under the temporary directory (cli/cli_common.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "../temp_dir.h"
#include "cli/cli_common.h"
#include "tilegraph/error.h"

using namespace tessel;
namespace fs = std::filesystem;

namespace {

// Sets TMPDIR for one scope (std::filesystem::temp_directory_path reads it).
struct TmpdirScope {
  std::optional<std::string> saved;
  explicit TmpdirScope(const std::string& dir) {
    if (const char* v = std::getenv("TMPDIR")) saved = v;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirScope() {
    if (saved) ::setenv("TMPDIR", saved->c_str(), 1);
    else ::unsetenv("TMPDIR");
  }
};

}  // namespace

TEST_CASE("temporary files: new, private and unpredictably named under TMPDIR, a planted link is never followed") {
  tessel::testing::TempDir dir;
  const TmpdirScope scope(dir.path.string());
  // A link planted where the old name was (prefix + this process's id), pointing at a file this
  // user may write.
  const fs::path victim = dir.path / "victim.txt";
  std::ofstream(victim) << "keep";
  const fs::path planted = dir.path / ("tessel_explain_" + std::to_string(::getpid()) + ".dot");
  fs::create_symlink(victim, planted);

  std::set<std::string> names;
  for (int i = 0; i < 32; ++i) {
    const fs::path p = private_temp_file("tessel_explain_", ".dot");
    CAPTURE(p);
    CHECK(names.insert(p.string()).second);  // never the same name twice
    CHECK(p.parent_path() == dir.path);      // under TMPDIR
    CHECK(p != planted);
    CHECK(p.extension() == ".dot");
    CHECK(fs::is_regular_file(fs::symlink_status(p)));
    CHECK(fs::file_size(p) == 0);
    CHECK(fs::status(p).permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  }
  CHECK(tessel::testing::read_text(victim) == "keep");

  std::set<std::string> dirs;
  for (int i = 0; i < 8; ++i) {
    const fs::path d = private_temp_dir("tessel_dump_");
    CAPTURE(d);
    CHECK(dirs.insert(d.string()).second);
    CHECK(d.parent_path() == dir.path);
    CHECK(fs::is_directory(fs::symlink_status(d)));
    CHECK(fs::status(d).permissions() == fs::perms::owner_all);
  }
}

TEST_CASE("temporary files: a temporary directory that cannot be used is a UserError naming it") {
  tessel::testing::TempDir dir;
  const std::string missing = (dir.path / "no" / "such").string();
  const TmpdirScope scope(missing);
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    try {
      (void)(which == 0 ? private_temp_file("tessel_explain_", ".dot") : private_temp_dir("tessel_dump_"));
      FAIL("expected a UserError");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find(missing) != std::string::npos);
    }
  }
  CHECK_FALSE(fs::exists(dir.path / "no"));
}
