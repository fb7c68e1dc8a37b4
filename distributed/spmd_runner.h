// Running one device's SPMD program (tilegraph/spmd.h) with a Communicator (docs/distributed.md,
// "Runtime").
//
// The local graph is cut into segments at its transfers: a segment is every node computable from
// what is ready (inputs, weights, earlier segments' results, transfers done), compiled once as a
// graph of its own by the pipeline (driver/compile.h) or run by the reference interpreter; between
// segments the transfers run as collectives. Every device builds the same sequence, so the
// collectives meet.
#pragma once

#include <functional>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "driver/compile.h"
#include "tilegraph/spmd.h"

namespace tessel {

/// Runs one segment's graph on its inputs (in the graph's input order).
using SegmentRun = std::function<std::vector<HostTensor>(const std::vector<HostTensor>&)>;
/// Makes the runner of one segment (compiles it, or wraps the interpreter).
using SegmentCompiler = std::function<SegmentRun(const OpGraph& segment)>;

/// The reference interpreter as a segment compiler.
SegmentCompiler interpreter_segments();

/// Saved schedules of segments (`run --mesh --schedules DIR / --save-schedules DIR`): a folder of
/// `segment-<key>.json` files, one per distinct segment graph, keyed by segment_key. Replayed as
/// `--schedule` replays one (checked against the spec, re-priced); saved after each compile.
struct SegmentSchedules {
  std::string load_dir;  // replay the schedule saved for each segment (a missing one is a UserError)
  std::string save_dir;  // write each compiled segment's schedule
};
/// 16 hex digits of the SHA-256 of the segment graph's printed IR: ranks running the same program
/// piece share a key, a different plan or model gives other keys.
std::string segment_key(const OpGraph& segment);
/// The pipeline as a segment compiler: `base` (backend, spec, policy, options) with each segment's
/// graph, compiled and loaded. With `one_at_a_time`, compiles hold it while they run (ranks as
/// threads sharing a tuning policy: its measurer and cache are used by one compile at a time, and
/// no two ranks measure at once -- a rank done compiling may run its segments up to its first
/// collective meanwhile).
SegmentCompiler compiled_segments(const CompileRequest& base, std::mutex* one_at_a_time = nullptr,
                                  SegmentSchedules schedules = {});

/// A program cut into segments at its transfers, in the order every device runs them.
struct ProgramCut {
  struct Segment {
    OpGraph graph;                          // extract_subgraph of the local graph
    std::vector<TensorId> inputs, outputs;  // tensors of the local graph, in the segment graph's order
  };
  struct Step {
    int segment = -1;   // a segment, or
    int transfer = -1;  // a transfer of the program
  };
  std::vector<Segment> segments;
  std::vector<Step> steps;
};
ProgramCut cut_program(const SpmdProgram& program);

class SpmdRunner {
 public:
  /// Cuts `program` into segments and compiles each with `compile`.
  SpmdRunner(SpmdProgram program, SegmentCompiler compile);

  const SpmdProgram& program() const { return program_; }
  int segments() const { return static_cast<int>(cut_.segments.size()); }

  /// Runs on this device's pieces of the graph inputs (program().local's first inputs); returns
  /// this device's pieces of the graph outputs. `comm` is this device's communicator.
  std::vector<HostTensor> run(const std::vector<HostTensor>& pieces, Communicator& comm) const;

 private:
  SpmdProgram program_;
  ProgramCut cut_;
  std::vector<SegmentRun> runs_;  // per segment
};

/// Carries out one transfer on this device's `source` piece; returns its `result` piece.
HostTensor run_transfer(const Transfer& transfer, const HostTensor& source, const Mesh& mesh, Communicator& comm);

/// Steps timed by run_sharded after its first: `repeats` more steps, each between two meetings
/// of every device; `step_s` receives each step's wall time on its slowest device (the same on
/// every device).
struct ShardedTiming {
  int repeats = 0;
  std::vector<double> step_s;
};

/// The whole graph on a mesh: every device partitions, runs, and the outputs are assembled (an
/// all-gather over the mesh where an output is not replicated), so every device returns the whole
/// outputs. `inputs` are the whole graph inputs (each device takes its piece). With `timing`, the
/// compiled program then runs timing->repeats more steps, timed.
std::vector<HostTensor> run_sharded(const OpGraph& graph, const ShardPlan& plan, const std::vector<HostTensor>& inputs,
                                    Communicator& comm, const SegmentCompiler& compile, ShardedTiming* timing = nullptr);

}  // namespace tessel
