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
#include "tilegraph/cli/args.h"
#include "tilegraph/cli/cli_common.h"
#include "tilegraph/cli/commands.h"
#include "tilegraph/error.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/lower.h"

namespace tessel {

namespace {

namespace fs = std::filesystem;

const char* kScheduleHelp =
    "usage: tessel schedule MODEL --hw SPEC [--policy welder|roller|z3] [--cost-model M] [-o FILE]\n"
    "  Schedules MODEL for the chip in SPEC (hw_specs/*.json): fused groups, memory level of every\n"
    "  intermediate, tile configs, predicted cost. Writes the schedule as JSON (stdout without -o).\n";
const char* kExplainHelp =
    "usage: tessel explain MODEL --hw SPEC [--policy P] [--schedule FILE] [--format text|dot|html] [-o FILE]\n"
    "  Explains a schedule (computed by --policy, default welder, or replayed from --schedule):\n"
    "  kernels, tiles per level, where each intermediate lives, predicted time and bound, every edge\n"
    "  not fused and why, totals against running every node on its own.\n"
    "  --format dot writes Graphviz; --format html a self-contained page (needs graphviz's dot).\n";

struct Scheduled {
  ModelDef model;
  OpGraph graph;
  HwSpec spec;
  std::unique_ptr<CostModel> cost;
  Schedule schedule;
  double seconds = 0;
};

Scheduled make_schedule(const Args& args) {
  Scheduled s;
  s.model = load_model(args.one_positional("MODEL"));
  s.graph = lower_model(s.model);
  auto hw = args.option("hw");
  if (!hw) throw UserError("command line", "", "--hw SPEC is required (a hardware spec, e.g. hw_specs/nvidia-h100-sxm.json)");
  s.spec = load_hw_spec(*hw);
  s.cost = args.option("cost-model") ? find_cost_model(*args.option("cost-model")) : std::move(cost_models().front());
  const auto start = Clock::now();
  s.schedule = schedule_for(args, s.graph, s.spec, *s.cost);
  s.seconds = seconds_since(start);
  return s;
}

void write_output(const Args& args, const std::string& text) {
  if (auto out = args.option("o")) {
    std::ofstream f(*out);
    if (!f) throw UserError(*out, "", "cannot write the output file");
    f << text;
    return;
  }
  std::cout << text;
}

// Renders dot text to SVG with Graphviz's `dot`.
std::string render_svg(const std::string& dot) {
  const fs::path dir = fs::temp_directory_path();
  const fs::path in = dir / cat("tessel_explain_", ::getpid(), ".dot");
  std::ofstream(in) << dot;
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
  Args args("schedule", argv, {"help"}, {"hw", "policy", "cost-model", "o", "schedule"});
  if (args.flag("help")) { std::cout << kScheduleHelp; return 0; }
  Scheduled s = make_schedule(args);
  write_output(args, schedule_to_json(s.schedule, s.graph));
  if (args.option("o"))
    std::cerr << "scheduled '" << s.model.name << "' with " << s.schedule.policy << " in " << s.seconds << " s: "
              << s.schedule.groups.size() << " kernels, predicted " << s.schedule.predicted_latency_s * 1e3
              << " ms; wrote " << *args.option("o") << "\n";
  return 0;
}

int cmd_explain(const std::vector<std::string>& argv) {
  Args args("explain", argv, {"help"}, {"hw", "policy", "cost-model", "o", "schedule", "format"});
  if (args.flag("help")) { std::cout << kExplainHelp; return 0; }
  const std::string format = args.option_or("format", "text");
  if (format != "text" && format != "dot" && format != "html")
    throw UserError("command line", "--format", cat("unknown format \"", format, "\" (text, dot or html)"));
  Scheduled s = make_schedule(args);
  // The unfused comparison prices each node alone as the family its backend would emit, as the
  // schedule's own groups are priced.
  const std::unique_ptr<KernelFamilies> families = families_for(s.spec);
  const std::unique_ptr<CostModel> priced =
      families ? std::unique_ptr<CostModel>(new FamilyPricedCost(*s.cost, *families)) : nullptr;
  const Explanation totals = explain_totals(s.graph, s.schedule, s.spec, priced ? *priced : *s.cost);
  if (format == "text") write_output(args, explain_text(s.graph, s.schedule, totals));
  else if (format == "dot") write_output(args, explain_dot(s.graph, s.schedule));
  else write_output(args, explain_html(s.graph, s.schedule, totals, render_svg(explain_dot(s.graph, s.schedule))));
  return 0;
}

}  // namespace tessel
