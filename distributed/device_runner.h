// Running one device's SPMD program on a GPU with every tensor resident on it (docs/distributed.md,
// "Runtime"): the program is cut into segments as SpmdRunner cuts it, each segment compiled by the
// pipeline onto the device's DeviceContext with its inputs bound where they live (the given pieces,
// the transfers' results, earlier segments' outputs: nothing is copied between segments), and one
// step enqueues the segments' input copies and kernels on the context's stream, each transfer's NCCL collective on
// its side stream, ordered by events where one reads what the other made -- so a collective overlaps
// whatever kernels do not need it (ring shifts beside the pieces of an overlapped node). No host
// round trip between segments; a whole step can be captured as one CUDA graph and timed.
#pragma once

#include <memory>
#include <vector>

#include "distributed/device_comm.h"
#include "distributed/spmd_runner.h"

namespace tessel {

class DeviceSpmdRunner {
 public:
  /// Compiles every segment with `base` (its backend, spec, policy, options) on `context`.
  DeviceSpmdRunner(SpmdProgram program, const CompileRequest& base, DeviceContext& context, DeviceCommunicator& comm);
  ~DeviceSpmdRunner();

  const SpmdProgram& program() const { return program_; }
  int segments() const { return static_cast<int>(cut_.segments.size()); }

  /// Uploads this device's pieces of the graph inputs (kept resident for later steps).
  void set_inputs(const std::vector<HostTensor>& pieces);
  /// Enqueues one step (set_inputs first).
  void enqueue_step();
  /// This device's pieces of the graph outputs after the steps enqueued so far (synchronizes).
  std::vector<HostTensor> outputs();
  /// The cost model's prediction for one step's kernels: the sum over segments of their schedules'
  /// predicted latency (collectives not included).
  double predicted_kernels_s() const;
  /// GPU time of each of options.repeats steps (DeviceContext::time).
  std::vector<double> time(const TimingOptions& options, bool* graph_used);

 private:
  int64_t bytes_of(TensorId t) const;
  SpmdProgram program_;
  ProgramCut cut_;
  DeviceContext& ctx_;
  DeviceCommunicator& comm_;
  std::vector<std::unique_ptr<Compilation>> compiled_;  // per segment
  std::vector<uint64_t> home_;                          // per local tensor: where its values live (0: nowhere)
  std::vector<int> events_;   // per segment, then per transfer: its end; last: a step's start
  std::vector<int> made_by_;  // per local tensor: the segment (k) or transfer (segments + k) making it, or -1
  std::vector<int64_t> shift_units_;  // per transfer: a shift's compute units (InterconnectLevel::overlap_units), or 0
};

}  // namespace tessel
