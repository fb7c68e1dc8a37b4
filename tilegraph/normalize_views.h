// The normalize stage's clean-ups of the data movement ONNX exporters leave around attention
// (normalize.h, rewrites 0, a, s, b, c in that order; normalize.cpp runs them first). Internal to tilegraph.
//
//   0. A Split into pieces of one index each along an axis (PyTorch's unbind) becomes one Gather
//      of a one-element index list per piece: views, which b composes with what follows.
//   a. Transposes move towards their consumers, past what commutes with them: an elementwise op
//      whose other inputs broadcast over trailing dimensions the permutation keeps in place
//      (Mul(Transpose(k), c) becomes Transpose(Mul(k, c)); a bias add), and a MatMul by a matrix
//      when the permutation keeps the last dimension (MatMul(Transpose(x), W) becomes
//      Transpose(MatMul(x, W))). There the next rewrite folds them into the views that follow.
//   s. A multiplication by a scalar constant of a view that picks columns of a tensor X (the
//      exporters' `q * sqrt(scale)` and `k * sqrt(scale)` of scaled dot-product attention, Q and
//      K picked from the packed projection) moves into X: X becomes X times a constant vector over
//      its last axis (the scalar at the columns each such view reads, 1 elsewhere), a step the
//      producer's epilogue takes, and the pieces are plain views again. It applies when X is a
//      contraction's output or the bias add after one (whose epilogue takes the scale), and the
//      columns the scaled views read and those every other reader reads (Shape reads none) are
//      disjoint; x * 1 is x and each picked value is multiplied by the same constant in the same
//      dtype as before, so the values are the same bits.
//   b. A chain of view ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Identity, and a Gather
//      of one index known at import) is one strided view of its source tensor, as a framework
//      tracks views. When it is not the chain itself, it is rewritten in the canonical form: one
//      Reshape that only splits dimensions, one Gather per dimension a fixed index is taken
//      from, one Transpose, and a Reshape that only adds dimensions of size 1 (with a Transpose,
//      the dimensions of size 1 go into the split instead, so that the chain ends in the
//      Transpose) -- each an affine read that fuses into its consumer (the merge-then-split
//      pairs of `view(S, B * H, d)` then `view(B, H, S, d)` are what blocks that). A chain of as
//      many ops is rewritten too where it shares a view other than a Reshape that only views
//      read (Q, K and V picked from one permuted projection at batch 1), which then goes.
//   c. MatMul(a, Transpose(y)) whose Transpose swaps the last two dimensions reads y directly
//      (the MatMul's Tessel attribute transB = 1): K stays keys x d, 16-byte aligned rows, for
//      the tensor-core and attention kernels.
// Each keeps every value bit for bit: no arithmetic moves across a rounding.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "tilegraph/model_def.h"

namespace tessel {

struct ViewReport {
  int splits_as_picks = 0;   // 0: Splits into one index each, now one Gather per piece
  int scalars_moved = 0;     // a: ops moved before a Transpose
  int scales_moved = 0;      // s: scalar multiplications of views moved into their source
  int chains = 0;            // b: view chains rewritten
  int ops_removed = 0;       // b: view ops fewer after it
  int matmuls_trans_b = 0;   // c: MatMuls reading B through transB
};

struct ViewContext {
  /// The type of a tensor of the model (nullopt: unknown).
  std::function<std::optional<TensorType>(const std::string&)> type_of;
  /// A fresh tensor or op name from a base.
  std::function<std::string(const std::string&)> fresh_tensor, fresh_op;
  /// Types of the tensors the rewrites add (type_of does not know them).
  std::map<std::string, TensorType>* added_types = nullptr;
  /// The integer values of a tensor known at import (a weight), nullopt otherwise.
  std::function<std::optional<std::vector<int64_t>>(const std::string&)> ints_of;
  /// The value of a one-element tensor that lowering folds to a constant (nullopt otherwise).
  std::function<std::optional<double>(const std::string&)> scalar_of;
  /// Adds a weight of these values, returns its name.
  std::function<std::string(const std::string&, HostTensor)> add_weight;
  /// Adds an i64 weight, returns its name.
  std::function<std::string(const std::string&, const std::vector<int64_t>&, std::vector<int64_t>)> add_ints;
};

/// Runs rewrites 0, a, s, b and c on `model` in place.
void simplify_views(ModelDef& model, const ViewContext& ctx, ViewReport& report);

}  // namespace tessel
