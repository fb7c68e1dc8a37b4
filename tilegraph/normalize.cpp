// normalize_model (normalize.h): BatchNormalization folding, then channels-last.
#include "tilegraph/normalize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/normalize_views.h"

namespace tessel {

namespace {

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1};
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// Ops whose every output element depends only on the same element of each input (with numpy
// broadcasting): they run in whichever layout their inputs have.
// Rewrite 0d takes a constant as sqrt 2, 1 / sqrt 2, 1 or 0.5 within this relative distance: an
// f16 weight of sqrt 2 is 1.4140625 (1.5e-4 off), a bf16 one 1.4140625 too; 1e-3 leaves room for
// an exporter's rounding and none for another constant.
constexpr double kGeluConstantTolerance = 1e-3;

const std::set<std::string> kUnary = {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt", "Erf", "Gelu",
                                      "LeakyRelu", "Elu", "Selu", "Softplus", "HardSigmoid", "HardSwish",
                                      "Clip", "Identity", "Reciprocal", "Floor", "Ceil", "Round", "Mish",
                                      "ThresholdedRelu", "Softsign", "Log", "Sin", "Cos", "Cast"};
const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu", "Sum", "Mean"};

std::vector<int64_t> permuted(const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
  std::vector<int64_t> out;
  for (int64_t p : perm) out.push_back(shape[p]);
  return out;
}

/// `t` transposed by `perm` (out dimension i is in dimension perm[i]).
HostTensor transpose(const HostTensor& t, const std::vector<int64_t>& perm) {
  const std::vector<int64_t>& in = t.shape();
  const int rank = static_cast<int>(in.size());
  std::vector<int64_t> in_stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in[d + 1];
  const std::vector<int64_t> out = permuted(in, perm);
  HostTensor transposed(TensorType{t.dtype(), out});
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < t.size(); ++i) {
    int64_t src = 0;
    for (int d = 0; d < rank; ++d) src += idx[d] * in_stride[perm[d]];
    transposed.set_from(i, t, src);
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
  return transposed;
}

HostTensor values_of(const WeightDef& w) { return weight_source_values(w.source, w.type, w.sparsity); }

class Normalizer {
 public:
  Normalizer(const ModelDef& model, const OpGraph& lowered, const NormalizeOptions& options, NormalizeReport& report)
      : in_(model), lowered_(lowered), options_(options), report_(report) {
    out_ = model;
    for (const ValueDecl& v : model.inputs) names_.insert(v.name);
    for (const WeightDef& w : model.weights) names_.insert(w.name);
    for (const OpDef& op : model.ops) {
      op_names_.insert(op.name);
      for (const std::string& o : op.outputs) names_.insert(o);
    }
  }

  ModelDef run() {
    refresh_weights();
    if (options_.simplify_views) {
      views();
      gelus();
    }
    if (options_.fold_batch_norm) fold_batch_norms();
    if (options_.channels_last) conv1d_as_2d();
    if (options_.channels_last || options_.channels_last_rows_below > 0 || options_.pointwise_rows_below > 0) channels_last();
    if (options_.split_full_reductions) split_full_reductions();
    if (options_.channel_alignment_bytes > 0) pad_nhwc_convs();
    if (options_.conv_weights_hwio) hwio_conv_weights();
    if (!options_.contraction_alignment_bytes.empty()) align_contractions();
    return std::move(out_);
  }

 private:
  // ---- Helpers over out_ ----------------------------------------------------------------------

  void refresh_weights() {
    weight_index_.clear();
    for (size_t i = 0; i < out_.weights.size(); ++i) weight_index_[out_.weights[i].name] = static_cast<int>(i);
  }
  const WeightDef* weight(const std::string& name) const {
    auto it = weight_index_.find(name);
    return it == weight_index_.end() ? nullptr : &out_.weights[it->second];
  }
  std::string fresh(const std::string& base, std::set<std::string>& taken) {
    std::string name = base;
    for (int i = 2; taken.count(name); ++i) name = cat(base, "_", i);
    taken.insert(name);
    return name;
  }
  std::string add_weight(const std::string& base, HostTensor values) {
    WeightDef w;
    w.name = fresh(base, names_);
    w.type = values.type();
    w.source = std::make_shared<const HostTensor>(std::move(values));
    weight_index_[w.name] = static_cast<int>(out_.weights.size());
    out_.weights.push_back(std::move(w));
    return out_.weights.back().name;
  }
  /// The values of an integer weight (nullopt: not a weight, or not integers).
  std::optional<std::vector<int64_t>> weight_ints(const std::string& name) const {
    const WeightDef* w = weight(name);
    if (!w || !is_integer(w->type.dtype)) return std::nullopt;
    return values_of(*w).as_ints();
  }
  /// The type of tensor `name` in the model as imported or added by a rewrite (nullopt: folded
  /// away or unknown).
  std::optional<TensorType> type_of(const std::string& name) const {
    if (const WeightDef* w = weight(name)) return w->type;
    if (auto it = added_types_.find(name); it != added_types_.end()) return it->second;
    if (auto t = lowered_.find_tensor(name)) return lowered_.tensor(*t).type;
    // An Identity's output, which lowering folds away: exporters write one per reuse of an
    // identical initializer (the in-projection biases of every ViT layer after the first).
    for (const OpDef& op : out_.ops)
      if (op.op_type == "Identity" && op.domain.empty() && op.inputs.size() == 1 && op.outputs.size() == 1 &&
          op.outputs[0] == name && op.inputs[0] != name)
        return type_of(op.inputs[0]);
    return std::nullopt;
  }
  bool is_float_weight(const std::string& name) const {
    const WeightDef* w = weight(name);
    return w && is_float(w->type.dtype);
  }
  int64_t attr_int(const OpDef& op, const std::string& name, int64_t dflt) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return dflt;
    const int64_t* v = std::get_if<int64_t>(&it->second);
    return v ? *v : dflt;
  }
  double attr_float(const OpDef& op, const std::string& name, double dflt) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return dflt;
    if (const double* v = std::get_if<double>(&it->second)) return *v;
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
    return dflt;
  }
  std::string attr_string(const OpDef& op, const std::string& name, const std::string& dflt) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return dflt;
    const std::string* v = std::get_if<std::string>(&it->second);
    return v ? *v : dflt;
  }
  /// An inference-mode BatchNormalization with constant float parameters and one output.
  bool foldable_batch_norm(const OpDef& op) const {
    if (op.op_type != "BatchNormalization" || !op.domain.empty() || op.inputs.size() != 5) return false;
    if (attr_int(op, "training_mode", 0) != 0) return false;
    for (size_t i = 1; i < op.outputs.size(); ++i)
      if (!op.outputs[i].empty()) return false;
    for (int i = 1; i < 5; ++i)
      if (!is_float_weight(op.inputs[i])) return false;
    // One value per channel in each parameter (lowering reports other shapes).
    const int64_t c = weight(op.inputs[1])->type.num_elements();
    for (int i = 2; i < 5; ++i)
      if (weight(op.inputs[i])->type.num_elements() != c) return false;
    return true;
  }
  /// Per channel: s = gamma / sqrt(var + eps) and t = beta - mean * s.
  void batch_norm_scale_shift(const OpDef& bn, std::vector<double>& s, std::vector<double>& t) const {
    const HostTensor gamma = values_of(*weight(bn.inputs[1])), beta = values_of(*weight(bn.inputs[2]));
    const HostTensor mean = values_of(*weight(bn.inputs[3])), var = values_of(*weight(bn.inputs[4]));
    const double eps = attr_float(bn, "epsilon", 1e-5);
    s.assign(gamma.size(), 0);
    t.assign(gamma.size(), 0);
    for (int64_t c = 0; c < gamma.size(); ++c) {
      s[c] = gamma[c] / std::sqrt(var[c] + eps);
      t[c] = beta[c] - mean[c] * s[c];
    }
  }

  // ---- 0. Views (normalize_views.h) --------------------------------------------------------------

  void views() {
    ViewContext ctx;
    ctx.type_of = [this](const std::string& n) { return type_of(n); };
    ctx.fresh_tensor = [this](const std::string& b) { return fresh(b, names_); };
    ctx.fresh_op = [this](const std::string& b) { return fresh(b, op_names_); };
    ctx.added_types = &added_types_;
    ctx.ints_of = [this](const std::string& n) { return weight_ints(n); };
    ctx.add_ints = [this](const std::string& base, const std::vector<int64_t>& values, std::vector<int64_t> shape) {
      return add_weight(base, HostTensor::from_integers(TensorType{DType::i64, std::move(shape)}, values));
    };
    ctx.scalar_of = [this](const std::string& n) -> std::optional<double> {
      // A weight of the model, or a tensor lowering folded to a constant (a weight there).
      if (const WeightDef* w = weight(n)) {
        if (w->type.num_elements() != 1) return std::nullopt;
        return values_of(*w)[0];
      }
      const auto t = lowered_.find_tensor(n);
      if (!t || lowered_.producer(*t) >= 0 || lowered_.tensor(*t).type.num_elements() != 1) return std::nullopt;
      const std::vector<TensorId>& ws = lowered_.weights();
      if (std::find(ws.begin(), ws.end(), *t) == ws.end()) return std::nullopt;
      return lowered_.weight_values(*t)[0];
    };
    ctx.add_weight = [this](const std::string& base, HostTensor values) { return add_weight(base, std::move(values)); };
    ViewReport r;
    simplify_views(out_, ctx, r);
    report_.scales_moved = r.scales_moved;
    report_.splits_as_picks = r.splits_as_picks;
    report_.scalars_moved = r.scalars_moved;
    report_.view_chains = r.chains;
    report_.view_ops_removed = r.ops_removed;
    report_.matmuls_trans_b = r.matmuls_trans_b;
  }

  // ---- 0d. An erf GELU written out as five ops ---------------------------------------------------

  /// The value of a float tensor of one element known at import (a weight or a Constant op's
  /// output), nullopt otherwise.
  std::optional<double> scalar_of(const std::string& name) const {
    if (const WeightDef* w = weight(name)) {
      if (!is_float(w->type.dtype) || w->type.num_elements() != 1) return std::nullopt;
      return values_of(*w)[0];
    }
    for (const OpDef& op : out_.ops) {
      if (op.op_type != "Constant" || !op.domain.empty() || op.outputs.size() != 1 || op.outputs[0] != name) continue;
      auto it = op.attrs.find("value");
      if (it != op.attrs.end())
        if (const HostTensor* h = std::get_if<HostTensor>(&it->second); h && is_float(h->dtype()) && h->size() == 1) return (*h)[0];
      it = op.attrs.find("value_float");
      if (it != op.attrs.end())
        if (const double* v = std::get_if<double>(&it->second)) return *v;
      return std::nullopt;
    }
    return std::nullopt;
  }

  /// x * 0.5 * (1 + erf(x / sqrt(2))) as exporters write it -- Div(x, sqrt 2) (or Mul by 1 /
  /// sqrt 2), Erf, Add 1, then Mul by x and Mul by 0.5 in either order -- becomes one Gelu op: one
  /// node whose value functions compute it in f32 and round once (the ops rounded each
  /// intermediate to the model's dtype), with no scalar weights to read. Fused into a wgmma
  /// kernel's epilogue, ConvNeXt-T's first MLP GEMM ran 0.074 ms with the five ops and 0.033 ms with
  /// the Gelu op (H100, experiments/epilogue_fusion). Every intermediate must be read by the
  /// pattern alone.
  void gelus() {
    std::map<std::string, int> producer;
    std::map<std::string, std::vector<int>> readers;
    for (size_t i = 0; i < out_.ops.size(); ++i) {
      for (const std::string& o : out_.ops[i].outputs) producer[o] = static_cast<int>(i);
      for (const std::string& in : out_.ops[i].inputs) readers[in].push_back(static_cast<int>(i));
    }
    const std::set<std::string> outputs(out_.outputs.begin(), out_.outputs.end());
    auto near = [](std::optional<double> v, double want) {
      return v && std::abs(*v - want) <= kGeluConstantTolerance * std::abs(want);
    };
    // The op reading `t`, when it is the only reader and `t` is not a model output; -1 otherwise.
    auto sole_reader = [&](const std::string& t) {
      auto it = readers.find(t);
      return outputs.count(t) || it == readers.end() || it->second.size() != 1 ? -1 : it->second[0];
    };
    auto is = [&](int i, const char* type) {
      return i >= 0 && out_.ops[i].op_type == type && out_.ops[i].domain.empty() && out_.ops[i].inputs.size() == 2 &&
             out_.ops[i].outputs.size() == 1;
    };
    // The input of binary op i that is not `t` (empty when both are).
    auto other = [&](int i, const std::string& t) {
      const std::vector<std::string>& in = out_.ops[i].inputs;
      return in[0] == t ? (in[1] == t ? std::string() : in[1]) : in[0];
    };
    std::set<int> dead;
    std::vector<OpDef> added;
    for (size_t e = 0; e < out_.ops.size(); ++e) {
      const OpDef& erf = out_.ops[e];
      if (erf.op_type != "Erf" || !erf.domain.empty() || erf.inputs.size() != 1 || erf.outputs.size() != 1) continue;
      // d = x / sqrt(2), or x * (1 / sqrt(2)).
      auto pd = producer.find(erf.inputs[0]);
      if (pd == producer.end() || sole_reader(erf.inputs[0]) != static_cast<int>(e)) continue;
      const int d = pd->second;
      std::string x;
      if (is(d, "Div") && near(scalar_of(out_.ops[d].inputs[1]), std::sqrt(2.0))) x = out_.ops[d].inputs[0];
      if (is(d, "Mul"))
        for (int k = 0; k < 2; ++k)
          if (near(scalar_of(out_.ops[d].inputs[k]), std::sqrt(0.5))) x = out_.ops[d].inputs[1 - k];
      if (x.empty()) continue;
      const std::optional<TensorType> xt = type_of(x);
      if (!xt || !is_float(xt->dtype)) continue;
      // a = erf + 1.
      const int a = sole_reader(erf.outputs[0]);
      if (!is(a, "Add") || !near(scalar_of(other(a, erf.outputs[0])), 1.0)) continue;
      // x * a * 0.5, in any order of the two products.
      const std::string& at = out_.ops[a].outputs[0];
      const int m1 = sole_reader(at);
      if (!is(m1, "Mul")) continue;
      const std::string y = other(m1, at);
      std::vector<int> pattern = {d, static_cast<int>(e), a, m1};
      std::string h;
      auto half_of_x = [&](const std::string& t) {  // t = Mul(x, 0.5), read by m1 alone
        auto pt = producer.find(t);
        if (pt == producer.end() || !is(pt->second, "Mul") || sole_reader(t) != m1) return -1;
        const int k = pt->second;
        const std::vector<std::string>& in = out_.ops[k].inputs;
        return (in[0] == x && near(scalar_of(in[1]), 0.5)) || (in[1] == x && near(scalar_of(in[0]), 0.5)) ? k : -1;
      };
      if (y == x || near(scalar_of(y), 0.5)) {
        const std::string& mt = out_.ops[m1].outputs[0];
        const int m2 = sole_reader(mt);
        if (!is(m2, "Mul") || !(y == x ? near(scalar_of(other(m2, mt)), 0.5) : other(m2, mt) == x)) continue;
        pattern.push_back(m2);
        h = out_.ops[m2].outputs[0];
      } else if (const int k = half_of_x(y); k >= 0) {
        pattern.push_back(k);
        h = out_.ops[m1].outputs[0];
      } else {
        continue;
      }
      if (std::any_of(pattern.begin(), pattern.end(), [&](int i) { return dead.count(i) > 0; })) continue;
      // A constant of higher rank than x broadcasts the result to it: then it is not x's GELU.
      const std::optional<TensorType> ht = type_of(h);
      if (!ht || ht->shape != xt->shape || ht->dtype != xt->dtype) continue;
      dead.insert(pattern.begin(), pattern.end());
      OpDef g;
      g.name = fresh(out_.ops[e].name + "_gelu", op_names_);
      g.op_type = "Gelu";
      g.inputs = {x};
      g.outputs = {h};
      g.attrs["approximate"] = std::string("none");
      added.push_back(std::move(g));
      ++report_.gelus;
    }
    if (dead.empty()) return;
    std::vector<OpDef> kept;
    for (size_t i = 0; i < out_.ops.size(); ++i)
      if (!dead.count(static_cast<int>(i))) kept.push_back(std::move(out_.ops[i]));
    for (OpDef& g : added) kept.push_back(std::move(g));
    out_.ops = std::move(kept);
  }

  // ---- 1. BatchNormalization folding ------------------------------------------------------------

  void fold_batch_norms() {
    std::map<std::string, int> producer, readers;
    for (size_t i = 0; i < out_.ops.size(); ++i) {
      for (const std::string& o : out_.ops[i].outputs)
        if (!o.empty()) producer[o] = static_cast<int>(i);
      for (const std::string& in : out_.ops[i].inputs)
        if (!in.empty()) ++readers[in];
    }
    for (const std::string& o : out_.outputs) ++readers[o];
    std::set<int> removed;
    for (size_t b = 0; b < out_.ops.size(); ++b) {
      const OpDef& bn = out_.ops[b];
      if (!foldable_batch_norm(bn)) continue;
      auto p = producer.find(bn.inputs[0]);
      if (p == producer.end()) continue;
      OpDef& conv = out_.ops[p->second];
      if (conv.op_type != "Conv" || !conv.domain.empty() || readers[bn.inputs[0]] != 1) continue;
      if (conv.inputs.size() < 2 || !is_float_weight(conv.inputs[1])) continue;
      const bool has_bias = conv.inputs.size() > 2 && !conv.inputs[2].empty();
      if (has_bias && !is_float_weight(conv.inputs[2])) continue;
      HostTensor w = values_of(*weight(conv.inputs[1]));
      const int64_t m = w.shape().empty() ? 0 : w.shape()[0];  // output channels lead in both layouts
      if (m <= 0 || weight(bn.inputs[1])->type.num_elements() != m) continue;
      std::vector<double> s, t;
      batch_norm_scale_shift(bn, s, t);
      const int64_t per = w.size() / m;
      std::vector<double> wv(w.values());
      for (int64_t o = 0; o < m; ++o)
        for (int64_t i = 0; i < per; ++i) wv[o * per + i] *= s[o];
      std::vector<double> bias(m, 0.0);
      if (has_bias) {
        const HostTensor b0 = values_of(*weight(conv.inputs[2]));
        for (int64_t o = 0; o < m; ++o) bias[o] = b0[o];
      }
      for (int64_t o = 0; o < m; ++o) bias[o] = bias[o] * s[o] + t[o];
      const DType bias_dtype = has_bias ? weight(conv.inputs[2])->type.dtype : w.dtype();
      const std::string wname = add_weight(conv.inputs[1] + "_bn", HostTensor(w.type(), std::move(wv)));
      const std::string bname = add_weight(conv.name + "_bn_bias", HostTensor(TensorType{bias_dtype, {m}}, std::move(bias)));
      conv.inputs.resize(3);
      conv.inputs[1] = wname;
      conv.inputs[2] = bname;
      conv.outputs = {bn.outputs[0]};
      removed.insert(static_cast<int>(b));
      ++report_.batch_norms_folded;
    }
    std::vector<OpDef> kept;
    for (size_t i = 0; i < out_.ops.size(); ++i)
      if (!removed.count(static_cast<int>(i))) kept.push_back(std::move(out_.ops[i]));
    out_.ops = std::move(kept);
  }

  // ---- 2. Channels-last -------------------------------------------------------------------------

  std::string add_shape(const std::string& base, const std::vector<int64_t>& shape) {
    return add_weight(base, HostTensor::from_integers(TensorType{DType::i64, {static_cast<int64_t>(shape.size())}}, shape));
  }
  std::vector<int64_t> attr_ints(const OpDef& op, const std::string& name) const {
    auto it = op.attrs.find(name);
    if (it == op.attrs.end()) return {};
    const std::vector<int64_t>* v = std::get_if<std::vector<int64_t>>(&it->second);
    return v ? *v : std::vector<int64_t>{};
  }

  /// A 1-D convolution (NCW, constant weights [M, C/g, k]) becomes a 2-D one over a height of 1
  /// between two Reshapes, so that the channels-last rewrite below runs it as an implicit GEMM
  /// (Whisper's and wav2vec's front ends).
  void conv1d_as_2d() {
    refresh_weights();
    std::vector<OpDef> out;
    for (OpDef& op : out_.ops) {
      const auto x = op.op_type == "Conv" && op.domain.empty() && op.inputs.size() >= 2 && op.outputs.size() == 1
                         ? type_of(op.inputs[0]) : std::nullopt;
      const WeightDef* w = x ? weight(op.inputs[1]) : nullptr;
      const auto y = w ? type_of(op.outputs[0]) : std::nullopt;
      if (!x || !w || !y || x->rank() != 3 || w->type.rank() != 3 || y->rank() != 3 || attr_string(op, "layout", "NCHW") != "NCHW") {
        out.push_back(std::move(op));
        continue;
      }
      auto one_more = [](std::vector<int64_t> v, int64_t first) {
        v.insert(v.begin(), first);
        return v;
      };
      const HostTensor wv = values_of(*w);  // (before add_weight moves the weights)
      const std::vector<int64_t> ws = w->type.shape;
      OpDef c = op;
      // [N, C, W] -> [N, C, 1, W]; weights [M, C/g, k] -> [M, C/g, 1, k]; attributes gain a leading
      // height of 1 (no padding, stride or dilation along it).
      OpDef in;
      in.name = fresh("conv1d_in_" + op.name, op_names_);
      in.op_type = "Reshape";
      const TensorType x4{x->dtype, {x->shape[0], x->shape[1], 1, x->shape[2]}};
      in.inputs = {op.inputs[0], add_shape(op.name + "_shape4", x4.shape)};
      in.outputs = {fresh(op.inputs[0] + "_h1", names_)};
      added_types_[in.outputs[0]] = x4;
      c.inputs[0] = in.outputs[0];
      c.inputs[1] = add_weight(op.inputs[1] + "_h1", wv.reshaped({ws[0], ws[1], 1, ws[2]}));
      if (auto k = attr_ints(op, "kernel_shape"); !k.empty()) c.attrs["kernel_shape"] = one_more(k, 1);
      if (auto st = attr_ints(op, "strides"); !st.empty()) c.attrs["strides"] = one_more(st, 1);
      if (auto d = attr_ints(op, "dilations"); !d.empty()) c.attrs["dilations"] = one_more(d, 1);
      if (auto pads = attr_ints(op, "pads"); pads.size() == 2) c.attrs["pads"] = std::vector<int64_t>{0, pads[0], 0, pads[1]};
      const TensorType y4{y->dtype, {y->shape[0], y->shape[1], 1, y->shape[2]}};
      c.outputs = {fresh(op.outputs[0] + "_h1", names_)};
      added_types_[c.outputs[0]] = y4;
      OpDef back;
      back.name = fresh("conv1d_out_" + op.name, op_names_);
      back.op_type = "Reshape";
      back.inputs = {c.outputs[0], add_shape(op.name + "_shape3", y->shape)};
      back.outputs = op.outputs;
      out.push_back(std::move(in));
      out.push_back(std::move(c));
      out.push_back(std::move(back));
      ++report_.convs_1d;
    }
    out_.ops = std::move(out);
  }

  std::vector<int> topological_order() const {
    std::map<std::string, int> producer;
    for (size_t i = 0; i < out_.ops.size(); ++i)
      for (const std::string& o : out_.ops[i].outputs)
        if (!o.empty()) producer[o] = static_cast<int>(i);
    std::vector<int> order, state(out_.ops.size(), 0);
    // Depth-first; lowering reports cycles, so one here only stops the walk.
    std::function<void(int)> visit = [&](int i) {
      if (state[i]) return;
      state[i] = 1;
      for (const std::string& in : out_.ops[i].inputs)
        if (auto p = producer.find(in); p != producer.end()) visit(p->second);
      state[i] = 2;
      order.push_back(i);
    };
    for (size_t i = 0; i < out_.ops.size(); ++i) visit(static_cast<int>(i));
    return order;
  }

  /// Whether an NCHW tensor of `shape` holds the same row-major data as its NHWC form: the axes of
  /// extent > 1 keep their order (an SE block's [N, C, 1, 1], a one-channel map), so a transpose
  /// between the layouts is a Reshape.
  static bool same_data_in_both_layouts(const std::vector<int64_t>& shape) {
    if (shape.size() != 4) return false;
    std::vector<int64_t> nchw_order, nhwc_order;
    for (int64_t a = 0; a < 4; ++a)
      if (shape[a] != 1) nchw_order.push_back(a);
    for (int64_t a : kToNhwc)
      if (shape[a] != 1) nhwc_order.push_back(a);
    return nchw_order == nhwc_order;
  }
  /// `to` = `from` transposed by `perm` (kToNhwc or kToNchw) where the NCHW side `nchw_name` has
  /// that shape; a Reshape when the permutation moves only axes of extent 1.
  void emit_transpose(const std::string& from, const std::string& to, const std::vector<int64_t>& perm,
                      const std::string& nchw_name) {
    OpDef t;
    t.name = fresh("transpose_" + to, op_names_);
    t.outputs = {to};
    const std::optional<TensorType> type = type_of(nchw_name);
    if (type && same_data_in_both_layouts(type->shape)) {
      t.op_type = "Reshape";
      t.inputs = {from, add_shape(t.name + "_shape", perm == kToNhwc ? permuted(type->shape, kToNhwc) : type->shape)};
      ++report_.transposes_as_reshapes;
    } else {
      t.op_type = "Transpose";
      t.inputs = {from};
      t.attrs["perm"] = perm;
    }
    ops_.push_back(std::move(t));
    ++report_.transposes;
  }
  /// The tensor in NCHW, made from its NHWC form where the op that produced it now runs in NHWC.
  const std::string& nchw(const std::string& t) {
    if (auto it = pixels_.find(t); it != pixels_.end() && !materialized_.count(t)) {
      // Its [N, C, H W] form, made [N, C, H, W] again: the same elements (a view).
      const std::optional<TensorType> type = type_of(t);
      OpDef r;
      r.name = fresh("pixels_" + t, op_names_);
      r.op_type = "Reshape";
      r.inputs = {it->second, add_shape(r.name + "_shape", type->shape)};
      r.outputs = {t};
      ops_.push_back(std::move(r));
      materialized_.insert(t);
    }
    if (auto it = flat_t_.find(t); it != flat_t_.end() && !materialized_.count(t)) {
      // Its [N, H W, C] form (a view of an NHWC tensor), transposed back to [N, C, H W].
      OpDef r;
      r.name = fresh("transpose_" + t, op_names_);
      r.op_type = "Transpose";
      r.inputs = {it->second};
      r.outputs = {t};
      r.attrs["perm"] = std::vector<int64_t>{0, 2, 1};
      ops_.push_back(std::move(r));
      ++report_.transposes;
      materialized_.insert(t);
    }
    if (converted_.count(t) && !materialized_.count(t)) {
      emit_transpose(nhwc_.at(t), t, kToNchw, t);
      materialized_.insert(t);
    }
    return t;
  }
  /// The tensor in NHWC: its NHWC form, a re-laid-out weight, or a transpose made once.
  std::string nhwc(const std::string& t) {
    if (auto it = nhwc_.find(t); it != nhwc_.end()) return it->second;
    nchw(t);  // (a tensor held as pixels: its NCHW form first)
    std::string name;
    if (const WeightDef* w = weight(t)) {
      name = add_weight(t + "_nhwc", transpose(values_of(*w), kToNhwc));
    } else {
      name = fresh(t + "_nhwc", names_);
      emit_transpose(t, name, kToNhwc, t);
    }
    nhwc_[t] = name;
    return name;
  }
  bool rank4(const std::string& t) const {
    const auto type = type_of(t);
    return type && type->rank() == 4;
  }
  /// Gives `op` outputs in NHWC: each output t becomes t_nhwc, t itself made only when read.
  void output_nhwc(OpDef& op) {
    for (std::string& o : op.outputs) {
      if (o.empty()) continue;
      const std::string name = fresh(o + "_nhwc", names_);
      nhwc_[o] = name;
      converted_.insert(o);
      o = name;
    }
  }
  void keep(OpDef op) {
    for (const std::string& in : op.inputs)
      if (!in.empty()) nchw(in);
    ops_.push_back(std::move(op));
  }

  /// A broadcast operand of an elementwise op whose result is rank 4, in NHWC: an input in NHWC
  /// already, a tensor of ones in every dimension, a rank-4 tensor (re-laid out or transposed
  /// once), a lower-rank weight re-laid out (its shape padded to rank 4 with leading 1s), or
  /// nullopt when none applies (a lower-rank computed tensor).
  std::optional<std::string> nhwc_operand(const std::string& t) {
    if (nhwc_.count(t)) return nhwc_[t];
    const auto type = type_of(t);
    if (!type) return std::nullopt;
    bool ones = true;
    for (int64_t d : type->shape) ones &= d == 1;
    if (ones) return t;
    if (type->rank() == 4) return nhwc(t);  // re-laid out once (a weight) or transposed once
    const WeightDef* w = weight(t);
    if (!w || type->rank() > 4) return std::nullopt;
    HostTensor v = values_of(*w);
    std::vector<int64_t> padded(4 - type->rank(), 1);
    padded.insert(padded.end(), type->shape.begin(), type->shape.end());
    const std::string key = t + "#rank4";
    if (auto it = nhwc_.find(key); it != nhwc_.end()) return it->second;
    const std::string name =
        add_weight(t + "_nhwc", transpose(v.reshaped(padded), kToNhwc));
    nhwc_[key] = name;
    return name;
  }

  /// Zero-pads the input channels of the NHWC convolution `c` (made from `op`) to the alignment,
  /// when it is ungrouped, its weights are constant and its channels are not aligned already.
  void pad_channels(const OpDef& op, OpDef& c) {
    const int align = options_.channel_alignment_bytes;
    const auto x = type_of(op.inputs[0]);
    const WeightDef* w = weight(c.inputs[1]);
    if (align <= 0 || attr_int(op, "group", 1) != 1 || !x || !w) return;
    const int64_t bytes = dtype_bytes(x->dtype);
    if (bytes <= 0 || align % bytes != 0) return;
    const bool nhwc_in = attr_string(op, "layout", "NCHW") == "NHWC";  // a convolution the model runs in NHWC
    const int64_t multiple = align / bytes, channels = x->shape[nhwc_in ? 3 : 1];
    if (channels % multiple == 0) return;
    const int64_t padded = (channels + multiple - 1) / multiple * multiple;
    const std::string key = c.inputs[0] + "#padded";
    if (auto it = nhwc_.find(key); it != nhwc_.end()) {
      c.inputs[0] = it->second;
    } else {
      OpDef pad;
      pad.name = fresh("pad_" + c.inputs[0], op_names_);
      pad.op_type = "Pad";
      pad.inputs = {c.inputs[0]};
      pad.outputs = {fresh(c.inputs[0] + "_padded", names_)};
      pad.attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, padded - channels};
      nhwc_[key] = pad.outputs[0];
      c.inputs[0] = pad.outputs[0];
      ops_.push_back(std::move(pad));
    }
    // [M, kH, kW, C] -> [M, kH, kW, padded], the new channels zero.
    const HostTensor v = values_of(*w);
    const std::vector<int64_t>& s = v.shape();
    std::vector<double> values(static_cast<size_t>(s[0] * s[1] * s[2] * padded), 0.0);
    for (int64_t i = 0; i < s[0] * s[1] * s[2]; ++i)
      for (int64_t ch = 0; ch < channels; ++ch) values[i * padded + ch] = v[i * channels + ch];
    c.inputs[1] = add_weight(c.inputs[1] + "_padded", HostTensor(TensorType{v.dtype(), {s[0], s[1], s[2], padded}}, std::move(values)));
    ++report_.convs_channels_padded;
  }

  /// Whether `t` reaches, through elementwise ops only, an op the channels-last rewrite runs in
  /// NHWC on its own account (a convolution, a pooling, a channel Concat): one that would
  /// transpose `t`'s NCHW form.
  bool feeds_channels_last(const std::string& t) const {
    std::vector<std::string> todo = {t};
    std::set<std::string> seen;
    while (!todo.empty()) {
      const std::string x = todo.back();
      todo.pop_back();
      if (!seen.insert(x).second) continue;
      for (const OpDef& op : out_.ops) {
        if (std::find(op.inputs.begin(), op.inputs.end(), x) == op.inputs.end()) continue;
        if (!options_.channels_last) {
          // (Under the row limits only an ungrouped convolution over short rows starts NHWC.)
          if (op.op_type == "Conv" && !op.outputs.empty() && attr_int(op, "group", 1) == 1 && rank4(op.outputs[0]) &&
              type_of(op.outputs[0])->shape[3] < options_.channels_last_rows_below)
            return true;
        } else if (op.op_type == "Conv" || op.op_type == "MaxPool" || op.op_type == "AveragePool" || op.op_type == "GlobalAveragePool" ||
                   op.op_type == "GlobalMaxPool" || op.op_type == "Concat") {
          return true;
        }
        if (kUnary.count(op.op_type) || kBinary.count(op.op_type) || op.op_type == "BatchNormalization")
          for (const std::string& o : op.outputs) todo.push_back(o);
      }
    }
    return false;
  }

  /// Whether the channels-last rewrite takes NCHW convolution `op` (as a batched MatMul where
  /// `pointwise`): every one with channels_last, else those of the row limits (NormalizeOptions).
  bool takes_conv(const OpDef& op, bool pointwise) const {
    if (options_.channels_last) return true;
    if (op.inputs.empty() || op.outputs.empty()) return false;
    const auto y = type_of(op.outputs[0]);
    if (!y || y->rank() != 4) return false;
    if (pointwise) return y->shape[3] < options_.pointwise_rows_below;
    return converted_.count(op.inputs[0]) || (y->shape[3] < options_.channels_last_rows_below && attr_int(op, "group", 1) == 1);
  }

  /// A 1x1 convolution (stride 1, no padding, ungrouped, constant weights) of an NCHW tensor with
  /// no NHWC form -- a model's input, or a tensor computed in NCHW -- and more than one pixel is,
  /// per image, the product of its [M, C] weights and the image's [C, H W] pixels, whose result is
  /// the NCHW output: a batched MatMul after a Reshape, with no transpose at all (the NHWC form
  /// would transpose the input before and the output after). Not taken where the output feeds an
  /// op that runs in NHWC and has more channels than the input (transposing the output would cost
  /// more than transposing the input), nor where a channel's pixels would not start at the
  /// backend's contraction alignment.
  bool convert_pointwise_nchw(const OpDef& op) {
    if (!options_.nchw_pointwise_matmul || op.op_type != "Conv" || !op.domain.empty() || attr_string(op, "layout", "NCHW") != "NCHW")
      return false;
    if (!takes_conv(op, true)) return false;
    if (op.inputs.size() < 2 || op.outputs.size() != 1 || nhwc_.count(op.inputs[0]) || attr_int(op, "group", 1) != 1) return false;
    if (!pixels_.count(op.inputs[0]) && converted_.count(op.inputs[0])) return false;
    const auto x = type_of(op.inputs[0]);
    const auto y = type_of(op.outputs[0]);
    const WeightDef* w = weight(op.inputs[1]);
    if (!x || !y || !w || w->sparsity || x->rank() != 4 || w->type.rank() != 4 || y->shape != std::vector<int64_t>{x->shape[0], w->type.shape[0], x->shape[2], x->shape[3]})
      return false;
    if (w->type.shape[2] != 1 || w->type.shape[3] != 1 || w->type.shape[1] != x->shape[1]) return false;
    for (const char* a : {"strides", "dilations"})
      for (int64_t v : attr_ints(op, a))
        if (v != 1) return false;
    for (int64_t v : attr_ints(op, "pads"))
      if (v != 0) return false;
    const std::string pad = attr_string(op, "auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return false;
    const WeightDef* bias = op.inputs.size() > 2 && !op.inputs[2].empty() ? weight(op.inputs[2]) : nullptr;
    if (op.inputs.size() > 2 && !op.inputs[2].empty() && !bias) return false;
    const int64_t n = x->shape[0], c = x->shape[1], m = w->type.shape[0], hw = x->shape[2] * x->shape[3];
    if (m > c && feeds_channels_last(op.outputs[0])) return false;
    // An input whose NHWC form is the same data (one pixel: an SE block's squeeze) goes to NHWC by
    // a Reshape, where the product is one GEMM over the images.
    if (same_data_in_both_layouts(x->shape)) return false;
    // The pixels of a channel must start where the backend's fast contraction reads rows from
    // (options_.contraction_alignment_bytes): over 7 x 7 or 14 x 14 f16 images the product read
    // them in narrower pieces on mma.sync and measured 1.03-2.1x slower than the transposes and
    // the NHWC kernel (H200, 2026-11-29e call 2).
    if (auto align = options_.contraction_alignment_bytes.find(x->dtype);
        align != options_.contraction_alignment_bytes.end() && (hw * dtype_bytes(x->dtype)) % align->second != 0)
      return false;
    // (The values first: add_weight moves the weights, w and bias with them.)
    const HostTensor wv = values_of(*w);
    const std::optional<HostTensor> bv = bias ? std::optional<HostTensor>(values_of(*bias)) : std::nullopt;

    std::string pixels = pixels_.count(op.inputs[0]) ? pixels_[op.inputs[0]] : std::string();
    if (pixels.empty()) {
      OpDef in;
      in.name = fresh("pointwise_in_" + op.name, op_names_);
      in.op_type = "Reshape";
      in.inputs = {op.inputs[0], add_shape(op.name + "_pixels", {n, c, hw})};
      in.outputs = {fresh(op.inputs[0] + "_pixels", names_)};
      added_types_[in.outputs[0]] = TensorType{x->dtype, {n, c, hw}};
      pixels = in.outputs[0];
      ops_.push_back(std::move(in));
    }
    OpDef mm;
    mm.name = fresh(op.name + "_matmul", op_names_);
    mm.op_type = "MatMul";
    mm.inputs = {add_weight(op.inputs[1] + "_mc", wv.reshaped({m, c})), pixels};
    mm.outputs = {fresh(op.outputs[0] + "_pixels", names_)};
    added_types_[mm.outputs[0]] = TensorType{y->dtype, {n, m, hw}};
    std::string result = mm.outputs[0];
    ops_.push_back(std::move(mm));
    if (bv) {
      OpDef add;
      add.name = fresh(op.name + "_bias", op_names_);
      add.op_type = "Add";
      add.inputs = {result, add_weight(op.inputs[2] + "_m1", bv->reshaped({m, 1}))};
      add.outputs = {fresh(op.outputs[0] + "_biased", names_)};
      added_types_[add.outputs[0]] = TensorType{y->dtype, {n, m, hw}};
      result = add.outputs[0];
      ops_.push_back(std::move(add));
    }
    // The output stays [N, M, H W] (pixels_) until an op needs it as an image (nchw).
    pixels_[op.outputs[0]] = result;
    ++report_.convs_pointwise_matmul;
    return true;
  }

  /// An elementwise op reading a tensor held as pixels ([N, C, H W], convert_pointwise_nchw) runs
  /// on that form where every other input is too, or is a constant of ones but one axis -- the
  /// channels ([C, 1, 1], [1, C, 1, 1]) or none (a scalar) --, re-shaped to [C, 1] or a scalar;
  /// its output is held as pixels too. Anything else reads the image (nchw).
  bool convert_elementwise_pixels(const OpDef& op) {
    if (!op.domain.empty() || op.outputs.size() != 1 || op.inputs.empty() || pixels_.empty()) return false;
    const bool unary = kUnary.count(op.op_type) > 0, binary = kBinary.count(op.op_type) > 0;
    if ((!unary && !binary) || !rank4(op.outputs[0])) return false;
    const auto y = type_of(op.outputs[0]);
    // First whether every input qualifies (nothing added otherwise), then the constants re-shaped
    // (once per weight and shape).
    bool any = false;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const std::string& in = op.inputs[i];
      if (in.empty() || (unary && i > 0)) continue;  // (Clip's bounds: scalars)
      if (pixels_.count(in)) {
        if (type_of(in)->shape != y->shape) return false;  // (broadcast along the image: not as pixels)
        any = true;
        continue;
      }
      const auto type = type_of(in);
      const WeightDef* w = weight(in);
      if (!type || !w || w->sparsity || type->rank() > 4) return false;
      std::vector<int64_t> s(4 - type->rank(), 1);
      s.insert(s.end(), type->shape.begin(), type->shape.end());
      if (s[0] != 1 || s[2] != 1 || s[3] != 1 || (s[1] != 1 && s[1] != y->shape[1])) return false;
    }
    if (!any) return false;
    std::vector<std::string> inputs = op.inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string& in = inputs[i];
      if (in.empty() || (unary && i > 0)) continue;
      if (auto it = pixels_.find(in); it != pixels_.end()) {
        in = it->second;
        continue;
      }
      const int64_t channels = type_of(in)->num_elements();  // 1 (a scalar) or C
      const std::string key = in + (channels == 1 ? "#scalar" : "#c1");
      if (auto it = pixel_consts_.find(key); it != pixel_consts_.end()) {
        in = it->second;
        continue;
      }
      const HostTensor v = values_of(*weight(in));
      const std::string name = add_weight(in + (channels == 1 ? "_scalar" : "_c1"),
                                          v.reshaped(channels == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{channels, 1}));
      pixel_consts_[key] = name;
      in = name;
    }
    OpDef e = op;
    e.inputs = inputs;
    const std::vector<int64_t> shape = {y->shape[0], y->shape[1], y->shape[2] * y->shape[3]};
    e.outputs = {fresh(op.outputs[0] + "_pixels", names_)};
    added_types_[e.outputs[0]] = TensorType{y->dtype, shape};
    pixels_[op.outputs[0]] = e.outputs[0];
    ops_.push_back(std::move(e));
    ++report_.ops_pixels;
    return true;
  }

  bool convert_conv(const OpDef& op) {
    if (op.op_type != "Conv" || !op.domain.empty() || attr_string(op, "layout", "NCHW") != "NCHW") return false;
    if (op.inputs.size() < 2 || !rank4(op.inputs[0]) || !rank4(op.inputs[1]) || !takes_conv(op, false)) return false;
    OpDef c = op;
    c.attrs["layout"] = std::string("NHWC");
    c.inputs[0] = nhwc(op.inputs[0]);
    const auto wt = type_of(op.inputs[1]);
    const WeightDef* wd = weight(op.inputs[1]);
    if (attr_int(op, "group", 1) > 1 && wt && wd && !wd->sparsity) {
      // A grouped or depthwise convolution: constant weights re-laid out as [kH, kW, C/g, M], so
      // that its kernel reads a vector of output channels' weights per tap and input channel
      // (the threads of a warp, on neighbouring output channels, read neighbouring weights).
      c.inputs[1] = add_weight(op.inputs[1] + "_hwio", transpose(values_of(*wd), {2, 3, 1, 0}));
      c.attrs["weight_layout"] = std::string("HWIO");
    } else {
      c.inputs[1] = nhwc(op.inputs[1]);  // [M, C/g, kH, kW] -> [M, kH, kW, C/g]
    }
    pad_channels(op, c);
    if (c.inputs.size() > 2 && !c.inputs[2].empty()) nchw(c.inputs[2]);
    output_nhwc(c);
    ops_.push_back(std::move(c));
    ++report_.convs_channels_last;
    return true;
  }

  bool convert_elementwise(const OpDef& op) {
    if (!op.domain.empty() || op.outputs.size() != 1 || op.inputs.empty()) return false;
    const bool unary = kUnary.count(op.op_type) > 0, binary = kBinary.count(op.op_type) > 0;
    if (!unary && !binary) return false;
    if (unary && !nhwc_.count(op.inputs[0])) return false;
    if (!rank4(op.outputs[0])) return false;
    bool any = false;
    for (const std::string& in : op.inputs) any |= nhwc_.count(in) > 0;
    if (!any) return false;
    // Kept in NCHW when each input with an NHWC form is a view of its NCHW one (an SE block's
    // [N, C, 1, 1] scale) and another input, computed in NCHW, would need a real transpose: the
    // excite of an SE block at an NCHW model's edge multiplies the NCHW input as it is.
    if (binary) {
      bool views_only = true, transposed = false;
      for (const std::string& in : op.inputs) {
        if (in.empty()) continue;
        const auto type = type_of(in);
        if (nhwc_.count(in))  // (its NCHW form exists already, or is a Reshape of the NHWC one)
          views_only &= !converted_.count(in) || materialized_.count(in) || (type && same_data_in_both_layouts(type->shape));
        else transposed |= !weight(in) && type && type->rank() == 4 && !same_data_in_both_layouts(type->shape);
      }
      if (views_only && transposed) {
        keep(op);
        ++report_.ops_kept_nchw;
        return true;
      }
    }
    OpDef e = op;
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      if (e.inputs[i].empty()) continue;
      if (unary && i > 0) {  // Clip's bounds: scalars
        nchw(e.inputs[i]);
        continue;
      }
      const auto operand = nhwc_operand(e.inputs[i]);
      if (!operand) return false;
      e.inputs[i] = *operand;
    }
    output_nhwc(e);
    ops_.push_back(std::move(e));
    ++report_.ops_channels_last;
    return true;
  }

  bool convert_batch_norm(const OpDef& op) {
    if (!foldable_batch_norm(op) || !nhwc_.count(op.inputs[0]) || !rank4(op.outputs[0])) return false;
    std::vector<double> s, t;
    batch_norm_scale_shift(op, s, t);
    const int64_t c = static_cast<int64_t>(s.size());
    const DType dt = weight(op.inputs[1])->type.dtype;
    const std::string sname = add_weight(op.name + "_scale", HostTensor(TensorType{dt, {c}}, std::move(s)));
    const std::string tname = add_weight(op.name + "_shift", HostTensor(TensorType{dt, {c}}, std::move(t)));
    const std::string scaled = fresh(op.outputs[0] + "_scaled", names_);
    OpDef mul;
    mul.name = fresh(op.name + "_scale", op_names_);
    mul.op_type = "Mul";
    mul.inputs = {nhwc_[op.inputs[0]], sname};
    mul.outputs = {scaled};
    OpDef add;
    add.name = fresh(op.name + "_shift", op_names_);
    add.op_type = "Add";
    add.inputs = {scaled, tname};
    add.outputs = {op.outputs[0]};
    output_nhwc(add);
    ops_.push_back(std::move(mul));
    ops_.push_back(std::move(add));
    ++report_.batch_norms_scaled;
    return true;
  }

  bool convert_pool(const OpDef& op) {
    if (!op.domain.empty() || !nhwc_.count(op.inputs.empty() ? std::string() : op.inputs[0])) return false;
    if (!rank4(op.inputs[0]) || op.outputs.empty() || !rank4(op.outputs[0])) return false;
    OpDef p = op;
    if (op.op_type == "MaxPool" || op.op_type == "AveragePool") {
      if (attr_string(op, "layout", "NCHW") != "NCHW") return false;
      if (op.outputs.size() > 1 && !op.outputs[1].empty()) return false;  // MaxPool's indices
    } else if (op.op_type == "GlobalAveragePool" || op.op_type == "GlobalMaxPool") {
      const std::vector<int64_t> shape = type_of(op.inputs[0])->shape;  // rank 4: checked above
      p.op_type = op.op_type == "GlobalAveragePool" ? "AveragePool" : "MaxPool";
      p.attrs.clear();
      p.attrs["kernel_shape"] = std::vector<int64_t>{shape[2], shape[3]};
    } else {
      return false;
    }
    p.attrs["layout"] = std::string("NHWC");
    p.inputs[0] = nhwc_[op.inputs[0]];
    p.outputs.resize(1);
    output_nhwc(p);
    ops_.push_back(std::move(p));
    ++report_.ops_channels_last;
    return true;
  }

  /// A model's own Transpose next to the NHWC region: of a tensor that has an NHWC form, it becomes
  /// a transpose of that form (none at all when it asks for NHWC); one to NCHW of a rank-4 tensor
  /// makes that tensor the NHWC form of its output, so nothing runs until an NCHW reader needs it.
  bool convert_transpose(const OpDef& op) {
    if (op.op_type != "Transpose" || !op.domain.empty() || op.inputs.size() != 1 || op.outputs.size() != 1) return false;
    const auto attr = op.attrs.find("perm");
    if (attr == op.attrs.end()) return false;
    const auto* perm = std::get_if<std::vector<int64_t>>(&attr->second);
    if (perm && *perm == std::vector<int64_t>{0, 2, 1} && flat_t_.count(op.inputs[0])) {
      // The patch embedding's tokens: [N, C, H W] transposed is the NHWC form's view [N, H W, C].
      OpDef t = op;
      t.op_type = "Identity";
      t.attrs.clear();
      t.inputs = {flat_t_[op.inputs[0]]};
      ops_.push_back(std::move(t));
      ++report_.transposes_absorbed;
      return true;
    }
    if (!perm || perm->size() != 4) return false;
    const std::string& x = op.inputs[0];
    if (nhwc_.count(x)) {
      std::vector<int64_t> q;
      for (int64_t p : *perm) q.push_back(kToNchw[p]);
      OpDef t = op;
      t.inputs = {nhwc_[x]};
      if (q == std::vector<int64_t>{0, 1, 2, 3}) {
        t.op_type = "Identity";
        t.attrs.clear();
      } else {
        t.attrs["perm"] = q;
      }
      ops_.push_back(std::move(t));
      ++report_.transposes_absorbed;
      return true;
    }
    if (*perm == kToNchw && rank4(x)) {
      nchw(x);  // (a tensor held as pixels: made first)
      nhwc_[op.outputs[0]] = x;
      converted_.insert(op.outputs[0]);
      ++report_.transposes_absorbed;
      return true;
    }
    return false;
  }

  /// A Reshape of an NCHW tensor held in NHWC to [N, C, H W] (a ViT's patch embedding flattening
  /// its grid before the tokens' Transpose to [N, H W, C]) becomes the NHWC form viewed as
  /// [N, H W, C] (flat_t_): the Transpose after it is that view; any other reader gets the
  /// [N, C, H W] tensor transposed back from it (nchw).
  bool convert_flatten_pixels(const OpDef& op) {
    // (Only a tensor whose NCHW form does not exist: otherwise the Reshape of it is free.)
    if (op.op_type != "Reshape" || !op.domain.empty() || op.inputs.empty() || op.outputs.size() != 1 || !nhwc_.count(op.inputs[0]) ||
        !converted_.count(op.inputs[0]) || materialized_.count(op.inputs[0]))
      return false;
    const auto x = type_of(op.inputs[0]);
    const auto y = type_of(op.outputs[0]);
    if (!x || !y || x->rank() != 4 || y->shape != std::vector<int64_t>{x->shape[0], x->shape[1], x->shape[2] * x->shape[3]})
      return false;
    OpDef r;
    r.name = fresh("flatten_" + op.name, op_names_);
    r.op_type = "Reshape";
    const std::vector<int64_t> shape = {x->shape[0], x->shape[2] * x->shape[3], x->shape[1]};
    r.inputs = {nhwc_[op.inputs[0]], add_shape(r.name + "_shape", shape)};
    r.outputs = {fresh(op.outputs[0] + "_tokens", names_)};
    added_types_[r.outputs[0]] = TensorType{y->dtype, shape};
    flat_t_[op.outputs[0]] = r.outputs[0];
    ops_.push_back(std::move(r));
    ++report_.ops_channels_last;
    return true;
  }

  bool convert_concat(const OpDef& op) {
    if (op.op_type != "Concat" || !op.domain.empty() || op.outputs.size() != 1 || !rank4(op.outputs[0])) return false;
    const int64_t axis = attr_int(op, "axis", 0);
    if (axis != 1 && axis != -3) return false;
    for (const std::string& in : op.inputs)
      if (!nhwc_.count(in)) return false;
    OpDef c = op;
    c.attrs["axis"] = int64_t{3};
    for (std::string& in : c.inputs) in = nhwc_[in];
    output_nhwc(c);
    ops_.push_back(std::move(c));
    ++report_.ops_channels_last;
    return true;
  }

  void channels_last() {
    refresh_weights();
    const std::vector<int> order = topological_order();
    for (int i : order) {
      const OpDef& op = out_.ops[i];
      if (convert_pointwise_nchw(op) || convert_elementwise_pixels(op) || convert_conv(op) || convert_batch_norm(op) || convert_elementwise(op) || convert_pool(op) ||
          convert_concat(op) || convert_flatten_pixels(op) || convert_transpose(op))
        continue;
      keep(op);
    }
    for (const std::string& o : out_.outputs) nchw(o);
    out_.ops = std::move(ops_);
  }

  /// Convolutions the model itself runs in NHWC get their input channels zero-padded like those
  /// rewrite 2 converts (a ViT's patch embedding or a ConvNeXt stem over 3 RGB channels), and a
  /// grouped or depthwise one's constant OHWI weights [M, kH, kW, C/g] the HWIO layout
  /// [kH, kW, C/g, M] rewrite 2 gives a converted one.
  void pad_nhwc_convs() {
    refresh_weights();
    ops_.clear();
    for (OpDef& op : out_.ops) {
      if (op.op_type == "Conv" && op.domain.empty() && attr_string(op, "layout", "NCHW") == "NHWC" && op.inputs.size() >= 2 &&
          rank4(op.inputs[0]) && rank4(op.inputs[1]) && !op.attrs.count("weight_layout")) {
        OpDef c = op;
        const WeightDef* wd = weight(op.inputs[1]);
        if (attr_int(op, "group", 1) > 1 && wd && !wd->sparsity) {
          c.inputs[1] = add_weight(op.inputs[1] + "_hwio", transpose(values_of(*wd), {1, 2, 3, 0}));
          c.attrs["weight_layout"] = std::string("HWIO");
          ++report_.grouped_hwio;
        }
        pad_channels(op, c);
        op = std::move(c);
      }
    }
    for (OpDef& p : ops_) out_.ops.push_back(std::move(p));
    ops_.clear();
  }

  // ---- 4. HWIO weights for backends that vectorize along output channels ------------------------

  /// Every NHWC convolution still reading constant, dense OHWI weights [M, kH, kW, C/g] reads
  /// them re-laid out once as HWIO [kH, kW, C/g, M]: the output channels, the axis a CPU kernel
  /// vectorizes an NHWC output along, are then contiguous in the weights too (read lane by lane
  /// from OHWI). Runs after the padding, which pads OHWI weights. Weights that are graph inputs or
  /// carry a sparsity attribute keep their layout.
  void hwio_conv_weights() {
    refresh_weights();
    for (OpDef& op : out_.ops) {
      if (op.op_type != "Conv" || !op.domain.empty() || attr_string(op, "layout", "NCHW") != "NHWC" ||
          op.inputs.size() < 2 || !rank4(op.inputs[1]) || attr_string(op, "weight_layout", "OHWI") != "OHWI")
        continue;
      const WeightDef* wd = weight(op.inputs[1]);
      if (!wd || wd->sparsity) continue;
      const std::string hwio = add_weight(op.inputs[1] + "_hwio", transpose(values_of(*wd), {1, 2, 3, 0}));
      op.inputs[1] = hwio;
      op.attrs["weight_layout"] = std::string("HWIO");
      ++(attr_int(op, "group", 1) > 1 ? report_.grouped_hwio : report_.dense_hwio);
    }
  }

  // ---- 2b. Reductions to one value, split ---------------------------------------------------------

  /// A ReduceSum / Max / Min / Mean of a whole tensor with several axes of extent > 1 to one value
  /// becomes the same reduction of its last axis (keepdims: one value per row) and then of all
  /// the rest: rows that a kernel reduces a row per warp or block, instead of one value that one
  /// block reduces alone (T5's check for an infinity in fp16, a sum over a whole activation). The
  /// order of the sums changes; the mean of the rows' means is the mean (the rows are equally long).
  void split_full_reductions() {
    static const std::set<std::string> kSplit = {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"};
    refresh_weights();
    std::vector<OpDef> out;
    for (OpDef& op : out_.ops) {
      const auto x = kSplit.count(op.op_type) && op.domain.empty() && !op.inputs.empty() && op.outputs.size() == 1
                         ? type_of(op.inputs[0]) : std::nullopt;
      std::vector<int64_t> axes;
      bool known = x.has_value();
      if (known && op.inputs.size() > 1 && !op.inputs[1].empty()) {
        const auto v = weight_ints(op.inputs[1]);
        known = v.has_value();
        if (v) axes = *v;
      } else if (known) {
        axes = attr_ints(op, "axes");
      }
      int64_t wide = 0;
      if (known) {
        for (int64_t d : x->shape) wide += d > 1;
        std::set<int64_t> all;
        for (int64_t a : axes) {
          known &= a >= -x->rank() && a < x->rank();  // (lowering reports the bad axis)
          all.insert(a < 0 ? a + x->rank() : a);
        }
        known = known && (axes.empty() ? attr_int(op, "noop_with_empty_axes", 0) == 0 : static_cast<int64_t>(all.size()) == x->rank());
      }
      // Exact whichever order the parts combine in: a maximum or minimum, an integer sum, a sum
      // or mean of f32 or f64 (rows of f16 or bf16 sums would be rounded to 16 bits once more).
      const DType dt = known ? type_of(op.outputs[0])->dtype : DType::f32;
      const bool exact = op.op_type == "ReduceMax" || op.op_type == "ReduceMin" || !is_float(dt) || dt == DType::f32 || dt == DType::f64;
      if (!known || !exact || wide < 2 || x->shape.back() <= 1) {
        out.push_back(std::move(op));
        continue;
      }
      OpDef rows = op;
      rows.name = fresh(op.name + "_rows", op_names_);
      rows.inputs = {op.inputs[0]};
      rows.attrs.erase("noop_with_empty_axes");
      rows.attrs["axes"] = std::vector<int64_t>{x->rank() - 1};
      rows.attrs["keepdims"] = int64_t{1};
      std::vector<int64_t> row_shape = x->shape;
      row_shape.back() = 1;
      rows.outputs = {fresh(op.outputs[0] + "_rows", names_)};
      added_types_[rows.outputs[0]] = TensorType{type_of(op.outputs[0])->dtype, row_shape};
      OpDef rest = op;
      rest.inputs = {rows.outputs[0]};
      rest.attrs.erase("axes");
      rest.attrs.erase("noop_with_empty_axes");
      out.push_back(std::move(rows));
      out.push_back(std::move(rest));
      ++report_.reductions_split;
    }
    out_.ops = std::move(out);
  }

  // ---- 3. Aligned contraction operands ----------------------------------------------------------

  /// The MatMuls and Gemms by a constant matrix whose operand rows would not start at the
  /// backend's alignment: the weight re-laid out once here (k-contiguous [N, K] when its N rows
  /// are not aligned, K zero-padded when K is not), and the activation's K zero-padded by a Pad.
  void align_contractions() {
    refresh_weights();
    std::vector<OpDef> pads;
    for (OpDef& op : out_.ops) align_contraction(op, pads);
    for (OpDef& p : pads) out_.ops.push_back(std::move(p));
  }

  void align_contraction(OpDef& op, std::vector<OpDef>& pads) {
    const bool gemm = op.op_type == "Gemm";
    if (!op.domain.empty() || (op.op_type != "MatMul" && !gemm) || op.inputs.size() < 2) return;
    if (gemm && attr_int(op, "transA", 0) != 0) return;
    const auto a = type_of(op.inputs[0]);
    const WeightDef* w = weight(op.inputs[1]);
    if (!a || a->rank() < 2 || weight(op.inputs[0]) || !w || w->sparsity || w->type.rank() != 2 || w->type.dtype != a->dtype) return;
    const auto align = options_.contraction_alignment_bytes.find(a->dtype);
    const int64_t bytes = dtype_bytes(a->dtype);
    if (align == options_.contraction_alignment_bytes.end() || bytes <= 0 || align->second % bytes != 0) return;
    const int64_t multiple = align->second / bytes;
    const bool trans = attr_int(op, "transB", 0) != 0;
    const int64_t k = w->type.shape[trans ? 1 : 0], n = w->type.shape[trans ? 0 : 1];
    if (a->shape.back() != k) return;  // lowering reports the mismatch
    const bool pad_k = k % multiple != 0, relayout = !trans && n % multiple != 0;
    if (!pad_k && !relayout) return;
    const int64_t kp = (k + multiple - 1) / multiple * multiple;
    const bool out_trans = trans || relayout;

    const std::string key = cat(op.inputs[1], "#aligned", out_trans ? "T" : "");
    if (auto it = aligned_.find(key); it != aligned_.end()) {
      op.inputs[1] = it->second;
    } else {
      // B as [N, kp] (k-contiguous) or [kp, N], the padded k rows or columns zero.
      const HostTensor v = values_of(*w);
      std::vector<double> values(static_cast<size_t>(n * kp), 0.0);
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t nn = 0; nn < n; ++nn)
          values[out_trans ? nn * kp + kk : kk * n + nn] = v[trans ? nn * k + kk : kk * n + nn];
      const std::vector<int64_t> shape = out_trans ? std::vector<int64_t>{n, kp} : std::vector<int64_t>{kp, n};
      const std::string name = add_weight(op.inputs[1] + "_aligned", HostTensor(TensorType{w->type.dtype, shape}, std::move(values)));
      aligned_[key] = name;
      op.inputs[1] = name;
    }
    if (out_trans) op.attrs["transB"] = int64_t{1};
    ++report_.contractions_aligned;
    if (!pad_k) return;
    const std::string pkey = op.inputs[0] + "#kpadded";
    if (auto it = aligned_.find(pkey); it != aligned_.end()) {
      op.inputs[0] = it->second;
      return;
    }
    OpDef pad;
    pad.name = fresh("pad_" + op.inputs[0], op_names_);
    pad.op_type = "Pad";
    pad.inputs = {op.inputs[0]};
    pad.outputs = {fresh(op.inputs[0] + "_kpadded", names_)};
    std::vector<int64_t> pads_attr(2 * a->rank(), 0);
    pads_attr.back() = kp - k;
    pad.attrs["pads"] = pads_attr;
    TensorType padded = *a;
    padded.shape.back() = kp;
    added_types_[pad.outputs[0]] = padded;
    aligned_[pkey] = pad.outputs[0];
    op.inputs[0] = pad.outputs[0];
    pads.push_back(std::move(pad));
    ++report_.contraction_pads;
  }

  const ModelDef& in_;
  const OpGraph& lowered_;
  const NormalizeOptions& options_;
  NormalizeReport& report_;
  ModelDef out_;
  std::set<std::string> names_, op_names_;
  std::map<std::string, TensorType> added_types_;
  std::map<std::string, int> weight_index_;
  // Channels-last state: the NHWC form of a tensor; tensors whose producer now writes only the NHWC
  // form; those whose NCHW form has been made again by a transpose.
  std::map<std::string, std::string> nhwc_;
  std::set<std::string> converted_, materialized_;
  // Tensors held as pixels: the [N, C, H W] form of an NCHW tensor (convert_pointwise_nchw); the
  // image itself made only when read (nchw), recorded in materialized_ too.
  std::map<std::string, std::string> pixels_;
  std::map<std::string, std::string> pixel_consts_;  // a weight re-shaped for them: "w#c1", "w#scalar"
  // Tensors [N, C, H W] flattened from an NHWC-held image, as their [N, H W, C] view
  // (convert_flatten_pixels); the tensor itself made only when read (nchw).
  std::map<std::string, std::string> flat_t_;
  std::vector<OpDef> ops_;
  // Aligned contraction operands: the re-laid-out weight or padded activation of a tensor.
  std::map<std::string, std::string> aligned_;
};

}  // namespace

std::string NormalizeReport::summary() const {
  if (!changed()) return "nothing to fold or re-lay out";
  std::string out;
  if (view_chains || matmuls_trans_b || scalars_moved) {
    out += cat(view_chains, " view chains in canonical form (", view_ops_removed, " view ops fewer), ", matmuls_trans_b,
               " MatMuls reading a transposed B, ", scalars_moved, " ops moved before a Transpose");
  }
  if (splits_as_picks) out += cat(out.empty() ? "" : "; ", splits_as_picks, " unbinding Splits as one Gather per piece");
  if (scales_moved) out += cat(out.empty() ? "" : "; ", scales_moved, " scalar multiplications of picked views moved into their source");
  if (batch_norms_folded) out += cat(out.empty() ? "" : "; ", "folded ", batch_norms_folded, " BatchNormalization into convolutions");
  if (convs_channels_last || ops_channels_last || batch_norms_scaled) {
    out += cat(out.empty() ? "" : "; ", convs_channels_last, " convolutions and ", ops_channels_last + batch_norms_scaled,
               " other ops in NHWC");
    if (batch_norms_scaled) out += cat(" (", batch_norms_scaled, " BatchNormalization as a scale and shift)");
    if (convs_channels_padded) out += cat(", ", convs_channels_padded, " with input channels zero-padded");
    out += cat(", ", transposes, " transposes");
    if (transposes_as_reshapes) out += cat(" (", transposes_as_reshapes, " of them Reshapes: only axes of extent 1 move)");
    if (ops_kept_nchw) out += cat(", ", ops_kept_nchw, " elementwise ops kept in NCHW");
    if (transposes_absorbed) out += cat(" (", transposes_absorbed, " of the model's own absorbed)");
  }
  if (convs_pointwise_matmul)
    out += cat(out.empty() ? "" : "; ", convs_pointwise_matmul, " NCHW 1x1 convolutions as batched MatMuls (no transposes, ",
               ops_pixels, " elementwise ops on their [N, C, H W] form)");
  if (convs_1d) out += cat(out.empty() ? "" : "; ", convs_1d, " 1-D convolutions as 2-D ones over a height of 1");
  if (reductions_split) out += cat(out.empty() ? "" : "; ", reductions_split, " reductions to one value split into rows and the rest");
  if (convs_channels_padded && !convs_channels_last)
    out += cat(out.empty() ? "" : "; ", convs_channels_padded, " NHWC convolutions with input channels zero-padded");
  if (grouped_hwio) out += cat(out.empty() ? "" : "; ", grouped_hwio, " NHWC grouped convolutions with HWIO weights");
  if (dense_hwio) out += cat(out.empty() ? "" : "; ", dense_hwio, " NHWC convolutions with HWIO weights");
  if (gelus) out += cat(out.empty() ? "" : "; ", gelus, " erf GELUs written out as five ops now one Gelu op");
  if (contractions_aligned) {
    out += cat(out.empty() ? "" : "; ", contractions_aligned, " contractions by a weight re-laid out for aligned rows");
    if (contraction_pads) out += cat(" (", contraction_pads, " activations with K zero-padded)");
  }
  return out;
}

ModelDef normalize_model(const ModelDef& model, const OpGraph& lowered, const NormalizeOptions& options,
                         NormalizeReport* report) {
  NormalizeReport local;
  NormalizeReport& r = report ? *report : local;
  r = {};
  return Normalizer(model, lowered, options, r).run();
}

}  // namespace tessel
