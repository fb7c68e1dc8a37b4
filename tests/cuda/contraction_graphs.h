// Contraction test graphs shared by the CUDA tests of the tiled families (cuda_mma_test.cpp) and
// the few-row family (cuda_gemv_test.cpp), and where a schedule keeps its contraction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "../model_builder.h"
#include "policy/schedule.h"

namespace tessel::testing {

/// The index of the last group of `s` holding a reducing node (the contraction); fails the test
/// when there is none.
inline int contraction_group(const OpGraph& g, const Schedule& s) {
  int gi = -1;
  for (size_t i = 0; i < s.groups.size(); ++i)
    for (NodeId n : s.groups[i].group.nodes) gi = g.node(n).num_reduction() > 0 ? static_cast<int>(i) : gi;
  REQUIRE(gi >= 0);
  return gi;
}

/// A B of two graph inputs.
inline OpGraph matmul(DType dt, int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(dt);
  return b.graph(b.op("MatMul", {b.input("a", {m, k}), b.input("b", {k, n})}));
}

/// Gemm with transposed operands (A stored K x M, B stored N x K) and a constant B.
inline OpGraph gemm(DType dt, int64_t m, int64_t k, int64_t n, bool trans_a, bool trans_b) {
  ModelBuilder b(dt);
  const std::string a = b.input("a", trans_a ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
  const std::string w = b.weight("w", trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 7);
  return b.graph(b.op("Gemm", {a, w}, {{"transA", int64_t{trans_a}}, {"transB", int64_t{trans_b}}}));
}

/// A batched MatMul of two graph inputs (broadcasting as ONNX does).
inline OpGraph batched(DType dt, std::vector<int64_t> a, std::vector<int64_t> bshape) {
  ModelBuilder b(dt);
  return b.graph(b.op("MatMul", {b.input("a", std::move(a)), b.input("b", std::move(bshape))}));
}

/// f32(x W + residual).
inline OpGraph residual_cast(DType dt, int64_t m, int64_t k, int64_t n) {
  ModelBuilder b(dt);
  const std::string y = b.op("MatMul", {b.input("x", {m, k}), b.input("w", {k, n})});
  const std::string r = b.op("Add", {y, b.input("residual", {m, n})});
  return b.graph(b.op("Cast", {r}, {{"to", std::string("f32")}}));
}

}  // namespace tessel::testing
