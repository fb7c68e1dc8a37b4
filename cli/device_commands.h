// Compiled execution for the `tessel` subcommands (device_commands.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "cli/args.h"
#include "driver/compile.h"
#include "tilegraph/host_tensor.h"
#include "tilegraph/op_graph.h"

namespace tessel {

/// What run_compiled does after the first run.
struct CompiledRunRequest {
  bool check = false;     // compare every output with the interpreter (compare_compiled)
  /// Interpret the whole graph even above kWholeCheckMaxFlops (sampled_reference.h), where the
  /// check otherwise compares a sample of every output.
  bool check_whole = false;
  uint64_t sample_seed = 0;
  int time_repeats = 0;   // time this many runs after warm-up
  TimingOptions timing;   // how (its warmup and repeats are set from time_repeats)
  /// If set, an exclusive lock (flock) on this file is held while timing, so that processes that
  /// prepare in parallel time one at a time (the op sweep's timing phase).
  std::string time_lock;
  int interpreter_threads = 0;
  std::string report_path;     // if set, write a JSON report there (compile stats, times, checks)
  /// The interpreter's outputs for `inputs`: reused when given and filled, filled when given empty
  /// (so a second run of the same inputs does not interpret again).
  std::vector<HostTensor>* reference = nullptr;
  double* median_s = nullptr;  // set to the median time when timed
};

/// Runs a loaded compilation (compile() through its load stage) on `inputs` and prints a report
/// (compile stats, peak memory, outputs; timings and the check as `request` asks). The check
/// compares with the interpreter on the model as imported (Compilation::reference), so the
/// normalize stage's rewrites are checked too. Sets
/// `*mismatches` to the number of outputs that differ from the interpreter; code that failed the
/// check is not timed. Returns the outputs.
std::vector<HostTensor> run_compiled(const Compilation& compiled, const std::vector<HostTensor>& inputs,
                                     const CompiledRunRequest& request, int* mismatches);

/// UserError naming --device when `device`'s backend cannot run on this machine.
void require_runnable(const std::string& device);

}  // namespace tessel
