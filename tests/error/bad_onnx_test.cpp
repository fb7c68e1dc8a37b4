// Bad ONNX models must raise UserError (an InternalError or a crash fails the test): a missing
// file, bytes that are not a ModelProto, tensors of an element type Tessel has no dtype for
// (UnsupportedError, a UserError), non-tensor inputs, inconsistent tensor data, and external data
// that is missing. The models are built byte by byte, so the test needs no protobuf library.
#include "../cli_run.h"
#include "../temp_dir.h"
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/import/tensor_files.h"
#include "tilegraph/op_graph.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

using tessel::testing::TempDir;

// Protobuf wire format, enough to build small ModelProtos; field numbers are those of onnx.proto.
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

constexpr int kFloat = 1, kUint16 = 4, kInt16 = 5;  // TensorProto.DataType

/// ValueInfoProto of a tensor `name` with element type `elem_type` and shape `dims`.
std::string tensor_value_info(const std::string& name, int elem_type, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += bytes_field(1, int_field(1, static_cast<uint64_t>(d)));
  const std::string tensor_type = int_field(1, elem_type) + bytes_field(2, shape);
  return bytes_field(1, name) + bytes_field(2, bytes_field(1, tensor_type));
}

/// ValueInfoProto of a sequence of float tensors.
std::string sequence_value_info(const std::string& name) {
  const std::string element = bytes_field(1, int_field(1, kFloat));
  return bytes_field(1, name) + bytes_field(2, bytes_field(4, bytes_field(1, element)));
}

std::string identity_node(const std::string& in, const std::string& out) {
  return bytes_field(1, in) + bytes_field(2, out) + bytes_field(4, "Identity");
}

/// A ModelProto (ir_version 8, opset 17) around a graph of the given serialized parts.
std::string model(const std::vector<std::string>& inputs, const std::vector<std::string>& initializers,
                  const std::string& output, const std::string& node = identity_node("x", "y")) {
  std::string graph = bytes_field(1, node) + bytes_field(2, "g");
  for (const std::string& init : initializers) graph += bytes_field(5, init);
  for (const std::string& in : inputs) graph += bytes_field(11, in);
  graph += bytes_field(12, output);
  const std::string opset = bytes_field(1, "") + int_field(2, 17);
  return int_field(1, 8) + bytes_field(7, graph) + bytes_field(8, opset);
}

template <class F>
void check_user_error(F import, const std::string& expected_text) {
  try {
    import();
    FAIL("no error raised; expected a UserError containing: " << expected_text);
  } catch (const InternalError& e) {
    FAIL("InternalError instead of UserError: " << e.what());
  } catch (const UserError& e) {
    INFO("message: " << std::string(e.what()));
    CHECK(std::string(e.what()).find(expected_text) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("the hand-built ONNX model imports (so the cases below fail for their own reason)") {
  TempDir dir;
  const std::string path =
      dir.write("ok.onnx", model({tensor_value_info("x", kFloat, {2, 3})}, {},
                                 tensor_value_info("y", kFloat, {2, 3})));
  const ModelDef m = import_onnx(path);
  REQUIRE(m.inputs.size() == 1);
  CHECK(m.inputs[0].type == TensorType{DType::f32, {2, 3}});
  CHECK(m.opset == 17);
  REQUIRE(m.ops.size() == 1);
  CHECK(m.ops[0].name == "Identity_0");
  CHECK(m.outputs == std::vector<std::string>{"y"});
}

TEST_CASE("a negative opset is a UserError naming opset_import (issue: hostile inputs, class 12)") {
  TempDir dir;
  std::string bytes = model({tensor_value_info("x", kFloat, {2})}, {}, tensor_value_info("y", kFloat, {2}));
  const std::string good = bytes_field(8, bytes_field(1, "") + int_field(2, 17));
  const size_t at = bytes.rfind(good);
  REQUIRE(at != std::string::npos);
  bytes.replace(at, good.size(), bytes_field(8, bytes_field(1, "") + int_field(2, static_cast<uint64_t>(int64_t{-3}))));
  check_user_error([&] { import_onnx(dir.write("negative_opset.onnx", bytes)); }, "opset is -3, negative");
}

TEST_CASE("a missing ONNX file is a UserError") {
  check_user_error([] { import_onnx("/nonexistent/dir/model.onnx"); }, "file not found");
}

TEST_CASE("bytes that are not an ONNX model are a UserError") {
  TempDir dir;
  check_user_error([&] { import_onnx(dir.write("garbage.onnx", std::string(64, '\xff'))); },
                   "not an ONNX model");
  check_user_error([&] { import_onnx(dir.write("text.onnx", "this is not protobuf\n")); },
                   "not an ONNX model");
  check_user_error([&] { import_onnx(dir.write("empty.onnx", "")); }, "without a graph");
  check_user_error([&] { import_onnx(dir.path.string()); }, "is a directory");
}

TEST_CASE("a tensor of an unsupported element type is an UnsupportedError") {
  TempDir dir;
  SUBCASE("graph input") {
    const std::string path = dir.write(
        "int16_input.onnx", model({tensor_value_info("x", kInt16, {4})}, {},
                                  tensor_value_info("y", kInt16, {4})));
    CHECK_THROWS_AS(import_onnx(path), UnsupportedError);
    check_user_error([&] { import_onnx(path); }, "tensor 'x': unsupported element type INT16");
  }
  SUBCASE("initializer") {
    const std::string init = int_field(1, 2) + int_field(2, kUint16) + bytes_field(8, "w") +
                             bytes_field(5, varint(1) + varint(2));
    const std::string path = dir.write(
        "uint16_weight.onnx", model({tensor_value_info("x", kFloat, {2})}, {init},
                                    tensor_value_info("y", kFloat, {2})));
    check_user_error([&] { import_onnx(path); }, "tensor 'w': unsupported element type UINT16");
  }
  SUBCASE("an element type code ONNX 1.12 does not know") {
    const std::string path = dir.write(
        "float8.onnx", model({tensor_value_info("x", 17, {4})}, {}, tensor_value_info("y", 17, {4})));
    check_user_error([&] { import_onnx(path); }, "unsupported element type <element type 17>");
  }
}

TEST_CASE("a graph input with an initializer is a weight, listed as a defaulted input") {
  // Issue 29, class 12: ONNX lets a caller override such an input; Tessel uses the initializer
  // and records the name, so that `tessel run --inputs` says so instead of staying silent.
  TempDir dir;
  const std::string init = int_field(1, 2) + int_field(2, kFloat) + bytes_field(8, "x") + bytes_field(9, std::string(8, '\0'));
  const std::string path = dir.write("defaulted.onnx", model({tensor_value_info("x", kFloat, {2})}, {init},
                                                             tensor_value_info("y", kFloat, {2})));
  const ModelDef m = import_onnx(path);
  CHECK(m.inputs.empty());
  REQUIRE(m.weights.size() == 1);
  CHECK(m.weights[0].name == "x");
  CHECK(m.defaulted_inputs == std::vector<std::string>{"x"});
}

TEST_CASE("tessel run --inputs overrides a graph input that has an initializer, by a file named after it") {
  // Issue 29, class 12: as onnxruntime lets a caller override such an input, --inputs does (a
  // file NAME.npy or NAME.pb); without one the initializer is used, and both are said.
  TempDir dir;
  const std::string init = int_field(1, 2) + int_field(2, kFloat) + bytes_field(8, "x") + bytes_field(9, std::string(8, '\0'));
  const std::string path = dir.write("defaulted.onnx", model({tensor_value_info("x", kFloat, {2})}, {init},
                                                             tensor_value_info("y", kFloat, {2})));
  const fs::path given = dir.path / "given";
  fs::create_directories(given);
  auto run = [&](const std::string& out) {
    return cli_testing::run("run " + path + " --interp --inputs " + given.string() + " --outputs " + dir.file(out));
  };
  const cli_testing::Result kept = run("kept");
  CHECK(kept.status == 0);
  CHECK(kept.output.find("'x' have initializers: used as constant weights") != std::string::npos);
  CHECK(read_tensor_file(dir.file("kept/output_0.npy"))[0] == 0.0);
  write_tensor_file((given / "x.npy").string(), HostTensor(TensorType{DType::f32, {2}}, {1.5, -2.0}));
  const cli_testing::Result taken = run("taken");
  CHECK(taken.status == 0);
  CHECK(taken.output.find("'x' with initializers taken from --inputs") != std::string::npos);
  const HostTensor y = read_tensor_file(dir.file("taken/output_0.npy"));
  CHECK(y[0] == 1.5);
  CHECK(y[1] == -2.0);
  // The file's dtype must be the input's: exit 2, one line naming the file.
  write_tensor_file((given / "x.npy").string(), HostTensor(TensorType{DType::f64, {2}}, {1.5, -2.0}));
  const cli_testing::Result wrong = run("wrong");
  CHECK(wrong.status == 2);
  CHECK(wrong.output.find("graph input 'x' is f32, the file holds f64") != std::string::npos);
}

TEST_CASE("a sequence-typed input is an UnsupportedError") {
  TempDir dir;
  const std::string path = dir.write(
      "sequence.onnx", model({sequence_value_info("x")}, {}, tensor_value_info("y", kFloat, {2})));
  check_user_error([&] { import_onnx(path); }, "unsupported input type: sequence");
}

TEST_CASE("inconsistent initializer data is a UserError") {
  TempDir dir;
  SUBCASE("raw_data of the wrong size") {
    const std::string init = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") +
                             bytes_field(9, std::string(12, '\0'));
    const std::string path = dir.write("short.onnx", model({tensor_value_info("x", kFloat, {4})},
                                                           {init}, tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(path); }, "raw_data has 12 bytes, expected 4 elements");
  }
  SUBCASE("external data file missing") {
    auto entry = [](const std::string& key, const std::string& value) {
      return bytes_field(13, bytes_field(1, key) + bytes_field(2, value));
    };
    const std::string init = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") +
                             entry("location", "absent.bin") + int_field(14, 1);
    const std::string path = dir.write("external.onnx", model({tensor_value_info("x", kFloat, {4})},
                                                              {init}, tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(path); }, "absent.bin");
  }
  SUBCASE("external data without a length is the tensor's bytes, not the rest of the file") {
    auto entry = [](const std::string& key, const std::string& value) {
      return bytes_field(13, bytes_field(1, key) + bytes_field(2, value));
    };
    // One data file shared by two tensors: w's 4 floats at offset 16 of 48 bytes. (Before, w took
    // the 32 bytes to the end: "external data has 32 bytes, expected 4 elements".)
    std::string data(48, '\0');
    const float w[4] = {1.5f, -2.0f, 3.25f, 4.0f};
    std::memcpy(data.data() + 16, w, sizeof(w));
    dir.write("shared.bin", data);
    const std::string init = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") + entry("location", "shared.bin") +
                             entry("offset", "16") + int_field(14, 1);
    const std::string path = dir.write("shared.onnx", model({tensor_value_info("x", kFloat, {4})}, {init},
                                                            tensor_value_info("y", kFloat, {4})));
    const ModelDef m = import_onnx(path);
    REQUIRE(m.weights.size() == 1);
    const HostTensor values = weight_source_values(m.weights[0].source, m.weights[0].type, std::nullopt);
    CHECK(values.values() == std::vector<double>{1.5, -2.0, 3.25, 4.0});
    // A length other than the tensor's bytes is refused before anything is read.
    const std::string wrong = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") + entry("location", "shared.bin") +
                              entry("length", "32") + int_field(14, 1);
    const std::string wrong_path = dir.write("wrong_length.onnx", model({tensor_value_info("x", kFloat, {4})}, {wrong},
                                                                        tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(wrong_path); }, "external data length 32 bytes, but the tensor takes 16");
  }
  SUBCASE("external data outside the model's directory") {
    auto entry = [](const std::string& key, const std::string& value) {
      return bytes_field(13, bytes_field(1, key) + bytes_field(2, value));
    };
    const std::string init = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") +
                             entry("location", "../../etc/passwd") + int_field(14, 1);
    const std::string path = dir.write("escape.onnx", model({tensor_value_info("x", kFloat, {4})},
                                                            {init}, tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(path); }, "leaves the model's folder ('..')");
  }
  SUBCASE("external data through a symbolic link out of the model's directory (CVE-2024-27318)") {
    auto entry = [](const std::string& key, const std::string& value) {
      return bytes_field(13, bytes_field(1, key) + bytes_field(2, value));
    };
    TempDir outside;
    const std::string secret = outside.write("secret.bin", std::string(16, 's'));
    std::filesystem::create_symlink(secret, dir.path / "link.bin");
    const std::string init = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") + entry("location", "link.bin") +
                             int_field(14, 1);
    const std::string path = dir.write("link.onnx", model({tensor_value_info("x", kFloat, {4})}, {init},
                                                          tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(path); }, "outside the model's folder");
    const std::string absolute = int_field(1, 4) + int_field(2, kFloat) + bytes_field(8, "w") + entry("location", secret) +
                                 int_field(14, 1);
    const std::string abs_path = dir.write("absolute.onnx", model({tensor_value_info("x", kFloat, {4})}, {absolute},
                                                                  tensor_value_info("y", kFloat, {4})));
    check_user_error([&] { import_onnx(abs_path); }, "is an absolute path");
  }
}

TEST_CASE("a node without outputs is a UserError (fuzz_onnx found it as an InternalError)") {
  TempDir dir;
  const std::string relu_without_output = bytes_field(1, "x") + bytes_field(4, "Relu");
  const std::string path = dir.write(
      "no_output.onnx", model({tensor_value_info("x", kFloat, {2})}, {},
                              tensor_value_info("x", kFloat, {2}), relu_without_output));
  check_user_error([&] { import_onnx(path); }, "node 'Relu_0': node has no outputs");
}

TEST_CASE("names that are not UTF-8 are refused at import (JSON, where they are written, needs UTF-8)") {
  TempDir dir;
  const std::string bad = "x\xff";
  const std::string path =
      dir.write("latin1.onnx", model({tensor_value_info(bad, kFloat, {2})}, {}, tensor_value_info(bad, kFloat, {2})));
  check_user_error([&] { import_onnx(path); }, "not valid UTF-8");
}
