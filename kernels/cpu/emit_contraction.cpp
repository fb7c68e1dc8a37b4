// The register-blocked micro-kernel for contractions (matmul, convolution, any node computing
//   out[..., m, n] = sum over reduction axes of A[...] * B[...] (* a constant scale)
// where A does not depend on the innermost spatial axis n and B does not depend on m).
//
// A block of MR rows (m) x NR vectors of VW lanes (n) accumulates in MR*NR vector registers: for
// every reduction point, NR vectors of B are loaded, and each of the MR scalars of A is broadcast
// and multiplied into its NR accumulators (fused multiply-add). VW is the spec's SIMD width for the
// dtype; MR and NR maximize the FMAs per load over the largest task box of the node (a fused
// producer's too: the box the sink's tile needs of it), under the register budget
// MR*NR + NR + 1 <= the spec's vector registers (cost_model/cpu_loops.h). Rows left after the full MR
// blocks take MR = 1 blocks; the columns left after the full NR blocks take one block of as many
// vectors as they need, its last vector masked (lanes past the row neither read nor written): a
// row of 56 columns at 16 lanes is one block of 3 vectors and a masked one, not 8 columns through
// the generic scalar nest. B vectors are plain (or masked) vector loads when B is
// contiguous along n and the read stays in range (checked per vector when the access can leave
// the tensor, e.g. convolution padding); otherwise they are assembled lane by lane through the
// generic load, which applies pad values (a masked vector's lanes past the row repeat its last
// column there, so they never address past it).
#include <algorithm>
#include <cstdlib>

#include "kernels/cpu/emit_group.h"
#include "kernels/cpu/emit_scalar.h"
#include "kernels/cpu/kernel_families.h"
#include "kernels/cpu/kernel_emitter.h"
#include "cost_model/cpu_loops.h"
#include "tilegraph/error.h"

namespace tessel::cpu {

namespace {

using llvm::Value;

using Contraction = MicrokernelMatch;
std::optional<Contraction> match_contraction(const TeNode& node) { return match_microkernel(node); }

}  // namespace


bool matches_contraction(const TeNode& node) { return match_contraction(node).has_value(); }

int microkernel_m_axis(const TeNode& node) {
  const std::optional<Contraction> c = match_contraction(node);
  return c ? c->m_axis : -1;
}

int64_t microkernel_columns(const TeNode& node, int64_t m_box, int64_t n_box, const HwSpec& spec) {
  const std::optional<Contraction> c = match_contraction(node);
  if (!c) return 0;
  const CodegenParams params = codegen_params(spec);
  const int64_t vw = std::max<int64_t>(1, params.vector_bytes / compute_bytes(node.body().dtype()));
  if (vw < 2 || n_box < 2) return 0;
  const int64_t max_nr = microkernel_nr_limit(node, *c, params.l1_bytes, params.vector_bytes, params.bound_rows);
  return vw * choose_register_blocking(params.vector_registers, vw, m_box, n_box, c->m_axis >= 0, max_nr).nr;
}

bool KernelEmitter::emit_contraction(NodeState& s) {
  const std::optional<Contraction> match = match_contraction(*s.node);
  if (!match) return false;
  const Contraction& c = *match;
  const TeNode& node = *s.node;
  const DType dtype = node.body().dtype();
  const int vw = vector_lanes(dtype);
  const int ns = node.num_spatial(), na = node.num_axes();
  // The largest box along an axis of any task (a fused producer's box is what the sink's tile
  // needs of it, not the whole axis: blocking a 4-channel box for 64 channels left every row to
  // the MR = 1 border blocks).
  auto box_limit = [&](int axis) {
    int64_t largest = 1;
    for (int64_t t = 0; t < plan_.num_tasks; ++t)
      largest = std::max(largest, plan_.boxes[static_cast<size_t>(t * plan_.box_stride + plan_.box_offset[s.position] + 2 * axis + 1)]);
    return std::min(node.axes()[axis].extent, largest);
  };
  const int64_t n_extent = box_limit(c.n_axis);
  const int64_t m_extent = c.m_axis >= 0 ? box_limit(c.m_axis) : 1;
  if (vw < 2 || n_extent < 2) return false;  // nothing to vectorize: the generic nest does it
  // The blocking the schedule records (CpuGroupPlan::blocking), else the one the model derives.
  RegisterBlocking blocking = plan_.blocking.at(static_cast<size_t>(s.position))
                                  .value_or(choose_register_blocking(
                                      params_.vector_registers, vw, m_extent, n_extent, c.m_axis >= 0,
                                      microkernel_nr_limit(node, c, params_.l1_bytes, params_.vector_bytes, params_.bound_rows)));
  // (No block larger than the box: a recorded blocking is for the node's tile, which the largest
  // task box equals unless the tile overhangs the axis.)
  blocking.mr = static_cast<int>(std::min<int64_t>(blocking.mr, std::max<int64_t>(1, m_extent)));
  blocking.nr = static_cast<int>(std::min<int64_t>(blocking.nr, (n_extent + vw - 1) / vw));
  // A block-sparse B (CpuGroupPlan::sparse): column blocks lie inside one block column where NR
  // vectors divide block_n (the policy offers blocks that are multiples of the dense blocking's
  // columns, so this keeps it); a column block that still straddles checks every block it covers.
  const CpuSparseSkip* skip = plan_.sparse && plan_.sparse->position == s.position && plan_.sparse->input == c.b ? &*plan_.sparse : nullptr;
  if (skip)
    while (blocking.nr > 1 && skip->block_n % (blocking.nr * vw) != 0) --blocking.nr;
  llvm::Type* vec_type = compute_type(ctx_, dtype, vw);
  llvm::Type* vec_storage = llvm::FixedVectorType::get(storage_type(ctx_, dtype), vw);

  // B's element step along n, when it is one constant (else lanes are loaded one by one).
  const Access& b_access = node.inputs()[c.b];
  const TensorView& b_view = s.inputs[c.b];
  std::optional<int64_t> b_step;
  if (!b_view.scratch || b_view.domain_extents.empty()) {
    const std::vector<int64_t>& strides = b_view.scratch ? b_view.scratch_strides : b_view.strides;
    int64_t step = 0;
    for (int d = 0; d < b_access.map.num_results(); ++d) step += b_access.map.result(d).coeffs[c.n_axis] * strides[d];
    b_step = step;
  }
  bool b_checked = false;
  for (bool chk : s.checked[c.b]) b_checked = b_checked || chk;

  // While the last column block of a box is emitted: the columns of its last vector (i64,
  // 1..vw) and the lanes they take; that vector's loads and stores are masked.
  Value* tail_count = nullptr;
  Value* tail_mask = nullptr;

  // Lane by lane through the generic load (pads, any addressing).
  auto load_lanes = [&](std::vector<Value*> point, bool masked) {
    Value* v = llvm::PoisonValue::get(vec_type);
    Value* n0 = point[c.n_axis];
    Value* n_last = masked ? b_.CreateAdd(n0, b_.CreateSub(tail_count, i64(1))) : nullptr;
    for (int l = 0; l < vw; ++l) {
      point[c.n_axis] = b_.CreateAdd(n0, i64(l));
      if (n_last) point[c.n_axis] = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, point[c.n_axis], n_last);
      Cache cache;
      v = b_.CreateInsertElement(v, load_input(s, c.b, point, cache), static_cast<uint64_t>(l));
    }
    return v;
  };
  // A vector that leaves the tensor somewhere (a convolution's padded border): one masked load of
  // the lanes in range -- per checked dimension, the lane's index `index[d] + lane * coeff` within
  // [0, shape) -- and the pad value in the others (lanes past a masked vector's columns too; they
  // are never stored). The lane-by-lane load it replaces took 16 scalar loads and selects per
  // vector: a 3x3 convolution's first and last kernel column leave the row in one vector of
  // every row of B it packs.
  auto load_border = [&](const std::vector<Value*>& index, bool masked) -> Value* {
    llvm::Type* lane_index = llvm::FixedVectorType::get(b_.getInt64Ty(), static_cast<unsigned>(vw));
    std::vector<llvm::Constant*> lanes;
    for (int l = 0; l < vw; ++l) lanes.push_back(b_.getInt64(static_cast<uint64_t>(l)));
    Value* iota = llvm::ConstantVector::get(lanes);
    Value* in_range = masked ? tail_mask : b_.CreateVectorSplat(vw, b_.getTrue());
    for (int d = 0; d < b_access.map.num_results(); ++d) {
      if (!s.checked[c.b][d]) continue;
      const int64_t coeff = b_access.map.result(d).coeffs[c.n_axis];
      const int64_t size = b_access.type.shape[d];
      Value* in_d = coeff == 0
          ? b_.CreateVectorSplat(vw, b_.CreateICmpULT(index[d], i64(size)))
          : b_.CreateICmpULT(b_.CreateAdd(b_.CreateVectorSplat(vw, index[d]), b_.CreateMul(iota, llvm::ConstantInt::get(lane_index, static_cast<uint64_t>(coeff)))),
                             llvm::ConstantInt::get(lane_index, static_cast<uint64_t>(size)));
      in_range = b_.CreateAnd(in_range, in_d);
    }
    // Not inbounds: the first lane's address may lie outside the tensor; no lane outside it is read.
    Value* ptr = b_.CreateGEP(storage_type(ctx_, dtype), b_view.base, element_offset(b_view, index));
    llvm::CallInst* ld = b_.CreateMaskedLoad(vec_storage, ptr, llvm::Align(dtype_bytes(dtype)), in_range,
                                             llvm::Constant::getNullValue(vec_storage));
    ld->setMetadata(llvm::LLVMContext::MD_alias_scope, b_view.scope);
    ld->setMetadata(llvm::LLVMContext::MD_noalias, b_view.noalias);
    return b_.CreateSelect(in_range, from_storage(b_, dtype, ld), constant_value(b_, dtype, b_access.pad_value, vw));
  };
  auto load_b = [&](const std::vector<Value*>& point, bool masked) -> Value* {
    if (b_step != 1) return load_lanes(point, masked);
    Cache cache;
    const std::vector<Value*> index = input_index(s, c.b, point, cache);
    auto load_vector = [&](const std::vector<Value*>& at) {
      Value* offset = element_offset(b_view, at);
      return from_storage(b_, dtype, masked ? load_stored_masked(b_view, offset, vec_storage, tail_mask)
                                               : load_stored(b_view, offset, vec_storage));
    };
    if (!b_checked) return load_vector(index);
    // In range for all lanes iff the first and the last lane are (the index is monotone in n).
    Value* inside = b_.getTrue();
    for (int d = 0; d < b_access.map.num_results(); ++d) {
      if (!s.checked[c.b][d]) continue;
      const int64_t coeff = b_access.map.result(d).coeffs[c.n_axis];
      Value* last = b_.CreateAdd(index[d], masked ? b_.CreateMul(b_.CreateSub(tail_count, i64(1)), i64(coeff)) : i64(coeff * (vw - 1)));
      const int64_t size = b_access.type.shape[d];
      inside = b_.CreateAnd(inside, b_.CreateAnd(b_.CreateICmpULT(index[d], i64(size)), b_.CreateICmpULT(last, i64(size))));
    }
    auto* fast = llvm::BasicBlock::Create(ctx_, "b_inside", fn_);
    auto* slow = llvm::BasicBlock::Create(ctx_, "b_border", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "b_join", fn_);
    b_.CreateCondBr(inside, fast, slow);
    b_.SetInsertPoint(fast);
    std::vector<Value*> safe = index;  // unclamped: in range on this path
    Value* vf = load_vector(safe);
    llvm::BasicBlock* fast_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(slow);
    Value* vs = load_border(index, masked);
    llvm::BasicBlock* slow_end = b_.GetInsertBlock();
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
    llvm::PHINode* phi = b_.CreatePHI(vec_type, 2);
    phi->addIncoming(vf, fast_end);
    phi->addIncoming(vs, slow_end);
    return phi;
  };

  // The reduction runs in steps: each accumulates from zero in registers, then is added into
  // running totals kept in f64. That bounds the rounding error to that of one step (about
  // sqrt(terms) ulps) instead of letting it grow with the whole reduction. A flush costs about as
  // much as eight multiply-adds per accumulator (convert, load, add, store of two f64 halves), so
  // a step covers at least kRunTerms reduction points: the innermost axes whole, and the next one
  // cut to make up the rest, never less than the schedule's L1 reduction step. With the 16-term
  // steps of the schedule (and one term per step for a 3x3 convolution, whose L1 steps are 1),
  // the flushes took 35% of the 1024^3 GEMM's time.
  std::vector<int64_t> steps = reduction_steps(s);
  // The order the reduction axes are walked in, outermost first: by B's element step along each,
  // largest outermost, ties in the node's order. An NHWC convolution's axes are (c, kh, kw) while
  // its HWIO weights are contiguous along c: walked as written, consecutive points of B were a
  // whole [C, M] slice apart (256 KB for 256 x 256 channels), evicting each other.
  std::vector<int> walk(static_cast<size_t>(na - ns));
  for (int r = ns; r < na; ++r) walk[static_cast<size_t>(r - ns)] = r;
  if (!b_view.scratch || b_view.domain_extents.empty()) {
    const std::vector<int64_t>& strides = b_view.scratch ? b_view.scratch_strides : b_view.strides;
    auto b_stride = [&](int r) {
      int64_t step = 0;
      for (int d = 0; d < b_access.map.num_results(); ++d) step += std::abs(b_access.map.result(d).coeffs[r] * strides[d]);
      return step;
    };
    std::stable_sort(walk.begin(), walk.end(), [&](int x, int y) { return b_stride(x) > b_stride(y); });
  }
  for (int w = na - ns - 1, terms = 1; w >= 0; --w) {
    const int r = walk[static_cast<size_t>(w)];
    int64_t& step = steps[r - ns];
    step = std::min(node.axes()[r].extent, std::max<int64_t>(step, std::max<int64_t>(1, kRunTerms / terms)));
    terms = static_cast<int>(std::min<int64_t>(kRunTerms, terms * step));
  }
  // Software prefetch of B where it is read from its tensor (in place, or while packing it): the
  // micro-kernel takes one piece of NR vectors of B per reduction point, each a whole row of B
  // apart (a weight's rows: 40 KB for LLaMA-70B's QKV), so every piece starts a new page that the
  // hardware's stream prefetchers do not follow. Each such read also prefetches the piece
  // ahead_bytes ahead along the innermost walked axis: the schedule's distance (pf<i>, 0 for
  // none; cost_model/cpu_loops.h's derived_prefetch_bytes: only for a B larger than the private
  // caches), or the same rule's where it records none. Never for a sparse walk or a B read
  // through padding or lane by lane.
  const int walk_inner = na > ns ? walk.back() : -1;
  const int64_t ahead_bytes = plan_.prefetch_bytes.at(static_cast<size_t>(s.position))
                                  .value_or(prefetch_bytes_for(b_access.type.num_elements() * static_cast<int64_t>(dtype_bytes(b_access.type.dtype)),
                                                               params_.pack_bytes, params_.line_bytes));
  const bool prefetch_b = !skip && !b_checked && b_step == 1 && walk_inner >= 0 && params_.line_bytes > 0 && ahead_bytes > 0;
  auto prefetch_ahead = [&](std::vector<Value*> point, int nr) {
    const int64_t piece_bytes = nr * vw * static_cast<int64_t>(dtype_bytes(dtype));  // as stored: f16 B in halves
    const int64_t ahead = std::max<int64_t>(1, ahead_bytes / piece_bytes);
    point[walk_inner] = b_.CreateAdd(point[walk_inner], i64(ahead));
    Cache cache;
    Value* offset = element_offset(b_view, input_index(s, c.b, point, cache));
    for (int64_t byte = 0; byte < piece_bytes; byte += params_.line_bytes) {
      // Not inbounds: past the last reduction point the address leaves B (a prefetch never faults).
      Value* ptr = b_.CreateGEP(b_.getInt8Ty(), b_.CreateGEP(storage_type(ctx_, dtype), b_view.base, offset), i64(byte));
      // read, locality 3 (every level), data
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {b_.getPtrTy()}, {ptr, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
    }
  };
  // A sparse walk's runs are whole blocks along k (its one reduction axis).
  if (skip) steps[0] = std::min(node.axes()[ns].extent, (steps[0] + skip->block_k - 1) / skip->block_k * skip->block_k);

  // The sparse walk: whether the weight's blocks in block row kb and columns [n_first, n_last]
  // (clamped to the axis) hold a non-zero, from the table of non-zero blocks before each block
  // column (CpuSparseSkip::nonzero_before), a constant of the module.
  llvm::GlobalVariable* nonzero_table = nullptr;
  if (skip) {
    std::vector<uint32_t> entries(skip->nonzero_before.begin(), skip->nonzero_before.end());
    llvm::Constant* init = llvm::ConstantDataArray::get(ctx_, entries);
    nonzero_table = new llvm::GlobalVariable(module_, init->getType(), true, llvm::GlobalValue::InternalLinkage, init,
                                             cat(kernel_name(plan_.group), "_nonzero_blocks"));
  }
  auto block_nonzero = [&](Value* kb, Value* n_first, int64_t width) -> Value* {
    const int64_t n_axis_extent = node.axes()[c.n_axis].extent;
    Value* n_last = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(n_first, i64(width - 1)), i64(n_axis_extent - 1));
    Value* row = b_.CreateMul(kb, i64(skip->blocks_n + 1));
    auto entry = [&](Value* col) {
      Value* at = b_.CreateAdd(row, col);
      return b_.CreateLoad(b_.getInt32Ty(), b_.CreateInBoundsGEP(b_.getInt32Ty(), nonzero_table, at));
    };
    Value* before = entry(b_.CreateSDiv(n_first, i64(skip->block_n)));
    Value* through = entry(b_.CreateAdd(b_.CreateSDiv(n_last, i64(skip->block_n)), i64(1)));
    return b_.CreateICmpSGT(through, before);
  };
  // for (k in [begin, end)) body(k), over the non-zero blocks only: begin is a multiple of
  // block_k (runs are whole blocks), end the run's end or the axis's.
  auto for_nonzero_k = [&](Value* begin, Value* end, Value* n_first, int64_t width, const std::function<void(Value*)>& body) {
    const int64_t bk = skip->block_k;
    emit_for(b_.CreateSDiv(begin, i64(bk)), b_.CreateSDiv(b_.CreateAdd(end, i64(bk - 1)), i64(bk)), 1, [&](Value* kb) {
      emit_for(i64(0), b_.CreateZExt(block_nonzero(kb, n_first, width), b_.getInt64Ty()), 1, [&](Value*) {
        Value* first = b_.CreateMul(kb, i64(bk));
        emit_for(first, b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(first, i64(bk)), end), 1, body);
      });
    });
  };

  // B packing. Every MR-row block of a column block reads the same B panel (all reduction points x
  // NR vectors); read in place, its rows sit one leading dimension apart -- 4 KB for a 1024-wide
  // f32 matrix, so they share cache sets and evict each other. Where several row blocks will read
  // it and the panel fits `pack_bytes`, it is copied once per column block, converted to the
  // compute type, into a contiguous per-task buffer, row-major over the reduction axes in the
  // node's order (panel_row; the walk may take them in another order, `walk`).
  int64_t r_total = 1;
  for (int r = ns; r < na; ++r) r_total *= node.axes()[r].extent;
  const int64_t panel_bytes = r_total * blocking.nr * vw * static_cast<int64_t>(compute_bytes(dtype));
  const bool pack = c.m_axis >= 0 && m_extent >= 2 * blocking.mr && panel_bytes <= params_.pack_bytes;
  llvm::Type* lane_type = compute_type(ctx_, dtype);
  Value* panel = pack ? static_cast<Value*>(entry_alloca(llvm::ArrayType::get(lane_type, static_cast<uint64_t>(r_total * blocking.nr * vw))))
                      : nullptr;
  int packed_nr = 0;  // > 0 while the blocks being emitted read the panel (its width in vectors)
  // The panel row of a reduction point: row-major over the reduction axes.
  auto panel_row = [&](const std::vector<Value*>& point) {
    Value* row = i64(0);
    for (int r = ns; r < na; ++r) row = b_.CreateAdd(b_.CreateMul(row, i64(node.axes()[r].extent)), point[r]);
    return row;
  };
  auto panel_ptr = [&](Value* row, int nr, int j) {
    return b_.CreateInBoundsGEP(lane_type, panel, b_.CreateAdd(b_.CreateMul(row, i64(nr * vw)), i64(j * vw)));
  };
  auto pack_panel = [&](std::vector<Value*> point, int nr) {
    point.resize(na, nullptr);
    Value* n0 = point[c.n_axis];
    std::function<void(int)> all = [&](int r) {
      if (r == na) {
        if (prefetch_b) prefetch_ahead(point, nr);
        Value* row = panel_row(point);
        for (int j = 0; j < nr; ++j) {
          std::vector<Value*> p = point;
          p[c.n_axis] = b_.CreateAdd(n0, i64(j * vw));
          b_.CreateAlignedStore(load_b(p, tail_mask && j == nr - 1), panel_ptr(row, nr, j), llvm::Align(compute_bytes(dtype)));
        }
        return;
      }
      auto at = [&](Value* k) {
        point[r] = k;
        all(r + 1);
      };
      // (A sparse walk packs the rows of its non-zero blocks only: no run reads the others.)
      if (skip) for_nonzero_k(i64(0), i64(node.axes()[r].extent), n0, nr * vw, at);
      else emit_for(i64(0), i64(node.axes()[r].extent), 1, at);
    };
    all(ns);
  };

  // Totals of a column block, f64, row-major over (row of the box, vector, lane): every row block
  // adds its runs into its rows, and the totals are written to the output after the last run.
  llvm::Type* total_type = compute_type(ctx_, DType::f64, vw);
  // Rows are taken in chunks whose totals fit half the private cache (pack_bytes), like BLAS's
  // mc blocking; a task's box is usually one chunk.
  const int64_t row_bytes = blocking.nr * vw * static_cast<int64_t>(sizeof(double));
  const int64_t chunk_rows = c.m_axis < 0 ? 1
      : std::min(m_extent, std::max<int64_t>(blocking.mr, params_.pack_bytes / row_bytes / blocking.mr * blocking.mr));
  const int64_t total_rows = chunk_rows;
  llvm::AllocaInst* totals = entry_alloca(llvm::ArrayType::get(total_type, static_cast<uint64_t>(total_rows * blocking.nr)));
  auto total_ptr = [&](Value* row, int nr, int j) {
    return b_.CreateInBoundsGEP(total_type, totals, b_.CreateAdd(b_.CreateMul(row, i64(nr)), i64(j)));
  };
  std::vector<Value*> step_begin(na, nullptr);

  // One run of one MR x NR block at the spatial point (m and n at the block's first row and
  // column; `row` its first row in the box): accumulate the run's points from zero in registers,
  // then add them into the totals.
  auto block_run = [&](std::vector<Value*> point, Value* row, int mr, int nr) {
    std::vector<llvm::AllocaInst*> acc(static_cast<size_t>(mr * nr));
    for (auto& a : acc) {
      a = entry_alloca(vec_type);
      b_.CreateStore(constant_value(b_, dtype, 0.0, vw), a);
    }
    point.resize(na, nullptr);
    Value* m0 = c.m_axis >= 0 ? point[c.m_axis] : nullptr;
    Value* n0 = point[c.n_axis];
    // The multiply-adds of one reduction point.
    auto fma_point = [&] {
      std::vector<Value*> bv(nr);
      Value* prow = packed_nr > 0 ? panel_row(point) : nullptr;
      if (!prow && prefetch_b) prefetch_ahead(point, nr);
      for (int j = 0; j < nr; ++j) {
        if (prow) {
          bv[j] = b_.CreateAlignedLoad(vec_type, panel_ptr(prow, packed_nr, j), llvm::Align(compute_bytes(dtype)));
          continue;
        }
        std::vector<Value*> p = point;
        p[c.n_axis] = b_.CreateAdd(n0, i64(j * vw));
        bv[j] = load_b(p, tail_mask && j == nr - 1);
      }
      for (int i = 0; i < mr; ++i) {
        std::vector<Value*> p = point;
        if (m0) p[c.m_axis] = b_.CreateAdd(m0, i64(i));
        Cache cache;
        Value* a = b_.CreateVectorSplat(vw, load_input(s, c.a, p, cache));
        for (int j = 0; j < nr; ++j) {
          llvm::AllocaInst* slot = acc[i * nr + j];
          Value* sum = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vec_type}, {a, bv[j], b_.CreateLoad(vec_type, slot)});
          b_.CreateStore(sum, slot);
        }
      }
    };
    // Points of one run: every reduction axis within its step.
    std::function<void(int)> within = [&](int w) {
      if (w == na - ns) return fma_point();
      const int r = walk[static_cast<size_t>(w)];
      const int64_t extent = node.axes()[r].extent, step = steps[r - ns];
      Value* begin = step >= extent ? i64(0) : step_begin[r];
      Value* end = step >= extent ? i64(extent) : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(begin, i64(step)), i64(extent));
      auto at = [&](Value* k) {
        point[r] = k;
        within(w + 1);
      };
      if (skip) for_nonzero_k(begin, end, n0, nr * vw, at);
      else emit_for(begin, end, 1, at);
    };
    within(0);
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nr; ++j) {
        Value* ptr = total_ptr(b_.CreateAdd(row, i64(i)), nr, j);
        Value* add = convert_value(b_, b_.CreateLoad(vec_type, acc[i * nr + j]), dtype, DType::f64);
        b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(total_type, ptr), add), ptr);
      }
  };

  // Rows of one column block. Runs outermost: a run's B sliver (run points x NR vectors, packed or
  // in place) stays in L1 while every row block of the box -- full MR blocks, then single rows --
  // multiplies into it; each row block's totals wait in `totals` between runs.
  auto chunk = [&](std::vector<Value*>& point, int nr, Value* mb, Value* m_count) {
    const int mr = c.m_axis >= 0 ? blocking.mr : 1;
    if (pack) {
      pack_panel(point, nr);
      packed_nr = nr;
    }
    emit_for(i64(0), b_.CreateMul(m_count, i64(nr)), 1, [&](Value* x) {
      b_.CreateStore(constant_value(b_, DType::f64, 0.0, vw), b_.CreateInBoundsGEP(total_type, totals, x));
    });
    auto run_rows = [&] {
      if (c.m_axis < 0) return block_run(point, i64(0), 1, nr);
      Value* full = b_.CreateSDiv(m_count, i64(mr));
      emit_for(i64(0), full, 1, [&](Value* im) {
        Value* row = b_.CreateMul(im, i64(mr));
        point[c.m_axis] = b_.CreateAdd(mb, row);
        block_run(point, row, mr, nr);
      });
      if (mr > 1)
        emit_for(b_.CreateMul(full, i64(mr)), m_count, 1, [&](Value* row) {
          point[c.m_axis] = b_.CreateAdd(mb, row);
          block_run(point, row, 1, nr);
        });
    };
    // Runs: one loop per reduction axis that is cut.
    // A sparse walk skips a run whose blocks are all zero for this column block whole: no row
    // block zeroes, walks or flushes accumulators for it.
    auto run_if_nonzero = [&](Value* begin, int64_t step) {
      if (!skip) return run_rows();
      const int64_t bk = skip->block_k, extent = node.axes()[ns].extent;
      Value* any = entry_alloca(b_.getInt1Ty());
      b_.CreateStore(b_.getFalse(), any);
      Value* end = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(begin, i64(step)), i64(extent));
      emit_for(b_.CreateSDiv(begin, i64(bk)), b_.CreateSDiv(b_.CreateAdd(end, i64(bk - 1)), i64(bk)), 1, [&](Value* kb) {
        b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), any), block_nonzero(kb, point[c.n_axis], nr * vw)), any);
      });
      emit_for(i64(0), b_.CreateZExt(b_.CreateLoad(b_.getInt1Ty(), any), b_.getInt64Ty()), 1, [&](Value*) { run_rows(); });
    };
    std::function<void(int)> over_steps = [&](int w) {
      if (w == na - ns) return skip ? run_if_nonzero(step_begin[ns] ? step_begin[ns] : i64(0), std::min(steps[0], node.axes()[ns].extent))
                                    : run_rows();
      const int r = walk[static_cast<size_t>(w)];
      const int64_t extent = node.axes()[r].extent, step = steps[r - ns];
      if (step >= extent) return over_steps(w + 1);
      emit_for(i64(0), i64((extent + step - 1) / step), 1, [&](Value* q) {
        step_begin[r] = b_.CreateMul(q, i64(step));
        over_steps(w + 1);
      });
    };
    over_steps(0);
    packed_nr = 0;
    // The totals to the output.
    Value* n0 = point[c.n_axis];
    emit_for(i64(0), m_count, 1, [&](Value* row) {
      std::vector<Value*> p(point.begin(), point.begin() + ns);
      if (c.m_axis >= 0) p[c.m_axis] = b_.CreateAdd(mb, row);
      for (int j = 0; j < nr; ++j) {
        p[c.n_axis] = b_.CreateAdd(n0, i64(j * vw));
        Value* v = b_.CreateLoad(total_type, total_ptr(row, nr, j));
        if (c.scale) v = b_.CreateFMul(v, constant_value(b_, DType::f64, *c.scale, vw));
        v = convert_value(b_, v, DType::f64, dtype);
        v = to_storage(b_, dtype, v);  // n is contiguous in the output
        if (tail_mask && j == nr - 1) store_stored_masked(s.output.tensor, output_offset(s, p), v, tail_mask);
        else store_stored(s.output.tensor, output_offset(s, p), v);
      }
    });
  };
  auto rows = [&](std::vector<Value*>& point, int nr) {
    if (c.m_axis < 0) return chunk(point, nr, i64(0), i64(1));
    Value* extent = s.box_extent[c.m_axis];
    Value* chunks = b_.CreateSDiv(b_.CreateAdd(extent, i64(chunk_rows - 1)), i64(chunk_rows));
    emit_for(i64(0), chunks, 1, [&](Value* q) {
      Value* first = b_.CreateMul(q, i64(chunk_rows));
      Value* count = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, i64(chunk_rows), b_.CreateSub(extent, first));
      chunk(point, nr, b_.CreateAdd(s.box_begin[c.m_axis], first), count);
    });
  };

  std::vector<Value*> point(ns);
  std::function<void(int)> outer = [&](int ax) {
    if (ax < ns) {
      if (ax == c.n_axis || ax == c.m_axis) return outer(ax + 1);
      emit_for(s.box_begin[ax], b_.CreateAdd(s.box_begin[ax], s.box_extent[ax]), 1, [&](Value* p) {
        point[ax] = p;
        outer(ax + 1);
      });
      return;
    }
    const int nr = blocking.nr;
    Value* nb = s.box_begin[c.n_axis];
    // Full NR-vector column blocks, then one block of the vectors left, its last one masked.
    Value* full = b_.CreateSDiv(s.box_extent[c.n_axis], i64(nr * vw));
    emit_for(i64(0), full, 1, [&](Value* jn) {
      point[c.n_axis] = b_.CreateAdd(nb, b_.CreateMul(jn, i64(nr * vw)));
      rows(point, nr);
    });
    Value* rest = b_.CreateSub(s.box_extent[c.n_axis], b_.CreateMul(full, i64(nr * vw)));  // 0 .. nr * vw - 1
    Value* rest_vectors = b_.CreateSDiv(b_.CreateAdd(rest, i64(vw - 1)), i64(vw));
    std::vector<llvm::Constant*> iota;
    for (int l = 0; l < vw; ++l) iota.push_back(b_.getInt32(static_cast<uint32_t>(l)));
    for (int r = 1; r <= nr; ++r)
      emit_for(i64(0), b_.CreateZExt(b_.CreateICmpEQ(rest_vectors, i64(r)), b_.getInt64Ty()), 1, [&](Value*) {
        tail_count = b_.CreateSub(rest, i64((r - 1) * vw));  // 1 .. vw
        tail_mask = b_.CreateICmpULT(llvm::ConstantVector::get(iota), b_.CreateVectorSplat(vw, b_.CreateTrunc(tail_count, b_.getInt32Ty())));
        point[c.n_axis] = b_.CreateAdd(nb, b_.CreateMul(full, i64(nr * vw)));
        rows(point, r);
        tail_count = tail_mask = nullptr;
      });
  };
  outer(0);
  return true;
}

}  // namespace tessel::cpu
