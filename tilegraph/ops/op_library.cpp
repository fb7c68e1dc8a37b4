// The table of operator lowerings.
#include "tilegraph/ops/op_library.h"

namespace tessel {

const OpTable& op_library() {
  static const OpTable table = [] {
    OpTable t;
    register_elementwise_ops(t);
    register_contraction_ops(t);
    register_reduction_ops(t);
    register_normalization_ops(t);
    register_shape_ops(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supported_op_types() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : op_library()) out.push_back(name);
  return out;
}

}  // namespace tessel
