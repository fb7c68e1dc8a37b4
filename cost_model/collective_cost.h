// What moving a tensor between devices costs (docs/distributed.md, "Cost").
//
// A layout step along one mesh axis (tilegraph/sharding.h) is a collective among that axis's
// devices. The devices it spans decide the interconnect level it runs at (HwSpec::interconnect's
// levels, innermost first: the innermost whose domains hold every device of the group), and the
// standard ring algorithm its volume: for a tensor of B bytes (the whole along the gathered or
// scattered dimension) over P devices, each device sends and receives
//   all-gather, reduce-scatter   (P - 1) / P x B          in P - 1 steps
//   all-reduce                   2 (P - 1) / P x B        in 2 (P - 1) steps
//   all-to-all                   (P - 1) / P x B_local    in P - 1 steps
//   shift (one ring step)        B_local                  in 1 step
// and the time is steps x the level's latency + volume / the level's per-device bandwidth (or the
// collective's own measured pair, InterconnectLevel::collectives). A slice is free (no bytes move
// between devices).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hw_specs/hw_spec.h"
#include "tilegraph/sharding.h"

namespace tessel {

/// The level a collective among `group` (device numbers) runs at; a group wider than the spec's
/// system runs at its outermost level. nullopt when the spec describes no interconnect (no
/// levels and no links).
std::optional<InterconnectLevel> collective_level(const HwSpec& spec, const std::vector<int64_t>& group);

/// Why `spec` cannot price collectives on `mesh` (no interconnect described), or nullopt. A mesh
/// with more devices than the spec's system is priced at its outermost level (mesh_note says so).
std::optional<std::string> check_mesh(const HwSpec& spec, const Mesh& mesh);
/// A note for reports when the mesh is wider than the spec's system, else "".
std::string mesh_note(const HwSpec& spec, const Mesh& mesh);

struct CollectiveCost {
  double seconds = 0;
  double bytes_per_device = 0;  // sent (and received) by each device
  int steps = 0;                // message steps, each paying the level's latency
  std::string level;            // the interconnect level it runs at ("" for a slice)
};

/// The cost of `step` on a tensor whose type on one device (the whole tensor) is `global`, held
/// before the step in layout `before`.
CollectiveCost collective_cost(const HwSpec& spec, const Mesh& mesh, const LayoutStep& step, const TensorType& global,
                               const TensorLayout& before);

}  // namespace tessel
