// Loading a model file of any supported format, by extension: `.json` (Tessel's model format,
// model_json.h) or `.onnx` (onnx_import.h). A missing file or unknown extension is a UserError.
#pragma once

#include <string>

#include "tilegraph/model_def.h"

namespace tessel {

ModelDef load_model(const std::string& path);

}  // namespace tessel
