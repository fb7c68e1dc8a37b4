// The CPU backend's register-blocked micro-kernel for contractions, as rules: which nodes it
// takes, how it blocks them in registers and when it packs its B operand. The emitter
// (kernels/cpu/emit_contraction.cpp) builds the kernel from these, and the analytic model prices
// the packing with them, so the two cannot drift apart.
//
// The micro-kernel computes out[..., m, n] = sum over the reduction axes of A[...] * B[...]
// (* a constant), where A does not depend on the innermost spatial axis n and B does not depend on
// m. A block of MR rows (m) x NR vectors (n) accumulates in MR*NR vector registers; per reduction
// point NR vectors of B are loaded and each of the MR scalars of A is broadcast into them. MR and
// NR maximize MR*NR / (MR + NR), the multiply-adds per load, under MR*NR + NR + 1 <= the vector
// registers. Where several MR-row blocks of a task read one column block of B, B is first copied
// ("packed") into a contiguous per-task panel: every reduction point x NR vectors.
#pragma once

#include <cstdint>
#include <optional>

#include "hw_specs/hw_spec.h"
#include "tilegraph/node.h"
#include "tilegraph/tile_config.h"

namespace tessel {

struct CpuContraction {
  int a = -1, b = -1;  // inputs: A is broadcast along n, B is read along n
  int n_axis = -1;     // the innermost spatial axis
  int m_axis = -1;     // a spatial axis A reads along and B does not; -1 if none
  std::optional<double> scale;
};

/// The micro-kernel's view of `node`, or nothing when it does not take the node (not a float sum
/// of a product of two distinct non-gather inputs, optionally scaled by a constant, with exactly
/// one of them varying along the innermost spatial axis).
std::optional<CpuContraction> match_cpu_contraction(const TeNode& node);

struct CpuBlocking {
  int mr = 1, nr = 1;
};

/// MR x NR for `registers` vector registers of `lanes` lanes, no taller than `m_extent` rows and no
/// wider than `n_extent` elements (MR = 1 without an m axis).
CpuBlocking choose_cpu_blocking(int64_t registers, int64_t lanes, int64_t m_extent, int64_t n_extent, bool has_m);

/// SIMD registers per core: the `registers` level's capacity over one register's bytes
/// (compute.simd_width fp32 lanes); 0 when the spec has no such level or no SIMD width.
int64_t cpu_vector_registers(const HwSpec& spec);

/// The largest packed B panel in bytes: half the largest private per-core cache (0: none, so
/// nothing is packed).
int64_t cpu_pack_budget(const HwSpec& spec);

/// Whether the micro-kernel packs B for a box of `m_extent` rows: there is an m axis, at least two
/// MR-row blocks read each panel, and a panel (`reduction_points` x NR vectors of `lanes` values of
/// `value_bytes`) fits `pack_budget`.
bool cpu_packs_b(const CpuContraction& c, const CpuBlocking& blocking, int64_t m_extent, int64_t reduction_points,
                 int64_t lanes, int64_t value_bytes, int64_t pack_budget);

/// Bytes the micro-kernel moves reading B where it lives, over the whole node when every task is
/// one `task` tile (the outermost level's): for every point of a task's box outside the m axis that
/// a B vector covers, at every reduction point, one read and one write into the panel when it
/// packs, else one read per MR-row block. 0 when the node does not take the micro-kernel. The
/// analytic model adds these to the level the register tiles load from: a task of few rows reads
/// its B for few blocks.
double cpu_b_operand_bytes(const TeNode& node, const LevelTile& task, const HwSpec& spec);

}  // namespace tessel
