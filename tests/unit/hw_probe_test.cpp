// `tessel hw probe` (hw_specs/probe.h): the host CPU probe returns a spec that validates and
// matches what the OS reports; the CUDA probe either returns a valid spec or, without a GPU, says
// "no CUDA device" (the test then prints [SKIP] and passes). No timing is asserted beyond
// "positive".
#include <doctest/doctest.h>

#include <thread>

#include "hw_specs/hw_spec.h"
#include "hw_specs/probe.h"
#include "tilegraph/error.h"

using namespace tessel;

namespace {

void check_valid(const HwSpec& spec) {
  const std::string text = write_hw_spec(spec);
  CAPTURE(text);
  HwSpec again;
  REQUIRE_NOTHROW(again = parse_hw_spec(text, "probed.json"));
  again.file = spec.file;
  CHECK(again == spec);
  for (const MemoryLevel& level : spec.memory_levels) {
    CAPTURE(level.name);
    CHECK(level.bandwidth_gbps > 0);
    CHECK(level.capacity_bytes > 0);
    CHECK(level.source.size() > 0);
  }
}

}  // namespace

TEST_CASE("probe_host_cpu (quick) returns a valid spec of this machine") {
  ProbeOptions options;
  options.quick = true;
  const HwSpec spec = probe_host_cpu(options);
  check_valid(spec);
  CHECK(spec.kind == "cpu");
  CHECK(spec.target.backend == "llvm");
  CHECK(spec.limits.hardware_threads == static_cast<int64_t>(std::thread::hardware_concurrency()));
  CHECK(spec.compute.units >= 1);
  CHECK(spec.compute.units <= spec.limits.hardware_threads);
  CHECK(spec.compute.clock_ghz > 0);
  // The row-start benchmark's cycles: 0 only where a noisy machine gave no positive difference.
  CHECK(spec.compute.row_start_cycles >= 0);
  CHECK(spec.compute.row_start_cycles < 1000);
  CHECK(spec.compute.source.find("row start = ") != std::string::npos);
  CHECK(parse_hw_spec(write_hw_spec(spec), "probed.json").compute.row_start_cycles == spec.compute.row_start_cycles);
  MESSAGE("row start: ", spec.compute.row_start_cycles, " cycles");
  CHECK(spec.peak_flops(DType::f32, false) > 0);
  CHECK(spec.memory_levels.front().name == "registers");
  CHECK(spec.memory_levels.back().name == "dram");
  CHECK(spec.compute.source.find("measured by tessel hw probe") != std::string::npos);
  MESSAGE("host: ", spec.compute.units, " cores, f32 ", spec.compute.simt_peak_tflops.at(DType::f32) * 1e3,
          " GFLOP/s, DRAM ", spec.level("dram").bandwidth_gbps, " GB/s");
}

TEST_CASE("probe_cuda_gpu returns a valid spec, or [SKIP] without a GPU") {
  ProbeOptions options;
  options.quick = true;
  HwSpec spec;
  try {
    spec = probe_cuda_gpu(0, options);
  } catch (const UnsupportedError& e) {
    MESSAGE("[SKIP] no CUDA device (", std::string(e.what()), ")");
    return;
  }
  check_valid(spec);
  CHECK(spec.kind == "gpu");
  CHECK(spec.target.backend == "cuda");
  CHECK(spec.target.arch.rfind("sm_", 0) == 0);
  // The probe maps the compute capability to features (Tessel's GPU machines have sm_80 and on).
  CHECK(spec.target.has_gpu_feature("mma_sync"));
  CHECK(spec.target.has_gpu_feature("ldmatrix"));
  CHECK(spec.compute.units > 0);
  CHECK(spec.limits.smem_per_block_bytes > 0);
  CHECK(spec.level("l2").capacity_bytes > 0);
}
