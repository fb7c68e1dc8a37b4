// Backends: turn a Schedule into code that runs (DESIGN.md, "Code generation"). Each backend --
// CUDA C++ through NVRTC for GPUs (kernels/cuda/), LLVM IR through ORC for CPUs (kernels/cpu/)
// -- implements Backend; `backends()` (registry.cpp) lists them all. The CLI (`tessel run
// --device`, `tessel compile --emit`) and the benchmark suites only talk to this interface.
//
// Contract of every Executable: run() returns exactly what the reference interpreter
// (tilegraph/interpreter.h) returns for the same inputs, within compare.h's tolerances; outputs
// are poisoned (NaN, or a byte pattern for integers) before each run so a kernel that skips an
// element cannot pass; every failure of the device or the compiler is a UserError (bad input,
// missing device) or an InternalError (a bug), never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "policy/kernel_families.h"
#include "policy/schedule.h"
#include "tilegraph/host_tensor.h"

namespace tessel {

struct CompileOptions {
  /// Directory of the on-disk compile cache; empty = $TESSEL_CACHE_DIR, else ~/.cache/tessel.
  std::string cache_dir;
  bool use_cache = true;
  /// Where generated code the toolchain rejected is saved (with a repro command); empty = the
  /// current directory's `tessel-rejected/`.
  std::string reject_dir;
  /// CPU backend: worker threads (0 = the spec's cores, capped at the host's hardware threads).
  int threads = 0;
  /// CPU backend: LLVM's optimization level, 0-3 (the module pipeline and the JIT's code
  /// generator). 3 is what users run; lower levels compile several times faster, for tests that
  /// check the emitted IR's semantics over many graphs (tests/differential).
  int opt_level = 3;
};

struct CompileStats {
  int kernels = 0;            // one per group of the schedule
  double codegen_s = 0;       // emitting source / IR
  double compile_s = 0;       // NVRTC or LLVM, including cache lookups
  int cache_hits = 0;         // kernels loaded from the cache instead of compiled
  /// Per kernel, the code template its group was emitted with (CUDA: "generic", "vector", "row",
  /// "mma", "wgmma", "flash", ...); empty where a backend does not name them.
  std::vector<std::string> kernel_templates;
};

/// How Executable::time measures: the one timing method of every suite (BENCHMARKS.md, "How GPU
/// time is measured"; experiments/timing/README.md), the same as the PyTorch side's.
struct TimingOptions {
  int warmup = 10;   // untimed runs first (module load, first-touch, clocks)
  int repeats = 30;  // timed runs; the caller reports their median
  /// GPU: capture one run as a CUDA graph and time each replay between device events (the
  /// default: GPU time, no host launch cost in the window). false: the launches one by one
  /// between the events, host launch cost included. CPU backends ignore it.
  bool graph = true;
  /// Overwrite a buffer of twice the spec's last-level cache (HwSpec::last_level_cache_bytes)
  /// before every timed run, outside the timed window; false (the default) times with the cache
  /// warm from the previous run.
  bool cold_cache = false;
};

class Executable {
 public:
  virtual ~Executable() = default;
  /// Runs the model on `inputs` (one per graph input, in order) and returns the graph outputs.
  virtual std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) = 0;
  /// Uploads `inputs` once, runs `options.warmup` times, then returns the time of each of
  /// `options.repeats` runs in seconds (GPU: device time between events; CPU: wall time; inputs
  /// and weights already resident), measured as `options` says.
  virtual std::vector<double> time(const std::vector<HostTensor>& inputs, const TimingOptions& options) = 0;
  virtual const CompileStats& compile_stats() const = 0;
  /// Peak bytes of the buffer plan (arena + inputs + weights + outputs).
  virtual int64_t peak_memory_bytes() const = 0;
  /// Kernel launches (or parallel regions) per run.
  virtual int launches_per_run() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;         // "cpu", "cuda": the --device value
  virtual std::string_view description() const = 0;
  /// True if this backend generates code for `spec` (by spec.kind).
  virtual bool supports(const HwSpec& spec) const = 0;
  /// Why compiled code cannot run on this machine now (no GPU, no driver), or nullopt.
  virtual std::optional<std::string> unavailable() const = 0;
  /// Formats `emit` writes ("cuda", "llvm", "obj", ...).
  virtual std::vector<std::string> emit_formats() const = 0;
  /// Writes the generated code of every group of `schedule` in `format` into `dir`, one file per
  /// kernel plus `manifest.json` (kernel names, groups, launch shapes, buffer plan); returns the
  /// files written. Needs no device.
  virtual std::vector<std::string> emit(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                                        const std::string& format, const std::string& dir) const = 0;
  /// Whether its fast convolutions are channels-last: the normalize stage then runs 2-D NCHW
  /// convolutions, and the ops between them, in NHWC (tilegraph/normalize.h).
  virtual bool prefers_channels_last() const { return false; }
  /// The multiple of bytes its fast convolutions need the input channels of one pixel in (0: none);
  /// the normalize stage zero-pads channels that are not (tilegraph/normalize.h).
  virtual int conv_channel_alignment_bytes() const { return 0; }
  /// The kernel families this backend emits (policy/kernel_families.h), for the policy to choose
  /// among and record in the schedule; nullptr when it has none to choose among. emit() and
  /// compile() emit each group's recorded family; a group that records none gets this backend's
  /// choice recorded first.
  virtual std::unique_ptr<KernelFamilies> kernel_families() const { return nullptr; }
  /// Generates, compiles and loads every kernel of `schedule`. Needs the device (unavailable()).
  virtual std::unique_ptr<Executable> compile(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                                              const CompileOptions& options) const = 0;
};

/// Every built-in backend.
std::vector<std::unique_ptr<Backend>> backends();

/// The backend named `name`; UserError listing the names otherwise.
std::unique_ptr<Backend> find_backend(std::string_view name);

}  // namespace tessel
