// Data-movement operators against index arithmetic written here, and import-time folding of
// shape computations.
#include "../test_util.h"

using namespace tessel;
using namespace tessel::testing;

namespace {
HostTensor iota(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return f32(std::move(shape), v);
}
}  // namespace

TEST_CASE("Transpose, Reshape (0 and -1), Flatten, Squeeze, Unsqueeze") {
  const HostTensor x = iota({2, 3, 4});
  const auto t = run_op("Transpose", {x}, {{"perm", std::vector<int64_t>{2, 0, 1}}})[0];
  REQUIRE(t.shape() == std::vector<int64_t>{4, 2, 3});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) CHECK(t[(c * 2 + a) * 3 + b] == x[(a * 3 + b) * 4 + c]);
  const auto r = run_op("Reshape", {x, i64({3}, {0, -1, 2})}, {}, 1, {1})[0];
  CHECK(r.shape() == std::vector<int64_t>{2, 6, 2});
  CHECK(r.values() == x.values());
  CHECK(run_op("Flatten", {x}, {{"axis", int64_t{2}}})[0].shape() == std::vector<int64_t>{6, 4});
  const auto u = run_op("Unsqueeze", {x, i64({2}, {0, -1})}, {}, 1, {1})[0];
  CHECK(u.shape() == std::vector<int64_t>{1, 2, 3, 4, 1});
  CHECK(run_op("Squeeze", {u})[0].shape() == std::vector<int64_t>{2, 3, 4});
  CHECK_THROWS_AS(run_op("Reshape", {x, i64({2}, {5, -1})}, {}, 1, {1}), UserError);
}

TEST_CASE("Concat, Split and Slice with negative steps") {
  const HostTensor a = iota({2, 2}), b = f32({2, 1}, {10, 11});
  const auto cc = run_op("Concat", {a, b, a}, {{"axis", int64_t{1}}})[0];
  CHECK(cc.values() == std::vector<double>{0, 1, 10, 0, 1, 2, 3, 11, 2, 3});
  const auto parts = run_op("Split", {iota({7})}, {{"axis", int64_t{0}}}, 2);
  CHECK(parts[0].values() == std::vector<double>{0, 1, 2, 3});
  CHECK(parts[1].values() == std::vector<double>{4, 5, 6});
  const auto sl = run_op("Slice", {iota({10}), i64({1}, {-2}), i64({1}, {-9223372036854775807.0}),
                                   i64({1}, {0}), i64({1}, {-3})}, {}, 1, {1, 2, 3, 4})[0];
  CHECK(sl.values() == std::vector<double>{8, 5, 2});
}

TEST_CASE("Pad, Expand, Tile, Gather, Trilu, CumSum") {
  const auto p = run_op("Pad", {iota({2}), i64({2}, {1, 2}), f32({}, {9})}, {}, 1, {1, 2})[0];
  CHECK(p.values() == std::vector<double>{9, 0, 1, 9, 9});
  const auto e = run_op("Expand", {f32({2, 1}, {1, 2}), i64({2}, {2, 3})}, {}, 1, {1})[0];
  CHECK(e.values() == std::vector<double>{1, 1, 1, 2, 2, 2});
  const auto t = run_op("Tile", {f32({2}, {1, 2}), i64({1}, {3})}, {}, 1, {1})[0];
  CHECK(t.values() == std::vector<double>{1, 2, 1, 2, 1, 2});
  const auto g = run_op("Gather", {iota({3, 2}), i64({2, 2}, {2, 0, 1, -1})})[0];
  CHECK(g.shape() == std::vector<int64_t>{2, 2, 2});
  CHECK(g.values() == std::vector<double>{4, 5, 0, 1, 2, 3, 4, 5});
  const auto tri = run_op("Trilu", {iota({3, 3}), i64({}, {1})}, {{"upper", int64_t{0}}}, 1, {1})[0];
  CHECK(tri.values() == std::vector<double>{0, 1, 0, 3, 4, 5, 6, 7, 8});
  const auto cs = run_op("CumSum", {iota({4}), i64({}, {0})}, {{"exclusive", int64_t{1}}}, 1, {1})[0];
  CHECK(cs.values() == std::vector<double>{0, 0, 1, 3});
}

TEST_CASE("Shape arithmetic is folded at import: no node computes it") {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1]))
  ModelDef m;
  m.name = "fold";
  m.inputs.push_back({"x", TensorType{DType::f32, {2, 3, 4}}});
  m.weights.push_back({"minus1", TensorType{DType::i64, {1}},
                       std::make_shared<const HostTensor>(i64({1}, {-1}))});
  m.ops.push_back({"shape", "Shape", {"x"}, {"s"}, {}, ""});
  m.ops.push_back({"first", "Slice", {"s", "zero", "one"}, {"s0"}, {}, ""});
  m.ops.push_back({"zero", "Constant", {}, {"zero"}, {{"value", i64({1}, {0})}}, ""});
  m.ops.push_back({"one", "Constant", {}, {"one"}, {{"value", i64({1}, {1})}}, ""});
  m.ops.push_back({"cat", "Concat", {"s0", "minus1"}, {"shape2"}, {{"axis", int64_t{0}}}, ""});
  m.ops.push_back({"reshape", "Reshape", {"x", "shape2"}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  const OpGraph g = lower_model(m);
  CHECK(g.num_nodes() == 1);  // only the reshape copy remains
  CHECK(g.tensor(g.outputs()[0]).type.shape == std::vector<int64_t>{2, 12});
  CHECK(g.weights().empty());
}

TEST_CASE("inputs bound at import may determine shapes") {
  ModelDef m;
  m.name = "bind";
  m.inputs.push_back({"x", TensorType{DType::f32, {2, 6}}});
  m.inputs.push_back({"shape", TensorType{DType::i64, {2}}});
  m.ops.push_back({"r", "Reshape", {"x", "shape"}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  CHECK_THROWS_AS(lower_model(m), UnsupportedError);  // the shape is a run-time input
  LowerOptions opts;
  opts.constant_inputs.emplace("shape", i64({2}, {3, 4}));
  const OpGraph g = lower_model(m, opts);
  CHECK(g.inputs().size() == 1);
  CHECK(g.tensor(g.outputs()[0]).type.shape == std::vector<int64_t>{3, 4});
  opts.constant_inputs.clear();
  opts.constant_inputs.emplace("shape", i64({3}, {3, 2, 2}));  // declared [2]
  CHECK_THROWS_AS(lower_model(m, opts), UserError);
}
