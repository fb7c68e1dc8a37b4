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

#include "policy/policy.h"
#include "tilegraph/cli/args.h"
#include "tilegraph/host_tensor.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"
#include "tilegraph/op_graph.h"

namespace tessel {

class KernelFamilies;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start);
/// "12.3 ms" since `start`.
std::string milliseconds(Clock::time_point start);
/// 1234567 -> "1.23 M<unit>".
std::string human(double v, const char* unit);

/// Inputs, outputs, weights and totals of a lowered model; with `node_table`, one line per node.
void print_summary(std::ostream& os, const ModelDef& model, const OpGraph& g, bool node_table);

/// --shape NAME=D0xD1,...
std::map<std::string, std::vector<int64_t>> parse_shapes(const Args& args);
/// input_N.pb or input_N.npy (or output_N...) in `dir`.
std::optional<std::string> find_tensor_file(const std::string& dir, const std::string& stem);
/// input_0..input_{n-1} of `model` from `dir` (UserError naming a missing one).
std::vector<HostTensor> read_inputs(const std::string& dir, const ModelDef& model);
/// One line: type, min, max, mean, l2, NaN count, first values.
std::string describe(const HostTensor& t);
/// --inputs DIR, else seeded random inputs (--seed; normal(0,1) floats, 0..3 integers).
std::vector<HostTensor> make_inputs(const Args& args, const ModelDef& model, const OpGraph& g);
/// --shape and the shapes of given inputs.
LowerOptions lower_options(const Args& args, const std::vector<HostTensor>* inputs, const ModelDef& model);

/// The built-in policy or cost model of that name; UserError listing the known ones otherwise.
std::unique_ptr<Policy> find_policy(const std::string& name);
std::unique_ptr<CostModel> find_cost_model(const std::string& name);

/// The schedule of `graph` for `spec`: replayed from --schedule FILE (checked against the spec and
/// re-priced with `cost`), else made by --policy (default: the first of policies()).
Schedule schedule_for(const Args& args, const OpGraph& graph, const HwSpec& spec, const CostModel& cost);

/// The kernel families of the backend that generates code for `spec` (nullptr: none has any).
std::unique_ptr<KernelFamilies> families_for(const HwSpec& spec);

}  // namespace tessel
