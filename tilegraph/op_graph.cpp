// OpGraph storage on a Boost adjacency list, topological ordering, and graph transformations.
#include "tilegraph/op_graph.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <unordered_map>

#include <boost/graph/adjacency_list.hpp>

#include "tilegraph/error.h"

namespace tessel {

namespace {
struct EdgeData {
  TensorId tensor;
  int slot;  // input position at the consumer
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, NodeId, EdgeData>;
}  // namespace

// Non-zero maps of sparse weights, computed on first use. A copied graph starts with an empty
// cache (its tensors may change after the copy).
struct NonzeroCache {
  std::mutex mutex;
  std::map<TensorId, std::shared_ptr<const NonzeroMap>> maps;
  NonzeroCache() = default;
  NonzeroCache(const NonzeroCache&) {}
  NonzeroCache& operator=(const NonzeroCache&) {
    std::lock_guard<std::mutex> lock(mutex);
    maps.clear();
    return *this;
  }
};

struct OpGraph::Impl {
  Graph graph;  // vertex i is node i
  NonzeroCache nonzero;
  std::vector<NodeRef> nodes;
  std::vector<std::vector<TensorId>> node_inputs;
  std::vector<TensorId> node_outputs;
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string, TensorId> by_name;
  std::vector<TensorId> inputs, weights, outputs;
};

OpGraph::OpGraph() : impl_(std::make_unique<Impl>()) {}
OpGraph::~OpGraph() = default;
OpGraph::OpGraph(const OpGraph& o) : impl_(std::make_unique<Impl>(*o.impl_)) {}
OpGraph& OpGraph::operator=(const OpGraph& o) {
  if (this != &o) impl_ = std::make_unique<Impl>(*o.impl_);
  return *this;
}
OpGraph::OpGraph(OpGraph&&) noexcept = default;
OpGraph& OpGraph::operator=(OpGraph&&) noexcept = default;

TensorId OpGraph::add_tensor(TensorInfo info) {
  TESSEL_ASSERT(!impl_->by_name.count(info.name), "duplicate tensor name '", info.name, "'");
  const TensorId id = static_cast<TensorId>(impl_->tensors.size());
  impl_->by_name.emplace(info.name, id);
  impl_->tensors.push_back(std::move(info));
  return id;
}

TensorId OpGraph::add_input(const std::string& name, const TensorType& type) {
  const TensorId id = add_tensor({name, type, TensorKind::input, -1, std::nullopt});
  impl_->inputs.push_back(id);
  return id;
}

TensorId OpGraph::add_weight(const std::string& name, const TensorType& type, WeightSource source,
                            std::optional<Sparsity> sparsity) {
  if (auto* data = std::get_if<std::shared_ptr<const HostTensor>>(&source))
    TESSEL_ASSERT(*data && (*data)->type() == type, "weight '", name, "' data does not match ",
                  type.print());
  if (sparsity) TESSEL_ASSERT(check_sparsity(*sparsity, type.shape).empty(), "weight '", name, "': ", check_sparsity(*sparsity, type.shape));
  const TensorId id = add_tensor({name, type, TensorKind::weight, -1, std::move(source), sparsity});
  impl_->weights.push_back(id);
  return id;
}

TensorId OpGraph::add_node(NodeRef node, const std::vector<TensorId>& inputs,
                           const std::string& output_name) {
  TESSEL_ASSERT(node, "null node");
  TESSEL_ASSERT(inputs.size() == node->inputs().size(), "node '", node->name(), "' has ",
                node->inputs().size(), " inputs, given ", inputs.size());
  const NodeId id = static_cast<NodeId>(impl_->nodes.size());
  boost::add_vertex(id, impl_->graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSEL_ASSERT(inputs[i] >= 0 && inputs[i] < num_tensors(), "bad tensor id ", inputs[i]);
    const TensorInfo& t = impl_->tensors[inputs[i]];
    TESSEL_ASSERT(t.type == node->inputs()[i].type, "node '", node->name(), "' input ", i,
                  " expects ", node->inputs()[i].type.print(), ", tensor '", t.name, "' is ",
                  t.type.print());
    if (t.producer >= 0)
      boost::add_edge(t.producer, id, EdgeData{inputs[i], static_cast<int>(i)}, impl_->graph);
  }
  impl_->nodes.push_back(node);
  impl_->node_inputs.push_back(inputs);
  const TensorId out = add_tensor({output_name, node->output(), TensorKind::intermediate, id, std::nullopt});
  impl_->node_outputs.push_back(out);
  return out;
}

void OpGraph::mark_output(TensorId t) {
  TESSEL_ASSERT(t >= 0 && t < num_tensors(), "bad tensor id ", t);
  if (std::find(impl_->outputs.begin(), impl_->outputs.end(), t) == impl_->outputs.end())
    impl_->outputs.push_back(t);
}

void OpGraph::rename_tensor(TensorId t, const std::string& name) {
  TESSEL_ASSERT(t >= 0 && t < num_tensors(), "bad tensor id ", t);
  TESSEL_ASSERT(!impl_->by_name.count(name), "duplicate tensor name '", name, "'");
  impl_->by_name.erase(impl_->tensors[t].name);
  impl_->tensors[t].name = name;
  impl_->by_name.emplace(name, t);
}

int OpGraph::num_nodes() const { return static_cast<int>(impl_->nodes.size()); }
int OpGraph::num_tensors() const { return static_cast<int>(impl_->tensors.size()); }
const TeNode& OpGraph::node(NodeId n) const { return *impl_->nodes.at(n); }
const NodeRef& OpGraph::node_ref(NodeId n) const { return impl_->nodes.at(n); }
const std::vector<TensorId>& OpGraph::node_inputs(NodeId n) const { return impl_->node_inputs.at(n); }
TensorId OpGraph::node_output(NodeId n) const { return impl_->node_outputs.at(n); }
const TensorInfo& OpGraph::tensor(TensorId t) const { return impl_->tensors.at(t); }
const std::vector<TensorId>& OpGraph::inputs() const { return impl_->inputs; }
const std::vector<TensorId>& OpGraph::weights() const { return impl_->weights; }
const std::vector<TensorId>& OpGraph::outputs() const { return impl_->outputs; }
NodeId OpGraph::producer(TensorId t) const { return tensor(t).producer; }

std::optional<TensorId> OpGraph::find_tensor(const std::string& name) const {
  auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return std::nullopt;
  return it->second;
}

std::vector<NodeId> OpGraph::consumers(TensorId t) const {
  std::set<NodeId> out;
  const NodeId p = producer(t);
  if (p >= 0) {
    for (auto [e, end] = boost::out_edges(p, impl_->graph); e != end; ++e)
      if (impl_->graph[*e].tensor == t) out.insert(static_cast<NodeId>(boost::target(*e, impl_->graph)));
  } else {
    for (NodeId n = 0; n < num_nodes(); ++n)
      for (TensorId in : impl_->node_inputs[n])
        if (in == t) out.insert(n);
  }
  return {out.begin(), out.end()};
}

std::vector<NodeId> OpGraph::topological_order() const {
  // Kahn's algorithm over the Boost structure with a min-heap, so the order is stable.
  const int n = num_nodes();
  std::vector<int> indegree(n, 0);
  for (NodeId v = 0; v < n; ++v) indegree[v] = static_cast<int>(boost::in_degree(v, impl_->graph));
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (NodeId v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push(v);
  std::vector<NodeId> order;
  while (!ready.empty()) {
    const NodeId v = ready.top();
    ready.pop();
    order.push_back(v);
    for (auto [e, end] = boost::out_edges(v, impl_->graph); e != end; ++e) {
      const auto w = static_cast<NodeId>(boost::target(*e, impl_->graph));
      if (--indegree[w] == 0) ready.push(w);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    for (NodeId v = 0; v < n; ++v)
      if (indegree[v] > 0)
        throw UserError("", cat("node '", node(v).name(), "'"),
                        cat("the graph has a cycle through tensor '",
                            tensor(node_output(v)).name, "'"));
  }
  return order;
}

HostTensor OpGraph::weight_values(TensorId t) const {
  const TensorInfo& info = tensor(t);
  TESSEL_ASSERT(info.kind == TensorKind::weight && info.weight, "'", info.name, "' is not a weight");
  return weight_source_values(*info.weight, info.type, info.sparsity);
}

HostTensor weight_source_values(const WeightSource& source, const TensorType& type, const std::optional<Sparsity>& sparsity) {
  HostTensor values = [&] {
    if (auto* data = std::get_if<std::shared_ptr<const HostTensor>>(&source)) return **data;
    return materialize_random(type, std::get<RandomInit>(source));
  }();
  return sparsity ? apply_sparsity(std::move(values), *sparsity) : values;
}

std::shared_ptr<const NonzeroMap> OpGraph::nonzero_map(TensorId t) const {
  const TensorInfo& info = tensor(t);
  TESSEL_ASSERT(info.kind == TensorKind::weight && info.sparsity, "'", info.name, "' is not a sparse weight");
  NonzeroCache& cache = impl_->nonzero;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto it = cache.maps.find(t); it != cache.maps.end()) return it->second;
  }
  auto map = std::make_shared<const NonzeroMap>(tessel::nonzero_map(weight_values(t)));
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.maps.emplace(t, std::move(map)).first->second;
}

std::string OpGraph::print() const {
  std::string out;
  for (TensorId t : inputs()) out += cat("input ", tensor(t).name, ": ", tensor(t).type.print(), "\n");
  for (TensorId t : weights()) {
    const TensorInfo& info = tensor(t);
    out += cat("weight ", info.name, ": ", info.type.print());
    if (auto* r = std::get_if<RandomInit>(&*info.weight))
      out += cat(r->dist == RandomInit::Dist::normal ? " normal(" : " uniform(", r->a, ", ", r->b,
                 ") seed ", r->seed);
    if (info.sparsity) out += cat(" sparsity ", print_sparsity(*info.sparsity));
    out += "\n";
  }
  for (NodeId n : topological_order()) {
    std::vector<std::string> names;
    for (TensorId in : node_inputs(n)) names.push_back(tensor(in).name);
    out += print_node(node(n), names, tensor(node_output(n)).name);
  }
  for (TensorId t : outputs()) out += cat("output ", tensor(t).name, "\n");
  return out;
}

OpGraph extract_subgraph(const OpGraph& graph, const std::vector<NodeId>& keep) {
  std::set<NodeId> kept(keep.begin(), keep.end());
  OpGraph sub;
  std::map<TensorId, TensorId> remap;
  auto bring = [&](TensorId t) {
    if (auto it = remap.find(t); it != remap.end()) return it->second;
    const TensorInfo& info = graph.tensor(t);
    const TensorId id = info.kind == TensorKind::weight
                            ? sub.add_weight(info.name, info.type, *info.weight, info.sparsity)
                            : sub.add_input(info.name, info.type);
    remap[t] = id;
    return id;
  };
  for (NodeId n : graph.topological_order()) {
    if (!kept.count(n)) continue;
    std::vector<TensorId> ins;
    for (TensorId t : graph.node_inputs(n)) ins.push_back(bring(t));
    const TensorId out = graph.node_output(n);
    remap[out] = sub.add_node(graph.node_ref(n), ins, graph.tensor(out).name);
  }
  const std::set<TensorId> graph_outputs(graph.outputs().begin(), graph.outputs().end());
  for (NodeId n : graph.topological_order()) {
    if (!kept.count(n)) continue;
    const TensorId out = graph.node_output(n);
    bool used_outside = graph_outputs.count(out) > 0;
    for (NodeId c : graph.consumers(out)) used_outside |= !kept.count(c);
    if (used_outside) sub.mark_output(remap.at(out));
  }
  return sub;
}

OpGraph eliminate_dead_nodes(const OpGraph& graph) {
  std::vector<bool> live(graph.num_nodes(), false);
  std::vector<NodeId> stack;
  for (TensorId t : graph.outputs())
    if (graph.producer(t) >= 0) stack.push_back(graph.producer(t));
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    if (live[n]) continue;
    live[n] = true;
    for (TensorId t : graph.node_inputs(n))
      if (graph.producer(t) >= 0) stack.push_back(graph.producer(t));
  }
  OpGraph out;
  std::map<TensorId, TensorId> remap;
  for (TensorId t : graph.inputs()) remap[t] = out.add_input(graph.tensor(t).name, graph.tensor(t).type);
  std::set<TensorId> used;
  for (NodeId n = 0; n < graph.num_nodes(); ++n)
    if (live[n])
      for (TensorId t : graph.node_inputs(n)) used.insert(t);
  for (TensorId t : graph.outputs()) used.insert(t);
  for (TensorId t : graph.weights())
    if (used.count(t)) remap[t] = out.add_weight(graph.tensor(t).name, graph.tensor(t).type, *graph.tensor(t).weight,
                                graph.tensor(t).sparsity);
  for (NodeId n : graph.topological_order()) {
    if (!live[n]) continue;
    std::vector<TensorId> ins;
    for (TensorId t : graph.node_inputs(n)) ins.push_back(remap.at(t));
    const TensorId o = graph.node_output(n);
    remap[o] = out.add_node(graph.node_ref(n), ins, graph.tensor(o).name);
  }
  for (TensorId t : graph.outputs()) out.mark_output(remap.at(t));
  return out;
}

}  // namespace tessel
