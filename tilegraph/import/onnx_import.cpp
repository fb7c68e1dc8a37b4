// ONNX import (see onnx_import.h): ModelProto -> ModelDef, and TensorProto <-> HostTensor.
//
// The whole file is parsed with protobuf, then the main graph is copied field by field. Nothing
// read from the file is trusted: dimensions, data lengths and external-data ranges are checked
// before they are used, so a corrupt model becomes a UserError naming the value, never a crash.
#include "tilegraph/import/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/limits.h"
#include "tilegraph/import/tensor_files.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

/// Where the tensors being decoded come from: the file named in errors, and the directory that
/// external data locations are relative to.
struct TensorSource {
  std::string file;
  fs::path base_dir;
};

std::string read_model_bytes(const std::string& path) {
  return read_regular_file(path, kMaxModelFileBytes, "an ONNX model");
}

// ---------------------------------------------------------------------------------------------
// Element types

std::string element_type_name(int32_t elem_type) {
  if (onnx::TensorProto_DataType_IsValid(elem_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  return cat("<element type ", elem_type, ">");
}

/// The Tessel dtype of an ONNX element type; `where` locates the tensor in errors.
DType dtype_from_onnx(int32_t elem_type, const std::string& file, const std::string& where) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::DOUBLE: return DType::f64;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::BOOL: return DType::boolean;
    case onnx::TensorProto::UNDEFINED:
      throw UserError(file, where, "element type is missing (UNDEFINED)");
    default:
      throw UnsupportedError(file, where,
                             cat("unsupported element type ", element_type_name(elem_type)));
  }
}

onnx::TensorProto_DataType onnx_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return onnx::TensorProto::FLOAT;
    case DType::f64: return onnx::TensorProto::DOUBLE;
    case DType::f16: return onnx::TensorProto::FLOAT16;
    case DType::bf16: return onnx::TensorProto::BFLOAT16;
    case DType::i64: return onnx::TensorProto::INT64;
    case DType::i32: return onnx::TensorProto::INT32;
    case DType::i8: return onnx::TensorProto::INT8;
    case DType::u8: return onnx::TensorProto::UINT8;
    case DType::boolean: return onnx::TensorProto::BOOL;
  }
  TESSEL_ASSERT(false, "unknown dtype ", static_cast<int>(dtype));
}

// ---------------------------------------------------------------------------------------------
// TensorProto -> HostTensor

std::string print_dims(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

/// The tensor's shape, checked: no negative dimension and an element count that fits int64.
std::vector<int64_t> checked_dims(const onnx::TensorProto& proto, const std::string& file,
                                  const std::string& where) {
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) throw UserError(file, where, cat("negative dimension in dims ", print_dims(dims)));
    if (__builtin_mul_overflow(count, d, &count))
      throw UserError(file, where, cat("dims ", print_dims(dims), " overflow int64"));
  }
  return dims;
}

/// Values stored as little-endian bytes (raw_data or external data), after a size check.
HostTensor tensor_from_bytes(std::string_view bytes, TensorType type, const std::string& file,
                             const std::string& where, const std::string& field) {
  const DType dtype = type.dtype;
  const int64_t count = type.num_elements();
  const auto element_bytes = static_cast<size_t>(dtype_bytes(dtype));
  if (bytes.size() % element_bytes != 0 || bytes.size() / element_bytes != uint64_t(count))
    throw UserError(file, where,
                    cat(field, " has ", bytes.size(), " bytes, expected ", count, " elements of ",
                        element_bytes, " bytes (", dtype_name(dtype), ")"));
  return decode_little_endian(bytes, std::move(type));
}

/// Values stored in the typed repeated field that ONNX uses for `dtype`: float_data, double_data,
/// or int32_data (which also holds the bits of f16/bf16 and 8-bit and bool values). An i64
/// tensor's int64_data is read by tensor_from_proto as integers.
std::vector<double> values_from_typed_field(const onnx::TensorProto& proto, DType dtype) {
  std::vector<double> values;
  switch (dtype) {
    case DType::f32:
      values.assign(proto.float_data().begin(), proto.float_data().end());
      break;
    case DType::f64:
      values.assign(proto.double_data().begin(), proto.double_data().end());
      break;
    case DType::i64:
      break;  // exact only as integers: tensor_from_proto reads int64_data itself
    case DType::f16:
      for (int32_t v : proto.int32_data()) values.push_back(half_bits_to_float(uint16_t(v)));
      break;
    case DType::bf16:
      for (int32_t v : proto.int32_data()) values.push_back(bf16_bits_to_float(uint16_t(v)));
      break;
    case DType::i32:
    case DType::i8:
    case DType::u8:
    case DType::boolean:
      values.assign(proto.int32_data().begin(), proto.int32_data().end());
      break;
  }
  return values;
}

/// A non-negative integer entry ("offset", "length") of external_data.
int64_t parse_external_int(const std::string& key, const std::string& text,
                           const std::string& file, const std::string& where) {
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw UserError(file, where, cat("external data ", key, " '", text, "' is not a byte count"));
  return value;
}

/// The bytes of a tensor stored outside the model: `location` (relative to the model's
/// directory), from `offset` for `length` bytes -- without a `length`, the `needed` bytes the
/// tensor's shape and dtype take (not the rest of the file: a data file shared by many tensors
/// would be read whole for each). A `length` other than `needed` is refused before reading.
std::string read_external_data(const onnx::TensorProto& proto, const TensorSource& source,
                               const std::string& where, int64_t needed) {
  const std::string& file = source.file;
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() == "offset") offset = parse_external_int("offset", entry.value(), file, where);
    if (entry.key() == "length") length = parse_external_int("length", entry.value(), file, where);
  }  // other keys ("checksum") are not needed to read the data
  if (location.empty()) throw UserError(file, where, "external data has no 'location' entry");
  const fs::path data_path = data_file_inside(source.base_dir, location, file, where);
  std::error_code ec;
  const auto file_bytes = fs::file_size(data_path, ec);
  if (ec)
    throw UserError(file, where,
                    cat("external data file '", data_path.string(), "': ", ec.message()));
  const int64_t size = static_cast<int64_t>(file_bytes);
  const int64_t count = length.value_or(needed);
  if (count != needed)
    throw UserError(file, where, cat("external data length ", count, " bytes, but the tensor takes ", needed));
  if (offset > size || count > size - offset)
    throw UserError(file, where, cat("external data file '", data_path.string(), "' has ", size,
                                     " bytes; the tensor needs offset ", offset, " + length ",
                                     count));
  std::ifstream in(data_path, std::ios::binary);
  std::string bytes(static_cast<size_t>(count), '\0');
  in.seekg(offset);
  in.read(bytes.data(), count);
  if (!in)
    throw UserError(file, where, cat("cannot read external data file '", data_path.string(), "'"));
  return bytes;
}

HostTensor tensor_from_proto(const onnx::TensorProto& proto, const TensorSource& source,
                             const std::string& where) {
  const std::string& file = source.file;
  const DType dtype = dtype_from_onnx(proto.data_type(), file, where);
  if (proto.has_segment())
    throw UnsupportedError(file, where, "segmented tensors (the 'segment' field) are not supported");
  TensorType type{dtype, checked_dims(proto, file, where)};
  const int64_t count = type.num_elements();

  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    return tensor_from_bytes(read_external_data(proto, source, where, count * dtype_bytes(dtype)), std::move(type), file,
                             where, "external data");
  if (proto.has_raw_data()) return tensor_from_bytes(proto.raw_data(), std::move(type), file, where, "raw_data");
  const auto check_count = [&](size_t given) {
    if (static_cast<int64_t>(given) != count)
      throw UserError(file, where, cat("has ", given, " values for shape ", print_dims(type.shape), " (", count,
                                       " elements)"));
  };
  if (dtype == DType::i64) {
    check_count(static_cast<size_t>(proto.int64_data_size()));
    return HostTensor::from_integers(std::move(type), std::vector<int64_t>(proto.int64_data().begin(), proto.int64_data().end()));
  }
  std::vector<double> values = values_from_typed_field(proto, dtype);
  check_count(values.size());
  return HostTensor(std::move(type), std::move(values));
}

std::string tensor_location(const std::string& name) { return cat("tensor '", name, "'"); }

// ---------------------------------------------------------------------------------------------
// ModelProto -> ModelDef

onnx::ModelProto parse_model(const std::string& path) {
  const std::string bytes = read_model_bytes(path);
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw UserError(path, "", cat("file has ", bytes.size(), " bytes; protobuf cannot parse more "
                                  "than 2 GiB (store the weights as external data)"));
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw UserError(path, "", cat("not an ONNX model: ", bytes.size(),
                                  " bytes that protobuf cannot parse as a ModelProto"));
  if (!model.has_graph())
    throw UserError(path, "", cat("not an ONNX model: ", bytes.size(), " bytes without a graph"));
  return model;
}

int64_t default_domain_opset(const onnx::ModelProto& model) {
  for (const auto& opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return opset.version();
  return 0;
}

std::string type_kind_name(const onnx::TypeProto& type) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: return "tensor";
    case onnx::TypeProto::kSequenceType: return "sequence";
    case onnx::TypeProto::kMapType: return "map";
    case onnx::TypeProto::kOptionalType: return "optional";
    case onnx::TypeProto::kSparseTensorType: return "sparse tensor";
    default: return cat("kind ", static_cast<int>(type.value_case()));
  }
}

/// A graph input that is not a weight. Symbolic (dim_param) or missing dimensions become -1.
ValueDecl input_from_proto(const onnx::ValueInfoProto& info, const std::string& file) {
  const std::string where = tensor_location(info.name());
  const onnx::TypeProto& type = info.type();
  if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET)
    throw UserError(file, where, "graph input has no type");
  if (!type.has_tensor_type())
    throw UnsupportedError(file, where, cat("unsupported input type: ", type_kind_name(type),
                                            " (only tensors are supported)"));
  const auto& tensor_type = type.tensor_type();
  ValueDecl decl{info.name(), TensorType{dtype_from_onnx(tensor_type.elem_type(), file, where), {}}};
  if (!tensor_type.has_shape())
    throw UnsupportedError(file, where, "input of unknown rank (no shape declared)");
  for (const auto& dim : tensor_type.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() < 0)
      throw UserError(file, where, cat("negative input dimension ", dim.dim_value()));
    decl.type.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
  }
  return decl;
}

/// Graph outputs are kept by name; their declared types only need to be ones Tessel can hold.
void check_output_type(const onnx::ValueInfoProto& info, const std::string& file) {
  const onnx::TypeProto& type = info.type();
  const std::string where = tensor_location(info.name());
  if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) return;  // type left to inference
  if (!type.has_tensor_type())
    throw UnsupportedError(file, where, cat("unsupported output type: ", type_kind_name(type),
                                            " (only tensors are supported)"));
  if (type.tensor_type().elem_type() != onnx::TensorProto::UNDEFINED)
    dtype_from_onnx(type.tensor_type().elem_type(), file, where);
}

/// The attribute's type; files older than IR version 3 leave it UNDEFINED and it is inferred
/// from the field that is set.
onnx::AttributeProto_AttributeType attribute_type(const onnx::AttributeProto& attr) {
  using A = onnx::AttributeProto;
  if (attr.type() != A::UNDEFINED) return attr.type();
  if (attr.has_f()) return A::FLOAT;
  if (attr.has_i()) return A::INT;
  if (attr.has_s()) return A::STRING;
  if (attr.has_t()) return A::TENSOR;
  if (attr.has_g()) return A::GRAPH;
  if (attr.floats_size() > 0) return A::FLOATS;
  if (attr.ints_size() > 0) return A::INTS;
  if (attr.strings_size() > 0) return A::STRINGS;
  return A::UNDEFINED;
}

/// The attribute's value, or nullopt for kinds a ModelDef does not hold (graphs, sparse
/// tensors, type protos, tensor lists): lowering rejects the operators that need them.
std::optional<AttrValue> attr_value(const onnx::AttributeProto& attr, const TensorSource& source,
                                    const std::string& node_where) {
  using A = onnx::AttributeProto;
  switch (attribute_type(attr)) {
    case A::INT: return attr.i();
    case A::FLOAT: return static_cast<double>(attr.f());
    case A::STRING: return attr.s();
    case A::INTS: return std::vector<int64_t>(attr.ints().begin(), attr.ints().end());
    case A::FLOATS: return std::vector<double>(attr.floats().begin(), attr.floats().end());
    case A::STRINGS: return std::vector<std::string>(attr.strings().begin(), attr.strings().end());
    case A::TENSOR:
      return tensor_from_proto(attr.t(), source, cat(node_where, " attribute '", attr.name(), "'"));
    default: return std::nullopt;
  }
}

/// Node names: the file's name when it is non-empty and not taken by an earlier node, otherwise
/// "<op_type>_<index>" (with a further "_<k>" suffix if even that is taken).
class OpNamer {
 public:
  explicit OpNamer(const onnx::GraphProto& graph) {
    for (const auto& node : graph.node())
      if (!node.name().empty()) given_.insert(node.name());
  }

  std::string name(const onnx::NodeProto& node, int index) {
    std::string chosen = node.name();
    if (chosen.empty() || taken_.count(chosen)) {
      const std::string base = cat(node.op_type(), "_", index);
      chosen = base;
      for (int k = 1; given_.count(chosen) || taken_.count(chosen); ++k) chosen = cat(base, "_", k);
    }
    taken_.insert(chosen);
    return chosen;
  }

 private:
  std::set<std::string> given_, taken_;
};

OpDef op_from_node(const onnx::NodeProto& node, std::string name, const TensorSource& source) {
  const std::string where = cat("node '", name, "'");
  if (node.op_type().empty()) throw UserError(source.file, where, "node has no op_type");
  OpDef op;
  op.name = std::move(name);
  op.op_type = node.op_type();
  op.domain = node.domain();
  op.inputs.assign(node.input().begin(), node.input().end());
  op.outputs.assign(node.output().begin(), node.output().end());
  // ONNX omits only trailing optional outputs; every operator has a first one (model JSON checks
  // the same), and each lowering sets it.
  if (op.outputs.empty()) throw UserError(source.file, where, "node has no outputs");
  for (const auto& attr : node.attribute()) {
    std::optional<AttrValue> value = attr_value(attr, source, where);
    if (!value) continue;
    if (!op.attrs.emplace(attr.name(), std::move(*value)).second)
      throw UserError(source.file, where, cat("attribute '", attr.name(), "' is given twice"));
  }
  return op;
}

}  // namespace

ModelDef import_onnx(const std::string& path) {
  const onnx::ModelProto proto = parse_model(path);
  const onnx::GraphProto& graph = proto.graph();
  const TensorSource source{path, fs::path(path).parent_path()};

  ModelDef model;
  model.name = graph.name();
  model.file = path;
  model.opset = default_domain_opset(proto);
  if (model.opset < 0) throw UserError(path, "opset_import", cat("the default domain's opset is ", model.opset, ", negative"));

  // 1. Weights first: a graph input with an initializer is a weight (its value is a default
  //    that ONNX allows the caller to override; Tessel treats it as fixed and lists it in
  //    ModelDef::defaulted_inputs, so that `tessel run --inputs` can say so).
  std::set<std::string> weight_names;
  for (const auto& init : graph.initializer()) {
    HostTensor data = tensor_from_proto(init, source, tensor_location(init.name()));
    const TensorType type = data.type();
    model.weights.push_back(
        WeightDef{init.name(), type, std::make_shared<const HostTensor>(std::move(data))});
    weight_names.insert(init.name());
  }
  if (graph.sparse_initializer_size() > 0)
    throw UnsupportedError(path, tensor_location(graph.sparse_initializer(0).values().name()),
                           "sparse initializers are not supported");

  // 2. Inputs and outputs.
  for (const auto& info : graph.input()) {
    if (!weight_names.count(info.name())) model.inputs.push_back(input_from_proto(info, path));
    else model.defaulted_inputs.push_back(info.name());
  }
  for (const auto& info : graph.output()) {
    check_output_type(info, path);
    model.outputs.push_back(info.name());
  }

  // 3. Operators, in file order (lowering sorts them).
  OpNamer namer(graph);
  for (int i = 0; i < graph.node_size(); ++i)
    model.ops.push_back(op_from_node(graph.node(i), namer.name(graph.node(i), i), source));
  // Names are bytes in ONNX; Tessel writes them into JSON (converted models, schedules), which
  // needs valid UTF-8 -- and distinct invalid names must not collapse into one.
  auto check_name = [&](const std::string& name, const std::string& where) {
    if (std::string problem = name_problem(name); !problem.empty())
      throw UserError(path, where, cat("'", name.substr(0, 40), name.size() > 40 ? "..." : "", "': ", problem));
  };
  for (const ValueDecl& v : model.inputs) check_name(v.name, "graph input");
  for (const WeightDef& w : model.weights) check_name(w.name, "initializer");
  for (const OpDef& op : model.ops) {
    check_name(op.name, "node");
    for (const std::string& o : op.outputs) check_name(o, cat("node '", op.name.substr(0, 40), "' output"));
  }
  return model;
}

HostTensor decode_onnx_tensor(std::string_view bytes, const std::string& file) {
  onnx::TensorProto proto;
  if (bytes.size() > static_cast<size_t>(INT_MAX) ||
      !proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw UserError(file, "", cat("not an ONNX TensorProto: ", bytes.size(),
                                  " bytes that protobuf cannot parse"));
  const std::string where = proto.name().empty() ? "" : tensor_location(proto.name());
  return tensor_from_proto(proto, TensorSource{file, fs::path(file).parent_path()}, where);
}

std::string encode_onnx_tensor(const HostTensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(onnx_type_of(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  proto.set_raw_data(encode_little_endian(tensor));
  return proto.SerializeAsString();
}

}  // namespace tessel
