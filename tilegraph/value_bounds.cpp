// Value bounds by interval arithmetic (value_bounds.h).
#include "tilegraph/value_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tilegraph/error.h"

namespace tessel {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Producers followed from one query at most: deeper chains are unknown (and a chain that reads a
// producer twice per level cannot blow up).
constexpr int kMaxDepth = 16;

// A range that may also hold NaN (`nan`): what an unknown value is.
struct Range {
  double lo = -kInf, hi = kInf;
  bool nan = true;
};

Range all() { return {}; }
Range point(double v) { return std::isnan(v) ? all() : Range{v, v, false}; }
// A node's constant: an exact integer that no double holds (an i64 beyond 2^53) lies between the
// doubles on either side of the one nearest to it.
Range constant_range(const Scalar& v) {
  const double d = v.as_double();
  if (!v.is_integer() || v == Scalar(d)) return point(d);
  return {std::nextafter(d, -kInf), std::nextafter(d, kInf), false};
}
Range make(double lo, double hi, bool nan) {
  if (std::isnan(lo) || std::isnan(hi)) return all();
  return {std::min(lo, hi), std::max(lo, hi), nan};
}
Range hull(const Range& a, const Range& b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi), a.nan || b.nan}; }
const Range kFalse{0, 0, false}, kTrue{1, 1, false}, kEither{0, 1, false};
bool is_true(const Range& r) { return !r.nan && r.lo == 1 && r.hi == 1; }
bool is_false(const Range& r) { return !r.nan && r.lo == 0 && r.hi == 0; }

// A monotone (non-decreasing) function applied to both ends.
template <class F> Range monotone(const Range& a, F f) { return make(f(a.lo), f(a.hi), a.nan); }

// Rounds a range to dtype t as a stored value would be (round_to is monotone for float types;
// an integer range that does not fit the type is unknown).
Range round_range(DType t, const Range& r) {
  if (t == DType::boolean) {
    if (r.nan) return kEither;
    if (r.lo == 0 && r.hi == 0) return kFalse;
    if (r.lo > 0 || r.hi < 0) return kTrue;
    return kEither;
  }
  if (is_integer(t)) {
    const double lo = std::trunc(r.lo), hi = std::trunc(r.hi);
    if (r.nan || !std::isfinite(lo) || !std::isfinite(hi) || round_to(t, lo) != lo || round_to(t, hi) != hi) return all();
    return {lo, hi, false};
  }
  return make(round_to(t, r.lo), round_to(t, r.hi), r.nan);
}

Range products(const Range& a, const Range& b) {
  const double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  for (double v : p)
    if (std::isnan(v)) return all();
  return make(*std::min_element(p, p + 4), *std::max_element(p, p + 4), a.nan || b.nan);
}

Range compare(ExprOp op, const Range& a, const Range& b) {
  if (a.nan || b.nan) return kEither;
  switch (op) {
    case ExprOp::lt: return a.hi < b.lo ? kTrue : a.lo >= b.hi ? kFalse : kEither;
    case ExprOp::le: return a.hi <= b.lo ? kTrue : a.lo > b.hi ? kFalse : kEither;
    case ExprOp::gt: return a.lo > b.hi ? kTrue : a.hi <= b.lo ? kFalse : kEither;
    case ExprOp::ge: return a.lo >= b.hi ? kTrue : a.hi < b.lo ? kFalse : kEither;
    case ExprOp::eq:
      if (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo) return kTrue;
      return a.hi < b.lo || b.hi < a.lo ? kFalse : kEither;
    case ExprOp::ne:
      if (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo) return kFalse;
      return a.hi < b.lo || b.hi < a.lo ? kTrue : kEither;
    default: return kEither;
  }
}

}  // namespace

Interval Interval::all() { return {-kInf, kInf}; }
bool Interval::known() const { return std::isfinite(lo) && std::isfinite(hi); }

int64_t IndexBox::points() const {
  int64_t n = 1;
  for (size_t i = 0; i < lo.size(); ++i) {
    if (hi[i] < lo[i]) return 0;
    n *= hi[i] - lo[i] + 1;
  }
  return n;
}

struct ValueBoundsEval {
  const OpGraph& graph;
  const std::map<TensorId, Interval>& assumed;
  std::map<TensorId, std::shared_ptr<const HostTensor>>& data;

  Range tensor(TensorId t, const IndexBox& box, int depth) {
    if (auto a = assumed.find(t); a != assumed.end()) return make(a->second.lo, a->second.hi, false);
    const TensorInfo& info = graph.tensor(t);
    if (info.kind == TensorKind::weight) return weight(t, box);
    const NodeId p = graph.producer(t);
    if (p < 0 || depth >= kMaxDepth) return all();
    return node(p, box, depth + 1);
  }

  Range weight(TensorId t, const IndexBox& box) {
    const TensorInfo& info = graph.tensor(t);
    if (!info.weight || box.points() > ValueBounds::kMaxScan) return all();
    const bool given = std::holds_alternative<std::shared_ptr<const HostTensor>>(*info.weight);
    // A weight of random values is generated (once) when it is small.
    if (!given && info.type.num_elements() > ValueBounds::kMaxScan) return all();
    auto& values = data[t];
    if (!values) values = given && !info.sparsity ? std::get<std::shared_ptr<const HostTensor>>(*info.weight)
                                                  : std::make_shared<const HostTensor>(graph.weight_values(t));
    const std::vector<int64_t>& shape = info.type.shape;
    const int r = static_cast<int>(shape.size());
    if (box.points() == 0) return all();
    std::vector<int64_t> stride(r, 1);
    for (int i = r - 2; i >= 0; --i) stride[i] = stride[i + 1] * shape[i + 1];
    std::vector<int64_t> at = box.lo;
    Range out{kInf, -kInf, false};
    for (;;) {
      int64_t flat = 0;
      for (int i = 0; i < r; ++i) flat += at[i] * stride[i];
      const double v = (*values)[flat];
      if (std::isnan(v)) return all();
      // An i64 value beyond 2^53 rounds to a double on either side of it: the bounds take the
      // doubles around it, so they still hold it.
      const bool rounded = values->holds_int64() && saturating_int64(v) != values->as_int(flat);
      out.lo = std::min(out.lo, rounded ? std::nextafter(v, -kInf) : v);
      out.hi = std::max(out.hi, rounded ? std::nextafter(v, kInf) : v);
      int i = r - 1;
      for (; i >= 0; --i) {
        if (++at[i] <= box.hi[i]) break;
        at[i] = box.lo[i];
      }
      if (i < 0) break;
    }
    return out;
  }

  Range node(NodeId n, const IndexBox& box, int depth) {
    const TeNode& nd = graph.node(n);
    if (nd.num_reduction() > 0) return all();
    std::vector<int64_t> spatial = nd.extents();
    spatial.resize(nd.num_spatial());
    if (nd.output().shape != spatial) return all();  // a reshaped output: indices are not the domain's
    return round_range(nd.output().dtype, eval(nd.body(), n, box, depth));
  }

  // The bounds of input k of node n read over the domain box `box`.
  Range read(NodeId n, int k, const IndexBox& box, int depth) {
    const TeNode& nd = graph.node(n);
    const Access& acc = nd.inputs()[k];
    if (acc.is_gather()) return all();
    const std::vector<int64_t>& shape = acc.type.shape;
    IndexBox image;
    bool outside = false;
    for (int r = 0; r < acc.map.num_results(); ++r) {
      const AffineExpr& row = acc.map.result(r);
      int64_t lo = row.offset, hi = row.offset;
      for (size_t a = 0; a < row.coeffs.size(); ++a) {
        const int64_t c = row.coeffs[a];
        if (c == 0) continue;
        if (a >= box.lo.size()) return all();
        lo += c * (c > 0 ? box.lo[a] : box.hi[a]);
        hi += c * (c > 0 ? box.hi[a] : box.lo[a]);
      }
      if (lo < 0 || hi > shape[r] - 1) outside = true;
      image.lo.push_back(std::max<int64_t>(lo, 0));
      image.hi.push_back(std::min<int64_t>(hi, shape[r] - 1));
    }
    Range pad = constant_range(acc.pad_value);  // (make_node rounded it to the dtype)
    if (image.points() == 0) return pad;
    Range v = tensor(graph.node_inputs(n)[k], image, depth);
    return outside ? hull(v, pad) : v;
  }

  Range eval(const Expr& e, NodeId n, const IndexBox& box, int depth) {
    const ExprOp op = e.op();
    switch (op) {
      case ExprOp::constant: return constant_range(e.scalar());
      case ExprOp::axis_index:
        if (e.index() >= static_cast<int>(box.lo.size())) return all();
        return {static_cast<double>(box.lo[e.index()]), static_cast<double>(box.hi[e.index()]), false};
      case ExprOp::input: return read(n, e.index(), box, depth);
      case ExprOp::select: {
        const Range c = eval(e.operands()[0], n, box, depth);
        if (is_true(c)) return eval(e.operands()[1], n, box, depth);
        if (is_false(c)) return eval(e.operands()[2], n, box, depth);
        return hull(eval(e.operands()[1], n, box, depth), eval(e.operands()[2], n, box, depth));
      }
      case ExprOp::cast: return round_range(e.dtype(), eval(e.operands()[0], n, box, depth));
      default: break;
    }
    if (is_unary(op)) {
      const Range a = eval(e.operands()[0], n, box, depth);
      switch (op) {
        case ExprOp::neg: return make(-a.hi, -a.lo, a.nan);
        case ExprOp::abs:
          if (a.lo >= 0) return a;
          if (a.hi <= 0) return make(-a.hi, -a.lo, a.nan);
          return make(0, std::max(-a.lo, a.hi), a.nan);
        case ExprOp::exp: return monotone(a, [](double v) { return std::exp(v); });
        case ExprOp::tanh: return monotone(a, [](double v) { return std::tanh(v); });
        case ExprOp::sigmoid: return monotone(a, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
        case ExprOp::floor: return monotone(a, [](double v) { return std::floor(v); });
        case ExprOp::ceil: return monotone(a, [](double v) { return std::ceil(v); });
        case ExprOp::round: return monotone(a, [](double v) { return std::nearbyint(v); });
        case ExprOp::sign: return monotone(a, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; });
        case ExprOp::logical_not: return is_true(a) ? kFalse : is_false(a) ? kTrue : kEither;
        default: return e.dtype() == DType::boolean ? kEither : all();
      }
    }
    if (is_binary(op)) {
      const Range a = eval(e.operands()[0], n, box, depth), b = eval(e.operands()[1], n, box, depth);
      if (is_comparison(op)) return compare(op, a, b);
      const DType t = e.dtype();
      Range r;
      switch (op) {
        case ExprOp::add: r = make(a.lo + b.lo, a.hi + b.hi, a.nan || b.nan); break;
        case ExprOp::sub: r = make(a.lo - b.hi, a.hi - b.lo, a.nan || b.nan); break;
        case ExprOp::mul: r = products(a, b); break;
        case ExprOp::div:
          if (b.lo > 0 || b.hi < 0) {
            r = products(a, Range{1.0 / b.hi, 1.0 / b.lo, b.nan});
            if (is_integer(t)) r = monotone(r, [](double v) { return std::trunc(v); });
          } else {
            r = all();
          }
          break;
        case ExprOp::min: r = make(std::min(a.lo, b.lo), std::min(a.hi, b.hi), a.nan || b.nan); break;
        case ExprOp::max: r = make(std::max(a.lo, b.lo), std::max(a.hi, b.hi), a.nan || b.nan); break;
        case ExprOp::logical_and: r = is_false(a) || is_false(b) ? kFalse : is_true(a) && is_true(b) ? kTrue : kEither; break;
        case ExprOp::logical_or: r = is_true(a) || is_true(b) ? kTrue : is_false(a) && is_false(b) ? kFalse : kEither; break;
        default: return t == DType::boolean ? kEither : all();
      }
      return round_range(t, r);
    }
    return all();
  }
};

ValueBounds::ValueBounds(const OpGraph& graph) : graph_(graph) {}
ValueBounds::~ValueBounds() = default;

void ValueBounds::assume(TensorId t, Interval range) { assumed_[t] = range; }

Interval ValueBounds::tensor(TensorId t, const IndexBox& box) const {
  ValueBoundsEval e{graph_, assumed_, data_};
  const Range r = e.tensor(t, box, 0);
  return r.nan ? Interval::all() : Interval{r.lo, r.hi};
}

Interval ValueBounds::input(NodeId n, int k, const IndexBox& box) const {
  ValueBoundsEval e{graph_, assumed_, data_};
  const Range r = e.read(n, k, box, 0);
  return r.nan ? Interval::all() : Interval{r.lo, r.hi};
}

Interval ValueBounds::node(NodeId n, const IndexBox& box) const {
  ValueBoundsEval e{graph_, assumed_, data_};
  const Range r = e.node(n, box, 0);
  return r.nan ? Interval::all() : Interval{r.lo, r.hi};
}

}  // namespace tessel
