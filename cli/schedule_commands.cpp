// `tessel schedule` and `tessel explain`: run a policy (or replay a saved schedule) on a model for
// a hardware spec, save the schedule as JSON, or explain it as text, Graphviz or HTML.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "cost_model/cost_model.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"
#include "policy/explain.h"
#include "policy/policy.h"
#include "policy/schedule_json.h"
#include "cli/args.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/lower.h"

namespace tessel {

namespace {

namespace fs = std::filesystem;

const char* kScheduleHelp =
    "usage: tessel schedule MODEL --hw SPEC [--policy P] [--cost-model M] [-o FILE] [--tune K [--cache DIR]]\n"
    "                       [--sparse-kernels cost|dense|block_sparse] [--no-normalize]\n"
    "  Schedules MODEL for the chip in SPEC (hw_specs/*.json): fused groups, memory level of every\n"
    "  intermediate, tile configs, predicted cost. Writes the schedule as JSON (stdout without -o).\n"
    "  The model is normalized first, as `tessel compile` does (--no-normalize: as imported).\n"
    "  --policy   scheduling policy (default welder)\n"
    "  --tune K   measure the K best tilings of every group on the device SPEC is for and keep the\n"
    "             fastest; each group's candidates, predicted and measured, are in its \"trials\"\n"
    "  --sparse-kernels  a contraction reading a sparse weight gets the kernel the cost model\n"
    "             predicts faster (cost, default), or always dense / block_sparse (docs/sparsity.md)\n";
const char* kExplainHelp =
    "usage: tessel explain MODEL --hw SPEC [--policy P] [--schedule FILE] [--format text|dot|html] [-o FILE]\n"
    "                      [--tune K [--cache DIR]] [--sparse-kernels cost|dense|block_sparse] [--no-normalize]\n"
    "  Explains a schedule (computed by --policy, default welder, or replayed from --schedule):\n"
    "  kernels, tiles per level, where each intermediate lives, predicted time and bound, every edge\n"
    "  not fused and why, totals against running every node on its own.\n"
    "  --format dot writes Graphviz; --format html a self-contained page (needs graphviz's dot).\n"
    "  --tune K   measure the K best tilings of every group on the device and keep the fastest; the\n"
    "             explanation then shows measured next to predicted times\n"
    "  --sparse-kernels  a contraction reading a sparse weight gets the kernel the cost model\n"
    "             predicts faster (cost, default), or always dense / block_sparse (docs/sparsity.md)\n";

/// The model scheduled as --hw, --policy, --cost-model and --schedule say (compile() through the
/// schedule stage, for the backend that generates code for the spec).
struct Scheduled {
  std::unique_ptr<CliPipeline> pipeline;
  Compilation c;
};

Scheduled make_schedule(const Args& args) {
  Scheduled s;
  s.pipeline = pipeline_options(args, "");
  s.pipeline->request.backend.clear();
  s.pipeline->request.model_path = args.one_positional("MODEL");
  s.pipeline->request.last = Stage::schedule;
  s.c = compile(s.pipeline->request);
  report_tuning(*s.pipeline, s.c.schedule);
  return s;
}

void write_output(const Args& args, const std::string& text) {
  if (auto out = args.option("o")) {
    write_file_atomically(*out, text);
    return;
  }
  std::cout << text;
}

// Renders dot text to SVG with Graphviz's `dot`.
std::string render_svg(const std::string& dot) {
  const fs::path in = private_temp_file("tessel_explain_", ".dot");
  {
    std::ofstream f(in);
    f << dot;
    if (!f.flush()) {
      fs::remove(in);
      throw UserError(in.string(), "", "cannot write the graph for Graphviz");
    }
  }
  const std::string cmd = "dot -Tsvg '" + in.string() + "' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string svg;
  if (pipe) {
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) svg.append(buf, n);
    const int status = pclose(pipe);
    if (status != 0) svg.clear();
  }
  fs::remove(in);
  if (svg.empty())
    throw UserError("command line", "--format html",
                    "Graphviz's `dot` could not render the graph (is graphviz installed? scripts/setup installs it)");
  return svg;
}

}  // namespace

int cmd_schedule(const std::vector<std::string>& argv) {
  Args args("schedule", argv, {"help", "no-normalize", "cold-l2"}, {"hw", "policy", "policy-opt", "cost-model", "o", "schedule", "tune", "cache", "time-lock", "sparse-kernels"});
  if (args.flag("help")) { std::cout << kScheduleHelp << policy_options_help(); return 0; }
  const Scheduled s = make_schedule(args);
  const Compilation& c = s.c;
  write_output(args, c.dump(Stage::schedule));
  if (args.option("o"))
    std::cerr << "scheduled '" << c.model->name << "' with " << c.schedule.policy << " in "
              << c.record(Stage::schedule).seconds << " s: " << c.schedule.groups.size() << " kernels, predicted "
              << c.schedule.predicted_latency_s * 1e3
              << " ms; wrote " << *args.option("o") << "\n";
  return 0;
}

int cmd_explain(const std::vector<std::string>& argv) {
  Args args("explain", argv, {"help", "no-normalize", "cold-l2"}, {"hw", "policy", "policy-opt", "cost-model", "o", "schedule", "format", "tune", "cache", "time-lock", "sparse-kernels"});
  if (args.flag("help")) { std::cout << kExplainHelp << policy_options_help(); return 0; }
  const std::string format = args.option_or("format", "text");
  if (format != "text" && format != "dot" && format != "html")
    throw UserError("command line", "--format", cat("unknown format \"", format, "\" (text, dot or html)"));
  const Scheduled s = make_schedule(args);
  const Compilation& c = s.c;
  // The unfused comparison prices each node alone as the family its backend would emit, as the
  // schedule's own groups are priced.
  const CostModel& cost = *s.pipeline->cost;
  const std::unique_ptr<KernelFamilies> families = c.backend->kernel_families();
  const std::unique_ptr<CostModel> priced =
      families ? std::unique_ptr<CostModel>(new FamilyPricedCost(cost, *families)) : nullptr;
  const Explanation totals = explain_totals(c.graph, c.schedule, c.spec, priced ? *priced : cost);
  if (format == "text") write_output(args, explain_text(c.graph, c.schedule, totals));
  else if (format == "dot") write_output(args, explain_dot(c.graph, c.schedule));
  else write_output(args, explain_html(c.graph, c.schedule, totals, render_svg(explain_dot(c.graph, c.schedule))));
  return 0;
}

}  // namespace tessel
