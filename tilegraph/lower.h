// Lowering: ModelDef (high-level operators) -> OpGraph (tensor-expression nodes).
//
// Operators are sorted by data dependence (a cycle or a tensor nobody produces is a UserError
// naming it), then each is lowered by its entry in the operator library (ops/op_library.h).
// Operators whose inputs are all known constants -- Shape, Constant, ConstantOfShape and the shape
// arithmetic around Reshape -- are evaluated at import by the reference interpreter and never
// become nodes. Every unsupported operator of the model is reported in one UserError.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tilegraph/model_def.h"
#include "tilegraph/op_graph.h"

namespace tessel {

struct LowerOptions {
  /// Concrete shapes for model inputs whose declared shape has unknown (-1) dimensions.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  /// Model inputs bound to known values at import (like binding parameters): they become
  /// constants rather than graph inputs, so they may determine shapes (a Reshape target, Slice
  /// bounds, reduction axes). Each must match the input's declared dtype and shape.
  std::map<std::string, HostTensor> constant_inputs;
  /// Constants with at most this many elements are folded at import; larger ones stay weights.
  int64_t fold_limit_elements = 1 << 20;
};

OpGraph lower_model(const ModelDef& model, const LowerOptions& options = {});

/// Names of every operator type the library can lower ("Abs", "Add", ...), sorted.
std::vector<std::string> supported_op_types();

}  // namespace tessel
