// Every operator in the library, lowered with inputs of every dtype, arity 1 to 5, ranks 0, 2 and
// 4 (the rank-4 case also with [C]-shaped further inputs), as model inputs and as weights (which the lowering folds through the interpreter): each must
// lower or raise a UserError. An InternalError (an expression builder's assert reached from a
// model) fails the test. The fuzzers found the first such case (Neg of a bool); this sweep looks
// for all of them without waiting for the fuzzer to build the right protobuf.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/lower.h"
#include "tilegraph/ops/op_library.h"

using namespace tessel;

namespace {

constexpr DType kAllDtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64,
                                DType::i32, DType::i8,  DType::u8,  DType::boolean};

// Input 0 has `shape`; the others too, or (`channel_params`) shape [C] with C = shape[1], as
// normalizations take their scale and bias.
ModelDef one_op_model(const std::string& op, DType dt, int arity, const std::vector<int64_t>& shape,
                      bool channel_params, bool as_weights) {
  ModelDef m;
  m.name = "sweep";
  m.file = "sweep.json";
  OpDef d{"n", op, {}, {"y"}, {}, ""};
  for (int i = 0; i < arity; ++i) {
    const std::string name = "x" + std::to_string(i);
    const TensorType type{dt, i > 0 && channel_params ? std::vector<int64_t>{shape[1]} : shape};
    if (as_weights)
      m.weights.push_back({name, type, RandomInit{RandomInit::Dist::uniform, -2.0, 2.0, uint64_t(i + 1)}});
    else
      m.inputs.push_back({name, type});
    d.inputs.push_back(name);
  }
  m.ops.push_back(d);
  m.outputs.push_back("y");
  return m;
}

}  // namespace

TEST_CASE("every op with every input dtype lowers or raises a UserError, never an InternalError") {
  LowerOptions options;
  options.fold_limit_elements = 1 << 12;
  int lowered = 0, rejected = 0;
  for (const auto& [op, fn] : op_library()) {
    for (DType dt : kAllDtypes) {
      for (int arity = 1; arity <= 5; ++arity) {
        for (const std::vector<int64_t>& shape : {std::vector<int64_t>{}, std::vector<int64_t>{2, 3}, std::vector<int64_t>{1, 2, 3, 3}}) {
          for (int variant = 0; variant < 4; ++variant) {
            const bool as_weights = variant % 2 == 1, channel_params = variant >= 2;
            if (channel_params && shape.size() < 2) continue;
            try {
              (void)lower_model(one_op_model(op, dt, arity, shape, channel_params, as_weights), options);
              ++lowered;
            } catch (const InternalError& e) {
              FAIL_CHECK("op " << op << " on " << arity << " " << std::string(dtype_name(dt)) << " input(s) of rank "
                                << shape.size() << std::string(channel_params ? " and [C]" : "")
                                << std::string(as_weights ? " (weights)" : "") << ": " << std::string(e.what()));
            } catch (const UserError&) {
              ++rejected;
            }
          }
        }
      }
    }
  }
  MESSAGE(lowered, " lowered, ", rejected, " rejected with a UserError");
  CHECK(lowered > 1000);
}

TEST_CASE("every op with out-of-range attribute values lowers or raises a UserError") {
  LowerOptions options;
  options.fold_limit_elements = 1 << 12;
  const std::vector<std::pair<std::string, AttrValue>> attrs = {
      {"axis", int64_t{-9}}, {"axis", int64_t{-1}}, {"axis", int64_t{0}}, {"axis", int64_t{3}}, {"axis", int64_t{9}},
      {"axes", std::vector<int64_t>{}}, {"axes", std::vector<int64_t>{9}}, {"axes", std::vector<int64_t>{-9}},
      {"axes", std::vector<int64_t>{1, 1}}, {"keepdims", int64_t{0}}, {"keepdims", int64_t{7}},
      {"kernel_shape", std::vector<int64_t>{0, 0}}, {"kernel_shape", std::vector<int64_t>{9, 9}},
      {"kernel_shape", std::vector<int64_t>{2}}, {"kernel_shape", std::vector<int64_t>{-1, 2}},
      {"strides", std::vector<int64_t>{0, 0}}, {"strides", std::vector<int64_t>{-1, 1}},
      {"dilations", std::vector<int64_t>{0, 0}}, {"pads", std::vector<int64_t>{-5, -5, -5, -5}},
      {"pads", std::vector<int64_t>{9, 9, 9, 9}}, {"pads", std::vector<int64_t>{1}},
      {"perm", std::vector<int64_t>{0, 0, 1, 2}}, {"perm", std::vector<int64_t>{9}},
      {"group", int64_t{0}}, {"group", int64_t{-2}}, {"group", int64_t{3}}, {"p", int64_t{0}}, {"p", int64_t{-1}},
      {"blocksize", int64_t{0}}, {"blocksize", int64_t{-3}}, {"blocksize", int64_t{5}},
      {"ceil_mode", int64_t{1}}, {"auto_pad", std::string("SAME_UPPER")}, {"auto_pad", std::string("bogus")},
      {"split", std::vector<int64_t>{-1, 3}}, {"num_outputs", int64_t{0}}, {"to", int64_t{999}},
      {"mode", std::string("bogus")}, {"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 1e308},
      {"epsilon", -1.0}, {"batch_dims", int64_t{5}}, {"k", int64_t{-1}}, {"upper", int64_t{1}}};
  int lowered = 0, rejected = 0;
  for (const auto& [op, fn] : op_library()) {
    for (const auto& [name, value] : attrs) {
      for (int arity = 1; arity <= 3; ++arity) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool as_weights = variant % 2 == 1, channel_params = variant >= 2;
          ModelDef m = one_op_model(op, DType::f32, arity, {1, 2, 3, 3}, channel_params, as_weights);
          m.ops[0].attrs[name] = value;
          try {
            (void)lower_model(m, options);
            ++lowered;
          } catch (const InternalError& e) {
            FAIL_CHECK("op " << op << " with " << name << " on " << arity << " input(s)"
                              << std::string(channel_params ? " and [C]" : "")
                              << std::string(as_weights ? " (weights)" : "") << ": " << std::string(e.what()));
          } catch (const UserError&) {
            ++rejected;
          }
        }
      }
    }
  }
  MESSAGE(lowered, " lowered, ", rejected, " rejected with a UserError");
  CHECK(lowered > 1000);
}
