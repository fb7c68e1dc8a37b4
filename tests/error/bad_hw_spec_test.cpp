// Bad hardware specs: every class of problem must raise a UserError whose location is the JSON
// pointer of the bad value and whose message names the offending value. An InternalError (or any
// other exception) fails the test.
//
// Each case edits one spot of a small valid GPU spec (kValid) so that the case shows exactly what
// is wrong with it.
#include "../temp_dir.h"
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "hw_specs/hw_spec.h"
#include "tilegraph/error.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

const std::string kValid = R"({
  "name": "toy-gpu", "kind": "gpu", "source": "made up for tests",
  "memory_levels": [
    {"name": "registers", "scope": "sm", "capacity_bytes": 262144, "instances": 4, "bandwidth_gbps": 20000,
     "transaction_bytes": 4, "software_managed": true},
    {"name": "smem", "scope": "sm", "capacity_bytes": 65536, "instances": 4, "bandwidth_gbps": 4000,
     "transaction_bytes": 128, "banks": 32, "bank_width_bytes": 4, "software_managed": true},
    {"name": "l2", "scope": "device", "capacity_bytes": 4194304, "instances": 1, "bandwidth_gbps": 1000,
     "transaction_bytes": 32, "software_managed": false, "cache": {"associativity": 16, "shared": true}},
    {"name": "dram", "scope": "device", "capacity_bytes": 1073741824, "instances": 1, "bandwidth_gbps": 300,
     "transaction_bytes": 32, "software_managed": false, "latency_ns": 400}],
  "compute": {"units": 4, "simd_width": 32, "clock_ghz": 1.5,
              "simt_peak_tflops": {"f32": 1.5}, "tensor_peak_tflops": {"f16": 12},
              "tensor_core_shapes": {"f16": [{"m": 16, "n": 8, "k": 16}]}},
  "limits": {"max_threads_per_block": 1024, "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
             "registers_per_sm": 65536, "max_registers_per_thread": 255, "smem_per_block_bytes": 65536,
             "smem_per_sm_bytes": 65536},
  "interconnect": {"devices": 2, "links": [{"from": 0, "to": 1, "bandwidth_gbps": 50, "latency_us": 5, "kind": "pcie4"}]},
  "target": {"backend": "cuda", "arch": "sm_80", "triple": "nvptx64-nvidia-cuda", "gpu_features": ["mma_sync"]}})";

/// `base` with the first occurrence of `from` replaced by `to`.
std::string edit(const std::string& from, const std::string& to, const std::string& base = kValid) {
  const size_t at = base.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "test bug: '", from, "' is not in the spec");
  return base.substr(0, at) + to + base.substr(at + from.size());
}

void check_user_error(const UserError& e, const std::string& file, const std::string& pointer,
                      const std::string& value) {
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(e.file() == file);
  CHECK(e.location() == pointer);
  CHECK(std::string(e.what()).find(value) != std::string::npos);
  if (!pointer.empty()) CHECK(std::string(e.what()).find(pointer) != std::string::npos);
}

/// Parsing `text` must raise a UserError at `pointer` whose text contains `value`.
void expect_user_error(const std::string& text, const std::string& pointer, const std::string& value) {
  CAPTURE(text);
  try {
    parse_hw_spec(text, "bad.json");
    FAIL("no error raised; expected a UserError at '", pointer, "'");
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    check_user_error(e, "bad.json", pointer, value);
  }
}

using tessel::testing::TempDir;

}  // namespace

TEST_CASE("bad hw spec: the base spec is valid") {
  const HwSpec s = parse_hw_spec(kValid, "good.json");
  CHECK(s.memory_levels.size() == 4);
  CHECK(s.interconnect.links.size() == 1);
}

TEST_CASE("bad hw spec: malformed JSON") {
  expect_user_error(edit("\"kind\": \"gpu\",", "\"kind\": \"gpu\""), "", "malformed JSON");
  expect_user_error(edit("\"kind\": \"gpu\"", "\"kind\": \"gpu\", \"kind\": \"cpu\""), "/kind", "duplicate key \"kind\"");
}

TEST_CASE("bad hw spec: unknown keys anywhere") {
  expect_user_error(edit("\"kind\": \"gpu\"", "\"kind\": \"gpu\", \"vendor\": \"nv\""), "/vendor", "\"vendor\"");
  expect_user_error(edit("\"banks\": 32", "\"bank\": 32"), "/memory_levels/1/bank", "\"bank\"");
  expect_user_error(edit("\"shared\": true", "\"shared\": true, \"ways\": 4"), "/memory_levels/2/cache/ways", "\"ways\"");
  expect_user_error(edit("\"clock_ghz\": 1.5", "\"clock_mhz\": 1500"), "/compute/clock_mhz", "\"clock_mhz\"");
  expect_user_error(edit("{\"m\": 16,", "{\"m\": 16, \"batch\": 1,"), "/compute/tensor_core_shapes/f16/0/batch", "\"batch\"");
  expect_user_error(edit("\"smem_per_sm_bytes\": 65536", "\"smem_per_sm_bytes\": 65536, \"warps\": 4"), "/limits/warps", "\"warps\"");
  expect_user_error(edit("\"kind\": \"pcie4\"", "\"kind\": \"pcie4\", \"lanes\": 16"), "/interconnect/links/0/lanes", "\"lanes\"");
  expect_user_error(edit("\"triple\": \"nvptx64-nvidia-cuda\"", "\"triple\": \"nvptx64-nvidia-cuda\", \"ptx\": 8"), "/target/ptx", "\"ptx\"");
}

TEST_CASE("bad hw spec: wrong types") {
  expect_user_error(edit("\"capacity_bytes\": 65536", "\"capacity_bytes\": \"64K\""), "/memory_levels/1/capacity_bytes", "\"64K\"");
  expect_user_error(edit("\"capacity_bytes\": 65536", "\"capacity_bytes\": 65536.5"), "/memory_levels/1/capacity_bytes", "65536.5");
  expect_user_error(edit("\"bandwidth_gbps\": 300", "\"bandwidth_gbps\": \"fast\""), "/memory_levels/3/bandwidth_gbps", "\"fast\"");
  expect_user_error(edit("\"software_managed\": true}", "\"software_managed\": 1}"), "/memory_levels/0/software_managed", "1");
  expect_user_error(edit("{\"backend\": \"cuda\", \"arch\": \"sm_80\", \"triple\": \"nvptx64-nvidia-cuda\", \"gpu_features\": [\"mma_sync\"]}", "\"sm_80\""),
                    "/target", "\"sm_80\"");
  expect_user_error(edit("\"gpu_features\": [\"mma_sync\"]", "\"gpu_features\": \"mma_sync\""), "/target/gpu_features", "\"mma_sync\"");
  expect_user_error(edit("\"devices\": 2", "\"devices\": [2]"), "/interconnect/devices", "[2]");
  expect_user_error(edit("\"name\": \"toy-gpu\"", "\"name\": 7"), "/name", "7");
  expect_user_error(edit("\"clock_ghz\": 1.5", "\"clock_ghz\": 1.5, \"row_start_cycles\": -3"), "/compute/row_start_cycles", "-3");
  expect_user_error(edit("\"clock_ghz\": 1.5", "\"clock_ghz\": 1.5, \"row_start_cycles\": \"few\""), "/compute/row_start_cycles",
                    "\"few\"");
  CHECK(parse_hw_spec(edit("\"clock_ghz\": 1.5", "\"clock_ghz\": 1.5, \"row_start_cycles\": 12"), "ok.json").compute.row_start_cycles == 12);
}

TEST_CASE("bad hw spec: GPU features missing, unknown, repeated, or on a CPU") {
  expect_user_error(edit(", \"gpu_features\": [\"mma_sync\"]", ""), "/target/gpu_features", "mma_sync");
  expect_user_error(edit("[\"mma_sync\"]", "[\"mma_sync\", \"tensor_cores\"]"), "/target/gpu_features/1", "\"tensor_cores\"");
  expect_user_error(edit("[\"mma_sync\"]", "[\"mma_sync\", \"mma_sync\"]"), "/target/gpu_features/1", "\"mma_sync\"");
  expect_user_error(edit("[\"mma_sync\"]", "[\"sm_90a\"]"), "/target/gpu_features/0", "\"sm_90a\"");
  std::string cpu = edit("\"kind\": \"gpu\"", "\"kind\": \"cpu\"");
  cpu = edit("\"backend\": \"cuda\"", "\"backend\": \"llvm\"", cpu);
  cpu = edit("\"smem_per_sm_bytes\": 65536}", "\"smem_per_sm_bytes\": 65536, \"hardware_threads\": 8}", cpu);
  expect_user_error(cpu, "/target/gpu_features", "\"cpu\"");
}

TEST_CASE("bad hw spec: missing required fields") {
  expect_user_error(edit("\"units\": 4, ", ""), "/compute", "\"units\"");
  expect_user_error(edit("\"instances\": 1, \"bandwidth_gbps\": 300,", "\"bandwidth_gbps\": 300,"), "/memory_levels/3", "\"instances\"");
  expect_user_error(edit("\"target\": {", "\"tgt\": {"), "/tgt", "\"tgt\"");  // unknown key first
  expect_user_error(edit("\"max_blocks_per_sm\": 32,", ""), "/limits", "\"max_blocks_per_sm\"");
  // A CPU spec needs hardware_threads.
  std::string cpu = edit("\"kind\": \"gpu\"", "\"kind\": \"cpu\"");
  cpu = edit("\"backend\": \"cuda\"", "\"backend\": \"llvm\"", cpu);
  expect_user_error(cpu, "/limits", "\"hardware_threads\"");
}

TEST_CASE("bad hw spec: impossible values") {
  expect_user_error(edit("\"units\": 4", "\"units\": 0"), "/compute/units", "0");
  expect_user_error(edit("\"clock_ghz\": 1.5", "\"clock_ghz\": -1.5"), "/compute/clock_ghz", "-1.5");
  expect_user_error(edit("\"bandwidth_gbps\": 300", "\"bandwidth_gbps\": 0"), "/memory_levels/3/bandwidth_gbps", "0");
  expect_user_error(edit("\"capacity_bytes\": 4194304", "\"capacity_bytes\": -4194304"), "/memory_levels/2/capacity_bytes", "-4194304");
  expect_user_error(edit("\"instances\": 4, \"bandwidth_gbps\": 4000", "\"instances\": 0, \"bandwidth_gbps\": 4000"),
                    "/memory_levels/1/instances", "0");
  expect_user_error(edit("\"simt_peak_tflops\": {\"f32\": 1.5}", "\"simt_peak_tflops\": {\"f32\": 0}"),
                    "/compute/simt_peak_tflops/f32", "0");
  expect_user_error(edit("\"latency_ns\": 400", "\"latency_ns\": -1"), "/memory_levels/3/latency_ns", "-1");
  expect_user_error(edit("\"latency_ns\": 400", "\"latency_ns\": 400, \"loaded_latency_ns\": -5"), "/memory_levels/3/loaded_latency_ns", "-5");
  expect_user_error(edit("\"smem_per_block_bytes\": 65536", "\"smem_per_block_bytes\": 131072"), "/limits/smem_per_block_bytes", "131072");
  expect_user_error(edit("\"banks\": 32, \"bank_width_bytes\": 4", "\"banks\": 32, \"bank_width_bytes\": 0"), "/memory_levels/1", "banks (32)");
  expect_user_error(edit("\"software_managed\": false, \"cache\"", "\"software_managed\": true, \"cache\""), "/memory_levels/2/cache", "\"l2\"");
  expect_user_error(edit("\"to\": 1", "\"to\": 2"), "/interconnect/links/0/to", "device 2");
  expect_user_error(edit("\"to\": 1", "\"to\": 0"), "/interconnect/links/0", "to itself");
  expect_user_error(edit("\"name\": \"smem\"", "\"name\": \"registers\""), "/memory_levels/1/name", "\"registers\"");
  expect_user_error(edit("\"smem_per_block_bytes\": 65536", "\"max_cluster_blocks\": -8, \"smem_per_block_bytes\": 65536"),
                    "/limits/max_cluster_blocks", "-8");
  expect_user_error(edit("\"smem_per_block_bytes\": 65536", "\"max_cluster_blocks\": \"eight\", \"smem_per_block_bytes\": 65536"),
                    "/limits/max_cluster_blocks", "\"eight\"");
}

TEST_CASE("bad hw spec: capacities must grow outward") {
  // An L2 smaller than one SM's shared memory (a KB-for-MB slip).
  expect_user_error(edit("\"capacity_bytes\": 4194304", "\"capacity_bytes\": 4096"), "/memory_levels/2/capacity_bytes", "4096");
  // DRAM smaller than the chip's register file.
  expect_user_error(edit("\"capacity_bytes\": 1073741824", "\"capacity_bytes\": 1048576"), "/memory_levels/3/capacity_bytes", "1048576");
}

TEST_CASE("bad hw spec: unknown names") {
  expect_user_error(edit("\"scope\": \"sm\"", "\"scope\": \"socket\""), "/memory_levels/0/scope", "\"socket\"");
  expect_user_error(edit("{\"f16\": 12}", "{\"fp8\": 12}"), "/compute/tensor_peak_tflops/fp8", "\"fp8\"");
  expect_user_error(edit("\"tensor_core_shapes\": {\"f16\"", "\"tensor_core_shapes\": {\"half\""), "/compute/tensor_core_shapes/half", "\"half\"");
  expect_user_error(edit("\"kind\": \"gpu\"", "\"kind\": \"tpu\""), "/kind", "\"tpu\"");
  expect_user_error(edit("\"backend\": \"cuda\"", "\"backend\": \"rocm\""), "/target/backend", "\"rocm\"");
  expect_user_error(edit("\"backend\": \"cuda\"", "\"backend\": \"llvm\""), "/target/backend", "\"llvm\"");
}

TEST_CASE("bad hw spec: tensor-core shape with a zero") {
  expect_user_error(edit("\"k\": 16", "\"k\": 0"), "/compute/tensor_core_shapes/f16/0/k", "0");
  expect_user_error(edit("[{\"m\": 16, \"n\": 8, \"k\": 16}]", "[]"), "/compute/tensor_core_shapes/f16", "[]");
}

TEST_CASE("bad hw spec: extends") {
  TempDir dir;
  // A missing base file: the error points at "extends" in the extending file.
  const std::string lone = dir.write("lone.json", R"({"extends": "missing.json", "name": "x"})");
  try {
    load_hw_spec(lone);
    FAIL("expected a UserError");
  } catch (const InternalError& e) {
    FAIL("InternalError: ", e.what());
  } catch (const UserError& e) {
    check_user_error(e, lone, "/extends", "missing.json");
  }
  // A cycle a -> b -> a.
  const std::string a = dir.write("a.json", R"({"extends": "b.json", "name": "a"})");
  dir.write("b.json", R"({"extends": "a.json", "name": "b"})");
  try {
    load_hw_spec(a);
    FAIL("expected a UserError");
  } catch (const InternalError& e) {
    FAIL("InternalError: ", e.what());
  } catch (const UserError& e) {
    CHECK(e.location() == "/extends");
    CHECK(std::string(e.what()).find("a.json -> b.json -> a.json") != std::string::npos);
  }
  // A spec extending itself.
  const std::string self = dir.write("self.json", R"({"extends": "self.json", "name": "s"})");
  CHECK_THROWS_AS(load_hw_spec(self), UserError);
  // "extends" that is not a path.
  expect_user_error(edit("\"name\": \"toy-gpu\"", "\"extends\": 3, \"name\": \"toy-gpu\""), "/extends", "3");
  // An override that breaks the base: the merged spec is validated.
  dir.write("base.json", kValid);
  const std::string bad = dir.write("bad.json", R"({"extends": "base.json", "compute": {"units": 0}})");
  try {
    load_hw_spec(bad);
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    check_user_error(e, bad, "/compute/units", "0");
  }
}

TEST_CASE("bad hw spec: a missing file") {
  try {
    load_hw_spec("/nonexistent/gpu.json");
    FAIL("expected a UserError");
  } catch (const UserError& e) {
    CHECK(e.file() == "/nonexistent/gpu.json");
    CHECK(std::string(e.what()).find("cannot open") != std::string::npos);
  }
}

TEST_CASE("bad hw spec: a family efficiency is a fraction above 0 and at most 1, per family") {
  const std::string shapes = "\"tensor_core_shapes\": {\"f16\": [{\"m\": 16, \"n\": 8, \"k\": 16}]}";
  const HwSpec ok = parse_hw_spec(edit(shapes, shapes + ", \"family_efficiency\": {\"mma\": 0.5, \"vector\": 1}"), "ok.json");
  CHECK(ok.compute.family_efficiency.at("mma") == 0.5);
  CHECK(ok.compute.family_efficiency.at("vector") == 1);
  // Written back and read again unchanged.
  CHECK(parse_hw_spec(write_hw_spec(ok), "again.json").compute.family_efficiency == ok.compute.family_efficiency);
  expect_user_error(edit(shapes, shapes + ", \"family_efficiency\": {\"mma\": 1.5}"), "/compute/family_efficiency/mma", "1.5");
  expect_user_error(edit(shapes, shapes + ", \"family_efficiency\": {\"mma\": 0}"), "/compute/family_efficiency/mma", "0");
  expect_user_error(edit(shapes, shapes + ", \"family_efficiency\": {\"mma\": \"high\"}"), "/compute/family_efficiency/mma", "\"high\"");
  expect_user_error(edit(shapes, shapes + ", \"family_efficiency\": [0.5]"), "/compute/family_efficiency", "[0.5]");
}
