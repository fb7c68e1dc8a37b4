// Issue 29, class 6: inputs that once gave a wrong answer without an error (so that `--check`,
// comparing two paths that agree, passed). An input an operator does not have was ignored
// (`Add(x, z, z)` computed x + z, `Relu(x, z)` was accepted): now a UserError naming the op and
// the input. The mean over an empty axis was the empty sum, 0: now NaN, as ONNX's reference.
// An Einsum over an empty dimension gave an output of extent 1 there: now empty.
#include <doctest/doctest.h>

#include <cmath>

#include "../test_util.h"
#include "tilegraph/error.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

/// Lowering `op` over `inputs` must raise a UserError containing each of `parts`.
void expect_refused(const std::string& op, const std::vector<HostTensor>& inputs, const std::vector<std::string>& parts,
                    std::map<std::string, AttrValue> attrs = {}, const std::set<int>& constants = {}) {
  CAPTURE(op);
  try {
    (void)lower_model(single_op_model(op, inputs, std::move(attrs), 1, constants));
    FAIL("no error: the extra input was ignored");
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    const std::string text = e.what();
    INFO(text);
    for (const std::string& p : parts) CHECK(text.find(p) != std::string::npos);
    CHECK(text.find('\n') == std::string::npos);
  }
}

}  // namespace

TEST_CASE("an input an operator does not take is a UserError, not ignored") {
  const HostTensor x = random_f32({2, 3}, 1), z = random_f32({2, 3}, 2);
  expect_refused("Relu", {x, z}, {"op 'op' (Relu)", "takes 1 input, but the model gives it 2", "input 1 'in1' would be ignored"});
  expect_refused("Add", {x, z, z}, {"(Add)", "takes 2 inputs, but the model gives it 3", "input 2 'in2'"});
  expect_refused("MatMul", {x, random_f32({3, 2}, 3), z}, {"(MatMul)", "input 2"});
  // Inputs given as weights (folded at import) are checked the same way.
  expect_refused("Exp", {x, z}, {"(Exp)", "input 1"}, {}, {0, 1});
  // An optional input left empty in the middle is not "given".
  CHECK_NOTHROW(run_op("Clip", {x, tensor(DType::f32, {}, {-0.5}), tensor(DType::f32, {}, {0.5})}, {}, 1, {1, 2}));
  // Every optional input an operator has is still read: Pad's constant value and axes, Slice's
  // axes and steps, Gemm's C, a variadic Sum of three.
  const std::vector<HostTensor> pad = run_op(
      "Pad", {x, tensor(DType::i64, {2}, {1, 1}), tensor(DType::f32, {}, {7}), tensor(DType::i64, {1}, {1})}, {}, 1, {1, 2, 3});
  REQUIRE(pad.size() == 1);
  CHECK(pad[0].shape() == std::vector<int64_t>{2, 5});
  CHECK(pad[0][0] == 7.0);
  const std::vector<HostTensor> slice = run_op("Slice",
                                               {random_f32({4, 6}, 4), tensor(DType::i64, {1}, {1}), tensor(DType::i64, {1}, {5}),
                                                tensor(DType::i64, {1}, {1}), tensor(DType::i64, {1}, {2})},
                                               {}, 1, {1, 2, 3, 4});
  CHECK(slice[0].shape() == std::vector<int64_t>{4, 2});
  CHECK_NOTHROW(run_op("Gemm", {x, random_f32({3, 4}, 5), random_f32({4}, 6)}));
  CHECK(run_op("Sum", {x, z, z})[0][0] == doctest::Approx(x[0] + 2 * z[0]));
}

TEST_CASE("the mean over an empty axis is NaN, not the empty sum's 0") {
  const HostTensor empty = tensor(DType::f32, {2, 0}, {});
  const std::vector<HostTensor> mean = run_op("ReduceMean", {empty, tensor(DType::i64, {1}, {1})}, {}, 1, {1});
  REQUIRE(mean.size() == 1);
  CHECK(mean[0].shape() == std::vector<int64_t>{2, 1});
  CHECK(std::isnan(mean[0][0]));
  CHECK(std::isnan(mean[0][1]));
  // The other reductions of no values keep their identities (ONNX: sum 0, max -inf).
  CHECK(run_op("ReduceSum", {empty, tensor(DType::i64, {1}, {1})}, {}, 1, {1})[0][0] == 0.0);
  CHECK(run_op("ReduceMax", {empty, tensor(DType::i64, {1}, {1})}, {}, 1, {1})[0][0] == -INFINITY);
}

TEST_CASE("an Einsum over an empty dimension keeps it empty, not of extent 1") {
  // ("ij,jk->ik" with i = 0 gave a [1, 4] output read from no values: the first extent seen of a
  // subscript was raised to 1.)
  const std::vector<HostTensor> y =
      run_op("Einsum", {tensor(DType::f32, {0, 3}, {}), random_f32({3, 4}, 7)}, {{"equation", std::string("ij,jk->ik")}});
  REQUIRE(y.size() == 1);
  CHECK(y[0].shape() == std::vector<int64_t>{0, 4});
  // An empty reduction is refused with the reason.
  expect_refused("Einsum", {tensor(DType::f32, {2, 0}, {}), tensor(DType::f32, {0, 4}, {})}, {"Einsum", "extent 0"},
                 {{"equation", std::string("ij,jk->ik")}});
}
