// Hardware specs (hw_specs/hw_spec.h): every shipped spec loads, validates and round-trips through
// the canonical written form; "extends" overrides and merges as documented; the helpers answer from
// the spec's data.
#include "../temp_dir.h"
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "hw_specs/hw_spec.h"
#include "tilegraph/error.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

const std::string kSpecDir = std::string(TESSEL_SOURCE_DIR) + "/hw_specs/";

using tessel::testing::TempDir;

}  // namespace

TEST_CASE("every shipped hardware spec loads and round-trips") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSpecDir)) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    const std::string path = entry.path().string();
    CAPTURE(path);
    const HwSpec spec = load_hw_spec(path);
    CHECK(spec.name == entry.path().stem().string());  // the file is named after the chip
    CHECK(spec.file == path);
    CHECK_FALSE(spec.source.empty());
    CHECK_FALSE(spec.compute.source.empty());
    for (const MemoryLevel& level : spec.memory_levels) CHECK_MESSAGE(!level.source.empty(), level.name);
    CHECK(spec.memory_levels.front().name == "registers");
    CHECK(spec.memory_levels.back().name == "dram");

    const std::string text = write_hw_spec(spec);
    const HwSpec again = parse_hw_spec(text, path);
    CHECK(again == spec);
    CHECK(write_hw_spec(again) == text);
    CHECK(hw_spec_hash(again) == hw_spec_hash(spec));
    CHECK(format_hw_spec_table(spec).find(spec.name) != std::string::npos);
  }
  CHECK(count >= 7);
}

TEST_CASE("H100 SXM values and helpers") {
  const HwSpec h100 = load_hw_spec(kSpecDir + "nvidia-h100-sxm.json");
  CHECK(h100.kind == "gpu");
  CHECK(h100.compute.units == 132);
  CHECK(h100.compute.simd_width == 32);
  CHECK(h100.target.backend == "cuda");
  CHECK(h100.target.arch == "sm_90a");

  CHECK(h100.level_index("registers") == 0);
  CHECK(h100.level_index("smem") == 1);
  CHECK(h100.level_index("l2") == 2);
  CHECK(h100.level_index("dram") == 3);
  CHECK(h100.level_index("l3") == -1);
  CHECK(h100.level("smem").capacity_bytes == 228 * 1024);
  CHECK(h100.level("smem").instances == 132);
  CHECK(h100.level("smem").chip_capacity_bytes() == int64_t{228} * 1024 * 132);
  CHECK(h100.level("smem").banks == 32);
  CHECK(h100.level("l2").cache.has_value());
  CHECK_FALSE(h100.level("smem").cache.has_value());
  CHECK(h100.level("dram").bandwidth_gbps == doctest::Approx(3350));
  CHECK(h100.limits.smem_per_block_bytes == 227 * 1024);
  CHECK(h100.limits.registers_per_sm == 65536);

  try {
    h100.level("l3");
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("\"l3\"") != std::string::npos);
    CHECK(std::string(e.what()).find("registers, smem, l2, dram") != std::string::npos);
  }

  CHECK(h100.peak_flops(DType::f16, true) == doctest::Approx(989.4e12));
  CHECK(h100.peak_flops(DType::f32, false) == doctest::Approx(66.9e12));
  CHECK(h100.peak_flops(DType::i64, false) == 0);
  CHECK(h100.peak_flops(DType::boolean, true) == 0);
  REQUIRE(h100.compute.tensor_core_shapes.count(DType::f16));
  const auto& shapes = h100.compute.tensor_core_shapes.at(DType::f16);
  CHECK(std::find(shapes.begin(), shapes.end(), MmaShape{16, 8, 16}) != shapes.end());
}

TEST_CASE("H200 extends H100: overrides memory, keeps compute") {
  const HwSpec h100 = load_hw_spec(kSpecDir + "nvidia-h100-sxm.json");
  const HwSpec h200 = load_hw_spec(kSpecDir + "nvidia-h200.json");
  CHECK(h200.name == "nvidia-h200");
  CHECK(h200.level("dram").bandwidth_gbps == doctest::Approx(4800));
  CHECK(h200.level("dram").capacity_bytes > h100.level("dram").capacity_bytes);
  CHECK(h200.level("dram").transaction_bytes == h100.level("dram").transaction_bytes);  // inherited
  CHECK(h200.memory_levels.size() == h100.memory_levels.size());
  CHECK(h200.compute == h100.compute);
  CHECK(h200.limits == h100.limits);
  CHECK(h200.target == h100.target);
  CHECK(hw_spec_hash(h200) != hw_spec_hash(h100));
  // The loaded latency (the cost model's bytes-in-flight limit) is inherited with the level.
  CHECK(h100.level("dram").loaded_latency_ns == doctest::Approx(1100));
  CHECK(h200.level("dram").loaded_latency_ns == doctest::Approx(1100));
  CHECK(h100.level("l2").loaded_latency_ns == 0);  // not given: no limit
}

TEST_CASE("extends: deep merge, lists by name, chains, relative paths") {
  TempDir dir;
  fs::create_directories(dir.path / "sub");
  std::ifstream in(kSpecDir + "x86-64-avx2-generic.json");
  std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dir.write("base.json", base);
  // A level added by name, one overridden field of another, one nested field of the compute block.
  dir.write("sub/mid.json", R"({"extends": "../base.json", "name": "mid",
    "compute": {"simt_peak_tflops": {"f32": 1.5}},
    "memory_levels": [{"name": "l2", "bandwidth_gbps": 1000},
                      {"name": "hbm", "scope": "host", "capacity_bytes": 68719476736, "instances": 1,
                       "bandwidth_gbps": 400, "transaction_bytes": 64, "software_managed": false}]})");
  const std::string leaf = dir.write("sub/leaf.json", R"({"extends": "mid.json", "name": "leaf",
    "limits": {"hardware_threads": 32}})");

  const HwSpec generic = load_hw_spec(kSpecDir + "x86-64-avx2-generic.json");
  const HwSpec spec = load_hw_spec(leaf);
  CHECK(spec.name == "leaf");
  CHECK(spec.file == leaf);
  CHECK(spec.limits.hardware_threads == 32);
  CHECK(spec.compute.simt_peak_tflops.at(DType::f32) == doctest::Approx(1.5));
  CHECK(spec.compute.simt_peak_tflops.at(DType::f64) == generic.compute.simt_peak_tflops.at(DType::f64));
  CHECK(spec.level("l2").bandwidth_gbps == doctest::Approx(1000));
  CHECK(spec.level("l2").capacity_bytes == generic.level("l2").capacity_bytes);
  CHECK(spec.memory_levels.size() == generic.memory_levels.size() + 1);
  CHECK(spec.memory_levels.back().name == "hbm");
  CHECK(spec.target == generic.target);
  // The written form is self-contained: no "extends", and it reads back anywhere.
  const std::string text = write_hw_spec(spec);
  CHECK(text.find("extends") == std::string::npos);
  CHECK(parse_hw_spec(text, leaf) == spec);
}

TEST_CASE("extends: a key set to null removes the inherited one") {
  TempDir dir;
  std::ifstream in(kSpecDir + "nvidia-h100-sxm.json");
  std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dir.write("h100.json", base);
  const HwSpec h100 = load_hw_spec(kSpecDir + "nvidia-h100-sxm.json");
  REQUIRE_FALSE(h100.compute.family_efficiency.empty());
  // The measured efficiencies dropped; a null for a key the base lacks, and one inside an object
  // the base lacks, change nothing.
  const std::string leaf = dir.write("leaf.json", R"({"extends": "h100.json", "name": "leaf",
    "compute": {"family_efficiency": null, "no_such_key": null},
    "limits": {"max_cluster_blocks": 4}})");
  const HwSpec spec = load_hw_spec(leaf);
  CHECK(spec.compute.family_efficiency.empty());
  CHECK(spec.compute.units == h100.compute.units);
  CHECK(spec.limits.max_cluster_blocks == 4);
  // A required key removed is an error naming it, as if it had never been written.
  const std::string broken = dir.write("broken.json", R"({"extends": "h100.json", "name": "broken", "compute": {"units": null}})");
  try {
    load_hw_spec(broken);
    FAIL("a spec without compute.units loaded");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("units") != std::string::npos);
  }
}

TEST_CASE("written form: fixed key order, optional fields omitted") {
  const HwSpec cpu = load_hw_spec(kSpecDir + "x86-64-avx2-generic.json");
  const std::string text = write_hw_spec(cpu);
  CHECK(text.find("\"name\"") < text.find("\"memory_levels\""));
  CHECK(text.find("\"memory_levels\"") < text.find("\"compute\""));
  CHECK(text.find("\"max_threads_per_block\"") == std::string::npos);  // zero limits are omitted
  CHECK(text.find("\"hardware_threads\": 16") != std::string::npos);
  CHECK(text.find("\"banks\"") == std::string::npos);  // no banked level on this CPU
}

TEST_CASE("scope names") {
  for (MemoryScope s : {MemoryScope::thread, MemoryScope::warp, MemoryScope::block, MemoryScope::cluster,
                        MemoryScope::sm, MemoryScope::core, MemoryScope::device, MemoryScope::host})
    CHECK(parse_scope(scope_name(s)) == s);
  CHECK_FALSE(parse_scope("socket").has_value());
}

TEST_CASE("every committed measured spec (hw_specs/measured/: probed or calibrated) loads, round-trips and says how it was measured") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(kSpecDir + "measured")) {
    const std::string path = entry.path().string();
    // A calibration's residuals (tessel hw calibrate -o FILE writes FILE.residuals.json) are not a spec.
    if (entry.path().extension() != ".json" || path.ends_with(".residuals.json")) continue;
    ++count;
    CAPTURE(path);
    const HwSpec spec = load_hw_spec(path);
    const bool calibrated = spec.compute.source.find("fitted by tessel hw calibrate") != std::string::npos;
    CHECK((calibrated || spec.source.find("measured by tessel hw probe") != std::string::npos));
    if (calibrated) CHECK(!spec.compute.family_efficiency.empty());
    CHECK(parse_hw_spec(write_hw_spec(spec), path) == spec);
    CHECK(spec.level("dram").bandwidth_gbps > 0);
  }
  CHECK(count >= 2);  // this development machine and the H100
}
