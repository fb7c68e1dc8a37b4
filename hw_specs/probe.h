// `tessel hw probe`: writes a hardware spec for the machine Tessel runs on, reading what the OS or
// the CUDA driver reports (core and SM counts, cache sizes, limits, ISA) and measuring what they
// do not (bandwidth of each memory level, peak arithmetic throughput) with short microbenchmarks.
// Measured fields carry `source: "measured by tessel hw probe on <date>"`.
//
// This is the only part of Tessel that looks at the live machine; the compiler itself reads specs
// (hw_spec.h) and never probes.
#pragma once

#include <functional>
#include <string>

#include "hw_specs/hw_spec.h"

namespace tessel {

struct ProbeOptions {
  /// Smaller buffers and fewer repeats: well under a second, less precise.
  bool quick = false;
  /// Called with a short line before each measurement (e.g. to print progress); may be empty.
  std::function<void(const std::string&)> progress;
};

/// Probes the host CPU: cores and hardware threads, caches from /sys, ISA features from
/// /proc/cpuinfo, and measured DRAM and cache bandwidth and fp32 FMA throughput (all hardware
/// threads at once; about 1-2 s, well under a second with `quick`). Linux only.
HwSpec probe_host_cpu(const ProbeOptions& options);

/// Probes CUDA device `device`: attributes from the driver API (opened with dlopen, so no GPU or
/// driver is needed to build), and measured DRAM, L2 and shared-memory bandwidth, fp32 FMA and
/// fp16 tensor-core (mma.sync m16n8k16) throughput, with kernels compiled at run time by NVRTC.
/// Throws UnsupportedError "no CUDA device" when there is no driver or no such device.
HwSpec probe_cuda_gpu(int device, const ProbeOptions& options);

/// "measured by tessel hw probe on YYYY-MM-DD" (today, UTC).
std::string probe_source_note();

/// What identifies the machine a probe of `device` ("cpu", or "cuda" for CUDA device 0) measures,
/// read without measuring anything: for the CPU its model name, ISA flags, hardware threads and
/// cores, caches and memory size; for the GPU its name, compute capability, SM count, memory and
/// the driver's version. Two probes of one identity differ only in their measured numbers. Empty
/// when there is no such device. (The driver keeps a probe per identity: machine_spec.)
std::string probe_identity(const std::string& device);

/// The probes' revision, part of a kept probe's key: bump it when what a probe measures or
/// writes changes, so that probes kept by an older build are measured again.
inline constexpr int kProbeRevision = 1;

}  // namespace tessel
