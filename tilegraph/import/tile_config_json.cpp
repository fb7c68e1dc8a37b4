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
    check_keys(doc, "", {"levels", "threads", "vector_width", "pipeline_stages", "raster_group", "kind"});
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
    if (doc.contains("kind")) c.kind = read_kind(doc["kind"], "/kind");
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

  TileKindProps read_kind(const json& j, const std::string& ptr) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
      fail(ptr, "expected an object with a \"name\" (dense, block_sparse, nm_sparse, sharded), got " + describe(j));
    const std::string name = j["name"].get<std::string>();
    const auto int_or = [&](const char* key, int64_t dflt, int64_t lo) {
      if (!j.contains(key)) return dflt;
      const json& v = j[key];
      if (!v.is_number_integer() || v.get<int64_t>() < lo)
        fail(cat(ptr, "/", key), cat("expected an integer >= ", lo, ", got ", describe(v)));
      return v.get<int64_t>();
    };
    if (name == "dense") {
      check_keys(j, ptr, {"name"});
      return DenseProps{};
    }
    if (name == "block_sparse") {
      check_keys(j, ptr, {"name", "input", "block_m", "block_n", "density", "index_bytes"});
      BlockSparseProps p;
      p.input = static_cast<int>(int_or("input", p.input, 0));
      p.block_m = int_or("block_m", p.block_m, 1);
      p.block_n = int_or("block_n", p.block_n, 1);
      p.index_bytes = static_cast<int>(int_or("index_bytes", p.index_bytes, 1));
      if (j.contains("density")) {
        const json& d = j["density"];
        if (!d.is_number() || !(d.get<double>() > 0 && d.get<double>() <= 1))
          fail(ptr + "/density", "expected a fraction in (0, 1], got " + describe(d));
        p.density = d.get<double>();
      }
      return p;
    }
    if (name == "nm_sparse") {
      check_keys(j, ptr, {"name", "input", "n", "m", "metadata_bits"});
      NmSparseProps p;
      p.input = static_cast<int>(int_or("input", p.input, 0));
      p.n = static_cast<int>(int_or("n", p.n, 1));
      p.m = static_cast<int>(int_or("m", p.m, 1));
      p.metadata_bits = static_cast<int>(int_or("metadata_bits", p.metadata_bits, 1));
      if (p.n > p.m) fail(ptr + "/n", cat("n is ", p.n, ", more than m = ", p.m));
      return p;
    }
    if (name == "sharded") {
      check_keys(j, ptr, {"name", "mesh_shape", "input_sharding", "output_sharding", "at_inputs", "at_output"});
      ShardedProps p;
      if (j.contains("mesh_shape")) p.mesh_shape = read_extents(j["mesh_shape"], ptr + "/mesh_shape");
      const int axes = static_cast<int>(p.mesh_shape.size());
      const auto axis_list = [&](const json& v, const std::string& at) {
        if (!v.is_array()) fail(at, "expected a list of mesh axes (-1: replicated), got " + describe(v));
        std::vector<int> out;
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_number_integer() || v[i].get<int64_t>() < -1 || v[i].get<int64_t>() >= axes)
            fail(cat(at, "/", i), cat("expected a mesh axis in [-1, ", axes, "), got ", describe(v[i])));
          out.push_back(v[i].get<int>());
        }
        return out;
      };
      if (j.contains("input_sharding")) {
        const json& v = j["input_sharding"];
        if (!v.is_array()) fail(ptr + "/input_sharding", "expected a list per input, got " + describe(v));
        for (size_t i = 0; i < v.size(); ++i) p.input_sharding.push_back(axis_list(v[i], cat(ptr, "/input_sharding/", i)));
      }
      if (j.contains("output_sharding")) p.output_sharding = axis_list(j["output_sharding"], ptr + "/output_sharding");
      const auto collective = [&](const json& v, const std::string& at) {
        for (Collective c : {Collective::none, Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce,
                             Collective::all_to_all})
          if (v.is_string() && v.get<std::string>() == collective_name(c)) return c;
        fail(at, "expected a collective (none, all_gather, reduce_scatter, all_reduce, all_to_all), got " + describe(v));
      };
      if (j.contains("at_inputs")) {
        const json& v = j["at_inputs"];
        if (!v.is_array()) fail(ptr + "/at_inputs", "expected a list of collectives, got " + describe(v));
        for (size_t i = 0; i < v.size(); ++i) p.at_inputs.push_back(collective(v[i], cat(ptr, "/at_inputs/", i)));
      }
      if (j.contains("at_output")) p.at_output = collective(j["at_output"], ptr + "/at_output");
      return p;
    }
    fail(ptr + "/name", "unknown tile kind \"" + name + "\" (dense, block_sparse, nm_sparse, sharded)");
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

ordered_json kind_to_json(const TileKindProps& props) {
  ordered_json k;
  k["name"] = std::string(tile_kind_name(props));
  if (const auto* b = std::get_if<BlockSparseProps>(&props)) {
    k["input"] = b->input;
    k["block_m"] = b->block_m;
    k["block_n"] = b->block_n;
    k["density"] = b->density;
    k["index_bytes"] = b->index_bytes;
  } else if (const auto* nm = std::get_if<NmSparseProps>(&props)) {
    k["input"] = nm->input;
    k["n"] = nm->n;
    k["m"] = nm->m;
    k["metadata_bits"] = nm->metadata_bits;
  } else if (const auto* sh = std::get_if<ShardedProps>(&props)) {
    k["mesh_shape"] = sh->mesh_shape;
    k["input_sharding"] = sh->input_sharding;
    k["output_sharding"] = sh->output_sharding;
    k["at_inputs"] = ordered_json::array();
    for (Collective c : sh->at_inputs) k["at_inputs"].push_back(std::string(collective_name(c)));
    k["at_output"] = std::string(collective_name(sh->at_output));
  }
  return k;
}

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
  doc["kind"] = kind_to_json(config.kind);
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
