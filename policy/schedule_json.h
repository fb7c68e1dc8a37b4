// Schedule (schedule.h) as JSON, so a schedule can be saved, diffed, explained and replayed on the
// same model lowered again (STYLE.md habit 7). Nodes and tensors are referred to by name.
//
// Format (keys written in this order; on reading every key but "groups" -- and a group's "nodes"
// and "tiles" -- is optional with the Schedule default, and unknown keys are rejected):
//   {"format": "tessel-schedule", "policy": "roller", "cost_model": "analytic",
//    "hw_spec": "nvidia-h100-sxm", "hw_spec_hash": "9f3c0a1b2c3d4e5f",   (16 hex digits)
//    "predicted_latency_s": 1.2e-05,
//    "groups": [{"nodes": ["matmul0", "add1"],
//                "tiles": {"matmul0": <tile config, import/tile_config_json.h>, "add1": ...},
//                "edge_levels": {"matmul0_out": "registers"},
//                "predicted": {"latency_s": ..,
//                              "terms": [{"name": "compute", "seconds": ..}, {"name": "launch", ..}],
//                              "flops": .., "tensor_cores": true,
//                              "memory": [{"level": "dram", "bytes": .., "seconds": ..}],
//                              "bound": "dram", "blocks": 64, "blocks_per_unit": 1, "waves": 1,
//                              "occupancy": 0.125, "notes": ["..."]}}],
//    (a schedule saved before cost terms were a list has "compute_s", "launch_s", "panel_s"; they
//    read as the terms of those names)
//    "unfused": [{"tensor": "t", "producer": "a", "consumer": "b", "reason": "policy",
//                 "detail": "roller never fuses"}]}
// Numbers are written with the shortest text that reads back to the same double, so
// schedule_from_json(schedule_to_json(s, g), f, g) == s field by field; an infinite or NaN
// number is written as the string "inf", "-inf" or "nan".
#pragma once

#include <string>

#include "policy/schedule.h"

namespace tessel {

/// JSON text of `schedule` for `graph` (stable: fixed key order; nodes and tensors by name).
std::string schedule_to_json(const Schedule& schedule, const OpGraph& graph);

/// Parses a schedule for `graph`. Raises UserError with `file`, a JSON pointer and the offending
/// value for malformed JSON, unknown keys, wrong types, and node or tensor names `graph` does
/// not have. It does not check legality (check_schedule.h does).
Schedule schedule_from_json(const std::string& text, const std::string& file, const OpGraph& graph);

}  // namespace tessel
