// What each libFuzzer target does with one input (tests/fuzz/fuzz_*.cpp call these; the test
// tests/error/fuzz_findings_test.cpp replays every committed finding through them). Bad input may
// only end in a UserError: an InternalError or any other exception escapes to the caller, which
// libFuzzer reports as a crash and the test as a failure.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "hw_specs/hw_spec.h"
#include "policy/check_schedule.h"
#include "policy/schedule_json.h"
#include "tilegraph/error.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/onnx_import.h"
#include "tilegraph/lower.h"

namespace tessel::fuzz {

inline std::string text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

template <typename F>
void expect_only_user_errors(F&& f) {
  try {
    f();
  } catch (const UserError&) {
    // The intended outcome for bad input.
  }
}

inline LowerOptions bounded_lowering() {
  LowerOptions options;
  options.fold_limit_elements = 1 << 16;  // shape folding runs the interpreter: bound it
  return options;
}

/// The hardware-spec loader, then a loaded spec's printer, hash and table.
inline void hw_spec(const uint8_t* data, size_t size) {
  expect_only_user_errors([&] {
    const HwSpec spec = parse_hw_spec(text(data, size), "fuzz.json");
    (void)write_hw_spec(spec);
    (void)hw_spec_hash(spec);
    (void)format_hw_spec_table(spec);
  });
}

/// The model JSON loader, writing the model back, and lowering.
inline void model_json(const uint8_t* data, size_t size) {
  expect_only_user_errors([&] {
    const ModelDef model = parse_model_json(text(data, size), "fuzz.json");
    (void)write_model_json(model);
    (void)lower_model(model, bounded_lowering());
  });
}

/// The schedule JSON loader against a fixed model (GEMM + bias + GELU, and a softmax) on the H100
/// spec, then the checker and the writer.
inline void schedule_json(const uint8_t* data, size_t size) {
  struct Fixture {
    OpGraph graph = lower_model(parse_model_json(R"({"format": "tessel-model", "version": 1, "name": "fuzz",
      "opset": 20, "inputs": [{"name": "x", "dtype": "f16", "shape": [64, 48]}], "outputs": ["act", "p"],
      "weights": [{"name": "w", "dtype": "f16", "shape": [48, 96], "init": {"dist": "normal", "mean": 0.0, "std": 0.1, "seed": 1}},
                  {"name": "b", "dtype": "f16", "shape": [96], "init": {"dist": "normal", "mean": 0.0, "std": 0.1, "seed": 2}}],
      "ops": [{"name": "mm", "op": "MatMul", "inputs": ["x", "w"], "outputs": ["mm"]},
              {"name": "biased", "op": "Add", "inputs": ["mm", "b"], "outputs": ["biased"]},
              {"name": "act", "op": "Gelu", "inputs": ["biased"], "outputs": ["act"]},
              {"name": "p", "op": "Softmax", "inputs": ["x"], "outputs": ["p"], "attrs": {"axis": -1}}]})",
                                                 "fixture.json"));
    HwSpec spec = load_hw_spec(TESSEL_SOURCE_DIR "/hw_specs/nvidia-h100-sxm.json");
  };
  static const Fixture fixture;
  expect_only_user_errors([&] {
    const Schedule s = schedule_from_json(text(data, size), "fuzz.json", fixture.graph);
    (void)check_schedule(fixture.graph, fixture.spec, s);
    (void)schedule_to_json(s, fixture.graph);
  });
}

/// The ONNX importer (from a private temporary file: import_onnx reads a path), then lowering.
inline void onnx(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessel_fuzz_onnx_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.onnx").string();
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  expect_only_user_errors([&] { (void)lower_model(import_onnx(path), bounded_lowering()); });
}

}  // namespace tessel::fuzz
