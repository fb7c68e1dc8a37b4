// Tessel's JSON model format (tilegraph/import/model_json.h): round trips.
//
// Every bundled model under experiments/models/ loads, writes back to the exact same text, and
// parses again to an equal ModelDef. Hand-built models cover what the bundled ones do not: inline
// data of every dtype with NaN, infinities and -0.0, every attribute type including empty lists and
// tensors, integer vs float attributes, unknown input dimensions, and weights in a sidecar .bin
// file.
#include "../temp_dir.h"
#include "tilegraph/import/model_json.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;
using namespace tessel;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

bool same_value(double a, double b) {  // bitwise, so NaN == NaN and -0.0 != 0.0
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

bool tensors_equal(const HostTensor& a, const HostTensor& b) {
  if (a.type() != b.type()) return false;
  for (int64_t i = 0; i < a.size(); ++i)
    if (!same_value(a[i], b[i])) return false;
  return true;
}

bool attrs_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* t = std::get_if<HostTensor>(&a))
    return tensors_equal(*t, std::get<HostTensor>(b));
  if (const auto* d = std::get_if<double>(&a)) return same_value(*d, std::get<double>(b));
  if (const auto* f = std::get_if<std::vector<double>>(&a)) {
    const auto& g = std::get<std::vector<double>>(b);
    if (f->size() != g.size()) return false;
    for (size_t i = 0; i < f->size(); ++i)
      if (!same_value((*f)[i], g[i])) return false;
    return true;
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, HostTensor> || std::is_same_v<T, double> ||
                      std::is_same_v<T, std::vector<double>>)
          return false;  // handled above
        else
          return x == std::get<T>(b);
      },
      a);
}

bool sources_equal(const WeightSource& a, const WeightSource& b) {
  if (a.index() != b.index()) return false;
  if (const auto* init = std::get_if<RandomInit>(&a)) return *init == std::get<RandomInit>(b);
  return tensors_equal(*std::get<0>(a), *std::get<0>(b));
}

/// Structural equality of two models; `file` (where each was loaded from) is not compared.
bool models_equal(const ModelDef& a, const ModelDef& b) {
  if (a.name != b.name || a.opset != b.opset || a.outputs != b.outputs) return false;
  if (a.inputs.size() != b.inputs.size() || a.weights.size() != b.weights.size() ||
      a.ops.size() != b.ops.size())
    return false;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.inputs[i].name != b.inputs[i].name || a.inputs[i].type != b.inputs[i].type) return false;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const WeightDef &x = a.weights[i], &y = b.weights[i];
    if (x.name != y.name || x.type != y.type || !sources_equal(x.source, y.source)) return false;
  }
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const OpDef &x = a.ops[i], &y = b.ops[i];
    if (x.name != y.name || x.op_type != y.op_type || x.inputs != y.inputs ||
        x.outputs != y.outputs || x.domain != y.domain || x.attrs.size() != y.attrs.size())
      return false;
    for (const auto& [key, value] : x.attrs)
      if (!y.attrs.contains(key) || !attrs_equal(value, y.attrs.at(key))) return false;
  }
  return true;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// write -> parse -> write: the texts are identical and the models equal.
void check_round_trip(const ModelDef& model) {
  const std::string text = write_model_json(model);
  const ModelDef again = parse_model_json(text, "round_trip.json");
  CHECK(models_equal(model, again));
  CHECK(write_model_json(again) == text);
}

std::shared_ptr<const HostTensor> tensor(DType dtype, std::vector<int64_t> shape,
                                         std::vector<double> values) {
  return std::make_shared<const HostTensor>(TensorType{dtype, std::move(shape)}, std::move(values));
}

std::vector<double> ramp(int64_t n, double scale) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<double>(i % 977) - 488) * scale;
  return v;
}

/// A model with one op reading every weight, so that the graph checks pass.
ModelDef model_with_weights(std::vector<WeightDef> weights) {
  ModelDef m;
  m.name = "weights";
  m.opset = 17;
  m.inputs.push_back({"x", TensorType{DType::f32, {-1, 4}}});
  m.weights = std::move(weights);
  OpDef op{"concat", "Concat", {"x"}, {"y"}, {{"axis", int64_t{0}}}, ""};
  for (const WeightDef& w : m.weights) op.inputs.push_back(w.name);
  m.ops.push_back(op);
  m.outputs = {"y"};
  return m;
}

using tessel::testing::TempDir;

const char* const kBundledModels[] = {"bert_base_layer",     "bert_base_12_layers", "vit_b_block",
                                      "llama_decoder_block", "resnet50_bottleneck", "resnet50"};

fs::path bundled(const std::string& name) {
  return fs::path(TESSEL_SOURCE_DIR) / "experiments" / "models" / (name + ".json");
}

}  // namespace

TEST_CASE("model_json: bundled models round-trip and are stored in canonical form") {
  for (const char* name : kBundledModels) {
    CAPTURE(name);
    const ModelDef model = load_model_json(bundled(name).string());
    CHECK(model.name == name);
    CHECK(model.file == bundled(name).string());
    check_round_trip(model);
    // The generator prints the same layout as the writer; if this fails, regenerate the models
    // with experiments/models/generate_models.py.
    CHECK(write_model_json(model) == read_text(bundled(name)));
  }
}

TEST_CASE("model_json: bert_base_layer reads as the documented structure") {
  const ModelDef m = load_model_json(bundled("bert_base_layer").string());
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].type == TensorType{DType::f32, {1, 128, 768}});
  CHECK(m.opset == 20);
  int layer_norms = 0;
  for (const OpDef& op : m.ops) {
    if (op.op_type == "LayerNormalization") {
      ++layer_norms;
      CHECK(std::get<double>(op.attrs.at("epsilon")) == 1e-12);
      CHECK(std::get<int64_t>(op.attrs.at("axis")) == -1);
    }
    if (op.name == "l0_attn_k_t")
      CHECK(std::get<std::vector<int64_t>>(op.attrs.at("perm")) ==
            std::vector<int64_t>{0, 2, 3, 1});
    if (op.op_type == "Gelu") CHECK(std::get<std::string>(op.attrs.at("approximate")) == "none");
  }
  CHECK(layer_norms == 2);
  for (const WeightDef& w : m.weights)
    if (w.name == "shape_heads")
      CHECK(std::get<0>(w.source)->as_ints() == std::vector<int64_t>{1, 128, 12, 64});
}

TEST_CASE("model_json: every attribute type, empty lists, ints vs floats, non-finite floats") {
  ModelDef m = model_with_weights({});
  auto& attrs = m.ops[0].attrs;
  attrs["int"] = int64_t{1};
  attrs["int_min"] = std::numeric_limits<int64_t>::min();
  attrs["float_integral"] = 1.0;  // must stay a float
  attrs["float_tiny"] = 1e-12;
  attrs["float_f32"] = static_cast<double>(1e-5f);
  attrs["float_neg_zero"] = -0.0;
  attrs["float_nan"] = kNan;
  attrs["float_inf"] = -kInf;
  attrs["string"] = std::string("constant");
  attrs["string_empty"] = std::string();
  attrs["string_nan"] = std::string("nan");  // a string, not a float
  attrs["ints"] = std::vector<int64_t>{0, 2, 1, 3};
  attrs["ints_empty"] = std::vector<int64_t>{};
  attrs["floats"] = std::vector<double>{1.0, 2.0, 0.5};  // integral values stay floats
  attrs["floats_empty"] = std::vector<double>{};
  attrs["floats_non_finite"] = std::vector<double>{1.5, kInf, kNan};
  attrs["strings"] = std::vector<std::string>{"a", "b"};
  attrs["strings_empty"] = std::vector<std::string>{};
  attrs["tensor"] = HostTensor(TensorType{DType::f32, {1}}, {-1e9});
  attrs["tensor_empty"] = HostTensor(TensorType{DType::i64, {0}}, {});
  attrs["tensor_scalar"] = HostTensor(TensorType{DType::boolean, {}}, {1});
  check_round_trip(m);

  const std::string text = write_model_json(m);
  CHECK(text.find("\"float_integral\": 1.0") != std::string::npos);
  CHECK(text.find("\"int\": 1,") != std::string::npos);
  CHECK(text.find("\"ints_empty\": {\"ints\": []}") != std::string::npos);
  CHECK(text.find("\"float_nan\": {\"float\": \"nan\"}") != std::string::npos);
  const ModelDef again = parse_model_json(text, "attrs.json");
  CHECK(std::holds_alternative<int64_t>(again.ops[0].attrs.at("int")));
  CHECK(std::holds_alternative<double>(again.ops[0].attrs.at("float_integral")));
  CHECK(std::holds_alternative<std::string>(again.ops[0].attrs.at("string_nan")));
  CHECK(std::holds_alternative<std::vector<double>>(again.ops[0].attrs.at("floats")));
}

TEST_CASE("model_json: typed attribute forms are read") {
  const std::string text = R"({"format": "tessel-model", "version": 1,
    "inputs": [{"name": "x", "dtype": "f32", "shape": [2]}], "outputs": ["y"],
    "ops": [{"name": "n", "op": "Identity", "inputs": ["x"], "outputs": ["y"], "attrs": {
      "a": {"int": 3}, "b": {"float": 3}, "c": {"string": "s"}, "d": {"ints": [1]},
      "e": {"floats": [1, "-inf"]}, "f": {"strings": []}, "g": [1, 2.5],
      "h": {"tensor": {"dtype": "f16", "shape": [2], "data": [0.1, "nan"]}}}}]})";
  const ModelDef m = parse_model_json(text, "typed.json");
  const auto& attrs = m.ops[0].attrs;
  CHECK(std::get<int64_t>(attrs.at("a")) == 3);
  CHECK(std::get<double>(attrs.at("b")) == 3.0);
  CHECK(std::get<std::string>(attrs.at("c")) == "s");
  CHECK(std::get<std::vector<int64_t>>(attrs.at("d")) == std::vector<int64_t>{1});
  CHECK(std::get<std::vector<double>>(attrs.at("e"))[1] == -kInf);
  CHECK(std::get<std::vector<std::string>>(attrs.at("f")).empty());
  CHECK(std::get<std::vector<double>>(attrs.at("g")) == std::vector<double>{1.0, 2.5});
  CHECK(std::isnan(std::get<HostTensor>(attrs.at("h"))[1]));
  CHECK(m.weights.empty());
  CHECK(m.opset == 0);
  check_round_trip(m);
}

TEST_CASE("model_json: inline data of every dtype, with NaN, infinities and -0.0") {
  ModelDef m = model_with_weights({
      {"f32", TensorType{DType::f32, {2, 3}},
       tensor(DType::f32, {2, 3}, {0.1, -0.0, kNan, kInf, -kInf, 3.4e38})},
      {"f64", TensorType{DType::f64, {3}}, tensor(DType::f64, {3}, {0.1, 1.0 / 3.0, 1e-300})},
      {"f16", TensorType{DType::f16, {3}}, tensor(DType::f16, {3}, {0.1, 65504, -kInf})},
      {"bf16", TensorType{DType::bf16, {2}}, tensor(DType::bf16, {2}, {0.1, 3e38})},
      {"i64", TensorType{DType::i64, {3}},
       tensor(DType::i64, {3}, {-1, 9007199254740992.0, -9007199254740992.0})},
      {"i32", TensorType{DType::i32, {2}}, tensor(DType::i32, {2}, {-2147483648.0, 2147483647.0})},
      {"i8", TensorType{DType::i8, {2}}, tensor(DType::i8, {2}, {-128, 127})},
      {"u8", TensorType{DType::u8, {2}}, tensor(DType::u8, {2}, {0, 255})},
      {"bool", TensorType{DType::boolean, {3}}, tensor(DType::boolean, {3}, {1, 0, 1})},
      {"scalar", TensorType{DType::f32, {}}, tensor(DType::f32, {}, {0.125})},
      {"empty", TensorType{DType::i64, {2, 0}}, tensor(DType::i64, {2, 0}, {})},
      {"normal", TensorType{DType::f32, {4096, 4096}},
       RandomInit{RandomInit::Dist::normal, 0.0, 0.02, 7}},
      {"uniform", TensorType{DType::f32, {8}},
       RandomInit{RandomInit::Dist::uniform, 0.9, 1.1, 18446744073709551615ull}},
  });
  check_round_trip(m);
  const std::string text = write_model_json(m);
  CHECK(text.find("[0.1, -0.0, \"nan\", \"inf\", \"-inf\", 3.4e+38]") != std::string::npos);
  CHECK(text.find("[true, false, true]") != std::string::npos);
}

TEST_CASE("model_json: input dimensions of -1 (unknown) round-trip") {
  ModelDef m = model_with_weights({});
  CHECK(m.inputs[0].type.shape[0] == -1);
  check_round_trip(m);
}

TEST_CASE("model_json: save writes large weights to a sidecar .bin file and load reads them back") {
  TempDir dir;
  ModelDef m = model_with_weights({
      {"big_f32", TensorType{DType::f32, {100, 100}},
       tensor(DType::f32, {100, 100}, ramp(10000, 0.001))},
      {"small", TensorType{DType::f32, {3}}, tensor(DType::f32, {3}, {1, 2, 3})},
      {"big_f16", TensorType{DType::f16, {4097}}, tensor(DType::f16, {4097}, ramp(4097, 0.01))},
      {"big_i64", TensorType{DType::i64, {5001}}, tensor(DType::i64, {5001}, ramp(5001, 1e6))},
      {"big_bool", TensorType{DType::boolean, {4099}},
       tensor(DType::boolean, {4099}, ramp(4099, 1))},
      {"big_f64", TensorType{DType::f64, {4097}},
       tensor(DType::f64, {4097}, ramp(4097, 1.0 / 3.0))},
      {"exactly_4096", TensorType{DType::i8, {4096}},
       tensor(DType::i8, {4096}, std::vector<double>(4096, -3))},
  });
  const fs::path path = dir.path / "model.json";
  save_model_json(m, path.string());
  REQUIRE(fs::exists(dir.path / "model.bin"));

  const std::string text = read_text(path);
  const std::regex external_re(R"re("external": \{"file": "model\.bin", "offset": (\d+)\})re");
  int externals = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), external_re);
       it != std::sregex_iterator(); ++it) {
    ++externals;
    CHECK(std::stoll((*it)[1]) % 16 == 0);
  }
  CHECK(externals == 5);  // "small" and "exactly_4096" stay inline
  CHECK(fs::file_size(dir.path / "model.bin") ==
        static_cast<uintmax_t>(10000 * 4 + 4097 * 2 + 14 + 5001 * 8 + 8 + 4099 + 13 + 4097 * 8));

  const ModelDef loaded = load_model_json(path.string());
  CHECK(loaded.file == path.string());
  CHECK(models_equal(m, loaded));
  // Saving what was loaded reproduces both files.
  const fs::path again = dir.path / "again.json";
  save_model_json(loaded, again.string());
  CHECK(read_text(dir.path / "again.bin") == read_text(dir.path / "model.bin"));
  CHECK(std::regex_replace(read_text(again), std::regex("again\\.bin"), "model.bin") == text);
  // write_model_json keeps everything inline.
  CHECK(write_model_json(m).find("\"external\"") == std::string::npos);
}

TEST_CASE("model_json: a model without large weights writes no sidecar file") {
  TempDir dir;
  save_model_json(load_model_json(bundled("bert_base_layer").string()),
                  (dir.path / "bert.json").string());
  CHECK(fs::exists(dir.path / "bert.json"));
  CHECK(!fs::exists(dir.path / "bert.bin"));
}
