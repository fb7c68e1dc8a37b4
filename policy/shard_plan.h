// Choosing how a graph is spread over a device mesh (docs/distributed.md, "Plan search").
//
// For every node the policy picks which loop axis each mesh axis splits (tilegraph/sharding.h);
// the layouts of all tensors follow, and a collective runs wherever a consumer needs a tensor in
// another layout than its producer made. A plan is priced as the sum over nodes of each device's
// share of the work (a roofline of the node on the spec's device: FLOPs over the peak, bytes over
// DRAM bandwidth, whichever is longer) plus every collective's time on the spec's interconnect
// (cost_model/collective_cost.h), with no overlap.
//
// The search: a forward pass picks for each node, in topological order, the choice cheapest given
// what its producers chose; then passes of coordinate descent re-choose one node at a time with
// the whole plan re-priced, until none improves. For small graphs (the product of the nodes'
// choice counts at most `exhaustive_limit`) every plan is enumerated, which gives the optimum to
// measure the heuristic against (ShardSearch::exact).
//
// For larger graphs z3 bounds the heuristic (ShardSearchOptions::z3_bound_ms): it minimizes a
// relaxation of the same price over every plan at once -- each node's roofline time exactly, and
// per tensor the cheapest of the conversions its consumers need from its producer's layout (the
// exact communication when each tensor is needed in one layout besides its own; where consumers
// need several, the pricer converts from layouts held earlier and pays each, so the relaxation is
// below it). Its optimum is a lower bound on every plan's price (ShardBound::lower_s); the plan
// z3 finds is priced exactly and kept when it beats the heuristic's.
//
// A memory cap per device (weights only) makes plans over it lose to every plan within it.
//
// Constraints in the nnScaler style pin tensors to layouts: `x=S0` gives input x sharded along its
// dimension 0 over the first mesh axis, `w1=R,S1` pins a weight on a 2-D mesh. Nodes whose
// choices disagree with a pin are not considered.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/collective_cost.h"
#include "hw_specs/hw_spec.h"
#include "tilegraph/spmd.h"

namespace tessel {

/// "S0", "R", "P(sum)" per mesh axis, comma-separated ("S0,R"); UserError naming `what`.
TensorLayout parse_layout(const std::string& text, const Mesh& mesh, const std::string& what);

struct ShardConstraints {
  std::map<std::string, TensorLayout> pins;  // tensor name -> layout
};

/// `NAME=LAYOUT` (parse_layout), added to `into`; UserError naming the flag otherwise.
void parse_pin(const std::string& text, const Mesh& mesh, ShardConstraints& into);

/// One collective of a priced plan.
struct PlannedTransfer {
  std::string tensor;
  std::string consumer;  // the node that needs it, or "output"
  LayoutStep step;
  TensorLayout before;
  CollectiveCost cost;   // a shift: one step's
  double exposed_s = 0;  // a shift: the time its P - 1 steps add beyond the node's pieces
  bool overlapped = false;
};

struct PlanCost {
  double compute_s = 0;      // sum of the nodes' per-device roofline times
  double communication_s = 0;
  double total_s() const { return compute_s + communication_s; }
  int64_t weight_bytes_per_device = 0;  // the most any device holds
  bool fits = true;                     // within ShardSearchOptions::memory_per_device_bytes
  std::vector<PlannedTransfer> transfers;
};

/// The per-device roofline time of `node` split as `sharding` on `spec` (see above).
double node_time(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh, const HwSpec& spec);

/// A node run in pieces with one input delivered by ring shifts (ShardPlan::shifted): P pieces,
/// piece s overlapped with the shift that brings block s + 1, then the pieces joined. The pieces
/// and the join are compute; of the shifts only what outlasts the pieces is exposed. The P - 1
/// pieces beside a shift run on the compute units its interconnect level leaves them
/// (InterconnectLevel::overlap_units; the shift is limited to the rest), so they take
///   beside = piece x units / (units - overlap_units);
///   compute = (P - 1) x beside + piece + join,  exposed = (P - 1) x max(0, shift step - beside).
/// The shift's own speed on its limited units and the SMs and memory bandwidth the shift and the
/// pieces share when no units are reserved are not modelled.
struct OverlapPrice {
  LayoutStep step;        // the shift
  CollectiveCost shift;   // one step
  double piece_s = 0, beside_s = 0, join_s = 0, compute_s = 0, exposed_s = 0;
};
OverlapPrice overlap_price(const TeNode& node, const ShiftForm& form, const TensorType& input, const HwSpec& spec, const Mesh& mesh);

/// Prices `plan` (which must pass check_plan) the way partition() would run it.
PlanCost price_plan(const OpGraph& graph, const ShardPlan& plan, const HwSpec& spec);

struct ShardSearchOptions {
  ShardConstraints constraints;
  int64_t exhaustive_limit = 20000;  // enumerate every plan up to this many
  int max_descent_passes = 8;
  /// > 0: the weights each device holds must fit in this many bytes (activations are not
  /// counted); plans over it are priced worse than any plan within it.
  int64_t memory_per_device_bytes = 0;
  /// > 0: after the heuristic, z3 bounds it within this many milliseconds (see above).
  int64_t z3_bound_ms = 0;
  /// Ring-shift overlap (ShardPlan::shifted) for nodes whose input is all-gathered: chosen where
  /// the model prices it lower (automatic), wherever it can run (on), or never (off). Chosen after
  /// the search and z3's bound, which price plans without it (a plan with shifts can price below
  /// the bound).
  enum class Overlap : uint8_t { automatic, on, off };
  Overlap overlap = Overlap::automatic;
};

/// "auto", "on", "off"; UserError naming `what` otherwise.
ShardSearchOptions::Overlap parse_overlap(const std::string& text, const std::string& what);

/// Sets plan.shifted for every node whose input the plan all-gathers and which can run on ring
/// shifts instead, one node at a time in topological order: where the whole plan then prices
/// lower (automatic) or wherever it can (on); off clears it.
void choose_overlap(const OpGraph& graph, ShardPlan& plan, const HwSpec& spec, ShardSearchOptions::Overlap mode);

/// What z3 proved about the search's problem (ShardSearchOptions::z3_bound_ms).
struct ShardBound {
  double lower_s = 0;     // no plan is priced below this
  bool optimal = false;   // z3 finished: lower_s is the relaxation's optimum, else its bound when time ran out
  bool has_plan = false;  // z3 found a plan (the relaxation's best so far)
  ShardPlan plan;
  double plan_s = 0;      // that plan priced exactly (price_plan)
  double seconds = 0;
  int64_t choices = 0;    // the encoding's choice variables
  std::string why_not;    // non-empty: no bound (z3 gave up, or no plan satisfies the memory cap)
};

struct ShardSearch {
  ShardPlan plan;
  PlanCost cost;
  bool exact = false;          // every plan was enumerated: `plan` is the optimum under the model
  int64_t plans_priced = 0;
  double greedy_s = 0;         // the forward pass's plan, before descent
  double heuristic_s = 0;      // the plan the forward pass and descent (or the enumeration) found
  double seconds = 0;          // search time
  std::optional<ShardBound> bound;  // with z3_bound_ms; `plan` is z3's where it priced lower
};

/// The cheapest plan found for `graph` on `mesh` with `spec`'s device and interconnect. UserError
/// when the spec cannot price collectives on the mesh, a pin names no tensor or cannot hold, or
/// no node choice satisfies the pins.
ShardSearch search_shard_plan(const OpGraph& graph, const Mesh& mesh, const HwSpec& spec,
                              const ShardSearchOptions& options = {});

/// A readable report: the mesh, each node's split, every collective with its bytes, level and
/// predicted time, the totals.
std::string format_shard_plan(const OpGraph& graph, const ShardPlan& plan, const PlanCost& cost, const HwSpec& spec);

}  // namespace tessel
