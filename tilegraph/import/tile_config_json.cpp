// TileConfig <-> JSON (tile_config_json.h). Reading walks the document key by key; every problem
// is a UserError with the file, a JSON pointer and the offending value, and no nlohmann exception
// escapes.
#include "tilegraph/import/tile_config_json.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "tilegraph/import/json_util.h"
#include <set>

#include "tilegraph/error.h"

namespace tessel {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

using json_util::describe;

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  TileConfig read(const json& doc) {
    check_keys(doc, "", {"levels", "threads", "vector_width", "pipeline_stages", "raster_group"});
    TileConfig c;
    if (!doc.contains("levels")) fail("", "missing key \"levels\"");
    const json& levels = doc["levels"];
    if (!levels.is_array() || levels.empty())
      fail("/levels", "expected a non-empty list of levels, got " + describe(levels));
    for (size_t i = 0; i < levels.size(); ++i) c.levels.push_back(read_level(levels[i], cat("/levels/", i)));
    if (doc.contains("threads")) c.threads = read_extents(doc["threads"], "/threads");
    if (doc.contains("vector_width")) c.vector_width = read_int(doc["vector_width"], "/vector_width");
    if (doc.contains("pipeline_stages"))
      c.pipeline_stages = read_int(doc["pipeline_stages"], "/pipeline_stages");
    if (doc.contains("raster_group")) c.raster_group = read_int(doc["raster_group"], "/raster_group");
    return c;
  }

 private:
  [[noreturn]] void fail(const std::string& ptr, const std::string& message) const {
    throw UserError(file_, ptr, message);
  }

  void check_keys(const json& j, const std::string& ptr, const std::set<std::string>& allowed) {
    if (!j.is_object()) fail(ptr, "expected an object, got " + describe(j));
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!allowed.count(it.key())) fail(ptr + "/" + it.key(), "unknown key \"" + it.key() + "\"");
  }

  LevelTile read_level(const json& j, const std::string& ptr) {
    check_keys(j, ptr, {"level", "spatial", "reduction"});
    LevelTile lt;
    if (!j.contains("level")) fail(ptr, "missing key \"level\"");
    if (!j["level"].is_string() || j["level"].get<std::string>().empty())
      fail(ptr + "/level", "expected a non-empty level name, got " + describe(j["level"]));
    lt.level = j["level"].get<std::string>();
    if (!j.contains("spatial")) fail(ptr, "missing key \"spatial\"");
    lt.spatial = read_extents(j["spatial"], ptr + "/spatial");
    if (j.contains("reduction")) lt.reduction = read_extents(j["reduction"], ptr + "/reduction");
    return lt;
  }

  std::vector<int64_t> read_extents(const json& j, const std::string& ptr) {
    if (!j.is_array()) fail(ptr, "expected a list of integers, got " + describe(j));
    std::vector<int64_t> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(read_int64(j[i], cat(ptr, "/", i)));
    return out;
  }

  int64_t read_int64(const json& j, const std::string& ptr) {
    if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() >
                                                                 static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail(ptr, "expected an integer >= 1, got " + describe(j));
    const int64_t v = j.get<int64_t>();
    if (v < 1) fail(ptr, cat("expected an integer >= 1, got ", v));
    return v;
  }

  int read_int(const json& j, const std::string& ptr) {
    const int64_t v = read_int64(j, ptr);
    if (v > std::numeric_limits<int>::max()) fail(ptr, cat("value ", v, " is too large"));
    return static_cast<int>(v);
  }

  const std::string& file_;
};

}  // namespace

std::string tile_config_to_json(const TileConfig& config) {
  ordered_json doc;
  doc["levels"] = ordered_json::array();
  for (const LevelTile& lt : config.levels) {
    ordered_json l;
    l["level"] = lt.level;
    l["spatial"] = lt.spatial;
    l["reduction"] = lt.reduction;
    doc["levels"].push_back(std::move(l));
  }
  doc["threads"] = config.threads;
  doc["vector_width"] = config.vector_width;
  doc["pipeline_stages"] = config.pipeline_stages;
  doc["raster_group"] = config.raster_group;
  return doc.dump();
}

TileConfig tile_config_from_json(const std::string& text, const std::string& file) {
  // Strict: malformed text and repeated keys are UserErrors with the place.
  const json doc = json_util::parse_strict(text, file);
  try {
    return Reader(file).read(doc);
  } catch (const json::exception& e) {
    throw InternalError(cat("tile config reader: unexpected nlohmann exception: ", e.what()));
  }
}

}  // namespace tessel
