// KernelEmitter: the state of emitting one group's kernel (emit_group.h), shared by the generic
// loop nests (emit_group.cpp) and the contraction micro-kernel (emit_contraction.cpp). Internal to
// kernels/cpu/; the only header of the backend that includes LLVM's.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "cost_model/cpu_loops.h"
#include "kernels/cpu/emit_group.h"

namespace tessel::cpu {


/// A prefetching node's innermost loop runs in chunks of this many vectors, each after its share
/// of the next task's lines (about eight 64-byte lines per chunk for a same-sized f32 input).
inline constexpr int64_t kPrefetchChunkVectors = 16;

/// An f32 sum whose every term is >= 0 or NaN (sums_in_runs) accumulates runs of this many terms
/// in f32, each run's sum then added to the f64 total: for terms of one sign a run's relative
/// error is at most (kSumRunTerms - 1) * 2^-24 = 3.8e-6 in any order of the adds (Higham), under
/// the f32 tolerance (relative L2 1e-5) with room for what the sum goes through.
inline constexpr int64_t kSumRunTerms = 64;
/// A lane reduction (emit_lane_reduction) sums this many vectors of outputs at a time, in an array
/// the reduction loops keep in L1.
inline constexpr int64_t kLaneReductionVectors = 4;
/// A float sum into f64 of this many terms or fewer (and at least kTreeSumMinTerms) is written out
/// and added as a balanced tree (emit_group.cpp's reduce_point).
inline constexpr int64_t kTreeSumMinTerms = 4, kTreeSumMaxTerms = 64;

/// Whether `node` is an f32 sum whose terms are >= 0 or NaN whatever its inputs (exp, a square,
/// abs, sqrt, products, sums and quotients of such, ...): its reduction then runs in runs of
/// kSumRunTerms f32 terms. A mean, whose terms may cancel, is not.
bool sums_in_runs(const TeNode& node);
/// The terms per f32 run of `node`'s reduction in the generic nest: kSumRunTerms, kRunTerms, or 0
/// (every term in f64).
int64_t run_terms(const TeNode& node);

/// A tensor as the kernel addresses it: a whole tensor (input, weight, arena), or a fused
/// producer's scratch array, addressed relative to the producer's box for the current task.
struct TensorView {
  llvm::Value* base = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;    // the tensor's shape
  std::vector<int64_t> strides;  // row-major element strides of `shape`
  llvm::MDNode* scope = nullptr;    // alias.scope of its accesses
  llvm::MDNode* noalias = nullptr;  // the scopes of every other tensor of the group
  bool scratch = false;
  /// Scratch only: the producer's spatial extents when they differ from `shape` (a reshaping
  /// output: a tensor index goes through the row-major linear index), else empty.
  std::vector<int64_t> domain_extents;
  /// Scratch with domain_extents only: the scratch array holds its box in the row-major order of
  /// the producer's domain (every axis of the box has extent 1 or the domain's row-major stride in
  /// the scratch array), so an element's offset is its linear index minus the box begin's: affine
  /// in the tensor index, with no division by the domain's extents.
  bool linear_box = false;
  std::vector<llvm::Value*> box_begin;   // scratch: the producer's box begin per spatial axis
  std::vector<int64_t> scratch_strides;  // scratch: row-major strides of the scratch extents
};

/// Where a node's output element goes: offset = sum_a (p_a - begin_a) * stride_a over its spatial
/// axes (begin 0 for a whole tensor, whose row-major index is the spatial domain's).
struct OutputView {
  TensorView tensor;
  std::vector<int64_t> strides;
  std::vector<llvm::Value*> begin;
};

struct NodeState {
  const TeNode* node = nullptr;
  int position = 0;                       // in the group
  std::vector<TensorView> inputs;
  OutputView output;
  std::vector<llvm::Value*> box_begin, box_extent;  // spatial box of this task (i64)
  std::vector<std::vector<bool>> checked;           // per input and dim: the read may leave [0, shape)
};

class KernelEmitter {
 public:
  KernelEmitter(const OpGraph& graph, const CpuGroupPlan& plan, const CodegenParams& params, llvm::Module& module);
  llvm::Function* emit();

 private:
  // --- Structure (emit_group.cpp).
  void emit_task(llvm::Value* task);
  /// A node's state for the current task: its input views, output placement and box.
  NodeState prepare_node(int position, const std::vector<std::vector<llvm::Value*>>& begins,
                         const std::vector<std::vector<llvm::Value*>>& extents);
  void emit_generic(NodeState& s);
  /// A sum whose every read walks the innermost spatial axis contiguously (or, few terms, by a
  /// stride of 2) or not at all (a depthwise convolution: in NHWC a tap's channels, in NCHW its
  /// row): the innermost spatial loop vectorized, with few terms written out inside it and the
  /// sum in registers, or the reduction loops outside it and a chunk of outputs' sums in an array
  /// (cpu_loops.h's lane_reduction_form).
  void emit_lane_reduction(NodeState& s);
  /// Software prefetch of the next task's inputs: for each tensor that a node of the group reads
  /// from memory and a later node (taking the generic nest) reads again, from cache by then, the
  /// later node fetches the lines the first one will read in the next task of this call's range,
  /// a share per chunk of its innermost loop (prefetches_, emit_innermost).
  void plan_prefetches(llvm::Value* task);
  /// Share `index` of node `s`'s prefetches (of prefetch_chunks_ shares).
  void emit_prefetch_share(const NodeState& s, llvm::Value* index);
  /// The node's innermost loop, as emit_for; when the node prefetches, in chunks
  /// (innermost_chunk), each after one share of the prefetches (LLVM's vectorizer does not take a
  /// loop with a prefetch call, and a whole row's lines at once stall the core on the full miss
  /// buffers). With `run` (a sum in runs), `run` is zeroed before each chunk and added to `total`
  /// (f64) after it.
  void emit_innermost(const NodeState& s, llvm::Value* begin, llvm::Value* end, int lanes_hint,
                      const std::function<void(llvm::Value*)>& body, llvm::AllocaInst* run = nullptr,
                      llvm::AllocaInst* total = nullptr);
  /// The chunk length of the node's innermost loop: run_terms for a sum in runs, else
  /// kPrefetchChunkVectors vectors.
  int64_t innermost_chunk(const TeNode& node) const;
  /// for (i = begin; i < end; ++i) body(i). `vector_lanes` > 1 asks LLVM's loop vectorizer for
  /// that width, 1 forbids vectorizing, 0 leaves it to LLVM.
  void emit_for(llvm::Value* begin, llvm::Value* end, int vector_lanes, const std::function<void(llvm::Value*)>& body);
  llvm::AllocaInst* entry_alloca(llvm::Type* type);
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  int vector_lanes(DType dtype) const;

  // --- Memory.
  TensorView view_of(TensorId t, const std::vector<std::vector<llvm::Value*>>& begins);
  llvm::Value* element_offset(const TensorView& v, const std::vector<llvm::Value*>& index);
  llvm::Value* element_ptr(const TensorView& v, llvm::Value* offset);
  llvm::Value* load_stored(const TensorView& v, llvm::Value* offset, llvm::Type* type);
  void store_stored(const TensorView& v, llvm::Value* offset, llvm::Value* value);
  /// Vector load/store of the lanes where `mask` (<N x i1>) is set; other lanes are not accessed
  /// (a load gives 0 there).
  llvm::Value* load_stored_masked(const TensorView& v, llvm::Value* offset, llvm::Type* type, llvm::Value* mask);
  void store_stored_masked(const TensorView& v, llvm::Value* offset, llvm::Value* value, llvm::Value* mask);
  llvm::Value* output_offset(const NodeState& s, const std::vector<llvm::Value*>& point);

  // --- Scalar evaluation at one point of a node's domain (all axes).
  using Cache = std::map<const void*, llvm::Value*>;
  llvm::Value* eval_expr(NodeState& s, const Expr& e, const std::vector<llvm::Value*>& point, Cache& cache);
  /// The group position of the producer of input `input` of `s` when it is inlined into the reads
  /// (its body evaluated at the element read), else -1.
  int inlined_producer(const NodeState& s, int input) const;
  llvm::Value* load_input(NodeState& s, int input, const std::vector<llvm::Value*>& point, Cache& cache);
  /// The tensor index input `input` reads at `point` (gather dimension resolved and checked).
  std::vector<llvm::Value*> input_index(NodeState& s, int input, const std::vector<llvm::Value*>& point, Cache& cache);
  /// The node's combined value at a spatial point: the body, or the reduction over its axes.
  llvm::Value* reduce_point(NodeState& s, std::vector<llvm::Value*> point);
  void store_point(NodeState& s, const std::vector<llvm::Value*>& point, llvm::Value* value);
  /// Row reuse (row_reuse.h): the element of reuse `r`'s buffer at a point of its source's domain
  /// (spatial, then reduction axes), for the current task.
  llvm::Value* reuse_ptr(int r, const std::vector<llvm::Value*>& source_point);
  /// Preloads into `cache` every row-reuse value the node of `s` reads at `point`.
  void load_reused(NodeState& s, const std::vector<llvm::Value*>& point, Cache& cache);
  llvm::Value* affine_value(const AffineExpr& row, const std::vector<llvm::Value*>& point);

  // --- Contraction micro-kernel (emit_contraction.cpp): false when the node does not match.
  bool emit_contraction(NodeState& s);
  const std::vector<int64_t>& reduction_steps(const NodeState& s) const { return plan_.reduction_steps[s.position]; }

  const OpGraph& graph_;
  const CpuGroupPlan& plan_;
  CodegenParams params_;
  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Value* arg_scratch_ = nullptr;
  llvm::Value* arg_boxes_ = nullptr;
  llvm::Value* arg_status_ = nullptr;
  std::map<TensorId, llvm::Value*> tensor_ptrs_;  // loaded once in the entry block
  std::vector<NodeState> states_;                 // every node of the group, for the current task
  std::map<TensorId, llvm::MDNode*> scopes_;
  std::map<TensorId, llvm::MDNode*> noalias_;
  std::vector<llvm::MDNode*> reuse_scopes_, reuse_noalias_;  // per plan_.reuses entry
  /// Lines of one tensor to prefetch for the next task: [first_byte, first_byte + lines * line).
  struct Prefetch {
    llvm::Value* base = nullptr;
    llvm::Value* first_byte = nullptr;
    llvm::Value* lines = nullptr;  // 0 when there is no next task in this call's range
  };
  std::vector<std::vector<Prefetch>> prefetches_;  // per node position, for the current task
  llvm::Value* prefetch_chunks_ = nullptr;     // the current node's chunks of its innermost loop
  llvm::AllocaInst* prefetch_counter_ = nullptr;  // the chunks it has begun
  /// What emit_for adds to the metadata of a loop with a vector hint, while a row is emitted:
  /// - one_vector (an elementwise node's innermost loop): `llvm.loop.interleave.count` 1, one
  ///   vector an iteration. LLVM's default for AVX-512 f32, four vectors an iteration, ran a row
  ///   of 16 elements (a 16^3 tile's) in its scalar remainder loop, and 48 of a row of 112:
  ///   MobileNetV2's ReLU6 in 16^3 tiles 0.78-0.95 -> 0.34-0.39 ms.
  /// - rolled (a short contiguous reduction row): `llvm.loop.unroll.disable` too, so that LLVM
  ///   vectorizes a constant-trip sum (a 32-wide row of a global average pool) instead of
  ///   unrolling it whole into one serial chain of adds, which its SLP vectorizer does not turn
  ///   back into vector adds.
  /// - predicated (a lane reduction's row that is not a whole number of vectors, an elementwise
  ///   node's row shorter than a vector): `llvm.loop.vectorize.predicate.enable`, the tail folded
  ///   into masked vectors: a 14-point row of an NCHW convolution over 14 x 14 pixels is one
  ///   masked vector, where the vector loop was never entered and its 14 points ran in the scalar
  ///   remainder. (Not a strided row: masked, its interleaved reads would be gathers.)
  /// Loops inside the row's body are not the row's (unmarked()).
  enum class RowMark : uint8_t { none, one_vector, rolled, predicated };
  RowMark row_mark_ = RowMark::none;
  /// The node (its position) whose reads are known inside their tensors: load_input leaves out
  /// their bounds checks (emit_lane_reduction's interior version); -1: none.
  int unchecked_position_ = -1;
  /// The node (its position) whose checked reads along guarded_axis_ load under a branch on the
  /// check, their index not clamped (emit_lane_reduction's rows: the vectorizer makes them masked
  /// loads); -1: none.
  int guarded_position_ = -1, guarded_axis_ = -1;
  /// With guarded_position_: the reads' dimensions along guarded_axis_ are known inside (a
  /// strided row's interior), or the others are (the row's test at its first point): no check.
  bool guarded_inside_ = false, guarded_rest_inside_ = false;
  /// `body` run with row_mark_ none, the mark restored after it.
  std::function<void(llvm::Value*)> unmarked(std::function<void(llvm::Value*)> body);
  /// The longest reduction row kept rolled (RowMark::rolled): LLVM unrolls constant-trip loops up
  /// to about this many terms whole, longer ones it vectorizes as they are.
  static constexpr int64_t kMaxRolledReductionTerms = 64;
};

/// Whether the micro-kernel (emit_contraction.cpp) takes this node's pattern.
bool matches_contraction(const TeNode& node);

}  // namespace tessel::cpu
