// `tessel hw`: hardware specs from the command line.
//
//   tessel hw show FILE                                   validate a spec and print it as a table
//   tessel hw probe [-o FILE] [--device cpu|cuda[:N]] [--quick]
//                                                         measure this machine and write a spec
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

#include "hw_specs/hw_spec.h"
#include "hw_specs/probe.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"

namespace tessel {
namespace {

const char* kHwUsage =
    "usage: tessel hw show FILE\n"
    "       tessel hw probe [-o FILE] [--device cpu|cuda|cuda:N] [--quick]\n"
    "  show    validate a hardware spec (resolving \"extends\") and print it as a table\n"
    "  probe   measure this machine and write a hardware spec (JSON) to FILE or stdout\n"
    "          --device  cpu (default) or cuda / cuda:N (GPU N; needs the CUDA driver, not nvcc)\n"
    "          --quick   smaller buffers and fewer repeats: faster, less precise\n";

int hw_show(const std::vector<std::string>& argv) {
  Args args("hw show", argv, {"help", "h"}, {});
  if (args.flag("help") || args.flag("h")) {
    std::cout << kHwUsage;
    return 0;
  }
  const HwSpec spec = load_hw_spec(args.one_positional("FILE"));
  std::cout << format_hw_spec_table(spec);
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

}  // namespace

int cmd_hw(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "--help" || argv[0] == "-h" || argv[0] == "help") {
    std::cout << kHwUsage;
    return argv.empty() ? 2 : 0;
  }
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "show") return hw_show(rest);
  if (argv[0] == "probe") return hw_probe(rest);
  std::cerr << "tessel: error: unknown 'tessel hw' command '" << argv[0] << "'\n" << kHwUsage;
  return 2;
}

}  // namespace tessel
