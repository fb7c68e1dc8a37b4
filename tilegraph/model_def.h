// ModelDef: a model as its file describes it, before lowering -- high-level operators (ONNX names
// and semantics) with attributes, named tensors, inputs, outputs and weights.
//
// Both importers produce a ModelDef (model_json.h for Tessel's JSON format, onnx_import.h for
// ONNX), and `lower_model` (lower.h) turns it into an OpGraph of tensor-expression nodes. Keeping
// this level lets a model round-trip through Tessel's JSON format exactly.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tilegraph/host_tensor.h"
#include "tilegraph/op_graph.h"

namespace tessel {

/// An operator attribute. A tensor attribute (Constant's `value`) is a HostTensor.
using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>, HostTensor>;

struct OpDef {
  std::string name;     // unique within the model; used in error messages
  std::string op_type;  // ONNX operator name, e.g. "MatMul", "LayerNormalization"
  std::vector<std::string> inputs;   // tensor names; "" for an omitted optional input
  std::vector<std::string> outputs;  // tensor names; "" for an unused optional output
  std::map<std::string, AttrValue> attrs;
  std::string domain;   // ONNX domain ("" = default)
};

struct ValueDecl {
  std::string name;
  TensorType type;  // shape entries of -1 are unknown (taken from the data given at run time)
};

struct WeightDef {
  std::string name;
  TensorType type;
  WeightSource source;  // data, or a seeded random init
  std::optional<Sparsity> sparsity = std::nullopt;  // a declared pattern (sparsity.h); pruned values when it has a density
};

struct ModelDef {
  std::string name;
  std::string file;    // where it was loaded from (for error messages); may be empty
  int64_t opset = 0;   // ONNX opset of the default domain (0 = latest semantics)
  std::vector<ValueDecl> inputs;
  std::vector<std::string> outputs;
  std::vector<WeightDef> weights;
  std::vector<OpDef> ops;  // in any order; lowering sorts them by data dependence
  /// ONNX graph inputs that also have an initializer: ONNX makes the initializer a default a
  /// caller may override; Tessel imports them as weights (in `weights`) and does not take them
  /// from --inputs (`tessel run` says so).
  std::vector<std::string> defaulted_inputs;
};

}  // namespace tessel
