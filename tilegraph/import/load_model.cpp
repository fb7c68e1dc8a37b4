// Format dispatch for model files.
#include "tilegraph/import/load_model.h"

#include <filesystem>

#include "tilegraph/error.h"
#include "tilegraph/import/model_json.h"
#include "tilegraph/import/onnx_import.h"

namespace tessel {

ModelDef load_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UserError(path, "", "is a directory, not a model file");
  if (!fs::is_regular_file(path, ec))
    throw UserError(path, "", fs::exists(path, ec) ? "is not a regular file (a model is read from a file)" : "no such model file");
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".json") return load_model_json(path);
  if (ext == ".onnx") return import_onnx(path);
  throw UserError(path, "", cat("unknown model extension \"", ext, "\" (expected .json or .onnx)"));
}

}  // namespace tessel
