// Bad models that parse fine but cannot be lowered: cycles, dangling names, tensors defined twice,
// unsupported operators (all listed in one error), shape mismatches, bad attributes, unknown input
// dimensions. Each must raise a UserError naming the op or tensor and the offending value; an
// InternalError fails the test.
#include <doctest/doctest.h>

#include "../test_util.h"
#include "tilegraph/error.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

ModelDef two_op_model() {
  ModelDef m;
  m.name = "two";
  m.file = "two.json";
  m.inputs.push_back({"x", TensorType{DType::f32, {2, 3}}});
  m.ops.push_back({"a", "Relu", {"x"}, {"h"}, {}, ""});
  m.ops.push_back({"b", "Exp", {"h"}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  return m;
}

/// Lowering `m` must raise a UserError (not an InternalError) whose text contains each of `parts`.
void expect_user_error(const ModelDef& m, const std::vector<std::string>& parts) {
  try {
    lower_model(m);
    FAIL("expected a UserError");
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    const std::string text = e.what();
    for (const std::string& p : parts) {
      INFO("error text: ", text);
      CHECK(text.find(p) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("the base model lowers") { CHECK(lower_model(two_op_model()).num_nodes() == 2); }

TEST_CASE("a cycle names an op on it") {
  ModelDef m = two_op_model();
  m.ops[0].inputs[0] = "y";  // a reads b's output, b reads a's
  expect_user_error(m, {"two.json", "cycle"});
}

TEST_CASE("a dangling tensor name names the op, the input and the name") {
  ModelDef m = two_op_model();
  m.ops[1].inputs[0] = "nope";
  expect_user_error(m, {"op 'b' input 0", "'nope'"});
  m = two_op_model();
  m.outputs[0] = "missing";
  expect_user_error(m, {"output 'missing'"});
}

TEST_CASE("a tensor defined twice") {
  ModelDef m = two_op_model();
  m.ops[1].outputs[0] = "h";
  expect_user_error(m, {"tensor 'h' is defined more than once"});
}

TEST_CASE("every unsupported operator is listed in one error") {
  ModelDef m = two_op_model();
  m.ops[0].op_type = "Frobnicate";
  m.ops[1].op_type = "Loop";
  m.ops.push_back({"c", "Frobnicate", {"x"}, {"z"}, {}, ""});
  try {
    lower_model(m);
    FAIL("expected an UnsupportedError");
  } catch (const UnsupportedError& e) {
    const std::string text = e.what();
    CHECK(text.find("Frobnicate (2 ops") != std::string::npos);
    CHECK(text.find("Loop (1 op: 'b')") != std::string::npos);  // an ONNX op Tessel lacks: no guess
  }
  // A misspelt operator gets the nearest one Tessel has.
  m = two_op_model();
  m.ops[0].op_type = "Relux";
  m.ops[1].op_type = "matmul";
  expect_user_error(m, {"Relux (1 op: 'a'; did you mean Relu?)", "matmul (1 op: 'b'; did you mean MatMul?)"});
}

TEST_CASE("shape mismatches name both shapes") {
  ModelDef m = two_op_model();
  m.inputs.push_back({"z", TensorType{DType::f32, {4}}});
  m.ops[1] = {"b", "Add", {"h", "z"}, {"y"}, {}, ""};
  expect_user_error(m, {"op 'b' (Add)", "[2,3]", "[4]"});
  m.ops[1] = {"b", "Concat", {"h", "z"}, {"y"}, {{"axis", int64_t{0}}}, ""};
  expect_user_error(m, {"op 'b' (Concat)", "rank"});
}

TEST_CASE("mixed dtypes are rejected, not silently cast") {
  ModelDef m = two_op_model();
  m.inputs.push_back({"z", TensorType{DType::i64, {2, 3}}});
  m.ops[1] = {"b", "Mul", {"h", "z"}, {"y"}, {}, ""};
  expect_user_error(m, {"op 'b' (Mul)", "f32", "i64"});
}

TEST_CASE("bad attribute types and values name the attribute") {
  ModelDef m = two_op_model();
  m.ops[1] = {"b", "Softmax", {"h"}, {"y"}, {{"axis", std::string("last")}}, ""};
  expect_user_error(m, {"attribute 'axis'", "expected an integer, got a string"});
  m.ops[1] = {"b", "Softmax", {"h"}, {"y"}, {{"axis", int64_t{5}}}, ""};
  expect_user_error(m, {"axis 5 is out of range for rank 2"});
  m.ops[1] = {"b", "Transpose", {"h"}, {"y"}, {{"perm", std::vector<int64_t>{0, 0}}}, ""};
  expect_user_error(m, {"repeats axis 0"});
  m.ops[1] = {"b", "Gelu", {"h"}, {"y"}, {{"approximate", std::string("fast")}}, ""};
  expect_user_error(m, {"\"fast\""});
}

TEST_CASE("a missing required input is named") {
  ModelDef m = two_op_model();
  m.ops[1] = {"b", "MatMul", {"h"}, {"y"}, {}, ""};
  expect_user_error(m, {"op 'b' (MatMul)", "input 1 is required"});
}

TEST_CASE("unknown input dimensions need a shape") {
  ModelDef m = two_op_model();
  m.inputs[0].type.shape = {-1, 3};
  expect_user_error(m, {"input 'x'", "dimension 0 is unknown"});
  LowerOptions opts;
  opts.input_shapes["x"] = {5, 3};
  CHECK(lower_model(m, opts).tensor(0).type.shape == std::vector<int64_t>{5, 3});
  opts.input_shapes["x"] = {5, 4};
  CHECK_THROWS_AS(lower_model(m, opts), UserError);
}

TEST_CASE("a reshape to the wrong element count names both counts") {
  ModelDef m = two_op_model();
  m.weights.push_back({"s", TensorType{DType::i64, {1}}, std::make_shared<const HostTensor>(i64({1}, {7}))});
  m.ops[1] = {"b", "Reshape", {"h", "s"}, {"y"}, {}, ""};
  expect_user_error(m, {"op 'b' (Reshape)", "6 elements", "7 elements"});
}

TEST_CASE("interpreting with inputs of the wrong type names the input") {
  const OpGraph g = lower_model(two_op_model());
  CHECK_THROWS_AS(interpret(g, {f32({3, 2}, {1, 2, 3, 4, 5, 6})}), UserError);
  CHECK_THROWS_AS(interpret(g, {}), UserError);
}

TEST_CASE("a reduction over a zero-size dimension names the node, the axis and the extent") {
  // fuzz_onnx found a ConvTranspose with a [1, 1, 0, 2] weight escaping as an InternalError.
  ModelDef conv = single_op_model("ConvTranspose", {random_f32({1, 1, 3, 3}, 1), random_f32({1, 1, 0, 2}, 2)}, {}, 1, {1});
  expect_user_error(conv, {"ConvTranspose", "extent 0", "empty reductions are not supported"});
  // The same check holds whatever the op: a MatMul over K = 0.
  ModelDef matmul = single_op_model("MatMul", {random_f32({2, 0}, 3), random_f32({0, 4}, 4)}, {}, 1, {});
  expect_user_error(matmul, {"extent 0", "empty reductions are not supported"});
}

TEST_CASE("a convolution's weight_layout must fit its layout") {
  // HWIO weights are a channels-last form: with NCHW, or an unknown name, the attribute is refused.
  for (const auto& [layout, weights] : std::vector<std::pair<std::string, std::string>>{{"NCHW", "HWIO"}, {"NHWC", "IOHW"}}) {
    ModelDef m;
    m.name = "conv";
    m.file = "conv.json";
    m.inputs.push_back({"x", TensorType{DType::f32, {1, 4, 4, 4}}});
    m.weights.push_back({"w", TensorType{DType::f32, {3, 3, 1, 4}}, RandomInit{RandomInit::Dist::normal, 0, 0.02, 1}});
    m.ops.push_back({"c", "Conv", {"x", "w"}, {"y"}, {{"layout", layout}, {"weight_layout", weights}, {"group", int64_t{4}}}, ""});
    m.outputs.push_back("y");
    expect_user_error(m, {"op 'c' (Conv)", "weight_layout", weights});
  }
}
