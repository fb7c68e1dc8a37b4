// Recognizing attention in a lowered graph: the unfused chain
//
//   S[b.., m, n]  = sum_d Q(b.., m, d) * K(b.., n, d)        (two reads, one reduction axis)
//   X             = e_k(...e_1(S, side inputs)...)           (elementwise: scale, mask, bias)
//   M[b.., m, 0]  = max_n X[b.., m, n]                       (Softmax's lowering, ops/softmax)
//   L[b.., m, 0]  = sum_n exp(X[b.., m, n] - M[b.., m, 0])
//   P[b.., m, n]  = exp(X[b.., m, n] - M[b.., m, 0]) / L[b.., m, 0]
//   O[b.., m, j]  = sum_n P(b.., m, n) * V(b.., n, j)
//
// which a flash-style kernel computes without ever materializing S or P: per block of query
// rows it streams the keys in chunks, rescaling the running max, sum and output online
// (policy/welder.cpp forms the group, kernels/cuda/attention_plan.h plans the kernel). The match
// is structural: every intermediate of the chain must be read only inside it (a graph output or
// an outside reader of S, X or P keeps the unfused kernels), the side inputs of the elementwise
// steps may be anything read through affine maps (a mask tensor, a scale constant).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tilegraph/op_graph.h"

namespace tessel {

struct AttentionPattern {
  NodeId scores = -1;                 // S
  std::vector<NodeId> score_epilogue; // e_1 .. e_k, in order (X is the last, or S when empty)
  NodeId max = -1, sum = -1, probs = -1;  // M, L, P
  NodeId out = -1;                    // O
  int probs_slot = 0;                 // O's input read from P (the other one is V)
  /// Plain copies (Transpose: body in0, same dtype, no reshape, one reader) in front of the reads
  /// of Q, K and V, nearest first per operand; a kernel folds them into its reads.
  std::vector<NodeId> operand_copies;

  NodeId logits() const { return score_epilogue.empty() ? scores : score_epilogue.back(); }
  /// Every node of the pattern in a topological order, O last.
  std::vector<NodeId> nodes(const OpGraph& graph) const;
};

/// The pattern ending at `out`, or nullopt with the first condition that failed in `why` (when
/// given). Structural only: dtypes and extents are the kernel planner's business.
std::optional<AttentionPattern> match_attention(const OpGraph& graph, NodeId out, std::string* why = nullptr);

}  // namespace tessel
