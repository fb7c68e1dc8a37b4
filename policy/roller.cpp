// The roller policy (roller.h): one operator per kernel, tile candidates built from the hardware
// spec alone.
//
// Steps for one node (roller_candidates):
//   1. Levels: where the node's tiles live. GPU: the block tile in the software-managed staging
//      level (shared memory) and the thread tile in the innermost level (registers); CPU: the
//      private caches outermost first (L2, L1d) and the registers. A level that cannot hold even
//      the smallest tile (a gather reads a whole embedding table) is dropped; when the staging
//      level cannot, the outer tile moves to the last-level cache (a cache tile).
//   2. Aligned extents per axis: powers of two times an alignment unit taken from the spec --
//      the tensor-core instruction shape (m, n, k) for a contraction that can use tensor cores,
//      and transaction_bytes / element bytes for an axis that is the contiguous dimension of a
//      tensor the node reads or writes -- plus the axis extent itself (a whole-axis tile needs no
//      alignment and wastes nothing). Extents whose padding waste exceeds the bound are dropped.
//   3. Scale up from the smallest aligned tile: grow the spatial axis whose next extent gives the
//      best data-reuse score (FLOPs per byte of tile_traffic from device memory) while the tile
//      fits the outer level; every tile on the path is a candidate.
//   4. Scale out: a candidate whose grid has fewer tiles than the chip has units is shrunk along
//      its largest axis until the grid fills the machine (or nothing can shrink). When some
//      candidates fill the machine, the others are pruned.
//   5. Inner tiles, thread mapping and reduction steps for the top candidates by reuse, then the
//      cost model prices them (a group holding only this node); sorted by latency, ties by the
//      printed config.
//
// RollerPolicy::schedule caches the ranked configs per node signature (the printed node without
// its name: identical layers of a model share candidates), so a 12-layer BERT is scheduled in a
// fraction of a second.
#include "policy/roller.h"

#include "policy/policy_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include "cost_model/analytic_model.h"
#include "policy/measure_cache.h"
#include "policy/tune.h"
#include "tilegraph/error.h"
#include "tilegraph/tile_kind.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

namespace {

// LimitSpec counts 32-bit registers.
constexpr int64_t kRegisterBytes = 4;
// Doublings of the reduction step tried on top of the aligned base step (a policy choice).
constexpr int kReductionVariants = 3;
// Share of the per-thread register limit a thread tile may use; the rest holds addresses,
// indices and temporaries (a policy choice).
constexpr int64_t kRegisterBudgetDivisor = 2;

bool is_gpu(const HwSpec& spec) { return spec.kind == "gpu"; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t smallest_prime_factor(int64_t v) {
  for (int64_t p = 2; p * p <= v; ++p)
    if (v % p == 0) return p;
  return v;
}

// The outermost level that is not host memory: where a kernel's inputs and outputs live.
int device_level(const HwSpec& spec) {
  for (int i = static_cast<int>(spec.memory_levels.size()) - 1; i >= 0; --i)
    if (spec.memory_levels[i].scope != MemoryScope::host) return i;
  return static_cast<int>(spec.memory_levels.size()) - 1;
}

bool is_per_unit_scope(MemoryScope s) {
  return s == MemoryScope::block || s == MemoryScope::sm || s == MemoryScope::cluster || s == MemoryScope::core ||
         s == MemoryScope::warp || s == MemoryScope::thread;
}

// ---------------------------------------------------------------------------------------------
// Step 1: levels and their capacities.

struct Target {
  bool gpu = false;
  int device = -1;                // index of device memory
  std::vector<int> stack;         // memory level indices, outermost first
  int64_t units = 1;
  int64_t transaction_bytes = 1;  // of device memory: the unit of contiguous traffic
};

// Bytes one tile may occupy at `level` (per block on a GPU's staging level, per thread in GPU
// registers, the level's capacity otherwise).
int64_t level_budget(const HwSpec& spec, int level) {
  const MemoryLevel& l = spec.memory_levels[level];
  if (is_gpu(spec)) {
    if (level == 0) return spec.limits.max_registers_per_thread * kRegisterBytes / kRegisterBudgetDivisor;
    if (l.software_managed) return std::min(spec.limits.smem_per_block_bytes, l.capacity_bytes);
  }
  return l.capacity_bytes;
}

// Roller tiles every node densely; footprints and traffic come from that tile kind (tile_kind.h).
const TileKindProps kRollerKind = DenseProps{};

int64_t footprint(const TeNode& node, const LevelTile& tile, int stages) {
  return tile_kind_of(kRollerKind).footprint(node, tile, TrafficParams{1, 0, stages}, kRollerKind).total_bytes;
}

LevelTile unit_tile(const TeNode& node, const std::string& level) {
  return LevelTile{level, std::vector<int64_t>(node.num_spatial(), 1), std::vector<int64_t>(node.num_reduction(), 1)};
}

Target choose_levels(const TeNode& node, const HwSpec& spec) {
  Target t;
  t.gpu = is_gpu(spec);
  t.device = device_level(spec);
  t.units = std::max<int64_t>(spec.compute.units, 1);
  t.transaction_bytes = std::max<int64_t>(spec.memory_levels[t.device].transaction_bytes, 1);
  auto fits_min = [&](int level) {
    return footprint(node, unit_tile(node, spec.memory_levels[level].name), 1) <= level_budget(spec, level);
  };
  // Outer-level choices, preferred first.
  std::vector<int> outer_choices, inner_choices;
  if (t.gpu) {
    for (int i = 1; i < t.device; ++i) {
      const MemoryLevel& l = spec.memory_levels[i];
      if (l.software_managed && is_per_unit_scope(l.scope)) outer_choices.push_back(i);
    }
    for (int i = 1; i < t.device; ++i)
      if (spec.memory_levels[i].cache) outer_choices.push_back(i);
  } else {
    for (int i = t.device; i >= 1; --i) {
      const MemoryLevel& l = spec.memory_levels[i];
      if (l.cache && is_per_unit_scope(l.scope)) outer_choices.push_back(i);
    }
    for (int i = t.device; i >= 1; --i) {
      const MemoryLevel& l = spec.memory_levels[i];
      if (l.cache && !is_per_unit_scope(l.scope) && l.scope != MemoryScope::host)
        outer_choices.push_back(i);
    }
  }
  int outer = -1;
  for (int i : outer_choices)
    if (fits_min(i)) {
      outer = i;
      break;
    }
  if (outer < 0) outer = outer_choices.empty() ? 0 : outer_choices.front();
  t.stack.push_back(outer);
  // Inner levels: CPU private caches inside the outer one, then the registers (both only if the
  // smallest tile fits there).
  if (!t.gpu)
    for (int i = outer - 1; i >= 1; --i) {
      const MemoryLevel& l = spec.memory_levels[i];
      if (l.cache && is_per_unit_scope(l.scope) && fits_min(i)) t.stack.push_back(i);
    }
  if (outer != 0 && fits_min(0)) t.stack.push_back(0);
  return t;
}

// ---------------------------------------------------------------------------------------------
// Step 2: aligned extents per axis.

struct AxisChoices {
  std::vector<int64_t> extents;  // ascending
};

// Whether axis `a` is the contiguous (last) dimension of the output or of an input.
int64_t contiguous_elements(const TeNode& node, int a, int64_t transaction_bytes) {
  int64_t unit = 1;
  auto consider = [&](DType t) { unit = std::max<int64_t>(unit, transaction_bytes / dtype_bytes(t)); };
  if (node.num_spatial() > 0 && a == node.num_spatial() - 1) consider(node.output().dtype);
  for (const Access& in : node.inputs()) {
    if (in.map.num_results() == 0) continue;
    const AffineExpr& last = in.map.result(in.map.num_results() - 1);
    if (a < static_cast<int>(last.coeffs.size()) && last.coeffs[a] == 1) consider(in.type.dtype);
  }
  return unit;
}

std::vector<int64_t> alignment_units(const TeNode& node, const HwSpec& spec, const Target& target) {
  std::vector<int64_t> units(node.num_axes(), 1);
  for (int a = 0; a < node.num_axes(); ++a) units[a] = contiguous_elements(node, a, target.transaction_bytes);
  // Tensor cores: align the last two spatial axes and the last reduction axis to an instruction
  // shape the cost model accepts.
  const DType dt = node.inputs().empty() ? node.output().dtype : node.inputs()[0].type.dtype;
  auto shapes = spec.compute.tensor_core_shapes.find(dt);
  const int ns = node.num_spatial();
  if (shapes != spec.compute.tensor_core_shapes.end() && ns >= 2 && node.num_reduction() > 0) {
    for (const MmaShape& s : shapes->second) {
      LevelTile probe = unit_tile(node, "");
      probe.spatial[ns - 2] = s.m;
      probe.spatial[ns - 1] = s.n;
      probe.reduction.back() = s.k;
      if (!uses_tensor_cores(node, probe, spec, nullptr)) continue;
      units[ns - 2] = std::lcm(units[ns - 2], int64_t{s.m});
      units[ns - 1] = std::lcm(units[ns - 1], int64_t{s.n});
      units[node.num_axes() - 1] = std::lcm(units[node.num_axes() - 1], int64_t{s.k});
      break;
    }
  }
  return units;
}

double axis_waste(int64_t extent, int64_t tile) {
  if (extent <= 0) return 0;
  const int64_t padded = ceil_div(extent, tile) * tile;
  return static_cast<double>(padded - extent) / static_cast<double>(padded);
}

AxisChoices axis_choices(int64_t extent, int64_t unit, double max_waste) {
  std::set<int64_t> e;
  if (extent <= 0) return {{1}};
  for (int64_t t = unit;; t *= 2) {
    e.insert(t);
    if (t >= extent) break;
  }
  e.insert(extent);
  AxisChoices c;
  for (int64_t t : e)
    if (axis_waste(extent, t) <= max_waste || c.extents.empty()) c.extents.push_back(t);
  // Drop extents past the whole axis (they only add masked-off points) except the smallest.
  std::vector<int64_t> kept;
  for (int64_t t : c.extents)
    if (t <= extent || kept.empty()) kept.push_back(t);
  c.extents = kept;
  return c;
}

// ---------------------------------------------------------------------------------------------
// Steps 3-4: outer tiles.

struct Shape {
  std::vector<int> index;  // into AxisChoices per spatial axis
  bool operator<(const Shape& o) const { return index < o.index; }
};

struct OuterSearch {
  const TeNode& node;
  const HwSpec& spec;
  const Target& target;
  std::vector<AxisChoices> spatial, reduction;
  double max_waste;

  LevelTile tile(const Shape& s, int reduction_variant) const {
    LevelTile t;
    t.level = spec.memory_levels[target.stack.front()].name;
    for (size_t a = 0; a < spatial.size(); ++a) t.spatial.push_back(spatial[a].extents[s.index[a]]);
    for (const AxisChoices& r : reduction)
      t.reduction.push_back(r.extents[std::min<size_t>(reduction_variant, r.extents.size() - 1)]);
    return t;
  }
  bool fits(const LevelTile& t, int stages = 1) const {
    return footprint(node, t, stages) <= level_budget(spec, target.stack.front());
  }
  double waste(const LevelTile& t) const {
    double kept = 1;
    for (int a = 0; a < node.num_spatial(); ++a) kept *= 1 - axis_waste(node.axes()[a].extent, t.spatial[a]);
    return 1 - kept;
  }
  // Data-reuse score: FLOPs per byte moved from device memory.
  double reuse(const LevelTile& t) const {
    const int64_t bytes =
        tile_kind_of(kRollerKind).traffic(node, t, TrafficParams{target.transaction_bytes, 0, 1}, kRollerKind).total_bytes;
    return static_cast<double>(std::max<int64_t>(node.flops(), 1)) / static_cast<double>(std::max<int64_t>(bytes, 1));
  }
  int64_t grid(const Shape& s) const { return num_spatial_tiles(node, tile(s, 0)); }
};

std::vector<Shape> scale_up(const OuterSearch& search) {
  Shape s{std::vector<int>(search.spatial.size(), 0)};
  std::vector<Shape> path{s};
  for (;;) {
    int best_axis = -1;
    double best = -1;
    // Innermost axis first among equals (contiguous runs).
    for (int a = static_cast<int>(s.index.size()) - 1; a >= 0; --a) {
      if (s.index[a] + 1 >= static_cast<int>(search.spatial[a].extents.size())) continue;
      Shape next = s;
      ++next.index[a];
      const LevelTile t = search.tile(next, 0);
      if (!search.fits(t) || search.waste(t) > search.max_waste) continue;
      const double r = search.reuse(t);
      if (r > best) {
        best = r;
        best_axis = a;
      }
    }
    if (best_axis < 0) break;
    ++s.index[best_axis];
    path.push_back(s);
  }
  return path;
}

// Shrinks the largest axis until the grid has at least one tile per unit.
Shape scale_out(const OuterSearch& search, Shape s) {
  while (search.grid(s) < search.target.units) {
    int axis = -1;
    int64_t largest = 0;
    for (int a = static_cast<int>(s.index.size()) - 1; a >= 0; --a) {
      if (s.index[a] == 0) continue;
      const int64_t e = search.spatial[a].extents[s.index[a]];
      if (e > largest) {
        largest = e;
        axis = a;
      }
    }
    if (axis < 0) break;
    --s.index[axis];
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Step 5: inner tiles and thread mapping.

bool is_contraction(const TeNode& node) { return node.combiner() == Combiner::sum && node.num_reduction() > 0; }

// The axis a CPU register tile of a contraction grows besides the innermost one: the innermost
// spatial axis that an input read along the innermost axis does not depend on, so the tile's
// rows share that input's registers (the rows of a matmul, the output channels of an NCHW
// convolution -- not its image rows, which the input depends on); the next-to-innermost axis when
// there is none.
int register_row_axis(const TeNode& node) {
  const int ns = node.num_spatial();
  for (int a = ns - 2; a >= 0; --a)
    for (const Access& in : node.inputs())
      if (!in.is_gather() && in.map.uses_axis(ns - 1) && !in.map.uses_axis(a)) return a;
  return ns - 2;
}

// GPU: the thread tile in registers and threads per axis (threads[a] x thread tile[a] = block
// tile[a]). Returns false when no mapping fits the thread and register limits. The vector width
// stays 1: the spec has no vector-load width, so code generation chooses it.
bool map_threads(const TeNode& node, const HwSpec& spec, const Target& target, TileConfig& cfg) {
  const LevelTile& outer = cfg.levels.front();
  const int ns = node.num_spatial();
  if (ns == 0) {
    if (target.stack.size() > 1) cfg.levels.push_back(unit_tile(node, spec.memory_levels[target.stack[1]].name));
    return true;
  }
  const bool registers = target.stack.size() > 1;
  std::vector<int64_t> inner(ns, 1);
  auto threads_of = [&](const std::vector<int64_t>& r) {
    int64_t t = 1;
    for (int a = 0; a < ns; ++a) t *= outer.spatial[a] / r[a];
    return t;
  };
  auto reg_tile = [&](const std::vector<int64_t>& r) {
    return LevelTile{registers ? spec.memory_levels[target.stack[1]].name : std::string(), r,
                     std::vector<int64_t>(node.num_reduction(), 1)};
  };
  // The thread tile fits the register budget, and the block's threads fit an SM's registers.
  auto regs_fit = [&](const std::vector<int64_t>& r) {
    if (!registers) return true;
    const int64_t bytes = footprint(node, reg_tile(r), cfg.pipeline_stages);
    const int64_t regs = ceil_div(bytes, kRegisterBytes);
    return bytes <= level_budget(spec, target.stack[1]) && regs * threads_of(r) <= spec.limits.registers_per_sm;
  };
  // Grows the thread tile along the axis with the most threads left (innermost among equals).
  auto grow = [&](std::vector<int64_t>& r) {
    int axis = -1;
    int64_t most = 1;
    for (int a = ns - 1; a >= 0; --a) {
      const int64_t left = outer.spatial[a] / r[a];
      if (left > most) {
        most = left;
        axis = a;
      }
    }
    if (axis < 0) return false;
    r[axis] *= smallest_prime_factor(outer.spatial[axis] / r[axis]);
    return true;
  };
  const LimitSpec& lim = spec.limits;
  // Enough threads per block to fill an SM's thread slots at the block limit.
  const int64_t min_threads =
      lim.max_blocks_per_sm > 0 ? std::max<int64_t>(lim.max_threads_per_sm / lim.max_blocks_per_sm, 1) : 1;
  while (threads_of(inner) > lim.max_threads_per_block) {
    if (!registers && ns > 0) return false;  // a single-level tile maps one point per thread
    if (!grow(inner)) return false;
  }
  // Contractions: larger thread tiles reuse operands from registers, as long as the block keeps
  // enough threads and the tile fits the register budget.
  if (registers && is_contraction(node))
    for (;;) {
      std::vector<int64_t> next = inner;
      if (!grow(next) || threads_of(next) < std::max(min_threads, spec.compute.simd_width) || !regs_fit(next)) break;
      inner = next;
    }
  if (!regs_fit(inner)) return false;
  cfg.threads.assign(ns, 1);
  for (int a = 0; a < ns; ++a) cfg.threads[a] = outer.spatial[a] / inner[a];
  if (registers) cfg.levels.push_back(reg_tile(inner));
  return true;
}

// CPU: each inner cache tile shrinks the one outside it (by prime factors, so it divides it)
// until it fits; the register tile holds simd_width elements of the innermost axis (a divisor of
// the tile outside it) and, for contractions, as many rows (register_row_axis) as the registers hold.
void inner_cpu_tiles(const TeNode& node, const HwSpec& spec, const Target& target, TileConfig& cfg) {
  const int ns = node.num_spatial();
  for (size_t i = 1; i < target.stack.size(); ++i) {
    const int level = target.stack[i];
    LevelTile t = cfg.levels.back();
    t.level = spec.memory_levels[level].name;
    if (level == 0) {
      std::vector<int64_t> outer_spatial = t.spatial;
      std::fill(t.spatial.begin(), t.spatial.end(), 1);
      std::fill(t.reduction.begin(), t.reduction.end(), 1);
      if (ns > 0) t.spatial[ns - 1] = std::gcd(outer_spatial[ns - 1], spec.compute.simd_width);
      if (ns > 1 && is_contraction(node))
        for (const int row = register_row_axis(node);;) {
          LevelTile next = t;
          const int64_t left = outer_spatial[row] / t.spatial[row];
          if (left <= 1) break;
          next.spatial[row] *= smallest_prime_factor(left);
          if (footprint(node, next, 1) > level_budget(spec, level)) break;
          t = next;
        }
      if (footprint(node, t, 1) > level_budget(spec, level)) std::fill(t.spatial.begin(), t.spatial.end(), 1);
    } else {
      while (footprint(node, t, 1) > level_budget(spec, level)) {
        // Shrink the largest extent (reduction steps first among equals: they do not cut runs
        // of the output), innermost last.
        int64_t* largest = nullptr;
        for (int64_t& e : t.reduction)
          if (e > 1 && (!largest || e > *largest)) largest = &e;
        for (int a = 0; a < ns; ++a)
          if (t.spatial[a] > 1 && (!largest || t.spatial[a] > *largest)) largest = &t.spatial[a];
        if (!largest) break;
        *largest /= smallest_prime_factor(*largest);
      }
    }
    cfg.levels.push_back(t);
  }
  if (ns > 0) {
    const int64_t last = cfg.levels.back().spatial[ns - 1];
    int v = 1;
    while (last % (v * 2) == 0 && v * 2 <= spec.compute.simd_width) v *= 2;
    cfg.vector_width = v;
  }
}

// Full config for an outer tile; nullopt when it does not fit.
std::optional<TileConfig> complete(const TeNode& node, const HwSpec& spec, const Target& target,
                                   const LevelTile& outer) {
  TileConfig cfg;
  cfg.levels = {outer};
  cfg.kind = kRollerKind;
  const int64_t budget = level_budget(spec, target.stack.front());
  if (footprint(node, outer, 1) > budget) return std::nullopt;
  if (target.gpu) {
    // Double buffering of the reduction loop when there is a loop and room for it.
    const MemoryLevel& l = spec.memory_levels[target.stack.front()];
    if (l.software_managed && num_reduction_steps(node, outer) > 1 && footprint(node, outer, 2) <= budget)
      cfg.pipeline_stages = 2;
    if (!map_threads(node, spec, target, cfg)) return std::nullopt;
  } else {
    inner_cpu_tiles(node, spec, target, cfg);
  }
  TESSEL_ASSERT(!check_tile(node, cfg), "roller built an invalid tile config for node '", node.name(), "': ",
                *check_tile(node, cfg), " (", print_tile_config(cfg), ")");
  return cfg;
}

// The smallest legal config: unit tiles at the chosen levels (always fits when anything does).
TileConfig fallback_config(const TeNode& node, const HwSpec& spec, const Target& target) {
  TileConfig cfg;
  for (int level : target.stack) cfg.levels.push_back(unit_tile(node, spec.memory_levels[level].name));
  if (target.gpu && node.num_spatial() > 0) cfg.threads.assign(node.num_spatial(), 1);
  return cfg;
}

std::vector<TileConfig> rank_configs(const OpGraph& graph, NodeId n, const HwSpec& spec, const CostModel& cost,
                                     const RollerOptions& options, std::vector<CostBreakdown>* priced) {
  const TeNode& node = graph.node(n);
  const Target target = choose_levels(node, spec);
  const std::vector<int64_t> units = alignment_units(node, spec, target);
  OuterSearch search{node, spec, target, {}, {}, options.max_padding_waste};
  for (int a = 0; a < node.num_spatial(); ++a)
    search.spatial.push_back(axis_choices(node.axes()[a].extent, units[a], options.max_padding_waste));
  for (int r = 0; r < node.num_reduction(); ++r) {
    const int a = node.num_spatial() + r;
    search.reduction.push_back(axis_choices(node.axes()[a].extent, units[a], 1.0));
  }

  // Steps 3-4: scale up, scale out, prune by the grid, keep the top by reuse. Exhaustive: every
  // combination of the axes' aligned extents (while there are at most kMaxExhaustiveShapes).
  std::set<Shape> shapes;
  for (const Shape& s : scale_up(search)) {
    shapes.insert(s);
    shapes.insert(scale_out(search, s));
  }
  double combinations = 1;
  for (const AxisChoices& c : search.spatial) combinations *= static_cast<double>(c.extents.size());
  if (options.exhaustive && combinations <= kMaxExhaustiveShapes) {
    Shape s{std::vector<int>(search.spatial.size(), 0)};
    for (bool more = true; more;) {
      if (search.waste(search.tile(s, 0)) <= search.max_waste) shapes.insert(s);
      more = false;
      for (size_t a = 0; a < s.index.size(); ++a) {
        if (++s.index[a] < static_cast<int>(search.spatial[a].extents.size())) {
          more = true;
          break;
        }
        s.index[a] = 0;
      }
    }
  }
  struct Ranked {
    Shape shape;
    bool fills;
    double reuse;
    int64_t points;
  };
  std::vector<Ranked> ranked;
  bool any_fills = false;
  for (const Shape& s : shapes) {
    const LevelTile t = search.tile(s, 0);
    if (!search.fits(t)) continue;
    int64_t points = 1;
    for (int64_t e : t.spatial) points *= e;
    const bool fills = search.grid(s) >= target.units;
    any_fills |= fills;
    ranked.push_back({s, fills, search.reuse(t), points});
  }
  if (any_fills) std::erase_if(ranked, [](const Ranked& r) { return !r.fills; });
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.reuse != b.reuse) return a.reuse > b.reuse;
    if (a.points != b.points) return a.points > b.points;
    return a.shape.index < b.shape.index;
  });
  const size_t keep = static_cast<size_t>(std::max(options.top_k, 1));
  // Exhaustive: every shape is priced, the cost model keeps the top_k (below).
  if (!options.exhaustive && ranked.size() > keep) ranked.resize(keep);

  // Step 5: complete and price.
  std::vector<TileConfig> configs;
  for (const Ranked& r : ranked)
    for (int v = 0; v < kReductionVariants; ++v) {
      if (v > 0 && std::all_of(search.reduction.begin(), search.reduction.end(),
                               [&](const AxisChoices& c) { return static_cast<size_t>(v) >= c.extents.size(); }))
        break;
      if (std::optional<TileConfig> cfg = complete(node, spec, target, search.tile(r.shape, v)))
        if (std::find(configs.begin(), configs.end(), *cfg) == configs.end()) configs.push_back(*cfg);
    }
  if (configs.empty()) configs.push_back(fallback_config(node, spec, target));

  struct Priced {
    TileConfig config;
    CostBreakdown cost;
    std::string text;
  };
  std::vector<Priced> all;
  for (TileConfig& cfg : configs) {
    ScheduledGroup g;
    g.nodes = {n};
    g.tiles[n] = cfg;
    CostBreakdown c = cost.estimate(graph, g, spec);
    if (!std::isfinite(c.latency_s) && configs.size() > 1) continue;
    all.push_back({std::move(cfg), std::move(c), {}});
    all.back().text = print_tile_config(all.back().config);
  }
  std::sort(all.begin(), all.end(), [](const Priced& a, const Priced& b) {
    if (a.cost.latency_s != b.cost.latency_s) return a.cost.latency_s < b.cost.latency_s;
    return a.text < b.text;
  });
  if (all.size() > keep) all.resize(keep);
  std::vector<TileConfig> out;
  for (Priced& p : all) {
    out.push_back(std::move(p.config));
    if (priced) priced->push_back(std::move(p.cost));
  }
  return out;
}

// The printed node without its name: nodes with equal signatures get equal candidates.
std::string node_signature(const TeNode& node) {
  std::string text = print_node(node, {}, "");
  const std::string name = cat("node \"", node.name(), "\"");
  if (size_t at = text.find(name); at != std::string::npos) text.replace(at, name.size(), "node");
  return text;
}

std::string options_text(const RollerOptions& o) {
  return cat("roller top_k=", o.top_k, " max_padding_waste=", o.max_padding_waste);
}

}  // namespace

std::vector<TileCandidate> roller_candidates(const OpGraph& graph, NodeId node, const HwSpec& spec,
                                             const CostModel& cost, const RollerOptions& options) {
  std::vector<CostBreakdown> priced;
  std::vector<TileConfig> configs = rank_configs(graph, node, spec, cost, options, &priced);
  std::vector<TileCandidate> out;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!std::isfinite(priced[i].latency_s)) continue;
    out.push_back({std::move(configs[i]), std::move(priced[i])});
  }
  return out;
}

std::vector<PolicyOption> RollerPolicy::options() {
  return {int_option("top_k", "candidate tilings priced by the cost model per node", options_.top_k, 1, 1 << 10),
          real_option("max_padding_waste", "largest fraction of a tile outside the domain", options_.max_padding_waste, 0.0, 0.99),
          bool_option("exhaustive", "price every combination of aligned extents (up to the enumeration's limit)", options_.exhaustive)};
}

Schedule RollerPolicy::schedule(const PolicyContext& ctx) const {
  const OpGraph& graph = ctx.graph;
  Schedule out;
  out.policy = std::string(name());
  out.cost_model = std::string(ctx.cost.name());
  out.hw_spec = ctx.spec.name;
  out.hw_spec_hash = hw_spec_hash(ctx.spec);

  std::unique_ptr<MeasureCache> owned_cache;
  MeasureCache* cache = options_.measure_cache;
  if (options_.measurer && !cache) {
    owned_cache = std::make_unique<MeasureCache>(default_measure_cache_dir());
    cache = owned_cache.get();
  }
  const std::string policy_text = options_text(options_);

  struct Ranked {
    std::vector<TileConfig> configs;
    std::vector<CostBreakdown> priced;
  };
  std::unordered_map<std::string, Ranked> by_signature;
  for (NodeId n : graph.topological_order()) {
    const std::string signature = node_signature(graph.node(n));
    auto it = by_signature.find(signature);
    if (it == by_signature.end()) {
      Ranked r;
      r.configs = rank_configs(graph, n, ctx.spec, ctx.cost, options_, &r.priced);
      it = by_signature.emplace(signature, std::move(r)).first;
    }
    const std::vector<TileConfig>& configs = it->second.configs;
    TESSEL_ASSERT(!configs.empty(), "no tile config for node '", graph.node(n).name(), "'");

    ScheduleGroup group;
    group.group.nodes = {n};
    group.group.tiles[n] = configs.front();
    if (options_.measurer) {
      // Keep the fastest measured candidate; unmeasurable ones keep the cost model's order.
      std::vector<GroupVariant> variants;
      for (size_t i = 0; i < configs.size(); ++i) {
        GroupVariant v;
        v.group.nodes = {n};
        v.group.tiles[n] = configs[i];
        v.predicted = it->second.priced[i];
        variants.push_back(std::move(v));
      }
      const int k = options_.tune > 0 ? options_.tune : static_cast<int>(variants.size());
      measure_top_k(ctx, *options_.measurer, *cache, policy_text, variants, k, group);
    }
    // Priced again per node: the breakdown's notes name the node.
    group.predicted = ctx.cost.estimate(graph, group.group, ctx.spec);
    out.predicted_latency_s += group.predicted.latency_s;
    out.groups.push_back(std::move(group));
  }

  // Every producer -> consumer edge crosses a group boundary.
  record_edges_between_groups(graph, out, UnfusedReason::policy, "roller never fuses");
  return out;
}

}  // namespace tessel
