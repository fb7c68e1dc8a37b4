// `emit` of the CPU backend: one .ll or .o per group plus its task table and manifest.json, for
// the spec's own target (no host needed); LLVM's tools accept the IR; a GPU spec or an unknown
// format is the user's error.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../temp_dir.h"
#include "cpu_check.h"

using namespace tessel;
using namespace tessel::testing;

namespace {
OpGraph small_model() {
  return lower_model(single_op_model("Gemm", {random_f32({9, 13}, 1), random_f32({13, 21}, 2), random_f32({21}, 3)}, {}, 1, {1, 2}));
}
}  // namespace

TEST_CASE("cpu emit: llvm and obj files with a manifest") {
  const OpGraph g = small_model();
  for (const std::string spec_name : {"x86-64-avx2-generic", "x86-64-avx512-server"}) {
    const HwSpec& spec = cpu_spec(spec_name);
    const Schedule s = schedule_with(g, spec, "welder");
    for (const std::string format : {"llvm", "obj"}) {
      CAPTURE(format);
      TempDir dir;
      const std::vector<std::string> files = find_backend("cpu")->emit(g, s, spec, format, dir.path.string());
      const std::string ext = format == "llvm" ? ".ll" : ".o";
      int kernels = 0;
      for (const std::string& f : files) {
        CHECK(std::filesystem::file_size(f) > 0);
        kernels += f.size() > ext.size() && f.compare(f.size() - ext.size(), ext.size(), ext) == 0;
      }
      CHECK(kernels == static_cast<int>(s.groups.size()));
      std::ifstream in(dir.file("manifest.json"));
      const nlohmann::json manifest = nlohmann::json::parse(in);
      CHECK(manifest["kernels"].size() == s.groups.size());
      CHECK(manifest["target"]["cpu"] == spec.target.arch);
      if (format == "llvm" && std::system("command -v opt-16 > /dev/null 2>&1") == 0) {
        const std::string ll = dir.file("tessel_group_0.ll");
        CHECK(std::system(("opt-16 -passes=verify -disable-output " + ll).c_str()) == 0);
      }
    }
  }
}

TEST_CASE("cpu emit: bad requests are user errors") {
  const OpGraph g = small_model();
  const HwSpec& cpu = cpu_spec("x86-64-avx2-generic");
  TempDir dir;
  CHECK_THROWS_AS(find_backend("cpu")->emit(g, schedule_with(g, cpu, "welder"), cpu, "cuda", dir.path.string()), UserError);
  const HwSpec gpu = load_hw_spec(std::string(TESSEL_SOURCE_DIR) + "/hw_specs/nvidia-h100-sxm.json");
  CHECK_FALSE(find_backend("cpu")->supports(gpu));
  CHECK_THROWS_AS(find_backend("cpu")->compile(g, schedule_with(g, gpu, "welder"), gpu, CompileOptions{}), UserError);
}

TEST_CASE("cpu emit: f32 exp's vector variant is inlined, and scales with vscalefps on AVX-512") {
  // The loop vectorizer calls tessel_expf's vector variant of the loop's width; after it, the
  // variants are inlined and removed (no call, no symbol left). On a target with AVX-512 the
  // 16-lane variant scales by 2^n with vscalefps (emit_scalar.cpp); on AVX2 it builds the exponent.
  if (std::system("command -v objdump > /dev/null 2>&1") != 0) {
    MESSAGE("SKIP: no objdump to disassemble the object file");
    return;
  }
  const OpGraph g = lower_model(single_op_model("Exp", {random_f32({64, 256}, 1)}, {}, 1, {}));
  for (const std::string spec_name : {"x86-64-avx2-generic", "x86-64-avx512-server"}) {
    CAPTURE(spec_name);
    const HwSpec& spec = cpu_spec(spec_name);
    TempDir dir;
    find_backend("cpu")->emit(g, schedule_with(g, spec, "welder"), spec, "obj", dir.path.string());
    const std::string object = dir.file("tessel_group_0.o"), listing = dir.file("listing.txt");
    REQUIRE(std::system(("objdump -d -t " + object + " > " + listing).c_str()) == 0);
    std::ifstream in(listing);
    std::stringstream text;
    text << in.rdbuf();
    CHECK(text.str().find("tessel_expf") == std::string::npos);
    CHECK((text.str().find("vscalefps") != std::string::npos) == (spec.compute.simd_width == 16));
  }
}
