// The interpreter on hand-built nodes: padding, gathers, reductions along each kind of lane,
// thread-count independence, and fp64 accumulation.
#include <doctest/doctest.h>

#include <cmath>

#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"

using namespace tessel;

TEST_CASE("padded reads yield the pad value") {
  // out[i] = x[i - 1] with pad -5 over i in [0, 5) for x of 3 elements.
  NodeSpec s;
  s.name = "shift";
  s.axes = {{"i", 5, AxisKind::spatial}};
  s.inputs = {Access{TensorType{DType::f32, {3}}, AffineMap(1, {AffineExpr{{1}, -1}}), -5.0}};
  s.body = input(0, DType::f32);
  HostTensor x(TensorType{DType::f32, {3}}, {1, 2, 3});
  HostTensor out = evaluate_node(*make_node(s), {&x});
  CHECK(out.values() == std::vector<double>{-5, 1, 2, 3, -5});
}

TEST_CASE("a gather reads the index input, negative indices count from the end") {
  NodeSpec s;
  s.name = "gather";
  s.axes = {{"i", 3, AxisKind::spatial}, {"j", 2, AxisKind::spatial}};
  Access table{TensorType{DType::f32, {4, 2}}, AffineMap::select_axes(2, {-1, 1})};
  table.gather_dim = 0;
  table.gather_index_input = 1;
  s.inputs = {table, Access{TensorType{DType::i64, {3}}, AffineMap::select_axes(2, {0})}};
  s.body = input(0, DType::f32);
  HostTensor t(TensorType{DType::f32, {4, 2}}, {0, 1, 10, 11, 20, 21, 30, 31});
  HostTensor idx(TensorType{DType::i64, {3}}, {2, 0, -1});
  HostTensor out = evaluate_node(*make_node(s), {&t, &idx});
  CHECK(out.values() == std::vector<double>{20, 21, 0, 1, 30, 31});
  HostTensor bad(TensorType{DType::i64, {3}}, {2, 0, 4});
  CHECK_THROWS_AS(evaluate_node(*make_node(s), {&t, &bad}), UserError);
}

TEST_CASE("reductions agree whichever axis carries the lanes, on any thread count") {
  // Row sums of a 3 x 1000 matrix (lanes along the reduction) and column sums of a 1000 x 3
  // matrix (lanes along ... the reduction too, spatial extent 3 < 8), and a 100 x 100 sum.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 1000}, {1000, 3}, {100, 100}, {1, 1}}) {
    NodeSpec s;
    s.name = "rowsum";
    s.axes = {{"i", rows, AxisKind::spatial}, {"k", cols, AxisKind::reduction}};
    s.inputs = {Access{TensorType{DType::f64, {rows, cols}}, AffineMap::select_axes(2, {0, 1})}};
    s.body = input(0, DType::f64);
    s.combiner = Combiner::sum;
    std::vector<double> v(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 7) - 3;
    HostTensor x(TensorType{DType::f64, {rows, cols}}, v);
    const NodeRef n = make_node(s);
    InterpretOptions one, two;
    one.threads = 1;
    two.threads = 2;
    HostTensor a = evaluate_node(*n, {&x}, one), b = evaluate_node(*n, {&x}, two);
    for (int64_t r = 0; r < rows; ++r) {
      double expect = 0;
      for (int64_t c = 0; c < cols; ++c) expect += v[r * cols + c];
      CHECK(a[r] == expect);
      CHECK(b[r] == expect);
    }
  }
}

TEST_CASE("accumulation is fp64 even for f32 tensors") {
  // 1 + 1e-8 * 10^6 in f32 steps would stay 1; in fp64 it is 1.01.
  const int64_t n = 1000001;
  NodeSpec s;
  s.name = "sum";
  s.axes = {{"k", n, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {n}}, AffineMap::select_axes(1, {0})}};
  s.body = input(0, DType::f32);
  s.combiner = Combiner::sum;
  std::vector<double> v(n, static_cast<double>(1e-8f));
  v[0] = 1;
  HostTensor x(TensorType{DType::f32, {n}}, v);
  HostTensor out = evaluate_node(*make_node(s), {&x});
  CHECK(out[0] == doctest::Approx(1.01).epsilon(1e-6));
}

TEST_CASE("the instrumented point path agrees with the lane paths and reports in-range reads") {
  // A padded, strided 1-D convolution: out[o] = sum_k x[2*o + k - 1] * w[k].
  NodeSpec s;
  s.name = "conv";
  s.axes = {{"o", 9, AxisKind::spatial}, {"k", 3, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {17}}, AffineMap(2, {AffineExpr{{2, 1}, -1}})},
              Access{TensorType{DType::f32, {3}}, AffineMap::select_axes(2, {1})}};
  s.body = input(0, DType::f32) * input(1, DType::f32);
  s.combiner = Combiner::sum;
  std::vector<double> xv(17);
  for (int i = 0; i < 17; ++i) xv[i] = 0.25 * i - 2;
  HostTensor x(TensorType{DType::f32, {17}}, xv), w(TensorType{DType::f32, {3}}, {0.5, -1, 2});
  const NodeRef n = make_node(s);
  int64_t reads = 0, min_index = 100;
  InterpretOptions observed;
  observed.read_observer = [&](int input, const int64_t* index) {
    if (input == 0) {
      ++reads;
      min_index = std::min(min_index, index[0]);
    }
  };
  CHECK(evaluate_node(*n, {&x, &w}, observed).values() == evaluate_node(*n, {&x, &w}).values());
  CHECK(reads == 9 * 3 - 2);  // the reads at -1 and 17 are padding
  CHECK(min_index == 0);

  // Restricted to output points [3, 5) and the first two kernel taps.
  InterpretOptions tile;
  tile.domain_tile = DomainBox{{3, 0}, {2, 2}};
  const HostTensor part = evaluate_node(*n, {&x, &w}, tile);
  CHECK(part[3] == doctest::Approx(static_cast<float>(xv[5] * 0.5 + xv[6] * -1)));  // o = 3
  CHECK(part[4] == doctest::Approx(static_cast<float>(xv[7] * 0.5 + xv[8] * -1)));  // o = 4
  CHECK(part[2] == 0);  // outside the tile
}
