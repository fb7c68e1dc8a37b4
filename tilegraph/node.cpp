// TeNode construction, verification and printing.
#include "tilegraph/node.h"

#include <functional>

#include "tilegraph/error.h"
#include "tilegraph/limits.h"

namespace tessel {

namespace {

int64_t count_ops(const Expr& e) {
  if (e.op() == ExprOp::input || e.op() == ExprOp::constant || e.op() == ExprOp::axis_index)
    return 0;
  int64_t n = e.op() == ExprOp::cast ? 0 : 1;
  for (const Expr& o : e.operands()) n += count_ops(o);
  return n;
}

// Returns the first problem found in the body, or "".
std::string check_body(const Expr& e, const NodeSpec& spec) {
  if (!e.valid()) return "null expression";
  if (e.op() == ExprOp::input) {
    if (e.index() >= static_cast<int>(spec.inputs.size()))
      return cat("body reads in", e.index(), " but the node has ", spec.inputs.size(), " inputs");
    if (spec.inputs[e.index()].type.dtype != e.dtype())
      return cat("body reads in", e.index(), " as ", dtype_name(e.dtype()), " but it is ",
                 dtype_name(spec.inputs[e.index()].type.dtype));
  }
  if (e.op() == ExprOp::axis_index && e.index() >= static_cast<int>(spec.axes.size()))
    return cat("body uses axis ", e.index(), " of ", spec.axes.size());
  for (const Expr& o : e.operands())
    if (auto r = check_body(o, spec); !r.empty()) return r;
  return "";
}

}  // namespace

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {  // a declared input's unknown dimension (-1): the plain product, negative
      n = 1;
      for (int64_t e : shape) n *= e;
      return n;
    }
  }
  if (const std::optional<int64_t> p = checked_product(shape, kMaxTensorElements)) return *p;
  throw UserError("", "", cat("a ", dtype_name(dtype), " tensor of ", tensor_size_problem(shape)));
}

std::string TensorType::print() const {
  std::string out = std::string(dtype_name(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string_view combiner_name(Combiner c) {
  switch (c) {
    case Combiner::none: return "none";
    case Combiner::sum: return "sum";
    case Combiner::prod: return "prod";
    case Combiner::max: return "max";
    case Combiner::min: return "min";
  }
  return "?";
}

std::vector<int64_t> TeNode::extents() const {
  std::vector<int64_t> out;
  for (const Axis& a : spec_.axes) out.push_back(a.extent);
  return out;
}

std::vector<std::string> TeNode::axis_names() const {
  std::vector<std::string> out;
  for (const Axis& a : spec_.axes) out.push_back(a.name);
  return out;
}

int64_t TeNode::flops() const {
  int64_t points = 1;
  for (const Axis& a : spec_.axes) points *= a.extent;
  const int64_t per_point = count_ops(spec_.body) + (num_reduction() > 0 ? 1 : 0);
  return points * per_point;
}

std::optional<std::string> verify_spec(const NodeSpec& spec) {
  if (spec.name.empty()) return "node has no name";
  bool seen_reduction = false;
  for (size_t a = 0; a < spec.axes.size(); ++a) {
    const Axis& axis = spec.axes[a];
    if (axis.name.empty()) return cat("axis ", a, " has no name");
    // A spatial axis may be empty (an empty output); a reduction axis may not (lowering turns an
    // empty reduction into its identity).
    if (axis.extent < (axis.kind == AxisKind::reduction ? 1 : 0))
      return cat("axis ", axis.name, " has extent ", axis.extent);
    if (axis.kind == AxisKind::reduction) seen_reduction = true;
    else if (seen_reduction) return cat("spatial axis ", axis.name, " after a reduction axis");
    for (size_t b = 0; b < a; ++b)
      if (spec.axes[b].name == axis.name) return cat("axis name ", axis.name, " repeated");
  }
  if (seen_reduction && spec.combiner == Combiner::none)
    return "reduction axes without a combiner";
  if (!seen_reduction && spec.combiner != Combiner::none)
    return cat("combiner ", combiner_name(spec.combiner), " without reduction axes");
  if (spec.combiner == Combiner::sum || spec.combiner == Combiner::prod) {
    if (spec.body.valid() && spec.body.dtype() == DType::boolean)
      return "sum/prod reduction of a bool body";
  }
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Access& in = spec.inputs[i];
    if (in.map.num_axes() != static_cast<int>(spec.axes.size()))
      return cat("input ", i, " map has ", in.map.num_axes(), " axes, domain has ",
                 spec.axes.size());
    if (in.map.num_results() != in.type.rank())
      return cat("input ", i, " map has ", in.map.num_results(), " results for a rank-",
                 in.type.rank(), " tensor");
    for (int64_t d : in.type.shape)
      if (d < 0) return cat("input ", i, " has negative extent ", d);
    if (in.is_gather()) {
      if (in.gather_dim >= in.type.rank()) return cat("input ", i, " gathers dim ", in.gather_dim);
      if (in.gather_index_input < 0 || in.gather_index_input >= static_cast<int>(spec.inputs.size()) ||
          in.gather_index_input == static_cast<int>(i))
        return cat("input ", i, " gathers with bad index input ", in.gather_index_input);
      const Access& idx = spec.inputs[in.gather_index_input];
      if (!is_integer(idx.type.dtype)) return cat("gather index input is ", dtype_name(idx.type.dtype));
      if (idx.is_gather()) return "gather index input is itself a gather";
    }
  }
  if (auto r = check_body(spec.body, spec); !r.empty()) return r;
  if (spec.output_shape) {
    int64_t n = 1, m = 1;
    for (int64_t d : *spec.output_shape) {
      if (d < 0) return cat("output extent ", d);
      n *= d;
    }
    for (const Axis& a : spec.axes)
      if (a.kind == AxisKind::spatial) m *= a.extent;
    if (n != m) return cat("output shape has ", n, " elements, spatial domain has ", m);
  }
  return std::nullopt;
}

NodeSpec concat_spec(const std::vector<TensorType>& parts, int axis) {
  TESSEL_ASSERT(!parts.empty(), "a concatenation of nothing");
  const int rank = parts[0].rank();
  std::vector<int64_t> out = parts[0].shape;
  out[axis] = 0;
  for (const TensorType& t : parts) {
    TESSEL_ASSERT(t.rank() == rank && t.shape[axis] > 0, "concatenating ", t.print(), " with ", parts[0].print());
    out[axis] += t.shape[axis];
  }
  NodeSpec spec;
  for (int d = 0; d < rank; ++d) spec.axes.push_back({cat("d", d), out[d], AxisKind::spatial});
  std::vector<int64_t> begins;
  int64_t offset = 0;
  for (const TensorType& t : parts) {
    std::vector<AffineExpr> rows;
    for (int d = 0; d < rank; ++d) {
      AffineExpr e;
      e.coeffs.assign(rank, 0);
      e.coeffs[d] = 1;
      if (d == axis) e.offset = -offset;
      rows.push_back(e);
    }
    spec.inputs.push_back({t, AffineMap(rank, rows)});
    begins.push_back(offset);
    offset += t.shape[axis];
  }
  const int n = static_cast<int>(parts.size());
  Expr body = input(n - 1, parts.back().dtype);
  for (int k = n - 2; k >= 0; --k)
    body = select(binary(ExprOp::lt, axis_index(axis), integer_constant(begins[k + 1], DType::i64)), input(k, parts[k].dtype),
                  body);
  spec.body = body;
  return spec;
}

NodeRef make_node(NodeSpec spec) {
  if (auto problem = verify_spec(spec))
    TESSEL_ASSERT(false, "invalid node '", spec.name, "': ", *problem);
  auto node = std::shared_ptr<TeNode>(new TeNode());
  node->num_spatial_ = 0;
  for (const Axis& a : spec.axes)
    if (a.kind == AxisKind::spatial) ++node->num_spatial_;
  node->output_.dtype = spec.body.dtype();
  // Pad and init values in their dtype's form: an integer dtype's as an exact integer.
  for (Access& in : spec.inputs) in.pad_value = round_to(in.type.dtype, in.pad_value);
  spec.init = round_to(spec.body.dtype(), spec.init);
  if (spec.output_shape) {
    node->output_.shape = *spec.output_shape;
  } else {
    for (const Axis& a : spec.axes)
      if (a.kind == AxisKind::spatial) node->output_.shape.push_back(a.extent);
  }
  node->spec_ = std::move(spec);
  return node;
}

std::string print_node(const TeNode& node, const std::vector<std::string>& input_names,
                       const std::string& output_name) {
  const auto names = node.axis_names();
  std::string out = cat(output_name, ": ", node.output().print(), " = ");
  if (node.num_reduction() > 0)
    out += cat("reduce ", combiner_name(node.combiner()), " init ", node.init().print(), " ");
  out += cat("node \"", node.name(), "\"\n  domain (");
  for (int a = 0; a < node.num_axes(); ++a) {
    if (a == node.num_spatial()) out += " | ";
    else if (a) out += ", ";
    out += cat(names[a], ":", node.axes()[a].extent);
  }
  out += ")\n";
  for (size_t i = 0; i < node.inputs().size(); ++i) {
    const Access& in = node.inputs()[i];
    const std::string tensor = i < input_names.size() ? input_names[i] : cat("in", i);
    std::string index = in.map.print(names);
    if (in.is_gather()) {
      // Replace the gathered dimension's expression by "@inK".
      std::vector<std::string> parts;
      for (int r = 0; r < in.map.num_results(); ++r) {
        AffineMap one(in.map.num_axes(), {in.map.result(r)});
        std::string p = one.print(names);
        parts.push_back(r == in.gather_dim ? cat("@in", in.gather_index_input) : p.substr(1, p.size() - 2));
      }
      index = "[";
      for (size_t r = 0; r < parts.size(); ++r) index += (r ? ", " : "") + parts[r];
      index += "]";
    }
    out += cat("  in", i, " = ", tensor, index, " : ", in.type.print());
    if (in.pad_value != 0) out += cat(" pad ", in.pad_value.print());
    if (in.is_gather()) out += " gather";
    out += "\n";
  }
  out += cat("  body ", print_expr(node.body(), names), "\n");
  return out;
}

}  // namespace tessel
