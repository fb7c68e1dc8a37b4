#include "tilegraph/spmd.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>

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
      const int shifted = plan_.shifted_input(n);
      std::vector<TensorId> ins;
      for (size_t i = 0; i < g_.node_inputs(n).size(); ++i)
        ins.push_back(static_cast<int>(i) == shifted ? -1 : obtain(g_.node_inputs(n)[i], sn.inputs[i]));
      const TensorId out = g_.node_output(n);
      const TensorId id = shifted >= 0 ? overlapped(n, shifted, ins)
                                       : prog_.local.add_node(local_node(node, plan_.nodes[n], mesh), ins, g_.tensor(out).name);
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

  /// Node `n` with input `input` delivered by ring shifts (ShardPlan::shifted): its blocks rotate
  /// along the mesh axis while one piece of the node runs on each, and the pieces are joined in
  /// block order. `ins` holds the other inputs.
  TensorId overlapped(NodeId n, int input, std::vector<TensorId> ins) {
    const TeNode& node = g_.node(n);
    const TensorId t = g_.node_inputs(n)[input];
    std::vector<TensorLayout> held;
    for (const Held& h : avail_[t]) held.push_back(h.layout);
    auto form = shift_form(node, plan_.nodes[n], input, held, plan_.mesh);
    if (auto* why = std::get_if<std::string>(&form))
      throw UserError("", "", cat("shard plan: node '", node.name(), "' cannot take '", g_.tensor(t).name, "' by ring shifts: ", *why));
    const ShiftForm& f = std::get<ShiftForm>(form);
    // blocks[s]: the block held after s shifts, block (c - s) mod P of the input's dimension.
    std::vector<TensorId>& blocks = shifted_[{t, f.mesh_axis, print_layout(f.block_layout)}];
    if (blocks.empty()) {
      blocks.push_back(obtain(t, f.block_layout));
      LayoutStep step;
      step.mesh_axis = f.mesh_axis;
      step.collective = Collective::shift;
      step.dim = f.input_dim;
      const TensorInfo& info = g_.tensor(t);
      for (int64_t s = 1; s < f.parts; ++s) {
        const TensorId src = blocks.back();
        prog_.local.mark_output(src);
        const TensorId id = prog_.local.add_input(cat(info.name, "@shift", s, ".", ++renames_), prog_.local.tensor(src).type);
        prog_.transfers.push_back({step, src, id, info.name, info.type});
        blocks.push_back(id);
      }
    }
    const NodeRef piece = local_node(node, f.piece, f.piece_mesh);
    const std::string& name = g_.tensor(g_.node_output(n)).name;
    std::vector<TensorId> pieces(f.parts);
    for (int64_t s = 0; s < f.parts; ++s) {
      ins[input] = blocks[s];
      pieces[s] = prog_.local.add_node(piece, ins, cat(name, ".piece", s));
    }
    // Output block j was computed on the block held after (c - j) mod P shifts.
    const int64_t c = plan_.mesh.coords(device_)[f.mesh_axis];
    std::vector<TensorId> ordered;
    for (int64_t j = 0; j < f.parts; ++j) ordered.push_back(pieces[((c - j) % f.parts + f.parts) % f.parts]);
    return concat(ordered, f.output_dim, name);
  }

  /// `parts` laid one after another along `dim`.
  TensorId concat(const std::vector<TensorId>& parts, int dim, const std::string& name) {
    std::vector<TensorType> types;
    for (TensorId t : parts) types.push_back(prog_.local.tensor(t).type);
    NodeSpec spec = concat_spec(types, dim);
    spec.name = name;
    return prog_.local.add_node(make_node(std::move(spec)), parts, name);
  }


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
  // (tensor, mesh axis, the blocks' layout) -> its blocks in shift order
  std::map<std::tuple<TensorId, int, std::string>, std::vector<TensorId>> shifted_;
  int renames_ = 0;
};

}  // namespace

std::variant<ShiftForm, std::string> shift_form(const TeNode& node, const NodeSharding& sharding, int input,
                                                const std::vector<TensorLayout>& held, const Mesh& mesh) {
  if (input < 0 || input >= static_cast<int>(node.inputs().size())) return cat("the node has no input ", input);
  auto sharded = shard_node(node, sharding, mesh);
  if (auto* why = std::get_if<std::string>(&sharded)) return *why;
  const TensorLayout& need = std::get<ShardedNode>(sharded).inputs[input];
  std::string why = cat("input ", input, " is not all-gathered along one mesh axis");
  for (const TensorLayout& h : held)
    for (int a = 0; a < mesh.rank(); ++a) {
      if (need[a].kind != AxisLayout::Kind::replicate || h[a].kind != AxisLayout::Kind::shard) continue;
      bool others_alike = true;
      for (int b = 0; b < mesh.rank(); ++b) others_alike &= b == a || h[b] == need[b];
      if (!others_alike) continue;
      ShiftForm f;
      f.mesh_axis = a;
      f.input_dim = h[a].dim;
      f.parts = mesh.shape[a];
      f.block_layout = h;
      const AffineExpr& e = node.inputs()[input].map.result(f.input_dim);
      for (int x = 0; x < node.num_axes(); ++x)
        if (e.coeffs[x] != 0) {
          if (f.axis >= 0) f.axis = node.num_axes();  // more than one axis reads it
          else f.axis = x;
        }
      if (f.axis < 0 || f.axis >= node.num_axes() || e.coeffs[f.axis] != 1 || e.offset != 0) {
        why = cat("input ", input, " reads dimension ", f.input_dim, " through more than one loop axis or with an offset");
        continue;
      }
      if (f.axis >= node.num_spatial()) {
        why = cat("input ", input, "'s dimension ", f.input_dim, " is read by a reduction axis");
        continue;
      }
      f.piece_mesh = mesh;
      f.piece_mesh.shape.push_back(f.parts);
      f.piece_mesh.axis_names.push_back("shift");
      f.piece = sharding;
      f.piece.split.push_back(f.axis);
      auto pieces = shard_node(node, f.piece, f.piece_mesh);
      if (auto* w = std::get_if<std::string>(&pieces)) {
        why = *w;
        continue;
      }
      const ShardedNode& psn = std::get<ShardedNode>(pieces);
      bool alone = psn.inputs[input].back() == AxisLayout::sharded(f.input_dim);
      for (size_t j = 0; j < psn.inputs.size(); ++j)
        if (static_cast<int>(j) != input) alone &= psn.inputs[j].back().kind == AxisLayout::Kind::replicate;
      if (!alone) {
        why = cat("another input of the node is read along the axis that reads input ", input, "'s dimension ", f.input_dim);
        continue;
      }
      if (psn.output.back().kind != AxisLayout::Kind::shard) {
        why = "the pieces' outputs are not whole blocks of one output dimension";
        continue;
      }
      f.output_dim = psn.output.back().dim;
      return f;
    }
  return why;
}

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
  if (!plan.shifted.empty() && static_cast<int>(plan.shifted.size()) != graph.num_nodes())
    return cat("the plan's shifted inputs name ", plan.shifted.size(), " nodes of a graph of ", graph.num_nodes());
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    const int i = plan.shifted_input(n);
    if (i >= static_cast<int>(graph.node_inputs(n).size()) || i < -1)
      return cat("node '", graph.node(n).name(), "' has no input ", i, " to shift");
    if (i >= 0 && graph.tensor(graph.node_inputs(n)[i]).kind == TensorKind::weight)
      return cat("node '", graph.node(n).name(), "': input ", i, " is a weight, which is never shifted");
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
