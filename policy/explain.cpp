// Schedule explanations (see explain.h).
#include "policy/explain.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "tilegraph/error.h"

namespace tessel {

namespace {

std::string ms(double seconds) {
  char buf[32];
  if (std::isinf(seconds)) return "inf";
  std::snprintf(buf, sizeof(buf), "%.4f ms", seconds * 1e3);
  return buf;
}

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
  return buf;
}

// Bytes the breakdown moves at the device level (the last level listed that is not host memory).
double device_bytes_of(const CostBreakdown& c, const HwSpec& spec) {
  std::string device;
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope != MemoryScope::host) device = l.name;
  for (const LevelCost& l : c.memory)
    if (l.level == device) return l.bytes;
  return 0;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

// Edge colors by where the intermediate lives.
const char* level_color(const std::string& level) {
  if (level == "registers") return "#1b9e77";
  if (level == "smem" || level == "l1d") return "#386cb0";
  if (level == "l2") return "#7570b3";
  return "#999999";  // device memory
}

struct GroupRow {
  std::string nodes, tiles, edges, predicted, bound, family, rejected;
  std::string measured;  // with --tune: the kept candidate's time, and its rank by prediction
  std::string kind;      // a sparse weight's dense / block-sparse choice
  std::string terms;     // the prediction's parts: its named terms, then each memory level's time
};

GroupRow group_row(const OpGraph& graph, const ScheduleGroup& g) {
  GroupRow row;
  for (NodeId n : g.group.nodes) {
    if (!row.nodes.empty()) row.nodes += ", ";
    row.nodes += graph.node(n).name();
    auto t = g.group.tiles.find(n);
    if (t != g.group.tiles.end()) {
      if (!row.tiles.empty()) row.tiles += "; ";
      row.tiles += graph.node(n).name() + ": " + print_tile_config(t->second);
    }
  }
  for (const auto& [tensor, level] : g.group.edge_levels) {
    if (!row.edges.empty()) row.edges += ", ";
    row.edges += graph.tensor(tensor).name + " @ " + level;
  }
  if (row.edges.empty()) row.edges = "-";
  const KernelChoice& k = g.group.kernel;
  row.family = k.family.empty() ? "(not chosen: no backend)" : k.family;
  for (const auto& [name, value] : k.params) row.family += cat(" ", name, "=", value);
  for (const std::string& r : k.rejected) row.rejected += (row.rejected.empty() ? "" : "; ") + r;
  row.kind = g.kind_choice;
  row.predicted = ms(g.predicted.latency_s);
  row.bound = g.predicted.bound + (g.predicted.tensor_cores ? " (tensor cores)" : "");
  if (const double panel = g.predicted.term("panel"); panel > 0) row.bound += cat(", plus ", ms(panel), " of contraction panels");
  for (const CostTerm& t : g.predicted.terms) row.terms += cat(row.terms.empty() ? "" : ", ", t.name, " ", ms(t.seconds));
  for (const LevelCost& l : g.predicted.memory) row.terms += cat(row.terms.empty() ? "" : ", ", l.level, " ", ms(l.seconds));
  if (g.measured_s) {
    size_t rank = 0, timed = 0;
    for (size_t i = 0; i < g.trials.size(); ++i) {
      timed += g.trials[i].measured_s.has_value();
      if (g.trials[i].measured_s == g.measured_s && !rank) rank = i + 1;
    }
    row.measured = cat(ms(*g.measured_s), " (the model's #", rank, " of ", timed, " timed candidates");
    if (rank > 1 && g.trials.front().measured_s)
      row.measured += cat("; its #1 took ", ms(*g.trials.front().measured_s));
    row.measured += ")";
  }
  return row;
}

}  // namespace

Explanation explain_totals(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                           const CostModel& cost) {
  Explanation e;
  e.nodes = graph.num_nodes();
  e.kernels = static_cast<int>(schedule.groups.size());
  e.predicted_s = schedule.predicted_latency_s;
  for (const ScheduleGroup& g : schedule.groups) {
    e.device_bytes += device_bytes_of(g.predicted, spec);
    for (NodeId n : g.group.nodes) {
      if (g.group.nodes.size() == 1) {  // already on its own
        e.unfused_predicted_s += g.predicted.latency_s;
        e.unfused_device_bytes += device_bytes_of(g.predicted, spec);
        continue;
      }
      ScheduledGroup alone;
      alone.nodes = {n};
      alone.tiles[n] = g.group.tiles.at(n);
      const CostBreakdown c = cost.estimate(graph, alone, spec);
      e.unfused_predicted_s += c.latency_s;
      e.unfused_device_bytes += device_bytes_of(c, spec);
    }
  }
  return e;
}

std::string explain_text(const OpGraph& graph, const Schedule& schedule, const Explanation& totals) {
  std::string out = cat("schedule '", schedule.policy, "' on ", schedule.hw_spec, " (cost model ", schedule.cost_model,
                        "): ", totals.nodes, " nodes in ", totals.kernels, " kernels, predicted ",
                        ms(totals.predicted_s), "\n\n");
  for (size_t i = 0; i < schedule.groups.size(); ++i) {
    const GroupRow row = group_row(graph, schedule.groups[i]);
    out += cat("kernel ", i, ": ", row.nodes, "\n");
    out += cat("  predicted ", row.predicted, ", bound ", row.bound, "\n");
    if (!row.terms.empty()) out += cat("  terms     ", row.terms, "\n");
    if (!row.measured.empty()) out += cat("  measured  ", row.measured, "\n");
    out += cat("  family    ", row.family, "\n");
    if (!row.rejected.empty()) out += cat("  not       ", row.rejected, "\n");
    out += cat("  tiles     ", row.tiles, "\n");
    if (!row.kind.empty()) out += cat("  kind      ", row.kind, "\n");
    out += cat("  in group  ", row.edges, "\n");
  }
  if (!schedule.unfused.empty()) {
    out += "\nnot fused (intermediate in device memory):\n";
    for (const UnfusedEdge& e : schedule.unfused)
      out += cat("  ", graph.node(e.producer).name(), " -> ", graph.node(e.consumer).name(), " (",
                 graph.tensor(e.tensor).name, "): ", unfused_reason_name(e.reason),
                 e.detail.empty() ? "" : ": " + e.detail, "\n");
  }
  out += cat("\ntotals: ", totals.kernels, " kernels (", totals.nodes, " unfused), device-memory traffic ",
             mb(totals.device_bytes), " (unfused ", mb(totals.unfused_device_bytes), "), predicted ",
             ms(totals.predicted_s), " (unfused ", ms(totals.unfused_predicted_s), ")\n");
  return out;
}

std::string explain_dot(const OpGraph& graph, const Schedule& schedule) {
  const std::vector<int> group = group_of_nodes(graph, schedule);
  std::string out = "digraph schedule {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=10];\n"
                    "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (size_t g = 0; g < schedule.groups.size(); ++g) {
    const ScheduleGroup& sg = schedule.groups[g];
    out += cat("  subgraph cluster_", g, " {\n    label=\"kernel ", g, ": ",
               sg.group.kernel.family.empty() ? "" : dot_escape(sg.group.kernel.family) + ", ", dot_escape(ms(sg.predicted.latency_s)),
               " (", dot_escape(sg.predicted.bound), ")\";\n    style=\"rounded,filled\"; fillcolor=\"#f4f4f4\"; color=\"#bbbbbb\";\n");
    for (NodeId n : sg.group.nodes)
      out += cat("    n", n, " [label=\"", dot_escape(graph.node(n).name()), "\\n",
                 dot_escape(graph.node(n).output().print()), "\"];\n");
    out += "  }\n";
  }
  std::map<std::pair<NodeId, NodeId>, const UnfusedEdge*> unfused;
  for (const UnfusedEdge& e : schedule.unfused) unfused[{e.producer, e.consumer}] = &e;
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    std::set<NodeId> producers;
    for (TensorId t : graph.node_inputs(n))
      if (graph.producer(t) >= 0) producers.insert(graph.producer(t));
    for (NodeId p : producers) {
      const TensorId t = graph.node_output(p);
      std::string level = "dram";
      if (group[p] >= 0 && group[p] == group[n]) {
        const auto& levels = schedule.groups[group[p]].group.edge_levels;
        auto it = levels.find(t);
        level = it == levels.end() ? "registers" : it->second;
      }
      out += cat("  n", p, " -> n", n, " [color=\"", level_color(level), "\", penwidth=", level == "dram" ? "1" : "2");
      if (auto it = unfused.find({p, n}); it != unfused.end() && it->second->reason != UnfusedReason::policy)
        out += cat(", style=dashed, label=\"", unfused_reason_name(it->second->reason), "\"");
      else if (level != "dram")
        out += cat(", label=\"", level, "\"");
      out += "];\n";
    }
  }
  return out + "}\n";
}

std::string explain_html(const OpGraph& graph, const Schedule& schedule, const Explanation& totals,
                         const std::string& svg) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Tessel schedule: " +
      html_escape(schedule.policy + " on " + schedule.hw_spec) +
      "</title>\n<style>\n"
      "body{font-family:-apple-system,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}\n"
      "h1{font-size:20px}h2{font-size:16px;margin-top:28px}\n"
      "table{border-collapse:collapse;font-size:12px;width:100%}\n"
      "th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}\n"
      "th{background:#f4f4f4}td.num{text-align:right;white-space:nowrap}\n"
      ".totals{display:flex;gap:24px;flex-wrap:wrap}.totals div{background:#f4f4f4;padding:8px 14px;border-radius:6px}\n"
      ".totals b{display:block;font-size:18px}.graph{overflow:auto;border:1px solid #ddd;max-height:900px}\n"
      ".legend span{display:inline-block;margin-right:14px}.sw{display:inline-block;width:18px;height:4px;vertical-align:middle;margin-right:4px}\n"
      "code{font-size:11px}\n</style></head><body>\n";
  out += "<h1>Schedule <code>" + html_escape(schedule.policy) + "</code> on <code>" + html_escape(schedule.hw_spec) +
         "</code> (cost model <code>" + html_escape(schedule.cost_model) + "</code>)</h1>\n";
  out += "<div class=\"totals\">";
  out += cat("<div>kernels<b>", totals.kernels, "</b>", totals.nodes, " nodes unfused</div>");
  out += "<div>predicted<b>" + ms(totals.predicted_s) + "</b>unfused " + ms(totals.unfused_predicted_s) + "</div>";
  out += "<div>device-memory traffic<b>" + mb(totals.device_bytes) + "</b>unfused " + mb(totals.unfused_device_bytes) + "</div>";
  out += cat("<div>edges not fused<b>", schedule.unfused.size(), "</b>see below</div></div>\n");
  if (!svg.empty()) {
    out += "<h2>Graph</h2>\n<p class=\"legend\">Boxes are kernels. Edges: "
           "<span><i class=\"sw\" style=\"background:#1b9e77\"></i>registers</span>"
           "<span><i class=\"sw\" style=\"background:#386cb0\"></i>shared memory / L1</span>"
           "<span><i class=\"sw\" style=\"background:#999\"></i>device memory</span>"
           "dashed: not fused, labelled with the reason.</p>\n<div class=\"graph\">";
    const size_t start = svg.find("<svg");
    out += start == std::string::npos ? svg : svg.substr(start);
    out += "</div>\n";
  }
  out += "<h2>Kernels</h2>\n<table><tr><th>#</th><th>nodes</th><th>kernel family</th><th>tiles per level</th><th>intermediates</th>"
         "<th>predicted</th><th>bound</th></tr>\n";
  for (size_t i = 0; i < schedule.groups.size(); ++i) {
    const GroupRow row = group_row(graph, schedule.groups[i]);
    out += cat("<tr><td class=\"num\">", i, "</td><td>", html_escape(row.nodes), "</td><td title=\"", html_escape(row.rejected),
               "\">", html_escape(row.family), row.kind.empty() ? "" : "<br><small>" + html_escape(row.kind) + "</small>",
               "</td><td><code>", html_escape(row.tiles),
               "</code></td><td>", html_escape(row.edges), "</td><td class=\"num\">", row.predicted,
               row.measured.empty() ? "" : "<br>measured " + html_escape(row.measured), "</td><td>",
               html_escape(row.bound), "</td></tr>\n");
  }
  out += "</table>\n";
  if (!schedule.unfused.empty()) {
    out += "<h2>Edges not fused</h2>\n<table><tr><th>producer</th><th>consumer</th><th>tensor</th><th>reason</th><th>detail</th></tr>\n";
    for (const UnfusedEdge& e : schedule.unfused)
      out += "<tr><td>" + html_escape(graph.node(e.producer).name()) + "</td><td>" + html_escape(graph.node(e.consumer).name()) +
             "</td><td>" + html_escape(graph.tensor(e.tensor).name) + "</td><td>" +
             std::string(unfused_reason_name(e.reason)) + "</td><td>" + html_escape(e.detail) + "</td></tr>\n";
    out += "</table>\n";
  }
  return out + "</body></html>\n";
}

}  // namespace tessel
