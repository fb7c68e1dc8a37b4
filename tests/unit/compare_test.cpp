// The two comparison rules of tilegraph/compare.h: elementwise (reference results) and relative
// L2 (compiled code against the interpreter).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tilegraph/compare.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"
#include "tilegraph/op_graph.h"

using namespace tessel;

TEST_CASE("compare_tensors: elementwise rtol/atol by dtype, NaN only where the reference has one") {
  const TensorType t{DType::f32, {3}};
  CHECK(compare_tensors(HostTensor(t, {1.0, 2.0, 3.0}), HostTensor(t, {1.0, 2.0001, 3.0})).ok);
  const CompareResult bad = compare_tensors(HostTensor(t, {1.0, 2.1, 3.0}), HostTensor(t, {1.0, 2.0, 3.0}));
  CHECK_FALSE(bad.ok);
  CHECK(bad.first_mismatch == 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(compare_tensors(HostTensor(t, {nan, 2.0, 3.0}), HostTensor(t, {nan, 2.0, 3.0})).ok);
  CHECK_FALSE(compare_tensors(HostTensor(t, {nan, 2.0, 3.0}), HostTensor(t, {1.0, 2.0, 3.0})).ok);
}

TEST_CASE("compare_compiled: relative L2 error by dtype, a stray NaN or a type change never passes") {
  const TensorType t{DType::f32, {4}};
  const HostTensor ref(t, {1.0, -2.0, 3.0, 1e-6});
  // A near-zero element off by far more than rtol x |e|, but the tensor as a whole within 1e-5.
  const CompareResult near = compare_compiled(HostTensor(t, {1.0, -2.0, 3.0, 2e-5}), ref);
  CHECK(near.ok);
  CHECK_FALSE(compare_tensors(HostTensor(t, {1.0, -2.0, 3.0, 2e-5}), ref).ok);
  CHECK(near.rel_l2_error == doctest::Approx(1.9e-5 / std::sqrt(14.0)).epsilon(1e-3));
  const CompareResult off = compare_compiled(HostTensor(t, {1.0, -2.0, 3.001, 0.0}), ref);
  CHECK_FALSE(off.ok);
  CHECK(off.message.find("relative L2 error") != std::string::npos);
  // A value that cancels (a 3-term dot product near zero, found by the GPU differential run):
  // 2.3e-8 off is 2.3e-5 of the value, over the L2 bound, but within atol: passes.
  const TensorType one{DType::f32, {1}};
  const CompareResult cancel = compare_compiled(HostTensor(one, {1e-3 + 2.3e-8}), HostTensor(one, {1e-3}));
  CHECK(cancel.ok);
  CHECK(cancel.rel_l2_error > tolerance_for(DType::f32).rel_l2);
  CHECK_FALSE(compare_compiled(HostTensor(one, {1e-3 + 2e-5}), HostTensor(one, {1e-3})).ok);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(compare_compiled(HostTensor(t, {1.0, -2.0, nan, 1e-6}), ref).ok);
  CHECK_FALSE(compare_compiled(HostTensor({DType::f16, {4}}, {1.0, -2.0, 3.0, 0.0}), ref).ok);
  // f16 allows 5e-3: one element off by 1e-3 of the tensor's norm passes.
  const TensorType h{DType::f16, {2}};
  CHECK(compare_compiled(HostTensor(h, {1.0, 1.00390625}), HostTensor(h, {1.0, 1.0})).ok);
  // Integers stay exact.
  const TensorType i{DType::i32, {2}};
  CHECK_FALSE(compare_compiled(HostTensor(i, {1.0, 3.0}), HostTensor(i, {1.0, 2.0})).ok);
}

TEST_CASE("computed_precision: the least precise float dtype an output was computed through") {
  // x (f32 input) -> Cast f16 -> Tanh (f16) -> Cast f32 -> Relu (f32) = y; and z = Relu(x).
  ModelDef m;
  m.name = "island";
  m.inputs.push_back({"x", {DType::f32, {4}}});
  m.ops.push_back(OpDef{"c1", "Cast", {"x"}, {"h"}, {{"to", std::string("f16")}}, ""});
  m.ops.push_back(OpDef{"t", "Tanh", {"h"}, {"th"}, {}, ""});
  m.ops.push_back(OpDef{"c2", "Cast", {"th"}, {"f"}, {{"to", std::string("f32")}}, ""});
  m.ops.push_back(OpDef{"r", "Relu", {"f"}, {"y"}, {}, ""});
  m.ops.push_back(OpDef{"r2", "Relu", {"x"}, {"z"}, {}, ""});
  m.outputs = {"y", "z"};
  const OpGraph g = lower_model(m);
  CHECK(computed_precision(g, g.outputs()[0]) == DType::f16);
  CHECK(computed_precision(g, g.outputs()[1]) == DType::f32);
  CHECK(computed_precision(g, g.inputs()[0]) == std::nullopt);  // inputs are exact
  // The f32 output with f16-sized error passes only when judged at f16 precision.
  const TensorType t{DType::f32, {2}};
  const HostTensor ref(t, {1.0, 1.0}), got(t, {1.0, 1.0009765625});
  CHECK_FALSE(compare_compiled(got, ref).ok);
  CHECK(compare_compiled(got, ref, DType::f16).ok);
  CHECK_FALSE(compare_compiled(got, ref, DType::f64).ok);  // a more precise dtype never loosens
}
