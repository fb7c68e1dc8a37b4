// Sizes over Tessel's limits (tilegraph/limits.h): element counts that overflow int64 or are
// absurd, from an operator's attributes or constants, a declared input, a weight or a shape given
// at run time. Each must be a one-line UserError naming the op or tensor and the size, raised
// before anything is allocated or computed -- not a crash, an abort, a wrapped value or an empty
// result (issue: hostile inputs, class 1).
#include <doctest/doctest.h>

#include "../model_builder.h"
#include "../test_util.h"
#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/limits.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

constexpr int64_t kHuge = int64_t{1} << 62;

/// Lowering must raise a UserError (one line) containing each of `parts`.
void expect_size_error(const ModelDef& m, const std::vector<std::string>& parts, const LowerOptions& options = {}) {
  try {
    lower_model(m, options);
    FAIL("expected a UserError");
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    const std::string text = e.what();
    INFO("error text: ", text);
    CHECK(text.find('\n') == std::string::npos);
    CHECK(text.find("-9223372036854775808") == std::string::npos);  // no wrapped value
    for (const std::string& p : parts) CHECK(text.find(p) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("size limits: checked products and sums") {
  CHECK(checked_product({2, 3, 4}, kMaxTensorElements) == 24);
  CHECK(checked_product({kHuge, 0}, kMaxTensorElements) == 0);  // empty, whatever the other extents
  CHECK_FALSE(checked_product({kHuge, 2, 2}, kMaxTensorElements));
  CHECK_FALSE(checked_product({int64_t{1} << 32, int64_t{1} << 32, 4}, kMaxDomainPoints));
  CHECK_FALSE(checked_product({3, -1}, kMaxTensorElements));
  CHECK_FALSE(checked_mul(kHuge, 4));
  CHECK_FALSE(checked_add(INT64_MAX, 1));
  CHECK_FALSE(checked_add(kHuge, kHuge));
  CHECK(tensor_size_problem({1024, 1024}).empty());
  CHECK(tensor_size_problem({3037000500, 3037000500}).find("more than 2^40 elements") != std::string::npos);
  CHECK(tensor_size_problem({2, -3}).find("negative") != std::string::npos);
  // A tensor type over the limit refuses to count its elements (so nothing allocates it).
  const TensorType huge{DType::f32, {kHuge, 2, 2}}, large{DType::f32, {3037000500, 3037000500}};
  CHECK_THROWS_AS((void)huge.num_elements(), UserError);
  CHECK_THROWS_AS((void)HostTensor(large), UserError);
}

TEST_CASE("size limits: operators whose output would be too large name the op and the shape") {
  {  // Expand of [1, 1] to [2^62, 2, 2] (then a sum): once a SIGSEGV
    ModelBuilder b(DType::f32);
    const std::string e = b.op("Expand", {b.input("x", {1, 1}), b.weight_i64("shape", {kHuge, 2, 2})});
    expect_size_error(b.model({b.op("ReduceSum", {e})}), {"op 'op0' (Expand)", "4611686018427387904x2x2", "more than 2^40"});
  }
  {  // Expand to [2^32, 2^32, 4]: the product wraps to 0 in int64 (once an empty output)
    ModelBuilder b(DType::f32);
    const std::string e = b.op("Expand", {b.input("x", {1, 1}), b.weight_i64("shape", {int64_t{1} << 32, int64_t{1} << 32, 4})});
    expect_size_error(b.model({e}), {"(Expand)", "4294967296x4294967296x4"});
  }
  {  // ConstantOfShape [3037000500, 3037000500]: fits int64, too large to allocate (once exit 134)
    ModelBuilder b(DType::f32);
    const std::string c = b.op("ConstantOfShape", {b.weight_i64("shape", {3037000500, 3037000500})});
    expect_size_error(b.model({b.op("Add", {c, b.input("x", {1})})}), {"(ConstantOfShape)", "3037000500x3037000500"});
  }
  {  // Tile repeats [2^62, 4]: the repeated extent overflows (once exit 3)
    ModelBuilder b(DType::f32);
    const std::string t = b.op("Tile", {b.input("x", {2, 2}), b.weight_i64("repeats", {kHuge, 4})});
    expect_size_error(b.model({t}), {"(Tile)", "repeats entry 0 (4611686018427387904)", "more than 2^40"});
  }
  {  // A convolution's padding and dilation: no wrapped extent in the message (once "-1612")
    ModelBuilder b(DType::f32);
    const std::string w = b.weight("w", {1, 1, 3, 3}, 1);
    const std::string c = b.op("Conv", {b.input("x", {1, 1, 8, 8}), w},
                               {{"pads", std::vector<int64_t>{kHuge, 0, kHuge, 0}}});
    expect_size_error(b.model({c}), {"(Conv)", "attribute 'pads' has value 4611686018427387904"});
    ModelBuilder d(DType::f32);
    const std::string dc = d.op("Conv", {d.input("x", {1, 1, 8, 8}), d.weight("w", {1, 1, 3, 3}, 1)},
                                {{"dilations", std::vector<int64_t>{int64_t{1} << 40, 1}}});
    expect_size_error(d.model({dc}), {"(Conv)", "kernel extent 3 with dilation 1099511627776 spans more than 2^40"});
  }
  {  // A MatMul whose domain (m x n x k = 2^60) is beyond the limit though no tensor is (2^40 each)
    ModelBuilder b(DType::f32);
    const int64_t side = int64_t{1} << 20;
    const std::string big = b.op("MatMul", {b.input("a", {side, side}), b.input("b", {side, side})});
    expect_size_error(b.model({big}), {"(MatMul)", "1048576x1048576x1048576 points, more than 2^56"});
  }
}

TEST_CASE("size limits: declared inputs, shapes given at run time and weights") {
  ModelBuilder b(DType::f32);
  b.input("x", {-1, 2});  // an unknown dimension: given at run time
  ModelDef m = b.model({b.op("Relu", {"x"})});
  LowerOptions given;
  given.input_shapes["x"] = {kHuge, 2};
  expect_size_error(m, {"input 'x'", "4611686018427387904x2", "more than 2^40"}, given);
  ModelBuilder w(DType::f32);
  ModelDef mw = w.model({w.op("Add", {w.input("x", {4}), w.weight("w", {kHuge, 4}, 1)})});
  expect_size_error(mw, {"weight 'w'", "4611686018427387904x4"});
}
