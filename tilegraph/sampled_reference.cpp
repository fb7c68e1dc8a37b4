// Sampled reference values (see sampled_reference.h).
#include "tilegraph/sampled_reference.h"

#include <algorithm>
#include <exception>
#include <map>
#include <random>
#include <thread>

#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/tile_propagation.h"

namespace tessel {

namespace {

// The nodes `sink` depends on, itself included.
std::vector<NodeId> ancestors(const OpGraph& graph, NodeId sink) {
  std::vector<bool> seen(graph.num_nodes(), false);
  std::vector<NodeId> stack{sink}, out;
  seen[sink] = true;
  while (!stack.empty()) {
    const NodeId n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (TensorId t : graph.node_inputs(n))
      if (const NodeId p = graph.producer(t); p >= 0 && !seen[p]) {
        seen[p] = true;
        stack.push_back(p);
      }
  }
  return out;
}

// Box extents over `extents` holding about `target` points: the innermost axes first (a row-wise
// graph then needs few rows of its producers).
std::vector<int64_t> box_extents(const std::vector<int64_t>& extents, int64_t target) {
  std::vector<int64_t> box(extents.size(), 1);
  int64_t points = 1;
  for (int a = static_cast<int>(extents.size()) - 1; a >= 0; --a) {
    const int64_t want = (target + points - 1) / points;
    box[a] = std::max<int64_t>(1, std::min(extents[a], want));
    points *= box[a];
  }
  return box;
}

// Evaluates the group of `sink` on the sink box (begin, extent over its spatial axes); returns
// the sink's values over the box, row-major.
HostTensor evaluate_box(const OpGraph& graph, const std::vector<NodeId>& group, NodeId sink,
                        const std::vector<int64_t>& begin, const std::vector<int64_t>& extent,
                        const std::map<TensorId, const HostTensor*>& sources) {
  const GroupPropagation prop = propagate_group(graph, group, sink, tile_for_output(graph.node(sink), begin, extent));
  TESSEL_ASSERT(prop.ok, "sampling: propagation through the graph failed: ", prop.reason);
  std::map<NodeId, std::pair<HostTensor, std::vector<int64_t>>> computed;  // values, origin
  for (const NodeTile& nt : prop.nodes) {
    const TeNode& node = graph.node(nt.node);
    std::vector<TensorWindow> windows;
    for (TensorId t : graph.node_inputs(nt.node)) {
      const NodeId p = graph.producer(t);
      if (p >= 0) {
        const auto& [values, origin] = computed.at(p);
        windows.push_back({&values, origin});
      } else {
        windows.push_back({sources.at(t), {}});
      }
    }
    HostTensor values = evaluate_window(node, windows, DomainBox{nt.tile.begin, nt.tile.extent});
    std::vector<int64_t> origin(nt.tile.begin.begin(), nt.tile.begin.begin() + node.num_spatial());
    computed.emplace(nt.node, std::make_pair(std::move(values), std::move(origin)));
  }
  return std::move(computed.at(sink).first);
}

}  // namespace

double graph_flops(const OpGraph& graph) {
  double flops = 0;
  for (NodeId n = 0; n < graph.num_nodes(); ++n) flops += static_cast<double>(graph.node(n).flops());
  return flops;
}

HostTensor gather_elements(const HostTensor& tensor, const std::vector<int64_t>& flat_index) {
  std::vector<double> values;
  values.reserve(flat_index.size());
  for (int64_t i : flat_index) {
    TESSEL_ASSERT(i >= 0 && i < tensor.size(), "sample index ", i, " outside a tensor of ", tensor.size(), " elements");
    values.push_back(tensor[i]);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  return HostTensor(TensorType{tensor.dtype(), {n}}, std::move(values));
}

SampledReference interpret_sample(const OpGraph& graph, const std::vector<HostTensor>& inputs,
                                  const SampleOptions& options) {
  SampledReference result;
  if (inputs.size() != graph.inputs().size())
    throw UserError("", "", cat("the model has ", graph.inputs().size(), " inputs, ", inputs.size(), " were given"));
  // 1. Preconditions: every output computed by a node, no node reinterpreting its domain.
  for (TensorId t : graph.outputs())
    if (graph.producer(t) < 0) {
      result.reason = cat("output '", graph.tensor(t).name, "' is an input or a weight");
      return result;
    }
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const TeNode& node = graph.node(n);
    const std::vector<int64_t> e = node.extents();
    if (node.output().shape != std::vector<int64_t>(e.begin(), e.begin() + node.num_spatial())) {
      result.reason = cat("node '", node.name(), "' reinterprets its domain as ", node.output().print());
      return result;
    }
  }
  // 2. Every graph input and weight the sample may read, materialized once and shared.
  std::vector<HostTensor> weights;
  weights.reserve(graph.num_tensors());
  std::map<TensorId, const HostTensor*> sources;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type() != graph.tensor(graph.inputs()[i]).type)
      throw UserError("", cat("input '", graph.tensor(graph.inputs()[i]).name, "'"),
                      cat("expected ", graph.tensor(graph.inputs()[i]).type.print(), ", given ", inputs[i].type().print()));
    sources[graph.inputs()[i]] = &inputs[i];
  }
  for (TensorId t = 0; t < graph.num_tensors(); ++t)
    if (graph.tensor(t).kind == TensorKind::weight) {
      weights.push_back(graph.weight_values(t));
      sources[t] = &weights.back();
    }
  // 3. Per output, the boxes: the first corner, the last corner, then seeded random positions.
  struct Box {
    size_t output;
    std::vector<int64_t> begin, extent;
  };
  std::vector<Box> boxes;
  std::mt19937_64 rng(options.seed);
  const int nboxes = std::max(1, options.boxes);
  for (size_t o = 0; o < graph.outputs().size(); ++o) {
    const TeNode& sink = graph.node(graph.producer(graph.outputs()[o]));
    const std::vector<int64_t> all = sink.extents();
    const std::vector<int64_t> extents(all.begin(), all.begin() + sink.num_spatial());
    const std::vector<int64_t> box = box_extents(extents, (options.min_elements + nboxes - 1) / nboxes);
    for (int b = 0; b < nboxes; ++b) {
      std::vector<int64_t> begin(extents.size(), 0);
      for (size_t a = 0; a < extents.size(); ++a) {
        const int64_t room = extents[a] - box[a];
        begin[a] = b == 0 ? 0 : b == 1 ? room : std::uniform_int_distribution<int64_t>(0, room)(rng);
      }
      boxes.push_back({o, begin, box});
    }
  }
  // 4. Evaluate the boxes on parallel threads.
  std::vector<HostTensor> values(boxes.size());
  std::vector<std::exception_ptr> errors(boxes.size());
  {
    std::vector<std::thread> pool;
    for (size_t b = 0; b < boxes.size(); ++b)
      pool.emplace_back([&, b] {
        try {
          const NodeId sink = graph.producer(graph.outputs()[boxes[b].output]);
          values[b] = evaluate_box(graph, ancestors(graph, sink), sink, boxes[b].begin, boxes[b].extent, sources);
        } catch (...) {
          errors[b] = std::current_exception();
        }
      });
    for (std::thread& t : pool) t.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  // 5. Flat indices of the boxes' elements (row-major over the output) and their values.
  result.outputs.resize(graph.outputs().size());
  for (size_t b = 0; b < boxes.size(); ++b) {
    const Box& box = boxes[b];
    const std::vector<int64_t>& shape = graph.tensor(graph.outputs()[box.output]).type.shape;
    SampledOutput& out = result.outputs[box.output];
    std::vector<double> expected(out.expected.values());
    std::vector<int64_t> point(box.extent.size(), 0);
    for (int64_t i = 0; i < values[b].size(); ++i) {
      int64_t flat = 0;
      for (size_t a = 0; a < shape.size(); ++a) flat = flat * shape[a] + box.begin[a] + point[a];
      out.flat_index.push_back(flat);
      expected.push_back(values[b][i]);
      for (int a = static_cast<int>(point.size()) - 1; a >= 0; --a) {
        if (++point[a] < box.extent[a]) break;
        point[a] = 0;
      }
    }
    const int64_t n = static_cast<int64_t>(expected.size());
    out.expected = HostTensor(TensorType{graph.tensor(graph.outputs()[box.output]).type.dtype, {n}}, std::move(expected));
  }
  result.ok = true;
  return result;
}

}  // namespace tessel
