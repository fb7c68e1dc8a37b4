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
#include <functional>
#include <map>
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

struct TimingOptions;
class DeviceContext;

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
  /// Device backends: run on this context's device and queue (DeviceContext), so that several
  /// executables and collectives chain on one device in order; null: device 0 and a queue of the
  /// executable's own. Non-owning; must outlive the executable.
  DeviceContext* context = nullptr;
};

struct CompileStats {
  int kernels = 0;            // one per group of the schedule
  double codegen_s = 0;       // emitting source / IR (CPU: summed over the parallel workers)
  double compile_s = 0;       // NVRTC or LLVM, including cache lookups (wall time; kernels compile in parallel)
  int cache_hits = 0;         // kernels loaded from the cache instead of compiled
  /// Per kernel, the code template its group was emitted with (CUDA: "generic", "vector", "row",
  /// "mma", "wgmma", "flash", ...; CPU: the recorded family, "microkernel" or "loops").
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
  /// Per group of the schedule, in schedule order, the median over `repeats` runs of the time its
  /// kernel took (seconds; 0 for a group with nothing to run): GPU: every launch of a run between
  /// its own pair of events, queued behind a spin so the host's launch cost stays out; CPU: each
  /// group's parallel region by the wall clock. Inputs resident, caches warm. Empty when a backend
  /// cannot time its kernels one by one. `tessel explain --profile` shows it beside the prediction.
  virtual std::vector<double> profile(const std::vector<HostTensor>& inputs, int repeats) {
    (void)inputs, (void)repeats;
    return {};
  }
  /// Runs on the caller's host memory without converting through HostTensor: `inputs` and
  /// `outputs` (one per graph input and output, in order) hold each tensor in its machine layout
  /// (packed_tensor.h: row-major, each dtype in its own storage). A buffer aligned to
  /// `in_place_alignment()` is read or written in place (no copy); any other is copied through
  /// the executable's own. Inputs are only read. False (nothing done) for a backend whose buffers
  /// are not host memory.
  virtual bool run_in_place(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) {
    (void)inputs, (void)outputs;
    return false;
  }
  /// The alignment (bytes) a run_in_place buffer needs to be used without a copy.
  virtual int64_t in_place_alignment() const { return 0; }
  virtual const CompileStats& compile_stats() const = 0;
  /// Peak bytes of the buffer plan (arena + inputs + weights + outputs).
  virtual int64_t peak_memory_bytes() const = 0;
  /// Kernel launches (or parallel regions) per run.
  virtual int launches_per_run() const = 0;

  /// Device-resident running, for runtimes that chain executables on one device (distributed/):
  /// the device addresses of the graph's inputs and outputs, in graph order. nullptr for a backend
  /// whose buffers are host memory.
  /// The alignment (bytes) of the device addresses bind_inputs and run_on_queue take: the widest
  /// vector access and TMA's base-address rule.
  static constexpr int64_t kDeviceAlignment = 16;
  struct DeviceIo {
    std::vector<uint64_t> inputs, outputs;
  };
  virtual const DeviceIo* device_io() const { return nullptr; }
  /// Reads the graph's inputs at these device addresses (graph order; each holding the input's
  /// packed values, kDeviceAlignment-aligned) from now on instead of its own buffers: device_io() then names
  /// them and nothing is copied in. Only where device_io() is not null; the addresses must outlive
  /// the runs that read them.
  virtual void bind_inputs(const std::vector<uint64_t>& addresses);
  /// Enqueues one run on the executable's queue (CompileOptions::context's), reading the inputs and
  /// writing the outputs where device_io() says: no copies, no poisoning, no synchronization.
  /// Only where device_io() is not null.
  virtual void enqueue();
  /// One run queued on the caller's queue (CUDA: a CUstream of the device's primary context; 0 is
  /// the legacy default stream), reading the inputs at `inputs` and writing the outputs at
  /// `outputs`: device addresses in graph order, each holding the tensor's packed values,
  /// kDeviceAlignment-aligned, the caller's, and alive until the run is done. Nothing is copied in; an output that
  /// no kernel writes (a graph input or weight, or a tensor listed twice) is copied on the queue.
  /// It returns once the run is queued. Runs are ordered among themselves whatever queue they are
  /// on (they share the executable's intermediates); a run queued while the queue is being
  /// captured into a graph is captured with no such ordering. A kernel's error (a gather index out
  /// of range) is raised by wait_queued(), or by a later run_on_queue once the run is done; not
  /// for captured runs. A captured run holds the executable's buffers and kernels: the
  /// executable must outlive the graph, whose replays are not ordered against its other runs.
  /// Only where device_io() is not null.
  virtual void run_on_queue(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, void* queue);
  /// Waits until the runs run_on_queue queued are done; raises the error a kernel of the last one
  /// reported.
  virtual void wait_queued();
};

/// One device's memory and its ordered queue of work, for runtimes that chain executables and
/// collectives on a device without host round trips (distributed/). Copies, executables compiled
/// with this context (CompileOptions::context) and collectives enqueued on stream() run in order.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  virtual int device() const = 0;
  /// The queue (CUDA: a CUstream).
  virtual void* stream() const = 0;
  /// Makes this device current on the calling thread.
  virtual void make_current() = 0;
  /// Device memory, freed with the context.
  virtual uint64_t alloc(int64_t bytes) = 0;
  /// Synchronous copies between the host and the device, in the tensor's packed form.
  virtual void upload(uint64_t dst, const HostTensor& tensor) = 0;
  virtual HostTensor download(uint64_t src, const TensorType& type) = 0;
  /// An enqueued device-to-device copy.
  virtual void copy(uint64_t dst, uint64_t src, int64_t bytes) = 0;
  /// A second queue of the device (CUDA: a stream of its own, made on first use) for work that may
  /// overlap the first's -- collectives beside kernels -- and events ordering the two: `record`
  /// marks the point a queue has reached (0: stream(), 1: side_stream()), `wait` makes a queue
  /// wait for the last point recorded in the event. Both work while a step is captured as a graph
  /// (the side queue joins the capture at its first wait and must be waited for before it ends).
  virtual void* side_stream() = 0;
  virtual int make_event() = 0;
  virtual void record(int event, int queue) = 0;
  virtual void wait(int event, int queue) = 0;
  virtual void synchronize() = 0;
  /// Times `step` (which enqueues one whole step) as Executable::time does: `options.warmup`
  /// untimed steps, then each of `options.repeats` timed between device events, captured once as a
  /// graph and replayed when options.graph (falling back to direct launches, with `graph_used`
  /// false, when something in the step cannot be captured).
  virtual std::vector<double> time(const std::function<void()>& step, const TimingOptions& options, bool* graph_used) = 0;
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
  /// Per operand dtype, the multiple of bytes the rows of a MatMul's or Gemm's operands must start
  /// at for its fast contraction family; the normalize stage re-lays out constant operands and
  /// zero-pads K where they do not (tilegraph/normalize.h, rewrite 3). Empty: no such need.
  virtual std::map<DType, int> contraction_alignment_bytes() const { return {}; }
  /// Whether a reduction of a whole tensor to one value should be split into one of its rows and
  /// one of the rows' values (tilegraph/normalize.h, rewrite 2b): where a kernel reduces one
  /// output in one block, and rows in parallel.
  virtual bool splits_full_reductions() const { return false; }
  /// Whether every convolution that runs in NHWC should read constant weights as HWIO
  /// [kH, kW, C/g, M] (output channels innermost) rather than OHWI: where its kernels vectorize
  /// along the output channels (tilegraph/normalize.h, rewrite 4). Grouped ones get HWIO anyway
  /// where the backend pads channels.
  virtual bool conv_weights_hwio() const { return false; }
  /// For a backend that does not prefer channels-last: which NCHW convolutions run in NHWC, and
  /// which 1x1 ones as batched MatMuls, by the length of their output rows for `spec`
  /// (NormalizeOptions::channels_last_rows_below, pointwise_rows_below); 0 and 0: none.
  virtual std::pair<int64_t, int64_t> nchw_row_limits(const HwSpec&) const { return {0, 0}; }
  /// The kernel families this backend emits (policy/kernel_families.h), for the policy to choose
  /// among and record in the schedule; nullptr when it has none to choose among. emit() and
  /// compile() emit each group's recorded family; a group that records none gets this backend's
  /// choice recorded first.
  virtual std::unique_ptr<KernelFamilies> kernel_families() const { return nullptr; }
  /// Generates, compiles and loads every kernel of `schedule`. Needs the device (unavailable()).
  virtual std::unique_ptr<Executable> compile(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                                              const CompileOptions& options) const = 0;
  /// Device `device` of this backend as a DeviceContext; nullptr for a backend without device
  /// memory (the CPU). UserError when there is no such device.
  virtual std::unique_ptr<DeviceContext> device_context(int device) const { return nullptr; }
  /// How many devices of this backend this machine has (0 when it cannot run).
  virtual int device_count() const { return unavailable() ? 0 : 1; }
};

/// Every built-in backend.
std::vector<std::unique_ptr<Backend>> backends();

/// The backend named `name`; UserError listing the names otherwise.
std::unique_ptr<Backend> find_backend(std::string_view name);

}  // namespace tessel
