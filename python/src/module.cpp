// tessel._tessel: the Python module (nanobind) over the compile() driver, the registries and the
// command line. The Python package (python/tessel/) wraps it; see python/README.md.
//
// What crosses the boundary:
//   compile       a model file, the pipeline's options as the CLI spells them (so the Python
//                 package and `tessel` check them the same way), a Compiled object back
//   Compiled      runs the executable on any DLPack / buffer-protocol array on the host (copied
//                 into and out of the executable's buffers) or, on a GPU, on device addresses the
//                 caller owns; its schedule, explanation, report and timings
//   policies      the registry, and policies written in Python (policy_bindings.cpp)
//   cli_main      the command line, for the package's `tessel` command (which loads --plugin files)
// Errors: tessel.UserError (a ValueError) and tessel.InternalError (a RuntimeError), one line each.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cost_model/cost_model.h"
#include "driver/compile.h"
#include "hw_specs/hw_spec.h"
#include "hw_specs/probe.h"
#include "kernels/packed_tensor.h"
#include "policy/policy.h"
#include "policy/schedule_json.h"
#include "python/src/bindings.h"
#include "tilegraph/compare.h"
#include "tilegraph/dtype.h"
#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessel::python {
namespace {

// ---- Arrays <-> HostTensor -------------------------------------------------------------------

using Array = nb::ndarray<nb::ro>;
// Returned as nanobind's array object: DLPack (`__dlpack__`) and the buffer protocol both read it.
using OutArray = nb::ndarray<nb::array_api>;

nb::dlpack::dtype dl_dtype(DType t) {
  using nb::dlpack::dtype_code;
  switch (t) {
    case DType::f64: return {uint8_t(dtype_code::Float), 64, 1};
    case DType::f32: return {uint8_t(dtype_code::Float), 32, 1};
    case DType::f16: return {uint8_t(dtype_code::Float), 16, 1};
    case DType::bf16: return {uint8_t(dtype_code::Bfloat), 16, 1};
    case DType::i64: return {uint8_t(dtype_code::Int), 64, 1};
    case DType::i32: return {uint8_t(dtype_code::Int), 32, 1};
    case DType::i8: return {uint8_t(dtype_code::Int), 8, 1};
    case DType::u8: return {uint8_t(dtype_code::UInt), 8, 1};
    case DType::boolean: return {uint8_t(dtype_code::Bool), 8, 1};
  }
  throw InternalError("dl_dtype: unknown dtype");
}

std::string dl_dtype_name(nb::dlpack::dtype d) {
  using nb::dlpack::dtype_code;
  const char* kind = d.code == uint8_t(dtype_code::Float)    ? "float"
                     : d.code == uint8_t(dtype_code::Bfloat) ? "bfloat"
                     : d.code == uint8_t(dtype_code::Int)    ? "int"
                     : d.code == uint8_t(dtype_code::UInt)   ? "uint"
                     : d.code == uint8_t(dtype_code::Bool)   ? "bool"
                                                             : "other";
  return cat(kind, int(d.bits), d.lanes != 1 ? cat("x", int(d.lanes)) : "");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? "," : "", shape[i]);
  return s + "]";
}

/// The array's shape, after checking that it is a host array of `type`'s shape and dtype (a
/// UserError naming the input otherwise).
std::vector<int64_t> checked_shape(const Array& a, const TensorType& type, const std::string& name) {
  if (a.device_type() != nb::device::cpu::value)
    throw UserError("input", name, "is not in host memory (device arrays go through Compiled.run_on_stream)");
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = a.shape(i);
  if (shape != type.shape)
    throw UserError("input", name, cat("has shape ", shape_text(shape), "; the model expects ", type.print()));
  if (a.dtype() != dl_dtype(type.dtype))
    throw UserError("input", name, cat("has dtype ", dl_dtype_name(a.dtype()), "; the model expects ", type.print()));
  return shape;
}

/// The array's values as a HostTensor of `type` (the model's input type): same shape, same dtype,
/// on the host; any strides. UserError naming the input otherwise.
HostTensor to_host(const Array& a, const TensorType& type, const std::string& name) {
  const std::vector<int64_t> shape = checked_shape(a, type, name);
  // Gather into the packed row-major form, then unpack (rounding, bool and half handling in one place).
  const int64_t n = type.num_elements();
  const int elem = dtype_bytes(type.dtype);
  std::vector<uint8_t> packed(static_cast<size_t>(n * elem));
  const auto* base = static_cast<const uint8_t*>(a.data());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += index[d] * a.stride(d);
    std::memcpy(packed.data() + i * elem, base + offset * elem, elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return unpack_tensor(type, packed.data());
}

/// The array's memory when it already holds `type` in the machine layout (host, same shape and
/// dtype, row-major contiguous): what Executable::run_in_place reads without a copy. nullptr when
/// it is strided; a UserError naming the input when its shape, dtype or device is wrong.
const void* packed_view(const Array& a, const TensorType& type, const std::string& name) {
  const std::vector<int64_t> shape = checked_shape(a, type, name);
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && a.stride(d) != expect) return nullptr;
    expect *= shape[d];
  }
  return a.data();
}

/// A host array of `type` in the machine layout, on memory aligned to `alignment` (a run_in_place
/// output: the kernels write it directly).
OutArray aligned_array(const TensorType& type, int64_t alignment) {
  const size_t align = static_cast<size_t>(std::max<int64_t>(alignment, 64));
  const size_t bytes = static_cast<size_t>(type.num_elements() * dtype_bytes(type.dtype));
  void* p = std::aligned_alloc(align, std::max<size_t>(align, (bytes + align - 1) / align * align));
  if (!p) throw UserError("outputs", "", cat("out of memory: ", bytes, " bytes for an output"));
  nb::capsule owner(p, [](void* q) noexcept { std::free(q); });
  std::vector<size_t> shape(type.shape.begin(), type.shape.end());
  return OutArray(p, shape.size(), shape.data(), owner, nullptr, dl_dtype(type.dtype), nb::device::cpu::value);
}

/// A host array owning the packed values of `t` (DLPack and the buffer protocol read it).
OutArray to_array(const HostTensor& t) {
  auto* bytes = new std::vector<uint8_t>(pack_tensor(t));
  nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  std::vector<size_t> shape(t.shape().begin(), t.shape().end());
  return OutArray(bytes->data(), shape.size(), shape.data(), owner, nullptr, dl_dtype(t.dtype()), nb::device::cpu::value);
}

/// A DLPack array in device memory as `Compiled.run` checks it: address (of its first element),
/// shape, dtype (Tessel's name, or DLPack's when Tessel has none), CUDA device, and whether it is
/// row-major contiguous. UserError when it is not in CUDA memory.
nb::dict device_array(const Array& a) {
  if (a.device_type() != nb::device::cuda::value)
    throw UserError("run", "device array", cat("is in DLPack device type ", a.device_type(), ", not CUDA memory"));
  nb::dict d;
  d["address"] = reinterpret_cast<uintptr_t>(a.data());
  std::vector<int64_t> shape(a.ndim());
  bool contiguous = true;
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    shape[i] = a.shape(i);
    if (shape[i] != 1 && a.stride(i) != expect) contiguous = false;
    expect *= shape[i];
  }
  d["shape"] = shape;
  std::string dtype = dl_dtype_name(a.dtype());
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64, DType::i32, DType::i8, DType::u8, DType::boolean})
    if (dl_dtype(t) == a.dtype()) dtype = std::string(dtype_name(t));
  d["dtype"] = dtype;
  d["device"] = a.device_id();
  d["contiguous"] = contiguous;
  return d;
}

nb::dict tensor_info(const OpGraph& g, TensorId t) {
  nb::dict d;
  d["name"] = g.tensor(t).name;
  d["shape"] = g.tensor(t).type.shape;
  d["dtype"] = std::string(dtype_name(g.tensor(t).type.dtype));
  return d;
}

// ---- compile ---------------------------------------------------------------------------------

struct CompileArgs {
  std::string model_path;
  std::optional<std::string> hw, device, policy, cost_model, schedule_path, cache_dir, sparse_kernels;
  std::map<std::string, std::string> policy_options;
  std::map<std::string, std::vector<int64_t>> shapes;
  bool use_cache = true, normalize = true;
  int threads = 0, tune = 0;
  std::string last = "load";
};

class Compiled {
 public:
  Compiled(std::unique_ptr<CliPipeline> pipeline, Compilation c) : pipeline_(std::move(pipeline)), c_(std::move(c)) {}

  const Compilation& compilation() const { return c_; }

  std::vector<OutArray> run(const std::vector<Array>& arrays) {
    Executable& exe = executable();
    // Contiguous host arrays of the model's dtypes run in place: the kernels read the inputs'
    // memory and write the outputs' (no conversion through HostTensor's doubles).
    const OpGraph& g = c_.graph;
    if (arrays.size() == g.inputs().size() && exe.in_place_alignment() > 0) {
      std::vector<const void*> in;
      for (size_t i = 0; i < arrays.size(); ++i) {
        const TensorInfo& info = g.tensor(g.inputs()[i]);
        if (const void* p = packed_view(arrays[i], info.type, info.name)) in.push_back(p);
        else break;
      }
      if (in.size() == arrays.size()) {
        std::vector<OutArray> out;
        std::vector<void*> dst;
        for (TensorId t : g.outputs()) {
          out.push_back(aligned_array(g.tensor(t).type, exe.in_place_alignment()));
          dst.push_back(out.back().data());
        }
        bool done = false;
        {
          nb::gil_scoped_release release;
          const std::lock_guard<std::mutex> lock(run_mutex_);
          done = exe.run_in_place(in, dst);
        }
        if (done) return out;
      }
    }
    std::vector<HostTensor> inputs = host_inputs(arrays);
    std::vector<HostTensor> outputs;
    {
      nb::gil_scoped_release release;
      const std::lock_guard<std::mutex> lock(run_mutex_);
      outputs = exe.run(inputs);
    }
    std::vector<OutArray> out;
    for (const HostTensor& t : outputs) out.push_back(to_array(t));
    return out;
  }

  /// The reference interpreter on the model as imported (fp64 accumulation).
  std::vector<OutArray> reference(const std::vector<Array>& arrays) const {
    std::vector<HostTensor> inputs = host_inputs(arrays);
    std::vector<HostTensor> outputs;
    {
      nb::gil_scoped_release release;
      outputs = interpret(reference_graph(), inputs);
    }
    std::vector<OutArray> out;
    for (const HostTensor& t : outputs) out.push_back(to_array(t));
    return out;
  }

  /// Runs the executable and the interpreter on `arrays` (random inputs when empty, from `seed`)
  /// and compares every output with the tolerance of its dtype (tilegraph/compare.h).
  nb::list check(const std::vector<Array>& arrays, uint64_t seed) {
    const std::vector<HostTensor> inputs = inputs_or_random(arrays, seed);
    Executable& exe = executable();
    std::vector<HostTensor> actual, expected;
    {
      nb::gil_scoped_release release;
      {
        const std::lock_guard<std::mutex> lock(run_mutex_);
        actual = exe.run(inputs);
      }
      expected = interpret(reference_graph(), inputs);
    }
    nb::list out;
    for (size_t i = 0; i < actual.size(); ++i) {
      const CompareResult r = compare_compiled(actual[i], expected[i], computed_precision(c_.graph, c_.graph.outputs()[i]));
      nb::dict d;
      d["output"] = c_.graph.tensor(c_.graph.outputs()[i]).name;
      d["ok"] = r.ok;
      d["max_abs_error"] = r.max_abs_error;
      d["rel_l2_error"] = r.rel_l2_error;
      d["message"] = r.message;
      out.append(d);
    }
    return out;
  }

  /// Zero-copy run on the caller's stream (GPU backends; Executable::run_on_queue): the kernels
  /// read the inputs at the caller's device addresses and write the outputs at the caller's, on
  /// the caller's CUDA stream (a CUstream handle; 0: the legacy default stream). Returns once
  /// the run is queued.
  void run_on_stream(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
    Executable& exe = executable();
    if (!exe.device_io() || !context_)
      throw UserError("run_on_stream", "", cat("the ", c_.backend->name(), " executable does not run on device memory"));
    const OpGraph& g = c_.graph;
    if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
      throw UserError("run_on_stream", "", cat("takes ", g.inputs().size(), " inputs and ", g.outputs().size(), " outputs, got ",
                                               inputs.size(), " and ", outputs.size()));
    const auto aligned = [&](uint64_t address, TensorId t, const char* what) {
      if (address % Executable::kDeviceAlignment != 0 && type_bytes(t) > 0)
        throw UserError(what, g.tensor(t).name, cat("is at device address ", address, ", not ", Executable::kDeviceAlignment, "-byte aligned"));
    };
    for (size_t i = 0; i < inputs.size(); ++i) aligned(inputs[i], g.inputs()[i], "input");
    for (size_t o = 0; o < outputs.size(); ++o) aligned(outputs[o], g.outputs()[o], "output");
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(run_mutex_);
    exe.run_on_queue(inputs, outputs, reinterpret_cast<void*>(static_cast<uintptr_t>(stream)));
  }

  /// Waits for the runs run_on_stream queued; raises the error a kernel reported.
  void synchronize() {
    if (!c_.executable) return;
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(run_mutex_);
    c_.executable->wait_queued();
  }

  /// The GPU the executable runs on (-1 for a host backend).
  int device_index() const { return context_ ? context_->device() : -1; }

  std::vector<double> time(const std::vector<Array>& arrays, int warmup, int repeats, bool cold_cache, bool graph) {
    const std::vector<HostTensor> inputs = inputs_or_random(arrays, 0);
    TimingOptions options;
    options.warmup = warmup;
    options.repeats = repeats;
    options.cold_cache = cold_cache;
    options.graph = graph;
    Executable& exe = executable();
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(run_mutex_);
    return exe.time(inputs, options);
  }

  std::string schedule_json() const { return schedule_to_json(c_.schedule, c_.graph); }

  std::string explain(const std::string& format, const std::vector<double>& measured_s) const {
    return explain_compilation(c_, *pipeline_->cost, format, measured_s);
  }

  /// Each kernel's measured time (Executable::profile), random inputs when none are given.
  std::vector<double> profile(const std::vector<Array>& arrays, int repeats) {
    const std::vector<HostTensor> inputs = inputs_or_random(arrays, 0);
    Executable& exe = executable();
    nb::gil_scoped_release release;
    const std::lock_guard<std::mutex> lock(run_mutex_);
    return exe.profile(inputs, repeats);
  }

  nb::dict report() const {
    nb::dict d;
    d["backend"] = std::string(c_.backend->name());
    d["hw"] = c_.spec.name;
    d["policy"] = c_.schedule.policy;
    d["cost_model"] = c_.schedule.cost_model;
    d["predicted_s"] = c_.schedule.predicted_latency_s;
    d["groups"] = c_.schedule.groups.size();
    nb::dict stages;
    for (const StageRecord& r : c_.stages)
      if (r.ran) stages[std::string(stage_name(r.stage)).c_str()] = r.seconds;
    d["stage_seconds"] = stages;
    nb::list kernels;
    for (const ScheduleGroup& g : c_.schedule.groups) {
      nb::dict k;
      std::vector<std::string> nodes;
      for (NodeId n : g.group.nodes) nodes.push_back(c_.graph.node(n).name());
      k["nodes"] = nodes;
      k["family"] = g.group.kernel.family;
      k["predicted_s"] = g.predicted.latency_s;
      k["flops"] = g.predicted.flops;
      k["bound"] = g.predicted.bound;
      if (g.measured_s) k["measured_s"] = *g.measured_s;
      kernels.append(k);
    }
    d["kernels"] = kernels;
    if (c_.executable) {
      const CompileStats& cs = c_.executable->compile_stats();
      d["compiled_kernels"] = cs.kernels;
      d["codegen_s"] = cs.codegen_s;
      d["compile_s"] = cs.compile_s;
      d["cache_hits"] = cs.cache_hits;
      d["peak_memory_bytes"] = c_.executable->peak_memory_bytes();
      d["launches_per_run"] = c_.executable->launches_per_run();
    }
    return d;
  }

  nb::list inputs() const {
    nb::list l;
    for (TensorId t : c_.graph.inputs()) l.append(tensor_info(c_.graph, t));
    return l;
  }
  nb::list outputs() const {
    nb::list l;
    for (TensorId t : c_.graph.outputs()) l.append(tensor_info(c_.graph, t));
    return l;
  }
  std::string ir() const { return c_.graph.print(); }
  bool loaded() const { return c_.executable != nullptr; }
  bool device_resident() const { return c_.executable && c_.executable->device_io() && context_; }

  void set_context(std::unique_ptr<DeviceContext> context) { context_ = std::move(context); }

 private:
  const OpGraph& reference_graph() const { return c_.reference.num_nodes() > 0 ? c_.reference : c_.graph; }

  Executable& executable() {
    if (!c_.executable) throw UserError("Compiled", "", "not loaded: compiled without running (last stage before 'load')");
    return *c_.executable;
  }

  int64_t type_bytes(TensorId t) const {
    const TensorType& type = c_.graph.tensor(t).type;
    return type.num_elements() * dtype_bytes(type.dtype);
  }

  /// The arrays as host tensors, or (none given) the CLI's random inputs for `seed`.
  std::vector<HostTensor> inputs_or_random(const std::vector<Array>& arrays, uint64_t seed) const {
    return arrays.empty() ? random_inputs(c_.graph, seed) : host_inputs(arrays);
  }

  std::vector<HostTensor> host_inputs(const std::vector<Array>& arrays) const {
    const OpGraph& g = c_.graph;
    if (arrays.size() != g.inputs().size())
      throw UserError("inputs", "", cat("the model takes ", g.inputs().size(), " inputs, got ", arrays.size()));
    std::vector<HostTensor> inputs;
    for (size_t i = 0; i < arrays.size(); ++i) inputs.push_back(to_host(arrays[i], g.tensor(g.inputs()[i]).type, g.tensor(g.inputs()[i]).name));
    return inputs;
  }

  // One run at a time: an executable's buffers (and, in place, its pointers to the caller's) are
  // shared by every call, and the GIL is released while it runs.
  std::mutex run_mutex_;
  std::unique_ptr<DeviceContext> context_;  // declared before c_: destroyed after the executable
  std::unique_ptr<CliPipeline> pipeline_;
  Compilation c_;
};

std::unique_ptr<Compiled> compile_model(const CompileArgs& a) {
  // The options as the CLI spells them: pipeline_options checks them exactly as `tessel` does.
  std::vector<std::string> argv;
  auto add = [&](const char* name, const std::optional<std::string>& v) {
    if (v) argv.insert(argv.end(), {cat("--", name), *v});
  };
  add("hw", a.hw);
  add("policy", a.policy);
  add("cost-model", a.cost_model);
  add("schedule", a.schedule_path);
  add("cache", a.cache_dir);
  add("sparse-kernels", a.sparse_kernels);
  if (!a.policy_options.empty()) {
    std::string joined;
    for (const auto& [k, v] : a.policy_options) joined += cat(joined.empty() ? "" : ",", k, "=", v);
    argv.insert(argv.end(), {"--policy-opt", joined});
  }
  if (a.threads) argv.insert(argv.end(), {"--threads", std::to_string(a.threads)});
  if (a.tune) argv.insert(argv.end(), {"--tune", std::to_string(a.tune)});
  if (!a.use_cache) argv.push_back("--no-cache");
  if (!a.normalize) argv.push_back("--no-normalize");
  const Args args("compile", argv, {"no-cache", "no-normalize"},
                  {"hw", "policy", "cost-model", "schedule", "cache", "sparse-kernels", "policy-opt", "threads", "tune"});

  // The device: as given, else the one the spec is for, else this host's CPU; "cuda:N" is the
  // backend "cuda" on GPU N.
  std::string device = a.device.value_or("");
  int device_index = 0;
  if (const size_t colon = device.find(':'); colon != std::string::npos) {
    const std::string index = device.substr(colon + 1);
    if (index.empty() || index.size() > 4 || index.find_first_not_of("0123456789") != std::string::npos)
      throw UserError("compile", "device", cat("'", device, "': the device index after ':' is not a number"));
    device_index = std::stoi(index);
    device = device.substr(0, colon);
    if (device != "cuda") throw UserError("compile", "device", cat("'", a.device.value_or(""), "': only cuda takes a device index"));
  }
  if (device.empty() && a.hw) device = std::string(backend_for(load_cli_hw_spec(*a.hw))->name());
  if (device.empty()) device = "cpu";
  std::unique_ptr<Backend> backend = find_backend(device);  // UserError naming the known ones

  std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, device);
  CompileRequest& r = pipeline->request;
  r.model_path = a.model_path;
  r.lower.input_shapes = a.shapes;
  r.last = stage_named(a.last);
  std::unique_ptr<DeviceContext> context;
  if (r.last == Stage::load) {
    if (auto why = backend->unavailable()) throw UserError("device", device, cat("cannot run here: ", *why));
    context = backend->device_context(device_index);  // null for the CPU
    r.options.context = context.get();
  }
  Compilation c;
  {
    nb::gil_scoped_release release;  // a Python policy takes the lock back while it runs
    c = compile(r);
  }
  auto out = std::make_unique<Compiled>(std::move(pipeline), std::move(c));
  out->set_context(std::move(context));
  return out;
}

// ---- hardware specs --------------------------------------------------------------------------

std::string hw_load(const std::string& name_or_path) { return write_hw_spec(load_cli_hw_spec(name_or_path)); }
std::string hw_resolve(const std::string& name_or_path) { return resolve_hw_spec(name_or_path); }
std::string hw_probe(const std::string& device, bool quick) {
  ProbeOptions options;
  options.quick = quick;
  nb::gil_scoped_release release;
  if (device == "cpu") return write_hw_spec(probe_host_cpu(options));
  if (device == "cuda") return write_hw_spec(probe_cuda_gpu(0, options));
  throw UserError("hw.probe", "device", cat("unknown device '", device, "' (cpu, cuda)"));
}

nb::list list_policies() {
  nb::list l;
  for (auto& p : policies()) {
    nb::dict d;
    d["name"] = std::string(p->name());
    d["description"] = std::string(p->description());
    nb::dict options;
    for (const PolicyOption& o : p->options()) options[o.name.c_str()] = nb::make_tuple(o.get(), o.description);
    d["options"] = options;
    l.append(d);
  }
  return l;
}

nb::list list_backends() {
  nb::list l;
  for (auto& b : backends()) {
    nb::dict d;
    d["name"] = std::string(b->name());
    d["description"] = std::string(b->description());
    d["formats"] = b->emit_formats();
    auto why = b->unavailable();
    d["available"] = !why.has_value();
    d["unavailable"] = why.value_or("");
    l.append(d);
  }
  return l;
}

int run_cli(const std::vector<std::string>& args) {
  nb::gil_scoped_release release;
  return cli_main(args);
}

}  // namespace
}  // namespace tessel::python

NB_MODULE(_tessel, m) {
  using namespace tessel;
  using namespace tessel::python;
  m.doc() = "Tessel's compiler pipeline (the C++ library); use the `tessel` package, not this module.";

  nb::exception<UserError>(m, "UserError", PyExc_ValueError);
  nb::exception<InternalError>(m, "InternalError", PyExc_RuntimeError);

  nb::class_<Compiled>(m, "Compiled")
      .def("run", &Compiled::run, "inputs"_a)
      .def("reference", &Compiled::reference, "inputs"_a)
      .def("check", &Compiled::check, "inputs"_a, "seed"_a = 0)
      .def("run_on_stream", &Compiled::run_on_stream, "inputs"_a, "outputs"_a, "stream"_a)
      .def("synchronize", &Compiled::synchronize)
      .def("time", &Compiled::time, "inputs"_a, "warmup"_a, "repeats"_a, "cold_cache"_a, "graph"_a)
      .def("schedule_json", &Compiled::schedule_json)
      .def("explain", &Compiled::explain, "format"_a, "measured_s"_a)
      .def("profile", &Compiled::profile, "inputs"_a, "repeats"_a)
      .def("report", &Compiled::report)
      .def("inputs", &Compiled::inputs)
      .def("outputs", &Compiled::outputs)
      .def("ir", &Compiled::ir)
      .def_prop_ro("loaded", &Compiled::loaded)
      .def_prop_ro("device_resident", &Compiled::device_resident)
      .def_prop_ro("device_index", &Compiled::device_index);

  m.def(
      "compile",
      [](const std::string& model, std::optional<std::string> hw, std::optional<std::string> device, std::optional<std::string> policy,
         std::map<std::string, std::string> policy_options, std::optional<std::string> cost_model,
         std::map<std::string, std::vector<int64_t>> shapes, std::optional<std::string> schedule, std::optional<std::string> cache_dir,
         bool use_cache, bool normalize, int threads, int tune, std::optional<std::string> sparse_kernels, std::string last) {
        CompileArgs a;
        a.model_path = model;
        a.hw = std::move(hw);
        a.device = std::move(device);
        a.policy = std::move(policy);
        a.policy_options = std::move(policy_options);
        a.cost_model = std::move(cost_model);
        a.shapes = std::move(shapes);
        a.schedule_path = std::move(schedule);
        a.cache_dir = std::move(cache_dir);
        a.use_cache = use_cache;
        a.normalize = normalize;
        a.threads = threads;
        a.tune = tune;
        a.sparse_kernels = std::move(sparse_kernels);
        a.last = std::move(last);
        return compile_model(a);
      },
      "model"_a, "hw"_a.none(), "device"_a.none(), "policy"_a.none(), "policy_options"_a, "cost_model"_a.none(), "shapes"_a,
      "schedule"_a.none(), "cache_dir"_a.none(), "use_cache"_a, "normalize"_a, "threads"_a, "tune"_a, "sparse_kernels"_a.none(),
      "last"_a);

  m.def("hw_load", &hw_load, "name_or_path"_a, "The spec (a shipped name or a file), checked, as JSON text.");
  m.def("hw_resolve", &hw_resolve, "name_or_path"_a, "The file a shipped spec name stands for.");
  m.def("hw_spec_dirs", &hw_spec_dirs, "The folders shipped specs are looked up in, in order.");
  m.def("hw_probe", &hw_probe, "device"_a, "quick"_a, "This machine's spec as JSON text.");
  m.attr("DEVICE_ALIGNMENT") = Executable::kDeviceAlignment;
  m.def("device_array", &device_array, "array"_a, "A DLPack device array's address, shape, dtype, device and contiguity.");
  m.def("policies", &list_policies);
  m.def("backends", &list_backends);
  m.def("cli_main", &run_cli, "args"_a, "Runs the `tessel` command line; returns its exit status.");
  bind_policies(m);
}
