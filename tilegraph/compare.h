// Comparing a computed tensor with a reference, with tolerances by dtype.
//
// This is the one place where tolerances are stated. Every correctness check in Tessel -- unit
// tests, ONNX node tests, `tessel run --expect`, and later compiled kernels against the
// interpreter -- compares through `compare_tensors`.
//
//   element passes  <=>  |actual - expected| <= atol + rtol * |expected|
//
//   dtype      rtol     atol
//   f64        1e-7     1e-9
//   f32        1e-4     1e-5
//   f16        1e-2     1e-3
//   bf16       2e-2     1e-2
//   integers, bool: exact (compared as int64)
//
// Infinities must match exactly. A NaN passes only where the reference is NaN.
//
// Compiled code against the interpreter (`tessel run --device D --check`, backend tests) is judged
// by `compare_compiled`: the relative L2 error ||actual - expected|| / ||expected|| must be at
// most rel_l2 below (an accumulation order different from the interpreter's fp64 one moves
// individual near-zero elements further than the elementwise rule allows, not the whole tensor),
// or, failing that, every element must pass the elementwise rule above (a small tensor whose
// values cancel -- a 3-term dot product near zero, a layer norm over nearly equal values -- turns
// a last-bit difference of a transcendental function into a large relative L2 error while every
// element stays within atol + rtol |expected|); integers and bools stay exact, a NaN or infinity
// must sit exactly where the reference has one.
//
//   dtype      rel_l2
//   f64        1e-9
//   f32        1e-5
//   f16        5e-3
//   bf16       2e-2
//
// An output computed through a less precise intermediate (an f32 output of an f16 island) carries
// that intermediate's precision: a compiled f16 op computed in f32 and the interpreter's computed
// in f64 can round to neighbouring f16 values. `computed_precision` finds the least precise float
// dtype among the node outputs an output depends on; compare_compiled uses the looser of its bound
// and the output dtype's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilegraph/host_tensor.h"

namespace tessel {

class OpGraph;

struct Tolerance {
  double rtol = 0;
  double atol = 0;
  double rel_l2 = 0;  // compare_compiled's bound on ||actual - expected|| / ||expected||
};

Tolerance tolerance_for(DType dtype);

struct CompareResult {
  bool ok = true;
  int64_t mismatches = 0;
  int64_t first_mismatch = -1;  // flat index
  double max_abs_error = 0;
  double max_rel_error = 0;
  double rel_l2_error = 0;  // ||actual - expected|| / ||expected|| over finite elements
  std::string message;  // empty when ok; otherwise one line with the values
};

/// Shapes and dtypes must be equal; values within tolerance_for(expected.dtype()).
CompareResult compare_tensors(const HostTensor& actual, const HostTensor& expected);

/// Compiled output against the interpreter's: the relative L2 rule above. `computed_in` is the
/// least precise float dtype the output was computed through (computed_precision), if known.
CompareResult compare_compiled(const HostTensor& actual, const HostTensor& expected,
                               std::optional<DType> computed_in = std::nullopt);

/// The least precise float dtype among the outputs of the nodes `output` depends on (itself
/// included; model inputs and weights are exact and do not count); nullopt when there is none.
std::optional<DType> computed_precision(const OpGraph& graph, int output);

}  // namespace tessel
