// LowerContext: attribute access, errors and node emission with constant folding.
#include "tilegraph/ops/lower_context.h"

#include "tilegraph/interpreter.h"
#include "tilegraph/limits.h"

namespace tessel {

namespace {
const char* attr_type_name(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "an integer";
    case 1: return "a float";
    case 2: return "a string";
    case 3: return "a list of integers";
    case 4: return "a list of floats";
    case 5: return "a list of strings";
    default: return "a tensor";
  }
}
}  // namespace

LowerContext::LowerContext(OpGraph& graph, const ModelDef& model, const LowerOptions& options)
    : graph_(graph), model_(model), options_(options) {}

void LowerContext::begin(const OpDef& op, std::vector<std::optional<Value>> inputs) {
  op_ = &op;
  inputs_ = std::move(inputs);
  read_up_to_ = -1;
  outputs_.assign(op.outputs.size(), std::nullopt);
}

std::string LowerContext::where() const { return cat("op '", op_->name, "' (", op_->op_type, ")"); }

void LowerContext::fail(const std::string& message) const {
  throw UserError(model_.file, where(), message);
}

void LowerContext::unsupported(const std::string& message) const {
  throw UnsupportedError(model_.file, where(), message);
}

void LowerContext::check_no_extra_inputs() const {
  for (int i = static_cast<int>(inputs_.size()) - 1; i > read_up_to_; --i)
    if (inputs_[i].has_value())
      fail(cat("takes ", read_up_to_ + 1, " input", read_up_to_ == 0 ? "" : "s", ", but the model gives it ", inputs_.size(),
               " (input ", i, " '", op_->inputs[i], "' would be ignored)"));
}

const Value& LowerContext::input(int i) const {
  if (!has_input(i)) fail(cat("input ", i, " is required but missing (the op has ", num_inputs(), ")"));
  return *inputs_[i];
}

std::vector<int64_t> LowerContext::constant_ints(int i, const char* what) const {
  const Value& v = input(i);
  if (!v.is_constant())
    unsupported(cat(what, " (input ", i, ") must be known at import; it is computed at run time"));
  if (!is_integer(v.dtype()))
    fail(cat(what, " (input ", i, ") must be an integer tensor, got ", dtype_name(v.dtype())));
  return v.constant->as_ints();
}

std::vector<double> LowerContext::constant_floats(int i, const char* what) const {
  const Value& v = input(i);
  if (!v.is_constant())
    unsupported(cat(what, " (input ", i, ") must be known at import; it is computed at run time"));
  return v.constant->values();
}

const AttrValue* LowerContext::find_attr(const std::string& name) const {
  auto it = op_->attrs.find(name);
  return it == op_->attrs.end() ? nullptr : &it->second;
}

bool LowerContext::has_attr(const std::string& name) const { return find_attr(name) != nullptr; }

void LowerContext::bad_attr(const std::string& name, const std::string& expected) const {
  throw UserError(model_.file, cat(where(), " attribute '", name, "'"),
                  cat("expected ", expected, ", got ", attr_type_name(*find_attr(name))));
}

std::optional<int64_t> LowerContext::attr_int(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  bad_attr(name, "an integer");
}

int64_t LowerContext::attr_int(const std::string& name, int64_t dflt) const {
  return attr_int(name).value_or(dflt);
}

double LowerContext::attr_float(const std::string& name, double dflt) const {
  const AttrValue* v = find_attr(name);
  if (!v) return dflt;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  bad_attr(name, "a float");
}

std::string LowerContext::attr_string(const std::string& name, const std::string& dflt) const {
  const AttrValue* v = find_attr(name);
  if (!v) return dflt;
  if (auto* s = std::get_if<std::string>(v)) return *s;
  bad_attr(name, "a string");
}

std::optional<std::vector<int64_t>> LowerContext::attr_ints_opt(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (!v) return std::nullopt;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
  if (auto* l = std::get_if<std::vector<double>>(v); l && l->empty()) return std::vector<int64_t>{};
  bad_attr(name, "a list of integers");
}

std::vector<int64_t> LowerContext::attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
  auto v = attr_ints_opt(name);
  return v ? *v : std::move(dflt);
}

std::vector<double> LowerContext::attr_floats(const std::string& name, std::vector<double> dflt) const {
  const AttrValue* v = find_attr(name);
  if (!v) return dflt;
  if (auto* l = std::get_if<std::vector<double>>(v)) return *l;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return {l->begin(), l->end()};
  bad_attr(name, "a list of floats");
}

const HostTensor* LowerContext::attr_tensor(const std::string& name) const {
  const AttrValue* v = find_attr(name);
  if (!v) return nullptr;
  if (auto* t = std::get_if<HostTensor>(v)) return t;
  bad_attr(name, "a tensor");
}

std::string LowerContext::unique_name(const std::string& base) {
  if (!graph_.find_tensor(base)) return base;
  for (;;) {
    std::string name = cat(base, "#", ++name_counter_);
    if (!graph_.find_tensor(name)) return name;
  }
}

TensorId LowerContext::materialize(const Value& v, const std::string& name_hint) {
  if (v.tensor >= 0) return v.tensor;
  TESSEL_ASSERT(v.is_constant(), "value has neither a tensor nor a constant");
  if (auto it = materialized_.find(v.constant.get()); it != materialized_.end()) return it->second;
  auto named = constant_names_.find(v.constant.get());
  const std::string& base = named != constant_names_.end() ? named->second : name_hint;
  const TensorId id = graph_.add_weight(unique_name(base), v.type, v.constant);
  materialized_[v.constant.get()] = id;
  return id;
}

void LowerContext::name_constant(const Value& v, const std::string& name) {
  if (v.is_constant()) constant_names_.emplace(v.constant.get(), name);
}

Value LowerContext::emit(NodeSpec spec, const std::vector<Value>& inputs, const std::string& suffix) {
  spec.name = suffix.empty() ? op_->name : cat(op_->name, ".", suffix);
  TESSEL_ASSERT(inputs.size() == spec.inputs.size(), spec.name, ": ", inputs.size(),
                " values for ", spec.inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSEL_ASSERT(inputs[i].type == spec.inputs[i].type, spec.name, " input ", i, ": value is ",
                  inputs[i].type.print(), ", access expects ", spec.inputs[i].type.print());
  }
  // A reduction over an empty axis comes from a zero-size dimension of an input (a weight of
  // shape [1, 1, 0, 2] given to a convolution): valid ONNX, but nodes reduce over at least one point.
  {
    std::vector<int64_t> extents, spatial;
    for (const Axis& a : spec.axes) {
      if (a.extent < 0) fail(cat("node '", spec.name, "' would have axis '", a.name, "' of extent ", a.extent));
      extents.push_back(a.extent);
      if (a.kind == AxisKind::spatial) spatial.push_back(a.extent);
    }
    if (std::string problem = tensor_size_problem(spec.output_shape ? *spec.output_shape : spatial); !problem.empty())
      fail(cat("the output of node '", spec.name, "': ", problem));
    if (!checked_product(extents, kMaxDomainPoints)) {
      std::string text;
      for (size_t i = 0; i < extents.size(); ++i) text += cat(i ? "x" : "", extents[i]);
      fail(cat("node '", spec.name, "' has a domain of ", text, " points, more than ", kMaxDomainPointsText, " (Tessel's limit)"));
    }
  }
  for (const Axis& a : spec.axes)
    if (a.kind == AxisKind::reduction && a.extent < 1)
      unsupported(cat("node '", spec.name, "' would reduce over axis '", a.name, "' of extent ", a.extent,
                      " (a zero-size input dimension); empty reductions are not supported"));
  NodeRef node = make_node(std::move(spec));
  bool all_constant = true;
  for (const Value& v : inputs) all_constant &= v.is_constant();
  if (all_constant && node->output().num_elements() <= options_.fold_limit_elements) {
    std::vector<const HostTensor*> ins;
    for (const Value& v : inputs) ins.push_back(v.constant.get());
    InterpretOptions single;
    single.threads = 1;
    return constant(evaluate_node(*node, ins, single));
  }
  std::vector<TensorId> ids;
  for (size_t i = 0; i < inputs.size(); ++i)
    ids.push_back(materialize(inputs[i], cat(node->name(), ".const", i)));
  Value out;
  out.type = node->output();
  out.tensor = graph_.add_node(node, ids, unique_name(node->name()));
  return out;
}

Value LowerContext::constant(HostTensor t) {
  Value v;
  v.type = t.type();
  v.constant = std::make_shared<const HostTensor>(std::move(t));
  return v;
}

void LowerContext::set_output(int i, const Value& v) {
  TESSEL_ASSERT(i >= 0 && i < num_outputs(), "output ", i, " of ", num_outputs());
  outputs_[i] = v;
}

}  // namespace tessel
