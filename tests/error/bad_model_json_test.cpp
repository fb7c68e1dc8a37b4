// Bad Tessel JSON models: every class of problem must raise a UserError whose location is the JSON
// pointer of the bad value and whose message names the offending value. An InternalError (or any
// other exception) fails the test.
//
// Each case edits one spot of a small valid model (kValid) so that the case shows exactly what is
// wrong with it.
#include "../temp_dir.h"
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tilegraph/error.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/lower.h"
#include "hw_specs/hw_spec.h"
#include "policy/schedule_json.h"

namespace fs = std::filesystem;
using namespace tessel;

namespace {

const std::string kValid = R"({
  "format": "tessel-model", "version": 1, "name": "tiny", "opset": 17,
  "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4]}],
  "outputs": ["y"],
  "weights": [
    {"name": "w", "dtype": "f32", "shape": [4, 3], "init": {"dist": "normal", "mean": 0.0, "std": 0.02, "seed": 7}},
    {"name": "b", "dtype": "f32", "shape": [3], "data": [0.5, -1, 2]}],
  "ops": [
    {"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["h"]},
    {"name": "add", "op": "Add", "inputs": ["h", "b"], "outputs": ["y"], "attrs": {"axis": -1}}]})";

/// kValid with the first occurrence of `from` replaced by `to`.
std::string edit(const std::string& from, const std::string& to, const std::string& base = kValid) {
  const size_t at = base.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "test bug: '", from, "' is not in the model");
  return base.substr(0, at) + to + base.substr(at + from.size());
}

/// Parsing `text` must raise a UserError at `pointer` whose text contains `value`.
void expect_user_error(const std::string& text, const std::string& pointer,
                       const std::string& value, const std::string& file = "bad.json") {
  CAPTURE(text);
  try {
    parse_model_json(text, file);
    FAIL("no error raised; expected a UserError at '", pointer, "'");
  } catch (const InternalError& e) {
    FAIL("InternalError instead of a UserError: ", e.what());
  } catch (const UserError& e) {
    CAPTURE(e.what());
    CHECK(e.file() == file);
    CHECK(e.location() == pointer);
    CHECK(std::string(e.what()).find(value) != std::string::npos);
    if (!pointer.empty()) CHECK(std::string(e.what()).find(pointer) != std::string::npos);
  }
}

using tessel::testing::TempDir;

}  // namespace

TEST_CASE("bad model json: the base model is valid") {
  const ModelDef m = parse_model_json(kValid, "good.json");
  CHECK(m.ops.size() == 2);
  CHECK(m.weights.size() == 2);
}

TEST_CASE("bad model json: malformed JSON reports line and column") {
  expect_user_error(edit("\"opset\": 17,", "\"opset\": 17"), "", "line 3, column");
  expect_user_error(kValid + " x", "", "line 10");
  expect_user_error("", "", "malformed JSON");
  expect_user_error("[1, 2]", "", "[1,2]");
}

TEST_CASE("bad model json: wrong format or version") {
  expect_user_error(edit("\"tessel-model\"", "\"onnx\""), "/format", "\"onnx\"");
  expect_user_error(edit("\"version\": 1", "\"version\": 2"), "/version", "2");
  expect_user_error(edit("\"version\": 1", "\"version\": \"1\""), "/version", "\"1\"");
  expect_user_error(edit("\"format\": \"tessel-model\", ", ""), "", "\"format\"");
}

TEST_CASE("bad model json: unknown keys anywhere") {
  expect_user_error(edit("\"weights\"", "\"wieghts\""), "/wieghts", "wieghts");
  expect_user_error(edit("\"attrs\"", "\"atrs\""), "/ops/1/atrs", "atrs");
  expect_user_error(edit("\"std\"", "\"sd\""), "/weights/0/init/sd", "sd");
  expect_user_error(edit("\"shape\": [2, 4]", "\"shape\": [2, 4], \"layout\": \"nchw\""),
                    "/inputs/0/layout", "layout");
}

TEST_CASE("bad model json: duplicate keys in one object") {
  expect_user_error(edit("\"name\": \"mm\"", "\"name\": \"mm\", \"name\": \"mm2\""), "/ops/0/name",
                    "\"name\"");
}

TEST_CASE("bad model json: missing keys") {
  expect_user_error(edit("\"op\": \"MatMul\", ", ""), "/ops/0", "\"op\"");
  expect_user_error(edit("\"dtype\": \"f32\", \"shape\": [2, 4]", "\"shape\": [2, 4]"), "/inputs/0",
                    "\"dtype\"");
}

TEST_CASE("bad model json: wrong types") {
  expect_user_error(edit("[2, 4]", "[2, \"abc\"]"), "/inputs/0/shape/1",
                    "expected an integer, got \"abc\"");
  expect_user_error(edit("[2, 4]", "[2, 4.5]"), "/inputs/0/shape/1", "4.5");
  expect_user_error(edit("[2, 4]", "\"2x4\""), "/inputs/0/shape", "\"2x4\"");
  expect_user_error(edit("\"outputs\": [\"y\"]", "\"outputs\": \"y\""), "/outputs", "\"y\"");
  expect_user_error(edit("\"inputs\": [\"x\", \"w\"]", "\"inputs\": [\"x\", 3]"), "/ops/0/inputs/1",
                    "3");
  expect_user_error(edit("\"opset\": 17", "\"opset\": 1e100"), "/opset", "1e+100");
  expect_user_error(edit("\"opset\": 17", "\"opset\": -3"), "/opset", "-3");
  expect_user_error(edit("\"seed\": 7", "\"seed\": -7"), "/weights/0/init/seed", "-7");
  expect_user_error(edit("\"name\": \"x\"", "\"name\": \"\""), "/inputs/0/name", "\"\"");
}

TEST_CASE("bad model json: negative and zero dimensions") {
  expect_user_error(edit("[2, 4]", "[-2, 4]"), "/inputs/0/shape/0", "-2");
  expect_user_error(edit("\"shape\": [4, 3]", "\"shape\": [-1, 3]"), "/weights/0/shape/0", "-1");
  expect_user_error(edit("\"shape\": [4, 3]", "\"shape\": [4, 0]"), "/weights/0/shape/1", "0");
  // An empty weight is allowed only as inline data (ONNX files have empty initializers).
  CHECK(
      parse_model_json(
          edit("\"shape\": [3], \"data\": [0.5, -1, 2]", "\"shape\": [0], \"data\": []"), "ok.json")
          .weights[1]
          .type.num_elements() == 0);
  expect_user_error(edit("\"shape\": [4, 3]", "\"shape\": [1048576, 1048576, 1048576, 1048576]"),
                    "/weights/0/shape", "1048576");
  // -1 (unknown) and 0 (empty, as in ONNX models) are allowed in input shapes.
  CHECK(parse_model_json(edit("[2, 4]", "[-1, 4]"), "ok.json").inputs[0].type.shape[0] == -1);
  CHECK(parse_model_json(edit("[2, 4]", "[0, 4]"), "ok.json").inputs[0].type.shape[0] == 0);
}

TEST_CASE("bad model json: unknown dtype names") {
  expect_user_error(edit("\"dtype\": \"f32\"", "\"dtype\": \"float32\""), "/inputs/0/dtype",
                    "\"float32\"");
  expect_user_error(
      edit("\"dtype\": \"f32\", \"shape\": [3]", "\"dtype\": \"int4\", \"shape\": [3]"),
      "/weights/1/dtype", "\"int4\"");
}

TEST_CASE("bad model json: a tensor defined twice") {
  expect_user_error(edit("\"name\": \"w\"", "\"name\": \"x\""), "/weights/0/name", "\"x\"");
  expect_user_error(edit("\"outputs\": [\"y\"], \"attrs\"", "\"outputs\": [\"h\"], \"attrs\""),
                    "/ops/1/outputs/0", "\"h\"");
  expect_user_error(edit("\"outputs\": [\"h\"]", "\"outputs\": [\"b\"]"), "/ops/0/outputs/0",
                    "\"b\"");
  expect_user_error(edit("\"name\": \"add\"", "\"name\": \"mm\""), "/ops/1/name", "\"mm\"");
}

TEST_CASE("bad model json: dangling tensor names") {
  expect_user_error(edit("[\"h\", \"b\"]", "[\"h\", \"foo\"]"), "/ops/1/inputs/1",
                    "tensor \"foo\" is not an input, weight or op output");
  expect_user_error(edit("\"outputs\": [\"y\"]", "\"outputs\": [\"y\", \"z\"]"), "/outputs/1",
                    "\"z\"");
  expect_user_error(edit("\"outputs\": [\"y\"]", "\"outputs\": []"), "/outputs", "[]");
}

TEST_CASE("bad model json: data that does not match the shape or dtype") {
  expect_user_error(edit("[0.5, -1, 2]", "[0.5, -1]"), "/weights/1/data", "2 values");
  expect_user_error(edit("[0.5, -1, 2]", "[0.5, \"abc\", 2]"), "/weights/1/data/1", "\"abc\"");
  expect_user_error(edit("\"dtype\": \"f32\", \"shape\": [3], \"data\": [0.5, -1, 2]",
                         "\"dtype\": \"i8\", \"shape\": [3], \"data\": [1, 300, 2]"),
                    "/weights/1/data/1", "300");
  expect_user_error(edit("\"dtype\": \"f32\", \"shape\": [3], \"data\": [0.5, -1, 2]",
                         "\"dtype\": \"i64\", \"shape\": [3], \"data\": [1, 2.5, 2]"),
                    "/weights/1/data/1", "2.5");
  expect_user_error(edit("\"dtype\": \"f32\", \"shape\": [3], \"data\": [0.5, -1, 2]",
                         "\"dtype\": \"bool\", \"shape\": [3], \"data\": [true, 2, false]"),
                    "/weights/1/data/1", "2");
}

TEST_CASE("bad model json: weight sources") {
  expect_user_error(edit("\"data\": [0.5, -1, 2]", "\"data\": [0.5, -1, 2], \"init\": {}"),
                    "/weights/1", "\"b\"");
  expect_user_error(edit(", \"data\": [0.5, -1, 2]", ""), "/weights/1", "\"b\"");
  expect_user_error(edit("\"dist\": \"normal\"", "\"dist\": \"gaussian\""), "/weights/0/init/dist",
                    "\"gaussian\"");
  expect_user_error(edit("\"std\": 0.02", "\"std\": -0.02"), "/weights/0/init/std", "-0.02");
  expect_user_error(edit("\"dist\": \"normal\", \"mean\": 0.0, \"std\": 0.02",
                         "\"dist\": \"uniform\", \"low\": 2.0, \"high\": 1.0"),
                    "/weights/0/init", "2.0");
}

TEST_CASE("bad model json: external weight files") {
  TempDir dir;
  const std::string external = "\"external\": {\"file\": \"w.bin\", \"offset\": 0}";
  const std::string text = edit("\"data\": [0.5, -1, 2]", external);
  // Missing file, resolved next to the model file.
  expect_user_error(text, "/weights/1/external/file", "w.bin", (dir.path / "m.json").string());
  // A file too short for the weight (3 floats need 12 bytes).
  std::ofstream(dir.path / "w.bin", std::ios::binary) << "1234";
  expect_user_error(text, "/weights/1/external", "4 bytes", (dir.path / "m.json").string());
  expect_user_error(edit("\"offset\": 0", "\"offset\": -16", text), "/weights/1/external/offset",
                    "-16", (dir.path / "m.json").string());
  // Long enough: loads.
  std::ofstream(dir.path / "w.bin", std::ios::binary) << "0123456789ab";
  CHECK(parse_model_json(text, (dir.path / "m.json").string()).weights[1].type.num_elements() == 3);
  // Nothing outside the model's folder: an absolute path, '..', a symbolic link out of it; and
  // only regular files (a FIFO would hang the read, a device never end).
  TempDir outside;
  const std::string secret = (outside.path / "secret.bin").string();
  std::ofstream(secret, std::ios::binary) << "0123456789ab";
  const std::string m = (dir.path / "m.json").string();
  expect_user_error(edit("w.bin", secret, text), "/weights/1/external/file", "is an absolute path", m);
  expect_user_error(edit("w.bin", "../" + outside.path.filename().string() + "/secret.bin", text), "/weights/1/external/file",
                    "leaves the model's folder", m);
  std::filesystem::create_symlink(secret, dir.path / "link.bin");
  expect_user_error(edit("w.bin", "link.bin", text), "/weights/1/external/file", "outside the model's folder", m);
  std::filesystem::create_directory(dir.path / "sub");
  expect_user_error(edit("w.bin", "sub", text), "/weights/1/external/file", "is not a regular file", m);
  if (::mkfifo((dir.path / "fifo.bin").c_str(), 0600) == 0)
    expect_user_error(edit("w.bin", "fifo.bin", text), "/weights/1/external/file", "is not a regular file", m);
}

TEST_CASE("bad model json: attribute values") {
  expect_user_error(edit("\"axis\": -1", "\"axis\": []"), "/ops/1/attrs/axis", "[]");
  expect_user_error(edit("\"axis\": -1", "\"axis\": [1, \"a\"]"), "/ops/1/attrs/axis/1", "\"a\"");
  expect_user_error(edit("\"axis\": -1", "\"axis\": [[1]]"), "/ops/1/attrs/axis/0", "[1]");
  expect_user_error(edit("\"axis\": -1", "\"axis\": true"), "/ops/1/attrs/axis", "true");
  expect_user_error(edit("\"axis\": -1", "\"axis\": {\"int64\": 3}"), "/ops/1/attrs/axis/int64",
                    "\"int64\"");
  expect_user_error(edit("\"axis\": -1", "\"axis\": {\"int\": 3, \"float\": 3.0}"),
                    "/ops/1/attrs/axis", "\"int\"");
  expect_user_error(edit("\"axis\": -1", "\"axis\": {\"int\": 3.5}"), "/ops/1/attrs/axis/int",
                    "3.5");
  expect_user_error(
      edit("\"axis\": -1",
           "\"axis\": {\"tensor\": {\"dtype\": \"f32\", \"shape\": [2], \"data\": [1]}}"),
      "/ops/1/attrs/axis/tensor/data", "1 values");
  expect_user_error(edit("\"attrs\": {\"axis\": -1}", "\"attrs\": [1]"), "/ops/1/attrs", "[1]");
}

TEST_CASE("bad model json: ops") {
  expect_user_error(edit("\"outputs\": [\"h\"]", "\"outputs\": []"), "/ops/0/outputs", "\"mm\"");
  expect_user_error(edit("\"op\": \"MatMul\"", "\"op\": \"\""), "/ops/0/op", "\"\"");
  // A cycle: mm reads y, which add computes from mm's output.
  expect_user_error(edit("[\"x\", \"w\"]", "[\"y\", \"w\"]"), "/ops/0",
                    "\"mm\" -> \"add\" -> \"mm\"");
  expect_user_error(edit("[\"x\", \"w\"]", "[\"h\", \"w\"]"), "/ops/0", "\"mm\" -> \"mm\"");
}

TEST_CASE("bad model json: files that cannot be read") {
  try {
    load_model_json("/nonexistent/tessel/model.json");
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/tessel/model.json") != std::string::npos);
  }
}

TEST_CASE("bad model json: deep nesting is refused as it is read, in models, specs and schedules") {
  // 100,000 nested lists (200 KB) once overflowed the stack of every JSON reader.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto check = [&](auto&& parse, const std::string& where) {
    CAPTURE(where);
    try {
      parse();
      FAIL("no error raised");
    } catch (const InternalError& e) {
      FAIL("InternalError instead of a UserError: ", e.what());
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find("nested deeper than 64 levels") != std::string::npos);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  check([&] { parse_model_json(edit("\"axis\": -1", "\"axis\": " + deep), "deep.json"); }, "model attribute");
  check([&] { parse_model_json(deep, "deep.json"); }, "model document");
  check([&] { tessel::parse_hw_spec(deep, "deep_spec.json"); }, "hardware spec");
  const tessel::OpGraph g = tessel::lower_model(parse_model_json(kValid, "good.json"));
  check([&] { tessel::schedule_from_json(deep, "deep_schedule.json", g); }, "schedule");
  // 64 levels are fine as JSON (the model reader then says what it expected there).
  const std::string ok = std::string(60, '[') + std::string(60, ']');
  try {
    parse_model_json(edit("\"axis\": -1", "\"axis\": " + ok), "ok.json");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("nested deeper") == std::string::npos);
  }
}
