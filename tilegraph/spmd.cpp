#include "tilegraph/spmd.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "tilegraph/error.h"

namespace tessel {

namespace {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Calls f(src_index, dst_index) for every element of a box of `box` elements at `origin` of a
/// tensor of `shape` (dst_index: the element's position in the box, row-major).
template <typename F>
void for_box(const std::vector<int64_t>& shape, const std::vector<int64_t>& origin, const std::vector<int64_t>& box, F f) {
  const std::vector<int64_t> strides = row_major_strides(shape);
  int64_t count = 1;
  for (int64_t e : box) count *= e;
  if (count == 0) return;
  const int rank = static_cast<int>(box.size());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t src = 0;
    for (int d = 0; d < rank; ++d) src += (origin[d] + idx[d]) * strides[d];
    f(src, k);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < box[d]) break;
      idx[d] = 0;
    }
  }
}


class Partitioner {
 public:
  Partitioner(const OpGraph& graph, const ShardPlan& plan, int64_t device, bool with_values)
      : g_(graph), plan_(plan), device_(device), with_values_(with_values) {
    prog_.mesh = plan.mesh;
    prog_.device = device;
    prog_.input_layouts = plan.inputs;
    prog_.output_layouts = plan.outputs;
  }

  SpmdProgram run() {
    const Mesh& mesh = plan_.mesh;
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      const TensorId t = g_.inputs()[i];
      const TensorInfo& info = g_.tensor(t);
      const TensorId id = prog_.local.add_input(info.name, {info.type.dtype, local_shape(info.type.shape, plan_.inputs[i], mesh)});
      avail_[t].push_back({plan_.inputs[i], id});
    }
    for (NodeId n : g_.topological_order()) {
      const TeNode& node = g_.node(n);
      const ShardedNode sn = std::get<ShardedNode>(shard_node(node, plan_.nodes[n], mesh));
      std::vector<TensorId> ins;
      for (size_t i = 0; i < g_.node_inputs(n).size(); ++i) ins.push_back(obtain(g_.node_inputs(n)[i], sn.inputs[i]));
      const TensorId out = g_.node_output(n);
      const TensorId id = prog_.local.add_node(local_node(node, plan_.nodes[n], mesh), ins, g_.tensor(out).name);
      avail_[out].push_back({sn.output, id});
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const TensorId id = obtain(g_.outputs()[i], plan_.outputs[i]);
      prog_.outputs.push_back(id);
      prog_.local.mark_output(id);
    }
    return std::move(prog_);
  }

 private:
  struct Held {
    TensorLayout layout;
    TensorId id;
  };

  /// The local tensor holding graph tensor `t` in `layout`, made from one it is held in.
  TensorId obtain(TensorId t, const TensorLayout& layout) {
    const TensorInfo& info = g_.tensor(t);
    std::vector<Held>& held = avail_[t];
    for (const Held& h : held)
      if (h.layout == layout) return h.id;
    if (info.kind == TensorKind::weight) return weight_piece(t, layout);
    // From the holding that needs the fewest collectives.
    std::vector<TensorLayout> layouts;
    for (const Held& h : held) layouts.push_back(h.layout);
    const std::optional<Conversion> conv = cheapest_conversion(layouts, layout);
    if (!conv)
      throw UserError("", "", cat("shard plan: tensor '", info.name, "' is needed in layout ", print_layout(layout),
                          " but no collective makes it from ", held.empty() ? "nothing" : print_layout(held[0].layout)));
    TensorLayout cur = held[conv->from].layout;
    TensorId id = held[conv->from].id;
    for (const LayoutStep& step : conv->steps) {
      const TensorLayout next = after_step(cur, step);
      if (auto why = check_layout(info.type.shape, next, plan_.mesh))
        throw UserError("", "", cat("shard plan: tensor '", info.name, "' cannot pass through layout ", print_layout(next), ": ", *why));
      const std::string name = cat(info.name, "@", ++renames_);
      const TensorType type{info.type.dtype, local_shape(info.type.shape, next, plan_.mesh)};
      if (step.kind == LayoutStep::Kind::slice) {
        id = slice(id, step, name);
      } else {
        id = transfer(id, step, name, info);
        TESSEL_ASSERT(prog_.local.tensor(id).type == type, "a transfer of '", info.name, "' made ",
                      prog_.local.tensor(id).type.print(), ", not ", type.print());
      }
      cur = next;
      held.push_back({cur, id});
    }
    return id;
  }

  /// The collective of `step` on local tensor `src`: layout changes around it are nodes of the
  /// local graph, so that the collective itself moves contiguous blocks (Transfer's comment).
  TensorId transfer(TensorId src, const LayoutStep& step, const std::string& name, const TensorInfo& info) {
    const int64_t parts = plan_.mesh.shape[step.mesh_axis];
    TensorId source = src;
    if (step.collective == Collective::reduce_scatter) source = blocks(src, step.dim, parts, name + ".blocks");
    if (step.collective == Collective::all_to_all) source = blocks(src, step.to_dim, parts, name + ".blocks");
    prog_.local.mark_output(source);
    TensorType result = prog_.local.tensor(source).type;
    switch (step.collective) {
      case Collective::all_gather: result.shape.insert(result.shape.begin(), parts); break;
      case Collective::reduce_scatter: result.shape.erase(result.shape.begin()); break;
      default: break;
    }
    const bool joined = step.collective == Collective::all_gather || step.collective == Collective::all_to_all;
    const TensorId id = prog_.local.add_input(joined ? name + ".ranks" : name, result);
    prog_.transfers.push_back({step, source, id, info.name, info.type});
    return joined ? join(id, step.dim, name) : id;
  }

  /// [P, piece...] (block k from device k of the group) as one tensor joined along `dim`.
  TensorId join(TensorId src, int dim, const std::string& name) {
    const TensorType& in = prog_.local.tensor(src).type;
    const int rank = in.rank() - 1;
    const int64_t parts = in.shape[0];
    NodeSpec spec;
    spec.name = name;
    std::vector<int> axis_of_dim(rank);  // the domain axis reading each piece dimension
    int p_axis = -1;
    for (int d = 0; d < rank; ++d) {
      if (d == dim) {
        p_axis = static_cast<int>(spec.axes.size());
        spec.axes.push_back({"p", parts, AxisKind::spatial});
      }
      axis_of_dim[d] = static_cast<int>(spec.axes.size());
      spec.axes.push_back({cat("d", d), in.shape[d + 1], AxisKind::spatial});
    }
    std::vector<int> select{p_axis};
    select.insert(select.end(), axis_of_dim.begin(), axis_of_dim.end());
    spec.inputs.push_back({in, AffineMap::select_axes(static_cast<int>(spec.axes.size()), select)});
    spec.body = input(0, in.dtype);
    std::vector<int64_t> out(in.shape.begin() + 1, in.shape.end());
    out[dim] *= parts;
    spec.output_shape = out;
    return prog_.local.add_node(make_node(std::move(spec)), {src}, name);
  }

  /// `src` cut along `dim` into `parts` blocks laid one after another: [parts, shape with dim / parts].
  TensorId blocks(TensorId src, int dim, int64_t parts, const std::string& name) {
    const TensorType& in = prog_.local.tensor(src).type;
    const int64_t piece = in.shape[dim] / parts;
    NodeSpec spec;
    spec.name = name;
    spec.axes.push_back({"p", parts, AxisKind::spatial});
    std::vector<AffineExpr> results;
    for (int d = 0; d < in.rank(); ++d) {
      spec.axes.push_back({cat("d", d), d == dim ? piece : in.shape[d], AxisKind::spatial});
      AffineExpr e;
      e.coeffs.assign(in.rank() + 1, 0);
      e.coeffs[d + 1] = 1;
      if (d == dim) e.coeffs[0] = piece;
      results.push_back(e);
    }
    spec.inputs.push_back({in, AffineMap(in.rank() + 1, results)});
    spec.body = input(0, in.dtype);
    return prog_.local.add_node(make_node(std::move(spec)), {src}, name);
  }

  /// This device's piece of `src` cut along step.dim over step.mesh_axis (no communication).
  TensorId slice(TensorId src, const LayoutStep& step, const std::string& name) {
    const TensorType& in = prog_.local.tensor(src).type;
    const int64_t parts = plan_.mesh.shape[step.mesh_axis];
    const int64_t coord = plan_.mesh.coords(device_)[step.mesh_axis];
    NodeSpec spec;
    spec.name = name;
    std::vector<AffineExpr> results;
    for (int d = 0; d < in.rank(); ++d) {
      const int64_t extent = d == step.dim ? in.shape[d] / parts : in.shape[d];
      spec.axes.push_back({cat("d", d), extent, AxisKind::spatial});
      AffineExpr e;
      e.coeffs.assign(in.rank(), 0);
      e.coeffs[d] = 1;
      if (d == step.dim) e.offset = coord * extent;
      results.push_back(e);
    }
    spec.inputs.push_back({in, AffineMap(in.rank(), results)});
    spec.body = input(0, in.dtype);
    return prog_.local.add_node(make_node(std::move(spec)), {src}, name);
  }

  TensorId weight_piece(TensorId t, const TensorLayout& layout) {
    const TensorInfo& info = g_.tensor(t);
    if (!with_values_) {  // shapes only: a stand-in init of the piece's shape, dense
      const TensorType type{info.type.dtype, local_shape(info.type.shape, layout, plan_.mesh)};
      const bool first = avail_[t].empty();
      const TensorId id = prog_.local.add_weight(first ? info.name : cat(info.name, "@", ++renames_), type, RandomInit{});
      avail_[t].push_back({layout, id});
      return id;
    }
    if (!full_.count(t)) full_[t] = std::make_shared<HostTensor>(g_.weight_values(t));
    auto piece = std::make_shared<const HostTensor>(take_piece(*full_[t], layout, plan_.mesh, device_));
    std::optional<Sparsity> sparsity = info.sparsity;
    if (sparsity) {
      sparsity->density = 0;  // the piece's zeros are the pattern (the whole was pruned)
      if (!check_sparsity(*sparsity, piece->shape()).empty()) sparsity.reset();
    }
    const bool first = avail_[t].empty();
    const TensorId id = prog_.local.add_weight(first ? info.name : cat(info.name, "@", ++renames_), piece->type(), piece, sparsity);
    avail_[t].push_back({layout, id});
    return id;
  }

  const OpGraph& g_;
  const ShardPlan& plan_;
  int64_t device_;
  bool with_values_;
  SpmdProgram prog_;
  std::map<TensorId, std::vector<Held>> avail_;
  std::map<TensorId, std::shared_ptr<HostTensor>> full_;
  int renames_ = 0;
};

}  // namespace

ShardPlan replicated_plan(const OpGraph& graph, const Mesh& mesh) {
  ShardPlan plan;
  plan.mesh = mesh;
  plan.nodes.assign(graph.num_nodes(), NodeSharding{std::vector<int>(mesh.rank(), -1)});
  plan.inputs.assign(graph.inputs().size(), replicated_layout(mesh));
  plan.outputs.assign(graph.outputs().size(), replicated_layout(mesh));
  return plan;
}

std::optional<std::string> check_plan(const OpGraph& graph, const ShardPlan& plan) {
  if (static_cast<int>(plan.nodes.size()) != graph.num_nodes())
    return cat("the plan shards ", plan.nodes.size(), " nodes of a graph of ", graph.num_nodes());
  if (plan.inputs.size() != graph.inputs().size() || plan.outputs.size() != graph.outputs().size())
    return "the plan's input or output layouts do not match the graph's inputs and outputs";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const TensorInfo& info = graph.tensor(graph.inputs()[i]);
    if (auto why = check_layout(info.type.shape, plan.inputs[i], plan.mesh)) return cat("input '", info.name, "': ", *why);
    for (const AxisLayout& l : plan.inputs[i])
      if (l.kind == AxisLayout::Kind::partial) return cat("input '", info.name, "' cannot be given as partial values");
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const TensorInfo& info = graph.tensor(graph.outputs()[i]);
    if (auto why = check_layout(info.type.shape, plan.outputs[i], plan.mesh)) return cat("output '", info.name, "': ", *why);
    for (const AxisLayout& l : plan.outputs[i])
      if (l.kind == AxisLayout::Kind::partial) return cat("output '", info.name, "' cannot be returned as partial values");
  }
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    auto sn = shard_node(graph.node(n), plan.nodes[n], plan.mesh);
    if (auto* why = std::get_if<std::string>(&sn)) return cat("node '", graph.node(n).name(), "': ", *why);
  }
  return std::nullopt;
}

SpmdProgram partition(const OpGraph& graph, const ShardPlan& plan, int64_t device, bool weight_values) {
  if (auto why = check_plan(graph, plan)) throw UserError("", "", cat("shard plan: ", *why));
  TESSEL_ASSERT(device >= 0 && device < plan.mesh.devices(), "partition for a device outside the mesh");
  return Partitioner(graph, plan, device, weight_values).run();
}

HostTensor take_piece(const HostTensor& whole, const TensorLayout& layout, const Mesh& mesh, int64_t device) {
  for (const AxisLayout& l : layout) TESSEL_ASSERT(l.kind != AxisLayout::Kind::partial, "a piece of a partial layout");
  const std::vector<int64_t> box = local_shape(whole.shape(), layout, mesh);
  const std::vector<int64_t> origin = local_origin(whole.shape(), layout, mesh, device);
  HostTensor piece(TensorType{whole.dtype(), box});
  for_box(whole.shape(), origin, box, [&](int64_t src, int64_t dst) { piece.set_from(dst, whole, src); });
  return piece;
}

HostTensor assemble(const std::vector<HostTensor>& pieces, const std::vector<int64_t>& shape, const TensorLayout& layout,
                    const Mesh& mesh) {
  TESSEL_ASSERT(static_cast<int64_t>(pieces.size()) == mesh.devices(), "assemble needs one piece per device");
  HostTensor whole(TensorType{pieces.at(0).dtype(), shape});
  std::vector<uint8_t> written(whole.size(), 0);
  const std::vector<int64_t> box = local_shape(shape, layout, mesh);
  for (int64_t d = 0; d < mesh.devices(); ++d) {
    const std::vector<int64_t> c = mesh.coords(d);
    bool skip = false;
    for (int m = 0; m < mesh.rank(); ++m) skip |= layout[m].kind == AxisLayout::Kind::replicate && c[m] != 0;
    if (skip) continue;
    Combiner op = Combiner::none;
    for (const AxisLayout& l : layout)
      if (l.kind == AxisLayout::Kind::partial) op = l.op;
    const HostTensor& in = pieces[d];
    for_box(shape, local_origin(shape, layout, mesh, d), box, [&](int64_t dst, int64_t src) {
      if (!written[dst]) whole.set_from(dst, in, src);
      else if (whole.holds_int64()) whole.int64_data()[dst] = combine_integers(op, whole.int64_data()[dst], in.int64_data()[src]);
      else whole.data()[dst] = combine_values(op, whole.data()[dst], in[src]);
      written[dst] = 1;
    });
  }
  // Partial sums of a narrower dtype are rounded to it once combined.
  return whole.holds_int64() ? whole : HostTensor(whole.type(), whole.values());
}

}  // namespace tessel
