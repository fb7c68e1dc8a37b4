// The z3 policy: exact outer tile sizes for one operator under the hardware's divisibility,
// alignment and capacity constraints, found with the Z3 SMT solver (docs: policy/README.md).
//
// Like roller, every node is its own group. For each node the outermost tile (the block tile
// staged in shared memory on a GPU, the per-core L2 tile on a CPU) is chosen to minimise the
// traffic term of the cost model at that level -- tile_traffic (tilegraph/tile_traffic.h) of the
// outer LevelTile, with the device level's transaction size -- over the tile space below. The
// inner (register) tile and the thread mapping are picked afterwards by the cost model among
// power-of-two register tiles, the way roller ranks candidates.
//
// Tile space (TileSpace below), per axis a of extent E_a with alignment A_a:
//   t_a = k_a x A_a, 1 <= t_a <= round_up(E_a, A_a)   (or t_a = E_a where `covers_ok`)
//   A_a = transaction bytes of the device level / element bytes on the innermost spatial axis
//         (output dtype) and on the innermost reduction axis (first input's dtype), times the
//         SIMD width on a CPU's innermost spatial axis; 1 elsewhere. A tile covering the whole
//         axis (t_a = E_a) is always allowed on those axes.
//   tensor-core nodes (uses_tensor_cores): the last two spatial extents and the last reduction
//         step are multiples of one of the spec's instruction shapes m x n x k (a disjunction).
//   capacity: the tile's footprint (tile_footprint, `stages` input buffers) <= the GPU's
//         shared memory per block, or the CPU's per-core L2 capacity.
// Objective: Q(t) = tile_traffic(node, t).total_bytes, encoded exactly in integer arithmetic:
// tile counts and representative-tile positions are table lookups per axis (if-then-else over
// the axis's admissible values), each input region's bounding box is clamped affine arithmetic
// of them, contiguous runs and their rounding to transactions use auxiliary integers with
// ceil bounds, and the products tiles x steps x runs x rounded run are nonlinear terms.
// Solved by iterative tightening: find any admissible tile, then ask for one with Q < the best
// so far, until Z3 answers unsat (the incumbent is a proven minimum over the whole tile space)
// or the per-node time budget runs out (the node falls back to roller's best, with a note).
// Every solution is checked by recomputing tile_traffic in C++ and comparing with Z3's value.
//
// Fused groups: the same formulation applies to a group, with the sink's outer tile as the
// variables and every producer's footprint and traffic taken over its propagated region
// (tile_propagation.h). Only the per-node formulation is implemented.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy/roller.h"
#include "tilegraph/tile_traffic.h"

namespace tessel {

struct Z3Options {
  /// Solver time per node, all tightening rounds together, in milliseconds. When it runs out
  /// before optimality is proven the node gets roller's best candidate and a note says so.
  int timeout_ms = 20000;
  /// Input buffers per block on a GPU for a node with a reduction loop (multi-buffering); the
  /// footprint in the capacity constraint counts this many copies of each input tile. CPUs and
  /// nodes without reduction axes use 1.
  int gpu_pipeline_stages = 2;
  /// Largest register-tile extent per axis tried when picking the inner tile.
  int64_t max_register_tile = 16;
  /// Options of roller's candidates, used when z3 falls back.
  RollerOptions fallback = {};
};

/// The admissible outer tiles of one node on one spec (see the file comment).
struct TileSpace {
  std::string level;                          // the outer LevelTile's level ("smem", "l2")
  std::vector<std::vector<int64_t>> values;   // per axis (spatial, then reduction): admissible t_a
  std::vector<MmaShape> mma_shapes;           // non-empty: tensor-core alignment applies
  int64_t capacity_bytes = 0;                 // footprint limit at `level`
  TrafficParams traffic;                      // device-level transaction size
  TrafficParams footprint;                    // pipeline stages for the footprint
};

/// The tile space of `node` on `spec` with `options`.
TileSpace tile_space(const TeNode& node, const HwSpec& spec, const Z3Options& options);

/// True if `tile` (at space.level) lies in the space: per-axis values, tensor-core shape,
/// capacity. The brute-force reference in the tests enumerates the product of `values` with it.
bool space_admits(const TileSpace& space, const TeNode& node, const LevelTile& tile);

/// What z3 found for one node.
struct Z3NodeResult {
  bool solved = false;           // z3 found an admissible tile (else: fallback or nothing fits)
  bool proven_optimal = false;   // unsat after the last tightening: no tile in the space is better
  bool fallback = false;         // the config is roller's best (timeout or no admissible tile)
  TileConfig tiles;              // outer tile + register tile and threads
  int64_t traffic_bytes = 0;     // outer-level traffic of tiles.levels[0] (tile_traffic)
  int rounds = 0;                // solver calls
  double solve_ms = 0;
  std::vector<std::string> notes;
};

/// Solves `node` of `graph` (see the file comment). Deterministic.
Z3NodeResult solve_node_z3(const OpGraph& graph, NodeId node, const HwSpec& spec,
                           const CostModel& cost, const Z3Options& options = {});

class Z3Policy : public Policy {
 public:
  explicit Z3Policy(Z3Options options = {}) : options_(options) {}
  std::string_view name() const override { return "z3"; }
  std::string_view description() const override {
    return "one operator per kernel; outer tile of least traffic under alignment and capacity, by Z3";
  }
  Schedule schedule(const PolicyContext& ctx) const override;

 private:
  Z3Options options_;
};

}  // namespace tessel
