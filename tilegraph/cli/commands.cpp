// The `tessel` subcommands. Each parses its own options (args.h), does its work through the
// library (import, lower, interpret), and prints a readable report. User errors propagate to
// main(), which prints one line and exits with status 2.
#include "tilegraph/cli/commands.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "tilegraph/cli/args.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/import/load_model.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/lower.h"

namespace tessel {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string milliseconds(Clock::time_point start) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f ms", seconds_since(start) * 1e3);
  return buf;
}

std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int p = 0;
  while (std::fabs(v) >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), p == 0 ? "%.0f %s%s" : "%.2f %s%s", v, prefixes[p], unit);
  return buf;
}

// ---- Graph statistics ------------------------------------------------------------------------

struct NodeStats {
  int64_t flops = 0;
  int64_t bytes = 0;  // distinct input tensors read once plus the output written once
};

NodeStats node_stats(const OpGraph& g, NodeId n) {
  NodeStats s;
  s.flops = g.node(n).flops();
  std::set<TensorId> seen;
  for (TensorId t : g.node_inputs(n))
    if (seen.insert(t).second) s.bytes += g.tensor(t).type.num_elements() * dtype_bytes(g.tensor(t).type.dtype);
  const TensorType& out = g.tensor(g.node_output(n)).type;
  s.bytes += out.num_elements() * dtype_bytes(out.dtype);
  return s;
}

std::string domain_text(const TeNode& node) {
  std::string out = "(";
  for (int a = 0; a < node.num_axes(); ++a) {
    if (a == node.num_spatial()) out += " | ";
    else if (a) out += ", ";
    out += cat(node.axes()[a].name, ":", node.axes()[a].extent);
  }
  return out + ")";
}

void print_summary(std::ostream& os, const ModelDef& model, const OpGraph& g, bool node_table) {
  int64_t weight_elems = 0, weight_bytes = 0;
  for (TensorId t : g.weights()) {
    weight_elems += g.tensor(t).type.num_elements();
    weight_bytes += g.tensor(t).type.num_elements() * dtype_bytes(g.tensor(t).type.dtype);
  }
  os << "model '" << model.name << "': " << model.ops.size() << " ops lowered to " << g.num_nodes()
     << " tensor-expression nodes\n";
  for (TensorId t : g.inputs()) os << "  input   " << g.tensor(t).name << ": " << g.tensor(t).type.print() << "\n";
  for (TensorId t : g.outputs()) os << "  output  " << g.tensor(t).name << ": " << g.tensor(t).type.print() << "\n";
  os << "  weights " << g.weights().size() << " tensors, " << human(static_cast<double>(weight_elems), "")
     << "elements, " << human(static_cast<double>(weight_bytes), "B") << "\n";
  int64_t flops = 0, bytes = 0;
  char line[512];
  if (node_table) {
    std::snprintf(line, sizeof(line), "  %-4s %-34s %-22s %12s %12s  %s\n", "#", "node", "output", "FLOPs", "bytes", "domain");
    os << line;
  }
  int index = 0;
  for (NodeId n : g.topological_order()) {
    const NodeStats s = node_stats(g, n);
    flops += s.flops;
    bytes += s.bytes;
    if (node_table) {
      std::snprintf(line, sizeof(line), "  %-4d %-34s %-22s %12s %12s  %s\n", index, g.node(n).name().c_str(),
                    g.node(n).output().print().c_str(), human(static_cast<double>(s.flops), "").c_str(),
                    human(static_cast<double>(s.bytes), "B").c_str(), domain_text(g.node(n)).c_str());
      os << line;
    }
    ++index;
  }
  os << "  total   " << human(static_cast<double>(flops), "FLOP") << ", "
     << human(static_cast<double>(bytes), "B")
     << " moved if every node reads its inputs and writes its output once (unfused)\n";
}

// ---- Inputs and outputs ----------------------------------------------------------------------

std::map<std::string, std::vector<int64_t>> parse_shapes(const Args& args) {
  std::map<std::string, std::vector<int64_t>> shapes;
  // --shape name=1x128x768 (repeatable through commas: a=1x2,b=3)
  if (auto spec = args.option("shape")) {
    std::stringstream ss(*spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const auto eq = item.find('=');
      if (eq == std::string::npos)
        throw UserError("command line", "--shape", cat("expected NAME=D0xD1x..., got \"", item, "\""));
      std::vector<int64_t> dims;
      std::stringstream ds(item.substr(eq + 1));
      std::string d;
      while (std::getline(ds, d, 'x')) {
        try {
          size_t used = 0;
          const long long v = std::stoll(d, &used);
          if (used != d.size() || v < 0) throw std::invalid_argument(d);
          dims.push_back(v);
        } catch (const std::exception&) {
          throw UserError("command line", "--shape", cat("bad extent \"", d, "\" in \"", item, "\""));
        }
      }
      shapes[item.substr(0, eq)] = dims;
    }
  }
  return shapes;
}

// Finds input_N.pb or input_N.npy (or output_N...) in `dir`.
std::optional<std::string> find_tensor_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".pb", ".npy"}) {
    const fs::path p = fs::path(dir) / (stem + ext);
    if (fs::exists(p)) return p.string();
  }
  return std::nullopt;
}

std::vector<HostTensor> read_inputs(const std::string& dir, const ModelDef& model) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UserError(dir, "", "--inputs is not a directory");
  std::vector<HostTensor> out;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    auto file = find_tensor_file(dir, cat("input_", i));
    if (!file)
      throw UserError(dir, "", cat("no input_", i, ".pb or input_", i, ".npy for model input '",
                                   model.inputs[i].name, "'"));
    out.push_back(read_tensor_file(*file));
  }
  return out;
}

HostTensor random_input(const TensorType& type, uint64_t seed) {
  RandomInit init;
  init.seed = seed;
  if (is_float(type.dtype)) {
    init.dist = RandomInit::Dist::normal;
    init.a = 0;
    init.b = 1;
  } else {
    init.dist = RandomInit::Dist::uniform;  // small non-negative integers (valid indices)
    init.a = 0;
    init.b = type.dtype == DType::boolean ? 2 : 4;
  }
  return materialize_random(type, init);
}

std::string describe(const HostTensor& t) {
  double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    const double v = t[i];
    if (std::isnan(v)) { ++nans; continue; }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sq += v * v;
  }
  std::string out = cat(t.type().print(), "  min ", lo, "  max ", hi, "  mean ",
                        t.size() ? sum / static_cast<double>(t.size()) : 0.0, "  l2 ", std::sqrt(sq));
  if (nans) out += cat("  NaN ", nans);
  out += "  [";
  for (int64_t i = 0; i < std::min<int64_t>(t.size(), 4); ++i) out += cat(i ? ", " : "", t[i]);
  return out + (t.size() > 4 ? ", ...]" : "]");
}

std::vector<HostTensor> make_inputs(const Args& args, const ModelDef& model, const OpGraph& g) {
  if (auto dir = args.option("inputs")) return read_inputs(*dir, model);
  const uint64_t seed = static_cast<uint64_t>(args.int_option("seed", 0));
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    out.push_back(random_input(g.tensor(g.inputs()[i]).type, seed * 1000003 + i));
  return out;
}

LowerOptions lower_options(const Args& args, const std::vector<HostTensor>* inputs, const ModelDef& model) {
  LowerOptions opts;
  opts.input_shapes = parse_shapes(args);
  if (inputs)
    for (size_t i = 0; i < model.inputs.size() && i < inputs->size(); ++i)
      opts.input_shapes.emplace(model.inputs[i].name, (*inputs)[i].shape());
  return opts;
}

// ---- Help texts ------------------------------------------------------------------------------

const char* kInspectHelp =
    "usage: tessel inspect MODEL [--dump] [--shape NAME=D0xD1...]\n"
    "  Imports MODEL (.json or .onnx), lowers it to tensor-expression nodes and prints its inputs,\n"
    "  outputs, weights and, per node, the output, FLOPs, bytes moved and iteration domain.\n"
    "  --dump    also print the IR of every node\n"
    "  --shape   concrete shapes for inputs with unknown dimensions\n";
const char* kRunHelp =
    "usage: tessel run MODEL --interp [--inputs DIR] [--outputs DIR] [--expect DIR] [--seed N]\n"
    "                  [--threads N] [--shape NAME=D0xD1...]\n"
    "  Runs MODEL with the reference interpreter (fp64 accumulation) and prints a summary of each\n"
    "  output.\n"
    "  --interp   use the reference interpreter (the only backend so far)\n"
    "  --inputs   directory with input_N.pb (ONNX TensorProto) or input_N.npy files; default:\n"
    "             seeded random inputs (normal(0,1) for floats, 0..3 for integers)\n"
    "  --outputs  write output_N in the inputs' format (.npy when inputs are random)\n"
    "  --expect   compare with output_N.pb/.npy under the dtype tolerances; exit 1 on a mismatch\n"
    "  --seed     seed of the random inputs (default 0)\n"
    "  --threads  interpreter threads (default: all hardware threads)\n";
const char* kConvertHelp =
    "usage: tessel convert MODEL.onnx -o MODEL.json\n"
    "  Converts a model to Tessel's JSON model format (docs/model-format.md). Weight data over\n"
    "  4096 elements goes to a sidecar MODEL.bin.\n";
const char* kCompileHelp =
    "usage: tessel compile MODEL [--target cpu] [--run] [--dump] [--seed N] [--threads N]\n"
    "  Runs the compiler pipeline on MODEL and prints what each stage produced:\n"
    "  import, normalize, schedule, emit, run. Stages not implemented yet say so.\n"
    "  --run      run the result on seeded random inputs\n"
    "  --dump     print the IR after import\n";

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

int cmd_run(const std::vector<std::string>& argv) {
  Args args("run", argv, {"interp", "help"}, {"inputs", "outputs", "expect", "seed", "threads", "shape"});
  if (args.flag("help")) { std::cout << kRunHelp; return 0; }
  if (!args.flag("interp"))
    throw UserError("command line", "", "'tessel run' needs --interp (the reference interpreter is the only backend so far)");
  const ModelDef model = load_model(args.one_positional("MODEL"));
  std::vector<HostTensor> given;
  if (auto dir = args.option("inputs")) given = read_inputs(*dir, model);
  const OpGraph g = lower_model(model, lower_options(args, args.option("inputs") ? &given : nullptr, model));
  const std::vector<HostTensor> inputs = args.option("inputs") ? given : make_inputs(args, model, g);
  InterpretOptions io;
  io.threads = static_cast<int>(args.int_option("threads", 0));
  const auto start = Clock::now();
  const std::vector<HostTensor> outputs = interpret(g, inputs, io);
  std::cout << "interpreted '" << model.name << "' (" << g.num_nodes() << " nodes) in "
            << seconds_since(start) << " s\n";
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << "  output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[i]) << "\n";

  if (auto dir = args.option("outputs")) {
    fs::create_directories(*dir);
    std::string ext = ".npy";
    if (auto in_dir = args.option("inputs"); in_dir && find_tensor_file(*in_dir, "input_0") &&
                                             find_tensor_file(*in_dir, "input_0")->ends_with(".pb"))
      ext = ".pb";
    for (size_t i = 0; i < outputs.size(); ++i)
      write_tensor_file((fs::path(*dir) / cat("output_", i, ext)).string(), outputs[i]);
    std::cout << "wrote " << outputs.size() << " outputs to " << *dir << "\n";
  }
  if (auto dir = args.option("expect")) {
    int bad = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      auto file = find_tensor_file(*dir, cat("output_", i));
      if (!file) throw UserError(*dir, "", cat("no output_", i, ".pb or output_", i, ".npy to compare with"));
      const CompareResult r = compare_tensors(outputs[i], read_tensor_file(*file));
      if (!r.ok) {
        ++bad;
        std::cout << "MISMATCH output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << r.message << "\n";
      }
    }
    if (bad) return 1;
    std::cout << "all " << outputs.size() << " outputs match " << *dir << "\n";
  }
  return 0;
}

int cmd_convert(const std::vector<std::string>& argv) {
  Args args("convert", argv, {"help"}, {"o"});
  if (args.flag("help")) { std::cout << kConvertHelp; return 0; }
  const std::string in = args.one_positional("MODEL");
  auto out = args.option("o");
  if (!out) throw UserError("command line", "", "'tessel convert' needs -o OUTPUT.json");
  const ModelDef model = load_model(in);
  lower_model(model);  // reject models Tessel cannot lower before writing anything
  save_model_json(model, *out);
  std::cout << "wrote " << *out << " (" << model.ops.size() << " ops, " << model.weights.size() << " weights)\n";
  return 0;
}

int cmd_compile(const std::vector<std::string>& argv) {
  Args args("compile", argv, {"run", "dump", "help"}, {"target", "seed", "threads", "shape", "hw"});
  if (args.flag("help")) { std::cout << kCompileHelp; return 0; }
  const std::string path = args.one_positional("MODEL");
  const std::string target = args.option_or("target", "cpu");
  if (target != "cpu") throw UserError("command line", "--target", cat("unknown target \"", target, "\" (only \"cpu\" so far)"));
  if (args.option("hw")) throw UserError("command line", "--hw", "hardware specs arrive with the cost model; not available yet");

  auto t0 = Clock::now();
  const ModelDef model = load_model(path);
  std::cout << "[1/5 import]     " << path << ": " << model.ops.size() << " ops, " << model.inputs.size()
            << " input(s), " << model.outputs.size() << " output(s), " << model.weights.size() << " weights ("
            << milliseconds(t0) << ")\n";

  t0 = Clock::now();
  const OpGraph g = lower_model(model, lower_options(args, nullptr, model));
  std::cout << "[2/5 normalize]  lowered to " << g.num_nodes() << " tensor-expression nodes (" << milliseconds(t0)
            << "): constant folding of shape\n"
            << "                 computations and dead-node elimination ran; BN folding and layout\n"
            << "                 canonicalization are not implemented yet.\n";
  std::ostringstream summary;
  print_summary(summary, model, g, false);
  std::istringstream lines(summary.str());
  for (std::string line; std::getline(lines, line);) std::cout << "                 " << line << "\n";
  if (args.flag("dump")) std::cout << g.print();

  std::cout << "[3/5 schedule]   not run here: `tessel compile` has no CPU code generation to schedule for yet;\n"
            << "                 `tessel schedule|explain MODEL --hw SPEC` fuse and tile for a spec (welder, roller).\n";
  std::cout << "[4/5 emit]       not implemented yet: CPU code generation through LLVM (" << target << ").\n";
  if (!args.flag("run")) {
    std::cout << "[5/5 run]        skipped (pass --run)\n";
    return 0;
  }
  const std::vector<HostTensor> inputs = make_inputs(args, model, g);
  InterpretOptions io;
  io.threads = static_cast<int>(args.int_option("threads", 0));
  t0 = Clock::now();
  const std::vector<HostTensor> outputs = interpret(g, inputs, io);
  std::cout << "[5/5 run]        no compiled code yet, so the reference interpreter ran the graph (fp64\n"
            << "                 accumulation, seeded random inputs) in " << milliseconds(t0) << "\n";
  for (size_t i = 0; i < outputs.size(); ++i)
    std::cout << "                 output '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[i]) << "\n";
  return 0;
}

int cmd_version(const std::vector<std::string>&) {
  std::cout << "tessel " << TESSEL_VERSION << "\n"
            << "  built with LLVM " << TESSEL_LLVM_VERSION << " (pinned), CUDA toolkit " << TESSEL_CUDA_VERSION
            << ", " << supported_op_types().size() << " operators in the library\n";
  return 0;
}

}  // namespace tessel
