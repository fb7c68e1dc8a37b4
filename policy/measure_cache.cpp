// MeasureCache (measure_cache.h): the file format is
//   {"format": "tessel-measurements", "entries": [
//     {"group": "<16 hex digits>", "hw_spec": "<16 hex digits>", "policy": "...",
//      "tessel": "0.1.0", "context": "threads=2", "seconds": 1.25e-05}, ...]}
// ("context" only when the measurer gave one: Measurer::context)
// with entries sorted by key, so the file is stable and diffable.
#include "policy/measure_cache.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tilegraph/error.h"
#include "tilegraph/hash.h"
#include "tilegraph/tile_kind_props.h"

namespace tessel {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "tessel-measurements";

std::optional<uint64_t> parse_hex(const std::string& s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return std::nullopt;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace

uint64_t group_canonical_hash(const OpGraph& graph, const ScheduledGroup& group) {
  std::string text;
  auto position = [&](NodeId n) -> int {
    for (size_t i = 0; i < group.nodes.size(); ++i)
      if (group.nodes[i] == n) return static_cast<int>(i);
    return -1;
  };
  for (size_t i = 0; i < group.nodes.size(); ++i) {
    const NodeId n = group.nodes[i];
    const TeNode& node = graph.node(n);
    std::vector<std::string> inputs;
    for (TensorId t : graph.node_inputs(n)) {
      const int p = position(graph.producer(t));
      inputs.push_back(p >= 0 ? cat("g", p) : std::string("x"));
    }
    std::string printed = print_node(node, inputs, cat("g", i));
    const std::string name = cat("node \"", node.name(), "\"");
    if (size_t at = printed.find(name); at != std::string::npos) printed.replace(at, name.size(), "node");
    text += printed;
    auto tiles = group.tiles.find(n);
    text += cat("tiles ", tiles == group.tiles.end() ? std::string("-") : print_tile_config(tiles->second), "\n");
    // A block-sparse kernel walks its weight's non-zero blocks: their pattern is part of it.
    if (tiles != group.tiles.end())
      if (const auto* bsr = std::get_if<BlockSparseProps>(&tiles->second.kind)) {
        const TensorId w = graph.node_inputs(n).at(bsr->input);
        std::string mask;
        if (graph.tensor(w).sparsity && bsr->block_m % kNonzeroUnit == 0 && bsr->block_n % kNonzeroUnit == 0)
          for (uint8_t b : graph.nonzero_map(w)->tiles(bsr->block_m, bsr->block_n)) mask += static_cast<char>('0' + b);
        text += cat("block_sparse input ", bsr->input, " blocks ", bsr->block_m, "x", bsr->block_n, " density ", bsr->density,
                    " mask ", fnv1a64(mask), "\n");
      }
  }
  for (const auto& [tensor, level] : group.edge_levels)
    text += cat("edge g", position(graph.producer(tensor)), " ", level, "\n");
  // A recorded kernel family and its parameters (a tuner's variant) are part of what is measured.
  if (!group.kernel.family.empty()) {
    text += cat("kernel ", group.kernel.family);
    for (const auto& [name, value] : group.kernel.params) text += cat(" ", name, "=", value);
    text += "\n";
  }
  return fnv1a64(text);
}

std::string default_measure_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "tessel").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "tessel").string();
  return ".tessel-cache";
}

MeasureCache::MeasureCache(std::string directory)
    : directory_(std::move(directory)), file_((fs::path(directory_) / "measurements.json").string()) {
  std::ifstream in(file_);
  if (!in) return;
  std::stringstream buf;
  buf << in.rdbuf();
  // Anything unexpected makes the whole file corrupt: better to measure again than to trust it.
  try {
    const nlohmann::json j = nlohmann::json::parse(buf.str());
    if (!j.is_object() || j.value("format", "") != kFormat || !j.contains("entries") || !j["entries"].is_array())
      throw std::runtime_error("not a measurement cache");
    for (const nlohmann::json& e : j["entries"]) {
      const std::optional<uint64_t> g = parse_hex(e.at("group").get<std::string>());
      const std::optional<uint64_t> h = parse_hex(e.at("hw_spec").get<std::string>());
      const double seconds = e.at("seconds").get<double>();
      if (!g || !h || !(seconds >= 0)) throw std::runtime_error("bad entry");
      entries_[MeasureKey{*g, *h, e.at("policy").get<std::string>(), e.at("tessel").get<std::string>(),
                          e.value("context", std::string())}] = seconds;
    }
  } catch (const std::exception&) {
    entries_.clear();
    corrupt_ = true;
  }
}

std::optional<double> MeasureCache::lookup(const MeasureKey& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void MeasureCache::store(const MeasureKey& key, double seconds) {
  entries_[key] = seconds;
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["entries"] = nlohmann::ordered_json::array();
  for (const auto& [k, s] : entries_) {
    nlohmann::ordered_json e;
    e["group"] = hex64(k.group_hash);
    e["hw_spec"] = hex64(k.hw_spec_hash);
    e["policy"] = k.policy;
    e["tessel"] = k.version;
    if (!k.context.empty()) e["context"] = k.context;
    e["seconds"] = s;
    j["entries"].push_back(std::move(e));
  }
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw UserError(directory_, "", cat("cannot create the measurement cache directory: ", ec.message()));
  // Write a temporary file next to the cache and rename it over: readers see the old file or the
  // new one, never half of one.
  const std::string tmp = cat(file_, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(1) << "\n";
    if (!out) throw UserError(tmp, "", "cannot write the measurement cache");
  }
  fs::rename(tmp, file_, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw UserError(file_, "", cat("cannot replace the measurement cache: ", ec.message()));
  }
  corrupt_ = false;
}

std::optional<double> MeasureCache::measure(Measurer& measurer, const OpGraph& graph, const ScheduledGroup& group,
                                            const HwSpec& spec, const std::string& policy) {
  const MeasureKey key{group_canonical_hash(graph, group), hw_spec_hash(spec), policy, kTesselVersion, measurer.context()};
  if (std::optional<double> hit = lookup(key)) return hit;
  std::optional<double> seconds = measurer.measure(graph, group, spec);
  if (seconds) store(key, *seconds);
  return seconds;
}

}  // namespace tessel
