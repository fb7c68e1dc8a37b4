// lower_model: ModelDef -> OpGraph (see lower.h).
//
// Steps:
//   1. Index every tensor the model defines (inputs, weights, op outputs); duplicates and names
//      nobody defines are UserErrors.
//   2. Reject the model if any operator is unsupported, listing all of them in one error.
//   3. Order the ops by data dependence (a cycle is a UserError naming a tensor on it).
//   4. Create graph inputs and weights; weights with data are also constants for folding.
//   5. Lower each op through the operator library; name each op's output tensors after the model.
//   6. Mark the outputs and drop what does not reach them (dead-node elimination).
#include "tilegraph/lower.h"

#include <cctype>

#include <algorithm>
#include <map>
#include <queue>
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/limits.h"
#include "tilegraph/ops/op_library.h"

namespace tessel {

namespace {

struct Producer {
  enum Kind { input, weight, op } kind;
  int index;
};

std::map<std::string, Producer> index_tensors(const ModelDef& model) {
  std::map<std::string, Producer> defs;
  auto define = [&](const std::string& name, Producer p, const std::string& where) {
    if (name.empty()) return;
    if (std::string problem = name_problem(name); !problem.empty())
      throw UserError(model.file, where, cat("tensor '", name.substr(0, 40), name.size() > 40 ? "..." : "", "': ", problem));
    if (!defs.emplace(name, p).second)
      throw UserError(model.file, where, cat("tensor '", name, "' is defined more than once"));
  };
  for (size_t i = 0; i < model.inputs.size(); ++i)
    define(model.inputs[i].name, {Producer::input, static_cast<int>(i)}, cat("input ", i));
  for (size_t i = 0; i < model.weights.size(); ++i)
    define(model.weights[i].name, {Producer::weight, static_cast<int>(i)}, cat("weight ", i));
  for (size_t i = 0; i < model.ops.size(); ++i)
    for (const std::string& out : model.ops[i].outputs)
      define(out, {Producer::op, static_cast<int>(i)}, cat("op '", model.ops[i].name, "'"));
  for (size_t i = 0; i < model.ops.size(); ++i)
    if (std::string problem = name_problem(model.ops[i].name); !problem.empty())
      throw UserError(model.file, cat("op ", i), cat("op '", model.ops[i].name.substr(0, 40), model.ops[i].name.size() > 40 ? "..." : "",
                                                     "': ", problem));
  for (const OpDef& op : model.ops)
    for (size_t k = 0; k < op.inputs.size(); ++k)
      if (!op.inputs[k].empty() && !defs.count(op.inputs[k]))
        throw UserError(model.file, cat("op '", op.name, "' input ", k),
                        cat("tensor '", op.inputs[k], "' is not an input, weight or op output"));
  for (const std::string& out : model.outputs)
    if (!defs.count(out))
      throw UserError(model.file, "outputs", cat("output '", out, "' is not defined by the model"));
  return defs;
}

void check_supported(const ModelDef& model) {
  std::map<std::string, std::vector<std::string>> missing;
  for (const OpDef& op : model.ops) {
    const bool default_domain = op.domain.empty() || op.domain == "ai.onnx" || op.domain == "tessel";
    if (!default_domain || !op_library().count(op.op_type))
      missing[op.domain.empty() ? op.op_type : op.domain + "." + op.op_type].push_back(op.name);
  }
  if (missing.empty()) return;
  std::vector<std::string> known;
  for (const auto& [name, def] : op_library()) known.push_back(name);
  std::string list;
  for (const auto& [type, names] : missing) {
    if (!list.empty()) list += ", ";
    // A typo in a hand-written model ("Relux", "Matmul"): one letter off, case aside. (Not a
    // looser match: "Loop", an ONNX operator Tessel lacks, is not a misspelt "Log".)
    std::string guess = nearest_word(type, known);
    auto lower = [](std::string w) {
      for (char& ch : w) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return w;
    };
    if (!guess.empty() && edit_distance(lower(type), lower(guess)) > 1) guess.clear();
    list += cat(type, " (", names.size(), names.size() == 1 ? " op: '" : " ops, first '", names[0], "'",
                guess.empty() ? "" : cat("; did you mean ", guess, "?"), ")");
  }
  throw UnsupportedError(model.file, "", cat("unsupported operator(s): ", list));
}

std::vector<int> order_ops(const ModelDef& model, const std::map<std::string, Producer>& defs) {
  const int n = static_cast<int>(model.ops.size());
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    std::set<int> deps;
    for (const std::string& in : model.ops[i].inputs) {
      if (in.empty()) continue;
      const Producer& p = defs.at(in);
      if (p.kind == Producer::op) deps.insert(p.index);
    }
    for (int d : deps) users[d].push_back(i);
    pending[i] = static_cast<int>(deps.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i)
      if (pending[i] > 0)
        throw UserError(model.file, cat("op '", model.ops[i].name, "'"),
                        cat("the model has a cycle: this op depends on its own output through tensor '",
                            model.ops[i].outputs.empty() ? "" : model.ops[i].outputs[0], "'"));
  }
  return order;
}

TensorType input_type(const ModelDef& model, const ValueDecl& decl, const LowerOptions& options) {
  TensorType t = decl.type;
  if (auto it = options.input_shapes.find(decl.name); it != options.input_shapes.end()) {
    if (it->second.size() != t.shape.size())
      throw UserError(model.file, cat("input '", decl.name, "'"),
                      cat("given a rank-", it->second.size(), " shape for a rank-", t.shape.size(), " input"));
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d] >= 0 && t.shape[d] != it->second[d])
        throw UserError(model.file, cat("input '", decl.name, "'"),
                        cat("dimension ", d, " is ", t.shape[d], ", given ", it->second[d]));
      t.shape[d] = it->second[d];
    }
  }
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] < 0)
      throw UserError(model.file, cat("input '", decl.name, "'"),
                      cat("dimension ", d, " is unknown; give the input's shape"));
  if (std::string problem = tensor_size_problem(t.shape); !problem.empty())
    throw UserError(model.file, cat("input '", decl.name, "'"), problem);
  return t;
}

}  // namespace

OpGraph lower_model(const ModelDef& model, const LowerOptions& options) {
  // Step 1.
  const auto defs = index_tensors(model);
  // Step 2: before any work, so the user sees every unsupported op at once.
  check_supported(model);
  // Step 3.
  const std::vector<int> order = order_ops(model, defs);

  // Step 4.
  OpGraph graph;
  LowerContext ctx(graph, model, options);
  std::map<std::string, Value> values;
  for (const ValueDecl& decl : model.inputs) {
    Value v;
    if (auto bound = options.constant_inputs.find(decl.name); bound != options.constant_inputs.end()) {
      LowerOptions with_shape = options;
      with_shape.input_shapes[decl.name] = bound->second.shape();
      v.type = input_type(model, decl, with_shape);
      if (bound->second.type() != v.type)
        throw UserError(model.file, cat("input '", decl.name, "'"),
                        cat("bound to a ", bound->second.type().print(), " value, declared ", v.type.print()));
      v.constant = std::make_shared<const HostTensor>(bound->second);
      ctx.name_constant(v, decl.name);
    } else {
      v.type = input_type(model, decl, options);
      v.tensor = graph.add_input(decl.name, v.type);
    }
    values[decl.name] = v;
  }
  for (const WeightDef& w : model.weights) {
    if (std::string problem = tensor_size_problem(w.type.shape); !problem.empty())
      throw UserError(model.file, cat("weight '", w.name, "'"), problem);
    Value v;
    v.type = w.type;
    if (auto* data = std::get_if<std::shared_ptr<const HostTensor>>(&w.source)) {
      v.constant = *data;
      ctx.name_constant(v, w.name);
    } else {
      v.tensor = graph.add_weight(w.name, w.type, w.source, w.sparsity);
    }
    values[w.name] = v;
  }

  // Step 5.
  std::set<TensorId> named;  // intermediates already carrying a model tensor name
  for (int i : order) {
    const OpDef& op = model.ops[i];
    std::vector<std::optional<Value>> ins;
    for (const std::string& name : op.inputs) {
      if (name.empty()) ins.emplace_back(std::nullopt);
      else ins.emplace_back(values.at(name));
    }
    ctx.begin(op, std::move(ins));
    try {
      op_library().find(op.op_type)->second(ctx);
      ctx.check_no_extra_inputs();
    } catch (UserError& e) {
      e.set_file_if_empty(model.file);
      e.set_location_if_empty(ctx.where());
      throw;
    }
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      if (op.outputs[k].empty()) continue;
      if (!ctx.outputs()[k])
        throw UnsupportedError(model.file, ctx.where(), cat("output ", k, " ('", op.outputs[k],
                                                            "') is not produced by Tessel's lowering"));
      Value v = *ctx.outputs()[k];
      if (v.tensor >= 0 && graph.tensor(v.tensor).kind == TensorKind::intermediate &&
          !named.count(v.tensor) && !graph.find_tensor(op.outputs[k])) {
        graph.rename_tensor(v.tensor, op.outputs[k]);
        named.insert(v.tensor);
      }
      ctx.name_constant(v, op.outputs[k]);
      values[op.outputs[k]] = v;
    }
  }

  // Step 6.
  for (const std::string& name : model.outputs)
    graph.mark_output(ctx.materialize(values.at(name), name));
  return eliminate_dead_nodes(graph);
}

}  // namespace tessel
