// Sampled reference values (tilegraph/sampled_reference.h) against the whole interpreter: the
// same values at the sampled elements, on graphs whose boxes propagate through contractions,
// row reductions, padded strided convolutions and broadcasts; both corners sampled; graphs that
// cannot be sampled say why.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tests/model_builder.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/sampled_reference.h"

using namespace tessel;
using tessel::testing::ModelBuilder;

namespace {

std::vector<HostTensor> random_inputs(const OpGraph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (TensorId t : g.inputs()) {
    const TensorType& type = g.tensor(t).type;
    std::vector<double> v(static_cast<size_t>(type.num_elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i + seed * 1000) + 0.1);
    out.emplace_back(type, std::move(v));
  }
  return out;
}

// Every sampled value equals the whole interpreter's value there; returns the sample.
SampledOutput check_against_whole(const OpGraph& g, int64_t min_elements) {
  const std::vector<HostTensor> inputs = random_inputs(g, 3);
  const std::vector<HostTensor> whole = interpret(g, inputs);
  SampleOptions options;
  options.min_elements = min_elements;
  options.seed = 7;
  options.max_share = 0;  // these graphs are small: sample them however much of them it takes
  const SampledReference s = interpret_sample(g, inputs, options);
  REQUIRE_MESSAGE(s.ok, s.reason);
  REQUIRE(s.outputs.size() == 1);
  const SampledOutput& out = s.outputs[0];
  REQUIRE(static_cast<int64_t>(out.flat_index.size()) == out.expected.size());
  const HostTensor picked = gather_elements(whole[0], out.flat_index);
  for (int64_t i = 0; i < picked.size(); ++i) {
    const double a = out.expected[i], b = picked[i];
    CHECK_MESSAGE(std::abs(a - b) <= 1e-6 * (1 + std::abs(b)), "element ", out.flat_index[i], ": ", a, " vs ", b);
  }
  return out;
}

}  // namespace

TEST_CASE("sampled reference: attention rows through two contractions and a softmax") {
  ModelBuilder m(DType::f32);
  const std::string q = m.input("q", {2, 3, 40, 16}), k = m.input("k", {2, 3, 40, 16}), v = m.input("v", {2, 3, 40, 16});
  const std::string kt = m.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  const std::string p = m.op("Softmax", {m.op("MatMul", {q, kt})}, {{"axis", int64_t{-1}}});
  const OpGraph g = m.graph(m.op("MatMul", {p, v}));
  const SampledOutput out = check_against_whole(g, 256);
  CHECK(out.flat_index.size() >= 256);
  // The first and the last element are in the sample (the two corner boxes).
  CHECK(std::count(out.flat_index.begin(), out.flat_index.end(), 0) >= 1);
  CHECK(std::count(out.flat_index.begin(), out.flat_index.end(), 2 * 3 * 40 * 16 - 1) >= 1);
}

TEST_CASE("sampled reference: a strided, padded convolution with a bias and a GEMM of odd sizes") {
  {
    ModelBuilder m(DType::f32);
    const std::string x = m.input("x", {2, 5, 13, 11});
    const std::string w = m.weight("w", {7, 5, 3, 3}, 1);
    const std::string b = m.weight("b", {7}, 2);
    const OpGraph g = m.graph(m.op("Relu", {m.op("Conv", {x, w, b}, {{"strides", std::vector<int64_t>{2, 2}},
                                                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}})}));
    check_against_whole(g, 64);
  }
  {
    ModelBuilder m(DType::f32);
    const std::string x = m.input("x", {37, 129});
    const OpGraph g = m.graph(m.op("Add", {m.op("MatMul", {x, m.weight("w", {129, 71}, 3)}), m.weight("c", {71}, 4)}));
    const SampledOutput out = check_against_whole(g, 1000);
    CHECK(out.flat_index.size() >= 1000);
  }
}

TEST_CASE("sampled reference: an output smaller than the sample is sampled whole") {
  ModelBuilder m(DType::f32);
  const std::string x = m.input("x", {3, 5});
  const OpGraph g = m.graph(m.op("Exp", {x}));
  const SampledOutput out = check_against_whole(g, 4096);
  std::vector<int64_t> idx = out.flat_index;
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  CHECK(idx.size() == 15);
}

TEST_CASE("sampled reference: through reshapes (heads split and merged) and a transpose") {
  // [2, 6, 32] -> heads [2, 6, 4, 8] -> [2, 4, 6, 8] -> x 2 -> back to [2, 6, 32] -> a projection.
  ModelBuilder m(DType::f32);
  const std::string x = m.input("x", {2, 6, 32});
  const std::string split = m.op("Reshape", {x, m.weight_i64("s1", {2, 6, 4, 8})});
  const std::string heads = m.op("Transpose", {split}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const std::string back = m.op("Transpose", {m.op("Exp", {heads})}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const std::string merged = m.op("Reshape", {back, m.weight_i64("s2", {2, 6, 32})});
  const OpGraph g = m.graph(m.op("MatMul", {merged, m.weight("w", {32, 24}, 5)}));
  int reinterpreting = 0;  // the reshapes lower to nodes whose output reinterprets their domain
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    const std::vector<int64_t> e = g.node(n).extents();
    reinterpreting += g.node(n).output().shape != std::vector<int64_t>(e.begin(), e.begin() + g.node(n).num_spatial());
  }
  CHECK(reinterpreting >= 1);
  check_against_whole(g, 64);
  // A reshape as the last node: the sample's flat indices are the output's.
  ModelBuilder r(DType::f32);
  const std::string y = r.input("y", {6, 10});
  const OpGraph h = r.graph(r.op("Reshape", {r.op("Sigmoid", {y}), r.weight_i64("s", {3, 20})}));
  check_against_whole(h, 16);
}

TEST_CASE("sampled reference: a sample that would cost most of the graph is refused") {
  // Every element of a row sum needs its whole row: four boxes of a [4, 4096] -> [4] graph are the
  // whole graph four times over.
  ModelBuilder m(DType::f32);
  const std::string x = m.input("x", {4, 4096});
  const OpGraph g = m.graph(m.op("ReduceSum", {x, m.weight_i64("axes", {1})}, {{"keepdims", int64_t{0}}}));
  const SampledReference s = interpret_sample(g, random_inputs(g, 1));
  CHECK_FALSE(s.ok);
  CHECK(s.reason.find("domain points, more than") != std::string::npos);
}
