// Every input the fuzzers ever crashed on (tests/fuzz/findings/<target>/, committed as found)
// replayed through the same code as the fuzz target (tests/fuzz/fuzz_bodies.h): each must now end
// in a UserError or load, never in an InternalError or a crash.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "../fuzz/fuzz_bodies.h"

namespace fs = std::filesystem;

TEST_CASE("fuzz findings: every saved crash input now loads or raises UserError") {
  const std::map<std::string, void (*)(const uint8_t*, size_t)> targets = {
      {"hw_spec", tessel::fuzz::hw_spec}, {"model_json", tessel::fuzz::model_json},
      {"schedule_json", tessel::fuzz::schedule_json}, {"onnx", tessel::fuzz::onnx}};
  int replayed = 0;
  for (const auto& [name, body] : targets) {
    const fs::path dir = fs::path(TESSEL_SOURCE_DIR) / "tests" / "fuzz" / "findings" / name;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().front() == '.') continue;
      CAPTURE(e.path().string());
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CHECK_NOTHROW(body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      ++replayed;
    }
  }
  CHECK(replayed >= 3);
  MESSAGE(replayed, " fuzz findings replayed");
}
