// Reading, validating, writing and printing hardware specs (hw_spec.h).
//
// Reading parses the text with nlohmann_json (rejecting duplicate keys), resolves "extends" by
// deep-merging the spec onto its base, then walks the merged document section by section, checking
// every key and value. Every problem is a UserError with the file, a JSON pointer into the merged
// document and the offending value; nlohmann exceptions never escape (one that does is a Tessel
// bug and becomes an InternalError).
//
// Writing builds an ordered document with a fixed key order and prints it with the same pretty
// printer as model files: 2-space indent, containers that fit in 100 columns on one line.
#include "hw_specs/hw_spec.h"

#include "tilegraph/import/json_util.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tilegraph/error.h"
#include "tilegraph/files.h"

namespace tessel {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr size_t kLineWidth = 100;

// "a, b, c".
std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
constexpr std::string_view kScopeNames[] = {"thread", "warp", "block",  "cluster",
                                            "sm",     "core", "device", "host"};

// ---------------------------------------------------------------------------------------------
// JSON helpers: pointers, value descriptions, duplicate-key check, parsing.

using json_util::child;
using json_util::describe;
using json_util::dump_safe;
using json_util::quoted;
using json_util::render_inline;

/// nlohmann keeps the last of two equal keys; a spec with one is rejected instead.
json parse_text(const std::string& text, const std::string& file) { return json_util::parse_strict(text, file); }

std::string read_text(const std::string& path, const std::string& referrer, const std::string& ptr) {
  return read_regular_file(path, kMaxSpecFileBytes, "the hardware spec", referrer, ptr);
}

// ---------------------------------------------------------------------------------------------
// "extends": the base spec is loaded (recursively), then the extending document is merged onto
// it. Objects merge key by key, and a key set to null removes the inherited one (as in a JSON
// merge patch, RFC 7386: an AMD spec extending an Intel one drops its AMX entries); lists whose
// elements are all objects with a "name" merge element by element by name (a new name is
// appended); anything else is replaced.

bool named_list(const json& j) {
  return j.is_array() && std::all_of(j.begin(), j.end(), [](const json& e) {
           return e.is_object() && e.contains("name") && e["name"].is_string();
         });
}

json merge(json base, const json& over) {
  if (over.is_object() && (base.is_object() || base.is_null())) {
    if (base.is_null()) base = json::object();  // a new object: its nulls are dropped too
    for (const auto& [key, value] : over.items()) {
      if (value.is_null()) {
        base.erase(key);
        continue;
      }
      base[key] = merge(base.contains(key) ? base[key] : json(), value);
    }
    return base;
  }
  if (named_list(base) && named_list(over)) {
    for (const json& element : over) {
      auto same = [&](const json& e) { return e["name"] == element["name"]; };
      auto it = std::find_if(base.begin(), base.end(), same);
      if (it == base.end())
        base.push_back(element);
      else
        *it = merge(*it, element);
    }
    return base;
  }
  return over;
}

json resolve_extends(json doc, const std::string& file, std::vector<std::string> chain) {
  if (!doc.is_object() || !doc.contains("extends")) return doc;
  const json& ext = doc["extends"];
  if (!ext.is_string() || ext.get<std::string>().empty())
    throw UserError(file, "/extends", cat("expected the path of a spec file, got ", describe(ext)));
  const fs::path base_path = fs::path(file).parent_path() / ext.get<std::string>();
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(base_path, ec);
  if (ec) canonical = base_path.lexically_normal();
  if (std::find(chain.begin(), chain.end(), canonical.string()) != chain.end()) {
    std::string cycle;
    for (const std::string& c : chain) cycle += fs::path(c).filename().string() + " -> ";
    throw UserError(file, "/extends",
                    cat("cycle in \"extends\": ", cycle, canonical.filename().string()));
  }
  chain.push_back(canonical.string());
  const std::string base_file = base_path.string();
  json base = parse_text(read_text(base_file, file, "/extends"), base_file);
  base = resolve_extends(std::move(base), base_file, std::move(chain));
  if (!base.is_object())
    throw UserError(base_file, "", cat("expected an object, got ", describe(base)));
  doc.erase("extends");
  return merge(std::move(base), doc);
}

// ---------------------------------------------------------------------------------------------
// Reading: one member function per section. `ptr` is always the JSON pointer of the value read.

class SpecReader {
 public:
  explicit SpecReader(std::string file) : file_(std::move(file)) {}
  HwSpec read(const json& doc);

 private:
  [[noreturn]] void fail(const std::string& ptr, const std::string& message) const {
    throw UserError(file_, ptr, message);
  }
  [[noreturn]] void expected(const std::string& ptr, const char* what, const json& got) const {
    fail(ptr, cat("expected ", what, ", got ", describe(got)));
  }

  void check_keys(const json& j, const std::string& ptr, std::initializer_list<const char*> required,
                  std::initializer_list<const char*> optional) const;
  std::string string_at(const json& j, const std::string& ptr) const;
  std::string name_at(const json& j, const std::string& ptr) const;  // non-empty
  bool bool_at(const json& j, const std::string& ptr) const;
  int64_t int_at(const json& j, const std::string& ptr, int64_t min) const;
  double number_at(const json& j, const std::string& ptr, bool positive) const;  // > 0 or >= 0
  DType dtype_key(const std::string& key, const std::string& ptr) const;
  std::map<DType, double> peaks_at(const json& j, const std::string& ptr) const;

  MemoryLevel level_at(const json& j, const std::string& ptr) const;
  ComputeSpec compute_at(const json& j, const std::string& ptr) const;
  LimitSpec limits_at(const json& j, const std::string& ptr, const std::string& kind) const;
  InterconnectSpec interconnect_at(const json& j, const std::string& ptr) const;
  TargetSpec target_at(const json& j, const std::string& ptr, const std::string& kind) const;
  void check_levels(const json& j, const std::vector<MemoryLevel>& levels) const;

  std::string file_;
};

void SpecReader::check_keys(const json& j, const std::string& ptr,
                            std::initializer_list<const char*> required,
                            std::initializer_list<const char*> optional) const {
  if (!j.is_object()) expected(ptr, "an object", j);
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture one
    auto same = [&](const char* k) { return key == k; };
    if (std::any_of(required.begin(), required.end(), same) ||
        std::any_of(optional.begin(), optional.end(), same))
      continue;
    std::string names;
    for (const char* k : required) names += std::string(names.empty() ? "" : ", ") + k;
    for (const char* k : optional) names += std::string(names.empty() ? "" : ", ") + k;
    fail(child(ptr, key), cat("unknown key ", quoted(key), " (expected one of: ", names, ")"));
  }
  for (const char* k : required)
    if (!j.contains(k)) fail(ptr, cat("missing key \"", k, "\""));
}

std::string SpecReader::string_at(const json& j, const std::string& ptr) const {
  if (!j.is_string()) expected(ptr, "a string", j);
  return j.get<std::string>();
}

std::string SpecReader::name_at(const json& j, const std::string& ptr) const {
  std::string s = string_at(j, ptr);
  if (s.empty()) fail(ptr, "expected a non-empty string, got \"\"");
  return s;
}

bool SpecReader::bool_at(const json& j, const std::string& ptr) const {
  if (!j.is_boolean()) expected(ptr, "true or false", j);
  return j.get<bool>();
}

int64_t SpecReader::int_at(const json& j, const std::string& ptr, int64_t min) const {
  if (!j.is_number_integer()) expected(ptr, "an integer", j);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(ptr, cat("integer ", describe(j), " does not fit in int64"));
  const int64_t v = j.get<int64_t>();
  if (v < min) fail(ptr, cat("expected an integer >= ", min, ", got ", v));
  return v;
}

double SpecReader::number_at(const json& j, const std::string& ptr, bool positive) const {
  if (!j.is_number()) expected(ptr, "a number", j);
  const double v = j.get<double>();
  if (positive && !(v > 0)) fail(ptr, cat("expected a positive number, got ", describe(j)));
  if (!positive && !(v >= 0)) fail(ptr, cat("expected a number >= 0, got ", describe(j)));
  return v;
}

DType SpecReader::dtype_key(const std::string& key, const std::string& ptr) const {
  if (std::optional<DType> t = parse_dtype(key)) return *t;
  std::string names;
  for (int t = 0; t <= static_cast<int>(DType::boolean); ++t)
    names += std::string(t ? ", " : "") + std::string(dtype_name(static_cast<DType>(t)));
  fail(ptr, cat("unknown dtype ", quoted(key), " (expected one of: ", names, ")"));
}

std::map<DType, double> SpecReader::peaks_at(const json& j, const std::string& ptr) const {
  if (!j.is_object()) expected(ptr, "an object of dtype: TFLOP/s", j);
  std::map<DType, double> out;
  for (const auto& [key, value] : j.items())
    out[dtype_key(key, child(ptr, key))] = number_at(value, child(ptr, key), true);
  return out;
}

MemoryLevel SpecReader::level_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr,
             {"name", "scope", "capacity_bytes", "instances", "bandwidth_gbps", "transaction_bytes",
              "software_managed"},
             {"banks", "bank_width_bytes", "cache", "latency_ns", "loaded_latency_ns", "source"});
  MemoryLevel level;
  level.name = name_at(j["name"], child(ptr, "name"));
  const std::string scope = string_at(j["scope"], child(ptr, "scope"));
  if (std::optional<MemoryScope> s = parse_scope(scope)) {
    level.scope = *s;
  } else {
    std::string names;
    for (std::string_view n : kScopeNames) names += std::string(names.empty() ? "" : ", ") + std::string(n);
    fail(child(ptr, "scope"), cat("unknown scope ", quoted(scope), " (expected one of: ", names, ")"));
  }
  level.capacity_bytes = int_at(j["capacity_bytes"], child(ptr, "capacity_bytes"), 1);
  level.instances = int_at(j["instances"], child(ptr, "instances"), 1);
  if (level.capacity_bytes > std::numeric_limits<int64_t>::max() / level.instances)
    fail(ptr, cat("capacity_bytes ", level.capacity_bytes, " x instances ", level.instances,
                  " does not fit in int64"));
  level.bandwidth_gbps = number_at(j["bandwidth_gbps"], child(ptr, "bandwidth_gbps"), true);
  level.transaction_bytes = int_at(j["transaction_bytes"], child(ptr, "transaction_bytes"), 1);
  level.software_managed = bool_at(j["software_managed"], child(ptr, "software_managed"));
  if (j.contains("banks")) level.banks = static_cast<int>(int_at(j["banks"], child(ptr, "banks"), 0));
  if (j.contains("bank_width_bytes"))
    level.bank_width_bytes =
        static_cast<int>(int_at(j["bank_width_bytes"], child(ptr, "bank_width_bytes"), 0));
  if ((level.banks == 0) != (level.bank_width_bytes == 0))
    fail(ptr, cat("banks (", level.banks, ") and bank_width_bytes (", level.bank_width_bytes,
                  ") must both be 0 (not banked) or both be positive"));
  if (j.contains("cache")) {
    const std::string cptr = child(ptr, "cache");
    check_keys(j["cache"], cptr, {"associativity", "shared"}, {});
    if (level.software_managed)
      fail(cptr, cat("level ", quoted(level.name),
                     " is software_managed and cannot also be a hardware cache"));
    level.cache = CacheSpec{
        static_cast<int>(int_at(j["cache"]["associativity"], child(cptr, "associativity"), 0)),
        bool_at(j["cache"]["shared"], child(cptr, "shared"))};
  }
  if (j.contains("latency_ns")) level.latency_ns = number_at(j["latency_ns"], child(ptr, "latency_ns"), false);
  if (j.contains("loaded_latency_ns"))
    level.loaded_latency_ns = number_at(j["loaded_latency_ns"], child(ptr, "loaded_latency_ns"), false);
  if (j.contains("source")) level.source = string_at(j["source"], child(ptr, "source"));
  return level;
}

ComputeSpec SpecReader::compute_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr, {"units", "simd_width", "clock_ghz", "simt_peak_tflops"},
             {"launch_overhead_us", "row_start_cycles", "tensor_peak_tflops", "tensor_core_shapes", "family_efficiency", "source"});
  ComputeSpec c;
  c.units = int_at(j["units"], child(ptr, "units"), 1);
  c.simd_width = int_at(j["simd_width"], child(ptr, "simd_width"), 1);
  c.clock_ghz = number_at(j["clock_ghz"], child(ptr, "clock_ghz"), true);
  if (j.contains("launch_overhead_us"))
    c.launch_overhead_us = number_at(j["launch_overhead_us"], child(ptr, "launch_overhead_us"), false);
  if (j.contains("row_start_cycles")) c.row_start_cycles = number_at(j["row_start_cycles"], child(ptr, "row_start_cycles"), false);
  c.simt_peak_tflops = peaks_at(j["simt_peak_tflops"], child(ptr, "simt_peak_tflops"));
  if (j.contains("tensor_peak_tflops"))
    c.tensor_peak_tflops = peaks_at(j["tensor_peak_tflops"], child(ptr, "tensor_peak_tflops"));
  if (j.contains("family_efficiency")) {
    const std::string fptr = child(ptr, "family_efficiency");
    const json& f = j["family_efficiency"];
    if (!f.is_object()) expected(fptr, "an object of kernel family: fraction of the roofline", f);
    for (const auto& [family, value] : f.items()) {
      const double e = number_at(value, child(fptr, family), true);
      if (e > 1) expected(child(fptr, family), "a fraction in (0, 1]", value);
      c.family_efficiency[family] = e;
    }
  }
  if (j.contains("tensor_core_shapes")) {
    const std::string sptr = child(ptr, "tensor_core_shapes");
    const json& shapes = j["tensor_core_shapes"];
    if (!shapes.is_object()) expected(sptr, "an object of dtype: [{m, n, k}, ...]", shapes);
    for (const auto& [key, list] : shapes.items()) {
      const std::string lptr = child(sptr, key);
      const DType t = dtype_key(key, lptr);
      if (!list.is_array() || list.empty()) expected(lptr, "a non-empty list of {m, n, k}", list);
      std::vector<MmaShape>& out = c.tensor_core_shapes[t];
      for (size_t i = 0; i < list.size(); ++i) {
        const std::string eptr = child(lptr, i);
        check_keys(list[i], eptr, {"m", "n", "k"}, {});
        MmaShape s;
        s.m = static_cast<int>(int_at(list[i]["m"], child(eptr, "m"), 1));
        s.n = static_cast<int>(int_at(list[i]["n"], child(eptr, "n"), 1));
        s.k = static_cast<int>(int_at(list[i]["k"], child(eptr, "k"), 1));
        out.push_back(s);
      }
    }
  }
  if (j.contains("source")) c.source = string_at(j["source"], child(ptr, "source"));
  return c;
}

LimitSpec SpecReader::limits_at(const json& j, const std::string& ptr, const std::string& kind) const {
  static constexpr const char* kGpuFields[] = {
      "max_threads_per_block", "max_threads_per_sm",       "max_blocks_per_sm",  "registers_per_sm",
      "max_registers_per_thread", "smem_per_block_bytes", "smem_per_sm_bytes"};
  check_keys(j, ptr, {},
             {"max_threads_per_block", "max_threads_per_sm", "max_blocks_per_sm", "registers_per_sm",
              "max_registers_per_thread", "smem_per_block_bytes", "smem_per_sm_bytes",
              "max_cluster_blocks", "hardware_threads"});
  LimitSpec l;
  int64_t* fields[] = {&l.max_threads_per_block,    &l.max_threads_per_sm,   &l.max_blocks_per_sm,
                       &l.registers_per_sm,         &l.max_registers_per_thread,
                       &l.smem_per_block_bytes,     &l.smem_per_sm_bytes};
  for (size_t i = 0; i < std::size(kGpuFields); ++i) {
    if (j.contains(kGpuFields[i]))
      *fields[i] = int_at(j[kGpuFields[i]], child(ptr, kGpuFields[i]), kind == "gpu" ? 1 : 0);
    else if (kind == "gpu")
      fail(ptr, cat("missing key \"", kGpuFields[i], "\" (required for kind \"gpu\")"));
  }
  if (j.contains("max_cluster_blocks"))
    l.max_cluster_blocks = int_at(j["max_cluster_blocks"], child(ptr, "max_cluster_blocks"), 0);
  if (j.contains("hardware_threads"))
    l.hardware_threads = int_at(j["hardware_threads"], child(ptr, "hardware_threads"), kind == "cpu" ? 1 : 0);
  else if (kind == "cpu")
    fail(ptr, "missing key \"hardware_threads\" (required for kind \"cpu\")");
  if (l.smem_per_block_bytes > l.smem_per_sm_bytes)
    fail(child(ptr, "smem_per_block_bytes"),
         cat("smem_per_block_bytes ", l.smem_per_block_bytes, " exceeds smem_per_sm_bytes ",
             l.smem_per_sm_bytes));
  if (l.max_threads_per_block > l.max_threads_per_sm && kind == "gpu")
    fail(child(ptr, "max_threads_per_block"),
         cat("max_threads_per_block ", l.max_threads_per_block, " exceeds max_threads_per_sm ",
             l.max_threads_per_sm));
  return l;
}

InterconnectSpec SpecReader::interconnect_at(const json& j, const std::string& ptr) const {
  check_keys(j, ptr, {"devices"}, {"links", "levels", "source"});
  InterconnectSpec ic;
  ic.devices = int_at(j["devices"], child(ptr, "devices"), 1);
  if (j.contains("links")) {
    const std::string lptr = child(ptr, "links");
    if (!j["links"].is_array()) expected(lptr, "a list", j["links"]);
    for (size_t i = 0; i < j["links"].size(); ++i) {
      const json& e = j["links"][i];
      const std::string eptr = child(lptr, i);
      check_keys(e, eptr, {"from", "to", "bandwidth_gbps", "latency_us", "kind"}, {});
      LinkSpec link;
      link.from = static_cast<int>(int_at(e["from"], child(eptr, "from"), 0));
      link.to = static_cast<int>(int_at(e["to"], child(eptr, "to"), 0));
      for (auto [value, key] : {std::pair{link.from, "from"}, std::pair{link.to, "to"}})
        if (value >= ic.devices)
          fail(child(eptr, key), cat("device ", value, " out of range: the node has ", ic.devices,
                                     " devices"));
      if (link.from == link.to) fail(eptr, cat("link from device ", link.from, " to itself"));
      link.bandwidth_gbps = number_at(e["bandwidth_gbps"], child(eptr, "bandwidth_gbps"), true);
      link.latency_us = number_at(e["latency_us"], child(eptr, "latency_us"), false);
      link.kind = name_at(e["kind"], child(eptr, "kind"));
      ic.links.push_back(link);
    }
  }
  if (j.contains("levels")) {
    const std::string lptr = child(ptr, "levels");
    if (!j["levels"].is_array() || j["levels"].empty()) expected(lptr, "a non-empty list", j["levels"]);
    for (size_t i = 0; i < j["levels"].size(); ++i) {
      const json& e = j["levels"][i];
      const std::string eptr = child(lptr, i);
      check_keys(e, eptr, {"name", "devices", "bandwidth_gbps", "latency_us"}, {"collectives", "overlap_units", "source"});
      InterconnectLevel level;
      level.name = name_at(e["name"], child(eptr, "name"));
      level.devices = int_at(e["devices"], child(eptr, "devices"), 1);
      level.bandwidth_gbps = number_at(e["bandwidth_gbps"], child(eptr, "bandwidth_gbps"), true);
      level.latency_us = number_at(e["latency_us"], child(eptr, "latency_us"), false);
      if (e.contains("collectives")) {
        const std::string cptr = child(eptr, "collectives");
        if (!e["collectives"].is_object()) expected(cptr, "an object", e["collectives"]);
        for (const auto& [name, fit] : e["collectives"].items()) {
          const std::string fptr = child(cptr, name);
          if (name != "all_reduce" && name != "all_gather" && name != "reduce_scatter" && name != "all_to_all" && name != "shift")
            fail(fptr, cat("unknown collective \"", name, "\" (all_reduce, all_gather, reduce_scatter, all_to_all, shift)"));
          check_keys(fit, fptr, {"bandwidth_gbps", "latency_us"}, {});
          level.collectives[name] = {number_at(fit["bandwidth_gbps"], child(fptr, "bandwidth_gbps"), true),
                                     number_at(fit["latency_us"], child(fptr, "latency_us"), false)};
        }
      }
      if (e.contains("overlap_units")) level.overlap_units = int_at(e["overlap_units"], child(eptr, "overlap_units"), 0);
      if (e.contains("source")) level.source = string_at(e["source"], child(eptr, "source"));
      const int64_t inner = ic.levels.empty() ? 1 : ic.levels.back().devices;
      if (level.devices <= inner && !ic.levels.empty())
        fail(child(eptr, "devices"), cat(level.devices, " devices: a level must span more devices than the one inside it (", inner, ")"));
      if (level.devices % inner != 0)
        fail(child(eptr, "devices"), cat(level.devices, " devices is not a multiple of the level inside it (", inner, ")"));
      ic.levels.push_back(level);
    }
    if (ic.levels.back().devices != ic.devices)
      fail(child(lptr, j["levels"].size() - 1), cat("the outermost level spans ", ic.levels.back().devices,
                                                     " devices; the system has ", ic.devices));
  }
  if (j.contains("source")) ic.source = string_at(j["source"], child(ptr, "source"));
  return ic;
}

TargetSpec SpecReader::target_at(const json& j, const std::string& ptr, const std::string& kind) const {
  check_keys(j, ptr, {"backend", "arch", "triple"}, {"cpu_features", "gpu_features"});
  TargetSpec t;
  t.backend = string_at(j["backend"], child(ptr, "backend"));
  if (t.backend != "cuda" && t.backend != "llvm")
    fail(child(ptr, "backend"), cat("unknown backend ", quoted(t.backend), " (expected \"cuda\" or \"llvm\")"));
  const std::string wanted = kind == "gpu" ? "cuda" : "llvm";
  if (t.backend != wanted)
    fail(child(ptr, "backend"), cat("backend ", quoted(t.backend), " does not generate code for kind ",
                                    quoted(kind), " (expected ", quoted(wanted), ")"));
  t.arch = name_at(j["arch"], child(ptr, "arch"));
  t.triple = name_at(j["triple"], child(ptr, "triple"));
  if (j.contains("cpu_features")) {
    const std::string fptr = child(ptr, "cpu_features");
    if (!j["cpu_features"].is_array()) expected(fptr, "a list of strings", j["cpu_features"]);
    for (size_t i = 0; i < j["cpu_features"].size(); ++i)
      t.cpu_features.push_back(name_at(j["cpu_features"][i], child(fptr, i)));
  }
  // GPUs list their instruction features (hw_spec.h); the code generators ask for them, so a spec
  // without the list would silently lose the tensor-core paths: it is required.
  const std::string gptr = child(ptr, "gpu_features");
  if (kind == "gpu" && !j.contains("gpu_features"))
    fail(gptr, cat("a GPU target lists its instruction features, e.g. [\"mma_sync\", \"cp_async\", \"ldmatrix\"] (known: ",
                   join_names(known_gpu_features()), ")"));
  if (j.contains("gpu_features")) {
    if (kind != "gpu") fail(gptr, cat("only GPU specs list gpu_features (this one is kind ", quoted(kind), ")"));
    if (!j["gpu_features"].is_array()) expected(gptr, "a list of strings", j["gpu_features"]);
    for (size_t i = 0; i < j["gpu_features"].size(); ++i) {
      const std::string f = name_at(j["gpu_features"][i], child(gptr, i));
      const auto& known = known_gpu_features();
      if (std::find(known.begin(), known.end(), f) == known.end())
        fail(child(gptr, i), cat("unknown GPU feature ", quoted(f), " (known: ", join_names(known), ")"));
      if (std::find(t.gpu_features.begin(), t.gpu_features.end(), f) != t.gpu_features.end())
        fail(child(gptr, i), cat("GPU feature ", quoted(f), " is listed twice"));
      t.gpu_features.push_back(f);
    }
  }
  return t;
}

/// Names are unique, and capacities grow outward:
///   - a hardware-managed level (a cache, or the outermost level) holds, per chip, at least one
///     instance of the level inward of it. Not all instances: Sapphire Rapids has 56 x 2 MB of L2
///     and a 105 MB L3;
///   - the outermost level holds, per chip, at least as much as every other level.
/// Software-managed levels are exempt from the first rule: a GPU's register file is larger than
/// its shared memory (H100: 256 KB vs 228 KB per SM).
void SpecReader::check_levels(const json& j, const std::vector<MemoryLevel>& levels) const {
  const size_t last = levels.size() - 1;
  for (size_t i = 0; i < levels.size(); ++i) {
    const MemoryLevel& level = levels[i];
    const std::string ptr = child("/memory_levels", i);
    for (size_t k = 0; k < i; ++k)
      if (levels[k].name == level.name)
        fail(child(ptr, "name"), cat("duplicate memory level ", quoted(level.name), " (also /memory_levels/", k, ")"));
    if (i == 0 || (level.software_managed && i != last)) continue;
    const MemoryLevel& inner = levels[i - 1];
    if (level.chip_capacity_bytes() < inner.capacity_bytes)
      fail(child(ptr, "capacity_bytes"),
           cat("level ", quoted(level.name), " holds ", level.chip_capacity_bytes(), " bytes per chip (",
               level.capacity_bytes, " x ", level.instances, "), less than one instance of the level inward, ",
               quoted(inner.name), ", with ", inner.capacity_bytes,
               " bytes; levels are listed from the registers outward"));
  }
  for (size_t i = 0; i < last; ++i)
    if (levels[last].chip_capacity_bytes() < levels[i].chip_capacity_bytes())
      fail(child(child("/memory_levels", last), "capacity_bytes"),
           cat("the outermost level, ", quoted(levels[last].name), ", holds ", levels[last].chip_capacity_bytes(),
               " bytes per chip, less than ", quoted(levels[i].name), " with ", levels[i].chip_capacity_bytes(),
               " bytes (", levels[i].capacity_bytes, " x ", levels[i].instances, ")"));
}

HwSpec SpecReader::read(const json& doc) {
  check_keys(doc, "", {"name", "kind", "memory_levels", "compute", "limits", "target"},
             {"description", "interconnect", "source"});
  HwSpec spec;
  spec.file = file_;
  spec.name = name_at(doc["name"], "/name");
  if (doc.contains("description")) spec.description = string_at(doc["description"], "/description");
  spec.kind = string_at(doc["kind"], "/kind");
  if (spec.kind != "gpu" && spec.kind != "cpu")
    fail("/kind", cat("unknown kind ", quoted(spec.kind), " (expected \"gpu\" or \"cpu\")"));
  const json& levels = doc["memory_levels"];
  if (!levels.is_array() || levels.empty())
    expected("/memory_levels", "a non-empty list of memory levels", levels);
  for (size_t i = 0; i < levels.size(); ++i)
    spec.memory_levels.push_back(level_at(levels[i], child("/memory_levels", i)));
  check_levels(levels, spec.memory_levels);
  spec.compute = compute_at(doc["compute"], "/compute");
  spec.limits = limits_at(doc["limits"], "/limits", spec.kind);
  if (doc.contains("interconnect")) spec.interconnect = interconnect_at(doc["interconnect"], "/interconnect");
  spec.target = target_at(doc["target"], "/target", spec.kind);
  if (doc.contains("source")) spec.source = string_at(doc["source"], "/source");
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Writing.

ordered_json peaks_json(const std::map<DType, double>& peaks) {
  ordered_json out = ordered_json::object();
  for (const auto& [t, v] : peaks) out[std::string(dtype_name(t))] = v;
  return out;
}

ordered_json spec_json(const HwSpec& s) {
  ordered_json doc;
  doc["name"] = s.name;
  doc["description"] = s.description;
  doc["kind"] = s.kind;
  doc["source"] = s.source;
  ordered_json levels = ordered_json::array();
  for (const MemoryLevel& l : s.memory_levels) {
    ordered_json e;
    e["name"] = l.name;
    e["scope"] = std::string(scope_name(l.scope));
    e["capacity_bytes"] = l.capacity_bytes;
    e["instances"] = l.instances;
    e["bandwidth_gbps"] = l.bandwidth_gbps;
    e["transaction_bytes"] = l.transaction_bytes;
    if (l.banks || l.bank_width_bytes) {
      e["banks"] = l.banks;
      e["bank_width_bytes"] = l.bank_width_bytes;
    }
    e["software_managed"] = l.software_managed;
    if (l.cache) e["cache"] = {{"associativity", l.cache->associativity}, {"shared", l.cache->shared}};
    e["latency_ns"] = l.latency_ns;
    if (l.loaded_latency_ns > 0) e["loaded_latency_ns"] = l.loaded_latency_ns;
    e["source"] = l.source;
    levels.push_back(std::move(e));
  }
  doc["memory_levels"] = std::move(levels);

  ordered_json c;
  c["units"] = s.compute.units;
  c["simd_width"] = s.compute.simd_width;
  c["clock_ghz"] = s.compute.clock_ghz;
  c["launch_overhead_us"] = s.compute.launch_overhead_us;
  if (s.compute.row_start_cycles > 0) c["row_start_cycles"] = s.compute.row_start_cycles;
  c["simt_peak_tflops"] = peaks_json(s.compute.simt_peak_tflops);
  c["tensor_peak_tflops"] = peaks_json(s.compute.tensor_peak_tflops);
  ordered_json shapes = ordered_json::object();
  for (const auto& [t, list] : s.compute.tensor_core_shapes) {
    ordered_json l = ordered_json::array();
    for (const MmaShape& m : list) l.push_back(ordered_json{{"m", m.m}, {"n", m.n}, {"k", m.k}});
    shapes[std::string(dtype_name(t))] = std::move(l);
  }
  c["tensor_core_shapes"] = std::move(shapes);
  if (!s.compute.family_efficiency.empty()) {
    ordered_json f = ordered_json::object();
    for (const auto& [family, e] : s.compute.family_efficiency) f[family] = e;
    c["family_efficiency"] = std::move(f);
  }
  c["source"] = s.compute.source;
  doc["compute"] = std::move(c);

  // Zero limits are "not given" and omitted, so a CPU spec shows only hardware_threads.
  const LimitSpec& l = s.limits;
  ordered_json limits = ordered_json::object();
  const std::pair<const char*, int64_t> fields[] = {
      {"max_threads_per_block", l.max_threads_per_block},
      {"max_threads_per_sm", l.max_threads_per_sm},
      {"max_blocks_per_sm", l.max_blocks_per_sm},
      {"registers_per_sm", l.registers_per_sm},
      {"max_registers_per_thread", l.max_registers_per_thread},
      {"smem_per_block_bytes", l.smem_per_block_bytes},
      {"smem_per_sm_bytes", l.smem_per_sm_bytes},
      {"max_cluster_blocks", l.max_cluster_blocks},
      {"hardware_threads", l.hardware_threads}};
  for (const auto& [key, value] : fields)
    if (value != 0) limits[key] = value;
  doc["limits"] = std::move(limits);

  ordered_json ic;
  ic["devices"] = s.interconnect.devices;
  ic["links"] = ordered_json::array();
  for (const LinkSpec& k : s.interconnect.links)
    ic["links"].push_back(ordered_json{{"from", k.from}, {"to", k.to}, {"bandwidth_gbps", k.bandwidth_gbps},
                                       {"latency_us", k.latency_us}, {"kind", k.kind}});
  if (!s.interconnect.levels.empty()) {
    ic["levels"] = ordered_json::array();
    for (const InterconnectLevel& l : s.interconnect.levels) {
      ordered_json e{{"name", l.name}, {"devices", l.devices}, {"bandwidth_gbps", l.bandwidth_gbps}, {"latency_us", l.latency_us}};
      if (!l.collectives.empty()) {
        ordered_json c = ordered_json::object();
        for (const auto& [name, fit] : l.collectives)
          c[name] = ordered_json{{"bandwidth_gbps", fit.bandwidth_gbps}, {"latency_us", fit.latency_us}};
        e["collectives"] = std::move(c);
      }
      if (l.overlap_units > 0) e["overlap_units"] = l.overlap_units;
      if (!l.source.empty()) e["source"] = l.source;
      ic["levels"].push_back(std::move(e));
    }
  }
  ic["source"] = s.interconnect.source;
  doc["interconnect"] = std::move(ic);

  ordered_json t;
  t["backend"] = s.target.backend;
  t["arch"] = s.target.arch;
  t["triple"] = s.target.triple;
  t["cpu_features"] = s.target.cpu_features;
  if (s.kind == "gpu") t["gpu_features"] = s.target.gpu_features;
  doc["target"] = std::move(t);
  return doc;
}

void render_pretty(const ordered_json& j, size_t indent, size_t column, std::string& out) {
  std::string line;
  if (!j.is_structured() || j.empty() ||
      (column < kLineWidth && render_inline(j, line, kLineWidth - column))) {
    if (line.empty()) render_inline(j, line, std::string::npos);
    out += line;
    return;
  }
  const std::string pad(indent + 2, ' ');
  out += j.is_object() ? "{" : "[";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string prefix = j.is_object() ? dump_safe(ordered_json(it.key())) + ": " : "";
    out += (first ? "\n" : ",\n") + pad + prefix;
    first = false;
    render_pretty(it.value(), indent + 2, pad.size() + prefix.size(), out);
  }
  out += "\n" + std::string(indent, ' ') + (j.is_object() ? "}" : "]");
}

// ---------------------------------------------------------------------------------------------
// The table.

std::string bytes_text(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == std::floor(v) ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string pad_right(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}
std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? " " + s : std::string(width - s.size(), ' ') + s;
}

}  // namespace

std::string_view scope_name(MemoryScope scope) { return kScopeNames[static_cast<int>(scope)]; }

std::optional<MemoryScope> parse_scope(std::string_view name) {
  for (size_t i = 0; i < std::size(kScopeNames); ++i)
    if (kScopeNames[i] == name) return static_cast<MemoryScope>(i);
  return std::nullopt;
}

const MemoryLevel& HwSpec::level(std::string_view level_name) const {
  const int i = level_index(level_name);
  if (i >= 0) return memory_levels[i];
  std::string names;
  for (const MemoryLevel& l : memory_levels) names += (names.empty() ? "" : ", ") + l.name;
  throw UserError(file, "/memory_levels",
                  cat("hardware spec ", quoted(name), " has no memory level ",
                      quoted(std::string(level_name)), " (it has: ", names, ")"));
}

int HwSpec::level_index(std::string_view level_name) const {
  for (size_t i = 0; i < memory_levels.size(); ++i)
    if (memory_levels[i].name == level_name) return static_cast<int>(i);
  return -1;
}

const std::vector<std::string>& known_gpu_features() {
  static const std::vector<std::string> known{"mma_sync", "mma_sparse", "cp_async", "ldmatrix", "wgmma", "tma"};
  return known;
}

bool TargetSpec::has_gpu_feature(std::string_view feature) const {
  return std::find(gpu_features.begin(), gpu_features.end(), feature) != gpu_features.end();
}

int64_t HwSpec::last_level_cache_bytes() const {
  int64_t bytes = 0;
  for (const MemoryLevel& l : memory_levels)
    if (l.cache) bytes = l.chip_capacity_bytes();  // levels run registers outward: the last one wins
  return bytes;
}

double HwSpec::peak_flops(DType dtype, bool tensor_cores) const {
  const auto& peaks = tensor_cores ? compute.tensor_peak_tflops : compute.simt_peak_tflops;
  auto it = peaks.find(dtype);
  return it == peaks.end() ? 0.0 : it->second * 1e12;
}

HwSpec parse_hw_spec(const std::string& text, const std::string& file) {
  try {
    std::error_code ec;
    fs::path self = fs::weakly_canonical(fs::path(file), ec);
    if (ec) self = fs::path(file).lexically_normal();
    const json doc = resolve_extends(parse_text(text, file), file, {self.string()});
    return SpecReader(file).read(doc);
  } catch (const json::exception& e) {  // every access is type-checked first: this is a bug
    throw InternalError(cat("hw_spec: nlohmann exception escaped while reading ", file, ": ", e.what()));
  }
}

HwSpec load_hw_spec(const std::string& path) { return parse_hw_spec(read_text(path, "", ""), path); }

std::string write_hw_spec(const HwSpec& spec) {
  std::string out;
  render_pretty(spec_json(spec), 0, 0, out);
  return out + "\n";
}

uint64_t hw_spec_hash(const HwSpec& spec) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bit
  for (unsigned char c : write_hw_spec(spec)) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string format_hw_spec_table(const HwSpec& s) {
  std::ostringstream os;
  os << s.name << (s.description.empty() ? "" : ": " + s.description) << "\n";
  os << "  kind " << s.kind << ", target " << s.target.backend << " " << s.target.arch << " ("
     << s.target.triple << ")";
  if (!s.target.cpu_features.empty()) {
    os << ", features";
    for (const std::string& f : s.target.cpu_features) os << " " << f;
  }
  if (s.kind == "gpu") {
    os << ", features";
    for (const std::string& f : s.target.gpu_features) os << " " << f;
    if (s.target.gpu_features.empty()) os << " (none)";
  }
  os << "\n  compute: " << s.compute.units << (s.kind == "gpu" ? " SMs" : " cores") << " x "
     << s.compute.simd_width << (s.kind == "gpu" ? " threads/warp" : " fp32 lanes") << " at "
     << fixed(s.compute.clock_ghz, 2) << " GHz";
  if (s.compute.launch_overhead_us > 0) os << ", launch overhead " << fixed(s.compute.launch_overhead_us, 1) << " us";
  if (s.compute.row_start_cycles > 0) os << ", row start " << fixed(s.compute.row_start_cycles, 0) << " cycles";
  if (!s.compute.family_efficiency.empty()) {
    os << "\n  measured fraction of the roofline per kernel family:";
    for (const auto& [family, e] : s.compute.family_efficiency) os << " " << family << " " << fixed(e, 2);
  }
  os << "\n\n";

  os << "  " << pad_right("dtype", 8) << pad_left("simt TFLOP/s", 14) << pad_left("tensor TFLOP/s", 16)
     << "  tensor-core shapes (m x n x k)\n";
  std::set<DType> dtypes;
  for (const auto& [t, v] : s.compute.simt_peak_tflops) dtypes.insert(t);
  for (const auto& [t, v] : s.compute.tensor_peak_tflops) dtypes.insert(t);
  for (const auto& [t, v] : s.compute.tensor_core_shapes) dtypes.insert(t);
  for (DType t : dtypes) {
    auto value = [&](const std::map<DType, double>& m) {
      auto it = m.find(t);
      if (it == m.end()) return std::string("-");
      return fixed(it->second, it->second < 1 ? 3 : it->second < 10 ? 2 : 1);
    };
    std::string shapes;
    if (auto it = s.compute.tensor_core_shapes.find(t); it != s.compute.tensor_core_shapes.end())
      for (const MmaShape& m : it->second) shapes += cat(shapes.empty() ? "" : ", ", m.m, "x", m.n, "x", m.k);
    os << "  " << pad_right(std::string(dtype_name(t)), 8) << pad_left(value(s.compute.simt_peak_tflops), 14)
       << pad_left(value(s.compute.tensor_peak_tflops), 16) << "  " << shapes << "\n";
  }

  os << "\n  " << pad_right("level", 11) << pad_right("scope", 8) << pad_left("capacity", 11)
     << pad_left("x", 8) << pad_left("per chip", 12) << pad_left("GB/s", 11) << pad_left("txn B", 7)
     << pad_left("banks", 9) << pad_left("lat ns", 8) << "  kind\n";
  for (const MemoryLevel& l : s.memory_levels) {
    std::string kind = l.software_managed ? "software-managed" : "";
    if (l.cache)
      kind = cat("cache, ", l.cache->associativity ? cat(l.cache->associativity, "-way") : std::string("ways ?"),
                 l.cache->shared ? ", shared" : ", private");
    os << "  " << pad_right(l.name, 11) << pad_right(std::string(scope_name(l.scope)), 8)
       << pad_left(bytes_text(l.capacity_bytes), 11) << pad_left(std::to_string(l.instances), 8)
       << pad_left(bytes_text(l.chip_capacity_bytes()), 12) << pad_left(fixed(l.bandwidth_gbps, 0), 11)
       << pad_left(std::to_string(l.transaction_bytes), 7)
       << pad_left(l.banks ? cat(l.banks, "x", l.bank_width_bytes) : std::string("-"), 9)
       << pad_left(l.latency_ns > 0 ? fixed(l.latency_ns, 1) : std::string("-"), 8) << "  " << kind << "\n";
  }

  const LimitSpec& l = s.limits;
  os << "\n  limits:";
  if (s.kind == "gpu")
    os << " " << l.max_threads_per_block << " threads/block, " << l.max_threads_per_sm << " threads/SM, "
       << l.max_blocks_per_sm << " blocks/SM, " << l.registers_per_sm << " registers/SM, "
       << l.max_registers_per_thread << " registers/thread,\n          smem " << bytes_text(l.smem_per_block_bytes)
       << "/block, " << bytes_text(l.smem_per_sm_bytes) << "/SM";
  if (l.max_cluster_blocks) os << ", clusters of up to " << l.max_cluster_blocks << " blocks";
  if (l.hardware_threads) os << (s.kind == "gpu" ? ", " : " ") << l.hardware_threads << " hardware threads";
  os << "\n  interconnect: " << s.interconnect.devices << " device(s)";
  for (const LinkSpec& k : s.interconnect.links)
    os << "; " << k.from << "<->" << k.to << " " << k.kind << " " << fixed(k.bandwidth_gbps, 0)
       << " GB/s per direction, " << fixed(k.latency_us, 1) << " us";
  for (const InterconnectLevel& l : s.interconnect.levels)
    os << "\n    level " << pad_right(l.name, 14) << " domains of " << l.devices << " devices, " << fixed(l.bandwidth_gbps, 0)
       << " GB/s per device per direction, " << fixed(l.latency_us, 1) << " us";
  os << "\n";

  os << "\n  sources:\n";
  auto note = [&](const std::string& what, const std::string& src) {
    if (!src.empty()) os << "    " << pad_right(what, 13) << src << "\n";
  };
  note("spec", s.source);
  note("compute", s.compute.source);
  for (const MemoryLevel& m : s.memory_levels) note(m.name, m.source);
  note("interconnect", s.interconnect.source);
  os << "  hash " << std::hex << hw_spec_hash(s) << std::dec << "\n";
  return os.str();
}

}  // namespace tessel
