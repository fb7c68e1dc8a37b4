// simplify_views (normalize_views.h): scalar ops moved before transposes, view chains in their
// canonical form, MatMul reading a transposed B directly.
#include "tilegraph/normalize_views.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tilegraph/error.h"

namespace tessel {

namespace {

const std::set<std::string> kViewOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Gather"};
// Elementwise ops of one tensor input that commute with any transpose of it.
const std::set<std::string> kUnary = {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Erf", "Gelu", "Reciprocal",
                                      "Softplus", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Clip"};
const std::set<std::string> kScalarBinary = {"Add", "Sub", "Mul", "Div"};
// Rewrite s walks a column set and a per-column table of the source's last axis: at most this wide.
constexpr int64_t kMaxScaledColumns = int64_t{1} << 20;

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<int64_t>());
}

/// A view of a contiguous source tensor, in the manner of layout algebras: each dimension is a
/// row-major list of leaves (extent, stride), so that a dimension merged from pieces that are not
/// adjacent in memory stays exact; element i of the view is source element offset + the sum over
/// dimensions of their index decomposed over the leaves times the strides. Leaves of extent 1 are
/// dropped (a dimension of extent 1 has none).
struct Leaf {
  int64_t extent, stride;
};
struct View {
  std::vector<int64_t> shape;
  std::vector<std::vector<Leaf>> dims;
  int64_t offset = 0;
};

View contiguous(const std::vector<int64_t>& shape) {
  View v{shape, std::vector<std::vector<Leaf>>(shape.size()), 0};
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] != 1) v.dims[d].push_back({shape[d], stride});
    stride *= shape[d];
  }
  return v;
}

/// Adjacent leaves that are one run in memory become one.
std::vector<Leaf> coalesced(const std::vector<Leaf>& leaves) {
  std::vector<Leaf> out;
  for (const Leaf& l : leaves) {
    if (!out.empty() && out.back().stride == l.extent * l.stride) {
      out.back() = {out.back().extent * l.extent, l.stride};
      continue;
    }
    out.push_back(l);
  }
  return out;
}

/// `v` reshaped to `to` (row-major, as ONNX's Reshape): the leaves regrouped into the new
/// dimensions, a leaf split where a boundary falls inside it (nullopt when its extent does not
/// divide there: the result is not a view of the source).
std::optional<View> reshaped(const View& v, const std::vector<int64_t>& to) {
  if (product(v.shape) != product(to) || product(to) == 0) return std::nullopt;
  std::vector<Leaf> leaves;
  for (const std::vector<Leaf>& d : v.dims) leaves.insert(leaves.end(), d.begin(), d.end());
  View r{to, std::vector<std::vector<Leaf>>(to.size()), v.offset};
  size_t next = 0;
  for (size_t d = 0; d < to.size(); ++d) {
    int64_t need = to[d];
    while (need > 1) {
      if (next == leaves.size()) return std::nullopt;
      Leaf& l = leaves[next];
      if (l.extent <= need) {
        if (need % l.extent != 0) return std::nullopt;
        r.dims[d].push_back(l);
        need /= l.extent;
        ++next;
      } else {
        if (l.extent % need != 0) return std::nullopt;
        const int64_t inner = l.extent / need;
        r.dims[d].push_back({need, l.stride * inner});
        l.extent = inner;
        need = 1;
      }
    }
    r.dims[d] = coalesced(r.dims[d]);
  }
  if (next != leaves.size()) return std::nullopt;
  return r;
}

/// The canonical ops of a view of a source of `source_shape`: Reshape to `split` (dimensions of
/// the source only split), a Gather of `picks` (axis of `split`, index; descending axes), a
/// Transpose by `perm` of what is left, a Reshape to the view's shape (dimensions of size 1 only).
struct Canonical {
  std::vector<int64_t> split;
  std::vector<std::pair<int, int64_t>> picks;
  std::vector<int64_t> perm;
  bool reshape_split = false, transpose = false, reshape_units = false;
  int num_ops() const { return int{reshape_split} + static_cast<int>(picks.size()) + int{transpose} + int{reshape_units}; }
};

std::optional<Canonical> canonical(const View& v, const std::vector<int64_t>& source_shape) {
  const int64_t total = product(source_shape);
  struct Dim {
    int64_t extent, stride;
    int y;  // dimension of the view, -1 for a dimension of the source the view takes one index of
  };
  std::vector<Dim> dims;
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] == 1) continue;
    if (v.dims[d].size() != 1) return std::nullopt;  // a merge of pieces apart in memory: a copy
    dims.push_back({v.shape[d], v.dims[d][0].stride, static_cast<int>(d)});
  }
  if (dims.empty() || total <= 0) return std::nullopt;
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  std::vector<Dim> inner_first;
  int64_t p = 1;
  for (const Dim& d : dims) {
    if (d.stride < p || d.stride % p != 0) return std::nullopt;  // overlapping or broadcast
    if (d.stride / p > 1) inner_first.push_back({d.stride / p, 0, -1});
    inner_first.push_back(d);
    p = d.stride * d.extent;
  }
  if (total % p != 0) return std::nullopt;
  if (total / p > 1) inner_first.push_back({total / p, 0, -1});
  Canonical c;
  std::vector<int> kept;  // view dimensions in split order
  int64_t cum = 1;
  std::vector<int64_t> digit(inner_first.size());
  for (size_t j = 0; j < inner_first.size(); ++j) {
    digit[j] = (v.offset / cum) % inner_first[j].extent;
    cum *= inner_first[j].extent;
  }
  if (v.offset < 0 || v.offset >= total) return std::nullopt;
  const int n = static_cast<int>(inner_first.size());
  for (int j = n - 1; j >= 0; --j) {
    const int axis = n - 1 - j;
    c.split.push_back(inner_first[j].extent);
    if (inner_first[j].y < 0) {
      c.picks.push_back({axis, digit[j]});
    } else {
      if (digit[j] != 0) return std::nullopt;  // a slice, not a view of whole dimensions
      kept.push_back(inner_first[j].y);
    }
  }
  std::reverse(c.picks.begin(), c.picks.end());  // descending axes: each Gather leaves the others in place
  c.reshape_split = c.split != source_shape;
  std::vector<int> order;  // non-unit view dimensions in view order
  for (const Dim& d : dims) order.push_back(d.y);
  std::sort(order.begin(), order.end());
  for (int y : order) c.perm.push_back(std::find(kept.begin(), kept.end(), y) - kept.begin());
  for (size_t i = 0; i < c.perm.size(); ++i) c.transpose |= c.perm[i] != static_cast<int64_t>(i);
  c.reshape_units = order.size() != v.shape.size();
  if (c.transpose && c.reshape_units) {
    // The view's dimensions of size 1 go into the split (in front), through the picks, and the
    // Transpose puts them in place: no Reshape after it, so that the chain ends in the Transpose,
    // which a streamed attention kernel folds into its reads and a MatMul reads as a transposed B
    // (Q, K and V picked from a projection at batch 1).
    const int units = static_cast<int>(v.shape.size() - order.size());
    c.split.insert(c.split.begin(), units, 1);
    for (auto& pick : c.picks) pick.first += units;
    c.perm.clear();
    int u = 0;
    for (size_t y = 0; y < v.shape.size(); ++y)
      c.perm.push_back(v.shape[y] == 1 ? u++ : units + (std::find(kept.begin(), kept.end(), static_cast<int>(y)) - kept.begin()));
    c.reshape_split = true;
    c.reshape_units = false;
  }
  return c;
}

class ViewSimplifier {
 public:
  ViewSimplifier(ModelDef& model, const ViewContext& ctx, ViewReport& report) : m_(model), ctx_(ctx), report_(report) {}

  void run() {
    splits_as_picks();
    move_scalar_ops();
    scales_into_sources();
    collapse_chains();
    matmul_trans_b();
  }

 private:
  ModelDef& m_;
  const ViewContext& ctx_;
  ViewReport& report_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> readers_;
  std::set<std::string> model_outputs_, model_inputs_;

  void index() {
    producer_.clear();
    readers_.clear();
    model_outputs_ = std::set<std::string>(m_.outputs.begin(), m_.outputs.end());
    model_inputs_.clear();
    for (const ValueDecl& v : m_.inputs) model_inputs_.insert(v.name);
    for (size_t i = 0; i < m_.ops.size(); ++i) {
      for (const std::string& o : m_.ops[i].outputs)
        if (!o.empty()) producer_[o] = static_cast<int>(i);
      for (const std::string& in : m_.ops[i].inputs)
        if (!in.empty()) readers_[in].push_back(static_cast<int>(i));
    }
  }
  const OpDef* producer(const std::string& t) const {
    auto it = producer_.find(t);
    return it == producer_.end() ? nullptr : &m_.ops[it->second];
  }
  /// Read by exactly op `op` once, and not a model output.
  bool only_read_by(const std::string& t, int op) const {
    auto it = readers_.find(t);
    return !model_outputs_.count(t) && it != readers_.end() && it->second.size() == 1 && it->second[0] == op;
  }
  std::optional<TensorType> type_of(const std::string& t) const {
    if (auto it = ctx_.added_types->find(t); it != ctx_.added_types->end()) return it->second;
    if (auto type = ctx_.type_of(t)) return type;
    // A Constant op's output, which lowering folds away (torchvision's ViT picks Q, K and V with
    // Gathers of Constant indices): the type of its value.
    const OpDef* p = producer(t);
    if (!p || p->op_type != "Constant" || !p->domain.empty()) return std::nullopt;
    auto it = p->attrs.find("value");
    const HostTensor* h = it == p->attrs.end() ? nullptr : std::get_if<HostTensor>(&it->second);
    return h ? std::optional<TensorType>(h->type()) : std::nullopt;
  }
  std::optional<std::vector<int64_t>> ints_of(const std::string& t) const {
    if (auto w = ctx_.ints_of(t)) return w;
    const OpDef* p = producer(t);
    if (!p || p->op_type != "Constant" || !p->domain.empty()) return std::nullopt;
    auto it = p->attrs.find("value");
    if (it == p->attrs.end()) return std::nullopt;
    const HostTensor* h = std::get_if<HostTensor>(&it->second);
    if (!h || !is_integer(h->dtype())) return std::nullopt;
    return h->as_ints();
  }
  std::vector<int64_t> attr_ints(const OpDef& op, const std::string& name) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return {};
    const std::vector<int64_t>* v = std::get_if<std::vector<int64_t>>(&it->second);
    return v ? *v : std::vector<int64_t>{};
  }
  int64_t attr_int(const OpDef& op, const std::string& name, int64_t dflt) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return dflt;
    const int64_t* v = std::get_if<int64_t>(&it->second);
    return v ? *v : dflt;
  }
  /// The Transpose's permutation (default: reversed dimensions), nullopt when it is not one.
  std::optional<std::vector<int64_t>> perm_of(const OpDef& t, int rank) const {
    std::vector<int64_t> perm = attr_ints(t, "perm");
    if (t.attrs.count("perm") == 0) {
      perm.resize(rank);
      for (int i = 0; i < rank; ++i) perm[i] = rank - 1 - i;
    }
    if (static_cast<int>(perm.size()) != rank) return std::nullopt;
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < rank; ++i)
      if (sorted[i] != i) return std::nullopt;
    return perm;
  }
  std::string add_tensor(const std::string& base, const TensorType& type) {
    const std::string name = ctx_.fresh_tensor(base);
    (*ctx_.added_types)[name] = type;
    return name;
  }
  void drop_dead_views() {
    for (bool again = true; again;) {
      again = false;
      index();
      std::vector<OpDef> kept;
      for (OpDef& op : m_.ops) {
        const bool dead = kViewOps.count(op.op_type) && op.domain.empty() && op.outputs.size() == 1 &&
                          !readers_.count(op.outputs[0]) && !model_outputs_.count(op.outputs[0]);
        if (dead) {
          again = true;
          continue;
        }
        kept.push_back(std::move(op));
      }
      m_.ops = std::move(kept);
    }
    index();
  }

  // ---- 0. Unbinding Splits ------------------------------------------------------------------------

  /// A Split of a tensor into pieces of one index each along an axis (PyTorch's unbind: timm's
  /// `q, k, v = qkv.unbind(0)`) is one Gather per piece of a one-element index list (which keeps
  /// the axis, of extent 1): a view each, so that the chains after them compose (rewrite b).
  void splits_as_picks() {
    index();
    // Which Splits unbind, decided over the ops as they stand (ints_of reads the Constant ops that
    // give a Split's sizes, so nothing is moved before every Split has been looked at).
    std::vector<bool> unbinds(m_.ops.size(), false);
    std::vector<int64_t> axes(m_.ops.size(), 0);
    for (size_t i = 0; i < m_.ops.size(); ++i) {
      const OpDef& op = m_.ops[i];
      const auto x = op.op_type == "Split" && op.domain.empty() && !op.inputs.empty() ? type_of(op.inputs[0]) : std::nullopt;
      int64_t axis = x ? attr_int(op, "axis", 0) : 0;
      if (x && axis < 0) axis += x->rank();
      bool unbind = x && axis >= 0 && axis < x->rank() && static_cast<int64_t>(op.outputs.size()) == x->shape[axis] &&
                    x->shape[axis] > 1;
      if (unbind) {
        std::vector<int64_t> sizes = attr_ints(op, "split");
        if (op.inputs.size() > 1 && !op.inputs[1].empty()) {
          const auto v = ints_of(op.inputs[1]);
          unbind = v.has_value();
          if (v) sizes = *v;
        }
        for (int64_t n : sizes) unbind &= n == 1;
        for (const std::string& o : op.outputs) unbind &= !o.empty();
      }
      unbinds[i] = unbind;
      axes[i] = axis;
    }
    std::vector<OpDef> out;
    for (size_t i = 0; i < m_.ops.size(); ++i) {
      OpDef& op = m_.ops[i];
      if (!unbinds[i]) {
        out.push_back(std::move(op));
        continue;
      }
      const int64_t axis = axes[i];  // (decided above: type_of may read ops moved out by now)
      for (size_t o = 0; o < op.outputs.size(); ++o) {
        OpDef g;
        g.name = ctx_.fresh_op(op.name + "_pick");
        g.op_type = "Gather";
        g.inputs = {op.inputs[0], ctx_.add_ints(op.name + "_index", {static_cast<int64_t>(o)}, {1})};
        g.outputs = {op.outputs[o]};
        g.attrs["axis"] = axis;
        out.push_back(std::move(g));
      }
      ++report_.splits_as_picks;
    }
    m_.ops = std::move(out);
  }

  // ---- a. Scalar elementwise ops before transposes ---------------------------------------------

  void move_scalar_ops() {
    for (bool again = true; again;) {
      again = false;
      index();
      for (size_t e = 0; e < m_.ops.size() && !again; ++e) {
        OpDef& op = m_.ops[e];
        if (!op.domain.empty() || op.outputs.size() != 1 || op.inputs.empty()) continue;
        int slot = -1;
        if (kUnary.count(op.op_type)) {
          slot = 0;
          for (size_t i = 1; i < op.inputs.size(); ++i)  // Clip's bounds
            if (!op.inputs[i].empty() && (!type_of(op.inputs[i]) || type_of(op.inputs[i])->num_elements() != 1)) slot = -1;
        } else if ((kScalarBinary.count(op.op_type) || op.op_type == "MatMul") && op.inputs.size() == 2) {
          slot = 0;  // the other input is checked against the permutation below
          if (op.op_type != "MatMul" && !producer_is_transpose(op.inputs[0])) slot = 1;
        }
        if (slot < 0) continue;
        const OpDef* t = producer(op.inputs[slot]);
        if (!t || t->op_type != "Transpose" || !t->domain.empty() || !only_read_by(op.inputs[slot], static_cast<int>(e))) continue;
        const auto y = type_of(t->inputs[0]), out = type_of(op.outputs[0]), mid = type_of(op.inputs[slot]);
        if (!y || !out || !mid || out->rank() != mid->rank()) continue;
        const auto perm = perm_of(*t, y->rank());
        if (!perm) continue;
        // The trailing dimensions the permutation leaves in place: an input broadcast over the
        // others only (a scalar, a bias along the last axis) reads the same values either way,
        // and a MatMul by a matrix acts on the last dimension alone.
        int fixed = 0;
        while (fixed < y->rank() && (*perm)[y->rank() - 1 - fixed] == y->rank() - 1 - fixed) ++fixed;
        bool ok = true;
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          if (static_cast<int>(i) == slot || op.inputs[i].empty()) continue;
          const auto other = type_of(op.inputs[i]);
          if (!other) ok = false;
          else if (op.op_type == "MatMul") ok &= i == 1 && other->rank() == 2 && fixed >= 1 && attr_int(op, "transB", 0) == 0;
          else ok &= other->num_elements() == 1 || other->rank() <= fixed;
        }
        if (!ok) continue;
        // op reads y; its result, of y's shape, is transposed into op's old output.
        const int ti = producer_.at(op.inputs[slot]);
        const std::string result = op.outputs[0];
        std::vector<int64_t> shape = y->shape;  // op's result before the transpose
        if (op.op_type == "MatMul") shape.back() = out->shape.back();  // N (the permutation keeps the last axis)
        const std::string moved = add_tensor(result + "_untransposed", TensorType{out->dtype, shape});
        op.inputs[slot] = m_.ops[ti].inputs[0];
        op.outputs[0] = moved;
        OpDef& tr = m_.ops[ti];
        tr.inputs[0] = moved;
        tr.outputs[0] = result;
        ++report_.scalars_moved;
        again = true;
      }
    }
  }

  bool producer_is_transpose(const std::string& t) const {
    const OpDef* p = producer(t);
    return p && p->op_type == "Transpose";
  }

  // ---- s. Scalar multiplications of views moved into their source ------------------------------

  /// The columns (last-axis indices of a source of `n` columns) view `v` reads, nullopt when a
  /// leaf steps across rows other than by whole rows.
  static std::optional<std::set<int64_t>> columns_of(const View& v, int64_t n) {
    std::vector<Leaf> inner;
    for (const std::vector<Leaf>& d : v.dims)
      for (Leaf l : d) {
        if (l.stride < 0) return std::nullopt;
        if (l.stride % n == 0) continue;  // whole rows (or a broadcast, stride 0)
        if (l.stride < n && n % l.stride == 0 && l.extent * l.stride > n && l.extent * l.stride % n == 0)
          l.extent = n / l.stride;  // a run over whole rows: its part inside one
        if (l.stride > n || (l.extent - 1) * l.stride >= n) return std::nullopt;
        inner.push_back(l);
      }
    std::set<int64_t> cols{v.offset % n};
    for (const Leaf& l : inner) {
      std::set<int64_t> next;
      for (int64_t c : cols)
        for (int64_t i = 0; i < l.extent; ++i) {
          if (c + i * l.stride >= n) return std::nullopt;
          next.insert(c + i * l.stride);
        }
      cols = std::move(next);
    }
    return cols;
  }

  void scales_into_sources() {
    if (!ctx_.scalar_of || !ctx_.add_weight) return;
    index();
    std::set<std::string> sources;
    for (const OpDef& op : m_.ops)
      if (op.op_type == "Mul" && op.domain.empty() && op.inputs.size() == 2 && op.outputs.size() == 1)
        for (const std::string& in : op.inputs) {
          // The source of the view chain `in` ends, if any.
          std::string t = in;
          int steps = 0;
          while (const OpDef* p = producer(t)) {
            if (!is_view(*p)) break;
            t = p->inputs[0];
            ++steps;
          }
          if (steps > 0 && producer(t)) sources.insert(t);
        }
    for (const std::string& x : sources) scale_into(x);
  }

  /// Rewrite s for source `x` (normalize_views.h), when it applies.
  void scale_into(const std::string& x) {
    index();
    const auto xt = type_of(x);
    if (!xt || xt->rank() < 1 || model_outputs_.count(x) || !is_float(xt->dtype)) return;
    // Only where the producer takes the column scale in its epilogue: a contraction, or the bias
    // add after one (elsewhere a multiplication of the whole of x could be a kernel of its own
    // where the picked piece's was smaller).
    auto contraction = [&](const OpDef* p) { return p && (p->op_type == "MatMul" || p->op_type == "Gemm") && p->domain.empty(); };
    const OpDef* px = producer(x);
    bool epilogue = contraction(px);
    if (px && px->op_type == "Add" && px->domain.empty())
      for (const std::string& in : px->inputs) epilogue |= contraction(producer(in));
    if (!epilogue) return;
    const int64_t n = xt->shape.back();
    if (n <= 0 || n > kMaxScaledColumns) return;
    // Walk the views of x: each reader that is not a view reads a set of columns, scaled (a
    // scalar Mul of a view) or not.
    struct Read {
      std::set<int64_t> cols;
      int mul = -1;  // the Mul's op index, -1: read as it is
      double scale = 1;
      std::string view;  // the view the Mul reads
    };
    std::vector<Read> reads;
    bool ok = true;
    std::function<void(const std::string&, const View&)> walk = [&](const std::string& t, const View& v) {
      if (!ok) return;
      const bool viewed = t != x;
      if (model_outputs_.count(t)) {
        if (auto c = columns_of(v, n)) reads.push_back({*c, -1, 1.0, {}}); else ok = false;
      }
      auto it = readers_.find(t);
      if (it == readers_.end()) return;
      for (int r : it->second) {
        const OpDef& op = m_.ops[r];
        if (op.op_type == "Shape" && op.domain.empty()) continue;  // reads no value
        if (is_view(op) && op.inputs[0] == t) {
          if (auto w = apply(op, v)) walk(op.outputs[0], *w); else ok = false;
          continue;
        }
        const auto c = columns_of(v, n);
        if (!c) { ok = false; return; }
        Read read{*c, -1, 1.0, {}};
        if (viewed && op.op_type == "Mul" && op.domain.empty() && op.inputs.size() == 2 && op.outputs.size() == 1 &&
            op.inputs[0] != op.inputs[1] && !model_outputs_.count(op.outputs[0])) {
          const std::string& other = op.inputs[0] == t ? op.inputs[1] : op.inputs[0];
          const auto ot = type_of(other), tt = type_of(t), yt = type_of(op.outputs[0]);
          const auto value = ot && tt && yt && ot->num_elements() == 1 && ot->dtype == xt->dtype && yt->shape == tt->shape
                                 ? ctx_.scalar_of(other)
                                 : std::nullopt;
          if (value && std::isfinite(*value)) {
            read.mul = r;
            read.scale = *value;
            read.view = t;
          }
        }
        reads.push_back(std::move(read));
      }
    };
    walk(x, contiguous(xt->shape));
    if (!ok) return;
    std::vector<double> scale(n, 1.0);
    std::vector<int> owner(n, -2);  // -2: not read; -1: read unscaled; else the reads index scaling it
    bool any = false;
    for (size_t i = 0; i < reads.size(); ++i) {
      const Read& r = reads[i];
      any |= r.mul >= 0;
      for (int64_t c : r.cols) {
        const int o = owner[c];
        if (o == -2) {
          owner[c] = r.mul >= 0 ? static_cast<int>(i) : -1;
          scale[c] = r.scale;
          continue;
        }
        // Another reader of the column: only the same scale (or both unscaled) will do.
        const double other = o == -1 ? 1.0 : reads[o].scale;
        if ((o == -1) != (r.mul < 0) || other != r.scale) return;
      }
    }
    if (!any) return;
    // x_scaled = x * scale (over the last axis), right after x's producer; every reader of x
    // reads it; the scaled Muls go, their readers reading the views instead.
    const std::string scaled = add_tensor(x + "_scaled", *xt);
    const std::string weight = ctx_.add_weight(x + "_column_scale", HostTensor(TensorType{xt->dtype, {n}}, scale));
    for (OpDef& op : m_.ops)
      for (std::string& in : op.inputs)
        if (in == x) in = scaled;
    std::map<std::string, std::string> replaced;  // a scaled Mul's output -> its view
    std::set<int> dropped;
    for (const Read& r : reads)
      if (r.mul >= 0 && dropped.insert(r.mul).second) {
        replaced[m_.ops[r.mul].outputs[0]] = r.view;
      }
    OpDef m;
    m.name = ctx_.fresh_op(x + "_column_scale");
    m.op_type = "Mul";
    m.inputs = {x, weight};
    m.outputs = {scaled};
    std::vector<OpDef> out;
    const int at = producer_.at(x);
    for (size_t i = 0; i < m_.ops.size(); ++i) {
      if (dropped.count(static_cast<int>(i))) continue;
      OpDef op = std::move(m_.ops[i]);
      for (std::string& in : op.inputs)
        if (auto it = replaced.find(in); it != replaced.end()) in = it->second;
      out.push_back(std::move(op));
      if (static_cast<int>(i) == at) out.push_back(m);
    }
    m_.ops = std::move(out);
    report_.scales_moved += static_cast<int>(dropped.size());
  }

  // ---- b. View chains ---------------------------------------------------------------------------

  bool is_view(const OpDef& op) const {
    if (!kViewOps.count(op.op_type) || !op.domain.empty() || op.outputs.size() != 1 || op.outputs[0].empty() ||
        op.inputs.empty() || op.inputs[0].empty())
      return false;
    if (op.op_type == "Gather") {
      if (op.inputs.size() != 2) return false;
      const auto idx = ints_of(op.inputs[1]);
      const auto type = type_of(op.inputs[1]);
      return idx && idx->size() == 1 && type && type->rank() <= 1;
    }
    return true;
  }

  /// `v` after view op `op` (nullopt when not a view: unknown shapes, a copy needed).
  std::optional<View> apply(const OpDef& op, const View& v) const {
    const auto out = type_of(op.outputs[0]);
    if (!out) return std::nullopt;
    const int rank = static_cast<int>(v.shape.size());
    if (op.op_type == "Transpose") {
      const auto perm = perm_of(op, rank);
      if (!perm) return std::nullopt;
      View r;
      for (int64_t p : *perm) {
        r.shape.push_back(v.shape[p]);
        r.dims.push_back(v.dims[p]);
      }
      r.offset = v.offset;
      return r.shape == out->shape ? std::optional<View>(r) : std::nullopt;
    }
    if (op.op_type == "Gather") {
      int64_t axis = attr_int(op, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      int64_t index = (*ints_of(op.inputs[1]))[0];
      if (index < 0) index += v.shape[axis];
      if (index < 0 || index >= v.shape[axis]) return std::nullopt;
      View r = v;
      // The index over the dimension's leaves (row-major digits), each times its stride.
      for (auto l = v.dims[axis].rbegin(); l != v.dims[axis].rend(); ++l) {
        r.offset += index % l->extent * l->stride;
        index /= l->extent;
      }
      if (type_of(op.inputs[1])->rank() == 0) {
        r.shape.erase(r.shape.begin() + axis);
        r.dims.erase(r.dims.begin() + axis);
      } else {
        r.shape[axis] = 1;
        r.dims[axis].clear();
      }
      return r.shape == out->shape ? std::optional<View>(r) : std::nullopt;
    }
    return reshaped(v, out->shape);  // Reshape, Flatten, Squeeze, Unsqueeze, Identity
  }

  void collapse_chains() {
    index();
    struct Rewrite {
      int end;
      std::string source;
      TensorType source_type, result_type;
      Canonical c;
    };
    std::vector<Rewrite> rewrites;
    for (size_t e = 0; e < m_.ops.size(); ++e) {
      const OpDef& end = m_.ops[e];
      if (!is_view(end)) continue;
      bool is_end = model_outputs_.count(end.outputs[0]) > 0;
      if (auto it = readers_.find(end.outputs[0]); it != readers_.end())
        for (int r : it->second) is_end |= !is_view(m_.ops[r]);
      if (!is_end) continue;
      std::vector<const OpDef*> chain{&end};
      while (const OpDef* p = producer(chain.back()->inputs[0])) {
        if (!is_view(*p)) break;
        chain.push_back(p);
      }
      if (chain.size() < 2) continue;
      const std::string source = chain.back()->inputs[0];
      if (ints_of(source) || ctx_.ints_of(source)) continue;
      if (!producer(source) && !model_inputs_.count(source)) continue;  // a weight: lowering folds its views
      const auto st = type_of(source), rt = type_of(end.outputs[0]);
      if (!st || !rt || st->dtype != rt->dtype) continue;
      std::optional<View> v = contiguous(st->shape);
      for (auto it = chain.rbegin(); it != chain.rend() && v; ++it) v = apply(**it, *v);
      if (!v) continue;
      const std::optional<Canonical> c = canonical(*v, st->shape);
      // Worth it with fewer ops, or as many when the chain shares a view with another (Q, K and V
      // picked from one permuted projection at batch 1): then each reads the source directly and
      // the shared view, which would be a copy, goes.
      // (Shared: a view other than a Reshape -- the canonical form's split, which costs nothing
      // shared -- read by two or more distinct ops, each a view, so that it goes once they are
      // rewritten; an already canonical model is left as it is.)
      bool shared = false;
      for (size_t i = 1; i < chain.size(); ++i) {
        if (chain[i]->op_type == "Reshape") continue;
        auto it = readers_.find(chain[i]->outputs[0]);
        if (it == readers_.end() || model_outputs_.count(chain[i]->outputs[0])) continue;
        const std::set<int> distinct(it->second.begin(), it->second.end());
        bool views = distinct.size() > 1;
        for (int r : distinct) views &= is_view(m_.ops[r]) && m_.ops[r].inputs[0] == chain[i]->outputs[0];
        shared |= views;
      }
      if (!c || c->num_ops() > static_cast<int>(chain.size()) || (c->num_ops() == static_cast<int>(chain.size()) && !shared)) continue;
      rewrites.push_back({static_cast<int>(e), source, *st, *rt, *c});
      report_.ops_removed += static_cast<int>(chain.size()) - c->num_ops();
    }
    if (rewrites.empty()) return;
    std::map<std::pair<std::string, std::vector<int64_t>>, std::string> splits;  // one Reshape per source and split
    std::set<int> replaced;
    std::vector<OpDef> added;
    for (const Rewrite& r : rewrites) {
      const OpDef& end = m_.ops[r.end];
      const std::string result = end.outputs[0], base = end.name;
      const DType dtype = r.source_type.dtype;
      auto op = [&](const std::string& type, std::vector<std::string> inputs, const std::string& output) {
        OpDef o;
        o.name = ctx_.fresh_op(base + "_" + (type == "Reshape" ? "reshape" : type == "Gather" ? "pick" : "transpose"));
        o.op_type = type;
        o.inputs = std::move(inputs);
        o.outputs = {output};
        return o;
      };
      const Canonical& c = r.c;
      int remaining = c.num_ops();
      auto next = [&](const std::vector<int64_t>& shape) {
        return --remaining == 0 ? result : add_tensor(base + "_view", TensorType{dtype, shape});
      };
      std::string cur = r.source;
      std::vector<int64_t> shape = r.source_type.shape;
      if (c.reshape_split) {
        shape = c.split;
        auto key = std::make_pair(r.source, c.split);
        if (auto it = splits.find(key); it != splits.end() && remaining > 1) {
          --remaining;
          cur = it->second;
        } else {
          const std::string out = next(shape);
          added.push_back(op("Reshape", {cur, ctx_.add_ints(base + "_split", shape, {static_cast<int64_t>(shape.size())})}, out));
          if (out != result) splits[key] = out;
          cur = out;
        }
      }
      for (auto [axis, index] : c.picks) {
        shape.erase(shape.begin() + axis);
        const std::string out = next(shape);
        OpDef g = op("Gather", {cur, ctx_.add_ints(base + "_index", {index}, {})}, out);
        g.attrs["axis"] = int64_t{axis};
        added.push_back(std::move(g));
        cur = out;
      }
      if (c.transpose) {
        std::vector<int64_t> t;
        for (int64_t p : c.perm) t.push_back(shape[p]);
        shape = t;
        const std::string out = next(shape);
        OpDef tr = op("Transpose", {cur}, out);
        tr.attrs["perm"] = c.perm;
        added.push_back(std::move(tr));
        cur = out;
      }
      if (c.reshape_units) {
        const std::vector<int64_t>& to = r.result_type.shape;
        added.push_back(op("Reshape", {cur, ctx_.add_ints(base + "_shape", to, {static_cast<int64_t>(to.size())})}, next(to)));
      }
      TESSEL_ASSERT(remaining == 0, "a canonical view emits its ops");
      replaced.insert(r.end);
      ++report_.chains;
    }
    std::vector<OpDef> kept;
    for (size_t i = 0; i < m_.ops.size(); ++i)
      if (!replaced.count(static_cast<int>(i))) kept.push_back(std::move(m_.ops[i]));
    for (OpDef& o : added) kept.push_back(std::move(o));
    m_.ops = std::move(kept);
    drop_dead_views();
  }

  // ---- c. MatMul with a transposed B ------------------------------------------------------------

  void matmul_trans_b() {
    index();
    for (size_t i = 0; i < m_.ops.size(); ++i) {
      OpDef& mm = m_.ops[i];
      if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || attr_int(mm, "transB", 0) != 0) continue;
      const OpDef* t = producer(mm.inputs[1]);
      if (!t || t->op_type != "Transpose" || !t->domain.empty()) continue;
      const auto y = type_of(t->inputs[0]);
      if (!y || y->rank() < 2) continue;
      const int r = y->rank();
      auto perm = perm_of(*t, r);
      if (!perm) continue;
      std::swap((*perm)[r - 1], (*perm)[r - 2]);
      bool identity = true;
      for (int d = 0; d < r; ++d) identity &= (*perm)[d] == d;
      // Worth it when the Transpose goes away, or when the one it becomes keeps y's innermost
      // dimension innermost (a copy along rows) where it did not.
      const bool sole = only_read_by(mm.inputs[1], static_cast<int>(i));
      if (!identity && !(sole && (*perm)[r - 1] == r - 1)) continue;
      if (identity) {
        mm.inputs[1] = t->inputs[0];
      } else {
        // The Transpose, read only here, now gives B^T.
        OpDef& tr = m_.ops[producer_.at(mm.inputs[1])];
        tr.attrs["perm"] = *perm;
        std::vector<int64_t> shape;
        for (int64_t p : *perm) shape.push_back(y->shape[p]);
        const std::string out = add_tensor(tr.outputs[0] + "_t", TensorType{y->dtype, shape});
        tr.outputs[0] = out;
        mm.inputs[1] = out;
      }
      mm.attrs["transB"] = int64_t{1};
      ++report_.matmuls_trans_b;
    }
    drop_dead_views();
  }
};

}  // namespace

void simplify_views(ModelDef& model, const ViewContext& ctx, ViewReport& report) {
  ViewSimplifier(model, ctx, report).run();
}

}  // namespace tessel
