// BackendMeasurer (measure.h): one candidate group cut out, compiled, checked and timed.
#include "driver/measure.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "driver/compile.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/sampled_reference.h"

#include <unistd.h>

namespace tessel {

struct BackendMeasurer::Reference {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> expected;                  // per output: whole, or the sample's values
  std::vector<std::vector<int64_t>> sample_index;    // per output: empty when whole
};

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The group's nodes as a graph of their own and the candidate as its one-group schedule. The
// subgraph numbers its nodes in the graph's topological order (extract_subgraph).
std::pair<OpGraph, Schedule> cut_out(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  OpGraph sub = extract_subgraph(graph, group.nodes);
  const std::set<NodeId> kept(group.nodes.begin(), group.nodes.end());
  std::map<NodeId, NodeId> node_id;
  for (NodeId n : graph.topological_order())
    if (kept.count(n)) node_id.emplace(n, static_cast<NodeId>(node_id.size()));
  ScheduledGroup g;
  g.stream_chunk = group.stream_chunk;
  g.kernel = group.kernel;
  for (NodeId n : group.nodes) {
    g.nodes.push_back(node_id.at(n));
    g.tiles[node_id.at(n)] = group.tiles.at(n);
  }
  for (const auto& [t, level] : group.edge_levels) {
    const NodeId p = graph.producer(t);
    TESSEL_ASSERT(p >= 0 && kept.count(p), "edge level for a tensor not produced in the group");
    g.edge_levels[sub.node_output(node_id.at(p))] = level;
  }
  Schedule s;
  s.policy = "measure";
  s.hw_spec = spec.name;
  s.hw_spec_hash = hw_spec_hash(spec);
  s.groups.emplace_back().group = std::move(g);
  return {std::move(sub), std::move(s)};
}

}  // namespace

BackendMeasurer::BackendMeasurer(std::string backend, MeasureOptions options)
    : backend_(std::move(backend)), options_(std::move(options)) {}

BackendMeasurer::~BackendMeasurer() = default;

std::string BackendMeasurer::context() const {
  std::string out = options_.compile.threads > 0 ? cat("threads=", options_.compile.threads) : std::string();
  if (options_.timing.cold_cache) out += out.empty() ? "cold" : " cold";
  return out;
}

std::optional<double> BackendMeasurer::measure(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  ++candidates_;
  failure_.clear();
  std::optional<double> seconds = measure_one(graph, group, spec);
  spent_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options_.progress && ::isatty(2)) {
    std::fprintf(stderr, "\rtune: %d candidates measured (%.1f s)   ", candidates_, spent_s_);
    std::fflush(stderr);
  }
  return seconds;
}

std::optional<double> BackendMeasurer::measure_one(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) {

  auto [sub, schedule] = cut_out(graph, group, spec);
  // The reference: one per group structure (candidates of a group share their inputs and outputs).
  const std::string key = sub.print();
  auto it = references_.find(key);
  if (it == references_.end()) {
    auto ref = std::make_unique<Reference>();
    for (size_t i = 0; i < sub.inputs().size(); ++i) {
      const TensorType& type = sub.tensor(sub.inputs()[i]).type;
      const bool fp = is_float(type.dtype);
      ref->inputs.push_back(materialize_random(
          type, RandomInit{RandomInit::Dist::uniform, fp ? -1.0 : 0.0, fp ? 1.0 : 4.0, options_.seed * 1000003 + i}));
    }
    ref->sample_index.resize(sub.outputs().size());
    if (options_.check) {
      if (graph_flops(sub) > options_.whole_check_max_flops) {
        SampleOptions so;
        so.seed = options_.seed;
        so.max_share = 0;  // one group: the sample is never dearer than the whole
        SampledReference sampled = interpret_sample(sub, ref->inputs, so);
        if (sampled.ok)
          for (SampledOutput& o : sampled.outputs) {
            ref->sample_index[&o - sampled.outputs.data()] = std::move(o.flat_index);
            ref->expected.push_back(std::move(o.expected));
          }
      }
      if (ref->expected.empty()) ref->expected = interpret(sub, ref->inputs);
    }
    it = references_.emplace(key, std::move(ref)).first;
  }
  const Reference& ref = *it->second;

  CompileRequest request;
  request.graph = &sub;
  request.backend = backend_;
  request.spec = spec;
  request.schedule = schedule;
  request.schedule_source = "candidate";
  request.options = options_.compile;
  Compilation compiled;
  try {
    compiled = compile(request);
  } catch (const UserError& e) {
    failure_ = cat("not compiled: ", e.message());
    return std::nullopt;
  }
  Executable& exe = *compiled.executable;
  if (options_.check) {
    const std::vector<HostTensor> outputs = exe.run(ref.inputs);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::vector<int64_t>& index = ref.sample_index[i];
      const HostTensor actual = index.empty() ? outputs[i] : gather_elements(outputs[i], index);
      const CompareResult r = compare_compiled(actual, ref.expected[i], computed_precision(sub, sub.outputs()[i]));
      if (!r.ok) {
        failure_ = cat("output '", sub.tensor(sub.outputs()[i]).name, "' does not match the interpreter: ", r.message);
        return std::nullopt;
      }
    }
  }
  std::vector<double> times;
  {
    const FileLock lock(options_.time_lock, "time lock");
    times = exe.time(ref.inputs, options_.timing);
  }
  if (times.empty()) {
    failure_ = "no timed runs";
    return std::nullopt;
  }
  return median(times);
}

}  // namespace tessel
