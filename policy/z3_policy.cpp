// The z3 policy (z3_policy.h): per node, the outer tile of least outer-level traffic found by
// iterative tightening with Z3, then a register tile and thread mapping ranked by the cost model.
//
// Steps of solve_node_z3:
//   1. The tile space: admissible values per axis, tensor-core shapes, capacity (tile_space).
//   2. The Z3 encoding of tile_traffic and tile_footprint over that space (encode_traffic).
//   3. Tightening: solve, read the tile, check Q against tile_traffic, demand Q < best, repeat.
//   4. The register tile and threads (add_inner_tile); on timeout, roller's best instead.
#include "policy/z3_policy.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <numeric>

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

// If-then-else chain: f(t) for t in `values` (t is constrained to `values`).
template <class F>
z3::expr table(z3::context& c, const z3::expr& t, const std::vector<int64_t>& values, F f) {
  z3::expr e = c.int_val(static_cast<int64_t>(f(values.back())));
  for (int i = static_cast<int>(values.size()) - 2; i >= 0; --i)
    e = z3::ite(t == c.int_val(values[i]), c.int_val(static_cast<int64_t>(f(values[i]))), e);
  return e;
}

z3::expr zmax(const z3::expr& a, const z3::expr& b) { return z3::ite(a >= b, a, b); }
z3::expr zmin(const z3::expr& a, const z3::expr& b) { return z3::ite(a <= b, a, b); }

struct Encoding {
  std::vector<z3::expr> t;   // tile extent per axis
  z3::expr traffic;          // Q (tile_traffic total_bytes)
  z3::expr footprint;        // F (tile_footprint total_bytes)
  std::vector<z3::expr> side;  // definitions of auxiliary variables
};

// Bytes of a box rounded to transactions (transaction_bytes_of) given its per-dimension counts.
z3::expr rounded_bytes(z3::context& c, const std::vector<z3::expr>& counts, const std::vector<int64_t>& shape,
                       int64_t element_bytes, int64_t transaction, std::vector<z3::expr>& side,
                       const std::string& name) {
  const int rank = static_cast<int>(counts.size());
  if (rank == 0) return c.int_val(ceil_div(element_bytes, transaction) * transaction);
  // Split point d*: the run is counts[d*..], the number of runs counts[..d*) (see tile_traffic.cpp).
  auto product = [&](int from, int to) {
    z3::expr p = c.int_val(1);
    for (int k = from; k < to; ++k) p = k == from ? counts[k] : p * counts[k];
    return p;
  };
  // d* is the innermost dimension d >= 1 whose box does not cover the tensor (else 0): later
  // (inner) dimensions take priority, so their if-then-else wraps the earlier ones.
  z3::expr run = product(0, rank), runs = c.int_val(1);
  for (int d = 1; d < rank; ++d) {
    const z3::expr stops = counts[d] != c.int_val(shape[d]);
    run = z3::ite(stops, product(d, rank), run);
    runs = z3::ite(stops, product(0, d), runs);
  }
  // Transactions per run: ceil(run x E / T) as an auxiliary integer.
  z3::expr tx = c.int_const(name.c_str());
  const z3::expr bytes = run * c.int_val(element_bytes);
  side.push_back(tx * c.int_val(transaction) >= bytes);
  side.push_back(tx * c.int_val(transaction) < bytes + c.int_val(transaction));
  return runs * tx * c.int_val(transaction);
}

Encoding encode(z3::context& c, const TeNode& node, const TileSpace& space) {
  const int na = node.num_axes(), ns = node.num_spatial();
  Encoding enc{{}, c.int_val(0), c.int_val(0), {}};
  std::vector<z3::expr> n, begin, ext;
  for (int a = 0; a < na; ++a) {
    const int64_t extent = node.axes()[a].extent;
    const std::vector<int64_t>& vals = space.values[a];
    z3::expr t = c.int_const(cat("t_", a, "_", node.axes()[a].name).c_str());
    z3::expr_vector in(c);
    for (int64_t v : vals) in.push_back(t == c.int_val(v));
    enc.side.push_back(z3::mk_or(in));
    n.push_back(table(c, t, vals, [&](int64_t v) { return axis_pos(extent, v).tiles; }));
    begin.push_back(table(c, t, vals, [&](int64_t v) { return axis_pos(extent, v).begin; }));
    ext.push_back(table(c, t, vals, [&](int64_t v) { return axis_pos(extent, v).extent; }));
    enc.t.push_back(t);
  }
  if (!space.mma_shapes.empty()) {  // tensor cores: one instruction shape divides the tile
    z3::expr_vector any(c);
    const z3::expr& tm = enc.t[ns - 2];
    const z3::expr& tn = enc.t[ns - 1];
    const z3::expr& tk = enc.t[na - 1];
    for (const MmaShape& s : space.mma_shapes)
      any.push_back(z3::mod(tm, s.m) == 0 && z3::mod(tn, s.n) == 0 && z3::mod(tk, s.k) == 0);
    enc.side.push_back(z3::mk_or(any));
  }
  z3::expr tiles = c.int_val(1), steps = c.int_val(1);
  for (int a = 0; a < na; ++a) (a < ns ? tiles : steps) = (a < ns ? tiles : steps) * n[a];

  // Per-dimension bounding-box counts of input i over the step tile or the whole-reduction tile.
  auto box_counts = [&](int i, bool whole) {
    const Access& acc = node.inputs()[i];
    std::vector<z3::expr> counts;
    for (int d = 0; d < acc.type.rank(); ++d) {
      const int64_t size = acc.type.shape[d];
      if (acc.is_gather() && d == acc.gather_dim) {
        counts.push_back(c.int_val(size));
        continue;
      }
      const AffineExpr& row = acc.map.results()[d];
      z3::expr lo = c.int_val(row.offset), hi = c.int_val(row.offset);
      for (int a = 0; a < na; ++a) {
        const int64_t k = row.coeffs[a];
        if (k == 0) continue;
        const bool full = whole && a >= ns;
        const z3::expr b = full ? c.int_val(0) : begin[a];
        const z3::expr last = full ? c.int_val(node.axes()[a].extent - 1) : begin[a] + ext[a] - 1;
        lo = lo + c.int_val(k) * (k > 0 ? b : last);
        hi = hi + c.int_val(k) * (k > 0 ? last : b);
      }
      const z3::expr clo = zmax(lo, c.int_val(0)), chi = zmin(hi + 1, c.int_val(size));
      counts.push_back(zmax(chi - clo, c.int_val(0)));
    }
    return counts;
  };
  auto reads_reduction = [&](const Access& acc) {
    for (const AffineExpr& row : acc.map.results())
      for (int a = ns; a < na; ++a)
        if (row.coeffs[a] != 0) return true;
    return false;
  };
  const int64_t T = space.traffic.transaction_bytes;
  for (int i = 0; i < static_cast<int>(node.inputs().size()); ++i) {
    const Access& acc = node.inputs()[i];
    const int64_t eb = dtype_bytes(acc.type.dtype);
    const bool per_step = reads_reduction(acc);
    const std::vector<z3::expr> step = box_counts(i, false);
    const z3::expr bt = rounded_bytes(c, per_step ? step : box_counts(i, true), acc.type.shape, eb, T,
                                      enc.side, cat("tx_in", i));
    enc.traffic = enc.traffic + (per_step ? tiles * steps * bt : tiles * bt);
    z3::expr elems = c.int_val(1);
    for (const z3::expr& k : step) elems = elems * k;
    enc.footprint = enc.footprint + c.int_val(space.footprint.pipeline_stages * eb) * elems;
  }
  std::vector<z3::expr> out_counts;
  std::vector<int64_t> out_shape;
  z3::expr out_elems = c.int_val(1);
  for (int a = 0; a < ns; ++a) {
    out_counts.push_back(ext[a]);
    out_shape.push_back(node.axes()[a].extent);
    out_elems = out_elems * ext[a];
  }
  const int64_t ob = dtype_bytes(node.output().dtype);
  enc.traffic = enc.traffic + tiles * rounded_bytes(c, out_counts, out_shape, ob, T, enc.side, "tx_out");
  enc.footprint = enc.footprint + c.int_val(ob) * out_elems;
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
      const int64_t inner_last = ns > 0 ? inner.spatial[ns - 1] : 1;
      const int64_t max_vec = std::max<int64_t>(1, 16 / dtype_bytes(node.output().dtype));
      while (cfg.vector_width * 2 <= max_vec && inner_last % (cfg.vector_width * 2) == 0) cfg.vector_width *= 2;
      if (!check_tile_config(node, cfg)) {
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
    std::vector<int64_t> vals;
    for (int64_t v = align; v < extent + align; v += align) vals.push_back(v);
    if (vals.empty()) vals.push_back(align);
    if (covers_ok && extent % align != 0 && extent > 0) vals.push_back(extent);
    std::sort(vals.begin(), vals.end());
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
  return tile_footprint(node, tile, space.footprint).total_bytes <= space.capacity_bytes;
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
  bool zero_extent = false;
  for (const Axis& ax : node.axes()) zero_extent |= ax.extent == 0;

  // Steps 2 and 3.
  std::optional<LevelTile> best;
  if (!zero_extent) {
    z3::context c;
    const Encoding enc = encode(c, node, space);
    z3::solver solver(c);
    z3::params p(c);
    p.set("random_seed", 0u);
    solver.set(p);
    for (const z3::expr& e : enc.side) solver.add(e);
    solver.add(enc.footprint <= c.int_val(space.capacity_bytes));
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
      for (int a = 0; a < node.num_axes(); ++a)
        (a < node.num_spatial() ? tile.spatial : tile.reduction).push_back(m.eval(enc.t[a], true).get_numeral_int64());
      const int64_t q_z3 = m.eval(enc.traffic, true).get_numeral_int64();
      const int64_t q = tile_traffic(node, tile, space.traffic).total_bytes;
      TESSEL_ASSERT(q == q_z3, "z3 encoding of tile_traffic disagrees for node '", node.name(), "' tile ",
                    print_tile_config(TileConfig{{tile}, {}}), ": z3 ", q_z3, " B, tile_traffic ", q, " B");
      TESSEL_ASSERT(space_admits(space, node, tile), "z3 tile outside the space for node '", node.name(), "'");
      best = tile;
      r.traffic_bytes = q;
      solver.add(enc.traffic < c.int_val(q));
    }
  }
  r.solve_ms = elapsed_ms();

  // Step 4.
  if (best && r.proven_optimal) {
    r.solved = true;
    TileConfig outer;
    outer.levels = {*best};
    outer.pipeline_stages = space.footprint.pipeline_stages;
    r.tiles = add_inner_tile(graph, id, spec, cost, outer, options);
    r.notes.push_back(cat("z3: outer tile of least ", device_level(spec).name, " traffic (", r.traffic_bytes,
                          " B), proven over the aligned tile space in ", r.rounds, " solver calls, ",
                          static_cast<int64_t>(r.solve_ms), " ms"));
    return r;
  }
  r.solved = best.has_value();
  r.fallback = true;
  const std::string why =
      zero_extent ? "an axis of extent 0"
      : best      ? cat("no optimality proof within ", options.timeout_ms, " ms (best found ", r.traffic_bytes, " B)")
      : r.rounds > 0 && elapsed_ms() < options.timeout_ms ? std::string("no aligned tile fits the capacity")
                                                          : cat("no tile found within ", options.timeout_ms, " ms");
  const std::vector<TileCandidate> fb = roller_candidates(graph, id, spec, cost, options.fallback);
  if (fb.empty()) {
    r.notes.push_back(cat("z3: ", why, "; roller has no candidate either"));
    return r;
  }
  r.tiles = fb.front().tiles;
  r.traffic_bytes = tile_traffic(node, r.tiles.levels.front(), space.traffic).total_bytes;
  r.notes.push_back(cat("z3: ", why, "; fell back to roller's best"));
  return r;
}

Schedule Z3Policy::schedule(const PolicyContext& ctx) const {
  Schedule s;
  s.policy = std::string(name());
  s.cost_model = std::string(ctx.cost.name());
  s.hw_spec = ctx.spec.name;
  s.hw_spec_hash = hw_spec_hash(ctx.spec);
  for (NodeId n : ctx.graph.topological_order()) {
    Z3NodeResult r = solve_node_z3(ctx.graph, n, ctx.spec, ctx.cost, options_);
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
