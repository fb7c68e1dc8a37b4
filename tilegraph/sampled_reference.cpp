// Sampled reference values (see sampled_reference.h).
#include "tilegraph/sampled_reference.h"

#include <algorithm>
#include <climits>
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

int64_t volume(const std::vector<int64_t>& extent) {
  int64_t v = 1;
  for (int64_t e : extent) v *= e;
  return v;
}

bool reinterprets(const TeNode& node) {
  const std::vector<int64_t> e = node.extents();
  return node.output().shape != std::vector<int64_t>(e.begin(), e.begin() + node.num_spatial());
}

// The values a node computed over the spatial part of its domain box, laid out in its output
// tensor's coordinates for consumers: for a node that reinterprets its domain (a Reshape), the
// bounding box in output coordinates of the elements computed (the ones consumers read are all
// among them; the rest of the box stays 0 and is never read).
std::pair<HostTensor, std::vector<int64_t>> as_output_window(const TeNode& node, HostTensor values,
                                                             const std::vector<int64_t>& begin) {
  const int ns = node.num_spatial();
  if (!reinterprets(node)) return {std::move(values), begin};
  const std::vector<int64_t> all = node.extents();
  const std::vector<int64_t> dom(all.begin(), all.begin() + ns);
  const std::vector<int64_t>& shape = node.output().shape;
  const std::vector<int64_t> box = values.shape();
  // Each computed point's output index, through the row-major linear index.
  auto output_index = [&](const std::vector<int64_t>& p, std::vector<int64_t>& out) {
    int64_t linear = 0;
    for (int a = 0; a < ns; ++a) linear = linear * dom[a] + begin[a] + p[a];
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      out[d] = linear % shape[d];
      linear /= shape[d];
    }
  };
  auto for_each_point = [&](auto&& f) {
    std::vector<int64_t> p(ns, 0);
    for (int64_t i = 0; i < values.size(); ++i) {
      f(i, p);
      for (int a = ns - 1; a >= 0; --a) {
        if (++p[a] < box[a]) break;
        p[a] = 0;
      }
    }
  };
  std::vector<int64_t> lo(shape.size(), INT64_MAX), hi(shape.size(), -1), idx(shape.size());
  for_each_point([&](int64_t, const std::vector<int64_t>& p) {
    output_index(p, idx);
    for (size_t d = 0; d < shape.size(); ++d) {
      lo[d] = std::min(lo[d], idx[d]);
      hi[d] = std::max(hi[d], idx[d]);
    }
  });
  std::vector<int64_t> extent(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) extent[d] = hi[d] - lo[d] + 1;
  HostTensor window(TensorType{node.output().dtype, extent});
  for_each_point([&](int64_t i, const std::vector<int64_t>& p) {
    output_index(p, idx);
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * extent[d] + idx[d] - lo[d];
    window.set_from(off, values, i);
  });
  return {std::move(window), lo};
}

// Evaluates the propagated boxes node by node; returns the sink's values over its domain box,
// row-major.
HostTensor evaluate_box(const OpGraph& graph, const GroupPropagation& prop, NodeId sink,
                        const std::map<TensorId, const HostTensor*>& sources) {
  std::map<NodeId, std::pair<HostTensor, std::vector<int64_t>>> computed;  // values, origin
  HostTensor result;
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
    if (nt.node == sink) {
      result = std::move(values);
      continue;
    }
    const std::vector<int64_t> begin(nt.tile.begin.begin(), nt.tile.begin.begin() + node.num_spatial());
    computed.emplace(nt.node, as_output_window(node, std::move(values), begin));
  }
  return result;
}

}  // namespace

double graph_flops(const OpGraph& graph) {
  double flops = 0;
  for (NodeId n = 0; n < graph.num_nodes(); ++n) flops += static_cast<double>(graph.node(n).flops());
  return flops;
}

HostTensor gather_elements(const HostTensor& tensor, const std::vector<int64_t>& flat_index) {
  const int64_t n = static_cast<int64_t>(flat_index.size());
  HostTensor out(TensorType{tensor.dtype(), {n}});
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = flat_index[k];
    TESSEL_ASSERT(i >= 0 && i < tensor.size(), "sample index ", i, " outside a tensor of ", tensor.size(), " elements");
    out.set_from(k, tensor, i);
  }
  return out;
}

SampledReference interpret_sample(const OpGraph& graph, const std::vector<HostTensor>& inputs,
                                  const SampleOptions& options) {
  SampledReference result;
  if (inputs.size() != graph.inputs().size())
    throw UserError("", "", cat("the model has ", graph.inputs().size(), " inputs, ", inputs.size(), " were given"));
  // 1. Preconditions: every output computed by a node.
  for (TensorId t : graph.outputs()) {
    if (graph.producer(t) < 0) {
      result.reason = cat("output '", graph.tensor(t).name, "' is an input or a weight");
      return result;
    }
    if (graph.tensor(t).type.num_elements() == 0) {
      result.reason = cat("output '", graph.tensor(t).name, "' has no elements");
      return result;
    }
  }
  if (graph.outputs().empty()) {
    result.reason = "the graph has no outputs";
    return result;
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
    GroupPropagation prop;
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
      boxes.push_back({o, begin, box, {}});
    }
  }
  // 4. Propagate every box backwards through the graph; a sample that would evaluate more than
  //    options.max_share of the whole graph's points is not worth it (the sample is evaluated point
  //    by point, the whole graph on the interpreter's vectorized, threaded path).
  int64_t whole_points = 0, sample_points = 0;
  for (NodeId n = 0; n < graph.num_nodes(); ++n) whole_points += volume(graph.node(n).extents());
  for (Box& b : boxes) {
    const NodeId sink = graph.producer(graph.outputs()[b.output]);
    b.prop = propagate_group(graph, ancestors(graph, sink), sink, tile_for_output(graph.node(sink), b.begin, b.extent));
    if (!b.prop.ok) {
      result.reason = cat("propagating a sample box failed: ", b.prop.reason);
      return result;
    }
    for (const NodeTile& nt : b.prop.nodes) sample_points += volume(nt.tile.extent);
  }
  if (options.max_share > 0 && static_cast<double>(sample_points) > options.max_share * static_cast<double>(whole_points)) {
    result.reason = cat("a sample would evaluate ", sample_points, " of the graph's ", whole_points,
                        " domain points, more than ", options.max_share * 100, "%");
    return result;
  }
  // 5. Evaluate the boxes on parallel threads.
  std::vector<HostTensor> values(boxes.size());
  std::vector<std::exception_ptr> errors(boxes.size());
  {
    std::vector<std::thread> pool;
    for (size_t b = 0; b < boxes.size(); ++b)
      pool.emplace_back([&, b] {
        try {
          values[b] = evaluate_box(graph, boxes[b].prop, graph.producer(graph.outputs()[boxes[b].output]), sources);
        } catch (...) {
          errors[b] = std::current_exception();
        }
      });
    for (std::thread& t : pool) t.join();
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  // 6. Flat indices of the boxes' elements and their values. The output's row-major flat index is
  //    the sink domain's row-major linear index, also when the sink reinterprets its domain.
  result.outputs.resize(graph.outputs().size());
  for (size_t b = 0; b < boxes.size(); ++b) {
    const Box& box = boxes[b];
    const TeNode& sink = graph.node(graph.producer(graph.outputs()[box.output]));
    const std::vector<int64_t> all = sink.extents();
    const std::vector<int64_t> shape(all.begin(), all.begin() + sink.num_spatial());
    SampledOutput& out = result.outputs[box.output];
    const DType dtype = graph.tensor(graph.outputs()[box.output]).type.dtype;
    // Integers are collected as integers (exact), the rest as doubles.
    const bool integer = is_integer(dtype);
    std::vector<double> expected = integer ? std::vector<double>{} : out.expected.values();
    std::vector<int64_t> expected_integers = integer ? out.expected.as_ints() : std::vector<int64_t>{};
    std::vector<int64_t> point(box.extent.size(), 0);
    for (int64_t i = 0; i < values[b].size(); ++i) {
      int64_t flat = 0;
      for (size_t a = 0; a < shape.size(); ++a) flat = flat * shape[a] + box.begin[a] + point[a];
      out.flat_index.push_back(flat);
      if (integer) expected_integers.push_back(values[b].as_int(i));
      else expected.push_back(values[b][i]);
      for (int a = static_cast<int>(point.size()) - 1; a >= 0; --a) {
        if (++point[a] < box.extent[a]) break;
        point[a] = 0;
      }
    }
    const int64_t n = static_cast<int64_t>(integer ? expected_integers.size() : expected.size());
    out.expected = integer ? HostTensor::from_integers(TensorType{dtype, {n}}, std::move(expected_integers))
                           : HostTensor(TensorType{dtype, {n}}, std::move(expected));
  }
  result.ok = true;
  return result;
}

}  // namespace tessel
