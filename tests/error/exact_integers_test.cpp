// Issue 29, class 6, continued: int64 values above 2^53 were rounded, because host tensors held
// doubles, and the interpreter saturated where the CPU backend wrapped -- so `--check` passed on a
// wrong oracle or failed on a right kernel. Integers are now exact end to end: files, JSON
// weights, the interpreter (ONNX's wrapping semantics, the CPU backend's division rules),
// reductions, constant folding and the checker -- and the constants inside a node (body constants,
// pad values, reduction inits), which were doubles and made lowering refuse an i64 Pad or
// ConstantOfShape value past 2^53. Every case below failed on the doubles.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../cli_run.h"
#include "../temp_dir.h"
#include "../test_util.h"
#include "tilegraph/compare.h"
#include "tilegraph/error.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/interpreter.h"
#include "tilegraph/lower.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

namespace fs = std::filesystem;

constexpr int64_t kTwoTo53 = int64_t{1} << 53;
constexpr int64_t kTwoTo62 = int64_t{1} << 62;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::from_integers(TensorType{DType::i64, std::move(shape)}, std::move(values));
}

std::vector<int64_t> exact(const HostTensor& t) {
  REQUIRE(t.dtype() == DType::i64);
  return std::vector<int64_t>(t.int64_data(), t.int64_data() + t.size());
}

// sum = x + [1, 1] and product = x * [4, 4], for x an i64[2] input; the weights are JSON data.
const char* kAddMulModel = R"({"format": "tessel-model", "version": 1, "name": "exact_i64",
  "inputs": [{"name": "x", "dtype": "i64", "shape": [2]}],
  "outputs": ["sum", "product"],
  "weights": [{"name": "one", "dtype": "i64", "shape": [2], "data": [1, 1]},
              {"name": "four", "dtype": "i64", "shape": [2], "data": [4, 4]}],
  "ops": [{"name": "add", "op": "Add", "inputs": ["x", "one"], "outputs": ["sum"]},
          {"name": "mul", "op": "Mul", "inputs": ["x", "four"], "outputs": ["product"]}]})";

// A JSON model and its one input in a scratch folder, run through the `tessel` binary.
struct CliModel {
  TempDir dir;
  std::string model, inputs;
  CliModel(const std::string& name, const std::string& text, const HostTensor& input) : model(dir.file(name)) {
    std::ofstream(model) << text;
    fs::create_directories(dir.path / "in");
    write_tensor_file((dir.path / "in" / "input_0.npy").string(), input);
    inputs = " --inputs " + (dir.path / "in").string();
  }
  // Runs on `device` ("--interp" or "--device cpu") with the outputs written to a folder of that
  // device's own (`out`); the run must succeed.
  cli_testing::Result run(const std::string& device, std::string& out) const {
    out = dir.file(device == "--interp" ? "interp" : "cpu");
    cli_testing::Result r = cli_testing::run("run " + model + " " + device + inputs + " --outputs " + out);
    INFO(r.output);
    REQUIRE(r.status == 0);
    return r;
  }
  // `tessel run --device cpu --check`.
  cli_testing::Result check() const { return cli_testing::run("run " + model + " --device cpu --check" + inputs); }
};

}  // namespace

TEST_CASE("an i64 model's values above 2^53 are exact from --interp and --device cpu, and --check compares them exactly") {
  // 2^53 + 1 has no double (it rounded to 2^53); 2^62 * 4 wraps to 0 (the doubles saturated).
  const CliModel m("exact_i64.json", kAddMulModel, ints({2}, {kTwoTo53 + 1, kTwoTo62}));
  for (const std::string device : {"--interp", "--device cpu"}) {
    CAPTURE(device);
    std::string out;
    const cli_testing::Result r = m.run(device, out);
    CHECK(exact(read_tensor_file(out + "/output_0.npy")) == std::vector<int64_t>{kTwoTo53 + 2, kTwoTo62 + 1});
    CHECK(exact(read_tensor_file(out + "/output_1.npy")) == std::vector<int64_t>{4 * (kTwoTo53 + 1), 0});
    // The printed summary shows the exact values too.
    CHECK(r.output.find("[9007199254740994, 4611686018427387905]") != std::string::npos);
  }
  const cli_testing::Result checked = m.check();
  INFO(checked.output);
  CHECK(checked.status == 0);
  CHECK(checked.output.find("output 0 'sum' matches the interpreter") != std::string::npos);
  CHECK(checked.output.find("output 1 'product' matches the interpreter") != std::string::npos);
}

TEST_CASE("the checker compares integers exactly, also beyond 2^53") {
  const CompareResult r = compare_tensors(ints({2}, {7, kTwoTo53 + 1}), ints({2}, {7, kTwoTo53}));
  CHECK_FALSE(r.ok);
  CHECK(r.mismatches == 1);
  CHECK(r.message.find("got 9007199254740993, expected 9007199254740992") != std::string::npos);
  CHECK(compare_compiled(ints({1}, {kMax}), ints({1}, {kMax - 1})).ok == false);
  CHECK(compare_tensors(ints({2}, {kMin, kMax}), ints({2}, {kMin, kMax})).ok);
}

TEST_CASE("i64 tensor files and JSON weights keep every int64 value") {
  TempDir dir;
  const HostTensor t = ints({2, 3}, {kTwoTo53 + 1, -kTwoTo53 - 1, kMax, kMin, kMax - 1, 0});
  for (const std::string name : {"t.npy", "t.pb"}) {
    CAPTURE(name);
    write_tensor_file(dir.file(name), t);
    const HostTensor back = read_tensor_file(dir.file(name));
    CHECK(back.type() == t.type());
    CHECK(exact(back) == exact(t));
  }
  // A model's inline weight data and its external weight file (a weight past
  // kExternalWeightElements), written and read back.
  ModelDef model = parse_model_json(kAddMulModel, "exact_i64.json");
  const std::vector<int64_t> small = {kMax, kTwoTo53 + 1};
  std::vector<int64_t> large(kExternalWeightElements + 1);
  for (size_t k = 0; k < large.size(); ++k) large[k] = kTwoTo53 + 1 + 2 * static_cast<int64_t>(k);  // odd: no doubles
  model.weights[0] = WeightDef{"one", TensorType{DType::i64, {2}}, std::make_shared<const HostTensor>(ints({2}, small))};
  const TensorType large_type{DType::i64, {static_cast<int64_t>(large.size())}};
  model.weights[1] = WeightDef{"four", large_type, std::make_shared<const HostTensor>(HostTensor::from_integers(large_type, large))};
  save_model_json(model, dir.file("saved.json"));
  CHECK(fs::exists(dir.file("saved.bin")));
  const ModelDef back = load_model_json(dir.file("saved.json"));
  CHECK(exact(*std::get<std::shared_ptr<const HostTensor>>(back.weights[0].source)) == small);
  CHECK(exact(*std::get<std::shared_ptr<const HostTensor>>(back.weights[1].source)) == large);
  CHECK(write_model_json(model).find("[9223372036854775807, 9007199254740993]") != std::string::npos);
}

TEST_CASE("the interpreter wraps i64 arithmetic and divides as the CPU backend does") {
  const HostTensor a = ints({6}, {kMax, kMin, kTwoTo62, kTwoTo53 + 1, -7, kMin});
  const HostTensor b = ints({6}, {1, 1, 4, 2, 0, -1});
  CHECK(exact(run_op("Add", {a, b})[0]) == std::vector<int64_t>{kMin, kMin + 1, kTwoTo62 + 4, kTwoTo53 + 3, -7, kMax});
  CHECK(exact(run_op("Sub", {a, b})[0]) == std::vector<int64_t>{kMax - 1, kMax, kTwoTo62 - 4, kTwoTo53 - 1, -7, kMin + 1});
  CHECK(exact(run_op("Mul", {a, b})[0]) == std::vector<int64_t>{kMax, kMin, 0, kTwoTo53 * 2 + 2, 0, kMin});
  // Truncating division; x / 0 is 0 and INT64_MIN / -1 wraps to INT64_MIN (no trap).
  CHECK(exact(run_op("Div", {a, b})[0]) == std::vector<int64_t>{kMax, kMin, kTwoTo62 / 4, (kTwoTo53 + 1) / 2, 0, kMin});
  CHECK(exact(run_op("Mod", {a, b})[0]) == std::vector<int64_t>{0, 0, 0, 1, 0, 0});
  CHECK(exact(run_op("Neg", {ints({2}, {kMin, kTwoTo53 + 1})})[0]) == std::vector<int64_t>{kMin, -kTwoTo53 - 1});
  CHECK(exact(run_op("Abs", {ints({2}, {kMin, -kTwoTo53 - 1})})[0]) == std::vector<int64_t>{kMin, kTwoTo53 + 1});
  // A body mixing int and float converts at the Cast: exact integers in, one rounding out.
  const HostTensor f = run_op("Cast", {run_op("Add", {a, b})[0]}, {{"to", int64_t{11}}})[0];  // 11: DOUBLE
  CHECK(f[3] == static_cast<double>(kTwoTo53 + 3));
  CHECK(exact(run_op("Cast", {tensor(DType::f64, {3}, {1e30, -1e30, 0.0 / 0.0})}, {{"to", int64_t{7}}})[0]) ==
        std::vector<int64_t>{kMax, kMin, 0});  // 7: INT64; saturating like llvm.fptosi.sat
  CHECK(exact(run_op("Max", {a, b})[0])[3] == kTwoTo53 + 1);
  CHECK(run_op("Greater", {ints({1}, {kTwoTo53 + 1}), ints({1}, {kTwoTo53})})[0][0] == 1.0);
}

TEST_CASE("i64 reductions are exact and wrap") {
  const HostTensor axis = ints({1}, {1});
  const HostTensor x = ints({2, 4}, {kTwoTo62, kTwoTo62, kTwoTo62, kTwoTo62, kTwoTo53, 1, 2, -kTwoTo53});
  CHECK(exact(run_op("ReduceSum", {x, axis}, {{"keepdims", int64_t{0}}}, 1, {1})[0]) == std::vector<int64_t>{0, 3});
  CHECK(exact(run_op("ReduceMax", {x, axis}, {{"keepdims", int64_t{0}}}, 1, {1})[0]) == std::vector<int64_t>{kTwoTo62, kTwoTo53});
  CHECK(exact(run_op("ReduceMin", {x, axis}, {{"keepdims", int64_t{0}}}, 1, {1})[0]) == std::vector<int64_t>{kTwoTo62, -kTwoTo53});
  const HostTensor y = ints({2, 2}, {int64_t{1} << 32, int64_t{1} << 32, kTwoTo53 + 1, 3});
  CHECK(exact(run_op("ReduceProd", {y, axis}, {{"keepdims", int64_t{0}}}, 1, {1})[0]) ==
        std::vector<int64_t>{0, 3 * (kTwoTo53 + 1)});
  // 2^53 and 2^53 + 1 were one double: ArgMax picked the first.
  const HostTensor z = ints({1, 3}, {kTwoTo53, kTwoTo53 + 1, kTwoTo53 - 1});
  CHECK(exact(run_op("ArgMax", {z}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})[0]) == std::vector<int64_t>{1});
  CHECK(exact(run_op("ArgMin", {z}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}})[0]) == std::vector<int64_t>{2});
  // A long sum runs on the lanes along its reduction axis (the interpreter's other path).
  std::vector<int64_t> many(200, kTwoTo53 + 1);
  const HostTensor m = ints({1, 200}, many);
  CHECK(exact(run_op("ReduceSum", {m, axis}, {{"keepdims", int64_t{0}}}, 1, {1})[0]) ==
        std::vector<int64_t>{static_cast<int64_t>(200 * static_cast<uint64_t>(kTwoTo53 + 1))});
}

TEST_CASE("the interpreter's point-by-point path (windows, samples, read observers) is exact on i64 too") {
  const HostTensor a = ints({2, 3}, {kMax, kTwoTo53 + 1, kTwoTo62, kMin, -1, kTwoTo53 + 3});
  const HostTensor b = ints({2, 3}, {1, 2, kTwoTo62, -1, kMin, 2});
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"Add", {kMin, kTwoTo53 + 3, kMin, kMax, kMax, kTwoTo53 + 5}},
      {"Mul", {kMax, 2 * kTwoTo53 + 2, 0, kMin, kMin, 2 * kTwoTo53 + 6}},
      {"Div", {kMax, kTwoTo53 / 2, 1, kMin, 0, kTwoTo53 / 2 + 1}}};
  for (const auto& entry : expected) {
    const std::string& op = entry.first;
    const std::vector<int64_t>& values = entry.second;
    CAPTURE(op);
    const OpGraph g = lower_model(single_op_model(op, {a, b}, {}, 1, {}));
    REQUIRE(g.num_nodes() == 1);
    const TeNode& node = g.node(0);
    InterpretOptions points;
    points.domain_tile = DomainBox{std::vector<int64_t>(node.num_axes(), 0), node.extents()};
    CHECK(exact(evaluate_node(node, {&a, &b}, points)) == values);
    CHECK(exact(evaluate_node(node, {&a, &b})) == values);
  }
  const OpGraph sum = lower_model(single_op_model("ReduceSum", {a, ints({1}, {1})}, {{"keepdims", int64_t{0}}}, 1, {1}));
  REQUIRE(sum.num_nodes() == 1);
  InterpretOptions points;
  points.read_observer = [](int, const int64_t*) {};
  CHECK(exact(evaluate_node(sum.node(0), {&a}, points)) ==
        std::vector<int64_t>{static_cast<int64_t>(static_cast<uint64_t>(kMax) + kTwoTo53 + 1 + kTwoTo62), kMin + kTwoTo53 + 2});
}

TEST_CASE("constant folding of an i64 Shape, Gather and Concat chain stays exact") {
  // shape(x)[1] concatenated with 2^53 + 1, plus [0, 1], all folded at import.
  ModelDef m;
  m.name = "folded";
  m.inputs.push_back({"x", TensorType{DType::f32, {2, 3}}});
  const auto constant = [&](const std::string& name, HostTensor t) {
    m.weights.push_back(WeightDef{name, t.type(), std::make_shared<const HostTensor>(std::move(t))});
  };
  constant("index", ints({1}, {1}));
  constant("big", ints({1}, {kTwoTo53 + 1}));
  constant("step", ints({2}, {0, 1}));
  m.ops.push_back(OpDef{"shape", "Shape", {"x"}, {"s"}, {}, ""});
  m.ops.push_back(OpDef{"pick", "Gather", {"s", "index"}, {"g"}, {}, ""});
  m.ops.push_back(OpDef{"join", "Concat", {"g", "big"}, {"c"}, {{"axis", int64_t{0}}}, ""});
  m.ops.push_back(OpDef{"bump", "Add", {"c", "step"}, {"y"}, {}, ""});
  m.outputs.push_back("y");
  const OpGraph g = lower_model(m);
  CHECK(g.num_nodes() == 0);  // folded
  const std::vector<HostTensor> out = interpret(g, {random_f32({2, 3}, 1)});
  CHECK(exact(out[0]) == std::vector<int64_t>{3, kTwoTo53 + 2});
}

TEST_CASE("Range and Constant give exact i64 values") {
  const std::vector<HostTensor> range =
      run_op("Range", {ints({}, {kTwoTo53 + 1}), ints({}, {kTwoTo53 + 6}), ints({}, {2})}, {}, 1, {0, 1, 2});
  CHECK(exact(range[0]) == std::vector<int64_t>{kTwoTo53 + 1, kTwoTo53 + 3, kTwoTo53 + 5});
  CHECK(exact(run_op("Range", {ints({}, {kMax - 1}), ints({}, {kMin}), ints({}, {-kTwoTo62})}, {}, 1, {0, 1, 2})[0]) ==
        std::vector<int64_t>{kMax - 1, kMax - 1 - kTwoTo62, -2, -2 - kTwoTo62});
  CHECK(exact(run_op("Constant", {}, {{"value_ints", std::vector<int64_t>{kTwoTo53 + 1, kMin}}})[0]) ==
        std::vector<int64_t>{kTwoTo53 + 1, kMin});
  CHECK(exact(run_op("Constant", {}, {{"value_int", kMax}})[0]) == std::vector<int64_t>{kMax});
}

TEST_CASE("a node's i64 constants past 2^53 are exact: Pad's value, ConstantOfShape's fill, a reduction's init") {
  // These constants were doubles: lowering refused Pad's and ConstantOfShape's i64 value past 2^53
  // (an UnsupportedError) rather than round it.
  CHECK(exact(run_op("Pad", {ints({2}, {1, 2}), ints({2}, {1, 1}), ints({}, {kTwoTo62 + 1})}, {}, 1, {1, 2})[0]) ==
        std::vector<int64_t>{kTwoTo62 + 1, 1, 2, kTwoTo62 + 1});
  CHECK(exact(run_op("Pad", {ints({2}, {1, 2}), ints({2}, {1, 1}), ints({}, {-kTwoTo53})}, {}, 1, {1, 2})[0]) ==
        std::vector<int64_t>{-kTwoTo53, 1, 2, -kTwoTo53});
  for (const int64_t fill : {kTwoTo53 + 1, kMin, kMax, -kTwoTo62 - 1}) {
    CAPTURE(fill);
    // Folded at import: the interpreter evaluates the node's body constant.
    CHECK(exact(run_op("ConstantOfShape", {ints({1}, {3})}, {{"value", ints({1}, {fill})}}, 1, {0})[0]) ==
          std::vector<int64_t>(3, fill));
  }
  // Not folded: the node itself, its printed body (the text schedule caches hash) and its values.
  LowerOptions keep_nodes;
  keep_nodes.fold_limit_elements = 0;
  const OpGraph filled =
      lower_model(single_op_model("ConstantOfShape", {ints({1}, {3})}, {{"value", ints({1}, {kTwoTo53 + 1})}}, 1, {0}), keep_nodes);
  REQUIRE(filled.num_nodes() == 1);
  CHECK(print_node(filled.node(0), {}, "out").find("body 9007199254740993:i64") != std::string::npos);
  CHECK(exact(interpret(filled, {})[0]) == std::vector<int64_t>(3, kTwoTo53 + 1));
  // The inits of i64 max and min reductions are INT64_MIN and INT64_MAX, not 2^63 as a double.
  const OpGraph lowest = lower_model(single_op_model("ReduceMin", {ints({2}, {kMax, kMax})}, {{"keepdims", int64_t{0}}}, 1, {}));
  REQUIRE(lowest.num_nodes() == 1);
  CHECK(print_node(lowest.node(0), {}, "out").find("reduce min init 9223372036854775807 ") != std::string::npos);
  CHECK(exact(interpret(lowest, {ints({2}, {kMax, kMax})})[0]) == std::vector<int64_t>{kMax});
}

TEST_CASE("i64 body, pad and init constants past 2^53 are exact from --interp and --device cpu") {
  // x + c (c a scalar i64 weight: a weight the node reads, exact already); ConstantOfShape's fill
  // 2^53 + 1 folded at import and added to x; x padded with 2^62 + 1; and a ConstantOfShape of 2^60 + 1
  // one element past the fold limit, so that it stays a node and its body constant is compiled,
  // reduced by ReduceMax and added to x.
  const int64_t wide = LowerOptions{}.fold_limit_elements + 1;
  const std::string model_text = R"({"format": "tessel-model", "version": 1, "name": "exact_body_constants",
  "inputs": [{"name": "x", "dtype": "i64", "shape": [2]}],
  "outputs": ["sum", "filled_sum", "padded", "far"],
  "weights": [{"name": "c", "dtype": "i64", "shape": [], "data": [1152921504606846977]},
              {"name": "two", "dtype": "i64", "shape": [1], "data": [2]},
              {"name": "wide", "dtype": "i64", "shape": [1], "data": [)" + std::to_string(wide) + R"(]},
              {"name": "pads", "dtype": "i64", "shape": [2], "data": [1, 1]},
              {"name": "pad_value", "dtype": "i64", "shape": [], "data": [4611686018427387905]}],
  "ops": [{"name": "add", "op": "Add", "inputs": ["x", "c"], "outputs": ["sum"]},
          {"name": "fill", "op": "ConstantOfShape", "inputs": ["two"], "outputs": ["filled"],
           "attrs": {"value": {"tensor": {"dtype": "i64", "shape": [1], "data": [9007199254740993]}}}},
          {"name": "add_filled", "op": "Add", "inputs": ["x", "filled"], "outputs": ["filled_sum"]},
          {"name": "pad", "op": "Pad", "inputs": ["x", "pads", "pad_value"], "outputs": ["padded"]},
          {"name": "fill_wide", "op": "ConstantOfShape", "inputs": ["wide"], "outputs": ["w"],
           "attrs": {"value": {"tensor": {"dtype": "i64", "shape": [1], "data": [1152921504606846977]}}}},
          {"name": "top", "op": "ReduceMax", "inputs": ["w"], "outputs": ["top"], "attrs": {"keepdims": 0}},
          {"name": "add_top", "op": "Add", "inputs": ["x", "top"], "outputs": ["far"]}]})";
  constexpr int64_t kTwoTo60 = int64_t{1} << 60;
  const CliModel m("exact_body_constants.json", model_text, ints({2}, {1, 2}));
  for (const std::string device : {"--interp", "--device cpu"}) {
    CAPTURE(device);
    std::string out;
    m.run(device, out);
    CHECK(exact(read_tensor_file(out + "/output_0.npy")) == std::vector<int64_t>{kTwoTo60 + 2, kTwoTo60 + 3});
    CHECK(exact(read_tensor_file(out + "/output_1.npy")) == std::vector<int64_t>{kTwoTo53 + 2, kTwoTo53 + 3});
    CHECK(exact(read_tensor_file(out + "/output_2.npy")) == std::vector<int64_t>{kTwoTo62 + 1, 1, 2, kTwoTo62 + 1});
    CHECK(exact(read_tensor_file(out + "/output_3.npy")) == std::vector<int64_t>{kTwoTo60 + 2, kTwoTo60 + 3});
  }
  const cli_testing::Result checked = m.check();
  INFO(checked.output);
  CHECK(checked.status == 0);
  for (const char* name : {"'sum'", "'filled_sum'", "'padded'", "'far'"})
    CHECK(checked.output.find(std::string(name) + " matches the interpreter") != std::string::npos);
}
