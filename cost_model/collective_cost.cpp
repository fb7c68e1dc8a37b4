#include "cost_model/collective_cost.h"

#include <algorithm>

#include "tilegraph/error.h"

namespace tessel {

namespace {

/// The spec's levels, or one made from its links (their slowest, spanning every device).
std::vector<InterconnectLevel> levels_of(const HwSpec& spec) {
  const InterconnectSpec& ic = spec.interconnect;
  if (!ic.levels.empty()) return ic.levels;
  if (ic.links.empty()) return {};
  InterconnectLevel l;
  l.name = ic.links.front().kind;
  l.devices = ic.devices;
  l.bandwidth_gbps = ic.links.front().bandwidth_gbps;
  for (const LinkSpec& k : ic.links) {
    l.bandwidth_gbps = std::min(l.bandwidth_gbps, k.bandwidth_gbps);
    l.latency_us = std::max(l.latency_us, k.latency_us);
  }
  l.source = "the spec's slowest link";
  return {l};
}

}  // namespace

std::optional<InterconnectLevel> collective_level(const HwSpec& spec, const std::vector<int64_t>& group) {
  const std::vector<InterconnectLevel> levels = levels_of(spec);
  if (levels.empty()) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(group.begin(), group.end());
  for (const InterconnectLevel& l : levels)
    if (*lo / l.devices == *hi / l.devices) return l;
  return levels.back();
}

std::optional<std::string> check_mesh(const HwSpec& spec, const Mesh& mesh) {
  if (mesh.devices() > 1 && levels_of(spec).empty())
    return cat("the spec '", spec.name, "' describes no interconnect (interconnect.levels or links) to price collectives on a ",
               mesh.print(), " mesh; use a multi-device spec (e.g. hw_specs/nvidia-h100-sxm-x2.json)");
  return std::nullopt;
}

std::string mesh_note(const HwSpec& spec, const Mesh& mesh) {
  if (mesh.devices() <= spec.interconnect.devices) return "";
  return cat("the mesh has ", mesh.devices(), " devices, the spec's system ", spec.interconnect.devices,
             ": collectives beyond it are priced at its outermost level");
}

CollectiveCost collective_cost(const HwSpec& spec, const Mesh& mesh, const LayoutStep& step, const TensorType& global,
                               const TensorLayout& before) {
  CollectiveCost c;
  if (step.kind == LayoutStep::Kind::slice) return c;
  const int64_t parts = mesh.shape[step.mesh_axis];
  if (parts <= 1) return c;
  const auto level = collective_level(spec, mesh.group(0, step.mesh_axis));
  if (!level) throw UserError("", "", *check_mesh(spec, mesh));
  // Bytes of the tensor as one device holds it before the step; the whole along the step's
  // dimension is that times the parts for a gather, the same for a reduction of partial values.
  const double local = static_cast<double>(dtype_bytes(global.dtype)) *
                       static_cast<double>(TensorType{global.dtype, local_shape(global.shape, before, mesh)}.num_elements());
  const double p = static_cast<double>(parts);
  switch (step.collective) {
    case Collective::all_gather:
      c.bytes_per_device = (p - 1) * local;  // receives every other piece
      c.steps = static_cast<int>(parts - 1);
      break;
    case Collective::reduce_scatter:
      c.bytes_per_device = (p - 1) / p * local;
      c.steps = static_cast<int>(parts - 1);
      break;
    case Collective::all_reduce:
      c.bytes_per_device = 2 * (p - 1) / p * local;
      c.steps = static_cast<int>(2 * (parts - 1));
      break;
    case Collective::all_to_all:
      c.bytes_per_device = (p - 1) / p * local;
      c.steps = static_cast<int>(parts - 1);
      break;
    case Collective::shift:  // one ring step: this device's piece to the next, the previous one's in
      c.bytes_per_device = local;
      c.steps = 1;
      break;
    case Collective::none: return c;
  }
  c.level = level->name;
  double bandwidth = level->bandwidth_gbps, latency = level->latency_us;
  if (auto it = level->collectives.find(std::string(collective_name(step.collective))); it != level->collectives.end()) {
    bandwidth = it->second.bandwidth_gbps;
    latency = it->second.latency_us;
  }
  c.seconds = c.steps * latency * 1e-6 + c.bytes_per_device / (bandwidth * 1e9);
  return c;
}

}  // namespace tessel
