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
    "usage: tessel schedule MODEL [--hw SPEC | --device cpu|cuda] [--policy P] [--cost-model M] [-o FILE]\n"
    "                       [--tune K [--cache DIR]] [--sparse-kernels cost|dense|block_sparse] [--no-normalize]\n"
    "  Schedules MODEL for the chip in SPEC (a file or a shipped spec's name, hw_specs/*.json): fused\n"
    "  groups, memory level of every intermediate, tile configs, predicted cost. Writes the schedule\n"
    "  as JSON (stdout without -o). Without --hw: this machine's --device (default cpu), probed.\n"
    "  The model is normalized first, as `tessel compile` does (--no-normalize: as imported).\n"
    "  --policy   scheduling policy (default welder)\n"
    "  --tune K   measure the K best tilings of every group on the device SPEC is for and keep the\n"
    "             fastest; each group's candidates, predicted and measured, are in its \"trials\"\n"
    "  --sparse-kernels  a contraction reading a sparse weight gets the kernel the cost model\n"
    "             predicts faster (cost, default), or always dense / block_sparse (the sparse kernel of\n"
    "             the weight's pattern, block or N:M; docs/sparsity.md)\n";
const char* kExplainHelp =
    "usage: tessel explain MODEL [--hw SPEC | --device cpu|cuda] [--policy P] [--schedule FILE]\n"
    "                      [--format text|dot|html] [-o FILE] [--tune K [--cache DIR]]\n"
    "                      [--sparse-kernels cost|dense|block_sparse] [--no-normalize]\n"
    "  Explains a schedule (computed by --policy, default welder, or replayed from --schedule):\n"
    "  kernels, tiles per level, where each intermediate lives, predicted time and bound, every edge\n"
    "  not fused and why, totals against running every node on its own. Without --hw: this\n"
    "  machine's --device (default cpu), probed.\n"
    "  --format dot writes Graphviz; --format html a self-contained page (needs graphviz's dot).\n"
    "  --tune K   measure the K best tilings of every group on the device and keep the fastest; the\n"
    "             explanation then shows measured next to predicted times\n"
    "  --profile N  compile and run the schedule on the device (random inputs) and show each kernel's\n"
    "             measured time, the median of N runs timed kernel by kernel, beside its prediction\n"
    "  --compare P1,P2,...  the same model scheduled by each policy, side by side (kernels, predicted\n"
    "             time, device-memory traffic; with --profile, measured time)\n"
    "  --sparse-kernels  a contraction reading a sparse weight gets the kernel the cost model\n"
    "             predicts faster (cost, default), or always dense / block_sparse (docs/sparsity.md)\n";

/// The model scheduled as --hw, --policy, --cost-model and --schedule say (compile() through the
/// schedule stage, for the backend that generates code for the spec).
struct Scheduled {
  std::unique_ptr<CliPipeline> pipeline;
  Compilation c;
};

Scheduled make_schedule(const Args& args, Stage last = Stage::schedule) {
  Scheduled s;
  // Without --hw, this machine as --device names it (default cpu), probed as `tessel run` does.
  const bool probed = !args.option("hw");
  const std::string device = probed ? args.option_or("device", "cpu") : "";
  if (!probed && args.option("device"))
    throw UserError("command line", "--device", "takes the machine to probe when there is no --hw (the spec names its own)");
  s.pipeline = pipeline_options(args, device);
  if (!probed) s.pipeline->request.backend.clear();
  s.pipeline->request.model_path = args.one_positional("MODEL");
  s.pipeline->request.last = last;
  if (last == Stage::load) {
    const std::string backend = probed ? device : std::string(backend_for(*s.pipeline->request.spec)->name());
    if (auto why = find_backend(backend)->unavailable())
      throw UserError("command line", "--profile", cat("running needs the device: '", backend, "' cannot run here: ", *why));
  }
  s.c = compile(s.pipeline->request);
  if (probed) std::cerr << "tessel: no --hw: scheduled for this machine, probed as '" << s.c.spec.name << "'\n";
  report_tuning(*s.pipeline, s.c.schedule);
  return s;
}

/// Each kernel's measured time (Executable::profile) on random inputs, the median of `repeats`.
std::vector<double> profile_kernels(const Compilation& c, int repeats) {
  std::vector<double> measured = c.executable->profile(random_inputs(c.graph, 0), repeats);
  if (measured.empty()) throw UserError("command line", "--profile", cat("the ", c.backend->name(), " backend does not time kernels one by one"));
  return measured;
}

void write_output(const Args& args, const std::string& text) {
  if (auto out = args.option("o")) {
    write_file_atomically(*out, text);
    return;
  }
  std::cout << text;
}

// Renders dot text to SVG with Graphviz's `dot`; empty (with a warning) when it cannot.
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
  // Without Graphviz the page is written without its picture (the page says so), and so is stderr.
  if (svg.empty())
    std::cerr << "tessel: warning: Graphviz's `dot` could not render the graph (is graphviz installed? scripts/setup "
                 "installs it); the page has no graph picture\n";
  return svg;
}

}  // namespace

int cmd_schedule(const std::vector<std::string>& argv) {
  Args args("schedule", argv, {"help", "no-normalize", "cold-l2"}, {"hw", "device", "policy", "policy-opt", "cost-model", "o", "schedule", "tune", "cache", "time-lock", "sparse-kernels"});
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
  Args args("explain", argv, {"help", "no-normalize", "cold-l2"},
            {"hw", "device", "policy", "policy-opt", "cost-model", "o", "schedule", "format", "tune", "cache", "time-lock",
             "sparse-kernels", "profile", "compare"});
  if (args.flag("help")) { std::cout << kExplainHelp << policy_options_help(); return 0; }
  const std::string format = args.option_or("format", "text");
  if (format != "text" && format != "dot" && format != "html")
    throw UserError("command line", "--format", cat("unknown format \"", format, "\" (text, dot or html)"));
  const int repeats = args.option("profile") ? static_cast<int>(args.int_option("profile", 1, 1, 10000)) : 0;
  if (auto list = args.option("compare")) {
    if (format != "text") throw UserError("command line", "--compare", "is a text table (no --format)");
    if (args.option("policy") || args.option("schedule"))
      throw UserError("command line", "--compare", "takes the policies itself (no --policy or --schedule)");
    std::vector<std::string> names;
    for (size_t start = 0; start <= list->size();) {
      const size_t end = std::min(list->find(',', start), list->size());
      names.push_back(list->substr(start, end - start));
      find_policy(names.back());  // every name checked before any scheduling
      start = end + 1;
    }
    std::string out = cat(repeats ? "policy      kernels   predicted    profiled   device traffic\n"
                                  : "policy      kernels   predicted   device traffic\n");
    for (const std::string& name : names) {
      std::vector<std::string> one = argv;
      for (size_t i = 0; i < one.size(); ++i)
        if (one[i] == "--compare" || one[i].rfind("--compare=", 0) == 0) {
          one.erase(one.begin() + i, one.begin() + i + (one[i] == "--compare" ? 2 : 1));
          break;
        }
      one.insert(one.end(), {"--policy", name});
      const Args per("explain", one, {"help", "no-normalize", "cold-l2"},
                     {"hw", "device", "policy", "policy-opt", "cost-model", "o", "schedule", "format", "tune", "cache",
                      "time-lock", "sparse-kernels", "profile"});
      const Scheduled s = make_schedule(per, repeats ? Stage::load : Stage::schedule);
      double device_bytes = 0;
      const Explanation totals = explain_totals(s.c.graph, s.c.schedule, s.c.spec, *s.pipeline->cost);
      device_bytes = totals.device_bytes;
      char line[256];
      if (repeats) {
        double sum = 0;
        for (double m : profile_kernels(s.c, repeats)) sum += m;
        std::snprintf(line, sizeof(line), "%-10s %8zu %9.4f ms %8.4f ms %10.2f MB\n", name.c_str(), s.c.schedule.groups.size(),
                      s.c.schedule.predicted_latency_s * 1e3, sum * 1e3, device_bytes / 1e6);
      } else {
        std::snprintf(line, sizeof(line), "%-10s %8zu %9.4f ms %10.2f MB\n", name.c_str(), s.c.schedule.groups.size(),
                      s.c.schedule.predicted_latency_s * 1e3, device_bytes / 1e6);
      }
      out += line;
    }
    write_output(args, out);
    return 0;
  }
  const Scheduled s = make_schedule(args, repeats ? Stage::load : Stage::schedule);
  const Compilation& c = s.c;
  write_output(args, explain_compilation(c, *s.pipeline->cost, format, repeats ? profile_kernels(c, repeats) : std::vector<double>{}));
  return 0;
}

std::string explain_compilation(const Compilation& c, const CostModel& cost, const std::string& format,
                                const std::vector<double>& measured_s) {
  if (format != "text" && format != "dot" && format != "html")
    throw UserError("explain", "format", cat("unknown format \"", format, "\" (text, dot or html)"));
  // The unfused comparison prices each node alone as the family its backend would emit, as the
  // schedule's own groups are priced.
  const std::unique_ptr<KernelFamilies> families = c.backend->kernel_families();
  const std::unique_ptr<CostModel> priced =
      families ? std::unique_ptr<CostModel>(new FamilyPricedCost(cost, *families)) : nullptr;
  Explanation totals = explain_totals(c.graph, c.schedule, c.spec, priced ? *priced : cost);
  totals.measured_s = measured_s;
  if (format == "text") return explain_text(c.graph, c.schedule, totals);
  if (format == "dot") return explain_dot(c.graph, c.schedule);
  return explain_html(c.graph, c.schedule, totals, render_svg(explain_dot(c.graph, c.schedule)));
}

}  // namespace tessel
