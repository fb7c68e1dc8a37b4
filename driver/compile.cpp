// compile(): the pipeline, stage by stage (compile.h).
#include "driver/compile.h"

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <tuple>

#include "cost_model/cost_model.h"
#include "hw_specs/probe.h"
#include "kernels/kernel_cache.h"
#include "policy/check_schedule.h"
#include "policy/schedule_json.h"
#include "tilegraph/error.h"
#include "tilegraph/import/load_model.h"

namespace tessel {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kStageNames[kNumStages] = {"import", "normalize", "schedule", "emit", "load"};

/// Times one stage into `out`'s record.
class StageTimer {
 public:
  StageTimer(Compilation& out, Stage stage) : record_(out.stages[static_cast<size_t>(stage)]), start_(Clock::now()) {}
  ~StageTimer() {
    record_.ran = true;
    record_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  }

 private:
  StageRecord& record_;
  Clock::time_point start_;
};

}  // namespace

std::string_view stage_name(Stage stage) { return kStageNames[static_cast<int>(stage)]; }

Stage stage_named(const std::string& name) {
  std::string known;
  for (int i = 0; i < kNumStages; ++i) {
    if (name == kStageNames[i]) return static_cast<Stage>(i);
    known += cat(i ? ", " : "", kStageNames[i]);
  }
  throw UserError("compile request", "stage", cat("unknown stage \"", name, "\" (known: ", known, ")"));
}

std::unique_ptr<KernelFamilies> families_for(const HwSpec& spec) {
  for (const auto& b : backends())
    if (b->supports(spec)) return b->kernel_families();
  return nullptr;
}

std::unique_ptr<Backend> backend_for(const HwSpec& spec) {
  std::string known;
  for (auto& b : backends()) {
    if (b->supports(spec)) return std::move(b);
    known += cat(known.empty() ? "" : ", ", b->name());
  }
  throw UserError(spec.name, "/kind", cat("no backend generates code for a '", spec.kind, "' spec (backends: ", known, ")"));
}

HwSpec machine_spec(const Backend& backend, const CompileOptions& options) {
  ProbeOptions quick;
  quick.quick = true;
  const bool cuda = backend.name() == "cuda";
  // A quick probe's measured numbers vary from run to run, and with them the schedule and every
  // kernel's cache key: the first probe of a machine is kept in the kernel cache's directory,
  // keyed by what identifies the machine (probe_identity), and later runs reuse it.
  const std::string identity = options.use_cache ? probe_identity(cuda ? "cuda" : "cpu") : "";
  const KernelCache kept(options.cache_dir, "spec");
  const std::string key = identity.empty() ? "" : KernelCache::key({"quick probe", std::to_string(kProbeRevision), identity});
  if (!key.empty())
    if (std::optional<std::string> text = kept.load(key)) {
      try {
        return parse_hw_spec(*text, kept.path(key));
      } catch (const UserError&) {
        // (a spec this build cannot read: probed again and replaced below)
      }
    }
  HwSpec spec = cuda ? probe_cuda_gpu(0, quick) : probe_host_cpu(quick);
  if (!key.empty()) kept.store(key, write_hw_spec(spec));
  return spec;
}

Schedule schedule_graph(const OpGraph& graph, const HwSpec& spec, const Policy& policy, const CostModel& cost,
                        const KernelFamilies* families, SparseKernels sparse) {
  return schedule_with_families(policy, PolicyContext{graph, spec, cost, nullptr, sparse}, families);
}

Schedule replay_schedule(const OpGraph& graph, const HwSpec& spec, const CostModel& cost, Schedule s,
                         const KernelFamilies* families, const std::string& source) {
  // A recorded family must be one of the backend's: named with its JSON pointer first.
  if (families) {
    for (size_t i = 0; i < s.groups.size(); ++i) {
      // The base class's check: the name alone.
      if (const auto why = families->KernelFamilies::check(graph, s.groups[i].group, spec))
        throw UserError(source, cat("/groups/", i, "/kernel/family"), *why);
    }
  }
  // A replayed schedule may be hand-edited or made for another spec: check it against this spec
  // (and each recorded family against the backend, check_schedule rule 9), then price it again
  // with this cost model (the saved predictions may be stale).
  const std::vector<std::string> problems = check_schedule(graph, spec, s, families);
  if (!problems.empty())
    throw UserError(source, "", cat("the schedule is not legal for '", spec.name, "': ", problems.front(),
                                    problems.size() > 1 ? cat(" (and ", problems.size() - 1, " more)") : std::string()));
  // Groups saved without a family get the backend's choice, as a new schedule would.
  if (families) record_missing_kernel_families(graph, spec, *families, s);
  s.cost_model = std::string(cost.name());
  s.predicted_latency_s = 0;
  for (ScheduleGroup& group : s.groups) {
    group.predicted = cost.estimate(graph, group.group, spec);
    s.predicted_latency_s += group.predicted.latency_s;
  }
  return s;
}

Compilation compile(const CompileRequest& request) {
  const int sources = !request.model_path.empty() + (request.model != nullptr) + (request.graph != nullptr);
  if (sources != 1)
    throw UserError("compile request", "", cat("give exactly one of a model file, a model and a graph (", sources, " given)"));
  Compilation out;
  out.stages.resize(kNumStages);
  for (int i = 0; i < kNumStages; ++i) out.stages[i].stage = static_cast<Stage>(i);
  const auto done = [&](Stage stage) { return request.last == stage; };

  // import
  const ModelDef* model = request.model;
  if (!request.model_path.empty()) {
    const StageTimer timer(out, Stage::import);
    out.model = std::make_shared<const ModelDef>(load_model(request.model_path));
    model = out.model.get();
  }
  if (done(Stage::import)) return out;

  // The backend (the normalize stage asks it which layout it prefers).
  if (request.backend.empty() && !request.spec) {
    if (request.last > Stage::normalize) throw UserError("compile request", "backend", "name a backend or a hardware spec");
  } else {
    out.backend = request.backend.empty() ? backend_for(*request.spec) : find_backend(request.backend);
  }

  // The spec: the one given, else this machine's, probed here when the pipeline goes on to
  // schedule -- the normalize stage asks the backend for its layout limits on it, so that a run
  // that probes rewrites the model as one given the probe's spec does.
  std::optional<HwSpec> spec;
  if (request.spec) spec = *request.spec;
  else if (out.backend && request.last > Stage::normalize) spec = machine_spec(*out.backend, request.options);

  // normalize
  if (request.graph) {
    out.graph = *request.graph;
    out.reference = out.graph;
  } else {
    const StageTimer timer(out, Stage::normalize);
    out.reference = lower_model(*model, request.lower);
    NormalizeOptions options;
    options.channels_last = out.backend && out.backend->prefers_channels_last();
    if (options.channels_last) options.channel_alignment_bytes = out.backend->conv_channel_alignment_bytes();
    if (out.backend) options.contraction_alignment_bytes = out.backend->contraction_alignment_bytes();
    if (out.backend) options.split_full_reductions = out.backend->splits_full_reductions();
    if (out.backend) options.conv_weights_hwio = out.backend->conv_weights_hwio();
    if (out.backend && spec && !options.channels_last)
      std::tie(options.channels_last_rows_below, options.pointwise_rows_below) = out.backend->nchw_row_limits(*spec);
    if (request.normalize) options = *request.normalize;
    const ModelDef normalized = normalize_model(*model, out.reference, options, &out.normalized);
    out.graph = out.normalized.changed() ? lower_model(normalized, request.lower) : out.reference;
  }
  if (done(Stage::normalize)) return out;

  // schedule
  if (request.spec) {
    if (!out.backend->supports(*request.spec))
      throw UserError(request.spec->name, "/kind", cat("a '", request.spec->kind, "' spec; the ", out.backend->name(),
                                                         " backend needs another kind"));
    out.spec = *request.spec;
  } else {
    out.spec = *spec;
  }
  {
    const StageTimer timer(out, Stage::schedule);
    std::unique_ptr<CostModel> default_cost;
    const CostModel* cost = request.cost;
    if (!cost) cost = (default_cost = std::move(cost_models().front())).get();
    const std::unique_ptr<KernelFamilies> families =
        request.use_kernel_families ? out.backend->kernel_families() : nullptr;
    if (request.schedule && !request.schedule_json.empty())
      throw UserError("compile request", "schedule", "give a schedule or its JSON, not both");
    if (request.schedule || !request.schedule_json.empty()) {
      Schedule saved = request.schedule ? *request.schedule
                                        : schedule_from_json(request.schedule_json, request.schedule_source, out.graph);
      out.schedule = replay_schedule(out.graph, out.spec, *cost, std::move(saved), families.get(), request.schedule_source);
    } else {
      std::unique_ptr<Policy> default_policy;
      const Policy* policy = request.policy;
      if (!policy) policy = (default_policy = std::move(policies().front())).get();
      out.schedule = schedule_graph(out.graph, out.spec, *policy, *cost, families.get(), request.sparse_kernels);
    }
  }
  if (done(Stage::schedule)) return out;

  // emit
  if (!request.emit_format.empty()) {
    if (request.emit_dir.empty()) throw UserError("compile request", "emit_dir", "emitting code needs a directory");
    const StageTimer timer(out, Stage::emit);
    out.emitted = out.backend->emit(out.graph, out.schedule, out.spec, request.emit_format, request.emit_dir);
  }
  if (done(Stage::emit)) return out;

  // load
  if (auto why = out.backend->unavailable())
    throw UserError("compile request", "backend", cat("'", out.backend->name(), "' cannot run here: ", *why));
  const StageTimer timer(out, Stage::load);
  out.executable = out.backend->compile(out.graph, out.schedule, out.spec, request.options);
  return out;
}

std::string Compilation::dump(Stage stage) const {
  const StageRecord& r = record(stage);
  const bool have = r.ran || (stage == Stage::normalize && graph.num_nodes() > 0);
  if (!have) throw UserError("compile request", "dump", cat("the ", stage_name(stage), " stage did not run"));
  std::ostringstream os;
  switch (stage) {
    case Stage::import:
      os << "model '" << model->name << "': " << model->inputs.size() << " inputs, " << model->outputs.size()
         << " outputs, " << model->weights.size() << " weights\n";
      for (const OpDef& op : model->ops) {
        os << op.op_type << " '" << op.name << "' (";
        for (size_t i = 0; i < op.inputs.size(); ++i) os << (i ? ", " : "") << op.inputs[i];
        os << ") -> (";
        for (size_t i = 0; i < op.outputs.size(); ++i) os << (i ? ", " : "") << op.outputs[i];
        os << ")\n";
      }
      break;
    case Stage::normalize: os << graph.print(); break;
    case Stage::schedule: os << schedule_to_json(schedule, graph); break;
    case Stage::emit:
      for (const std::string& f : emitted) {
        std::ifstream in(f);
        os << "// ---- " << f << "\n" << in.rdbuf() << "\n";
      }
      break;
    case Stage::load: {
      const CompileStats& cs = executable->compile_stats();
      os << cs.kernels << " kernels; codegen " << cs.codegen_s << " s, compile " << cs.compile_s << " s, "
         << cs.cache_hits << " from the cache; " << executable->launches_per_run() << " launches per run; peak memory "
         << executable->peak_memory_bytes() << " bytes\n";
      for (size_t i = 0; i < cs.kernel_templates.size(); ++i) os << "  kernel " << i << ": " << cs.kernel_templates[i] << "\n";
      break;
    }
  }
  return os.str();
}

}  // namespace tessel
