// LowerContext: what an operator's lowering function sees while one OpDef is lowered.
//
// It gives the operator's inputs as Values (a graph tensor, or a constant known at import), typed
// attribute access that raises UserError naming the operator, the attribute and the bad value,
// and `emit`, which turns a NodeSpec into a graph node -- or, when every input is a known constant
// and the result is small, evaluates it right away with the interpreter (constant folding: this is
// how Shape, Constant, ConstantOfShape and the shape arithmetic feeding Reshape disappear).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"

namespace tessel {

/// A tensor during lowering.
struct Value {
  TensorType type;
  TensorId tensor = -1;                        // graph tensor (-1 for a not yet materialized constant)
  std::shared_ptr<const HostTensor> constant;  // set when the value is known at import

  bool is_constant() const { return constant != nullptr; }
  int rank() const { return type.rank(); }
  DType dtype() const { return type.dtype; }
  const std::vector<int64_t>& shape() const { return type.shape; }
};

class LowerContext {
 public:
  LowerContext(OpGraph& graph, const ModelDef& model, const LowerOptions& options);

  // --- The operator being lowered.
  void begin(const OpDef& op, std::vector<std::optional<Value>> inputs);
  const OpDef& op() const { return *op_; }
  int64_t opset() const { return model_.opset; }
  /// The number of inputs given (a variadic op's lowering reads them all).
  int num_inputs() const {
    read_up_to_ = std::max(read_up_to_, static_cast<int>(inputs_.size()) - 1);
    return static_cast<int>(inputs_.size());
  }
  bool has_input(int i) const {
    read_up_to_ = std::max(read_up_to_, i);
    return i < static_cast<int>(inputs_.size()) && inputs_[i].has_value();
  }
  /// After the lowering: UserError when the model gives the op an input past every one its
  /// lowering looked at (`Relu(x, z)`, `Add(x, z, z)`: an input the op does not have would
  /// otherwise be ignored in silence).
  void check_no_extra_inputs() const;
  /// Input i; UserError if it is missing.
  const Value& input(int i) const;
  /// Input i as integers; UserError unless it is a constant known at import.
  std::vector<int64_t> constant_ints(int i, const char* what) const;
  std::vector<double> constant_floats(int i, const char* what) const;

  // --- Attributes. A missing attribute takes the default; a wrong type is a UserError.
  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t dflt) const;
  std::optional<int64_t> attr_int(const std::string& name) const;
  double attr_float(const std::string& name, double dflt) const;
  std::string attr_string(const std::string& name, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt = {}) const;
  std::optional<std::vector<int64_t>> attr_ints_opt(const std::string& name) const;
  std::vector<double> attr_floats(const std::string& name, std::vector<double> dflt = {}) const;
  const HostTensor* attr_tensor(const std::string& name) const;

  // --- Errors, located at the current operator.
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void unsupported(const std::string& message) const;
  /// Location text: "op 'name' (Type)".
  std::string where() const;

  // --- Building.
  /// Adds a node computing `spec` from `inputs` (one Value per spec input). The node is named
  /// "<op name>" or "<op name>.<suffix>". Folds to a constant when every input is constant.
  Value emit(NodeSpec spec, const std::vector<Value>& inputs, const std::string& suffix = "");
  /// A constant Value.
  Value constant(HostTensor t);
  void set_output(int i, const Value& v);
  int num_outputs() const { return static_cast<int>(op_->outputs.size()); }
  bool has_output(int i) const { return i < num_outputs() && !op_->outputs[i].empty(); }

  // --- Used by lower_model.
  /// Preferred weight name for a constant, should it need to become a graph tensor.
  void name_constant(const Value& v, const std::string& name);
  /// The graph tensor of a Value (materializing a constant as a weight if needed).
  TensorId materialize(const Value& v, const std::string& name_hint);
  const std::vector<std::optional<Value>>& outputs() const { return outputs_; }

 private:
  const AttrValue* find_attr(const std::string& name) const;
  [[noreturn]] void bad_attr(const std::string& name, const std::string& expected) const;
  std::string unique_name(const std::string& base);

  OpGraph& graph_;
  const ModelDef& model_;
  const LowerOptions& options_;
  const OpDef* op_ = nullptr;
  std::vector<std::optional<Value>> inputs_;
  mutable int read_up_to_ = -1;  // the highest input index the lowering asked about
  std::vector<std::optional<Value>> outputs_;
  std::map<const HostTensor*, TensorId> materialized_;
  std::map<const HostTensor*, std::string> constant_names_;
  int name_counter_ = 0;
};

/// A lowering function: reads ctx.op() and its inputs, calls ctx.set_output for each output.
using LowerFn = void (*)(LowerContext& ctx);

}  // namespace tessel
