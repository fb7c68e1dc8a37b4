// A small builder of multi-operator test models (inputs, seeded weights, ops with generated
// names), lowered to an OpGraph; shared by the backends' tests.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/lower.h"

namespace tessel::testing {

/// A small model built op by op; inputs are model inputs unless made weights.
class ModelBuilder {
 public:
  explicit ModelBuilder(DType dt) : dt_(dt) { m_.name = "test_model"; }

  std::string input(const std::string& name, std::vector<int64_t> shape) {
    m_.inputs.push_back({name, TensorType{dt_, std::move(shape)}});
    return name;
  }
  /// A model input of i64 (indices).
  std::string input_i64(const std::string& name, std::vector<int64_t> shape) {
    m_.inputs.push_back({name, TensorType{DType::i64, std::move(shape)}});
    return name;
  }
  /// Seeded uniform weights in [lo, hi).
  std::string weight(const std::string& name, std::vector<int64_t> shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    const TensorType type{dt_, std::move(shape)};
    m_.weights.push_back({name, type, RandomInit{RandomInit::Dist::uniform, lo, hi, seed}});
    return name;
  }
  /// A scalar weight of the builder's dtype with this value, known at import (a Pad's value).
  std::string scalar(const std::string& name, double value) {
    const TensorType type{dt_, {}};
    m_.weights.push_back({name, type, std::make_shared<const HostTensor>(type, std::vector<double>{value})});
    return name;
  }
  /// Seeded uniform weights in [lo, hi) with a sparsity attribute (pruned when it has a density).
  std::string sparse_weight(const std::string& name, std::vector<int64_t> shape, uint64_t seed, const Sparsity& sparsity) {
    weight(name, std::move(shape), seed);
    m_.weights.back().sparsity = sparsity;
    return name;
  }
  /// An i64 weight with these values (shapes, axes, indices): 1-D unless `scalar` (one value, rank 0).
  std::string weight_i64(const std::string& name, const std::vector<int64_t>& values, bool scalar = false) {
    const TensorType type{DType::i64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(values.size())}};
    m_.weights.push_back({name, type, std::make_shared<const HostTensor>(HostTensor::from_integers(type, values))});
    return name;
  }
  std::string op(const std::string& type, std::vector<std::string> inputs, std::map<std::string, AttrValue> attrs = {}) {
    OpDef d;
    d.name = cat("op", m_.ops.size());
    d.op_type = type;
    d.inputs = std::move(inputs);
    d.outputs = {cat("t", m_.ops.size())};
    d.attrs = std::move(attrs);
    m_.ops.push_back(d);
    return d.outputs[0];
  }
  /// An op with `outputs` outputs (a Split), their names returned.
  std::vector<std::string> ops(const std::string& type, std::vector<std::string> inputs, int outputs,
                               std::map<std::string, AttrValue> attrs = {}) {
    OpDef d;
    d.name = cat("op", m_.ops.size());
    d.op_type = type;
    d.inputs = std::move(inputs);
    for (int i = 0; i < outputs; ++i) d.outputs.push_back(cat("t", m_.ops.size(), "_", i));
    d.attrs = std::move(attrs);
    m_.ops.push_back(d);
    return d.outputs;
  }
  OpGraph graph(const std::string& output) { return graph(std::vector<std::string>{output}); }
  /// The model with these outputs, not lowered.
  ModelDef model(std::vector<std::string> outputs) {
    m_.outputs = std::move(outputs);
    return m_;
  }
  OpGraph graph(std::vector<std::string> outputs) {
    m_.outputs = std::move(outputs);
    return lower_model(m_);
  }

 private:
  DType dt_;
  ModelDef m_;
};

/// A block sparsity pattern of r x c blocks, pruned to `density` (0: the values' own zeros).
inline Sparsity block(int64_t r, int64_t c, double density) { return Sparsity{Sparsity::Pattern::block, r, c, density}; }

/// x[m, k] @ w (w [k, n], or [n, k] through Gemm's transB), w block-sparse; optionally + bias,
/// GELU. The sparse tests of both backends use it.
inline OpGraph sparse_gemm(DType dt, int64_t m, int64_t k, int64_t n, Sparsity s, bool trans_b = false, bool epilogue = false) {
  ModelBuilder b(dt);
  const std::string x = b.input("x", {m, k});
  const std::string w = b.sparse_weight("w", trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 7, s);
  std::string y = trans_b ? b.op("Gemm", {x, w}, {{"transB", int64_t{1}}}) : b.op("MatMul", {x, w});
  if (epilogue) y = b.op("Gelu", {b.op("Add", {y, b.weight("bias", {n}, 4)})});
  return b.graph(y);
}

/// Self-attention as timm's Attention exports (fused_attn, TorchScript): the packed projection
/// reshaped to [B, S, 3, H, d] and permuted to [3, B, H, S, d], unbound by a Split into Q, K and V
/// (each then squeezed), scaled dot-product attention, the heads merged for the output projection.
/// With `constant_ops` the Split's sizes and the Squeezes' axes are Constant ops ahead of them, as
/// the TorchScript exporter writes them, rather than initializers. With `split_scale` Q and K^T are
/// each multiplied by a scalar before Q K^T (the exporter's sqrt(scale) on both, as it writes
/// scaled_dot_product_attention) instead of the scores by one.
inline ModelDef timm_attention(DType dt, int64_t B, int64_t S, int64_t H, int64_t d, bool constant_ops = false,
                               bool split_scale = false) {
  ModelBuilder b(dt);
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    if (!constant_ops) return b.weight_i64(name, v);
    const int64_t n = static_cast<int64_t>(v.size());
    return b.op("Constant", {}, {{"value", HostTensor::from_integers(TensorType{DType::i64, {n}}, v)}});
  };
  const int64_t E = H * d;
  const std::string x = b.input("x", {B, S, E});
  std::string t = b.op("Add", {b.op("MatMul", {x, b.weight("w_qkv", {E, 3 * E}, 1, -0.2, 0.2)}), b.weight("b_qkv", {3 * E}, 2, -0.1, 0.1)});
  t = b.op("Reshape", {t, b.weight_i64("to_heads", {B, S, 3, H, d})});
  t = b.op("Transpose", {t}, {{"perm", std::vector<int64_t>{2, 0, 3, 1, 4}}});
  const std::vector<std::string> parts = b.ops("Split", {t, ints("ones", {1, 1, 1})}, 3, {{"axis", int64_t{0}}});
  std::vector<std::string> qkv;
  for (const std::string& part : parts) qkv.push_back(b.op("Squeeze", {part, ints(cat(part, "_axis"), {0})}));
  const std::string kt = b.op("Transpose", {qkv[1]}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  std::string scores;
  if (split_scale) {
    const std::string root = b.weight("root_scale", {}, 3, 0.3, 0.4);
    scores = b.op("MatMul", {b.op("Mul", {qkv[0], root}), b.op("Mul", {kt, root})});
  } else {
    scores = b.op("Mul", {b.op("MatMul", {qkv[0], kt}), b.weight("scale", {}, 3, 0.1, 0.2)});
  }
  const std::string o = b.op("MatMul", {b.op("Softmax", {scores}, {{"axis", int64_t{-1}}}), qkv[2]});
  std::string m = b.op("Transpose", {o}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  m = b.op("Reshape", {m, b.weight_i64("merge", {B, S, E})});
  return b.model({b.op("Add", {b.op("MatMul", {m, b.weight("w_out", {E, E}, 4, -0.2, 0.2)}), x})});
}

}  // namespace tessel::testing
