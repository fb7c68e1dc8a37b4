// `tessel shard` (a model's plan over a device mesh, priced) and `tessel run --mesh` (the model run
// over a mesh: ranks as threads of this process, or MPI processes under mpirun).
#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/device_commands.h"
#include "distributed/device_runner.h"
#include "distributed/spmd_runner.h"
#include "policy/shard_plan.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/graph_inputs.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/sampled_reference.h"

namespace tessel {

namespace {

const char* kShardHelp =
    "usage: tessel shard MODEL --hw SPEC --mesh M [--shard \"T=L ...\"] [--exhaustive N] [--z3-bound MS]\n"
    "                    [--overlap auto|on|off] [--no-schedule] [--shape NAME=D0xD1...] [--no-normalize]\n"
    "  Chooses how MODEL is spread over a device mesh and prints the plan: each node's split, every\n"
    "  collective with its bytes, interconnect level and predicted time, and the predicted step time\n"
    "  (docs/distributed.md).\n"
    "  --mesh        the mesh: 2, 2x4, or named axes dp=2,tp=4\n"
    "  --hw          a spec whose interconnect prices the collectives (e.g. hw_specs/nvidia-h100-sxm-x2.json)\n"
    "  --shard       pins, space-separated: TENSOR=LAYOUT with one of R (replicated) or Sd (dimension\n"
    "                d sharded) per mesh axis, comma-separated: \"x=S0 w1=S1\" or \"w1=R,S1\"\n"
    "  --exhaustive  enumerate every plan when there are at most N (default 20000): the optimum\n"
    "  --descent     passes of coordinate descent after the forward pass (default 8; 0: none)\n"
    "  --memory-per-device BYTES  the weights each device may hold (activations not counted)\n"
    "  --z3-bound MS after the search, z3 bounds it within MS milliseconds: no plan is priced below\n"
    "                the bound it proves; its own plan is kept when priced lower than the search's\n"
    "  --overlap     a node whose input is all-gathered runs in pieces while the blocks rotate around\n"
    "                the ring (Mercury's shift): where the model prices it lower (auto, the default),\n"
    "                wherever it can run (on), or never (off)\n"
    "  --no-schedule skip scheduling device 0's segments (the 'scheduled:' line: the step predicted\n"
    "                from the kernels the pipeline would emit rather than the search's roofline)\n";

std::string format_fixed(double v, int decimals) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(decimals);
  os << v;
  return os.str();
}

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
  o.memory_per_device_bytes = args.int_option("memory-per-device", 0, 0, int64_t{1} << 50);
  o.z3_bound_ms = args.int_option("z3-bound", 0, 0, int64_t{1} << 31);
  if (auto overlap = args.option("overlap")) o.overlap = parse_overlap(*overlap, "--overlap");
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

/// Device 0's program scheduled segment by segment by `base`'s policy and cost model: the
/// predicted kernel time of one step (the plan search's roofline replaced by the scheduler's
/// prediction of the kernels it would emit). Weight values are not materialized, so sparse
/// weights are priced dense here.
double scheduled_compute_s(const OpGraph& g, const ShardPlan& plan, CompileRequest base) {
  const ProgramCut cut = cut_program(partition(g, plan, 0, /*weight_values=*/false));
  double total = 0;
  for (const ProgramCut::Segment& seg : cut.segments) {
    base.model_path.clear();
    base.model = nullptr;
    base.graph = &seg.graph;
    base.last = Stage::schedule;
    total += compile(base).schedule.predicted_latency_s;
  }
  return total;
}

}  // namespace

int cmd_shard(const std::vector<std::string>& argv) {
  Args args("shard", argv, {"no-normalize", "no-schedule", "help"}, {"mesh", "hw", "shard", "exhaustive", "descent", "memory-per-device", "shape", "z3-bound", "overlap"});
  if (args.flag("help")) { std::cout << kShardHelp; return 0; }
  const Mesh mesh = mesh_option(args);
  const std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, "");
  const HwSpec spec = pipeline->request.spec ? *pipeline->request.spec : machine_spec(*find_backend("cpu"), pipeline->request.options);
  const OpGraph g = normalized_graph(args, args.one_positional("MODEL"), pipeline->request);
  const ShardSearch s = search_shard_plan(g, mesh, spec, search_options(args, mesh));
  std::cout << format_shard_plan(g, s.plan, s.cost, spec);
  if (!args.flag("no-schedule")) {
    const double kernels = scheduled_compute_s(g, s.plan, pipeline->request);
    std::cout << "scheduled: predicted " << (kernels + s.cost.communication_s) * 1e3 << " ms per step = kernels "
              << kernels * 1e3 << " ms (device 0's segments scheduled by " << pipeline->policy->name()
              << ") + communication " << s.cost.communication_s * 1e3 << " ms\n";
  }
  std::cout << "searched " << s.plans_priced << " plans in " << s.seconds << " s ("
            << (s.exact ? "every plan: the optimum under the model" : "forward pass and coordinate descent")
            << "; forward pass alone " << s.greedy_s * 1e3 << " ms)\n";
  if (s.bound) {
    const ShardBound& b = *s.bound;
    if (!b.why_not.empty()) {
      std::cout << "z3 bound: none (" << b.why_not << ", " << b.seconds << " s)\n";
    } else {
      std::cout << "z3 bound: no plan under " << b.lower_s * 1e3 << " ms (" << (b.optimal ? "proved" : "the bound when time ran out")
                << ", " << b.choices << " choices, " << b.seconds << " s); the search's plan "
                << s.heuristic_s * 1e3 << " ms is " << (b.lower_s > 0 ? cat(format_fixed((s.heuristic_s / b.lower_s - 1) * 100, 2), "% above it") : std::string("above it"));
      if (b.has_plan) std::cout << "; z3's plan priced " << b.plan_s * 1e3 << " ms" << (b.plan_s < s.heuristic_s * (1 - 1e-9) ? " (kept)" : "");
      std::cout << "\n";
    }
  }
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
  // Ranks as threads of this process: a mesh of at most this many (a larger one runs under mpirun).
  constexpr int64_t kMaxThreadRanks = 256;
  if (!mpi && mesh.devices() > kMaxThreadRanks)
    throw UserError("command line", "--mesh", cat("the mesh ", mesh.print(), " has ", mesh.devices(), " devices; ranks as threads of one process: at most ",
                                                  kMaxThreadRanks, " (start it under mpirun)"));
  const bool speak = !mpi || mpi->rank() == 0;
  // --tune measures each rank's segments on its CPU (ranks as threads take turns: see below).
  if (args.option("tune") && !device)
    throw UserError("command line", "--tune", "--tune measures compiled kernels: give --device cpu (--interp runs no kernels)");
  if (args.option("tune") && *device != "cpu")
    throw UserError("command line", "--tune", cat("--tune with --mesh measures CPU ranks only yet, not --device ", *device));
  // Saved schedules of the segments: replayed (--schedules) or written (--save-schedules), on CPU
  // ranks.
  SegmentSchedules saved{args.option_or("schedules", ""), args.option_or("save-schedules", "")};
  for (const char* option : {"schedules", "save-schedules"}) {
    if (!args.option(option)) continue;
    if (!device) throw UserError("command line", cat("--", option), "segment schedules are for compiled ranks: give --device cpu (--interp compiles nothing)");
    if (*device != "cpu") throw UserError("command line", cat("--", option), cat("segment schedules are for CPU ranks only yet, not --device ", *device));
  }
  if (args.option("schedules") && args.option("tune"))
    throw UserError("command line", "--tune", "replayed --schedules are not tuned: tune with --save-schedules, then replay them");
  const std::unique_ptr<CliPipeline> pipeline = pipeline_options(args, device.value_or("cpu"));
  if (device) require_runnable(*device);
  CompileRequest& base = pipeline->request;
  HwSpec spec;
  if (base.spec) spec = *base.spec;
  else if (!mpi || mpi->rank() == 0) spec = machine_spec(*find_backend(device.value_or("cpu")), base.options);
  // Every rank plans with rank 0's spec (a probe measures slightly different numbers on each),
  // so that every rank arrives at the same plan and program.
  if (mpi) spec = parse_hw_spec(mpi->broadcast(write_hw_spec(spec), 0), base.spec ? base.spec->file : "rank 0's probe");
  base.spec = spec;
  // Each rank's CPU kernels get their share of this host's threads.
  const int64_t local_ranks = mpi ? std::max<int64_t>(1, std::atoll(std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE") ? std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE") : "1"))
                                  : mesh.devices();
  if (!args.option("threads"))
    base.options.threads = static_cast<int>(std::max<int64_t>(1, std::thread::hardware_concurrency() / local_ranks));
  // Candidates are timed with the threads the rank runs them with.
  if (pipeline->measurer) pipeline->measurer->set_threads(base.options.threads);
  const OpGraph g = normalized_graph(args, model_path, base);
  CompileRequest import_only;
  import_only.model_path = model_path;
  import_only.last = Stage::import;
  const Compilation imported = compile(import_only);
  const std::vector<HostTensor> inputs = make_inputs(args, *imported.model, g);
  // (Given inputs must have the shapes the graph was lowered with: --shape binds open dimensions.)
  check_graph_inputs(g, inputs, args.option_or("inputs", "command line"), "the graph over the mesh; --shape NAME=DIMS sets an open dimension");
  ShardSearchOptions options = search_options(args, mesh);
  // Host ranks (threads, MPI processes) run a ring shift as an all-gather, not overlapped: they
  // take shifts only when asked to (--overlap on, to check such programs).
  if (!args.option("overlap") && !(device && *device != "cpu")) options.overlap = ShardSearchOptions::Overlap::off;
  const ShardSearch s = search_shard_plan(g, mesh, spec, options);
  if (speak) std::cout << format_shard_plan(g, s.plan, s.cost, spec);
  if (mpi) {
    // A check that every process planned alike (they run one program and must meet in its collectives).
    const std::string mine = format_shard_plan(g, s.plan, s.cost, spec);
    std::vector<double> same{mpi->broadcast(mine, 0) == mine ? 1.0 : 0.0};
    mpi->all_reduce(same, Combiner::min, [&] {
      std::vector<int64_t> all(mpi->size());
      for (int64_t r = 0; r < mpi->size(); ++r) all[r] = r;
      return all;
    }());
    if (same[0] != 1.0) throw UserError("", "--mesh", "the MPI ranks arrived at different shard plans (is the model the same file on every host?)");
  }

  const bool on_gpu = device && find_backend(*device)->device_count() > 0 && *device != "cpu";
  double predicted_kernels_s = 0;
  std::vector<std::vector<HostTensor>> outputs(mesh.devices());
  const auto start = Clock::now();
  const int repeats = static_cast<int>(args.int_option("time", 0, 0, 1000000));
  std::vector<std::vector<double>> times(mesh.devices());
  ShardedTiming cpu_timing;  // CPU ranks: every step's time on its slowest rank
  cpu_timing.repeats = on_gpu ? 0 : repeats;
  bool graph_used = false;
  if (on_gpu) {
    // One thread per GPU of this process, NCCL between them, every tensor resident.
    if (mpi) throw UserError("command line", "--device", "--device cuda with --mesh runs one process driving its GPUs; start it without mpirun");
    const std::unique_ptr<Backend> backend = find_backend(*device);
    if (backend->device_count() < mesh.devices())
      throw UserError("command line", "--mesh", cat("the mesh ", mesh.print(), " needs ", mesh.devices(), " GPUs; this machine has ",
                                                    backend->device_count()));
    std::string why;
    std::vector<std::unique_ptr<DeviceCommunicator>> comms = nccl_mesh(mesh.devices(), &why);
    if (comms.empty()) throw UserError("", "", cat("--mesh on GPUs: ", why));
    std::vector<std::exception_ptr> errors(mesh.devices());
    std::vector<std::thread> threads;
    TimingOptions timing;
    timing.repeats = repeats;
    timing.graph = !args.flag("no-graph");
    for (int64_t r = 0; r < mesh.devices(); ++r)
      threads.emplace_back([&, r] {
        try {
          std::unique_ptr<DeviceContext> ctx = backend->device_context(static_cast<int>(r));
          DeviceSpmdRunner runner(partition(g, s.plan, r), base, *ctx, *comms[r]);
          std::vector<HostTensor> pieces;
          for (size_t i = 0; i < inputs.size(); ++i) pieces.push_back(take_piece(inputs[i], s.plan.inputs[i], mesh, r));
          runner.set_inputs(pieces);
          runner.enqueue_step();
          outputs[r] = runner.outputs();
          if (repeats > 0) times[r] = runner.time(timing, r == 0 ? &graph_used : nullptr);
          if (r == 0) predicted_kernels_s = runner.predicted_kernels_s();
        } catch (...) {
          errors[r] = std::current_exception();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    // Each device holds its pieces: put the whole outputs together.
    std::vector<HostTensor> whole;
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      std::vector<HostTensor> pieces;
      for (int64_t r = 0; r < mesh.devices(); ++r) pieces.push_back(outputs[r][i]);
      whole.push_back(assemble(pieces, g.tensor(g.outputs()[i]).type.shape, s.plan.outputs[i], mesh));
    }
    for (auto& o : outputs) o = whole;
  } else if (mpi) {
    const SegmentCompiler segments = device ? compiled_segments(base, nullptr, saved) : interpreter_segments();
    try {
      outputs[mpi->rank()] = run_sharded(g, s.plan, inputs, *mpi, segments, &cpu_timing);
    } catch (const std::exception& e) {
      std::cerr << "tessel: error: rank " << mpi->rank() << ": " << e.what() << "\n";
      mpi->abort();
      throw;
    }
  } else {
    // Ranks as threads share the tuning policy: their compiles (and so their measurements) take
    // turns.
    std::mutex tuning;
    const SegmentCompiler segments =
        device ? compiled_segments(base, pipeline->measurer ? &tuning : nullptr, saved) : interpreter_segments();
    std::vector<std::unique_ptr<Communicator>> comms = thread_mesh(mesh.devices());
    std::vector<std::exception_ptr> errors(mesh.devices());
    std::vector<std::thread> threads;
    // (Every rank runs the timed steps -- they meet in collectives --; rank 0's record is shown.)
    std::vector<ShardedTiming> rank_timing(mesh.devices(), cpu_timing);
    for (int64_t r = 0; r < mesh.devices(); ++r)
      threads.emplace_back([&, r] {
        try {
          outputs[r] = run_sharded(g, s.plan, inputs, *comms[r], segments, &rank_timing[r]);
        } catch (...) {
          errors[r] = std::current_exception();
          comms[r]->abort();
        }
      });
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    cpu_timing = rank_timing[0];
  }
  const int64_t me = mpi ? mpi->rank() : 0;
  const double ran_s = seconds_since(start);
  if (speak)
    std::cout << "compiled and ran '" << imported.model->name << "' on " << mesh.devices() << " ranks ("
              << (on_gpu ? "GPUs, NCCL" : mpi ? "MPI processes" : "threads") << ", "
              << (device ? cat(*device, " kernels") : std::string("interpreter")) << ") in " << ran_s << " s\n";
  if (speak && pipeline->measurer)
    std::cout << "tuned every rank's segments" << (mpi ? " (rank 0's count)" : "") << ": " << pipeline->measurer->candidates()
              << " candidates measured now in " << pipeline->measurer->seconds_spent() << " s, the rest from the measurement cache\n";
  if (repeats > 0 && speak && !on_gpu) {
    std::vector<double> t = cpu_timing.step_s;
    std::sort(t.begin(), t.end());
    if (device)
      std::cout << "predicted: " << s.cost.total_s() * 1e3 << " ms per step (the plan's roofline: compute "
                << s.cost.compute_s * 1e3 << " ms + communication " << s.cost.communication_s * 1e3 << " ms)\n";
    std::cout << "time: " << t[t.size() / 2] * 1e3 << " ms per step (median of " << repeats << " steps, min " << t.front() * 1e3
              << ", max " << t.back() * 1e3 << "; wall clock of the slowest rank, ranks as "
              << (mpi ? "MPI processes" : "threads of this process") << ", " << (device ? cat(*device, " kernels") : std::string("interpreter"))
              << ")\n";
  }
  if (repeats > 0 && speak && on_gpu) {
    // A step ends when its slowest device ends; every device's median is shown.
    std::string per;
    double slowest = 0;
    for (int64_t r = 0; r < mesh.devices(); ++r) {
      std::vector<double> t = times[r];
      std::sort(t.begin(), t.end());
      const double median = t[t.size() / 2];
      slowest = std::max(slowest, median);
      per += cat(r ? ", " : "", median * 1e3);
    }
    std::cout << "predicted (scheduled): " << (predicted_kernels_s + s.cost.communication_s) * 1e3 << " ms per step = kernels "
              << predicted_kernels_s * 1e3 << " ms (device 0's segments) + communication " << s.cost.communication_s * 1e3 << " ms\n";
    std::cout << "time: " << slowest * 1e3 << " ms per step (median of " << repeats << ", the slowest device; per device "
              << per << " ms; GPU time, " << (graph_used ? "CUDA-graph replays" : "direct launches") << ", L2 warm)\n";
  }
  int status = 0;
  // What --report records of each checked output (rank, output, ok, relative L2 error).
  nlohmann::ordered_json checked = nlohmann::ordered_json::array();
  std::string check_mode;
  if (args.flag("check")) {
    // The single-device interpreter: whole, or on a sample of every output for large graphs.
    std::vector<HostTensor> expected;
    std::vector<std::vector<int64_t>> index(g.outputs().size());
    if (graph_flops(g) > kWholeCheckMaxFlops) {
      SampledReference sampled = interpret_sample(g, inputs);
      if (sampled.ok)
        for (size_t i = 0; i < g.outputs().size(); ++i) {
          index[i] = std::move(sampled.outputs[i].flat_index);
          expected.push_back(std::move(sampled.outputs[i].expected));
        }
    }
    check_mode = expected.empty() ? "whole" : "sampled";
    if (expected.empty()) expected = interpret(g, inputs);
    // Under mpirun each rank checks its own outputs; rank 0's report gathers every rank's.
    const int64_t outs = static_cast<int64_t>(g.outputs().size());
    std::vector<double> gathered(mpi ? static_cast<size_t>(mesh.devices() * outs * 2) : 0, 0.0);
    for (int64_t r = mpi ? me : 0; r < (mpi ? me + 1 : mesh.devices()); ++r)
      for (size_t i = 0; i < g.outputs().size(); ++i) {
        const HostTensor actual = index[i].empty() ? outputs[r][i] : gather_elements(outputs[r][i], index[i]);
        const CompareResult c = device ? compare_compiled(actual, expected[i], computed_precision(g, g.outputs()[i]))
                                       : compare_tensors(actual, expected[i]);
        if (mpi) {
          gathered[static_cast<size_t>((r * outs + static_cast<int64_t>(i)) * 2)] = c.ok ? 1.0 : 0.0;
          gathered[static_cast<size_t>((r * outs + static_cast<int64_t>(i)) * 2 + 1)] = c.rel_l2_error;
        } else {
          checked.push_back({{"rank", r}, {"name", g.tensor(g.outputs()[i]).name}, {"ok", c.ok}, {"rel_l2_error", c.rel_l2_error}});
        }
        if (!c.ok) {
          status = 1;
          std::cout << "MISMATCH rank " << r << " output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << c.message << "\n";
        }
      }
    if (mpi) {
      std::vector<int64_t> all(static_cast<size_t>(mpi->size()));
      for (int64_t r = 0; r < mpi->size(); ++r) all[static_cast<size_t>(r)] = r;
      mpi->all_reduce(gathered, Combiner::sum, all);  // every slot is written by one rank
      for (int64_t r = 0; r < mesh.devices(); ++r)
        for (int64_t i = 0; i < outs; ++i)
          checked.push_back({{"rank", r}, {"name", g.tensor(g.outputs()[static_cast<size_t>(i)]).name},
                             {"ok", gathered[static_cast<size_t>((r * outs + i) * 2)] == 1.0},
                             {"rel_l2_error", gathered[static_cast<size_t>((r * outs + i) * 2 + 1)]}});
    }
  }
  for (size_t i = 0; i < outputs[me].size(); ++i)
    if (speak)
      std::cout << "  output " << i << " '" << g.tensor(g.outputs()[i]).name << "': " << describe(outputs[me][i])
                << (args.flag("check") && status == 0 ? " (matches the single-device interpreter)" : "") << "\n";
  // Every rank holds the whole outputs; rank 0 writes them and compares them with --expect.
  if (speak && write_and_expect_outputs(args, outputs[me], imported.model->outputs)) status = 1;
  if (const auto report = args.option("report"); report && speak) {
    // (Under mpirun rank 0 writes it: every rank's checks, gathered above, and the slowest rank's
    // step times.)
    nlohmann::ordered_json r;
    r["mesh"] = mesh.print();
    r["devices"] = mesh.devices();
    r["ranks"] = on_gpu ? "GPUs of this process, NCCL" : mpi ? "MPI processes" : "threads of this process";
    r["backend"] = device ? *device : std::string("interpreter");
    r["hw_spec"] = spec.name;
    std::vector<std::string> plan_lines;
    std::istringstream plan_text(format_shard_plan(g, s.plan, s.cost, spec));
    for (std::string line; std::getline(plan_text, line);) plan_lines.push_back(line);
    r["plan"] = plan_lines;
    r["predicted"] = {{"compute_s", s.cost.compute_s}, {"communication_s", s.cost.communication_s}, {"total_s", s.cost.total_s()}};
    if (on_gpu) r["predicted"]["scheduled_kernels_s"] = predicted_kernels_s;
    r["run_s"] = ran_s;
    r["repeats"] = repeats;
    // (Times of outputs that failed the check are not reported, as on one device.)
    const bool timed = repeats > 0 && status == 0;
    if (timed && on_gpu) {
      // A step's time is its slowest device's: each device's times, and the slowest median.
      nlohmann::ordered_json per = nlohmann::ordered_json::array();
      double slowest = 0;
      for (const std::vector<double>& t : times) {
        per.push_back(t);
        std::vector<double> sorted = t;
        std::sort(sorted.begin(), sorted.end());
        if (!sorted.empty()) slowest = std::max(slowest, sorted[sorted.size() / 2]);
      }
      r["times_s_per_device"] = per;
      r["median_s"] = slowest;
      r["timing"] = {{"method", graph_used ? "CUDA-graph replays between events" : "launches between events"},
                     {"per_step", "the slowest device's median"}, {"cache", "warm"}};
    } else if (timed) {
      std::vector<double> t = cpu_timing.step_s;
      r["times_s"] = t;
      std::sort(t.begin(), t.end());
      r["median_s"] = t.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(t[t.size() / 2]);
      r["timing"] = {{"method", "wall time"}, {"per_step", "the slowest rank's"}, {"cache", "warm"}};
    }
    r["checked"] = args.flag("check");
    if (args.flag("check")) r["check_mode"] = check_mode;
    r["outputs"] = checked;
    write_file_atomically(*report, r.dump(1) + "\n");
    std::cout << "wrote " << *report << "\n";
  }
  return status;
}

}  // namespace tessel
