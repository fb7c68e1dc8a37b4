// The reference interpreter (see interpreter.h).
//
// A node is evaluated in three steps:
//   1. Its body is compiled into a register program (`Program`): one instruction per expression
//      node, registers being arrays of kLanes values -- doubles for float and bool values, int64_t
//      for integer values, so integer arithmetic is exact and wraps like the dtype (expr.h's
//      apply_binary_integer, the CPU backend's semantics); a Cast converts between the two.
//   2. A lane axis is chosen: normally a spatial axis (each lane owns one output element and its
//      own accumulator), or, when every spatial extent is tiny, a reduction axis (lanes are
//      combined at the end). The remaining axes are walked as an odometer.
//   3. For every batch of lanes, each input access computes its base offset once; lanes then step
//      by a constant linear stride. Bounds are checked per lane only for accesses that can leave
//      the tensor (padding, slicing past the end), and gather indices are read per lane.
// The outer loop over "rows" is split across threads for large nodes.
#include "tilegraph/interpreter.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <type_traits>

#include "tilegraph/error.h"
#include "tilegraph/graph_inputs.h"
#include "tilegraph/threads.h"

namespace tessel {

namespace {

constexpr int kLanes = 64;

// ---------------------------------------------------------------------------------------------
// Step 1: the register program.

// Integer values live in integer registers; float and bool values in float registers.
bool integer_register(DType t) { return is_integer(t); }

struct Instr {
  ExprOp op;
  DType dtype;        // result dtype
  DType operand_dtype;  // dtype of the first operand (for casts and integer semantics)
  int dst;
  int a = -1, b = -1, c = -1;
  bool round = false;    // float registers: round the result to `dtype` (casts and bool results)
  bool integer = false;  // reads or writes an integer register: run_integer_instr
};

struct Program {
  int num_inputs = 0;
  int num_regs = 0;
  std::vector<Instr> code;
  std::vector<std::pair<int, double>> constants;           // float register, value
  std::vector<std::pair<int, int64_t>> integer_constants;  // integer register, value
  std::vector<std::pair<int, int>> axis_regs;              // integer register, axis
  int result = -1;
};

// Register r's lanes: floats + r * kLanes or integers + r * kLanes, by the kind of its dtype (the
// other array's lanes of r are unused).
struct Registers {
  double* floats = nullptr;
  int64_t* integers = nullptr;
  double* f(int r) const { return floats + static_cast<size_t>(r) * kLanes; }
  int64_t* i(int r) const { return integers + static_cast<size_t>(r) * kLanes; }
};

// The storage of a Registers, constants filled in.
struct RegisterFile {
  std::vector<double> floats;
  std::vector<int64_t> integers;
  explicit RegisterFile(const Program& p)
      : floats(static_cast<size_t>(p.num_regs) * kLanes), integers(static_cast<size_t>(p.num_regs) * kLanes) {
    for (auto [reg, value] : p.constants) std::fill_n(view().f(reg), kLanes, value);
    for (auto [reg, value] : p.integer_constants) std::fill_n(view().i(reg), kLanes, value);
  }
  Registers view() { return {floats.data(), integers.data()}; }
};

int compile_expr(const Expr& e, Program& p) {
  switch (e.op()) {
    case ExprOp::input:
      return e.index();
    case ExprOp::constant: {
      const int r = p.num_regs++;
      if (integer_register(e.dtype())) p.integer_constants.emplace_back(r, e.integer_value());
      else p.constants.emplace_back(r, e.value());
      return r;
    }
    case ExprOp::axis_index: {
      for (auto [reg, axis] : p.axis_regs)
        if (axis == e.index()) return reg;
      const int r = p.num_regs++;
      p.axis_regs.emplace_back(r, e.index());
      return r;
    }
    default:
      break;
  }
  Instr in{e.op(), e.dtype(), e.operands()[0].dtype(), -1};
  in.a = compile_expr(e.operands()[0], p);
  if (e.operands().size() > 1) in.b = compile_expr(e.operands()[1], p);
  if (e.operands().size() > 2) in.c = compile_expr(e.operands()[2], p);
  in.dst = p.num_regs++;
  // Float intermediates stay in double; bool results are 0 or 1; a cast always rounds to its
  // target. Integer values are exact and wrapped as they are computed.
  in.round = e.op() == ExprOp::cast || e.dtype() == DType::boolean;
  in.integer = integer_register(in.operand_dtype) || integer_register(in.dtype);
  p.code.push_back(in);
  return in.dst;
}

Program compile_body(const TeNode& node) {
  Program p;
  p.num_inputs = static_cast<int>(node.inputs().size());
  p.num_regs = p.num_inputs;
  p.result = compile_expr(node.body(), p);
  return p;
}

// An instruction with an integer operand or result: integer arithmetic, comparisons of integers,
// casts to or from an integer type, a select between integers.
void run_integer_instr(const Instr& in, const Registers& r, int n) {
  if (in.op == ExprOp::select) {
    const double* cond = r.f(in.a);
    const int64_t* x = r.i(in.b);
    const int64_t* y = r.i(in.c);
    int64_t* d = r.i(in.dst);
    for (int l = 0; l < n; ++l) d[l] = cond[l] != 0 ? x[l] : y[l];
    return;
  }
  if (in.op == ExprOp::cast && !integer_register(in.operand_dtype)) {  // float or bool -> integer
    const double* a = r.f(in.a);
    int64_t* d = r.i(in.dst);
    for (int l = 0; l < n; ++l) d[l] = float_to_integer(in.dtype, a[l]);
    return;
  }
  const int64_t* a = r.i(in.a);
  if (in.op == ExprOp::cast) {
    if (integer_register(in.dtype)) {
      int64_t* d = r.i(in.dst);
      for (int l = 0; l < n; ++l) d[l] = wrap_integer(in.dtype, a[l]);
    } else if (in.dtype == DType::boolean) {
      double* d = r.f(in.dst);
      for (int l = 0; l < n; ++l) d[l] = a[l] != 0 ? 1.0 : 0.0;
    } else {
      double* d = r.f(in.dst);
      for (int l = 0; l < n; ++l) d[l] = integer_to_float(in.dtype, a[l]);
    }
    return;
  }
  if (!integer_register(in.dtype)) {  // a comparison, isnan or isinf of integers: a bool
    double* d = r.f(in.dst);
    if (is_unary(in.op)) {
      for (int l = 0; l < n; ++l) d[l] = static_cast<double>(apply_unary_integer(in.op, a[l], in.operand_dtype));
    } else {
      const int64_t* b = r.i(in.b);
      for (int l = 0; l < n; ++l) d[l] = static_cast<double>(apply_binary_integer(in.op, a[l], b[l], in.operand_dtype));
    }
    return;
  }
  int64_t* d = r.i(in.dst);
  if (is_unary(in.op)) {
    for (int l = 0; l < n; ++l) d[l] = apply_unary_integer(in.op, a[l], in.dtype);
    return;
  }
  const int64_t* b = r.i(in.b);
  if (in.dtype == DType::i64) {
    // The common i64 index arithmetic without a call per lane: unsigned arithmetic wraps modulo
    // 2^64, which is i64's two's-complement wrap.
    const auto* ua = reinterpret_cast<const uint64_t*>(a);
    const auto* ub = reinterpret_cast<const uint64_t*>(b);
    switch (in.op) {
      case ExprOp::add: for (int l = 0; l < n; ++l) d[l] = static_cast<int64_t>(ua[l] + ub[l]); return;
      case ExprOp::sub: for (int l = 0; l < n; ++l) d[l] = static_cast<int64_t>(ua[l] - ub[l]); return;
      case ExprOp::mul: for (int l = 0; l < n; ++l) d[l] = static_cast<int64_t>(ua[l] * ub[l]); return;
      default: break;
    }
  }
  for (int l = 0; l < n; ++l) d[l] = apply_binary_integer(in.op, a[l], b[l], in.dtype);
}

void run_instr(const Instr& in, const Registers& r, int n) {
  if (in.integer) {
    run_integer_instr(in, r, n);
    return;
  }
  double* d = r.f(in.dst);
  const double* a = r.f(in.a);
  const double* b = in.b >= 0 ? r.f(in.b) : nullptr;
  switch (in.op) {
    case ExprOp::add: for (int l = 0; l < n; ++l) d[l] = a[l] + b[l]; break;
    case ExprOp::sub: for (int l = 0; l < n; ++l) d[l] = a[l] - b[l]; break;
    case ExprOp::mul: for (int l = 0; l < n; ++l) d[l] = a[l] * b[l]; break;
    case ExprOp::div: for (int l = 0; l < n; ++l) d[l] = a[l] / b[l]; break;
    case ExprOp::max:
      for (int l = 0; l < n; ++l) d[l] = (a[l] != a[l] || b[l] != b[l]) ? NAN : (a[l] > b[l] ? a[l] : b[l]);
      break;
    case ExprOp::min:
      for (int l = 0; l < n; ++l) d[l] = (a[l] != a[l] || b[l] != b[l]) ? NAN : (a[l] < b[l] ? a[l] : b[l]);
      break;
    case ExprOp::neg: for (int l = 0; l < n; ++l) d[l] = -a[l]; break;
    case ExprOp::exp: for (int l = 0; l < n; ++l) d[l] = std::exp(a[l]); break;
    case ExprOp::sqrt: for (int l = 0; l < n; ++l) d[l] = std::sqrt(a[l]); break;
    case ExprOp::rsqrt: for (int l = 0; l < n; ++l) d[l] = 1.0 / std::sqrt(a[l]); break;
    case ExprOp::tanh: for (int l = 0; l < n; ++l) d[l] = std::tanh(a[l]); break;
    case ExprOp::erf: for (int l = 0; l < n; ++l) d[l] = std::erf(a[l]); break;
    case ExprOp::sigmoid: for (int l = 0; l < n; ++l) d[l] = 1.0 / (1.0 + std::exp(-a[l])); break;
    case ExprOp::gt: for (int l = 0; l < n; ++l) d[l] = a[l] > b[l]; break;
    case ExprOp::lt: for (int l = 0; l < n; ++l) d[l] = a[l] < b[l]; break;
    case ExprOp::eq: for (int l = 0; l < n; ++l) d[l] = a[l] == b[l]; break;
    case ExprOp::select: {
      const double* c = r.f(in.c);
      for (int l = 0; l < n; ++l) d[l] = a[l] != 0 ? b[l] : c[l];
      break;
    }
    case ExprOp::cast:
      for (int l = 0; l < n; ++l) d[l] = a[l];
      break;
    default:
      if (is_unary(in.op)) {
        for (int l = 0; l < n; ++l) d[l] = apply_unary(in.op, a[l], in.operand_dtype);
      } else {
        for (int l = 0; l < n; ++l) d[l] = apply_binary(in.op, a[l], b[l], in.operand_dtype);
      }
  }
  if (in.round)
    for (int l = 0; l < n; ++l) d[l] = round_to(in.dtype, d[l]);
}

// ---------------------------------------------------------------------------------------------
// Step 3 helpers: address arithmetic of one input access.

struct AccessPlan {
  const double* data = nullptr;      // a float or bool tensor
  bool integer = false;               // an integer tensor, read into integer registers
  const int64_t* integers = nullptr;  // its values (i64's own, or `widened`)
  std::shared_ptr<const std::vector<int64_t>> widened;  // the values of an i32, i8 or u8 tensor
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;           // row-major element strides of the tensor
  std::vector<std::vector<int64_t>> rows;  // affine coefficients per tensor dim
  std::vector<int64_t> offsets;
  std::vector<int64_t> linear;  // element-offset coefficient per domain axis
  int64_t linear_offset = 0;
  bool checked = false;  // some read can fall outside the tensor
  double pad = 0;
  int64_t integer_pad = 0;
  int gather_dim = -1;
  int gather_reg = -1;
};

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

AccessPlan plan_access(const Access& access, const HostTensor& tensor,
                       const std::vector<int64_t>& extents) {
  AccessPlan a;
  a.integer = integer_register(tensor.dtype());
  if (tensor.holds_int64()) {
    a.integers = tensor.int64_data();
  } else if (integer_register(tensor.dtype())) {
    a.widened = std::make_shared<const std::vector<int64_t>>(tensor.as_ints());
    a.integers = a.widened->data();
  } else {
    a.data = tensor.data();
  }
  a.shape = access.type.shape;
  a.strides = row_major_strides(a.shape);
  a.pad = access.pad_value.as_double();
  a.integer_pad = access.pad_value.as_int64();
  a.gather_dim = access.gather_dim;
  a.gather_reg = access.gather_index_input;
  for (int r = 0; r < access.map.num_results(); ++r) {
    const AffineExpr& row = access.map.result(r);
    a.rows.push_back(row.coeffs);
    a.offsets.push_back(row.offset);
    if (r == access.gather_dim) continue;
    if (row.min_over(extents) < 0 || row.max_over(extents) >= a.shape[r]) a.checked = true;
  }
  if (tensor.size() == 0) a.checked = true;
  a.linear.assign(extents.size(), 0);
  for (int r = 0; r < access.map.num_results(); ++r) {
    a.linear_offset += a.offsets[r] * a.strides[r];
    for (size_t ax = 0; ax < extents.size(); ++ax) a.linear[ax] += a.rows[r][ax] * a.strides[r];
  }
  return a;
}

// Loads `n` lanes of `data` (the access's tensor, as T) into `dst`; the point of lane l is
// `point` with point[lane_axis] += l.
template <typename T>
void load_lanes_of(const AccessPlan& a, const T* data, T pad, const int64_t* point, int lane_axis, int n, T* dst,
                   const Registers& regs, const std::string& node_name) {
  const int rank = static_cast<int>(a.shape.size());
  int64_t base_index[16];
  int64_t step_index[16];
  int64_t base = 0, step = 0;
  for (int r = 0; r < rank; ++r) {
    int64_t v = a.offsets[r];
    const auto& row = a.rows[r];
    for (size_t ax = 0; ax < row.size(); ++ax) v += row[ax] * point[ax];
    base_index[r] = v;
    step_index[r] = lane_axis >= 0 ? row[lane_axis] : 0;
    base += v * a.strides[r];
    step += step_index[r] * a.strides[r];
  }
  bool inside_all = !a.checked;
  if (a.checked && a.gather_dim < 0 && n > 0) {
    inside_all = true;
    for (int r = 0; r < rank && inside_all; ++r) {
      const int64_t first = base_index[r], last = base_index[r] + step_index[r] * (n - 1);
      inside_all = std::min(first, last) >= 0 && std::max(first, last) < a.shape[r];
    }
  }
  if (inside_all && a.gather_dim < 0) {
    const T* src = data + base;
    if (step == 1) std::copy(src, src + n, dst);
    else for (int l = 0; l < n; ++l) dst[l] = src[l * step];
    return;
  }
  // The verifier makes a gather index an integer, so it sits in an integer register.
  const int64_t* gather_index = a.gather_dim >= 0 ? regs.i(a.gather_reg) : nullptr;
  for (int l = 0; l < n; ++l) {
    int64_t off = 0;
    bool inside = true;
    for (int r = 0; r < rank; ++r) {
      int64_t idx;
      if (r == a.gather_dim) {
        const int64_t g = gather_index[l];
        idx = g;
        if (idx < 0) idx += a.shape[r];
        if (idx < 0 || idx >= a.shape[r])
          throw UserError("", cat("node '", node_name, "'"),
                          cat("gather index ", g, " is out of range for a dimension of size ", a.shape[r]));
      } else {
        idx = base_index[r] + step_index[r] * l;
        if (idx < 0 || idx >= a.shape[r]) inside = false;
      }
      off += idx * a.strides[r];
    }
    dst[l] = inside ? data[off] : pad;
  }
}

// Loads `n` lanes of access `a` into register `reg`.
void load_lanes(const AccessPlan& a, const int64_t* point, int lane_axis, int n, const Registers& regs, int reg,
                const std::string& node_name) {
  if (a.integer) load_lanes_of(a, a.integers, a.integer_pad, point, lane_axis, n, regs.i(reg), regs, node_name);
  else load_lanes_of(a, a.data, a.pad, point, lane_axis, n, regs.f(reg), regs, node_name);
}

// ---------------------------------------------------------------------------------------------
// Step 2: iteration.

struct NodeRun {
  const TeNode& node;
  const Program& program;
  std::vector<AccessPlan> accesses;
  std::vector<int> load_order;  // gather index inputs before the gathers that use them
  std::vector<int64_t> extents;
  int lane_axis = -1;           // -1: no axis (single lane)
  bool lanes_reduce = false;    // lane axis is a reduction axis
  std::vector<int> outer_axes;  // spatial axes other than the lane axis (row loop)
  std::vector<int> inner_axes;  // reduction axes other than the lane axis (accumulation loop)
  std::vector<int64_t> out_strides;  // per spatial axis
  double* out = nullptr;          // the output's values unless it is i64
  int64_t* integer_out = nullptr;  // an i64 output's values
  bool contraction = false;     // body is in0 * in1 (affine reads), combiner sum: see contract_row
};


// Advances `point` over `axes` (odometer, last axis fastest); false when done.
bool advance(std::vector<int64_t>& point, const std::vector<int>& axes,
             const std::vector<int64_t>& extents) {
  for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
    const int ax = axes[i];
    if (++point[ax] < extents[ax]) return true;
    point[ax] = 0;
  }
  return false;
}

void evaluate_batch(const NodeRun& run, std::vector<int64_t>& point, int n, const Registers& regs) {
  for (int i : run.load_order) load_lanes(run.accesses[i], point.data(), run.lane_axis, n, regs, i, run.node.name());
  for (auto [reg, axis] : run.program.axis_regs) {
    int64_t* d = regs.i(reg);
    for (int l = 0; l < n; ++l) d[l] = point[axis] + (axis == run.lane_axis ? l : 0);
  }
  for (const Instr& in : run.program.code) run_instr(in, regs, n);
}

// True when every lane of a batch reads inside the tensor.
bool lanes_inside(const AccessPlan& a, const int64_t* point, int lane_axis, int n) {
  if (!a.checked) return true;
  for (size_t r = 0; r < a.shape.size(); ++r) {
    int64_t v = a.offsets[r];
    for (size_t ax = 0; ax < a.rows[r].size(); ++ax) v += a.rows[r][ax] * point[ax];
    const int64_t last = v + a.rows[r][lane_axis] * (n - 1);
    if (std::min(v, last) < 0 || std::max(v, last) >= a.shape[r]) return false;
  }
  return true;
}

// acc[l] = sum over the reduction domain of in0 * in1, for the n lanes at `point` (lanes on a
// spatial axis). The innermost reduction axis runs as a tight loop over linear offsets; a step
// whose lanes might read outside a tensor (padding) goes through the generic per-lane path.
void contract_row(const NodeRun& run, std::vector<int64_t>& point, int n, double* acc, const Registers& regs) {
  const AccessPlan& A = run.accesses[0];
  const AccessPlan& B = run.accesses[1];
  const int lane = run.lane_axis >= 0 ? run.lane_axis : 0;
  const int64_t la = run.lane_axis >= 0 ? A.linear[lane] : 0, lb = run.lane_axis >= 0 ? B.linear[lane] : 0;
  // The tight loop runs along the longest reduction axis (channels of a convolution, not its
  // 3-wide kernel); the other reduction axes form the outer odometer.
  int inner = run.inner_axes.back();
  for (int ax : run.inner_axes)
    if (run.extents[ax] > run.extents[inner]) inner = ax;
  std::vector<int> outer;
  for (int ax : run.inner_axes)
    if (ax != inner) outer.push_back(ax);
  const int64_t k_extent = run.extents[inner];
  const int64_t ka = A.linear[inner], kb = B.linear[inner];
  const bool checked = A.checked || B.checked;
  std::fill_n(acc, n, 0.0);
  const double* result = regs.f(run.program.result);
  do {
    point[inner] = 0;
    int64_t oa = A.linear_offset, ob = B.linear_offset;
    for (size_t ax = 0; ax < point.size(); ++ax) {
      oa += A.linear[ax] * point[ax];
      ob += B.linear[ax] * point[ax];
    }
    for (int64_t k = 0; k < k_extent; ++k, oa += ka, ob += kb) {
      if (checked) {
        point[inner] = k;
        if (!lanes_inside(A, point.data(), lane, n) || !lanes_inside(B, point.data(), lane, n)) {
          evaluate_batch(run, point, n, regs);
          for (int l = 0; l < n; ++l) acc[l] += result[l];
          continue;
        }
      }
      const double* pa = A.data + oa;
      const double* pb = B.data + ob;
      if (la == 0 && lb == 1) {
        const double av = *pa;
        for (int l = 0; l < n; ++l) acc[l] += av * pb[l];
      } else {
        for (int l = 0; l < n; ++l) acc[l] += pa[l * la] * pb[l * lb];
      }
    }
    point[inner] = 0;
  } while (advance(point, outer, run.extents));
}

// Values of a body of dtype T (double: float and bool bodies; int64_t: integer bodies): where the
// result lanes are, how they combine, and how the output stores them.
const double* result_lanes(const Registers& regs, int reg, double) { return regs.f(reg); }
const int64_t* result_lanes(const Registers& regs, int reg, int64_t) { return regs.i(reg); }
double combine(Combiner c, double acc, double v) { return combine_values(c, acc, v); }
int64_t combine(Combiner c, int64_t acc, int64_t v) { return combine_integers(c, acc, v); }
double initial_value(const Scalar& init, double) { return init.as_double(); }
int64_t initial_value(const Scalar& init, int64_t) { return init.as_int64(); }
void store(const NodeRun& run, DType dtype, int64_t offset, double v) { run.out[offset] = round_to(dtype, v); }
void store(const NodeRun& run, DType dtype, int64_t offset, int64_t v) {
  if (run.integer_out) run.integer_out[offset] = v;
  else run.out[offset] = static_cast<double>(wrap_integer(dtype, v));
}

// Computes the rows [row_begin, row_end) of the row loop; a row is one point of outer_axes
// times one batch of the lane axis (when the lane axis is spatial). T is the body's register
// type (see result_lanes).
template <typename T>
void run_rows(const NodeRun& run, int64_t row_begin, int64_t row_end) {
  const Program& p = run.program;
  RegisterFile file(p);
  const Registers regs = file.view();
  const T* result = result_lanes(regs, p.result, T{});
  const Combiner combiner = run.node.combiner();
  const DType out_dtype = run.node.output().dtype;
  const T init = initial_value(run.node.init(), T{});
  const int64_t lane_extent = run.lane_axis >= 0 ? run.extents[run.lane_axis] : 1;
  const int64_t batches = run.lanes_reduce ? 1 : (lane_extent + kLanes - 1) / kLanes;
  T acc[kLanes];
  std::vector<int64_t> point(run.extents.size(), 0);

  for (int64_t row = row_begin; row < row_end; ++row) {
    // Decode the row into the outer point and the lane batch.
    int64_t rest = row / batches;
    const int64_t batch = row % batches;
    std::fill(point.begin(), point.end(), 0);
    for (int i = static_cast<int>(run.outer_axes.size()) - 1; i >= 0; --i) {
      const int ax = run.outer_axes[i];
      point[ax] = rest % run.extents[ax];
      rest /= run.extents[ax];
    }
    int64_t out_off = 0;
    for (int ax : run.outer_axes) out_off += point[ax] * run.out_strides[ax];

    if (run.node.num_reduction() == 0) {
      const int64_t first = batch * kLanes;
      const int n = static_cast<int>(std::min<int64_t>(kLanes, lane_extent - first));
      if (run.lane_axis >= 0) point[run.lane_axis] = first;
      evaluate_batch(run, point, n, regs);
      const int64_t ostep = run.lane_axis >= 0 ? run.out_strides[run.lane_axis] : 0;
      out_off += first * ostep;
      for (int l = 0; l < n; ++l) store(run, out_dtype, out_off + l * ostep, result[l]);
      continue;
    }

    if constexpr (std::is_same_v<T, double>) {  // contractions are float bodies
      if (!run.lanes_reduce && run.contraction) {
        const int64_t first = batch * kLanes;
        const int n = run.lane_axis >= 0 ? static_cast<int>(std::min<int64_t>(kLanes, lane_extent - first)) : 1;
        if (run.lane_axis >= 0) point[run.lane_axis] = first;
        contract_row(run, point, n, acc, regs);
        const int64_t ostep = run.lane_axis >= 0 ? run.out_strides[run.lane_axis] : 0;
        out_off += first * ostep;
        for (int l = 0; l < n; ++l) store(run, out_dtype, out_off + l * ostep, acc[l]);
        continue;
      }
    }

    if (!run.lanes_reduce) {
      // Lanes own output elements; walk every reduction point.
      const int64_t first = batch * kLanes;
      const int n = run.lane_axis >= 0 ? static_cast<int>(std::min<int64_t>(kLanes, lane_extent - first)) : 1;
      std::fill_n(acc, n, init);
      if (run.lane_axis >= 0) point[run.lane_axis] = first;
      do {
        evaluate_batch(run, point, n, regs);
        for (int l = 0; l < n; ++l) acc[l] = combine(combiner, acc[l], result[l]);
      } while (advance(point, run.inner_axes, run.extents));
      const int64_t ostep = run.lane_axis >= 0 ? run.out_strides[run.lane_axis] : 0;
      out_off += first * ostep;
      for (int l = 0; l < n; ++l) store(run, out_dtype, out_off + l * ostep, acc[l]);
      continue;
    }

    // Lanes run along a reduction axis: one accumulator per lane, combined at the end.
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, lane_extent));
    std::fill_n(acc, lanes, init);
    do {
      for (int64_t first = 0; first < lane_extent; first += kLanes) {
        const int n = static_cast<int>(std::min<int64_t>(kLanes, lane_extent - first));
        point[run.lane_axis] = first;
        evaluate_batch(run, point, n, regs);
        for (int l = 0; l < n; ++l) acc[l] = combine(combiner, acc[l], result[l]);
      }
      point[run.lane_axis] = 0;
    } while (advance(point, run.inner_axes, run.extents));
    T total = init;
    for (int l = 0; l < lanes; ++l) total = combine(combiner, total, acc[l]);
    store(run, out_dtype, out_off, total);
  }
}

// Picks the lane axis: a spatial axis of extent >= 8 (the innermost such), else the largest
// reduction axis of extent >= 8, else the largest spatial axis.
void choose_lanes(NodeRun& run) {
  const TeNode& node = run.node;
  const int ns = node.num_spatial();
  for (int ax = ns - 1; ax >= 0; --ax)
    if (run.extents[ax] >= 8) { run.lane_axis = ax; break; }
  if (run.lane_axis < 0 && node.num_reduction() > 0) {
    int best = -1;
    for (int ax = ns; ax < node.num_axes(); ++ax)
      if (run.extents[ax] >= 8 && (best < 0 || run.extents[ax] > run.extents[best])) best = ax;
    if (best >= 0) {
      run.lane_axis = best;
      run.lanes_reduce = true;
    }
  }
  if (run.lane_axis < 0) {
    for (int ax = 0; ax < ns; ++ax)
      if (run.lane_axis < 0 || run.extents[ax] > run.extents[run.lane_axis]) run.lane_axis = ax;
  }
  for (int ax = 0; ax < ns; ++ax)
    if (ax != run.lane_axis) run.outer_axes.push_back(ax);
  for (int ax = ns; ax < node.num_axes(); ++ax)
    if (ax != run.lane_axis) run.inner_axes.push_back(ax);
}

// The point-by-point path: every point of a box of the domain (`begin`, `extent` over all axes),
// one lane at a time, reporting each in-range read to `observer` when set. Input i is read through
// a window: `inputs[i]` holds the box of the tensor that starts at `origins[i]` (nullptr: the whole
// tensor). The output is the whole tensor (elements outside the box stay 0) or, with
// `window_output`, only the box's spatial part. Independent of the lane machinery above except for
// the program.
HostTensor evaluate_points(const TeNode& node, const std::vector<const HostTensor*>& inputs,
                           const std::vector<const int64_t*>& origins, const std::vector<int64_t>& begin,
                           const std::vector<int64_t>& extent, bool window_output,
                           const std::function<void(int input, const int64_t* index)>& observer) {
  const std::vector<int64_t> extents = node.extents();
  const int na = node.num_axes(), ns = node.num_spatial();
  for (int a = 0; a < na; ++a)
    TESSEL_ASSERT(begin[a] >= 0 && extent[a] >= 0 && begin[a] + extent[a] <= extents[a],
                  "domain tile outside the domain of node '", node.name(), "'");
  TensorType out_type = node.output();
  std::vector<int64_t> out_begin(ns, 0), out_extent(extents.begin(), extents.begin() + ns);
  if (window_output) {
    out_type.shape.assign(extent.begin(), extent.begin() + ns);
    out_begin.assign(begin.begin(), begin.begin() + ns);
    out_extent = out_type.shape;
  }
  HostTensor out(out_type);
  for (int a = 0; a < na; ++a)
    if (extent[a] == 0) return out;
  const Program program = compile_body(node);
  RegisterFile file(program);
  const Registers regs = file.view();
  // The output's accumulators: integer bodies exact in int64, the others in double.
  const bool integer_body = integer_register(out_type.dtype);
  std::vector<double> float_acc(integer_body ? 0 : static_cast<size_t>(out.size()));
  std::vector<int64_t> integer_acc(integer_body ? static_cast<size_t>(out.size()) : 0);
  std::vector<int64_t> out_strides(ns, 1);
  for (int a = ns - 2; a >= 0; --a) out_strides[a] = out_strides[a + 1] * out_extent[a + 1];
  std::vector<bool> touched(static_cast<size_t>(out.size()), false);
  std::vector<int64_t> point = begin, index;
  std::vector<int> order;  // gather index inputs first
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!node.inputs()[i].is_gather()) order.push_back(static_cast<int>(i));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (node.inputs()[i].is_gather()) order.push_back(static_cast<int>(i));
  for (;;) {
    for (int i : order) {
      const Access& acc = node.inputs()[i];
      const HostTensor& t = *inputs[i];
      const int64_t* origin = origins[i];
      index.assign(acc.type.rank(), 0);
      bool inside = true;
      int64_t off = 0;
      for (int r = 0; r < acc.type.rank(); ++r) {
        int64_t v = acc.map.result(r).apply(point.data());
        if (r == acc.gather_dim) {
          v = regs.i(acc.gather_index_input)[0];  // an integer (the verifier's rule)
          if (v < 0) v += acc.type.shape[r];
          if (v < 0 || v >= acc.type.shape[r])
            throw UserError("", cat("node '", node.name(), "'"),
                            cat("gather index ", v, " is out of range for a dimension of size ", acc.type.shape[r]));
        }
        index[r] = v;
        inside &= v >= 0 && v < acc.type.shape[r];
        const int64_t w = origin ? v - origin[r] : v;  // the index inside the window
        TESSEL_ASSERT(!inside || (w >= 0 && w < t.shape()[r]), "node '", node.name(), "' reads index ", v,
                      " of input ", i, " outside its window");
        off = off * t.shape()[r] + w;
      }
      if (inside && observer) observer(i, index.data());
      if (integer_register(acc.type.dtype)) regs.i(i)[0] = inside ? t.as_int(off) : acc.pad_value.as_int64();
      else regs.f(i)[0] = inside ? t[off] : acc.pad_value.as_double();
    }
    for (auto [reg, axis] : program.axis_regs) regs.i(reg)[0] = point[axis];
    for (const Instr& in : program.code) run_instr(in, regs, 1);
    int64_t o = 0;
    for (int a = 0; a < ns; ++a) o += (point[a] - out_begin[a]) * out_strides[a];
    const bool first = !touched[o];
    touched[o] = true;
    if (integer_body) {
      const int64_t v = regs.i(program.result)[0];
      const int64_t before = first ? node.init().as_int64() : integer_acc[o];
      integer_acc[o] = first && node.num_reduction() == 0 ? v : combine_integers(node.combiner(), before, v);
    } else {
      const double v = regs.f(program.result)[0];
      const double before = first ? node.init().as_double() : float_acc[o];
      float_acc[o] = first && node.num_reduction() == 0 ? v : combine_values(node.combiner(), before, v);
    }
    int a = na - 1;
    for (; a >= 0; --a) {
      if (++point[a] < begin[a] + extent[a]) break;
      point[a] = begin[a];
    }
    if (a < 0) break;
  }
  for (int64_t i = 0; i < out.size(); ++i) {
    if (!touched[i]) continue;
    if (out.holds_int64()) out.int64_data()[i] = integer_acc[i];
    else if (integer_body) out.data()[i] = static_cast<double>(wrap_integer(out.dtype(), integer_acc[i]));
    else out.data()[i] = round_to(out.dtype(), float_acc[i]);
  }
  return out;
}

}  // namespace

HostTensor evaluate_node(const TeNode& node, const std::vector<const HostTensor*>& inputs,
                         const InterpretOptions& options) {
  TESSEL_ASSERT(inputs.size() == node.inputs().size(), "node '", node.name(), "' given ",
                inputs.size(), " inputs");
  if (options.read_observer || options.domain_tile) {
    for (size_t i = 0; i < inputs.size(); ++i)
      TESSEL_ASSERT(inputs[i]->type() == node.inputs()[i].type, "node '", node.name(), "' input ", i,
                    " is ", inputs[i]->type().print(), ", expected ", node.inputs()[i].type.print());
    std::vector<int64_t> begin(node.num_axes(), 0), extent = node.extents();
    if (options.domain_tile) {
      TESSEL_ASSERT(static_cast<int>(options.domain_tile->begin.size()) == node.num_axes() &&
                        static_cast<int>(options.domain_tile->extent.size()) == node.num_axes(),
                    "domain tile of node '", node.name(), "' must have ", node.num_axes(), " axes");
      begin = options.domain_tile->begin;
      extent = options.domain_tile->extent;
    }
    return evaluate_points(node, inputs, std::vector<const int64_t*>(inputs.size(), nullptr), begin, extent, false,
                           options.read_observer);
  }
  HostTensor out(node.output());
  if (out.size() == 0) return out;
  const Program program = compile_body(node);
  NodeRun run{node, program, {}, {}, node.extents()};
  for (size_t i = 0; i < inputs.size(); ++i) {
    TESSEL_ASSERT(inputs[i]->type() == node.inputs()[i].type, "node '", node.name(), "' input ", i,
                  " is ", inputs[i]->type().print(), ", expected ", node.inputs()[i].type.print());
    run.accesses.push_back(plan_access(node.inputs()[i], *inputs[i], run.extents));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!node.inputs()[i].is_gather()) run.load_order.push_back(static_cast<int>(i));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (node.inputs()[i].is_gather()) run.load_order.push_back(static_cast<int>(i));
  // An empty reduction domain (some reduction extent 0 cannot happen: extents are >= 1).
  choose_lanes(run);
  {
    const Expr& b = node.body();
    run.contraction = node.combiner() == Combiner::sum && !run.lanes_reduce && !run.inner_axes.empty() &&
                      inputs.size() == 2 && !node.inputs()[0].is_gather() && !node.inputs()[1].is_gather() &&
                      b.op() == ExprOp::mul && b.operands()[0].op() == ExprOp::input &&
                      b.operands()[0].index() == 0 && b.operands()[1].op() == ExprOp::input &&
                      b.operands()[1].index() == 1 && is_float(b.dtype());
  }
  {
    // Row-major strides of the output over the spatial axes.
    run.out_strides.assign(node.num_axes(), 0);
    int64_t s = 1;
    for (int ax = node.num_spatial() - 1; ax >= 0; --ax) {
      run.out_strides[ax] = s;
      s *= run.extents[ax];
    }
  }
  if (out.holds_int64()) run.integer_out = out.int64_data();
  else run.out = out.data();

  int64_t rows = 1;
  for (int ax : run.outer_axes) rows *= run.extents[ax];
  if (!run.lanes_reduce && run.lane_axis >= 0)
    rows *= (run.extents[run.lane_axis] + kLanes - 1) / kLanes;
  int64_t points = 1;
  for (int64_t e : run.extents) points *= e;

  int threads = options.threads > 0 ? options.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (points < (1 << 16)) threads = 1;
  threads = static_cast<int>(std::min<int64_t>(threads, rows));
  const auto rows_of = integer_register(out.dtype()) ? &run_rows<int64_t> : &run_rows<double>;
  if (threads <= 1) {
    rows_of(run, 0, rows);
    return out;
  }
  // The rows in `threads` slices, taken from a counter by however many threads the system gives.
  std::atomic<int> next{0};
  run_on_threads(threads, [&](int) {
    for (int t = next++; t < threads; t = next++) rows_of(run, rows * t / threads, rows * (t + 1) / threads);
  });
  return out;
}

HostTensor evaluate_window(const TeNode& node, const std::vector<TensorWindow>& inputs, const DomainBox& box) {
  TESSEL_ASSERT(inputs.size() == node.inputs().size(), "node '", node.name(), "' given ", inputs.size(), " inputs");
  TESSEL_ASSERT(static_cast<int>(box.begin.size()) == node.num_axes() &&
                    static_cast<int>(box.extent.size()) == node.num_axes(),
                "box of node '", node.name(), "' must have ", node.num_axes(), " axes");
  std::vector<const HostTensor*> values;
  std::vector<const int64_t*> origins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorWindow& w = inputs[i];
    TESSEL_ASSERT(w.values && w.values->dtype() == node.inputs()[i].type.dtype &&
                      w.values->shape().size() == node.inputs()[i].type.shape.size() &&
                      (w.origin.empty() || w.origin.size() == w.values->shape().size()),
                  "node '", node.name(), "' input ", i, ": a window that does not fit ", node.inputs()[i].type.print());
    values.push_back(w.values);
    origins.push_back(w.origin.empty() ? nullptr : w.origin.data());
  }
  return evaluate_points(node, values, origins, box.begin, box.extent, true, nullptr);
}

std::vector<HostTensor> interpret(const OpGraph& graph, const std::vector<HostTensor>& inputs,
                                  const InterpretOptions& options) {
  check_graph_inputs(graph, inputs);
  std::vector<std::shared_ptr<const HostTensor>> values(graph.num_tensors());
  for (size_t i = 0; i < inputs.size(); ++i) values[graph.inputs()[i]] = std::make_shared<const HostTensor>(inputs[i]);
  const std::vector<NodeId> order = graph.topological_order();
  // Release each intermediate after its last use.
  std::vector<int> last_use(graph.num_tensors(), -1);
  for (size_t step = 0; step < order.size(); ++step)
    for (TensorId t : graph.node_inputs(order[step])) last_use[t] = static_cast<int>(step);
  for (TensorId t : graph.outputs()) last_use[t] = static_cast<int>(order.size());

  for (size_t step = 0; step < order.size(); ++step) {
    const NodeId n = order[step];
    std::vector<const HostTensor*> ins;
    for (TensorId t : graph.node_inputs(n)) {
      if (!values[t]) {
        TESSEL_ASSERT(graph.tensor(t).kind == TensorKind::weight, "tensor '", graph.tensor(t).name,
                      "' has no value");
        values[t] = std::make_shared<const HostTensor>(graph.weight_values(t));
      }
      ins.push_back(values[t].get());
    }
    values[graph.node_output(n)] = std::make_shared<const HostTensor>(evaluate_node(graph.node(n), ins, options));
    for (TensorId t : graph.node_inputs(n))
      if (last_use[t] == static_cast<int>(step) && graph.tensor(t).kind == TensorKind::intermediate)
        values[t].reset();
  }
  std::vector<HostTensor> outputs;
  for (TensorId t : graph.outputs()) {
    if (!values[t]) {
      const TensorInfo& info = graph.tensor(t);
      TESSEL_ASSERT(info.kind == TensorKind::weight, "output '", info.name, "' has no value");
      values[t] = std::make_shared<const HostTensor>(graph.weight_values(t));
    }
    outputs.push_back(*values[t]);
  }
  return outputs;
}

}  // namespace tessel
