// Tile propagation: exact per-dimension index sets read by a tile, backward propagation through a
// fused group, and the grid-consistency check (tile_propagation.h).
#include "tilegraph/tile_propagation.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "tilegraph/error.h"

namespace tessel {
namespace {

// Largest number of linear intervals reinterpret_region enumerates before giving up on exactness.
constexpr int64_t kMaxLinearIntervals = int64_t{1} << 22;

std::string join(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

Region empty_region(int rank) { return Region{std::vector<IndexSet>(rank)}; }

// If any dimension is empty, every dimension is (Region's canonical form).
Region canonical(Region r) {
  for (const IndexSet& s : r.dims)
    if (s.empty()) return empty_region(r.rank());
  return r;
}

// S + {c * t : t in [b, b + e)}, e >= 1.
IndexSet add_progression(const IndexSet& s, int64_t c, int64_t b, int64_t e) {
  const int64_t step = std::llabs(c);
  const int64_t base = c > 0 ? c * b : c * (b + e - 1);  // smallest shift
  if (s.intervals.size() == 1) {
    const Interval iv = s.intervals[0];
    // Copies shifted by `step` overlap or touch when the interval is at least `step` long.
    if (e == 1 || iv.end - iv.begin >= step)
      return IndexSet::range(iv.begin + base, iv.end + base + step * (e - 1));
  }
  std::vector<Interval> out;
  out.reserve(s.intervals.size() * static_cast<size_t>(e));
  for (int64_t k = 0; k < e; ++k)
    for (const Interval& iv : s.intervals)
      out.push_back({iv.begin + base + k * step, iv.end + base + k * step});
  return IndexSet::from_intervals(std::move(out));
}

// The values of `row` over a non-empty box of the domain (unclamped).
IndexSet row_values(const AffineExpr& row, const DomainTile& tile) {
  struct Term {
    int64_t c, b, e;
  };
  std::vector<Term> terms;
  for (size_t a = 0; a < row.coeffs.size(); ++a)
    if (row.coeffs[a] != 0) terms.push_back({row.coeffs[a], tile.begin[a], tile.extent[a]});
  // Small coefficients first: a contiguous partial sum absorbs larger strides in closed form
  // (conv: kh then 2*oh gives one interval without enumerating oh).
  std::stable_sort(terms.begin(), terms.end(),
                   [](const Term& x, const Term& y) { return std::llabs(x.c) < std::llabs(y.c); });
  IndexSet s = IndexSet::range(row.offset, row.offset + 1);
  for (const Term& t : terms) s = add_progression(s, t.c, t.b, t.e);
  return s;
}

// Maps a region of a tensor of shape `from` onto a tensor of shape `to` with the same element
// count, through the row-major linear index: per destination dimension, the set of coordinates
// the elements take. Returns nullopt when enumerating the linear intervals would exceed
// kMaxLinearIntervals.
std::optional<Region> reinterpret_region(const Region& region, const std::vector<int64_t>& from,
                                         const std::vector<int64_t>& to) {
  const int rf = static_cast<int>(from.size());
  const int rt = static_cast<int>(to.size());
  if (region.empty()) return empty_region(rt);
  // 1. Split `from` into an enumerated prefix [0, j), dimension j, and a suffix of dimensions the
  //    region covers completely (which makes each interval of dimension j one linear interval).
  int j = rf - 1;
  int64_t inner = 1;
  while (j > 0 && region.dims[j] == IndexSet::range(0, from[j])) inner *= from[j--];
  std::vector<Interval> linear;
  if (rf == 0) {
    linear.push_back({0, 1});
  } else {
    int64_t combos = 1;
    for (int d = 0; d < j; ++d) combos *= region.dims[d].count();
    if (combos * static_cast<int64_t>(region.dims[j].intervals.size()) > kMaxLinearIntervals)
      return std::nullopt;
    // 2. Enumerate the prefix in row-major order; each prefix point contributes the intervals of
    //    dimension j, scaled by the suffix size.
    std::vector<std::vector<int64_t>> elems(j);
    for (int d = 0; d < j; ++d)
      for (const Interval& iv : region.dims[d].intervals)
        for (int64_t v = iv.begin; v < iv.end; ++v) elems[d].push_back(v);
    std::vector<size_t> pos(j, 0);  // odometer over the prefix points
    for (int64_t n = 0; n < combos; ++n) {
      int64_t prefix = 0;
      for (int d = 0; d < j; ++d) prefix = prefix * from[d] + elems[d][pos[d]];
      for (const Interval& iv : region.dims[j].intervals)
        linear.push_back({(prefix * from[j] + iv.begin) * inner, (prefix * from[j] + iv.end) * inner});
      for (int d = j - 1; d >= 0; --d) {
        if (++pos[d] < elems[d].size()) break;
        pos[d] = 0;
      }
    }
  }
  // 3. Project every linear interval onto each destination dimension.
  std::vector<int64_t> stride(rt, 1);
  for (int d = rt - 2; d >= 0; --d) stride[d] = stride[d + 1] * to[d + 1];
  std::vector<std::vector<Interval>> per_dim(rt);
  for (const Interval& iv : linear) {
    for (int d = 0; d < rt; ++d) {
      const int64_t q0 = iv.begin / stride[d];
      const int64_t q1 = (iv.end - 1) / stride[d];
      if (q1 - q0 + 1 >= to[d]) {
        per_dim[d].push_back({0, to[d]});
        continue;
      }
      const int64_t r0 = q0 % to[d];
      const int64_t r1 = q1 % to[d];
      if (r0 <= r1) {
        per_dim[d].push_back({r0, r1 + 1});
      } else {
        per_dim[d].push_back({0, r1 + 1});
        per_dim[d].push_back({r0, to[d]});
      }
    }
  }
  Region out;
  for (int d = 0; d < rt; ++d) out.dims.push_back(IndexSet::from_intervals(std::move(per_dim[d])));
  return canonical(std::move(out));
}

std::vector<int64_t> spatial_extents(const TeNode& node) {
  std::vector<int64_t> e;
  for (int a = 0; a < node.num_spatial(); ++a) e.push_back(node.axes()[a].extent);
  return e;
}

bool is_reinterpreted(const TeNode& node) { return node.output().shape != spatial_extents(node); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// IndexSet, Region, DomainTile.

IndexSet IndexSet::range(int64_t begin, int64_t end) {
  IndexSet s;
  if (end > begin) s.intervals.push_back({begin, end});
  return s;
}

IndexSet IndexSet::from_intervals(std::vector<Interval> intervals) {
  std::erase_if(intervals, [](const Interval& iv) { return iv.end <= iv.begin; });
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  IndexSet s;
  for (const Interval& iv : intervals) {
    if (!s.intervals.empty() && iv.begin <= s.intervals.back().end)
      s.intervals.back().end = std::max(s.intervals.back().end, iv.end);
    else
      s.intervals.push_back(iv);
  }
  return s;
}

int64_t IndexSet::lo() const {
  TESSEL_ASSERT(!intervals.empty(), "lo() of an empty IndexSet");
  return intervals.front().begin;
}

int64_t IndexSet::hi() const {
  TESSEL_ASSERT(!intervals.empty(), "hi() of an empty IndexSet");
  return intervals.back().end;
}

int64_t IndexSet::count() const {
  int64_t n = 0;
  for (const Interval& iv : intervals) n += iv.end - iv.begin;
  return n;
}

bool IndexSet::contains(int64_t index) const {
  auto it = std::upper_bound(intervals.begin(), intervals.end(), index,
                             [](int64_t v, const Interval& iv) { return v < iv.begin; });
  return it != intervals.begin() && index < std::prev(it)->end;
}

IndexSet IndexSet::clamp(int64_t begin, int64_t end) const {
  IndexSet s;
  for (const Interval& iv : intervals) {
    const Interval c{std::max(iv.begin, begin), std::min(iv.end, end)};
    if (c.end > c.begin) s.intervals.push_back(c);
  }
  return s;
}

std::string IndexSet::print() const {
  auto one = [](const Interval& iv) { return cat("[", iv.begin, ",", iv.end, ")"); };
  if (intervals.size() == 1) return one(intervals[0]);
  std::string out = "{";
  for (size_t i = 0; i < intervals.size(); ++i) out += (i ? " " : "") + one(intervals[i]);
  return out + "}";
}

IndexSet unite(const IndexSet& a, const IndexSet& b) {
  std::vector<Interval> all = a.intervals;
  all.insert(all.end(), b.intervals.begin(), b.intervals.end());
  return IndexSet::from_intervals(std::move(all));
}

bool Region::empty() const {
  for (const IndexSet& s : dims)
    if (s.empty()) return true;
  return false;
}

std::string Region::print() const {
  if (dims.empty()) return "scalar";
  if (empty()) return "empty";
  std::string out;
  for (size_t d = 0; d < dims.size(); ++d) out += (d ? " x " : "") + dims[d].print();
  return out;
}

int64_t num_elements(const Region& region) {
  int64_t n = 1;
  for (const IndexSet& s : region.dims) n *= s.count();
  return n;
}

Region bounding_box(const Region& region) {
  if (region.empty()) return empty_region(region.rank());
  Region out;
  for (const IndexSet& s : region.dims) out.dims.push_back(IndexSet::range(s.lo(), s.hi()));
  return out;
}

Region unite(const Region& a, const Region& b) {
  TESSEL_ASSERT(a.rank() == b.rank(), "union of regions of rank ", a.rank(), " and ", b.rank());
  if (a.empty()) return b;
  if (b.empty()) return a;
  Region out;
  for (int d = 0; d < a.rank(); ++d) out.dims.push_back(unite(a.dims[d], b.dims[d]));
  return out;
}

Region full_region(const std::vector<int64_t>& shape) {
  Region out;
  for (int64_t e : shape) out.dims.push_back(IndexSet::range(0, e));
  return canonical(std::move(out));
}

DomainTile DomainTile::whole(const TeNode& node) {
  DomainTile t;
  t.begin.assign(node.num_axes(), 0);
  t.extent = node.extents();
  return t;
}

bool DomainTile::empty() const {
  return std::any_of(extent.begin(), extent.end(), [](int64_t e) { return e <= 0; });
}

std::string DomainTile::print(int num_spatial) const {
  std::string out = "[";
  for (size_t a = 0; a < begin.size(); ++a) {
    if (a) out += static_cast<int>(a) == num_spatial ? " | " : ", ";
    out += cat(begin[a], ":", begin[a] + extent[a]);
  }
  if (num_spatial == 0 && !begin.empty()) out = "[| " + out.substr(1);
  return out + "]";
}

// ---------------------------------------------------------------------------------------------
// Single-node propagation.

Region input_region(const TeNode& node, int input, const DomainTile& tile) {
  TESSEL_ASSERT(input >= 0 && input < static_cast<int>(node.inputs().size()), "node '",
                node.name(), "' has no input ", input);
  TESSEL_ASSERT(static_cast<int>(tile.begin.size()) == node.num_axes() &&
                    static_cast<int>(tile.extent.size()) == node.num_axes(),
                "tile of ", tile.begin.size(), " axes for node '", node.name(), "' with ",
                node.num_axes());
  const Access& acc = node.inputs()[input];
  const int rank = acc.type.rank();
  if (tile.empty()) return empty_region(rank);
  Region out;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = acc.type.shape[d];
    if (acc.is_gather() && d == acc.gather_dim)
      out.dims.push_back(IndexSet::range(0, size));
    else
      out.dims.push_back(row_values(acc.map.result(d), tile).clamp(0, size));
  }
  return canonical(std::move(out));
}

Region read_region(const TeNode& node, int input, const DomainTile& tile) {
  Region out = input_region(node, input, tile);
  const Access& acc = node.inputs()[input];
  if (!acc.is_gather() || out.empty() || acc.gather_index_input < 0 || acc.gather_index_input >= static_cast<int>(node.inputs().size()))
    return out;
  const int64_t indices = num_elements(bounding_box(input_region(node, acc.gather_index_input, tile)));
  const int64_t rows = std::min(acc.type.shape[acc.gather_dim], std::max<int64_t>(indices, 1));
  out.dims[acc.gather_dim] = IndexSet::range(0, rows);
  return out;
}

DomainTile tile_for_output(const TeNode& node, const std::vector<int64_t>& out_begin,
                           const std::vector<int64_t>& out_extent,
                           const std::vector<int64_t>& reduction_step) {
  const int ns = node.num_spatial();
  TESSEL_ASSERT(static_cast<int>(out_begin.size()) == ns && static_cast<int>(out_extent.size()) == ns,
                "output tile of ", out_begin.size(), "/", out_extent.size(), " axes for node '",
                node.name(), "' with ", ns, " spatial axes");
  TESSEL_ASSERT(reduction_step.empty() ||
                    static_cast<int>(reduction_step.size()) == node.num_reduction(),
                "reduction step of ", reduction_step.size(), " axes for node '", node.name(),
                "' with ", node.num_reduction());
  DomainTile t;
  for (int a = 0; a < node.num_axes(); ++a) {
    const int64_t extent = node.axes()[a].extent;
    if (a < ns) {
      const int64_t b = std::clamp<int64_t>(out_begin[a], 0, extent);
      t.begin.push_back(b);
      t.extent.push_back(std::clamp<int64_t>(out_extent[a], 0, extent - b));
    } else {
      const int64_t step = reduction_step.empty() ? kWholeAxis : reduction_step[a - ns];
      t.begin.push_back(0);
      t.extent.push_back(step == kWholeAxis ? extent : std::clamp<int64_t>(step, 0, extent));
    }
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Group propagation.

const NodeTile* GroupPropagation::find(NodeId n) const {
  for (const NodeTile& t : nodes)
    if (t.node == n) return &t;
  return nullptr;
}

GroupPropagation propagate_group(const OpGraph& graph, const std::vector<NodeId>& group,
                                 NodeId sink, const DomainTile& sink_tile) {
  GroupPropagation result;
  auto fail = [&](std::string reason) {
    result.ok = false;
    result.reason = std::move(reason);
    result.nodes.clear();
    return result;
  };

  // 1. Validate the group and the sink tile.
  if (group.empty()) return fail("the group is empty");
  std::set<NodeId> members;
  for (NodeId n : group) {
    if (n < 0 || n >= graph.num_nodes())
      return fail(cat("node id ", n, " is not in the graph (", graph.num_nodes(), " nodes)"));
    if (!members.insert(n).second)
      return fail(cat("node '", graph.node(n).name(), "' appears twice in the group"));
  }
  if (!members.count(sink))
    return fail(cat("the sink (node id ", sink, ") is not in the group"));
  const TeNode& sink_node = graph.node(sink);
  if (static_cast<int>(sink_tile.begin.size()) != sink_node.num_axes() ||
      static_cast<int>(sink_tile.extent.size()) != sink_node.num_axes())
    return fail(cat("sink tile has ", sink_tile.begin.size(), " axes but node '", sink_node.name(),
                    "' has ", sink_node.num_axes()));
  for (int a = 0; a < sink_node.num_axes(); ++a) {
    const int64_t b = sink_tile.begin[a], e = sink_tile.extent[a];
    if (b < 0 || e < 0 || b + e > sink_node.axes()[a].extent)
      return fail(cat("sink tile ", sink_tile.print(sink_node.num_spatial()), " leaves the domain of '",
                      sink_node.name(), "' along axis '", sink_node.axes()[a].name, "' (extent ",
                      sink_node.axes()[a].extent, ")"));
  }

  // 2. Visit the group in reverse topological order, so every consumer is done before its
  //    producers.
  std::vector<NodeId> order;
  for (NodeId n : graph.topological_order())
    if (members.count(n)) order.push_back(n);
  std::vector<NodeTile> tiles(order.size());
  for (int k = static_cast<int>(order.size()) - 1; k >= 0; --k) {
    const NodeId n = order[k];
    const TeNode& node = graph.node(n);
    NodeTile& nt = tiles[k];
    nt.node = n;
    const std::vector<int64_t> spatial = spatial_extents(node);
    const int ns = node.num_spatial();

    if (n == sink) {
      nt.tile = sink_tile;
      Region box;
      for (int a = 0; a < ns; ++a)
        box.dims.push_back(IndexSet::range(sink_tile.begin[a], sink_tile.begin[a] + sink_tile.extent[a]));
      box = canonical(std::move(box));
      if (!is_reinterpreted(node)) {
        nt.output = box;
      } else {
        std::optional<Region> r = reinterpret_region(box, spatial, node.output().shape);
        nt.output = r ? *r : full_region(node.output().shape);
      }
    } else {
      // 2a. The union of what the in-group consumers read of this node's output.
      const TensorId out = graph.node_output(n);
      bool consumed = false;
      nt.output = empty_region(node.output().rank());
      for (int c = k + 1; c < static_cast<int>(order.size()); ++c) {
        const std::vector<TensorId>& ins = graph.node_inputs(order[c]);
        for (size_t i = 0; i < ins.size(); ++i) {
          if (ins[i] != out) continue;
          consumed = true;
          nt.output = unite(nt.output, tiles[c].inputs[i]);
        }
      }
      if (!consumed)
        return fail(cat("node '", node.name(), "' has no consumer inside the group and is not the sink '",
                        sink_node.name(), "'"));
      // 2b. The spatial box computing it.
      Region needed = nt.output;
      if (is_reinterpreted(node)) {
        std::optional<Region> r = reinterpret_region(nt.output, node.output().shape, spatial);
        needed = r ? *r : full_region(spatial);
        const Region box = bounding_box(needed);
        if (!r || num_elements(box) != num_elements(nt.output))
          nt.notes.push_back(cat("output ", node.output().print(), " of '", node.name(),
                                 "' reinterprets domain ", join(spatial), ": required region ",
                                 nt.output.print(), " is not a box of the domain; computing the enclosing box ",
                                 box.print(), " (", num_elements(box) - num_elements(nt.output),
                                 " extra elements)"));
      }
      const Region box = bounding_box(needed);
      nt.tile.begin.assign(node.num_axes(), 0);
      nt.tile.extent = node.extents();
      for (int a = 0; a < ns; ++a) {
        if (box.empty()) {
          nt.tile.extent[a] = 0;
        } else {
          nt.tile.begin[a] = box.dims[a].lo();
          nt.tile.extent[a] = box.dims[a].hi() - box.dims[a].lo();
        }
      }
    }
    // 2c. What the tile reads.
    for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i)
      nt.inputs.push_back(input_region(node, i, nt.tile));
  }
  result.ok = true;
  result.nodes = std::move(tiles);
  return result;
}

GridCheck check_grid(const OpGraph& graph, const std::vector<NodeId>& group, NodeId sink,
                     const std::vector<int64_t>& sink_tile_extent) {
  GridCheck check;
  auto fail = [&](std::string reason) {
    check.ok = false;
    check.reason = std::move(reason);
    return check;
  };
  if (sink < 0 || sink >= graph.num_nodes())
    return fail(cat("the sink (node id ", sink, ") is not in the graph"));
  const TeNode& s = graph.node(sink);
  const int ns = s.num_spatial();
  if (static_cast<int>(sink_tile_extent.size()) != ns)
    return fail(cat("sink tile has ", sink_tile_extent.size(), " extents but node '", s.name(),
                    "' has ", ns, " spatial axes"));
  check.num_tiles = 1;
  for (int a = 0; a < ns; ++a) {
    if (sink_tile_extent[a] < 1)
      return fail(cat("sink tile extent ", sink_tile_extent[a], " along axis '", s.axes()[a].name,
                      "' (must be >= 1)"));
    check.grid.push_back((s.axes()[a].extent + sink_tile_extent[a] - 1) / sink_tile_extent[a]);
    check.num_tiles *= check.grid.back();
  }

  // 1. The first tile propagates.
  const std::vector<int64_t> zeros(ns, 0);
  const GroupPropagation first =
      propagate_group(graph, group, sink, tile_for_output(s, zeros, sink_tile_extent));
  if (!first.ok) return fail(first.reason);

  // 2. Neighbouring sink tiles need different tiles of every node.
  for (int a = 0; a < ns; ++a) {
    if (check.grid[a] < 2) continue;
    std::vector<int64_t> begin = zeros;
    begin[a] = sink_tile_extent[a];
    const GroupPropagation next =
        propagate_group(graph, group, sink, tile_for_output(s, begin, sink_tile_extent));
    if (!next.ok) return fail(next.reason);
    for (const NodeTile& t0 : first.nodes) {
      if (t0.node == sink || t0.tile.empty()) continue;
      const NodeTile* t1 = next.find(t0.node);
      if (t1->tile != t0.tile) continue;
      const TeNode& n = graph.node(t0.node);
      return fail(cat("grid mismatch: sink tiles 0 and 1 along axis '", s.axes()[a].name, "' of '",
                      s.name(), "' need the same tile ", t0.tile.print(n.num_spatial()), " of node '",
                      n.name(), "', which would be recomputed by all ", check.grid[a],
                      " tiles along that axis; tile '", s.axes()[a].name, "' over its whole extent ",
                      s.axes()[a].extent, " (tile is ", sink_tile_extent[a], ") or take '", n.name(),
                      "' out of the group"));
    }
  }

  // 3. Nodes whose output leaves the group are computed completely.
  const GroupPropagation whole = propagate_group(graph, group, sink, DomainTile::whole(s));
  if (!whole.ok) return fail(whole.reason);
  std::set<NodeId> members(group.begin(), group.end());
  const std::vector<TensorId>& outs = graph.outputs();
  for (const NodeTile& t : whole.nodes) {
    if (t.node == sink) continue;
    const TeNode& n = graph.node(t.node);
    const TensorId out = graph.node_output(t.node);
    bool escapes = std::find(outs.begin(), outs.end(), out) != outs.end();
    for (NodeId c : graph.consumers(out)) escapes = escapes || !members.count(c);
    if (!escapes) continue;
    DomainTile full = DomainTile::whole(n);
    if (t.tile.begin != full.begin ||
        !std::equal(full.extent.begin(), full.extent.begin() + n.num_spatial(), t.tile.extent.begin()))
      return fail(cat("output '", graph.tensor(out).name, "' of node '", n.name(),
                      "' is also used outside the group, but the group computes only ",
                      t.tile.print(n.num_spatial()), " of its domain ",
                      full.print(n.num_spatial())));
  }
  check.ok = true;
  return check;
}

}  // namespace tessel
