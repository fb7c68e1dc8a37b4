// Unit tests of tensor files (tilegraph/import/tensor_files.h) and the ONNX TensorProto codec
// they share with the ONNX importer: every dtype round-trips through .npy and .pb, the typed
// fields and external data of a TensorProto decode, a real file of the ONNX backend test data
// reads, and malformed files raise UserError.
#include "../temp_dir.h"
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

/// A fresh directory under the system temp dir, removed with everything in it.
using tessel::testing::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Six values of `dtype` (shape [2,3]) that exercise its range: signs, extremes, fractions.
HostTensor sample_tensor(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values;
  switch (dtype) {
    case DType::f64: values = {0.1, -1e300, 3.5, -0.0, inf, 1.0 / 3}; break;
    case DType::f32: values = {0.1, -1e30, 3.5, -0.0, -inf, 1.0 / 3}; break;
    case DType::f16: values = {0.1, -65504, 3.5, -0.0, inf, 6e-8}; break;
    case DType::bf16: values = {0.1, -1e30, 3.5, -0.0, inf, 1.0 / 3}; break;
    case DType::i64: values = {0, -1, 9007199254740992.0, -1099511627776.0, 42, 7}; break;
    case DType::i32: values = {0, -1, 2147483647, -2147483648.0, 42, 7}; break;
    case DType::i8: values = {0, -1, 127, -128, 42, 7}; break;
    case DType::u8: values = {0, 1, 255, 128, 42, 7}; break;
    case DType::boolean: values = {0, 1, 1, 0, 1, 0}; break;
  }
  return HostTensor(TensorType{dtype, {2, 3}}, values);
}

const DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16,     DType::bf16, DType::i64,
                            DType::i32, DType::i8,  DType::u8,      DType::boolean};

/// Equal dtype, shape and values, with -0.0 distinguished from 0.0.
void check_same(const HostTensor& actual, const HostTensor& expected) {
  REQUIRE(actual.type() == expected.type());
  for (int64_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(actual[i] == expected[i]);
    CHECK(std::signbit(actual[i]) == std::signbit(expected[i]));
  }
}

// Protobuf wire format: just enough to build TensorProtos by hand (these tests do not link
// protobuf). Field numbers are those of onnx.proto.
std::string varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    v >>= 7;
  } while (v != 0);
  return out;
}
std::string int_field(int field, uint64_t v) { return varint(uint64_t(field) << 3) + varint(v); }
std::string bytes_field(int field, const std::string& bytes) {
  return varint(uint64_t(field) << 3 | 2) + varint(bytes.size()) + bytes;
}
namespace tensor_proto {
constexpr int kDims = 1, kDataType = 2, kInt32Data = 5, kInt64Data = 7, kName = 8,
              kExternalData = 13, kDataLocation = 14, kDoubleData = 10;
constexpr int kFloat = 1, kInt64 = 7, kBool = 9, kFloat16 = 10, kDouble = 11, kUint16 = 4;
constexpr int kExternal = 1;
}  // namespace tensor_proto

std::string packed_varints(int field, const std::vector<int64_t>& values) {
  std::string payload;
  for (int64_t v : values) payload += varint(static_cast<uint64_t>(v));
  return bytes_field(field, payload);
}

std::string npy_file(const std::string& header_dict, const std::string& data) {
  std::string header = header_dict;
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) +
         char(header.size() >> 8) + header + data;
}

template <class F>
void check_user_error(F read, const std::string& expected_text) {
  try {
    read();
    FAIL("no error raised; expected a UserError containing: " << expected_text);
  } catch (const InternalError& e) {
    FAIL("InternalError instead of UserError: " << e.what());
  } catch (const UserError& e) {
    INFO("message: " << std::string(e.what()));
    CHECK(std::string(e.what()).find(expected_text) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("every dtype round-trips through .npy and .pb") {
  TempDir dir;
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype_name(dtype));
    const HostTensor t = sample_tensor(dtype);
    write_tensor_file(dir.file("t.pb"), t);
    check_same(read_tensor_file(dir.file("t.pb")), t);

    write_tensor_file(dir.file("t.npy"), t);
    const HostTensor from_npy = read_tensor_file(dir.file("t.npy"));
    if (dtype == DType::bf16)  // NumPy has no bfloat16: written as float32, exactly
      check_same(from_npy, HostTensor(TensorType{DType::f32, t.shape()}, t.values()));
    else
      check_same(from_npy, t);
  }
}

TEST_CASE("scalars and empty tensors round-trip") {
  TempDir dir;
  for (const std::string name : {"t.npy", "t.pb"}) {
    CAPTURE(name);
    const HostTensor scalar(TensorType{DType::f32, {}}, {2.5});
    write_tensor_file(dir.file(name), scalar);
    check_same(read_tensor_file(dir.file(name)), scalar);
    const HostTensor empty(TensorType{DType::i64, {0, 3}});
    write_tensor_file(dir.file(name), empty);
    check_same(read_tensor_file(dir.file(name)), empty);
  }
}

TEST_CASE(".npy files are written the way NumPy writes them") {
  TempDir dir;
  write_tensor_file(dir.file("t.npy"), sample_tensor(DType::f32));
  const std::string bytes = read_bytes(dir.file("t.npy"));
  const std::string expected_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  REQUIRE(bytes.size() > 10 + expected_dict.size());
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes.substr(10, expected_dict.size()) == expected_dict);
  const size_t data_offset = bytes.size() - 6 * 4;
  CHECK(data_offset % 64 == 0);
  CHECK(bytes[data_offset - 1] == '\n');

  // A one-dimensional shape is a one-element tuple.
  write_tensor_file(dir.file("v.npy"), HostTensor(TensorType{DType::u8, {3}}, {1, 2, 3}));
  CHECK(read_bytes(dir.file("v.npy")).find("'shape': (3,)") != std::string::npos);
}

TEST_CASE(".npy format versions 2 and 3 read") {
  TempDir dir;
  const std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n";
  const std::string data("\x01\x00\x00\x00\xfe\xff\xff\xff", 8);
  for (char major : {'\x02', '\x03'}) {
    const std::string bytes = std::string("\x93NUMPY", 6) + major + '\0' +
                              std::string{char(dict.size()), 0, 0, 0} + dict + data;
    write_bytes(dir.file("v.npy"), bytes);
    check_same(read_tensor_file(dir.file("v.npy")), HostTensor(TensorType{DType::i32, {2}}, {1, -2}));
  }
}

TEST_CASE("TensorProto typed fields decode") {
  using namespace tensor_proto;
  SUBCASE("FLOAT16 bits in int32_data") {
    // 0x3c00 = 1.0, 0xc000 = -2.0, 0x7c00 = +inf
    const std::string bytes = int_field(kDims, 3) + int_field(kDataType, kFloat16) +
                              packed_varints(kInt32Data, {0x3c00, 0xc000, 0x7c00});
    const HostTensor t = decode_onnx_tensor(bytes, "f16.pb");
    CHECK(t.dtype() == DType::f16);
    CHECK(t.values() == std::vector<double>{1.0, -2.0, std::numeric_limits<double>::infinity()});
  }
  SUBCASE("BOOL in int32_data and INT64 in int64_data") {
    const HostTensor b = decode_onnx_tensor(int_field(kDims, 2) + int_field(kDataType, kBool) +
                                                packed_varints(kInt32Data, {0, 1}),
                                            "b.pb");
    CHECK(b.type() == TensorType{DType::boolean, {2}});
    CHECK(b.values() == std::vector<double>{0, 1});
    const HostTensor i = decode_onnx_tensor(int_field(kDims, 2) + int_field(kDataType, kInt64) +
                                                packed_varints(kInt64Data, {-5, 1LL << 40}),
                                            "i.pb");
    CHECK(i.values() == std::vector<double>{-5, 1099511627776.0});
  }
  SUBCASE("DOUBLE in double_data") {
    const double values[] = {0.25, -8};
    const std::string payload(reinterpret_cast<const char*>(values), sizeof values);
    const HostTensor t = decode_onnx_tensor(
        int_field(kDims, 2) + int_field(kDataType, kDouble) + bytes_field(kDoubleData, payload),
        "d.pb");
    CHECK(t.values() == std::vector<double>{0.25, -8});
  }
}

TEST_CASE("TensorProto external data is read relative to the tensor file") {
  using namespace tensor_proto;
  TempDir dir;
  const float floats[] = {9, 1.5f, -2, 9};  // the tensor is the middle two
  write_bytes(dir.file("weights.bin"), std::string(reinterpret_cast<const char*>(floats), sizeof floats));
  auto entry = [](const std::string& key, const std::string& value) {
    return bytes_field(kExternalData, bytes_field(1, key) + bytes_field(2, value));
  };
  const std::string proto = int_field(kDims, 2) + int_field(kDataType, kFloat) +
                            entry("location", "weights.bin") + entry("offset", "4") +
                            entry("length", "8") + int_field(kDataLocation, kExternal);
  write_bytes(dir.file("w.pb"), proto);
  CHECK(read_tensor_file(dir.file("w.pb")).values() == std::vector<double>{1.5, -2});

  fs::remove(dir.file("weights.bin"));
  check_user_error([&] { read_tensor_file(dir.file("w.pb")); }, "weights.bin");
}

TEST_CASE("a .pb file of the ONNX backend test data reads") {
  const fs::path test = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0";
  if (!fs::exists(test / "input_0.pb")) {
    MESSAGE("[SKIP] libonnx-testdata is not installed");
    return;
  }
  const HostTensor x = read_tensor_file((test / "input_0.pb").string());
  const HostTensor y = read_tensor_file((test / "output_0.pb").string());
  CHECK(x.type() == TensorType{DType::f32, {3, 4, 5}});
  REQUIRE(y.type() == x.type());
  for (int64_t i = 0; i < x.size(); ++i) CHECK(y[i] == std::fabs(x[i]));
}

TEST_CASE("malformed tensor files raise UserError") {
  TempDir dir;
  const std::string f4_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string full_data(24, '\0');
  auto check_npy = [&](const std::string& bytes, const std::string& expected_text) {
    write_bytes(dir.file("bad.npy"), bytes);
    check_user_error([&] { read_tensor_file(dir.file("bad.npy")); }, expected_text);
  };

  SUBCASE("a well-formed file reads") {
    write_bytes(dir.file("good.npy"), npy_file(f4_dict, full_data));
    CHECK(read_tensor_file(dir.file("good.npy")).type() == TensorType{DType::f32, {2, 3}});
  }
  SUBCASE("bad magic") { check_npy("PK\x03\x04 not numpy at all", "bad magic"); }
  SUBCASE("empty file") { check_npy("", "bad magic"); }
  SUBCASE("truncated data") {
    check_npy(npy_file(f4_dict, full_data.substr(0, 12)), "header says 6 x <f4 = 24 bytes, file has 12");
  }
  SUBCASE("trailing data") { check_npy(npy_file(f4_dict, full_data + "xx"), "file has 26"); }
  SUBCASE("truncated header") { check_npy(npy_file(f4_dict, "").substr(0, 40), "truncated: header length"); }
  SUBCASE("unknown descr") {
    check_npy(npy_file("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }", full_data),
              "unsupported npy dtype '<c8'");
  }
  SUBCASE("big-endian descr") {
    check_npy(npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", full_data),
              "unsupported npy dtype '>f4' (big-endian)");
  }
  SUBCASE("fortran order") {
    check_npy(npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", full_data),
              "fortran_order True");
  }
  SUBCASE("malformed header dict") {
    check_npy(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", full_data),
              "malformed npy header");
    check_npy(npy_file("{'descr': '<f4', 'shape': (2, 3), }", full_data), "missing key 'fortran_order'");
  }
  SUBCASE("unsupported format version") {
    std::string bytes = npy_file(f4_dict, full_data);
    bytes[6] = '\x09';
    check_npy(bytes, "format version 9.0");
  }
  SUBCASE(".pb that is not a TensorProto") {
    write_bytes(dir.file("bad.pb"), std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11));
    check_user_error([&] { read_tensor_file(dir.file("bad.pb")); }, "not an ONNX TensorProto");
  }
  SUBCASE(".pb with raw_data of the wrong size") {
    using namespace tensor_proto;
    write_bytes(dir.file("bad.pb"), int_field(kDims, 4) + int_field(kDataType, kFloat) +
                                        bytes_field(9, std::string(12, '\0')));
    check_user_error([&] { read_tensor_file(dir.file("bad.pb")); }, "raw_data has 12 bytes");
  }
  SUBCASE(".pb with an unsupported element type") {
    using namespace tensor_proto;
    write_bytes(dir.file("u16.pb"), int_field(kDims, 1) + int_field(kDataType, kUint16) +
                                        bytes_field(kName, "x") + packed_varints(kInt32Data, {7}));
    check_user_error([&] { read_tensor_file(dir.file("u16.pb")); },
                     "tensor 'x': unsupported element type UINT16");
  }
  SUBCASE("missing file and unknown extension") {
    check_user_error([&] { read_tensor_file(dir.file("absent.npy")); }, "file not found");
    write_bytes(dir.file("t.csv"), "1,2,3");
    check_user_error([&] { read_tensor_file(dir.file("t.csv")); }, "unknown tensor file extension '.csv'");
    check_user_error([&] { write_tensor_file(dir.file("t.txt"), sample_tensor(DType::f32)); },
                     "unknown tensor file extension '.txt'");
  }
}
