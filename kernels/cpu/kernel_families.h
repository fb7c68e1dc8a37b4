// The CPU backend's kernel families (policy/kernel_families.h), in the order it prefers them:
//
//   microkernel  the group's contractions (GEMM, convolution) on the register-blocked FMA
//                micro-kernel (emit_contraction.cpp), its other nodes as vector loop nests;
//                with `block_k` and `block_n` recorded, its contraction reads a block-sparse
//                weight (the block_sparse tile kind) and walks only the non-zero blocks of it
//   loops        every node as vector loop nests with correct tails (emit_group.cpp)
//
// Row reuse and streaming stores (row_reuse.h, streaming_stores.h) apply in both. A group records
// its family while the policy schedules; plan_cpu_group reads it, so a group recorded as `loops`
// keeps its contractions off the micro-kernel, and `microkernel` on a group without a
// contraction it takes is refused.
#pragma once

#include "policy/kernel_families.h"

namespace tessel::cpu {

class CpuKernelFamilies : public KernelFamilies {
 public:
  std::string_view backend() const override { return "cpu"; }
  std::vector<Family> families() const override;
  KernelChoice choose(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// The family name; `microkernel` needs a contraction the micro-kernel takes; a block_sparse
  /// tile kind needs `microkernel` with `block_k` x `block_n` its blocks (sparse_contraction), and
  /// those parameters need the kind.
  std::optional<std::string> check(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
  /// choose()'s, then -- for a group whose contraction reads a sparse weight as the micro-kernel's
  /// B (sparse_contraction) -- `microkernel` with each block it can skip at: block_k of 64, 32,
  /// 16, 8 reduction points (larger first: they win ties of density), block_n one or two column
  /// blocks of the dense register blocking (so the sparse kernel keeps it).
  std::vector<KernelChoice> variants(const OpGraph& graph, const ScheduledGroup& group, const HwSpec& spec) const override;
};

/// A contraction of a group whose block-sparse weight the micro-kernel can skip blocks of: the
/// weight is its B (read along the innermost spatial axis n), the node has one reduction axis k,
/// and the weight's last two dimensions are read as k and n, each with coefficient 1 and no
/// offset (MatMul's [K, N] weight, Gemm's transposed [N, K]).
struct SparseContraction {
  NodeId node = -1;
  int input = -1;       // the weight's position among the node's inputs
  bool k_rows = true;   // the weight's rows (its second-to-last dimension) run along k
};

/// The group's contraction reading a weight with a sparsity attribute, when the micro-kernel can
/// skip its blocks; nullopt, with the reason in `why` (when given), otherwise or when it has none.
std::optional<SparseContraction> sparse_contraction(const OpGraph& graph, const ScheduledGroup& group, std::string* why = nullptr);

/// Whether the micro-kernel (emit_contraction.cpp) takes this node's pattern.
bool matches_contraction(const TeNode& node);

/// The group's block_sparse tile kind as the micro-kernel walks it: the kind and its node, and
/// its blocks along k and n -- or, in `problem`, why the group cannot be walked: its kind and
/// recorded `block_k`/`block_n` must agree, on the micro-kernel family, with a sparse_contraction,
/// edges multiples of kNonzeroUnit and no larger than the matrix. `node` is -1 (and `problem`
/// empty) for a group with neither. Part of check().
struct SparseWalk {
  NodeId node = -1;
  const BlockSparseProps* props = nullptr;
  int64_t block_k = 0, block_n = 0;
  bool k_rows = true;  // the weight's rows run along k (SparseContraction::k_rows)
  std::string problem;
};
SparseWalk sparse_walk(const OpGraph& graph, const ScheduledGroup& group);

/// The width in columns (NR vectors x lanes) of the micro-kernel's column blocks for `node` over a
/// task box of `m_box` x `n_box` (its register blocking for the spec, as emit_contraction.cpp
/// chooses it); 0 when the micro-kernel does not take the node.
int64_t microkernel_columns(const TeNode& node, int64_t m_box, int64_t n_box, const HwSpec& spec);

/// The spatial axis the micro-kernel blocks its rows along for `node` (the nearest one the
/// broadcast operand reads and the other does not), or -1 (no m axis, or not taken).
int microkernel_m_axis(const TeNode& node);

/// How many nodes of `group` the micro-kernel takes.
int microkernel_nodes(const OpGraph& graph, const ScheduledGroup& group);

}  // namespace tessel::cpu
