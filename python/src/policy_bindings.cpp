// Policies written in Python (python/tessel/policy.py wraps this).
//
// A Python policy is a callable taking a Context and returning the groups of its schedule (a list
// of Group). The Context is the tile-graph API the built-in policies use, as values: the graph's
// nodes and edges, roller's ranked tile candidates for a node, tile propagation and the grid check
// for a fused group, the footprint, the legality check and the cost model's estimate of a group
// (priced as the backend's kernel family, as every policy's candidates are), and the schedule of a
// built-in policy to start from. The C++ side puts the groups in dependence order, prices each,
// records every edge between groups as unfused ("policy"), and checks the whole schedule
// (check_schedule) before anything is emitted: a Python policy cannot produce an illegal kernel.
//
// A Context is valid only while its policy's schedule() runs (it points at the pipeline's graph,
// spec and cost model); using it afterwards is a UserError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cost_model/group_footprint.h"
#include "hw_specs/hw_spec.h"
#include "policy/check_schedule.h"
#include "policy/kernel_families.h"
#include "policy/policy.h"
#include "policy/roller.h"
#include "policy/schedule.h"
#include "python/src/bindings.h"
#include "tilegraph/error.h"
#include "tilegraph/import/tile_config_json.h"
#include "tilegraph/tile_config.h"
#include "tilegraph/op_graph.h"
#include "tilegraph/tile_config.h"
#include "tilegraph/tile_propagation.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessel::python {
namespace {

/// A fused group as a Python policy proposes it (ScheduledGroup).
struct Group {
  ScheduledGroup g;
};

/// What a Python policy sees while its schedule() runs.
class Context {
 public:
  explicit Context(const PolicyContext& ctx) : ctx_(&ctx) {}
  void invalidate() { ctx_ = nullptr; }

  const PolicyContext& ctx() const {
    if (!ctx_) throw UserError("policy context", "", "used after its policy's schedule() returned");
    return *ctx_;
  }
  const OpGraph& graph() const { return ctx().graph; }

  NodeId node_id(nb::handle node) const {
    const OpGraph& g = graph();
    if (nb::isinstance<nb::int_>(node)) {
      const int n = nb::cast<int>(node);
      if (n < 0 || n >= g.num_nodes()) throw UserError("policy context", "node", cat("no node ", n, " (the graph has ", g.num_nodes(), ")"));
      return n;
    }
    const std::string name = nb::cast<std::string>(node);
    for (NodeId n = 0; n < g.num_nodes(); ++n)
      if (g.node(n).name() == name) return n;
    throw UserError("policy context", "node", cat("no node named '", name, "'"));
  }

  nb::list nodes() const {
    const OpGraph& g = graph();
    nb::list out;
    for (NodeId n : g.topological_order()) {
      const TeNode& node = g.node(n);
      nb::dict d;
      d["id"] = n;
      d["name"] = node.name();
      d["shape"] = node.output().shape;
      d["dtype"] = std::string(dtype_name(node.output().dtype));
      d["axes"] = node.axis_names();
      d["extents"] = node.extents();
      d["spatial_axes"] = node.num_spatial();
      d["flops"] = node.flops();
      std::vector<int> producers, consumers;
      for (TensorId t : g.node_inputs(n)) producers.push_back(g.producer(t));
      for (NodeId c : g.consumers(g.node_output(n))) consumers.push_back(c);
      d["producers"] = producers;  // per input, -1 for a model input or weight
      d["consumers"] = consumers;
      d["is_output"] = std::find(g.outputs().begin(), g.outputs().end(), g.node_output(n)) != g.outputs().end();
      out.append(d);
    }
    return out;
  }

  std::vector<TileConfig> candidates(nb::handle node, int k) const {
    const PolicyContext& c = ctx();
    std::vector<TileConfig> out;
    for (const TileCandidate& t : roller_candidates(c.graph, node_id(node), c.spec, c.cost)) {
      if (k > 0 && static_cast<int>(out.size()) >= k) break;
      out.push_back(t.tiles);
    }
    return out;
  }

  Group group(nb::list nodes, nb::dict tiles, std::map<std::string, std::string> edge_levels) const {
    Group out;
    for (nb::handle n : nodes) out.g.nodes.push_back(node_id(n));
    for (auto [k, v] : tiles) out.g.tiles[node_id(k)] = nb::cast<TileConfig>(v);
    for (NodeId n : out.g.nodes) {
      auto t = out.g.tiles.find(n);
      if (t == out.g.tiles.end()) throw UserError("policy context", "group", cat("no tile for node '", graph().node(n).name(), "'"));
      // A tile the policy built or edited must fit its node before anything prices it.
      if (std::optional<std::string> bad = check_tile_config(graph().node(n), t->second))
        throw UserError("policy context", "group", cat("tile for node '", graph().node(n).name(), "': ", *bad));
    }
    for (const auto& [name, level] : edge_levels) {
      auto t = graph().find_tensor(name);
      if (!t) throw UserError("policy context", "edge_levels", cat("no tensor named '", name, "'"));
      out.g.edge_levels[*t] = level;
    }
    return out;
  }

  nb::dict estimate(const Group& group) const {
    const PolicyContext& c = ctx();
    const CostBreakdown b = c.cost.estimate(c.graph, group.g, c.spec);
    nb::dict d;
    d["latency_s"] = b.latency_s;
    d["flops"] = b.flops;
    d["bound"] = b.bound;
    d["tensor_cores"] = b.tensor_cores;
    d["waves"] = b.waves;
    d["occupancy"] = b.occupancy;
    nb::dict terms;
    for (const CostTerm& t : b.terms) terms[t.name.c_str()] = t.seconds;
    d["terms"] = terms;
    nb::dict memory;
    for (const LevelCost& l : b.memory) memory[l.level.c_str()] = nb::make_tuple(l.bytes, l.seconds);
    d["memory"] = memory;
    d["notes"] = b.notes;
    return d;
  }

  std::vector<std::string> check(const Group& group) const { return check_group(graph(), ctx().spec, group.g); }

  nb::dict footprint(const Group& group) const {
    const GroupFootprint f = group_footprint(graph(), group.g, ctx().spec);
    nb::dict d;
    d["smem_bytes_per_block"] = f.smem_bytes_per_block;
    d["register_bytes_per_thread"] = f.register_bytes_per_thread;
    d["threads_per_block"] = f.threads_per_block;
    return d;
  }

  nb::dict grid(nb::list nodes, nb::handle sink, std::vector<int64_t> sink_tile) const {
    std::vector<NodeId> ids;
    for (nb::handle n : nodes) ids.push_back(node_id(n));
    const GridCheck r = check_grid(graph(), ids, node_id(sink), sink_tile);
    nb::dict d;
    d["ok"] = r.ok;
    d["reason"] = r.reason;
    d["grid"] = r.grid;
    d["tiles"] = r.num_tiles;
    return d;
  }

  std::vector<Group> base(const std::string& name) const {
    for (auto& p : policies())
      if (p->name() == name) {
        const Schedule s = schedule_with_families(*p, ctx(), ctx().families);
        std::vector<Group> out;
        for (const ScheduleGroup& g : s.groups) out.push_back({g.group});
        return out;
      }
    throw UserError("policy context", "base", cat("no policy named '", name, "'"));
  }

  std::string spec_json() const { return write_hw_spec(ctx().spec); }

 private:
  const PolicyContext* ctx_;
};

/// The groups `groups` in an order that respects their data dependences; UserError naming the
/// policy when a node is missing, repeated, or the groups depend on each other in a cycle.
std::vector<ScheduledGroup> order_groups(const OpGraph& g, std::vector<ScheduledGroup> groups, const std::string& policy) {
  std::vector<int> owner(g.num_nodes(), -1);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].nodes.empty()) throw UserError(cat("policy ", policy), cat("group ", i), "has no nodes");
    for (NodeId n : groups[i].nodes) {
      if (owner[n] >= 0) throw UserError(cat("policy ", policy), cat("group ", i), cat("node '", g.node(n).name(), "' is also in group ", owner[n]));
      owner[n] = static_cast<int>(i);
    }
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (owner[n] < 0) throw UserError(cat("policy ", policy), "", cat("node '", g.node(n).name(), "' is in no group"));
  // Nodes inside a group in topological order, the sink last (the ScheduledGroup convention).
  std::vector<int> position(g.num_nodes());
  const std::vector<NodeId> topo = g.topological_order();
  for (size_t i = 0; i < topo.size(); ++i) position[topo[i]] = static_cast<int>(i);
  for (ScheduledGroup& sg : groups)
    std::sort(sg.nodes.begin(), sg.nodes.end(), [&](NodeId a, NodeId b) { return position[a] < position[b]; });
  // Kahn's algorithm over the groups, smallest first sink position first (deterministic).
  const size_t k = groups.size();
  std::vector<std::set<int>> after(k);
  std::vector<int> indegree(k, 0);
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (TensorId t : g.node_inputs(n))
      if (NodeId p = g.producer(t); p >= 0 && owner[p] != owner[n] && after[owner[p]].insert(owner[n]).second) ++indegree[owner[n]];
  std::set<std::pair<int, int>> ready;
  for (size_t i = 0; i < k; ++i)
    if (!indegree[i]) ready.insert({position[groups[i].nodes.back()], static_cast<int>(i)});
  std::vector<ScheduledGroup> out;
  while (!ready.empty()) {
    const int i = ready.begin()->second;
    ready.erase(ready.begin());
    out.push_back(groups[i]);
    for (int j : after[i])
      if (!--indegree[j]) ready.insert({position[groups[j].nodes.back()], j});
  }
  if (out.size() != k) throw UserError(cat("policy ", policy), "", "its groups depend on each other in a cycle");
  return out;
}

/// A Python object that C++ copies freely: copies share it without touching its reference count
/// (which needs the interpreter's lock); the last copy takes the lock to let it go.
struct PythonRef {
  explicit PythonRef(nb::object o) : object(std::move(o)) {}
  ~PythonRef() {
    nb::gil_scoped_acquire gil;
    object.reset();
  }
  nb::object object;
};

/// A Policy whose schedule() calls a Python callable.
class PythonPolicy : public Policy {
 public:
  PythonPolicy(std::string name, std::string description, std::shared_ptr<PythonRef> fn)
      : name_(std::move(name)), description_(std::move(description)), fn_(std::move(fn)) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }

  Schedule schedule(const PolicyContext& ctx) const override {
    std::vector<ScheduledGroup> proposed;
    {
      nb::gil_scoped_acquire gil;
      auto context = std::make_shared<Context>(ctx);
      try {
        nb::object result = fn_->object(nb::cast(context));
        if (!nb::isinstance<nb::list>(result) && !nb::isinstance<nb::tuple>(result)) throw nb::cast_error();
        for (nb::handle item : result) proposed.push_back(nb::cast<Group&>(item).g);
      } catch (nb::python_error& e) {
        context->invalidate();
        // One line: the exception's type and message; the traceback goes to stderr.
        const std::string what = cat(nb::cast<std::string>(e.type().attr("__name__")), ": ", nb::cast<std::string>(nb::str(e.value())));
        e.restore();
        PyErr_Print();
        throw UserError(cat("policy ", name_), "schedule", what);
      } catch (nb::cast_error&) {
        context->invalidate();
        throw UserError(cat("policy ", name_), "schedule", "must return a list of tessel Group objects (Context.group)");
      }
      context->invalidate();
    }
    Schedule out;
    out.policy = name_;
    out.cost_model = std::string(ctx.cost.name());
    out.hw_spec = ctx.spec.name;
    out.hw_spec_hash = hw_spec_hash(ctx.spec);
    const OpGraph& g = ctx.graph;
    for (ScheduledGroup& sg : order_groups(g, std::move(proposed), name_)) {
      ScheduleGroup group;
      group.group = std::move(sg);
      group.predicted = ctx.cost.estimate(g, group.group, ctx.spec);
      out.predicted_latency_s += group.predicted.latency_s;
      out.groups.push_back(std::move(group));
    }
    record_edges_between_groups(g, out, UnfusedReason::policy, cat("the ", name_, " policy's groups"));
    const std::vector<std::string> problems = check_schedule(g, ctx.spec, out);
    if (!problems.empty()) throw UserError(cat("policy ", name_), "schedule", problems.front());
    return out;
  }

 private:
  std::string name_, description_;
  std::shared_ptr<PythonRef> fn_;
};

std::vector<std::string>& python_policy_names() {
  static std::vector<std::string> names;
  return names;
}

}  // namespace

void bind_policies(nb::module_& m) {
  // A level as Python gives it: (level name, spatial extents, reduction steps).
  using Level = std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>;
  auto to_levels = [](const std::vector<Level>& levels) {
    std::vector<LevelTile> out;
    for (const auto& [name, spatial, reduction] : levels) out.push_back(LevelTile{name, spatial, reduction});
    return out;
  };
  nb::class_<TileConfig>(m, "Tile")
      .def(
          "__init__",
          [to_levels](TileConfig* t, const std::vector<Level>& levels, const std::vector<int64_t>& threads, int vector_width,
                      int pipeline_stages, int raster_group) {
            new (t) TileConfig{};
            t->levels = to_levels(levels);
            t->threads = threads;
            t->vector_width = vector_width;
            t->pipeline_stages = pipeline_stages;
            t->raster_group = raster_group;
          },
          "levels"_a, "threads"_a = std::vector<int64_t>{}, "vector_width"_a = 1, "pipeline_stages"_a = 1, "raster_group"_a = 1,
          "A tile configuration: levels outermost first, each (level, spatial extents, reduction steps); checked against "
          "its node when a group is made.")
      .def(
          "replace",
          [to_levels](const TileConfig& t, std::optional<std::vector<Level>> levels, std::optional<std::vector<int64_t>> threads,
                      std::optional<int> vector_width, std::optional<int> pipeline_stages, std::optional<int> raster_group) {
            TileConfig out = t;
            if (levels) out.levels = to_levels(*levels);
            if (threads) out.threads = *threads;
            if (vector_width) out.vector_width = *vector_width;
            if (pipeline_stages) out.pipeline_stages = *pipeline_stages;
            if (raster_group) out.raster_group = *raster_group;
            return out;
          },
          "levels"_a = nb::none(), "threads"_a = nb::none(), "vector_width"_a = nb::none(), "pipeline_stages"_a = nb::none(),
          "raster_group"_a = nb::none(), "A copy with the given fields replaced (a tile kind is kept).")
      .def("to_json", [](const TileConfig& t) { return tile_config_to_json(t); })
      .def_static(
          "from_json", [](const std::string& text) { return tile_config_from_json(text, "Tile.from_json"); }, "text"_a,
          "A tile configuration from the schedule format's JSON (a UserError naming the JSON pointer when malformed).")
      .def("__eq__", [](const TileConfig& a, const TileConfig& b) { return a == b; })
      .def_prop_ro("levels",
                   [](const TileConfig& t) {
                     nb::list l;
                     for (const LevelTile& lt : t.levels) l.append(nb::make_tuple(lt.level, lt.spatial, lt.reduction));
                     return l;
                   })
      .def_prop_ro("threads", [](const TileConfig& t) { return t.threads; })
      .def_prop_ro("vector_width", [](const TileConfig& t) { return t.vector_width; })
      .def_prop_ro("pipeline_stages", [](const TileConfig& t) { return t.pipeline_stages; })
      .def_prop_ro("raster_group", [](const TileConfig& t) { return t.raster_group; })
      .def("__str__", [](const TileConfig& t) { return print_tile_config(t); })
      .def("__repr__", [](const TileConfig& t) { return cat("<tessel.Tile ", print_tile_config(t), ">"); });

  nb::class_<Group>(m, "Group")
      .def_prop_ro("nodes", [](const Group& g) { return g.g.nodes; })
      .def_prop_ro("tiles",
                   [](const Group& g) {
                     nb::dict d;
                     for (const auto& [n, t] : g.g.tiles) d[nb::int_(n)] = nb::cast(t);
                     return d;
                   })
      .def_prop_ro("edge_levels",
                   [](const Group& g) {
                     std::map<int, std::string> out(g.g.edge_levels.begin(), g.g.edge_levels.end());
                     return out;
                   })
      .def("__repr__", [](const Group& g) { return cat("<tessel.Group of ", g.g.nodes.size(), " nodes, sink ", g.g.nodes.back(), ">"); });

  nb::class_<Context>(m, "Context")
      .def("nodes", &Context::nodes, "The graph's nodes in topological order, each a dict.")
      .def("candidates", &Context::candidates, "node"_a, "k"_a = 0, "Roller's tile candidates for a node, best first.")
      .def("group", &Context::group, "nodes"_a, "tiles"_a, "edge_levels"_a = std::map<std::string, std::string>{},
           "A fused group: its nodes, a Tile per node, the memory level of tensors kept inside.")
      .def("estimate", &Context::estimate, "group"_a, "The cost model's prediction for a group, as its kernel family.")
      .def("check", &Context::check, "group"_a, "The rules a group breaks (empty when legal).")
      .def("footprint", &Context::footprint, "group"_a)
      .def("grid", &Context::grid, "nodes"_a, "sink"_a, "sink_tile"_a,
           "Whether the nodes share the grid the sink's tile induces (tile propagation).")
      .def("base", &Context::base, "policy"_a, "The groups a built-in policy chooses.")
      .def("spec_json", &Context::spec_json);

  m.def(
      "register_policy",
      [](const std::string& name, const std::string& description, nb::object fn) {
        if (name.empty()) throw UserError("register_policy", "name", "is empty");
        auto ref = std::make_shared<PythonRef>(std::move(fn));
        register_policy(name, [name, description, ref]() -> std::unique_ptr<Policy> {
          return std::make_unique<PythonPolicy>(name, description, ref);
        });
        auto& names = python_policy_names();
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      },
      "name"_a, "description"_a, "schedule"_a);
  m.def("unregister_policy", [](const std::string& name) {
    auto& names = python_policy_names();
    names.erase(std::remove(names.begin(), names.end(), name), names.end());
    return unregister_policy(name);
  });
  // Registered factories hold Python objects: drop them before the interpreter goes away.
  m.def("_clear_policies", []() {
    for (const std::string& name : python_policy_names()) unregister_policy(name);
    python_policy_names().clear();
  });
  nb::module_::import_("atexit").attr("register")(m.attr("_clear_policies"));
}

}  // namespace tessel::python
