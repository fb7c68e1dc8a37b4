// Helpers shared by the `tessel` subcommands (cli_common.h).
#include "cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "kernels/backend.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"
#include "policy/schedule_json.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/import/tensor_files.h"

namespace tessel {

namespace fs = std::filesystem;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string milliseconds(Clock::time_point start) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f ms", seconds_since(start) * 1e3);
  return buf;
}

namespace {

// The temporary directory (TMPDIR, else /tmp); a UserError naming it when it is not a directory.
fs::path temp_root() {
  std::error_code ec;
  fs::path root = fs::temp_directory_path(ec);
  if (ec) {
    const char* env = std::getenv("TMPDIR");
    throw UserError(env ? env : "TMPDIR", "", cat("cannot use it as the temporary directory: ", ec.message()));
  }
  return root;
}

}  // namespace

std::string private_temp_file(const std::string& prefix, const std::string& suffix) {
  std::string path = (temp_root() / (prefix + "XXXXXX" + suffix)).string();
  const int fd = ::mkstemps(path.data(), static_cast<int>(suffix.size()));
  if (fd < 0) throw UserError(path, "", cat("cannot create a temporary file: ", std::strerror(errno)));
  ::close(fd);
  return path;
}

std::string private_temp_dir(const std::string& prefix) {
  std::string path = (temp_root() / (prefix + "XXXXXX")).string();
  if (::mkdtemp(path.data()) == nullptr) throw UserError(path, "", cat("cannot create a temporary directory: ", std::strerror(errno)));
  return path;
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

std::vector<std::string> override_defaulted_inputs(const std::string& dir, ModelDef& model) {
  std::vector<std::string> done;
  for (const std::string& name : model.defaulted_inputs) {
    const bool plain = !name.empty() && name[0] != '.' && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!plain) continue;  // not a file name: no way to give it
    const std::optional<std::string> file = find_tensor_file(dir, name);
    if (!file) continue;
    HostTensor value = read_tensor_file(*file);
    for (WeightDef& w : model.weights) {
      if (w.name != name) continue;
      if (value.dtype() != w.type.dtype)
        throw UserError(*file, "", cat("graph input '", name, "' is ", dtype_name(w.type.dtype), ", the file holds ",
                                       dtype_name(value.dtype())));
      w.type = value.type();
      w.source = std::make_shared<const HostTensor>(std::move(value));
      w.sparsity.reset();
      done.push_back(name);
      break;
    }
  }
  return done;
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
  // Integers print exactly (an i64 beyond 2^53 has no exact double); mean and l2 stay doubles.
  const bool integer = is_integer(t.dtype());
  std::string range = cat("  min ", lo, "  max ", hi);
  if (integer && t.size() > 0) {
    const std::vector<int64_t> ints = t.as_ints();
    const auto [least, most] = std::minmax_element(ints.begin(), ints.end());
    range = cat("  min ", *least, "  max ", *most);
  }
  std::string out = cat(t.type().print(), range, "  mean ", t.size() ? sum / static_cast<double>(t.size()) : 0.0,
                        "  l2 ", std::sqrt(sq));
  if (nans) out += cat("  NaN ", nans);
  out += "  [";
  for (int64_t i = 0; i < std::min<int64_t>(t.size(), 4); ++i) {
    if (integer) out += cat(i ? ", " : "", t.as_int(i));
    else out += cat(i ? ", " : "", t[i]);
  }
  return out + (t.size() > 4 ? ", ...]" : "]");
}

std::vector<HostTensor> make_inputs(const Args& args, const ModelDef& model, const OpGraph& g) {
  if (auto dir = args.option("inputs")) return read_inputs(*dir, model);
  return random_inputs(g, static_cast<uint64_t>(args.int_option("seed", 0)));
}

int write_and_expect_outputs(const Args& args, const std::vector<HostTensor>& outputs, const std::vector<std::string>& names) {
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
        std::cout << "MISMATCH output " << i << " '" << (i < names.size() ? names[i] : cat("output_", i)) << "': " << r.message << "\n";
      }
    }
    if (bad) return 1;
    std::cout << "all " << outputs.size() << " outputs match " << *dir << "\n";
  }
  return 0;
}

std::vector<HostTensor> random_inputs(const OpGraph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < g.inputs().size(); ++i) out.push_back(random_input(g.tensor(g.inputs()[i]).type, seed * 1000003 + i));
  return out;
}

LowerOptions lower_options(const Args& args, const std::vector<HostTensor>* inputs, const ModelDef& model) {
  LowerOptions opts;
  opts.input_shapes = parse_shapes(args);
  for (const auto& [name, shape] : opts.input_shapes) {
    std::string known;
    bool found = false;
    for (const ValueDecl& v : model.inputs) {
      found |= v.name == name;
      known += cat(known.empty() ? "" : ", ", v.name);
    }
    if (!found) throw UserError("command line", "--shape", cat("the model has no input named '", name, "' (inputs: ", known, ")"));
  }
  if (inputs)
    for (size_t i = 0; i < model.inputs.size() && i < inputs->size(); ++i)
      opts.input_shapes.emplace(model.inputs[i].name, (*inputs)[i].shape());
  return opts;
}

// ---- Policies, cost models, schedules --------------------------------------------------------

std::unique_ptr<Policy> find_policy(const std::string& name) {
  std::string known;
  std::vector<std::string> names;
  for (auto& p : policies()) {
    if (p->name() == name) return std::move(p);
    known += (known.empty() ? "" : ", ") + std::string(p->name());
    names.emplace_back(p->name());
  }
  const std::string guess = nearest_word(name, names);
  throw UserError("command line", "--policy",
                  cat("unknown policy \"", name, "\" (", guess.empty() ? "" : cat("did you mean ", guess, "? "), "known: ", known, ")"));
}

std::string policy_options_help() {
  std::string out = "  --policy-opt NAME=VALUE[,NAME=VALUE...]  options of the policy; each policy's, with defaults:\n";
  for (auto& p : policies()) {
    std::string line = cat("             ", p->name(), ":");
    const std::vector<PolicyOption> options = p->options();
    if (options.empty()) line += " none";
    for (const PolicyOption& o : options) {
      const std::string item = cat(" ", o.name, "=", o.get());
      if (line.size() + item.size() > 100) {
        out += line + "\n";
        line = "              ";
      }
      line += item;
    }
    out += line + "\n";
  }
  return out;
}

std::unique_ptr<CostModel> find_cost_model(const std::string& name) {
  std::string known;
  for (auto& m : cost_models()) {
    if (m->name() == name) return std::move(m);
    known += (known.empty() ? "" : ", ") + std::string(m->name());
  }
  throw UserError("command line", "--cost-model", cat("unknown cost model \"", name, "\" (known: ", known, ")"));
}

std::vector<std::string> hw_spec_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TESSEL_HW_SPECS"); env && *env) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "share" / "tessel" / "hw_specs").string());
  dirs.emplace_back(TESSEL_BUILD_HW_SPECS_DIR);
  return dirs;
}

std::string resolve_hw_spec(const std::string& name_or_path) {
  std::error_code ec;
  const bool is_name = name_or_path.find('/') == std::string::npos && fs::path(name_or_path).extension() != ".json";
  if (!is_name || fs::is_regular_file(name_or_path, ec)) return name_or_path;
  std::set<std::string> shipped;
  for (const std::string& dir : hw_spec_dirs()) {
    const fs::path file = fs::path(dir) / (name_or_path + ".json");
    if (fs::is_regular_file(file, ec)) return file.string();
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") shipped.insert(e.path().stem().string());
  }
  std::vector<std::string> names(shipped.begin(), shipped.end());
  std::stable_sort(names.begin(), names.end(), [&](const std::string& x, const std::string& y) {
    return edit_distance(x, name_or_path) < edit_distance(y, name_or_path);
  });
  if (names.empty())
    throw UserError("command line", "--hw", cat("no spec file or shipped spec named '", name_or_path, "' (no shipped specs found; set TESSEL_HW_SPECS)"));
  std::string known;
  for (size_t i = 0; i < names.size() && i < 6; ++i) known += cat(i ? ", " : "", names[i]);
  throw UserError("command line", "--hw", cat("no spec file or shipped spec named '", name_or_path, "' (did you mean ", names.front(),
                                              "? shipped: ", known, names.size() > 6 ? ", ..." : "", ")"));
}

HwSpec load_cli_hw_spec(const std::string& name_or_path) { return load_hw_spec(resolve_hw_spec(name_or_path)); }

std::unique_ptr<CliPipeline> pipeline_options(const Args& args, const std::string& device) {
  auto p = std::make_unique<CliPipeline>();
  CompileRequest& r = p->request;
  r.backend = device;
  if (auto file = args.option("hw")) {
    r.spec = load_cli_hw_spec(*file);
    if (!device.empty() && !find_backend(device)->supports(*r.spec))
      throw UserError(*file, "/kind", cat("a '", r.spec->kind, "' spec; --device ", device, " needs another kind"));
  } else if (device.empty()) {
    throw UserError("command line", "", "--hw SPEC is required (a hardware spec, e.g. hw_specs/nvidia-h100-sxm.json)");
  }
  p->policy = find_policy(args.option_or("policy", std::string(policies().front()->name())));
  // --policy-opt NAME=VALUE[,NAME=VALUE...]: the policy's options (Policy::options).
  if (auto assignments = args.option("policy-opt")) {
    size_t start = 0;
    while (start <= assignments->size()) {
      const size_t end = std::min(assignments->find(',', start), assignments->size());
      if (std::string why = set_policy_option(*p->policy, assignments->substr(start, end - start)); !why.empty())
        throw UserError("command line", "--policy-opt", why);
      start = end + 1;
    }
  }
  p->cost = find_cost_model(args.option_or("cost-model", std::string(cost_models().front()->name())));
  r.policy = p->policy.get();
  r.cost = p->cost.get();
  if (auto file = args.option("schedule")) {
    r.schedule_json = read_regular_file(*file, kMaxScheduleFileBytes, "the schedule file");
    r.schedule_source = *file;
  }
  if (auto mode = args.option("sparse-kernels")) {
    if (*mode == "cost") r.sparse_kernels = SparseKernels::cost;
    else if (*mode == "dense") r.sparse_kernels = SparseKernels::dense;
    else if (*mode == "block_sparse") r.sparse_kernels = SparseKernels::block_sparse;
    else throw UserError("command line", "--sparse-kernels", cat("unknown choice \"", *mode, "\" (cost, dense, block_sparse)"));
  }
  r.options.threads = static_cast<int>(args.int_option("threads", 0, 0, 4096));
  if (auto dir = args.option("cache")) r.options.cache_dir = *dir;
  r.options.use_cache = !args.flag("no-cache");
  if (args.flag("no-normalize")) r.normalize = NormalizeOptions{false, false, 0, false, {}};
  if (args.option("tune")) {
    const int k = static_cast<int>(args.int_option("tune", 0, 1, 1000));
    if (args.option("schedule"))
      throw UserError("command line", "--tune", "a replayed --schedule is not tuned: tune when scheduling, then save it");
    const std::string backend = !device.empty() ? device : std::string(backend_for(*r.spec)->name());
    if (auto why = find_backend(backend)->unavailable())
      throw UserError("command line", "--tune", cat("measuring needs the device: '", backend, "' cannot run here: ", *why));
    MeasureOptions mo;
    mo.compile = r.options;
    mo.time_lock = args.option_or("time-lock", "");
    mo.timing.cold_cache = args.flag("cold-l2");
    mo.progress = true;
    p->measurer = std::make_unique<BackendMeasurer>(backend, mo);
    p->measure_cache = std::make_unique<MeasureCache>(r.options.cache_dir.empty() ? default_measure_cache_dir() : r.options.cache_dir);
    if (!p->policy->tune_with(p->measurer.get(), p->measure_cache.get(), k)) {
      std::string tuning;  // asked of fresh copies of the built-in policies
      for (auto& other : policies())
        if (other->tune_with(nullptr, nullptr, 1)) tuning += cat(tuning.empty() ? "" : ", ", other->name());
      throw UserError("command line", "--tune", cat("policy '", p->policy->name(), "' does not measure candidates (these do: ", tuning, ")"));
    }
  }
  return p;
}

void report_tuning(const CliPipeline& pipeline, const Schedule& schedule) {
  if (!pipeline.measurer) return;
  if (::isatty(2)) std::cerr << "\n";
  int groups = 0, trials = 0, measured = 0, faster = 0;
  double tuned_s = 0, first_s = 0;
  for (const ScheduleGroup& g : schedule.groups) {
    if (g.trials.empty()) continue;
    ++groups;
    trials += static_cast<int>(g.trials.size());
    for (const TuneTrial& t : g.trials) measured += t.measured_s.has_value();
    if (g.measured_s && g.trials.front().measured_s) {
      tuned_s += *g.measured_s;
      first_s += *g.trials.front().measured_s;
      faster += *g.measured_s < *g.trials.front().measured_s;
    }
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "tuned %d groups: %d candidates, %d measured (%d timed now in %.1f s, the rest from the cache); "
                "%d groups faster than the cost model's choice; %.3f ms measured vs %.3f ms for its choices\n",
                groups, trials, measured, pipeline.measurer->candidates(), pipeline.measurer->seconds_spent(), faster,
                tuned_s * 1e3, first_s * 1e3);
  std::cerr << line;
}

}  // namespace tessel
