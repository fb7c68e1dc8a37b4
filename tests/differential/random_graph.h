// Seeded random models for differential testing (issue 7): DAGs of supported operators with
// awkward shapes -- extents 1, primes, sizes that are no multiple of any tile or vector width --,
// NumPy broadcasting, strided / dilated / padded / grouped convolutions and pools, reductions over
// every axis, softmax and layer norm, data movement (transpose, reshape, slice, concat) and f16
// islands between casts: elementwise ops, or a MatMul or channels-last Conv sized for the GPU's
// tensor-core paths most of the time. Every third MatMul or Gemm weight declares a block-sparse
// pattern pruned to a density (docs/sparsity.md), so the policies' dense / block-sparse choice and
// the sparse kernels are checked too. The same seed always gives the same model.
//
// Every tensor stays small (RandomGraphOptions::max_elements) so that the reference interpreter
// runs a graph in milliseconds, and values stay finite: the unary operators are bounded or
// Lipschitz (no exp/log/div chains that overflow in one precision and not in another).
#pragma once

#include <cstdint>

#include "tilegraph/model_def.h"

namespace tessel {

struct RandomGraphOptions {
  int min_ops = 2;
  int max_ops = 30;
  /// Largest element count of any tensor of the model (inputs, weights, intermediates).
  int64_t max_elements = 1 << 13;
  /// Largest multiply-adds of one contraction.
  int64_t max_macs = 1 << 20;
  /// Insert f16 islands (Cast to f16, ops, Cast back).
  bool mixed_dtypes = true;
};

/// The model of `seed`: named "random_<seed>", f32 inputs, seeded random weights, opset 20;
/// every tensor nothing consumes is an output.
ModelDef random_model(uint64_t seed, const RandomGraphOptions& options = {});

}  // namespace tessel
