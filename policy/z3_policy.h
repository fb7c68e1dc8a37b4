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
// Tile space (TileSpace below). "Optimal" means optimal over this set, nothing wider. Per axis a
// of extent E_a >= 1 with alignment A_a:
//   A_a = transaction bytes of the device level / element bytes on the innermost spatial axis
//         (output dtype) and on the innermost reduction axis (first input's dtype), times (lcm)
//         the SIMD width on a CPU's innermost spatial axis; on a tensor-core node, also times
//         the gcd of the instruction shapes' m, n, k on the last two spatial axes and the last
//         reduction axis; 1 elsewhere.
//   W_a = E_a (the whole axis) if E_a is a multiple of A_a, or on the two innermost axes above
//         when the node does not use tensor cores; else round_up(E_a, A_a).
//   t_a in V_a = { W_a }
//              u { A_a x 2^j : j >= 0, A_a x 2^j < W_a }                      (powers of two)
//              u { b_n = round_up(ceil(E_a / n), A_a) : 2 <= n <= max_balanced_tiles,
//                  b_n < W_a, waste(E_a, b_n) <= max_padding_waste }          (balanced tiles)
//         where waste(E, t) = (ceil(E / t) t - E) / (ceil(E / t) t), roller's padding waste.
//         (|V_a| is at most log2(E_a / A_a) + max_balanced_tiles; roller's per-axis extents are
//         powers of two times its own unit plus the whole axis, filtered by waste.)
//   tensor-core nodes (uses_tensor_cores): some instruction shape m x n x k of the spec has
//         m | t on the second-to-last spatial axis, n | t on the last, k | t on the last
//         reduction axis.
//   capacity: tile_footprint (`stages` input buffers) <= the GPU's shared memory per block, or
//         the CPU's per-core L2 capacity.
// Objective: Q(t) = tile_traffic(node, t).total_bytes, encoded exactly and linearly. Each axis
// has one Boolean per value in V_a (exactly one true). Q is a sum of per-tensor terms; the term
// of input i depends on t only through S_i, the axes its access map reads, and the tile counts
// n_a of the other counted axes (every spatial axis; every reduction axis when S_i holds one):
//   Q_i = (product of n_a over counted a outside S_i) x H_i(t on S_i),
// with H_i tabulated in C++ (tile_traffic of the tile that has the whole axis outside S_i) as a
// decision tree of if-then-else over S_i's Booleans, and each factor n_a an if-then-else of
// constants times the rest -- so every product has a constant factor and Q is linear in the
// if-then-else terms. The output term is the same with S = the spatial axes, and the footprint
// is a sum of such tables (tile_footprint's per-tensor bytes). Every inner node of a table is
// bounded by its least and greatest leaf, so partial assignments bound Q. Tables hold
// prod_{a in S_i} |V_a| entries (largest in the gap experiment: a convolution input, ~10^4);
// past max_table_entries the node falls back. Building the tables counts against the budget.
// Solved by iterative tightening: find any admissible tile, then ask for one with Q < the best
// so far, until Z3 answers unsat (the incumbent is a proven minimum over the tile space) or the
// per-node time budget runs out (the node falls back to roller's best, with a note). Every
// solution is checked by recomputing tile_traffic in C++ and comparing with Z3's value.
//
// The objective is traffic alone: the least-traffic tile is often one or a few large blocks
// (poor parallelism), which the cost model's latency -- roller's ranking -- would not pick.
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
#include "tilegraph/tile_kind.h"
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
  /// Tile space (see the file comment): the largest padding waste of a balanced tile extent,
  /// roller's bound, and the largest tile count n for which ceil(E / n) rounded up to the
  /// alignment is admitted.
  double max_padding_waste = 0.25;
  int64_t max_balanced_tiles = 8;
  /// Largest total number of table entries (per-tensor traffic and footprint tables) the
  /// encoding may build; a node past it falls back to roller's best with a note.
  int64_t max_table_entries = 400000;
  /// Options of roller's candidates, used when z3 falls back.
  RollerOptions fallback = {};
};

/// The admissible outer tiles of one node on one spec (see the file comment).
struct TileSpace {
  std::string level;                          // the outer LevelTile's level ("smem", "l2")
  std::vector<std::vector<int64_t>> values;   // per axis (spatial, then reduction): V_a, ascending
                                              // (back() = W_a)
  std::vector<MmaShape> mma_shapes;           // non-empty: tensor-core alignment applies
  int64_t capacity_bytes = 0;                 // footprint limit at `level`
  TrafficParams traffic;                      // device-level transaction size
  TrafficParams footprint;                    // pipeline stages for the footprint
  /// The tile kind the space tiles with (tile_kind.h): its traffic and footprint are what the
  /// encoding tabulates and what the tightening checks. z3 tiles densely.
  TileKindProps kind;
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
  double solve_ms = 0;            // wall time of steps 1-3, encoding included
  double encode_ms = 0;           // of which building the tile space and the encoding
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
  std::vector<PolicyOption> options() override;

 private:
  Z3Options options_;
};

}  // namespace tessel
