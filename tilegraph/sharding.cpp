#include "tilegraph/sharding.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "tilegraph/error.h"

namespace tessel {

namespace {

int64_t product(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

bool uses_axis_value(const Expr& e, int axis) {
  if (!e.valid()) return false;
  if (e.op() == ExprOp::axis_index && e.index() == axis) return true;
  return std::any_of(e.operands().begin(), e.operands().end(), [&](const Expr& o) { return uses_axis_value(o, axis); });
}

std::vector<int64_t> output_shape_of(const TeNode& node) { return node.output().shape; }

/// The output dimension whose contiguous pieces are the pieces of spatial axis `a` cut in `parts`
/// (the output may be any reshaping of the spatial points), or -1.
int output_dim_for(const TeNode& node, int a, int64_t parts) {
  const std::vector<int64_t> extents = node.extents();
  const std::vector<int64_t> out = output_shape_of(node);
  const int64_t span = product(extents, a, node.num_spatial());  // extent of a times what is inside it
  for (size_t d = 0; d < out.size(); ++d)
    if (product(out, d, out.size()) == span && out[d] % parts == 0) return static_cast<int>(d);
  return -1;
}

}  // namespace

int64_t Mesh::devices() const { return product(shape, 0, shape.size()); }

int64_t Mesh::stride(int axis) const { return product(shape, axis + 1, shape.size()); }

std::vector<int64_t> Mesh::coords(int64_t device) const {
  std::vector<int64_t> c(shape.size());
  for (int i = rank() - 1; i >= 0; --i) {
    c[i] = device % shape[i];
    device /= shape[i];
  }
  return c;
}

int64_t Mesh::device_at(const std::vector<int64_t>& c) const {
  int64_t d = 0;
  for (int i = 0; i < rank(); ++i) d = d * shape[i] + c[i];
  return d;
}

std::vector<int64_t> Mesh::group(int64_t device, int axis) const {
  std::vector<int64_t> c = coords(device), out;
  for (int64_t i = 0; i < shape[axis]; ++i) {
    c[axis] = i;
    out.push_back(device_at(c));
  }
  return out;
}

std::string Mesh::print() const {
  std::ostringstream os;
  for (int i = 0; i < rank(); ++i) os << (i ? "x" : "") << shape[i];
  os << " (";
  for (int i = 0; i < rank(); ++i) os << (i ? ", " : "") << axis_names[i];
  os << ")";
  return os.str();
}

Mesh parse_mesh(const std::string& text, const std::string& what) {
  Mesh mesh;
  auto bad = [&](const std::string& why) -> UserError {
    return UserError("", "", cat(what, ": '", text, "' is not a mesh (", why, "; e.g. 2, 2x4 or dp=2,tp=4)"));
  };
  const bool named = text.find('=') != std::string::npos;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, named ? ',' : 'x')) {
    std::string name, size = part;
    if (named) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos || eq == 0) throw bad(cat("'", part, "' is not NAME=SIZE"));
      name = part.substr(0, eq);
      size = part.substr(eq + 1);
    }
    if (size.empty() || size.size() > 9 || !std::all_of(size.begin(), size.end(), ::isdigit))
      throw bad(cat("'", size, "' is not a size"));
    const int64_t n = std::stoll(size);
    if (n < 1) throw bad("a size is 0");
    if (n > (int64_t{1} << 20) || mesh.devices() * n > (int64_t{1} << 20)) throw bad("more than 2^20 devices");
    if (named && std::find(mesh.axis_names.begin(), mesh.axis_names.end(), name) != mesh.axis_names.end())
      throw bad(cat("axis '", name, "' named twice"));
    mesh.shape.push_back(n);
    mesh.axis_names.push_back(named ? name : cat("m", mesh.axis_names.size()));
  }
  if (mesh.shape.empty()) throw bad("no axes");
  return mesh;
}

std::string print_layout(const TensorLayout& layout) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < layout.size(); ++i) {
    const AxisLayout& l = layout[i];
    os << (i ? ", " : "");
    switch (l.kind) {
      case AxisLayout::Kind::replicate: os << "R"; break;
      case AxisLayout::Kind::shard: os << "S(" << l.dim << ")"; break;
      case AxisLayout::Kind::partial: os << "P(" << combiner_name(l.op) << ")"; break;
    }
  }
  os << "]";
  return os.str();
}

TensorLayout replicated_layout(const Mesh& mesh) { return TensorLayout(mesh.shape.size()); }

std::vector<int64_t> local_shape(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh) {
  std::vector<int64_t> out = shape;
  for (int m = 0; m < mesh.rank(); ++m)
    if (layout[m].kind == AxisLayout::Kind::shard) out[layout[m].dim] /= mesh.shape[m];
  return out;
}

std::optional<std::string> check_layout(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh) {
  if (static_cast<int>(layout.size()) != mesh.rank())
    return cat("a layout of ", layout.size(), " mesh axes on a mesh of ", mesh.rank());
  std::vector<int64_t> left = shape;
  for (int m = 0; m < mesh.rank(); ++m) {
    const AxisLayout& l = layout[m];
    if (l.kind != AxisLayout::Kind::shard) continue;
    if (l.dim < 0 || l.dim >= static_cast<int>(shape.size()))
      return cat("mesh axis ", mesh.axis_names[m], " shards dimension ", l.dim, " of a rank-", shape.size(), " tensor");
    for (int o = 0; o < m; ++o)
      if (layout[o].kind == AxisLayout::Kind::shard && layout[o].dim == l.dim)
        return cat("dimension ", l.dim, " is sharded over two mesh axes (", mesh.axis_names[o], ", ", mesh.axis_names[m], ")");
    if (left[l.dim] % mesh.shape[m] != 0)
      return cat("dimension ", l.dim, " of extent ", shape[l.dim], " does not divide into ", mesh.shape[m], " pieces");
    left[l.dim] /= mesh.shape[m];
  }
  return std::nullopt;
}

std::vector<int64_t> local_origin(const std::vector<int64_t>& shape, const TensorLayout& layout, const Mesh& mesh,
                                  int64_t device) {
  std::vector<int64_t> origin(shape.size(), 0);
  const std::vector<int64_t> c = mesh.coords(device);
  for (int m = 0; m < mesh.rank(); ++m)
    if (layout[m].kind == AxisLayout::Kind::shard) origin[layout[m].dim] = c[m] * (shape[layout[m].dim] / mesh.shape[m]);
  return origin;
}

std::variant<ShardedNode, std::string> shard_node(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh) {
  if (static_cast<int>(sharding.split.size()) != mesh.rank())
    return cat("a sharding of ", sharding.split.size(), " mesh axes on a mesh of ", mesh.rank());
  ShardedNode out;
  out.inputs.assign(node.inputs().size(), replicated_layout(mesh));
  out.output = replicated_layout(mesh);
  const std::vector<int64_t> extents = node.extents();
  const std::vector<std::string> names = node.axis_names();
  for (int m = 0; m < mesh.rank(); ++m) {
    const int a = sharding.split[m];
    if (a < 0) continue;
    if (a >= node.num_axes()) return cat("axis ", a, " of a node with ", node.num_axes(), " axes");
    for (int o = 0; o < m; ++o)
      if (sharding.split[o] == a) return cat("axis ", names[a], " split over two mesh axes");
    const int64_t parts = mesh.shape[m];
    if (extents[a] % parts != 0) return cat("axis ", names[a], " of extent ", extents[a], " does not divide into ", parts);
    if (uses_axis_value(node.body(), a)) return cat("the body uses the value of axis ", names[a]);
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const Access& acc = node.inputs()[i];
      int dim = -1;
      for (int r = 0; r < acc.map.num_results(); ++r) {
        if (r == acc.gather_dim) continue;  // the index comes from data, not from the domain
        const AffineExpr& e = acc.map.result(r);
        if (e.coeffs[a] == 0) continue;
        if (dim >= 0) return cat("input ", i, " reads dimensions ", dim, " and ", r, " through axis ", names[a]);
        dim = r;
        const bool exact = e.coeffs[a] == 1 && e.offset == 0 && acc.type.shape[r] == extents[a] &&
                           std::count_if(e.coeffs.begin(), e.coeffs.end(), [](int64_t c) { return c != 0; }) == 1;
        if (!exact) return cat("input ", i, " reads dimension ", r, " through axis ", names[a], " with a window, stride or offset");
      }
      if (dim >= 0) out.inputs[i][m] = AxisLayout::sharded(dim);
    }
    if (a < node.num_spatial()) {
      const int d = output_dim_for(node, a, parts);
      if (d < 0) return cat("the output is reshaped across axis ", names[a]);
      out.output[m] = AxisLayout::sharded(d);
    } else {
      if (node.combiner() == Combiner::none) return cat("reduction axis ", names[a], " has no combiner");
      out.output[m] = AxisLayout::partial_of(node.combiner());
    }
  }
  for (size_t i = 0; i < node.inputs().size(); ++i)
    if (auto why = check_layout(node.inputs()[i].type.shape, out.inputs[i], mesh)) return cat("input ", i, ": ", *why);
  if (auto why = check_layout(node.output().shape, out.output, mesh)) return cat("output: ", *why);
  return out;
}

NodeRef local_node(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh) {
  auto sharded = shard_node(node, sharding, mesh);
  TESSEL_ASSERT(std::holds_alternative<ShardedNode>(sharded), "local_node of an illegal sharding");
  const ShardedNode& sn = std::get<ShardedNode>(sharded);
  NodeSpec spec;
  spec.name = node.name();
  spec.axes = node.axes();
  for (int m = 0; m < mesh.rank(); ++m)
    if (sharding.split[m] >= 0) spec.axes[sharding.split[m]].extent /= mesh.shape[m];
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    Access acc = node.inputs()[i];
    acc.type.shape = local_shape(acc.type.shape, sn.inputs[i], mesh);
    spec.inputs.push_back(std::move(acc));
  }
  spec.body = node.body();
  spec.combiner = node.combiner();
  spec.init = node.init();
  spec.output_shape = local_shape(node.output().shape, sn.output, mesh);
  return make_node(std::move(spec));
}

std::optional<std::vector<LayoutStep>> conversion_steps(const TensorLayout& from, const TensorLayout& to) {
  TESSEL_ASSERT(from.size() == to.size(), "conversion between layouts of different meshes");
  std::vector<LayoutStep> steps;
  using K = AxisLayout::Kind;
  // Reductions first (the data is smallest once partial sums are reduced), gathers next, slices last.
  for (int pass = 0; pass < 3; ++pass)
    for (size_t m = 0; m < from.size(); ++m) {
      const AxisLayout& f = from[m];
      const AxisLayout& t = to[m];
      if (f == t) continue;
      LayoutStep s;
      s.mesh_axis = static_cast<int>(m);
      if (t.kind == K::partial) return std::nullopt;
      if (f.kind == K::partial) {
        if (pass != 0) continue;
        s.op = f.op;
        if (t.kind == K::replicate) {
          s.collective = Collective::all_reduce;
        } else {
          s.collective = Collective::reduce_scatter;
          s.dim = t.dim;
        }
      } else if (f.kind == K::shard && t.kind == K::replicate) {
        if (pass != 1) continue;
        s.collective = Collective::all_gather;
        s.dim = f.dim;
      } else if (f.kind == K::shard && t.kind == K::shard) {
        if (pass != 1) continue;
        s.collective = Collective::all_to_all;
        s.dim = f.dim;
        s.to_dim = t.dim;
      } else {  // replicate -> shard
        if (pass != 2) continue;
        s.kind = LayoutStep::Kind::slice;
        s.dim = t.dim;
      }
      steps.push_back(s);
    }
  return steps;
}

TensorLayout after_step(const TensorLayout& layout, const LayoutStep& step) {
  TensorLayout next = layout;
  if (step.kind == LayoutStep::Kind::slice || step.collective == Collective::reduce_scatter)
    next[step.mesh_axis] = AxisLayout::sharded(step.dim);
  else if (step.collective == Collective::all_to_all)
    next[step.mesh_axis] = AxisLayout::sharded(step.to_dim);
  else
    next[step.mesh_axis] = AxisLayout::replicated();
  return next;
}

std::optional<Conversion> cheapest_conversion(const std::vector<TensorLayout>& held, const TensorLayout& to) {
  std::optional<Conversion> best;
  long best_collectives = 0;
  for (size_t k = 0; k < held.size(); ++k) {
    auto steps = conversion_steps(held[k], to);
    if (!steps) continue;
    const long n = std::count_if(steps->begin(), steps->end(), [](const LayoutStep& x) { return x.kind == LayoutStep::Kind::collective; });
    if (!best || n < best_collectives) {
      best = Conversion{k, std::move(*steps)};
      best_collectives = n;
    }
  }
  return best;
}

std::string print_step(const LayoutStep& step, const Mesh& mesh) {
  const std::string& axis = mesh.axis_names[step.mesh_axis];
  if (step.kind == LayoutStep::Kind::slice) return cat("slice(", axis, ", dim ", step.dim, ")");
  switch (step.collective) {
    case Collective::all_reduce: return cat("all_reduce(", axis, ", ", combiner_name(step.op), ")");
    case Collective::reduce_scatter: return cat("reduce_scatter(", axis, ", ", combiner_name(step.op), ", dim ", step.dim, ")");
    case Collective::all_gather: return cat("all_gather(", axis, ", dim ", step.dim, ")");
    case Collective::all_to_all: return cat("all_to_all(", axis, ", dim ", step.dim, " -> ", step.to_dim, ")");
    case Collective::shift: return cat("shift(", axis, ", dim ", step.dim, ")");
    case Collective::none: break;
  }
  return "none";
}

}  // namespace tessel
