// The CUDA emitter's internals, shared by its files (kernel_emitter.h is the interface): the
// type and literal helpers, and the Emitter class that writes one kernel's CUDA C++. Each kernel
// family's template lives in its own file:
//   emitter.cpp       helpers; the parts every template shares (boxes, value functions, steps,
//                     signature) and the generic kernel (one thread per output element)
//   emit_mma.cpp      the tensor-core kernel (mma.sync and wgmma; contraction_plan.h)
//   emit_flash.cpp    the streamed attention kernel (attention_plan.h)
//   emit_vector.cpp   the vector kernel (vector_plan.h)
//   emit_transpose.cpp  the tiled transpose kernel (transpose_plan.h)
//   emit_row.cpp      the row kernel (row_plan.h)
// Internal to kernels/cuda/.
#pragma once

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/kernel_emitter.h"
#include "tilegraph/error.h"

namespace tessel::cuda::emitter {

// ---- types and literals (emitter.cpp) ---------------------------------------------------------------

std::string storage_type(DType t);
std::string compute_type(DType t);
std::string acc_type(DType t);
int int_bits(DType t);
std::string wrap_int(DType t, const std::string& x);
std::string round_to_dtype(DType t, const std::string& x);
std::string to_storage(DType t, const std::string& x);
std::string from_storage(DType t, const std::string& x);
std::string float_literal(double v, const std::string& type);
std::string int_literal(int64_t v);
std::string literal(DType t, const Scalar& v, bool acc = false);
std::string combiner_fn(Combiner c);
std::string strip_comments(const std::string& source);
std::string short_hash(const std::string& text);
void replace_all(std::string& s, const std::string& from, const std::string& to);
std::string group_names(const OpGraph& graph, const ScheduledGroup& group);
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);
/// `suffix`: of the integer constants ("LL": 64-bit arithmetic; "": int, for an index known to fit).
std::string affine_text(const AffineExpr& row, const std::vector<std::string>& vars, const char* suffix = "LL");

// ---- the emitter ----------------------------------------------------------------------------------

class Emitter {
 public:
  Emitter(const OpGraph& graph, const GroupPlan& plan, const HwSpec& spec) : g_(graph), plan_(plan), spec_(spec) {}

  std::string kernel(const std::string& name);
  std::string mma_kernel(const std::string& name, const ContractionPlan& c);
  std::string flash_kernel(const std::string& name, const AttentionPlan& a);
  std::string packed_score_pair(const AttentionPlan& a, int spos, const std::vector<NodeId>& skip = {},
                                const char* name = "tsl_score2");
  void emit_gather_copy(const ContractionPlan& c);
  // A box-tiled convolution's TslConvCoords (the wgmma kernel's COORDS hook: each stage's boxes).
  void emit_conv_coords(const ContractionPlan& c);
  void emit_unflatten(const std::string& ind, const std::string& type, const std::string& var, const std::vector<int>& axes,
                      const std::vector<int64_t>& extents, const std::string& prefix);
  std::string row_kernel(const std::string& name, const RowPlan& r);
  std::string row_kernel_streamed(const std::string& name, const RowPlan& r);
  void emit_row_stream_chunk(const RowPlan& r);
  void emit_row_stream_rest(const RowPlan& r);
  void emit_row_online_pass(const RowPlan& r, const std::vector<std::string>& rows);
  std::string vector_kernel(const std::string& name, const VectorPlan& p);
  std::string transpose_kernel(const std::string& name, const TransposePlan& p);
  // A grouped window's accumulation into `acc` (vector_plan.h; emit_vector.cpp): `xw` holds the
  // node's spatial coordinates at the vector's first element, `sp` the same as 64-bit expressions.
  void grouped_window(const TeNode& nd, const std::vector<VectorRead>& reads, int channel, int cv, int vec,
                      std::vector<std::string> xw, const std::vector<std::string>& sp, const std::string& acc, bool narrow);

 private:
  const OpGraph& g_;
  const GroupPlan& plan_;
  const HwSpec& spec_;
  std::ostringstream os_;
  int temp_ = 0;
  // Inside a reduction's body: f32 arithmetic in f64, like the interpreter (which rounds only node
  // outputs and casts), so that a summand is not rounded to f32 before an f64 accumulation; an
  // ill-conditioned reader (a layer norm over nearly equal values) amplifies that difference
  // (tests/regressions/random_101108_*).
  bool wide_ = false;
  // Reads hoisted out of the value functions (a point-independent element of device memory,
  // loaded once per thread): (node position, input) -> the variable holding the value.
  std::map<std::pair<int, int>, std::string> hoisted_;
  void hoist_invariant_reads(int i);
  std::string ctype(DType t) const { return wide_ && t == DType::f32 ? "double" : compute_type(t); }
  struct Wide {
    Emitter& e;
    explicit Wide(Emitter& em) : e(em) { e.wide_ = true; }
    ~Wide() { e.wide_ = false; }
  };

  const TeNode& node(int i) const { return g_.node(plan_.nodes[i].node); }
  int ns(int i) const { return node(i).num_spatial(); }
  std::string fresh(const char* prefix) { return cat(prefix, temp_++); }
  // The batch point's coordinates tsl_x<axis> from tsl_batch (row-major over `axes`), and the
  // element offset of an operand's view at that point (its strides per batch axis).
  void emit_batch_point(const std::vector<int>& axes, const std::vector<int64_t>& extents) {
    for (int b = static_cast<int>(axes.size()) - 1; b >= 0; --b)
      os_ << "  const long long tsl_x" << axes[b] << " = tsl_batch % " << extents[b] << "LL; tsl_batch /= " << extents[b] << "LL;\n";
  }
  static std::string batch_offset_expr(const std::vector<int>& axes, const std::vector<int64_t>& strides) {
    std::string off = "0LL";
    for (size_t b = 0; b < axes.size(); ++b)
      if (strides[b] != 0) off += cat(" + tsl_x", axes[b], " * ", strides[b], "LL");
    return off;
  }
  int input_param(TensorId t) const {
    for (size_t k = 0; k < plan_.inputs.size(); ++k)
      if (plan_.inputs[k] == t) return static_cast<int>(k);
    TESSEL_ASSERT(false, "tensor ", t, " is not a kernel input");
  }
  int output_param(TensorId t) const {
    for (size_t k = 0; k < plan_.outputs.size(); ++k)
      if (plan_.outputs[k] == t) return static_cast<int>(k);
    TESSEL_ASSERT(false, "tensor ", t, " is not a kernel output");
  }

  /// A side input the wgmma epilogue reads along its runs (emit_mma.cpp's run_reads): input `input`
  /// of node `node`, from tensor `tensor`, at `offset` (written at the run's first point).
  struct RunRead {
    int node = 0, input = 0;
    TensorId tensor = -1;
    DType dtype = DType::f16;
    std::string offset;
    int slot = 0;  // the load it reads (reads of the same elements share one)
  };
  std::vector<RunRead> run_reads(const ContractionPlan& c, int cpos, const std::vector<std::string>& point) const;
  void emit_boxes();
  /// `rounded` false: a node of 16-bit float type returns its value before the rounding to its
  /// dtype (the caller stores it, which rounds the same way once).
  void emit_value_function(int i, bool rounded = true);
  std::string emit_load(int i, int k, const std::vector<std::string>& x, const std::string& indent,
                        const std::vector<std::string>& values);
  std::string emit_expr(const Expr& e, const std::vector<std::string>& inputs, const std::vector<std::string>& x,
                        std::map<const ExprNode*, std::string>& memo, const std::string& indent);
  void emit_step(int i);
  std::string index_type(int i) const;
  void emit_signature(const std::string& name, int min_blocks_per_sm);
  std::string emit_row_global_read(const TeNode& nd, const RowRead& rd, const std::vector<std::string>& x,
                                   const std::string& ind);
  // A window's read at the point `x` (the node's axes: the vector's first element, then the taps;
  // emit_vector.cpp): its indices and offset, declared in `it` arithmetic; the guard of the
  // indices but the last that can leave the tensor ("" when none can), and the offset's step per
  // unit of each axis in `axes`.
  struct WindowOffset {
    std::string offset, inside;
    std::vector<int64_t> steps;
  };
  /// The value of a recomputed read (VectorRead::inlined) by `reader` at its point `x`: the node's
  /// body at the read's point, its own reads there, the pad value outside its domain.
  std::string emit_recomputed(const VectorPlan& p, const TeNode& reader, const VectorRead& r, const std::vector<std::string>& x,
                              const std::string& ind);
  /// Loads a span read (VectorRead::span) at the taps `xw` (the innermost at 0); its registers' name.
  std::string emit_span_load(const RowRead& r, const VectorSpan& sp, std::vector<std::string> xw, const std::vector<int64_t>& extents,
                             int last, int innermost, const std::string& it, const std::string& lit, const std::string& ind);
  WindowOffset emit_window_offset(const RowRead& r, const std::vector<std::string>& x, const std::vector<int64_t>& extents,
                                  const std::vector<int>& axes, const std::string& it, const std::string& ind);
  std::vector<std::string> emit_row_prologue(const std::string& name, const RowPlan& r);
  void emit_row_combine(int i, const TeNode& nd, int lanes, int splits = 1);
  void emit_row_scalar(int i, const RowPlan& r, const std::vector<std::string>& rows);
  void emit_row_store(const RowNode& rn, const RowPlan& r, const std::string& ind);
  std::string row_vector_offset(const RowRead& rd, const std::vector<std::string>& x, int col);
  void emit_row_vector_load(const RowRead& rd, int vec, const std::string& array, const std::string& at,
                            const std::string& offset, const std::string& ind);
  template <class Inputs>
  void emit_row_reduction(const TeNode& nd, const std::vector<RowRead>& reads, const std::vector<std::string>& x,
                          const Inputs& inputs);
};

}  // namespace tessel::cuda::emitter
