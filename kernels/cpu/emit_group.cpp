// The CPU kernel of one fused group (emit_group.h): task loop, tensor addressing, and the generic
// loop nest that evaluates any tensor-expression node.
//
// The generic nest is the reference lowering every node can take: spatial axes outermost (the
// task's box of the node), then the reduction axes, then the body at one point -- loads through
// the affine maps (out-of-range reads give the pad value; only dimensions that can leave the
// tensor are checked, branch-free), the ExprOps (emit_scalar.h), the combiner -- and a store
// rounded to the output dtype. The innermost loop carries a vectorization width derived from the
// spec's SIMD width, and every memory access carries alias scopes (the tensors of a group never
// overlap), so LLVM's loop vectorizer turns elementwise loops and sum/product reductions into
// vector code with correct tails. Contractions take the register-blocked micro-kernel instead
// (emit_contraction.cpp). Row reuse (row_reuse.h): a reduction that stores a value for a later
// node does so from its innermost point, and the reader's body finds the loaded value in its
// evaluation cache (reduce_point, load_reused).
#include "kernels/cpu/kernel_emitter.h"

#include <cmath>

#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include "kernels/cpu/emit_scalar.h"
#include "kernels/cpu/streaming_stores.h"
#include "tilegraph/error.h"

namespace tessel::cpu {

using llvm::Value;

CodegenParams codegen_params(const HwSpec& spec) {
  CodegenParams p;
  if (spec.kind != "cpu")
    throw UserError(spec.file, "/kind", cat("the CPU backend needs a cpu spec, '", spec.name, "' is a ", spec.kind));
  if (spec.compute.simd_width <= 0)
    throw UserError(spec.file, "/compute/simd_width", cat("must be positive for CPU code generation, got ", spec.compute.simd_width));
  p.vector_bytes = spec.compute.simd_width * dtype_bytes(DType::f32);
  const int regs = spec.level_index("registers");
  if (regs < 0)
    throw UserError(spec.file, "/memory_levels", cat("spec '", spec.name, "' has no 'registers' level (the micro-kernel is sized from it)"));
  p.vector_registers = vector_registers(spec);
  p.l1_bytes = first_cache_bytes(spec);
  p.bound_rows = compute_bound_rows(spec);
  p.pack_bytes = pack_bytes(spec);
  p.reuse_bytes = p.pack_bytes;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.cache) p.streaming_bytes = std::max(p.streaming_bytes, l.capacity_bytes * std::max<int64_t>(1, l.instances));
  p.line_bytes = cache_line_bytes(spec);
  p.tensor_alignment = arena_alignment(spec);
  return p;
}

std::string kernel_name(int group) { return cat("tessel_group_", group); }

namespace {
bool same_expr(const Expr& a, const Expr& b) {
  if (a.get() == b.get()) return true;
  if (a.op() != b.op() || a.dtype() != b.dtype() || a.operands().size() != b.operands().size()) return false;
  if (a.op() == ExprOp::input || a.op() == ExprOp::axis_index) return a.index() == b.index();
  if (a.op() == ExprOp::constant) return a.scalar() == b.scalar();
  for (size_t i = 0; i < a.operands().size(); ++i)
    if (!same_expr(a.operands()[i], b.operands()[i])) return false;
  return true;
}

/// Whether `e` (a float) is >= 0 or NaN at every point, whatever the inputs.
bool nonnegative(const Expr& e) {
  const std::vector<Expr>& o = e.operands();
  switch (e.op()) {
    case ExprOp::constant: return !(e.value() < 0);
    case ExprOp::exp: case ExprOp::abs: case ExprOp::sqrt: case ExprOp::rsqrt: case ExprOp::sigmoid: return true;
    case ExprOp::mul: return same_expr(o[0], o[1]) || (nonnegative(o[0]) && nonnegative(o[1]));
    case ExprOp::add: case ExprOp::div: case ExprOp::min: return nonnegative(o[0]) && nonnegative(o[1]);
    case ExprOp::max: return nonnegative(o[0]) || nonnegative(o[1]);
    case ExprOp::select: return nonnegative(o[1]) && nonnegative(o[2]);
    default: return false;
  }
}
}  // namespace

bool sums_in_runs(const TeNode& node) {
  return node.combiner() == Combiner::sum && node.num_reduction() > 0 &&
         node.body().dtype() == DType::f32 && nonnegative(node.body());
}

bool products_in_runs(const TeNode& node) {
  const Expr& e = node.body();
  return node.combiner() == Combiner::sum && node.num_reduction() > 0 && e.dtype() == DType::f32 &&
         e.op() == ExprOp::mul && e.operands()[0].op() != ExprOp::constant && e.operands()[1].op() != ExprOp::constant;
}

int64_t run_terms(const TeNode& node) {
  return sums_in_runs(node) ? kSumRunTerms : products_in_runs(node) ? kRunTerms : 0;
}

llvm::Function* emit_group_kernel(const OpGraph& graph, const CpuGroupPlan& plan, const CodegenParams& params,
                                  llvm::Module& module) {
  return KernelEmitter(graph, plan, params, module).emit();
}

KernelEmitter::KernelEmitter(const OpGraph& graph, const CpuGroupPlan& plan, const CodegenParams& params,
                             llvm::Module& module)
    : graph_(graph), plan_(plan), params_(params), module_(module), ctx_(module.getContext()), b_(module.getContext()) {}

int KernelEmitter::vector_lanes(DType dtype) const {
  return static_cast<int>(std::max<int64_t>(1, params_.vector_bytes / compute_bytes(dtype)));
}

llvm::Function* KernelEmitter::emit() {
  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64t = b_.getInt64Ty();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64t, i64t, ptr, ptr, ptr}, false);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, kernel_name(plan_.group), module_);
  fn_->setDoesNotThrow();
  const char* arg_names[] = {"tensors", "task_begin", "task_end", "scratch", "boxes", "status"};
  for (unsigned i = 0; i < 6; ++i) fn_->getArg(i)->setName(arg_names[i]);
  for (unsigned i : {0u, 3u, 4u, 5u}) fn_->addParamAttr(i, llvm::Attribute::NoAlias);
  if (params_.vector_bytes * 8 > 256)  // let the backend use registers as wide as the spec's
    fn_->addFnAttr("min-legal-vector-width", std::to_string(params_.vector_bytes * 8));
  arg_scratch_ = fn_->getArg(3);
  arg_boxes_ = fn_->getArg(4);
  arg_status_ = fn_->getArg(5);

  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);

  // Alias scopes: one per tensor the group touches; tensors of one group never overlap (their
  // arena lifetimes all include this group, inputs and weights have buffers of their own, and
  // scratch arrays are disjoint).
  std::vector<TensorId> touched;
  for (NodeId n : plan_.nodes) {
    for (TensorId t : graph_.node_inputs(n)) touched.push_back(t);
    touched.push_back(graph_.node_output(n));
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  llvm::MDBuilder mdb(ctx_);
  llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain(kernel_name(plan_.group));
  // Row-reuse buffers are scratch arrays of their own, disjoint from every tensor's.
  std::vector<llvm::MDNode*> scope;  // the tensors' in `touched` order, then the reuse buffers'
  for (TensorId t : touched) scope.push_back(mdb.createAnonymousAliasScope(domain, graph_.tensor(t).name));
  for (const CpuRowReuse& r : plan_.reuses)
    scope.push_back(mdb.createAnonymousAliasScope(domain, cat("reuse in ", graph_.node(plan_.nodes[r.source]).name())));
  auto others = [&](size_t self) {
    std::vector<llvm::Metadata*> list;
    for (size_t o = 0; o < scope.size(); ++o)
      if (o != self) list.push_back(scope[o]);
    return llvm::MDNode::get(ctx_, list);
  };
  for (size_t k = 0; k < scope.size(); ++k) {
    llvm::MDNode* own = llvm::MDNode::get(ctx_, {scope[k]});
    if (k < touched.size()) {
      scopes_[touched[k]] = own;
      noalias_[touched[k]] = others(k);
    } else {
      reuse_scopes_.push_back(own);
      reuse_noalias_.push_back(others(k));
    }
  }
  // Tensor pointers, loaded once.
  for (TensorId t : touched) {
    Value* slot = b_.CreateInBoundsGEP(ptr, fn_->getArg(0), i64(t));
    tensor_ptrs_[t] = b_.CreateLoad(ptr, slot, graph_.tensor(t).name);
  }
  // Streamed outputs (streaming_stores.h): their scopes listed for mark_streaming_stores, and
  // their buffers' alignment stated, from which LLVM proves the vector stores aligned.
  bool streams = false;
  for (const CpuNodeBuffer& buf : plan_.buffers) {
    if (!buf.streamed) continue;
    streams = true;
    module_.getOrInsertNamedMetadata(kStreamingScopes)->addOperand(llvm::cast<llvm::MDNode>(scopes_.at(buf.tensor)->getOperand(0).get()));
    b_.CreateAlignmentAssumption(module_.getDataLayout(), tensor_ptrs_.at(buf.tensor),
                                 static_cast<uint64_t>(params_.tensor_alignment));
  }

  emit_for(fn_->getArg(1), fn_->getArg(2), 1, [&](Value* task) { emit_task(task); });
  // Non-temporal stores are weakly ordered: visible to every thread before the kernel returns
  // (the thread pool then reports the range done).
  if (streams) b_.CreateFence(llvm::AtomicOrdering::SequentiallyConsistent);
  b_.CreateRetVoid();
  return fn_;
}

void KernelEmitter::emit_task(Value* task) {
  // This task's boxes, from the plan's table.
  Value* row = b_.CreateInBoundsGEP(b_.getInt64Ty(), arg_boxes_, b_.CreateMul(task, i64(plan_.box_stride)));
  std::vector<std::vector<Value*>> begins(plan_.nodes.size()), extents(plan_.nodes.size());
  for (size_t k = 0; k < plan_.nodes.size(); ++k) {
    const int ns = graph_.node(plan_.nodes[k]).num_spatial();
    for (int a = 0; a < ns; ++a) {
      const int64_t at = plan_.box_offset[k] + 2 * a;
      begins[k].push_back(b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), row, i64(at))));
      extents[k].push_back(b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), row, i64(at + 1))));
    }
    // A streamed output's innermost loop starts, in every task, at a multiple of `m` elements
    // (the largest power of two up to a vector's lanes dividing every task's begin): stated, so
    // that LLVM can prove its vector stores aligned (streaming_stores.h).
    if (plan_.buffers[k].streamed && ns > 0) {
      const int64_t at = plan_.box_offset[k] + 2 * (ns - 1);
      int64_t m = vector_lanes(graph_.tensor(plan_.buffers[k].tensor).type.dtype);
      for (int64_t t = 0; t < plan_.num_tasks && m > 1; ++t)
        while (m > 1 && plan_.boxes[static_cast<size_t>(t * plan_.box_stride + at)] % m != 0) m /= 2;
      if (m > 1) b_.CreateAssumption(b_.CreateICmpEQ(b_.CreateAnd(begins[k].back(), i64(m - 1)), i64(0)));
    }
  }
  // Producers first: every consumer's reads fall inside the producer's box (tile propagation).
  // Inlined nodes get no loops; their consumers evaluate them (load_input).
  states_.clear();
  for (size_t k = 0; k < plan_.nodes.size(); ++k) states_.push_back(prepare_node(static_cast<int>(k), begins, extents));
  plan_prefetches(task);
  // A row-reuse source stores its value from the generic nest's innermost point (reduce_point).
  for (size_t k = 0; k < plan_.nodes.size(); ++k) {
    if (plan_.buffers[k].inlined) continue;
    if (plan_.reuse_stored_by(static_cast<int>(k)) || !plan_.microkernel || !emit_contraction(states_[k]))
      emit_generic(states_[k]);
  }
}

void KernelEmitter::emit_for(Value* begin, Value* end, int vector_lanes, const std::function<void(Value*)>& body) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
  auto* inner = llvm::BasicBlock::Create(ctx_, "body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
  i->addIncoming(begin, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, end), inner, exit);
  b_.SetInsertPoint(inner);
  body(i);
  Value* next = b_.CreateNSWAdd(i, i64(1));
  llvm::BranchInst* latch = b_.CreateBr(header);
  i->addIncoming(next, b_.GetInsertBlock());
  if (vector_lanes > 0) {
    auto* width = llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.width"),
                                           llvm::ConstantAsMetadata::get(b_.getInt32(vector_lanes))});
    auto tmp = llvm::MDNode::getTemporary(ctx_, std::nullopt);
    std::vector<llvm::Metadata*> ops{tmp.get(), width};
    if (vector_lanes > 1 && row_mark_ == RowMark::one_vector)
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                                             llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
    if (vector_lanes > 1 && row_mark_ == RowMark::rolled)
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")}));
    if (vector_lanes > 1 && row_mark_ == RowMark::predicated)
      ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.vectorize.predicate.enable"),
                                             llvm::ConstantAsMetadata::get(b_.getTrue())}));
    llvm::MDNode* loop = llvm::MDNode::get(ctx_, ops);
    loop->replaceOperandWith(0, loop);
    latch->setMetadata(llvm::LLVMContext::MD_loop, loop);
  }
  b_.SetInsertPoint(exit);
}

std::function<void(Value*)> KernelEmitter::unmarked(std::function<void(Value*)> body) {
  return [this, body = std::move(body)](Value* i) {
    const RowMark mark = row_mark_;
    row_mark_ = RowMark::none;
    body(i);
    row_mark_ = mark;
  };
}

void KernelEmitter::plan_prefetches(Value* task) {
  prefetches_.assign(plan_.nodes.size(), {});
  if (params_.line_bytes <= 0) return;
  const int count = static_cast<int>(plan_.nodes.size());
  // Input `i` of the node at `k`, when it reads a tensor from memory: no node of the group
  // produces it and the read is not a gather. Else -1.
  auto memory_read = [&](int k, int i) -> TensorId {
    const TensorId t = graph_.node_inputs(plan_.nodes[k])[i];
    if (graph_.tensor(t).producer >= 0 && plan_.position(graph_.tensor(t).producer) >= 0) return -1;
    const Access& acc = graph_.node(plan_.nodes[k]).inputs()[i];
    if (acc.is_gather() || acc.type.num_elements() == 0) return -1;
    return t;
  };
  // The row of the next task in the box table (this task's when there is none: then nothing is
  // fetched, and the row read stays inside the table).
  Value* next = b_.CreateAdd(task, i64(1));
  Value* has_next = b_.CreateICmpSLT(next, fn_->getArg(2));
  Value* row = b_.CreateInBoundsGEP(b_.getInt64Ty(), arg_boxes_,
                                    b_.CreateMul(b_.CreateSelect(has_next, next, task), i64(plan_.box_stride)));
  std::vector<TensorId> fetched;
  for (int k = 1; k < count; ++k) {
    // The fetching node must run the generic nest (its loops get the prefetches).
    const TeNode& node = graph_.node(plan_.nodes[k]);
    if (plan_.buffers[k].inlined || (!plan_.reuse_stored_by(k) && plan_.microkernel && matches_contraction(node))) continue;
    for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
      const TensorId t = memory_read(k, i);
      if (t < 0 || std::find(fetched.begin(), fetched.end(), t) != fetched.end()) continue;
      int first = -1, first_input = -1;  // the first node that reads t from memory
      for (int j = 0; j < k && first < 0; ++j) {
        if (plan_.buffers[j].inlined) continue;
        for (int q = 0; q < static_cast<int>(graph_.node(plan_.nodes[j]).inputs().size()); ++q)
          if (memory_read(j, q) == t) { first = j; first_input = q; break; }
      }
      if (first < 0) continue;
      fetched.push_back(t);
      // What the first reader reads of t in the next task: per tensor dimension, the map row's
      // least and greatest value over that task's box (reduction axes whole), clamped to the
      // tensor; the lines from the first element to the last.
      const TeNode& reader = graph_.node(plan_.nodes[first]);
      const Access& acc = reader.inputs()[first_input];
      const int ns = reader.num_spatial();
      std::vector<Value*> lo(ns), hi(ns);
      for (int a = 0; a < ns; ++a) {
        const int64_t at = plan_.box_offset[first] + 2 * a;
        lo[a] = b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), row, i64(at)));
        Value* extent = b_.CreateLoad(b_.getInt64Ty(), b_.CreateInBoundsGEP(b_.getInt64Ty(), row, i64(at + 1)));
        hi[a] = b_.CreateSub(b_.CreateAdd(lo[a], extent), i64(1));
      }
      std::vector<int64_t> strides(acc.type.shape.size(), 1);
      for (int d = static_cast<int>(strides.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * acc.type.shape[d + 1];
      Value* first_elem = i64(0);
      Value* last_elem = i64(0);
      Value* volume = i64(1);
      for (int d = 0; d < acc.map.num_results(); ++d) {
        const AffineExpr& r = acc.map.result(d);
        Value* mn = i64(r.offset);
        Value* mx = i64(r.offset);
        for (size_t a = 0; a < r.coeffs.size(); ++a) {
          const int64_t c = r.coeffs[a];
          if (c == 0) continue;
          const int ai = static_cast<int>(a);
          Value* l = ai < ns ? lo[a] : i64(0);
          Value* h = ai < ns ? hi[a] : i64(reader.axes()[a].extent - 1);
          mn = b_.CreateAdd(mn, b_.CreateMul(i64(c), c > 0 ? l : h));
          mx = b_.CreateAdd(mx, b_.CreateMul(i64(c), c > 0 ? h : l));
        }
        mn = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, mn, i64(0));
        mx = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, mx, i64(acc.type.shape[d] - 1));
        first_elem = b_.CreateAdd(first_elem, b_.CreateMul(mn, i64(strides[d])));
        last_elem = b_.CreateAdd(last_elem, b_.CreateMul(mx, i64(strides[d])));
        volume = b_.CreateMul(volume, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, b_.CreateAdd(b_.CreateSub(mx, mn), i64(1)), i64(0)));
      }
      const int64_t bytes = dtype_bytes(acc.type.dtype), line = params_.line_bytes;
      Value* first_byte = b_.CreateAnd(b_.CreateMul(first_elem, i64(bytes)), i64(~(line - 1)));
      Value* end_byte = b_.CreateMul(b_.CreateAdd(last_elem, i64(1)), i64(bytes));
      Value* lines = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(end_byte, first_byte), i64(line - 1)), i64(line));
      // Fetched only when the range is dense: a box whose rows lie far apart (a column of a
      // wide tensor) would fetch mostly lines nobody reads.
      Value* span = b_.CreateAdd(b_.CreateSub(last_elem, first_elem), i64(1));
      Value* dense = b_.CreateAnd(b_.CreateICmpSGT(volume, i64(0)), b_.CreateICmpSLE(span, b_.CreateMul(volume, i64(2))));
      lines = b_.CreateSelect(b_.CreateAnd(has_next, dense), lines, i64(0));
      prefetches_[k].push_back({tensor_ptrs_.at(t), first_byte, lines});
    }
  }
}

void KernelEmitter::emit_prefetch_share(const NodeState& s, Value* index) {
  for (const Prefetch& pf : prefetches_[s.position]) {
    Value* share = b_.CreateSDiv(b_.CreateAdd(pf.lines, b_.CreateSub(prefetch_chunks_, i64(1))), prefetch_chunks_);
    Value* from = b_.CreateMul(index, share);
    Value* to = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(from, share), pf.lines);
    emit_for(from, to, 1, [&](Value* l) {
      Value* at = b_.CreateAdd(pf.first_byte, b_.CreateMul(l, i64(params_.line_bytes)));
      // read, locality 3 (every cache level: prefetcht0; locality 1 timed alike), data
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()},
                         {b_.CreateGEP(b_.getInt8Ty(), pf.base, at), b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
    });
  }
}

int64_t KernelEmitter::innermost_chunk(const TeNode& node) const {
  return run_terms(node) > 0 ? run_terms(node) : kPrefetchChunkVectors * vector_lanes(node.body().dtype());
}

void KernelEmitter::emit_innermost(const NodeState& s, Value* begin, Value* end, int lanes_hint,
                                   const std::function<void(Value*)>& body, llvm::AllocaInst* run,
                                   llvm::AllocaInst* total) {
  const bool prefetches = !prefetches_[s.position].empty();
  if (!prefetches && !run) return emit_for(begin, end, lanes_hint, body);
  const int64_t chunk = innermost_chunk(*s.node);
  Value* n = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(end, begin), i64(chunk - 1)), i64(chunk));
  emit_for(i64(0), n, 1, [&](Value* q) {
    if (prefetches) {
      Value* index = b_.CreateLoad(b_.getInt64Ty(), prefetch_counter_);
      emit_prefetch_share(s, index);
      b_.CreateStore(b_.CreateAdd(index, i64(1)), prefetch_counter_);
    }
    if (run) b_.CreateStore(llvm::ConstantFP::get(run->getAllocatedType(), 0.0), run);
    Value* from = b_.CreateAdd(begin, b_.CreateMul(q, i64(chunk)));
    emit_for(from, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(from, i64(chunk)), end), lanes_hint, body);
    if (run) {
      Value* sum = b_.CreateFPExt(b_.CreateLoad(run->getAllocatedType(), run), total->getAllocatedType());
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(total->getAllocatedType(), total), sum), total);
    }
  });
}

llvm::AllocaInst* KernelEmitter::entry_alloca(llvm::Type* type) {
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  return eb.CreateAlloca(type);
}

// ---------------------------------------------------------------------------------------------
// Memory.

namespace {
/// Whether `e`, a subexpression of `node`'s body, can change when `axis` moves.
bool varies_along(const TeNode& node, const Expr& e, int axis) {
  switch (e.op()) {
    case ExprOp::input: return input_varies(node, e.index(), axis);
    case ExprOp::axis_index: return e.index() == axis;
    case ExprOp::constant: return false;
    default:
      for (const Expr& o : e.operands())
        if (varies_along(node, o, axis)) return true;
      return false;
  }
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}
}  // namespace

TensorView KernelEmitter::view_of(TensorId t, const std::vector<std::vector<Value*>>& begins) {
  TensorView v;
  const TensorInfo& info = graph_.tensor(t);
  v.dtype = info.type.dtype;
  v.shape = info.type.shape;
  v.strides = row_major_strides(v.shape);
  v.scope = scopes_.at(t);
  v.noalias = noalias_.at(t);
  const int k = info.producer >= 0 ? plan_.position(info.producer) : -1;
  if (k >= 0 && plan_.buffers[k].in_scratch) {
    const CpuNodeBuffer& buf = plan_.buffers[k];
    const TeNode& producer = graph_.node(info.producer);
    v.scratch = true;
    v.base = b_.CreateInBoundsGEP(b_.getInt8Ty(), arg_scratch_, i64(buf.scratch_offset_bytes));
    std::vector<int64_t> domain;
    for (int a = 0; a < producer.num_spatial(); ++a) domain.push_back(producer.axes()[a].extent);
    if (domain != v.shape) v.domain_extents = domain;
    v.box_begin = begins[k];
    v.scratch_strides = row_major_strides(buf.scratch_extents);
    if (!v.domain_extents.empty()) {
      const std::vector<int64_t> ds = row_major_strides(domain);
      v.linear_box = true;
      for (size_t a = 0; a < domain.size(); ++a)
        if (buf.scratch_extents[a] != 1 && v.scratch_strides[a] != ds[a]) v.linear_box = false;
    }
  } else {
    v.base = tensor_ptrs_.at(t);
  }
  return v;
}

Value* KernelEmitter::element_offset(const TensorView& v, const std::vector<Value*>& index) {
  Value* off = i64(0);
  if (!v.scratch) {
    for (size_t d = 0; d < index.size(); ++d) off = b_.CreateAdd(off, b_.CreateMul(index[d], i64(v.strides[d])));
    return off;
  }
  std::vector<Value*> point = index;
  if (!v.domain_extents.empty()) {  // tensor index -> linear -> the producer's domain point
    Value* linear = i64(0);
    for (size_t d = 0; d < index.size(); ++d) linear = b_.CreateAdd(linear, b_.CreateMul(index[d], i64(v.strides[d])));
    const std::vector<int64_t> ds = row_major_strides(v.domain_extents);
    if (v.linear_box) {  // sum_a (p_a - begin_a) ds_a = linear - sum_a begin_a ds_a (TensorView::linear_box)
      for (size_t a = 0; a < ds.size(); ++a) linear = b_.CreateSub(linear, b_.CreateMul(v.box_begin[a], i64(ds[a])));
      return linear;
    }
    point.clear();
    for (size_t a = 0; a < v.domain_extents.size(); ++a)
      point.push_back(b_.CreateURem(b_.CreateUDiv(linear, i64(ds[a])), i64(v.domain_extents[a])));
  }
  for (size_t a = 0; a < point.size(); ++a)
    off = b_.CreateAdd(off, b_.CreateMul(b_.CreateSub(point[a], v.box_begin[a]), i64(v.scratch_strides[a])));
  return off;
}

Value* KernelEmitter::element_ptr(const TensorView& v, Value* offset) {
  return b_.CreateInBoundsGEP(storage_type(ctx_, v.dtype), v.base, offset);
}

Value* KernelEmitter::load_stored(const TensorView& v, Value* offset, llvm::Type* type) {
  llvm::LoadInst* ld = b_.CreateAlignedLoad(type, element_ptr(v, offset), llvm::Align(dtype_bytes(v.dtype)));
  ld->setMetadata(llvm::LLVMContext::MD_alias_scope, v.scope);
  ld->setMetadata(llvm::LLVMContext::MD_noalias, v.noalias);
  return ld;
}

void KernelEmitter::store_stored(const TensorView& v, Value* offset, Value* value) {
  llvm::StoreInst* st = b_.CreateAlignedStore(value, element_ptr(v, offset), llvm::Align(dtype_bytes(v.dtype)));
  st->setMetadata(llvm::LLVMContext::MD_alias_scope, v.scope);
  st->setMetadata(llvm::LLVMContext::MD_noalias, v.noalias);
}

Value* KernelEmitter::load_stored_masked(const TensorView& v, Value* offset, llvm::Type* type, Value* mask) {
  llvm::CallInst* ld = b_.CreateMaskedLoad(type, element_ptr(v, offset), llvm::Align(dtype_bytes(v.dtype)), mask,
                                           llvm::Constant::getNullValue(type));
  ld->setMetadata(llvm::LLVMContext::MD_alias_scope, v.scope);
  ld->setMetadata(llvm::LLVMContext::MD_noalias, v.noalias);
  return ld;
}

void KernelEmitter::store_stored_masked(const TensorView& v, Value* offset, Value* value, Value* mask) {
  llvm::CallInst* st = b_.CreateMaskedStore(value, element_ptr(v, offset), llvm::Align(dtype_bytes(v.dtype)), mask);
  st->setMetadata(llvm::LLVMContext::MD_alias_scope, v.scope);
  st->setMetadata(llvm::LLVMContext::MD_noalias, v.noalias);
}

Value* KernelEmitter::output_offset(const NodeState& s, const std::vector<Value*>& point) {
  Value* off = i64(0);
  for (size_t a = 0; a < s.output.strides.size(); ++a) {
    Value* p = s.output.begin.empty() ? point[a] : b_.CreateSub(point[a], s.output.begin[a]);
    off = b_.CreateAdd(off, b_.CreateMul(p, i64(s.output.strides[a])));
  }
  return off;
}

// ---------------------------------------------------------------------------------------------
// Nodes.

NodeState KernelEmitter::prepare_node(int position, const std::vector<std::vector<Value*>>& begins,
                                      const std::vector<std::vector<Value*>>& extents) {
  const NodeId n = plan_.nodes[position];
  NodeState s;
  s.node = &graph_.node(n);
  s.position = position;
  s.box_begin = begins[position];
  s.box_extent = extents[position];
  const std::vector<TensorId>& ins = graph_.node_inputs(n);
  const std::vector<int64_t> extents_all = s.node->extents();
  for (size_t i = 0; i < ins.size(); ++i) {
    s.inputs.push_back(view_of(ins[i], begins));
    const Access& acc = s.node->inputs()[i];
    std::vector<bool> checked;
    for (int d = 0; d < acc.map.num_results(); ++d) {
      const AffineExpr& row = acc.map.result(d);
      checked.push_back(d != acc.gather_dim &&
                        (row.min_over(extents_all) < 0 || row.max_over(extents_all) >= acc.type.shape[d]));
    }
    s.checked.push_back(std::move(checked));
  }
  // The output: the box-relative scratch array, or the whole tensor (row-major over the spatial
  // domain, whatever its output shape).
  const CpuNodeBuffer& buf = plan_.buffers[position];
  const int ns = s.node->num_spatial();
  std::vector<int64_t> domain;
  for (int a = 0; a < ns; ++a) domain.push_back(s.node->axes()[a].extent);
  s.output.tensor = view_of(buf.tensor, begins);
  if (buf.in_scratch) {
    s.output.strides = row_major_strides(buf.scratch_extents);
    s.output.begin = s.box_begin;
  } else {
    s.output.strides = row_major_strides(domain);
  }
  return s;
}

namespace {
/// The outermost f of the innermost reduction axes [f, na), two at least, that every read walks as
/// one contiguous run (the row-major offsets of axis a step by the extent of the axes inside it
/// times the innermost's step of 1) or not at all, their terms two vectors at least: a
/// channels-first global pool's 7 x 7 or 56 x 56 window is one row of 49 or 3136 contiguous terms.
/// -1 when there is none. (No gathered read, no read that may leave its tensor along those axes.)
int contiguous_block(const TeNode& node, const std::vector<std::vector<bool>>& checked, int lanes) {
  const int ns = node.num_spatial(), na = node.num_axes();
  if (lanes <= 1 || na - ns < 2) return -1;
  auto coeff = [&](int i, int axis) {  // the read's element offset per step of `axis`
    const Access& acc = node.inputs()[i];
    const std::vector<int64_t> strides = row_major_strides(acc.type.shape);
    int64_t c = 0;
    for (int d = 0; d < acc.map.num_results(); ++d) {
      const AffineExpr& row = acc.map.result(d);
      if (axis < static_cast<int>(row.coeffs.size())) c += row.coeffs[axis] * strides[static_cast<size_t>(d)];
    }
    return c;
  };
  int best = -1;
  int64_t extent = node.axes()[na - 1].extent;
  for (int f = na - 2; f >= ns; --f) {
    extent *= node.axes()[f].extent;
    bool ok = true;
    for (int i = 0; i < static_cast<int>(node.inputs().size()) && ok; ++i) {
      const Access& acc = node.inputs()[i];
      if (acc.gather_dim >= 0) return -1;
      bool moves = false;
      for (int a = f; a < na; ++a) moves |= input_varies(node, i, a);
      if (!moves) continue;
      for (int d = 0; d < acc.map.num_results() && ok; ++d)
        for (int a = f; a < na && ok; ++a) {
          const AffineExpr& row = acc.map.result(d);
          ok = !(checked[static_cast<size_t>(i)][static_cast<size_t>(d)] && a < static_cast<int>(row.coeffs.size()) && row.coeffs[a] != 0);
        }
      int64_t step = 1;
      for (int a = na - 1; a >= f && ok; --a) {
        ok = coeff(i, a) == step;
        step *= node.axes()[a].extent;
      }
    }
    if (!ok) break;
    if (extent >= 2 * lanes) best = f;
  }
  return best;
}
}  // namespace

void KernelEmitter::emit_lane_reduction(NodeState& s) {
  const TeNode& node = *s.node;
  const int ns = node.num_spatial(), na = node.num_axes();
  const DType dtype = node.body().dtype();
  const int lanes = vector_lanes(dtype);
  const int64_t chunk = kLaneReductionVectors * lanes;
  llvm::Type* value_type = compute_type(ctx_, dtype);
  // (The sums in f64 where lane_reduction_in_f64: each term widened, the total rounded once.)
  const bool wide = lane_reduction_in_f64(node) && dtype != DType::f64;
  llvm::Type* type = wide ? compute_type(ctx_, DType::f64) : value_type;
  int64_t terms = 1;
  for (int r = ns; r < na; ++r) terms *= node.axes()[r].extent;
  if (!wide && terms <= kUnrolledLaneTerms) {
    // Few terms in the compute type: each output's terms written out in order inside the
    // innermost spatial loop, which the vectorizer takes with the sum in registers (an NHWC
    // depthwise convolution's taps; the array form loads and stores every sum at every term).
    // Where the reads may leave their tensors (a padded convolution's borders) along axes other
    // than the innermost, each row of the innermost axis whose every term reads inside along them
    // runs a version without those checks: the taps' addresses are then one base and constant
    // offsets, where the checks' clamped indices made a pointer per tap (kept in registers or
    // spilled). Checks along the innermost axis (an NCHW convolution's width) stay in both
    // versions as guarded reads (load_input): masked loads, consecutive or strided.
    auto set_term = [&](std::vector<Value*>& at, int64_t t) {
      for (int r = na - 1; r >= ns; --r) {
        at[r] = i64(t % node.axes()[r].extent);
        t /= node.axes()[r].extent;
      }
    };
    bool checks = false, versioned = true, guarded = false, strided = false;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const Access& acc = node.inputs()[i];
      for (int d = 0; d < acc.map.num_results(); ++d) {
        const AffineExpr& read = acc.map.result(d);
        strided |= d != acc.gather_dim && ns - 1 < static_cast<int>(read.coeffs.size()) && read.coeffs[ns - 1] > 1;
        if (!s.checked[i][d]) continue;
        checks = true;
        const AffineExpr& row = acc.map.result(d);
        if (d == acc.gather_dim) versioned = false;
        else if (ns - 1 < static_cast<int>(row.coeffs.size()) && row.coeffs[ns - 1] != 0) {
          guarded = true;
        }
      }
    }
    versioned &= checks;
    std::vector<Value*> at(na, nullptr);
    // Rows not a whole number of vectors run predicated, the tail one masked vector: a 14-point
    // row was a vector loop never entered and 14 scalar points, a 56-point row of 49 taps 3
    // vectors and 8 scalar points that took 3/4 of its time (ConvNeXt's 7x7 depthwise, NCHW).
    // Not a strided row: its masked reads are gathers (LLVM 16 masks no interleaved group).
    const bool short_row = node.axes()[ns - 1].extent % lanes != 0 && !strided;  // (>= kMinUnrolledLaneRow)
    auto innermost = [&](Value* from, Value* to, int width) {
      if (short_row && width > 1) row_mark_ = RowMark::predicated;
      emit_for(from, to, width, unmarked([&](Value* p) {
        at[ns - 1] = p;
        // A product's terms as fused multiply-adds (one rounding each, one instruction).
        const Expr& body = node.body();
        const bool product = body.op() == ExprOp::mul && body.operands().size() == 2;
        Value* sum = llvm::ConstantFP::get(type, 0.0);
        for (int64_t t = 0; t < terms; ++t) {
          set_term(at, t);
          Cache cache;
          if (product) {
            Value* x = eval_expr(s, body.operands()[0], at, cache);
            Value* y = eval_expr(s, body.operands()[1], at, cache);
            sum = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type}, {x, y, sum});
          } else {
            sum = b_.CreateFAdd(sum, eval_expr(s, body, at, cache));
          }
        }
        store_point(s, at, sum);
      }));
      row_mark_ = RowMark::none;
    };
    std::function<void(int)> nest = [&](int a) {
      if (a == ns - 1) {
        Value* begin = s.box_begin[ns - 1];
        Value* end = b_.CreateAdd(begin, s.box_extent[ns - 1]);
        if (!versioned) return innermost(begin, end, lanes);
        // Each term's checked indices at the row's first point: those that do not move along the
        // row are tested there; a strided read's that do bound the row's interior [lo, hi).
        std::vector<Value*> probe = at;
        probe[ns - 1] = begin;
        Value* inside = b_.getTrue();
        Value* lo = begin;
        Value* hi = end;
        for (int64_t t = 0; t < terms; ++t) {
          set_term(probe, t);
          for (size_t i = 0; i < node.inputs().size(); ++i) {
            const Access& acc = node.inputs()[i];
            for (int d = 0; d < acc.map.num_results(); ++d) {
              if (!s.checked[i][d]) continue;
              const AffineExpr& row = acc.map.result(d);
              Value* v0 = affine_value(row, probe);
              Value* size = i64(acc.type.shape[d]);
              const int64_t c = ns - 1 < static_cast<int>(row.coeffs.size()) ? row.coeffs[ns - 1] : 0;
              if (c == 0) {
                inside = b_.CreateAnd(inside, b_.CreateICmpULT(v0, size));
              } else if (strided) {
                // v0 + c k >= 0 from k = ceil(-v0 / c) (0 where v0 >= 0); <= size - 1 up to
                // k = (size - 1 - v0) / c (none where size - 1 - v0 < 0). (c > 0: convolutions.)
                Value* first = b_.CreateSelect(b_.CreateICmpSLT(v0, i64(0)), b_.CreateSDiv(b_.CreateAdd(b_.CreateNeg(v0), i64(c - 1)), i64(c)), i64(0));
                Value* room = b_.CreateSub(b_.CreateSub(size, i64(1)), v0);
                Value* past = b_.CreateSelect(b_.CreateICmpSLT(room, i64(0)), i64(0), b_.CreateAdd(b_.CreateSDiv(room, i64(c)), i64(1)));
                lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, lo, b_.CreateAdd(begin, first));
                hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, hi, b_.CreateAdd(begin, past));
              }
            }
          }
        }
        lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, lo, end);
        hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, hi, lo);
        // The row: where its reads move along it and are checked, under guarded reads (masked
        // loads); a strided row's interior without those checks (whole vectors shuffled apart)
        // and its few border points one by one. Where the row's other indices are all inside
        // (`inside`), without their checks either.
        auto row = [&]() {
          if (!guarded) return innermost(begin, end, lanes);
          guarded_position_ = s.position;
          guarded_axis_ = ns - 1;
          if (!strided) {
            innermost(begin, end, lanes);
          } else {
            innermost(begin, lo, 1);
            guarded_inside_ = true;
            innermost(lo, hi, lanes);
            guarded_inside_ = false;
            innermost(hi, end, 1);
          }
          guarded_position_ = guarded_axis_ = -1;
        };
        // (No check off the row's axis: the one version, with the checks along it.)
        const bool off_axis = !(llvm::isa<llvm::ConstantInt>(inside) && llvm::cast<llvm::ConstantInt>(inside)->isOne());
        if (!off_axis) return row();
        auto* fast = llvm::BasicBlock::Create(ctx_, "lane_inside", fn_);
        auto* slow = llvm::BasicBlock::Create(ctx_, "lane_border", fn_);
        auto* join = llvm::BasicBlock::Create(ctx_, "lane_join", fn_);
        b_.CreateCondBr(inside, fast, slow);
        b_.SetInsertPoint(fast);
        if (!guarded) unchecked_position_ = s.position;
        guarded_rest_inside_ = true;
        row();
        guarded_rest_inside_ = false;
        unchecked_position_ = -1;
        b_.CreateBr(join);
        b_.SetInsertPoint(slow);
        row();
        b_.CreateBr(join);
        b_.SetInsertPoint(join);
        return;
      }
      emit_for(s.box_begin[a], b_.CreateAdd(s.box_begin[a], s.box_extent[a]), 1, [&](Value* p) {
        at[a] = p;
        nest(a + 1);
      });
    };
    nest(0);
    return;
  }
  llvm::ArrayType* array = llvm::ArrayType::get(type, static_cast<uint64_t>(chunk));
  llvm::AllocaInst* acc = entry_alloca(array);
  auto slot = [&](Value* j) { return b_.CreateInBoundsGEP(array, acc, {i64(0), j}); };
  std::vector<Value*> point(na, nullptr);
  std::function<void(int)> outer = [&](int a) {
    if (a < ns - 1) {
      emit_for(s.box_begin[a], b_.CreateAdd(s.box_begin[a], s.box_extent[a]), 1, [&](Value* p) {
        point[a] = p;
        outer(a + 1);
      });
      return;
    }
    // The innermost axis in pieces: zero the piece's sums, add every reduction point's terms lane
    // by lane (the vectorized loop), store the piece. Whole chunks first, then whole vectors, each
    // walking its lanes with a constant trip count: the vectorized loop is then unrolled whole, its
    // sums' slots sit at constant offsets, and LLVM keeps them in registers across the reduction
    // loops (SROA and LICM after the unroll) instead of loading and storing them at every term
    // (a channels-last global pool over 56 x 56 points: 0.98 -> 0.16 ms on one core, measured).
    // Fewer lanes than a vector are left at the end, in the array.
    auto piece = [&](Value* from, Value* len) {
      emit_for(i64(0), len, lanes, [&](Value* j) { b_.CreateStore(llvm::ConstantFP::get(type, 0.0), slot(j)); });
      std::function<void(int)> reduce = [&](int r) {
        if (r < na) {
          emit_for(i64(0), i64(node.axes()[r].extent), 1, [&](Value* p) {
            point[r] = p;
            reduce(r + 1);
          });
          return;
        }
        emit_for(i64(0), len, lanes, [&](Value* j) {
          point[a] = b_.CreateAdd(from, j);
          Cache cache;
          Value* term = eval_expr(s, node.body(), point, cache);
          if (wide) term = b_.CreateFPExt(term, type);
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(type, slot(j)), term), slot(j));
        });
      };
      reduce(ns);
      emit_for(i64(0), len, lanes, [&](Value* j) {
        point[a] = b_.CreateAdd(from, j);
        Value* total = b_.CreateLoad(type, slot(j));
        store_point(s, point, wide ? b_.CreateFPTrunc(total, value_type) : total);
      });
    };
    Value* begin = s.box_begin[a];
    Value* extent = s.box_extent[a];
    Value* chunks = b_.CreateSDiv(extent, i64(chunk));
    emit_for(i64(0), chunks, 1, [&](Value* q) { piece(b_.CreateAdd(begin, b_.CreateMul(q, i64(chunk))), i64(chunk)); });
    Value* after_chunks = b_.CreateAdd(begin, b_.CreateMul(chunks, i64(chunk)));
    Value* vectors = b_.CreateSDiv(b_.CreateSub(extent, b_.CreateMul(chunks, i64(chunk))), i64(lanes));
    emit_for(i64(0), vectors, 1, [&](Value* q) { piece(b_.CreateAdd(after_chunks, b_.CreateMul(q, i64(lanes))), i64(lanes)); });
    Value* tail_from = b_.CreateAdd(after_chunks, b_.CreateMul(vectors, i64(lanes)));
    Value* tail = b_.CreateSub(b_.CreateAdd(begin, extent), tail_from);
    auto* some = llvm::BasicBlock::Create(ctx_, "lane_tail", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "lane_done", fn_);
    b_.CreateCondBr(b_.CreateICmpSGT(tail, i64(0)), some, done);
    b_.SetInsertPoint(some);
    piece(tail_from, tail);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  };
  outer(0);
}

void KernelEmitter::emit_generic(NodeState& s) {
  if (prefetches_[s.position].empty() && !plan_.reuse_stored_by(s.position) &&
      lane_reduction_fits(*s.node, vector_lanes(s.node->body().dtype())))
    return emit_lane_reduction(s);
  const int ns = s.node->num_spatial();
  const int lanes = vector_lanes(s.node->body().dtype());
  std::vector<Value*> point(ns);
  std::function<void(int)> nest = [&](int a) {
    if (a == ns) {
      store_point(s, point, reduce_point(s, point));
      return;
    }
    const bool innermost = a == ns - 1;
    const int hint = innermost && s.node->num_reduction() == 0 ? lanes : (innermost ? 0 : 1);
    auto loop = [&](Value* p) {
      point[a] = p;
      nest(a + 1);
    };
    Value* end = b_.CreateAdd(s.box_begin[a], s.box_extent[a]);
    if (innermost && s.node->num_reduction() == 0) {
      // (A row shorter than a vector, 14 points of a 14 x 14 image, runs as one masked vector:
      // ResNet's residual add and ReLU over 14 x 14 pixels 2.3-2.8x faster. Not one of 1 to 3
      // points, a GEMV's column of outputs, whose mask cost more than the points (0.72x), nor one
      // past a vector, whose tail the vectorizer's narrower epilogue takes: rows of 28 ran 0.85x
      // predicated, 2 masked vectors against 16 + 8 lanes and 4 points.)
      const int64_t row = s.node->axes()[a].extent;
      row_mark_ = row >= kMinUnrolledLaneRow && row < lanes ? RowMark::predicated : RowMark::one_vector;
      emit_innermost(s, s.box_begin[a], end, hint, unmarked(loop));
      row_mark_ = RowMark::none;
    } else {
      emit_for(s.box_begin[a], end, hint, loop);
    }
  };
  // Prefetches (plan_prefetches) are spread over the chunks of the innermost loop, the last
  // reduction axis or else the last spatial one: every chunk of the box issues its share.
  if (!prefetches_[s.position].empty()) {
    const int na = s.node->num_axes();
    const bool reduces = s.node->num_reduction() > 0;
    Value* outer = i64(1);
    for (int a = 0; a < (reduces ? ns : ns - 1); ++a) outer = b_.CreateMul(outer, s.box_extent[a]);
    for (int a = ns; a < na - 1; ++a) outer = b_.CreateMul(outer, i64(s.node->axes()[a].extent));
    Value* last = reduces ? i64(s.node->axes()[na - 1].extent) : (ns > 0 ? s.box_extent[ns - 1] : i64(1));
    const int64_t chunk = innermost_chunk(*s.node);
    prefetch_chunks_ = b_.CreateBinaryIntrinsic(
        llvm::Intrinsic::smax, b_.CreateMul(outer, b_.CreateSDiv(b_.CreateAdd(last, i64(chunk - 1)), i64(chunk))), i64(1));
    prefetch_counter_ = entry_alloca(b_.getInt64Ty());
    b_.CreateStore(i64(0), prefetch_counter_);
  }
  nest(0);
}

Value* KernelEmitter::reduce_point(NodeState& s, std::vector<Value*> point) {
  const TeNode& node = *s.node;
  const int ns = node.num_spatial(), na = node.num_axes();
  point.resize(na, nullptr);
  if (node.num_reduction() == 0) {
    Cache cache;
    load_reused(s, point, cache);
    return eval_expr(s, node.body(), point, cache);
  }
  // Float sums and products accumulate in f64 (the interpreter accumulates in f64; an f32
  // accumulator over thousands of terms drifts past the f32 tolerance); the result is rounded to
  // the body's compute type.
  const DType dtype = node.body().dtype();
  const bool reassociable = node.combiner() == Combiner::sum || node.combiner() == Combiner::prod;
  // Float max / min: llvm.maxnum / minnum with the nnan and nsz flags, which LLVM's vectorizer
  // turns into a vector reduction, plus an or-reduction of "this term is NaN" -- the flags make the
  // accumulator poison once a NaN is combined, and the NaN flag then selects NaN instead (a NaN
  // wins, as in the interpreter).
  const bool float_minmax = is_float(dtype) && (node.combiner() == Combiner::max || node.combiner() == Combiner::min);
  const DType acc_dtype = reassociable && is_float(dtype) ? DType::f64 : dtype;
  // A sum of f32 terms e * 2^k (k <= 0; a mean's e / n for n a power of two) sums e in f64 and
  // scales the total: f32(e * 2^k) is e * 2^k exactly unless it is subnormal, and scaling an f64
  // partial sum by 2^k is exact, so the total is the interpreter's but for terms that would be f32
  // subnormals (then closer to the exact sum, by under 2^-149 per term).
  const Expr* scaled_term = nullptr;
  double scale = 1;
  if (node.combiner() == Combiner::sum && dtype == DType::f32 && node.body().op() == ExprOp::mul) {
    const std::vector<Expr>& o = node.body().operands();
    for (int side : {0, 1}) {
      const Expr& c = o[static_cast<size_t>(side)];
      int exponent = 0;
      if (c.op() == ExprOp::constant && c.value() > 0 && std::frexp(c.value(), &exponent) == 0.5 && exponent - 1 <= 0 &&
          exponent - 1 >= -126) {
        scaled_term = &o[static_cast<size_t>(1 - side)];
        scale = c.value();
        break;
      }
    }
  }
  llvm::AllocaInst* acc = entry_alloca(compute_type(ctx_, acc_dtype));
  b_.CreateStore(constant_value(b_, acc_dtype, node.init()), acc);
  llvm::AllocaInst* saw_nan = float_minmax ? entry_alloca(b_.getInt1Ty()) : nullptr;
  // A sum of terms that are never negative (sums_in_runs: exp, squares, ...) accumulates runs of
  // kSumRunTerms terms in f32 (one f32 add per term instead of a conversion and an f64 add), each
  // run then added to the f64 total; its error is bounded relative to the sum. Others, a mean
  // whose terms may cancel, add every term in f64.
  // A sum of products of two varying factors (a dot product the micro-kernel does not take:
  // products_in_runs) does the same in runs of kRunTerms, the micro-kernel's own runs and error
  // argument.
  llvm::AllocaInst* run = run_terms(node) > 0 ? entry_alloca(compute_type(ctx_, dtype)) : nullptr;
  if (saw_nan) b_.CreateStore(b_.getFalse(), saw_nan);
  // The body's width, not the accumulator's: an f32 body (an exp) runs 8 lanes wide and only the
  // final adds widen to two f64 vectors.
  const int lanes = vector_lanes(dtype);
  const CpuRowReuse* stored = plan_.reuse_stored_by(s.position);
  // A float sum of few terms into f64 (a 3 x 5 window, 7-term rows): each term written out and
  // the f64 terms added as a balanced tree, whose depth (6 adds for 49 terms) is the chain's
  // latency where a sum in order waits on every add (ResNet-50's channels-first 7 x 7 pool, 49
  // adds in a row, 0.98 -> 0.67 ms on this project's VM before the block below took it: 0.25 ms;
  // ResNet-50's 7-term row means 1.175x, experiments/op_sweep/runs/cpu-2026-11-30-pools). The
  // terms' order is reassociated as the adds' reassoc flags already allow; in f64 that moves the
  // f32 result by no more than its last bit.
  // (Not a row the innermost loop below keeps rolled for LLVM to vectorize, which is faster, nor
  // a contiguous block of axes: one such row.)
  int64_t terms = 1;
  for (int a = ns; a < na; ++a) terms *= node.axes()[a].extent;
  // The innermost reduction loop is kept rolled (RowMark::rolled) only where LLVM would otherwise
  // unroll it whole -- a short row, kMaxRolledReductionTerms terms at most -- and it holds two
  // vectors at least: a 3-tap window left rolled runs as a scalar loop (max pooling 8-16x slower,
  // measured); and only where every read walks the row contiguously or not at all (a gathered or
  // strided row vectorized at the hinted width is slower than unrolled: an embedding bag's sum
  // 0.45x).
  const int64_t row = node.axes()[na - 1].extent;
  bool rolled = (reassociable || float_minmax) && lanes > 1 && row >= 2 * lanes && row <= kMaxRolledReductionTerms;
  for (int i = 0; i < static_cast<int>(node.inputs().size()) && rolled; ++i) rolled = contiguous_or_invariant(node, i, na - 1);
  // Several innermost reduction axes that the reads walk as one contiguous run (a channels-first
  // pool's window) are one vectorized row: rolled up to kMaxRolledReductionTerms terms, as above;
  // a longer one is a row LLVM vectorizes without the per-row reductions of the axes apart.
  const int block = (reassociable || float_minmax) && prefetches_[s.position].empty() ? contiguous_block(node, s.checked, lanes) : -1;
  if (node.combiner() == Combiner::sum && acc_dtype == DType::f64 && dtype != DType::f64 && !run && !stored && !rolled && block < 0 &&
      prefetches_[s.position].empty() && terms >= kTreeSumMinTerms && terms <= kTreeSumMaxTerms) {
    std::vector<Value*> level;
    for (int64_t t = 0; t < terms; ++t) {
      int64_t rest = t;
      for (int a = na - 1; a >= ns; --a) {
        point[a] = i64(rest % node.axes()[a].extent);
        rest /= node.axes()[a].extent;
      }
      Cache cache;
      level.push_back(convert_value(b_, eval_expr(s, scaled_term ? *scaled_term : node.body(), point, cache), dtype, acc_dtype));
    }
    while (level.size() > 1) {
      std::vector<Value*> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(emit_combine(b_, Combiner::sum, acc_dtype, level[i], level[i + 1]));
      if (level.size() % 2) next.push_back(level.back());
      level.swap(next);
    }
    b_.CreateStore(emit_combine(b_, Combiner::sum, acc_dtype, b_.CreateLoad(acc->getAllocatedType(), acc), level[0]), acc);
    Value* total = b_.CreateLoad(acc->getAllocatedType(), acc);
    if (scaled_term) total = b_.CreateFMul(total, llvm::ConstantFP::get(total->getType(), scale));
    return b_.CreateFPTrunc(total, compute_type(ctx_, dtype));
  }
  std::function<void(int)> nest = [&](int a) {
    if (a == na) {
      Cache cache;
      if (stored) {  // the value a later node reads (row reuse); the body finds it in the cache
        const int r = static_cast<int>(stored - plan_.reuses.data());
        llvm::StoreInst* st = b_.CreateAlignedStore(eval_expr(s, stored->value, point, cache), reuse_ptr(r, point),
                                                    llvm::Align(compute_bytes(stored->value.dtype())));
        st->setMetadata(llvm::LLVMContext::MD_alias_scope, reuse_scopes_[r]);
        st->setMetadata(llvm::LLVMContext::MD_noalias, reuse_noalias_[r]);
      }
      if (run) {  // reassoc: the run's lanes may also be summed as a tree (the bound holds in any order)
        auto* add = llvm::cast<llvm::Instruction>(
            b_.CreateFAdd(b_.CreateLoad(run->getAllocatedType(), run), eval_expr(s, scaled_term ? *scaled_term : node.body(), point, cache)));
        llvm::FastMathFlags flags;
        flags.setAllowReassoc();
        add->setFastMathFlags(flags);
        b_.CreateStore(add, run);
        return;
      }
      Value* v = convert_value(b_, eval_expr(s, scaled_term ? *scaled_term : node.body(), point, cache), dtype, acc_dtype);
      Value* old = b_.CreateLoad(acc->getAllocatedType(), acc);
      if (float_minmax) {
        llvm::FastMathFlags flags;
        flags.setNoNaNs();
        flags.setNoSignedZeros();
        auto* combined = llvm::cast<llvm::Instruction>(
            b_.CreateBinaryIntrinsic(node.combiner() == Combiner::max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, old, v));
        combined->setFastMathFlags(flags);
        b_.CreateStore(combined, acc);
        b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), saw_nan), b_.CreateFCmpUNO(v, v)), saw_nan);
        return;
      }
      b_.CreateStore(emit_combine(b_, node.combiner(), acc_dtype, old, v), acc);
      return;
    }
    const int hint = a == na - 1 ? (reassociable || float_minmax ? lanes : 0) : 1;
    auto loop = [&](Value* r) {
      point[a] = r;
      nest(a + 1);
    };
    if (a == block) {
      // One loop over the block's terms. Every read walks them contiguously, so the loop's index
      // on the innermost axis and 0 on the block's others give each read's offset. A body that
      // reads an axis index, or an input whose producer is inlined (its body is evaluated at the
      // element read, which must be a point of its own domain), gets the axes' own indices by
      // division instead (which LLVM vectorizes as gathers: a 32 x 32 pool 1.6x slower than the
      // rows apart).
      bool linear = !reads_axis_index(node.body());
      for (int i = 0; i < static_cast<int>(node.inputs().size()) && linear; ++i) {
        bool moves = false;
        for (int x = block; x < na; ++x) moves |= input_varies(node, i, x);
        linear = !(moves && inlined_producer(s, i) >= 0);
      }
      int64_t terms_in_block = 1;
      for (int x = block; x < na; ++x) terms_in_block *= node.axes()[x].extent;
      row_mark_ = terms_in_block <= kMaxRolledReductionTerms ? RowMark::rolled : RowMark::none;
      emit_innermost(s, i64(0), i64(terms_in_block), lanes, unmarked([&](Value* t) {
                       Value* rest = t;
                       for (int x = na - 1; x >= block; --x) {
                         if (linear) {
                           point[x] = x == na - 1 ? t : i64(0);
                           continue;
                         }
                         point[x] = b_.CreateURem(rest, i64(node.axes()[x].extent));
                         rest = b_.CreateUDiv(rest, i64(node.axes()[x].extent));
                       }
                       nest(na);
                     }),
                     run, run ? acc : nullptr);
      row_mark_ = RowMark::none;
      return;
    }
    if (a == na - 1) {
      row_mark_ = rolled ? RowMark::rolled : RowMark::none;
      emit_innermost(s, i64(0), i64(row), hint, unmarked(loop), run, run ? acc : nullptr);
      row_mark_ = RowMark::none;
    }
    else emit_for(i64(0), i64(node.axes()[a].extent), hint, loop);
  };
  nest(ns);
  Value* total = b_.CreateLoad(acc->getAllocatedType(), acc);
  if (scaled_term) total = b_.CreateFMul(total, llvm::ConstantFP::get(total->getType(), scale));
  if (saw_nan)
    total = b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), saw_nan), llvm::ConstantFP::getNaN(total->getType()), total);
  return acc_dtype == dtype ? total : b_.CreateFPTrunc(total, compute_type(ctx_, dtype));
}

void KernelEmitter::store_point(NodeState& s, const std::vector<Value*>& point, Value* value) {
  const DType out = s.node->output().dtype;
  Value* v = convert_value(b_, value, s.node->body().dtype(), out);
  store_stored(s.output.tensor, output_offset(s, point), to_storage(b_, out, v));
}

Value* KernelEmitter::reuse_ptr(int r, const std::vector<Value*>& source_point) {
  const CpuRowReuse& reuse = plan_.reuses[r];
  const NodeState& source = states_[reuse.source];
  const std::vector<int64_t> strides = row_major_strides(reuse.extents);
  Value* off = i64(0);
  for (size_t a = 0; a < strides.size(); ++a) {
    Value* p = a < source.box_begin.size() ? b_.CreateSub(source_point[a], source.box_begin[a]) : source_point[a];
    off = b_.CreateAdd(off, b_.CreateMul(p, i64(strides[a])));
  }
  Value* base = b_.CreateInBoundsGEP(b_.getInt8Ty(), arg_scratch_, i64(reuse.scratch_offset_bytes));
  return b_.CreateInBoundsGEP(compute_type(ctx_, reuse.value.dtype()), base, off);
}

void KernelEmitter::load_reused(NodeState& s, const std::vector<Value*>& point, Cache& cache) {
  for (size_t r = 0; r < plan_.reuses.size(); ++r)
    for (const CpuRowReader& reader : plan_.reuses[r].readers) {
      if (reader.position != s.position) continue;
      std::vector<Value*> at;
      for (const AffineExpr& row : reader.point.results()) at.push_back(affine_value(row, point));
      const DType dtype = reader.value.dtype();
      llvm::LoadInst* ld = b_.CreateAlignedLoad(compute_type(ctx_, dtype), reuse_ptr(static_cast<int>(r), at),
                                                llvm::Align(compute_bytes(dtype)));
      ld->setMetadata(llvm::LLVMContext::MD_alias_scope, reuse_scopes_[r]);
      ld->setMetadata(llvm::LLVMContext::MD_noalias, reuse_noalias_[r]);
      cache[reader.value.get()] = ld;
    }
}

Value* KernelEmitter::affine_value(const AffineExpr& row, const std::vector<Value*>& point) {
  Value* v = i64(row.offset);
  for (size_t a = 0; a < row.coeffs.size(); ++a) {
    if (row.coeffs[a] == 0) continue;
    v = b_.CreateAdd(v, row.coeffs[a] == 1 ? point[a] : b_.CreateMul(point[a], i64(row.coeffs[a])));
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// The body at one point.

std::vector<Value*> KernelEmitter::input_index(NodeState& s, int input, const std::vector<Value*>& point, Cache& cache) {
  const Access& acc = s.node->inputs()[input];
  std::vector<Value*> index;
  for (int d = 0; d < acc.map.num_results(); ++d) {
    if (d == acc.gather_dim) {
      // The index is data: negative values count from the end; out of range is the user's error,
      // reported through the status words (the read is clamped to stay in bounds).
      const int src = acc.gather_index_input;
      const DType src_dtype = s.node->inputs()[src].type.dtype;
      Value* g = load_input(s, src, point, cache);
      Value* idx = is_float(src_dtype) ? b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {b_.getInt64Ty(), g->getType()}, {g})
                                       : convert_value(b_, g, src_dtype, DType::i64);
      const int64_t size = acc.type.shape[d];
      Value* raw = idx;
      idx = b_.CreateSelect(b_.CreateICmpSLT(idx, i64(0)), b_.CreateAdd(idx, i64(size)), idx);
      Value* bad = b_.CreateICmpUGE(idx, i64(size));
      auto* report = llvm::BasicBlock::Create(ctx_, "gather_error", fn_);
      auto* cont = llvm::BasicBlock::Create(ctx_, "gather_ok", fn_);
      b_.CreateCondBr(bad, report, cont, llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20));
      b_.SetInsertPoint(report);
      const int64_t words[] = {1, 0, size, s.position};
      for (int w = 0; w < kStatusWords; ++w)
        b_.CreateStore(w == 1 ? raw : i64(words[w]), b_.CreateInBoundsGEP(b_.getInt64Ty(), arg_status_, i64(w)));
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
      index.push_back(b_.CreateSelect(bad, i64(0), idx));
      continue;
    }
    index.push_back(affine_value(acc.map.result(d), point));
  }
  return index;
}

int KernelEmitter::inlined_producer(const NodeState& s, int input) const {
  const TensorId t = graph_.node_inputs(plan_.nodes[s.position])[input];
  const int k = graph_.tensor(t).producer >= 0 ? plan_.position(graph_.tensor(t).producer) : -1;
  return k >= 0 && plan_.buffers[k].inlined ? k : -1;
}

Value* KernelEmitter::load_input(NodeState& s, int input, const std::vector<Value*>& point, Cache& cache) {
  const void* key = &s.node->inputs()[input];
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  const Access& acc = s.node->inputs()[input];
  const TensorView& v = s.inputs[input];
  Value* pad = constant_value(b_, acc.type.dtype, acc.pad_value);
  if (acc.type.num_elements() == 0) return cache[key] = pad;
  std::vector<Value*> index = input_index(s, input, point, cache);
  Value* inside = nullptr;
  Value* guard = nullptr;  // the checks of guarded_axis_'s dimensions (below)
  const int producer = inlined_producer(s, input);
  for (size_t d = 0; d < index.size(); ++d) {
    if (!s.checked[input][d] || unchecked_position_ == s.position) continue;
    Value* in_d = b_.CreateICmpULT(index[d], i64(acc.type.shape[d]));  // 0 <= i < shape
    const AffineExpr& row = acc.map.result(static_cast<int>(d));
    if (guarded_position_ == s.position && static_cast<int>(d) != acc.gather_dim) {
      const bool along = guarded_axis_ < static_cast<int>(row.coeffs.size()) && row.coeffs[guarded_axis_] != 0;
      if (along ? guarded_inside_ : guarded_rest_inside_) continue;
      if (along && producer < 0) {
        guard = guard ? b_.CreateAnd(guard, in_d) : in_d;
        continue;
      }
    }
    index[d] = b_.CreateSelect(in_d, index[d], i64(0));
    inside = inside ? b_.CreateAnd(inside, in_d) : in_d;
  }
  if (guard) {
    // The read under a branch, its index unclamped: the vectorizer if-converts it into a masked
    // load of consecutive (or strided) elements, where a clamped index made a gather.
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* read = llvm::BasicBlock::Create(ctx_, "guarded_read", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "guarded_join", fn_);
    b_.CreateCondBr(guard, read, join);
    b_.SetInsertPoint(read);
    Value* value = from_storage(b_, v.dtype, load_stored(v, element_offset(v, index), storage_type(ctx_, v.dtype)));
    llvm::BasicBlock* last = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(value->getType(), 2);
    phi->addIncoming(pad, pre);
    phi->addIncoming(value, last);
    Value* loaded = phi;
    if (inside) loaded = b_.CreateSelect(inside, loaded, pad);
    return cache[key] = loaded;
  }
  Value* loaded = nullptr;
  if (const int k = producer; k >= 0) {
    // The producer's body at the element read (its spatial point is the tensor index), rounded
    // to its output dtype exactly as a store and a load would round it.
    NodeState& p = states_[k];
    Cache own;
    const DType out = p.node->output().dtype;
    Value* value = convert_value(b_, eval_expr(p, p.node->body(), index, own), p.node->body().dtype(), out);
    loaded = from_storage(b_, out, to_storage(b_, out, value));
  } else {
    loaded = from_storage(b_, v.dtype, load_stored(v, element_offset(v, index), storage_type(ctx_, v.dtype)));
  }
  if (inside) loaded = b_.CreateSelect(inside, loaded, pad);
  return cache[key] = loaded;
}

Value* KernelEmitter::eval_expr(NodeState& s, const Expr& e, const std::vector<Value*>& point, Cache& cache) {
  if (auto it = cache.find(e.get()); it != cache.end()) return it->second;
  Value* out = nullptr;
  switch (e.op()) {
    case ExprOp::input: out = load_input(s, e.index(), point, cache); break;
    case ExprOp::constant: out = constant_value(b_, e.dtype(), e.scalar()); break;
    case ExprOp::axis_index: out = point.at(e.index()); break;
    case ExprOp::select:
      out = b_.CreateSelect(eval_expr(s, e.operands()[0], point, cache), eval_expr(s, e.operands()[1], point, cache),
                            eval_expr(s, e.operands()[2], point, cache));
      break;
    case ExprOp::cast:
      out = convert_value(b_, eval_expr(s, e.operands()[0], point, cache), e.operands()[0].dtype(), e.dtype());
      break;
    default:
      if (is_unary(e.op())) {
        out = emit_unary(b_, e.op(), e.operands()[0].dtype(), eval_expr(s, e.operands()[0], point, cache));
      } else {
        TESSEL_ASSERT(is_binary(e.op()), "CPU codegen: unexpected op ", expr_op_name(e.op()));
        Value* a = eval_expr(s, e.operands()[0], point, cache);
        Value* x = eval_expr(s, e.operands()[1], point, cache);
        // A float quotient whose divisor stays the same along the node's innermost loop (softmax's
        // row sum) multiplies by the divisor's reciprocal, which LLVM hoists out of the loop.
        const int innermost = s.node->num_reduction() > 0 ? s.node->num_axes() - 1 : s.node->num_spatial() - 1;
        if (e.op() == ExprOp::div && is_float(e.operands()[0].dtype()) && innermost >= 0 &&
            varies_along(*s.node, e.operands()[0], innermost) && !varies_along(*s.node, e.operands()[1], innermost))
          out = emit_div_by_invariant(b_, a, x);
        else
          out = emit_binary(b_, e.op(), e.operands()[0].dtype(), a, x);
      }
  }
  return cache[e.get()] = out;
}

}  // namespace tessel::cpu
