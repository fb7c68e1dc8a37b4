// TeNode: the verifier rejects malformed specs; the printer is stable.
#include <doctest/doctest.h>

#include "tilegraph/error.h"
#include "tilegraph/node.h"

using namespace tessel;

namespace {
// out[i, j] = sum_k A[i, k] * B[k, j]
NodeSpec matmul_spec() {
  NodeSpec s;
  s.name = "mm";
  s.axes = {{"i", 2, AxisKind::spatial}, {"j", 3, AxisKind::spatial}, {"k", 4, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {2, 4}}, AffineMap::select_axes(3, {0, 2})},
              Access{TensorType{DType::f32, {4, 3}}, AffineMap::select_axes(3, {2, 1})}};
  s.body = input(0, DType::f32) * input(1, DType::f32);
  s.combiner = Combiner::sum;
  return s;
}
}  // namespace

TEST_CASE("a valid matmul node") {
  NodeRef n = make_node(matmul_spec());
  CHECK(n->output() == TensorType{DType::f32, {2, 3}});
  CHECK(n->num_spatial() == 2);
  CHECK(n->num_reduction() == 1);
  CHECK(n->flops() == 2 * 3 * 4 * 2);
  CHECK(print_node(*n, {"A", "B"}, "C") ==
        "C: f32[2,3] = reduce sum init 0 node \"mm\"\n"
        "  domain (i:2, j:3 | k:4)\n"
        "  in0 = A[i, k] : f32[2,4]\n"
        "  in1 = B[k, j] : f32[4,3]\n"
        "  body mul(in0, in1)\n");
}

TEST_CASE("the verifier names what is wrong") {
  auto problem = [](NodeSpec s) { return verify_spec(s).value_or(""); };
  NodeSpec s = matmul_spec();
  s.combiner = Combiner::none;
  CHECK(problem(s) == "reduction axes without a combiner");
  s = matmul_spec();
  s.inputs[1].map = AffineMap::select_axes(3, {2});
  CHECK(problem(s) == "input 1 map has 1 results for a rank-2 tensor");
  s = matmul_spec();
  s.body = input(2, DType::f32);
  CHECK(problem(s) == "body reads in2 but the node has 2 inputs");
  s = matmul_spec();
  s.axes.push_back({"x", 2, AxisKind::spatial});
  CHECK(problem(s).find("spatial axis x after a reduction axis") != std::string::npos);
  s = matmul_spec();
  s.output_shape = std::vector<int64_t>{7};
  CHECK(problem(s) == "output shape has 7 elements, spatial domain has 6");
  s = matmul_spec();
  s.axes[2].extent = 0;
  CHECK(problem(s) == "axis k has extent 0");
  CHECK_THROWS_AS(make_node(s), InternalError);
}

TEST_CASE("output reinterpretation keeps the element count") {
  NodeSpec s = matmul_spec();
  s.output_shape = std::vector<int64_t>{3, 2};
  CHECK(make_node(s)->output().shape == std::vector<int64_t>{3, 2});
}
