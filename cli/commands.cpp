// The `tessel` subcommands. Each parses its own options (args.h), does its work through the
// library (import, lower, interpret), and prints a readable report. User errors propagate to
// main(), which prints one line and exits with status 2.
#include "cli/commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "cli/args.h"
#include "hw_specs/hw_spec.h"
#include "kernels/backend.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/lower.h"
#include "cli/cli_common.h"
#include "cli/device_commands.h"
#include "kernels/backend.h"
#include "cost_model/cost_model.h"

namespace tessel {

namespace {

namespace fs = std::filesystem;

// ---- Help texts ------------------------------------------------------------------------------

const char* kInspectHelp =
    "usage: tessel inspect MODEL [--dump] [--shape NAME=D0xD1...]\n"
    "  Imports MODEL (.json or .onnx), lowers it to tensor-expression nodes and prints its inputs,\n"
    "  outputs, weights and, per node, the output, FLOPs, bytes moved and iteration domain.\n"
    "  --dump    also print the IR of every node\n"
    "  --shape   concrete shapes for inputs with unknown dimensions\n";
const char* kRunHelp =
    "usage: tessel run MODEL [--interp | --device cpu|cuda] [--check] [--time N] [--hw SPEC]\n"
    "                  [--policy P | --schedule FILE] [--inputs DIR] [--outputs DIR] [--expect DIR]\n"
    "                  [--seed N] [--threads N] [--shape NAME=D0xD1...] [--cache DIR] [--no-cache]\n"
    "                  [--check-whole] [--report FILE] [--no-graph] [--cold-l2]\n"
    "                  [--time-lock FILE] [--tune K] [--sparse-kernels MODE] [--no-normalize]\n"
    "                  [--mesh M [--shard \"T=L ...\"]]\n"
    "  Runs MODEL with the reference interpreter (fp64 accumulation) or compiled for a device, and\n"
    "  prints a summary of each output.\n"
    "  --interp   use the reference interpreter\n"
    "  --device   compile for a backend (cpu: LLVM; cuda: NVRTC) and run there (default: the\n"
    "             --hw spec's backend, else cpu)\n"
    "  --check    compare every compiled output with the interpreter (relative L2 error by dtype,\n"
    "             tilegraph/compare.h); exit 1 on a mismatch. Graphs over 20 GFLOP are checked on\n"
    "             a sample of at least 4096 elements of each output (tilegraph/sampled_reference.h)\n"
    "  --check-whole  interpret the whole graph for --check, however large\n"
    "  --time N   time N compiled runs after warm-up; print the median. GPU time: one run is\n"
    "             captured as a CUDA graph and each replay is timed between device events, as\n"
    "             the suites time PyTorch (experiments/timing/README.md)\n"
    "  --no-graph time the kernel launches one by one instead (host launch cost included)\n"
    "  --cold-l2  overwrite twice the last-level cache before every timed run (default: warm)\n"
    "  --time-lock FILE  hold an exclusive lock on FILE while timing, so that runs prepared in\n"
    "             parallel time one at a time\n"
    "  --hw       hardware spec to schedule for (default: probe this machine, as `tessel hw probe`)\n"
    "  --policy   scheduling policy (default welder); --schedule replays a saved schedule\n"
    "  --inputs   directory with input_N.pb (ONNX TensorProto) or input_N.npy files; default:\n"
    "             seeded random inputs (normal(0,1) for floats, 0..3 for integers); a graph input\n"
    "             with an ONNX initializer keeps it unless DIR has NAME.pb or NAME.npy\n"
    "  --outputs  write output_N in the inputs' format (.npy when inputs are random)\n"
    "  --expect   compare with output_N.pb/.npy under the dtype tolerances; exit 1 on a mismatch\n"
    "  --seed     seed of the random inputs (default 0)\n"
    "  --threads  interpreter / CPU worker threads (default: all hardware threads)\n"
    "  --cache    compile cache directory (default $TESSEL_CACHE_DIR or ~/.cache/tessel); --no-cache\n"
    "  --report   write a JSON report of a compiled run (compile stats, times, checks) to FILE\n"
    "  --tune K   measured top-k: the policy (welder, roller) times the K best tilings of every\n"
    "             group on the device, each checked first, and keeps the fastest (times cached in\n"
    "             --cache's measurements.json); `tessel explain` shows predicted and measured\n"
    "  --sparse-kernels cost|dense|block_sparse  for a contraction reading a weight with a sparsity\n"
    "             attribute: the kernel the cost model predicts faster (default), or always the dense\n"
    "             or the sparse one (the weight's block or N:M pattern) where it can be emitted\n"
    "             (docs/sparsity.md)\n"
    "  --no-normalize  compile the model as imported: no view clean-ups, no BatchNormalization\n"
    "             folding, no channels-last convolutions (docs/architecture.md, normalize)\n"
    "  --mesh M   run over a device mesh (2, 2x4, dp=2,tp=4) as `tessel shard` plans it (--shard pins\n"
    "             tensors): under mpirun one rank per process (CPU ranks), else the ranks are threads\n"
    "             of this process; --check compares every rank's outputs with the single-device\n"
    "             interpreter; --inputs (of the lowered graph's shapes), --outputs and --expect work\n"
    "             as without it; --report FILE: the plan, its prediction, the step times and the\n"
    "             checks as JSON; --tune K with --device cpu (every rank's segments); --time N: GPU\n"
    "             time on GPUs, on CPU ranks the slowest rank's wall time per step (docs/distributed.md);\n"
    "             --overlap auto|on|off as for `tessel shard` (ring shifts overlapped with compute)\n"
    "  --save-schedules DIR, --schedules DIR  with --mesh --device cpu: write each segment's schedule\n"
    "             (segment-<key>.json, tuned ones too), or replay them instead of scheduling\n";
const char* kConvertHelp =
    "usage: tessel convert MODEL.onnx [-o MODEL.json]\n"
    "  Converts a model to Tessel's JSON model format (docs/model-format.md). With -o, weight data\n"
    "  over 4096 elements goes to a sidecar MODEL.bin; without it the JSON, every weight inline,\n"
    "  goes to standard output.\n";
const char* kCompileHelp =
    "usage: tessel compile MODEL [--device cpu|cuda] [--hw SPEC] [--policy P | --schedule FILE]\n"
    "                      [--emit FORMAT -o DIR] [--dump FORMAT] [--run [--no-baseline] [--time N]]\n"
    "                      [--seed N] [--threads N] [--tune K] [--sparse-kernels MODE] [--no-normalize]\n"
    "  Runs the compiler pipeline on MODEL and prints what each stage produced: import, normalize,\n"
    "  schedule, emit, run.\n"
    "  --device   backend (default: the one that emits --emit's format, else the one --hw's spec\n"
    "             is for, else cpu); --hw the spec to schedule for (default: probe this machine)\n"
    "  --emit     write the generated code in FORMAT (cpu: llvm, obj; cuda: cuda, ptx) into -o DIR, one\n"
    "             file per kernel plus manifest.json\n"
    "  --dump     print the generated code in FORMAT (or `ir` for the tensor-expression IR)\n"
    "  --run      compile, run on seeded random inputs, check against the interpreter and time it;\n"
    "             then the same for roller's unfused schedule (one kernel per operator) as the\n"
    "             baseline, and print fused vs unfused (--no-baseline skips it; --time N runs)\n"
    "  --tune K   measured top-k on the device (as `tessel run --tune`)\n"
    "  --no-normalize  skip the normalize rewrites (BatchNormalization folding, channels-last\n"
    "             convolutions for a backend that prefers them)\n";

}  // namespace

int cmd_inspect(const std::vector<std::string>& argv) {
  Args args("inspect", argv, {"dump", "help"}, {"shape"});
  if (args.flag("help")) { std::cout << kInspectHelp; return 0; }
  const ModelDef model = load_model(args.one_positional("MODEL"));
  const OpGraph g = lower_model(model, lower_options(args, nullptr, model));
  print_summary(std::cout, model, g, true);
  if (args.flag("dump")) std::cout << "\n" << g.print();
  return 0;
}

namespace {
/// The backend the --hw spec is for; "cpu" without one.
std::string device_for_hw(const Args& args) {
  if (auto file = args.option("hw")) {
    const HwSpec spec = load_cli_hw_spec(*file);
    for (const auto& b : backends())
      if (b->supports(spec)) return std::string(b->name());
  }
  return "cpu";
}
}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  Args args("run", argv, {"interp", "check", "check-whole", "no-cache", "no-graph", "cold-l2", "no-normalize", "help"},
            {"inputs", "outputs", "expect", "seed", "threads", "shape", "device", "hw", "policy", "policy-opt", "schedule",
             "cost-model", "time", "cache", "report", "time-lock", "tune", "sparse-kernels", "mesh", "shard", "exhaustive", "descent", "memory-per-device",
             "schedules", "save-schedules", "overlap"});
  if (args.flag("help")) { std::cout << kRunHelp << policy_options_help(); return 0; }
  std::optional<std::string> device = args.option("device");
  if (args.flag("interp") && device)
    throw UserError("command line", "", "'tessel run' takes --interp or --device cpu|cuda, not both");
  if (args.option("mesh")) {
    if (!args.flag("interp") && !device) throw UserError("command line", "", "'tessel run --mesh' needs --interp or --device cpu|cuda");
    if (args.option("schedule"))
      throw UserError("command line", "--schedule", "a mesh runs segments, one schedule each: --schedules DIR replays those --save-schedules DIR saved");
    return run_on_mesh(args);
  }
  for (const char* option : {"schedules", "save-schedules"})
    if (args.option(option)) throw UserError("command line", cat("--", option), "segment schedules are for --mesh; one model's schedule is --schedule FILE");
  if (!args.flag("interp") && !device) device = device_for_hw(args);  // compiled: for the --hw spec, else this host
  // Import first: given inputs bind the shapes the model leaves unknown before it is normalized.
  CompileRequest import_only;
  import_only.model_path = args.one_positional("MODEL");
  import_only.last = Stage::import;
  const Compilation imported = compile(import_only);
  ModelDef overridden;  // the model with --inputs' values for inputs that have initializers
  const ModelDef* model_ptr = imported.model.get();
  std::vector<HostTensor> given;
  if (auto dir = args.option("inputs")) {
    given = read_inputs(*dir, *model_ptr);
    // ONNX lets a caller override a graph input that has an initializer, and so does --inputs
    // (a file named after the input); the others keep their initializers -- said either way.
    if (!model_ptr->defaulted_inputs.empty()) {
      overridden = *model_ptr;
      const std::vector<std::string> done = override_defaulted_inputs(*dir, overridden);
      if (!done.empty()) model_ptr = &overridden;
      std::string kept, taken;
      for (const std::string& n : model_ptr->defaulted_inputs)
        (std::find(done.begin(), done.end(), n) == done.end() ? kept : taken) += cat(", '", n, "'");
      if (!taken.empty())
        std::cerr << "tessel: note: graph input(s) " << taken.substr(2) << " with initializers taken from --inputs (compiled as "
                  << "constants)\n";
      if (!kept.empty())
        std::cerr << "tessel: note: graph input(s) " << kept.substr(2) << " have initializers: used as constant weights (a file "
                  << "NAME.npy or NAME.pb in --inputs overrides one)\n";
    }
  }
  const ModelDef& model = *model_ptr;
  std::vector<HostTensor> outputs;
  int status = 0;
  if (device) {
    const std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, *device);  // checks --hw first
    require_runnable(*device);
    CompileRequest& r = pipeline->request;
    r.model = &model;
    r.lower = lower_options(args, args.option("inputs") ? &given : nullptr, model);
    const Compilation compiled = compile(r);
    report_tuning(*pipeline, compiled.schedule);
    const std::vector<HostTensor> inputs = args.option("inputs") ? given : make_inputs(args, model, compiled.graph);
    CompiledRunRequest request;
    request.report_path = args.option_or("report", "");
    request.check = args.flag("check");
    request.check_whole = args.flag("check-whole");
    request.sample_seed = static_cast<uint64_t>(args.int_option("seed", 0));
    request.time_repeats = static_cast<int>(args.int_option("time", 0, 0, 1000000));
    request.timing.graph = !args.flag("no-graph");
    request.timing.cold_cache = args.flag("cold-l2");
    request.time_lock = args.option_or("time-lock", "");
    request.interpreter_threads = static_cast<int>(args.int_option("threads", 0, 0, 4096));
    int mismatches = 0;
    outputs = run_compiled(compiled, inputs, request, &mismatches);
    if (mismatches) status = 1;
  } else {
    const OpGraph g = lower_model(model, lower_options(args, args.option("inputs") ? &given : nullptr, model));
    const std::vector<HostTensor> inputs = args.option("inputs") ? given : make_inputs(args, model, g);
    InterpretOptions io;
    io.threads = static_cast<int>(args.int_option("threads", 0, 0, 4096));
    const auto start = Clock::now();
    outputs = interpret(g, inputs, io);
    std::cout << "interpreted '" << model.name << "' (" << g.num_nodes() << " nodes) in " << seconds_since(start) << " s\n";
    for (size_t i = 0; i < outputs.size(); ++i)
      std::cout << "  output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[i]) << "\n";
  }

  if (write_and_expect_outputs(args, outputs, model.outputs)) return 1;
  return status;
}

int cmd_convert(const std::vector<std::string>& argv) {
  Args args("convert", argv, {"help"}, {"o"});
  if (args.flag("help")) { std::cout << kConvertHelp; return 0; }
  const std::string in = args.one_positional("MODEL");
  auto out = args.option("o");
  const ModelDef model = load_model(in);
  lower_model(model);  // reject models Tessel cannot lower before writing anything
  if (!out) {  // to standard output, every weight inline
    std::cout << write_model_json(model);
    return 0;
  }
  save_model_json(model, *out);
  std::cout << "wrote " << *out << " (" << model.ops.size() << " ops, " << model.weights.size() << " weights)\n";
  return 0;
}

int cmd_compile(const std::vector<std::string>& argv) {
  Args args("compile", argv, {"run", "help", "no-cache", "no-baseline", "no-normalize"},
            {"device", "seed", "threads", "shape", "hw", "policy", "policy-opt", "schedule", "cost-model", "emit", "o", "dump", "cache",
             "time", "tune", "sparse-kernels"});
  if (args.flag("help")) { std::cout << kCompileHelp << policy_options_help(); return 0; }
  const std::string path = args.one_positional("MODEL");
  if (args.option("emit") && !args.option("o")) throw UserError("command line", "--emit", "needs -o DIR");
  // Without --device: the backend that emits --emit's format, else the one the --hw spec is for,
  // else the CPU.
  std::string device = args.option_or("device", "");
  if (device.empty())
    if (auto format = args.option("emit"))
      for (const auto& b : backends()) {
        const std::vector<std::string> formats = b->emit_formats();
        if (std::find(formats.begin(), formats.end(), *format) != formats.end()) device = std::string(b->name());
      }
  if (device.empty()) device = device_for_hw(args);

  std::unique_ptr<Backend> backend;
  for (auto& b : backends())
    if (b->name() == device) backend = std::move(b);
  // A build without this backend: say so, and let --run fall back to the interpreter.
  if (!backend && (args.option("emit") || args.option("hw"))) find_backend(device);  // the UserError naming the known ones
  std::unique_ptr<CliPipeline> pipeline;
  if (backend) {
    pipeline = pipeline_options(args, device);
  } else {
    pipeline = std::make_unique<CliPipeline>();
  }
  CompileRequest& r = pipeline->request;
  r.model_path = path;
  r.lower.input_shapes = parse_shapes(args);
  r.last = !backend ? Stage::normalize : args.flag("run") ? Stage::load
                                       : args.option("emit") || args.option("dump") ? Stage::emit : Stage::schedule;
  std::string dump_format;
  fs::path dump_dir;
  if (auto format = args.option("emit")) {
    // Checked before any stage runs (the backend would say the same after scheduling).
    if (backend) {
      const std::vector<std::string> formats = backend->emit_formats();
      if (std::find(formats.begin(), formats.end(), *format) == formats.end()) {
        std::string known;
        for (const std::string& f : formats) known += (known.empty() ? "" : ", ") + f;
        throw UserError("command line", "--emit", cat("the ", backend->name(), " backend emits ", known, ", not '", *format, "'"));
      }
    }
    r.emit_format = *format;
    r.emit_dir = *args.option("o");
  } else if (auto format = args.option("dump"); backend && format && *format != "ir") {
    const std::vector<std::string> formats = backend->emit_formats();
    if (std::find(formats.begin(), formats.end(), *format) == formats.end()) {
      std::string known = "ir";
      for (const std::string& f : formats) known += ", " + f;
      throw UserError("command line", "--dump", cat("the ", backend->name(), " backend dumps ", known, ", not '", *format, "'"));
    }
    dump_format = *format;
    dump_dir = private_temp_dir("tessel_dump_");
    r.emit_format = *format;
    r.emit_dir = dump_dir.string();
  }
  if (r.last == Stage::load) require_runnable(device);
  const Compilation c = compile(r);
  report_tuning(*pipeline, c.schedule);
  const auto ms = [&](Stage stage) { return cat(c.record(stage).seconds * 1e3, " ms"); };

  const ModelDef& model = *c.model;
  const OpGraph& g = c.graph;
  std::cout << "[1/5 import]     " << path << ": " << model.ops.size() << " ops, " << model.inputs.size()
            << " input(s), " << model.outputs.size() << " output(s), " << model.weights.size() << " weights ("
            << ms(Stage::import) << ")\n";
  std::cout << "[2/5 normalize]  " << c.normalized.summary() << "; lowered to " << g.num_nodes()
            << " tensor-expression nodes (" << ms(Stage::normalize) << ")\n";
  std::ostringstream summary;
  print_summary(summary, model, g, false);
  std::istringstream lines(summary.str());
  for (std::string line; std::getline(lines, line);) std::cout << "                 " << line << "\n";
  if (args.option("dump") == std::optional<std::string>("ir")) std::cout << c.dump(Stage::normalize);

  if (!backend) {
    std::cout << "[3/5 schedule]   skipped: this build has no '" << device << "' backend to schedule for\n"
              << "[4/5 emit]       skipped: no '" << device << "' backend\n";
    if (!args.flag("run")) {
      std::cout << "[5/5 run]        skipped (pass --run)\n";
      return 0;
    }
    const std::vector<HostTensor> inputs = make_inputs(args, model, g);
    InterpretOptions io;
    io.threads = static_cast<int>(args.int_option("threads", 0, 0, 4096));
    const auto t0 = Clock::now();
    const std::vector<HostTensor> outputs = interpret(g, inputs, io);
    std::cout << "[5/5 run]        the reference interpreter ran the graph instead (fp64 accumulation, seeded\n"
              << "                 random inputs) in " << milliseconds(t0) << "\n";
    for (size_t i = 0; i < outputs.size(); ++i)
      std::cout << "                 output '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[i]) << "\n";
    return 0;
  }
  const Schedule& schedule = c.schedule;
  std::cout << "[3/5 schedule]   " << schedule.policy << " on " << c.spec.name << ": " << g.num_nodes() << " nodes in "
            << schedule.groups.size() << " kernels, " << schedule.unfused.size() << " edges left in memory, predicted "
            << schedule.predicted_latency_s * 1e3 << " ms (" << ms(Stage::schedule) << "; `tessel explain` says why)\n";

  if (!dump_format.empty()) {
    std::cout << "[4/5 emit]       " << c.emitted.size() << " files (" << dump_format << "):\n";
    for (const std::string& f : c.emitted) {
      std::ifstream in(f);
      std::cout << "// ---- " << fs::path(f).filename().string() << "\n" << in.rdbuf() << "\n";
    }
    fs::remove_all(dump_dir);
  } else if (c.record(Stage::emit).ran) {
    std::cout << "[4/5 emit]       wrote " << c.emitted.size() << " files (" << r.emit_format << ") to " << r.emit_dir
              << " (" << ms(Stage::emit) << ")\n";
  } else {
    std::cout << "[4/5 emit]       " << backend->name() << " backend (" << backend->description()
              << "); pass --emit FORMAT -o DIR to write the code\n";
  }
  if (!args.flag("run")) {
    std::cout << "[5/5 run]        skipped (pass --run)\n";
    return 0;
  }
  std::cout << "[5/5 run]        compile, run on seeded random inputs, check against the interpreter:\n";
  CompiledRunRequest request;
  request.check = true;
  request.time_repeats = static_cast<int>(args.int_option("time", 20, 0, 1000000));
  request.interpreter_threads = static_cast<int>(args.int_option("threads", 0, 0, 4096));
  int mismatches = 0;
  std::vector<HostTensor> reference;
  double fused_s = 0;
  request.reference = &reference;
  request.median_s = &fused_s;
  const std::vector<HostTensor> inputs = make_inputs(args, model, g);
  run_compiled(c, inputs, request, &mismatches);
  if (mismatches || schedule.policy == "roller" || args.flag("no-baseline") || request.time_repeats <= 0) return mismatches ? 1 : 0;
  // The baseline: the same backend with roller's schedule, one kernel per operator (no fusion).
  std::cout << "baseline: the same backend, roller's schedule (one kernel per operator, nothing fused):\n";
  const std::unique_ptr<Policy> roller = find_policy("roller");
  CompileRequest unfused_request = r;
  unfused_request.model_path.clear();
  unfused_request.graph = &g;
  unfused_request.spec = c.spec;
  unfused_request.policy = roller.get();
  unfused_request.schedule_json.clear();
  unfused_request.emit_format.clear();
  unfused_request.last = Stage::load;
  const Compilation unfused = compile(unfused_request);
  double unfused_s = 0;
  request.median_s = &unfused_s;
  run_compiled(unfused, inputs, request, &mismatches);
  if (mismatches) return 1;
  std::cout << "fused (" << schedule.policy << ", " << schedule.groups.size() << " kernels) " << fused_s * 1e3
            << " ms vs unfused (roller, " << unfused.schedule.groups.size() << " kernels) " << unfused_s * 1e3
            << " ms (medians): " << unfused_s / fused_s << "x\n";
  return 0;
}

int cmd_version(const std::vector<std::string>&) {
  std::cout << "tessel " << TESSEL_VERSION << "\n"
            << "  built with LLVM " << TESSEL_LLVM_VERSION << " (pinned), CUDA toolkit " << TESSEL_CUDA_VERSION
            << ", " << supported_op_types().size() << " operators in the library\n";
  return 0;
}

}  // namespace tessel
