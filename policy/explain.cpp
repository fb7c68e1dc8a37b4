// Schedule explanations (see explain.h).
#include "policy/explain.h"

#include <algorithm>
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

// A quantity with an SI prefix: "1.23 M" + unit.
std::string si(double v, const char* unit) {
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int p = 0;
  while (std::fabs(v) >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3g %s%s", v, prefixes[p], unit);
  return buf;
}

// What the notation of a tile config means (print_tile_config), for the top of every explanation.
constexpr const char* kTileLegend =
    "tiles: per node, per memory level outermost first, LEVEL S1xS2..|R1.. -- the tile's extent along each spatial "
    "axis | its step along each reduction axis ('-': none); then threads per spatial axis, elements per vector "
    "access, pipeline stages (input tiles in flight), raster group (blocks swizzled for L2 reuse)";

struct GroupRow {
  std::string nodes, tiles, edges, predicted, bound, family, rejected;
  std::string work;      // FLOPs, device bytes, intensity, blocks, waves, occupancy
  std::string profiled;  // with a profile: the measured time and the prediction's ratio to it
  std::string measured;  // with --tune: the kept candidate's time, and its rank by prediction
  std::string kind;      // a sparse weight's dense / block-sparse choice
  std::string terms;     // the prediction's parts: its named terms, then each memory level's time
};

GroupRow group_row(const OpGraph& graph, const ScheduleGroup& g, const Explanation& totals, size_t index) {
  GroupRow row;
  const CostBreakdown& p = g.predicted;
  const double bytes = index < totals.kernel_device_bytes.size() ? totals.kernel_device_bytes[index] : 0;
  row.work = cat(si(p.flops, "FLOP"), ", ", si(bytes, "B"), " of ", totals.device_level.empty() ? "device memory" : totals.device_level);
  if (bytes > 0) row.work += cat(" (", si(p.flops / bytes, "FLOP/B"), ")");
  if (p.blocks > 0) {
    char waves[64];
    std::snprintf(waves, sizeof(waves), "%.2f waves, occupancy %.0f%%", p.waves, p.occupancy * 100);
    row.work += cat("; ", p.blocks, " blocks in ", waves);
  }
  if (index < totals.measured_s.size()) {
    const double m = totals.measured_s[index];
    char ratio[48];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", m > 0 ? p.latency_s / m : 0.0);
    row.profiled = m > 0 ? cat(ms(m), " (predicted ", ratio, " of it)") : "- (nothing to run)";
  }
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
  for (const MemoryLevel& l : spec.memory_levels)
    if (l.scope != MemoryScope::host) {
      e.device_level = l.name;
      e.device_bandwidth = l.bandwidth_gbps * 1e9;
    }
  if (auto f = spec.compute.simt_peak_tflops.find(DType::f32); f != spec.compute.simt_peak_tflops.end()) e.simt_peak_flops = f->second * 1e12;
  for (const auto& [dtype, tflops] : spec.compute.tensor_peak_tflops) e.tensor_peak_flops = std::max(e.tensor_peak_flops, tflops * 1e12);
  for (const ScheduleGroup& g : schedule.groups) {
    e.kernel_device_bytes.push_back(device_bytes_of(g.predicted, spec));
    e.device_bytes += e.kernel_device_bytes.back();
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
                        ms(totals.predicted_s), "\n", kTileLegend, "\n\n");
  for (size_t i = 0; i < schedule.groups.size(); ++i) {
    const GroupRow row = group_row(graph, schedule.groups[i], totals, i);
    out += cat("kernel ", i, ": ", row.nodes, "\n");
    out += cat("  predicted ", row.predicted, ", bound ", row.bound, "\n");
    if (!row.profiled.empty()) out += cat("  profiled  ", row.profiled, "\n");
    out += cat("  work      ", row.work, "\n");
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
  if (!totals.measured_s.empty()) {
    double sum = 0;
    for (double m : totals.measured_s) sum += m;
    char ratio[48];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", sum > 0 ? totals.predicted_s / sum : 0.0);
    out += cat("profiled: the kernels took ", ms(sum), " (medians, one by one; predicted ", ratio, " of it)\n");
  }
  return out;
}

std::string explain_dot(const OpGraph& graph, const Schedule& schedule) {
  const std::vector<int> group = group_of_nodes(graph, schedule);
  std::string out = "digraph schedule {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=10];\n"
                    "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (size_t g = 0; g < schedule.groups.size(); ++g) {
    const ScheduleGroup& sg = schedule.groups[g];
    out += cat("  subgraph cluster_", g, " {\n    id=\"kernel_", g, "\";\n    label=\"kernel ", g, ": ",
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

namespace {

// A log-log roofline of the kernels as inline SVG: arithmetic intensity (FLOPs per byte of device
// memory) against FLOP/s, the spec's ceilings (bandwidth x intensity up to each peak), each kernel
// at its predicted time (filled) and, when profiled, its measured time (open). Empty when the spec
// gives no bandwidth or no kernel does arithmetic on device bytes.
std::string roofline_svg(const Schedule& schedule, const Explanation& t) {
  struct Point {
    size_t kernel;
    double intensity, predicted, measured;
  };
  std::vector<Point> points;
  for (size_t i = 0; i < schedule.groups.size() && i < t.kernel_device_bytes.size(); ++i) {
    const CostBreakdown& p = schedule.groups[i].predicted;
    const double bytes = t.kernel_device_bytes[i];
    if (p.flops <= 0 || bytes <= 0 || p.latency_s <= 0) continue;
    const double m = i < t.measured_s.size() && t.measured_s[i] > 0 ? p.flops / t.measured_s[i] : 0;
    points.push_back({i, p.flops / bytes, p.flops / p.latency_s, m});
  }
  const double peak = std::max(t.simt_peak_flops, t.tensor_peak_flops);
  if (points.empty() || t.device_bandwidth <= 0 || peak <= 0) return {};
  const double x0 = -2, x1 = 4;  // log10 FLOP/B
  double y1 = std::ceil(std::log10(peak)) + 0.3, y0 = y1 - 7;
  for (const Point& p : points) y0 = std::min(y0, std::floor(std::log10(std::min(p.predicted, p.measured > 0 ? p.measured : p.predicted))));
  const double w = 640, h = 360, left = 70, bottom = 40, top = 10, right = 20;
  auto X = [&](double v) { return left + (std::log10(v) - x0) / (x1 - x0) * (w - left - right); };
  auto Y = [&](double v) { return h - bottom - (std::log10(v) - y0) / (y1 - y0) * (h - bottom - top); };
  std::string out = cat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", w, "\" height=\"", h, "\" font-size=\"10\">\n");
  for (double d = x0; d <= x1; d += 1)
    out += cat("<line x1=\"", X(std::pow(10, d)), "\" y1=\"", top, "\" x2=\"", X(std::pow(10, d)), "\" y2=\"", h - bottom,
               "\" stroke=\"#eee\"/><text x=\"", X(std::pow(10, d)), "\" y=\"", h - bottom + 14, "\" text-anchor=\"middle\">1e", d, "</text>\n");
  for (double d = std::ceil(y0); d <= y1; d += 1)
    out += cat("<line x1=\"", left, "\" y1=\"", Y(std::pow(10, d)), "\" x2=\"", w - right, "\" y2=\"", Y(std::pow(10, d)),
               "\" stroke=\"#eee\"/><text x=\"", left - 4, "\" y=\"", Y(std::pow(10, d)) + 3, "\" text-anchor=\"end\">1e", d, "</text>\n");
  out += cat("<text x=\"", (left + w - right) / 2, "\" y=\"", h - 8, "\" text-anchor=\"middle\">FLOPs per byte of ",
             html_escape(t.device_level), "</text><text x=\"12\" y=\"", (top + h - bottom) / 2,
             "\" transform=\"rotate(-90 12 ", (top + h - bottom) / 2, ")\" text-anchor=\"middle\">FLOP/s</text>\n");
  for (const double ceiling : {t.simt_peak_flops, t.tensor_peak_flops}) {
    if (ceiling <= 0) continue;
    const double knee = ceiling / t.device_bandwidth;
    const double start = std::pow(10, x0);
    out += cat("<polyline fill=\"none\" stroke=\"#555\" points=\"", X(start), ",", Y(std::max(start * t.device_bandwidth, std::pow(10, y0))), " ",
               X(knee), ",", Y(ceiling), " ", X(std::pow(10, x1)), ",", Y(ceiling), "\"/><text x=\"", w - right - 2, "\" y=\"",
               Y(ceiling) - 3, "\" text-anchor=\"end\">", si(ceiling, "FLOP/s"), "</text>\n");
  }
  for (const Point& p : points) {
    const std::string title = cat("<title>kernel ", p.kernel, ": ", si(p.intensity, "FLOP/B"), ", predicted ", si(p.predicted, "FLOP/s"),
                                  p.measured > 0 ? cat(", measured ", si(p.measured, "FLOP/s")) : "", "</title>");
    out += cat("<circle cx=\"", X(p.intensity), "\" cy=\"", Y(p.predicted), "\" r=\"4\" fill=\"#386cb0\">", title, "</circle>\n");
    if (p.measured > 0)
      out += cat("<circle cx=\"", X(p.intensity), "\" cy=\"", Y(p.measured), "\" r=\"4\" fill=\"none\" stroke=\"#d95f02\" stroke-width=\"1.5\">",
                 title, "</circle>\n");
  }
  return out + "</svg>\n";
}

}  // namespace

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
           "dashed: not fused, labelled with the reason. Zoom <input type=\"range\" min=\"20\" max=\"200\" value=\"100\" "
           "oninput=\"document.getElementById('graph').style.zoom=this.value+'%'\">; a kernel's number in the table below "
           "scrolls to it.</p>\n<div class=\"graph\"><div id=\"graph\">";
    const size_t start = svg.find("<svg");
    out += start == std::string::npos ? svg : svg.substr(start);
    out += "</div></div>\n";
  } else {
    out += "<h2>Graph</h2>\n<p>No picture: Graphviz's <code>dot</code> was not there to render it (<code>--format dot</code> "
           "writes the graph for rendering elsewhere).</p>\n";
  }
  if (const std::string roofline = roofline_svg(schedule, totals); !roofline.empty())
    out += cat("<h2>Roofline</h2>\n<p class=\"legend\">Each kernel at its predicted rate (filled)",
               totals.measured_s.empty() ? "" : " and its measured rate (open; <code>--profile</code>)",
               "; the lines are the spec's ceilings. Hover for the kernel's number.</p>\n", roofline);
  const bool profiled = !totals.measured_s.empty();
  out += cat("<h2>Kernels</h2>\n<p><small>", html_escape(kTileLegend), "</small></p>\n<table><tr><th>#</th><th>nodes</th><th>kernel family</th><th>tiles per level</th><th>intermediates</th>"
         "<th>work</th><th>predicted</th>", profiled ? "<th>profiled</th>" : "", "<th>bound</th></tr>\n");
  for (size_t i = 0; i < schedule.groups.size(); ++i) {
    const GroupRow row = group_row(graph, schedule.groups[i], totals, i);
    out += cat("<tr><td class=\"num\">", svg.empty() ? std::to_string(i) : cat("<a href=\"#kernel_", i, "\">", i, "</a>"),
               "</td><td>", html_escape(row.nodes), "</td><td title=\"", html_escape(row.rejected),
               "\">", html_escape(row.family), row.kind.empty() ? "" : "<br><small>" + html_escape(row.kind) + "</small>",
               "</td><td><code>", html_escape(row.tiles),
               "</code></td><td>", html_escape(row.edges), "</td><td>", html_escape(row.work), "</td><td class=\"num\">", row.predicted,
               row.measured.empty() ? "" : "<br>measured " + html_escape(row.measured), "</td>",
               profiled ? cat("<td class=\"num\">", html_escape(row.profiled), "</td>") : "", "<td>",
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
