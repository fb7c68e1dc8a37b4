// The group kernels (see kernel_emitter.h): the generic kernel (group_plan.h says what it
// computes) and the tensor-core kernel of contraction groups (contraction_plan.h), which share the
// value functions of the nodes.
//
// Layout of the emitted kernel:
//   1. parameters: one pointer per tensor read from / written to device memory, the global
//      scratch (used when the pool does not fit shared memory) and the status word;
//   2. a loop over the sink tiles this block owns (one tile per block unless the grid is capped);
//   3. the boxes: the sink's tile from the tile index, then every producer's box from its readers'
//      boxes (reverse group order, bounding boxes of the affine reads, as tile_boxes());
//   4. one lambda per node giving its value at a point of its spatial domain (inlined nodes are
//      called from their readers; a reduction has a partial form for several lanes per point);
//   5. one step per staged node (threads stride over its box, store to the pool and, when the
//      output leaves the group, to device memory), each followed by a barrier; then the sink's.
//
// Layout of the tensor-core kernel (mma_kernel):
//   1. the same parameters;
//   2. the block's tile: a batch point and a block_m x block_n tile of the contraction's (m, n),
//      in rasterized order (groups of raster_group block rows share their B panels in L2);
//   3. the main loop (device/mma.cuh's BlockGemm: cp.async pipeline, ldmatrix, mma.sync) into
//      f32 accumulator fragments; with K split over a cluster, over the block's part of K, then
//      the parts' sums meet in rank 0 (the others return);
//   4. the epilogue: the contraction's value function returns the accumulator of the point
//      being stored (rounded to its dtype), the other nodes' value functions are the generic
//      ones, and the sink's value is stored for every accumulator inside the output.
#include "kernels/cuda/kernel_emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "kernels/cuda/contraction_plan.h"
#include "kernels/cuda/row_plan.h"
#include "kernels/cuda/vector_plan.h"
#include "policy/schedule.h"
#include "tilegraph/error.h"
#include "tilegraph/hash.h"

namespace tessel::cuda {

namespace {

// ---- types ----------------------------------------------------------------------------------------

std::string storage_type(DType t) {
  switch (t) {
    case DType::f64: return "double";
    case DType::f32: return "float";
    case DType::f16: case DType::bf16: return "unsigned short";
    case DType::i64: return "long long";
    case DType::i32: return "int";
    case DType::i8: return "signed char";
    case DType::u8: case DType::boolean: return "unsigned char";
  }
  TESSEL_ASSERT(false, "dtype");
}

std::string compute_type(DType t) {
  if (t == DType::f64) return "double";
  if (is_float(t)) return "float";
  if (t == DType::boolean) return "bool";
  return "long long";
}

std::string acc_type(DType t) {
  if (t == DType::f64 || t == DType::f32) return "double";
  if (is_float(t)) return "float";
  return "long long";  // integers and bool (a bool sum counts, then rounds to != 0)
}

int int_bits(DType t) {
  switch (t) {
    case DType::i64: return 64;
    case DType::i32: return 32;
    default: return 8;
  }
}

std::string wrap_int(DType t, const std::string& x) {
  switch (t) {
    case DType::i64: return x;
    case DType::i32: return cat("tsl::wrap_i32(", x, ")");
    case DType::i8: return cat("tsl::wrap_i8(", x, ")");
    case DType::u8: return cat("tsl::wrap_u8(", x, ")");
    default: TESSEL_ASSERT(false, "wrap_int on ", dtype_name(t));
  }
}

/// A value of compute type (or accumulator type) rounded to dtype `t`, in compute type.
std::string round_to_dtype(DType t, const std::string& x) {
  switch (t) {
    case DType::f64: return cat("static_cast<double>(", x, ")");
    case DType::f32: return cat("static_cast<float>(", x, ")");
    case DType::f16: return cat("tsl::round_f16(static_cast<float>(", x, "))");
    case DType::bf16: return cat("tsl::round_bf16(static_cast<float>(", x, "))");
    case DType::boolean: return cat("(", x, " != 0)");
    default: return wrap_int(t, cat("static_cast<long long>(", x, ")"));
  }
}

/// Compute type -> storage type.
std::string to_storage(DType t, const std::string& x) {
  switch (t) {
    case DType::f16: return cat("tsl::f32_to_f16(", x, ")");
    case DType::bf16: return cat("tsl::f32_to_bf16(", x, ")");
    case DType::boolean: return cat("static_cast<unsigned char>(", x, " ? 1 : 0)");
    default: return cat("static_cast<", storage_type(t), ">(", x, ")");
  }
}

/// Storage type -> compute type.
std::string from_storage(DType t, const std::string& x) {
  switch (t) {
    case DType::f16: return cat("tsl::f16_to_f32(", x, ")");
    case DType::bf16: return cat("tsl::bf16_to_f32(", x, ")");
    case DType::boolean: return cat("(", x, " != 0)");
    case DType::f64: case DType::f32: return x;
    default: return cat("static_cast<long long>(", x, ")");
  }
}

std::string float_literal(double v, const std::string& type) {
  if (std::isnan(v)) return type == "double" ? "tsl::nan_f64()" : "tsl::nan_f32()";
  if (std::isinf(v)) return cat(v < 0 ? "-" : "", type == "double" ? "tsl::inf_f64()" : "tsl::inf_f32()");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return type == "double" ? s : cat(s, "f");
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return cat(v, "LL");
}

/// A constant of dtype `t` in compute type (acc = true: in accumulator type).
std::string literal(DType t, double v, bool acc = false) {
  const std::string type = acc ? acc_type(t) : compute_type(t);
  if (type == "double" || type == "float") return float_literal(v, type);
  if (type == "bool") return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "0LL";
  if (v <= -9223372036854775808.0) return int_literal(INT64_MIN);
  if (v >= 9223372036854775807.0) return int_literal(INT64_MAX);
  return int_literal(static_cast<int64_t>(v));
}

std::string combiner_fn(Combiner c) {
  switch (c) {
    case Combiner::sum: return "tsl::c_sum";
    case Combiner::prod: return "tsl::c_prod";
    case Combiner::max: return "tsl::c_max";
    case Combiner::min: return "tsl::c_min";
    case Combiner::none: break;
  }
  TESSEL_ASSERT(false, "no combiner");
}

std::string strip_comments(const std::string& source) {
  std::string out;
  std::istringstream in(source);
  for (std::string line; std::getline(in, line);) {
    const size_t c = line.find("//");
    if (c != std::string::npos) line.resize(c);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!line.empty()) out += line + "\n";
  }
  return out;
}

std::string short_hash(const std::string& text) { return hex64(fnv1a64(text)).substr(0, 12); }

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

std::string group_names(const OpGraph& graph, const ScheduledGroup& group) {
  std::string out;
  for (NodeId n : group.nodes) out += cat(out.empty() ? "" : ", ", graph.node(n).name());
  return out;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Affine expression text over variables x0.. (constant terms folded).
std::string affine_text(const AffineExpr& row, const std::vector<std::string>& vars) {
  std::string out;
  for (size_t a = 0; a < row.coeffs.size(); ++a) {
    const int64_t c = row.coeffs[a];
    if (c == 0) continue;
    std::string term = c == 1 ? vars[a] : c == -1 ? cat("-", vars[a]) : cat(c, "LL * ", vars[a]);
    out += out.empty() ? term : (term[0] == '-' ? cat(" - ", term.substr(1)) : cat(" + ", term));
  }
  if (row.offset != 0 || out.empty()) {
    if (out.empty()) out = int_literal(row.offset);
    else out += row.offset < 0 ? cat(" - ", -row.offset, "LL") : cat(" + ", row.offset, "LL");
  }
  return out;
}

// ---- the emitter ----------------------------------------------------------------------------------

class Emitter {
 public:
  Emitter(const OpGraph& graph, const GroupPlan& plan, const HwSpec& spec) : g_(graph), plan_(plan), spec_(spec) {}

  std::string kernel(const std::string& name);
  std::string mma_kernel(const std::string& name, const ContractionPlan& c);
  std::string flash_kernel(const std::string& name, const AttentionPlan& a);
  std::string packed_score_pair(const AttentionPlan& a, int spos);
  void emit_gather_copy(const ContractionPlan& c);
  void emit_unflatten(const std::string& ind, const std::string& type, const std::string& var, const std::vector<int>& axes,
                      const std::vector<int64_t>& extents, const std::string& prefix);
  std::string row_kernel(const std::string& name, const RowPlan& r);
  std::string vector_kernel(const std::string& name, const VectorPlan& p);

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

  void emit_boxes();
  void emit_value_function(int i);
  std::string emit_load(int i, int k, const std::vector<std::string>& x, const std::string& indent,
                        const std::vector<std::string>& values);
  std::string emit_expr(const Expr& e, const std::vector<std::string>& inputs, const std::vector<std::string>& x,
                        std::map<const ExprNode*, std::string>& memo, const std::string& indent);
  void emit_step(int i);
  std::string index_type(int i) const;
  void emit_signature(const std::string& name, int min_blocks_per_sm);
  std::string emit_row_global_read(const TeNode& nd, const RowRead& rd, const std::vector<std::string>& x,
                                   const std::string& ind);
  template <class Inputs>
  void emit_row_reduction(const TeNode& nd, const std::vector<RowRead>& reads, const std::vector<std::string>& x,
                          const Inputs& inputs);
};

std::string Emitter::index_type(int i) const {
  const int64_t n = std::max<int64_t>(1, plan_.nodes[i].capacity) * plan_.nodes[i].lanes + plan_.threads;
  return n < (int64_t{1} << 31) ? "unsigned" : "unsigned long long";
}

// Step 3: boxes. Sink first (from the tile index), then producers in reverse order.
void Emitter::emit_boxes() {
  const int n = static_cast<int>(plan_.nodes.size());
  const int s = n - 1;
  const TeNode& sink = node(s);
  os_ << "    // the sink's tile\n";
  os_ << "    long long lo" << s << "[" << std::max(1, ns(s)) << "], hi" << s << "[" << std::max(1, ns(s)) << "];\n";
  os_ << "    {\n      long long t = tsl_tile;\n";
  for (int a = ns(s) - 1; a >= 0; --a) {
    os_ << "      lo" << s << "[" << a << "] = (t % " << plan_.grid[a] << "LL) * " << plan_.sink_tile[a] << "LL; t /= "
        << plan_.grid[a] << "LL;\n";
    os_ << "      hi" << s << "[" << a << "] = tsl::imin(lo" << s << "[" << a << "] + " << plan_.sink_tile[a] << "LL, "
        << sink.axes()[a].extent << "LL) - 1;\n";
  }
  os_ << "    }\n    const bool need" << s << " = true;\n";
  for (int i = 0; i < s; ++i) {
    const int r = node(i).output().rank();
    os_ << "    long long olo" << i << "[" << std::max(1, r) << "], ohi" << i << "[" << std::max(1, r) << "]; bool need" << i
        << " = false;\n";
  }
  for (int i = n - 1; i >= 0; --i) {
    const TeNode& nd = node(i);
    const int d = ns(i);
    if (i != s) {
      os_ << "    // " << nd.name() << " (" << node_role_name(plan_.nodes[i].role) << "): the box its readers need\n";
      os_ << "    long long lo" << i << "[" << std::max(1, d) << "], hi" << i << "[" << std::max(1, d) << "];\n";
      os_ << "    for (int a = 0; a < " << d << "; ++a) lo" << i << "[a] = 0, hi" << i << "[a] = -1;\n";
      if (plan_.nodes[i].reshaped) {
        const std::vector<int64_t>& oshape = nd.output().shape;
        os_ << "    if (need" << i << ") {\n";
        os_ << "      const long long oshape[" << std::max<size_t>(1, oshape.size()) << "] = {";
        for (size_t r = 0; r < oshape.size(); ++r) os_ << (r ? ", " : "") << oshape[r] << "LL";
        if (oshape.empty()) os_ << "1LL";
        os_ << "};\n      const long long dext[" << std::max(1, d) << "] = {";
        for (int a = 0; a < d; ++a) os_ << (a ? ", " : "") << nd.axes()[a].extent << "LL";
        if (d == 0) os_ << "1LL";
        os_ << "};\n      tsl::enclose_box<" << oshape.size() << ", " << d << ">(olo" << i << ", ohi" << i
            << ", oshape, dext, lo" << i << ", hi" << i << ");\n    }\n";
      } else {
        os_ << "    if (need" << i << ") for (int a = 0; a < " << d << "; ++a) lo" << i << "[a] = olo" << i << "[a], hi" << i
            << "[a] = ohi" << i << "[a];\n";
      }
    }
    os_ << "    long long vol" << i << " = need" << i << " ? 1 : 0;\n";
    for (int a = 0; a < d; ++a)
      os_ << "    const long long ext" << i << "_" << a << " = hi" << i << "[" << a << "] - lo" << i << "[" << a
          << "] + 1; vol" << i << " *= ext" << i << "_" << a << " > 0 ? ext" << i << "_" << a << " : 0;\n";
    // What this node reads of every in-group producer.
    const std::vector<TensorId>& ins = g_.node_inputs(plan_.nodes[i].node);
    for (size_t k = 0; k < ins.size(); ++k) {
      const int j = plan_.position(g_.producer(ins[k]));
      if (j < 0) continue;
      const Access& acc = nd.inputs()[k];
      const int rank = acc.type.rank();
      os_ << "    if (vol" << i << " > 0) {  // " << nd.name() << " reads " << node(j).name() << "\n";
      os_ << "      long long l[" << std::max(1, rank) << "], h[" << std::max(1, rank) << "]; bool ok = true;\n";
      for (int r = 0; r < rank; ++r) {
        if (r == acc.gather_dim) {
          os_ << "      l[" << r << "] = 0; h[" << r << "] = " << acc.type.shape[r] - 1 << "LL;\n";
          continue;
        }
        const AffineExpr& row = acc.map.result(r);
        std::string lo = cat(row.offset, "LL"), hi = cat(row.offset, "LL");
        int64_t red_lo = 0, red_hi = 0;
        for (int a = 0; a < nd.num_axes(); ++a) {
          const int64_t c = row.coeffs[a];
          if (c == 0) continue;
          if (a >= d) {
            const int64_t e = nd.axes()[a].extent - 1;
            red_lo += std::min<int64_t>(0, c * e);
            red_hi += std::max<int64_t>(0, c * e);
            continue;
          }
          const std::string vlo = cat(c, "LL * lo", i, "[", a, "]"), vhi = cat(c, "LL * hi", i, "[", a, "]");
          lo += cat(" + ", c > 0 ? vlo : vhi);
          hi += cat(" + ", c > 0 ? vhi : vlo);
        }
        os_ << "      l[" << r << "] = tsl::imax(" << lo << " + " << red_lo << "LL, 0LL); h[" << r << "] = tsl::imin(" << hi
            << " + " << red_hi << "LL, " << acc.type.shape[r] - 1 << "LL); ok = ok && l[" << r << "] <= h[" << r << "];\n";
      }
      os_ << "      if (ok) tsl::unite_box<" << rank << ">(need" << j << ", olo" << j << ", ohi" << j << ", l, h);\n    }\n";
    }
  }
}

// Loads input k of node i at the domain point x (all axes); returns the variable holding it.
std::string Emitter::emit_load(int i, int k, const std::vector<std::string>& x, const std::string& ind,
                               const std::vector<std::string>& values) {
  if (auto h = hoisted_.find({i, k}); h != hoisted_.end()) return h->second;
  const TeNode& nd = node(i);
  const Access& acc = nd.inputs()[k];
  const TensorId t = g_.node_inputs(plan_.nodes[i].node)[k];
  const DType dt = acc.type.dtype;
  const int rank = acc.type.rank();
  const std::string v = fresh("in");
  std::vector<std::string> idx(rank);
  std::vector<int64_t> extents = nd.extents();
  bool checked = false;
  for (int r = 0; r < rank; ++r) {
    idx[r] = fresh("i");
    if (r == acc.gather_dim) {
      os_ << ind << "long long " << idx[r] << " = static_cast<long long>(" << values[acc.gather_index_input] << ");\n";
      os_ << ind << "if (" << idx[r] << " < 0) " << idx[r] << " += " << acc.type.shape[r] << "LL;\n";
      os_ << ind << "if (" << idx[r] << " < 0 || " << idx[r] << " >= " << acc.type.shape[r]
          << "LL) { tsl::raise_status(tsl_status, tsl::kGatherOutOfRange); " << idx[r] << " = 0; }\n";
      continue;
    }
    const AffineExpr& row = acc.map.result(r);
    os_ << ind << "const long long " << idx[r] << " = " << affine_text(row, x) << ";\n";
    if (row.min_over(extents) < 0 || row.max_over(extents) >= acc.type.shape[r]) checked = true;
  }
  if (g_.tensor(t).type.num_elements() == 0) checked = true;
  std::string inside = "true";
  if (checked) {
    inside.clear();
    for (int r = 0; r < rank; ++r) {
      if (r == acc.gather_dim) continue;
      inside += cat(inside.empty() ? "" : " && ", idx[r], " >= 0 && ", idx[r], " < ", acc.type.shape[r], "LL");
    }
    if (inside.empty()) inside = "true";
  }
  os_ << ind << compute_type(dt) << " " << v << " = " << literal(dt, acc.pad_value) << ";\n";
  os_ << ind << "if (" << inside << ") {\n";
  const std::string in2 = ind + "  ";
  const int j = plan_.position(g_.producer(t));
  // The producer's domain point for an in-group read (through the reshape when there is one).
  auto domain_point = [&](int jj) {
    std::vector<std::string> p;
    const TeNode& prod = node(jj);
    if (!plan_.nodes[jj].reshaped) return idx;
    const std::vector<int64_t> strides = row_major_strides(acc.type.shape);
    const std::string lin = fresh("lin");
    os_ << in2 << "long long " << lin << " = 0";
    for (int r = 0; r < rank; ++r) os_ << " + " << idx[r] << " * " << strides[r] << "LL";
    os_ << ";\n";
    p.assign(prod.num_spatial(), "");
    for (int a = prod.num_spatial() - 1; a >= 0; --a) {
      p[a] = fresh("d");
      os_ << in2 << "const long long " << p[a] << " = " << lin << " % " << prod.axes()[a].extent << "LL; " << lin
          << " /= " << prod.axes()[a].extent << "LL;\n";
    }
    return p;
  };
  if (j < 0) {
    const std::vector<int64_t> strides = row_major_strides(acc.type.shape);
    std::string off = "0LL";
    for (int r = 0; r < rank; ++r) off += cat(" + ", idx[r], " * ", strides[r], "LL");
    os_ << in2 << v << " = " << from_storage(dt, cat("g_in", input_param(t), "[", off, "]")) << ";\n";
  } else if (plan_.nodes[j].role == NodeRole::inlined) {
    const std::vector<std::string> p = domain_point(j);
    std::string args;
    for (size_t a = 0; a < p.size(); ++a) args += cat(a ? ", " : "", p[a]);
    os_ << in2 << v << " = val" << j << "(" << args << ");\n";
  } else {
    const std::vector<std::string> p = domain_point(j);
    std::string off = "0LL";
    for (size_t a = 0; a < p.size(); ++a) off = cat("(", off, ") * ext", j, "_", a, " + (", p[a], " - lo", j, "[", a, "])");
    os_ << in2 << v << " = " << from_storage(dt, cat("buf", j, "[", off, "]")) << ";\n";
  }
  os_ << ind << "}\n";
  return v;
}

std::string Emitter::emit_expr(const Expr& e, const std::vector<std::string>& inputs, const std::vector<std::string>& x,
                               std::map<const ExprNode*, std::string>& memo, const std::string& ind) {
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  const DType dt = e.dtype();
  std::string value;
  switch (e.op()) {
    case ExprOp::input:
      if (wide_ && dt == DType::f32) {  // promoted once, so that every operation on it is f64
        const std::string w = fresh("w");
        os_ << ind << "const double " << w << " = " << inputs[e.index()] << ";\n";
        return memo[e.get()] = w;
      }
      return memo[e.get()] = inputs[e.index()];
    case ExprOp::constant:
      return memo[e.get()] = wide_ && dt == DType::f32 ? float_literal(e.value(), "double") : literal(dt, e.value());
    case ExprOp::axis_index: return memo[e.get()] = x[e.index()];
    default: break;
  }
  std::vector<std::string> ops;
  for (const Expr& o : e.operands()) ops.push_back(emit_expr(o, inputs, x, memo, ind));
  const DType odt = e.operands()[0].dtype();
  const bool integral = is_integer(odt);
  const std::string ct = ctype(odt);
  const std::string& a = ops[0];
  const std::string b = ops.size() > 1 ? ops[1] : "";
  // An f16/bf16 expression is computed in f32 and rounded to 11 (8) significant bits when stored:
  // exp and sigmoid take the approximate forms (prelude.cuh), whose error is far below that.
  const bool half = (dt == DType::f16 || dt == DType::bf16) && ct == "float";
  auto fn = [&](const char* f) { return cat("tsl::", f, "(", a, ")"); };
  auto fn2 = [&](const char* f) { return cat("tsl::", f, "(", a, ", ", b, ")"); };
  switch (e.op()) {
    case ExprOp::neg: value = integral ? wrap_int(odt, cat("tsl::i_neg(", a, ")")) : cat("-", a); break;
    case ExprOp::abs: value = integral ? wrap_int(odt, cat("(", a, " < 0 ? tsl::i_neg(", a, ") : ", a, ")")) : fn("m_abs"); break;
    case ExprOp::exp: value = half ? fn("m_exp_h") : fn("m_exp"); break;
    case ExprOp::log: value = fn("m_log"); break;
    case ExprOp::sqrt: value = fn("m_sqrt"); break;
    case ExprOp::rsqrt: value = cat(ct, "(1) / tsl::m_sqrt(", a, ")"); break;
    case ExprOp::reciprocal:
      value = integral ? cat("(", a, " == 1 ? 1LL : (", a, " == -1 ? -1LL : 0LL))") : cat(ct, "(1) / ", a);
      break;
    case ExprOp::tanh: value = fn("m_tanh"); break;
    case ExprOp::erf: value = fn("m_erf"); break;
    case ExprOp::sigmoid: value = half ? fn("m_sigmoid_h") : fn("m_sigmoid"); break;
    case ExprOp::sin: value = fn("m_sin"); break;
    case ExprOp::cos: value = fn("m_cos"); break;
    case ExprOp::tan: value = fn("m_tan"); break;
    case ExprOp::asin: value = fn("m_asin"); break;
    case ExprOp::acos: value = fn("m_acos"); break;
    case ExprOp::atan: value = fn("m_atan"); break;
    case ExprOp::sinh: value = fn("m_sinh"); break;
    case ExprOp::cosh: value = fn("m_cosh"); break;
    case ExprOp::asinh: value = fn("m_asinh"); break;
    case ExprOp::acosh: value = fn("m_acosh"); break;
    case ExprOp::atanh: value = fn("m_atanh"); break;
    case ExprOp::floor: value = fn("m_floor"); break;
    case ExprOp::ceil: value = fn("m_ceil"); break;
    case ExprOp::round: value = fn("m_round"); break;
    case ExprOp::sign: value = fn("m_sign"); break;
    case ExprOp::logical_not: value = cat("!", a); break;
    case ExprOp::isnan: value = fn("m_isnan"); break;
    case ExprOp::isinf: value = fn("m_isinf"); break;
    case ExprOp::add: value = integral ? wrap_int(odt, fn2("i_add")) : cat(a, " + ", b); break;
    case ExprOp::sub: value = integral ? wrap_int(odt, fn2("i_sub")) : cat(a, " - ", b); break;
    case ExprOp::mul: value = integral ? wrap_int(odt, fn2("i_mul")) : cat(a, " * ", b); break;
    case ExprOp::div: value = integral ? wrap_int(odt, fn2("i_div")) : cat(a, " / ", b); break;
    case ExprOp::mod: value = integral ? wrap_int(odt, fn2("i_mod")) : fn2("m_mod"); break;
    case ExprOp::fmod: value = integral ? wrap_int(odt, fn2("i_fmod")) : fn2("m_fmod"); break;
    case ExprOp::pow:
      value = integral ? cat("tsl::double_to_int(tsl::m_pow(static_cast<double>(", a, "), static_cast<double>(", b, ")), ",
                             int_bits(odt), ", ", is_signed(odt) ? "true" : "false", ")")
                       : fn2("m_pow");
      break;
    case ExprOp::min: value = fn2("m_min"); break;
    case ExprOp::max: value = fn2("m_max"); break;
    case ExprOp::eq: value = cat(a, " == ", b); break;
    case ExprOp::ne: value = cat(a, " != ", b); break;
    case ExprOp::lt: value = cat(a, " < ", b); break;
    case ExprOp::le: value = cat(a, " <= ", b); break;
    case ExprOp::gt: value = cat(a, " > ", b); break;
    case ExprOp::ge: value = cat(a, " >= ", b); break;
    case ExprOp::logical_and: value = cat(a, " && ", b); break;
    case ExprOp::logical_or: value = cat(a, " || ", b); break;
    case ExprOp::logical_xor: value = cat(a, " != ", b); break;
    case ExprOp::select: value = cat(a, " ? ", b, " : ", ops[2]); break;
    case ExprOp::cast:
      if (is_float(dt)) value = round_to_dtype(dt, cat("static_cast<", compute_type(dt), ">(", a, ")"));
      else if (dt == DType::boolean) value = cat("(", a, " != 0)");
      else if (is_float(odt))
        value = cat("tsl::double_to_int(static_cast<double>(", a, "), ", int_bits(dt), ", ", is_signed(dt) ? "true" : "false", ")");
      else value = wrap_int(dt, cat("static_cast<long long>(", a, ")"));
      break;
    default: TESSEL_ASSERT(false, "emit_expr: ", expr_op_name(e.op()));
  }
  const std::string t = fresh("t");
  os_ << ind << "const " << ctype(dt) << " " << t << " = " << value << ";\n";
  return memo[e.get()] = t;
}

// Loads, at the current scope, every read of node i from device memory whose index does not
// depend on the point (a scalar such as attention's scale, in range) and makes emit_load use it.
void Emitter::hoist_invariant_reads(int i) {
  const TeNode& nd = node(i);
  for (int k = 0; k < static_cast<int>(nd.inputs().size()); ++k) {
    const Access& acc = nd.inputs()[k];
    const TensorId t = g_.node_inputs(plan_.nodes[i].node)[k];
    if (acc.is_gather() || plan_.position(g_.producer(t)) >= 0 || acc.type.num_elements() == 0) continue;
    const std::vector<int64_t> strides = row_major_strides(acc.type.shape);
    int64_t off = 0;
    bool invariant = true;
    for (int r = 0; r < acc.type.rank() && invariant; ++r) {
      const AffineExpr& row = acc.map.result(r);
      invariant = std::all_of(row.coeffs.begin(), row.coeffs.end(), [](int64_t c) { return c == 0; }) && row.offset >= 0 &&
                  row.offset < acc.type.shape[r];
      off += row.offset * strides[r];
    }
    if (!invariant) continue;
    const std::string v = fresh("tsl_hoisted");
    os_ << "  const " << compute_type(acc.type.dtype) << " " << v << " = "
        << from_storage(acc.type.dtype, cat("g_in", input_param(t), "[", off, "LL]")) << ";  // " << g_.tensor(t).name
        << ", the same element at every point\n";
    hoisted_[{i, k}] = v;
  }
}

// Step 4: the value of node i at a point of its spatial domain (val<i>), and for a reduction
// the partial over the reduction points lane, lane + lanes, ... (part<i>).
void Emitter::emit_value_function(int i) {
  const TeNode& nd = node(i);
  const int na = nd.num_axes(), d = ns(i);
  const DType dt = nd.output().dtype;
  std::vector<std::string> x(na);
  for (int a = 0; a < na; ++a) x[a] = cat("x", a);
  std::string params;
  for (int a = 0; a < d; ++a) params += cat(a ? ", " : "", "long long x", a);
  std::vector<int> order;  // gather index inputs before the gathers
  for (size_t k = 0; k < nd.inputs().size(); ++k)
    if (!nd.inputs()[k].is_gather()) order.push_back(static_cast<int>(k));
  for (size_t k = 0; k < nd.inputs().size(); ++k)
    if (nd.inputs()[k].is_gather()) order.push_back(static_cast<int>(k));
  auto body = [&](const std::string& ind) {
    std::vector<std::string> values(nd.inputs().size());
    for (int k : order) values[k] = emit_load(i, k, x, ind, values);
    std::map<const ExprNode*, std::string> memo;
    return emit_expr(nd.body(), values, x, memo, ind);
  };
  os_ << "    // " << nd.name() << ": " << print_expr(nd.body(), nd.axis_names()) << "\n";
  if (nd.num_reduction() == 0) {
    os_ << "    auto val" << i << " = [&](" << params << ") -> " << compute_type(dt) << " {\n";
    const std::string v = body("      ");
    os_ << "      return " << round_to_dtype(dt, v) << ";\n    };\n";
    return;
  }
  const std::string at = acc_type(dt);
  const std::string comb = combiner_fn(nd.combiner());
  os_ << "    auto part" << i << " = [&](" << params << (d ? ", " : "") << "unsigned lane, unsigned lanes) -> " << at << " {\n";
  os_ << "      " << at << " acc = " << literal(dt, nd.init(), true) << ";\n";
  int64_t r_total = 1;
  for (int a = d; a < na; ++a) r_total *= nd.axes()[a].extent;
  const Wide wide(*this);
  if (plan_.nodes[i].lanes == 1) {
    // Serial: nested loops over the reduction axes (lane = 0, lanes = 1 here).
    os_ << "      (void)lane; (void)lanes;\n";
    std::string ind = "      ";
    for (int a = d; a < na; ++a) {
      os_ << ind << "for (long long x" << a << " = 0; x" << a << " < " << nd.axes()[a].extent << "LL; ++x" << a << ") {\n";
      ind += "  ";
    }
    const std::string v = body(ind);
    os_ << ind << "acc = " << comb << "(acc, static_cast<" << at << ">(" << v << "));\n";
    for (int a = d; a < na; ++a) {
      ind.resize(ind.size() - 2);
      os_ << ind << "}\n";
    }
  } else {
    os_ << "      for (long long r = lane; r < " << r_total << "LL; r += lanes) {\n";
    os_ << "        long long rr = r;\n";
    for (int a = na - 1; a >= d; --a)
      os_ << "        const long long x" << a << " = rr % " << nd.axes()[a].extent << "LL; rr /= " << nd.axes()[a].extent
          << "LL;\n";
    const std::string v = body("        ");
    os_ << "        acc = " << comb << "(acc, static_cast<" << at << ">(" << v << "));\n      }\n";
  }
  os_ << "      return acc;\n    };\n";
  std::string args;
  for (int a = 0; a < d; ++a) args += cat("x", a, ", ");
  os_ << "    auto val" << i << " = [&](" << params << ") -> " << compute_type(dt) << " { return "
      << round_to_dtype(dt, cat("part", i, "(", args, "0u, 1u)")) << "; };\n";
}

// Step 5: threads stride over the node's box; store to the pool (staged) and device memory.
void Emitter::emit_step(int i) {
  const NodePlan& p = plan_.nodes[i];
  const TeNode& nd = node(i);
  const int d = ns(i);
  const DType dt = nd.output().dtype;
  const std::string it = index_type(i);
  const int lanes = p.lanes;
  os_ << "    {  // " << (p.role == NodeRole::sink ? "sink " : "stage ") << nd.name() << "\n";
  os_ << "      const " << it << " tsl_n = static_cast<" << it << ">(vol" << i << ");\n";
  auto decode = [&](const std::string& q, const std::string& ind) {
    os_ << ind << it << " tsl_q = " << q << ";\n";
    for (int a = d - 1; a >= 0; --a) {
      os_ << ind << "const long long x" << a << " = lo" << i << "[" << a << "] + static_cast<long long>(tsl_q % static_cast<"
          << it << ">(ext" << i << "_" << a << "));";
      if (a > 0) os_ << " tsl_q /= static_cast<" << it << ">(ext" << i << "_" << a << ");";
      os_ << "\n";
    }
    if (d == 0) os_ << ind << "(void)tsl_q;\n";
  };
  auto store = [&](const std::string& v, const std::string& ind, const std::string& pos) {
    os_ << ind << "const " << storage_type(dt) << " tsl_s = " << to_storage(dt, v) << ";\n";
    if (p.role == NodeRole::staged) os_ << ind << "buf" << i << "[" << pos << "] = tsl_s;\n";
    if (p.writes_global) {
      std::vector<int64_t> ext;
      for (int a = 0; a < d; ++a) ext.push_back(nd.axes()[a].extent);
      const std::vector<int64_t> strides = row_major_strides(ext);
      std::string off = "0LL";
      for (int a = 0; a < d; ++a) off += cat(" + x", a, " * ", strides[a], "LL");
      os_ << ind << "g_out" << output_param(g_.node_output(p.node)) << "[" << off << "] = tsl_s;\n";
    }
  };
  std::string args;
  for (int a = 0; a < d; ++a) args += cat(a ? ", " : "", "x", a);
  if (lanes == 1) {
    os_ << "      for (" << it << " tsl_p = threadIdx.x; tsl_p < tsl_n; tsl_p += " << plan_.threads << "u) {\n";
    decode("tsl_p", "        ");
    os_ << "        const " << compute_type(dt) << " tsl_v = val" << i << "(" << args << ");\n";
    store("tsl_v", "        ", "tsl_p");
    os_ << "      }\n";
  } else {
    const std::string at = acc_type(dt);
    const std::string comb = combiner_fn(nd.combiner());
    os_ << "      const " << it << " tsl_work = tsl_n * " << lanes << "u;\n";
    os_ << "      for (" << it << " tsl_base = 0; tsl_base < tsl_work; tsl_base += " << plan_.threads << "u) {\n";
    os_ << "        const " << it << " tsl_w = tsl_base + threadIdx.x;\n";
    os_ << "        const bool tsl_active = tsl_w < tsl_work;\n";
    os_ << "        const " << it << " tsl_p = tsl_w / " << lanes << "u;\n";
    os_ << "        const unsigned tsl_lane = static_cast<unsigned>(tsl_w % " << lanes << "u);\n";
    os_ << "        " << at << " tsl_acc = " << literal(dt, nd.init(), true) << ";\n";
    os_ << "        if (tsl_active) {\n";
    decode("tsl_p", "          ");
    os_ << "          tsl_acc = part" << i << "(" << args << (d ? ", " : "") << "tsl_lane, " << lanes << "u);\n";
    os_ << "        }\n";
    const std::string f = cat("[](", at, " a, ", at, " b) { return ", comb, "(a, b); }");
    const int within = std::min(lanes, plan_.warp);
    os_ << "        tsl_acc = tsl::segment_combine(tsl_acc, " << within << "u, TSL_WARP_MASK, " << f << ");\n";
    if (lanes > plan_.warp) {
      const int warps = lanes / plan_.warp;
      os_ << "        " << at << "* tsl_red_v = reinterpret_cast<" << at << "*>(tsl_red);\n";
      os_ << "        if (threadIdx.x % " << plan_.warp << "u == 0) tsl_red_v[threadIdx.x / " << plan_.warp << "u] = tsl_acc;\n";
      os_ << "        __syncthreads();\n";
      os_ << "        {\n          const unsigned first = (threadIdx.x / " << lanes << "u) * " << warps << "u;\n";
      os_ << "          tsl_acc = tsl_red_v[first];\n";
      os_ << "          for (unsigned w = 1; w < " << warps << "u; ++w) tsl_acc = " << comb << "(tsl_acc, tsl_red_v[first + w]);\n";
      os_ << "        }\n        __syncthreads();\n";
    }
    os_ << "        if (tsl_active && tsl_lane == 0) {\n";
    decode("tsl_p", "          ");
    os_ << "          const " << compute_type(dt) << " tsl_v = " << round_to_dtype(dt, "tsl_acc") << ";\n";
    store("tsl_v", "          ", "tsl_p");
    os_ << "        }\n      }\n";
  }
  os_ << "    }\n";
}

// Parameters: inputs, outputs, the global scratch and the status word (the runtime's order).
void Emitter::emit_signature(const std::string& name, int min_blocks_per_sm) {
  os_ << "extern \"C\" __global__ void ";
  if (plan_.cluster_blocks > 1) os_ << "__cluster_dims__(" << plan_.cluster_blocks << ", 1, 1) ";
  os_ << "__launch_bounds__(" << plan_.threads;
  if (min_blocks_per_sm > 0) os_ << ", " << min_blocks_per_sm;
  os_ << ") " << name << "(\n";
  for (size_t k = 0; k < plan_.inputs.size(); ++k) {
    const TensorInfo& ti = g_.tensor(plan_.inputs[k]);
    os_ << "    const " << storage_type(ti.type.dtype) << "* __restrict__ g_in" << k << ",  // " << ti.name << " "
        << ti.type.print() << "\n";
  }
  for (size_t k = 0; k < plan_.outputs.size(); ++k) {
    const TensorInfo& ti = g_.tensor(plan_.outputs[k]);
    os_ << "    " << storage_type(ti.type.dtype) << "* __restrict__ g_out" << k << ",  // " << ti.name << " "
        << ti.type.print() << "\n";
  }
  os_ << "    unsigned char* __restrict__ tsl_scratch, unsigned int* __restrict__ tsl_status";
  for (size_t k = 0; k < plan_.tensor_maps.size(); ++k)
    os_ << ",\n    // the tensor map of " << g_.tensor(plan_.tensor_maps[k].tensor).name
        << "\n    const __grid_constant__ tsl::wg::TensorMap tsl_map" << k;
  os_ << ") {\n";
}

std::string Emitter::kernel(const std::string& name) {
  const int n = static_cast<int>(plan_.nodes.size());
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  std::istringstream plan_text(print_group_plan(g_, plan_));
  for (std::string line; std::getline(plan_text, line);) os_ << "//   " << line << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  os_ << "  extern __shared__ __align__(16) unsigned char tsl_smem[];\n";
  if (plan_.reduce_scratch_bytes > 0)
    os_ << "  __shared__ unsigned long long tsl_red[" << plan_.reduce_scratch_bytes / 8 << "];\n";
  if (plan_.pool_in_smem) os_ << "  unsigned char* const tsl_pool = tsl_smem; (void)tsl_scratch;\n";
  else
    os_ << "  unsigned char* const tsl_pool = tsl_scratch + static_cast<unsigned long long>(blockIdx.x) * " << plan_.pool_bytes
        << "ULL;\n";
  os_ << "  (void)tsl_pool; (void)tsl_status;\n";
  os_ << "  for (long long tsl_tile = blockIdx.x; tsl_tile < " << plan_.num_tiles << "LL; tsl_tile += gridDim.x) {\n";
  emit_boxes();
  for (int i = 0; i < n; ++i)
    if (plan_.nodes[i].role == NodeRole::staged)
      os_ << "    " << storage_type(node(i).output().dtype) << "* const buf" << i << " = reinterpret_cast<"
          << storage_type(node(i).output().dtype) << "*>(tsl_pool + " << plan_.nodes[i].pool_offset << ");\n";
  for (int i = 0; i < n; ++i) emit_value_function(i);
  bool staged_any = false;
  for (int i = 0; i < n; ++i) {
    if (plan_.nodes[i].role == NodeRole::inlined) continue;
    emit_step(i);
    if (plan_.nodes[i].role == NodeRole::staged) {
      os_ << "    __syncthreads();\n";
      staged_any = true;
    }
  }
  // The next tile of this block overwrites the pool: wait for every reader of this one.
  if (staged_any && plan_.blocks < plan_.num_tiles) os_ << "    __syncthreads();\n";
  os_ << "  }\n}\n";
  return os_.str();
}

// Splits the row-major flat index held in the variable `var` (which it consumes) into one constant
// per axis, `prefix` + axis number, extents outermost first: innermost first by % and /, the
// outermost takes the rest (the caller keeps the index below the product of the extents).
void Emitter::emit_unflatten(const std::string& ind, const std::string& type, const std::string& var,
                             const std::vector<int>& axes, const std::vector<int64_t>& extents, const std::string& prefix) {
  const std::string suffix = type == "int" ? "" : "LL";
  for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
    os_ << ind << "const " << type << " " << prefix << axes[i] << " = " << var;
    if (i > 0) os_ << " % " << extents[i] << suffix << "; " << var << " /= " << extents[i] << suffix;
    os_ << ";\n";
  }
}

// The copier of an implicit GEMM's A tiles (BlockGemm::run_with): thread t owns the 16-byte
// chunks t, t + threads, ... of a block_m x block_k tile, i.e. one k column (8 elements of the
// innermost reduction axis, the channels of one tap) and rows kRowStep apart. The rows' parts
// of every index (the output pixel) are computed once; per tile the column's k is split into the
// reduction axes, and each chunk is checked against the input's extents along the dimensions
// that padding can leave: a chunk outside is zero-filled (cp.async reads 0 bytes), which is the
// convolution's zero padding.
void Emitter::emit_gather_copy(const ContractionPlan& c) {
  std::vector<int> checked;
  for (int d = 0; d < static_cast<int>(c.a_gather.size()); ++d)
    if (c.a_gather[d].check) checked.push_back(d);
  auto axis = [](int a) { return cat("x", a); };
  os_ << "// A of the implicit GEMM: '" << g_.tensor(c.a.tensor).name << "' gathered, 16-byte chunks of the innermost k axis.\n";
  os_ << "struct TslGatherA {\n";
  os_ << "  static constexpr int kRows = " << c.block_m << ", kCols = " << c.block_k << ", kThreads = TslGemm::kThreads;\n";
  os_ << "  static constexpr int kChunksPerRow = kCols / tsl::mma::kChunkElems, kRowStep = kThreads / kChunksPerRow;\n";
  os_ << "  static constexpr int kChunks = kRows * kChunksPerRow, kIters = (kChunks + kThreads - 1) / kThreads;\n";
  os_ << "  static_assert(kThreads % kChunksPerRow == 0, \"a thread's chunks share one column\");\n";
  os_ << "  const unsigned short* base;\n  long long off[kIters];  // the row's part of the offset\n";
  for (int d : checked) os_ << "  long long idx" << d << "[kIters];  // the row's part of index " << d << "\n";
  os_ << "  bool ok[kIters];\n  int k;  // this thread's column of the next tile\n  unsigned dst;\n";
  os_ << "  __device__ __forceinline__ TslGatherA(const unsigned short* g, int m0) : base(g) {\n";
  os_ << "    const int t = static_cast<int>(threadIdx.x);\n";
  os_ << "    k = (t % kChunksPerRow) * tsl::mma::kChunkElems;\n";
  os_ << "    dst = static_cast<unsigned>(((t / kChunksPerRow) * (kCols + tsl::mma::kPadElems) + k) * 2);\n";
  os_ << "#pragma unroll\n    for (int i = 0; i < kIters; ++i) {\n";
  os_ << "      const long long m = m0 + t / kChunksPerRow + i * kRowStep;\n";
  os_ << "      ok[i] = (kChunks % kThreads == 0 || t + i * kThreads < kChunks) && m < " << c.m << "LL;\n";
  os_ << "      long long q = m;\n";
  emit_unflatten("      ", "long long", "q", c.m_axes, c.m_extents, "x");
  auto m_part = [&](const GatherDim& g) {
    std::string e = g.m_axis >= 0 ? cat(g.m_coeff, "LL * ", axis(g.m_axis)) : std::string();
    if (g.offset != 0 || e.empty()) e += cat(e.empty() ? "" : " + ", "(", g.offset, "LL)");
    return e;
  };
  std::string off = "0LL";
  for (const GatherDim& g : c.a_gather)
    if ((g.m_axis >= 0 || g.offset != 0) && g.stride != 0) off += cat(" + (", m_part(g), ") * ", g.stride, "LL");
  os_ << "      off[i] = " << off << ";\n";
  for (int d : checked) os_ << "      idx" << d << "[i] = " << m_part(c.a_gather[d]) << ";\n";
  os_ << "    }\n  }\n";
  os_ << "  __device__ __forceinline__ void copy(unsigned stage) const {\n";
  os_ << "    int q = k;\n";
  emit_unflatten("    ", "int", "q", c.k_axes, c.k_extents, "x");
  std::string koff = "0LL";
  for (const GatherDim& g : c.a_gather)
    if (g.k_axis >= 0) koff += cat(" + ", g.k_coeff * g.stride, "LL * ", axis(g.k_axis));
  os_ << "    const long long koff = " << koff << ";\n";
  os_ << "    const bool kok = " << (c.k % c.block_k == 0 ? std::string("true") : cat("k < ", c.k)) << ";\n";
  os_ << "#pragma unroll\n    for (int i = 0; i < kIters; ++i) {\n";
  os_ << "      bool v = ok[i] && kok;\n";
  for (int d : checked) {
    const GatherDim& g = c.a_gather[d];
    const std::string idx = g.k_axis >= 0 ? cat("idx", d, "[i] + ", g.k_coeff, "LL * ", axis(g.k_axis)) : cat("idx", d, "[i]");
    os_ << "      v = v && static_cast<unsigned long long>(" << idx << ") < " << g.extent << "ULL;\n";
  }
  os_ << "      tsl::mma::cp_async_16(stage + dst + static_cast<unsigned>(i * kRowStep * (kCols + tsl::mma::kPadElems) * 2), "
         "v ? base + off[i] + koff : base, v ? 16 : 0);\n";
  os_ << "    }\n  }\n";
  os_ << "  __device__ __forceinline__ void advance() { k += kCols; }\n};\n";
}

std::string Emitter::mma_kernel(const std::string& name, const ContractionPlan& c) {
  const int n = static_cast<int>(plan_.nodes.size());
  const int s = n - 1;
  const int cpos = plan_.position(c.node);
  const TeNode& sink = node(s);
  const int d = ns(s);
  const DType sdt = sink.output().dtype;
  auto is_operand = [&](int i) {
    return std::find(c.operand_nodes.begin(), c.operand_nodes.end(), plan_.nodes[i].node) != c.operand_nodes.end();
  };
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  std::istringstream plan_text(print_group_plan(g_, plan_));
  for (std::string line; std::getline(plan_text, line);) os_ << "//   " << line << "\n";
  os_ << "//   " << print_contraction_plan(g_, c) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  const char* bf16 = c.dtype == DType::bf16 ? "true" : "false";
  const std::string gemm_type =
      c.warpgroup ? cat("tsl::wg::WarpgroupGemm<", c.block_n, ", ", c.stages, ", ", c.b.k_contiguous ? "true" : "false", ", ", bf16,
                        ", ", c.k, ">")
                  : cat("tsl::mma::BlockGemm<", c.block_m, ", ", c.block_n, ", ", c.block_k, ", ", c.warps_m, ", ", c.warps_n, ", ",
                        c.stages, ", ", c.a.k_contiguous ? "true" : "false", ", ", c.b.k_contiguous ? "true" : "false", ", ", bf16,
                        ", ", c.m, ", ", c.n, ", ", c.k, ", ", c.a.ld, "LL, ", c.b.ld, "LL>");
  os_ << "typedef " << gemm_type << " TslGemm;\n";
  if (c.warpgroup) {
    // The host planned the launch and the tensor maps' boxes with these (contraction_plan.cpp).
    os_ << "static_assert(TslGemm::kThreads == " << plan_.threads << " && TslGemm::BM == " << c.block_m
        << " && TslGemm::BK == " << c.block_k << " && TslGemm::kSmemBytes == " << c.smem_bytes
        << ", \"the wgmma plan and device/wgmma.cuh disagree\");\n";
  }
  if (c.split_k > 1)
    os_ << "static_assert(TslGemm::kReduceBytes <= " << c.smem_bytes
        << ", \"the partial sums of a split K must fit the kernel's shared memory\");\n";
  if (c.implicit) emit_gather_copy(c);
  // One block per SM is enough to hold the pipeline; the register budget is the compiler's.
  emit_signature(name, 1);
  os_ << "  extern __shared__ __align__(16) unsigned char tsl_smem[];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";

  // 2. The block's tile.
  const int64_t tiles = c.tiles_m * c.tiles_n, width = c.raster_group * c.tiles_n;
  os_ << "  // the block's tile: a batch point, then groups of " << c.raster_group << " block rows, column by column\n";
  if (c.split_k > 1) {
    // Split K: the cluster's blocks share the tile; rank r sums K tiles [r T / split, (r + 1) T / split).
    const int64_t ktiles = (c.k + c.block_k - 1) / c.block_k;
    os_ << "  // K split over the cluster: " << c.split_k << " blocks per tile, " << ktiles << " K tiles\n";
    os_ << "  long long tsl_t = blockIdx.x / " << c.split_k << ";\n";
    os_ << "  const int tsl_part = static_cast<int>(TslGemm::cluster_rank());\n";
    os_ << "  const int tsl_kt0 = tsl_part * " << ktiles << " / " << c.split_k << ", tsl_kt1 = (tsl_part + 1) * " << ktiles
        << " / " << c.split_k << ";\n";
  } else {
    os_ << "  long long tsl_t = blockIdx.x;\n";
  }
  if (!c.batch_axes.empty()) os_ << "  long long tsl_batch = tsl_t / " << tiles << "LL; tsl_t %= " << tiles << "LL;\n";
  os_ << "  const long long tsl_first = (tsl_t / " << width << "LL) * " << c.raster_group << "LL;\n";
  os_ << "  const long long tsl_rows = tsl::imin(" << c.tiles_m << "LL - tsl_first, " << c.raster_group << "LL);\n";
  os_ << "  const int tsl_m0 = static_cast<int>((tsl_first + (tsl_t % " << width << "LL) % tsl_rows) * " << c.block_m << "LL);\n";
  os_ << "  const int tsl_n0 = static_cast<int>(((tsl_t % " << width << "LL) / tsl_rows) * " << c.block_n << "LL);\n";
  emit_batch_point(c.batch_axes, c.batch_extents);
  auto batch_offset = [&](const std::vector<int64_t>& strides) { return batch_offset_expr(c.batch_axes, strides); };
  const char* elem = "unsigned short";
  if (!c.warpgroup) {
    os_ << "  const " << elem << "* const tsl_a = g_in" << input_param(c.a.tensor) << " + (" << batch_offset(c.a.batch_strides)
        << ");  // A: " << g_.tensor(c.a.tensor).name << "\n";
    os_ << "  const " << elem << "* const tsl_b = g_in" << input_param(c.b.tensor) << " + (" << batch_offset(c.b.batch_strides)
        << ");  // B: " << g_.tensor(c.b.tensor).name << "\n";
  }

  // 3. The main loop (the wgmma kernel runs it with the epilogue, below).
  os_ << "  TslGemm tsl_gemm;\n";
  if (c.warpgroup) {
    // A and B come through tsl_map0 and tsl_map1.
  } else if (c.implicit) {
    os_ << "  TslGatherA tsl_copy_a(tsl_a, tsl_m0);\n";
    os_ << "  TslGemm::CopyB tsl_copy_b(tsl_b, " << (c.b.k_contiguous ? "tsl_n0, 0" : "0, tsl_n0") << ");\n";
    os_ << "  tsl_gemm.run_with(tsl_smem, tsl_copy_a, tsl_copy_b);\n";
  } else if (c.split_k > 1) {
    os_ << "  tsl_gemm.run(tsl_smem, tsl_a, tsl_b, tsl_m0, tsl_n0, tsl_kt0, tsl_kt1 - tsl_kt0);\n";
    os_ << "  if (!tsl_gemm.reduce_cluster<" << c.split_k << ">(tsl_smem)) return;  // rank 0 holds the sums\n";
  } else {
    os_ << "  tsl_gemm.run(tsl_smem, tsl_a, tsl_b, tsl_m0, tsl_n0);\n";
  }

  // 4. The epilogue.
  std::string params;
  for (int a = 0; a < d; ++a) params += cat(a ? ", " : "", "long long x", a);
  const TeNode& cn = node(cpos);
  os_ << "  float tsl_acc = 0.0f;  // the accumulator of the point being stored\n";
  os_ << "    // " << cn.name() << ": " << print_expr(cn.body(), cn.axis_names()) << ", summed on the tensor cores\n";
  os_ << "    auto val" << cpos << " = [&](" << params << ") -> float { return " << round_to_dtype(cn.output().dtype, "tsl_acc")
      << "; };\n";
  for (int i = 0; i < n; ++i)
    if (i != cpos && !is_operand(i)) emit_value_function(i);
  std::vector<int64_t> ext;
  for (int a = 0; a < d; ++a) ext.push_back(sink.axes()[a].extent);
  const std::vector<int64_t> strides = row_major_strides(ext);
  std::string off = "0LL", args;
  for (int a = 0; a < d; ++a) {
    const std::string x = a == c.m_axis && !c.flat_m() ? "tsl_xm" : a == c.n_axis ? "tsl_xn" : cat("tsl_x", a);
    if (a != c.n_axis) off += cat(" + ", x, " * ", strides[a], "LL");
    args += cat(a ? ", " : "", x);
  }
  // A flattened m (an implicit GEMM's, or batch axes folded into m) is its m axes row-major,
  // which is also the row-major order of the sink's domain (n last): the offset is m * n + n.
  if (c.flat_m()) off = cat("tsl_xm * ", c.n, "LL");
  const std::string args1 = args.substr(0, args.rfind("tsl_xn")) + "tsl_xn + 1";
  if (c.warpgroup)
    os_ << "  tsl_gemm.run(tsl_smem, &tsl_map0, &tsl_map1, tsl_m0, tsl_n0, [&](int tsl_dm, int tsl_dn, float tsl_v0, float tsl_v1) {\n";
  else
    os_ << "  tsl_gemm.for_each_pair([&](int tsl_dm, int tsl_dn, float tsl_v0, float tsl_v1) {\n";
  os_ << "    const long long tsl_xm = tsl_m0 + tsl_dm, tsl_xn = tsl_n0 + tsl_dn;\n";
  os_ << "    if (tsl_xm >= " << c.m << "LL) return;\n";
  if (c.flat_m()) {
    os_ << "    long long tsl_q = tsl_xm;\n";
    emit_unflatten("    ", "long long", "tsl_q", c.m_axes, c.m_extents, "tsl_x");
  }
  os_ << "    const long long tsl_off = " << off << " + tsl_xn;\n";
  const bool packed = dtype_bytes(sdt) == 2 && c.n % 2 == 0;
  if (packed) {
    // n is even and so is every row's length: the pair is one aligned 32-bit store.
    os_ << "    if (tsl_xn < " << c.n << "LL) {\n";
    os_ << "      tsl_acc = tsl_v0;\n      const unsigned tsl_s0 = " << to_storage(sdt, cat("val", s, "(", args, ")")) << ";\n";
    os_ << "      tsl_acc = tsl_v1;\n      const unsigned tsl_s1 = " << to_storage(sdt, cat("val", s, "(", args1, ")")) << ";\n";
    os_ << "      *reinterpret_cast<unsigned*>(g_out0 + tsl_off) = tsl_s0 | (tsl_s1 << 16);\n    }\n";
  } else {
    os_ << "    if (tsl_xn < " << c.n << "LL) { tsl_acc = tsl_v0; g_out0[tsl_off] = " << to_storage(sdt, cat("val", s, "(", args, ")"))
        << "; }\n";
    os_ << "    if (tsl_xn + 1 < " << c.n << "LL) { tsl_acc = tsl_v1; g_out0[tsl_off + 1] = "
        << to_storage(sdt, cat("val", s, "(", args1, ")")) << "; }\n";
  }
  os_ << "  });\n}\n";
  return os_.str();
}

// ---- the streamed attention kernel (attention_plan.h) ---------------------------------------------

// Layout: the parameters; the block's batch point and query rows; the score function (S's value is
// the dot product the kernel passes, rounded to S's dtype; the score steps' value functions are
// the generic ones, reading their side inputs from device memory); device/flash.cuh's main loop;
// the store of O (divided by the row sums, rounded to O's dtype).
std::string Emitter::flash_kernel(const std::string& name, const AttentionPlan& a) {
  const StreamedAttention& sh = a.shape;
  const TeNode& o = g_.node(a.pattern.out);
  const int ns = o.num_spatial();
  const int spos = plan_.position(a.pattern.scores);
  const int xpos = plan_.position(a.pattern.logits());
  const DType odt = o.output().dtype;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  std::istringstream plan_text(print_group_plan(g_, plan_));
  for (std::string line; std::getline(plan_text, line);) os_ << "//   " << line << "\n";
  os_ << "//   " << print_attention_plan(g_, a) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  const char* bf16 = a.dtype == DType::bf16 ? "true" : "false";
  if (a.warpgroup)
    os_ << "typedef tsl::flash::WarpgroupAttention<" << sh.d << ", " << sh.dv << ", " << a.stages << ", " << bf16 << ", "
        << sh.queries << ", " << sh.keys << ", " << a.q_batch.size() << ", " << a.k_batch.size() << ", " << a.v_batch.size()
        << "> TslAttn;\n";
  else
    os_ << "typedef tsl::flash::StreamedAttention<" << a.rows << ", " << a.chunk << ", " << sh.d << ", " << sh.dv << ", " << a.stages
        << ", " << bf16 << ", " << sh.queries << ", " << sh.keys << ", " << a.q.ld << "LL, " << a.k.ld << "LL, " << a.v.ld
        << "LL> TslAttn;\n";
  // The host planned the launch (and the tensor maps' boxes) with these (attention_plan.cpp).
  os_ << "static_assert(TslAttn::kThreads == " << plan_.threads << " && TslAttn::kSmemBytes == " << a.smem_bytes;
  if (a.warpgroup) os_ << " && TslAttn::BR == " << a.rows << " && TslAttn::BC == " << a.chunk;
  os_ << ", \"the streamed attention plan and device/flash.cuh disagree\");\n";
  emit_signature(name, 1);
  os_ << "  extern __shared__ __align__(16) unsigned char tsl_smem[];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  os_ << "  long long tsl_batch = blockIdx.x / " << a.tiles_m << "LL;\n";
  os_ << "  const long long tsl_batch_index = tsl_batch;\n";
  os_ << "  const int tsl_m0 = static_cast<int>((blockIdx.x % " << a.tiles_m << "LL) * " << a.rows << "LL);\n";
  emit_batch_point(a.batch_axes, a.batch_extents);
  auto batch_offset = [&](const std::vector<int64_t>& strides) { return batch_offset_expr(a.batch_axes, strides); };
  if (a.warpgroup) {
    // The block's coordinates in the tensor maps' batch dimensions.
    for (const auto& [var, dims] : {std::pair<const char*, const std::vector<int>*>{"tsl_qb", &a.q_batch}, {"tsl_kb", &a.k_batch},
                                    {"tsl_vb", &a.v_batch}}) {
      os_ << "  const int " << var << "[4] = {";
      for (int b : *dims) os_ << "static_cast<int>(tsl_x" << a.batch_axes[b] << "), ";
      os_ << "0};\n";
    }
  } else {
    for (const auto& [var, op] : {std::pair<const char*, const MmaOperand*>{"tsl_q", &a.q}, {"tsl_k", &a.k}, {"tsl_v", &a.v}})
      os_ << "  const unsigned short* const " << var << " = g_in" << input_param(op->tensor) << " + ("
          << batch_offset(op->batch_strides) << ");  // " << g_.tensor(op->tensor).name << "\n";
  }
  // The score function: S's value function returns the dot product being scored.
  std::string params;
  for (int q = 0; q < ns; ++q) params += cat(q ? ", " : "", "long long x", q);
  const TeNode& sn = node(spos);
  os_ << "  float tsl_acc = 0.0f;  // the dot product of the score being computed\n";
  os_ << "    // " << sn.name() << ": " << print_expr(sn.body(), sn.axis_names()) << ", summed on the tensor cores\n";
  // On the Hopper kernel the dot product goes through an add before its rounding: a conversion
  // reading wgmma accumulator registers directly makes ptxas serialize the kernel's wgmmas (its
  // warning C7514). x + 0 is x, except that -0 becomes +0.
  os_ << "    auto val" << spos << " = [&](" << params << ") -> float { return "
      << round_to_dtype(sn.output().dtype, a.warpgroup ? "tsl_acc + 0.0f" : "tsl_acc") << "; };\n";
  for (NodeId n : a.pattern.score_epilogue) {
    hoist_invariant_reads(plan_.position(n));
    emit_value_function(plan_.position(n));
  }
  std::string args;
  for (int q = 0; q < ns - 2; ++q) args += cat("tsl_x", q, ", ");
  os_ << "  auto tsl_score = [&](float tsl_dot, int tsl_dm, int tsl_n) -> float {\n";
  // A row past the end (its block is the last, and not full) is scored as the last row, without a
  // branch per score; it is not stored.
  if (sh.queries % a.rows == 0) os_ << "    const long long tsl_xm = tsl_m0 + tsl_dm;\n";
  else
    os_ << "    const long long tsl_xm = tsl_m0 + tsl_dm < " << sh.queries << "LL ? tsl_m0 + tsl_dm : " << sh.queries - 1
        << "LL;  // a row past the end (not stored) as the last one\n";
  os_ << "    tsl_acc = tsl_dot;\n";
  os_ << "    return val" << xpos << "(" << args << "tsl_xm, static_cast<long long>(tsl_n));\n  };\n";
  // The kernel scores two adjacent keys at a time (tsl_score2): packed when the score steps allow
  // it, else tsl_score twice.
  if (const std::string why = packed_score_pair(a, spos); !why.empty()) {
    os_ << "  // scores one at a time: " << why << "\n";
    os_ << "  auto tsl_score2 = [&](float tsl_d0, float tsl_d1, int tsl_dm, int tsl_n, float& tsl_s0, float& tsl_s1) {\n";
    os_ << "    tsl_s0 = tsl_score(tsl_d0, tsl_dm, tsl_n);\n";
    os_ << "    tsl_s1 = tsl_score(tsl_d1, tsl_dm, tsl_n + 1);\n  };\n";
  }
  // O's domain is row-major (batch.., m, dv): the batch point's rows are contiguous.
  os_ << "  unsigned short* const tsl_o = g_out0 + (tsl_batch_index * " << sh.queries << "LL + tsl_m0) * " << sh.dv << "LL;\n";
  os_ << "  auto tsl_store = [&](int tsl_dm, int tsl_dn, float tsl_v0, float tsl_v1) {\n";
  os_ << "    if (tsl_m0 + tsl_dm >= " << sh.queries << ") return;\n";
  os_ << "    const unsigned tsl_s0 = " << to_storage(odt, round_to_dtype(odt, "tsl_v0")) << ";\n";
  os_ << "    const unsigned tsl_s1 = " << to_storage(odt, round_to_dtype(odt, "tsl_v1")) << ";\n";
  os_ << "    *reinterpret_cast<unsigned*>(tsl_o + static_cast<long long>(tsl_dm) * " << sh.dv
      << "LL + tsl_dn) = tsl_s0 | (tsl_s1 << 16);\n";
  os_ << "  };\n";
  os_ << "  TslAttn tsl_attn;\n";
  if (a.warpgroup) {
    os_ << "  tsl_attn.run(tsl_smem, &tsl_map0, &tsl_map1, &tsl_map2, tsl_m0, tsl_qb, tsl_kb, tsl_vb, tsl_score, tsl_score2, tsl_store);\n";
  } else {
    os_ << "  tsl_attn.run(tsl_smem, tsl_q, tsl_k, tsl_v, tsl_m0, tsl_score, tsl_score2);\n";
    os_ << "  tsl_attn.for_each_pair(tsl_store);\n";
  }
  os_ << "}\n";
  return os_.str();
}

// The score function of two horizontally adjacent scores (keys n and n + 1 of one row) in packed
// f16x2 (bf16x2) registers: S's two dot products rounded to S's dtype by one conversion, then each
// score step as one packed instruction. Exact: a step qualifies when its body is one product, sum
// or difference of the previous step's value at the same point and a scalar of the same 16-bit
// dtype (a read whose index does not depend on the point, hoisted; or a constant the dtype
// represents), so its value -- the exact f32 result of the two 16-bit operands (sums: at least as
// close), rounded once to the dtype -- is what the packed instruction rounds to nearest even.
// Per pair of scores: one conversion, one instruction per step and two widenings, where the
// scalar function rounds and widens each score once per step. Emits tsl_score2 and returns "",
// or returns why not (a mask read per point, a division, an f32 step, ...) and emits nothing.
std::string Emitter::packed_score_pair(const AttentionPlan& a, int spos) {
  const DType dt = node(spos).output().dtype;
  if (dt != DType::f16 && dt != DType::bf16) return cat("S is ", dtype_name(dt));
  const char* bf16 = dt == DType::bf16 ? "true" : "false";
  std::ostringstream decls, steps;
  int prev = spos;
  for (NodeId n : a.pattern.score_epilogue) {
    const int i = plan_.position(n);
    const TeNode& nd = node(i);
    if (nd.output().dtype != dt) return cat("score step '", nd.name(), "' is ", dtype_name(nd.output().dtype));
    const Expr& body = nd.body();
    const ExprOp op = body.op();
    if (op != ExprOp::mul && op != ExprOp::add && op != ExprOp::sub)
      return cat("score step '", nd.name(), "' is not one product, sum or difference: ", print_expr(body, nd.axis_names()));
    std::string operands[2];
    bool chained = false;
    for (int side = 0; side < 2; ++side) {
      const Expr& e = body.operands()[side];
      if (e.dtype() != dt) return cat("an operand of score step '", nd.name(), "' is ", dtype_name(e.dtype()));
      if (e.op() == ExprOp::constant) {
        if (round_to(dt, e.value()) != e.value())
          return cat("the constant ", e.value(), " of score step '", nd.name(), "' is not a ", dtype_name(dt));
        operands[side] = fresh("tsl_pk");
        const std::string v = float_literal(e.value(), "float");
        decls << "  const unsigned " << operands[side] << " = tsl::flash::pack2<" << bf16 << ">(" << v << ", " << v << ");\n";
        continue;
      }
      if (e.op() != ExprOp::input) return cat("an operand of score step '", nd.name(), "' is not a read or a constant");
      const int k = e.index();
      const Access& acc = nd.inputs()[k];
      const NodeId producer = g_.producer(g_.node_inputs(n)[k]);
      if (producer == plan_.nodes[prev].node) {
        bool identity = !acc.is_gather() && acc.map.num_results() == nd.num_spatial() && nd.num_reduction() == 0;
        for (int r = 0; identity && r < nd.num_spatial(); ++r) {
          const AffineExpr& row = acc.map.result(r);
          identity = row.offset == 0;
          for (int x = 0; identity && x < nd.num_axes(); ++x) identity = row.coeffs[x] == (x == r ? 1 : 0);
        }
        if (!identity) return cat("score step '", nd.name(), "' reads the previous step at another point");
        if (chained) return cat("score step '", nd.name(), "' reads the previous step twice");
        operands[side] = "tsl_h";
        chained = true;
        continue;
      }
      auto h = hoisted_.find({i, k});
      if (h == hoisted_.end() || acc.type.dtype != dt)
        return cat("score step '", nd.name(), "' reads '", g_.tensor(g_.node_inputs(n)[k]).name, "' per point");
      operands[side] = fresh("tsl_pk");
      decls << "  const unsigned " << operands[side] << " = tsl::flash::pack2<" << bf16 << ">(" << h->second << ", " << h->second
            << ");\n";
    }
    if (!chained) return cat("score step '", nd.name(), "' does not read the previous step");
    const char* fn = op == ExprOp::mul ? "mul2" : op == ExprOp::add ? "add2" : "sub2";
    steps << "    tsl_h = tsl::flash::" << fn << "<" << bf16 << ">(" << operands[0] << ", " << operands[1] << ");  // " << nd.name()
          << ": " << print_expr(body, nd.axis_names()) << "\n";
    prev = i;
  }
  os_ << "  // scores two at a time, in packed " << dtype_name(dt) << "x2 registers (each step rounds once, as its node)\n";
  os_ << decls.str();
  os_ << "  auto tsl_score2 = [&](float tsl_d0, float tsl_d1, int tsl_dm, int tsl_n, float& tsl_s0, float& tsl_s1) {\n";
  os_ << "    (void)tsl_dm; (void)tsl_n;\n";
  // (The add keeps ptxas from serializing the wgmmas, as in val<S> above.)
  const std::string d0 = a.warpgroup ? "tsl_d0 + 0.0f" : "tsl_d0", d1 = a.warpgroup ? "tsl_d1 + 0.0f" : "tsl_d1";
  os_ << "    unsigned tsl_h = tsl::flash::pack2<" << bf16 << ">(" << d0 << ", " << d1 << ");  // " << node(spos).name() << "\n";
  os_ << steps.str();
  os_ << "    tsl::flash::unpack2<" << bf16 << ">(tsl_h, tsl_s0, tsl_s1);\n  };\n";
  return "";
}

// ---- the vector kernel (vector_plan.h) -----------------------------------------------------------
//
// A grid-stride loop over vectors of `vec` consecutive elements of the sink: the point of the
// vector's first element, the vector loads of the reads that walk the last axis, then per element
// (unrolled) every node's value in group order (in-group reads are the producer's value at the same
// element, other reads of device memory scalar with the generic bounds and pad), and one vector
// store of the sink.
std::string Emitter::vector_kernel(const std::string& name, const VectorPlan& p) {
  const int n = static_cast<int>(p.nodes.size());
  const int d = static_cast<int>(p.extents.size());
  const int vec = p.vec;
  const TeNode& sink = g_.node(p.nodes.back());
  const DType sdt = sink.output().dtype;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  os_ << "//   " << print_vector_plan(p) << "\n";
  for (int i = 0; i < n; ++i) os_ << "//     " << g_.node(p.nodes[i]).name() << (i + 1 == n ? ": sink" : ": in registers") << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  const int64_t vectors = p.elements / vec;
  os_ << "  for (long long tsl_v = static_cast<long long>(blockIdx.x) * " << p.threads << "LL + threadIdx.x; tsl_v < " << vectors
      << "LL; tsl_v += static_cast<long long>(gridDim.x) * " << p.threads << "LL) {\n";
  os_ << "    const long long tsl_first = tsl_v * " << vec << "LL;\n";
  os_ << "    long long tsl_q = tsl_first;\n";
  std::vector<int> axes(d);
  std::vector<std::string> base(d);
  for (int a = 0; a < d; ++a) {
    axes[a] = a;
    base[a] = cat("tsl_x", a);
  }
  emit_unflatten("    ", "long long", "tsl_q", axes, p.extents, "tsl_x");
  // Vector loads at the vector's first element.
  std::map<std::pair<int, int>, std::string> vregs;
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (r.producer >= 0 || !r.vector) continue;
      const std::vector<int64_t> strides = row_major_strides(r.read.type.shape);
      std::string off = "0LL";
      for (int q = 0; q < r.read.type.rank(); ++q) off += cat(" + (", affine_text(r.read.map.result(q), base), ") * ", strides[q], "LL");
      const std::string reg = fresh("tsl_g");
      const std::string st = storage_type(r.read.type.dtype);
      os_ << "    " << st << " " << reg << "[" << vec << "];  // " << g_.tensor(r.read.tensor).name << "\n";
      os_ << "    tsl::row_load<" << st << ", " << vec << ">(" << reg << ", g_in" << input_param(r.read.tensor) << " + (" << off
          << "));\n";
      vregs[{i, static_cast<int>(k)}] = reg;
    }
  const std::string sst = storage_type(sdt);
  os_ << "    " << sst << " tsl_out[" << vec << "];\n";
  os_ << "    #pragma unroll\n    for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
  std::vector<std::string> x(d);
  for (int a = 0; a < d; ++a) {
    x[a] = cat("x", a);
    os_ << "      const long long " << x[a] << " = " << base[a] << (a == d - 1 ? " + tsl_e" : "") << "; (void)" << x[a] << ";\n";
  }
  std::vector<std::string> value(n);
  const std::string ind = "      ";
  for (int i = 0; i < n; ++i) {
    const TeNode& nd = g_.node(p.nodes[i]);
    const DType dt = nd.output().dtype;
    os_ << ind << "// " << nd.name() << ": " << print_expr(nd.body(), nd.axis_names()) << "\n";
    std::vector<std::string> inputs(p.reads[i].size());
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (r.producer >= 0) {
        inputs[k] = value[r.producer];
      } else if (r.vector) {
        inputs[k] = fresh("in");
        os_ << ind << "const " << compute_type(r.read.type.dtype) << " " << inputs[k] << " = "
            << from_storage(r.read.type.dtype, cat(vregs.at({i, static_cast<int>(k)}), "[tsl_e]")) << ";\n";
      } else {
        inputs[k] = emit_row_global_read(nd, r.read, x, ind);
      }
    }
    std::map<const ExprNode*, std::string> memo;
    const std::string v = emit_expr(nd.body(), inputs, x, memo, ind);
    value[i] = fresh("v");
    os_ << ind << "const " << compute_type(dt) << " " << value[i] << " = " << round_to_dtype(dt, v) << ";\n";
  }
  os_ << ind << "tsl_out[tsl_e] = " << to_storage(sdt, value[n - 1]) << ";\n";
  os_ << "    }\n";
  os_ << "    tsl::row_store<" << sst << ", " << vec << ">(g_out0 + tsl_first, tsl_out);\n";
  os_ << "  }\n}\n";
  return os_.str();
}

// ---- the row kernel (row_plan.h) ------------------------------------------------------------------
//
// Per block: rows_per_block rows of `lanes` threads each, looping over the rows with a grid
// stride. Per row, in group order: a row node fills an array of its values in registers (chunk c,
// element e of thread `lane` is column (c lanes + lane) vec + e), a per-row reduction folds the
// same columns and combines over the row's lanes (shuffles, plus shared memory across warps), a
// per-row elementwise node is one value. Row nodes that leave the group are stored a vector at a
// time; per-row ones by the row's first lane.
std::string Emitter::row_kernel(const std::string& name, const RowPlan& r) {
  const int n = static_cast<int>(r.nodes.size());
  const int d = static_cast<int>(r.row_extents.size()) + 1;
  const int vec = r.vec, lanes = r.lanes, chunks = r.chunks, elems = r.elements_per_thread();
  const bool tail = static_cast<int64_t>(chunks) * lanes * vec != r.n;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  os_ << "//   " << print_row_plan(r) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  if (lanes > plan_.warp) os_ << "  __shared__ unsigned long long tsl_red[" << r.threads / plan_.warp << "];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  os_ << "  const unsigned tsl_lane = threadIdx.x % " << lanes << "u;\n";
  os_ << "  for (long long tsl_base = static_cast<long long>(blockIdx.x) * " << r.rows_per_block << "LL; tsl_base < " << r.rows
      << "LL; tsl_base += static_cast<long long>(gridDim.x) * " << r.rows_per_block << "LL) {\n";
  os_ << "    const long long tsl_row = tsl_base + threadIdx.x / " << lanes << "u;\n";
  os_ << "    const bool tsl_active = tsl_row < " << r.rows << "LL;\n";
  std::vector<std::string> rows;  // the row's coordinates b_0 .. b_{d-2}
  os_ << "    long long tsl_rr = tsl_row;\n";
  for (int a = d - 2; a >= 0; --a) {
    rows.insert(rows.begin(), cat("tsl_b", a));
    os_ << "    const long long tsl_b" << a << " = tsl_rr % " << r.row_extents[a] << "LL; tsl_rr /= " << r.row_extents[a] << "LL;\n";
  }
  os_ << "    (void)tsl_rr;\n";
  // Vector reads of device memory, by parameter and offset text: a row read by several nodes
  // (softmax's max, sum and output) is loaded once into registers.
  std::map<std::string, std::string> row_arrays;
  for (int i = 0; i < n; ++i) {
    const RowNode& rn = r.nodes[i];
    if (rn.kind == RowKind::copy) continue;  // folded into its readers' reads
    const TeNode& nd = g_.node(rn.node);
    const DType dt = nd.output().dtype;
    const std::string ct = compute_type(dt);
    const int col = row_column_axis(nd, rn.kind);
    // The node's axis variables.
    std::vector<std::string> x = rows;
    if (nd.num_spatial() == d) x.push_back(rn.kind == RowKind::row ? "tsl_col" : "0LL");
    if (rn.kind == RowKind::per_row && nd.num_reduction() == 1) x.push_back("tsl_col");
    if (rn.kind == RowKind::row)
      for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) x.push_back(cat("tsl_k", a));
    const std::vector<RowRead>& ins = rn.reads;
    os_ << "    // " << nd.name() << " (" << (rn.kind == RowKind::row ? "row" : "per row") << "): "
        << print_expr(nd.body(), nd.axis_names()) << "\n";
    std::vector<bool> vector_read(ins.size(), false);
    std::vector<std::string> array(ins.size()), offset(ins.size());
    std::vector<bool> first_use(ins.size(), false);
    for (size_t k = 0; k < ins.size(); ++k) {
      // Loaded per chunk, before a row node's serial reduction: only reads that stay put along it.
      vector_read[k] = ins[k].producer < 0 && row_vector_access(nd, ins[k].map, ins[k].type, col, vec) &&
                       (rn.kind != RowKind::row || !reads_along_reduction(nd, ins[k].map));
      if (!vector_read[k]) continue;
      const std::vector<int64_t> strides = row_major_strides(ins[k].type.shape);
      std::vector<std::string> xc = x;
      xc[col] = "tsl_col0";
      offset[k] = "0LL";
      for (int q = 0; q < ins[k].type.rank(); ++q)
        offset[k] += cat(" + (", affine_text(ins[k].map.result(q), xc), ") * ", strides[q], "LL");
      const std::string key = cat(input_param(ins[k].tensor), "|", offset[k]);
      auto it = row_arrays.find(key);
      if (it != row_arrays.end()) {
        array[k] = it->second;
        continue;
      }
      array[k] = row_arrays[key] = cat("tsl_g", row_arrays.size());
      first_use[k] = true;
      os_ << "    " << storage_type(ins[k].type.dtype) << " " << array[k] << "[" << elems << "];  // "
          << g_.tensor(ins[k].tensor).name << "'s row\n";
    }
    // The inputs' values at the current point (inside the element loop when there is a column).
    // `inner`: vector reads along the serial reduction's last axis (row nodes with reductions),
    // by input, the array and index holding the current element.
    auto inputs = [&](const std::string& ind, const std::vector<std::string>& xs, const std::vector<std::string>& inner) {
      std::vector<std::string> values(ins.size());
      for (size_t k = 0; k < ins.size(); ++k) {
        const DType idt = ins[k].type.dtype;
        const int j = ins[k].producer;
        if (j >= 0) {
          values[k] = r.nodes[j].kind == RowKind::row ? cat("tsl_v", j, "[tsl_c * ", vec, " + tsl_e]") : cat("tsl_s", j);
          continue;
        }
        if (vector_read[k] || !inner[k].empty()) {
          values[k] = fresh("in");
          const std::string at = vector_read[k] ? cat(array[k], "[tsl_c * ", vec, " + tsl_e]") : inner[k];
          os_ << ind << "const " << compute_type(idt) << " " << values[k] << " = " << from_storage(idt, at) << ";\n";
          continue;
        }
        values[k] = emit_row_global_read(nd, ins[k], xs, ind);
      }
      return values;
    };
    const std::vector<std::string> no_inner(ins.size());
    // The chunk loop's head: the column of the chunk, its guard, and the vector reads.
    auto open_chunks = [&](const std::string& guard_extra) {
      os_ << "    #pragma unroll\n    for (int tsl_c = 0; tsl_c < " << chunks << "; ++tsl_c) {\n";
      os_ << "      const long long tsl_col0 = (static_cast<long long>(tsl_c) * " << lanes << "LL + tsl_lane) * " << vec
          << "LL;\n";
      os_ << "      const bool tsl_ok = tsl_active" << (tail ? cat(" && tsl_col0 < ", r.n, "LL") : "") << guard_extra << ";\n";
      for (size_t k = 0; k < ins.size(); ++k) {
        if (!first_use[k]) continue;
        const std::string st = storage_type(ins[k].type.dtype);
        const std::string dst = cat(array[k], " + tsl_c * ", vec);
        os_ << "      if (tsl_ok) tsl::row_load<" << st << ", " << vec << ">(" << dst << ", g_in" << input_param(ins[k].tensor)
            << " + (" << offset[k] << "));\n";
        os_ << "      else for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) " << array[k] << "[tsl_c * " << vec
            << " + tsl_e] = 0;\n";
      }
      os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
      os_ << "        const long long tsl_col = tsl_col0 + tsl_e; (void)tsl_col;\n";
    };
    if (rn.kind == RowKind::row) {
      os_ << "    " << ct << " tsl_v" << i << "[" << elems << "] = {};\n";
      const bool store = rn.writes_global;
      const std::string st = storage_type(dt);
      open_chunks("");
      os_ << "        if (tsl_ok) {\n";
      if (nd.num_reduction() == 0) {
        const std::vector<std::string> values = inputs("          ", x, no_inner);
        std::map<const ExprNode*, std::string> memo;
        const std::string v = emit_expr(nd.body(), values, x, memo, "          ");
        os_ << "          tsl_v" << i << "[tsl_c * " << vec << " + tsl_e] = " << round_to_dtype(dt, v) << ";\n";
      } else {
        emit_row_reduction(nd, ins, x, inputs);
        os_ << "          tsl_v" << i << "[tsl_c * " << vec << " + tsl_e] = " << round_to_dtype(dt, "tsl_r") << ";\n";
      }
      os_ << "        }\n      }\n";
      if (store) {
        os_ << "      if (tsl_ok) {\n        " << st << " tsl_out[" << vec << "];\n";
        os_ << "        #pragma unroll\n        for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) tsl_out[tsl_e] = "
            << to_storage(dt, cat("tsl_v", i, "[tsl_c * ", vec, " + tsl_e]")) << ";\n";
        const std::string dst = cat("g_out", output_param(g_.node_output(rn.node)), " + (tsl_row * ", r.n, "LL + tsl_col0)");
        if (vec > 1) os_ << "        tsl::row_store<" << st << ", " << vec << ">(" << dst << ", tsl_out);\n";
        else os_ << "        *(" << dst << ") = tsl_out[0];\n";
        os_ << "      }\n";
      }
      os_ << "    }\n";
    } else if (nd.num_reduction() == 1) {
      const Wide wide(*this);
      const std::string at = acc_type(dt);
      const std::string comb = combiner_fn(nd.combiner());
      os_ << "    " << at << " tsl_acc" << i << " = " << literal(dt, nd.init(), true) << ";\n";
      open_chunks("");
      os_ << "        if (tsl_ok) {\n";
      const std::vector<std::string> values = inputs("          ", x, no_inner);
      std::map<const ExprNode*, std::string> memo;
      const std::string v = emit_expr(nd.body(), values, x, memo, "          ");
      os_ << "          tsl_acc" << i << " = " << comb << "(tsl_acc" << i << ", static_cast<" << at << ">(" << v << "));\n";
      os_ << "        }\n      }\n    }\n";
      const std::string f = cat("[](", at, " a, ", at, " b) { return ", comb, "(a, b); }");
      os_ << "    tsl_acc" << i << " = tsl::segment_combine(tsl_acc" << i << ", " << std::min(lanes, plan_.warp)
          << "u, TSL_WARP_MASK, " << f << ");\n";
      if (lanes > plan_.warp) {
        const int warps = lanes / plan_.warp;
        os_ << "    {\n      " << at << "* tsl_red_v = reinterpret_cast<" << at << "*>(tsl_red);\n";
        os_ << "      if (threadIdx.x % " << plan_.warp << "u == 0) tsl_red_v[threadIdx.x / " << plan_.warp << "u] = tsl_acc" << i
            << ";\n      __syncthreads();\n";
        os_ << "      const unsigned first = (threadIdx.x / " << lanes << "u) * " << warps << "u;\n";
        os_ << "      tsl_acc" << i << " = tsl_red_v[first];\n";
        os_ << "      for (unsigned w = 1; w < " << warps << "u; ++w) tsl_acc" << i << " = " << comb << "(tsl_acc" << i
            << ", tsl_red_v[first + w]);\n      __syncthreads();\n    }\n";
      }
      os_ << "    const " << ct << " tsl_s" << i << " = " << round_to_dtype(dt, cat("tsl_acc", i)) << ";\n";
    } else {
      os_ << "    " << ct << " tsl_s" << i << " = " << literal(dt, 0) << ";\n    if (tsl_active) {\n";
      const std::vector<std::string> values = inputs("      ", x, no_inner);
      std::map<const ExprNode*, std::string> memo;
      const std::string v = emit_expr(nd.body(), values, x, memo, "      ");
      os_ << "      tsl_s" << i << " = " << round_to_dtype(dt, v) << ";\n    }\n";
    }
    if (rn.kind == RowKind::per_row && rn.writes_global)
      os_ << "    if (tsl_active && tsl_lane == 0) g_out" << output_param(g_.node_output(rn.node)) << "[tsl_row] = "
          << to_storage(dt, cat("tsl_s", i)) << ";\n";
  }
  os_ << "  }\n}\n";
  return os_.str();
}

// The serial reduction of a row node with reduction axes (attention's scores as a row of Q K^T),
// into `tsl_r` (accumulator type): nested loops over the reduction axes; the last one steps by
// vectors when some read of device memory walks it contiguously (16 bytes of the narrowest such
// dtype, halved until it divides the extent), those reads loaded a vector at a time.
template <class Inputs>
void Emitter::emit_row_reduction(const TeNode& nd, const std::vector<RowRead>& reads, const std::vector<std::string>& x,
                                 const Inputs& inputs) {
  const Wide wide(*this);
  const DType dt = nd.output().dtype;
  const std::string at = acc_type(dt), comb = combiner_fn(nd.combiner());
  const int ns = nd.num_spatial(), na = nd.num_axes(), last = na - 1;
  const int64_t extent = nd.axes()[last].extent;
  int min_bytes = kRowVectorBytes;
  for (const RowRead& rd : reads)
    if (rd.producer < 0 && row_vector_access(nd, rd.map, rd.type, last, 1)) min_bytes = std::min(min_bytes, dtype_bytes(rd.type.dtype));
  int v = std::max(1, kRowVectorBytes / min_bytes);
  while (v > 1 && extent % v != 0) v /= 2;
  std::vector<std::string> inner(reads.size());
  std::vector<bool> vectored(reads.size(), false);
  for (size_t k = 0; k < reads.size(); ++k)
    vectored[k] = v > 1 && reads[k].producer < 0 && row_vector_access(nd, reads[k].map, reads[k].type, last, v);
  std::string ind = "          ";
  os_ << ind << at << " tsl_r = " << literal(dt, nd.init(), true) << ";\n";
  for (int a = ns; a < last; ++a) {
    os_ << ind << "for (long long tsl_k" << a << " = 0; tsl_k" << a << " < " << nd.axes()[a].extent << "LL; ++tsl_k" << a << ") {\n";
    ind += "  ";
  }
  const bool vectorize = std::find(vectored.begin(), vectored.end(), true) != vectored.end();
  std::vector<std::string> xs = x;
  if (!vectorize) {
    os_ << ind << "for (long long tsl_k" << last << " = 0; tsl_k" << last << " < " << extent << "LL; ++tsl_k" << last << ") {\n";
    ind += "  ";
  } else {
    os_ << ind << "for (long long tsl_k" << last << " = 0; tsl_k" << last << " < " << extent << "LL; tsl_k" << last << " += " << v
        << "LL) {\n";
    ind += "  ";
    for (size_t k = 0; k < reads.size(); ++k) {
      if (!vectored[k]) continue;
      const std::vector<int64_t> strides = row_major_strides(reads[k].type.shape);
      std::string off = "0LL";
      for (int q = 0; q < reads[k].type.rank(); ++q) off += cat(" + (", affine_text(reads[k].map.result(q), x), ") * ", strides[q], "LL");
      const std::string st = storage_type(reads[k].type.dtype);
      const std::string arr = fresh("tsl_w");
      os_ << ind << st << " " << arr << "[" << v << "];\n";
      os_ << ind << "tsl::row_load<" << st << ", " << v << ">(" << arr << ", g_in" << input_param(reads[k].tensor) << " + (" << off << "));\n";
      inner[k] = cat(arr, "[tsl_f]");
    }
    os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_f = 0; tsl_f < " << v << "; ++tsl_f) {\n";
    ind += "  ";
    os_ << ind << "const long long tsl_kf = tsl_k" << last << " + tsl_f;\n";
    xs[last] = "tsl_kf";
  }
  const std::vector<std::string> values = inputs(ind, xs, inner);
  std::map<const ExprNode*, std::string> memo;
  const std::string val = emit_expr(nd.body(), values, xs, memo, ind);
  os_ << ind << "tsl_r = " << comb << "(tsl_r, static_cast<" << at << ">(" << val << "));\n";
  for (int a = ns; a <= last + (vectorize ? 1 : 0); ++a) {
    ind.resize(ind.size() - 2);
    os_ << ind << "}\n";
  }
}

// A read of device memory at the node's point x (any affine map, pad value out of bounds).
std::string Emitter::emit_row_global_read(const TeNode& nd, const RowRead& rd, const std::vector<std::string>& x,
                                          const std::string& ind) {
  const DType dt = rd.type.dtype;
  const TensorId t = rd.tensor;
  const int rank = rd.type.rank();
  const std::vector<int64_t> extents = nd.extents();
  const std::vector<int64_t> strides = row_major_strides(rd.type.shape);
  std::string off = "0LL", inside;
  for (int q = 0; q < rank; ++q) {
    const AffineExpr& row = rd.map.result(q);
    const std::string idx = fresh("i");
    os_ << ind << "const long long " << idx << " = " << affine_text(row, x) << ";\n";
    off += cat(" + ", idx, " * ", strides[q], "LL");
    if (row.min_over(extents) < 0 || row.max_over(extents) >= rd.type.shape[q])
      inside += cat(inside.empty() ? "" : " && ", idx, " >= 0 && ", idx, " < ", rd.type.shape[q], "LL");
  }
  if (g_.tensor(t).type.num_elements() == 0) inside = "false";
  const std::string v = fresh("in");
  if (inside.empty()) {
    os_ << ind << "const " << compute_type(dt) << " " << v << " = " << from_storage(dt, cat("g_in", input_param(t), "[", off, "]"))
        << ";\n";
  } else {
    os_ << ind << compute_type(dt) << " " << v << " = " << literal(dt, rd.pad) << ";\n";
    os_ << ind << "if (" << inside << ") " << v << " = " << from_storage(dt, cat("g_in", input_param(t), "[", off, "]")) << ";\n";
  }
  return v;
}

}  // namespace

// Placeholder of the kernel's name in the emitted source until its hash is known.
constexpr const char* kPlaceholder = "TESSEL_KERNEL_NAME";

// Names the kernel by a hash of its code without comments (which name the model's nodes), so that
// identical groups (the layers of a transformer) share one name, one compilation and one cache
// entry; the header comment and the manifest say which group it is.
void finish_kernel(GeneratedKernel& k, std::string source, const OpGraph& graph, const Schedule& schedule, int index) {
  k.canonical = strip_comments(source);
  k.name = cat("tessel_", short_hash(k.canonical));
  replace_all(source, kPlaceholder, k.name);
  replace_all(k.canonical, kPlaceholder, k.name);
  k.source = cat("// group ", index, " of the schedule (", schedule.policy, "): ", group_names(graph, schedule.groups[index].group), "\n",
                 source);
}

namespace {

/// The recorded reason a family was declined ("mma: ..."), or "".
std::string declined(const KernelChoice& k, std::string_view family) {
  const std::string prefix = cat(family, ": ");
  for (const std::string& r : k.rejected)
    if (r.rfind(prefix, 0) == 0) return r.substr(prefix.size());
  return "";
}

/// The comments naming why the families before the recorded one were not taken.
std::string declined_comments(const KernelChoice& k) {
  std::string out;
  const std::pair<const char*, const char*> labels[] = {{"flash", "streamed attention kernel not used: "},
                                                        {"wgmma", "warpgroup MMA not used: "},
                                                        {"mma", "tensor cores not used: "},
                                                        {"row", "row kernel not used: "},
                                                        {"vector", "vector kernel not used: "}};
  for (const auto& [family, label] : labels)
    if (const std::string why = declined(k, family); !why.empty()) out += cat("// ", label, why, "\n");
  return out;
}

}  // namespace

GeneratedKernel emit_group_kernel(const OpGraph& graph, const Schedule& schedule, int index, const HwSpec& spec) {
  TESSEL_ASSERT(index >= 0 && index < static_cast<int>(schedule.groups.size()), "group ", index);
  const ScheduledGroup& group = schedule.groups[index].group;
  const KernelChoice& choice = group.kernel;
  TESSEL_ASSERT(!choice.family.empty(), "group ", index, " of the schedule records no kernel family (record_kernel_families)");
  const std::string where = cat("/groups/", index, "/kernel");
  GeneratedKernel k;
  k.path = choice.family;
  k.attention_reason = declined(choice, "flash");
  k.mma_reason = declined(choice, "mma");
  k.row_reason = declined(choice, "row");
  k.vector_reason = declined(choice, "vector");
  const GroupPlan generic = plan_group(graph, group, spec);
  // The recorded family's plan, derived from the group; its parameters must be the recorded ones.
  auto illegal = [&](const std::string& why) {
    return UserError("schedule", where, cat("kernel family '", choice.family, "' cannot emit this group: ", why));
  };
  auto check_params = [&](const std::map<std::string, int64_t>& derived) {
    if (choice.params.empty() || choice.params == derived) return;
    std::string want, got;
    for (const auto& [name, value] : choice.params) want += cat(" ", name, "=", value);
    for (const auto& [name, value] : derived) got += cat(" ", name, "=", value);
    throw UserError("schedule", where + "/params",
                    cat("recorded parameters", want, " differ from the ones family '", choice.family,
                        "' derives from the group's tiles (", got, " ); parameters are recorded, not yet taken as input"));
  };
  std::string source;
  if (choice.family == "flash") {
    if (group.stream_chunk <= 0) throw illegal("the group does not stream attention (stream_chunk 0)");
    AttentionMatch attention = plan_attention(graph, group, generic, spec);
    if (!attention.plan) throw illegal(attention.reason);
    check_params(family_params(*attention.plan));
    k.attention = attention.plan;
    k.plan = attention_group_plan(generic, *attention.plan);
    Emitter e(graph, k.plan, spec);
    source = e.flash_kernel(kPlaceholder, *attention.plan);
  } else if (choice.family == "wgmma" || choice.family == "mma") {
    ContractionMatch match = plan_contraction(graph, group, generic, spec);
    if (!match.plan) throw illegal(match.reason);
    if (match.plan->warpgroup != (choice.family == "wgmma"))
      throw illegal(match.plan->warpgroup ? "the spec and tiles select warpgroup MMA (wgmma)"
                                          : cat("no warpgroup MMA: ", match.plan->warpgroup_reason));
    check_params(family_params(*match.plan));
    k.contraction = match.plan;
    k.plan = mma_group_plan(generic, *match.plan);
    Emitter e(graph, k.plan, spec);
    source = e.mma_kernel(kPlaceholder, *match.plan);
  } else if (choice.family == "row") {
    RowMatch rows = plan_rows(graph, group, generic, spec);
    if (!rows.plan) throw illegal(rows.reason);
    check_params(family_params(*rows.plan));
    k.rows = rows.plan;
    k.plan = row_group_plan(generic, *rows.plan);
    Emitter e(graph, k.plan, spec);
    source = e.row_kernel(kPlaceholder, *rows.plan);
  } else if (choice.family == "vector") {
    VectorMatch vectors = plan_vector(graph, group, generic, spec);
    if (!vectors.plan) throw illegal(vectors.reason);
    check_params(family_params(*vectors.plan));
    k.vector = vectors.plan;
    k.plan = vector_group_plan(generic, *vectors.plan);
    Emitter e(graph, k.plan, spec);
    source = e.vector_kernel(kPlaceholder, *vectors.plan);
  } else if (choice.family == "generic") {
    check_params(family_params(graph, group, generic));
    k.plan = generic;
    Emitter e(graph, k.plan, spec);
    source = e.kernel(kPlaceholder);
  } else {
    throw UserError("schedule", where + "/family",
                    cat("unknown CUDA kernel family '", choice.family, "' (flash, wgmma, mma, row, vector, generic)"));
  }
  finish_kernel(k, cat(declined_comments(choice), source), graph, schedule, index);
  return k;
}

}  // namespace tessel::cuda

namespace tessel::cuda {

extern const char* const kDeviceLibrarySource;  // device_library.cpp, generated at build time

const std::string& device_library_source() {
  static const std::string source(kDeviceLibrarySource);
  return source;
}

}  // namespace tessel::cuda
