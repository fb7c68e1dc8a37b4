// The compiler pipeline as one call (DESIGN.md, "Pipeline"; docs/architecture.md):
//
//   import -> normalize -> schedule -> emit -> load
//
// compile() runs the stages a CompileRequest asks for, from a model file, an imported model or a
// lowered graph, and returns every stage's result and how long it took. The CLI (`tessel
// compile`, `run`, `schedule`, `explain`), the test helpers, the differential test and the
// benchmark programs all run the pipeline through it, so there is one place where the order of
// the stages, the hardware spec, the kernel families and the replay of saved schedules are decided.
//
// What each stage does:
//   import     the model file (.json or .onnx) becomes a ModelDef (tilegraph/import/)
//   normalize  BatchNormalization folded into convolutions and, for a backend that prefers it,
//              NCHW convolutions run channels-last (tilegraph/normalize.h); the model is lowered
//              to tensor-expression nodes, with the shapes of its inputs bound and shape
//              computations folded (tilegraph/lower.h). The model as imported is lowered too: the
//              reference every check compares with
//   schedule   a policy fuses and tiles the graph for the spec, pricing every candidate as the
//              kernel family the backend would emit (policy/kernel_families.h); or a saved
//              schedule is replayed: checked against the spec, its families checked, re-priced
//   emit       the backend writes each group's code in a format into a directory (optional)
//   load       the backend compiles and loads every kernel (needs the device)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"
#include "policy/kernel_families.h"
#include "policy/policy.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"
#include "tilegraph/normalize.h"
#include "tilegraph/op_graph.h"

namespace tessel {

enum class Stage : uint8_t { import, normalize, schedule, emit, load };
inline constexpr int kNumStages = 5;
std::string_view stage_name(Stage stage);
/// The stage named `name` ("import", ...); UserError listing the names otherwise.
Stage stage_named(const std::string& name);

struct CompileRequest {
  // Where the pipeline starts -- exactly one of these: a model file (.json, .onnx), an imported
  // model (import is skipped), or a lowered graph (import and normalize are skipped). Pointers are
  // non-owning and must outlive the call.
  std::string model_path;
  const ModelDef* model = nullptr;
  const OpGraph* graph = nullptr;
  /// normalize: concrete shapes for inputs with unknown dimensions.
  LowerOptions lower;
  /// normalize: the rewrites (nullopt: BatchNormalization folding, and channels-last when the
  /// backend prefers it).
  std::optional<NormalizeOptions> normalize;

  /// The backend: "cpu" or "cuda" (backends()); empty: the backend that generates code for `spec`.
  std::string backend = "cpu";
  /// The chip to schedule for; nullopt: the quick probe of the machine the backend runs on (the
  /// host CPU, or CUDA device 0), as `tessel hw probe --quick` writes it.
  std::optional<HwSpec> spec;

  /// schedule: the policy (nullptr: the first of policies(), welder) and the cost model (nullptr:
  /// the first of cost_models(), analytic). Non-owning.
  const Policy* policy = nullptr;
  const CostModel* cost = nullptr;
  /// Price every candidate as, and record, the kernel family the backend would emit (what the
  /// CLI always does). false: the policy's schedule as is -- the backend records its families
  /// when it emits (tests that compare policies' raw choices).
  bool use_kernel_families = true;
  /// A contraction reading a sparse weight: the cheaper kernel, or always dense / block-sparse
  /// where one can be emitted (policy/sparse_kinds.h).
  SparseKernels sparse_kernels = SparseKernels::cost;
  /// A saved schedule to replay instead of running the policy: checked against the spec
  /// (check_schedule), every recorded family checked to be the backend's, groups without one given
  /// the backend's choice, every group priced again with the cost model. `schedule_source` names
  /// it in errors (its file).
  std::optional<Schedule> schedule;
  /// The same as schedule JSON text (schedule_json.h), read against the normalized graph.
  std::string schedule_json;
  std::string schedule_source = "schedule";

  /// emit: write every kernel in `emit_format` into `emit_dir` (Backend::emit_formats()); skipped
  /// when emit_format is empty.
  std::string emit_format;
  std::string emit_dir;

  /// The last stage to run (load needs the device: Backend::unavailable()).
  Stage last = Stage::load;
  CompileOptions options;
};

struct StageRecord {
  Stage stage = Stage::import;
  bool ran = false;
  double seconds = 0;
};

/// What compile() produced: each field is filled once its stage ran.
struct Compilation {
  std::shared_ptr<const ModelDef> model;  // import (null when the request began from a model or graph)
  OpGraph graph;                          // normalize (a copy of the request's graph when given)
  /// The model as imported, lowered without the normalize rewrites: what compiled outputs are
  /// checked against (the same graph as `graph` when nothing was rewritten or a graph was given).
  OpGraph reference;
  NormalizeReport normalized;             // what the normalize stage rewrote
  std::unique_ptr<Backend> backend;
  HwSpec spec;
  Schedule schedule;                      // schedule
  std::vector<std::string> emitted;       // emit: the files written
  std::unique_ptr<Executable> executable; // load
  std::vector<StageRecord> stages;        // one per Stage, in pipeline order

  const StageRecord& record(Stage stage) const { return stages[static_cast<size_t>(stage)]; }
  /// A stage's result as text: import, the model's operators; normalize, the IR; schedule, the
  /// schedule JSON; emit, the files written and their contents; load, the compile statistics.
  /// UserError when the stage did not run.
  std::string dump(Stage stage) const;
};

/// Runs the pipeline as `request` asks. Bad input (a model, spec or schedule that is not legal, a
/// backend that cannot run here when load is asked for) is a UserError.
Compilation compile(const CompileRequest& request);

// ---- The pieces compile() is made of, for callers that run one stage ----------------------

/// The kernel families of the backend that generates code for `spec`; nullptr when none has any.
std::unique_ptr<KernelFamilies> families_for(const HwSpec& spec);

/// The backend that generates code for `spec`; UserError when none does.
std::unique_ptr<Backend> backend_for(const HwSpec& spec);

/// The quick probe of the machine `backend` runs on (the host CPU, or CUDA device 0): measured
/// once per machine identity (probe_identity) and kept in the kernel cache's directory as a `.spec`
/// entry, which later calls read back (a probe's numbers vary from run to run; the schedule and
/// the kernels' cache keys should not).
/// With `options.use_cache` false nothing is kept or read; `options.cache_dir` is the kernel
/// cache's directory (empty: $TESSEL_CACHE_DIR, else ~/.cache/tessel).
HwSpec machine_spec(const Backend& backend, const CompileOptions& options = {});

/// `graph` scheduled for `spec` by `policy`, every candidate priced by `cost` as the family
/// `families` would emit (the policy alone when `families` is null).
Schedule schedule_graph(const OpGraph& graph, const HwSpec& spec, const Policy& policy, const CostModel& cost,
                        const KernelFamilies* families, SparseKernels sparse = SparseKernels::cost);

/// A saved schedule made ready to run on `spec`: checked (check_schedule), its families checked
/// against `families` and recorded where missing, re-priced with `cost`. UserErrors name `source`
/// and the JSON pointer of the offending group.
Schedule replay_schedule(const OpGraph& graph, const HwSpec& spec, const CostModel& cost, Schedule schedule,
                         const KernelFamilies* families, const std::string& source);

}  // namespace tessel
