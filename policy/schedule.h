// Schedule: what a policy decides for a whole OpGraph on one chip -- fused groups (one kernel
// each), the memory level of every intermediate inside a group, tile configs per level for every
// node, the predicted cost of each group, and every edge that was NOT fused with the reason.
// Plain data; JSON round trip in schedule_json.h (nodes and tensors referred to by name, so a
// saved schedule replays on the same model lowered again).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/cost_model.h"

namespace tessel {

/// One candidate of a group that a tuning policy measured (`--tune K`, policy/tune.h).
struct TuneTrial {
  std::string tiles;                   // per node "name: tile config", "; "-joined
  std::string family;                  // the kernel family it is emitted as ("" without a backend)
  std::string params;                  // the family's parameters, "name=value ..."
  double predicted_s = 0;              // the cost model's prediction
  std::optional<double> measured_s;    // nullopt: not measurable (`failure` says why)
  std::string failure;
};

/// One kernel: the group the cost model prices, and what it predicted.
struct ScheduleGroup {
  ScheduledGroup group;     // nodes (topological, sink last), tiles per node, edge levels
  CostBreakdown predicted;  // from the schedule's cost model
  /// Set when a tuning policy measured the group's candidates and kept the fastest: its time.
  std::optional<double> measured_s;
  /// The candidates measured, the cost model's order (its top-1 first); empty when not tuned.
  std::vector<TuneTrial> trials;
  /// For a contraction reading a sparse weight: the tile kind chosen and why (sparse_kinds.h).
  std::string kind_choice{};
};

/// Why an edge between two nodes ended up in device memory.
enum class UnfusedReason : uint8_t {
  capacity,  // the fused group would not fit (shared memory, registers, threads)
  grid,      // the nodes need different tile grids (check_grid's reason)
  cost,      // fusing fits but the cost model predicts it slower
  policy,    // the policy never fuses (roller: one operator per group)
};
std::string_view unfused_reason_name(UnfusedReason r);

struct UnfusedEdge {
  TensorId tensor = -1;
  NodeId producer = -1, consumer = -1;
  UnfusedReason reason = UnfusedReason::policy;
  std::string detail;  // the numbers: "needs 300 KiB shared memory per block, limit 227 KiB"
};

struct Schedule {
  std::string policy;      // "roller", "welder", "z3"
  std::string cost_model;  // "analytic"
  std::string hw_spec;     // HwSpec::name
  uint64_t hw_spec_hash = 0;
  std::vector<ScheduleGroup> groups;  // in an order that respects data dependences
  std::vector<UnfusedEdge> unfused;
  double predicted_latency_s = 0;     // sum over groups
};

/// The group index of every node (-1 if unscheduled).
std::vector<int> group_of_nodes(const OpGraph& graph, const Schedule& schedule);

/// Records every producer -> consumer edge between two of `schedule`'s groups as unfused, with
/// `reason` and `detail` (consumers in topological order, a tensor read twice once): for policies
/// whose groups are final before the edges are (roller's one node per group, Python policies').
void record_edges_between_groups(const OpGraph& graph, Schedule& schedule, UnfusedReason reason, const std::string& detail);

}  // namespace tessel
