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
  /// Copies after O that only move its elements, in order, each the only reader of the one before
  /// (the heads' merge: a Transpose, then a Reshape): a kernel stores O where the last one puts it
  /// (attention_store_strides), O's last axis staying innermost. Empty: O is stored as it is.
  std::vector<NodeId> output_copies;

  NodeId logits() const { return score_epilogue.empty() ? scores : score_epilogue.back(); }
  /// The node whose output the pattern writes: the last output copy, else O.
  NodeId sink() const { return output_copies.empty() ? out : output_copies.back(); }
  /// Every node of the pattern in a topological order, O then its output copies last.
  std::vector<NodeId> nodes(const OpGraph& graph) const;
};

/// The pattern ending at `node` -- O, or one of O's output copies --, or nullopt with the first
/// condition that failed in `why` (when given). Matched at O, the pattern takes every output copy
/// there is (the policy forms the longest group); matched at a copy, the copies up to it.
/// Structural only: dtypes and extents are the kernel planner's business.
std::optional<AttentionPattern> match_attention(const OpGraph& graph, NodeId node, std::string* why = nullptr);

/// The pattern of a group whose sink is `sink`: match_attention's, with no output copies when
/// `sink` is O (a schedule saved before output copies joined the pattern, or one that leaves them
/// to kernels of their own), so that AttentionPattern::sink() is `sink`.
std::optional<AttentionPattern> match_attention_to(const OpGraph& graph, NodeId sink, std::string* why = nullptr);

/// Per spatial axis of O, the element stride of its coordinate in the sink's output: row-major
/// over O's domain without output copies, else where the copies move it.
std::vector<int64_t> attention_store_strides(const OpGraph& graph, const AttentionPattern& p);

/// The key chunks a streamed kernel must visit, per block of query rows: block b (query rows
/// [b * rows, (b + 1) * rows)) visits chunks [first[b], end[b]) of `chunk` keys; the others hold
/// only keys the score steps exclude -- a causal or banded mask, built from constants (Trilu of a
/// constant fill, a constant mask tensor, index comparisons), adds so large a negative number to
/// them that their probabilities are below 2^-126 of the row's largest, which the kernel's
/// exponential (ex2 with subnormals flushed) makes exactly 0, and the reference's e^x is below
/// e^-90. Proved by interval arithmetic (value_bounds.h) over each block x chunk box of the
/// logits, with the scores S bounded by +-kAttentionScoreBound: f16's largest value, a bound an
/// f16 S never exceeds, and an assumption for bf16 and f32 (a score of 65504 before the scale has
/// no meaning a softmax keeps). The row maximum's lower bound is the best lower bound of the
/// logits over a chunk or over one key column (the first, the last) that every row of the block
/// reads. Chunks between kept ones are kept.
struct AttentionKeyRanges {
  int64_t rows = 0, chunk = 0, chunks = 0;  // the geometry; chunks = ceil(keys / chunk)
  std::vector<int32_t> first, end;          // per block of rows
  /// Per block, the chunks [plain_first, plain_end) (inside [first, end); empty when none) where
  /// every score step that reads a side input per point is an identity -- adds or subtracts a
  /// side input that is 0 over the box, or multiplies by one that is 1 (a causal mask below the
  /// diagonal): a kernel may score them without those steps, exactly (x + 0 is x; -0 + 0 is +0,
  /// which a softmax does not tell apart). `plain_steps` lists those steps.
  std::vector<int32_t> plain_first, plain_end;
  std::vector<NodeId> plain_steps;
  int64_t visited() const;                   // sum of end - first
  int64_t skipped() const { return static_cast<int64_t>(first.size()) * chunks - visited(); }
  int64_t plain() const;                     // sum of plain_end - plain_first
};
constexpr double kAttentionScoreBound = 65504;
/// Gap (natural log) below the row maximum past which a key's probability is 0 in the kernel.
constexpr double kAttentionExcludedGap = 90;

/// The largest magnitude the logits of `p` can take (scores bounded as above), +inf when unknown
/// (a mask given as a model input). A streamed kernel's fast exponent is exact below 2^20.
double attention_logit_bound(const OpGraph& graph, const AttentionPattern& p);

/// The key ranges of `p` for blocks of `rows` queries and chunks of `chunk` keys, or nullopt when
/// no chunk of any block can be skipped (no score steps, no constant mask, or none that excludes
/// a whole chunk).
std::optional<AttentionKeyRanges> attention_key_ranges(const OpGraph& graph, const AttentionPattern& p, int64_t rows,
                                                       int64_t chunk);

}  // namespace tessel
