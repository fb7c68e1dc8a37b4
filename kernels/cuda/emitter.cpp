// The emitter's shared parts and the generic kernel (see emitter.h).
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
#include "kernels/cuda/emitter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "tilegraph/hash.h"

namespace tessel::cuda::emitter {

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
std::string literal(DType t, const Scalar& v, bool acc) {
  const std::string type = acc ? acc_type(t) : compute_type(t);
  if (type == "double" || type == "float") return float_literal(v.as_double(), type);
  if (type == "bool") return v != 0 ? "true" : "false";
  // An integer exactly (an i64 beyond 2^53 has no exact double); a double given for an integer
  // dtype truncates and saturates, NaN as 0 (Scalar::as_int64).
  return int_literal(v.as_int64());
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
std::string affine_text(const AffineExpr& row, const std::vector<std::string>& vars, const char* suffix) {
  const bool wide = std::string_view(suffix) == "LL";
  std::string out;
  for (size_t a = 0; a < row.coeffs.size(); ++a) {
    const int64_t c = row.coeffs[a];
    if (c == 0) continue;
    std::string term = c == 1 ? vars[a] : c == -1 ? cat("-", vars[a]) : cat(c, suffix, " * ", vars[a]);
    out += out.empty() ? term : (term[0] == '-' ? cat(" - ", term.substr(1)) : cat(" + ", term));
  }
  if (row.offset != 0 || out.empty()) {
    if (out.empty()) out = wide ? int_literal(row.offset) : cat(row.offset);
    else out += row.offset < 0 ? cat(" - ", -row.offset, suffix) : cat(" + ", row.offset, suffix);
  }
  return out;
}


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
      return memo[e.get()] = wide_ && dt == DType::f32 ? float_literal(e.value(), "double") : literal(dt, e.scalar());
    case ExprOp::axis_index: return memo[e.get()] = x[e.index()];
    default: break;
  }
  // 1 + erf(z) in an f16/bf16 expression (the erf GELU) takes the fast erf (prelude.cuh's m_erf_h),
  // whose absolute error the expression's rounding to 11 or 8 bits hides but where 1 + erf cancels
  // (z < -2). (Not memoized: an erf read elsewhere keeps the accurate form; one already emitted
  // accurately is reused.)
  std::vector<std::string> ops(e.operands().size());
  if (e.op() == ExprOp::add && (dt == DType::f16 || dt == DType::bf16) && !wide_) {
    for (int k = 0; k < 2; ++k) {
      const Expr& z = e.operands()[k];
      const Expr& one = e.operands()[1 - k];
      if (z.op() != ExprOp::erf || one.op() != ExprOp::constant || one.value() != 1.0 || ctype(z.dtype()) != "float" ||
          memo.count(z.get()))
        continue;
      const std::string arg = emit_expr(z.operands()[0], inputs, x, memo, ind);
      ops[k] = fresh("t");
      os_ << ind << "const float " << ops[k] << " = tsl::m_erf_h(" << arg << ");\n";
      break;
    }
  }
  for (size_t k = 0; k < ops.size(); ++k)
    if (ops[k].empty()) ops[k] = emit_expr(e.operands()[k], inputs, x, memo, ind);
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
void Emitter::emit_value_function(int i, bool rounded) {
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
    const bool store_rounds = !rounded && (dt == DType::f16 || dt == DType::bf16);  // to_storage rounds as round_to_dtype
    os_ << "      return " << (store_rounds ? v : round_to_dtype(dt, v)) << ";\n    };\n";
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
  for (size_t k = 0; k < plan_.derived.size(); ++k)
    os_ << ",\n    // " << (plan_.derived[k].kind == DerivedBuffer::Kind::nm_values ? "the 2:4 compressed values" : "the 2:4 metadata")
        << " of " << g_.tensor(plan_.derived[k].tensor).name << "\n    const unsigned short* __restrict__ tsl_derived" << k;
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

}  // namespace tessel::cuda::emitter
