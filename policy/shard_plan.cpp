#include "policy/shard_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <tuple>
#include <sstream>

#include <z3++.h>

#include "tilegraph/error.h"

namespace tessel {

namespace {

double bytes_of(const TensorType& t) { return static_cast<double>(t.num_elements()) * dtype_bytes(t.dtype); }

std::string node_split_text(const TeNode& node, const NodeSharding& s, const Mesh& mesh) {
  std::string out;
  for (int m = 0; m < mesh.rank(); ++m) {
    if (s.split[m] < 0) continue;
    out += cat(out.empty() ? "" : ", ", node.axes()[s.split[m]].name, " over ", mesh.axis_names[m]);
  }
  return out.empty() ? "whole on every device" : out;
}

}  // namespace

OverlapPrice overlap_price(const TeNode& node, const ShiftForm& f, const TensorType& input, const HwSpec& spec, const Mesh& mesh) {
  OverlapPrice o;
  o.step.mesh_axis = f.mesh_axis;
  o.step.collective = Collective::shift;
  o.step.dim = f.input_dim;
  o.shift = collective_cost(spec, mesh, o.step, input, f.block_layout);
  o.piece_s = node_time(node, f.piece, f.piece_mesh, spec);
  // Pieces running beside a shift are scheduled for the units the level leaves them (all but the last).
  const auto level = collective_level(spec, mesh.group(0, f.mesh_axis));
  const int64_t reserved = level ? level->overlap_units : 0;
  o.beside_s = o.piece_s;
  if (reserved > 0 && reserved < spec.compute.units)
    o.beside_s *= static_cast<double>(spec.compute.units) / static_cast<double>(spec.compute.units - reserved);
  // The join reads and writes the node's local output once (segments read their inputs in place).
  const NodeRef piece = local_node(node, f.piece, f.piece_mesh);
  const double dram = spec.memory_levels.empty() ? 0 : spec.memory_levels.back().bandwidth_gbps * 1e9;
  const double moved = 2 * bytes_of(piece->output()) * static_cast<double>(f.parts);
  o.join_s = (dram > 0 ? moved / dram : 0) + spec.compute.launch_overhead_us * 1e-6;
  const double p = static_cast<double>(f.parts);
  o.compute_s = (p - 1) * o.beside_s + o.piece_s + o.join_s;
  o.exposed_s = (p - 1) * std::max(0.0, o.shift.seconds - o.beside_s);
  return o;
}

namespace {

/// Prices plans: the graph's candidate choices and one evaluation of a whole plan.
class PlanPricer {
 public:
  PlanPricer(const OpGraph& graph, const HwSpec& spec, const Mesh& mesh, double memory_cap = 0)
      : g_(graph), spec_(spec), mesh_(mesh), order_(graph.topological_order()), memory_cap_(memory_cap) {}

  /// Evaluates `plan`; fills `out` when non-null (the transfers and weight bytes). With `prefix`
  /// >= 0, only the first `prefix` nodes in topological order (and not the outputs).
  double evaluate(const ShardPlan& plan, PlanCost* out, int prefix = -1) {
    std::vector<std::vector<TensorLayout>> held(g_.num_tensors());
    std::map<std::pair<TensorId, std::string>, double> weights;  // (weight, layout) -> bytes per device
    std::vector<PlannedTransfer> transfers;
    double compute = 0, comm = 0;
    for (size_t i = 0; i < g_.inputs().size(); ++i) held[g_.inputs()[i]].push_back(plan.inputs[i]);
    auto need = [&](TensorId t, const TensorLayout& layout, const std::string& consumer) {
      const TensorInfo& info = g_.tensor(t);
      if (info.kind == TensorKind::weight) {
        weights[{t, print_layout(layout)}] = bytes_of({info.type.dtype, local_shape(info.type.shape, layout, mesh_)});
        return;
      }
      std::vector<TensorLayout>& h = held[t];
      if (std::find(h.begin(), h.end(), layout) != h.end()) return;
      const std::optional<Conversion> conv = cheapest_conversion(h, layout);
      if (!conv) {
        comm += std::numeric_limits<double>::infinity();
        return;
      }
      TensorLayout cur = h[conv->from];
      for (const LayoutStep& step : conv->steps) {
        const TensorLayout next = after_step(cur, step);
        if (check_layout(info.type.shape, next, mesh_)) {
          comm += std::numeric_limits<double>::infinity();
          return;
        }
        const CollectiveCost c = collective_cost(spec_, mesh_, step, info.type, cur);
        comm += c.seconds;
        if (out && step.kind == LayoutStep::Kind::collective) transfers.push_back({info.name, consumer, step, cur, c});
        cur = next;
        h.push_back(cur);
      }
    };
    // Over the memory cap: worse than any plan within it, and the further over the worse.
    auto penalty = [&] {
      double bytes = 0;
      for (const auto& [key, b] : weights) bytes += b;
      return memory_cap_ > 0 && bytes > memory_cap_ ? 1.0 + (bytes - memory_cap_) * 1e-9 : 0.0;
    };
    // A node taking an input by ring shifts (ShardPlan::shifted): P pieces, each overlapped with
    // the shift that brings the next block, then the join of the pieces; only the shifts' time
    // beyond their pieces' is communication. Readers of blocks already shifted share them.
    std::set<std::tuple<TensorId, int, std::string>> shifted;  // (tensor, mesh axis, blocks' layout)
    auto overlapped = [&](NodeId n, int input) {
      const TensorId t = g_.node_inputs(n)[input];
      auto form = shift_form(g_.node(n), plan.nodes[n], input, held[t], mesh_);
      if (!std::holds_alternative<ShiftForm>(form)) {
        comm += std::numeric_limits<double>::infinity();
        return;
      }
      const OverlapPrice o = overlap_price(g_.node(n), std::get<ShiftForm>(form), g_.tensor(t).type, spec_, mesh_);
      compute += o.compute_s;
      const ShiftForm& f = std::get<ShiftForm>(form);
      if (!shifted.insert({t, f.mesh_axis, print_layout(f.block_layout)}).second) return;
      comm += o.exposed_s;
      if (out) transfers.push_back({g_.tensor(t).name, g_.node(n).name(), o.step, std::get<ShiftForm>(form).block_layout, o.shift, o.exposed_s, true});
    };
    int visited = 0;
    for (NodeId n : order_) {
      if (prefix >= 0 && visited++ >= prefix) return compute + comm + penalty();
      const ShardedNode& sn = sharded(n, plan.nodes[n]);
      const int shifted = plan.shifted_input(n);
      for (size_t i = 0; i < g_.node_inputs(n).size(); ++i)
        if (static_cast<int>(i) != shifted) need(g_.node_inputs(n)[i], sn.inputs[i], g_.node(n).name());
      if (shifted >= 0) overlapped(n, shifted);
      else compute += time(n, plan.nodes[n]);
      held[g_.node_output(n)] = {sn.output};
    }
    if (prefix >= 0) return compute + comm + penalty();
    for (size_t i = 0; i < g_.outputs().size(); ++i) need(g_.outputs()[i], plan.outputs[i], "output");
    if (out) {
      out->compute_s = compute;
      out->communication_s = comm;
      out->transfers = std::move(transfers);
      out->weight_bytes_per_device = 0;
      for (const auto& [key, b] : weights) out->weight_bytes_per_device += static_cast<int64_t>(b);
      out->fits = memory_cap_ <= 0 || out->weight_bytes_per_device <= memory_cap_;
    }
    return compute + comm + penalty();
  }

  const ShardedNode& sharded(NodeId n, const NodeSharding& s) {
    auto key = std::make_pair(n, s.split);
    auto it = sharded_.find(key);
    if (it == sharded_.end()) {
      auto r = shard_node(g_.node(n), s, mesh_);
      TESSEL_ASSERT(std::holds_alternative<ShardedNode>(r), "pricing an illegal sharding");
      it = sharded_.emplace(key, std::get<ShardedNode>(r)).first;
    }
    return it->second;
  }

  double time(NodeId n, const NodeSharding& s) {
    auto key = std::make_pair(n, s.split);
    auto it = times_.find(key);
    if (it == times_.end()) it = times_.emplace(key, node_time(g_.node(n), s, mesh_, spec_)).first;
    return it->second;
  }

 private:
  const OpGraph& g_;
  const HwSpec& spec_;
  const Mesh& mesh_;
  std::vector<NodeId> order_;
  std::map<std::pair<NodeId, std::vector<int>>, ShardedNode> sharded_;
  std::map<std::pair<NodeId, std::vector<int>>, double> times_;
  double memory_cap_ = 0;
};

/// Every legal sharding of `node` on `mesh` (the whole node first).
std::vector<NodeSharding> choices(const TeNode& node, const Mesh& mesh) {
  std::vector<NodeSharding> out;
  std::vector<int> split(mesh.rank(), -1);
  std::function<void(int)> rec = [&](int m) {
    if (m == mesh.rank()) {
      if (std::holds_alternative<ShardedNode>(shard_node(node, NodeSharding{split}, mesh))) out.push_back({split});
      return;
    }
    for (int a = -1; a < node.num_axes(); ++a) {
      if (a >= 0 && (mesh.shape[m] == 1 || std::find(split.begin(), split.begin() + m, a) != split.begin() + m)) continue;
      split[m] = a;
      rec(m + 1);
    }
    split[m] = -1;
  };
  rec(0);
  return out;
}

/// Seconds in whole picoseconds, rounded down (so that sums of them stay below the price).
int64_t floor_ps(double seconds) { return static_cast<int64_t>(std::floor(seconds * 1e12)); }

/// The time a conversion from `from` to `to` of tensor `t` takes as the pricer runs it from a
/// tensor holding `from` alone, or nullopt when none runs (PlanPricer::evaluate's need()).
std::optional<double> conversion_s(const OpGraph& g, TensorId t, const TensorLayout& from, const TensorLayout& to, const Mesh& mesh,
                                   const HwSpec& spec) {
  const TensorInfo& info = g.tensor(t);
  const std::optional<Conversion> conv = cheapest_conversion({from}, to);
  if (!conv) return std::nullopt;
  double seconds = 0;
  TensorLayout cur = from;
  for (const LayoutStep& step : conv->steps) {
    const TensorLayout next = after_step(cur, step);
    if (check_layout(info.type.shape, next, mesh)) return std::nullopt;
    seconds += collective_cost(spec, mesh, step, info.type, cur).seconds;
    cur = next;
  }
  return seconds;
}

/// z3's bound on the search (shard_plan.h): one Boolean per node and candidate (exactly one per
/// node), the relaxed price as an integer of picoseconds, the memory cap as a constraint.
/// `io`: the plan's fixed input and output layouts.
ShardBound z3_bound(const OpGraph& g, const Mesh& mesh, const HwSpec& spec, PlanPricer& pricer,
                    const std::vector<std::vector<NodeSharding>>& cand, const ShardPlan& io, int64_t memory_cap, int64_t ms) {
  const auto start = std::chrono::steady_clock::now();
  ShardBound out;
  z3::context c;
  z3::optimize opt(c);
  z3::params prm(c);
  prm.set("timeout", static_cast<unsigned>(std::min<int64_t>(ms, std::numeric_limits<unsigned>::max())));
  opt.set(prm);
  std::vector<std::vector<z3::expr>> x(g.num_nodes());
  z3::expr_vector terms(c);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    z3::expr_vector one(c);
    for (size_t i = 0; i < cand[n].size(); ++i) {
      x[n].push_back(c.bool_const(cat("n", n, "_", i).c_str()));
      one.push_back(x[n].back());
      terms.push_back(z3::ite(x[n].back(), c.int_val(floor_ps(pricer.time(n, cand[n][i]))), c.int_val(0)));
    }
    opt.add(z3::mk_or(one));
    if (one.size() > 1) opt.add(z3::atmost(one, 1));
    out.choices += static_cast<int64_t>(cand[n].size());
  }
  // Each tensor's layouts as made (a graph input's is fixed) and as read, with when.
  struct When {
    TensorLayout layout;
    z3::expr cond;
  };
  std::vector<std::vector<When>> made(g.num_tensors()), read(g.num_tensors());
  for (size_t i = 0; i < g.inputs().size(); ++i) made[g.inputs()[i]].push_back({io.inputs[i], c.bool_val(true)});
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (size_t i = 0; i < cand[n].size(); ++i) {
      const ShardedNode& sn = pricer.sharded(n, cand[n][i]);
      made[g.node_output(n)].push_back({sn.output, x[n][i]});
      for (size_t k = 0; k < g.node_inputs(n).size(); ++k) read[g.node_inputs(n)[k]].push_back({sn.inputs[k], x[n][i]});
    }
  for (size_t i = 0; i < g.outputs().size(); ++i) read[g.outputs()[i]].push_back({io.outputs[i], c.bool_val(true)});
  z3::expr_vector weight_bytes(c);
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    // The distinct layouts read, each with "some reader needs it".
    std::vector<TensorLayout> layouts;
    std::vector<z3::expr_vector> whens;
    for (const When& r : read[t]) {
      auto it = std::find(layouts.begin(), layouts.end(), r.layout);
      if (it == layouts.end()) {
        layouts.push_back(r.layout);
        whens.emplace_back(c);
        it = layouts.end() - 1;
      }
      whens[it - layouts.begin()].push_back(r.cond);
    }
    std::vector<z3::expr> needed;
    for (const z3::expr_vector& w : whens) needed.push_back(z3::mk_or(w));
    const TensorInfo& info = g.tensor(t);
    if (info.kind == TensorKind::weight) {
      for (size_t l = 0; l < layouts.size(); ++l)
        weight_bytes.push_back(z3::ite(needed[l], c.int_val(static_cast<int64_t>(bytes_of({info.type.dtype, local_shape(info.type.shape, layouts[l], mesh)}))),
                                       c.int_val(0)));
      continue;
    }
    // From each layout it can be made in: the cheapest of the conversions its readers need (the
    // pricer's first conversion of the tensor is one of them); conversions none runs are ruled out.
    for (const When& m : made[t]) {
      std::vector<std::pair<int64_t, size_t>> costs;
      for (size_t l = 0; l < layouts.size(); ++l) {
        if (layouts[l] == m.layout) continue;
        if (const std::optional<double> s = conversion_s(g, t, m.layout, layouts[l], mesh, spec)) costs.push_back({floor_ps(*s), l});
        else opt.add(!(m.cond && needed[l]));
      }
      std::sort(costs.begin(), costs.end());
      z3::expr none_cheaper = m.cond;
      for (const auto& [ps, l] : costs) {
        terms.push_back(z3::ite(none_cheaper && needed[l], c.int_val(ps), c.int_val(0)));
        none_cheaper = none_cheaper && !needed[l];
      }
    }
  }
  if (memory_cap > 0 && !weight_bytes.empty()) opt.add(z3::sum(weight_bytes) <= c.int_val(memory_cap));
  const z3::expr price = terms.empty() ? c.int_val(0) : z3::sum(terms);
  const z3::optimize::handle h = opt.minimize(price);
  const z3::check_result r = opt.check();
  auto seconds_of = [](const z3::expr& e, double& into) {
    int64_t v = 0;
    if (!e.is_numeral() || !e.is_numeral_i64(v)) return false;
    into = static_cast<double>(v) * 1e-12;
    return true;
  };
  if (r == z3::unsat) {
    out.why_not = memory_cap > 0 ? "no plan keeps the weights within the memory cap" : "no plan runs the graph";
  } else {
    out.optimal = r == z3::sat;
    if (!seconds_of(opt.lower(h), out.lower_s)) {
      out.lower_s = 0;
      if (!out.optimal) out.why_not = cat("z3 proved no bound within ", ms, " ms");
    }
    try {
      const z3::model model = opt.get_model();
      ShardPlan plan = io;
      bool complete = true;
      for (NodeId n = 0; n < g.num_nodes() && complete; ++n) {
        complete = false;
        for (size_t i = 0; i < cand[n].size(); ++i)
          if (model.eval(x[n][i], true).is_true()) {
            plan.nodes[n] = cand[n][i];
            complete = true;
            break;
          }
      }
      if (complete) {
        out.plan = std::move(plan);
        out.plan_s = pricer.evaluate(out.plan, nullptr);
        out.has_plan = std::isfinite(out.plan_s);
      }
    } catch (const z3::exception&) {
      // (No model when time ran out before the first one.)
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace

TensorLayout parse_layout(const std::string& text, const Mesh& mesh, const std::string& what) {
  TensorLayout layout;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part == "R") {
      layout.push_back(AxisLayout::replicated());
    } else if (part.size() >= 2 && part[0] == 'S' && part.size() <= 4 &&
               std::all_of(part.begin() + 1, part.end(), ::isdigit)) {
      layout.push_back(AxisLayout::sharded(std::stoi(part.substr(1))));
    } else {
      throw UserError("", "", cat(what, ": '", part, "' in '", text, "' is not a layout (R, or S followed by a dimension, e.g. S0)"));
    }
  }
  if (static_cast<int>(layout.size()) != mesh.rank())
    throw UserError("", "", cat(what, ": '", text, "' gives ", layout.size(), " mesh axes; the mesh ", mesh.print(), " has ", mesh.rank()));
  return layout;
}

void parse_pin(const std::string& text, const Mesh& mesh, ShardConstraints& into) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError("", "", cat("--shard: '", text, "' is not TENSOR=LAYOUT (e.g. x=S0 or w1=R,S1)"));
  into.pins[text.substr(0, eq)] = parse_layout(text.substr(eq + 1), mesh, cat("--shard ", text));
}

double node_time(const TeNode& node, const NodeSharding& sharding, const Mesh& mesh, const HwSpec& spec) {
  double parts = 1;
  for (int m = 0; m < mesh.rank(); ++m)
    if (sharding.split[m] >= 0) parts *= static_cast<double>(mesh.shape[m]);
  const double flops = static_cast<double>(node.flops()) / parts;
  double bytes = bytes_of(node.output()) / parts;
  // Each input's piece: split axes that index it divide it.
  for (const Access& acc : node.inputs()) {
    double share = 1;
    for (int m = 0; m < mesh.rank(); ++m)
      if (sharding.split[m] >= 0 && acc.map.uses_axis(sharding.split[m])) share *= static_cast<double>(mesh.shape[m]);
    bytes += bytes_of(acc.type) / share;
  }
  const bool contraction = node.num_reduction() > 0 && node.inputs().size() >= 2;
  double peak = contraction ? spec.peak_flops(node.output().dtype, true) : 0;
  if (peak <= 0) peak = spec.peak_flops(node.output().dtype, false);
  if (peak <= 0) peak = spec.peak_flops(DType::f32, false);
  const double dram = spec.memory_levels.empty() ? 0 : spec.memory_levels.back().bandwidth_gbps * 1e9;
  const double t_compute = peak > 0 ? flops / peak : 0;
  const double t_memory = dram > 0 ? bytes / dram : 0;
  return std::max(t_compute, t_memory) + spec.compute.launch_overhead_us * 1e-6;
}

ShardSearchOptions::Overlap parse_overlap(const std::string& text, const std::string& what) {
  if (text == "auto") return ShardSearchOptions::Overlap::automatic;
  if (text == "on") return ShardSearchOptions::Overlap::on;
  if (text == "off") return ShardSearchOptions::Overlap::off;
  throw UserError("command line", what, cat("'", text, "' is not auto, on or off"));
}

void choose_overlap(const OpGraph& graph, ShardPlan& plan, const HwSpec& spec, ShardSearchOptions::Overlap mode) {
  plan.shifted.clear();
  if (mode == ShardSearchOptions::Overlap::off) return;
  plan.shifted.assign(graph.num_nodes(), -1);
  PlanPricer pricer(graph, spec, plan.mesh);
  const bool on = mode == ShardSearchOptions::Overlap::on;
  double cur = pricer.evaluate(plan, nullptr);
  // Per tensor, in topological order: its readers that can run on its shifts, one at a time and
  // all together (the shifted blocks are shared; a gather paid for one reader is paid for all).
  std::vector<std::vector<std::pair<NodeId, int>>> readers(graph.num_tensors());
  for (NodeId n : graph.topological_order())
    for (size_t i = 0; i < graph.node_inputs(n).size(); ++i) {
      const TensorId t = graph.node_inputs(n)[i];
      if (graph.tensor(t).kind != TensorKind::weight && plan.shifted[n] < 0) readers[t].push_back({n, static_cast<int>(i)});
    }
  std::vector<TensorId> tensors(graph.inputs().begin(), graph.inputs().end());
  for (NodeId n : graph.topological_order()) tensors.push_back(graph.node_output(n));
  for (TensorId t : tensors) {
    std::vector<std::pair<NodeId, int>> legal;
    for (const auto& [n, i] : readers[t]) {
      if (plan.shifted[n] >= 0) continue;  // already on another input's shifts
      plan.shifted[n] = i;
      if (std::isfinite(pricer.evaluate(plan, nullptr))) legal.push_back({n, i});
      plan.shifted[n] = -1;
    }
    if (legal.empty()) continue;
    std::vector<std::vector<std::pair<NodeId, int>>> options;
    for (const auto& r : legal) options.push_back({r});
    if (legal.size() > 1) options.push_back(legal);
    double best = on ? std::numeric_limits<double>::infinity() : cur * (1 - 1e-9);
    int pick = -1;
    for (size_t k = 0; k < options.size(); ++k) {
      for (const auto& [n, i] : options[k]) plan.shifted[n] = i;
      const double v = pricer.evaluate(plan, nullptr);
      // (On: the option shifting the most readers, then the cheapest.)
      const bool better = on ? (pick < 0 || options[k].size() > options[pick].size() ||
                                (options[k].size() == options[pick].size() && v < best))
                             : v < best;
      if (std::isfinite(v) && better) {
        best = v;
        pick = static_cast<int>(k);
      }
      for (const auto& [n, i] : options[k]) plan.shifted[n] = -1;
    }
    if (pick < 0) continue;
    for (const auto& [n, i] : options[pick]) plan.shifted[n] = i;
    cur = best;
  }
  if (std::all_of(plan.shifted.begin(), plan.shifted.end(), [](int i) { return i < 0; })) plan.shifted.clear();
}

PlanCost price_plan(const OpGraph& graph, const ShardPlan& plan, const HwSpec& spec) {
  if (auto why = check_mesh(spec, plan.mesh)) throw UserError("", "", *why);
  PlanPricer pricer(graph, spec, plan.mesh);
  PlanCost cost;
  pricer.evaluate(plan, &cost);
  return cost;
}

ShardSearch search_shard_plan(const OpGraph& graph, const Mesh& mesh, const HwSpec& spec, const ShardSearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (auto why = check_mesh(spec, mesh)) throw UserError("", "", *why);
  const ShardConstraints& cons = options.constraints;
  for (const auto& [name, layout] : cons.pins) {
    auto t = graph.find_tensor(name);
    if (!t) throw UserError("", "", cat("--shard: no tensor named '", name, "' in the graph"));
    if (auto why = check_layout(graph.tensor(*t).type.shape, layout, mesh))
      throw UserError("", "", cat("--shard ", name, "=", print_layout(layout), ": ", *why));
  }
  auto pin_of = [&](TensorId t) -> const TensorLayout* {
    auto it = cons.pins.find(graph.tensor(t).name);
    return it == cons.pins.end() ? nullptr : &it->second;
  };

  ShardSearch result;
  result.plan = replicated_plan(graph, mesh);
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    if (const TensorLayout* p = pin_of(graph.inputs()[i])) result.plan.inputs[i] = *p;
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    if (const TensorLayout* p = pin_of(graph.outputs()[i])) result.plan.outputs[i] = *p;

  PlanPricer pricer(graph, spec, mesh, static_cast<double>(options.memory_per_device_bytes));
  std::vector<std::vector<NodeSharding>> cand(graph.num_nodes());
  for (NodeId n = 0; n < graph.num_nodes(); ++n) {
    for (const NodeSharding& c : choices(graph.node(n), mesh)) {
      const ShardedNode& sn = pricer.sharded(n, c);
      bool ok = true;
      if (const TensorLayout* p = pin_of(graph.node_output(n))) ok &= sn.output == *p;
      for (size_t i = 0; i < graph.node_inputs(n).size(); ++i) {
        const TensorId t = graph.node_inputs(n)[i];
        if (graph.tensor(t).kind != TensorKind::weight) continue;
        if (const TensorLayout* p = pin_of(t)) ok &= sn.inputs[i] == *p;
      }
      if (ok) cand[n].push_back(c);
    }
    if (cand[n].empty())
      throw UserError("", "", cat("--shard: no way to split node '", graph.node(n).name(), "' agrees with the pins"));
  }

  // Exhaustive when small.
  double space = 1;
  for (const auto& c : cand) space *= static_cast<double>(c.size());
  ShardPlan plan = result.plan;
  double best = std::numeric_limits<double>::infinity();
  if (space <= static_cast<double>(options.exhaustive_limit)) {
    std::vector<size_t> idx(graph.num_nodes(), 0);
    for (;;) {
      for (NodeId n = 0; n < graph.num_nodes(); ++n) plan.nodes[n] = cand[n][idx[n]];
      const double c = pricer.evaluate(plan, nullptr);
      ++result.plans_priced;
      if (c < best) {
        best = c;
        result.plan = plan;
      }
      int n = 0;
      for (; n < graph.num_nodes(); ++n) {
        if (++idx[n] < cand[n].size()) break;
        idx[n] = 0;
      }
      if (n == graph.num_nodes()) break;
    }
    result.exact = true;
  }

  // Forward pass: each node's cheapest choice given its producers', priced on the plan so far
  // (the nodes before it and its own input conversions), then coordinate descent on whole plans.
  {
    ShardPlan g = result.exact ? replicated_plan(graph, mesh) : plan;
    g.inputs = result.plan.inputs;
    g.outputs = result.plan.outputs;
    for (NodeId n = 0; n < graph.num_nodes(); ++n) g.nodes[n] = cand[n][0];
    const std::vector<NodeId> order = graph.topological_order();
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const NodeId n = order[pos];
      double local_best = std::numeric_limits<double>::infinity();
      NodeSharding pick = cand[n][0];
      for (const NodeSharding& c : cand[n]) {
        g.nodes[n] = c;
        const double v = pricer.evaluate(g, nullptr, static_cast<int>(pos + 1));
        ++result.plans_priced;
        if (v < local_best) {
          local_best = v;
          pick = c;
        }
      }
      g.nodes[n] = pick;
    }
    result.greedy_s = pricer.evaluate(g, nullptr);
    auto descend = [&](ShardPlan& p) {
      double cur = pricer.evaluate(p, nullptr);
      for (int pass = 0; pass < options.max_descent_passes; ++pass) {
        bool improved = false;
        for (NodeId n : order) {
          const NodeSharding keep = p.nodes[n];
          for (const NodeSharding& c : cand[n]) {
            if (c == keep) continue;
            p.nodes[n] = c;
            const double v = pricer.evaluate(p, nullptr);
            ++result.plans_priced;
            if (v < cur * (1 - 1e-9)) {
              cur = v;
              improved = true;
              break;
            }
            p.nodes[n] = keep;
          }
        }
        if (!improved) break;
      }
      return cur;
    };
    // Two starting points: the forward pass's plan, and every node at its first choice (whole on
    // every device where the pins allow), which wins when communication outweighs the split work.
    ShardPlan whole = g;
    for (NodeId n = 0; n < graph.num_nodes(); ++n) whole.nodes[n] = cand[n][0];
    double cur = descend(g);
    if (const double w = options.max_descent_passes > 0 ? descend(whole) : cur; w < cur) {
      cur = w;
      g = whole;
    }
    if (!result.exact) {
      result.plan = g;
      best = cur;
    } else if (cur < best) {  // cannot happen: the enumeration saw this plan
      TESSEL_ASSERT(false, "coordinate descent beat the exhaustive search");
    }
  }
  result.heuristic_s = best;
  if (options.z3_bound_ms > 0) {
    ShardBound b = z3_bound(graph, mesh, spec, pricer, cand, result.plan, options.memory_per_device_bytes, options.z3_bound_ms);
    if (b.has_plan && b.plan_s < best * (1 - 1e-9)) {
      result.plan = b.plan;
      best = b.plan_s;
    }
    result.bound = std::move(b);
  }
  if (!std::isfinite(best)) throw UserError("", "", "no shard plan can run this graph (every plan needs a layout no collective makes)");
  choose_overlap(graph, result.plan, spec, options.overlap);
  result.cost = price_plan(graph, result.plan, spec);
  if (options.memory_per_device_bytes > 0) {
    result.cost.fits = result.cost.weight_bytes_per_device <= options.memory_per_device_bytes;
    if (!result.cost.fits)
      throw UserError("", "--memory-per-device",
                      cat("no plan found keeps the weights within ", options.memory_per_device_bytes >> 20,
                          " MiB per device; the best needs ", result.cost.weight_bytes_per_device >> 20, " MiB (pin weights sharded with --shard)"));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string format_shard_plan(const OpGraph& graph, const ShardPlan& plan, const PlanCost& cost, const HwSpec& spec) {
  std::ostringstream os;
  auto ms = [](double s) { return cat(std::round(s * 1e6) / 1e3, " ms"); };
  os << "mesh " << plan.mesh.print() << " of " << spec.name << ": predicted " << ms(cost.total_s()) << " = compute "
     << ms(cost.compute_s) << " + communication " << ms(cost.communication_s) << " (" << cost.transfers.size()
     << " collectives" << (plan.shifted.empty() ? ", no overlap" : "") << "); weights " << (cost.weight_bytes_per_device >> 20) << " MiB per device\n";
  if (std::string note = mesh_note(spec, plan.mesh); !note.empty()) os << "  note: " << note << "\n";
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    os << "  input  " << graph.tensor(graph.inputs()[i]).name << " " << print_layout(plan.inputs[i]) << "\n";
  for (NodeId n : graph.topological_order())
    os << "  node   " << graph.node(n).name() << ": " << node_split_text(graph.node(n), plan.nodes[n], plan.mesh) << "\n";
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    os << "  output " << graph.tensor(graph.outputs()[i]).name << " " << print_layout(plan.outputs[i]) << "\n";
  for (const PlannedTransfer& t : cost.transfers) {
    os << "  collective " << print_step(t.step, plan.mesh) << " of '" << t.tensor << "' " << print_layout(t.before)
       << " for " << (t.consumer == "output" ? "the output" : cat("'", t.consumer, "'")) << ": "
       << std::round(t.cost.bytes_per_device / 1024) << " KiB per device over " << t.cost.level << ", " << ms(t.cost.seconds);
    if (t.overlapped)
      os << " per step, " << plan.mesh.shape[t.step.mesh_axis] - 1 << " steps overlapped with the node's pieces ("
         << ms(t.exposed_s) << " exposed)";
    os << "\n";
  }
  return os.str();
}

}  // namespace tessel
