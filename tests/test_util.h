// Helpers shared by the doctest suites: build a one-operator model, run it through lowering and
// the interpreter, and compare with expected values under the dtype tolerances (compare.h).
#pragma once

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"

namespace tessel::testing {

inline HostTensor tensor(DType t, std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor(TensorType{t, std::move(shape)}, std::move(values));
}

inline HostTensor f32(std::vector<int64_t> shape, std::vector<double> values) {
  return tensor(DType::f32, std::move(shape), std::move(values));
}

inline HostTensor i64(std::vector<int64_t> shape, std::vector<double> values) {
  return tensor(DType::i64, std::move(shape), std::move(values));
}

/// Deterministic pseudo-random values of `dtype`, uniform in [lo, hi).
inline HostTensor random_uniform(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return materialize_random(TensorType{dtype, std::move(shape)}, RandomInit{RandomInit::Dist::uniform, lo, hi, seed});
}

/// Deterministic pseudo-random values in [-1, 1).
inline HostTensor random_f32(std::vector<int64_t> shape, uint64_t seed) { return random_uniform(DType::f32, std::move(shape), seed); }

/// A model with one operator: inputs listed in `constant_inputs` become weights with data (known
/// at import), the others model inputs.
inline ModelDef single_op_model(const std::string& op_type, const std::vector<HostTensor>& inputs,
                                std::map<std::string, AttrValue> attrs, int num_outputs,
                                const std::set<int>& constant_inputs) {
  ModelDef m;
  m.name = op_type;
  OpDef op;
  op.name = "op";
  op.op_type = op_type;
  op.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    op.inputs.push_back(name);
    if (constant_inputs.count(static_cast<int>(i)))
      m.weights.push_back({name, inputs[i].type(), std::make_shared<const HostTensor>(inputs[i])});
    else
      m.inputs.push_back({name, inputs[i].type()});
  }
  for (int k = 0; k < num_outputs; ++k) {
    op.outputs.push_back("out" + std::to_string(k));
    m.outputs.push_back("out" + std::to_string(k));
  }
  m.ops.push_back(op);
  return m;
}

inline std::vector<HostTensor> run_op(const std::string& op_type, const std::vector<HostTensor>& inputs,
                                      std::map<std::string, AttrValue> attrs = {}, int num_outputs = 1,
                                      const std::set<int>& constant_inputs = {}) {
  const ModelDef m = single_op_model(op_type, inputs, std::move(attrs), num_outputs, constant_inputs);
  const OpGraph g = lower_model(m);
  std::vector<HostTensor> model_inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!constant_inputs.count(static_cast<int>(i))) model_inputs.push_back(inputs[i]);
  return interpret(g, model_inputs);
}

inline void check_close(const HostTensor& got, const HostTensor& expected) {
  const CompareResult r = compare_tensors(got, expected);
  INFO("got ", got.type().print(), ", expected ", expected.type().print(), ": ", r.message);
  CHECK(r.ok);
}

}  // namespace tessel::testing
