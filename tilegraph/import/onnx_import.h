// ONNX import: an ONNX model file (.onnx, a serialized ModelProto) -> ModelDef.
//
// This is the first stage for ONNX models: `import_onnx` reads the protobuf and copies the main
// graph into a ModelDef (model_def.h) without interpreting any operator; `lower_model` (lower.h)
// then decides what each operator means and reports every unsupported one. The importer only
// rejects what a ModelDef cannot hold: a tensor whose element type has no Tessel dtype, an input
// that is not a tensor, or a file that is not a readable ONNX model.
//
// The conversion between ONNX's TensorProto and HostTensor lives here too, because initializers,
// tensor attributes (Constant's `value`) and `.pb` tensor files (tensor_files.h) all use it.
#pragma once

#include <string>
#include <string_view>

#include "tilegraph/host_tensor.h"
#include "tilegraph/model_def.h"

namespace tessel {

/// Reads the ONNX model at `path`.
///
///   ModelDef m = import_onnx("bert.onnx");   // m.ops[0].op_type == "Gather", m.opset == 13, ...
///
/// - Every node becomes an OpDef; a node without a (unique) name is named "<op_type>_<index>".
///   Graph-valued attributes (If, Loop, Scan bodies), sparse-tensor and type attributes are
///   dropped: lowering rejects the operators that need them.
/// - Initializers become weights with their data; a graph input that has an initializer is a
///   weight, not an input. Symbolic or missing input dimensions become -1.
/// - `opset` is the opset version of the default domain ("" or "ai.onnx"), 0 if not imported.
///
/// Raises UserError (file, "", reason) if the file is missing or not an ONNX model, and
/// UnsupportedError (file, "tensor '<name>'", "unsupported element type INT16") for a tensor
/// whose element type Tessel has no dtype for.
ModelDef import_onnx(const std::string& path);

/// Decodes a serialized ONNX TensorProto (the bytes of a `.pb` tensor file). Values may be in
/// raw_data (little endian), in the typed fields (float_data, int32_data, ...), or in an external
/// file, which is looked up relative to the directory of `file`. `file` names the source in
/// errors. Raises UserError for malformed data and UnsupportedError for an unsupported type.
HostTensor decode_onnx_tensor(std::string_view bytes, const std::string& file);

/// Encodes `tensor` as a serialized ONNX TensorProto named `name`, its values in raw_data
/// (little endian, in the tensor's own dtype).
std::string encode_onnx_tensor(const HostTensor& tensor, const std::string& name);

}  // namespace tessel
