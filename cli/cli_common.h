// Helpers shared by the `tessel` subcommands: timing and number formatting, the model summary,
// and how inputs are read or generated (--inputs, --seed, --shape).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "driver/compile.h"
#include "driver/measure.h"
#include "policy/measure_cache.h"
#include "policy/policy.h"
#include "tilegraph/host_tensor.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"
#include "tilegraph/op_graph.h"

namespace tessel {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start);
/// "12.3 ms" since `start`.
std::string milliseconds(Clock::time_point start);
/// 1234567 -> "1.23 M<unit>".
std::string human(double v, const char* unit);

/// A new file or directory of this user only (mode 0600 / 0700), created under the temporary
/// directory with an unpredictable name (mkstemps / mkdtemp: never an existing path, never through
/// a symbolic link). UserError when it cannot be created.
std::string private_temp_file(const std::string& prefix, const std::string& suffix);
std::string private_temp_dir(const std::string& prefix);

/// Inputs, outputs, weights and totals of a lowered model; with `node_table`, one line per node.
void print_summary(std::ostream& os, const ModelDef& model, const OpGraph& g, bool node_table);

/// --shape NAME=D0xD1,...
std::map<std::string, std::vector<int64_t>> parse_shapes(const Args& args);
/// input_N.pb or input_N.npy (or output_N...) in `dir`.
std::optional<std::string> find_tensor_file(const std::string& dir, const std::string& stem);
/// input_0..input_{n-1} of `model` from `dir` (UserError naming a missing one).
std::vector<HostTensor> read_inputs(const std::string& dir, const ModelDef& model);
/// ONNX graph inputs with initializers (ModelDef::defaulted_inputs) that --inputs overrides, as
/// onnxruntime lets a caller: a file `<name>.pb` or `<name>.npy` in `dir` (names of letters,
/// digits, '_', '-' and '.', not starting with '.') replaces the initializer in `model`, same
/// dtype (the model is then compiled with that value as its constant). Returns the names
/// overridden; the others keep their initializers.
std::vector<std::string> override_defaulted_inputs(const std::string& dir, ModelDef& model);
/// One line: type, min, max, mean, l2, NaN count, first values.
std::string describe(const HostTensor& t);
/// --inputs DIR, else seeded random inputs (--seed; normal(0,1) floats, 0..3 integers).
std::vector<HostTensor> make_inputs(const Args& args, const ModelDef& model, const OpGraph& g);
/// --outputs DIR: writes output_<i> (.pb when --inputs holds .pb files, else .npy). --expect DIR:
/// compares each output with output_<i> there (`names` name them in a mismatch). Returns 1 when
/// an output differs, else 0.
int write_and_expect_outputs(const Args& args, const std::vector<HostTensor>& outputs, const std::vector<std::string>& names);
/// The random input make_inputs gives a tensor of `type` without --inputs (normal(0, 1) floats;
/// integers and booleans small and non-negative, so they are valid indices).
HostTensor random_input(const TensorType& type, uint64_t seed);
/// One random_input per input of `g`, as make_inputs gives them for --seed `seed`.
std::vector<HostTensor> random_inputs(const OpGraph& g, uint64_t seed);
/// --shape and the shapes of given inputs.
LowerOptions lower_options(const Args& args, const std::vector<HostTensor>* inputs, const ModelDef& model);

/// The built-in policy or cost model of that name; UserError listing the known ones otherwise.
/// The hardware spec `--hw` names: a spec file's path, or the name of a shipped spec (e.g.
/// "nvidia-h100-sxm"), looked up as NAME.json in $TESSEL_HW_SPECS, then beside the binary
/// (../share/tessel/hw_specs in a bundle), then in the source tree it was built from. A name that
/// is none of these is a UserError listing the shipped names (the nearest first).
std::string resolve_hw_spec(const std::string& name_or_path);
/// The folders shipped specs are looked up in, in order: $TESSEL_HW_SPECS, the install tree's
/// share/tessel/hw_specs beside the running program, the source tree's hw_specs/.
std::vector<std::string> hw_spec_dirs();
HwSpec load_cli_hw_spec(const std::string& name_or_path);
std::unique_ptr<Policy> find_policy(const std::string& name);
/// The help lines of --policy-opt, with every registered policy's options and their defaults
/// (read from the registry, Policy::options).
std::string policy_options_help();
std::unique_ptr<CostModel> find_cost_model(const std::string& name);

/// A compile() request made from the command line's pipeline options, with the policy and cost
/// model it points at (owned here). Not copyable or movable: the request points into it.
struct CliPipeline {
  std::unique_ptr<Policy> policy;
  std::unique_ptr<CostModel> cost;
  /// --tune K: what times the candidates, and where their times are kept (null without --tune).
  std::unique_ptr<BackendMeasurer> measurer;
  std::unique_ptr<MeasureCache> measure_cache;
  CompileRequest request;
  CliPipeline() = default;
  CliPipeline(const CliPipeline&) = delete;
  CliPipeline& operator=(const CliPipeline&) = delete;
};

/// The pipeline options: the backend `device` (empty: the one that generates code for --hw),
/// --hw SPEC (checked to suit the backend; without it, the probe of this machine), --policy
/// (default: the first of policies()), --cost-model, --schedule FILE (replayed: checked against the
/// spec, re-priced), --cache, --no-cache, --threads, --no-normalize (no BatchNormalization folding,
/// no channels-last rewrite), --tune K (measured top-k on the device: the policy measures the K best
/// candidates of every group and keeps the fastest; times kept in --cache's measurements.json, or
/// default_measure_cache_dir(); --time-lock and --cold-l2 apply to its timings). The model, the stages and the shapes are
/// the caller's to set.
std::unique_ptr<CliPipeline> pipeline_options(const Args& args, const std::string& device);

/// After --tune: on stderr, how many candidates were measured, in how long, and what tuning gained
/// over the cost model's own choices (the groups whose top-1 was measured). Nothing without --tune.
void report_tuning(const CliPipeline& pipeline, const Schedule& schedule);

/// `tessel explain`'s output for a scheduled compilation in `format` (text, dot or html; the
/// unfused baseline priced as the backend's families by `cost`), with each kernel's measured time
/// beside its prediction when `measured_s` has them (Executable::profile). schedule_commands.cpp.
std::string explain_compilation(const Compilation& c, const CostModel& cost, const std::string& format,
                                const std::vector<double>& measured_s = {});

}  // namespace tessel
