// MeasureCache: a persistent cache of measured kernel times, so that tuning a model a second time
// (or a model sharing layers with one tuned before) measures nothing it has measured already.
// Policies given a Measurer (policy.h) go through it.
//
// A measurement is keyed by what determines it: the group (its printed nodes without their names,
// how they connect, their tile configs and edge levels: group_canonical_hash), the chip
// (hw_spec_hash), the policy and its options as text, the Tessel version, and what else the
// measurer says sets its times (Measurer::context: the threads a CPU rank of a mesh runs with). The cache is one
// JSON file, `measurements.json`, in a directory (default_measure_cache_dir()); every store
// rewrites it atomically (a temporary file, then rename), and a file that cannot be read as a
// cache is ignored and rebuilt by the next store.
//
//   MeasureCache cache("/tmp/tessel-cache");
//   std::optional<double> s = cache.measure(measurer, graph, group, spec, "roller top_k=8 ...");
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "policy/policy.h"

namespace tessel {

/// The Tessel version that keys cached measurements (a new version measures again).
inline constexpr const char* kTesselVersion = "0.1.0";

struct MeasureKey {
  uint64_t group_hash = 0;    // group_canonical_hash
  uint64_t hw_spec_hash = 0;  // hw_spec_hash(spec)
  std::string policy;         // policy name and options, e.g. "roller top_k=8 max_padding_waste=0.25"
  std::string version = kTesselVersion;
  std::string context;        // Measurer::context(): e.g. "threads=2"; empty: none

  bool operator<(const MeasureKey& o) const {
    return std::tie(group_hash, hw_spec_hash, policy, version, context) <
           std::tie(o.group_hash, o.hw_spec_hash, o.policy, o.version, o.context);
  }
  bool operator==(const MeasureKey&) const = default;
};

/// A stable 64-bit hash (FNV-1a) of the group's canonical text: per node, print_node without
/// the node's name and with its inputs named by their position in the group ("g0", ...) or as
/// external ("x"), then its printed tile config; then the edge levels by position; then the
/// recorded kernel family and parameters, when there are; for a block-sparse node, its blocks,
/// density and the pattern of its weight's non-zero blocks. Two groups
/// computing the same thing with the same tiles hash equal whatever their nodes are called.
uint64_t group_canonical_hash(const OpGraph& graph, const ScheduledGroup& group);

/// `$XDG_CACHE_HOME/tessel`, else `$HOME/.cache/tessel`, else `.tessel-cache`.
std::string default_measure_cache_dir();

class MeasureCache {
 public:
  /// Opens (does not create) the cache in `directory`; the directory is created on the first
  /// store. A missing file is an empty cache; a corrupt one is ignored (corrupt() says so).
  explicit MeasureCache(std::string directory);

  /// The cached seconds for `key`, if any.
  std::optional<double> lookup(const MeasureKey& key) const;
  /// Records a measurement and rewrites the file atomically. A file that cannot be written is a
  /// UserError naming it.
  void store(const MeasureKey& key, double seconds);
  /// The cached time of `group`, or measures it with `measurer` and stores the result (an
  /// unmeasurable group is not stored).
  std::optional<double> measure(Measurer& measurer, const OpGraph& graph, const ScheduledGroup& group,
                                const HwSpec& spec, const std::string& policy);

  /// The cache file: `<directory>/measurements.json`.
  const std::string& file() const { return file_; }
  size_t size() const { return entries_.size(); }
  /// True when the file existed but could not be read as a cache (it is rebuilt on store).
  bool corrupt() const { return corrupt_; }

 private:
  std::string directory_, file_;
  std::map<MeasureKey, double> entries_;
  bool corrupt_ = false;
};

}  // namespace tessel
