// Tessel's own model format: a ModelDef (model_def.h) as a JSON file, the first stage of the
// pipeline next to the ONNX importer (onnx_import.h). docs/model-format.md describes the format.
//
// Loading validates everything a model file can get wrong -- malformed JSON, unknown keys, wrong
// types, bad shapes and dtypes, duplicate or dangling tensor names, data that does not match its
// shape, a missing weight file, a cycle -- and reports each as a UserError carrying the file, a
// JSON pointer ("/ops/3/inputs/1") and the offending value. Writing is stable (fixed key order,
// 2-space indent, short arrays on one line), so save followed by load gives back the same ModelDef.
#pragma once

#include <cstdint>
#include <string>

#include "tilegraph/model_def.h"

namespace tessel {

/// Reads and validates a model file. External weight files are resolved relative to the
/// directory of `path`. Sets ModelDef::file to `path`.
ModelDef load_model_json(const std::string& path);

/// Parses model text; `file` names it in errors and locates external weight files (relative to
/// its directory; the current directory when `file` has none).
ModelDef parse_model_json(const std::string& text, const std::string& file);

/// The model as JSON text. Every weight with data is written inline (no sidecar file).
std::string write_model_json(const ModelDef& model);

/// Writes the model to `path`. Weights with data and more than kExternalWeightElements elements
/// go to the sidecar file `<stem>.bin` next to it (raw little-endian values of the weight's dtype
/// at 16-byte aligned offsets), referenced from the JSON by `"external"`.
void save_model_json(const ModelDef& model, const std::string& path);

inline constexpr int64_t kExternalWeightElements = 4096;

}  // namespace tessel
