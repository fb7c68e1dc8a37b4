// The operator library: every high-level operator Tessel can lower, in one table.
//
// Each op family registers its lowering functions in its own file (elementwise.cpp,
// contraction.cpp, reduction.cpp, normalization.cpp, shape.cpp); `op_library()` lists them all.
#pragma once

#include <map>
#include <string>

#include "tilegraph/ops/lower_context.h"

namespace tessel {

using OpTable = std::map<std::string, LowerFn, std::less<>>;

/// Every built-in operator lowering, keyed by ONNX operator name.
const OpTable& op_library();

// One registration function per op family.
void register_elementwise_ops(OpTable& table);
void register_contraction_ops(OpTable& table);
void register_reduction_ops(OpTable& table);
void register_normalization_ops(OpTable& table);
void register_shape_ops(OpTable& table);

}  // namespace tessel
