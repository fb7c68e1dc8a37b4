// The z3 policy (z3_policy.h): per node, the outer tile of least outer-level traffic found by
// iterative tightening with Z3, then a register tile and thread mapping ranked by the cost model.
//
// Steps of solve_node_z3:
//   1. The tile space: admissible values per axis, tensor-core shapes, capacity (tile_space).
//   2. The Z3 encoding of tile_traffic and tile_footprint over that space: one-hot Booleans
//      per axis, per-tensor tables, linear in if-then-else terms (encode).
//   3. Tightening: solve, read the tile, check Q against tile_traffic, demand Q < best, repeat.
//   4. The register tile and threads (add_inner_tile); on timeout, roller's best instead.
#include "policy/z3_policy.h"

#include "policy/policy_options.h"

#include "policy/check_schedule.h"

#include <map>

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

#include "cost_model/analytic_model.h"
#include "tilegraph/error.h"

namespace tessel {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_gpu(const HwSpec& spec) { return spec.kind == "gpu"; }

// The level outermost tiles load from: the outermost level that is not host memory.
const MemoryLevel& device_level(const HwSpec& spec) {
  for (int i = static_cast<int>(spec.memory_levels.size()) - 1; i >= 0; --i)
    if (spec.memory_levels[i].scope != MemoryScope::host) return spec.memory_levels[i];
  TESSEL_ASSERT(false, "hardware spec '", spec.name, "' has no device memory level");
}

// The outer tile's level: on a GPU the outermost software-managed level shared by a block
// (shared memory); on a CPU the outermost per-core cache (L2).
const MemoryLevel& outer_level(const HwSpec& spec) {
  for (int i = static_cast<int>(spec.memory_levels.size()) - 1; i >= 1; --i) {
    const MemoryLevel& l = spec.memory_levels[i];
    if (is_gpu(spec) ? l.software_managed && (l.scope == MemoryScope::block || l.scope == MemoryScope::sm)
                     : l.scope == MemoryScope::core)
      return l;
  }
  TESSEL_ASSERT(false, "hardware spec '", spec.name, "' has no level for an outer tile");
}

// Representative-tile position along one axis (tile_traffic.h): tile (n - 1) / 2 of n.
struct AxisPos {
  int64_t tiles, begin, extent;
};
AxisPos axis_pos(int64_t extent, int64_t size) {
  const int64_t n = ceil_div(extent, size);
  const int64_t begin = n > 0 ? (n - 1) / 2 * size : 0;
  return {n, begin, std::min(size, extent - begin)};
}

int64_t dtype_bytes_or(const TeNode& node, int input) {
  return input < static_cast<int>(node.inputs().size()) ? dtype_bytes(node.inputs()[input].type.dtype)
                                                        : dtype_bytes(node.output().dtype);
}

// ---- Step 2: the Z3 encoding ------------------------------------------------------------------

// An integer term with the least and greatest value it can take over the tile space.
struct Bounded {
  z3::expr e;
  int64_t lo, hi;
};

struct Encoding {
  std::vector<std::vector<z3::expr>> pick;  // pick[a][j]: t_a = space.values[a][j] (one-hot per axis)
  z3::expr traffic;                         // Q (tile_traffic total_bytes), linear in ite terms
  z3::expr footprint;                       // F (tile_footprint total_bytes)
  std::vector<z3::expr> side;               // one-hot, tensor-core and bound constraints
  int64_t table_entries = 0;                // leaves of all per-input tables
};

// The axes input i's access map reads (nonzero coefficient in some result row), in axis order.
// (A gather's rows read depend on the index values the tile reads: read_region, so the axes its
// index input reads count as read by it too.)
std::vector<int> axes_read(const TeNode& node, int input) {
  std::vector<int> out;
  const Access& acc = node.inputs()[input];
  for (int a = 0; a < node.num_axes(); ++a) {
    bool reads = false;
    for (const AffineExpr& row : acc.map.results()) reads |= row.coeffs[a] != 0;
    if (acc.is_gather() && acc.gather_index_input >= 0 && acc.gather_index_input < static_cast<int>(node.inputs().size()))
      for (const AffineExpr& row : node.inputs()[acc.gather_index_input].map.results()) reads |= row.coeffs[a] != 0;
    if (reads) out.push_back(a);
  }
  return out;
}

int64_t& axis_of(LevelTile& tile, int ns, int a) { return a < ns ? tile.spatial[a] : tile.reduction[a - ns]; }

// Leaves of a table over `axes`: the product of their value counts.
int64_t table_size(const TileSpace& space, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int a : axes) n *= static_cast<int64_t>(space.values[a].size());
  return n;
}

// A decision tree over the one-hot choices of `axes[k..]`: the leaf for a full assignment is
// f(tile), where `tile` holds the assignment on `axes` and the whole extent elsewhere. Every
// inner node is bounded by the least and greatest leaf below it, so a partial assignment
// already bounds the term (what lets the linear solver prune).
template <class F>
Bounded table(z3::context& c, Encoding& enc, const TileSpace& space, int ns, const std::vector<int>& axes,
              size_t k, LevelTile& tile, F f) {
  if (k == axes.size()) {
    const int64_t v = f(tile);
    ++enc.table_entries;
    return {c.int_val(v), v, v};
  }
  const int a = axes[k];
  const std::vector<int64_t>& vals = space.values[a];
  std::vector<Bounded> child;
  for (int64_t v : vals) {
    axis_of(tile, ns, a) = v;
    child.push_back(table(c, enc, space, ns, axes, k + 1, tile, f));
  }
  axis_of(tile, ns, a) = space.values[a].back();
  Bounded out = child.back();
  for (int j = static_cast<int>(vals.size()) - 2; j >= 0; --j) {
    out.e = z3::ite(enc.pick[a][j], child[j].e, out.e);
    out.lo = std::min(out.lo, child[j].lo);
    out.hi = std::max(out.hi, child[j].hi);
  }
  if (vals.size() > 1 && out.lo < out.hi) enc.side.push_back(out.e >= c.int_val(out.lo) && out.e <= c.int_val(out.hi));
  return out;
}

// x times the tile count along axis a (a constant per choice of t_a), linear in x.
Bounded times_tiles(z3::context& c, Encoding& enc, const TileSpace& space, int64_t extent, int a, const Bounded& x) {
  const std::vector<int64_t>& vals = space.values[a];
  auto n = [&](size_t j) { return axis_pos(extent, vals[j]).tiles; };
  Bounded out{c.int_val(n(vals.size() - 1)) * x.e, n(vals.size() - 1) * x.lo, n(vals.size() - 1) * x.hi};
  for (int j = static_cast<int>(vals.size()) - 2; j >= 0; --j) {
    out.e = z3::ite(enc.pick[a][j], c.int_val(n(j)) * x.e, out.e);
    out.lo = std::min(out.lo, n(j) * x.lo);
    out.hi = std::max(out.hi, n(j) * x.hi);
  }
  if (vals.size() > 1 && out.lo < out.hi) enc.side.push_back(out.e >= c.int_val(out.lo) && out.e <= c.int_val(out.hi));
  return out;
}

// Q and F as sums of per-tensor terms (tile_traffic.h):
//   Q_i = (product of n_a over counted axes outside S_i) x H_i(t restricted to S_i)
// where S_i is the axes input i reads, "counted" is every spatial axis plus, when S_i holds a
// reduction axis, every reduction axis (tiles x steps), and H_i is tile_traffic's input_bytes[i]
// for the tile with t on S_i and the whole extent elsewhere -- a table computed in C++. The
// output is the same with S = the spatial axes. The products outside S_i are if-then-else over
// one axis's choices of a constant times the rest, so Q is linear in the if-then-else terms.
// F_i = tile_footprint's input_bytes[i] over S_i (a table; no factors outside S_i).
std::optional<Encoding> encode(z3::context& c, const TeNode& node, const TileSpace& space, int64_t max_entries) {
  const int na = node.num_axes(), ns = node.num_spatial();
  Encoding enc{{}, c.int_val(0), c.int_val(0), {}, 0};
  std::vector<int> spatial_axes;
  for (int a = 0; a < ns; ++a) spatial_axes.push_back(a);
  std::vector<std::vector<int>> reads;
  int64_t entries = table_size(space, spatial_axes);
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    reads.push_back(axes_read(node, i));
    entries += table_size(space, reads.back());
  }
  if (entries > max_entries) return std::nullopt;
  const TileKind& kind = tile_kind_of(space.kind);

  for (int a = 0; a < na; ++a) {
    std::vector<z3::expr> p;
    z3::expr_vector pv(c);
    for (size_t j = 0; j < space.values[a].size(); ++j) {
      p.push_back(c.bool_const(cat("t_", a, "_", node.axes()[a].name, "=", space.values[a][j]).c_str()));
      pv.push_back(p.back());
    }
    enc.side.push_back(z3::mk_or(pv));
    if (pv.size() > 1) enc.side.push_back(z3::atmost(pv, 1));
    enc.pick.push_back(std::move(p));
  }
  if (!space.mma_shapes.empty()) {  // tensor cores: one instruction shape divides the tile
    auto divisible = [&](int a, int64_t by) {
      z3::expr_vector any(c);
      for (size_t j = 0; j < space.values[a].size(); ++j)
        if (space.values[a][j] % by == 0) any.push_back(enc.pick[a][j]);
      return any.empty() ? c.bool_val(false) : z3::mk_or(any);
    };
    z3::expr_vector any(c);
    for (const MmaShape& s : space.mma_shapes)
      any.push_back(divisible(ns - 2, s.m) && divisible(ns - 1, s.n) && divisible(na - 1, s.k));
    enc.side.push_back(z3::mk_or(any));
  }

  LevelTile whole{space.level, {}, {}};
  for (int a = 0; a < na; ++a) (a < ns ? whole.spatial : whole.reduction).push_back(space.values[a].back());
  auto term = [&](const std::vector<int>& axes, bool counts_steps, auto traffic_of, auto footprint_of) {
    LevelTile tile = whole;
    Bounded q = table(c, enc, space, ns, axes, 0, tile, traffic_of);
    for (int a = na - 1; a >= 0; --a) {
      if (std::find(axes.begin(), axes.end(), a) != axes.end() || (a >= ns && !counts_steps)) continue;
      q = times_tiles(c, enc, space, node.axes()[a].extent, a, q);
    }
    tile = whole;
    const Bounded f = table(c, enc, space, ns, axes, 0, tile, footprint_of);
    enc.traffic = enc.traffic + q.e;
    enc.footprint = enc.footprint + f.e;
  };
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const bool per_step = std::any_of(reads[i].begin(), reads[i].end(), [&](int a) { return a >= ns; });
    term(
        reads[i], per_step,
        [&](const LevelTile& t) { return kind.traffic(node, t, space.traffic, space.kind).input_bytes[i]; },
        [&](const LevelTile& t) { return kind.footprint(node, t, space.footprint, space.kind).input_bytes[i]; });
  }
  term(
      spatial_axes, false, [&](const LevelTile& t) { return kind.traffic(node, t, space.traffic, space.kind).output_bytes; },
      [&](const LevelTile& t) { return kind.footprint(node, t, space.footprint, space.kind).output_bytes; });
  return enc;
}

// ---- Step 4: the register tile ----------------------------------------------------------------

// Power-of-two divisors of `extent` up to `cap` (always includes 1).
std::vector<int64_t> pow2_divisors(int64_t extent, int64_t cap) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= cap && extent % v == 0; v *= 2) out.push_back(v);
  return out;
}

// Adds the register tile and thread mapping of least predicted latency to a one-level config.
// GPU: threads = outer / register tile per spatial axis, a multiple of the warp width when some
// candidate allows it, at most max_threads_per_block. CPU: threads stay unmapped.
TileConfig add_inner_tile(const OpGraph& graph, NodeId id, const HwSpec& spec, const CostModel& cost,
                          const TileConfig& outer, const Z3Options& options) {
  const TeNode& node = graph.node(id);
  const LevelTile& o = outer.levels.front();
  const int ns = node.num_spatial();
  std::vector<std::vector<int64_t>> choices;
  for (int a = 0; a < ns; ++a) choices.push_back(pow2_divisors(o.spatial[a], options.max_register_tile));
  const std::string inner_level = spec.memory_levels.front().name;
  auto predict = [&](const TileConfig& cfg) {
    ScheduledGroup g;
    g.nodes = {id};
    g.tiles[id] = cfg;
    return cost.estimate(graph, g, spec).latency_s;
  };
  TileConfig best = outer;
  double best_s = predict(outer);
  bool best_warp = false;
  std::vector<size_t> pick(ns, 0);
  while (true) {
    TileConfig cfg = outer;
    LevelTile inner{inner_level, {}, std::vector<int64_t>(node.num_reduction(), 1)};
    int64_t threads = 1;
    for (int a = 0; a < ns; ++a) {
      inner.spatial.push_back(choices[a][pick[a]]);
      if (is_gpu(spec)) {
        cfg.threads.push_back(o.spatial[a] / inner.spatial[a]);
        threads *= cfg.threads.back();
      }
    }
    const bool warp = !is_gpu(spec) || threads % spec.compute.simd_width == 0;
    const bool fits = !is_gpu(spec) || threads <= spec.limits.max_threads_per_block;
    if (fits && (warp || !best_warp)) {
      cfg.levels.push_back(inner);
      // Vector width: on a CPU the SIMD lanes the innermost register extent allows; the GPU specs
      // give no vector-load width, so GPU tiles stay scalar (as roller's do).
      const int64_t inner_last = ns > 0 ? inner.spatial[ns - 1] : 1;
      if (!is_gpu(spec))
        while (cfg.vector_width * 2 <= spec.compute.simd_width && inner_last % (cfg.vector_width * 2) == 0)
          cfg.vector_width *= 2;
      ScheduledGroup alone;
      alone.nodes = {id};
      alone.tiles[id] = cfg;
      // The checker's per-group rules (registers per thread and per SM, threads) are the last word.
      if (!check_tile(node, cfg) && check_group(graph, spec, alone).empty()) {
        const double s = predict(cfg);
        if ((warp && !best_warp) || s < best_s) {
          best = cfg;
          best_s = s;
          best_warp = warp;
        }
      }
    }
    int a = 0;
    while (a < ns && ++pick[a] == choices[a].size()) pick[a++] = 0;
    if (a == ns) break;
  }
  return best;
}

}  // namespace

// ---- Step 1: the tile space -------------------------------------------------------------------

TileSpace tile_space(const TeNode& node, const HwSpec& spec, const Z3Options& options) {
  TileSpace s;
  const MemoryLevel& outer = outer_level(spec);
  s.level = outer.name;
  const int64_t T = std::max<int64_t>(device_level(spec).transaction_bytes, 1);
  s.traffic = TrafficParams{T, 0, 1};
  const bool loop = node.num_reduction() > 0;
  s.footprint = TrafficParams{1, 0, is_gpu(spec) && loop ? options.gpu_pipeline_stages : 1};
  s.capacity_bytes = is_gpu(spec) ? spec.limits.smem_per_block_bytes : outer.capacity_bytes;

  const int ns = node.num_spatial(), na = node.num_axes();
  // Tensor cores: probe uses_tensor_cores with a tile that is one instruction shape.
  const DType in_dtype = node.inputs().empty() ? node.output().dtype : node.inputs()[0].type.dtype;
  auto shapes = spec.compute.tensor_core_shapes.find(in_dtype);
  if (ns >= 2 && loop && shapes != spec.compute.tensor_core_shapes.end() && !shapes->second.empty()) {
    const MmaShape& first = shapes->second.front();
    LevelTile probe{s.level, std::vector<int64_t>(ns, 1), std::vector<int64_t>(node.num_reduction(), 1)};
    probe.spatial[ns - 2] = first.m;
    probe.spatial[ns - 1] = first.n;
    probe.reduction.back() = first.k;
    if (uses_tensor_cores(node, probe, spec, nullptr)) s.mma_shapes = shapes->second;
  }
  for (int a = 0; a < na; ++a) {
    const int64_t extent = node.axes()[a].extent;
    int64_t align = 1;
    bool covers_ok = false;
    if (a == ns - 1) {  // innermost spatial axis: whole transactions of the output
      align = std::max<int64_t>(1, T / dtype_bytes(node.output().dtype));
      if (!is_gpu(spec)) align = std::lcm(align, std::max<int64_t>(1, spec.compute.simd_width));
      covers_ok = true;
    }
    if (a == na - 1 && a >= ns) {  // innermost reduction axis: whole transactions of the input
      align = std::max<int64_t>(1, T / dtype_bytes_or(node, 0));
      covers_ok = true;
    }
    if (!s.mma_shapes.empty() && (a == ns - 2 || a == ns - 1 || a == na - 1)) {
      int64_t g = 0;  // every shape's extent along this axis is a multiple of g
      for (const MmaShape& m : s.mma_shapes)
        g = std::gcd(g, static_cast<int64_t>(a == ns - 2 ? m.m : a == ns - 1 ? m.n : m.k));
      align = std::lcm(align, g);
      covers_ok = false;  // the instruction shape must divide the tile
    }
    // The whole axis, powers of two times the alignment below it, and the least aligned tile
    // for 2..max_balanced_tiles tiles where its padding waste is within bounds.
    const int64_t whole = covers_ok || extent % align == 0 ? std::max<int64_t>(extent, 1) : ceil_div(extent, align) * align;
    std::vector<int64_t> vals{whole};
    for (int64_t v = align; v < whole; v *= 2) vals.push_back(v);
    for (int64_t n = 2; n <= options.max_balanced_tiles; ++n) {
      const int64_t v = ceil_div(ceil_div(extent, n), align) * align;
      const int64_t padded = ceil_div(extent, v) * v;
      if (v < whole && static_cast<double>(padded - extent) <= options.max_padding_waste * static_cast<double>(padded))
        vals.push_back(v);
    }
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    s.values.push_back(vals);
  }
  return s;
}

bool space_admits(const TileSpace& space, const TeNode& node, const LevelTile& tile) {
  const int ns = node.num_spatial(), na = node.num_axes();
  for (int a = 0; a < na; ++a) {
    const int64_t v = a < ns ? tile.spatial[a] : tile.reduction[a - ns];
    if (!std::binary_search(space.values[a].begin(), space.values[a].end(), v)) return false;
  }
  if (!space.mma_shapes.empty()) {
    bool any = false;
    for (const MmaShape& s : space.mma_shapes)
      any |= tile.spatial[ns - 2] % s.m == 0 && tile.spatial[ns - 1] % s.n == 0 && tile.reduction.back() % s.k == 0;
    if (!any) return false;
  }
  return tile_kind_of(space.kind).footprint(node, tile, space.footprint, space.kind).total_bytes <= space.capacity_bytes;
}

Z3NodeResult solve_node_z3(const OpGraph& graph, NodeId id, const HwSpec& spec, const CostModel& cost,
                           const Z3Options& options) {
  const TeNode& node = graph.node(id);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  Z3NodeResult r;
  // Step 1.
  const TileSpace space = tile_space(node, spec, options);
  bool zero_extent = false, too_large = false;
  for (const Axis& ax : node.axes()) zero_extent |= ax.extent == 0;

  // Steps 2 and 3.
  std::optional<LevelTile> best;
  if (!zero_extent) {
    z3::context c;
    const std::optional<Encoding> enc = encode(c, node, space, options.max_table_entries);
    r.encode_ms = elapsed_ms();
    if (!enc) {
      too_large = true;
    } else {
      z3::solver solver(c);
      z3::params p(c);
      p.set("random_seed", 0u);
      solver.set(p);
      for (const z3::expr& e : enc->side) solver.add(e);
      solver.add(enc->footprint <= c.int_val(space.capacity_bytes));
      while (true) {
        const double left = options.timeout_ms - elapsed_ms();
        if (left <= 0) break;
        z3::params tp(c);
        tp.set("timeout", static_cast<unsigned>(std::max(1.0, left)));
        solver.set(tp);
        ++r.rounds;
        const z3::check_result res = solver.check();
        if (res == z3::unsat) {
          r.proven_optimal = best.has_value();
          break;
        }
        if (res == z3::unknown) break;
        const z3::model m = solver.get_model();
        LevelTile tile{space.level, {}, {}};
        for (int a = 0; a < node.num_axes(); ++a) {
          int64_t v = -1;
          for (size_t j = 0; j < space.values[a].size(); ++j)
            if (m.eval(enc->pick[a][j], true).is_true()) v = space.values[a][j];
          (a < node.num_spatial() ? tile.spatial : tile.reduction).push_back(v);
        }
        const int64_t q_z3 = m.eval(enc->traffic, true).get_numeral_int64();
        const int64_t q = tile_kind_of(space.kind).traffic(node, tile, space.traffic, space.kind).total_bytes;
        TileConfig shown;
        shown.levels = {tile};
        TESSEL_ASSERT(q == q_z3, "z3 encoding of tile_traffic disagrees for node '", node.name(), "' tile ",
                      print_tile_config(shown), ": z3 ", q_z3, " B, tile_traffic ", q, " B");
        TESSEL_ASSERT(space_admits(space, node, tile), "z3 tile outside the space for node '", node.name(), "'");
        best = tile;
        r.traffic_bytes = q;
        solver.add(enc->traffic < c.int_val(q));
      }
    }
  }
  r.solve_ms = elapsed_ms();

  // Step 4.
  if (best && r.proven_optimal) {
    r.solved = true;
    TileConfig outer;
    outer.levels = {*best};
    outer.kind = space.kind;
    outer.pipeline_stages = space.footprint.pipeline_stages;
    r.tiles = add_inner_tile(graph, id, spec, cost, outer, options);
    r.notes.push_back(cat("z3: outer tile of least ", device_level(spec).name, " traffic (", r.traffic_bytes,
                          " B), proven over the aligned tile space in ", r.rounds, " solver calls, ",
                          static_cast<int64_t>(r.solve_ms), " ms (encoding ", static_cast<int64_t>(r.encode_ms), " ms)"));
    return r;
  }
  r.solved = best.has_value();
  r.fallback = true;
  const std::string why =
      zero_extent ? "an axis of extent 0"
      : too_large ? cat("the encoding's tables exceed ", options.max_table_entries, " entries")
      : best      ? cat("no optimality proof within ", options.timeout_ms, " ms (best found ", r.traffic_bytes, " B)")
      : r.rounds > 0 && elapsed_ms() < options.timeout_ms ? std::string("no aligned tile fits the capacity")
                                                          : cat("no tile found within ", options.timeout_ms, " ms");
  const std::vector<TileCandidate> fb = roller_candidates(graph, id, spec, cost, options.fallback);
  if (fb.empty()) {
    r.notes.push_back(cat("z3: ", why, "; roller has no candidate either"));
    return r;
  }
  r.tiles = fb.front().tiles;
  r.traffic_bytes = tile_kind_of(space.kind).traffic(node, r.tiles.levels.front(), space.traffic, space.kind).total_bytes;
  r.notes.push_back(cat("z3: ", why, "; fell back to roller's best"));
  return r;
}

std::vector<PolicyOption> Z3Policy::options() {
  return {int_option("timeout_ms", "solver time per node in milliseconds (then roller's best)", options_.timeout_ms, 1, 3600 * 1000),
          int_option("gpu_pipeline_stages", "input buffers per block counted in a GPU node's footprint", options_.gpu_pipeline_stages, 1, 16),
          int_option("max_register_tile", "largest register-tile extent per axis", options_.max_register_tile, 1, 1 << 10),
          real_option("max_padding_waste", "largest padding waste of a balanced tile extent", options_.max_padding_waste, 0.0, 0.99),
          int_option("max_balanced_tiles", "largest tile count of a balanced extent", options_.max_balanced_tiles, 1, 1 << 16),
          int_option("max_table_entries", "largest table the encoding builds before falling back", options_.max_table_entries, 1,
                     int64_t{1} << 32)};
}

Schedule Z3Policy::schedule(const PolicyContext& ctx) const {
  Schedule s;
  s.policy = std::string(name());
  s.cost_model = std::string(ctx.cost.name());
  s.hw_spec = ctx.spec.name;
  s.hw_spec_hash = hw_spec_hash(ctx.spec);
  // Nodes computing the same thing on the same shapes (the layers of a transformer) share one
  // solution: the signature is the node's printed IR without its name.
  std::map<std::string, Z3NodeResult> solved;
  auto signature = [&](NodeId n) {
    const std::string text = print_node(ctx.graph.node(n), {}, "");
    const size_t at = text.find(" node \"");
    const size_t end = text.find('\n', at);
    return text.substr(0, at) + text.substr(end);
  };
  for (NodeId n : ctx.graph.topological_order()) {
    const std::string key = signature(n);
    auto hit = solved.find(key);
    if (hit == solved.end()) hit = solved.emplace(key, solve_node_z3(ctx.graph, n, ctx.spec, ctx.cost, options_)).first;
    Z3NodeResult r = hit->second;
    TESSEL_ASSERT(!r.tiles.levels.empty(), "no tile config for node '", ctx.graph.node(n).name(), "': ",
                  r.notes.empty() ? std::string() : r.notes.back());
    ScheduleGroup g;
    g.group.nodes = {n};
    g.group.tiles[n] = r.tiles;
    g.predicted = ctx.cost.estimate(ctx.graph, g.group, ctx.spec);
    for (std::string& note : r.notes) g.predicted.notes.push_back(std::move(note));
    s.predicted_latency_s += g.predicted.latency_s;
    s.groups.push_back(std::move(g));
    const TensorId out = ctx.graph.node_output(n);
    for (NodeId consumer : ctx.graph.consumers(out))
      s.unfused.push_back({out, n, consumer, UnfusedReason::policy, "z3 schedules one operator per kernel"});
  }
  return s;
}

}  // namespace tessel
