// Explaining a schedule (`tessel explain`): which nodes share a kernel, their tiles per memory
// level, where every intermediate lives, the predicted time of each kernel and what bounds it,
// every edge that was not fused and why, and the totals against running every node on its own.
//
// Three renderings of one Explanation: a text table, a Graphviz graph (groups as clusters, edges
// colored by memory level) and a self-contained HTML page (the graph as inline SVG plus tables).
#pragma once

#include <string>
#include <vector>

#include "policy/schedule.h"

namespace tessel {

struct Explanation {
  int nodes = 0;
  int kernels = 0;
  double predicted_s = 0;           // the schedule's total
  double unfused_predicted_s = 0;   // every node its own kernel, same tiles, same cost model
  double device_bytes = 0;          // device-memory traffic of the schedule
  double unfused_device_bytes = 0;  // ... and of the unfused baseline
  std::string device_level;                 // the spec's device-memory level ("dram", "hbm")
  std::vector<double> kernel_device_bytes;  // per kernel, the bytes it moves at that level
  /// Per kernel, its measured time (Executable::profile: `explain --profile`, `Compiled.profile`);
  /// empty when the schedule was not run. Shown beside each prediction, with their ratio.
  std::vector<double> measured_s;
  // The roofline of the HTML page: the spec's peaks (FLOP/s, SIMT fp32 and the fastest matrix
  // unit's) and its device-memory bandwidth (bytes/s).
  double simt_peak_flops = 0, tensor_peak_flops = 0, device_bandwidth = 0;
};

/// Totals, pricing the unfused baseline with `cost` (each node alone with its scheduled tiles).
Explanation explain_totals(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                           const CostModel& cost);

std::string explain_text(const OpGraph& graph, const Schedule& schedule, const Explanation& totals);
std::string explain_dot(const OpGraph& graph, const Schedule& schedule);
/// `svg` is the dot graph rendered by Graphviz (`dot -Tsvg`); empty to leave the picture out.
std::string explain_html(const OpGraph& graph, const Schedule& schedule, const Explanation& totals,
                         const std::string& svg);

}  // namespace tessel
