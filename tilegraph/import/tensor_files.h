// Tensor files: reading and writing one tensor as `.npy` (NumPy) or `.pb` (a serialized ONNX
// TensorProto, the format of the ONNX backend tests' test_data_set_N/input_K.pb).
//
// These are how model inputs and reference outputs enter and leave Tessel: `tessel run` reads
// inputs and writes outputs with them, and the ONNX node tests read their test data with them.
// The format is chosen by the file's extension. Values go through HostTensor (doubles rounded to
// the dtype), so every supported dtype round-trips exactly -- except bf16 written to `.npy`, which
// NumPy cannot represent: it is written as `<f4` (every bf16 value is exactly a float32) and so
// reads back as f32.
//
// Also here: the little-endian byte layout of tensor values shared by `.npy` data and ONNX's
// raw_data (onnx_import.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tilegraph/host_tensor.h"

namespace tessel {

/// Reads a `.npy` or `.pb` tensor file.
///
/// `.npy`: format versions 1, 2 and 3; descr `<f8 <f4 <f2 <i8 <i4 |i1 |u1 |b1`; C order only.
/// Raises UserError naming the file and the offending value for anything malformed ("truncated:
/// header says 24 bytes, file has 12"), and UnsupportedError for valid files Tessel cannot hold
/// (a big-endian or complex dtype, fortran_order True, an ONNX element type without a dtype).
HostTensor read_tensor_file(const std::string& path);

/// Writes `tensor` to `path` as `.npy` (format version 1, or 2 for a header past 64 KiB) or `.pb`
/// (a TensorProto named after the file's stem, values in raw_data). Raises UserError if the
/// extension is neither or the file cannot be written.
void write_tensor_file(const std::string& path, const HostTensor& tensor);

/// Decodes a tensor of `type` from little-endian `bytes`, which must hold exactly
/// type.num_elements() * dtype_bytes(type.dtype) bytes (the caller checks the size and reports a
/// mismatch). Each element takes dtype_bytes bytes; a bool is one byte, non-zero meaning true; i64
/// values are copied exactly.
HostTensor decode_little_endian(std::string_view bytes, TensorType type);

/// Encodes the values of `tensor` little endian in its own dtype (the inverse of the above).
std::string encode_little_endian(const HostTensor& tensor);

}  // namespace tessel
