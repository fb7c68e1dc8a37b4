// Reading and writing Tessel's JSON model format (docs/model-format.md).
//
// Reading parses the text with nlohmann_json (rejecting duplicate keys as it goes), then walks the
// document section by section -- inputs, outputs, weights, ops -- checking every key and value, and
// finally checks the graph: tensor names defined once, every op input and model output defined, no
// cycle. Every problem becomes a UserError with the file, a JSON pointer and the offending value;
// nlohmann exceptions never escape (one that does is a Tessel bug and becomes an InternalError).
//
// Writing builds an ordered document with a fixed key order and prints it with a small pretty
// printer: 2-space indent, and any object or array that fits in kLineWidth columns on one line.
// Floats are written so that they parse back to the same double (and, for tensor data, to the
// same value of the tensor's dtype); non-finite values are the strings "nan", "inf", "-inf".
#include "tilegraph/import/model_json.h"

#include "tilegraph/import/json_util.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/import/tensor_files.h"

namespace tessel {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr std::string_view kFormatName = "tessel-model";
constexpr int64_t kFormatVersion = 1;
constexpr size_t kLineWidth = 100;
constexpr int64_t kExternalAlignBytes = 16;
// Largest element count accepted for a declared shape; indices stay exact as doubles.
constexpr int64_t kMaxElements = int64_t{1} << 53;

// ---------------------------------------------------------------------------------------------
// Small helpers shared by reading and writing.

using json_util::child;
using json_util::describe;
using json_util::dump_safe;
using json_util::quoted;
using json_util::render_inline;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// ---------------------------------------------------------------------------------------------
// Parsing the text: nlohmann's DOM parser with a callback that rejects duplicate object keys
// (nlohmann would silently keep the last one).

json parse_text(const std::string& text, const std::string& file) { return json_util::parse_strict(text, file); }

// ---------------------------------------------------------------------------------------------
// Reading: one member function per section of the format. `ptr` is always the JSON pointer of the
// value being read.

class ModelReader {
 public:
  explicit ModelReader(std::string file) : file_(std::move(file)) {
    base_dir_ = fs::path(file_).parent_path();
  }

  ModelDef read(const json& doc);

 private:
  [[noreturn]] void fail(const std::string& ptr, const std::string& message) const {
    throw UserError(file_, ptr, message);
  }
  [[noreturn]] void expected(const std::string& ptr, const char* what, const json& got) const {
    fail(ptr, cat("expected ", what, ", got ", describe(got)));
  }

  // Values.
  void check_keys(const json& j, const std::string& ptr,
                  std::initializer_list<const char*> required,
                  std::initializer_list<const char*> optional) const;
  const json& array_at(const json& j, const std::string& ptr) const;
  std::string string_at(const json& j, const std::string& ptr) const;
  std::string name_at(const json& j, const std::string& ptr) const;  // non-empty string
  int64_t int_at(const json& j, const std::string& ptr) const;
  uint64_t uint_at(const json& j, const std::string& ptr) const;
  double float_at(const json& j, const std::string& ptr) const;  // number or "nan"/"inf"/"-inf"
  double finite_at(const json& j, const std::string& ptr) const;
  DType dtype_at(const json& j, const std::string& ptr) const;
  // Which dimensions a shape may have: inputs >= 0 or -1 (unknown); weights from init or an
  // external file >= 1; constants (inline data, tensor attributes) >= 0. Empty tensors are legal in
  // ONNX models, and every model the ONNX importer produces must be writable and readable again.
  enum class DimRule { input, weight, constant };
  std::vector<int64_t> shape_at(const json& j, const std::string& ptr, DimRule rule) const;
  TensorType type_of(const json& j, const std::string& ptr, DimRule rule) const;

  // Tensors and attributes.
  double element_at(const json& j, const std::string& ptr, DType dtype) const;  // float and bool
  int64_t integer_at(const json& j, const std::string& ptr, DType dtype) const;  // integer dtypes
  HostTensor data_at(const json& j, const std::string& ptr, const TensorType& type) const;
  HostTensor external_at(const json& j, const std::string& ptr, const TensorType& type) const;
  RandomInit init_at(const json& j, const std::string& ptr) const;
  Sparsity sparsity_at(const json& j, const std::string& ptr, const TensorType& type) const;
  Sparsity nm_sparsity_at(const json& j, const std::string& ptr, const TensorType& type) const;
  AttrValue attr_at(const json& j, const std::string& ptr) const;
  AttrValue typed_attr_at(const json& j, const std::string& ptr) const;
  AttrValue list_attr_at(const json& j, const std::string& ptr) const;

  // Sections.
  ValueDecl input_at(const json& j, const std::string& ptr) const;
  WeightDef weight_at(const json& j, const std::string& ptr) const;
  OpDef op_at(const json& j, const std::string& ptr) const;

  // Graph checks.
  void check_names(const ModelDef& model) const;
  void check_acyclic(const ModelDef& model) const;

  std::string file_;
  fs::path base_dir_;
};

void ModelReader::check_keys(const json& j, const std::string& ptr,
                             std::initializer_list<const char*> required,
                             std::initializer_list<const char*> optional) const {
  if (!j.is_object()) expected(ptr, "an object", j);
  auto allowed = [&](const std::string& key) {
    auto same = [&](const char* k) { return key == k; };
    return std::any_of(required.begin(), required.end(), same) ||
           std::any_of(optional.begin(), optional.end(), same);
  };
  for (const auto& [key, value] : j.items()) {
    if (allowed(key)) continue;
    std::string names;
    for (const char* k : required) names += std::string(names.empty() ? "" : ", ") + k;
    for (const char* k : optional) names += std::string(names.empty() ? "" : ", ") + k;
    fail(child(ptr, key), cat("unknown key ", quoted(key), " (expected one of: ", names, ")"));
  }
  for (const char* k : required)
    if (!j.contains(k)) fail(ptr, cat("missing key \"", k, "\""));
}

const json& ModelReader::array_at(const json& j, const std::string& ptr) const {
  if (!j.is_array()) expected(ptr, "a list", j);
  return j;
}

std::string ModelReader::string_at(const json& j, const std::string& ptr) const {
  if (!j.is_string()) expected(ptr, "a string", j);
  return j.get<std::string>();
}

std::string ModelReader::name_at(const json& j, const std::string& ptr) const {
  std::string name = string_at(j, ptr);
  if (name.empty()) fail(ptr, "expected a non-empty name, got \"\"");
  return name;
}

int64_t ModelReader::int_at(const json& j, const std::string& ptr) const {
  if (!j.is_number_integer()) expected(ptr, "an integer", j);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(ptr, cat("integer ", describe(j), " does not fit in int64"));
  return j.get<int64_t>();
}

uint64_t ModelReader::uint_at(const json& j, const std::string& ptr) const {
  if (!j.is_number_unsigned()) expected(ptr, "a non-negative integer", j);
  return j.get<uint64_t>();
}

double ModelReader::float_at(const json& j, const std::string& ptr) const {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  expected(ptr, "a number (or \"nan\", \"inf\", \"-inf\")", j);
}

double ModelReader::finite_at(const json& j, const std::string& ptr) const {
  if (!j.is_number()) expected(ptr, "a number", j);
  return j.get<double>();
}

DType ModelReader::dtype_at(const json& j, const std::string& ptr) const {
  std::optional<DType> dtype = parse_dtype(string_at(j, ptr));
  if (!dtype) {
    std::string names;
    for (int t = 0; t <= static_cast<int>(DType::boolean); ++t)
      names += std::string(t ? ", " : "") + std::string(dtype_name(static_cast<DType>(t)));
    fail(ptr, cat("unknown dtype ", describe(j), " (expected one of: ", names, ")"));
  }
  return *dtype;
}

std::vector<int64_t> ModelReader::shape_at(const json& j, const std::string& ptr,
                                           DimRule rule) const {
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (size_t i = 0; i < array_at(j, ptr).size(); ++i) {
    const std::string dim_ptr = child(ptr, i);
    const int64_t dim = int_at(j[i], dim_ptr);
    if (dim == -1 && rule == DimRule::input) {
      shape.push_back(dim);
      continue;
    }
    if (dim < 0)
      fail(dim_ptr, cat("negative dimension ", dim,
                        rule == DimRule::input ? " (only -1, meaning unknown, is allowed)" : ""));
    if (dim == 0 && rule == DimRule::weight)
      fail(dim_ptr, "zero dimension 0 (only a weight with inline \"data\" may be empty)");
    if (dim > 0 && elements > kMaxElements / dim)
      fail(ptr, cat("shape ", describe(j), " has too many elements"));
    elements *= dim;
    shape.push_back(dim);
  }
  return shape;
}

TensorType ModelReader::type_of(const json& j, const std::string& ptr, DimRule rule) const {
  return TensorType{dtype_at(j["dtype"], child(ptr, "dtype")),
                    shape_at(j["shape"], child(ptr, "shape"), rule)};
}

double ModelReader::element_at(const json& j, const std::string& ptr, DType dtype) const {
  if (is_float(dtype)) return float_at(j, ptr);
  TESSEL_ASSERT(dtype == DType::boolean, "element_at of ", dtype_name(dtype), " (integers: integer_at)");
  if (j.is_boolean()) return j.get<bool>() ? 1 : 0;
  if (j.is_number_integer() && (j.get<int64_t>() == 0 || j.get<int64_t>() == 1))
    return static_cast<double>(j.get<int64_t>());
  expected(ptr, "true, false, 0 or 1", j);
}

int64_t ModelReader::integer_at(const json& j, const std::string& ptr, DType dtype) const {
  const int64_t v = int_at(j, ptr);
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (dtype == DType::i32)
    lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  if (dtype == DType::i8) lo = -128, hi = 127;
  if (dtype == DType::u8) lo = 0, hi = 255;
  if (v < lo || v > hi) fail(ptr, cat("value ", v, " is out of range for ", dtype_name(dtype)));
  return v;
}

HostTensor ModelReader::data_at(const json& j, const std::string& ptr, const TensorType& type) const {
  const int64_t n = type.num_elements();
  if (static_cast<int64_t>(array_at(j, ptr).size()) != n)
    fail(ptr, cat(j.size(), " values given for shape ", shape_text(type.shape), ", which has ", n,
                  " elements"));
  if (is_integer(type.dtype)) {  // as integers: an i64 beyond 2^53 has no exact double
    std::vector<int64_t> values;
    values.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) values.push_back(integer_at(j[i], child(ptr, i), type.dtype));
    return HostTensor::from_integers(type, std::move(values));
  }
  std::vector<double> values;
  values.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i)
    values.push_back(element_at(j[i], child(ptr, i), type.dtype));
  return HostTensor(type, std::move(values));
}

HostTensor ModelReader::external_at(const json& j, const std::string& ptr,
                                    const TensorType& type) const {
  check_keys(j, ptr, {"file", "offset"}, {});
  const std::string name = name_at(j["file"], child(ptr, "file"));
  const int64_t offset = int_at(j["offset"], child(ptr, "offset"));
  if (offset < 0) fail(child(ptr, "offset"), cat("negative offset ", offset));

  const fs::path path = data_file_inside(base_dir_, name, file_, child(ptr, "file"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(child(ptr, "file"), cat("cannot open weight file ", quoted(name), " (looked for ",
                                 quoted(path.string()), ")"));
  const int bytes_per_value = dtype_bytes(type.dtype);
  const int64_t n = type.num_elements();
  const int64_t bytes = n * bytes_per_value;
  std::error_code ec;
  const auto file_bytes = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec || bytes > file_bytes || offset > file_bytes - bytes)
    fail(ptr, cat("weight file ", quoted(name), " has ", file_bytes,
                  " bytes; the weight needs bytes [", offset, ", ", offset + bytes, ")"));

  std::string raw(static_cast<size_t>(bytes), '\0');
  in.seekg(offset);
  in.read(raw.data(), bytes);
  if (!in) fail(child(ptr, "file"), cat("cannot read ", bytes, " bytes from ", quoted(name)));
  return decode_little_endian(raw, type);
}

RandomInit ModelReader::init_at(const json& j, const std::string& ptr) const {
  if (!j.is_object()) expected(ptr, "an object", j);
  if (!j.contains("dist")) fail(ptr, "missing key \"dist\"");
  const std::string dist = string_at(j["dist"], child(ptr, "dist"));
  RandomInit init;
  if (dist == "normal") {
    check_keys(j, ptr, {"dist", "std", "seed"}, {"mean"});
    init.dist = RandomInit::Dist::normal;
    init.a = j.contains("mean") ? finite_at(j["mean"], child(ptr, "mean")) : 0.0;
    init.b = finite_at(j["std"], child(ptr, "std"));
    if (init.b < 0)
      fail(child(ptr, "std"), cat("negative standard deviation ", describe(j["std"])));
  } else if (dist == "uniform") {
    check_keys(j, ptr, {"dist", "low", "high", "seed"}, {});
    init.dist = RandomInit::Dist::uniform;
    init.a = finite_at(j["low"], child(ptr, "low"));
    init.b = finite_at(j["high"], child(ptr, "high"));
    if (init.a > init.b)
      fail(ptr, cat("low ", describe(j["low"]), " is greater than high ", describe(j["high"])));
  } else {
    fail(child(ptr, "dist"),
         cat("unknown distribution ", quoted(dist), " (expected \"normal\" or \"uniform\")"));
  }
  init.seed = uint_at(j["seed"], child(ptr, "seed"));
  return init;
}

// Attribute values: plain JSON for the unambiguous cases, a one-key typed object otherwise.
AttrValue ModelReader::attr_at(const json& j, const std::string& ptr) const {
  if (j.is_number_integer()) return int_at(j, ptr);
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array()) return list_attr_at(j, ptr);
  if (j.is_object()) return typed_attr_at(j, ptr);
  expected(ptr, "an attribute value (number, string, list or typed object such as {\"ints\": []})",
           j);
}

AttrValue ModelReader::list_attr_at(const json& j, const std::string& ptr) const {
  if (j.empty())
    fail(ptr,
         "got [], an ambiguous empty list; write {\"ints\": []}, {\"floats\": []} or {\"strings\": "
         "[]}");
  const bool all_ints =
      std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_number_integer(); });
  const bool all_numbers =
      std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_number(); });
  const bool all_strings =
      std::all_of(j.begin(), j.end(), [](const json& e) { return e.is_string(); });
  if (all_ints) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(int_at(j[i], child(ptr, i)));
    return out;
  }
  if (all_numbers) {
    std::vector<double> out;
    for (const json& e : j) out.push_back(e.get<double>());
    return out;
  }
  if (all_strings) return j.get<std::vector<std::string>>();
  const bool first_is_string = j[0].is_string();
  for (size_t i = 0; i < j.size(); ++i)
    if (j[i].is_string() != first_is_string || !(j[i].is_string() || j[i].is_number()))
      expected(
          child(ptr, i),
          first_is_string ? "a string like the first element" : "a number like the first element",
          j[i]);
  TESSEL_ASSERT(false, "list attribute classification");
  return {};
}

AttrValue ModelReader::typed_attr_at(const json& j, const std::string& ptr) const {
  if (j.size() != 1)
    fail(ptr,
         cat("a typed attribute has exactly one key (int, float, string, ints, floats, strings "
             "or tensor), got ",
             describe(j)));
  const std::string& kind = j.begin().key();
  const json& value = j.begin().value();
  const std::string vptr = child(ptr, kind);
  if (kind == "int") return int_at(value, vptr);
  if (kind == "float") return float_at(value, vptr);
  if (kind == "string") return string_at(value, vptr);
  if (kind == "ints" || kind == "floats" || kind == "strings") {
    array_at(value, vptr);
    std::vector<int64_t> ints;
    std::vector<double> floats;
    std::vector<std::string> strings;
    for (size_t i = 0; i < value.size(); ++i) {
      if (kind == "ints") ints.push_back(int_at(value[i], child(vptr, i)));
      if (kind == "floats") floats.push_back(float_at(value[i], child(vptr, i)));
      if (kind == "strings") strings.push_back(string_at(value[i], child(vptr, i)));
    }
    if (kind == "ints") return ints;
    if (kind == "floats") return floats;
    return strings;
  }
  if (kind == "tensor") {
    check_keys(value, vptr, {"dtype", "shape", "data"}, {});
    TensorType type = type_of(value, vptr, DimRule::constant);
    return data_at(value["data"], child(vptr, "data"), type);
  }
  fail(vptr, cat("unknown attribute type ", quoted(kind),
                 " (expected int, float, string, ints, floats, strings or tensor)"));
}

ValueDecl ModelReader::input_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr, {"name", "dtype", "shape"}, {});
  return ValueDecl{name_at(j["name"], child(ptr, "name")), type_of(j, ptr, DimRule::input)};
}

WeightDef ModelReader::weight_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr, {"name", "dtype", "shape"}, {"init", "data", "external", "sparsity"});
  const DimRule rule = j.contains("data") ? DimRule::constant : DimRule::weight;
  WeightDef w{name_at(j["name"], child(ptr, "name")), type_of(j, ptr, rule), {}};
  const int sources =
      int{j.contains("init")} + int{j.contains("data")} + int{j.contains("external")};
  if (sources != 1)
    fail(ptr, cat("weight ", quoted(w.name),
                  " needs exactly one of \"init\", \"data\" or \"external\", got ", sources));
  if (j.contains("init")) {
    w.source = init_at(j["init"], child(ptr, "init"));
  } else if (j.contains("data")) {
    w.source = std::make_shared<const HostTensor>(data_at(j["data"], child(ptr, "data"), w.type));
  } else {
    w.source = std::make_shared<const HostTensor>(
        external_at(j["external"], child(ptr, "external"), w.type));
  }
  if (j.contains("sparsity")) w.sparsity = sparsity_at(j["sparsity"], child(ptr, "sparsity"), w.type);
  return w;
}

Sparsity ModelReader::sparsity_at(const json& j, const std::string& ptr, const TensorType& type) const {
  if (!j.is_object()) expected(ptr, "an object", j);
  if (!j.contains("pattern")) fail(ptr, "missing key \"pattern\"");
  const std::string pattern = string_at(j["pattern"], child(ptr, "pattern"));
  if (pattern == "nm") return nm_sparsity_at(j, ptr, type);
  if (pattern != "block")
    fail(child(ptr, "pattern"), cat("sparsity pattern ", quoted(pattern), " is not supported (supported: \"block\", \"nm\")"));
  check_keys(j, ptr, {"pattern", "block"}, {"density"});
  Sparsity s;
  const json& block = array_at(j["block"], child(ptr, "block"));
  if (block.size() != 2) fail(child(ptr, "block"), cat("expected [rows, cols], got ", block.size(), " entries"));
  s.block_rows = int_at(block[0], child(child(ptr, "block"), size_t{0}));
  s.block_cols = int_at(block[1], child(child(ptr, "block"), size_t{1}));
  if (j.contains("density")) {
    s.density = finite_at(j["density"], child(ptr, "density"));
    if (!(s.density > 0 && s.density <= 1)) fail(child(ptr, "density"), cat("density ", s.density, " is not in (0, 1]"));
  }
  if (std::string why = check_sparsity(s, type.shape); !why.empty()) fail(ptr, why);
  if (!is_float(type.dtype))
    fail(ptr, cat("block sparsity applies to float weights; this one is ", dtype_name(type.dtype)));
  return s;
}

Sparsity ModelReader::nm_sparsity_at(const json& j, const std::string& ptr, const TensorType& type) const {
  check_keys(j, ptr, {"pattern", "n", "m"}, {"axis"});
  Sparsity s;
  s.pattern = Sparsity::Pattern::nm;
  const int64_t m = int_at(j["m"], child(ptr, "m"));
  if (m < 2 || m > std::numeric_limits<int>::max()) fail(child(ptr, "m"), cat("m is ", m, ", expected an integer of 2 or more"));
  const int64_t n = int_at(j["n"], child(ptr, "n"));
  if (n <= 0 || n >= m) fail(child(ptr, "n"), cat("n is ", n, ", expected 0 < n < m = ", m));
  s.nm_n = static_cast<int>(n);
  s.nm_m = static_cast<int>(m);
  if (j.contains("axis")) {
    const int64_t axis = int_at(j["axis"], child(ptr, "axis"));
    if (axis < -type.rank() || axis >= type.rank())
      fail(child(ptr, "axis"), cat("axis ", axis, " is not a dimension of a weight of rank ", type.rank()));
    s.axis = static_cast<int>(axis);
  }
  if (std::string why = check_sparsity(s, type.shape); !why.empty()) fail(j.contains("axis") ? child(ptr, "axis") : ptr, why);
  if (!is_float(type.dtype))
    fail(ptr, cat("N:M sparsity applies to float weights; this one is ", dtype_name(type.dtype)));
  return s;
}

OpDef ModelReader::op_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr, {"name", "op", "outputs"}, {"inputs", "attrs", "domain"});
  OpDef op;
  op.name = name_at(j["name"], child(ptr, "name"));
  op.op_type = name_at(j["op"], child(ptr, "op"));
  if (j.contains("domain")) op.domain = string_at(j["domain"], child(ptr, "domain"));
  if (j.contains("inputs")) {
    const std::string iptr = child(ptr, "inputs");
    for (size_t i = 0; i < array_at(j["inputs"], iptr).size(); ++i)
      op.inputs.push_back(
          string_at(j["inputs"][i], child(iptr, i)));  // "" = omitted optional input
  }
  const std::string optr = child(ptr, "outputs");
  if (array_at(j["outputs"], optr).empty())
    fail(optr, cat("op ", quoted(op.name), " has no outputs"));
  for (size_t i = 0; i < j["outputs"].size(); ++i)
    op.outputs.push_back(
        string_at(j["outputs"][i], child(optr, i)));  // "" = unused optional output
  if (j.contains("attrs")) {
    const std::string aptr = child(ptr, "attrs");
    if (!j["attrs"].is_object()) expected(aptr, "an object", j["attrs"]);
    for (const auto& [key, value] : j["attrs"].items())
      op.attrs.emplace(key, attr_at(value, child(aptr, key)));
  }
  return op;
}

// Every tensor name is defined once (input, weight or op output); op names are unique; every op
// input and model output names a defined tensor.
void ModelReader::check_names(const ModelDef& model) const {
  std::unordered_map<std::string, std::string> defined;  // tensor name -> pointer of its definition
  auto define = [&](const std::string& name, const std::string& ptr) {
    auto [it, inserted] = defined.emplace(name, ptr);
    if (!inserted) fail(ptr, cat("tensor ", quoted(name), " is already defined at ", it->second));
  };
  for (size_t i = 0; i < model.inputs.size(); ++i)
    define(model.inputs[i].name, child(child("/inputs", i), "name"));
  for (size_t i = 0; i < model.weights.size(); ++i)
    define(model.weights[i].name, child(child("/weights", i), "name"));
  std::unordered_map<std::string, size_t> op_names;
  for (size_t i = 0; i < model.ops.size(); ++i) {
    const OpDef& op = model.ops[i];
    const std::string ptr = child("/ops", i);
    if (auto [it, inserted] = op_names.emplace(op.name, i); !inserted)
      fail(child(ptr, "name"),
           cat("op name ", quoted(op.name), " is already used by ", child("/ops", it->second)));
    for (size_t k = 0; k < op.outputs.size(); ++k)
      if (!op.outputs[k].empty()) define(op.outputs[k], child(child(ptr, "outputs"), k));
  }
  auto check_defined = [&](const std::string& name, const std::string& ptr) {
    if (!defined.contains(name))
      fail(ptr, cat("tensor ", quoted(name), " is not an input, weight or op output"));
  };
  for (size_t i = 0; i < model.ops.size(); ++i)
    for (size_t k = 0; k < model.ops[i].inputs.size(); ++k)
      if (!model.ops[i].inputs[k].empty())
        check_defined(model.ops[i].inputs[k], child(child(child("/ops", i), "inputs"), k));
  for (size_t i = 0; i < model.outputs.size(); ++i)
    check_defined(model.outputs[i], child("/outputs", i));
}

// Kahn's algorithm over ops; an op left over depends on a cycle. Following producers from it
// inside the left-over set must revisit an op, which lies on the cycle that is reported.
void ModelReader::check_acyclic(const ModelDef& model) const {
  const size_t n = model.ops.size();
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const std::string& t : model.ops[i].outputs)
      if (!t.empty()) producer.emplace(t, i);
  std::vector<std::vector<size_t>> consumers(n);
  std::vector<int> pending(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const std::string& t : model.ops[i].inputs)
      if (auto it = producer.find(t); it != producer.end()) {
        consumers[it->second].push_back(i);
        ++pending[i];
      }
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    const size_t op = ready.back();
    ready.pop_back();
    for (size_t c : consumers[op])
      if (--pending[c] == 0) ready.push_back(c);
  }
  auto stuck = std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; });
  if (stuck == pending.end()) return;

  std::vector<size_t> path{static_cast<size_t>(stuck - pending.begin())};
  std::vector<int> position(n, -1);
  while (position[path.back()] < 0) {
    const size_t op = path.back();
    position[op] = static_cast<int>(path.size()) - 1;
    for (const std::string& t : model.ops[op].inputs)
      if (auto it = producer.find(t); it != producer.end() && pending[it->second] > 0) {
        path.push_back(it->second);
        break;
      }
  }
  const size_t start = static_cast<size_t>(position[path.back()]);
  std::string cycle;
  for (size_t k = path.size() - 1; k > start; --k)
    cycle += quoted(model.ops[path[k]].name) + " -> ";
  cycle += quoted(model.ops[path[start]].name);
  fail(child("/ops", path[start]),
       cat("op ", quoted(model.ops[path[start]].name), " is part of a cycle: ", cycle));
}

ModelDef ModelReader::read(const json& doc) {
  check_keys(doc, "", {"format", "version", "inputs", "outputs", "ops"},
             {"name", "opset", "weights"});
  if (string_at(doc["format"], "/format") != kFormatName)
    fail("/format", cat("expected \"", kFormatName, "\", got ", describe(doc["format"])));
  if (const int64_t version = int_at(doc["version"], "/version"); version != kFormatVersion)
    fail("/version",
         cat("unsupported version ", version, " (this Tessel reads version ", kFormatVersion, ")"));
  ModelDef model;
  model.file = file_;
  if (doc.contains("name")) model.name = string_at(doc["name"], "/name");
  if (doc.contains("opset")) {
    model.opset = int_at(doc["opset"], "/opset");
    if (model.opset < 0) fail("/opset", cat("negative opset ", model.opset));
  }
  for (size_t i = 0; i < array_at(doc["inputs"], "/inputs").size(); ++i)
    model.inputs.push_back(input_at(doc["inputs"][i], child("/inputs", i)));
  for (size_t i = 0; i < array_at(doc["outputs"], "/outputs").size(); ++i)
    model.outputs.push_back(name_at(doc["outputs"][i], child("/outputs", i)));
  if (doc.contains("weights"))
    for (size_t i = 0; i < array_at(doc["weights"], "/weights").size(); ++i)
      model.weights.push_back(weight_at(doc["weights"][i], child("/weights", i)));
  for (size_t i = 0; i < array_at(doc["ops"], "/ops").size(); ++i)
    model.ops.push_back(op_at(doc["ops"][i], child("/ops", i)));
  if (model.outputs.empty()) fail("/outputs", "a model needs at least one output, got []");
  check_names(model);
  check_acyclic(model);
  return model;
}

// ---------------------------------------------------------------------------------------------
// Writing.

/// A float as JSON: a number that parses back to `v` exactly, or "nan"/"inf"/"-inf".
ordered_json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

/// An element of tensor data. Values of f32/f16/bf16 tensors are written as the shortest decimal
/// that rounds back to the same float ("0.02" rather than "0.019999999552965164").
ordered_json element_json(DType dtype, double v) {
  if (dtype == DType::boolean) return v != 0;
  if (dtype == DType::f64 || !std::isfinite(v)) return float_json(v);
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  TESSEL_ASSERT(ec == std::errc(), "to_chars failed for ", v);
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

ordered_json data_json(const HostTensor& t) {
  ordered_json data = ordered_json::array();
  for (int64_t i = 0; i < t.size(); ++i) {
    if (is_integer(t.dtype())) data.push_back(t.as_int(i));  // exact, as nlohmann writes an int64
    else data.push_back(element_json(t.dtype(), t[i]));
  }
  return data;
}

ordered_json attr_json(const AttrValue& value) {
  struct Visitor {
    ordered_json operator()(int64_t v) const { return v; }
    ordered_json operator()(double v) const {
      return std::isfinite(v) ? ordered_json(v) : ordered_json{{"float", float_json(v)}};
    }
    ordered_json operator()(const std::string& v) const { return v; }
    ordered_json operator()(const std::vector<int64_t>& v) const {
      return v.empty() ? ordered_json{{"ints", ordered_json::array()}} : ordered_json(v);
    }
    ordered_json operator()(const std::vector<double>& v) const {
      ordered_json list = ordered_json::array();
      for (double x : v) list.push_back(float_json(x));
      const bool plain =
          !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
      return plain ? list : ordered_json{{"floats", list}};
    }
    ordered_json operator()(const std::vector<std::string>& v) const {
      return v.empty() ? ordered_json{{"strings", ordered_json::array()}} : ordered_json(v);
    }
    ordered_json operator()(const HostTensor& t) const {
      ordered_json tensor;
      tensor["dtype"] = dtype_name(t.dtype());
      tensor["shape"] = t.shape();
      tensor["data"] = data_json(t);
      return ordered_json{{"tensor", tensor}};
    }
  };
  return std::visit(Visitor{}, value);
}

/// Collects the bytes of the sidecar weight file written by save_model_json.
struct Sidecar {
  std::string file_name;  // relative to the JSON file's directory
  std::string bytes;

  int64_t append(const HostTensor& t) {
    bytes.resize(
        (bytes.size() + kExternalAlignBytes - 1) / kExternalAlignBytes * kExternalAlignBytes, '\0');
    const int64_t offset = static_cast<int64_t>(bytes.size());
    bytes += encode_little_endian(t);
    return offset;
  }
};

ordered_json weight_json(const WeightDef& w, Sidecar* sidecar) {
  ordered_json j;
  j["name"] = w.name;
  j["dtype"] = dtype_name(w.type.dtype);
  j["shape"] = w.type.shape;
  if (w.sparsity && w.sparsity->pattern == Sparsity::Pattern::nm) {
    ordered_json sp;
    sp["pattern"] = "nm";
    sp["n"] = w.sparsity->nm_n;
    sp["m"] = w.sparsity->nm_m;
    sp["axis"] = w.sparsity->axis;
    j["sparsity"] = sp;
  } else if (w.sparsity) {
    ordered_json sp;
    sp["pattern"] = "block";
    sp["block"] = {w.sparsity->block_rows, w.sparsity->block_cols};
    if (w.sparsity->density > 0) sp["density"] = w.sparsity->density;
    j["sparsity"] = sp;
  }
  if (const auto* init = std::get_if<RandomInit>(&w.source)) {
    ordered_json i;
    const bool normal = init->dist == RandomInit::Dist::normal;
    i["dist"] = normal ? "normal" : "uniform";
    i[normal ? "mean" : "low"] = float_json(init->a);
    i[normal ? "std" : "high"] = float_json(init->b);
    i["seed"] = init->seed;
    j["init"] = i;
    return j;
  }
  const auto& data = std::get<std::shared_ptr<const HostTensor>>(w.source);
  TESSEL_ASSERT(data, "weight '", w.name, "' has a null data pointer");
  if (sidecar && data->size() > kExternalWeightElements)
    j["external"] = ordered_json{{"file", sidecar->file_name}, {"offset", sidecar->append(*data)}};
  else
    j["data"] = data_json(*data);
  return j;
}

ordered_json op_json(const OpDef& op) {
  ordered_json j;
  j["name"] = op.name;
  j["op"] = op.op_type;
  if (!op.domain.empty()) j["domain"] = op.domain;
  j["inputs"] = op.inputs;
  j["outputs"] = op.outputs;
  if (!op.attrs.empty()) {
    ordered_json attrs;
    for (const auto& [key, value] : op.attrs) attrs[key] = attr_json(value);  // std::map: sorted
    j["attrs"] = attrs;
  }
  return j;
}

ordered_json model_json(const ModelDef& model, Sidecar* sidecar) {
  ordered_json j;
  j["format"] = kFormatName;
  j["version"] = kFormatVersion;
  j["name"] = model.name;
  j["opset"] = model.opset;
  j["inputs"] = ordered_json::array();
  for (const ValueDecl& in : model.inputs)
    j["inputs"].push_back(
        {{"name", in.name}, {"dtype", dtype_name(in.type.dtype)}, {"shape", in.type.shape}});
  j["outputs"] = model.outputs;
  j["weights"] = ordered_json::array();
  for (const WeightDef& w : model.weights) j["weights"].push_back(weight_json(w, sidecar));
  j["ops"] = ordered_json::array();
  for (const OpDef& op : model.ops) j["ops"].push_back(op_json(op));
  return j;
}

// The pretty printer. A container goes on one line when it fits in kLineWidth columns; a long list
// of scalars is packed several to a line; anything else gets one member per line.

void render_pretty(const ordered_json& j, size_t indent, size_t column, std::string& out) {
  if (!j.is_structured() || j.empty()) {
    render_inline(j, out, std::string::npos);
    return;
  }
  std::string line;
  if (column < kLineWidth && render_inline(j, line, kLineWidth - column)) {
    out += line;
    return;
  }
  const std::string pad(indent + 2, ' ');
  const bool scalars = j.is_array() && std::none_of(j.begin(), j.end(), [](const ordered_json& e) {
                         return e.is_structured();
                       });
  if (scalars) {  // pack as many per line as fit
    out += "[\n" + pad;
    size_t col = pad.size();
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string item = dump_safe(j[i]) + (i + 1 < j.size() ? "," : "");
      if (i > 0 && col + 1 + item.size() > kLineWidth) {
        out += "\n" + pad;
        col = pad.size();
      } else if (i > 0) {
        out += ' ';
        ++col;
      }
      out += item;
      col += item.size();
    }
  } else if (j.is_array()) {
    out += "[";
    for (size_t i = 0; i < j.size(); ++i) {
      out += (i ? ",\n" : "\n") + pad;
      render_pretty(j[i], indent + 2, pad.size(), out);
    }
  } else {
    out += "{";
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      const std::string prefix = dump_safe(ordered_json(key)) + ": ";
      out += (first ? "\n" : ",\n") + pad + prefix;
      first = false;
      render_pretty(value, indent + 2, pad.size() + prefix.size(), out);
    }
  }
  out += "\n" + std::string(indent, ' ') + (j.is_object() ? "}" : "]");
}

std::string render(const ordered_json& j) {
  std::string out;
  render_pretty(j, 0, 0, out);
  return out + "\n";
}

void write_file(const fs::path& path, const std::string& bytes) { write_file_atomically(path.string(), bytes); }

}  // namespace

ModelDef parse_model_json(const std::string& text, const std::string& file) {
  try {
    const json doc = parse_text(text, file);
    return ModelReader(file).read(doc);
  } catch (const json::exception& e) {  // every access is type-checked first: this is a bug
    throw InternalError(
        cat("model_json: nlohmann exception escaped while reading ", file, ": ", e.what()));
  }
}

ModelDef load_model_json(const std::string& path) {
  return parse_model_json(read_regular_file(path, kMaxModelFileBytes, "the model file"), path);
}

std::string write_model_json(const ModelDef& model) { return render(model_json(model, nullptr)); }

void save_model_json(const ModelDef& model, const std::string& path) {
  const fs::path json_path(path);
  Sidecar sidecar{json_path.stem().string() + ".bin", {}};
  const std::string text = render(model_json(model, &sidecar));
  if (!sidecar.bytes.empty())
    write_file(json_path.parent_path() / sidecar.file_name, sidecar.bytes);
  write_file(json_path, text);
}

}  // namespace tessel
