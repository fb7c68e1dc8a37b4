#include "random_graph.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tilegraph/error.h"

namespace tessel {

namespace {

using Shape = std::vector<int64_t>;

int64_t elements(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

// Extents a tile or vector width rarely divides, with 1s and small powers of two among them.
constexpr int64_t kExtents[] = {1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 24, 31, 32, 37};

struct Value {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& options) : rng_(seed), options_(options) {
    model_.name = cat("random_", seed);
    model_.opset = 20;
  }

  ModelDef run() {
    const int inputs = 1 + static_cast<int>(below(3));
    for (int i = 0; i < inputs; ++i) add_input(random_shape(1 + static_cast<int>(below(4))));
    const int target = options_.min_ops + static_cast<int>(below(options_.max_ops - options_.min_ops + 1));
    for (int attempts = 0; static_cast<int>(model_.ops.size()) < target && attempts < 20 * target; ++attempts) step();
    // Outputs: every value nothing consumes (inputs included only if no op exists).
    std::vector<bool> used(values_.size(), false);
    for (const OpDef& op : model_.ops)
      for (const std::string& in : op.inputs)
        for (size_t v = 0; v < values_.size(); ++v)
          if (values_[v].name == in) used[v] = true;
    for (size_t v = 0; v < values_.size(); ++v)
      if (!used[v] && !is_input(values_[v].name) && values_[v].dtype == DType::f32) model_.outputs.push_back(values_[v].name);
    if (model_.outputs.empty()) model_.outputs.push_back(values_.back().name);
    return model_;
  }

 private:
  std::mt19937_64 rng_;
  RandomGraphOptions options_;
  ModelDef model_;
  std::vector<Value> values_;  // every tensor an op may read (inputs and op outputs)
  uint64_t next_seed_ = 1;
  int next_id_ = 0;

  uint64_t below(uint64_t n) { return n <= 1 ? 0 : rng_() % n; }
  bool coin(int percent) { return static_cast<int>(below(100)) < percent; }
  int64_t extent() { return kExtents[below(std::size(kExtents))]; }
  std::string fresh(const std::string& what) { return cat(what, "_", next_id_++); }
  bool is_input(const std::string& name) const {
    for (const ValueDecl& d : model_.inputs)
      if (d.name == name) return true;
    return false;
  }

  Shape random_shape(int rank) {
    Shape s(rank);
    for (int64_t& e : s) e = extent();
    while (elements(s) > options_.max_elements) *std::max_element(s.begin(), s.end()) /= 2;
    return s;
  }

  const Value& add_input(Shape shape) {
    const std::string name = fresh("in");
    model_.inputs.push_back({name, {DType::f32, shape}});
    values_.push_back({name, shape, DType::f32});
    return values_.back();
  }

  std::string weight(const Shape& shape, DType dtype = DType::f32, double low = -1, double high = 1) {
    const std::string name = fresh("w");
    model_.weights.push_back({name, {dtype, shape}, RandomInit{RandomInit::Dist::uniform, low, high, next_seed_++}});
    return name;
  }

  // Every third such weight declares a block-sparse pattern pruned to density 1/4 or 1/2 (blocks of
  // 8 to 32, no larger than the matrix), chosen from the weight's seed so that the generator's
  // random stream -- and every other graph -- stays as it was.
  std::string maybe_sparse(const std::string& name) {
    WeightDef& w = model_.weights.back();
    const uint64_t s = std::get<RandomInit>(w.source).seed;
    if (s % 3 != 0 || w.type.rank() != 2) return name;
    const int64_t side = int64_t{8} << (s / 3 % 3);
    w.sparsity = Sparsity{Sparsity::Pattern::block, std::min(side, w.type.shape[0]), std::min(side, w.type.shape[1]),
                          s / 9 % 2 == 0 ? 0.25 : 0.5};
    return name;
  }

  std::string ints(const std::vector<int64_t>& v) {
    const std::string name = fresh("c");
    std::vector<double> data(v.begin(), v.end());
    model_.weights.push_back({name, {DType::i64, {static_cast<int64_t>(v.size())}},
                              std::make_shared<const HostTensor>(TensorType{DType::i64, {static_cast<int64_t>(v.size())}}, data)});
    return name;
  }

  // Adds an op with one output of `shape`; returns its value.
  Value emit(const std::string& type, std::vector<std::string> inputs, Shape shape, DType dtype,
             std::map<std::string, AttrValue> attrs = {}) {
    Value out{fresh(type), std::move(shape), dtype};
    model_.ops.push_back(OpDef{out.name, type, std::move(inputs), {out.name}, std::move(attrs), ""});
    values_.push_back(out);
    return out;
  }

  // A value of dtype `t`, preferring recent ones (deep chains) but reaching back sometimes. The
  // pointer is valid until the next emit() or add_input(); callers copy the value first.
  const Value* pick(DType t = DType::f32, int min_rank = 0) {
    std::vector<size_t> ok;
    for (size_t v = 0; v < values_.size(); ++v)
      if (values_[v].dtype == t && static_cast<int>(values_[v].shape.size()) >= min_rank) ok.push_back(v);
    if (ok.empty()) return nullptr;
    const size_t k = coin(60) ? ok.size() - 1 - below(std::min<size_t>(ok.size(), 3)) : below(ok.size());
    return &values_[ok[k]];
  }

  void step() {
    switch (below(14)) {
      case 0: case 1: unary(); break;
      case 2: case 3: binary(); break;
      case 4: matmul(); break;
      case 5: conv(); break;
      case 6: pool(); break;
      case 7: reduce(); break;
      case 8: softmax_or_norm(); break;
      case 9: transpose(); break;
      case 10: reshape(); break;
      case 11: slice_or_concat(); break;
      case 12:
        if (!options_.mixed_dtypes) break;
        if (coin(40)) f16_contraction();
        else f16_island();
        break;
      case 13: where(); break;
    }
  }

  void unary(DType t = DType::f32) {
    const Value* picked = pick(t);
    if (!picked) return;
    const Value x = *picked;  // emit() grows values_, so keep a copy, not the pointer
    static const char* kOps[] = {"Relu", "Tanh", "Sigmoid", "Abs", "Neg", "Gelu", "Erf", "Sin", "Softsign", "LeakyRelu",
                                 "HardSigmoid", "Silu", "Elu"};
    const std::string op = kOps[below(std::size(kOps))];
    std::map<std::string, AttrValue> attrs;
    if (op == "Gelu") attrs["approximate"] = std::string(coin(50) ? "none" : "tanh");
    if (op == "Silu") {  // not ONNX: x * sigmoid(x) built from its parts
      const Value s = emit("Sigmoid", {x.name}, x.shape, t);
      emit("Mul", {x.name, s.name}, x.shape, t);
      return;
    }
    emit(op, {x.name}, x.shape, t, attrs);
  }

  // A shape that broadcasts against `s`: some leading axes dropped, some extents set to 1.
  Shape broadcastable(const Shape& s) {
    Shape b(s.begin() + below(s.size() + 1), s.end());
    for (int64_t& e : b)
      if (coin(30)) e = 1;
    return b;
  }

  void binary(DType t = DType::f32) {
    const Value* a = pick(t);
    if (!a) return;
    const Value x = *a;
    std::string other;
    Shape out = x.shape;
    // Another value of the same shape, or a broadcast weight (on either side).
    const Value* same = nullptr;
    for (const Value& v : values_)
      if (v.shape == x.shape && v.dtype == t && v.name != x.name && coin(50)) same = &v;
    if (same) other = same->name;
    else other = weight(broadcastable(x.shape), t);
    static const char* kOps[] = {"Add", "Sub", "Mul", "Max", "Min"};
    std::vector<std::string> in = {x.name, other};
    if (coin(30)) std::swap(in[0], in[1]);
    emit(kOps[below(std::size(kOps))], in, out, t);
  }

  void matmul() {
    const Value* a = pick(DType::f32, 1);
    if (!a) return;
    const Value x = *a;
    const int64_t k = x.shape.back();
    const int64_t n = extent() * (coin(50) ? 3 : 1);
    if (elements(x.shape) * n > options_.max_macs || elements(x.shape) / k * n > options_.max_elements) return;
    Shape out = x.shape;
    if (out.size() == 1) out.clear();
    else out.back() = n;
    if (out.empty()) out = {n};
    if (x.shape.size() == 2 && coin(40)) {  // Gemm with transposes and a broadcast bias
      const bool tb = coin(50);
      const std::string w = maybe_sparse(weight(tb ? Shape{n, k} : Shape{k, n}));
      std::vector<std::string> in = {x.name, w};
      if (coin(70)) in.push_back(weight(coin(50) ? Shape{n} : Shape{1, n}));
      emit("Gemm", in, {x.shape[0], n}, DType::f32,
           {{"alpha", 0.5}, {"beta", 1.0}, {"transA", int64_t{0}}, {"transB", int64_t{tb ? 1 : 0}}});
      return;
    }
    emit("MatMul", {x.name, maybe_sparse(weight({k, n}, DType::f32, -0.5, 0.5))}, out, DType::f32);
  }

  // A 4-D value to convolve or pool: an existing one, or a new input.
  Value image() {
    if (const Value* v = pick(DType::f32, 4); v && v->shape.size() == 4 && coin(70)) return *v;
    Shape s = {1 + static_cast<int64_t>(below(2)), extent(), 3 + static_cast<int64_t>(below(12)), 3 + static_cast<int64_t>(below(12))};
    while (elements(s) > options_.max_elements) s[1] = std::max<int64_t>(1, s[1] / 2);
    return add_input(s);
  }

  // Output extent of a window op, or 0 when the dilated window does not fit the padded input.
  static int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
    const int64_t span = dilation * (k - 1) + 1;
    if (in + 2 * pad < span) return 0;
    return (in + 2 * pad - span) / stride + 1;
  }

  // A square window's Conv attributes.
  static std::map<std::string, AttrValue> conv_attrs(int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
    return {{"kernel_shape", std::vector<int64_t>{k, k}}, {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
            {"strides", std::vector<int64_t>{stride, stride}}, {"dilations", std::vector<int64_t>{dilation, dilation}}};
  }

  void conv() {
    const Value x = image();
    const int64_t c = x.shape[1];
    std::vector<int64_t> groups_ok;
    for (int64_t g = 1; g <= c; ++g)
      if (c % g == 0) groups_ok.push_back(g);
    const int64_t group = coin(30) ? groups_ok[below(groups_ok.size())] : 1;
    const int64_t m = group * (1 + static_cast<int64_t>(below(3)));
    const int64_t k = 1 + static_cast<int64_t>(below(3)), stride = 1 + static_cast<int64_t>(below(2));
    const int64_t pad = static_cast<int64_t>(below(k + 1)), dilation = 1 + static_cast<int64_t>(below(2));
    const int64_t h = conv_out(x.shape[2], k, stride, pad, dilation), w = conv_out(x.shape[3], k, stride, pad, dilation);
    if (h < 1 || w < 1) return;
    const Shape out = {x.shape[0], m, h, w};
    if (elements(out) > options_.max_elements || elements(out) * (c / group) * k * k > options_.max_macs) return;
    std::vector<std::string> in = {x.name, weight({m, c / group, k, k}, DType::f32, -0.5, 0.5)};
    if (coin(50)) in.push_back(weight({m}));
    std::map<std::string, AttrValue> attrs = conv_attrs(k, stride, pad, dilation);
    attrs["group"] = group;
    emit("Conv", in, out, DType::f32, attrs);
  }

  void pool() {
    const Value x = image();
    const int64_t k = 2 + static_cast<int64_t>(below(2)), stride = 1 + static_cast<int64_t>(below(2));
    const int64_t pad = static_cast<int64_t>(below(k / 2 + 1));
    const int64_t h = conv_out(x.shape[2], k, stride, pad, 1), w = conv_out(x.shape[3], k, stride, pad, 1);
    if (h < 1 || w < 1) return;
    const bool max = coin(50);
    std::map<std::string, AttrValue> attrs = {{"kernel_shape", std::vector<int64_t>{k, k}},
                                              {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                                              {"strides", std::vector<int64_t>{stride, stride}}};
    if (!max) attrs["count_include_pad"] = int64_t{coin(50) ? 1 : 0};
    emit(max ? "MaxPool" : "AveragePool", {x.name}, {x.shape[0], x.shape[1], h, w}, DType::f32, attrs);
  }

  void reduce() {
    const Value* v = pick(DType::f32, 1);
    if (!v) return;
    const Value x = *v;
    const int64_t axis = static_cast<int64_t>(below(x.shape.size()));
    const bool keep = coin(50);
    Shape out = x.shape;
    if (keep) out[axis] = 1;
    else out.erase(out.begin() + axis);
    static const char* kOps[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2"};
    const int64_t signed_axis = coin(30) ? axis - static_cast<int64_t>(x.shape.size()) : axis;
    emit(kOps[below(std::size(kOps))], {x.name, ints({signed_axis})}, out, DType::f32, {{"keepdims", int64_t{keep ? 1 : 0}}});
  }

  void softmax_or_norm() {
    const Value* v = pick(DType::f32, 1);
    if (!v) return;
    const Value x = *v;
    const int64_t rank = static_cast<int64_t>(x.shape.size());
    switch (below(3)) {
      case 0: emit("Softmax", {x.name}, x.shape, DType::f32, {{"axis", static_cast<int64_t>(below(rank))}}); break;
      case 1: emit("LogSoftmax", {x.name}, x.shape, DType::f32, {{"axis", int64_t{-1}}}); break;
      default: {
        const Shape last = {x.shape.back()};
        emit("LayerNormalization", {x.name, weight(last, DType::f32, 0.5, 1.5), weight(last)}, x.shape, DType::f32,
             {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
      }
    }
  }

  void transpose() {
    const Value* v = pick(DType::f32, 2);
    if (!v) return;
    const Value x = *v;
    std::vector<int64_t> perm(x.shape.size());
    std::iota(perm.begin(), perm.end(), 0);
    for (size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[below(i + 1)]);
    Shape out(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) out[i] = x.shape[perm[i]];
    emit("Transpose", {x.name}, out, DType::f32, {{"perm", perm}});
  }

  void reshape() {
    const Value* v = pick(DType::f32, 1);
    if (!v) return;
    const Value x = *v;
    Shape out;
    if (x.shape.size() >= 2 && coin(50)) {  // merge two neighbouring axes
      const size_t a = below(x.shape.size() - 1);
      out = x.shape;
      out[a] *= out[a + 1];
      out.erase(out.begin() + a + 1);
    } else {  // split an axis with a small factor, or insert a 1
      out = x.shape;
      const size_t a = below(out.size());
      int64_t f = 1;
      for (int64_t d : {2, 3, 5, 7})
        if (out[a] % d == 0 && out[a] > d) f = d;
      out[a] /= f;
      out.insert(out.begin() + a + 1, f);
    }
    std::vector<int64_t> spec = out;
    if (coin(30)) spec[below(spec.size())] = -1;
    emit("Reshape", {x.name, ints(spec)}, out, DType::f32);
  }

  void slice_or_concat() {
    const Value* v = pick(DType::f32, 1);
    if (!v) return;
    const Value x = *v;
    const int64_t axis = static_cast<int64_t>(below(x.shape.size()));
    if (coin(50)) {  // Concat x with an elementwise image of itself along `axis`
      const Value y = emit("Tanh", {x.name}, x.shape, DType::f32);
      Shape out = x.shape;
      out[axis] *= 2;
      if (elements(out) > options_.max_elements) return;
      emit("Concat", {x.name, y.name}, out, DType::f32, {{"axis", axis}});
      return;
    }
    const int64_t e = x.shape[axis];
    const int64_t step = e > 2 && coin(40) ? (coin(30) ? -2 : 2) : 1;
    int64_t start = static_cast<int64_t>(below(e)), end = start + 1 + static_cast<int64_t>(below(e - start));
    if (step < 0) std::swap(start, end), start -= 1, end -= 1;  // walk backwards from start to end (exclusive)
    const int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    if (count < 1) return;
    Shape out = x.shape;
    out[axis] = count;
    // Walking backwards to the front: an end of -1 would count from the back, -e - 1 clamps to
    // "before index 0".
    if (step < 0 && end < 0) end = -e - 1;
    emit("Slice", {x.name, ints({start}), ints({end}), ints({axis}), ints({step})}, out, DType::f32);
  }

  void f16_island() {
    const Value* v = pick(DType::f32);
    if (!v) return;
    const Value x = *v;
    const Value h = emit("Cast", {x.name}, x.shape, DType::f16, {{"to", std::string("f16")}});
    if (coin(50)) unary(DType::f16);
    else binary(DType::f16);
    const Value& last = values_.back().dtype == DType::f16 ? values_.back() : h;
    const Value back = last;
    emit("Cast", {back.name}, back.shape, DType::f32, {{"to", std::string("f32")}});
  }

  // An f16 contraction between casts, shaped for the GPU's tensor-core paths most of the time
  // (whole 16-byte rows: extents that are multiples of 8), else awkward: a MatMul, or a
  // channels-last (NHWC) Conv with padding, strides and dilation, then maybe an f16 bias and ReLU.
  void f16_contraction() {
    auto dim = [&] { return coin(75) ? 8 * (1 + static_cast<int64_t>(below(4))) : extent(); };
    const std::map<std::string, AttrValue> to_f16 = {{"to", std::string("f16")}};
    Value y;
    if (coin(50)) {
      const int64_t m = extent(), k = dim(), n = dim();
      if (m * k * n > options_.max_macs) return;
      const std::string x = add_input({m, k}).name;
      const Value h = emit("Cast", {x}, {m, k}, DType::f16, to_f16);
      y = emit("MatMul", {h.name, maybe_sparse(weight({k, n}, DType::f16, -0.5, 0.5))}, {m, n}, DType::f16);
    } else {
      const int64_t batch = 1 + static_cast<int64_t>(below(2)), hh = 3 + static_cast<int64_t>(below(10)),
                    ww = 3 + static_cast<int64_t>(below(10)), c = dim(), m = dim();
      const int64_t k = 1 + static_cast<int64_t>(below(3)), stride = 1 + static_cast<int64_t>(below(2));
      const int64_t pad = static_cast<int64_t>(below(k + 1)), dilation = 1 + static_cast<int64_t>(below(2));
      const int64_t oh = conv_out(hh, k, stride, pad, dilation), ow = conv_out(ww, k, stride, pad, dilation);
      if (oh < 1 || ow < 1) return;
      const Shape xs = {batch, hh, ww, c}, out = {batch, oh, ow, m};
      if (elements(xs) > options_.max_elements || elements(out) > options_.max_elements ||
          elements(out) * c * k * k > options_.max_macs)
        return;
      const std::string x = add_input(xs).name;
      const Value h = emit("Cast", {x}, xs, DType::f16, to_f16);
      std::map<std::string, AttrValue> attrs = conv_attrs(k, stride, pad, dilation);
      attrs["layout"] = std::string("NHWC");
      y = emit("Conv", {h.name, weight({m, k, k, c}, DType::f16, -0.5, 0.5)}, out, DType::f16, attrs);
    }
    if (coin(50)) y = emit("Add", {y.name, weight({y.shape.back()}, DType::f16)}, y.shape, DType::f16);
    if (coin(50)) y = emit("Relu", {y.name}, y.shape, DType::f16);
    emit("Cast", {y.name}, y.shape, DType::f32, {{"to", std::string("f32")}});
  }

  void where() {
    const Value* v = pick(DType::f32);
    if (!v) return;
    const Value x = *v;
    const std::string threshold = weight(broadcastable(x.shape));
    const Value cond = emit("Greater", {x.name, threshold}, x.shape, DType::boolean);
    emit("Where", {cond.name, x.name, threshold}, x.shape, DType::f32);
  }
};

}  // namespace

ModelDef random_model(uint64_t seed, const RandomGraphOptions& options) {
  TESSEL_ASSERT(options.min_ops >= 1 && options.max_ops >= options.min_ops, "bad RandomGraphOptions");
  return Generator(seed, options).run();
}

}  // namespace tessel
