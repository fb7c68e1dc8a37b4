// Schedule <-> JSON (schedule_json.h). Reading walks the document key by key; every problem is a
// UserError with the file, a JSON pointer and the offending value, and no nlohmann exception
// escapes. Tile configs are read by tile_config_from_json, their pointers prefixed with the
// config's place in the schedule.
#include "policy/schedule_json.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "tilegraph/import/json_util.h"
#include <set>

#include "tilegraph/error.h"
#include "tilegraph/import/tile_config_json.h"

namespace tessel {
namespace {

using json = nlohmann::ordered_json;

constexpr const char* kFormat = "tessel-schedule";

// A JSON pointer token (RFC 6901): '~' -> "~0", '/' -> "~1".
std::string token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

using json_util::describe;

json write_cost(const CostBreakdown& c) {
  json j;
  j["latency_s"] = number(c.latency_s);
  j["terms"] = json::array();
  for (const CostTerm& t : c.terms) j["terms"].push_back(json{{"name", t.name}, {"seconds", number(t.seconds)}});
  j["flops"] = number(c.flops);
  j["tensor_cores"] = c.tensor_cores;
  j["memory"] = json::array();
  for (const LevelCost& l : c.memory)
    j["memory"].push_back(json{{"level", l.level}, {"bytes", number(l.bytes)}, {"seconds", number(l.seconds)}});
  j["bound"] = c.bound;
  j["blocks"] = c.blocks;
  j["blocks_per_unit"] = c.blocks_per_unit;
  j["waves"] = number(c.waves);
  j["occupancy"] = number(c.occupancy);
  j["notes"] = c.notes;
  return j;
}

class Reader {
 public:
  Reader(const std::string& file, const OpGraph& graph) : file_(file), graph_(graph) {
    for (NodeId n = 0; n < graph.num_nodes(); ++n) nodes_.emplace(graph.node(n).name(), n);
  }

  Schedule read(const json& doc) {
    check_keys(doc, "", {"format", "policy", "cost_model", "hw_spec", "hw_spec_hash", "predicted_latency_s", "groups",
                         "unfused"});
    Schedule s;
    if (doc.contains("format") && (!doc["format"].is_string() || doc["format"].get<std::string>() != kFormat))
      fail("/format", cat("expected \"", kFormat, "\", got ", describe(doc["format"])));
    if (doc.contains("policy")) s.policy = read_string(doc["policy"], "/policy");
    if (doc.contains("cost_model")) s.cost_model = read_string(doc["cost_model"], "/cost_model");
    if (doc.contains("hw_spec")) s.hw_spec = read_string(doc["hw_spec"], "/hw_spec");
    if (doc.contains("hw_spec_hash")) s.hw_spec_hash = read_hash(doc["hw_spec_hash"], "/hw_spec_hash");
    if (doc.contains("predicted_latency_s"))
      s.predicted_latency_s = read_double(doc["predicted_latency_s"], "/predicted_latency_s");
    if (!doc.contains("groups")) fail("", "missing key \"groups\"");
    const json& groups = read_array(doc["groups"], "/groups");
    for (size_t g = 0; g < groups.size(); ++g) s.groups.push_back(read_group(groups[g], cat("/groups/", g)));
    if (doc.contains("unfused")) {
      const json& unfused = read_array(doc["unfused"], "/unfused");
      for (size_t i = 0; i < unfused.size(); ++i) s.unfused.push_back(read_unfused(unfused[i], cat("/unfused/", i)));
    }
    return s;
  }

 private:
  [[noreturn]] void fail(const std::string& ptr, const std::string& message) const {
    throw UserError(file_, ptr, message);
  }

  void check_keys(const json& j, const std::string& ptr, const std::set<std::string>& allowed) const {
    if (!j.is_object()) fail(ptr, "expected an object, got " + describe(j));
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!allowed.count(it.key())) fail(ptr + "/" + token(it.key()), "unknown key \"" + it.key() + "\"");
  }

  const json& read_array(const json& j, const std::string& ptr) const {
    if (!j.is_array()) fail(ptr, "expected a list, got " + describe(j));
    return j;
  }

  std::string read_string(const json& j, const std::string& ptr) const {
    if (!j.is_string()) fail(ptr, "expected a string, got " + describe(j));
    return j.get<std::string>();
  }

  bool read_bool(const json& j, const std::string& ptr) const {
    if (!j.is_boolean()) fail(ptr, "expected true or false, got " + describe(j));
    return j.get<bool>();
  }

  double read_double(const json& j, const std::string& ptr) const {
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    if (!j.is_number()) fail(ptr, "expected a number, got " + describe(j));
    return j.get<double>();
  }

  int64_t read_int64(const json& j, const std::string& ptr) const {
    if (!j.is_number_integer() ||
        (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      fail(ptr, "expected an integer, got " + describe(j));
    return j.get<int64_t>();
  }

  uint64_t read_hash(const json& j, const std::string& ptr) const {
    const std::string s = read_string(j, ptr);
    uint64_t v = 0;
    bool ok = s.size() == 16;
    for (char c : s) {
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (d < 0) ok = false;
      else v = v * 16 + static_cast<uint64_t>(d);
    }
    if (!ok) fail(ptr, "expected 16 lowercase hex digits, got " + describe(j));
    return v;
  }

  NodeId read_node(const json& j, const std::string& ptr) const {
    const std::string name = read_string(j, ptr);
    return node_named(name, ptr);
  }

  NodeId node_named(const std::string& name, const std::string& ptr) const {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) fail(ptr, cat("unknown node \"", name, "\" (the graph has ", graph_.num_nodes(), " nodes)"));
    return it->second;
  }

  TensorId tensor_named(const std::string& name, const std::string& ptr) const {
    const std::optional<TensorId> t = graph_.find_tensor(name);
    if (!t) fail(ptr, cat("unknown tensor \"", name, "\""));
    return *t;
  }

  ScheduleGroup read_group(const json& j, const std::string& ptr) const {
    check_keys(j, ptr, {"nodes", "tiles", "edge_levels", "stream_chunk", "kernel", "predicted", "measured_s", "trials", "kind_choice"});
    ScheduleGroup sg;
    if (!j.contains("nodes")) fail(ptr, "missing key \"nodes\"");
    const json& nodes = read_array(j["nodes"], ptr + "/nodes");
    for (size_t i = 0; i < nodes.size(); ++i) sg.group.nodes.push_back(read_node(nodes[i], cat(ptr, "/nodes/", i)));
    if (!j.contains("tiles")) fail(ptr, "missing key \"tiles\"");
    const json& tiles = j["tiles"];
    if (!tiles.is_object()) fail(ptr + "/tiles", "expected an object of tile configs by node name, got " + describe(tiles));
    for (auto it = tiles.begin(); it != tiles.end(); ++it) {
      const std::string at = ptr + "/tiles/" + token(it.key());
      const NodeId n = node_named(it.key(), at);
      try {
        sg.group.tiles[n] = tile_config_from_json(it.value().dump(), file_);
      } catch (const UserError& e) {
        throw UserError(file_, at + e.location(), e.message());
      }
    }
    if (j.contains("edge_levels")) {
      const json& levels = j["edge_levels"];
      if (!levels.is_object()) fail(ptr + "/edge_levels", "expected an object of levels by tensor name, got " + describe(levels));
      for (auto it = levels.begin(); it != levels.end(); ++it) {
        const std::string at = ptr + "/edge_levels/" + token(it.key());
        sg.group.edge_levels[tensor_named(it.key(), at)] = read_string(it.value(), at);
      }
    }
    if (j.contains("stream_chunk")) {
      sg.group.stream_chunk = read_int64(j["stream_chunk"], ptr + "/stream_chunk");
      if (sg.group.stream_chunk < 0) fail(ptr + "/stream_chunk", cat("expected a chunk of keys >= 0, got ", sg.group.stream_chunk));
    }
    if (j.contains("kernel")) sg.group.kernel = read_kernel(j["kernel"], ptr + "/kernel");
    if (j.contains("predicted")) sg.predicted = read_cost(j["predicted"], ptr + "/predicted");
    if (j.contains("measured_s")) sg.measured_s = read_double(j["measured_s"], ptr + "/measured_s");
    if (j.contains("kind_choice")) sg.kind_choice = read_string(j["kind_choice"], ptr + "/kind_choice");
    if (j.contains("trials")) {
      const json& trials = read_array(j["trials"], ptr + "/trials");
      for (size_t i = 0; i < trials.size(); ++i) {
        const std::string at = cat(ptr, "/trials/", i);
        const json& t = trials[i];
        if (!t.is_object()) fail(at, "expected an object {tiles, family, params, predicted_s, measured_s, failure}, got " + describe(t));
        check_keys(t, at, {"tiles", "family", "params", "predicted_s", "measured_s", "failure"});
        TuneTrial trial;
        if (t.contains("tiles")) trial.tiles = read_string(t["tiles"], at + "/tiles");
        if (t.contains("family")) trial.family = read_string(t["family"], at + "/family");
        if (t.contains("params")) trial.params = read_string(t["params"], at + "/params");
        if (t.contains("predicted_s")) trial.predicted_s = read_double(t["predicted_s"], at + "/predicted_s");
        if (t.contains("measured_s")) trial.measured_s = read_double(t["measured_s"], at + "/measured_s");
        if (t.contains("failure")) trial.failure = read_string(t["failure"], at + "/failure");
        sg.trials.push_back(std::move(trial));
      }
    }
    return sg;
  }

  KernelChoice read_kernel(const json& j, const std::string& ptr) const {
    if (!j.is_object()) fail(ptr, "expected an object {family, params, rejected}, got " + describe(j));
    check_keys(j, ptr, {"family", "params", "rejected"});
    KernelChoice k;
    if (!j.contains("family")) fail(ptr, "missing key \"family\"");
    k.family = read_string(j["family"], ptr + "/family");
    if (k.family.empty()) fail(ptr + "/family", "expected a kernel family name, got \"\"");
    if (j.contains("params")) {
      const json& params = j["params"];
      if (!params.is_object()) fail(ptr + "/params", "expected an object of integers by name, got " + describe(params));
      for (auto it = params.begin(); it != params.end(); ++it)
        k.params[it.key()] = read_int64(it.value(), ptr + "/params/" + token(it.key()));
    }
    if (j.contains("rejected")) {
      const json& rejected = read_array(j["rejected"], ptr + "/rejected");
      for (size_t i = 0; i < rejected.size(); ++i) k.rejected.push_back(read_string(rejected[i], cat(ptr, "/rejected/", i)));
    }
    return k;
  }

  CostBreakdown read_cost(const json& j, const std::string& ptr) const {
    // "compute_s", "launch_s" and "panel_s": how schedules saved before terms were a list name them.
    check_keys(j, ptr, {"latency_s", "terms", "compute_s", "flops", "tensor_cores", "memory", "bound", "blocks",
                        "blocks_per_unit", "waves", "occupancy", "launch_s", "panel_s", "notes"});
    CostBreakdown c;
    auto num = [&](const char* key, double& out) {
      if (j.contains(key)) out = read_double(j[key], ptr + "/" + key);
    };
    num("latency_s", c.latency_s);
    if (j.contains("terms")) {
      const json& terms = read_array(j["terms"], ptr + "/terms");
      for (size_t i = 0; i < terms.size(); ++i) {
        const std::string at = cat(ptr, "/terms/", i);
        check_keys(terms[i], at, {"name", "seconds"});
        if (!terms[i].contains("name")) fail(at, "missing key \"name\"");
        const std::string name = read_string(terms[i]["name"], at + "/name");
        for (const CostTerm& t : c.terms)
          if (t.name == name) fail(at + "/name", cat("term \"", name, "\" appears twice"));
        c.terms.push_back(CostTerm{name, terms[i].contains("seconds") ? read_double(terms[i]["seconds"], at + "/seconds") : 0});
      }
    }
    for (const char* legacy : {"compute", "launch", "panel"})
      if (const std::string key = cat(legacy, "_s"); j.contains(key)) c.term_ref(legacy) = read_double(j[key], ptr + "/" + key);
    num("flops", c.flops);
    if (j.contains("tensor_cores")) c.tensor_cores = read_bool(j["tensor_cores"], ptr + "/tensor_cores");
    if (j.contains("memory")) {
      const json& memory = read_array(j["memory"], ptr + "/memory");
      for (size_t i = 0; i < memory.size(); ++i) {
        const std::string at = cat(ptr, "/memory/", i);
        check_keys(memory[i], at, {"level", "bytes", "seconds"});
        LevelCost l;
        if (memory[i].contains("level")) l.level = read_string(memory[i]["level"], at + "/level");
        if (memory[i].contains("bytes")) l.bytes = read_double(memory[i]["bytes"], at + "/bytes");
        if (memory[i].contains("seconds")) l.seconds = read_double(memory[i]["seconds"], at + "/seconds");
        c.memory.push_back(std::move(l));
      }
    }
    if (j.contains("bound")) c.bound = read_string(j["bound"], ptr + "/bound");
    if (j.contains("blocks")) c.blocks = read_int64(j["blocks"], ptr + "/blocks");
    if (j.contains("blocks_per_unit")) c.blocks_per_unit = read_int64(j["blocks_per_unit"], ptr + "/blocks_per_unit");
    num("waves", c.waves);
    num("occupancy", c.occupancy);
    if (j.contains("notes")) {
      const json& notes = read_array(j["notes"], ptr + "/notes");
      for (size_t i = 0; i < notes.size(); ++i) c.notes.push_back(read_string(notes[i], cat(ptr, "/notes/", i)));
    }
    return c;
  }

  UnfusedEdge read_unfused(const json& j, const std::string& ptr) const {
    check_keys(j, ptr, {"tensor", "producer", "consumer", "reason", "detail"});
    UnfusedEdge e;
    for (const char* key : {"tensor", "producer", "consumer"})
      if (!j.contains(key)) fail(ptr, cat("missing key \"", key, "\""));
    e.tensor = tensor_named(read_string(j["tensor"], ptr + "/tensor"), ptr + "/tensor");
    e.producer = read_node(j["producer"], ptr + "/producer");
    e.consumer = read_node(j["consumer"], ptr + "/consumer");
    if (j.contains("reason")) {
      const std::string r = read_string(j["reason"], ptr + "/reason");
      bool found = false;
      for (UnfusedReason reason : {UnfusedReason::capacity, UnfusedReason::grid, UnfusedReason::cost, UnfusedReason::policy})
        if (unfused_reason_name(reason) == r) {
          e.reason = reason;
          found = true;
        }
      if (!found) fail(ptr + "/reason", cat("unknown reason \"", r, "\" (capacity, grid, cost or policy)"));
    }
    if (j.contains("detail")) e.detail = read_string(j["detail"], ptr + "/detail");
    return e;
  }

  const std::string& file_;
  const OpGraph& graph_;
  std::map<std::string, NodeId> nodes_;
};

}  // namespace

std::string schedule_to_json(const Schedule& s, const OpGraph& graph) {
  auto node_name = [&](NodeId n) -> std::string {
    TESSEL_ASSERT(n >= 0 && n < graph.num_nodes(), "schedule names node ", n, ", the graph has ", graph.num_nodes());
    return graph.node(n).name();
  };
  auto tensor_name = [&](TensorId t) -> std::string {
    TESSEL_ASSERT(t >= 0 && t < graph.num_tensors(), "schedule names tensor ", t, ", the graph has ", graph.num_tensors());
    return graph.tensor(t).name;
  };
  json doc;
  doc["format"] = kFormat;
  doc["policy"] = s.policy;
  doc["cost_model"] = s.cost_model;
  doc["hw_spec"] = s.hw_spec;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(s.hw_spec_hash));
  doc["hw_spec_hash"] = hash;
  doc["predicted_latency_s"] = number(s.predicted_latency_s);
  doc["groups"] = json::array();
  for (const ScheduleGroup& sg : s.groups) {
    json g;
    g["nodes"] = json::array();
    for (NodeId n : sg.group.nodes) g["nodes"].push_back(node_name(n));
    g["tiles"] = json::object();
    for (const auto& [n, cfg] : sg.group.tiles) g["tiles"][node_name(n)] = json::parse(tile_config_to_json(cfg));
    g["edge_levels"] = json::object();
    for (const auto& [t, level] : sg.group.edge_levels) g["edge_levels"][tensor_name(t)] = level;
    if (sg.group.stream_chunk > 0) g["stream_chunk"] = sg.group.stream_chunk;
    if (!sg.group.kernel.family.empty()) {
      json k{{"family", sg.group.kernel.family}, {"params", json::object()}};
      for (const auto& [name, value] : sg.group.kernel.params) k["params"][name] = value;
      if (!sg.group.kernel.rejected.empty()) k["rejected"] = sg.group.kernel.rejected;
      g["kernel"] = std::move(k);
    }
    g["predicted"] = write_cost(sg.predicted);
    if (sg.measured_s) g["measured_s"] = number(*sg.measured_s);
    if (!sg.kind_choice.empty()) g["kind_choice"] = sg.kind_choice;
    if (!sg.trials.empty()) {
      g["trials"] = json::array();
      for (const TuneTrial& t : sg.trials) {
        json tj{{"tiles", t.tiles}, {"family", t.family}, {"params", t.params}, {"predicted_s", number(t.predicted_s)}};
        if (t.measured_s) tj["measured_s"] = number(*t.measured_s);
        if (!t.failure.empty()) tj["failure"] = t.failure;
        g["trials"].push_back(std::move(tj));
      }
    }
    doc["groups"].push_back(std::move(g));
  }
  doc["unfused"] = json::array();
  for (const UnfusedEdge& e : s.unfused)
    doc["unfused"].push_back(json{{"tensor", tensor_name(e.tensor)},
                                  {"producer", node_name(e.producer)},
                                  {"consumer", node_name(e.consumer)},
                                  {"reason", std::string(unfused_reason_name(e.reason))},
                                  {"detail", e.detail}});
  return doc.dump(1) + "\n";
}

Schedule schedule_from_json(const std::string& text, const std::string& file, const OpGraph& graph) {
  // Strict: malformed text and repeated keys are UserErrors with the place.
  const json doc = json_util::parse_strict(text, file);
  try {
    return Reader(file, graph).read(doc);
  } catch (const json::exception& e) {
    throw InternalError(cat("schedule reader: unexpected nlohmann exception: ", e.what()));
  }
}

}  // namespace tessel
