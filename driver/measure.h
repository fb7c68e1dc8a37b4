// BackendMeasurer: the Measurer (policy/policy.h) that times a candidate group on a real device
// through a backend -- what `--tune K` and experiments/cost_model_fidelity/ measure with.
//
// To measure one group it:
//   1. cuts the group's nodes out of the graph (extract_subgraph: tensors entering the group are
//      inputs, weights stay weights, tensors leaving it are outputs) and makes a one-group
//      schedule of it with the candidate's tiles, edge levels and kernel family;
//   2. compiles it through compile() (the schedule replayed: checked against the spec, its family
//      checked against the backend's) and runs it on seeded random inputs;
//   3. checks every output against the reference interpreter (fp64 accumulation; above
//      `whole_check_max_flops` on a sample of each output, sampled_reference.h), computed once
//      per group structure and reused for its other candidates;
//   4. times it as every suite does (TimingOptions: CUDA-graph replays between events, L2 warm
//      unless told) and returns the median.
// A candidate the backend refuses, or whose output does not match, is not timed: measure()
// returns nullopt and last_failure() says why.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "policy/policy.h"
#include "tilegraph/host_tensor.h"

namespace tessel {

struct MeasureOptions {
  CompileOptions compile;
  /// warmup and repeats per candidate; the median is the measurement.
  TimingOptions timing{.warmup = 5, .repeats = 20};
  bool check = true;
  /// Groups above this many FLOPs are checked on a sample of each output (interpret_sample).
  double whole_check_max_flops = 2e9;
  uint64_t seed = 1;
  /// A file held locked (flock) while a candidate is timed, so that processes sharing one device
  /// time one thing at a time; empty: none.
  std::string time_lock;
  /// Show a running count of measured candidates on stderr when it is a terminal.
  bool progress = false;
};

class BackendMeasurer : public Measurer {
 public:
  BackendMeasurer(std::string backend, MeasureOptions options);
  ~BackendMeasurer() override;

  std::optional<double> measure(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) override;
  std::string last_failure() const override { return failure_; }

  /// The threads a measured CPU kernel runs with (MeasureOptions::compile.threads; 0: the spec's
  /// units): a rank of a mesh times its candidates with its share of the host, as it runs them.
  void set_threads(int threads) { options_.compile.threads = threads; }
  /// "threads=N" when the threads are set (0, the spec's units, adds nothing: the chip's hash
  /// already keys them), and "cold" when timing with a cold cache (--cold-l2).
  std::string context() const override;

  /// Candidates measured (timed or failed) and the seconds spent on them, compile and check included.
  int candidates() const { return candidates_; }
  double seconds_spent() const { return spent_s_; }

 private:
  struct Reference;
  std::optional<double> measure_one(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec);
  std::string backend_;
  MeasureOptions options_;
  std::string failure_;
  int candidates_ = 0;
  double spent_s_ = 0;
  /// Per group structure (the subgraph's printed text): its inputs and the interpreter's outputs.
  std::map<std::string, std::unique_ptr<Reference>> references_;
};

}  // namespace tessel
