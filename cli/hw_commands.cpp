// `tessel hw`: hardware specs from the command line.
//
//   tessel hw show FILE [--json]                          validate a spec and print it as a table (or resolved JSON)
//   tessel hw probe [-o FILE] [--device cpu|cuda[:N]] [--quick]
//                                                         measure this machine and write a spec
//   tessel hw calibrate MODEL... --hw SPEC [--tune K] [-o FILE]
//                                                         fit the spec's family efficiencies from
//                                                         kernels measured on this machine
//
// Probing prints progress on stderr only when stderr is a terminal; the spec goes to FILE, or to
// stdout without -o, so `tessel hw probe > my.json` works.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "driver/compile.h"
#include "driver/measure.h"
#include "hw_specs/hw_spec.h"
#include "hw_specs/probe.h"
#include "policy/measure_cache.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"

namespace tessel {
namespace {

const char* kHwUsage =
    "usage: tessel hw show FILE [--json]\n"
    "       tessel hw probe [-o FILE] [--device cpu|cuda|cuda:N] [--quick]\n"
    "  show    validate a hardware spec (resolving \"extends\") and print it as a table; --json:\n"
    "          as one resolved JSON spec (no \"extends\"), for scripts\n"
    "  probe   measure this machine and write a hardware spec (JSON) to FILE or stdout\n"
    "          --device  cpu (default) or cuda / cuda:N (GPU N; needs the CUDA driver, not nvcc)\n"
    "          --quick   smaller buffers and fewer repeats: faster, less precise\n"
    "       tessel hw calibrate MODEL... --hw SPEC [--tune K] [-o FILE] [--cache DIR] [--time-lock FILE]\n"
    "  calibrate  schedule each MODEL for SPEC with its family efficiencies at 1 (the roofline), tune\n"
    "          each group (--tune K, default 10: its K best kernels compiled, checked and timed on\n"
    "          this machine's device), and fit each kernel family's compute.family_efficiency as\n"
    "          1 / geomean(measured / predicted) over its timed kernels (at most 1; a family with\n"
    "          fewer than 3 keeps SPEC's value). Writes SPEC with the fitted values to FILE (stdout\n"
    "          without -o) and, with -o, the fit's residuals per family to FILE.residuals.json\n";

int hw_show(const std::vector<std::string>& argv) {
  Args args("hw show", argv, {"help", "h", "json"}, {});
  if (args.flag("help") || args.flag("h")) {
    std::cout << kHwUsage;
    return 0;
  }
  const HwSpec spec = load_cli_hw_spec(args.one_positional("FILE"));
  if (args.flag("json")) std::cout << write_hw_spec(spec) << "\n";
  else std::cout << format_hw_spec_table(spec);
  return 0;
}

int hw_probe(const std::vector<std::string>& argv) {
  Args args("hw probe", argv, {"help", "h", "quick"}, {"o", "output", "device"});
  if (args.flag("help") || args.flag("h")) {
    std::cout << kHwUsage;
    return 0;
  }
  if (!args.positional().empty())
    throw UserError("command line", "", cat("'tessel hw probe' takes no positional argument, got \"",
                                            args.positional()[0], "\""));
  ProbeOptions options;
  options.quick = args.flag("quick");
  if (isatty(STDERR_FILENO))
    options.progress = [](const std::string& line) { std::cerr << "tessel hw probe: " << line << "\n"; };

  const std::string device = args.option_or("device", "cpu");
  HwSpec spec;
  if (device == "cpu") {
    spec = probe_host_cpu(options);
  } else if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    int ordinal = 0;
    if (device.size() > 5) {
      char* end = nullptr;
      ordinal = static_cast<int>(std::strtol(device.c_str() + 5, &end, 10));
      if (!end || *end || ordinal < 0)
        throw UserError("command line", "", cat("--device expects cpu, cuda or cuda:N, got \"", device, "\""));
    }
    spec = probe_cuda_gpu(ordinal, options);
  } else {
    throw UserError("command line", "", cat("--device expects cpu, cuda or cuda:N, got \"", device, "\""));
  }

  // The probe's own output must read back; a failure here is a Tessel bug.
  const std::string text = write_hw_spec(spec);
  try {
    parse_hw_spec(text, "probed spec");
  } catch (const UserError& e) {
    throw InternalError(cat("tessel hw probe wrote a spec that does not validate: ", e.what(), "\n", text));
  }

  const std::string out = args.option("o").value_or(args.option_or("output", ""));
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  write_file_atomically(out, text);
  if (isatty(STDERR_FILENO)) std::cerr << "tessel hw probe: wrote " << out << "\n";
  return 0;
}

int hw_calibrate(const std::vector<std::string>& argv) {
  Args args("hw calibrate", argv, {"help", "h", "cold-l2"}, {"hw", "tune", "o", "cache", "time-lock"});
  if (args.flag("help") || args.flag("h")) {
    std::cout << kHwUsage;
    return 0;
  }
  const auto file = args.option("hw");
  if (!file) throw UserError("command line", "--hw", "tessel hw calibrate needs --hw SPEC (the spec to calibrate)");
  if (args.positional().empty()) throw UserError("command line", "", "tessel hw calibrate needs at least one MODEL to measure");
  const HwSpec spec = load_cli_hw_spec(*file);
  HwSpec roofline = spec;  // predictions at the roofline: the fit's denominators
  roofline.compute.family_efficiency.clear();
  const std::unique_ptr<Backend> backend = backend_for(roofline);
  if (auto why = backend->unavailable())
    throw UserError("command line", "", cat("calibrating '", spec.name, "' needs its device: ", backend->name(), " cannot run here: ", *why));
  const int k = static_cast<int>(args.int_option("tune", 10, 1, 1000));
  MeasureOptions mo;
  if (auto dir = args.option("cache")) mo.compile.cache_dir = *dir;
  mo.time_lock = args.option_or("time-lock", "");
  mo.timing.cold_cache = args.flag("cold-l2");
  mo.progress = true;
  BackendMeasurer measurer(std::string(backend->name()), mo);
  MeasureCache cache(mo.compile.cache_dir.empty() ? default_measure_cache_dir() : mo.compile.cache_dir);
  std::map<std::string, std::vector<double>> ratios;  // family -> measured / predicted at the roofline
  int kernels = 0;
  for (const std::string& model : args.positional()) {
    std::unique_ptr<Policy> policy = find_policy(std::string(policies().front()->name()));
    if (!policy->tune_with(&measurer, &cache, k)) throw InternalError("the default policy does not tune");
    std::unique_ptr<CostModel> cost = find_cost_model(std::string(cost_models().front()->name()));
    CompileRequest r;
    r.model_path = model;
    r.backend = std::string(backend->name());
    r.spec = roofline;
    r.policy = policy.get();
    r.cost = cost.get();
    r.last = Stage::schedule;
    r.options = mo.compile;
    const Compilation c = compile(r);
    for (const ScheduleGroup& g : c.schedule.groups)
      for (const TuneTrial& t : g.trials)
        if (t.measured_s && t.predicted_s > 0 && !t.family.empty()) {
          ratios[t.family].push_back(*t.measured_s / t.predicted_s);
          ++kernels;
        }
  }
  if (::isatty(2)) std::cerr << "\n";
  HwSpec out = spec;
  nlohmann::ordered_json residuals = nlohmann::ordered_json::object();
  for (const auto& [family, v] : ratios) {
    double log_sum = 0;
    for (double x : v) log_sum += std::log(x);
    const double geomean = std::exp(log_sum / static_cast<double>(v.size()));
    const bool fitted = v.size() >= 3;
    const double e = std::min(1.0, 1.0 / geomean);
    if (fitted) out.compute.family_efficiency[family] = std::round(e * 1000) / 1000;
    // After the fit: measured / (predicted / efficiency) per kernel.
    double lo = 1e300, hi = 0, sq = 0;
    for (double x : v) {
      const double after = x * e;
      lo = std::min(lo, after), hi = std::max(hi, after), sq += std::log(after) * std::log(after);
    }
    residuals[family] = {{"kernels", v.size()}, {"fitted", fitted}, {"efficiency", e},
                         {"measured_over_predicted_before", geomean}, {"after_min", lo}, {"after_max", hi},
                         {"after_rms_log", std::sqrt(sq / static_cast<double>(v.size()))}};
    std::cerr << "tessel hw calibrate: " << family << ": " << v.size() << " kernels, measured / predicted " << geomean
              << (fitted ? cat(" -> efficiency ", out.compute.family_efficiency[family]) : std::string(" (too few: not fitted)"))
              << "\n";
  }
  char date[16];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
  out.compute.source += cat(out.compute.source.empty() ? "" : "; ", "family_efficiency fitted by tessel hw calibrate on ", date,
                            " from ", kernels, " kernels of ", args.positional().size(), " models (", measurer.candidates(),
                            " timed now)");
  const std::string text = write_hw_spec(out);
  if (auto path = args.option("o")) {
    write_file_atomically(*path, text);
    write_file_atomically(*path + ".residuals.json", residuals.dump(1) + "\n");
    std::cerr << "tessel hw calibrate: wrote " << *path << " and " << *path << ".residuals.json\n";
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

int cmd_hw(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    std::cout << kHwUsage;
    return argv.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "show") return hw_show(rest);
  if (argv[0] == "probe") return hw_probe(rest);
  if (argv[0] == "calibrate") return hw_calibrate(rest);
  std::cerr << "tessel: error: unknown 'tessel hw' command '" << argv[0] << "'\n" << kHwUsage;
  return 2;
}

}  // namespace tessel
