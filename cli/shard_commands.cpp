// `tessel shard` (a model's plan over a device mesh, priced) and `tessel run --mesh` (the model run
// over a mesh: ranks as threads of this process, or MPI processes under mpirun).
#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/args.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/device_commands.h"
#include "distributed/spmd_runner.h"
#include "policy/shard_plan.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"

namespace tessel {

namespace {

const char* kShardHelp =
    "usage: tessel shard MODEL --hw SPEC --mesh M [--shard \"T=L ...\"] [--exhaustive N]\n"
    "                    [--shape NAME=D0xD1...] [--no-normalize]\n"
    "  Chooses how MODEL is spread over a device mesh and prints the plan: each node's split, every\n"
    "  collective with its bytes, interconnect level and predicted time, and the predicted step time\n"
    "  (docs/distributed.md).\n"
    "  --mesh        the mesh: 2, 2x4, or named axes dp=2,tp=4\n"
    "  --hw          a spec whose interconnect prices the collectives (e.g. hw_specs/nvidia-h100-sxm-x2.json)\n"
    "  --shard       pins, space-separated: TENSOR=LAYOUT with one of R (replicated) or Sd (dimension\n"
    "                d sharded) per mesh axis, comma-separated: \"x=S0 w1=S1\" or \"w1=R,S1\"\n"
    "  --exhaustive  enumerate every plan when there are at most N (default 20000): the optimum\n"
    "  --descent     passes of coordinate descent after the forward pass (default 8; 0: none)\n";

Mesh mesh_option(const Args& args) {
  auto text = args.option("mesh");
  if (!text) throw UserError("command line", "", "--mesh is required (e.g. --mesh 2 or --mesh dp=2,tp=2)");
  return parse_mesh(*text, "--mesh");
}

ShardSearchOptions search_options(const Args& args, const Mesh& mesh) {
  ShardSearchOptions o;
  if (auto pins = args.option("shard")) {
    std::istringstream ss(*pins);
    std::string pin;
    while (ss >> pin) parse_pin(pin, mesh, o.constraints);
  }
  o.exhaustive_limit = args.int_option("exhaustive", o.exhaustive_limit, 0, int64_t{1} << 40);
  o.max_descent_passes = static_cast<int>(args.int_option("descent", o.max_descent_passes, 0, 1000));
  return o;
}

/// The model imported and normalized as compile() does, for the backend `device` (empty: none).
OpGraph normalized_graph(const Args& args, const std::string& model_path, CompileRequest request) {
  request.model_path = model_path;
  request.last = Stage::normalize;
  CompileRequest import_only;
  import_only.model_path = model_path;
  import_only.last = Stage::import;
  const Compilation imported = compile(import_only);
  request.model_path.clear();
  request.model = imported.model.get();
  request.lower = lower_options(args, nullptr, *imported.model);
  return compile(request).graph;
}

}  // namespace

int cmd_shard(const std::vector<std::string>& argv) {
  Args args("shard", argv, {"no-normalize", "help"}, {"mesh", "hw", "shard", "exhaustive", "descent", "shape"});
  if (args.flag("help")) { std::cout << kShardHelp; return 0; }
  const Mesh mesh = mesh_option(args);
  const std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, "");
  const HwSpec spec = pipeline->request.spec ? *pipeline->request.spec : machine_spec(*find_backend("cpu"));
  const OpGraph g = normalized_graph(args, args.one_positional("MODEL"), pipeline->request);
  const ShardSearch s = search_shard_plan(g, mesh, spec, search_options(args, mesh));
  std::cout << format_shard_plan(g, s.plan, s.cost, spec);
  std::cout << "searched " << s.plans_priced << " plans in " << s.seconds << " s ("
            << (s.exact ? "every plan: the optimum under the model" : "forward pass and coordinate descent")
            << "; forward pass alone " << s.greedy_s * 1e3 << " ms)\n";
  return 0;
}

int run_on_mesh(const Args& args) {
  const Mesh mesh = mesh_option(args);
  const auto device = args.option("device");
  const std::string model_path = args.one_positional("MODEL");
  std::unique_ptr<Communicator> mpi;
  std::string why_not;
  if (launched_by_mpi()) {
    mpi = mpi_communicator(&why_not);
    if (!mpi) throw UserError("", "", cat("--mesh under mpirun: ", why_not));
    if (mpi->size() != mesh.devices())
      throw UserError("command line", "--mesh",
                      cat("the mesh ", mesh.print(), " has ", mesh.devices(), " devices; mpirun started ", mpi->size(), " ranks"));
  }
  const bool speak = !mpi || mpi->rank() == 0;
  const std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, device.value_or("cpu"));
  if (device) require_runnable(*device);
  CompileRequest& base = pipeline->request;
  const HwSpec spec = base.spec ? *base.spec : machine_spec(*find_backend(device.value_or("cpu")));
  base.spec = spec;
  // Each rank's CPU kernels get their share of this host's threads.
  const int64_t local_ranks = mpi ? std::max<int64_t>(1, std::atoll(std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE") ? std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE") : "1"))
                                  : mesh.devices();
  if (!args.option("threads"))
    base.options.threads = static_cast<int>(std::max<int64_t>(1, std::thread::hardware_concurrency() / local_ranks));
  const OpGraph g = normalized_graph(args, model_path, base);
  const ShardSearch s = search_shard_plan(g, mesh, spec, search_options(args, mesh));
  if (speak) std::cout << format_shard_plan(g, s.plan, s.cost, spec);

  CompileRequest import_only;
  import_only.model_path = model_path;
  import_only.last = Stage::import;
  const Compilation imported = compile(import_only);
  const std::vector<HostTensor> inputs = make_inputs(args, *imported.model, g);
  const SegmentCompiler segments = device ? compiled_segments(base) : interpreter_segments();

  std::vector<std::vector<HostTensor>> outputs(mesh.devices());
  const auto start = Clock::now();
  if (mpi) {
    try {
      outputs[mpi->rank()] = run_sharded(g, s.plan, inputs, *mpi, segments);
    } catch (const std::exception& e) {
      std::cerr << "tessel: error: rank " << mpi->rank() << ": " << e.what() << "\n";
      mpi->abort();
      throw;
    }
  } else {
    std::vector<std::unique_ptr<Communicator>> comms = thread_mesh(mesh.devices());
    std::vector<std::exception_ptr> errors(mesh.devices());
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < mesh.devices(); ++r)
      threads.emplace_back([&, r] {
        try {
          outputs[r] = run_sharded(g, s.plan, inputs, *comms[r], segments);
        } catch (...) {
          errors[r] = std::current_exception();
          comms[r]->abort();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  const int64_t me = mpi ? mpi->rank() : 0;
  if (speak)
    std::cout << "ran '" << imported.model->name << "' on " << mesh.devices() << " ranks (" << (mpi ? "MPI processes" : "threads")
              << ", " << (device ? cat(*device, " kernels") : std::string("interpreter")) << ") in " << seconds_since(start)
              << " s\n";
  int status = 0;
  std::vector<HostTensor> expected;
  if (args.flag("check")) expected = interpret(g, inputs);
  for (size_t i = 0; i < outputs[me].size(); ++i) {
    std::string verdict;
    if (args.flag("check")) {
      // Every rank holds the whole output: each is compared.
      for (int64_t r = mpi ? me : 0; r < (mpi ? me + 1 : mesh.devices()); ++r) {
        const CompareResult c = compare_tensors(outputs[r][i], expected[i]);
        if (!c.ok) {
          status = 1;
          std::cout << "MISMATCH rank " << r << " output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << c.message << "\n";
        }
      }
      verdict = status ? "" : " (matches the single-device interpreter)";
    }
    if (speak) std::cout << "  output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[me][i]) << verdict << "\n";
  }
  return status;
}

}  // namespace tessel
